"""Figure for experiment ``dp2_logistic`` ([DP2] Fig. 2): delayed vs plain RMSProp, non-private.

Li et al., *Differentially Private Adaptive Optimization with Delayed Preconditioners* (ICLR 2023),
§3.1 / Fig. 2: RMSProp whose preconditioner is refreshed only every ``2s`` steps from the average of
the ``s`` preceding SGD gradients (the non-private version of DP², alternating ``s`` SGD and ``s``
RMSProp steps) reaches about the training loss of plain RMSProp.  Mean excess training loss
``F(w_t) − F*`` (log scale) over trials with a 95% confidence band; SGD for reference.  Each method
at its tuned learning rate(s), scored (tuning) and compared (verdict) on the second-half average of
the excess loss, so a sawtooth that ends on a good phase is not rewarded.  Reads only saved
results.  Standalone::

    python -m dpsim.paper_figures.fig_dp2_delayed_vs_plain results/dp2_logistic/quick [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

import numpy as np

from . import style
from .dp2_common import (METHOD_STYLE, better, ci_text, curve_axes, equivalent, finals, finish, get,
                         hp_text, legend_name, load, plot_curve, problem_text, tail_means, trials_text)

NAME = "fig_dp2_delayed_vs_plain"
CLAIM = ("Without privacy, RMSProp with delayed preconditioners (DP²'s schedule: s SGD steps, then "
         "s RMSProp steps with the preconditioner from the averaged SGD gradients) achieves about "
         "the same training loss as plain RMSProp ([DP2] §3.1, Fig. 2).")
MARGIN = 0.25


def _rows(entries):
    rows = [get(entries, m, private=False) for m in ("sgd", "rmsprop", "delayed_rmsprop")]
    if rows[1] is None or rows[2] is None:
        raise ValueError(f"{NAME}: need non-private rmsprop and delayed_rmsprop results")
    return [r for r in rows if r is not None]


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    rows = _rows(load(results))
    with style.context():
        fig, axes = style.figure(1, 1, width=4.8, height=3.4)
        ax = axes[0][0]
        means = []
        for e in rows:
            lab = legend_name(e, with_hp=True)
            if e.method == "delayed_rmsprop":
                lab = f"{METHOD_STYLE[e.method][0]}: {hp_text(e.res)}"
            means.append(plot_curve(ax, e, label=lab, ls="-" if e.method != "sgd" else "--",
                                    color={"rmsprop": "#1f77b4"}.get(e.method)))
        curve_axes(ax, rows, means, title=problem_text(rows[0].res),
                   legend_title="non-private; η: SGD steps, η₂: RMSProp steps, s: delay")
        fig.suptitle(f"Delayed vs plain RMSProp, non-private ([DP2] Fig. 2) — mean over "
                     f"{trials_text(rows)} trials, band: 95% CI", fontsize=9)
        return style.save(fig, out_dir, NAME)


def evaluate(results: Mapping[str, object]) -> dict:
    """Equivalence test on a fair measure: each trial's *time-averaged* excess training loss over
    the second half of the run (:func:`dp2_common.tail_means`; the tuning scored the non-private
    runs the same way), not the final point, which the delayed schedule's sawtooth can flatter.
    Holds when the Welch 95% CI of (delayed − plain)/plain lies within ±25%; does not hold when it
    lies entirely outside; else inconclusive.  Then the premise and the grid-edge rule
    (:func:`dp2_common.finish`)."""
    entries = load(results)
    rows = _rows(entries)
    by = {e.method: e for e in rows}
    lines = ["Excess training loss F(w_t) − F*, non-private, tuned learning rates (scored on the "
             "second-half average): mean ± 95% CI over trials of the second-half average (the "
             "measure of the verdict) and of the final point.", "",
             "| method | tuned hyperparameters | trials | second-half average | final |",
             "|---|---|---|---|---|"]
    for e in rows:
        lines.append(f"| {METHOD_STYLE[e.method][0]} | {hp_text(e.res)} | {e.res.trials} | "
                     f"{ci_text(tail_means(e.res))} | {ci_text(finals(e.res))} |")
    d, p = tail_means(by["delayed_rmsprop"].res), tail_means(by["rmsprop"].res)
    holds, txt = equivalent(d, p, MARGIN)
    ratio = float(np.mean(d) / np.mean(p))
    notes = [f"delayed vs plain RMSProp, second-half average: {ratio:.2f}×, {txt}"]
    _, tf = equivalent(finals(by["delayed_rmsprop"].res), finals(by["rmsprop"].res), MARGIN)
    notes.append(f"at the final point alone (not the verdict's measure): {tf}")
    if "sgd" in by:
        _, t2 = better(p, tail_means(by["sgd"].res))
        notes.append(f"plain RMSProp vs SGD, second-half average: {t2}")
    return finish(results, entries, CLAIM, holds, rows, lines, notes, symmetric=True)


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
