"""Figure for experiment ``dp2_logistic`` ([DP2] Fig. 5): final loss vs ε.

Li et al., *Differentially Private Adaptive Optimization with Delayed Preconditioners* (ICLR 2023),
§5.1 / Fig. 5: privacy/utility trade-offs of DP²-RMSProp, DP-SGD and DP-RMSProp over a range of
privacy budgets.  Here: the final excess training loss ``F(w_T) − F*`` (mean over trials, 95%
confidence interval as error bars; log–log) at each noise multiplier of the sweep, plotted at the
ε (δ = the paper's ``10^{-k} ≤ 1/n``) that run spent.  Learning rates re-tuned at each σ (DP²:
η₂ only); other hyperparameters (clip, C₂, ε_a, delay s, DP²'s η) from the main σ.  Non-private
RMSProp as a horizontal line.
Reads only saved results.  Standalone::

    python -m dpsim.paper_figures.fig_dp2_eps_sweep results/dp2_logistic/quick [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

from . import style
from .dp2_common import evaluate_eps_sweep, render_eps_sweep

NAME = "fig_dp2_eps_sweep"
CLAIM = ("DP²-RMSProp achieves a better privacy/utility trade-off than DP-SGD and DP-RMSProp at "
         "every privacy budget ε of the sweep ([DP2] §5.1, Fig. 5).")
METHODS = ("dp_sgd", "dp_rmsprop", "dp2_rmsprop")


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    return render_eps_sweep(results, out_dir, name=NAME, methods=METHODS, dp2_method="dp2_rmsprop",
                            suptitle="Privacy/utility trade-off ([DP2] Fig. 5) — mean over {trials} trials, bars: 95% CI")


def evaluate(results: Mapping[str, object]) -> dict:
    """At each ε: is DP² significantly below both baselines (Welch 95% CI)?  Holds when it is at
    every ε; does not hold when at some ε it is significantly above one of them and at no ε below
    both; else inconclusive (:func:`dp2_common.evaluate_eps_sweep`)."""
    return evaluate_eps_sweep(results, name=NAME, claim=CLAIM, methods=METHODS,
                              dp2_method="dp2_rmsprop", compared=("dp_sgd", "dp_rmsprop"),
                              columns=("DP-SGD", "DP-RMSProp", "DP²"), dp2_name="DP²",
                              compared_name="both baselines")


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
