"""The verdict categories of REPORT.md, and the rule that turns a measured interval into one.

Every claim a figure tests ends in exactly one category:

* ``holds`` — the measured effect's confidence interval lies entirely on the claim's side;
* ``does not hold`` — the interval lies entirely on the other side (it *excludes* the claim);
* ``inconclusive`` — the interval contains the null value (an effect of 0, a ratio of 1), or a
  tuned value sits on a grid edge on the side where widening the grid could flip the verdict
  (:func:`downgrade_for_edge`);
* ``setting does not test the claim`` — the premise check failed: the setting cannot exhibit the
  effect the paper describes (e.g. non-private adaptive is no better than SGD at this run length),
  so neither outcome of the comparison says anything about the claim;
* ``out of scope`` — the claim is about something dpsim does not reproduce (e.g. [L2P]'s learned
  scheduler).

A figure's ``evaluate`` may return ``"category"`` (one of :data:`CATEGORIES`) beside its ``holds``;
:func:`category_of` reads it, falling back to ``holds`` (``True`` → holds, ``False`` → does not
hold, ``None`` → inconclusive), and :func:`from_interval` is the interval rule.
"""

from __future__ import annotations

import math
from typing import Mapping

__all__ = ["HOLDS", "FAILS", "INCONCLUSIVE", "UNTESTED", "OUT_OF_SCOPE", "CATEGORIES",
           "from_interval", "category_of", "holds_of", "downgrade_for_edge"]

HOLDS = "holds"
FAILS = "does not hold"
INCONCLUSIVE = "inconclusive"
UNTESTED = "setting does not test the claim"
OUT_OF_SCOPE = "out of scope"
CATEGORIES = (HOLDS, FAILS, INCONCLUSIVE, UNTESTED, OUT_OF_SCOPE)


def from_interval(lo: float, hi: float, *, null: float = 0.0, claim: str = "below") -> str:
    """The category of an effect measured with confidence interval ``[lo, hi]``.

    ``null``: the value of no effect (0 for a difference, 1 for a ratio); ``claim``: ``"below"``
    when the paper claims the effect is below ``null`` (e.g. method − baseline < 0: lower loss),
    ``"above"`` when above.  The interval containing ``null`` (either end equal to it included) is
    ``inconclusive``; ``does not hold`` needs the whole interval on the wrong side.  A NaN end or
    ``lo > hi`` raises ``ValueError`` naming the interval.
    """
    if claim not in ("below", "above"):
        raise ValueError(f"claim must be 'below' or 'above', got claim={claim!r}")
    lo, hi, null = float(lo), float(hi), float(null)
    if math.isnan(lo) or math.isnan(hi) or math.isnan(null) or lo > hi:
        raise ValueError(f"not a confidence interval: [lo, hi] = [{lo}, {hi}] (null={null})")
    if hi < null:
        return HOLDS if claim == "below" else FAILS
    if lo > null:
        return HOLDS if claim == "above" else FAILS
    return INCONCLUSIVE


def category_of(finding: Mapping) -> str:
    """The category of a figure's ``evaluate`` result: its ``"category"`` when given (checked
    against :data:`CATEGORIES`), else derived from ``"holds"``."""
    cat = finding.get("category")
    if cat is not None:
        if cat not in CATEGORIES:
            raise ValueError(f"unknown verdict category {cat!r}; known: {', '.join(CATEGORIES)}")
        return cat
    holds = finding.get("holds")
    return INCONCLUSIVE if holds is None else (HOLDS if holds else FAILS)


def holds_of(category: str) -> bool | None:
    """The legacy ``holds`` value of a category: ``True``/``False`` for holds / does not hold,
    ``None`` for the three others."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown verdict category {category!r}; known: {', '.join(CATEGORIES)}")
    return {HOLDS: True, FAILS: False}.get(category)


def _edge_text(edges: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in edges.items())


def downgrade_for_edge(category: str, at_edge: Mapping[str, object] | None = None, *,
                       winner_edges: Mapping[str, object] | None = None,
                       loser_edges: Mapping[str, object] | None = None) -> tuple[str, str]:
    """``(category, note)`` after the grid-edge rule, which downgrades a verdict to
    ``inconclusive`` only when widening the edged grid could flip it.

    Tuning over a wider grid can only improve a method's tuned score.  So:

    * ``holds`` (the claimed winner beats the claimed loser) can flip only if the claimed
      **loser** improves: it is downgraded when ``loser_edges`` is non-empty (the loser's tuned
      values on an edge of its grid), never for ``winner_edges``;
    * ``does not hold`` (the claimed winner does not beat the loser) can flip only if the claimed
      **winner** improves: downgraded when ``winner_edges`` is non-empty;
    * the other categories are kept (``inconclusive`` cannot become more so; ``setting does not
      test the claim`` and ``out of scope`` say nothing about the comparison).

    ``winner_edges`` / ``loser_edges``: ``{"axis": value}`` of the tuned values on an edge, for
    the method the claim says wins / loses.  Where a claim has several parts with different
    roles, apply the rule per part and combine afterwards.  ``at_edge`` (positional, legacy):
    edges whose side is not known; they downgrade ``holds`` and ``does not hold`` alike.  The note
    names every edge and says whether a wider grid could flip the verdict; it is ``""`` when no
    value sits on an edge.  An unknown ``category`` raises ``ValueError``.
    """
    if category not in CATEGORIES:
        raise ValueError(f"unknown verdict category {category!r}; known: {', '.join(CATEGORIES)}")
    winner_edges = dict(winner_edges or {})
    loser_edges = dict(loser_edges or {})
    unknown = dict(at_edge or {})
    if not (winner_edges or loser_edges or unknown):
        return category, ""
    parts = []
    if unknown:
        parts.append("winner on grid edge: " + _edge_text(unknown))
    if winner_edges:
        parts.append("claimed winner on grid edge: " + _edge_text(winner_edges))
    if loser_edges:
        parts.append("claimed loser on grid edge: " + _edge_text(loser_edges))
    note = "; ".join(parts)
    if category == HOLDS:
        if unknown or loser_edges:
            return INCONCLUSIVE, note + (" (a wider grid for the claimed loser could flip the "
                                         "verdict)" if loser_edges else
                                         " (a wider grid could flip the verdict)")
        return category, note + " (a wider grid can only help the claimed winner: the verdict stands)"
    if category == FAILS:
        if unknown or winner_edges:
            return INCONCLUSIVE, note + (" (a wider grid for the claimed winner could flip the "
                                         "verdict)" if winner_edges else
                                         " (a wider grid could flip the verdict)")
        return category, note + " (a wider grid can only help the claimed loser: the verdict stands)"
    return category, note
