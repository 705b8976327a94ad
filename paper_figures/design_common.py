"""Shared loading and selection for the ``design_space`` figures (seed 002, RECONSTRUCTED settings)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Mapping

import numpy as np

import dpsim

DELTA = 1e-5
RECON = ("Seed 002's formulas and most settings were lost in extraction: the setting here is a "
         "reconstruction (ALGORITHMS.md §4.3, §5.4).")


def load(results: Mapping[str, object], prefix: str) -> dict:
    """``{label without prefix: Result}`` for labels starting with ``prefix``."""
    return {lab[len(prefix):]: dpsim.load(p) for lab, p in results.items() if lab.startswith(prefix)}


def select(res):
    """Chosen grid point (lowest mean final training loss); ``(mask, lr, eps_scale)``."""
    hp = res.config["hyperparameters"]
    R = res.trials
    lrs = np.broadcast_to(np.asarray(hp["lr"], dtype=float), (R,))
    eps = hp.get("eps_scale")
    tuned = isinstance(eps, (list, tuple))
    es = np.asarray(eps, dtype=float) if tuned else np.zeros(R)
    final = np.where(np.isfinite(res.loss[-1]), res.loss[-1], np.inf)
    keys = sorted(set(zip(lrs.tolist(), es.tolist())))
    means = [float(np.mean(final[(lrs == a) & (es == b)])) for a, b in keys]
    lr, e = keys[int(np.argmin(means))]
    return (lrs == lr) & (es == e), lr, (e if tuned else None)


def eps_of(res, accountant=None) -> float:
    """ε at δ = 1e-5: PLD for Poisson sampling, RDP (replace-one) for fixed-size batches."""
    if accountant is None:
        accountant = "rdp" if res.config.get("sampling") == "fixed" else "pld"
    e = res.epsilon(DELTA, accountant=accountant)
    return float(np.max(e))


def eps_text(e: float) -> str:
    return "∞" if math.isinf(e) else f"{e:.3g}"


def main(mod, argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(mod.__doc__)
        return 2
    root = Path(argv[0])
    out_dir = Path(argv[1]) if len(argv) > 1 else Path("paper_figures") / "out"
    manifest = json.loads((root / "manifest.json").read_text())
    results = {label: root / f"{label}.npz" for label in manifest["results"]}
    for p in mod.render(results, out_dir):
        print(p)
    print(json.dumps(mod.evaluate(results), indent=1))
    return 0
