"""Figure for experiment ``dp2_logistic`` ([DP2] Fig. 9, left): final loss vs ε, AdaGrad rule.

Li et al., *Differentially Private Adaptive Optimization with Delayed Preconditioners* (ICLR 2023),
App. C.3 / Fig. 9 (left, IMDB): the privacy/utility trade-off of Fig. 5 with the AdaGrad update
rule — DP²-AdaGrad against DP-SGD, DP-RMSProp and DP-AdaGrad.  (Fig. 9's right panel, "4×"
compute on StackOverflow, is not reproduced.)  Here: the final excess training loss
``F(w_T) − F*`` (mean over trials, 95% confidence interval as error bars; log–log) at each noise
multiplier of the sweep, plotted at the ε (δ = the paper's ``10^{-k} ≤ 1/n``) that run spent.
Learning rates re-tuned at each σ (DP²: η₂ only); other hyperparameters (clip, C₂, ε_a, delay s)
from the main σ.  Non-private RMSProp as a horizontal line.
Reads only saved results.  Standalone::

    python -m dpsim.paper_figures.fig_dp2_adagrad_eps_sweep results/dp2_logistic/quick [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

from . import style
from .dp2_common import evaluate_eps_sweep, render_eps_sweep

NAME = "fig_dp2_adagrad_eps_sweep"
CLAIM = ("With the AdaGrad rule too, DP² (DP²-AdaGrad) achieves a better privacy/utility trade-off "
         "than DP-SGD and DP-AdaGrad at every privacy budget ε of the sweep ([DP2] App. C.3, "
         "Fig. 9 left).")
METHODS = ("dp_sgd", "dp_rmsprop", "dp_adagrad", "dp2_adagrad")


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    return render_eps_sweep(results, out_dir, name=NAME, methods=METHODS, dp2_method="dp2_adagrad",
                            suptitle="AdaGrad rule ([DP2] Fig. 9) — {trials} trials, bars: 95% CI")


def evaluate(results: Mapping[str, object]) -> dict:
    """At each ε: is DP²-AdaGrad significantly below DP-SGD and DP-AdaGrad (Welch 95% CI)?  Holds
    when it is at every ε; does not hold when at some ε it is significantly above one of them and
    at no ε below both; else inconclusive (:func:`dp2_common.evaluate_eps_sweep`; DP-RMSProp is
    shown but not compared)."""
    return evaluate_eps_sweep(results, name=NAME, claim=CLAIM, methods=METHODS,
                              dp2_method="dp2_adagrad", compared=("dp_sgd", "dp_adagrad"),
                              columns=("DP-SGD", "DP-RMSProp", "DP-AdaGrad", "DP²-AdaGrad"),
                              dp2_name="DP²-AdaGrad", compared_name="DP-SGD and DP-AdaGrad")


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
