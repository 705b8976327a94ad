"""Helpers shared by the ``dp2_logistic`` figures ([DP2], ``fig_dp2_*.py``): loading the saved
results with their metadata, ε at the paper's δ, comparisons with 95% confidence intervals,
legend texts and the common plot pieces.  Not a figure itself (no ``render``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from dpsim.analysis import stats
from dpsim.experiments import verdicts as verdicts_mod
from dpsim.experiments.pipeline import Saved

from . import style

#: method → (legend name, colour, line style, marker)
METHOD_STYLE = {
    "sgd": ("SGD", "0.55", "--", None),
    "rmsprop": ("RMSProp", style.BASELINE_COLOR, "--", None),
    "delayed_rmsprop": ("RMSProp, delayed preconditioner", "#bcbd22", "-", None),
    "dp_sgd": ("DP-SGD", "#1f77b4", "-", "o"),
    "dp_rmsprop": ("DP-RMSProp", "#ff7f0e", "-", "s"),
    "dp2_rmsprop": ("DP²-RMSProp", "#d62728", "-", "D"),
    "dp_adagrad": ("DP-AdaGrad", "#9467bd", "-", "v"),
    "dp2_adagrad": ("DP²-AdaGrad", "#8c564b", "-", "P"),
    "dp2_extra_query": ("Ablation 1 (extra query)", "#e377c2", "-", "^"),
    "dp2_noise_first": ("Ablation 2 (noise first)", "#17becf", "-", "v"),
    "adadps": ("AdaDPS-RMSProp (1% public data)", "#2ca02c", "-", "X"),
}


@dataclass
class Entry:
    label: str
    private: bool
    sigma: float | None
    method: str
    s: int | None
    h: bool
    res: Any
    stability: bool = False


def load(results: Mapping[str, object]) -> dict[str, Entry]:
    """``{label: Entry}`` for every result, described by the metadata the experiment saved with
    it (:func:`experiments.dp2_logistic.cell_meta`)."""
    saved = Saved.of(results)
    out = {label: Entry(label=label, res=saved.result(label), **saved.meta(label)) for label in saved}
    if not out:
        raise ValueError(f"no dp2_logistic results among {sorted(results)}")
    return out


def main_sigma(entries: Mapping[str, Entry]) -> float:
    """The σ of the main comparisons (the one with the per-s DP² cells)."""
    sig = {e.sigma for e in entries.values() if e.s is not None and not e.h}
    if len(sig) != 1:
        raise ValueError(f"expected one σ with per-delay DP² results, got {sorted(sig)}")
    return sig.pop()


def get(entries, method, sigma=None, s=None, private=True, h=False,
        stability=False) -> Entry | None:
    for e in entries.values():
        if e.method == method and e.private == private and e.s == s and e.h == h and (
                e.stability == stability) and (not private or math.isclose(e.sigma, sigma)):
            return e
    return None


def delta_of(res) -> float:
    """The paper's δ (§5): ``10^{-k}`` with the smallest ``k`` such that ``10^{-k} ≤ 1/n``."""
    n = int(res.config["problem"]["n"])
    return 10.0 ** (-math.ceil(math.log10(n) - 1e-12))


def eps_of(res) -> float:
    return float(np.max(res.epsilon(delta_of(res))))


def eps_text(res) -> str:
    e = eps_of(res)
    return "∞" if math.isinf(e) else f"{e:.2g}"


def finals(res) -> np.ndarray:
    """Final excess training loss per trial (non-finite → NaN is kept, so it shows)."""
    if res.excess_loss is None:
        raise ValueError("result has no excess loss (problem without F*)")
    return np.asarray(res.excess_loss[-1], dtype=float)


def ci_text(x) -> str:
    m, h = stats.mean_ci(np.asarray(x, dtype=float))
    return f"{float(m):.4f} ± {float(h):.4f}"


def better(a, b) -> tuple[bool | None, str]:
    """Is ``a`` (final losses) lower than ``b``?  True / False (significantly higher) / None, with
    the effect text: ratio of means and the Welch 95% CI of ``mean(a) − mean(b)``."""
    d, lo, hi = stats.diff_ci(a, b)
    ratio = float(np.mean(a) / np.mean(b))
    txt = f"{ratio:.2f}× (difference {d:+.4f}, 95% CI [{lo:+.4f}, {hi:+.4f}])"
    if hi < 0:
        return True, txt
    if lo > 0:
        return False, txt
    return None, txt


def equivalent(a, b, margin=0.25) -> tuple[bool | None, str]:
    """Is ``mean(a)`` within ``±margin·mean(b)`` of ``mean(b)``?  True when the Welch 95% CI of the
    relative difference lies inside the margin, False when it lies outside, else None."""
    mb = float(np.mean(b))
    d, lo, hi = stats.diff_ci(a, b)
    txt = (f"relative difference {d / mb:+.1%} (95% CI [{lo / mb:+.1%}, {hi / mb:+.1%}]; "
           f"margin ±{margin:.0%})")
    if -margin * mb < lo and hi < margin * mb:
        return True, txt
    if lo > margin * mb or hi < -margin * mb:
        return False, txt
    return None, txt


_HP_ORDER = ("lr", "lr2", "clip", "clip2", "eps", "s1")
_HP_SYM = {"lr": "η", "lr2": "η₂", "clip": "C", "clip2": "C₂", "eps": "ε_a", "s1": "s"}


def hp_text(res) -> str:
    hp = res.config["hyperparameters"]
    parts = []
    for k in _HP_ORDER:
        shared_clip = k == "clip2" and res.config["optimizer"] == "dp2_noise_first"
        if k in hp and hp[k] is not None and not shared_clip:
            parts.append(f"{_HP_SYM[k]}={style.fmt_float(float(hp[k]))}")
    return ", ".join(parts)


def legend_name(e: Entry, *, with_eps=True, with_hp=False) -> str:
    name = METHOD_STYLE[e.method][0]
    if e.s is not None:
        name += f" (s={e.s})"
    bits = []
    if e.private and e.sigma == 0.0:
        bits.append("clipping, no noise")
    elif e.private and with_eps:
        bits.append(f"ε={eps_text(e.res)}")
    elif not e.private:
        bits.append("non-private")
    if with_hp:
        bits.append(hp_text(e.res))
    return name + (": " + ", ".join(bits) if bits else "")


def plot_curve(ax, e: Entry, *, label=None, color=None, ls=None, band=True, z=2):
    """Mean excess loss vs step with a 95% CI band."""
    name, c, l, _ = METHOD_STYLE[e.method]
    return style.mean_curve(ax, e.res.steps, e.res.excess_loss, color or c, with_band=band,
                            linestyle=ls or l, label=label or legend_name(e), zorder=z)


def set_log_limits(ax, means):
    lo = min(float(np.nanmin(m[m > 0])) for m in means if np.any(m > 0))
    hi = max(float(np.nanmax(m)) for m in means)
    if lo > 0 and np.isfinite(hi):
        ax.set_ylim(lo / 1.6, hi * 1.6)
    plain_log_ticks(ax.yaxis)


def problem_text(res) -> str:
    pc = res.config["problem"]
    # the column scaling on a line of its own: one line would not fit a single panel's width
    scaled = f",\ncolumn scales (j+1)^-{pc['col_scale']:g}" if pc.get("col_scale") else ""
    return (f"sparse logistic regression, n={pc['n']}, d={pc['d']}, "
            f"{100 * pc['density']:g}% nonzero{scaled}; b={res.config['batch_size']}, "
            f"T={res.config['steps']}")


def trials_text(entries) -> str:
    return "/".join(str(r) for r in sorted({e.res.trials for e in entries}))


def plain_log_ticks(axis, subs=(1.0, 2.0, 3.0, 5.0)):
    """Log axis with ticks at ``subs`` × 10^k (default 1, 2, 3, 5) labelled as plain numbers (no
    overlapping minor labels)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def table_figure(rows, *, name, title, out_dir, note=None) -> list[Path]:
    """A table rendered as a figure: (a) final excess loss per method, mean and 95% CI (dots with
    error bars; log scale unless the values lie within a factor 3), each labelled with ε and its
    tuned hyperparameters; (b) the learning curves (means, 95% bands)."""
    with style.context():
        fig, axes = style.figure(1, 2, width=4.6, height=3.3)
        ax = axes[0][0]
        ys = np.arange(len(rows))[::-1]
        ends = []
        for y, e in zip(ys, rows):
            m, h = stats.mean_ci(finals(e.res))
            nm, color, _, marker = METHOD_STYLE[e.method]
            ax.errorbar([m], [y], xerr=[[h], [h]], color=color, marker=marker or "o", capsize=3)
            ends += [m - h, m + h]
        ends = [x for x in ends if np.isfinite(x) and x > 0]
        narrow = bool(ends) and max(ends) / min(ends) < 3
        if ends:
            ax.set_xlim(min(ends) / 1.25, max(ends) * 1.25)
        ax.set_ylim(-0.5, len(rows) - 0.5)
        ax.set_yticks(ys)
        ax.set_yticklabels([legend_name(e) + "\n" + hp_text(e.res) for e in rows], fontsize=6.5)
        if narrow:  # within a factor 3 a log axis only crowds its labels: linear, 4 ticks
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(4))
        else:
            ax.set_xscale("log")
            plain_log_ticks(ax.xaxis)
        ax.set_xlabel(r"final excess training loss $F(w_T) - F^\star$")
        ax.set_title("(a) final loss, mean ± 95% CI", fontsize=8.5)
        ax.grid(True, axis="x", which="both", alpha=0.3)
        ax2 = axes[0][1]
        means = [plot_curve(ax2, e, label=legend_name(e)) for e in rows]
        ax2.set_yscale("log")
        set_log_limits(ax2, means)
        ax2.set_xlim(rows[0].res.steps[0], rows[0].res.steps[-1])
        ax2.set_xlabel("step t")
        ax2.set_ylabel("mean excess training loss\n" + r"$F(w_t) - F^\star$")
        ax2.set_title("(b) learning curves, band: 95% CI", fontsize=8.5)
        # beside the curves, not under them: a legend below squeezed the axes until the y label
        # ran into the title
        ax2.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), ncol=1,
                   title=f"ε at δ = {style.fmt_float(delta_of(rows[0].res))}"
                         + (f"; {note}" if note else ""), title_fontsize=7)
        fig.suptitle(f"{title} — {problem_text(rows[0].res)}; {trials_text(rows)} trials", fontsize=8.5)
        return style.save(fig, out_dir, name)


def table_lines(rows, header: str) -> list[str]:
    lines = [header, "", "| method | ε | tuned hyperparameters | trials | final excess loss |",
             "|---|---|---|---|---|"]
    for e in rows:
        lines.append(f"| {legend_name(e, with_eps=False)} | {eps_text(e.res)} | {hp_text(e.res)} | "
                     f"{e.res.trials} | {ci_text(finals(e.res))} |")
    return lines


def premise(entries) -> tuple[bool | None, str]:
    """The premise of [DP2]'s claims: at this run length, on this problem, *non-private* adaptivity
    beats non-private SGD (else no private adaptive method can show an advantage, and comparing
    them does not test the claim).  Compares the final excess losses of the saved non-private
    RMSProp and SGD runs (each at its tuned step size): ``True`` when RMSProp is significantly
    lower (Welch 95% CI of the difference below 0), ``False`` when significantly higher, ``None``
    when the CI contains 0 or the runs are missing; with the report line."""
    sgd, rms = get(entries, "sgd", private=False), get(entries, "rmsprop", private=False)
    if sgd is None or rms is None:
        return None, "**Premise** (non-private RMSProp beats non-private SGD): not measured."
    ok, txt = better(finals(rms.res), finals(sgd.res))
    word = {True: "holds", False: "fails: the setting does not test the claim",
            None: "not established (difference not significant): at most inconclusive"}[ok]
    steps = rms.res.config["steps"]
    a = rms.res.config["problem"].get("col_scale")
    where = f", features with column scales (j+1)^-{a:g}" if a else ""
    return ok, (f"**Premise** (non-private RMSProp vs non-private SGD at T = {steps}{where}, each tuned; "
                f"final excess loss, RMSProp/SGD): {txt} — premise {word}.")


def tail_means(res, start: float = 0.5) -> np.ndarray:
    """Per trial, the mean excess training loss over the recorded steps ``t ≥ start·T`` (the
    second half by default): the measure of a run's *path*, which a final point that happens to
    land on a good phase cannot flatter."""
    steps = np.asarray(res.steps)
    sel = steps >= start * steps[-1]
    return np.asarray(res.excess_loss, dtype=float)[sel].mean(axis=0)


def selection_key(results, e: Entry) -> str | None:
    """The tuning selection behind an evaluation entry (``None`` when none was saved): its own
    label, or for DP² variants at the main σ the cell of the delay the rule chose; a Fig. 1
    (stability) cell maps to the selection of the method it runs."""
    saved = Saved.of(results)
    sel = saved.notes.get("selection", {})
    label = e.label
    if e.stability:  # Fig. 1 cells run the tuned setting of their method
        label = f"np-{e.method}" if not e.private else f"sig{e.sigma:g}-{e.method}"
    if label in sel:
        return label
    s = saved.notes.get("chosen_s", {}).get(e.method)
    key = f"{label}-s{s}" if s is not None else None
    return key if key in sel else None


def edges(results, rows) -> dict:
    """``{"<method>.<axis>": value}`` of the tuned choices of ``rows`` (entries) that sit on an edge
    of their grid, read from the saved selections, plus ``"<method>.s"`` when the delay chosen over
    ``s_grid`` is its smallest or largest value."""
    saved = Saved.of(results)
    sel = saved.notes.get("selection", {})
    s_edge = set(saved.notes.get("s_at_grid_edge", []))
    out = {}
    for e in rows:
        key = selection_key(results, e)
        name = METHOD_STYLE[e.method][0] if e.private else METHOD_STYLE[e.method][0] + " (non-private)"
        if key is not None:
            for axis in sel[key].get("at_edge", []):
                out[f"{name}.{axis}"] = sel[key]["point"][axis]
        if e.label in s_edge or (e.stability and e.private
                                 and f"sig{e.sigma:g}-{e.method}" in s_edge):
            out[f"{name}.s"] = int(e.res.config["hyperparameters"]["s1"])
    return out


def finish(results, entries, claim: str, holds, rows, lines, notes, *, premise_applies=True) -> dict:
    """The ``evaluate`` dict of a figure: the category from ``holds`` (True/False/None), then the
    premise (:func:`premise`: failed → "setting does not test the claim"; not established → a
    holds/does-not-hold becomes inconclusive), then the grid-edge rule
    (:func:`experiments.verdicts.downgrade_for_edge` over :func:`edges` of ``rows``).  The premise
    line and the edge note are added to the measured text and the verdict."""
    category = verdicts_mod.category_of({"holds": holds})
    lines = list(lines)
    if premise_applies:
        ok, premise_line = premise(entries)
        lines += ["", premise_line]
        if ok is False:
            category = verdicts_mod.UNTESTED
        elif ok is None and category in (verdicts_mod.HOLDS, verdicts_mod.FAILS):
            category = verdicts_mod.INCONCLUSIVE
    at_edge = edges(results, rows)
    category, edge_note = verdicts_mod.downgrade_for_edge(category, at_edge)
    lines += ["", "**Grid edges** of the tuned values compared here: "
              + (", ".join(f"{k}={style.fmt_float(float(v))}" for k, v in at_edge.items())
                 if at_edge else "none (every tuned value is interior to its grid)") + "."]
    notes = list(notes) + ([edge_note] if edge_note else [])
    return style.finding(claim, lines, category, "; ".join(notes) + ".")


def sweep_rows(entries, methods, dp2_method: str, name: str) -> list:
    """``[(σ, [entry of each method at σ])]`` over the σ's of the ε sweep (the private runs of
    ``dp2_method`` outside the delay sweep), keeping the σ's where every method ran."""
    sigmas = sorted({e.sigma for e in entries.values()
                     if e.method == dp2_method and e.s is None and e.sigma and e.sigma > 0})
    rows = []
    for sig in sigmas:
        es = [get(entries, m, sig) for m in methods]
        if all(e is not None for e in es):
            rows.append((sig, es))
    if not rows:
        raise ValueError(f"{name}: no σ with all of {methods}")
    return rows


def render_eps_sweep(results, out_dir, *, name: str, methods, dp2_method: str,
                     suptitle: str) -> list[Path]:
    """The ε-sweep figure ([DP2] Fig. 5, Fig. 9 left): final excess loss (mean, 95% CI bars) of
    each method at the ε each σ spent, log–log, with non-private RMSProp as a line."""
    from matplotlib.ticker import NullFormatter

    entries = load(results)
    rows = sweep_rows(entries, methods, dp2_method, name)
    ref = get(entries, "rmsprop", private=False)
    centre = (len(methods) - 1) / 2
    with style.context():
        fig, axes = style.figure(1, 1, width=4.6, height=3.4)
        ax = axes[0][0]
        for k, m in enumerate(methods):
            label, color, _, marker = METHOD_STYLE[m]
            eps = np.array([eps_of(es[k].res) for _, es in rows])
            mh = [stats.mean_ci(finals(es[k].res)) for _, es in rows]
            mean = np.array([x[0] for x in mh])
            half = np.array([x[1] for x in mh])
            # a small horizontal offset keeps overlapping error bars readable
            x = eps * (1.0 + 0.03 * (k - centre))
            main = min(rows, key=lambda r: abs(r[0] - 1.0))[1][k]  # the σ closest to 1
            ax.errorbar(x, mean, yerr=half, color=color, marker=marker, capsize=3,
                        label=f"{label} ({hp_text(main.res)} at σ = {main.sigma:g})")
        if ref is not None:
            m_ref = float(np.mean(finals(ref.res)))
            ax.axhline(m_ref, color=style.BASELINE_COLOR, linestyle="--", lw=1,
                       label=f"RMSProp (non-private, {hp_text(ref.res)})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
        eps_ticks = sorted({eps_of(e.res) for _, es in rows for e in es[:1]})
        ax.set_xticks(eps_ticks)
        ax.set_xticklabels([f"{e:.2g}" for e in eps_ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(f"ε (δ = {style.fmt_float(delta_of(rows[0][1][0].res))})")
        ax.set_ylabel(r"final excess training loss $F(w_T) - F^\star$")
        sig_txt = ", ".join(f"{s:g}" for s, _ in rows)
        ax.set_title(f"σ ∈ {{{sig_txt}}}\n" + problem_text(rows[0][1][0].res), fontsize=7.5)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=1, fontsize=6.5,
                  title="tuned values (learning rates re-tuned at each σ; DP²: η₂ only)", title_fontsize=7)
        fig.suptitle(suptitle.format(trials=rows[0][1][0].res.trials), fontsize=9)
        return style.save(fig, out_dir, name)


def main_rows(entries, methods, name: str, *, required=None) -> tuple[float, list]:
    """``(σ, [entry of each method at σ])`` at the main σ (:func:`main_sigma`), in the order of
    ``methods``.  Every method is required unless ``required`` names the ones that are (the others
    are left out of the list when they did not run); a missing required one is an error naming it."""
    sig = main_sigma(entries)
    rows = [get(entries, m, sig) for m in methods]
    required = tuple(methods) if required is None else tuple(required)
    missing = [m for m, r in zip(methods, rows) if r is None and m in required]
    if missing:
        raise ValueError(f"{name}: missing {' and '.join(missing)} at σ={sig:g} "
                         f"(needed: {', '.join(required)})")
    return sig, [r for r in rows if r is not None]


def evaluate_eps_sweep(results, *, name: str, claim: str, methods, dp2_method: str,
                       compared, columns, dp2_name: str, compared_name: str) -> dict:
    """The ``evaluate`` of an ε-sweep figure ([DP2] Fig. 5, Fig. 9 left): at each σ of
    :func:`sweep_rows`, is ``dp2_method``'s final excess loss significantly below that of each of
    the two ``compared`` methods (:func:`better`, Welch 95% CI)?  Holds when it is at every ε; does
    not hold when at some ε it is significantly above one of them and at no ε below both; else
    inconclusive (then :func:`finish` over ``dp2_method`` and the compared entries).  ``columns``
    are the table's names of ``methods``; ``dp2_name`` and ``compared_name`` word the verdict."""
    entries = load(results)
    rows = sweep_rows(entries, methods, dp2_method, name)
    k2 = list(methods).index(dp2_method)
    ka, kb = (list(methods).index(m) for m in compared)
    lines = [f"Final excess training loss (mean ± 95% CI over trials); ε at δ = "
             f"{style.fmt_float(delta_of(rows[0][1][0].res))}; learning rates re-tuned per σ "
             "(DP²: the adaptive-phase η₂ only).", "",
             "| σ | ε | " + " | ".join(columns) + f" | {columns[k2]} vs {columns[ka]} | "
             f"{columns[k2]} vs {columns[kb]} |", "|---" * (len(columns) + 4) + "|"]
    wins = losses = 0
    for sig, es in rows:
        f = [finals(e.res) for e in es]
        v1, t1 = better(f[k2], f[ka])
        v2, t2 = better(f[k2], f[kb])
        lines.append(f"| {sig:g} | {eps_of(es[k2].res):.3g} | "
                     + " | ".join(ci_text(x) for x in f) + f" | {t1} | {t2} |")
        wins += bool(v1 and v2)
        losses += v1 is False or v2 is False
    lines += ["", "Tuned: " + "; ".join(f"σ={sig:g}: " + ", ".join(
        f"{METHOD_STYLE[e.method][0]} ({hp_text(e.res)})" for e in es) for sig, es in rows)]
    holds = True if wins == len(rows) else (False if losses and not wins else None)
    notes = [f"{dp2_name} significantly better than {compared_name} at {wins} of {len(rows)} ε; "
             f"significantly worse than at least one at {losses} of {len(rows)}"]
    keep = {k2, ka, kb}
    return finish(results, entries, claim, holds,
                  [e for _, es in rows for k, e in enumerate(es) if k in keep], lines, notes)


def curve_axes(ax, rows, means, *, title: str, legend_title: str) -> None:
    """Finish a one-panel learning-curve figure of ``rows`` (entries) whose mean curves
    (:func:`plot_curve`) are ``means``: log excess-loss axis fitted to them
    (:func:`set_log_limits`), steps over the whole run, axis labels, ``title`` (small) and the
    legend under the axes titled ``legend_title``."""
    ax.set_yscale("log")
    set_log_limits(ax, means)
    ax.set_xlim(rows[0].res.steps[0], rows[0].res.steps[-1])
    ax.set_xlabel("step t")
    ax.set_ylabel(r"mean excess training loss $F(w_t) - F^\star$")
    ax.set_title(title, fontsize=8)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=1, title=legend_title,
              title_fontsize=7.5)
