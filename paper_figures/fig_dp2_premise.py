"""Figure for experiment ``dp2_logistic``: the premise of every [DP2] claim.

DP² is a way to keep the benefit of adaptivity under privacy noise; it can only show that benefit
where adaptivity helps at all.  This panel tests that premise on the problem and run length of the
experiment: non-private RMSProp against non-private SGD, each at its tuned step size (scored on the
second-half average of its training loss), mean excess training loss ``F(w_t) − F*`` with 95%
bands.  When RMSProp is not significantly better than SGD at ``T`` (Welch 95% CI of the difference
of final excess losses), every DP² figure's verdict is "setting does not test the claim"
(:func:`paper_figures.dp2_common.finish`).  Reads only saved results.  Standalone::

    python -m dpsim.paper_figures.fig_dp2_premise results/dp2_logistic/quick [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

from dpsim.experiments import verdicts as verdicts_mod

from . import style
from .dp2_common import (METHOD_STYLE, ci_text, edges, finals, get, hp_text, legend_name, load,
                         curve_axes, plot_curve, premise, problem_text, trials_text)

NAME = "fig_dp2_premise"
CLAIM = ("Premise of [DP2]'s claims: on this problem and at this run length, non-private adaptive "
         "optimization (RMSProp) reaches a lower training loss than non-private SGD — otherwise no "
         "private adaptive method can show an advantage and the DP² comparisons test nothing.")


def _rows(entries):
    rows = [get(entries, m, private=False) for m in ("sgd", "rmsprop")]
    if any(r is None for r in rows):
        raise ValueError(f"{NAME}: need the non-private sgd and rmsprop results")
    return rows


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    rows = _rows(load(results))
    with style.context():
        fig, axes = style.figure(1, 1, width=4.8, height=3.3)
        ax = axes[0][0]
        means = [plot_curve(ax, e, label=legend_name(e, with_hp=True),
                            color={"rmsprop": "#1f77b4"}.get(e.method),
                            ls="-" if e.method == "rmsprop" else "--") for e in rows]
        curve_axes(ax, rows, means,
                   title=problem_text(rows[0].res) + f", Zipf {rows[0].res.config['problem']['zipf']:g}",
                   legend_title="non-private, tuned step size η")
        fig.suptitle(f"Premise: does adaptivity help without privacy? — mean over "
                     f"{trials_text(rows)} trials, band: 95% CI", fontsize=9)
        return style.save(fig, out_dir, NAME)


def evaluate(results: Mapping[str, object]) -> dict:
    """Holds when non-private RMSProp's final excess loss is significantly below SGD's (Welch 95%
    CI of the difference below 0); "setting does not test the claim" when significantly above;
    inconclusive otherwise.  The grid-edge rule applies to the two tuned step sizes."""
    rows = _rows(load(results))
    ok, line = premise(load(results))
    lines = ["Non-private runs at the experiment's run length, each at its tuned step size.", "",
             "| method | tuned | trials | final excess loss |", "|---|---|---|---|"]
    for e in rows:
        lines.append(f"| {METHOD_STYLE[e.method][0]} | {hp_text(e.res)} | {e.res.trials} | "
                     f"{ci_text(finals(e.res))} |")
    lines += ["", line]
    category = {True: verdicts_mod.HOLDS, False: verdicts_mod.UNTESTED,
                None: verdicts_mod.INCONCLUSIVE}[ok]
    at_edge = edges(results, rows)
    category, note = verdicts_mod.downgrade_for_edge(category, at_edge)
    return style.finding(CLAIM, lines, category,
                         line.replace("**Premise** ", "")
                         + (f" ({note})" if note else ""))


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
