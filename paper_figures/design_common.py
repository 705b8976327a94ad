"""Shared loading for the ``design_space`` figures ([DESIGN], RECONSTRUCTED settings).

Reads saved results only: each cell's part and setting from the metadata the experiment saved, and
the tuning choice of every tuned cell (chosen grid point and its trials) from the saved selection.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from dpsim.analysis import stats
from dpsim.experiments import verdicts
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


def selection_of(results: Mapping[str, object], label: str) -> dict:
    """The saved tuning selection behind cell ``label``: the one of its tuning cell
    (``meta["tuned_by"]``) for an evaluation cell, else the one saved under ``label`` itself."""
    saved = Saved.of(results)
    return saved.selection(saved.meta(label).get("tuned_by", label))


def chosen(results: Mapping[str, object], label: str):
    """The saved tuning choice of cell ``label``: ``(trials to report as a slice, lr, eps_scale or
    None)``.  An evaluation cell (``meta["tuned_by"]``) ran only the chosen point on fresh seeds:
    all its trials; a tuning cell: the chosen point's trials."""
    saved = Saved.of(results)
    sel = selection_of(saved, label)
    if "tuned_by" in saved.meta(label):
        mask = slice(None)
    else:
        start, stop = sel["trials"]
        mask = slice(start, stop)
    return mask, sel["point"]["lr"], sel["point"].get("eps_scale")


_SYMBOLS = {"lr": "η", "eps": "ε_a", "eps_scale": "ε_s", "gamma_prime": "γ'", "clip": "C"}


def point_text(point: Mapping[str, float]) -> str:
    """The tuned values of a grid point for a legend or a table: ``η=0.0625, ε_a=0.01``."""
    return ", ".join(f"{_SYMBOLS.get(k, k)}={v:.3g}" for k, v in point.items())


def tuned_point(results: Mapping[str, object], label: str) -> dict:
    """The chosen hyperparameters ``{axis: value}`` of cell ``label``."""
    return dict(selection_of(results, label)["point"])


def edge_axes(results: Mapping[str, object], labels) -> dict:
    """``{"<label>: <axis>": value}`` for every tuned axis of the cells ``labels`` whose choice
    sits on a grid edge (input of :func:`experiments.verdicts.downgrade_for_edge`)."""
    out = {}
    for lab in labels:
        sel = selection_of(results, lab)
        for ax in sel["at_edge"]:
            out[f"{lab} {_SYMBOLS.get(ax, ax)}"] = sel["point"][ax]
    return out


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


def below(a, b) -> tuple[float, float, float, str]:
    """``(d, lo, hi, category)``: the difference of means ``d = mean(a) − mean(b)`` with its Welch
    95% confidence interval ``[lo, hi]`` (:func:`analysis.stats.diff_ci`) and the category of the
    claim "``a`` is below ``b``" read off that interval (:func:`experiments.verdicts.from_interval`
    against 0)."""
    d, lo, hi = stats.diff_ci(a, b)
    return d, lo, hi, verdicts.from_interval(lo, hi, null=0.0, claim="below")
