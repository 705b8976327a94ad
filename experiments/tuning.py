"""Hyperparameter tuning shared by every experiment: a grid folded into the trial axis, one rule.

An experiment tunes a setting by running a *tuning cell*: one :func:`dpsim.simulate` call whose
trials are the points of a grid, each repeated ``reps`` times (:func:`fold` builds the per-trial
hyperparameter lists).  :func:`select` then applies THE rule of this package:

    score every grid point by a statistic (``"mean"``, or ``"median"`` where heavy tails are
    expected) of its trials' final training loss, a diverged trial (non-finite loss) counting as
    ``+inf``; choose the point with the lowest score, the first one in grid order on a tie.

Grid order is :func:`itertools.product` order of the axes as given (first axis slowest), which is
also the order of the trials; several cells can be tuned together by concatenating their final
losses along a leading axis (e.g. one cell per step count ``T``: ``grid = {"steps": ..., ...}``).
A choice on the smallest or largest value of an axis with more than one value is "at the edge"
(the grid may be too narrow there).

The :class:`Selection` is saved with the results (:func:`record` writes it into the manifest's
``notes["selection"]``); figures read it from there (``Saved.selection``) rather than recomputing
it.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

__all__ = ["STATISTICS", "points", "fold", "final_losses", "select", "Selection", "record"]

STATISTICS = {"mean": np.mean, "median": np.median}
"""Named per-point statistics of the final training losses of the point's trials."""


def _axes(grid: Mapping[str, Sequence]) -> dict[str, tuple]:
    axes = {str(k): tuple(v) for k, v in grid.items()}
    if not axes:
        raise ValueError("a tuning grid needs at least one axis, got grid={}")
    empty = [k for k, v in axes.items() if not v]
    if empty:
        raise ValueError(f"tuning grid axes must be non-empty, got empty axes {empty}")
    return axes


def points(grid: Mapping[str, Sequence]) -> list[dict]:
    """Every grid point as ``{axis: value}``, in product order (first axis slowest)."""
    axes = _axes(grid)
    return [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]


def fold(grid: Mapping[str, Sequence], reps: int, *, scalars: bool = False) -> dict[str, list]:
    """Per-trial hyperparameter lists: every grid point repeated ``reps`` times, in grid order.

    With ``scalars=True`` an axis with a single value is passed as that value (not a list).
    """
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
        raise ValueError(f"reps must be a positive integer, got reps={reps!r}")
    axes = _axes(grid)
    pts = points(axes)
    out = {}
    for k, values in axes.items():
        if scalars and len(values) == 1:
            out[k] = values[0]
        else:
            out[k] = [p[k] for p in pts for _ in range(reps)]
    return out


def final_losses(*results) -> np.ndarray:
    """Final training loss per trial of one or more tuning results, concatenated, non-finite → inf."""
    final = np.concatenate([np.asarray(r.loss[-1], dtype=float).reshape(-1) for r in results])
    return np.where(np.isfinite(final), final, np.inf)


@dataclass(frozen=True)
class Selection:
    """The outcome of :func:`select`: the grid, the score of every point and the chosen one."""

    grid: dict          # axis -> values (product order)
    reps: int           # trials per grid point
    stat: str           # key of STATISTICS
    scores: tuple       # score per grid point, product order
    index: int          # the chosen point

    @property
    def points(self) -> list[dict]:
        return points(self.grid)

    @property
    def point(self) -> dict:
        """The chosen hyperparameters ``{axis: value}``."""
        return self.points[self.index]

    @property
    def score(self) -> float:
        return self.scores[self.index]

    @property
    def trials(self) -> tuple[int, int]:
        """``(start, stop)``: the trials of the chosen point in the (concatenated) tuning trials."""
        return self.index * self.reps, (self.index + 1) * self.reps

    @property
    def at_edge(self) -> list[str]:
        """Axes (with more than one value) on which the choice is the smallest or largest value."""
        return [k for k, v in self.grid.items()
                if len(v) > 1 and self.point[k] in (min(v), max(v))]

    def best(self, **fixed) -> dict:
        """The best point among those whose axes equal ``fixed`` (same rule, same tie-break)."""
        unknown = set(fixed) - set(self.grid)
        if unknown:
            raise KeyError(f"not axes of this grid: {sorted(unknown)}; axes: {list(self.grid)}")
        cand = [(s, i) for i, (p, s) in enumerate(zip(self.points, self.scores))
                if all(p[k] == v for k, v in fixed.items())]
        if not cand:
            raise KeyError(f"no grid point with {fixed}")
        return self.points[min(cand)[1]]

    def table(self) -> dict[str, float]:
        """``{"axis=value,...": score}`` in grid order (for the notes)."""
        return {",".join(f"{k}={_fmt(v)}" for k, v in p.items()): s
                for p, s in zip(self.points, self.scores)}

    def to_json(self) -> dict:
        """What is saved with the results (see :func:`record`)."""
        return {"stat": self.stat, "reps": self.reps, "grid": {k: list(v) for k, v in self.grid.items()},
                "point": self.point, "index": self.index, "trials": list(self.trials),
                "score": self.score, "scores": self.table(), "at_edge": self.at_edge}


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def select(final, grid: Mapping[str, Sequence], reps: int, *, stat: str = "mean") -> Selection:
    """Apply the rule (module docstring) to the final losses of a tuning cell.

    final : a :class:`dpsim.Result`, or the final loss per trial (``(P·reps,)``, grid order, e.g.
        from :func:`final_losses`); non-finite values count as ``+inf``.
    grid : ``{axis: values}`` the trials were folded from (:func:`fold`).
    reps : trials per grid point.
    stat : ``"mean"`` or ``"median"``.
    """
    if stat not in STATISTICS:
        raise ValueError(f"unknown statistic {stat!r}; known: {', '.join(STATISTICS)}")
    axes = _axes(grid)
    if hasattr(final, "loss"):
        final = final_losses(final)
    final = np.asarray(final, dtype=float).reshape(-1)
    final = np.where(np.isfinite(final), final, np.inf)
    n_points = math.prod(len(v) for v in axes.values())
    if final.size != n_points * reps:
        raise ValueError(f"tuning trials: got {final.size}, expected {n_points} grid points × "
                         f"{reps} trials = {n_points * reps}")
    scores = STATISTICS[stat](final.reshape(n_points, reps), axis=1)
    return Selection(grid=axes, reps=int(reps), stat=stat,
                     scores=tuple(float(s) for s in scores), index=int(np.argmin(scores)))


RULE = ("per setting: the grid point with the lowest {stat} final training loss over its tuning "
        "trials (diverged trials count as +inf; first in grid order on a tie)")


def record(cache, selections: Mapping[str, Selection], *, note: str | None = None) -> None:
    """Save ``{key: Selection}`` in the manifest (``notes["selection"]``, merged with earlier
    calls), the rule in ``notes["rule"]`` (plus ``note``), and the choices on a grid edge in
    ``notes["at_grid_edge"]`` (``{key: [axes]}``)."""
    saved = dict(cache.manifest["notes"].get("selection", {}))
    saved.update({k: s.to_json() for k, s in selections.items()})
    stats = sorted({s["stat"] for s in saved.values()})
    cache.note("selection", saved)
    cache.note("rule", RULE.format(stat=" / ".join(stats)) + (f"; {note}" if note else ""))
    cache.note("at_grid_edge", {k: s["at_edge"] for k, s in saved.items() if s["at_edge"]})
