"""Figure for experiment ``dp2_logistic`` ([DP2] Fig. 3): ``h(s)`` versus the delay ``s``.

Li et al., *Differentially Private Adaptive Optimization with Delayed Preconditioners* (ICLR 2023),
§4.1 / Fig. 3 and App. A.2: the staleness metric

    h(s) = max_t E||g^t||_1 / (E||G^{⌊t/s⌋s}/s||_1 + d ε_a)

(the appendix form, Eq. 29; ``g^t`` the clean minibatch gradient of step ``t``, ``G`` the latest
accumulator of noisy DP-SGD releases that refreshed the preconditioner, the max over the adaptive
steps) is small for every delay and grows with ``s`` (App. A.2: ``h(s) ≲ c1 s + c2``).  Computed by
:func:`analysis.delay.h_of_s` from the per-step traces of the DP² evaluation runs at each ``s``
(:func:`analysis.delay.record_h_traces`), all at DP²'s tuned setting with only ``s`` changed
(``h`` depends on ε_a, the clips and the step sizes); expectations are means over trials.

Left: ``h(s)`` with percentile-bootstrap 95% intervals over trials and the least-squares line
``c1 s + c2`` (:func:`analysis.delay.fit_h`).  Right: the per-step ratio before the max, on the
adaptive steps.  Reads only saved results.  Standalone::

    python -m dpsim.paper_figures.fig_dp2_h_of_s results/dp2_logistic/quick [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

import numpy as np
from scipy import stats as _st

from dpsim.analysis import delay

from . import style
from .dp2_common import eps_text, hp_text, load, main_sigma, problem_text

NAME = "fig_dp2_h_of_s"
CLAIM = ("h(s) — the ratio of current gradient ℓ1 norms to the delayed, averaged private gradients "
         "that build DP²'s preconditioner — is small for every delay s and increases with s, as "
         "App. A.2's bound h(s) ≲ c1·s + c2 says ([DP2] §4.1, Fig. 3).")
LEVEL = 0.95
N_BOOT = 400
BOOT_SEED = 2023
SMALL = 10.0  # "small" read as order one: the paper gives no number (Fig. 3 has no table)


def _rows(entries):
    sig = main_sigma(entries)
    rows = sorted((e for e in entries.values()
                   if e.method == "dp2_rmsprop" and e.s is not None and e.h and e.sigma == sig),
                  key=lambda e: e.s)
    if len(rows) < 2:
        raise ValueError(f"{NAME}: need DP² traces at two or more delays")
    return sig, rows


def _h_table(rows):
    """``[(s, h, lo, hi)]`` and the bootstrap slope distribution of the fitted line."""
    traces = [delay.HTraces.from_result(e.res) for e in rows]
    out = []
    for e, tr in zip(rows, traces):
        h, lo, hi = delay.h_of_s(tr, e.s, ci=LEVEL, n_boot=N_BOOT, seed=BOOT_SEED)
        out.append((e.s, h, lo, hi))
    rng = np.random.default_rng(BOOT_SEED)
    s_arr = np.array([r[0] for r in out], dtype=float)
    masks = [tr.adaptive for tr in traces]
    slopes = []
    for _ in range(N_BOOT):
        hb = [np.max(delay.h_ratios(tr, idx=rng.integers(0, tr.trials, tr.trials))[m])
              for tr, m in zip(traces, masks)]
        slopes.append(delay.fit_h(s_arr, hb)[0])
    return out, np.array(slopes), traces


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    sig, rows = _rows(load(results))
    table, slopes, traces = _h_table(rows)
    s = np.array([r[0] for r in table], dtype=float)
    h = np.array([r[1] for r in table])
    fit = delay.fit_h(s, h)
    colors = style.sequential(len(rows))
    with style.context():
        fig, axes = style.figure(1, 2, width=3.7, height=3.2)
        ax = axes[0][0]
        # the max of trial means is biased upward, so the point can sit outside its bootstrap CI
        lo_err = np.maximum(h - np.array([r[2] for r in table]), 0.0)
        hi_err = np.maximum(np.array([r[3] for r in table]) - h, 0.0)
        ax.errorbar(s, h, yerr=[lo_err, hi_err], fmt="o",
                    color="#d62728", capsize=3, label=f"h(s), {int(LEVEL * 100)}% bootstrap CI")
        xs = np.linspace(0, s.max() * 1.05, 50)
        lo_c1, hi_c1 = np.quantile(slopes, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
        ax.plot(xs, fit.c1 * xs + fit.c2, color="0.3", linestyle="--",
                label=f"fit c1·s + c2: c1 = {fit.c1:.2e} [{lo_c1:.1e}, {hi_c1:.1e}],\n"
                      f"c2 = {fit.c2:.3g}, R² = {fit.r2:.2f}")
        ax.set_xlabel("delay s (steps)")
        ax.set_ylabel("h(s)  (appendix form, Eq. 29)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"(a) h(s) vs s (DP²-RMSProp, σ = {sig:g}, ε = {eps_text(rows[0].res)})",
                     fontsize=8.5)
        ax.text(0.02, 0.97, hp_text(rows[0].res).split(", s=")[0], transform=ax.transAxes, va="top",
                fontsize=6.5, color="0.3")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2))
        ax2 = axes[0][1]
        for e, tr, c in zip(rows, traces, colors):
            r = delay.h_ratios(tr)
            t = np.arange(1, tr.steps + 1)
            ax2.plot(t, np.where(tr.adaptive, r, np.nan), color=c, lw=0.9, label=f"s = {e.s}")
        ax2.set_yscale("log")
        ax2.set_xlabel("step t (adaptive steps only)")
        ax2.set_ylabel(r"$E\|g^t\|_1 / (E\|G/s\|_1 + d\,\epsilon_a)$")
        ax2.set_title("(b) per-step ratio; h(s) is its max", fontsize=8.5)
        ax2.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3)
        fig.suptitle(f"h(s) vs delay ([DP2] Fig. 3) — "
                     f"{problem_text(rows[0].res)}; {rows[0].res.trials} trials", fontsize=8.5)
        return style.save(fig, out_dir, NAME)


def evaluate(results: Mapping[str, object]) -> dict:
    """Holds when every ``h(s)`` is of order one (below ``SMALL`` = 10: "small" — the paper prints
    no value) and the bootstrap 95% CI of the fitted slope ``c1`` is above 0 ("increases with s").
    Does not hold when some ``h(s)``'s CI lies above ``SMALL`` or the slope's CI lies below 0; else
    inconclusive."""
    sig, rows = _rows(load(results))
    table, slopes, _ = _h_table(rows)
    s = np.array([r[0] for r in table], dtype=float)
    h = np.array([r[1] for r in table])
    fit = delay.fit_h(s, h)
    lo_c1, hi_c1 = np.quantile(slopes, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    rho = _st.spearmanr(s, h).statistic if len(s) > 2 else float("nan")
    lines = [f"h(s) (App. A form, max over adaptive steps of the trial-mean ratio; {int(LEVEL * 100)}% "
             f"percentile bootstrap over {rows[0].res.trials} trials; the max of trial means is biased "
             f"upward, so a point can sit at the edge of its interval), DP²-RMSProp at σ = {sig:g} with "
             f"the main tuned setting ({hp_text(rows[0].res).split(', s=')[0]}) and only s changed.", "",
             "| s | h(s) | 95% CI |", "|---|---|---|"]
    for si, hi_, lo, up in table:
        lines.append(f"| {si} | {hi_:.4g} | [{lo:.4g}, {up:.4g}] |")
    lines += ["", f"Fit h(s) ≈ c1·s + c2: c1 = {fit.c1:.3e} "
                  f"(bootstrap 95% CI [{lo_c1:.2e}, {hi_c1:.2e}]), "
                  f"c2 = {fit.c2:.4g}, R² = {fit.r2:.3f}; Spearman ρ(s, h) = {rho:.2f}."]
    small = bool(np.all(h < SMALL))
    not_small = any(lo > SMALL for _, _, lo, _ in table)
    inc, dec = lo_c1 > 0, hi_c1 < 0
    if small and inc:
        holds = True
    elif not_small or dec:
        holds = False
    else:
        holds = None
    verdict = (f"max h(s) = {h.max():.3g} ({'all below' if small else 'not all below'} {SMALL:g}, "
               "our reading of 'small' as order one); "
               f"slope c1 {'> 0' if inc else ('< 0' if dec else 'not distinguishable from 0')} at 95%.")
    return {"claim": CLAIM, "measured": "\n".join(lines), "holds": holds, "verdict": verdict}


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
