"""Figure for experiment ``adambc`` ([ADAMBC] §3–5 in its regime): the in-regime problem.

The paper's analysis assumes "typical DP parameters", where the DP bias ``Φ = (σC/B)²`` dwarfs
the clean second moment ``v̂^c`` on most coordinates (SNLI: median ``v̂^c ≈ 4e-13`` against
``Φ ≈ 2.4e-8``), and expects DP-AdamBC to help on tasks where Adam beats SGD without privacy.
Since ``Φ/v̂^c ≈ σ²d/B`` (for a coordinate's typical share of the gradient norm), the experiment's
diagonal least squares (d = 50–100, B = 256) sits outside that regime; the in-regime problem
(:func:`experiments.adambc.regime_problem`: sparse least squares, d = 10⁴, B = 64, held-out rows)
sits inside it.  This figure shows its premise and its headline comparison.

Left: the distribution over trials × probed coordinates of ``Φ/v̂^c`` (frozen clean run at DP-Adam's
trained point, last step; log axis), one line per ε, the regime threshold 10² dotted.  Middle:
non-private SGD and Adam (each tuned), mean excess training loss.  Right, one panel per ε: mean
held-out loss of DP-Adam, DP-AdamBC and DP-SGDM at the Eq. 3 rate (paired trials: same batches and
noise), bands: 95% CI of the mean.

Standalone::

    python -m dpsim.paper_figures.fig_adambc_regime results/adambc/quick [OUT_DIR]
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

NAME = "fig_adambc_regime"
SLOTS = ("adam", "adambc", "sgdm-eq3", "frozen-private", "frozen-clean")
CLAIM = ("In the paper's regime — Φ ≫ v̂^c on most coordinates and non-private Adam clearly better "
         "than SGD — DP-AdamBC reaches a better held-out objective than DP-Adam at the same ε "
         "([ADAMBC] §5, Figs. 6, 8, Table 1, test accuracy there; the held-out loss of this "
         "regression here).")
COLORS = {"adam": "#7570b3", "adambc": "#1b9e77", "sgdm-eq3": "#e7298a",
          "np-sgd": "#d95f02", "np-adam": "#7570b3"}
NAMES = {"adam": "DP-Adam", "adambc": "DP-AdamBC", "sgdm-eq3": "DP-SGDM (Eq. 3 rate)",
         "np-sgd": "SGD (non-private)", "np-adam": "Adam (non-private)"}


def _data(results):
    data = common.load(results, SLOTS, "regime")
    keep = {e: d for e, d in data.items() if all(s in d for s in SLOTS)}
    if not keep:
        raise ValueError(f"{NAME}: no ε of the in-regime problem with results {', '.join(SLOTS)}")
    return keep, common.nonprivate(results, "regime")


def _held(res) -> np.ndarray:
    """Held-out loss (K, R) of a result (the training excess loss when none was recorded)."""
    x = res.test_loss if res.test_loss is not None else res.excess_loss
    return np.asarray(x, dtype=float)


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    data, npv = _data(results)
    with style.context():
        fig, axes = style.figure(1, 2 + len(data), width=3.4, height=3.0)
        ax = axes[0][0]
        colors = style.sequential(len(data))
        for (eps, d), c in zip(data.items(), colors):
            st = common.regime_stats(d["frozen-private"], d["frozen-clean"])
            r = np.sort(st["ratio"].ravel())
            r = np.where(np.isfinite(r), r, np.nan)
            ok = np.isfinite(r) & (r > 0)
            if ok.any():
                ax.hist(np.log10(r[ok]), bins=40, histtype="step", lw=1.3, color=c,
                        label=f"ε = {common.eps_text(d['adam'])}: median {common.fmt(st['median'])}, "
                              f"{100 * st['frac100']:.0f}% > 10²")
        ax.axvline(np.log10(common.REGIME_RATIO), color="k", ls=":", lw=1.0)
        ax.set_xlabel(r"$\log_{10}\,\Phi/\hat v^c_j$ (probed coordinates × trials)")
        ax.set_ylabel("count")
        ax.set_title("premise: Φ ≫ v̂^c on most coordinates", fontsize=8)
        ax.legend(loc="upper left", fontsize=6)
        common.plot_nonprivate(axes[0][1], npv, COLORS, NAMES,
                               title="premise: Adam ≫ SGD without privacy")
        for ax, (eps, d) in zip(axes[0][2:], data.items()):
            for slot in ("adam", "adambc", "sgdm-eq3"):
                res = d[slot]
                hp = res.config["hyperparameters"]
                extra = (f", γ' = {float(hp['gamma_prime']):.2g}" if slot == "adambc" else "")
                style.mean_curve(ax, res.steps, _held(res), COLORS[slot],
                                 label=f"{NAMES[slot]}, η = {float(hp['lr']):.3g}{extra}")
            ax.set_yscale("log")
            ax.set_xlabel("step t")
            ax.set_ylabel("mean held-out loss")
            ax.set_title(f"ε = {common.eps_text(d['adam'])} (δ = {style.fmt_float(common.DELTA)}), "
                         f"{d['adam'].trials} paired trials", fontsize=8)
            ax.legend(loc="upper right", fontsize=6)
            common.plain_log_ticks(ax)
        first = next(iter(data.values()))["adam"]
        fig.suptitle(f"In-regime problem: {common.problem_label(first)}, T = {first.config['steps']}",
                     fontsize=9)
        return style.save(fig, out_dir, NAME)


def evaluate(results: Mapping[str, object]) -> dict:
    """Premise (printed): at every ε the regime (:func:`adambc_common.regime_stats`, median
    ``Φ/v̂^c`` above 10²) and non-private Adam ≫ SGD (:func:`adambc_common.adam_vs_sgd`).  Claim,
    per ε: the paired difference of final held-out loss DP-AdamBC − DP-Adam (95% CI over trials),
    :func:`experiments.verdicts.from_interval` (claim below 0), combined over ε
    (:func:`style.combine`), then the direction-aware grid-edge rule (DP-AdamBC the claimed
    winner, DP-Adam the loser).  A failed premise gives "setting does not test the claim", an
    undecided one at most inconclusive."""
    data, npv = _data(results)
    lines = ["Premise and final metrics of the in-regime problem (means ± 95% CI over trials; "
             "differences from the paired per-trial differences: same batches and noise).", ""]
    regime_ok = []
    for eps, d in data.items():
        st = common.regime_stats(d["frozen-private"], d["frozen-clean"])
        regime_ok.append(st["regime"])
        lines.append(f"- ε = {common.eps_text(d['adam'])} (σ = "
                     f"{float(common.hp(d['adam'], 'noise_multiplier')):.3g}, Φ = {st['phi']:.3e}; "
                     f"{st['coords']} probed coordinates, t = {st['t']}): {common.ratio_text(st)} "
                     f"— regime {common.word(st['regime'])}.")
    adam_ok, adam_text = common.adam_vs_sgd(npv)
    p_raw = {True: verdicts_mod.HOLDS, False: verdicts_mod.FAILS, None: verdicts_mod.INCONCLUSIVE}[adam_ok]
    p_raw, p_note = verdicts_mod.downgrade_for_edge(
        p_raw, winner_edges=common.selection_edges(results, {"np-adam": "regime-nonprivate-np-adam"}),
        loser_edges=common.selection_edges(results, {"np-sgd": "regime-nonprivate-np-sgd"}))
    adam_ok = {verdicts_mod.HOLDS: True, verdicts_mod.FAILS: False}.get(p_raw)
    lines.append("- " + adam_text + (f" ({p_note})" if p_note else "") + ".")
    oks = regime_ok + [adam_ok]
    premise = False if False in oks else True if all(o is True for o in oks) else None
    lines += ["", "**Premise** — " + {True: "holds", False: "fails: the setting does not test "
                                      "the claim", None: "not established: at most inconclusive"}[premise]
              + ".", "",
              "| ε | DP-Adam held-out (η) | DP-AdamBC held-out (η, γ'/Φ) | DP-SGDM Eq. 3 held-out | "
              "AdamBC − Adam held-out [95% CI] | AdamBC/Adam held-out | AdamBC/Adam training excess |",
              "|---|---|---|---|---|---|---|"]
    cats, notes = [], []
    for eps, d in data.items():
        a, b, s = d["adam"], d["adambc"], d["sgdm-eq3"]
        ha, hb, hs = (_held(r)[-1] for r in (a, b, s))
        dm, dh = map(float, stats.mean_ci(hb - ha))
        ea, eb = common.finals(a), common.finals(b)
        ph = common.phi(b)
        gp = float(np.ravel(common.hp(b, "gamma_prime"))[0])
        lines.append(f"| {common.eps_text(a)} | {stats.fmt_ci(*stats.mean_ci(ha))} "
                     f"({float(common.hp(a, 'lr')):g}) | {stats.fmt_ci(*stats.mean_ci(hb))} "
                     f"({float(common.hp(b, 'lr')):g}, {gp / ph:.2g}) | "
                     f"{stats.fmt_ci(*stats.mean_ci(hs))} | {dm:+.2e} [{dm - dh:+.2e}, {dm + dh:+.2e}] | "
                     f"{np.mean(hb) / np.mean(ha):.3f} | {np.mean(eb) / np.mean(ea):.3f} |")
        cats.append(verdicts_mod.from_interval(dm - dh, dm + dh, claim="below"))
        notes.append(f"ε={common.eps_text(a)}: held-out AdamBC/Adam = {np.mean(hb) / np.mean(ha):.3f} "
                     f"({'lower' if dm + dh < 0 else 'higher' if dm - dh > 0 else 'no significant difference'})")
    measured = style.combine(cats)
    eps_keys = [f"regime-eps{e:g}" for e in data]
    measured, note = verdicts_mod.downgrade_for_edge(
        measured, winner_edges=common.selection_edges(results, [f"{k}-adambc" for k in eps_keys]),
        loser_edges=common.selection_edges(results, [f"{k}-adam" for k in eps_keys]))
    if premise is False:
        category = verdicts_mod.UNTESTED
    elif premise is None and measured in (verdicts_mod.HOLDS, verdicts_mod.FAILS):
        category = verdicts_mod.INCONCLUSIVE
    else:
        category = measured
    return style.finding(CLAIM, lines, category,
                         f"Category: {category}" + (f" ({note})" if note else "") + ". "
                         + "; ".join(notes) + ". The premise numbers (Φ/v̂^c, Adam vs SGD) come from "
                         "the same problem, so Figs. 1 and 4 and Eq. 3 are judged on its rows in "
                         "fig_adambc_moments, fig_adambc_updates and fig_adambc_vs_sgdm.")


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
