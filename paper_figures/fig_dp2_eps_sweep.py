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
from .dp2_common import (finish, METHOD_STYLE, better, ci_text, delta_of, eps_of, finals, hp_text, load,
                         render_eps_sweep, sweep_rows)

NAME = "fig_dp2_eps_sweep"
CLAIM = ("DP²-RMSProp achieves a better privacy/utility trade-off than DP-SGD and DP-RMSProp at "
         "every privacy budget ε of the sweep ([DP2] §5.1, Fig. 5).")
METHODS = ("dp_sgd", "dp_rmsprop", "dp2_rmsprop")


def _table(entries):
    return sweep_rows(entries, METHODS, "dp2_rmsprop", NAME)


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    return render_eps_sweep(results, out_dir, name=NAME, methods=METHODS, dp2_method="dp2_rmsprop",
                            suptitle="Privacy/utility trade-off ([DP2] Fig. 5) — mean over {trials} trials, bars: 95% CI")


def evaluate(results: Mapping[str, object]) -> dict:
    """At each ε: is DP² significantly below both baselines (Welch 95% CI)?  Holds when it is at
    every ε; does not hold when at some ε it is significantly above one of them and at no ε below
    both; else inconclusive."""
    entries = load(results)
    rows = _table(entries)
    lines = [f"Final excess training loss (mean ± 95% CI over trials); ε at δ = "
             f"{style.fmt_float(delta_of(rows[0][1][0].res))}; learning rates re-tuned per σ (DP²: the adaptive-phase η₂ only).", "",
             "| σ | ε | DP-SGD | DP-RMSProp | DP² | DP² vs DP-SGD | DP² vs DP-RMSProp |",
             "|---|---|---|---|---|---|---|"]
    wins, losses, notes = 0, 0, []
    for sig, es in rows:
        f = [finals(e.res) for e in es]
        v1, t1 = better(f[2], f[0])
        v2, t2 = better(f[2], f[1])
        lines.append(f"| {sig:g} | {eps_of(es[2].res):.3g} | {ci_text(f[0])} | {ci_text(f[1])} | "
                     f"{ci_text(f[2])} | {t1} | {t2} |")
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
    notes = [f"DP² significantly better than both baselines at {wins} of {len(rows)} ε; "
             f"significantly worse than at least one at {losses} of {len(rows)}"]
    return finish(results, entries, CLAIM, holds, [e for _, es in rows for e in es], lines, notes)


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
