"""Figure for experiment ``adambc`` ([ADAMBC] Props. 3–4, Tables 3–5): tail bounds vs measured.

One row per ε, one column per tail level α.  Solid line with band: the measured
``(1−α)``-quantile of ``|v̂^p_t − v̂^c_t − Φ| = |v̂^corr − v̂^c|`` (no floor) over coordinates ×
trials of the frozen runs (fixed parameters and batches, Props. 3–4's setting), against t; band:
95% bootstrap CI over trials.  Lines: Prop. 3 as stated (the ν of its statement, which the
paper's Table 3 uses; the claim tested), Prop. 3 with the ν of its proof (dashed, a factor 2
smaller: a note), and Prop. 4 (corrected ``b``; identical to the paper's in the sub-Gaussian
branch), from :mod:`analysis.concentration`.  Dotted: Φ.

Standalone::

    python -m dpsim.paper_figures.fig_adambc_bounds results/adambc/quick [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

import numpy as np

from dpsim.analysis import stats
from dpsim.analysis.checks.base import agrees_as_printed
from dpsim.analysis.concentration import TABLE3, TABLE3_DISAGREE, TABLE4, prop3_bound, prop4_bound

from . import adambc_common as common
from . import style

NAME = "fig_adambc_bounds"
SLOTS = ("frozen-private", "frozen-clean")
ALPHAS = (0.01, 0.05, 0.10)
CLAIM = ("Propositions 3 and 4, as stated, bound the deviation |v̂^corr_t − v̂^c_t| of the "
         "bias-corrected second moment: P(deviation ≥ ξ(α, t)) ≤ α; Prop. 3 is much closer to the "
         "measured deviation than Prop. 4 ([ADAMBC] App. C, Tables 3–5).")
MEAS, P3, P3S, P4 = "#d95f02", "#1b9e77", "#66a61e", "#7570b3"


def _setting(res):
    return (float(common.hp(res, "noise_multiplier")), float(common.hp(res, "clip")),
            res.config["batch_size"], float(common.hp(res, "beta2")))


def _dev(d):
    mom = common.frozen_moments(d["frozen-private"], d["frozen-clean"])
    return mom["steps"], np.abs(mom["vp"] - mom["vc"] - mom["phi"]), mom["phi"]  # (K, R, d)


def _bounds(alpha, t, res):
    s, C, B, b2 = _setting(res)
    return (np.asarray(prop3_bound(alpha, t, s, C, B, b2)),
            np.asarray(prop3_bound(alpha, t, s, C, B, b2, nu="statement")),
            np.asarray(prop4_bound(alpha, t, s, C, B, b2)))


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    return style.render_with(_render, common.need(common.load(results), SLOTS, NAME), out_dir)


def _render(data, out_dir) -> list[Path]:
    fig, axes = style.figure(len(data), len(ALPHAS), width=3.1, height=2.7)
    for row, (eps, d) in zip(axes, data.items()):
        steps, dev, ph = _dev(d)
        s, C, B, b2 = _setting(d["frozen-private"])
        # thin the measured curve to ≤ 30 points for the bootstrap
        pick = np.unique(np.round(np.geomspace(1, len(steps), 30)).astype(int) - 1)
        for ax, alpha in zip(row, ALPHAS):
            q = [common.bootstrap_quantile(dev[k], 1 - alpha, n_boot=100, seed=k) for k in pick]
            est, lo, hi = (np.array(v) for v in zip(*q))
            t = steps[pick]
            style.band(ax, t, lo, hi, MEAS)
            ax.plot(t, est, color=MEAS, label="measured (1−α)-quantile")
            tt = np.unique(np.round(np.geomspace(max(1, steps[0]), steps[-1], 200)))
            b3, b3s, b4 = _bounds(alpha, tt, d["frozen-private"])
            ax.plot(tt, b3s, color=P3S, label="Prop. 3 as stated (its ν, Table 3)")
            ax.plot(tt, b3, color=P3, ls="--", lw=0.9, label="Prop. 3 with the proof's ν (½×)")
            ax.plot(tt, b4, color=P4, ls="-.", label="Prop. 4")
            ax.axhline(ph, color="0.4", ls=":", lw=1.0, label="Φ")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("step t (parameters frozen)")
            ax.set_title(f"ε = {eps:g}, α = {alpha:g}")
        row[0].set_ylabel(r"$|\hat v^{p}_t-\hat v^{c}_t-\Phi|$")
        row[0].legend(loc="upper right", fontsize=6)
    first = data[next(iter(data))]["frozen-private"]
    s, C, B, b2 = _setting(first)
    fig.suptitle(f"Props. 3–4 vs measured deviation — C = {C:g}, B = {B}, β2 = {b2:g}, "
                 f"{first.trials} trials × {first.config['problem']['d']} coordinates; band: 95% "
                 "bootstrap CI (trials resampled)", fontsize=9)
    return style.save(fig, out_dir, NAME)


def _table_steps(steps):
    want = [t for t in (10, 100, 1000, 10000) if t in set(steps.tolist())]
    if steps[-1] not in want:
        want.append(int(steps[-1]))
    return want or [int(steps[0]), int(steps[-1])]


def paper_tables() -> list[str]:
    """The numerical reproduction of [ADAMBC] App. C Tables 3–4 (B = 256, σ = 0.4, β2 = 0.999):
    each printed cell beside the value dpsim computes with the calls of the ``dpsim verify`` rows
    ``adambc_table3`` (Prop. 3 with the ν of its *statement*, the correct branch inversion) and
    ``adambc_table4`` (Prop. 4, the paper's and the corrected sub-exponential ``b``), and whether
    the two agree at the printed 4 significant digits (✓) or not (✗, reason below the table)."""
    ts = sorted({t for _, _, t in TABLE3})
    head = "| C | α | " + " | ".join(f"t = {t}" for t in ts) + " |"
    rule = "|---|---|" + "---|" * len(ts)

    def cell(printed, val):
        return f"{printed:.3e} → {val:.3e} {'✓' if agrees_as_printed(f'{printed:.3e}', val) else '✗'}"

    out = ["**Paper's Tables 3–4 recomputed** (App. C, B = 256, σ = 0.4, β2 = 0.999; each cell: "
           "printed → dpsim, ✓ = equal at the printed 4 digits; the values of the `dpsim verify` "
           "rows `adambc_table3` and `adambc_table4`).", "",
           "Table 3 — Prop. 3 bound ξ with P(|v̂^corr − v̂^c| ≥ ξ) ≤ α (dpsim: ν of the statement, "
           "as the paper's table; the proof's ν is 2× smaller, see the verdict):", "", head, rule]
    for C, a in sorted({(C, a) for C, a, _ in TABLE3}):
        out.append(f"| {C:g} | {a:g} | " + " | ".join(
            cell(TABLE3[(C, a, t)], prop3_bound(a, t, 0.4, C, 256, 0.999, nu="statement"))
            for t in ts) + " |")
    out += ["", "✗ cells of Table 3: " + "; ".join(
        f"C={C:g}, α={a:g}, t={t}: {why}" for (C, a, t), why in sorted(TABLE3_DISAGREE.items()))
        + " (dpsim uses the correct inversion).", "",
        "Table 4 — Prop. 4 bound ξ with P(|v̂^p − E v̂^p| ≥ ξ) ≤ α (dpsim: the paper's b; the "
        "corrected b gives the same values, every cell being in the sub-Gaussian branch):", "",
        head, rule]
    for C, a in sorted({(C, a) for C, a, _ in TABLE4}):
        out.append(f"| {C:g} | {a:g} | " + " | ".join(
            cell(TABLE4[(C, a, t)], prop4_bound(a, t, 0.4, C, 256, 0.999, convention="paper"))
            for t in ts) + " |")
    same = all(agrees_as_printed(f"{prop4_bound(a, t, 0.4, C, 256, 0.999, convention='paper'):.3e}",
                                 prop4_bound(a, t, 0.4, C, 256, 0.999, convention="corrected"))
               for C, a, t in TABLE4)
    out += ["", f"Corrected b equal to the paper's b at 4 digits in every Table 4 cell: "
                f"{'yes' if same else 'no'}."]
    return out


def evaluate(results: Mapping[str, object]) -> dict:
    """Per ε, table step t (10, 100, 1000, 10000 when recorded, and the last) and α: the measured
    (1−α)-quantile of the deviation (bootstrap CI), the three bounds, and the exceedance frequency
    P̂(dev ≥ ξ) of Prop. 3 as stated (the ν of its statement, as the paper's Table 3), of Prop. 3
    with the ν of its proof (a note) and of Prop. 4 (mean over trials of the per-trial fraction of
    coordinates, Student-t CI at the Bonferroni level 1 − 0.05/m over the m checks).  A bound
    holds when every lower CI end of its exceedance frequency is ≤ α.  The claim (Props. 3 and 4
    as stated, Prop. 3 the closer) holds when both hold and the stated Prop. 3 is below Prop. 4
    everywhere; it does not hold when either fails; inconclusive when both hold but Prop. 3 is
    not always the closer."""
    data = common.need(common.load(results), SLOTS, NAME)
    rows_in = []
    for eps, d in data.items():
        steps, dev, ph = _dev(d)
        for t in _table_steps(steps):
            k = int(np.nonzero(steps == t)[0][0])
            for alpha in ALPHAS:
                rows_in.append((eps, d, t, k, alpha, dev, ph))
    m = 3 * len(rows_in)
    level = 1 - 0.05 / m
    lines = [
        "Deviation |v̂^p − v̂^c − Φ| at DP-Adam's trained point (lr frozen, same batches and noise), "
        "pooled over trials × coordinates. q̂: measured (1−α)-quantile [95% bootstrap CI over "
        "trials]; P3-stmt: Prop. 3 as stated (its ν; the paper's Table 3), P3-proof: with the ν of "
        f"its proof (½×), P4: Prop. 4; exceedance frequencies with {100 * level:.2f}% CIs "
        f"(Bonferroni over {m} checks).",
        "",
        "| ε | t | α | q̂ [CI] | P3-stmt | P3-proof | P4 | P̂(dev ≥ P3-stmt) | P̂(dev ≥ P3-proof) | "
        "P̂(dev ≥ P4) | P3-stmt/q̂ | P4/q̂ |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ok3 = ok3p = ok4 = closer = True
    worst3 = worst3p = 0.0
    margin = np.inf
    bad3p = 0
    for eps, d, t, k, alpha, dev, ph in rows_in:
        x = dev[k]
        q, lo, hi = common.bootstrap_quantile(x, 1 - alpha, n_boot=300, seed=t)
        b3, b3s, b4 = (float(v) for v in _bounds(alpha, t, d["frozen-private"]))
        cis = []
        for b in (b3s, b3, b4):
            mm, hh = stats.mean_ci((x >= b).mean(axis=1), level=level)
            cis.append((float(mm), 0.0 if not np.isfinite(hh) else float(hh)))
        (m3, h3), (m3p, h3p), (m4, h4) = cis
        ok3 &= (m3 - h3) <= alpha
        ok3p &= (m3p - h3p) <= alpha
        bad3p += (m3p - h3p) > alpha
        ok4 &= (m4 - h4) <= alpha
        closer &= b3s < b4
        worst3 = max(worst3, m3 / alpha)
        worst3p = max(worst3p, m3p / alpha)
        margin = min(margin, b3s / q) if q > 0 else margin
        lines.append(f"| {eps:g} | {t} | {alpha:g} | {q:.2e} [{lo:.2e}, {hi:.2e}] | "
                     f"{b3s:.2e} | {b3:.2e} | {b4:.2e} | {m3:.4f} ± {h3:.4f} | {m3p:.4f} ± {h3p:.4f} | "
                     f"{m4:.4f} ± {h4:.4f} | {b3s / q:.3g} | {b4 / q:.3g} |")
    from dpsim.experiments import verdicts as verdicts_mod

    if not (ok3 and ok4):
        category = verdicts_mod.FAILS
    elif closer:
        category = verdicts_mod.HOLDS
    else:
        category = verdicts_mod.INCONCLUSIVE
    n = len(rows_in)
    verdict = (f"Category: {category}. Prop. 3 as stated {'holds' if ok3 else 'FAILS'} in "
               f"{'every one' if ok3 else 'some'} of the {n} (ε, t, α) checked (the bound exceeds the "
               f"measured quantile by at least {margin:.3g}×; largest exceedance frequency / α = "
               f"{worst3:.2f}); Prop. 4 {'holds at every' if ok4 else 'FAILS at some'} row; Prop. 3 "
               f"is {'tighter than' if closer else 'not always tighter than'} Prop. 4, which is "
               "loose by its C√Φ term (it allows |ḡ| = C in every coordinate). Note: the proof of "
               "Prop. 3 derives a ν half the statement's (Lemma 1 summed in quadrature; the "
               "statement, the §4 text and Table 3 print the larger one); with the proof's ν the "
               f"bound is {'also met' if ok3p else f'exceeded in {bad3p} of the {n} rows'} "
               f"(largest exceedance / α = {worst3p:.2f}), since the proof bounds only the noise "
               "part and drops the cross term 2ḡz/B, which is not negligible where a coordinate's "
               "clean gradient is comparable to √Φ (see dpsim verify, [ADAMBC] concentration). "
               "The paper's printed Tables 3–4, recomputed, follow the table above.")
    lines += [""] + paper_tables()
    return style.finding(CLAIM, lines, category, verdict)


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
