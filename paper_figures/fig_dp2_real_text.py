"""Figure for experiment ``dp2_logistic``: the [DP2] Fig. 4 comparison on real text.

Li et al., *Differentially Private Adaptive Optimization with Delayed Preconditioners* (ICLR 2023),
§5.1 / Fig. 4 (IMDB): at σ = 1, b = 64, DP²-RMSProp reaches a better test accuracy than DP-SGD and
DP-RMSProp.  IMDB cannot be installed without a download; the nearest real text that pip ships is
``dslabs::trump_tweets`` (:func:`dpsim.datasets.trump_tweets`: which phone wrote a tweet, Android or
iPhone; balanced by subsampling, vocabulary fitted on the training tweets), encoded as the
synthetic stand-in is (``1 + log k`` counts, intercept, rows not normalized:
:func:`experiments.dp2_data.real_text`).  Panel (a): training excess loss with the class-prior
excess (dotted); panel (b): held-out accuracy with w*'s and the majority rate.  The verdict has its
own premise checks (P1–P4 of :mod:`paper_figures.dp2_common`, on this data set).  Reads only saved
results.  Standalone::

    python -m dpsim.paper_figures.fig_dp2_real_text results/dp2_logistic/quick [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

import numpy as np

from dpsim.experiments import verdicts as verdicts_mod
from dpsim.experiments.pipeline import Saved

from . import style
from .dp2_common import (METHOD_STYLE, METRIC_NOTE, acc_text, accs, accuracy_axes, ci_text, compare,
                         delta_of, edge_lines, edge_rule, eps_text, finals, get, hp_text, load,
                         plot_curve, premise_checks, premise_lines, premise_ok, prior_excess,
                         prior_line, problem_text, set_log_limits, trials_text)

NAME = "fig_dp2_real_text"
CLAIM = ("On real text (balanced tweets, Android vs iPhone), at σ = 1 and b = 64, DP²-RMSProp "
         "reaches a better held-out accuracy than DP-SGD and DP-RMSProp (the claim of [DP2] "
         "§5.1, Fig. 4, made there on IMDB).")
PRIVATE = ("dp_sgd", "dp_rmsprop", "dp2_rmsprop")


def _rows(results):
    entries = load(results, extra=True)
    real = [e for e in entries.values() if e.dataset]
    if not real:
        raise ValueError(f"{NAME}: no real-data results (config real_data=None?)")
    dataset = real[0].dataset
    sig = next(e.sigma for e in real if e.private)
    priv = [get(entries, m, sig, dataset=dataset) for m in PRIVATE]
    nonp = [get(entries, m, private=False, dataset=dataset) for m in ("sgd", "rmsprop")]
    if any(r is None for r in priv + nonp):
        raise ValueError(f"{NAME}: missing real-data results among {sorted(e.label for e in real)}")
    return dataset, sig, priv, nonp


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    dataset, sig, priv, nonp = _rows(results)
    static = Saved.of(results).notes.get("premise_real", {})
    prior = prior_excess(results, real=True)
    with style.context():
        fig, axes = style.figure(1, 2, width=4.0, height=3.4)
        ax, ax2 = axes[0]
        means = [plot_curve(ax, e, label=f"{METHOD_STYLE[e.method][0]}: ε={eps_text(e.res)}, "
                                         f"{hp_text(e.res)}") for e in priv]
        means += [plot_curve(ax, e, label=f"{METHOD_STYLE[e.method][0]} (non-private): "
                                          f"{hp_text(e.res)}", band=False, ls="--", z=3)
                  for e in nonp]
        prior_line(ax, prior)
        if prior is not None:
            means.append(np.array([prior]))
        ax.set_yscale("log")
        set_log_limits(ax, means)
        ax.set_xlim(priv[0].res.steps[0], priv[0].res.steps[-1])
        ax.set_xlabel("step t")
        ax.set_ylabel(r"mean excess training loss $F(w_t) - F^\star$")
        ax.set_title(f"(a) training loss, σ = {sig:g}; dotted: class prior", fontsize=8)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.24), fontsize=6.5,
                  title=f"ε at δ = {style.fmt_float(delta_of(priv[0].res))}; tuned values",
                  title_fontsize=7)
        for e in priv + nonp:
            plot_curve(ax2, e, label=None, band=e.private, ls="-" if e.private else "--",
                       metric="test_accuracy")
        accuracy_axes(ax2, priv, wstar=static.get("wstar_test_accuracy"),
                      majority=static.get("majority"))
        ax2.set_xlim(priv[0].res.steps[0], priv[0].res.steps[-1])
        ax2.set_xlabel("step t")
        ax2.set_title("(b) held-out accuracy (the paper's metric)", fontsize=8)
        ax2.legend(loc="upper center", bbox_to_anchor=(0.5, -0.24), fontsize=6.5)
        fig.suptitle(f"Real text: DP² vs DP-SGD vs DP-RMSProp on {dataset}\n"
                     f"{problem_text(priv[0].res)}; {trials_text(priv + nonp)} trials, band: 95% CI",
                     fontsize=8.5)
        return style.save(fig, out_dir, NAME)


def _delta_text(a, b) -> str:
    """"DP² − X": held-out accuracy points (95% CI) and the training-loss ratio, one phrase."""
    _, txt = compare(a, b)
    return txt


def synthesis_lines(results) -> list[str]:
    """The paragraph reconciling the DP² results across dpsim's experiments, with this run's
    numbers (synthetic stand-in, real text, the no-noise diagnostic, DP²'s preconditioner against
    its noise floor) and the mechanism that says where DP² can win and where it cannot."""
    entries = load(results)
    extra = load(results, extra=True)
    out = ["", "**Synthesis across the DP² experiments.**", ""]
    try:
        sig = next(e.sigma for e in entries.values() if e.s is not None and not e.h)
    except StopIteration:
        return []
    d2, sgd = get(entries, "dp2_rmsprop", sig), get(entries, "dp_sgd", sig)
    if d2 is not None and sgd is not None:
        out.append(f"- Synthetic bag of words (this section, σ = {sig:g}): DP² − DP-SGD = "
                   f"{_delta_text(d2.res, sgd.res)}.")
    real = [e for e in extra.values() if e.dataset]
    if real:
        ds = real[0].dataset
        rd2, rsgd = get(extra, "dp2_rmsprop", sig, dataset=ds), get(extra, "dp_sgd", sig, dataset=ds)
        if rd2 is not None and rsgd is not None:
            out.append(f"- Real text ({ds}): DP² − DP-SGD = {_delta_text(rd2.res, rsgd.res)}.")
    c2, c1 = get(entries, "dp2_rmsprop", 0.0), get(entries, "dp_sgd", 0.0)
    if c2 is not None and c1 is not None:
        v0 = compare(c2.res, c1.res)[0]
        out.append(f"- Without noise (σ = 0, every step size re-tuned): DP² − DP-SGD = "
                   f"{_delta_text(c2.res, c1.res)}; " + (
                       "with the noise removed the two are not distinguishable in accuracy, so a "
                       "gap with noise comes from how each handles the noise" if v0 is None else
                       "DP²'s clipping of preconditioned gradients and its schedule already "
                       + ("help" if v0 else "cost") + " without any noise") + ".")
    stab = next((e for e in entries.values() if e.stability and e.method == "dp2_rmsprop"), None)
    if stab is not None:
        hp = stab.res.config["hyperparameters"]
        b, s1 = float(stab.res.config["batch_size"]), float(hp["s1"])
        floor = float(hp["noise_multiplier"]) * float(hp["clip"]) / (b * s1 ** 0.5) + float(hp["eps"])
        q = [float(np.nanmean(np.asarray(stab.res.records[k], dtype=float)[-1]))
             for k in ("pc_q10", "pc_q50", "pc_q90")]
        out.append(f"- DP²'s delayed preconditioner at the end of the run (s = {s1:g}, C = "
                   f"{hp['clip']:g}): the 10/50/90% quantiles of D over the coordinates are "
                   f"{10 ** q[0]:.2g} / {10 ** q[1]:.2g} / {10 ** q[2]:.2g}, against the level "
                   f"pure release noise gives, σC/(b√s) + ε_a = {floor:.2g}: a coordinate whose D "
                   "is near that level is preconditioned by noise, not by its gradient.")
    won = None
    if d2 is not None and sgd is not None:
        won = compare(d2.res, sgd.res)[0]
    here = {True: "Here DP² does beat DP-SGD on the synthetic task, so its informative coordinates "
                  "clear the release noise often enough; where they do not (the tweets, if DP² "
                  "does not win there), the gain vanishes.",
            False: "Here DP² is significantly worse than DP-SGD on the synthetic task: its adaptive "
                   "phase rescales noise on most coordinates.",
            None: "Here DP² is not significantly better than DP-SGD on the synthetic task: its "
                  "adaptive phase rescales noise on most coordinates, and DP-SGD, which needs no "
                  "preconditioner, does as well."}[won]
    out += [
        "- dpsim's `adambc` experiment (a dense d = 100 least-squares problem whose coordinates all "
        "carry signal at scales spread over decades) finds DP² *better* than DP-SGD — 2.5× lower "
        "excess loss at ε = 3 in the full-scale gallery (1.17e-4 against 2.92e-4; its "
        "`fig_adambc_vs_dp2`).",
        "",
        "Where DP² can win and where it cannot.  DP² preconditions by D = √v + ε_a with v built "
        "from the average of s private releases, whose noise per coordinate is σC/(b√s).  It "
        "helps when (i) adaptivity helps without privacy (premise P3) and (ii) the coordinates "
        "that matter have mean clipped gradients well above σC/(b√s), so that D measures their "
        "scale: then preconditioning before clipping moves the clip budget to small-gradient "
        "coordinates and the isotropic noise is spread as the geometry wants — the regime of "
        "`adambc` (d = 100, every coordinate informative).  In a sparse text task with a 10³–10⁴ "
        "word vocabulary most informative words are rare; a word's mean gradient scales with its "
        "document frequency, so at σ = 1, b = 64 and s of a fraction of an epoch many of them sit "
        "at or below that noise level, where D is noise plus ε_a.  " + here + "  Longer delays "
        "average the noise down but make D stale (Fig. 6's trade-off).  A stand-in that does not "
        "show the paper's IMDB gain (DP² 0.815 against DP-SGD 0.687) does not refute it: the gain "
        "needs informative coordinates that clear the release noise, and IMDB's own statistics "
        "are not available to check; each statement here holds only where its premises do.",
    ]
    return out


def evaluate(results: Mapping[str, object]) -> dict:
    """Holds when DP²'s final held-out accuracy is significantly above both DP-SGD's and
    DP-RMSProp's (:func:`dp2_common.compare`, Welch 95% CI); does not hold when significantly
    below either; else inconclusive.  Gated by this data set's own premises P1–P4 (any not met →
    "setting does not test the claim"), then the grid-edge rule with DP² the claimed winner."""
    dataset, sig, priv, nonp = _rows(results)
    notes_ = Saved.of(results).notes
    static = notes_.get("premise_real")
    pc = priv[0].res.config["problem"]
    lines = [f"{dataset}: {pc['n']} training and {pc['n_test']} held-out tweets, {pc['d']} features "
             f"(words + intercept), source {pc.get('source', dataset)}; labels "
             f"{pc.get('labels_meaning', '')}. Final values at σ = {sig:g} (mean ± 95% CI over "
             "fresh trials). " + METRIC_NOTE, "",
             "| method | ε | tuned hyperparameters | trials | final excess loss | held-out accuracy |",
             "|---|---|---|---|---|---|"]
    for e in nonp + priv:
        lines.append(f"| {METHOD_STYLE[e.method][0]}{'' if e.private else ' (non-private)'} | "
                     f"{eps_text(e.res)} | {hp_text(e.res)} | {e.res.trials} | "
                     f"{ci_text(finals(e.res))} | {acc_text(accs(e.res))} |")
    verdicts, notes = [], []
    for e in priv[:2]:
        v, txt = compare(priv[2].res, e.res)
        verdicts.append(v)
        notes.append(f"DP² vs {METHOD_STYLE[e.method][0]}: {txt}")
    holds = False if any(v is False for v in verdicts) else (True if all(verdicts) else None)
    category = verdicts_mod.category_of({"holds": holds})
    checks = premise_checks(static, np_sgd=nonp[0].res, np_rms=nonp[1].res, dp_sgd=priv[0].res)
    lines += [""] + premise_lines(checks, title=f"**Premises on {dataset}** (each must hold, or the "
                                                "setting does not test the claim)")
    if not premise_ok(checks):
        category = verdicts_mod.UNTESTED
        notes.insert(0, "a premise fails on this data set (see the table): the setting does not "
                        "test the claim")
    category, note, at_edge = edge_rule(category, results, priv, winners=("dp2_rmsprop",))
    lines += edge_lines(at_edge)
    lines += synthesis_lines(results)
    if note:
        notes.append(note)
    return style.finding(CLAIM, lines, category, "; ".join(notes) + ".")


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
