"""Shared helpers of the ``adambc`` figures (seed 004): loading, ε, Φ and the frozen moments.

Not a figure itself (no ``render``); the figure scripts ``fig_adambc_*.py`` import it.  Everything
here reads saved results only (``{label: path}`` of experiment ``adambc``; labels
``"eps<ε>-<slot>"``, see :mod:`experiments.adambc`).
"""

from __future__ import annotations

import math
import re
from typing import Mapping

import numpy as np
from scipy import stats as _st

import dpsim
from dpsim.analysis.concentration import dp_bias

DELTA = 1e-5
_LABEL = re.compile(r"^eps(?P<eps>[0-9.e+-]+?)-(?P<slot>[a-z0-9-]+)$")
_EPS_CACHE: dict = {}
_LOAD_CACHE: dict = {}


def load(results: Mapping[str, object], slots=None) -> dict:
    """``{ε target: {slot: Result}}`` (sorted by ε) for the labels of experiment ``adambc``.

    Results are loaded once per path per process (the five figures share them).
    """
    out: dict = {}
    for lab, path in results.items():
        m = _LABEL.match(str(lab))
        if not m or (slots is not None and m["slot"] not in slots):
            continue
        key = str(path)
        if key not in _LOAD_CACHE:
            _LOAD_CACHE[key] = dpsim.load(path)
        out.setdefault(float(m["eps"]), {})[m["slot"]] = _LOAD_CACHE[key]
    return dict(sorted(out.items()))


def need(data: dict, slots, name: str) -> dict:
    """``data`` restricted to the ε that have every slot in ``slots``; ``ValueError`` if none."""
    keep = {e: d for e, d in data.items() if all(s in d for s in slots)}
    if not keep:
        raise ValueError(f"{name}: no ε with results {', '.join(slots)} among {sorted(data)}")
    return keep


def hp(res, name):
    return res.config["hyperparameters"][name]


def phi(res) -> float:
    """``Φ = (σC/B)²`` of a private result (seed 004 Eq. 2)."""
    return float(dp_bias(float(hp(res, "noise_multiplier")), float(hp(res, "clip")),
                         res.config["batch_size"]))


def epsilon(res, delta: float = DELTA) -> float:
    """ε at ``delta`` of a private result, memoized on (σ, B, n, T, sampling) — all the
    private optimizers here release the same Gaussian gradient once per step."""
    c = res.config
    key = (float(hp(res, "noise_multiplier")), c["batch_size"], c["problem"]["n"], c["steps"],
           c["sampling"], float(delta))
    if key not in _EPS_CACHE:
        e = res.epsilon(delta)
        _EPS_CACHE[key] = float(np.max(e))
    return _EPS_CACHE[key]


def eps_text(res, delta: float = DELTA) -> str:
    e = epsilon(res, delta)
    return "∞" if math.isinf(e) else f"{e:.2g}"


def gamma_index(res, ratios) -> np.ndarray:
    """Per trial, the index in ``ratios`` of ``γ'/Φ`` (DP-AdamBC results)."""
    r = np.broadcast_to(np.asarray(hp(res, "gamma_prime"), dtype=float), (res.trials,)) / phi(res)
    match = np.isclose(r[:, None], np.asarray(ratios, dtype=float)[None, :], rtol=1e-9, atol=0.0)
    return np.argmax(match, axis=1)


def gamma_ratios(res) -> np.ndarray:
    """The distinct ``γ'/Φ`` of a DP-AdamBC result, sorted (rounded to 6 significant digits)."""
    r = np.atleast_1d(np.asarray(hp(res, "gamma_prime"), dtype=float)) / phi(res)
    return np.unique(np.array([float(f"{x:.6g}") for x in r]))


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


def paired_ci(a, b, level: float = 0.95):
    """Mean of ``a − b`` over paired trials and the half-width of its Student-t CI."""
    dlt = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    r = dlt.size
    m = float(np.mean(dlt))
    if r < 2:
        return m, float("nan")
    return m, float(_st.t.ppf(0.5 + level / 2, r - 1) * np.std(dlt, ddof=1) / np.sqrt(r))


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


def main(module, argv=None) -> int:
    """Standalone entry of a figure script: ``python -m dpsim.paper_figures.<fig> RESULTS_DIR [OUT_DIR]``."""
    import json
    import sys
    from pathlib import Path

    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(module.__doc__)
        return 2
    root = Path(argv[0])
    out_dir = Path(argv[1]) if len(argv) > 1 else Path("paper_figures") / "out"
    manifest = json.loads((root / "manifest.json").read_text())
    results = {lab: root / f"{lab}.npz" for lab in manifest["results"]}
    for p in module.render(results, out_dir):
        print(p)
    print(json.dumps(module.evaluate(results), indent=1, ensure_ascii=False))
    return 0


def plain_log_ticks(ax) -> None:
    """No labels on the minor ticks of log axes (they collide on short decades)."""
    from matplotlib.ticker import NullFormatter

    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log":
            axis.set_minor_formatter(NullFormatter())
