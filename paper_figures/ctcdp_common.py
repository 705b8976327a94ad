"""Helpers shared by the ``ctcdp_quadratic`` figures ([L2P]): loading the saved results with
their metadata, the methods' names and colours, the chosen settings and spent budget of a run, its
θ path and distance to the optimum, medians with distribution-free intervals, bootstrap ratios of
medians, the per-ε premise check (can any private method improve on its start?) and the grid-edge
status of the tuned values.  Not a figure itself (no ``render``).

The primary SGD-Adv is the advanced-composition one (``sgd_adv_ac``, the paper's accountant as
dpsim reads it); the zCDP-calibrated one (``sgd_adv``) is the like-for-like extra.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from scipy import stats as _st

import dpsim
from dpsim.experiments import verdicts
from dpsim.experiments.pipeline import Saved

DELTA = 1e-8  # [L2P] App. C.1
PRIMARY = "sgd_adv_ac"  # SGD-Adv with the paper's accountant (advanced composition)
ORDER = ("sgd_adv_ac", "sgd_adv", "uniform", "linear", "exponential")
DISPLAY = {
    "sgd_adv_ac": "SGD-Adv (advanced composition; primary)",
    "sgd_adv": "SGD-Adv (zCDP, like for like; extra)",
    "uniform": "ctCDP, uniform schedule",
    "linear": "ctCDP, linear schedule",
    "exponential": "ctCDP, exponential schedule",
}
SHORT = {"sgd_adv": "SGD-Adv (zCDP)", "sgd_adv_ac": "SGD-Adv (adv. comp.)", "uniform": "ctCDP uniform",
         "linear": "ctCDP linear", "exponential": "ctCDP exponential"}
N_BOOT = 4000
BOOT_SEED = 20210203
COLORS = {"sgd_adv": "0.55", "sgd_adv_ac": "0.15", "uniform": "#1f77b4", "linear": "#2ca02c",
          "exponential": "#d62728"}
CTCDP = ("uniform", "linear", "exponential")


def load(results: Mapping[str, object], *, name: str | None = None) -> dict:
    """``{ε: {method: Result}}`` sorted by ε, methods in :data:`ORDER` (ε and method from the
    metadata the experiment saved with each cell).  With ``name`` (the figure's), no result at all
    is a ``ValueError`` naming the figure and the labels it was given."""
    saved = Saved.of(results)
    out: dict[float, dict] = {}
    for label in saved:
        meta = saved.meta(label)
        out.setdefault(float(meta["epsilon"]), {})[meta["method"]] = saved.result(label)
    if name is not None and not out:
        raise ValueError(f"{name}: no eps<ε>-<method> results among {sorted(results)}")
    return {e: {m: out[e][m] for m in ORDER if m in out[e]} for e in sorted(out)}


def info(method: str, res, *, spent: bool = True) -> dict:
    """Chosen T, η, p, steps taken, ρ ratio and (``spent``) ε spent at :data:`DELTA` of one result."""
    hp = res.config["hyperparameters"]
    out = {"lr": float(hp["lr"]), "p": None}
    if res.config["optimizer"] == "dp_sgd":
        out["T"] = int(res.steps[-1])
        out["steps_taken"] = np.full(res.trials, out["T"])
        out["rho_ratio"] = None
        out["eps_spent"] = float(np.max(res.epsilon(DELTA, accountant="rdp"))) if spent else None
        out["noise_multiplier"] = float(hp["noise_multiplier"])
    else:
        p = res.privacy
        out["T"] = int(p["planned_steps"])
        out["steps_taken"] = np.asarray(p["steps_taken"], dtype=int)
        out["rho_ratio"] = np.asarray(p["rho_spent"], dtype=float) / float(np.max(p["rho_tot"]))
        out["eps_spent"] = np.asarray(res.epsilon(DELTA), dtype=float).reshape(-1) if spent else None
        if method in ("linear", "exponential"):
            out["p"] = float(hp["schedule_param"])
    return out


def setting_text(method: str, inf: dict) -> str:
    s = f"T={inf['T']}, η={inf['lr']:g}"
    if inf["p"] is not None:
        s += f", p={inf['p']:g}"
    return s


def path_of(res):
    """``(K, R, 2)`` θ along the run (records ``theta0``, ``theta1``)."""
    return np.stack([res.records["theta0"], res.records["theta1"]], axis=-1)


def final_distance(res):
    """``‖θ_final − θ*‖`` per trial."""
    w_star = np.asarray(problem_of(res).optimum[0], dtype=float)
    return np.linalg.norm(np.asarray(res.params, dtype=float) - w_star, axis=1)


def problem_of(res):
    """The quadratic a result ran on, rebuilt from the problem config saved with it."""
    cfg = res.config["problem"]
    if cfg.get("name") != "random_quadratic":
        raise ValueError(f"expected a random_quadratic result, got problem {cfg!r}")
    return dpsim.problems.random_quadratic(m=cfg["m"], d=cfg["d"], reg=cfg["reg"], seed=cfg["seed"])


def notes_of(results: Mapping[str, object]) -> dict:
    """The manifest's notes saved with the results (selection, premise, initial point, ...)."""
    return Saved.of(results).notes


def final_excess(res) -> np.ndarray:
    """``F(θ_final) − F*`` per trial (diverged → inf)."""
    f = np.asarray(res.excess_loss[-1], dtype=float)
    return np.where(np.isfinite(f), f, np.inf)


def start_excess(res) -> float:
    """``F(θ0) − F*`` (the same for every trial and method)."""
    return float(res.excess_loss[0, 0])


def median_ci(x, axis: int = -1, level: float = 0.95):
    """``(median, lo, hi)`` along ``axis`` with the distribution-free order-statistic interval:
    ``[x_(k), x_(R+1−k)]``, ``k`` the largest rank with ``P(Bin(R, ½) ≤ k − 1) ≤ (1 − level)/2``
    (coverage ≥ level; the sample range when R is too small for that)."""
    x = np.sort(np.asarray(x, dtype=float), axis=axis)
    r = x.shape[axis]
    k = 0
    while _st.binom.cdf(k, r, 0.5) <= (1 - level) / 2:
        k += 1
    lo_i, hi_i = max(k - 1, 0), min(r - k, r - 1)
    return np.median(x, axis=axis), np.take(x, lo_i, axis=axis), np.take(x, hi_i, axis=axis)


def boot_ratio(num, den, *, n_boot: int = N_BOOT, seed: int = BOOT_SEED, level: float = 0.95):
    """``median(num)/median(den)`` with a percentile-bootstrap ``level`` interval (the two groups
    resampled independently); ``(ratio, lo, hi)``.  Infinite values (diverged trials) take part
    as they are (a median of them is then infinite)."""
    rng = np.random.default_rng(seed)
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)

    def boot(x):
        return np.median(x[rng.integers(0, x.size, size=(n_boot, x.size))], axis=1)

    with np.errstate(divide="ignore", invalid="ignore"):
        reps = boot(num) / boot(den)
        point = float(np.median(num) / np.median(den))
    lo, hi = np.nanquantile(reps, [(1 - level) / 2, (1 + level) / 2])
    return point, float(lo), float(hi)


def fmt_ratio(r, lo, hi) -> str:
    return f"{r:.2f}× [{lo:.2f}, {hi:.2f}]"


def premise(data) -> dict:
    """``{ε: {"holds": bool, "best": method, "ratio": (median/start, lo, hi)}}``: at ε the premise
    "a private method can improve on its start" holds when some method's median final excess loss
    has its 95% order-statistic interval entirely below the start's excess loss (``hi < 1`` for
    the ratio to the start)."""
    out = {}
    for eps, row in data.items():
        best = None
        for method, res in row.items():
            s0 = start_excess(res)
            m, lo, hi = median_ci(final_excess(res))
            r = (m / s0, lo / s0, hi / s0)
            if best is None or r[0] < best[1][0]:
                best = (method, r)
        if best is not None:
            out[eps] = {"holds": bool(best[1][2] < 1), "best": best[0], "ratio": best[1]}
    return out


def edges(notes: dict, labels) -> dict:
    """``{"<label>: <axis>": value}`` of the tuned values of ``labels`` on a grid edge, leaving out
    a step count T at the smallest *feasible* value when a smaller T of the grid was infeasible
    (Algorithm 3 finds no batch size, saved in ``notes["infeasible"]`` as ``"<label>-T<T>"``): that
    edge is the privacy constraint, not a narrow grid."""
    sel = notes.get("selection", {})
    infeasible = set(notes.get("infeasible", []))
    out = {}
    for label in labels:
        s = sel.get(label)
        if s is None:
            continue
        for axis in s["at_edge"]:
            v = s["point"][axis]
            if axis == "steps" and v == min(s["grid"][axis]) and any(
                    item.startswith(f"{label}-T") and int(item.rsplit("-T", 1)[1]) < v
                    for item in infeasible):
                continue
            out[f"{label}: {axis}"] = v
    return out


def with_edges(category: str, notes: dict, labels=(), *, winners=(), losers=()) -> tuple[str, str]:
    """``verdicts.downgrade_for_edge`` for the tuned values of the cells ``winners`` (the methods
    the claim says win) and ``losers`` (those it says lose): a *holds* is downgraded only for a
    loser's edge, a *does not hold* only for a winner's.  ``labels`` (positional, legacy): cells
    whose side is unknown, which downgrade either."""
    return verdicts.downgrade_for_edge(category, edges(notes, labels),
                                       winner_edges=edges(notes, winners),
                                       loser_edges=edges(notes, losers))
