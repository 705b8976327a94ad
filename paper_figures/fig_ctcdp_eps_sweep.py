"""Figure for experiment ``ctcdp_quadratic`` ([L2P] Fig. 6 analogue): final loss vs ε, and convergence.

Top: the final excess training loss ``F(θ_final) − F*`` (dpsim's objective, 1/m of the paper's) of
each method against ε at δ = 1e-8 (log–log), mean over the repeats with 95% Student-t confidence
intervals; the dashed line is the excess loss of the common starting point θ0 (not training at all).
Below: one panel per ε with the mean excess loss against the step (95% CI band), as in the paper's
Fig. 6 (convergence for ε = 0.05 … 1.6).  ctCDP runs are simulated past their planned T and stop
by themselves when the budget is spent (flat tails); SGD-Adv runs end at their T.

Reads only saved results (``results`` maps labels ``"eps<ε>-<method>"`` to ``.npz`` files).
Standalone::

    python -m dpsim.paper_figures.fig_ctcdp_eps_sweep results/ctcdp_quadratic/quick [OUT_DIR]
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Mapping

import numpy as np

from dpsim.analysis import stats

from . import style
from .ctcdp_common import COLORS, DELTA, DISPLAY, SHORT, info, load, setting_text

NAME = "fig_ctcdp_eps_sweep"
CLAIM = ("Over ε ∈ {0.05, …, 1.6} at δ = 1e-8, budget-constrained private training reaches a lower "
         "final loss than SGD-Adv, and at small ε an adaptive noise schedule converges to a better "
         "point than the uniform one (paper: L2P vs L2P-Proj; here tuned parametric vs uniform "
         "ctCDP schedules).")
SMALL_EPS = 0.2  # "when ε gets smaller": ε ≤ this


def _final(res):
    return np.asarray(res.excess_loss[-1], dtype=float)


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    data = load(results)
    if not data:
        raise ValueError(f"{NAME}: no eps<ε>-<method> results among {sorted(results)}")
    with style.context():
        return _render(data, out_dir)


def _render(data, out_dir) -> list[Path]:
    eps_list = list(data)
    methods = [m for m in DISPLAY if any(m in data[e] for e in eps_list)]
    ncols = min(3, len(eps_list))
    nrows_c = math.ceil(len(eps_list) / ncols)
    fig, axes = style.figure(1 + nrows_c, ncols, width=3.1, height=3.3)
    gs = axes[0][0].get_gridspec()
    for ax in axes[0]:
        ax.remove()
    top = fig.add_subplot(gs[0, :])
    trials = set()
    any_res = next(iter(data[eps_list[0]].values()))
    init_excess = float(any_res.excess_loss[0, 0])
    for method in methods:
        xs, ms, hs = [], [], []
        for eps in eps_list:
            if method in data[eps]:
                res = data[eps][method]
                trials.add(res.trials)
                m, h = stats.mean_ci(_final(res))
                xs.append(eps)
                ms.append(m)
                hs.append(h)
        ms, hs = np.asarray(ms), np.asarray(hs)
        lo = np.maximum(ms - hs, ms * 1e-2)
        top.errorbar(xs, ms, yerr=[ms - lo, hs], color=COLORS[method], marker="o", ms=3.5, capsize=2.5,
                     lw=1.3, ls="--" if method == "sgd_adv_ac" else "-", label=DISPLAY[method])
    top.axhline(init_excess, color="0.4", ls=":", lw=1.0, label=r"start $\theta_0$ (no training)")
    top.set_xscale("log")
    top.set_yscale("log")
    top.set_xticks(eps_list)
    top.set_xticklabels([f"{e:g}" for e in eps_list])
    top.minorticks_off()
    top.set_xlabel(f"privacy budget ε (δ = {style.fmt_float(DELTA)})")
    top.set_ylabel(r"final excess loss $F(\theta_T) - F^\star$")
    top.set_title("Final training loss vs ε (each method at its tuned T, η[, p]); mean ± 95% CI")
    # under the panel, not beside it: a legend right of a panel spanning every column made the
    # layout reserve its width for the whole figure (about 40% blank on the right)
    top.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, fontsize=7.5)

    for i, eps in enumerate(eps_list):
        ax = axes[1 + i // ncols][i % ncols]
        row = data[eps]
        for method in methods:
            if method not in row:
                continue
            res = row[method]
            ex = res.excess_loss
            mean, half = stats.mean_ci(ex, axis=1)
            floor = np.maximum(mean * 1e-2, np.finfo(float).tiny)
            style.band(ax, res.steps, np.maximum(mean - half, floor), mean + half, COLORS[method], alpha=0.15)
            inf = info(method, res, spent=False)
            ax.plot(res.steps, mean, color=COLORS[method], lw=1.2, ls="--" if method == "sgd_adv_ac" else "-",
                    label=f"{SHORT[method]}: {setting_text(method, inf)}")
        ax.axhline(init_excess, color="0.4", ls=":", lw=0.9)
        ax.set_yscale("log")
        ax.set_title(f"(ε, δ) = ({eps:g}, {style.fmt_float(DELTA)})-DP", fontsize=8.5)
        ax.set_xlabel("step t")
        if i % ncols == 0:
            ax.set_ylabel(r"mean $F(\theta_t) - F^\star$")
        ax.legend(fontsize=6.2, loc="upper center", bbox_to_anchor=(0.5, -0.25), handlelength=1.6,
                  labelspacing=0.15, title="tuned setting", title_fontsize=6.5)
    for j in range(len(eps_list), nrows_c * ncols):
        axes[1 + j // ncols][j % ncols].set_visible(False)
    r_txt = "/".join(str(t) for t in sorted(trials))
    fig.suptitle(f"Random quadratic (m=60, d=2): ctCDP training vs SGD-Adv — {r_txt} repeats per "
                 "method, band/bars: 95% CI of the mean; dotted: loss at the start", fontsize=9)
    return style.save(fig, out_dir, NAME)


def evaluate(results: Mapping[str, object]) -> dict:
    """Final excess loss per (ε, method) and the two comparisons of the claim.

    (1) ctCDP-uniform vs SGD-Adv (zCDP calibration, the primary baseline) at every ε: Welch 95% CI
    of the difference of mean final excess losses.  (2) each tuned parametric schedule vs uniform at
    ε ≤ 0.2.  Holds when (1) is significantly negative at every ε and (2) is significantly negative
    for some parametric schedule at every small ε; does not hold when (1) is significantly positive
    at a majority of ε or (2) is significantly positive everywhere; else inconclusive.  The
    advanced-composition reading of SGD-Adv is reported beside it.
    """
    data = load(results)
    lines = [
        f"Final excess training loss F(θ_T) − F* (dpsim's objective = paper's / m), mean ± 95% CI "
        f"(Student t) over the repeats; *↓θ0*: fraction of repeats ending below the starting loss; "
        f"*vs SGD-Adv*: ratio of means to SGD-Adv (zCDP calibration). Settings chosen on separate "
        f"tuning trials by best mean final training loss over the paper's T and step-size grids.",
        "",
        "| ε | method | setting | final excess loss | ↓θ0 | vs SGD-Adv |",
        "|---|---|---|---|---|---|",
    ]
    cmp_base, cmp_ac, cmp_sched = [], [], []
    for eps, row in data.items():
        base = _final(row["sgd_adv"]) if "sgd_adv" in row else None
        for method, res in row.items():
            f = _final(res)
            m, h = stats.mean_ci(f)
            below = float(np.mean(f < res.excess_loss[0]))
            ratio = f"{m / np.mean(base):.2g}×" if base is not None else "—"
            setting = setting_text(method, info(method, res, spent=False))
            lines.append(f"| {eps:g} | {DISPLAY[method]} | {setting} | {stats.fmt_ci(m, h)} | {below:.0%} "
                         f"| {ratio} |")
        if "uniform" in row:
            u = _final(row["uniform"])
            if base is not None:
                cmp_base.append((eps,) + stats.diff_ci(u, base))
            if "sgd_adv_ac" in row:
                cmp_ac.append((eps,) + stats.diff_ci(u, _final(row["sgd_adv_ac"])))
            if eps <= SMALL_EPS:
                for method in ("linear", "exponential"):
                    if method in row:
                        cmp_sched.append((eps, method) + stats.diff_ci(_final(row[method]), u))

    def sig(lo, hi):
        return "lower" if hi < 0 else "higher" if lo > 0 else "n.s."

    lines += ["", "Differences of mean final excess loss, Welch 95% CI:", ""]
    def line(eps, what, d, lo, hi):
        return f"- ε={eps:g}: {what} = {d:+.3g} [{lo:+.3g}, {hi:+.3g}] ({sig(lo, hi)})"

    lines += [line(eps, "uniform − SGD-Adv(zCDP)", *c) for eps, *c in cmp_base]
    lines += [line(eps, "uniform − SGD-Adv(adv. comp.)", *c) for eps, *c in cmp_ac]
    lines += [line(eps, f"{method} − uniform", *c) for eps, method, *c in cmp_sched]

    n_lower = sum(hi < 0 for _, _, lo, hi in cmp_base)
    n_higher = sum(lo > 0 for _, _, lo, hi in cmp_base)
    ac_lower = sum(hi < 0 for _, _, lo, hi in cmp_ac)
    small = sorted({e for e, *_ in cmp_sched})
    sched_better = {e: any(hi < 0 for ee, _, _, lo, hi in cmp_sched if ee == e) for e in small}
    sched_worse_all = bool(cmp_sched) and all(lo > 0 for *_, lo, hi in cmp_sched)
    sched_n_sig_worse = sum(lo > 0 for *_, lo, hi in cmp_sched)
    if not cmp_base:
        holds = None
    elif n_higher > len(cmp_base) / 2 or sched_worse_all:
        holds = False
    elif n_lower == len(cmp_base) and small and all(sched_better.values()):
        holds = True
    else:
        holds = None
    parts = [f"(1) uniform ctCDP vs SGD-Adv (zCDP, like-for-like budget): significantly lower at "
             f"{n_lower}/{len(cmp_base)} ε, significantly higher at {n_higher}/{len(cmp_base)}"]
    if cmp_ac:
        txt = (f"against the advanced-composition reading of SGD-Adv (≈{_ac_over_zcdp(data):.2g}× the zCDP "
               f"noise multiplier at the same (ε, δ, T)) it is significantly lower at {ac_lower}/{len(cmp_ac)} ε")
        if ac_lower and n_higher:
            txt += " — the paper's ordering appears only under that reading"
        parts.append(txt)
    if small:
        better = [e for e, v in sched_better.items() if v]
        parts.append(f"(2) a tuned parametric schedule beats uniform significantly at "
                     f"{len(better)}/{len(small)} small ε (≤ {SMALL_EPS:g})"
                     + (f" ({', '.join(f'{e:g}' for e in better)})" if better else "")
                     + f"; {sched_n_sig_worse}/{len(cmp_sched)} parametric-vs-uniform comparisons are "
                     "significantly worse"
                     + (" (p, T and η are chosen on separate, noisy tuning trials)" if sched_n_sig_worse else ""))
    if n_higher:
        parts.append("why (1) fails against the like-for-like baseline: with fixed-size subsampling the "
                     "bound 13q²ρ (Lemma A.6) makes a ctCDP step √13 ≈ 3.6× noisier, relative to the "
                     "averaged gradient, than a full-batch step at the same T, so on n = 60 examples "
                     "subsampling does not pay")
    parts.append("the paper's L2P/L2P-Proj also have a learned LSTM projector/scheduler, out of scope here")
    return {"claim": CLAIM, "measured": "\n".join(lines), "holds": holds, "verdict": "; ".join(parts) + "."}


def _ac_over_zcdp(data) -> float:
    """Median over ε of the advanced-composition noise multiplier over the zCDP one at the same T.

    The zCDP multiplier scales exactly as √T, so ``σ_zCDP(T_ac) = σ_zCDP(T_z) √(T_ac/T_z)``.
    """
    ratios = []
    for eps, row in data.items():
        if "sgd_adv_ac" in row and "sgd_adv" in row:
            ac, z = row["sgd_adv_ac"], row["sgd_adv"]
            t_ac, t_z = int(ac.steps[-1]), int(z.steps[-1])
            nm_ac = float(ac.config["hyperparameters"]["noise_multiplier"])
            nm_z = float(z.config["hyperparameters"]["noise_multiplier"]) * math.sqrt(t_ac / t_z)
            ratios.append(nm_ac / nm_z)
    return float(np.median(ratios)) if ratios else float("nan")


def main(argv=None) -> int:
    """``python -m dpsim.paper_figures.<this> RESULTS_DIR [OUT_DIR]``: render from saved results."""
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
