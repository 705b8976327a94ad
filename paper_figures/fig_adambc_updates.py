"""Figure for experiment ``adambc`` ([ADAMBC] Fig. 4): second moments and Adam updates, private,
clean and bias-corrected, at DP-Adam's trained point.

From the frozen runs (parameters fixed at DP-Adam's final iterate, the same batches with and
without noise), at the last recorded step, pooled over (probed) coordinates × trials, one row per
problem and ε.  Left: histograms of ``√v̂^p`` (private), ``√v̂^c`` (clean, clipped but noiseless)
and ``√v̂^corr = √max(v̂^p − Φ, γ')`` (γ' at the paper's ratio γ'/Φ ≈ 0.0123 of its Fig. 4 middle),
log-spaced bins.  Right: the updates relative to ``m̂^p``, ``Δ^p = m̂^p/(√v̂^p + γ)`` (DP-Adam) and
``Δ^corr = m̂^p/√max(v̂^p − Φ, γ')`` (DP-AdamBC), each divided by a *robust* scale, the 99th
percentile of its |values| in the trial (the paper divides by the largest, which one floored
coordinate decides), and clipped to [−1, 1] for the histogram.

Standalone::

    python -m dpsim.paper_figures.fig_adambc_updates results/adambc/quick [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

import numpy as np

from dpsim.analysis import stats
from dpsim.experiments import verdicts as verdicts_mod

from . import adambc_common as common
from . import style

NAME = "fig_adambc_updates"
SLOTS = ("frozen-private", "frozen-clean")
NEAR_ZERO = 0.1
"""|update| / scale below this counts as "concentrated around 0" (this code's choice)."""
SCALE_Q = 0.99
"""The robust scale of a trial's updates: this quantile of their absolute values."""
CLAIM = ("The private DP-Adam update Δ^p = m̂^p/√v̂^p is heavily concentrated around 0 (rescaled "
         "per trial), and the bias correction alleviates the concentration ([ADAMBC] Fig. 4 right); "
         "the corrected second moment is closer in scale to the clean one than the private one is "
         "(Fig. 4 left, middle).")
COLORS = {"p": "#d95f02", "c": "#7570b3", "corr": "#1b9e77"}


def _moments(d):
    fm = common.frozen_moments(d["frozen-private"], d["frozen-clean"])
    gamma = float(common.hp(d["frozen-private"], "eps"))
    gp = common.PAPER_GAMMA_RATIO * fm["phi"]
    mp, vp, vc = fm["mp"][-1], fm["vp"][-1], fm["vc"][-1]           # (R, c)
    vcorr = np.maximum(vp - fm["phi"], gp)
    dp = mp / (np.sqrt(vp) + gamma)
    dcorr = mp / np.sqrt(vcorr)
    tiny = np.finfo(float).tiny

    def robust(x):
        return x / np.maximum(np.quantile(np.abs(x), SCALE_Q, axis=1, keepdims=True), tiny)

    def by_max(x):
        return x / np.maximum(np.max(np.abs(x), axis=1, keepdims=True), tiny)

    return dict(vp=vp, vc=vc, vcorr=vcorr, dp=robust(dp), dcorr=robust(dcorr),
                dp_max=by_max(dp), dcorr_max=by_max(dcorr), gp=gp, phi=fm["phi"],
                step=int(fm["steps"][-1]), floored=float(np.mean(vp - fm["phi"] <= gp)))


def _rows(results):
    data = common.problems_with(results, SLOTS)
    if not data:
        raise ValueError(f"{NAME}: no ε with results {', '.join(SLOTS)}")
    return [(prob, eps, d) for prob, per in data.items() for eps, d in per.items()]


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    rows = _rows(results)
    with style.context():
        fig, axes = style.figure(len(rows), 2, width=3.8, height=2.9)
        for i, (prob, eps, d) in enumerate(rows):
            mo = _moments(d)
            ax = axes[i][0]
            vals = {k: np.sqrt(np.maximum(mo[k], np.finfo(float).tiny)).ravel()
                    for k in ("vp", "vc", "vcorr")}
            lo = max(min(float(np.min(v)) for v in vals.values()),
                     1e-6 * max(float(np.max(v)) for v in vals.values()))
            hi = max(float(np.max(v)) for v in vals.values())
            bins = np.geomspace(lo, hi * 1.0001, 40)
            for k, name, c in (("vp", r"private $\sqrt{\hat v^p}$", COLORS["p"]),
                               ("vc", r"clean $\sqrt{\hat v^c}$", COLORS["c"]),
                               ("vcorr", r"corrected $\sqrt{\hat v^{corr}}$", COLORS["corr"])):
                ax.hist(np.clip(vals[k], lo, None), bins=bins, histtype="step", lw=1.3, color=c,
                        label=name)
            ax.axvline(np.sqrt(mo["phi"]), color="k", ls=":", lw=1, label=r"$\sqrt{\Phi}$")
            ax.set_xscale("log")
            ax.set_xlabel("second-moment scale (log)")
            ax.set_ylabel("count (coords × trials)")
            ax.set_title(f"{common.PROBLEM_NAMES[prob]}, ε = {eps:g}, "
                         f"t = {mo['step']}, γ' = {mo['gp']:.2g}", fontsize=8)
            ax.legend(loc="upper left", fontsize=6)
            common.plain_log_ticks(ax)
            ax = axes[i][1]
            bins = np.linspace(-1, 1, 41)
            ax.hist(np.clip(mo["dp"], -1, 1).ravel(), bins=bins, histtype="step", lw=1.3,
                    color=COLORS["p"], label=r"DP-Adam $\Delta^p$")
            ax.hist(np.clip(mo["dcorr"], -1, 1).ravel(), bins=bins, histtype="step", lw=1.3,
                    color=COLORS["corr"], label=r"DP-AdamBC $\Delta^{corr}$")
            ax.set_xlabel(f"update / {100 * SCALE_Q:g}th percentile of |update| in the trial")
            ax.set_ylabel("count (coords × trials)")
            ax.set_title("updates relative to $\\hat m^p$ (robust scale, clipped to ±1)", fontsize=8)
            ax.legend(loc="upper left", fontsize=6)
        fig.suptitle("Second moments and updates at DP-Adam's trained point (frozen runs)", fontsize=9)
        return style.save(fig, out_dir, NAME)


def evaluate(results: Mapping[str, object]) -> dict:
    """Per problem and ε: the per-trial fraction of coordinates with |update|/scale <
    :data:`NEAR_ZERO` for Δ^p and Δ^corr, scale = the :data:`SCALE_Q` quantile of |update| in the
    trial (robust; the paper's max-rescaling is reported beside), and their paired difference
    (95% CI over trials); the median ratio of each second moment to the clean one.  The claim is
    the paper's for its regime, so a row counts only where :func:`adambc_common.regime_stats`
    puts it (median Φ/v̂^c above 10²); there it is categorised by
    :func:`experiments.verdicts.from_interval` on p − corr (claim above 0).  The rows in the
    regime combine as :func:`style.combine`; none in the regime: "setting does not test the
    claim"."""
    rows = _rows(results)
    lines = [f"Fraction of coordinates with |update|/scale < {NEAR_ZERO:g} per trial (mean ± 95% "
             f"CI), scale = {100 * SCALE_Q:g}th percentile of |update| in the trial (the paper's "
             "max-rescaling in brackets); paired difference over trials; median over coordinates × "
             "trials of v̂/v̂^c; share of coordinates floored (v̂^p − Φ ≤ γ').", "",
             "| problem | ε | t | median Φ/v̂^c | regime | Δ^p near 0 [max] | Δ^corr near 0 [max] | "
             "p − corr [95% CI] | median v̂^p/v̂^c | median v̂^corr/v̂^c | floored |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    cats, notes = [], []
    for prob, eps, d in rows:
        mo = _moments(d)
        st = common.regime_stats(d["frozen-private"], d["frozen-clean"])
        fp = (np.abs(mo["dp"]) < NEAR_ZERO).mean(axis=1)
        fc = (np.abs(mo["dcorr"]) < NEAR_ZERO).mean(axis=1)
        fpm = float(np.mean(np.abs(mo["dp_max"]) < NEAR_ZERO))
        fcm = float(np.mean(np.abs(mo["dcorr_max"]) < NEAR_ZERO))
        dm, dh = stats.mean_ci(fp - fc)
        dm, dh = float(dm), float(0.0 if not np.isfinite(dh) else dh)
        with np.errstate(divide="ignore", invalid="ignore"):
            ok = mo["vc"] > 0
            rp = float(np.median((mo["vp"] / np.where(ok, mo["vc"], 1.0))[ok]))
            rc = float(np.median((mo["vcorr"] / np.where(ok, mo["vc"], 1.0))[ok]))
        etxt = f"{eps:g}"
        lines.append(f"| {common.PROBLEM_NAMES[prob]} | {etxt} | {mo['step']} | "
                     f"{common.fmt(st['median'])} | {common.word(st['regime'])} | "
                     f"{stats.fmt_ci(*stats.mean_ci(fp))} [{fpm:.2f}] | "
                     f"{stats.fmt_ci(*stats.mean_ci(fc))} [{fcm:.2f}] | "
                     f"{dm:+.3f} [{dm - dh:+.3f}, {dm + dh:+.3f}] | {rp:.3g} | {rc:.3g} | "
                     f"{mo['floored']:.2f} |")
        if st["regime"] is True:
            c = verdicts_mod.from_interval(dm - dh, dm + dh, claim="above")
            cats.append(c)
            tag = c
        elif st["regime"] is None:
            cats.append(verdicts_mod.INCONCLUSIVE)
            tag = "regime undecided"
        else:
            tag = "outside the regime, not judged"
        notes.append(f"{common.PROBLEM_NAMES[prob]}, ε={etxt}: near-0 fraction {np.mean(fp):.2f} "
                     f"(DP-Adam) vs {np.mean(fc):.2f} (corrected) ({tag})")
    category = style.combine(cats) if cats else verdicts_mod.UNTESTED
    return style.finding(CLAIM, lines, category,
                         f"Category: {category}. " + "; ".join(notes) + ". Judged with a robust "
                         f"scale (the {100 * SCALE_Q:g}th percentile): the paper's max-rescaling "
                         "(bracketed) is set by the single largest update of a trial — a floored "
                         "coordinate with v̂^p − Φ < γ' — and reads concentration into any "
                         "distribution with one outlier. The paper's own Table 2 (SNLI, t = 10⁴) "
                         "gives 75th percentile / largest |update| = 0.155/1.218 = 0.13 for Δ^p and "
                         "1.116/10.85 = 0.10 for Δ^corr: on its printed quantiles the corrected "
                         "update is not less concentrated either.")


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
