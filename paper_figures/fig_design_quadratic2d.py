"""Figure for ``design_space`` (d): the 2-D quadratic of [DESIGN] §4.1 (RECONSTRUCTED): mean
trajectories and loss of non-private Adam, post-processing DP-Adam, scale-then-privatize and the
noiseless-preconditioner oracles, each at its tuned values (η; Adam's ε_a; STP's ε_s and clip C),
printed in the legend.  The loss panel is on a log axis,
so it shows the geometric mean over trials with the 95% CI of the mean of ``log F`` (a band in
log space); ``evaluate`` compares arithmetic means (Welch CI), as the claim is about the loss.

Standalone::  python -m dpsim.paper_figures.fig_design_quadratic2d results/design_space/quick [OUT]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

import numpy as np

from dpsim.analysis import stats
from dpsim.experiments import verdicts
from dpsim.experiments.pipeline import Saved

from . import design_common as common
from . import style

NAME = "fig_design_quadratic2d"
CLAIM = ("[DESIGN] §4.1–4.3: post-processing noise floors the preconditioner, so DP-Adam loses "
         "Adam's per-coordinate scaling on the ill-conditioned quadratic; scale-then-privatize "
         "recovers it and reaches a lower loss than post-processing.")
ORDER = ("adam", "dp_adam", "dp_adam_noiseless_v", "dp_adam_stp", "dp_adam_stp_noiseless_v")


def _data(results):
    results = Saved.of(results)
    out = {}
    for lab, meta, res in common.load(results, "quad"):
        m = meta["method"]
        mask, lr, es = common.chosen(results, lab)
        out[m] = dict(res=res, mask=mask, lr=lr, es=es, eps=common.eps_of(res), label=lab,
                      point=common.tuned_point(results, lab))
    return out


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    data = _data(results)
    with style.context():
        fig, axes = style.figure(1, 2, width=3.9, height=3.4)
        ax0, ax1 = axes[0]
        for i, m in enumerate(o for o in ORDER if o in data):
            r = data[m]
            res, mask = r["res"], r["mask"]
            lab = f"{m}: {common.eps_label(r['eps'])}, {common.point_text(r['point'])}"
            color = style.BASELINE_COLOR if m == "adam" else f"C{i}"
            w1 = np.abs(res.records["w1"][:, mask]).mean(axis=1)
            w2 = np.abs(res.records["w2"][:, mask]).mean(axis=1)
            ax0.plot(w1, w2, color=color, label=lab, marker=".", markevery=max(len(w1) // 8, 1))
            # On the log axis: the geometric mean and the 95% CI of the mean of log F over the
            # trials (a band in log space).  An arithmetic mean ± CI has a lower end at or below
            # zero whenever the trials spread over decades, and clipping it drew bands down to 1e-5.
            logl = np.log(np.maximum(res.loss[:, mask], np.finfo(float).tiny))
            mlog, hlog = stats.mean_ci(logl, axis=1)
            hlog = np.nan_to_num(hlog)
            ax1.plot(res.steps, np.exp(mlog), color=color)
            style.band(ax1, res.steps, np.exp(mlog - hlog), np.exp(mlog + hlog), color)
        ax0.set_xscale("log"); ax0.set_yscale("log")
        ax0.set_xlabel("mean |w₁| (steep coordinate)"); ax0.set_ylabel("mean |w₂| (flat coordinate)")
        ax0.set_title("mean trajectory from (1, 1)")
        ax1.set_yscale("log"); ax1.set_xlabel("step t"); ax1.set_ylabel("loss F(w_t) (F* = 0)")
        ax1.set_title("loss: geometric mean over trials,\nband: 95% CI of the mean of log F",
                      fontsize=9)
        cfg = next(iter(data.values()))["res"].config["problem"]
        fig.suptitle(f"2-D quadratic F = (a w₁² + b w₂²)/2, a={cfg['a']:g}, b={cfg['b']:g} "
                     f"(reconstructed [DESIGN] §4.1); ε at δ = {style.fmt_float(common.DELTA)}",
                     fontsize=9)
        fig.legend(*ax0.get_legend_handles_labels(), loc="outside lower center", ncol=2, fontsize=7)
        return style.save(fig, out_dir, NAME)


def evaluate(results: Mapping[str, object]) -> dict:
    """Holds when STP's final loss is significantly below post-processing's (Welch 95% CI,
    :func:`experiments.verdicts.from_interval`).  Grid edges, direction-aware
    (:func:`experiments.verdicts.downgrade_for_edge`): a *holds* becomes inconclusive only when
    post-processing's (the claimed loser's) tuned values sit on an edge, a *does not hold* only
    when STP's do."""
    data = _data(results)
    lines = ["Final loss F(w_T), mean ± 95% CI over the evaluation trials (fresh seeds) at the tuned "
             "values. " + common.RECON, ""]
    for m in ORDER:
        if m in data:
            r = data[m]
            mean, half = stats.mean_ci(r["res"].loss[-1][r["mask"]])
            lines.append(f"- {m}: {stats.fmt_ci(mean, half)} ({common.point_text(r['point'])}, "
                         f"ε={common.eps_text(r['eps'])})")
    category, verdict = verdicts.INCONCLUSIVE, "missing results"
    if "dp_adam" in data and "dp_adam_stp" in data:
        a = data["dp_adam_stp"]["res"].loss[-1][data["dp_adam_stp"]["mask"]]
        b = data["dp_adam"]["res"].loss[-1][data["dp_adam"]["mask"]]
        d, lo, hi, category = common.below(a, b)
        # STP is the claimed winner, post-processing the claimed loser: an edge of STP's grid
        # cannot undo a "holds" (widening it could only lower STP's loss further)
        category, edge_note = verdicts.downgrade_for_edge(
            category, winner_edges=common.edge_axes(results, [data["dp_adam_stp"]["label"]]),
            loser_edges=common.edge_axes(results, [data["dp_adam"]["label"]]))
        verdict = (f"STP − post-processing final loss = {d:.3e} (95% CI [{lo:.3e}, {hi:.3e}])."
                   + (f" {edge_note}." if edge_note else ""))
    return style.finding(CLAIM, lines, category, verdict)


def main(argv=None) -> int:
    """``python -m dpsim.paper_figures.<this> RESULTS_DIR [OUT_DIR]``: render from saved results."""
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
