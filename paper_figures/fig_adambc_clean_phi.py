"""Figure for experiment ``adambc`` ([ADAMBC] Fig. 2 right): clean Adam with a constant added to
its second moment.

[ADAMBC] §3 isolates the DP bias from the DP noise: per-example gradients are clipped but *no*
noise is added, and a constant ``Φ'`` is added under the square root of Adam's denominator,
``Δ_t = m̂^c_t/√(v̂^c_t + Φ')`` (:func:`experiments.adambc.clean_adam_plus`).  ``Φ' = 0`` is clipped
clean Adam; as ``Φ'`` grows past the clean second moment the update becomes ``m̂^c/√Φ'``, clean
SGD with momentum.  The paper's finding: performance degrades as ``Φ'`` grows, i.e. the bias alone
turns Adam into SGDM.  Each ``Φ'`` has its own learning rate, tuned on separate trials.

Left: mean final excess loss against ``Φ'`` (log axis; 95% CI bars; tuned η annotated);
horizontal lines and bands: ``Φ' = 0`` (clipped clean Adam) and clean clipped SGDM (``β = β1``, the
``Φ' → ∞`` limit), each at its tuned η; dotted verticals: the DP bias ``Φ = (σC/B)²`` of each ε of
the experiment, i.e. where DP-Adam's denominator sits.  Right: mean excess loss over steps, one
line per ``Φ'``, SGDM dashed.

Standalone::

    python -m dpsim.paper_figures.fig_adambc_clean_phi results/adambc/quick [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

import numpy as np

from dpsim.analysis import stats
from dpsim.experiments import verdicts as verdicts_mod
from dpsim.experiments.pipeline import Saved

from . import adambc_common as common
from . import style

NAME = "fig_adambc_clean_phi"
CLAIM = ("Without any DP noise, adding a constant Φ' to Adam's second moment (clipped gradients, "
         "Δ = m̂/√(v̂ + Φ')) degrades its training loss as Φ' grows, towards SGD with momentum: "
         "the DP bias alone turns Adam into SGDM ([ADAMBC] §3, Fig. 2 right).")
ADAM_COLOR, SGDM_COLOR = "#7570b3", "#d95f02"


def _data(results):
    npv = common.nonprivate(results)
    if not all(s in npv for s in ("clean-phi", "clean-sgdm")):
        raise ValueError(f"{NAME}: no clean-phi/clean-sgdm results among {sorted(npv)}")
    saved = Saved.of(results)
    meta = next(saved.meta(lab) for lab in saved if saved.meta(lab).get("slot") == "clean-phi")
    res = npv["clean-phi"]
    sl = common.blocks(res, int(meta["trials_per_ratio"]))
    rows = [dict(ratio=float(r), phi=float(r) * float(meta["phi_ref"]), lr=common.lr_text(res, s),
                 final=common.finals(res, s), sel=s)
            for r, s in zip(meta["phi_ratios"], sl)]
    return res, meta, rows, npv["clean-sgdm"]


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    res, meta, rows, sgdm = _data(results)
    zero = next(r for r in rows if r["ratio"] == 0.0)
    pos = [r for r in rows if r["ratio"] > 0.0]
    with style.context():
        fig, axes = style.figure(1, 2, width=3.8, height=3.0)
        ax = axes[0][0]
        for ref, color, text in ((zero, ADAM_COLOR, f"Φ' = 0 (clipped Adam), η = {zero['lr']}"),
                                 (dict(final=common.finals(sgdm), lr=common.lr_text(sgdm)),
                                  SGDM_COLOR, f"clipped SGDM (β = {float(common.hp(sgdm, 'beta')):g}), "
                                              f"η = {common.lr_text(sgdm)}")):
            m, h = stats.mean_ci(ref["final"])
            ax.axhspan(max(m - h, m * 1e-3), m + h, color=color, alpha=0.2, lw=0)
            ax.axhline(m, color=color, lw=1.2, ls="-" if color == ADAM_COLOR else "--", label=text)
        if pos:
            x = np.array([r["phi"] for r in pos])
            m, h = (np.array(v) for v in zip(*(stats.mean_ci(r["final"]) for r in pos)))
            lo = np.minimum(h, m * (1 - 1e-3))  # a log axis: keep the lower bar above 0
            ax.errorbar(x, m, yerr=(lo, h), color="k", marker="o", ms=4, capsize=3,
                        label="clipped Adam + Φ', η tuned per Φ'")
            for xi, mi, r in zip(x, m, pos):
                ax.annotate(f"η={r['lr']}", (xi, mi), textcoords="offset points", xytext=(3, 6),
                            fontsize=6)
            ax.set_xscale("log")
        phis = sorted(meta["phi_of_epsilon"].items(), key=lambda kv: float(kv[0]))
        for i, (e, ph) in enumerate(phis):  # greys: apart from the method colours
            grey = str(round(0.15 + 0.5 * i / max(len(phis) - 1, 1), 2))
            ax.axvline(float(ph), color=grey, ls=(0, (1, 1 + i)), lw=1.2,
                       label=f"Φ = (σC/B)² of DP at ε = {e}")
        ax.set_yscale("log")
        ax.set_xlabel("Φ' added to clean v̂")
        ax.set_ylabel(r"final excess loss $F(w_T)-F^\star$")
        ax.set_title(f"no noise; {len(zero['final'])} trials per Φ', 95% CI")
        ax.legend(loc="best", fontsize=5.5)
        common.plain_log_ticks(ax)
        ax = axes[0][1]
        colors = style.sequential(len(rows))
        for r, c in zip(rows, colors):
            mean = np.mean(np.asarray(res.excess_loss, dtype=float)[:, r["sel"]], axis=1)
            ax.plot(res.steps, mean, color=c,
                    label="Φ' = 0" if r["phi"] == 0 else f"Φ' = {common.fmt(r['phi'], 2)}")
        ax.plot(sgdm.steps, np.mean(np.asarray(sgdm.excess_loss, dtype=float), axis=1),
                color=SGDM_COLOR, ls="--", label="clipped SGDM")
        ax.set_yscale("log")
        ax.set_xlabel("step t")
        ax.set_ylabel(r"mean excess loss $F(w_t)-F^\star$")
        ax.set_title("training curves")
        ax.legend(loc="best", fontsize=5.5)
        prob = res.config["problem"]
        fig.suptitle(f"Clean (clipped, noiseless) Adam + Φ' — least squares, condition "
                     f"{prob.get('condition', 0):g}, d = {prob['d']}, T = {res.config['steps']}",
                     fontsize=9)
        return style.save(fig, out_dir, NAME)


def evaluate(results: Mapping[str, object]) -> dict:
    """Per ``Φ'``: final excess loss (mean ± 95% CI), tuned η, Welch 95% CI of the difference from
    ``Φ' = 0`` and the ratio to clean SGDM.  Premise: clipped clean Adam (``Φ' = 0``) beats clean
    SGDM (Welch CI of mean(SGDM) − mean(Adam) above 0); otherwise no ``Φ'`` can show the
    transition and the verdict is "setting does not test the claim" (below 0) or inconclusive
    (undecided).  The claim concerns a bias of the DP order and above, so it is judged on the
    ``Φ' ≥ Φ`` rows (``Φ``: the DP bias at the sweep ε): holds when each of them is significantly
    worse than ``Φ' = 0`` and the largest significantly worse than the smallest (degrades as
    ``Φ'`` grows); does not hold when one of them is significantly better than ``Φ' = 0`` or the
    largest significantly better than the smallest; inconclusive otherwise.  ``0 < Φ' < Φ`` rows
    are reported, not judged (a small constant acts as Adam's stability constant).  Grid edges
    (direction-aware, :func:`experiments.verdicts.downgrade_for_edge`): the claimed winner is
    ``Φ' = 0`` (and the smallest judged ``Φ'`` against the largest), the losers the judged
    ``Φ'``."""
    res, meta, rows, sgdm = _data(results)
    zero = next(r for r in rows if r["ratio"] == 0.0)
    fs = common.finals(sgdm)
    ms = float(np.mean(fs))
    lines = [f"Clean runs (clipped at C = {float(common.hp(res, 'clip')):g}, no noise), final excess "
             f"training loss (mean ± 95% CI over {len(zero['final'])} fresh trials per Φ'), each Φ' "
             "at its own tuned η; difference from Φ' = 0 by Welch 95% CI.  Φ of DP at each ε: "
             + ", ".join(f"ε={e}: {float(p):.3g}" for e, p in meta["phi_of_epsilon"].items()) + ".",
             "", "| Φ' | Φ'/Φ(ε=" + f"{meta['phi_ref_epsilon']:g}) | judged | η | final excess loss | "
             "minus Φ'=0 [95% CI] | ratio to Φ'=0 | ratio to SGDM |",
             "|---|---|---|---|---|---|---|---|"]
    judged = sorted((r for r in rows if r["ratio"] >= 1.0), key=lambda r: r["ratio"])
    judged_ids = {id(r) for r in judged}
    worse = better = 0
    small_notes = []
    for r in rows:
        if r is zero:
            diff = "—"
        else:
            d, lo, hi = stats.diff_ci(r["final"], zero["final"])
            diff = f"{d:+.2e} [{lo:+.2e}, {hi:+.2e}]"
            if id(r) in judged_ids:
                worse += lo > 0
                better += hi < 0
            else:
                small_notes.append(f"Φ' = {r['ratio']:g}Φ: {float(np.mean(r['final'])) / float(np.mean(zero['final'])):.2f}× "
                                   f"Φ' = 0 ({'better' if hi < 0 else 'worse' if lo > 0 else 'no significant difference'})")
        mr = float(np.mean(r["final"]))
        lines.append(f"| {common.fmt(r['phi'])} | {r['ratio']:g} | {'yes' if id(r) in judged_ids else 'no'} | "
                     f"{r['lr']} | {stats.fmt_ci(*stats.mean_ci(r['final']))} | {diff} | "
                     f"{mr / float(np.mean(zero['final'])):.3g} | {mr / ms:.3g} |")
    lines.append(f"| clipped SGDM (Φ' → ∞ limit) | — | — | {common.lr_text(sgdm)} | "
                 f"{stats.fmt_ci(*stats.mean_ci(fs))} | — | {ms / float(np.mean(zero['final'])):.3g} "
                 f"| 1 |")
    _, plo, phi_ = stats.diff_ci(fs, zero["final"])
    premise = True if plo > 0 else False if phi_ < 0 else None
    lines += ["", f"**Premise** — clipped clean Adam (Φ' = 0) vs clipped clean SGDM: Welch 95% CI of "
                  f"mean(SGDM) − mean(Adam) = [{plo:.2e}, {phi_:.2e}] — {common.word(premise)}."]
    mono_worse = mono_better = False
    if len(judged) >= 2:
        _, mlo, mhi = stats.diff_ci(judged[-1]["final"], judged[0]["final"])
        mono_worse, mono_better = mlo > 0, mhi < 0
    n = len(judged)
    if premise is False:
        category = verdicts_mod.UNTESTED
    elif not judged:
        category = verdicts_mod.UNTESTED
    elif better or mono_better:
        category = verdicts_mod.FAILS
    elif premise and worse == n and (mono_worse or n == 1):
        category = verdicts_mod.HOLDS
    else:
        category = verdicts_mod.INCONCLUSIVE
    lrs = {f"clean_phi_ratio={r['ratio']:g}.lr": float(r["lr"]) for r in rows}
    edges = common.lr_edges(results, "clean_phi", lrs)
    win_keys = {f"clean_phi_ratio={r['ratio']:g}.lr" for r in [zero] + judged[:1]}
    lose_keys = {f"clean_phi_ratio={r['ratio']:g}.lr" for r in judged}
    category, note = verdicts_mod.downgrade_for_edge(
        category, winner_edges={k: v for k, v in edges.items() if k in win_keys},
        loser_edges={k: v for k, v in edges.items() if k in lose_keys})
    largest = judged[-1] if judged else max(rows, key=lambda r: r["ratio"])
    return style.finding(CLAIM, lines, category,
                         f"Category: {category}" + (f" ({note})" if note else "") + ". "
                         f"Judged on Φ' ≥ Φ(ε={meta['phi_ref_epsilon']:g}): {worse} of {n} "
                         f"significantly worse than Φ' = 0, {better} significantly better; the "
                         f"largest ({common.fmt(largest['phi'])}) ends at "
                         f"{float(np.mean(largest['final'])) / float(np.mean(judged[0]['final'])) if judged else float('nan'):.3g}× "
                         f"the smallest judged Φ' and {float(np.mean(largest['final'])) / ms:.3g}× "
                         "clean SGDM's loss."
                         + (" Not judged (Φ' < Φ, a stability-constant size): " + "; ".join(small_notes) + "."
                            if small_notes else ""))


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
