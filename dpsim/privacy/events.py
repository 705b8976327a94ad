"""Typed privacy events: what a transform declares it releases (dp_accounting's event model).

Every privatizer declares one or more events in its :class:`~dpsim.transforms.GradientTransformation`
(field ``privacy``); :func:`~dpsim.transforms.chain` and the combinators collect them.
:mod:`dpsim.accounting` is the only consumer: it resolves the events of a finished run into a
JSON-able record (``Result.privacy``) and turns that record into ε.  An optimizer whose chain
declares no event is refused when it is built, so "declared nothing" can never mean ε = 0.

Events
------
:class:`GaussianRelease`
    One Gaussian mechanism per step on which it is scheduled, on the step's (subsampled) batch:
    noise std = ``noise_multiplier`` × the release's ℓ2 sensitivity.  Releases that share a step
    share its batch; the accountant merges them (``σ_eff = (Σ σ_i⁻²)^{-1/2}``).
:class:`CorrelatedRelease`
    A sequence of releases with correlated noise (DP-MF, [DESIGN] §2.1).  Under Poisson or
    cyclic Poisson sampling with ``k`` groups (``"poisson"`` is ``k = 1``), a strategy of bandwidth
    ``≤ k`` released on every step is amplified: it costs an i.i.d. Gaussian release with σ on each
    step of the example's group (:mod:`dpsim.privacy.mf`).  Otherwise (unrestricted participation)
    the whole sequence is one Gaussian mechanism with noise multiplier
    ``σ·sens(M)/worst_sens(M)``, composed without amplification by sampling ("unamplified").
:class:`TcdpBudget`
    A run-dependent spend under (ρ, a)-ctCDP ([L2P] Thm B.1): the privatizer stops releasing when
    its budget is spent, so the spend is read from the *final state* of the piece that declared
    it (``spend(final_piece_state) -> {"rho_spent": [...], "steps_taken": [...]}``).
:class:`NonPrivate`
    The transform releases data without a privacy guarantee (a non-private rule, or an oracle fed a
    noiseless statistic); ``reason`` says why.  Any such event makes ε infinite.

``path`` locates the declaring piece inside the optimizer's state (names of a named chain,
indices of a plain chain); the combinators that nest a piece extend it (:func:`at`), so a
state-dependent event can be resolved from the run's final state.  ``schedule`` restricts a release
to some steps: a function ``T -> bool array (T,)`` (step ``t`` at index ``t − 1``); ``None`` is
every step.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Union

import numpy as np

__all__ = ["GaussianRelease", "CorrelatedRelease", "TcdpBudget", "NonPrivate", "PrivacyEvent",
           "at", "restrict", "schedule_mask", "union", "same_release"]

#: Sensitivity of a clipped sum (the common case), in words.
CLIPPED_SUM = "C (sum of per-example terms of l2 norm <= C, add/remove)"


@dataclass(frozen=True)
class GaussianRelease:
    """Subsampled Gaussian release on the scheduled steps (noise multiplier per trial allowed)."""

    noise_multiplier: Union[float, tuple]  # σ, or one σ per trial
    sensitivity: str = CLIPPED_SUM  # what the noise multiplier is relative to
    schedule: Callable[[int], np.ndarray] | None = None
    path: tuple = ()


@dataclass(frozen=True)
class CorrelatedRelease:
    """Correlated-noise (DP-MF) release sequence with strategy ``strategy`` (a noise name);
    :mod:`dpsim.accounting` decides from the sampler and the strategy's bandwidth whether it is
    amplified."""

    noise_multiplier: Union[float, tuple]
    strategy: str  # "sqrt_toeplitz" | "banded:<k>"
    sensitivity: str = CLIPPED_SUM
    schedule: Callable[[int], np.ndarray] | None = None
    path: tuple = ()


@dataclass(frozen=True)
class TcdpBudget:
    """Run-dependent spend under (ρ, a)-ctCDP, read from the declaring piece's final state.

    ``spend(piece_state) -> {"rho_spent": [R floats], "steps_taken": [R ints]}``; ``budget``: the
    static part of the record (ρ_tot, a, ω_a, the (ε, δ) budget, schedule, adjacency, ...).
    """

    spend: Callable[[Any], dict]
    budget: dict
    path: tuple = ()


@dataclass(frozen=True)
class NonPrivate:
    """No privacy guarantee; ``reason`` says what is released in the clear."""

    reason: str
    path: tuple = ()


PrivacyEvent = Union[GaussianRelease, CorrelatedRelease, TcdpBudget, NonPrivate]
_TYPES = (GaussianRelease, CorrelatedRelease, TcdpBudget, NonPrivate)


def at(event: PrivacyEvent, key) -> PrivacyEvent:
    """``event`` seen from one level up: its piece's state is ``state[key]`` of the parent.

    Parameters
    ----------
    event : PrivacyEvent
        An event declared by a piece.
    key : str or int
        The piece's key in its parent's state.

    Returns
    -------
    PrivacyEvent
        The event with ``key`` prepended to its path.
    """
    if not isinstance(event, _TYPES):
        raise TypeError(f"not a privacy event: {event!r}")
    return dataclasses.replace(event, path=(key,) + event.path)


def restrict(event: PrivacyEvent, mask: Callable[[int], np.ndarray]) -> PrivacyEvent:
    """``event`` limited to the steps of ``mask`` (releases only; other events unchanged).

    Parameters
    ----------
    event : PrivacyEvent
        An event.
    mask : callable
        ``mask(steps) -> (steps,)`` boolean array of the steps kept.

    Returns
    -------
    PrivacyEvent
        The restricted event.
    """
    if not isinstance(event, (GaussianRelease, CorrelatedRelease)):
        return event
    inner = event.schedule
    if inner is None:
        return dataclasses.replace(event, schedule=mask)
    return dataclasses.replace(event, schedule=lambda T: np.asarray(inner(T), bool) & np.asarray(mask(T), bool))


def schedule_mask(event, steps: int) -> np.ndarray:
    """Boolean ``(steps,)`` mask of the steps on which a release happens.

    Parameters
    ----------
    event : PrivacyEvent
        A release.
    steps : int
        Number of steps.

    Returns
    -------
    numpy.ndarray
        Boolean ``(steps,)``.

    Examples
    --------
    >>> from dpsim.privacy.events import GaussianRelease, schedule_mask
    >>> release = GaussianRelease(noise_multiplier=1.0)
    >>> schedule_mask(release, 3)
    array([ True,  True,  True])
    """
    if event.schedule is None:
        return np.ones(steps, dtype=bool)
    m = np.asarray(event.schedule(steps), dtype=bool)
    if m.shape != (steps,):
        raise ValueError(f"release schedule has shape {m.shape}, expected ({steps},)")
    return m


def union(a, b):
    """One release from two declarations of the same piece on disjoint or overlapping steps
    (a piece shared by two phases of :func:`dpsim.transforms.alternate`).

    Parameters
    ----------
    a : PrivacyEvent
        One declaration.
    b : PrivacyEvent
        The other, of the same release.

    Returns
    -------
    PrivacyEvent
        One release on the union of their steps.
    """
    sa, sb = a.schedule, b.schedule
    if sa is None or sb is None:
        return dataclasses.replace(a, schedule=None)
    return dataclasses.replace(a, schedule=lambda T: np.asarray(sa(T), bool) | np.asarray(sb(T), bool))


def same_release(a, b) -> bool:
    """True when ``a`` and ``b`` differ at most in their schedules.

    Parameters
    ----------
    a : PrivacyEvent
        An event.
    b : PrivacyEvent
        Another.

    Returns
    -------
    bool
        Whether they are one release (schedules aside).
    """
    if type(a) is not type(b) or not isinstance(a, (GaussianRelease, CorrelatedRelease)):
        return False
    return dataclasses.replace(a, schedule=None) == dataclasses.replace(b, schedule=None)
