"""Figure for experiment ``adambc`` ([ADAMBC] Props. 3–4, Tables 3–5): tail bounds vs measured.

One row per ε, one column per tail level α.  Solid line with band: the measured
``(1−α)``-quantile of ``|v̂^p_t − v̂^c_t − Φ| = |v̂^corr − v̂^c|`` (no floor) over coordinates ×
trials of the frozen runs (fixed parameters and batches, Props. 3–4's setting), against t; band:
95% bootstrap CI over trials.  Lines: Prop. 3 with the ν of its proof and with the ν of its
statement (which the paper's Table 3 uses), and Prop. 4 (corrected ``b``; identical to the
paper's in the sub-Gaussian branch), from :mod:`analysis.concentration`.  Dotted: Φ.

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
CLAIM = ("Propositions 3 and 4 bound the deviation |v̂^corr_t − v̂^c_t| of the bias-corrected "
         "second moment: P(deviation ≥ ξ(α, t)) ≤ α; Prop. 3 is much closer to the measured "
         "deviation than Prop. 4 ([ADAMBC] App. C, Tables 3–5).")
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
        # thin the measured curve to ≤ 40 points for the bootstrap
        pick = np.unique(np.round(np.geomspace(1, len(steps), 40)).astype(int) - 1)
        for ax, alpha in zip(row, ALPHAS):
            q = [common.bootstrap_quantile(dev[k], 1 - alpha, n_boot=200, seed=k) for k in pick]
            est, lo, hi = (np.array(v) for v in zip(*q))
            t = steps[pick]
            style.band(ax, t, lo, hi, MEAS)
            ax.plot(t, est, color=MEAS, label="measured (1−α)-quantile")
            tt = np.unique(np.round(np.geomspace(max(1, steps[0]), steps[-1], 200)))
            b3, b3s, b4 = _bounds(alpha, tt, d["frozen-private"])
            ax.plot(tt, b3, color=P3, label="Prop. 3 (ν of the proof)")
            ax.plot(tt, b3s, color=P3S, ls="--", label="Prop. 3 (ν of the statement, Table 3)")
            ax.plot(tt, b4, color=P4, ls="-.", label="Prop. 4")
            ax.axhline(ph, color="0.4", ls=":", lw=1.0, label="Φ")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("step t (parameters frozen)")
            ax.set_title(f"ε = {common.eps_text(d['frozen-private'])}, α = {alpha:g}")
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
    P̂(dev ≥ ξ) of Props. 3 (proof ν) and 4 (mean over trials of the per-trial fraction of
    coordinates, Student-t CI at the Bonferroni level 1 − 0.05/m over the m checks).  A bound
    holds when every lower CI end of its exceedance frequency is ≤ α.  The claim holds when both
    hold and Prop. 3 is the closer of the two everywhere; it fails when either bound fails."""
    data = common.need(common.load(results), SLOTS, NAME)
    rows_in = []
    for eps, d in data.items():
        steps, dev, ph = _dev(d)
        for t in _table_steps(steps):
            k = int(np.nonzero(steps == t)[0][0])
            for alpha in ALPHAS:
                rows_in.append((eps, d, t, k, alpha, dev, ph))
    m = 2 * len(rows_in)
    level = 1 - 0.05 / m
    lines = [
        "Deviation |v̂^p − v̂^c − Φ| at DP-Adam's trained point (lr frozen, same batches and noise), "
        "pooled over trials × coordinates. q̂: measured (1−α)-quantile [95% bootstrap CI over "
        f"trials]; P3: Prop. 3 (ν of the proof), P3-stmt: ν of the statement (Table 3's), P4: Prop. 4; "
        f"exceedance frequencies with {100 * level:.2f}% CIs (Bonferroni over {m} checks).",
        "",
        "| ε | t | α | q̂ [CI] | P3 | P3-stmt | P4 | P̂(dev ≥ P3) | P̂(dev ≥ P4) | P4/q̂ | P3/q̂ |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ok3 = ok4 = closer = True
    worst3 = 0.0
    for eps, d, t, k, alpha, dev, ph in rows_in:
        x = dev[k]
        q, lo, hi = common.bootstrap_quantile(x, 1 - alpha, n_boot=300, seed=t)
        b3, b3s, b4 = (float(v) for v in _bounds(alpha, t, d["frozen-private"]))
        f3 = (x >= b3).mean(axis=1)
        f4 = (x >= b4).mean(axis=1)
        m3, h3 = stats.mean_ci(f3, level=level)
        m4, h4 = stats.mean_ci(f4, level=level)
        h3 = 0.0 if not np.isfinite(h3) else h3
        h4 = 0.0 if not np.isfinite(h4) else h4
        ok3 &= (m3 - h3) <= alpha
        ok4 &= (m4 - h4) <= alpha
        closer &= b3 < b4
        worst3 = max(worst3, m3 / alpha)
        lines.append(f"| {common.eps_text(d['frozen-private'])} | {t} | {alpha:g} | {q:.2e} [{lo:.2e}, {hi:.2e}] | "
                     f"{b3:.2e} | {b3s:.2e} | {b4:.2e} | {m3:.4f} ± {h3:.4f} | {m4:.4f} ± {h4:.4f} | "
                     f"{b4 / q:.3g} | {b3 / q:.3g} |")
    holds = (ok3 and ok4 and closer) if (ok3 and ok4) else False
    why3 = ("it holds here because the clean per-coordinate gradients are small next to √Φ (the "
            "cross term 2ḡz/B is then minor)" if ok3 else
            "here the clean per-coordinate gradients are not small next to √Φ (v̂^c is a sizeable "
            "fraction of Φ on the large-scale coordinates of this ill-conditioned problem), so the "
            "cross term 2ḡz/B that Prop. 3's proof drops is not negligible and its bound is "
            "exceeded; the bound is only claimed for the noise-only part (the paper's setting has "
            "v̂^c ≪ Φ)")
    verdict = (f"Prop. 4 {'holds at every' if ok4 else 'FAILS at some'} and Prop. 3 "
               f"{'holds at every' if ok3 else 'FAILS at some'} (ε, t, α) checked (largest Prop. 3 exceedance / α = {worst3:.2f}); Prop. 3 is "
               f"{'tighter than' if closer else 'not always tighter than'} Prop. 4, which is loose by "
               "its C√Φ term (it allows |ḡ| = C in every coordinate). Prop. 3 covers the noise-only "
               f"part; {why3} — with |ḡ| ≈ C it is violated (see dpsim verify, [ADAMBC] "
               "concentration). The paper's printed Tables 3–4, recomputed, follow the table above.")
    lines += [""] + paper_tables()
    return {"claim": CLAIM, "measured": "\n".join(lines), "holds": holds, "verdict": verdict}


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
