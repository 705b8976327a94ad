"""Figure for experiment ``dp2_logistic`` ([DP2] App. C.3, Fig. 8): DP²-AdaGrad vs DP-AdaGrad.

Li et al., *Differentially Private Adaptive Optimization with Delayed Preconditioners* (ICLR 2023),
App. C.3: DP² applied to the AdaGrad rule (``v ← v + (G/s)²`` at each switch) improves on
vanilla DP-AdaGrad (and on DP-SGD) as DP²-RMSProp does on DP-RMSProp.  Final excess training loss
(mean, 95% CI) as a dot plot beside the learning curves; each method at its own tuned
hyperparameters.  Reads only saved results.  Standalone::

    python -m dpsim.paper_figures.fig_dp2_adagrad results/dp2_logistic/quick [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

from . import style
from .dp2_common import METRIC_NOTE, compare, finish, load, main_rows, table_figure, table_lines

NAME = "fig_dp2_adagrad"
CLAIM = ("DP²-AdaGrad improves on vanilla DP-AdaGrad (and DP-SGD), showing that DP² carries over "
         "to other adaptive rules ([DP2] App. C.3, Figs. 8–9).")
METHODS = ("dp_sgd", "dp_adagrad", "dp2_adagrad")


def _rows(entries):
    return main_rows(entries, METHODS, NAME, required=("dp_adagrad", "dp2_adagrad"))


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    sig, rows = _rows(load(results))
    return table_figure(rows, name=NAME, title=f"DP²-AdaGrad ([DP2] App. C.3), σ = {sig:g}",
                        out_dir=out_dir, results=results)


def evaluate(results: Mapping[str, object]) -> dict:
    """Holds when DP²-AdaGrad's final held-out accuracy is significantly above DP-AdaGrad's (Welch
    95% CI; :func:`dp2_common.compare`); does not hold when significantly below; else
    inconclusive.  DP-SGD is reported.  DP²-AdaGrad is the claimed winner (grid-edge rule)."""
    entries = load(results)
    sig, rows = _rows(entries)
    by = {e.method: e for e in rows}
    lines = table_lines(rows, f"Final values at σ = {sig:g} (mean ± 95% CI over trials); each "
                              "method at its own tuned hyperparameters. " + METRIC_NOTE)
    holds, txt = compare(by["dp2_adagrad"].res, by["dp_adagrad"].res)
    notes = [f"DP²-AdaGrad vs DP-AdaGrad: {txt}"]
    if "dp_sgd" in by:
        _, t = compare(by["dp2_adagrad"].res, by["dp_sgd"].res)
        notes.append(f"DP²-AdaGrad vs DP-SGD: {t}")
    return finish(results, entries, CLAIM, holds, [by["dp_adagrad"], by["dp2_adagrad"]], lines,
                  notes, winners=("dp2_adagrad",))


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
