"""Helpers shared by the ``dp2_logistic`` figures ([DP2], ``fig_dp2_*.py``) and the figures of
``dp2_compute`` and ``dp2_noisy_adagrad``: loading the saved results with their metadata, ε at the
paper's δ, comparisons with 95% confidence intervals on the training excess loss and on the
paper's metric (held-out accuracy), the premise checks that gate every DP² verdict, legend texts
and the common plot pieces (the class-prior line included).  Not a figure itself (no ``render``).

The premises (:func:`premise_checks`), computed from saved results only:

* **P1** balanced classes: majority rate (training and held-out labels) ≤ :data:`MAJORITY_MAX`;
* **P2** the task is learnable and generalizes: the exact optimum w*'s held-out accuracy is at least
  :data:`WSTAR_MARGIN` above the majority rate;
* **P3** adaptivity matters without privacy: non-private RMSProp's final training excess loss is
  significantly below non-private SGD's (Welch 95% CI of the difference below 0);
* **P4** private training learns past the class prior: DP-SGD's final training excess loss is
  significantly below the class-prior excess loss (upper end of its 95% CI below it); where the
  experiment also ran DP-SGD tuned by the loss rule, the lower-loss of the two runs is used (the
  question is whether DP-SGD *can* get below the prior at this σ, not how a rule picks).

A premise that fails or is not established makes every verdict it gates "setting does not test
the claim" (:func:`finish`).
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


#: P1: the largest majority rate at which the classes count as balanced.
MAJORITY_MAX = 0.6
#: P2: how far above the majority rate w*'s held-out accuracy must be.
WSTAR_MARGIN = 0.1


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
    dataset: str | None = None   # the real-data cells: the data set's name
    rule: str | None = None      # "loss": tuned by the loss rule (else the paper's accuracy rule)


def load(results: Mapping[str, object], *, extra: bool = False) -> dict[str, Entry]:
    """``{label: Entry}`` for every result, described by the metadata the experiment saved with
    it (:func:`experiments.dp2_logistic.cell_meta`).  By default only the synthetic problem's
    cells tuned by the main rule; ``extra=True`` adds the real-data and loss-rule cells."""
    saved = Saved.of(results)
    out = {label: Entry(label=label, res=saved.result(label), **saved.meta(label)) for label in saved}
    if not extra:
        out = {k: e for k, e in out.items() if e.dataset is None and e.rule is None}
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
        stability=False, dataset=None, rule=None) -> Entry | None:
    for e in entries.values():
        if e.method == method and e.private == private and e.s == s and e.h == h and (
                e.stability == stability) and (not private or math.isclose(e.sigma, sigma)) and (
                e.dataset == dataset and e.rule == rule):
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


def accs(res) -> np.ndarray | None:
    """Final held-out accuracy per trial (the paper's metric), or ``None`` when not recorded."""
    if getattr(res, "test_accuracy", None) is None:
        return None
    return np.asarray(res.test_accuracy[-1], dtype=float)


def ci_text(x) -> str:
    m, h = stats.mean_ci(np.asarray(x, dtype=float))
    return f"{float(m):.4f} ± {float(h):.4f}"


def acc_text(x) -> str:
    """Accuracy as a percentage, mean ± 95% CI half-width (``"—"`` when not recorded)."""
    if x is None:
        return "—"
    m, h = stats.mean_ci(np.asarray(x, dtype=float))
    return f"{100 * float(m):.1f}% ± {100 * float(h):.1f}"


def acc_better(a, b) -> tuple[bool | None, str]:
    """Is accuracy ``a`` higher than ``b``?  True / False (significantly lower) / None, with the
    text: the difference of means in percentage points and its Welch 95% CI."""
    d, lo, hi = stats.diff_ci(a, b)
    txt = f"{100 * d:+.1f} points (95% CI [{100 * lo:+.1f}, {100 * hi:+.1f}])"
    if lo > 0:
        return True, txt
    if hi < 0:
        return False, txt
    return None, txt


def compare(a, b) -> tuple[bool | None, str]:
    """Is run ``a`` better than run ``b`` on the paper's metric (held-out accuracy, when both
    recorded it; else the training excess loss)?  ``(verdict, text)``: the text gives both
    metrics — the accuracy difference and the loss ratio — and names which one decided."""
    acc_a, acc_b = accs(a), accs(b)
    v_loss, t_loss = better(finals(a), finals(b))
    if acc_a is None or acc_b is None:
        return v_loss, f"training excess loss {t_loss} (held-out accuracy not recorded)"
    v_acc, t_acc = acc_better(acc_a, acc_b)
    return v_acc, f"held-out accuracy {t_acc}; training excess loss {t_loss}"


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


def plot_curve(ax, e: Entry, *, label=None, color=None, ls=None, band=True, z=2,
               metric="excess_loss"):
    """Mean ``metric`` (``"excess_loss"``, or ``"test_accuracy"``) vs step with a 95% CI band."""
    name, c, l, _ = METHOD_STYLE[e.method]
    values = getattr(e.res, metric)
    return style.mean_curve(ax, e.res.steps, np.asarray(values, dtype=float), color or c,
                            with_band=band, linestyle=ls or l, label=label or legend_name(e),
                            zorder=z)


def prior_excess(results, *, real: bool = False) -> float | None:
    """The class-prior excess loss saved by the experiment (``notes["premise"]`` or, with
    ``real``, ``notes["premise_real"]``); ``None`` when absent."""
    p = Saved.of(results).notes.get("premise_real" if real else "premise")
    return None if not p else float(p["prior_excess"])


PRIOR_COLOR = "0.45"


def prior_line(ax, value, *, vertical: bool = False, label: bool = True):
    """The class-prior excess loss as a dotted grey line (horizontal, or vertical for a dot plot
    whose x axis is the loss): a method at or above it has learned nothing past the base rate."""
    if value is None:
        return
    kw = dict(color=PRIOR_COLOR, linestyle=":", lw=1.2, zorder=1,
              label=f"class prior (no feature used): {value:.3g}" if label else None)
    (ax.axvline if vertical else ax.axhline)(value, **kw)


def accuracy_axes(ax, rows, *, wstar=None, majority=None):
    """Finish a held-out accuracy axis: percent labels, reference lines at w*'s accuracy and the
    majority rate (when given)."""
    from matplotlib.ticker import FuncFormatter

    if wstar is not None:
        ax.axhline(wstar, color="0.35", lw=0.9, ls="-.",
                   label=f"exact optimum w*: {100 * wstar:.1f}%")
    if majority is not None:
        ax.axhline(majority, color=PRIOR_COLOR, lw=1.2, ls=":",
                   label=f"majority class: {100 * majority:.1f}%")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{100 * v:.0f}%"))
    ax.set_ylabel("held-out accuracy")


def set_log_limits(ax, means):
    lo = min(float(np.nanmin(m[m > 0])) for m in means if np.any(m > 0))
    hi = max(float(np.nanmax(m)) for m in means)
    if lo > 0 and np.isfinite(hi):
        ax.set_ylim(lo / 1.6, hi * 1.6)
    plain_log_ticks(ax.yaxis)


def problem_text(res) -> str:
    """One line naming the problem of ``res`` (the bag-of-words generator, a real data set, or an
    older synthetic problem) and the run's batch and steps."""
    pc = res.config["problem"]
    run = f"b={res.config['batch_size']}, T={res.config['steps']}"
    if pc.get("generator") == "dp2_data.bag_of_words":
        return (f"bag of words, n={pc['n']} (+{pc['n_test']} held out), {pc['words']} words\n"
                f"(Zipf {pc['zipf']:g}), ~{pc['words_per_doc']:g} per document; {run}")
    if pc.get("generator") == "dp2_data.real_text":
        return f"{pc.get('dataset', 'real text')}, n={pc['n']} (+{pc['n_test']} held out), d={pc['d']}; {run}"
    if "density" in pc:
        return (f"sparse logistic regression, n={pc['n']}, d={pc['d']}, "
                f"{100 * pc['density']:g}% nonzero; {run}")
    return f"{pc.get('name', 'problem')}, n={pc.get('n')}, d={pc.get('d')}; {run}"


def trials_text(entries) -> str:
    return "/".join(str(r) for r in sorted({e.res.trials for e in entries}))


def plain_log_ticks(axis, subs=None):
    """Log axis with ticks at ``subs`` × 10^k labelled as plain numbers (no overlapping minor
    labels); by default 1 when the axis spans two decades or more, 1 and 3 from one decade, else 1,
    2, 3, 5 (more would crowd a short panel)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    if subs is None:
        axis.axes.autoscale_view()  # the data limits, unless set explicitly before
        lo, hi = axis.get_view_interval()
        span = np.log10(hi / lo) if lo > 0 and hi > lo else 0.0
        subs = (1.0,) if span >= 2.0 else (1.0, 3.0) if span >= 1.0 else (1.0, 2.0, 3.0, 5.0)
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def table_figure(rows, *, name, title, out_dir, note=None, results=None) -> list[Path]:
    """A table rendered as a figure: (a) final excess training loss per method, mean and 95% CI
    (dots with error bars; log scale unless the values lie within a factor 3), each labelled with
    ε and its tuned hyperparameters, the class-prior excess as a dotted line; (b) the learning
    curves (means, 95% bands); (c) the final held-out accuracy (the paper's metric), mean and 95%
    CI.  ``results``: the saved results (for the class-prior line and w*'s accuracy)."""
    prior = prior_excess(results) if results is not None else None
    static = Saved.of(results).notes.get("premise", {}) if results is not None else {}
    with_acc = all(accs(e.res) is not None for e in rows)
    with style.context():
        fig, axes = style.figure(1, 3 if with_acc else 2, width=4.0 if with_acc else 4.6, height=3.3)
        ax = axes[0][0]
        ys = np.arange(len(rows))[::-1]
        ends = []
        for y, e in zip(ys, rows):
            m, h = stats.mean_ci(finals(e.res))
            nm, color, _, marker = METHOD_STYLE[e.method]
            ax.errorbar([m], [y], xerr=[[h], [h]], color=color, marker=marker or "o", capsize=3)
            ends += [m - h, m + h]
        if prior is not None:
            ends.append(prior)
        ends = [x for x in ends if np.isfinite(x) and x > 0]
        narrow = bool(ends) and max(ends) / min(ends) < 3
        if ends:
            ax.set_xlim(min(ends) / 1.25, max(ends) * 1.25)
        prior_line(ax, prior, vertical=True, label=False)
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
        ax.set_title("(a) final loss ± 95% CI" + ("; dotted: class prior" if prior else ""),
                     fontsize=8)
        ax.grid(True, axis="x", which="both", alpha=0.3)
        ax2 = axes[0][1]
        means = [plot_curve(ax2, e, label=legend_name(e)) for e in rows]
        prior_line(ax2, prior)
        if prior is not None:
            means.append(np.array([prior]))
        ax2.set_yscale("log")
        set_log_limits(ax2, means)
        ax2.set_xlim(rows[0].res.steps[0], rows[0].res.steps[-1])
        ax2.set_xlabel("step t")
        ax2.set_ylabel("mean excess training loss\n" + r"$F(w_t) - F^\star$")
        ax2.set_title("(b) learning curves, band: 95% CI", fontsize=8)
        if with_acc:
            ax3 = axes[0][2]
            for y, e in zip(ys, rows):
                m, h = stats.mean_ci(accs(e.res))
                nm, color, _, marker = METHOD_STYLE[e.method]
                ax3.errorbar([m], [y], xerr=[[h], [h]], color=color, marker=marker or "o", capsize=3)
            for v, ls, what in ((static.get("wstar_test_accuracy"), "-.", "w*"),
                                (static.get("majority"), ":", "majority")):
                if v is not None:
                    ax3.axvline(v, color=PRIOR_COLOR if what == "majority" else style.BASELINE_COLOR,
                                ls=ls, lw=1, label=f"{what}: {100 * v:.1f}%")
            from matplotlib.ticker import FuncFormatter, MaxNLocator

            ax3.xaxis.set_major_locator(MaxNLocator(4))
            ax3.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{100 * v:.0f}%"))
            ax3.set_ylim(-0.5, len(rows) - 0.5)
            ax3.set_yticks(ys)
            ax3.set_yticklabels([METHOD_STYLE[e.method][0] for e in rows], fontsize=6.5)
            ax3.set_xlabel("final held-out accuracy")
            ax3.set_title("(c) the paper's metric ± 95% CI", fontsize=8)
            ax3.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=6.5)
        # beside the curves, not under them: a legend below squeezed the axes until the y label
        # ran into the title
        ax2.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, fontsize=6.5,
                   title=f"ε at δ = {style.fmt_float(delta_of(rows[0].res))}"
                         + (f"; {note}" if note else ""), title_fontsize=7)
        fig.suptitle(f"{title} — {problem_text(rows[0].res)}; {trials_text(rows)} trials", fontsize=8.5)
        return style.save(fig, out_dir, name)


def table_lines(rows, header: str) -> list[str]:
    lines = [header, "", "| method | ε | tuned hyperparameters | trials | final excess loss | "
             "held-out accuracy |", "|---|---|---|---|---|---|"]
    for e in rows:
        lines.append(f"| {legend_name(e, with_eps=False)} | {eps_text(e.res)} | {hp_text(e.res)} | "
                     f"{e.res.trials} | {ci_text(finals(e.res))} | {acc_text(accs(e.res))} |")
    return lines


# ------------------------------------------------------------------------------------------------
# The premises


def _check(name, requirement, measured, ok) -> dict:
    return {"name": name, "requirement": requirement, "measured": measured, "ok": ok}


def dp_sgd_below_prior(dp_sgd_res, prior, *, which: str = "") -> dict:
    """P4 for one DP-SGD run: the upper end of the 95% CI of its final excess loss is below the
    class-prior excess ``prior``.  ``which``: a note on the run (e.g. its tuning rule)."""
    if dp_sgd_res is None or prior is None:
        return _check("P4", "DP-SGD significantly below the class-prior excess loss",
                      "not measured", None)
    m, h = stats.mean_ci(finals(dp_sgd_res))
    return _check("P4", "DP-SGD's final excess loss significantly below the class-prior excess",
                  f"{float(m):.4f} ± {float(h):.4f} vs {prior:.4f} (ratio {float(m) / prior:.2f})"
                  + (f"; {which}" if which else ""), bool(float(m) + float(h) < prior))


def premise_checks(static, *, np_sgd=None, np_rms=None, dp_sgd=None, dp_sgd_note="") -> list[dict]:
    """The four premise checks (module doc) from the saved static numbers ``static``
    (:func:`experiments.dp2_data.premise_numbers`, or ``None``) and the results of non-private SGD
    and RMSProp and of DP-SGD (``None``: not measured).  Each check: ``name``, ``requirement``,
    ``measured`` (text) and ``ok`` (True / False / None = not measured)."""
    out = []
    if static:
        maj = float(static["majority"])
        out.append(_check("P1", f"majority rate ≤ {MAJORITY_MAX:g}", f"{maj:.3f}",
                          maj <= MAJORITY_MAX))
        acc = static.get("wstar_test_accuracy")
        out.append(_check("P2", f"w*'s held-out accuracy ≥ majority + {WSTAR_MARGIN:g}",
                          "no held-out split" if acc is None else
                          f"{acc:.3f} vs {maj + WSTAR_MARGIN:.3f} (training accuracy "
                          f"{static['wstar_train_accuracy']:.3f})",
                          None if acc is None else bool(acc >= maj + WSTAR_MARGIN)))
    else:
        out += [_check("P1", f"majority rate ≤ {MAJORITY_MAX:g}", "not measured", None),
                _check("P2", f"w*'s held-out accuracy ≥ majority + {WSTAR_MARGIN:g}",
                       "not measured", None)]
    if np_sgd is not None and np_rms is not None:
        ok, txt = better(finals(np_rms), finals(np_sgd))
        out.append(_check("P3", "non-private RMSProp's final excess loss significantly below SGD's "
                                f"at T = {np_rms.config['steps']}", f"RMSProp/SGD {txt}", bool(ok)))
    else:
        out.append(_check("P3", "non-private RMSProp significantly below SGD", "not measured", None))
    out.append(dp_sgd_below_prior(dp_sgd, None if not static else float(static["prior_excess"]),
                                   which=dp_sgd_note))
    return out


def premise_ok(checks) -> bool:
    """All premises hold (a premise not measured does not hold)."""
    return all(c["ok"] is True for c in checks)


def premise_lines(checks, *, title="**Premises** (each must hold, or the setting does not test "
                                   "the claim)") -> list[str]:
    lines = [title + ":", "", "| premise | requirement | measured | |", "|---|---|---|---|"]
    for c in checks:
        word = {True: "holds", False: "**fails**", None: "**not measured**"}[c["ok"]]
        lines.append(f"| {c['name']} | {c['requirement']} | {c['measured']} | {word} |")
    return lines


def premise(results, entries) -> tuple[bool, list[str]]:
    """The four premises of ``dp2_logistic`` (synthetic problem) from the saved results:
    ``(all hold, report lines)``."""
    static = Saved.of(results).notes.get("premise")
    sig = None
    try:
        sig = main_sigma(entries)
    except ValueError:
        pass
    dp = get(entries, "dp_sgd", sig) if sig is not None else None
    note = ""
    if dp is not None:  # P4 asks whether DP-SGD can learn past the prior at this σ: the run
        # tuned for training loss (the loss rule) answers it when its loss is the lower one
        alt = get(load(results, extra=True), "dp_sgd", sig, rule="loss")
        if alt is not None and np.mean(finals(alt.res)) < np.mean(finals(dp.res)):
            dp, note = alt, "DP-SGD tuned by the loss rule (lower training loss than the accuracy rule's)"
    sgd, rms = get(entries, "sgd", private=False), get(entries, "rmsprop", private=False)
    checks = premise_checks(static, np_sgd=None if sgd is None else sgd.res,
                            np_rms=None if rms is None else rms.res,
                            dp_sgd=None if dp is None else dp.res, dp_sgd_note=note)
    return premise_ok(checks), premise_lines(checks)


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
    s = saved.notes.get("chosen_s_real" if e.dataset else "chosen_s", {}).get(e.method)
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
        if e.dataset:
            name = f"{name} [{e.dataset}]"
        if key is not None:
            for axis in sel[key].get("at_edge", []):
                out[f"{name}.{axis}"] = sel[key]["point"][axis]
        if e.label in s_edge or (e.stability and e.private
                                 and f"sig{e.sigma:g}-{e.method}" in s_edge):
            out[f"{name}.s"] = int(e.res.config["hyperparameters"]["s1"])
    return out


def edge_rule(category, results, rows, *, winners=(), symmetric=False) -> tuple[str, str, dict]:
    """The direction-aware grid-edge rule (:func:`experiments.verdicts.downgrade_for_edge`) over
    ``rows``: the edges of the rows whose method is in ``winners`` (the methods the claim says
    win) are the winner's, the others the loser's.  ``symmetric``: a claim of equivalence or of
    a property that either side's wider grid could change — every edge counts on both sides.
    Returns ``(category, note, all edges)``."""
    win = edges(results, [e for e in rows if e.method in winners])
    lose = edges(results, [e for e in rows if e.method not in winners])
    every = {**win, **lose}
    if symmetric:
        category, note = verdicts_mod.downgrade_for_edge(category, every)
    else:
        category, note = verdicts_mod.downgrade_for_edge(category, winner_edges=win, loser_edges=lose)
    return category, note, every


def edge_lines(at_edge) -> list[str]:
    return ["", "**Grid edges** of the tuned values compared here: "
            + (", ".join(f"{k}={style.fmt_float(float(v))}" for k, v in at_edge.items())
               if at_edge else "none (every tuned value is interior to its grid)") + "."]


METRIC_NOTE = ("Verdict on the paper's metric, the held-out accuracy at the last step (Welch 95% CI "
               "of the difference); the training excess loss is reported beside it. Private "
               "methods tuned by the paper's rule (training accuracy).")


def finish(results, entries, claim: str, holds, rows, lines, notes, *, premise_applies=True,
           winners=(), symmetric=False) -> dict:
    """The ``evaluate`` dict of a figure: the category from ``holds`` (True/False/None), then the
    premises (:func:`premise`: any premise that fails or is not established → "setting does not
    test the claim"), then the direction-aware grid-edge rule (:func:`edge_rule`: ``winners`` are
    the methods the claim says win; ``symmetric`` for equivalence claims).  The premise table and
    the edges are added to the measured text, the edge note to the verdict."""
    category = verdicts_mod.category_of({"holds": holds})
    lines = list(lines)
    if premise_applies:
        ok, plines = premise(results, entries)
        lines += [""] + plines
        if not ok:
            category = verdicts_mod.UNTESTED
            notes = ["a premise fails (see the table): the setting does not test the claim"] + list(notes)
    category, edge_note, at_edge = edge_rule(category, results, rows, winners=winners,
                                             symmetric=symmetric)
    lines += edge_lines(at_edge)
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
    """The ε-sweep figure ([DP2] Fig. 5, Fig. 9 left): (a) final excess training loss (mean, 95%
    CI bars) of each method at the ε each σ spent, log–log, with non-private RMSProp and the
    class-prior excess as lines; (b) the final held-out accuracy (the paper's metric)."""
    from matplotlib.ticker import NullFormatter

    entries = load(results)
    rows = sweep_rows(entries, methods, dp2_method, name)
    ref = get(entries, "rmsprop", private=False)
    prior = prior_excess(results)
    static = Saved.of(results).notes.get("premise", {})
    centre = (len(methods) - 1) / 2
    with_acc = all(accs(e.res) is not None for _, es in rows for e in es)
    with style.context():
        fig, axes = style.figure(1, 2 if with_acc else 1, width=4.0, height=3.4)
        ax = axes[0][0]
        ax_acc = axes[0][1] if with_acc else None
        for k, m in enumerate(methods):
            label, color, _, marker = METHOD_STYLE[m]
            eps = np.array([eps_of(es[k].res) for _, es in rows])
            # a small horizontal offset keeps overlapping error bars readable
            x = eps * (1.0 + 0.03 * (k - centre))
            main = min(rows, key=lambda r: abs(r[0] - 1.0))[1][k]  # the σ closest to 1
            for a_, get_ in ((ax, finals), (ax_acc, accs)):
                if a_ is None:
                    continue
                mh = [stats.mean_ci(get_(es[k].res)) for _, es in rows]
                a_.errorbar(x, [v[0] for v in mh], yerr=[v[1] for v in mh], color=color,
                            marker=marker, capsize=3,
                            label=f"{label} ({hp_text(main.res)} at σ = {main.sigma:g})")
        if ref is not None:
            m_ref = float(np.mean(finals(ref.res)))
            ax.axhline(m_ref, color=style.BASELINE_COLOR, linestyle="--", lw=1,
                       label=f"RMSProp (non-private, {hp_text(ref.res)})")
            if ax_acc is not None and accs(ref.res) is not None:
                ax_acc.axhline(float(np.mean(accs(ref.res))), color=style.BASELINE_COLOR,
                               linestyle="--", lw=1)
        prior_line(ax, prior)
        if ax_acc is not None:
            accuracy_axes(ax_acc, rows, majority=static.get("majority"))
            ax_acc.set_title("(b) held-out accuracy (the paper's metric)", fontsize=7.5)
            ax_acc.legend(handles=ax_acc.get_lines()[-1:], loc="lower right", fontsize=6)
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
        eps_ticks = sorted({eps_of(e.res) for _, es in rows for e in es[:1]})
        for a_ in (ax, ax_acc):
            if a_ is None:
                continue
            a_.set_xscale("log")
            a_.set_xticks(eps_ticks)
            a_.set_xticklabels([f"{e:.2g}" for e in eps_ticks])
            a_.xaxis.set_minor_formatter(NullFormatter())
            a_.set_xlabel(f"ε (δ = {style.fmt_float(delta_of(rows[0][1][0].res))})")
        ax.set_ylabel(r"final excess training loss $F(w_T) - F^\star$")
        sig_txt = ", ".join(f"{s:g}" for s, _ in rows)
        ax.set_title(f"(a) training loss; σ ∈ {{{sig_txt}}}", fontsize=7.5)
        handles, labels = ax.get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=6.5,
                   title="tuned values (learning rates re-tuned at each σ; DP²: η₂ only)",
                   title_fontsize=7)
        fig.suptitle(suptitle.format(trials=rows[0][1][0].res.trials) + "\n"
                     + problem_text(rows[0][1][0].res), fontsize=8.5)
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
    :func:`sweep_rows` whose DP-SGD run is significantly below the class-prior excess (premise P4
    at that ε; otherwise that ε does not test the claim), is ``dp2_method`` significantly better
    than each of the two ``compared`` methods on the paper's metric (:func:`compare`: held-out
    accuracy, Welch 95% CI)?  Holds when it is at every tested ε; does not hold when at some
    tested ε it is significantly worse than one of them and at no tested ε better than both; else
    inconclusive; no tested ε → "setting does not test the claim" (then :func:`finish`, DP² the
    claimed winner).  ``columns`` are the table's names of ``methods``."""
    entries = load(results)
    rows = sweep_rows(entries, methods, dp2_method, name)
    prior = prior_excess(results)
    k2 = list(methods).index(dp2_method)
    ka, kb = (list(methods).index(m) for m in compared)
    kd = list(methods).index("dp_sgd") if "dp_sgd" in methods else None
    lines = [f"Final held-out accuracy (the paper's metric) and final excess training loss (mean ± "
             f"95% CI over trials); ε at δ = {style.fmt_float(delta_of(rows[0][1][0].res))}; "
             "learning rates re-tuned per σ (DP²: the adaptive-phase η₂ only). " + METRIC_NOTE, "",
             "| σ | ε | " + " | ".join(f"{c} accuracy / loss" for c in columns)
             + f" | P4 (DP-SGD below prior) | {columns[k2]} vs {columns[ka]} | "
             f"{columns[k2]} vs {columns[kb]} |", "|---" * (len(columns) + 5) + "|"]
    wins = losses = tested = 0
    for sig, es in rows:
        p4 = dp_sgd_below_prior(es[kd].res if kd is not None else None, prior)
        v1, t1 = compare(es[k2].res, es[ka].res)
        v2, t2 = compare(es[k2].res, es[kb].res)
        cells = " | ".join(f"{acc_text(accs(e.res))} / {ci_text(finals(e.res))}" for e in es)
        lines.append(f"| {sig:g} | {eps_of(es[k2].res):.3g} | {cells} | "
                     f"{'holds' if p4['ok'] else 'fails: ε not tested'} | {t1} | {t2} |")
        if p4["ok"]:
            tested += 1
            wins += bool(v1 and v2)
            losses += v1 is False or v2 is False
    lines += ["", "Tuned: " + "; ".join(f"σ={sig:g}: " + ", ".join(
        f"{METHOD_STYLE[e.method][0]} ({hp_text(e.res)})" for e in es) for sig, es in rows)]
    if tested == 0:
        holds = None
    else:
        holds = True if wins == tested else (False if losses and not wins else None)
    notes = [f"{dp2_name} significantly better than {compared_name} (held-out accuracy) at {wins} "
             f"of {tested} tested ε; significantly worse than at least one at {losses}; "
             f"{len(rows) - tested} ε not tested (DP-SGD not below the class prior)"]
    keep = {k2, ka, kb}
    out = finish(results, entries, claim, holds,
                 [e for _, es in rows for k, e in enumerate(es) if k in keep], lines, notes,
                 winners=(dp2_method,))
    if tested == 0 and out["category"] != verdicts_mod.UNTESTED:
        out = style.finding(claim, out["measured"].split("\n"), verdicts_mod.UNTESTED,
                            out["verdict"])
    return out


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


def premise_table_text(results) -> list[str]:
    """The static premise numbers as report lines (``notes["premise"]``)."""
    p = Saved.of(results).notes.get("premise")
    if not p:
        return []
    return [f"Problem: majority rate {p['majority']:.3f}; exact optimum w*: training accuracy "
            f"{p['wstar_train_accuracy']:.3f}, held-out accuracy "
            f"{p.get('wstar_test_accuracy', float('nan')):.3f}; F* = {p['f_star']:.4f}; "
            f"class-prior loss {p['prior_loss']:.4f}, excess {p['prior_excess']:.4f}."]
