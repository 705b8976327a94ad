"""Figure for experiment ``adambc`` ([ADAMBC] §5 "Discussion"): the premise panel.

The paper expects DP-AdamBC to help "on tasks and architectures for which Adam and sign descent
outperform SGD in the non-private case", and a per-coordinate preconditioner can only matter when
the coordinates' gradient scales differ.  Left: mean excess training loss of *non-private* SGD and
Adam, each at its tuned learning rate (bands: 95% CI of the mean).  Right: the clean per-coordinate
RMS gradient ``√v̂^c`` (frozen clean run at DP-Adam's trained point, mean over trials), coordinates
sorted from largest to smallest, one line per ε, with the p90/p10 spread the premise tests.

Standalone::

    python -m dpsim.paper_figures.fig_adambc_premise results/adambc/quick [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

import numpy as np

from dpsim.analysis import stats
from dpsim.experiments import verdicts as verdicts_mod

from . import adambc_common as common
from . import style

NAME = "fig_adambc_premise"
CLAIM = ("Premise of the headline claim: in this setting the coordinates' gradient scales differ "
         "and non-private Adam clearly beats non-private SGD at the run length ([ADAMBC] §5 "
         "Discussion: DP-AdamBC should help where Adam beats SGD without privacy).")
COLORS = {"np-sgd": "#d95f02", "np-adam": "#7570b3"}
NAMES = {"np-sgd": "SGD (non-private)", "np-adam": "Adam (non-private)"}


def _need(results):
    npv = common.nonprivate(results)
    if not all(s in npv for s in ("np-sgd", "np-adam")):
        raise ValueError(f"{NAME}: no non-private np-sgd/np-adam results among {sorted(npv)}")
    return npv


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    npv = _need(results)
    het = common.heterogeneity(results)
    with style.context():
        fig, axes = style.figure(1, 2, width=3.8, height=3.0)
        ax = axes[0][0]
        for slot in ("np-sgd", "np-adam"):
            res = npv[slot]
            style.mean_curve(ax, res.steps, res.excess_loss, COLORS[slot],
                             label=f"{NAMES[slot]}, η = {common.lr_text(res)}")
        ax.set_yscale("log")
        ax.set_xlabel("step t")
        ax.set_ylabel(r"mean excess training loss $F(w_t)-F^\star$")
        ax.set_title(f"non-private, each tuned ({npv['np-adam'].trials} trials)")
        ax.legend(loc="upper right", fontsize=6.5)
        ax = axes[0][1]
        colors = style.sequential(max(len(het), 1))
        for (eps, ratio, rms), c in zip(het, colors):
            m, h = stats.mean_ci(ratio)
            ax.plot(np.arange(1, rms.size + 1), rms, marker="o", ms=2.5, color=c,
                    label=f"ε = {eps:g}: p90/p10 = {m:.3g} ± {h:.2g}")
        ax.set_yscale("log")
        ax.set_xlabel("coordinate (sorted by scale)")
        ax.set_ylabel(r"clean RMS gradient $\sqrt{\hat v^c_j}$")
        ax.set_title("coordinate scales at DP-Adam's trained point")
        if het:
            ax.legend(loc="upper right", fontsize=6.5)
        prob = npv["np-adam"].config["problem"]
        fig.suptitle(f"Premise: least squares, diagonal Hessian, condition {prob.get('condition', 0):g}, "
                     f"d = {prob['d']}, T = {npv['np-adam'].config['steps']}", fontsize=9)
        return style.save(fig, out_dir, NAME)


def evaluate(results: Mapping[str, object]) -> dict:
    """Holds when both premises hold (:func:`adambc_common.premise`); "setting does not test the
    claim" when either fails; inconclusive otherwise.  The grid-edge rule applies to the two
    non-private tuned learning rates, direction-aware: SGD's on an edge can undo a holds, Adam's
    a failure."""
    npv = _need(results)
    ok, line = common.premise(results)
    lines = ["Non-private runs at the experiment's run length, each at its tuned learning rate "
             "(lowest mean final training loss over the tuning trials).", "",
             "| method | η | trials | final excess loss (mean ± 95% CI) |", "|---|---|---|---|"]
    for slot in ("np-sgd", "np-adam"):
        res = npv[slot]
        lines.append(f"| {NAMES[slot]} | {common.lr_text(res)} | {res.trials} | "
                     f"{stats.fmt_ci(*stats.mean_ci(common.finals(res)))} |")
    lines += ["", line]
    # the premise claims Adam ≫ SGD: Adam is the claimed winner, SGD the loser; a failed premise
    # is judged as a "does not hold" by the edge rule, then reported as "setting does not test"
    raw = {True: verdicts_mod.HOLDS, False: verdicts_mod.FAILS, None: verdicts_mod.INCONCLUSIVE}[ok]
    raw, note = verdicts_mod.downgrade_for_edge(
        raw, winner_edges=common.selection_edges(results, {"np-adam": "nonprivate-np-adam"}),
        loser_edges=common.selection_edges(results, {"np-sgd": "nonprivate-np-sgd"}))
    category = verdicts_mod.UNTESTED if raw == verdicts_mod.FAILS else raw
    return style.finding(CLAIM, lines, category,
                         line.replace("**Premise** — ", "") + (f" ({note})" if note else ""))


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
