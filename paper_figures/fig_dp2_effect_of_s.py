"""Figure for experiment ``dp2_logistic`` ([DP2] Fig. 6): effect of the delay ``s``.

Li et al., *Differentially Private Adaptive Optimization with Delayed Preconditioners* (ICLR 2023),
§5.1 / Fig. 6: there is a sweet spot for ``s`` — small delays barely improve on DP-RMSProp, moderate
delays perform best, large delays slow convergence — and nearly every ``s`` improves on the
baselines.  Left: final held-out accuracy (the paper's metric) of DP²-RMSProp at each delay (each at
its own tuned hyperparameters; mean and 95% CI over trials), with DP-SGD and DP-RMSProp at the same
σ as bands (mean ± 95% CI).  Right: the training-loss curves per delay (means) with both baselines
and the class-prior excess (dotted).  Reads only saved results.  Standalone::

    python -m dpsim.paper_figures.fig_dp2_effect_of_s results/dp2_logistic/quick [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

import numpy as np

from dpsim.analysis import stats

from . import style
from .dp2_common import (METRIC_NOTE, finish, METHOD_STYLE, acc_better, acc_text, accs, compare,
                         ci_text, eps_text, finals, get, hp_text, load, main_sigma, prior_excess,
                         prior_line, problem_text, set_log_limits)

NAME = "fig_dp2_effect_of_s"
CLAIM = ("The delay s trades staleness against noise: too small or too large an s is worse than a "
         "moderate one, and nearly every s improves on DP-SGD and DP-RMSProp ([DP2] §5.1, Fig. 6).")


def _rows(entries):
    sig = main_sigma(entries)
    rows = sorted((e for e in entries.values()
                   if e.method == "dp2_rmsprop" and e.s is not None and not e.h and e.sigma == sig),
                  key=lambda e: e.s)
    if len(rows) < 2:
        raise ValueError(f"{NAME}: need DP² results at two or more delays")
    base = [get(entries, m, sig) for m in ("dp_sgd", "dp_rmsprop")]
    return sig, rows, [b for b in base if b is not None]


def _metric(res):
    """The panel (a) / sweet-spot metric: held-out accuracy when recorded, else −excess loss."""
    a = accs(res)
    return a if a is not None else -finals(res)


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    sig, rows, base = _rows(load(results))
    s = np.array([e.s for e in rows], dtype=float)
    with_acc = all(accs(e.res) is not None for e in rows + base)
    mh = [stats.mean_ci(_metric(e.res)) for e in rows]
    colors = style.sequential(len(rows))
    with style.context():
        fig, axes = style.figure(1, 2, width=3.7, height=3.2)
        ax = axes[0][0]
        for b in base:
            m, h = stats.mean_ci(_metric(b.res))
            name, color, _, _ = METHOD_STYLE[b.method]
            ax.axhspan(m - h, m + h, color=color, alpha=0.2, lw=0)
            ax.axhline(m, color=color, lw=1, label=f"{name} ({hp_text(b.res)})")
        ax.errorbar(s, [x[0] for x in mh], yerr=[x[1] for x in mh], color=METHOD_STYLE["dp2_rmsprop"][1],
                    marker="D", capsize=3, label="DP²-RMSProp (tuned per s)")
        ax.set_xscale("log")
        ax.set_xticks(s)
        ax.set_xticklabels([f"{int(x)}" for x in s])
        from matplotlib.ticker import FuncFormatter, NullFormatter

        ax.xaxis.set_minor_formatter(NullFormatter())  # only the delays are labelled
        ax.set_xlabel("delay s (steps)")
        if with_acc:
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{100 * v:.1f}%"))
            ax.set_ylabel("final held-out accuracy")
        else:
            ax.set_ylabel(r"$-$final excess loss")
        ax.set_title(f"(a) final accuracy vs s (σ = {sig:g}, ε = {eps_text(rows[0].res)})", fontsize=8.5)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2))
        ax2 = axes[0][1]
        means = []
        for e, c in zip(rows, colors):
            m = e.res.excess_loss.mean(axis=1)
            means.append(m)
            ax2.plot(e.res.steps, m, color=c, lw=1.1, label=f"DP², s = {e.s}: {hp_text(e.res)}")
        for b in base:
            m = b.res.excess_loss.mean(axis=1)
            means.append(m)
            ax2.plot(b.res.steps, m, color=METHOD_STYLE[b.method][1], ls="--",
                     label=f"{METHOD_STYLE[b.method][0]}: {hp_text(b.res)}")
        prior = prior_excess(results)
        prior_line(ax2, prior)
        if prior is not None:
            means.append(np.array([prior]))
        ax2.set_yscale("log")
        set_log_limits(ax2, means)
        ax2.set_xlabel("step t")
        ax2.set_ylabel(r"mean $F(w_t) - F^\star$")
        ax2.set_title("(b) training loss per delay; dotted: class prior", fontsize=8.5)
        ax2.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, fontsize=6.5)
        fig.suptitle(f"Effect of the delay s ([DP2] Fig. 6) — {problem_text(rows[0].res)}; "
                     f"mean over {rows[0].res.trials} trials, bars/bands: 95% CI", fontsize=8.5)
        return style.save(fig, out_dir, NAME)


def evaluate(results: Mapping[str, object]) -> dict:
    """Two parts, on the paper's metric (held-out accuracy).  Sweet spot: yes when the best delay
    is interior to the grid and significantly better (Welch 95% CI) than both the smallest and the
    largest delay; no when it is at an end of the grid and significantly better than every
    interior delay.  Baselines: yes when at least half of the delays are significantly better than
    both DP-SGD and DP-RMSProp (:func:`dp2_common.compare`); no when at least half are
    significantly worse than one of them.  Holds when both parts are yes, does not hold when
    either is no, else inconclusive; DP² the claimed winner for the grid-edge rule."""
    entries = load(results)
    sig, rows, base = _rows(entries)
    f = [_metric(e.res) for e in rows]
    means = [float(np.mean(x)) for x in f]
    k = int(np.argmax(means))
    lines = [f"DP²-RMSProp at σ = {sig:g} per delay, each with its tuned hyperparameters (mean ± 95% "
             "CI). " + METRIC_NOTE, "", "| s | tuned hyperparameters | final excess loss | "
             "held-out accuracy |", "|---|---|---|---|"]
    for e in rows:
        lines.append(f"| {e.s} | {hp_text(e.res)} | {ci_text(finals(e.res))} | {acc_text(accs(e.res))} |")
    for b in base:
        lines.append(f"| {METHOD_STYLE[b.method][0]} | {hp_text(b.res)} | {ci_text(finals(b.res))} | "
                     f"{acc_text(accs(b.res))} |")
    interior = 0 < k < len(rows) - 1
    ends = [acc_better(f[k], f[0]), acc_better(f[k], f[-1])]
    notes = [f"best s = {rows[k].s}" + (" (interior)" if interior else " (end of the grid)"),
             f"best vs s={rows[0].s}: {ends[0][1]}", f"best vs s={rows[-1].s}: {ends[1][1]}"]
    if interior and ends[0][0] and ends[1][0]:
        sweet = True
    elif not interior and len(rows) > 2 and all(acc_better(f[k], f[j])[0]
                                                 for j in range(1, len(rows) - 1)):
        sweet = False
    else:
        sweet = None
    parts = [sweet]
    if base:
        n_beat = sum(all(compare(e.res, b.res)[0] for b in base) for e in rows)
        n_lose = sum(any(compare(e.res, b.res)[0] is False for b in base) for e in rows)
        notes.append(f"{n_beat} of {len(rows)} delays significantly better than both baselines, "
                     f"{n_lose} significantly worse than at least one")
        parts.append(True if 2 * n_beat >= len(rows) else (False if 2 * n_lose >= len(rows) else None))
    holds = False if any(p is False for p in parts) else (True if all(parts) else None)
    notes.append("sweet spot: " + {True: "yes", False: "no", None: "not resolved"}[sweet])
    return finish(results, entries, CLAIM, holds, list(rows) + list(base), lines, notes,
                  winners=("dp2_rmsprop",))


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
