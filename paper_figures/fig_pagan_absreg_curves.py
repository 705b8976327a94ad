"""Figure for experiment ``pagan_absreg``: the analogue of [PAGAN]'s Figure 1 (loss vs iteration).

Asi et al., *Private Adaptive Gradient Methods for Convex Optimization* (ICML 2021), §6.1, Fig. 1:
one panel per privacy level ε; in each, the median excess training loss ``F(x̄_t) − F*`` of the
average iterate ``x̄_t = (1/t) Σ_{k≤t} x^k`` (what [PAGAN] Algorithms 1–2 return) over the
trials (log scale) of non-private SGD and AdaGrad (dashed; the same in every panel), PASAN and
PAGAN with ``A = I``, PAGAN with the optimal scaling and PDP-SGD, each at its own tuned step size
α and radius ``B`` (clip ``C`` for PDP-SGD); bands: 95% confidence interval of the median (order
statistics).  The paper plots the loss ``F`` itself; the excess ``F − F*`` (``F*`` the exact
optimum, a linear program) shows the same ordering with the tail resolved.

Reads only saved results and the experiment's manifest (see ``fig_pagan_absreg``).  Standalone::

    python -m dpsim.paper_figures.fig_pagan_absreg_curves results/pagan_absreg/quick [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

import numpy as np

from . import style
from dpsim.experiments import verdicts

from .pagan_common import (METHOD_STYLE, PRIVATE, boot_ratio, epsilon_of, eps_note, fmt_ratio,
                           hp_text, load, median_ci, output_of, with_edges)

NAME = "fig_pagan_absreg_curves"
CLAIM = ("At ε = 0.1 every private method is worse than the non-private ones; as ε grows PAGAN "
         "with the optimal scaling approaches non-private AdaGrad, while private AdaGrad with A = I "
         "(PAGAN, A = I) keeps the slower, SGD-like convergence even at ε = 4 ([PAGAN] §6.1, "
         "Fig. 1).")


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    """Draw one panel per ε from saved results; returns ``[png, pdf]`` paths in ``out_dir``."""
    return style.render_with(_render, load(results), out_dir)


def _curve(ax, run, label, color, ls, z):
    med, lo, hi = median_ci(run.excess, axis=1)
    steps = run.result.steps
    floor = np.maximum(np.nanmin(np.where(med > 0, med, np.inf)) / 10, np.finfo(float).tiny)
    style.band(ax, steps, np.maximum(lo, floor), hi, color, alpha=0.18)
    ax.plot(steps, med, color=color, linestyle=ls, label=label, zorder=z)
    return med


def _render(data, out_dir) -> list[Path]:
    eps_list = data["epsilons"] or [None]
    delta = data["delta"]
    fig, axes = style.figure(1, len(eps_list), width=3.5, height=3.6, sharey=True)
    for a in axes[0]:
        a.tick_params(labelleft=True)  # shared scale, but every panel readable on its own
    trials = set()
    lo_all, hi_all = [], []
    for ax, eps in zip(axes[0], eps_list):
        for method in ("sgd", "adagrad"):
            run = data["refs"].get(method)
            if run is None:
                continue
            name, color, ls, _ = METHOD_STYLE[method]
            med = _curve(ax, run, f"{name}: {hp_text(run)}", color, ls, 2)
            trials.add(run.result.trials)
            lo_all.append(np.nanmin(med[med > 0])), hi_all.append(np.nanmax(med))
        for method in PRIVATE:
            run = data["private"].get(method, {}).get(eps)
            if run is None:
                continue
            name, color, ls, _ = METHOD_STYLE[method]
            label = f"{name} (ε={epsilon_of(run, delta):.2g}): {hp_text(run)}"
            med = _curve(ax, run, label, color, ls, 3 if method == "pagan_opt" else 2)
            trials.add(run.result.trials)
            lo_all.append(np.nanmin(med[med > 0])), hi_all.append(np.nanmax(med))
        ax.set_yscale("log")
        ax.set_xlabel("iteration t")
        title = "non-private only" if eps is None else f"ε = {eps:g}"
        ax.set_title(f"({'abc'[list(eps_list).index(eps)] if len(eps_list) <= 3 else ''}) {title}")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.21), ncol=1, fontsize=6.8)
        steps = next(iter(data["refs"].values())).result.steps if data["refs"] else None
        if steps is not None:
            ax.set_xlim(steps[0], steps[-1])
    if lo_all:
        axes[0][0].set_ylim(min(lo_all) / 2, max(hi_all) * 1.5)
    avg = output_of(data) == "average iterate"
    axes[0][0].set_ylabel(r"median excess loss $F(\bar x_t) - F^\star$" if avg
                          else r"median excess training loss $F(x_t) - F^\star$")
    r_txt = "/".join(str(r) for r in sorted(trials))
    fig.suptitle(f"Absolute regression, σ_j = j^(-3/2) ([PAGAN] Fig. 1), {output_of(data)}"
                 + (r" $\bar x_t = \frac{1}{t}\sum_{k\leq t} x^k$" if avg else "")
                 + f": median over {r_txt} trials, band: 95% CI of the median\n{eps_note(data)}; "
                 "α, B tuned per method and ε", fontsize=8)
    return style.save(fig, out_dir, NAME)


def evaluate(results: Mapping[str, object]) -> dict:
    """Three parts, each a bootstrap 95% CI of a ratio of median final excess losses:

    (a) at the smallest ε every private method is worse than non-private AdaGrad *and* SGD
        (ratio private / non-private above 1);
    (b) at the largest ε PAGAN-optimal is nearer (on the log scale) to AdaGrad than to SGD:
        ``median(PAGAN_opt) / √(median(SGD)·median(AdaGrad))`` below 1;
    (c) at the largest ε PAGAN with A = I is nearer to SGD than to AdaGrad: the same ratio for
        PAGAN (A = I) above 1.

    All on the average iterate (the algorithms' output).  Category: *holds* when all three hold,
    *does not hold* when some part is significantly contradicted (its CI on the other side of 1),
    else *inconclusive*.  Grid edges are judged per part, direction-aware
    (``verdicts.downgrade_for_edge``): a part's *holds* becomes inconclusive when its claimed
    loser's tuned value sits on an edge, its *does not hold* when its claimed winner's does (roles
    in the code), before the parts are combined.
    """
    data = load(results)
    refs, private = data["refs"], data["private"]
    eps_list = data["epsilons"]
    lines = [f"Ratios of median final excess training losses of the {output_of(data)}, "
             f"F(x̄_T) − F*, with bootstrap 95% CIs over trials; {eps_note(data)}.", ""]
    parts = {}
    if not eps_list or "adagrad" not in refs or "sgd" not in refs:
        return {"claim": CLAIM, "measured": "\n".join(lines + ["missing results"]), "holds": None,
                "category": verdicts.INCONCLUSIVE,
                "verdict": "needs non-private SGD and AdaGrad and at least one ε."}
    sgd, ada = refs["sgd"].final, refs["adagrad"].final
    e0, e1 = eps_list[0], eps_list[-1]

    # (a)
    rows, ok, bad, fail_vs, all_worse_ada = [], True, False, [], True
    for method in PRIVATE:
        run = private.get(method, {}).get(e0)
        if run is None:
            continue
        ra = boot_ratio(run.final, ada)
        rs = boot_ratio(run.final, sgd)
        rows.append(f"{METHOD_STYLE[method][0]}: {fmt_ratio(*ra[:3])} vs AdaGrad, "
                    f"{fmt_ratio(*rs[:3])} vs SGD")
        ok &= ra[1] > 1 and rs[1] > 1
        bad |= ra[2] < 1 or rs[2] < 1
        all_worse_ada &= ra[1] > 1
        if rs[2] < 1:
            fail_vs.append(METHOD_STYLE[method][0])
    parts["a"] = True if ok and rows else (False if bad else None)
    lines.append(f"(a) ε = {e0:g}, private / non-private: " + "; ".join(rows) + ".")

    def geo(x, seed):
        """median(x) / √(median(SGD)·median(AdaGrad)) with a bootstrap 95% CI (< 1: nearer AdaGrad)."""
        rng = np.random.default_rng(seed)

        def bm(v):
            return np.median(v[rng.integers(0, v.size, size=(4000, v.size))], axis=1)

        point = float(np.median(x) / np.sqrt(np.median(sgd) * np.median(ada)))
        reps = bm(x) / np.sqrt(bm(sgd) * bm(ada))
        lo, hi = np.nanquantile(reps, [0.025, 0.975])
        return point, float(lo), float(hi)

    # (b)
    opt = private.get("pagan_opt", {})
    if e1 in opt:
        gm = geo(opt[e1].final, 11)
        parts["b"] = True if gm[2] < 1 else (False if gm[1] > 1 else None)
        gaps = "; ".join(f"ε = {e:g}: {fmt_ratio(*boot_ratio(opt[e].final, ada, seed=12)[:3])}"
                         for e in eps_list if e in opt)
        lines.append(f"(b) PAGAN-optimal / AdaGrad: {gaps}. At ε = {e1:g}, over the geometric "
                     f"mean of SGD's and AdaGrad's: {fmt_ratio(*gm)} (< 1: nearer AdaGrad).")
    else:
        parts["b"] = None
        lines.append("(b) needs PAGAN-optimal at the largest ε.")

    # (c)
    pag = private.get("pagan", {}).get(e1)
    if pag is not None:
        gm = geo(pag.final, 13)
        parts["c"] = True if gm[1] > 1 else (False if gm[2] < 1 else None)
        r_sgd = boot_ratio(pag.final, sgd, seed=14)
        r_ada = boot_ratio(pag.final, ada, seed=15)
        lines.append(f"(c) ε = {e1:g}, PAGAN (A = I) / AdaGrad: {fmt_ratio(*r_ada[:3])}, "
                     f"/ SGD: {fmt_ratio(*r_sgd[:3])}; over the geometric mean of the two: "
                     f"{fmt_ratio(*gm)} (> 1: nearer SGD).")
    else:
        parts["c"] = None
        lines.append("(c) needs PAGAN (A = I) at the largest ε.")

    # Grid edges, per part (direction-aware, ``verdicts.downgrade_for_edge``): a wider grid can only
    # improve a method, so a part's "holds" can flip only through its claimed loser, its "does not
    # hold" only through its claimed winner.  (a) non-private beats private: winners the
    # non-private runs, losers the private methods at ε_min; (b) PAGAN-optimal below the geometric
    # mean of SGD and AdaGrad: winner PAGAN-optimal, losers SGD and AdaGrad (a better reference
    # lowers the mean); (c) PAGAN (A = I) above that mean: winners SGD and AdaGrad, loser PAGAN.
    refs_l = [refs[m].label for m in ("sgd", "adagrad")]
    roles = {"a": (refs_l, [private[m][e0].label for m in PRIVATE if e0 in private.get(m, {})]),
             "b": ([private["pagan_opt"][e1].label] if e1 in opt else [], refs_l),
             "c": (refs_l, [pag.label] if pag is not None else [])}
    as_cat = {True: verdicts.HOLDS, False: verdicts.FAILS, None: verdicts.INCONCLUSIVE}
    cats, edge_notes = {}, []
    for k, v in parts.items():
        win, lose = roles[k]
        cats[k], note = with_edges(as_cat[v], data, winners=win, losers=lose)
        if note:
            edge_notes.append(f"({k}) {note}")
    words = {verdicts.HOLDS: "holds", verdicts.FAILS: "fails", verdicts.INCONCLUSIVE: "inconclusive"}
    verdict = "; ".join(f"({k}) {words[c]}" + (" (grid edge)" if c != as_cat[parts[k]] else "")
                        for k, c in cats.items())
    if fail_vs:
        verdict += (f" — (a) fails because at ε = {e0:g} " + ", ".join(fail_vs)
                    + " is significantly better than non-private SGD")
        verdict += "; against non-private AdaGrad every private method is " + (
            "significantly worse" if all_worse_ada else "not significantly worse")
    if all(c == verdicts.HOLDS for c in cats.values()):
        category = verdicts.HOLDS
    elif any(c == verdicts.FAILS for c in cats.values()):
        category = verdicts.FAILS
    else:
        category = verdicts.INCONCLUSIVE
    edge_note = "; ".join(edge_notes)
    sgd_sel = data["notes"].get("selection", {}).get("sgd")
    if sgd_sel is not None:
        g = sgd_sel["grid"]["lr"]
        verdict += (f"; non-private SGD's tuned α = {sgd_sel['point']['lr']:g} on the grid "
                    f"{min(g):g}…{max(g):g} (the paper's nine values widened above)"
                    + (" — on its edge" if "lr" in sgd_sel["at_edge"] else ", not on an edge"))
    if edge_note:
        verdict += "; " + edge_note
    return style.finding(CLAIM, lines, category, verdict + ".")


def main(argv=None) -> int:
    """``python -m dpsim.paper_figures.<this> RESULTS_DIR [OUT_DIR]``: render from saved results."""
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
