"""Figure for experiment ``dp2_logistic`` ([DP2] Fig. 1): how much the preconditioner moves.

Li et al., *Differentially Private Adaptive Optimization with Delayed Preconditioners* (ICLR 2023),
§1 / Fig. 1: preconditioner values do not change drastically during optimization (IMDB), which is
why a delayed preconditioner averaged over past noisy gradients can stand in for the current one.
Here, at each epoch, the preconditioner ``D = √v + ε_a`` of three runs at their tuned settings:
non-private RMSProp (the paper's figure), vanilla DP-RMSProp (``v`` from the noisy gradients of
every step) and DP²-RMSProp (``v`` from the average of ``s`` noisy gradients, refreshed every
``2s`` steps).  (a) the 10/50/90% quantiles over coordinates of ``log10 D`` (means over trials);
(b) the relative ℓ1 change of ``D`` per epoch, ``‖D_t − D_{t−epoch}‖₁ / ‖D_{t−epoch}‖₁`` (mean
over trials, 95% band; DP²'s D is constant between refreshes, so only the epochs where it moved are
drawn).  Recorded by the probes of :func:`experiments.dp2_logistic.stability_probes`.
Reads only saved results.  Standalone::

    python -m dpsim.paper_figures.fig_dp2_stability results/dp2_logistic/quick [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

import numpy as np

from dpsim.analysis import stats

from . import style
from .dp2_common import (METHOD_STYLE, better, ci_text, finish, hp_text, legend_name, load,
                         problem_text)

NAME = "fig_dp2_stability"
CLAIM = ("Preconditioner values do not change drastically during optimization ([DP2] §1, Fig. 1), "
         "and DP²'s delayed preconditioner, built from averaged noisy gradients, moves less than "
         "vanilla DP-RMSProp's noisy one.")
DRASTIC = 0.25  # relative ℓ1 change per epoch read as "drastic" (the paper gives no number)
METHODS = ("rmsprop", "dp_rmsprop", "dp2_rmsprop")


def _rows(entries):
    rows = {e.method: e for e in entries.values() if e.stability}
    missing = [m for m in METHODS if m not in rows]
    if missing:
        raise ValueError(f"{NAME}: missing preconditioner-stability results for {missing}")
    return [rows[m] for m in METHODS]


def _epochs(e):
    res = e.res
    per_epoch = res.config["problem"]["n"] / res.config["batch_size"]
    return np.asarray(res.steps) / per_epoch


def _change(e) -> np.ndarray:
    """Per trial, the mean per-epoch relative change of D over the second half of the run."""
    steps = np.asarray(e.res.steps)
    sel = steps >= steps[-1] / 2
    return np.nanmean(np.asarray(e.res.records["pc_change"], dtype=float)[sel], axis=0)


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    rows = _rows(load(results))
    colors = {"rmsprop": "#1f77b4", "dp_rmsprop": METHOD_STYLE["dp_rmsprop"][1],
              "dp2_rmsprop": METHOD_STYLE["dp2_rmsprop"][1]}
    with style.context():
        fig, axes = style.figure(1, 2, width=3.9, height=3.3)
        ax, ax2 = axes[0]
        for e in rows:
            ep = _epochs(e)
            q = [np.nanmean(np.asarray(e.res.records[k], dtype=float), axis=1)
                 for k in ("pc_q10", "pc_q50", "pc_q90")]
            ax.fill_between(ep[1:], q[0][1:], q[2][1:], color=colors[e.method], alpha=0.15, lw=0)
            ax.plot(ep[1:], q[1][1:], color=colors[e.method], label=legend_name(e, with_hp=True))
            for k in (0, 2):
                ax.plot(ep[1:], q[k][1:], color=colors[e.method], lw=0.6, ls=":")
            ch = np.asarray(e.res.records["pc_change"], dtype=float)[1:]
            m, h = stats.mean_ci(ch, axis=1)
            # DP²'s D is constant between refreshes (change exactly 0): drawn at the epochs where
            # it moved, so the log axis shows the size of each refresh
            keep = m > 0
            x = ep[1:][keep]
            style.band(ax2, x, np.maximum((m - h)[keep], m[keep] / 10), (m + h)[keep], colors[e.method])
            ax2.plot(x, m[keep], color=colors[e.method], marker="." if e.method == "dp2_rmsprop" else None,
                     ms=3, label=METHOD_STYLE[e.method][0]
                     + (" (at refreshes; 0 between)" if not keep.all() else ""))
        ax.set_xlabel("epoch")
        ax.set_ylabel(r"$\log_{10} D$ over coordinates" + "\n(median; 10–90% band)")
        ax.set_title("(a) distribution of preconditioner values", fontsize=8.5)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=1, fontsize=6.5)
        ax2.axhline(DRASTIC, color="0.4", lw=0.8, ls="--", label=f"{DRASTIC:g} (read as drastic)")
        ax2.set_yscale("log")
        ax2.set_xlabel("epoch")
        ax2.set_ylabel(r"$\|D_t - D_{t-\mathrm{epoch}}\|_1 / \|D_{t-\mathrm{epoch}}\|_1$")
        ax2.set_title("(b) relative change of D per epoch", fontsize=8.5)
        ax2.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, fontsize=6.5)
        fig.suptitle(f"Preconditioner stability ([DP2] Fig. 1) — {problem_text(rows[0].res)}; "
                     f"{rows[0].res.trials} trials", fontsize=8.5)
        return style.save(fig, out_dir, NAME)


def evaluate(results: Mapping[str, object]) -> dict:
    """Two parts, each on the per-trial mean relative ℓ1 change of ``D`` per epoch over the second
    half of the run.  (i) Non-private RMSProp: not drastic when the upper end of its 95% CI is below
    ``DRASTIC`` (0.25), drastic when the lower end is above.  (ii) DP² vs DP-RMSProp: Welch 95% CI of
    the difference below 0.  Holds when both are yes, does not hold when either is no, else
    inconclusive; the grid-edge rule applies to the tuned settings (the premise does not: this is a
    property of the preconditioners, not a comparison of losses)."""
    entries = load(results)
    rows = _rows(entries)
    ch = {e.method: _change(e) for e in rows}
    lines = ["Relative ℓ1 change of the preconditioner D = √v + ε_a per epoch, mean over the second "
             "half of the run (mean ± 95% CI over trials), each at its tuned setting.", "",
             "| run | tuned | trials | change per epoch |", "|---|---|---|---|"]
    for e in rows:
        lines.append(f"| {legend_name(e)} | {hp_text(e.res)} | {e.res.trials} | {ci_text(ch[e.method])} |")
    m, h = stats.mean_ci(ch["rmsprop"])
    part1 = True if m + h < DRASTIC else (False if m - h > DRASTIC else None)
    part2, txt = better(ch["dp2_rmsprop"], ch["dp_rmsprop"])
    notes = [f"non-private RMSProp changes {float(m):.3f} ± {float(h):.3f} per epoch (drastic: > {DRASTIC:g})",
             f"DP² delayed vs DP-RMSProp noisy preconditioner change: {txt}"]
    parts = [part1, part2]
    holds = False if any(p is False for p in parts) else (True if all(parts) else None)
    return finish(results, entries, CLAIM, holds, rows, lines, notes, premise_applies=False,
                  symmetric=True)


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
