"""Figure for experiment ``adambc`` ([ADAMBC] Fig. 1, Table 2): clean vs private moments.

One row per ε: histograms over coordinates × trials of the bias-corrected first moment
(``m̂^c`` clean, ``m̂^p`` private) and second moment (``v̂^c``, ``v̂^p`` and the DP-AdamBC
``v̂^corr = max(v̂^p − Φ, γ')``, log scale) at the last step of the frozen runs (DP-Adam's trained
parameters, lr = 0, same batches and noise; see :mod:`experiments.adambc`).  Vertical lines: ``Φ``
and ``Φ + mean v̂^c``.  ``evaluate`` gives the Table 2 analogue and the share of ``Φ`` in ``v̂^p``.

Standalone::

    python -m dpsim.paper_figures.fig_adambc_moments results/adambc/quick [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

import numpy as np
from matplotlib.ticker import MaxNLocator

from dpsim.analysis import stats

from . import adambc_common as common
from . import style

NAME = "fig_adambc_moments"
SLOTS = ("frozen-private", "frozen-clean", "adambc")
CLAIM = ("Under DP the private second moment v̂^p is dominated by the noise variance Φ = (σC/B)²: "
         "E[v̂^p] − v̂^c = Φ and Φ ≫ v̂^c, while m̂^p stays centred on m̂^c ([ADAMBC] Fig. 1, "
         "Table 2).")
COLORS = {"clean": style.BASELINE_COLOR, "private": "#d95f02", "corr": "#1b9e77"}


def _snapshot(d: dict) -> dict:
    mom = common.frozen_moments(d["frozen-private"], d["frozen-clean"])
    gp = float(np.max(np.asarray(common.hp(d["adambc"], "gamma_prime"), dtype=float)))
    eps_a = float(common.hp(d["frozen-private"], "eps"))
    k = -1
    mp, vp, mc, vc = (mom[x][k] for x in ("mp", "vp", "mc", "vc"))  # (R, d) at the last step
    ph = mom["phi"]
    vcorr = np.maximum(vp - ph, gp)
    return dict(t=int(mom["steps"][k]), phi=ph, gamma_prime=gp, mp=mp, vp=vp, mc=mc, vc=vc,
                vcorr=vcorr, dc=mc / (np.sqrt(vc) + eps_a), dp=mp / (np.sqrt(vp) + eps_a),
                dcorr=mp / np.sqrt(vcorr), eps_adam=eps_a)


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    return style.render_with(_render, common.need(common.load(results), SLOTS, NAME), out_dir)


def _render(data, out_dir) -> list[Path]:
    fig, axes = style.figure(len(data), 2, width=3.7, height=2.7)
    for row, (eps, d) in zip(axes, data.items()):
        s = _snapshot(d)
        R, dim = s["mp"].shape
        etxt = common.eps_text(d["frozen-private"])
        ax = row[0]
        allm = np.concatenate([s["mc"].ravel(), s["mp"].ravel()])
        bins = np.linspace(allm.min(), allm.max(), 60)
        ax.hist(s["mc"].ravel(), bins=bins, density=True, histtype="stepfilled", alpha=0.35,
                color=COLORS["clean"], label=r"clean $\hat m^c$ (clipped, no noise)")
        ax.hist(s["mp"].ravel(), bins=bins, density=True, histtype="step", lw=1.4,
                color=COLORS["private"], label=r"private $\hat m^p$")
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # long decimals collide at 9 ticks
        ax.set_xlabel(r"first moment $\hat m_t$ (per coordinate)")
        ax.set_ylabel("density")
        ax.set_title(f"ε = {etxt}: first moment, t = {s['t']}")
        ax.legend(loc="upper left")
        ax = row[1]
        vals = np.concatenate([s["vc"].ravel(), s["vp"].ravel(), s["vcorr"].ravel()])
        pos = vals[vals > 0]
        lo, hi = pos.min(), pos.max()
        bins = np.geomspace(lo / 1.2, hi * 1.2, 70)
        ax.hist(np.maximum(s["vc"].ravel(), lo), bins=bins, histtype="stepfilled", alpha=0.35,
                color=COLORS["clean"], label=r"clean $\hat v^c$")
        ax.hist(s["vp"].ravel(), bins=bins, histtype="step", lw=1.4, color=COLORS["private"],
                label=r"private $\hat v^p$ (DP-Adam)")
        ax.hist(s["vcorr"].ravel(), bins=bins, histtype="step", lw=1.2, ls="--",
                color=COLORS["corr"],
                label=r"corrected $\max(\hat v^p-\Phi,\gamma')$" + f", γ'={s['gamma_prime']:.2g}")
        ax.axvline(s["phi"], color="k", lw=1.0, ls=":")
        ax.axvline(s["phi"] + s["vc"].mean(), color=COLORS["private"], lw=0.8, ls=":")
        ax.text(s["phi"], ax.get_ylim()[1] * 0.97, r" $\Phi$", va="top", ha="left", fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel(r"second moment $\hat v_t$ (per coordinate, log scale)")
        ax.set_ylabel(f"count ({R} trials × {dim} coords)")
        ax.set_title(f"ε = {etxt}: second moment, Φ = {s['phi']:.2e}")
        ax.legend(loc="upper left", fontsize=6.5)
        common.plain_log_ticks(ax)
    fig.suptitle("Clean vs private Adam moments at DP-Adam's trained point (lr frozen, same batches "
                 f"and noise); δ = {style.fmt_float(common.DELTA)}", fontsize=9)
    return style.save(fig, out_dir, NAME)


def _summary_row(name, x):
    q = np.quantile(x, [0.0, 0.25, 0.5, 0.75, 1.0])
    return (f"| {name} | " + " | ".join(f"{v:.3e}" for v in q) + f" | {np.mean(x):.3e} |")


def evaluate(results: Mapping[str, object]) -> dict:
    """Table 2 analogue per ε, and per ε: (i) ``E[v̂^p − v̂^c]/Φ`` (per-trial mean over
    coordinates, 95% CI over trials) must contain 1; (ii) the share ``Φ/v̂^p`` of the mean
    private second moment must be > 1/2 (lower CI end), i.e. Φ dominates.  Holds when (i) and
    (ii) hold at every ε; fails when (i) fails anywhere or (ii) fails everywhere; otherwise
    inconclusive (Φ dominates at some ε only)."""
    data = common.need(common.load(results), SLOTS, NAME)
    lines = []
    verdicts, notes = [], []
    for eps, d in data.items():
        s = _snapshot(d)
        R, dim = s["mp"].shape
        etxt = common.eps_text(d["frozen-private"])
        lines += [
            f"ε = {etxt} (σ = {float(common.hp(d['frozen-private'], 'noise_multiplier')):.3g}, "
            f"Φ = {s['phi']:.3e}, γ' = {s['gamma_prime']:.2e}, Adam γ = {s['eps_adam']:g}), "
            f"t = {s['t']} steps at DP-Adam's trained point; pooled over {R} trials × {dim} "
            "coordinates (Table 2 analogue):",
            "",
            "| quantity | min | 25% | median | 75% | max | mean |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, key in (("m̂^c", "mc"), ("m̂^p", "mp"), ("v̂^c", "vc"), ("v̂^p", "vp"),
                          ("v̂^corr", "vcorr"), ("Δ^c", "dc"), ("Δ^p", "dp"), ("Δ^corr", "dcorr")):
            lines.append(_summary_row(name, s[key].ravel()))
        shift = (s["vp"] - s["vc"]).mean(axis=1) / s["phi"]       # per trial
        m_s, h_s = stats.mean_ci(shift)
        share = s["phi"] / s["vp"].mean(axis=1)
        m_sh, h_sh = stats.mean_ci(share)
        ratio = s["phi"] / s["vc"].mean()
        frac = float(np.mean(s["vc"] < s["phi"]))
        dm = (s["mp"] - s["mc"]).mean(axis=1)
        m_dm, h_dm = stats.mean_ci(dm)
        ok_shift = abs(m_s - 1.0) <= h_s
        ok_dom = (m_sh - h_sh) > 0.5
        lines += [
            "",
            f"E[v̂^p − v̂^c]/Φ = {m_s:.3f} ± {h_s:.3f} (95% CI over trials; Eq. 2 predicts 1); "
            f"share of Φ in v̂^p: Φ/mean v̂^p = {m_sh:.3f} ± {h_sh:.3f}; Φ/mean v̂^c = {ratio:.3g}; "
            f"{100 * frac:.1f}% of coordinates have v̂^c < Φ; mean(m̂^p − m̂^c) = {m_dm:.2e} ± "
            f"{h_dm:.1e} (sd of m̂^c across coordinates {np.std(s['mc']):.2e}).",
            "",
        ]
        verdicts.append((ok_shift, ok_dom))
        notes.append(f"ε={etxt}: shift/Φ = {m_s:.3f} ± {h_s:.3f} "
                     f"({'contains' if ok_shift else 'excludes'} 1), Φ is {100 * m_sh:.0f}% "
                     f"(± {100 * h_sh:.0f}) of v̂^p ({'dominates' if ok_dom else 'does not dominate'})")
    if not all(v[0] for v in verdicts) or not any(v[1] for v in verdicts):
        holds = False
    elif all(v[1] for v in verdicts):
        holds = True
    else:
        holds = None
    why = (" Φ/v̂^c_j here is about σ²/(B·s_j), s_j being coordinate j's share of the clipped "
           "per-example gradients' squared norm at the trained point (spread over a factor ~1000 on "
           "this ill-conditioned problem, so Φ dominates only the small-scale coordinates); in the "
           "paper's BERT setting d is huge and v̂^c ~ 1e-12 ≪ Φ = 2.4e-8.")
    return {"claim": CLAIM, "measured": "\n".join(lines).rstrip(), "holds": holds,
            "verdict": "; ".join(notes) + "." + why}


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
