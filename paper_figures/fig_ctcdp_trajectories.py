"""Figure for experiment ``ctcdp_quadratic`` ([L2P] Fig. 8 analogue): θ trajectories in the plane.

Rows: the smallest ε of the results (the paper's (0.05, 1e-8)-DP) and the largest (1.6); columns:
the methods (SGD-Adv with zCDP and with advanced-composition calibration; ctCDP training with the
uniform, linear and exponential noise schedules).  Each panel shows the loss contours of the
quadratic (grey lines, rebuilt from the problem config saved with the results), the distribution of
the points visited by all repeats (blue filled contours of a 2-D histogram, log density, as in the
paper), a few sampled trajectories (orange), the initial point (○) and the optimum (★).  Axes are
shared along a row so the size of the region each method wanders over can be compared.

Reads only saved results (``results`` maps labels ``"eps<ε>-<method>"`` to ``.npz`` files).
Standalone::

    python -m dpsim.paper_figures.fig_ctcdp_trajectories results/ctcdp_quadratic/quick [OUT_DIR]
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Mapping

import numpy as np
from scipy.ndimage import gaussian_filter

from dpsim.analysis import stats
from dpsim.analysis import tcdp as tcdp_bounds
from dpsim.experiments import verdicts

from . import style
from .ctcdp_common import (CTCDP, DELTA, DISPLAY, ORDER, PRIMARY, SHORT, final_distance, fmt_ratio,
                           info, load, notes_of, path_of, premise, problem_of, setting_text)

NAME = "fig_ctcdp_trajectories"
CLAIM = ("At (0.05, 1e-8)-DP, L2P (learned LSTM projector and noise scheduler) converges close to, "
         "but stops before, the optimum because its budget is spent, while SGD-Adv random-walks "
         "over a rather large region ([L2P] App. C.1, Fig. 8). dpsim has no learned projector or "
         "scheduler; what it can check is that budget-constrained (ctCDP) training spends exactly "
         "its budget and stops, and how far each method ends from θ*.")


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    data = load(results, name=NAME)
    eps_rows = sorted({min(data), max(data)})
    with style.context():
        return _render(data, eps_rows, out_dir)


def _row_limits(row: dict, w_star, w0):
    pts = [w_star[None, :], w0[None, :]]
    for res in row.values():
        pts.append(path_of(res).reshape(-1, 2))
    allp = np.concatenate(pts)
    lo = np.quantile(allp, 0.005, axis=0)
    hi = np.quantile(allp, 0.995, axis=0)
    lo = np.minimum(lo, np.minimum(w_star, w0))
    hi = np.maximum(hi, np.maximum(w_star, w0))
    c = (lo + hi) / 2
    half = max(float(np.max(hi - lo)) / 2 * 1.08, 0.5)
    return c[0] - half, c[0] + half, c[1] - half, c[1] + half


def _render(data, eps_rows, out_dir) -> list[Path]:
    methods = [m for m in ORDER if any(m in data[e] for e in eps_rows)]
    nr, nc = len(eps_rows), len(methods)
    fig, axes = style.figure(nr, nc, width=2.55, height=2.65)
    trials = set()
    for r, eps in enumerate(eps_rows):
        row = data[eps]
        any_res = next(iter(row.values()))
        prob = problem_of(any_res)
        w_star = np.asarray(prob.optimum[0], dtype=float)
        w0 = path_of(any_res)[0, 0]
        x0, x1, y0, y1 = _row_limits(row, w_star, w0)
        gx, gy = np.meshgrid(np.linspace(x0, x1, 160), np.linspace(y0, y1, 160))
        F = np.asarray(prob.loss(np.stack([gx.ravel(), gy.ravel()], axis=1)), dtype=float).reshape(gx.shape)
        f_star = float(prob.optimum[1])
        levels = f_star + np.geomspace(max(float(np.min(F)) - f_star, 1e-3) * 3, float(np.max(F)) - f_star, 9)
        for c, method in enumerate(methods):
            ax = axes[r][c]
            if method not in row:
                ax.set_visible(False)
                continue
            res = row[method]
            trials.add(res.trials)
            inf = info(method, res)
            P = path_of(res)  # (K, R, 2)
            # points actually visited: up to each trial's own stop
            taken = inf["steps_taken"]
            K = P.shape[0]
            keep = np.arange(K)[:, None] <= np.minimum(taken, K - 1)[None, :]
            pts = P[keep]
            H, xe, ye = np.histogram2d(pts[:, 0], pts[:, 1], bins=50, range=[[x0, x1], [y0, y1]])
            H = gaussian_filter(H.T, 0.8)
            if H.max() > 0:
                Hl = np.log10(np.where(H > 0.05, H, np.nan))
                xc, yc = (xe[:-1] + xe[1:]) / 2, (ye[:-1] + ye[1:]) / 2
                top = max(float(np.nanmax(Hl)), 0.5)
                ax.contourf(xc, yc, np.nan_to_num(Hl, nan=-1.0), levels=np.linspace(0, top, 7),
                            cmap="Blues", alpha=0.85, zorder=1)
            ax.contour(gx, gy, F, levels=levels, colors="0.45", linewidths=0.6, zorder=2)
            for i in range(min(4, P.shape[1])):
                stop = int(min(taken[i], K - 1))
                ax.plot(P[: stop + 1, i, 0], P[: stop + 1, i, 1], color="#ff7f0e", lw=0.8, alpha=0.9,
                        zorder=3, marker=".", ms=1.5)
            ax.plot(*w0, marker="o", mfc="white", mec="k", ms=5, zorder=5, ls="none")
            ax.plot(*w_star, marker="*", color="k", ms=9, zorder=5, ls="none")
            dist = final_distance(res)
            m, h = stats.mean_ci(dist)
            eps_sp = float(np.max(inf["eps_spent"]))
            ax.set_title(f"{SHORT[method]}\nε={eps:g} (spent {eps_sp:.3g}); {setting_text(method, inf)}",
                         fontsize=7.5)
            ax.text(0.03, 0.03, f"final ‖θ−θ*‖ = {m:.3g} ± {h:.2g}", transform=ax.transAxes,
                    fontsize=6.5, va="bottom", ha="left",
                    bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none", alpha=0.8), zorder=6)
            ax.set_xlim(x0, x1)
            ax.set_ylim(y0, y1)
            ax.set_aspect("equal", adjustable="box")
            ax.grid(False)
            ax.set_xlabel(r"$\theta_1$")
            if c == 0:
                ax.set_ylabel(rf"(ε, δ) = ({eps:g}, {style.fmt_float(DELTA)})" + "\n" + r"$\theta_2$")
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    handles = [Patch(color=matplotlib_blue(), label="visited points, all repeats (log density)"),
               Line2D([], [], color="#ff7f0e", lw=1, marker=".", ms=3, label="sampled trajectories"),
               Line2D([], [], color="0.45", lw=0.8, label="loss contours"),
               Line2D([], [], marker="o", mfc="white", mec="k", ls="none", label=r"start $\theta_0$"),
               Line2D([], [], marker="*", color="k", ms=9, ls="none", label=r"optimum $\theta^\star$")]
    fig.legend(handles=handles, loc="outside lower center", ncol=5, fontsize=7.5)
    r_txt = "/".join(str(t) for t in sorted(trials))
    fig.suptitle(f"Random quadratic (m=60, d=2) at (ε, δ)-DP: {r_txt} repeats per method; "
                 "ε spent at δ = 1e-8 (ctCDP: tCDP→DP; SGD-Adv: RDP accountant); "
                 "final ‖θ−θ*‖: mean ± 95% CI", fontsize=8.5)
    return style.save(fig, out_dir, NAME)


def matplotlib_blue():
    import matplotlib

    return matplotlib.colormaps["Blues"](0.6)


# ---------------------------------------------------------------------------------------------
# Claim


def evaluate(results: Mapping[str, object]) -> dict:
    """Budget spent by the ctCDP runs (all ε), final distance to θ* at the smallest ε and the
    premise there.

    Category: *out of scope* — the claim is about L2P's learned projector and scheduler, which
    dpsim does not build.  Measured and reported: (a) whether every ctCDP trial (every ε, every
    schedule) spends its budget to within 1e-6 and takes exactly its planned T steps; (b) at the
    smallest ε, the final distance to θ* of SGD-Adv (advanced composition, the primary; the zCDP
    reading beside it) minus each ctCDP method's (Welch 95% CI of the difference of means); (c) the
    premise there (``ctcdp_common.premise``: can any method improve on its start?).
    """
    data = load(results)
    eps_min = min(data)
    lines = [
        f"Per (ε, method): chosen setting, steps taken, budget spent ρ_spent/ρ_tot (ctCDP; min–max "
        f"over trials), ε spent at δ = {style.fmt_float(DELTA)}, final distance to the optimum and "
        "the largest distance from θ* along the path (mean ± 95% CI over trials).",
        "",
        "| ε | method | setting | steps taken | ρ_spent/ρ_tot | ε spent | final ‖θ−θ*‖ | max ‖θ_t−θ*‖ |",
        "|---|---|---|---|---|---|---|---|",
    ]
    budget_ok, budget_notes = True, []
    for eps, row in data.items():
        for method, res in row.items():
            inf = info(method, res)
            P = path_of(res)
            w_star = np.asarray(problem_of(res).optimum[0], dtype=float)
            maxd = np.nanmax(np.linalg.norm(P - w_star, axis=-1), axis=0)
            d, dh = stats.mean_ci(final_distance(res))
            md, mh = stats.mean_ci(maxd)
            st = inf["steps_taken"]
            steps = f"{st.min()}" if st.min() == st.max() else f"{st.min()}–{st.max()}"
            if inf["rho_ratio"] is not None:
                rr = inf["rho_ratio"]
                rho_txt = f"{rr.min():.9f}–{rr.max():.9f}"
                if rr.min() < 1 - 1e-6 or rr.max() > 1 + 1e-12 or np.any(st != inf["T"]):
                    budget_ok = False
                    budget_notes.append(f"ε={eps:g} {method} ({setting_text(method, inf)}): "
                                        f"{100 * rr.mean():.1f}% of ρ_tot in {steps} steps")
                eps_txt = f"{float(np.max(inf['eps_spent'])):.4g}"
            else:
                rho_txt = "— (fixed T)"
                eps_txt = f"{inf['eps_spent']:.3g} (RDP)"
            lines.append(f"| {eps:g} | {DISPLAY[method]} | {setting_text(method, inf)} | {steps} | {rho_txt} | "
                         f"{eps_txt} | {stats.fmt_ci(d, dh)} | {stats.fmt_ci(md, mh)} |")
    row = data[eps_min]
    notes = []
    for base_m in (PRIMARY, "sgd_adv"):
        if base_m not in row:
            continue
        base = final_distance(row[base_m])
        for method in CTCDP:
            if method not in row:
                continue
            diff, lo, hi = stats.diff_ci(base, final_distance(row[method]))
            notes.append(f"{SHORT[base_m]} − {SHORT[method]}: {diff:+.3g} [{lo:+.3g}, {hi:+.3g}] "
                         f"({'farther' if lo > 0 else 'closer' if hi < 0 else 'n.s.'})")
    lines += ["", f"Final distance to θ* at ε = {eps_min:g}, SGD-Adv minus ctCDP, difference of means "
              "with Welch 95% CI (> 0: SGD-Adv ends farther): " + "; ".join(notes) + "."]
    if not budget_ok:
        budget_txt = ("(a) budget: the uniform schedule spends ρ_tot to within the 2e-9 rounding guard "
                      "in exactly T steps, but clamping σ_t to [σ_min, 2σ_g] ends some parametric runs "
                      "with budget left (" + "; ".join(budget_notes) + ")")
    else:
        budget_txt = ("(a) budget: every ctCDP trial spends ρ_tot to within the 2e-9 rounding guard in "
                      "exactly its planned T steps, then stops")
    prem = premise(data).get(eps_min)
    bound = (notes_of(results).get("premise") or {}).get("improvement_bound", {}).get(f"{eps_min:g}")
    any_res = next(iter(row.values()))
    n = int(any_res.config["problem"]["m"])
    rho = float(tcdp_bounds.rho_a(eps_min, DELTA))
    # std per coordinate of one replace-one full-batch release of the mean clipped gradient spending
    # all of rho_a, in units of the clip C (the largest possible norm of that mean)
    noise_ratio = 2.0 / (n * math.sqrt(2.0 * rho))
    w_star = np.asarray(problem_of(any_res).optimum[0], dtype=float)
    d0 = float(np.linalg.norm(path_of(any_res)[0, 0] - w_star))
    farther = [SHORT[m] for m, r in row.items() if np.mean(final_distance(r)) > d0]
    prem_txt = ""
    if prem is not None:
        prem_txt = (f"(c) premise at ε = {eps_min:g}: {'holds' if prem['holds'] else 'fails'} — the best "
                    f"method ({SHORT[prem['best']]}) ends at {fmt_ratio(*prem['ratio'])} of the start's "
                    f"excess loss (median, 95% CI); one full-batch release of the mean clipped gradient "
                    f"spending all of ρ_a has noise std {noise_ratio:.2g}·C per coordinate"
                    + (f", so even an optimally scaled step can shrink the squared distance to θ* by at "
                       f"most {100 * (1 - bound):.0f}%" if bound is not None else "")
                    + f"; {len(farther)}/{len(row)} methods end on average farther from θ* than the "
                    f"start (‖θ0−θ*‖ = {d0:.3g}); ")
    chosen = "; ".join(f"{SHORT[m]}: {setting_text(m, info(m, r, spent=False))}" for m, r in row.items())
    verdict = ("out of scope: the claim is about L2P's learned LSTM projector and scheduler, which "
               "dpsim does not build (ALGORITHMS §2.7; no honest non-learned stand-in for a learned "
               "projector). Measured instead: " + budget_txt + "; (b) see the distances above; "
               + prem_txt + f"tuned settings at ε = {eps_min:g}: {chosen}.")
    return {"claim": CLAIM, "measured": "\n".join(lines), "holds": None,
            "category": verdicts.OUT_OF_SCOPE, "verdict": verdict}


def main(argv=None) -> int:
    """``python -m dpsim.paper_figures.<this> RESULTS_DIR [OUT_DIR]``: render from saved results."""
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
