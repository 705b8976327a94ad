"""Figure for experiment ``dpsgd_logistic``: excess loss of SGD and DP-SGD (σ sweep) vs step.

Two panels (dense, sparse logistic regression).  Each curve is the mean over trials of the excess
training loss ``F(w_t) − F*`` (log scale); the band is the 95% Student-t confidence interval of that
mean.  Private curves carry ε at δ = 1e-5 (``Result.epsilon``) and the chosen learning rate η.

Reads only saved results: ``results`` maps the experiment's labels (``"<problem>-<setting>"``) to
``.npz`` files written by ``Result.save``.  Standalone::

    python -m dpsim.paper_figures.fig_dpsgd_logistic results/dpsgd_logistic/quick [OUT_DIR]
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Mapping

import numpy as np

from dpsim.analysis import stats
from dpsim.experiments.pipeline import Saved

from . import style

NAME = "fig_dpsgd_logistic"
DELTA = 1e-5
CLAIM = ("DP-SGD's excess training loss grows with the noise multiplier σ, and DP-SGD approaches "
         "SGD as σ → 0 (each setting at its own tuned learning rate).")
PROBLEMS = ("dense", "sparse")


def _load(results: Mapping[str, object]) -> dict:
    """``{problem: [(sigma or 0.0 for SGD, label, Result), ...] sorted by sigma}`` (problem and σ
    from the metadata the experiment saved with each cell)."""
    saved = Saved.of(results)
    out: dict[str, list] = {p: [] for p in PROBLEMS}
    for label in saved:
        meta = saved.meta(label)
        if meta["problem"] not in out:
            continue
        out[meta["problem"]].append((float(meta["noise_multiplier"]), label, saved.result(label)))
    for prob in out:
        out[prob].sort(key=lambda t: t[0])
    return {p: v for p, v in out.items() if v}


def _title(prob: str, res) -> str:
    pc = res.config["problem"]
    if prob == "dense":
        return f"Dense features (n={pc['n']}, d={pc['d']})"
    return f"Sparse features (n={pc['n']}, d={pc['d']}, {100 * pc['density']:g}% nonzero)"


def _eps_text(eps) -> str:
    e = float(np.max(eps))
    return "∞" if math.isinf(e) else f"{e:.2g}"


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    """Draw the two panels from saved results; returns ``[png, pdf]`` paths in ``out_dir``."""
    data = _load(results)
    if not data:
        raise ValueError(f"{NAME}: no dense-/sparse- results among {sorted(results)}")
    with style.context():
        return _render(data, out_dir)


def _render(data, out_dir) -> list[Path]:
    fig, axes = style.figure(1, len(data), width=3.6, height=3.4)
    trials = set()
    for ax, (prob, rows) in zip(axes[0], data.items()):
        n_priv = sum(1 for s, _, _ in rows if s > 0)
        colors = iter(style.sequential(n_priv))
        for sigma, label, res in rows:
            ex = res.excess_loss
            if ex is None:
                raise ValueError(f"{NAME}: result {label!r} has no excess loss (problem without F*)")
            trials.add(res.trials)
            lr = res.config["hyperparameters"]["lr"]
            if sigma == 0.0:
                color, name, z = style.BASELINE_COLOR, f"SGD (non-private), η={lr:g}", 3
            else:
                color = next(colors)
                name, z = f"DP-SGD σ={sigma:g}: ε={_eps_text(res.epsilon(DELTA))}, η={lr:g}", 2
            style.mean_curve(ax, res.steps, ex, color, label=name, zorder=z,
                             linestyle="--" if sigma == 0.0 else "-")
        ax.set_yscale("log")
        # Limits from the mean curves: a band whose lower end reaches 0 (few trials) is cut off
        # at the bottom instead of stretching the log axis over decades.
        means = [r.excess_loss.mean(axis=1) for _, _, r in rows]
        lo_m = min(float(np.nanmin(m)) for m in means)
        hi_m = max(float(np.nanmax(m)) for m in means)
        if lo_m > 0 and np.isfinite(hi_m):
            ax.set_ylim(lo_m / 2.5, hi_m * 1.6)
        ax.set_xlabel("step t")
        ax.set_title(_title(prob, rows[0][2]))
        ax.set_xlim(rows[0][2].steps[0], rows[0][2].steps[-1])
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1,
                  title=f"ε at δ = {style.fmt_float(DELTA)}; η = tuned learning rate",
                  title_fontsize=7.5)
    axes[0][0].set_ylabel(r"mean excess training loss $F(w_t) - F^\star$")
    r_txt = "/".join(str(r) for r in sorted(trials))
    fig.suptitle(f"SGD vs DP-SGD on logistic regression — mean over {r_txt} trials, "
                 f"band: 95% CI of the mean", fontsize=9)
    return style.save(fig, out_dir, NAME)


def evaluate(results: Mapping[str, object]) -> dict:
    """The claim, the measured final excess loss per setting (mean ± 95% CI) and a verdict.

    Holds when, on every problem, (a) the largest σ has a significantly higher final excess loss
    than SGD (Welch 95% CI of the difference above 0) and (b) no increase of σ (SGD counted as
    σ = 0) lowers the mean final excess loss significantly.  (a) fails without (b) failing →
    inconclusive; (b) fails → does not hold.
    """
    data = _load(results)
    lines = [
        f"Final excess training loss F(w_T) − F*, mean ± 95% CI (Student t) over the trials; ε at "
        f"δ = {style.fmt_float(DELTA)}; η chosen per setting by best final mean training loss on separate tuning "
        "trials; *vs SGD*: ratio of means.",
        "",
        "| problem | setting | ε | η | trials | final excess loss | vs SGD |",
        "|---|---|---|---|---|---|---|",
    ]
    verdicts, notes = [], []
    for prob, rows in data.items():
        finals = [(s, lab, r.excess_loss[-1]) for s, lab, r in rows]
        base = next((f for s, _, f in finals if s == 0.0), None)
        for (sigma, lab, res), (_, _, f) in zip(rows, finals):
            m, h = stats.mean_ci(f)
            ratio = f"{m / np.mean(base):.2f}×" if base is not None else "—"
            setting = "SGD" if sigma == 0.0 else f"DP-SGD σ={sigma:g}"
            eps = "∞" if sigma == 0.0 else _eps_text(res.epsilon(DELTA))
            lines.append(f"| {prob} | {setting} | {eps} | {res.config['hyperparameters']['lr']:g} | "
                         f"{res.trials} | {stats.fmt_ci(m, h)} | {ratio} |")
        if base is None or len(finals) < 2:
            verdicts.append(None)
            notes.append(f"{prob}: no SGD baseline or no private setting")
            continue
        d, lo, hi = stats.diff_ci(finals[-1][2], base)
        top_sig = lo > 0
        drops = []
        for (s0, _, f0), (s1, _, f1) in zip(finals, finals[1:]):
            _, lo01, hi01 = stats.diff_ci(f1, f0)
            if hi01 < 0:
                drops.append(f"σ={s0:g}→{s1:g}")
        ratio = np.mean(finals[-1][2]) / np.mean(base)
        notes.append(f"{prob}: σ={finals[-1][0]:g} vs SGD: {ratio:.2g}× "
                     f"(difference {d:.2e}, 95% CI [{lo:.2e}, {hi:.2e}])"
                     + (f"; the loss significantly decreases when σ grows at {', '.join(drops)}"
                        if drops else
                        "; no step up in σ significantly lowers the loss (monotone within the CIs)"))
        if drops:
            verdicts.append(False)
        elif top_sig:
            verdicts.append(True)
        else:
            verdicts.append(None)
    if any(v is False for v in verdicts):
        holds = False
    elif verdicts and all(v is True for v in verdicts):
        holds = True
    else:
        holds = None
    return {"claim": CLAIM, "measured": "\n".join(lines), "holds": holds,
            "verdict": "; ".join(notes) + "."}


def main(argv=None) -> int:
    """``python -m dpsim.paper_figures.<this> RESULTS_DIR [OUT_DIR]``: render from saved results."""
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
