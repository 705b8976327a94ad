"""Figure for experiment ``pagan_absreg``: final excess loss vs ε, and PAGAN-optimal's advantage.

Seed 001 (Asi et al., *Private Adaptive Gradient Methods for Convex Optimization*, ICML 2021)
§6.1 / Fig. 1 summarised across its three privacy levels.  Left: the median final excess training
loss ``F(x_T) − F*`` of every private method at each ε (log–log; error bars: 95% confidence
interval of the median from order statistics), with non-private SGD and AdaGrad as horizontal
references.  Right: the advantage of PAGAN with the optimal scaling, the ratio of each other private
method's median final excess loss to PAGAN-optimal's (bootstrap 95% CI over trials); above 1 means
PAGAN-optimal is better.

Also the shared loading and statistics helpers of ``fig_pagan_absreg_curves``.  Reads only saved
results (``results`` maps the experiment's labels to ``.npz`` files) and the experiment's
``manifest.json`` beside them (for the recorded ε and δ).  Standalone::

    python -m dpsim.paper_figures.fig_pagan_absreg results/pagan_absreg/quick [OUT_DIR]
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Mapping

import numpy as np
from scipy import stats as _st

import dpsim

from . import style

NAME = "fig_pagan_absreg"
DEFAULT_DELTA = 1e-5
N_BOOT = 4000
BOOT_SEED = 20210101

CLAIM = ("PAGAN with the optimal diagonal scaling A (C_jj ∝ σ_j^{-4/3}) reaches a lower loss than "
         "the other private methods — PASAN and PAGAN with A = I (DP-SGD-style ℓ2 clipping and "
         "isotropic noise) and PDP-SGD — at every ε, increasingly so as ε grows "
         "(seed 001 §6.1, Fig. 1).")

#: method → (legend name, colour, line style, marker)
METHOD_STYLE = {
    "sgd": ("SGD (non-private)", "0.55", "--", None),
    "adagrad": ("AdaGrad (non-private)", style.BASELINE_COLOR, "--", None),
    "pasan": ("PASAN, A = I", "#1f77b4", "-", "o"),
    "pagan": ("PAGAN, A = I", "#ff7f0e", "-", "s"),
    "pagan_opt": ("PAGAN, optimal A", "#d62728", "-", "D"),
    "pdp_sgd": ("PDP-SGD (public data)", "#2ca02c", "-", "^"),
}
PRIVATE = ("pasan", "pagan", "pagan_opt", "pdp_sgd")
BASELINES = ("pasan", "pagan", "pdp_sgd")


# ------------------------------------------------------------------------------------------------
# Loading


class Run:
    """One evaluation cell: its label, method, target ε, the Result and the recorded privacy."""

    def __init__(self, label, method, target_eps, result, privacy):
        self.label, self.method, self.target_eps = label, method, target_eps
        self.result, self.privacy = result, privacy

    @property
    def excess(self):
        ex = self.result.excess_loss
        if ex is None:
            raise ValueError(f"result {self.label!r} has no excess loss (problem without F*)")
        return ex

    @property
    def final(self):
        """Final excess loss per trial (diverged trials → inf)."""
        f = np.asarray(self.excess[-1], dtype=float)
        return np.where(np.isfinite(f), f, np.inf)

    @property
    def hp(self):
        return self.result.config["hyperparameters"]


def _manifest(results: Mapping[str, object]) -> dict:
    for path in results.values():
        m = Path(path).parent / "manifest.json"
        if m.exists():
            try:
                return json.loads(m.read_text())
            except ValueError:
                return {}
    return {}


def load(results: Mapping[str, object]) -> dict:
    """``{"refs": {method: Run}, "private": {method: {ε: Run}}, "epsilons": [...], "delta": δ,
    "sampling": str, "f_star": float | None, "notes": dict}``."""
    notes = _manifest(results).get("notes", {})
    priv_notes = notes.get("privacy", {})
    delta = DEFAULT_DELTA
    for v in priv_notes.values():
        delta = float(v.get("delta", delta))
        break
    refs, private, eps_set, sampling = {}, {}, set(), None
    for label, path in results.items():
        method, _, eps_txt = label.partition("-eps")
        if method not in METHOD_STYLE:
            continue
        res = dpsim.load(path)
        sampling = res.config.get("sampling", sampling)
        if method in ("sgd", "adagrad"):
            refs[method] = Run(label, method, math.inf, res, None)
            continue
        eps = float(eps_txt)
        eps_set.add(eps)
        private.setdefault(method, {})[eps] = Run(label, method, eps, res, priv_notes.get(label))
    if not private and not refs:
        raise ValueError(f"no pagan_absreg results among {sorted(results)}")
    return {"refs": refs, "private": private, "epsilons": sorted(eps_set), "delta": delta,
            "sampling": sampling, "f_star": notes.get("f_star"), "notes": notes}


def epsilon_of(run: Run, delta: float) -> float:
    """ε spent by a private run: the value recorded in the manifest (PLD, Poisson sampling at the
    run's rate), else ``Result.epsilon``, else — for with-replacement runs, which no accountant
    covers — the Poisson-sampling ε of the same σ and rate."""
    if run.privacy and "epsilon" in run.privacy:
        return float(run.privacy["epsilon"])
    res = run.result
    try:
        return float(np.max(res.epsilon(delta)))
    except dpsim.accounting.UnsupportedAccountingError:
        p = res.privacy
        return float(dpsim.accounting.epsilon(float(np.max(res.config["hyperparameters"]["noise_multiplier"])),
                                              p["sample_rate"], res.config["steps"], delta))


def eps_note(data) -> str:
    """How ε was accounted, for legends and the report."""
    d = style.fmt_float(data["delta"])
    if data["sampling"] == "replacement":
        return (f"ε at δ = {d}: Poisson-sampling ε of the same σ and rate "
                "(batches drawn with replacement, as in the paper; no accountant covers that)")
    return f"ε at δ = {d} (PLD accountant, Poisson sampling)"


def hp_text(run: Run) -> str:
    hp = run.hp
    out = f"α={hp['lr']:g}"
    if run.method in ("pasan", "pagan", "pagan_opt"):
        out += f", B={hp['radius']:g}"
    elif run.method == "pdp_sgd":
        out += f", C={hp['clip']:g}, k={hp['k']}"
    return out


# ------------------------------------------------------------------------------------------------
# Statistics


def median_ci(x, axis: int = -1, level: float = 0.95):
    """Median and a distribution-free ``level`` confidence interval for it along ``axis``.

    Order statistics ``x_(k) ≤ median ≤ x_(R+1−k)`` with ``k`` the largest integer such that
    ``P(Bin(R, ½) < k) ≤ (1 − level)/2`` (coverage ≥ level); for very few trials (``k = 0``) the
    sample range, whose coverage ``1 − 2^{1−R}`` is then below ``level``.
    Returns ``(median, lo, hi)``.
    """
    x = np.sort(np.asarray(x, dtype=float), axis=axis)
    r = x.shape[axis]
    med = np.median(x, axis=axis)
    k = int(_st.binom.ppf((1 - level) / 2, r, 0.5))  # P(Bin ≤ k−1) ≤ α/2 for this k
    while k > 0 and _st.binom.cdf(k - 1, r, 0.5) > (1 - level) / 2:
        k -= 1
    lo_i, hi_i = max(k - 1, 0), min(r - k, r - 1)
    return med, np.take(x, lo_i, axis=axis), np.take(x, hi_i, axis=axis)


def _boot_medians(x, rng, n_boot=N_BOOT):
    x = np.asarray(x, dtype=float)
    idx = rng.integers(0, x.size, size=(n_boot, x.size))
    return np.median(x[idx], axis=1)


def boot_ratio(num, den, *, n_boot=N_BOOT, seed=BOOT_SEED, level=0.95):
    """``median(num)/median(den)`` with a percentile-bootstrap ``level`` CI (trials resampled
    independently in each group).  ``num``/``den`` may be lists of groups: then the ratio of the
    *minimum* median over the ``num`` groups (re-picked in every replicate).  Returns
    ``(ratio, lo, hi, replicates)``."""
    rng = np.random.default_rng(seed)
    nums = num if isinstance(num, list) else [num]
    point = min(float(np.median(g)) for g in nums) / float(np.median(den))
    bn = np.min([_boot_medians(g, rng, n_boot) for g in nums], axis=0)
    bd = _boot_medians(den, rng, n_boot)
    with np.errstate(divide="ignore", invalid="ignore"):
        reps = bn / bd
    lo, hi = np.nanquantile(reps, [(1 - level) / 2, (1 + level) / 2])
    return point, float(lo), float(hi), reps


def fmt_ratio(r, lo, hi) -> str:
    return f"{r:.2f}× [{lo:.2f}, {hi:.2f}]"


# ------------------------------------------------------------------------------------------------
# Figure


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    """Draw the summary figure from saved results; returns ``[png, pdf]`` paths in ``out_dir``."""
    data = load(results)
    with style.context():
        return _render(data, out_dir)


def _render(data, out_dir) -> list[Path]:
    fig, axes = style.figure(1, 2, width=3.9, height=3.3)
    ax, axr = axes[0]
    eps_list = data["epsilons"]
    delta = data["delta"]
    xs_all = []
    trials = set()
    for method in PRIVATE:
        runs = data["private"].get(method, {})
        if not runs:
            continue
        name, color, ls, marker = METHOD_STYLE[method]
        xs, med, lo, hi = [], [], [], []
        for eps in eps_list:
            if eps not in runs:
                continue
            run = runs[eps]
            trials.add(run.result.trials)
            m, l, h = median_ci(run.final)
            xs.append(epsilon_of(run, delta))
            med.append(m), lo.append(l), hi.append(h)
        xs, med, lo, hi = map(np.asarray, (xs, med, lo, hi))
        xs_all += list(xs)
        ax.errorbar(xs, med, yerr=[med - lo, hi - med], color=color, linestyle=ls, marker=marker,
                    markersize=4, capsize=2.5, label=name, zorder=3)
    xlim = (min(xs_all) / 1.6, max(xs_all) * 1.6) if xs_all else (0.05, 8)
    for method in ("sgd", "adagrad"):
        run = data["refs"].get(method)
        if run is None:
            continue
        name, color, ls, _ = METHOD_STYLE[method]
        m, l, h = median_ci(run.final)
        trials.add(run.result.trials)
        ax.axhline(m, color=color, linestyle=ls, linewidth=1.2, label=f"{name}, {hp_text(run)}")
        ax.axhspan(l, h, color=color, alpha=0.12, linewidth=0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*xlim)
    ax.set_xticks(eps_list, [style.fmt_float(e) for e in eps_list])
    ax.set_xlabel(f"privacy ε (δ = {style.fmt_float(delta)})")
    ax.set_ylabel(r"median final excess loss $F(x_T) - F^\star$")
    ax.set_title("Final excess training loss (95% CI of median)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)

    # Right: ratio baseline / PAGAN-optimal
    opt = data["private"].get("pagan_opt", {})
    for method in BASELINES:
        runs = data["private"].get(method, {})
        pts = [(epsilon_of(opt[e], delta), *boot_ratio(runs[e].final, opt[e].final)[:3])
               for e in eps_list if e in runs and e in opt]
        if not pts:
            continue
        name, color, ls, marker = METHOD_STYLE[method]
        x, r, lo, hi = map(np.asarray, zip(*pts))
        axr.errorbar(x, r, yerr=[r - lo, hi - r], color=color, marker=marker, markersize=4,
                     capsize=2.5, linestyle=ls, label=f"{name} / PAGAN-optimal")
    axr.axhline(1.0, color="0.3", linewidth=0.8, linestyle=":")
    axr.set_xscale("log")
    axr.set_yscale("log")
    axr.set_xlim(*xlim)
    axr.set_xticks(eps_list, [style.fmt_float(e) for e in eps_list])
    axr.set_xlabel(f"privacy ε of PAGAN-optimal (δ = {style.fmt_float(delta)})")
    axr.set_ylabel("ratio of median final excess losses")
    axr.set_title("Advantage of PAGAN-optimal (>1: it is better)")
    axr.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1,
               title="bootstrap 95% CI over trials", title_fontsize=7.5)
    r_txt = "/".join(str(r) for r in sorted(trials))
    fig.suptitle(f"Absolute regression (seed 001 §6.1): median over {r_txt} trials at tuned (α, B); "
                 + eps_note(data), fontsize=8.5)
    return style.save(fig, out_dir, NAME)


# ------------------------------------------------------------------------------------------------
# Claim


def evaluate(results: Mapping[str, object]) -> dict:
    """Ratios (other private method) / (PAGAN-optimal) of median final excess losses per ε.

    Holds when (a) at every ε the ratio against the *best* other private method (the lowest median,
    re-picked in each bootstrap replicate) has its bootstrap 95% CI above 1, and (b) that ratio
    grows from the smallest to the largest ε (bootstrap 95% CI of r(ε_max)/r(ε_min) above 1).
    Does not hold when at some ε the CI lies below 1 or the growth CI lies below 1; otherwise
    inconclusive (including fewer than two ε).
    """
    data = load(results)
    delta = data["delta"]
    opt = data["private"].get("pagan_opt", {})
    eps_list = [e for e in data["epsilons"] if e in opt]
    lines = [
        f"Median final excess training loss F(x_T) − F* with a 95% CI of the median (order "
        f"statistics), at the (α, B) tuned per method and ε; {eps_note(data)}. *Ratio*: the "
        f"method's median over PAGAN-optimal's, bootstrap 95% CI ({N_BOOT} resamples of the trials); "
        "> 1 means PAGAN-optimal is better.",
        "",
        "| ε (target) | method | ε spent | tuned | trials | median final excess loss [95% CI] | ratio to PAGAN-optimal |",
        "|---|---|---|---|---|---|---|",
    ]
    for method in ("sgd", "adagrad"):
        run = data["refs"].get(method)
        if run is not None:
            m, l, h = median_ci(run.final)
            lines.append(f"| — | {METHOD_STYLE[method][0]} | ∞ | {hp_text(run)} | {run.result.trials} "
                         f"| {m:.2e} [{l:.2e}, {h:.2e}] | — |")
    best_ratio = {}
    for eps in eps_list:
        for method in PRIVATE:
            run = data["private"].get(method, {}).get(eps)
            if run is None:
                continue
            m, l, h = median_ci(run.final)
            ratio = "1 (reference)" if method == "pagan_opt" else fmt_ratio(
                *boot_ratio(run.final, opt[eps].final)[:3])
            lines.append(f"| {eps:g} | {METHOD_STYLE[method][0]} | {epsilon_of(run, delta):.3g} | "
                         f"{hp_text(run)} | {run.result.trials} | {m:.2e} [{l:.2e}, {h:.2e}] | {ratio} |")
        groups = [data["private"][m][eps].final for m in BASELINES
                  if eps in data["private"].get(m, {})]
        if groups:
            best_ratio[eps] = boot_ratio(groups, opt[eps].final)
    if not best_ratio:
        return {"claim": CLAIM, "measured": "\n".join(lines), "holds": None,
                "verdict": "no private baseline to compare with."}

    lines += ["", "Best other private method (lowest median, re-picked per bootstrap replicate) "
                  "over PAGAN-optimal, per ε: "
              + "; ".join(f"ε = {e:g}: {fmt_ratio(*best_ratio[e][:3])}" for e in best_ratio) + "."]
    below = [e for e, (r, lo, hi, _) in best_ratio.items() if hi < 1]
    above = [e for e, (r, lo, hi, _) in best_ratio.items() if lo > 1]
    notes = []
    growth = None
    es = sorted(best_ratio)
    if len(es) >= 2:
        e0, e1 = es[0], es[-1]
        g_reps = best_ratio[e1][3] / best_ratio[e0][3]
        g = best_ratio[e1][0] / best_ratio[e0][0]
        g_lo, g_hi = np.nanquantile(g_reps, [0.025, 0.975])
        growth = (g, float(g_lo), float(g_hi))
        lines.append(f"Growth of the advantage from ε = {e0:g} to ε = {e1:g}: "
                     f"r({e1:g})/r({e0:g}) = {fmt_ratio(*growth)}.")
        mono = all(best_ratio[a][0] < best_ratio[b][0] for a, b in zip(es, es[1:]))
        notes.append(f"advantage over the best other private method "
                     + ", ".join(f"{best_ratio[e][0]:.2g}× at ε = {e:g}" for e in es)
                     + (" (monotone in ε)" if mono else " (not monotone in ε)")
                     + f"; growth ε = {e0:g} → {e1:g}: {fmt_ratio(*growth)}")
    else:
        notes.append("only one ε: the 'increasingly so' part cannot be checked")
    if below or (growth is not None and growth[2] < 1):
        holds = False
        if below:
            notes.append("PAGAN-optimal significantly worse than the best other private method at "
                         "ε = " + ", ".join(f"{e:g}" for e in below))
        if growth is not None and growth[2] < 1:
            notes.append("the advantage significantly shrinks as ε grows")
    elif len(above) == len(best_ratio) and growth is not None and growth[1] > 1:
        holds = True
        notes.append("PAGAN-optimal significantly better at every ε and the advantage grows "
                     "significantly")
    else:
        holds = None
        if len(above) < len(best_ratio):
            notes.append("not significantly better at ε = "
                         + ", ".join(f"{e:g}" for e in best_ratio if e not in above))
        if growth is not None and not growth[1] > 1:
            notes.append("growth of the advantage not significant")
    return {"claim": CLAIM, "measured": "\n".join(lines), "holds": holds,
            "verdict": "; ".join(notes) + "."}


def main(argv=None) -> int:
    """``python -m dpsim.paper_figures.<this> RESULTS_DIR [OUT_DIR]``: render from saved results."""
    from .style import cli_main

    return cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
