"""Calibration: the smallest noise multiplier meeting a target ε (:func:`noise_multiplier`,
:func:`solve_noise_multiplier`), searched on ``log σ`` with the PLD accountant's limits in mind."""

from __future__ import annotations

import functools
import math

from .accountants import (_QUIET_NOTES, _RDP_FOR_PLD, PLD_MAX_POINTS,
                          AccountingTooExpensiveError, _compose, _epsilon_key, _note, _pld_points,
                          _quiet_absl)
from .composition import _check_releases_per_step, _per_example
from .options import (_SIGMA_MAX, _SIGMA_MIN, _SIGMA_RTOL, PLD_INTERVALS, _check_count,
                      _check_delta, _check_options, _check_rate, _is_real, _lib)
from .releases import _event


def noise_multiplier(epsilon, delta, sample_rate, steps, *, accountant="pld",
                     releases_per_step=1, sampling="poisson") -> float:
    """Smallest noise multiplier σ with ``epsilon(σ, ...) <= epsilon`` (to relative 1e-4 in σ).

    ε is decreasing in σ; the search brackets the root geometrically from σ = 1 and refines it
    with Brent's method on ``log σ``, keeping a pair ``σ_lo < σ_hi`` with ε(σ_lo) > target ≥
    ε(σ_hi) and ``σ_hi/σ_lo ≤ 1 + 1e-4``; σ_hi is returned, so the target is always met.  With r
    releases per step the answer is ``√r`` times the single-release one (exactly).  ``steps = 0``
    returns 0.  The bracket tests the ends of the searched range [1e-2, 1e7] themselves, so an
    attainable target in that range is never refused; ``ValueError`` when the target is so large
    that σ = 1e-2 already meets it, or so small that σ = 1e7 does not (with the PLD accountant
    that happens below about 1e-5, its finest discretization: the message suggests
    ``accountant="rdp"``).  A σ whose PLD computation would exceed :data:`PLD_MAX_POINTS` counts as
    too small (ε above the target), so the answer still meets the target.
    """
    if not _is_real(epsilon) or not (0.0 < float(epsilon) < math.inf):
        raise ValueError(f"epsilon must be a positive finite number, got epsilon={epsilon!r}")
    d = _check_delta(delta)
    q = _check_rate(sample_rate)
    steps = _check_count(steps, "steps")
    r = _check_releases_per_step(releases_per_step)
    _check_options(accountant, sampling)
    q, steps, sampling = _per_example(q, steps, sampling)
    if steps == 0:
        return 0.0
    sigma, notes = _calibrate(float(epsilon), d, q, steps, accountant, sampling)
    for text in notes:
        _note(text, stacklevel=2)
    return math.sqrt(r) * sigma


@functools.lru_cache(maxsize=1024)
def _calibrate(target: float, delta: float, q: float, steps: int, accountant: str,
               sampling: str) -> tuple[float, tuple[str, ...]]:
    def eps_at(s: float) -> float:
        # (a σ whose PLD grid cannot be refined even once within the limit is bounded by RDP:
        # _epsilon_key inside a calibration, then _solve_eval; noted if it is the answer)
        return _epsilon_key(((s, steps),), q, delta, accountant, sampling, math.inf)

    def describe() -> str:
        return (f"delta={delta}, sample_rate={q}, steps={steps}, accountant={accountant!r}, "
                f"sampling={sampling!r}")

    guess, factor = 1.0, 2.0
    if accountant == "pld":
        # Locate the root cheaply with the coarsest discretization alone (an upper bound of the
        # refined ε), then finish with the refined ε in a narrow bracket around it.
        event_for = lambda s: _event(((s, steps),), q, sampling)  # noqa: E731

        def eps_coarse(s: float) -> float:
            if _RDP_FOR_PLD.get():  # a σ the PLD accountant refuses (see _solve_eval)
                return _epsilon_key(((s, steps),), q, delta, "rdp", sampling, math.inf)
            # a coarse grid of more than a quarter of the limit (seconds each) only places the
            # bracket: the RDP bound does that at once (_solve_eval), the refined phase decides
            if _pld_points(((s, steps),), q, math.inf) / PLD_INTERVALS[0] > PLD_MAX_POINTS / 4:
                raise AccountingTooExpensiveError(f"noise_multiplier={s:g}")
            a = _lib.pld.PLDAccountant(_lib.rel.ADD_OR_REMOVE_ONE,
                                   value_discretization_interval=PLD_INTERVALS[0])
            return float(_compose(a, event_for(s)).get_epsilon(delta))

        try:
            guess = _solve(eps_coarse, target, guess, factor, 1e-3, describe, note=False)
            factor = 1.01
        except _Unattainable:
            # the coarse grid cannot resolve a tiny ε (it bounds ε below by about its interval):
            # bracket with the refined ε instead
            guess, factor = 1.0, 2.0
    notes: list = []
    try:
        sigma = _solve(eps_at, target, guess, factor, _SIGMA_RTOL, describe, sink=notes)
    except _Unattainable as exc:
        raise ValueError(str(exc)) from None
    return sigma, tuple(notes)


class _Unattainable(ValueError):
    pass


def _solve_eval(eps_at, s: float, bounded_by_rdp: set | None = None) -> float:
    """ε at σ.  Where the PLD accountant refuses σ (grid too large: σ small, ε large), ε is the
    RDP accountant's, a valid upper bound that is cheap at every σ, so the search goes on below
    the PLD's reach instead of stopping at its edge (``bounded_by_rdp`` collects those σ); a ε
    that still cannot be computed counts as ∞ (σ too small)."""
    try:
        return eps_at(s)
    except AccountingTooExpensiveError:
        token = _RDP_FOR_PLD.set(True)
        try:
            value = eps_at(s)
        except (AccountingTooExpensiveError, OverflowError, ZeroDivisionError):
            return math.inf
        finally:
            _RDP_FOR_PLD.reset(token)
        if bounded_by_rdp is not None:
            bounded_by_rdp.add(s)
        return value


def solve_noise_multiplier(eps_at, target: float, *, describe=lambda: "", rtol: float = _SIGMA_RTOL) -> float:
    """Smallest σ in [1e-2, 1e7] (to relative ``rtol``) with ``eps_at(σ) <= target``, for any
    decreasing ``eps_at`` (e.g. the ε of an optimizer's declared events, :func:`dpsim.calibrate`).

    Same search as :func:`noise_multiplier`: geometric bracketing from σ = 1 that tests the ends of
    the range, then Brent's method on ``log σ`` and bisection; the returned σ always meets the
    target.  ``describe()`` adds context to the error messages.
    """
    if not _is_real(target) or not (0.0 < float(target) < math.inf):
        raise ValueError(f"epsilon must be a positive finite number, got epsilon={target!r}")
    try:
        return _solve(eps_at, float(target), 1.0, 2.0, rtol, describe)
    except _Unattainable as exc:
        raise ValueError(str(exc)) from None


def _solve(eps_at, target: float, guess: float, factor: float, rtol: float, describe,
           note: bool = True, sink: list | None = None) -> float:
    """Smallest σ (to relative ``rtol``) with ``eps_at(σ) <= target``; ``eps_at`` decreasing.

    Brackets geometrically from ``guess`` (the step factor squares each time), then runs Brent's
    method on log σ, then bisects until ``σ_hi/σ_lo <= 1 + rtol``; returns ``σ_hi``, which always
    satisfies the target.  ``note``: warn (:class:`AccountingNote`) when σ_hi's ε is the RDP
    accountant's because PLD refused it (:func:`_solve_eval`); with ``sink`` the note is appended
    there instead.
    """
    values: dict[float, float] = {}
    by_rdp: set = set()

    def ev(s: float) -> float:
        if s not in values:
            token = _QUIET_NOTES.set(True)
            try:
                with _quiet_absl():
                    values[s] = _solve_eval(eps_at, s, by_rdp)
            finally:
                _QUIET_NOTES.reset(token)
        return values[s]

    hi = _bracket_and_refine(ev, target, guess, factor, rtol, describe)
    if note and hi in by_rdp:
        text = (f"noise_multiplier={hi:.6g} for epsilon={target:g} lies where the PLD accountant "
                f"exceeds its grid limit: its epsilon ({ev(hi):.6g}) is the RDP accountant's bound, "
                f"so it meets the target, possibly with a slightly larger noise multiplier than "
                f"the PLD one ({describe()})")
        if sink is not None:
            sink.append(text)
        else:
            _note(text, stacklevel=4)
    return hi


def _bracket_and_refine(ev, target: float, guess: float, factor: float, rtol: float, describe):
    """The search of :func:`_solve` on the memoized ``ev``."""
    from scipy.optimize import brentq

    lo, hi = None, None  # ε(lo) > target >= ε(hi)
    s = guess
    if ev(s) <= target:
        hi = s
        while lo is None:
            s /= factor
            factor *= factor
            if s < _SIGMA_MIN:  # test the edge of the range itself before giving up
                s = _SIGMA_MIN
                if ev(s) <= target:
                    raise ValueError(
                        f"epsilon={target} is so large that noise_multiplier={_SIGMA_MIN} already "
                        f"gives epsilon={ev(s):.6g} <= {target} ({describe()}); calibration "
                        f"searches noise_multiplier >= {_SIGMA_MIN}, where the accountants are "
                        f"reliable")
            if ev(s) > target:
                lo = s
            else:
                hi = s
    else:
        lo = s
        while hi is None:
            s *= factor
            factor *= factor
            if s > _SIGMA_MAX:
                s = _SIGMA_MAX
                if ev(s) > target:
                    raise _Unattainable(
                        f"epsilon={target} is not attainable with this accountant: even "
                        f"noise_multiplier={_SIGMA_MAX:g} gives epsilon={ev(s):.6g} > {target} "
                        f"({describe()}); the PLD accountant resolves epsilon only down to about "
                        f"1e-5 (its finest discretization): use accountant='rdp' for smaller targets")
            if ev(s) <= target:
                hi = s
            else:
                lo = s

    state = {"lo": lo, "hi": hi}

    def gap(u: float) -> float:
        s = math.exp(u)
        g = ev(s) - target
        if g > 0:
            state["lo"] = max(state["lo"], s)
        else:
            state["hi"] = min(state["hi"], s)
        return g

    if ev(hi) < target and hi / lo > 1.0 + rtol:
        try:
            brentq(gap, math.log(lo), math.log(hi), xtol=0.25 * math.log1p(rtol),
                   rtol=1e-12, maxiter=100)
        except (ValueError, RuntimeError):  # a non-monotone PLD wiggle; bisection below copes
            pass
    lo, hi = state["lo"], state["hi"]
    while hi / lo > 1.0 + rtol:
        mid = math.sqrt(lo * hi)
        if ev(mid) > target:
            lo = mid
        else:
            hi = mid
    return hi
