"""Figure for experiment ``dp2_compute`` ([DP2] Fig. 9 right): 4× the computation at the same ε.

Li et al., *Differentially Private Adaptive Optimization with Delayed Preconditioners* (ICLR 2023),
App. C.4, Fig. 9 (right): a 4× larger batch at the same number of iterations, with the noise
multiplier raised to keep ε about the same, improves the privacy/utility trade-off of every
method, and DP²'s absolute improvement over DP-SGD and DP-RMSProp stays about the same.

Panel (a): final held-out accuracy (the paper's metric; mean, 95% CI) against the ε each run
spent, one colour per method, solid at 1× and dashed at 4×; the legend gives every method's tuned
values per ε.  Panel (b): the final excess training loss, with the class-prior excess (dotted).
Panel (c): DP²'s gain in held-out accuracy over the better baseline (Welch 95% CI) against ε at
each factor.  Premises P1–P4 (:mod:`paper_figures.dp2_common`) gate the verdict.  Reads only saved
results.  Standalone::

    python -m dpsim.paper_figures.fig_dp2_compute results/dp2_compute/quick/<key> [OUT_DIR]
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Mapping

import numpy as np
from scipy import stats as _st

from dpsim.analysis import stats
from dpsim.experiments import verdicts
from dpsim.experiments.pipeline import Saved

from . import style
from .dp2_common import (METHOD_STYLE, acc_text, accs, ci_text, delta_of, dp_sgd_below_prior,
                         eps_of, finals, plain_log_ticks, premise_checks, premise_lines,
                         premise_ok, prior_excess, prior_line, problem_text)

NAME = "fig_dp2_compute"
#: Part (B) holds when the 95% CI of DP²'s gain ratio (4× over 1×) lies inside [1/FACTOR, FACTOR]
#: ("remains similar": neither halved nor doubled), does not hold when it lies outside.
FACTOR = 2.0
CLAIM = ("With 4× the computation (4× larger batches at the same number of steps, the noise "
         "multiplier recalibrated to the same ε) every method's privacy/utility trade-off improves, "
         "and DP²'s absolute improvement over the better of DP-SGD and DP-RMSProp stays similar "
         f"(within a factor {FACTOR:g}) ([DP2] App. C.4, Fig. 9 right).")
METHODS = ("dp_sgd", "dp_rmsprop", "dp2_rmsprop")
BASELINES = ("dp_sgd", "dp_rmsprop")
_HP = (("lr", "η"), ("lr2", "η₂"), ("s1", "s"))


def load(results) -> tuple[Saved, dict]:
    """``(saved, {(method, factor, target ε): Result})`` from the saved cells' metadata
    (:func:`experiments.dp2_compute.cell_meta`); the non-private premise runs are left out (see
    :func:`nonprivate`); ``ValueError`` naming what is missing."""
    saved = Saved.of(results)
    runs = {}
    for label in saved:
        m = saved.meta(label)
        if m.get("private") is False:
            continue
        runs[(m["method"], int(m["factor"]), float(m["epsilon"]))] = saved.result(label)
    factors = sorted({k for _, k, _ in runs})
    eps = sorted({e for _, _, e in runs})
    missing = [(m, k, e) for m in METHODS for k in factors for e in eps if (m, k, e) not in runs]
    if missing or 1 not in factors or len(factors) < 2:
        raise ValueError(f"{NAME}: need every method at factor 1 and another factor at every ε; "
                         f"missing {missing}, factors {factors}")
    return saved, runs


def nonprivate(results) -> dict:
    """``{method: Result}`` of the non-private premise runs (``np-sgd``, ``np-rmsprop``)."""
    saved = Saved.of(results)
    return {saved.meta(lab)["method"]: saved.result(lab) for lab in saved
            if saved.meta(lab).get("private") is False}


def values(res):
    """The verdict's metric as "lower is better": minus the final held-out accuracy (the paper's
    metric) when recorded, else the final excess training loss."""
    a = accs(res)
    return -a if a is not None else finals(res)


def _axes(runs):
    return sorted({k for _, k, _ in runs}), sorted({e for _, _, e in runs})


def _hp_values(runs, method, k, eps) -> str:
    """The tuned values of ``method`` at factor ``k`` over the ε's, ``η=10/10/30`` (ε ascending)."""
    out = []
    for key, sym in _HP:
        vals = [runs[(method, k, e)].config["hyperparameters"].get(key) for e in eps]
        if all(v is not None for v in vals):
            out.append(f"{sym}=" + "/".join(style.fmt_float(float(v)) for v in vals))
    return ", ".join(out)


def _fixed_text(res) -> str:
    hp = res.config["hyperparameters"]
    return ", ".join(f"{sym}={style.fmt_float(float(hp[key]))}"
                     for key, sym in (("clip", "C"), ("clip2", "C₂"), ("eps", "ε_a"), ("beta", "β"))
                     if hp.get(key) is not None)


def _hp_text(res) -> str:
    hp = res.config["hyperparameters"]
    return ", ".join(f"{sym}={style.fmt_float(float(hp[key]))}" for key, sym in _HP if key in hp)


def _sigma(res) -> float:
    return float(res.config["hyperparameters"]["noise_multiplier"])


def gain(runs, k, e):
    """DP²'s gain at factor ``k`` and target ε on :func:`values` (held-out accuracy points): the
    better baseline minus DP² in "lower is better" units, i.e. DP²'s accuracy minus the better
    baseline's, ``(baseline method, gain, its variance, Welch degrees of freedom, (difference,
    lo, hi))``."""
    base = min(BASELINES, key=lambda m: float(np.mean(values(runs[(m, k, e)]))))
    a, b = values(runs[(base, k, e)]), values(runs[("dp2_rmsprop", k, e)])
    va, vb = np.var(a, ddof=1) / a.size, np.var(b, ddof=1) / b.size
    dof = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1)) if va + vb > 0 else math.inf
    return base, float(np.mean(a) - np.mean(b)), float(va + vb), float(dof), stats.diff_ci(a, b)


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    saved, runs = load(results)
    factors, eps_t = _axes(runs)
    dashes = {k: "-" if k == 1 else ("--" if i == 1 else ":") for i, k in enumerate(factors)}
    b0 = int(runs[(METHODS[0], 1, eps_t[0])].config["batch_size"])
    with_acc = all(accs(r) is not None for r in runs.values())
    prior = prior_excess(results)
    panels = [("acc", accs)] if with_acc else []
    panels.append(("loss", finals))
    with style.context():
        fig, axes = style.figure(1, len(panels) + 1, width=3.4, height=4.4)
        for p_i, (kind, get_) in enumerate(panels):
            ax = axes[0][p_i]
            lows, highs = [], []
            for j, m in enumerate(METHODS):
                name, color, _, marker = METHOD_STYLE[m]
                for i, k in enumerate(factors):
                    xs = np.array([eps_of(runs[(m, k, e)]) for e in eps_t])
                    mh = [stats.mean_ci(get_(runs[(m, k, e)])) for e in eps_t]
                    mean = np.array([x[0] for x in mh])
                    half = np.array([x[1] for x in mh])
                    x = xs * (1.0 + 0.025 * (j - 1) + 0.01 * i)  # keep overlapping bars apart
                    ax.errorbar(x, mean, yerr=half, color=color, marker=marker, ls=dashes[k],
                                capsize=2, ms=4,
                                label=f"{name} ({k}×, b={k * b0}): {_hp_values(runs, m, k, eps_t)}")
                    lows += list(mean - half)
                    highs += list(mean + half)
            ax.set_xscale("log")
            _eps_ticks(ax, runs, eps_t)
            ax.set_xlabel(f"ε (δ = {style.fmt_float(delta_of(runs[(METHODS[0], 1, eps_t[0])]))})")
            if kind == "loss":
                prior_line(ax, prior, label=False)
                if prior is not None:
                    highs.append(prior)
                ax.set_yscale("log")
                pos = [v for v in lows if np.isfinite(v) and v > 0]
                top = [v for v in highs if np.isfinite(v)]
                if pos and top:
                    ax.set_ylim(min(pos) / 1.15, max(top) * 1.15)
                plain_log_ticks(ax.yaxis)
                ax.set_ylabel(r"final excess training loss $F(w_T) - F^\star$")
                ax.set_title(f"({'ab'[p_i]}) training loss; dotted: class prior", fontsize=8)
            else:
                from matplotlib.ticker import FuncFormatter

                ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{100 * v:.0f}%"))
                ax.set_ylabel("final held-out accuracy")
                ax.set_title("(a) the paper's metric; solid 1×, dashed 4×", fontsize=8)
        ax2 = axes[0][len(panels)]
        for i, k in enumerate(factors):
            g = [gain(runs, k, e) for e in eps_t]
            xs = np.array([eps_of(runs[("dp2_rmsprop", k, e)]) for e in eps_t]) * (1 + 0.04 * i)
            scale = 100.0 if with_acc else 1.0
            mean = scale * np.array([x[1] for x in g])
            lo = scale * np.array([x[4][1] for x in g])
            hi = scale * np.array([x[4][2] for x in g])
            ax2.errorbar(xs, mean, yerr=[mean - lo, hi - mean], color=METHOD_STYLE["dp2_rmsprop"][1],
                         ls=dashes[k], marker="D", capsize=2, ms=4, label=f"{k}× (b={k * b0})")
        ax2.axhline(0.0, color=style.BASELINE_COLOR, lw=0.8)
        ax2.set_xscale("log")
        _eps_ticks(ax2, runs, eps_t)
        ax2.set_xlabel("ε")
        ax2.set_ylabel("DP² − better baseline" + (" (accuracy points)" if with_acc else " (loss)"))
        ax2.set_title(f"({'abc'[len(panels)]}) DP²'s gain, 95% CI", fontsize=8)
        ax2.legend(loc="best", fontsize=6.5)
        handles, labels = axes[0][0].get_legend_handles_labels()
        # one column per factor (entries were added method by method, factor by factor)
        order = [j * len(factors) + i for i in range(len(factors)) for j in range(len(METHODS))]
        fig.legend([handles[o] for o in order], [labels[o] for o in order],
                   loc="outside lower center", ncol=len(factors), fontsize=6,
                   title="tuned values per ε (ascending); fixed: "
                         + _fixed_text(runs[("dp2_rmsprop", 1, eps_t[0])]),
                   title_fontsize=6.5)
        sig = ", ".join(f"{k}×: " + "/".join(f"{_sigma(runs[(METHODS[0], k, e)]):.3g}"
                                            for e in eps_t) for k in factors)
        trials = "/".join(str(t) for t in sorted({r.trials for r in runs.values()}))
        ref = runs[(METHODS[0], 1, eps_t[0])]
        fig.suptitle(f"DP² with more computation ([DP2] Fig. 9 right) — {problem_text(ref)};"
                     f"\nσ calibrated per ε ({sig}); {trials} trials", fontsize=8)
        return style.save(fig, out_dir, NAME)


def _eps_ticks(ax, runs, eps_t):
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    ticks = [eps_of(runs[(METHODS[0], 1, e)]) for e in eps_t]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.set_xticklabels([f"{t:.2g}" for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(min(ticks) / 1.3, max(ticks) * 1.3)


def _cat_text(cat) -> str:
    return {verdicts.HOLDS: "yes", verdicts.FAILS: "no (significantly reversed)",
            verdicts.INCONCLUSIVE: "not significant", verdicts.UNTESTED: "not tested"}[cat]


def evaluate(results: Mapping[str, object]) -> dict:
    """Two parts, each per target ε, on the paper's metric (:func:`values`: the held-out accuracy;
    the training excess loss is tabulated beside it):

    (A) every method improves at 4×: Welch 95% CI of the accuracy difference (k× − 1×) above 0
    for each method and each other factor ``k`` (holds when all are, does not hold when any is
    below 0, else inconclusive);

    (B) DP²'s gain ``g_k`` (its accuracy minus the better baseline's) at ``k`` is within a factor
    :data:`FACTOR` of its gain at 1×: Fieller's 95% CI of ``g_k / g_1`` (t quantile at the smaller
    Welch degrees of freedom of the two gains) inside ``[1/FACTOR, FACTOR]`` holds, entirely
    outside does not hold, else inconclusive.  Premise of (B) at an ε: DP² beats the better
    baseline at 1× (Welch CI of ``g_1`` above 0); without it there is no improvement to keep, and
    that ε does not test (B).

    Premises P1–P4 (:mod:`paper_figures.dp2_common`; P4 per ε, on DP-SGD at 1×: an ε where it
    fails tests neither part): any of P1–P3 not met, or no ε tested → "setting does not test the
    claim".  The claim: does not hold when either part does not; "setting does not test the
    claim" when (B) is tested at no ε; holds when both hold; else inconclusive.  Grid edges:
    a "does not hold" from (A) alone is downgraded only by edges of the 4× runs (the claimed
    winners); every other verdict by any edge (equivalence (B) can flip from either side)."""
    saved, runs = load(results)
    factors, eps_t = _axes(runs)
    others = [k for k in factors if k != 1]
    delta = delta_of(runs[(METHODS[0], 1, eps_t[0])])
    prior = prior_excess(results)
    lines = ["Final held-out accuracy (the paper's metric) / final excess training loss F(w_T) − F* "
             "(mean ± 95% CI over fresh evaluation trials); each method tuned at every (factor, ε) "
             "by the paper's rule (training accuracy); σ calibrated by the accountant so that each "
             f"factor meets the target ε at δ = {style.fmt_float(delta)}.", "",
             "| factor | batch | target ε | σ | ε spent | DP-SGD | DP-RMSProp | DP² | "
             "tuned (η; DP²: η, η₂, s) |", "|---|---|---|---|---|---|---|---|---|"]
    for k in factors:
        for e in eps_t:
            r0 = runs[(METHODS[0], k, e)]
            tuned = "; ".join(_hp_text(runs[(m, k, e)]) for m in METHODS)
            lines.append(f"| {k}× | {r0.config['batch_size']} | {e:g} | {_sigma(r0):.4g} | "
                         f"{max(eps_of(runs[(m, k, e)]) for m in METHODS):.3g} | "
                         + " | ".join(f"{acc_text(accs(runs[(m, k, e)]))} / "
                                      f"{ci_text(finals(runs[(m, k, e)]))}" for m in METHODS)
                         + f" | {tuned} |")
    # the noise each step adds to the mean clipped gradient, σC/(k·b), relative to 1× (C is shared)
    ratios_noise = []
    for k in others:
        for e in eps_t:
            r1, rk = runs[(METHODS[0], 1, e)], runs[(METHODS[0], k, e)]
            per_step = [_sigma(r) / r.config["batch_size"] for r in (rk, r1)]
            ratios_noise.append(f"ε = {e:g}: {per_step[0] / per_step[1]:.2f}")
    lines += ["", "Noise added to the mean clipped gradient per step, σC/(k·b), at "
              + "/".join(f"{k}×" for k in others) + " relative to 1×: " + ", ".join(ratios_noise)
              + " (the larger batch helps only where amplification by subsampling is sublinear "
                "in q; the sampling noise of the gradient also falls by 1/√k)."]
    # premises: P1–P3 once, P4 per ε (DP-SGD at 1×)
    np_runs = nonprivate(results)
    checks = premise_checks(saved.notes.get("premise"), np_sgd=np_runs.get("sgd"),
                            np_rms=np_runs.get("rmsprop"), dp_sgd=None)[:3]
    p4 = {e: dp_sgd_below_prior(runs[("dp_sgd", 1, e)], prior) for e in eps_t}
    tested = [e for e in eps_t if p4[e]["ok"]]
    lines += [""] + premise_lines(checks + [dict(p4[e], name=f"P4 (ε = {e:g})") for e in eps_t])
    unit, fmt = (100.0, "{:+.1f}") if all(accs(r) is not None for r in runs.values()) else (1.0, "{:+.4f}")
    # (A)
    cats_a, lines_a = [], []
    for k in others:
        for e in tested:
            parts = []
            for m in METHODS:
                d, lo, hi = stats.diff_ci(values(runs[(m, k, e)]), values(runs[(m, 1, e)]))
                d, lo, hi = -d, -hi, -lo  # improvement, in the metric's own direction
                cat = verdicts.from_interval(lo, hi, claim="above")
                cats_a.append(cat)
                parts.append(f"{METHOD_STYLE[m][0]} {fmt.format(unit * d)}, 95% CI "
                             f"[{fmt.format(unit * lo)}, {fmt.format(unit * hi)}] — {_cat_text(cat)}")
            lines_a.append(f"- ε = {e:g}, {k}× − 1×: " + "; ".join(parts))
    cat_a = style.combine(cats_a) if cats_a else verdicts.UNTESTED
    # (B)
    cats_b, lines_b, ratios = [], [], []
    for k in others:
        for e in tested:
            b1, g1, v1, df1, (_, lo1, hi1) = gain(runs, 1, e)
            bk, gk, vk, dfk, (_, lok, hik) = gain(runs, k, e)
            head = (f"- ε = {e:g}: gain at 1× (vs {METHOD_STYLE[b1][0]}) {fmt.format(unit * g1)} "
                    f"[{fmt.format(unit * lo1)}, {fmt.format(unit * hi1)}], at {k}× (vs "
                    f"{METHOD_STYLE[bk][0]}) {fmt.format(unit * gk)} [{fmt.format(unit * lok)}, "
                    f"{fmt.format(unit * hik)}]")
            if not lo1 > 0:
                lines_b.append(head + " — premise fails (DP² not significantly better at 1×): "
                               "this ε does not test (B).")
                continue
            t = float(_st.t.ppf(0.975, min(df1, dfk)))
            rlo, rhi = stats.fieller(gk, vk, g1, v1, t)
            r = gk / g1
            ratios.append((e, r, rlo, rhi))
            if 1 / FACTOR <= rlo and rhi <= FACTOR:
                cat = verdicts.HOLDS
            elif rhi < 1 / FACTOR or rlo > FACTOR:
                cat = verdicts.FAILS
            else:
                cat = verdicts.INCONCLUSIVE
            cats_b.append(cat)
            lines_b.append(head + f"; ratio {k}×/1× = {r:.2f}, 95% CI [{rlo:.2f}, {rhi:.2f}] "
                           f"(similar: inside [{1 / FACTOR:g}, {FACTOR:g}]) — {_cat_text(cat)}.")
    cat_b = style.combine(cats_b) if cats_b else verdicts.UNTESTED
    if not premise_ok(checks) or not tested:
        category = verdicts.UNTESTED
    elif verdicts.FAILS in (cat_a, cat_b):
        category = verdicts.FAILS
    elif cat_b == verdicts.UNTESTED:
        category = verdicts.UNTESTED
    elif cat_a == cat_b == verdicts.HOLDS:
        category = verdicts.HOLDS
    else:
        category = verdicts.INCONCLUSIVE
    what = "held-out accuracy points" if unit == 100.0 else "excess loss"
    lines += ["", f"**(A) every method improves at {'/'.join(f'{k}×' for k in others)}** "
              f"(difference of means in {what}, Welch 95% CI; tested ε only): {cat_a}.", *lines_a,
              "", f"**(B) DP²'s gain over the better baseline stays within a factor {FACTOR:g}** "
              f"(Fieller 95% CI of the ratio): {cat_b}.", *lines_b]
    edges = saved.notes.get("edges", {})
    win, lose = {}, {}
    for label, axes_ in edges.items():
        k = int(label.split("-")[0][1:]) if label.startswith("x") else 1
        for ax_name, v in axes_.items():
            (win if k != 1 else lose)[f"{label}.{ax_name}"] = v
    at_edge = {**win, **lose}
    if category == verdicts.FAILS and cat_a == verdicts.FAILS and cat_b != verdicts.FAILS:
        category, edge_note = verdicts.downgrade_for_edge(category, winner_edges=win,
                                                          loser_edges=lose)
    else:
        category, edge_note = verdicts.downgrade_for_edge(category, at_edge)
    lines += ["", "**Grid edges** of the tuned values compared here: "
              + (", ".join(f"{k}={style.fmt_float(float(v))}" for k, v in at_edge.items())
                 if at_edge else "none (every tuned value is interior to its grid)") + "."]
    n_imp = sum(c == verdicts.HOLDS for c in cats_a)
    notes = [f"(A) {n_imp} of {len(cats_a)} method×ε comparisons significantly better at "
             f"{'/'.join(f'{k}×' for k in others)}: {cat_a}",
             "(B) " + ("gain ratio " + ", ".join(f"{r:.2f} [{lo:.2f}, {hi:.2f}] at ε={e:g}"
                                                 for e, r, lo, hi in ratios) + f": {cat_b}"
                       if ratios else "DP² beats the better baseline significantly at 1× at no "
                                      "tested ε, so no gain to keep: not tested")]
    if not premise_ok(checks):
        notes.insert(0, "a premise fails (see the table): the setting does not test the claim")
    elif not tested:
        notes.insert(0, "DP-SGD is not below the class prior at any ε (P4): not tested")
    if edge_note:
        notes.append(edge_note)
    return style.finding(CLAIM, lines, category, "; ".join(notes) + ".")


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
