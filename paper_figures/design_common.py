"""Shared loading for the ``design_space`` figures ([DESIGN], RECONSTRUCTED settings).

Reads saved results only: each cell's part and setting from the metadata the experiment saved, and
the tuning choice of every tuned cell (chosen grid point and its trials) from the saved selection.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from dpsim.experiments.pipeline import Saved

DELTA = 1e-5
RECON = ("[DESIGN]'s formulas and most settings were lost in extraction: the setting here is a "
         "reconstruction (ALGORITHMS.md §4.3, §5.4).")


def load(results: Mapping[str, object], part: str) -> list[tuple[str, dict, object]]:
    """``[(label, meta, Result)]`` of the cells of ``part`` (``"ada"``, ``"neg"``, ``"var"``,
    ``"quad"``), in the experiment's cell order."""
    saved = Saved.of(results)
    return [(lab, saved.meta(lab), saved.result(lab)) for lab in saved
            if saved.meta(lab)["part"] == part]


def chosen(results: Mapping[str, object], label: str):
    """The saved tuning choice of cell ``label``: ``(trials of the chosen point as a slice, lr,
    eps_scale or None)``."""
    sel = Saved.of(results).selection(label)
    start, stop = sel["trials"]
    return slice(start, stop), sel["point"]["lr"], sel["point"].get("eps_scale")


def eps_of(res, accountant=None) -> float:
    """ε at δ = 1e-5: PLD for Poisson sampling, RDP (replace-one) for fixed-size batches.  Where
    the PLD grid would be too large (weak, unamplified correlated noise:
    ``AccountingTooExpensiveError``) the RDP bound is used instead; it is an upper bound on the
    PLD value, so the ε shown is never smaller than the truth."""
    import dpsim

    if accountant is None:
        accountant = "rdp" if res.config.get("sampling") == "fixed" else "pld"
    try:
        e = res.epsilon(DELTA, accountant=accountant)
    except dpsim.accounting.AccountingTooExpensiveError:
        e = res.epsilon(DELTA, accountant="rdp")
    return float(np.max(e))


def is_private(res) -> bool:
    """Whether the run is private (finite ε; the non-private rules and the noiseless-v oracles
    declare a ``NonPrivate`` event and have ε = ∞)."""
    return math.isfinite(eps_of(res))


def eps_text(e: float) -> str:
    """``ε`` for a table cell: the number, or "∞ (not private)"."""
    return "∞ (not private)" if math.isinf(e) else f"{e:.3g}"


def eps_label(e: float) -> str:
    """The privacy part of a legend entry: ``ε=<value>`` or ``not private`` (never ``ε=∞``)."""
    return "not private" if math.isinf(e) else f"ε={e:.3g}"
