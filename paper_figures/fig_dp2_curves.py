"""Figure for experiment ``dp2_logistic`` ([DP2] Fig. 4): DP² vs DP-SGD vs DP-RMSProp curves.

Li et al., *Differentially Private Adaptive Optimization with Delayed Preconditioners* (ICLR 2023),
§5.1 / Fig. 4: learning curves at a fixed privacy budget (IMDB: σ = 1, b = 64).  Here: mean excess
training loss ``F(w_t) − F*`` (log scale) over trials with a 95% confidence band, for DP-SGD,
vanilla DP-RMSProp and DP²-RMSProp (at its tuned delay ``s``), each at its tuned hyperparameters,
with non-private RMSProp (dashed) for reference.  Legend: ε at the paper's δ (``10^{-k} ≤ 1/n``).

Reads only saved results (``results`` maps the experiment's labels to ``.npz`` files); the helpers
shared by every ``fig_dp2_*`` script are in :mod:`paper_figures.dp2_common`.
Standalone::

    python -m dpsim.paper_figures.fig_dp2_curves results/dp2_logistic/quick [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

from . import style
from .dp2_common import (METHOD_STYLE, better, ci_text, delta_of, eps_text, finals, finish, get,
                         hp_text, legend_name, load, main_rows, plot_curve, problem_text, set_log_limits,
                         trials_text)

NAME = "fig_dp2_curves"
CLAIM = ("At a fixed privacy budget (σ = 1, b = 64 in the paper), DP²-RMSProp converges faster and "
         "to a better objective than DP-SGD and vanilla DP-RMSProp ([DP2] §5.1, Fig. 4).")

_METHODS = ("dp_sgd", "dp_rmsprop", "dp2_rmsprop")


def _rows(entries):
    return main_rows(entries, _METHODS, NAME)


def _diagnostic(entries):
    rows = [get(entries, "dp_sgd", 0.0), get(entries, "dp2_rmsprop", 0.0)]
    return [r for r in rows if r is not None]


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    entries = load(results)
    sig, rows = _rows(entries)
    ref = get(entries, "rmsprop", private=False)
    diag = _diagnostic(entries)
    delayed = get(entries, "delayed_rmsprop", private=False)
    with style.context():
        fig, axes = style.figure(1, 2 if diag else 1, width=4.6, height=3.6, sharey=True)
        for a in axes[0]:
            a.tick_params(labelleft=True)  # shared scale, but every panel readable on its own
        ax = axes[0][0]
        means = [plot_curve(ax, e, label=legend_name(e, with_hp=True)) for e in rows]
        if ref is not None:
            means.append(plot_curve(ax, ref, label=legend_name(ref, with_hp=True), band=False, z=3))
        ax.set_title(f"(a) private, σ = {sig:g}")
        ax.set_ylabel(r"mean excess training loss $F(w_t) - F^\star$")
        panels = [ax]
        if diag:
            ax2 = axes[0][1]
            for e in diag:
                means.append(plot_curve(ax2, e, label=legend_name(e, with_hp=True)))
            for e in (delayed, ref):
                if e is not None:
                    means.append(plot_curve(ax2, e, label=legend_name(e, with_hp=True), band=False, z=3,
                                            ls="--"))
            ax2.set_title("(b) diagnostic: same clipping, no noise (σ = 0)")
            panels.append(ax2)
        for a in panels:
            a.set_yscale("log")
            a.set_xlim(rows[0].res.steps[0], rows[0].res.steps[-1])
            a.set_xlabel("step t")
            a.legend(loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=1,
                     title=f"ε at δ = {style.fmt_float(delta_of(rows[0].res))}; tuned hyperparameters",
                     title_fontsize=7.5)
        set_log_limits(ax, means)
        fig.suptitle(f"DP² vs DP-SGD vs DP-RMSProp ([DP2] Fig. 4) — {problem_text(rows[0].res)}; "
                     f"mean over {trials_text(rows)} trials, band: 95% CI", fontsize=8.5)
        return style.save(fig, out_dir, NAME)


def evaluate(results: Mapping[str, object]) -> dict:
    """Holds when DP²'s final excess loss is significantly below both baselines' (Welch 95% CI of
    the difference below 0); does not hold when it is significantly above either; else
    inconclusive.  Then the premise and the grid-edge rule (:func:`dp2_common.finish`)."""
    entries = load(results)
    sig, rows = _rows(entries)
    lines = [
        f"Final excess training loss F(w_T) − F* at σ = {sig:g} (mean ± 95% CI over trials; ε at "
        f"δ = {style.fmt_float(delta_of(rows[0].res))}; hyperparameters tuned by best final training loss).",
        "",
        "| method | ε | tuned hyperparameters | trials | final excess loss |",
        "|---|---|---|---|---|",
    ]
    for e in rows:
        lines.append(f"| {METHOD_STYLE[e.method][0]} | {eps_text(e.res)} | {hp_text(e.res)} | "
                     f"{e.res.trials} | {ci_text(finals(e.res))} |")
    dp2 = finals(rows[2].res)
    verdicts, notes = [], []
    for e in rows[:2]:
        v, txt = better(dp2, finals(e.res))
        verdicts.append(v)
        notes.append(f"DP² vs {METHOD_STYLE[e.method][0]}: {txt}")
    holds = False if any(v is False for v in verdicts) else (True if all(verdicts) else None)
    diag = _diagnostic(entries)
    if len(diag) == 2:
        lines += ["", "Diagnostic, the same clipping without noise (σ = 0, tuned the same way):", "",
                  "| method | tuned hyperparameters | trials | final excess loss |", "|---|---|---|---|"]
        for e in diag + [x for x in (get(entries, "delayed_rmsprop", private=False),) if x]:
            lines.append(f"| {legend_name(e, with_eps=False)} | {hp_text(e.res)} | {e.res.trials} | "
                         f"{ci_text(finals(e.res))} |")
        v0, txt0 = better(finals(diag[1].res), finals(diag[0].res))
        notes.append(f"without noise (clipping only) DP² vs DP-SGD: {txt0}")
    return finish(results, entries, CLAIM, holds, rows, lines, notes)


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
