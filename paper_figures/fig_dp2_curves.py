"""Figure for experiment ``dp2_logistic`` ([DP2] Fig. 4): DP² vs DP-SGD vs DP-RMSProp curves.

Li et al., *Differentially Private Adaptive Optimization with Delayed Preconditioners* (ICLR 2023),
§5.1 / Fig. 4: test accuracy at a fixed privacy budget (IMDB: σ = 1, b = 64).  Here: (a) mean excess
training loss ``F(w_t) − F*`` (log scale) over trials with a 95% confidence band, for DP-SGD,
vanilla DP-RMSProp and DP²-RMSProp (at its tuned delay ``s``), each at its tuned hyperparameters
(the paper's rule: training accuracy), with non-private RMSProp for reference and the class-prior
excess as a dotted line; (b) the held-out accuracy, the paper's metric, with w*'s and the majority
rate; (c) the no-noise diagnostic.  Legend: ε at the paper's δ (``10^{-k} ≤ 1/n``).

Reads only saved results (``results`` maps the experiment's labels to ``.npz`` files); the helpers
shared by every ``fig_dp2_*`` script are in :mod:`paper_figures.dp2_common`.
Standalone::

    python -m dpsim.paper_figures.fig_dp2_curves results/dp2_logistic/quick [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

from dpsim.experiments.pipeline import Saved

from . import style
from .dp2_common import (METHOD_STYLE, METRIC_NOTE, acc_text, accs, accuracy_axes, ci_text,
                         compare, delta_of, eps_text, finals, finish, get, hp_text, legend_name,
                         load, main_rows, plot_curve, prior_excess, prior_line, problem_text,
                         set_log_limits, trials_text)

NAME = "fig_dp2_curves"
CLAIM = ("At a fixed privacy budget (σ = 1, b = 64 in the paper), DP²-RMSProp reaches a better "
         "test accuracy than DP-SGD and vanilla DP-RMSProp ([DP2] §5.1, Fig. 4).")

_METHODS = ("dp_sgd", "dp_rmsprop", "dp2_rmsprop")


def _rows(entries):
    return main_rows(entries, _METHODS, NAME)


def _diagnostic(entries):
    rows = [get(entries, "dp_sgd", 0.0), get(entries, "dp2_rmsprop", 0.0)]
    return [r for r in rows if r is not None]


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    entries = load(results)
    sig, rows = _rows(entries)
    ref = get(entries, "rmsprop", private=False)
    diag = _diagnostic(entries)
    delayed = get(entries, "delayed_rmsprop", private=False)
    prior = prior_excess(results)
    static = Saved.of(results).notes.get("premise", {})
    with_acc = all(accs(e.res) is not None for e in rows)
    ncols = 1 + bool(with_acc) + bool(diag)
    with style.context():
        fig, axes = style.figure(1, ncols, width=3.9, height=3.6)
        ax = axes[0][0]
        means = [plot_curve(ax, e, label=legend_name(e, with_hp=True)) for e in rows]
        if ref is not None:
            means.append(plot_curve(ax, ref, label=legend_name(ref, with_hp=True), band=False, z=3))
        prior_line(ax, prior)
        ax.set_title(f"(a) training loss, σ = {sig:g}; dotted: class prior", fontsize=8)
        ax.set_ylabel(r"mean excess training loss $F(w_t) - F^\star$")
        log_panels = [ax]
        col = 1
        if with_acc:
            axa = axes[0][col]
            col += 1
            for e in rows + ([ref] if ref is not None and accs(ref.res) is not None else []):
                plot_curve(axa, e, label=None, band=e.private, metric="test_accuracy")
            accuracy_axes(axa, rows, wstar=static.get("wstar_test_accuracy"),
                          majority=static.get("majority"))
            axa.set_xlim(rows[0].res.steps[0], rows[0].res.steps[-1])
            axa.set_xlabel("step t")
            axa.set_title("(b) held-out accuracy (the paper's metric)", fontsize=8)
            axa.legend(loc="upper center", bbox_to_anchor=(0.5, -0.17), fontsize=6.5)
        if diag:
            ax2 = axes[0][col]
            for e in diag:
                means.append(plot_curve(ax2, e, label=legend_name(e, with_hp=True)))
            for e in (delayed, ref):
                if e is not None:
                    means.append(plot_curve(ax2, e, label=legend_name(e, with_hp=True), band=False, z=3,
                                            ls="--"))
            ax2.set_title("(c) diagnostic: same clipping, no noise (σ = 0),\n"
                          "every step size re-tuned", fontsize=8)
            ax2.set_ylabel(r"mean excess training loss $F(w_t) - F^\star$")
            log_panels.append(ax2)
        if prior is not None:
            import numpy as np

            means.append(np.array([prior]))
        for a in log_panels:
            a.set_yscale("log")
            a.set_xlim(rows[0].res.steps[0], rows[0].res.steps[-1])
            a.set_xlabel("step t")
            a.legend(loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=1, fontsize=6.5,
                     title=f"ε at δ = {style.fmt_float(delta_of(rows[0].res))}; tuned hyperparameters",
                     title_fontsize=7)
        for a in log_panels:
            set_log_limits(a, means)
        fig.suptitle(f"DP² vs DP-SGD vs DP-RMSProp ([DP2] Fig. 4) — {problem_text(rows[0].res)}; "
                     f"mean over {trials_text(rows)} trials, band: 95% CI", fontsize=8.5)
        return style.save(fig, out_dir, NAME)


def _table(rows) -> list[str]:
    out = ["| method | ε | tuned hyperparameters | trials | final excess loss | held-out accuracy |",
           "|---|---|---|---|---|---|"]
    for e in rows:
        out.append(f"| {METHOD_STYLE[e.method][0]} | {eps_text(e.res)} | {hp_text(e.res)} | "
                   f"{e.res.trials} | {ci_text(finals(e.res))} | {acc_text(accs(e.res))} |")
    return out


def evaluate(results: Mapping[str, object]) -> dict:
    """Holds when DP²'s final held-out accuracy is significantly above both baselines' (Welch 95%
    CI of the difference above 0); does not hold when it is significantly below either; else
    inconclusive (:func:`dp2_common.compare`; the training excess loss reported beside).  Then the
    premises and the grid-edge rule, DP² the claimed winner (:func:`dp2_common.finish`).  The
    same comparison under the loss rule (the ``loss-`` cells) and the no-noise diagnostic are
    reported, not judged."""
    entries = load(results)
    sig, rows = _rows(entries)
    lines = [f"Final values at σ = {sig:g} (mean ± 95% CI over fresh trials; ε at δ = "
             f"{style.fmt_float(delta_of(rows[0].res))}). " + METRIC_NOTE, ""] + _table(rows)
    verdicts, notes = [], []
    for e in rows[:2]:
        v, txt = compare(rows[2].res, e.res)
        verdicts.append(v)
        notes.append(f"DP² vs {METHOD_STYLE[e.method][0]}: {txt}")
    holds = False if any(v is False for v in verdicts) else (True if all(verdicts) else None)
    extra = load(results, extra=True)
    loss_rows = [get(extra, m, sig, rule="loss") for m in _METHODS]
    if all(r is not None for r in loss_rows):
        lines += ["", "The same methods tuned by the **loss rule** (lowest mean final training loss "
                      "instead of the paper's training accuracy), fresh trials:", ""]
        lines += _table(loss_rows)
        for e in loss_rows[:2]:
            _, txt = compare(loss_rows[2].res, e.res)
            lines.append(f"- loss rule, DP² vs {METHOD_STYLE[e.method][0]}: {txt}")
    diag = _diagnostic(entries)
    if len(diag) == 2:
        lines += ["", "Diagnostic, the same clipping without noise (σ = 0; DP-SGD's η and both of "
                      "DP²'s step sizes re-tuned, C₁, C₂, ε_a and s kept):", "",
                  "| method | tuned hyperparameters | trials | final excess loss | held-out accuracy |",
                  "|---|---|---|---|---|"]
        for e in diag + [x for x in (get(entries, "delayed_rmsprop", private=False),) if x]:
            lines.append(f"| {legend_name(e, with_eps=False)} | {hp_text(e.res)} | {e.res.trials} | "
                         f"{ci_text(finals(e.res))} | {acc_text(accs(e.res))} |")
        _, txt0 = compare(diag[1].res, diag[0].res)
        notes.append(f"without noise (clipping only, step sizes re-tuned) DP² vs DP-SGD: {txt0}")
    return finish(results, entries, CLAIM, holds, rows, lines, notes, winners=("dp2_rmsprop",))


def main(argv=None) -> int:
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
