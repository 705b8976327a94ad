"""Figure for ``design_space`` (a): the 1-D sparse logistic regression AdaGrad table of [DESIGN]
§5.1 (RECONSTRUCTED setting), rendered as a table figure (PNG/PDF) plus a Markdown table.

Cells: final population test loss ``E[ℓ(w_T)]`` (mean ± 95% Student-t CI over the evaluation
trials, fresh seeds, at the tuned learning rate and stability constants), per zero fraction and
method; every private method uses DP-MF noise optimized for a single epoch over one pass of the
data (one Gaussian mechanism at σ: the same ε, PLD at δ = 1e-5; the "IME for free" comparator
spends two).  Standalone::

    python -m dpsim.paper_figures.fig_design_adagrad_table results/design_space/quick [OUT_DIR]
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Mapping

import numpy as np

from dpsim.analysis import stats
from dpsim.experiments import verdicts
from dpsim.experiments.pipeline import Saved

from . import design_common as common
from . import style

NAME = "fig_design_adagrad_table"
CLAIM = ("1-D sparse logistic regression, AdaGrad, batch 1, one epoch, DP-MF noise optimized for a "
         "single epoch ([DESIGN] §5.1): independent moment estimation beats DP-AdaGrad via "
         "post-processing (the paper's table: IME 0.5981, IME for free 0.5980, post-processing "
         "0.6010, non-private 0.5976).")
METHODS = (("adagrad", "AdaGrad\n(non-private)"), ("dp_adagrad", "post-processing"),
           ("ime", "IME"), ("ime_free", "IME for free\n(2 releases)"),
           ("stp", "scale-then-\nprivatize"), ("stp_noiseless_v", "STP + noiseless v\n(oracle)"))
PREMISE = ("premise: post-processing is measurably worse than non-private AdaGrad (there is a gap "
           "for a better second-moment estimate to close)")
#: Why the comparison cannot test the paper's table while its constants are reconstructions.
RECONSTRUCTED = ("σ, C and the zero fractions of [DESIGN]'s table were lost in extraction and are "
                 "reconstructions, so the comparison cannot be matched to the paper's numbers")
#: The handicap dpsim's IME carries against the paper's (ALGORITHMS §2.6, dpsim.optimizers.ime).
IME_HANDICAP = ("dpsim's IME releases the square ḡ² with the add/remove sensitivity 2C²/b (2C² at "
                "b = 1; the paper's zero-out bound is C²) and splits the noise σ1 = σ2 = √2σ so the "
                "pair costs one release at σ: its first-moment release is √2× and its square's "
                "2√2 ≈ 2.8× noisier than a C²-sensitivity release at σ, a handicap the paper's "
                "IME does not carry")
STP_NOTE = ("scale-then-privatize over AdaGrad diverges at every grid point: with batch 1 the "
            "noise it adds to the released gradient is proportional to √v + ε_s, so AdaGrad's sum "
            "grows geometrically, v_{t+1} ≥ v_t (1 + ξ_t²) with ξ_t the step's noise in units of "
            "C (E log(1 + z²) ≈ 0.53 per step for i.i.d. N(0, 1) noise at σ = 1; the single-epoch "
            "DP-MF noise has a larger per-step variance), and v overflows float64 within the "
            "pass whatever η and ε_s; every tuning score is ∞, so the values shown are the first "
            "grid point (the bottom edge of η and ε_s, by the tie rule), not a choice")


def _all_diverged(results, label) -> bool:
    """Whether every grid point of the tuning behind ``label`` scored ∞ (all trials diverged):
    the saved "choice" is then the first point of the grid (the tie rule), not a tuned value."""
    scores = common.selection_of(results, label).get("scores") or {}
    vals = [float(v) for v in scores.values()]
    return bool(vals) and not any(np.isfinite(vals))


def _table(results):
    results = Saved.of(results)
    data = {(meta["zero_fraction"], meta["method"]): (lab, res)
            for lab, meta, res in common.load(results, "ada")}
    zfs = sorted({zf for zf, _ in data})
    rows = {}
    for zf in zfs:
        for m, _ in METHODS:
            if (zf, m) not in data:
                continue
            lab, res = data[(zf, m)]
            mask, _, _ = common.chosen(results, lab)
            tl = res.records["test_loss"][-1][mask]
            eps = results.memo(("eps", lab), lambda res=res: common.eps_of(res))
            rows[(zf, m)] = dict(test=tl, point=common.tuned_point(results, lab), eps=eps, label=lab,
                                 all_diverged=_all_diverged(results, lab),
                                 sigma=res.config["hyperparameters"].get("noise_multiplier"),
                                 noise=res.config["hyperparameters"].get("noise"),
                                 n=res.config["problem"]["n"])
    return zfs, rows


def _loss_text(test) -> str:
    """``mean ± half-width`` of the test losses, or how many trials diverged."""
    bad = int(np.sum(~np.isfinite(test)))
    if bad:
        return f"diverged ({bad}/{len(test)} trials non-finite)"
    mean, half = stats.mean_ci(test)
    return f"{mean:.4f} ± {half:.4f}"


def _point_or_none(r) -> str:
    """The tuned values, or a mark (``*``) where every grid point diverged (no choice was made)."""
    return "no finite grid point*" if r.get("all_diverged") else common.point_text(r["point"])


def _cells(zfs, rows, text) -> list[list[str]]:
    """The table body: per zero fraction, per method of :data:`METHODS`, ``text(row)`` of the run
    or "–" where it did not run."""
    return [["–" if rows.get((zf, m)) is None else text(rows[(zf, m)]) for m, _ in METHODS]
            for zf in zfs]


def markdown(results) -> str:
    zfs, rows = _table(results)
    head = "| zero fraction | " + " | ".join(lab.replace("\n", " ") for _, lab in METHODS) + " |"
    lines = [head, "|---" * (len(METHODS) + 1) + "|"]
    cells = _cells(zfs, rows, lambda r: f"{_loss_text(r['test'])} ({_point_or_none(r)}; "
                                        f"ε={common.eps_text(r['eps'])})")
    lines += [f"| {zf:g} | " + " | ".join(line) + " |" for zf, line in zip(zfs, cells)]
    if any(r.get("all_diverged") for r in rows.values()):
        lines += ["", "\\* " + STP_NOTE[0].upper() + STP_NOTE[1:] + "."]
    return "\n".join(lines)


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    results = Saved.of(results)
    zfs, rows = _table(results)
    if not rows:
        raise ValueError(f"{NAME}: no ada- results among {sorted(results)}")
    with style.context():
        h_tab, h_foot = 0.9 + 0.62 * (len(zfs) + 1), 1.0
        fig, axes = style.figure(2, 1, width=11.0, height=(h_tab + h_foot) / 2,
                                 height_ratios=[h_tab, h_foot])
        ax, ax_foot = axes[0][0], axes[1][0]
        ax.axis("off")
        ax_foot.axis("off")
        any_row = next(r for (z, m), r in rows.items() if m == "dp_adagrad")
        col = []
        for m, lab in METHODS:
            e = max((r["eps"] for (z, mm), r in rows.items() if mm == m), default=float("inf"))
            col.append(lab + "\n" + common.eps_label(e))
        text = _cells(zfs, rows, lambda r: f"{_loss_text(r['test'])}\n{_point_or_none(r)}")
        tab = ax.table(cellText=text, rowLabels=[f"zero frac. {z:g}" for z in zfs], colLabels=col,
                       loc="center", cellLoc="center")
        tab.auto_set_font_size(False)
        tab.set_fontsize(6.8)
        tab.scale(1.0, 3.4)
        foot = []
        if any(r.get("all_diverged") for r in rows.values()):
            foot.append("* " + STP_NOTE + ".")
        foot.append("Not a test of the paper's table: " + RECONSTRUCTED + "; " + IME_HANDICAP + ".")
        ax_foot.text(0.0, 1.0, "\n".join(textwrap.fill(t, 200) for t in foot), ha="left",
                     va="top", fontsize=6.5, transform=ax_foot.transAxes)
        n_tr = int(round(np.mean([len(r["test"]) for r in rows.values()])))
        ax.set_title(f"1-D sparse logistic regression (n={any_row['n']}), AdaGrad, batch 1, one pass; "
                     f"σ={any_row['sigma']}, C=1, DP-MF noise {any_row['noise']} (optimized for a "
                     f"single epoch)\nfinal population test loss, mean ± 95% CI over {n_tr} fresh "
                     f"trials at the tuned values (η, ε_a = AdaGrad's ε, ε_s); ε at "
                     f"δ = {style.fmt_float(common.DELTA)}; reconstructed setting", fontsize=8.5)
        paths = style.save(fig, out_dir, NAME)
    md = Path(out_dir) / f"{NAME}.md"
    md.write_text(markdown(results) + "\n")
    return paths + [md]


def evaluate(results: Mapping[str, object]) -> dict:
    """Per zero fraction: the effect is IME − post-processing test loss (Welch 95% CI,
    :func:`experiments.verdicts.from_interval`, claim "below 0"); the premise is post-processing −
    non-private AdaGrad > 0 (CI above 0).  The comparisons are reported as measured (combined over
    the zero fractions that meet the premise, with the direction-aware grid-edge rule: IME the
    claimed winner, post-processing the claimed loser), but the category is *setting does not
    test the claim*: the paper's σ, C and zero fractions are reconstructions
    (:data:`RECONSTRUCTED`) and dpsim's IME carries a handicap the paper's does not
    (:data:`IME_HANDICAP`)."""
    results = Saved.of(results)
    zfs, rows = _table(results)
    lines = ["Final population test loss, mean ± 95% CI (Student t) over the evaluation trials "
             "(fresh seeds) at the tuned values; DP-MF noise optimized for a single epoch. "
             "Non-private AdaGrad is deterministic here (one pass in a fixed order, no noise), so "
             "its interval has width 0. " + common.RECON, "", markdown(results), ""]
    cats, premise_ok, notes, edge_notes = [], [], [], []
    for zf in zfs:
        pp, ime, base = (rows.get((zf, m)) for m in ("dp_adagrad", "ime", "adagrad"))
        if pp is None or ime is None:
            continue
        d, lo, hi, cat = common.below(ime["test"], pp["test"])
        line = (f"- zero fraction {zf:g}: IME − post-processing = {d:+.4f} (95% CI [{lo:+.4f}, "
                f"{hi:+.4f}]) → {cat}")
        ok = True
        if base is not None:
            dp, plo, phi = stats.diff_ci(pp["test"], base["test"])
            ok = verdicts.from_interval(plo, phi, null=0.0, claim="above") == verdicts.HOLDS
            line += (f"; premise post-processing − non-private = {dp:+.4f} (95% CI [{plo:+.4f}, "
                     f"{phi:+.4f}]) {'met' if ok else 'NOT met'}")
        for m in ("stp", "stp_noiseless_v", "ime_free"):
            r = rows.get((zf, m))
            if r is None:
                continue
            if not np.all(np.isfinite(r["test"])):
                line += f"; {m}: {_loss_text(r['test'])}"
                continue
            dm, mlo, mhi = stats.diff_ci(r["test"], pp["test"])
            line += f"; {m} − post-processing = {dm:+.4f} [{mlo:+.4f}, {mhi:+.4f}]"
        lines.append(line)
        premise_ok.append(ok)
        if ok:
            cat, edge_note = verdicts.downgrade_for_edge(
                cat, winner_edges=common.edge_axes(results, [ime["label"]]),
                loser_edges=common.edge_axes(results, [pp["label"]]))
            cats.append(cat)
            if edge_note:
                edge_notes.append(f"z={zf:g}: {edge_note}")
        notes.append(f"z={zf:g}: IME − post-processing {d:+.4f} [{lo:+.4f}, {hi:+.4f}]")
    if any(r.get("all_diverged") for r in rows.values()):
        lines += ["", "STP: " + STP_NOTE + "."]
    measured = (style.combine(cats) if cats else "no zero fraction meets the premise")
    verdict = ("Setting does not test the claim: " + RECONSTRUCTED + "; " + IME_HANDICAP + ". "
               "As measured: " + "; ".join(notes) + f" (combined over the zero fractions that meet "
               f"the premise: {measured}). Premise ({PREMISE}) met at {sum(premise_ok)} of "
               f"{len(premise_ok)} zero fractions."
               + (" Grid edges: " + "; ".join(edge_notes) + "." if edge_notes else ""))
    return style.finding(CLAIM, lines, verdicts.UNTESTED, verdict)


def main(argv=None) -> int:
    """``python -m dpsim.paper_figures.<this> RESULTS_DIR [OUT_DIR]``: render from saved results."""
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
