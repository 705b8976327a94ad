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
from .dp2_common import (finish, METHOD_STYLE, better, ci_text, delta_of, eps_of, finals, hp_text, load,
                         render_eps_sweep, sweep_rows)

NAME = "fig_dp2_adagrad_eps_sweep"
CLAIM = ("With the AdaGrad rule too, DP² (DP²-AdaGrad) achieves a better privacy/utility trade-off "
         "than DP-SGD and DP-AdaGrad at every privacy budget ε of the sweep ([DP2] App. C.3, "
         "Fig. 9 left).")
METHODS = ("dp_sgd", "dp_rmsprop", "dp_adagrad", "dp2_adagrad")
COMPARED = (0, 2)  # DP²-AdaGrad is compared with DP-SGD and DP-AdaGrad


def _table(entries):
    return sweep_rows(entries, METHODS, "dp2_adagrad", NAME)


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    return render_eps_sweep(results, out_dir, name=NAME, methods=METHODS, dp2_method="dp2_adagrad",
                            suptitle="AdaGrad rule ([DP2] Fig. 9) — {trials} trials, bars: 95% CI")


def evaluate(results: Mapping[str, object]) -> dict:
    """At each ε: is DP²-AdaGrad significantly below DP-SGD and DP-AdaGrad (Welch 95% CI)?  Holds when it is at
    every ε; does not hold when at some ε it is significantly above one of them and at no ε below
    both; else inconclusive."""
    entries = load(results)
    rows = _table(entries)
    lines = [f"Final excess training loss (mean ± 95% CI over trials); ε at δ = "
             f"{style.fmt_float(delta_of(rows[0][1][0].res))}; learning rates re-tuned per σ (DP²: the adaptive-phase η₂ only).", "",
             "| σ | ε | DP-SGD | DP-RMSProp | DP-AdaGrad | DP²-AdaGrad | DP²-AdaGrad vs DP-SGD | "
             "DP²-AdaGrad vs DP-AdaGrad |", "|---|---|---|---|---|---|---|---|"]
    wins, losses, notes = 0, 0, []
    for sig, es in rows:
        f = [finals(e.res) for e in es]
        v1, t1 = better(f[3], f[COMPARED[0]])
        v2, t2 = better(f[3], f[COMPARED[1]])
        lines.append(f"| {sig:g} | {eps_of(es[3].res):.3g} | {ci_text(f[0])} | {ci_text(f[1])} | "
                     f"{ci_text(f[2])} | {ci_text(f[3])} | {t1} | {t2} |")
        if v1 and v2:
            wins += 1
        if v1 is False or v2 is False:
            losses += 1
    lines += ["", "Tuned: " + "; ".join(f"σ={sig:g}: " + ", ".join(
        f"{METHOD_STYLE[e.method][0]} ({hp_text(e.res)})" for e in es) for sig, es in rows)]
    if wins == len(rows):
        holds = True
    elif losses and not wins:
        holds = False
    else:
        holds = None
    notes = [f"DP²-AdaGrad significantly better than DP-SGD and DP-AdaGrad at {wins} of {len(rows)} ε; "
             f"significantly worse than at least one at {losses} of {len(rows)}"]
    return finish(results, entries, CLAIM, holds,
                  [e for _, es in rows for k, e in enumerate(es) if k != 1], lines, notes)


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
