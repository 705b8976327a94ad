"""Shared helpers of the ``adambc`` figures ([ADAMBC]): loading, ε, Φ and the frozen moments.

Not a figure itself (no ``render``); the figure scripts ``fig_adambc_*.py`` import it.  Everything
here reads saved results only: the ``{label: path}`` of experiment ``adambc`` and the metadata it
saved with every cell (target ε and slot, see :mod:`experiments.adambc`).
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from dpsim.analysis.concentration import dp_bias
from dpsim.experiments.pipeline import Saved

DELTA = 1e-5


def load(results: Mapping[str, object], slots=None) -> dict:
    """``{ε target: {slot: Result}}`` (sorted by ε) from the saved cell metadata; each Result is
    read once per :class:`~dpsim.experiments.pipeline.Saved` (the figures of one reproduction share
    it)."""
    saved = Saved.of(results)
    out: dict = {}
    for lab in saved:
        meta = saved.meta(lab)
        if slots is None or meta["slot"] in slots:
            out.setdefault(float(meta["epsilon"]), {})[meta["slot"]] = saved.result(lab)
    return dict(sorted(out.items()))


def gamma_sweep(results: Mapping[str, object]) -> dict:
    """``{ε target: meta}`` of the γ' sweep cells (``gamma_ratios``, ``trials_per_ratio``)."""
    saved = Saved.of(results)
    return {float(m["epsilon"]): m for m in map(saved.meta, saved) if m["slot"] == "gamma"}


def need(data: dict, slots, name: str) -> dict:
    """``data`` restricted to the ε that have every slot in ``slots``; ``ValueError`` if none."""
    keep = {e: d for e, d in data.items() if all(s in d for s in slots)}
    if not keep:
        raise ValueError(f"{name}: no ε with results {', '.join(slots)} among {sorted(data)}")
    return keep


def hp(res, name):
    return res.config["hyperparameters"][name]


def phi(res) -> float:
    """``Φ = (σC/B)²`` of a private result ([ADAMBC] Eq. 2)."""
    return float(dp_bias(float(hp(res, "noise_multiplier")), float(hp(res, "clip")),
                         res.config["batch_size"]))


def epsilon(res, delta: float = DELTA) -> float:
    """ε at ``delta`` of a private result (the accountant caches repeated questions)."""
    return float(np.max(res.epsilon(delta)))


def eps_text(res, delta: float = DELTA) -> str:
    e = epsilon(res, delta)
    return "∞" if math.isinf(e) else f"{e:.2g}"


def frozen_moments(private, clean) -> dict:
    """Bias-corrected moments of the frozen runs: ``steps`` (K,) without step 0 and arrays
    ``mp, vp, mc, vc`` of shape (K, R, d) (private, clean), ``phi`` and the betas."""
    b1, b2 = float(hp(private, "beta1")), float(hp(private, "beta2"))
    d = private.config["problem"]["d"]
    steps = np.asarray(private.steps)
    if not np.array_equal(steps, np.asarray(clean.steps)):
        raise ValueError("frozen-private and frozen-clean were recorded at different steps")
    keep = steps > 0
    t = steps[keep].astype(float)[:, None, None]

    def stack(res, name):
        return np.stack([np.asarray(res.records[f"{name}{j}"])[keep] for j in range(d)], axis=-1)

    return {
        "steps": steps[keep], "phi": phi(private), "beta1": b1, "beta2": b2,
        "mp": stack(private, "m") / (1.0 - b1 ** t), "vp": stack(private, "v") / (1.0 - b2 ** t),
        "mc": stack(clean, "m") / (1.0 - b1 ** t), "vc": stack(clean, "v") / (1.0 - b2 ** t),
    }


def bootstrap_quantile(x, q: float, *, level: float = 0.95, n_boot: int = 400, seed: int = 0):
    """``q``-quantile of ``x`` (shape (R, ...), pooled) and a percentile-bootstrap CI that
    resamples the R trials (the independent units; coordinates of a trial share batches)."""
    x = np.asarray(x, dtype=float)
    R = x.shape[0]
    flat = x.reshape(R, -1)
    est = float(np.quantile(flat, q))
    rng = np.random.default_rng(seed)
    boots = np.array([np.quantile(flat[rng.integers(0, R, R)], q) for _ in range(n_boot)])
    lo, hi = np.quantile(boots, [0.5 - level / 2, 0.5 + level / 2])
    return est, float(lo), float(hi)


def fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}" if abs(x) >= 1e-3 and abs(x) < 1e4 else f"{x:.{digits - 1}e}"


def plain_log_ticks(ax) -> None:
    """No labels on the minor ticks of log axes (they collide on short decades)."""
    from matplotlib.ticker import NullFormatter

    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log":
            axis.set_minor_formatter(NullFormatter())
