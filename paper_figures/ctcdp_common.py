"""Helpers shared by the ``ctcdp_quadratic`` figures ([L2P]): loading the saved results with
their metadata, the methods' names and colours, the chosen settings and spent budget of a run, its
θ path and distance to the optimum.  Not a figure itself (no ``render``).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

import dpsim
from dpsim.experiments.pipeline import Saved

DELTA = 1e-8  # [L2P] App. C.1
ORDER = ("sgd_adv", "sgd_adv_ac", "uniform", "linear", "exponential")
DISPLAY = {
    "sgd_adv": "SGD-Adv (zCDP calibration)",
    "sgd_adv_ac": "SGD-Adv (advanced composition)",
    "uniform": "ctCDP, uniform schedule",
    "linear": "ctCDP, linear schedule",
    "exponential": "ctCDP, exponential schedule",
}
SHORT = {"sgd_adv": "SGD-Adv (zCDP)", "sgd_adv_ac": "SGD-Adv (adv. comp.)", "uniform": "ctCDP uniform",
         "linear": "ctCDP linear", "exponential": "ctCDP exponential"}
COLORS = {"sgd_adv": "0.2", "sgd_adv_ac": "0.55", "uniform": "#1f77b4", "linear": "#2ca02c",
          "exponential": "#d62728"}
CTCDP = ("uniform", "linear", "exponential")


def load(results: Mapping[str, object]) -> dict:
    """``{ε: {method: Result}}`` sorted by ε, methods in :data:`ORDER` (ε and method from the
    metadata the experiment saved with each cell)."""
    saved = Saved.of(results)
    out: dict[float, dict] = {}
    for label in saved:
        meta = saved.meta(label)
        out.setdefault(float(meta["epsilon"]), {})[meta["method"]] = saved.result(label)
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
