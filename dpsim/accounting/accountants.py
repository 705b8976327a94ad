"""The accountants: the PLD ε refined to :data:`~dpsim.accounting.PLD_RTOL`, the RDP ε, their
limits and the notes that say which valid bound was returned (:class:`collect_notes`)."""

from __future__ import annotations

import contextvars
import functools
import logging
import math
import warnings

import numpy as np

from .options import (PLD_INTERVALS, PLD_RTOL, PLD_TAIL_MASS, RDP_ORDERS, RDP_ORDERS_FIXED,
                      AccountingNote, UnsupportedAccountingError, _check_noise_range, _lib)
from .releases import _event



class _DropNonConvergence(logging.Filter):
    # The library logs a warning for every RDP order whose fractional-order series does not
    # converge and then excludes that order (RDP = inf): harmless, and there can be hundreds.
    def filter(self, record: logging.LogRecord) -> bool:
        # Likewise its note on a negative RDP value from rounding at a very large noise
        # multiplier (σ ≳ 1e5), which it answers with ε = 0: one line per order and per call.
        msg = str(record.msg)
        return "failed to converge" not in msg and "Negative Renyi divergence" not in msg


class _quiet_absl:
    def __enter__(self):
        self._filter = _DropNonConvergence()
        logging.getLogger("absl").addFilter(self._filter)

    def __exit__(self, *exc):
        logging.getLogger("absl").removeFilter(self._filter)
        return False


def _rdp_accountant(sampling: str):
    if sampling == "poisson":
        return _lib.rdp.RdpAccountant(RDP_ORDERS, _lib.rel.ADD_OR_REMOVE_ONE)
    return _lib.rdp.RdpAccountant(RDP_ORDERS_FIXED, _lib.rel.REPLACE_ONE)


def _compose(acc, event):
    if not acc.supports(event):  # never expected: the options were validated
        raise UnsupportedAccountingError(f"{type(acc).__name__} cannot account for {event}")
    return acc.compose(event)


#: Largest predicted PLD grid (points summed over the refinements of one ``epsilon`` call).  The
#: construction's time and memory grow with the points, so this bounds both for one call; finer
#: refinements beyond it are skipped (the coarser ε is a valid upper bound).
PLD_MAX_POINTS: float = 2e6


class AccountingTooExpensiveError(ValueError):
    """The PLD accountant would need more time or memory than :data:`PLD_MAX_POINTS` allows."""


def _loss_moments(sigma: float, q: float) -> tuple[float, float, float]:
    """``(W, μ, s)`` of the privacy loss of one Poisson-subsampled Gaussian (remove direction):
    the width of its range on ``x ∈ [−10.5σ, 1 + 10.5σ]`` (where dp_accounting truncates), and its
    mean and standard deviation under the mixture (a 4001-point quadrature)."""
    from scipy.stats import norm

    x = np.linspace(-10.5 * sigma, 1 + 10.5 * sigma, 4001)
    a = (2 * x - 1) / (2 * sigma * sigma)
    base = math.log1p(-q) if q < 1 else -math.inf
    loss = np.logaddexp(base, math.log(q) + a)
    p = (1 - q) * norm.pdf(x, 0, sigma) + q * norm.pdf(x, 1, sigma)
    p = p / p.sum()
    mu = float(np.sum(p * loss))
    sd = math.sqrt(max(float(np.sum(p * loss * loss)) - mu * mu, 0.0))
    return float(loss.max() - loss.min()), mu, sd


@functools.lru_cache(maxsize=4096)
def _pld_points(key, q: float, unamplified: float) -> float:
    """Predicted number of PLD grid points at interval h = 1 (divide by h): the base range plus (for
    a composition of several steps) the composed mean and 12 standard deviations per step type (within a factor 1.5 of the library's
    actual grid on σ ∈ [0.1, 2], q ∈ [1e-3, 1], T ∈ [100, 1e5]), times 1.5."""
    total = 0.0
    parts = list(key) + ([(unamplified, 1)] if math.isfinite(unamplified) else [])
    with np.errstate(over="ignore", invalid="ignore"):  # a tiny σ: the moments overflow
        for i, (s, count) in enumerate(parts):
            W, mu, sd = _loss_moments(s, 1.0 if i >= len(key) else q)
            total += W if count == 1 else W + count * mu + 12 * math.sqrt(count) * sd  # 1: no composition
    # an overflowed (NaN or inf) prediction is a grid beyond any limit, never "within" it
    return 1.5 * total if math.isfinite(total) else math.inf


def _pld_epsilon(event, delta: float, points: float = 0.0, describe=None) -> tuple[float, str]:
    """``(ε, why)``: the PLD ε refined through :data:`PLD_INTERVALS`, and ``""`` when it converged
    to :data:`PLD_RTOL`, else why not (the grid limit stopped the refinement, or the finest
    interval was reached without two values agreeing)."""
    prev = None
    eps = math.inf
    spent = 0.0
    for i, h in enumerate(PLD_INTERVALS):
        spent += points / h
        if spent > PLD_MAX_POINTS:
            if i == 0:
                need = f"about {points / h:.3g}" if math.isfinite(points) else "more than 1e308"
                raise AccountingTooExpensiveError(
                    f"the PLD accountant would need {need} grid points (limit "
                    f"{PLD_MAX_POINTS:.3g}: about 10 s and 1 GiB) for {describe()}; the noise "
                    f"multiplier is too small or the steps too many for PLD: use "
                    f"accountant='rdp' (fast, an upper bound)")
            # the coarser value already computed is a valid upper bound, but not refined
            return eps, (f"the PLD grid limit ({PLD_MAX_POINTS:.3g} points) stopped its refinement "
                         f"at interval {PLD_INTERVALS[i - 1]:.3g}")
        acc = _lib.pld.PLDAccountant(_lib.rel.ADD_OR_REMOVE_ONE, value_discretization_interval=h)
        eps = float(_compose(acc, event).get_epsilon(delta))
        if prev is not None and abs(prev - eps) <= PLD_RTOL * eps + 1e-12:
            return eps, ""
        prev = eps
    return eps, (f"the PLD value did not settle to {PLD_RTOL:g} relative by its finest interval "
                 f"{PLD_INTERVALS[-1]:g}")


def _gaussian_epsilon(sigma: float, delta: float) -> float:
    """Exact ε at ``delta`` of one Gaussian mechanism with sensitivity 1 and noise σ (Balle & Wang,
    "Improving the Gaussian Mechanism for Differential Privacy", ICML 2018, Thm. 8):
    ``δ(ε) = Φ(1/(2σ) − εσ) − e^ε Φ(−1/(2σ) − εσ)``, solved for ε (log-space, no overflow)."""
    from scipy.optimize import brentq
    from scipy.special import log_ndtr

    a = 1.0 / (2.0 * sigma)

    def log_gap(e):  # log δ(ε) − log δ, decreasing in ε
        lp = log_ndtr(a - e * sigma)
        lq = e + log_ndtr(-a - e * sigma)
        if lq >= lp:
            return -math.inf
        return lp + math.log1p(-math.exp(lq - lp)) - math.log(delta)

    if log_gap(0.0) <= 0:
        return 0.0
    hi = 1.0
    while log_gap(hi) > 0:
        hi *= 2.0
    return float(brentq(log_gap, 0.0, hi, xtol=1e-12, rtol=1e-12))


@functools.lru_cache(maxsize=4096)
def _epsilon_noted(key, q: float, delta: float, accountant: str, sampling: str,
                   unamplified: float = math.inf) -> tuple[float, str]:
    """``(ε, note)``; ``note`` is ``""`` unless an accountant limit made another valid bound the
    answer (:class:`AccountingNote`)."""
    if unamplified == 0.0:
        return math.inf, ""
    if not key and not math.isfinite(unamplified):
        return 0.0, ""
    if any(s == 0.0 for s, _ in key):
        return math.inf, ""
    event = _event(key, q, sampling, unamplified)
    with _quiet_absl():
        if accountant != "pld":
            return float(_compose(_rdp_accountant(sampling), event).get_epsilon(delta)), ""

        def rdp():
            return float(_compose(_rdp_accountant(sampling), event).get_epsilon(delta))

        compositions = sum(c for _, c in key) + (1 if math.isfinite(unamplified) else 0)
        if delta < PLD_TAIL_MASS * compositions:
            e = rdp()
            return e, (f"delta={delta:g} is below what the PLD accountant resolves over "
                       f"{compositions} compositions (it drops about {PLD_TAIL_MASS:g} of tail mass "
                       f"each): epsilon {e:.6g} is the RDP accountant's bound")

        def describe():
            sig = [f"noise_multiplier={s:.4g} for {c} steps" for s, c in key]
            if math.isfinite(unamplified):
                sig.append(f"a whole-run (unamplified) Gaussian release with noise_multiplier="
                           f"{unamplified:.4g}")
            return ", ".join(sig) + (f" at sample_rate={q:g}" if key else "")

        try:
            eps, why = _pld_epsilon(event, delta, _pld_points(key, q, unamplified), describe)
        except AccountingTooExpensiveError:
            if key:
                raise
            # one Gaussian mechanism for the whole run (unamplified correlated noise): exact
            s = unamplified if sampling == "poisson" else unamplified / 2.0
            e = _gaussian_epsilon(s, delta)
            return e, (f"one Gaussian mechanism (noise_multiplier={s:.4g}) is beyond the PLD grid "
                       f"limit: epsilon {e:.6g} is its exact value (Balle & Wang 2018)")
        if not why and math.isfinite(eps):
            return eps, ""
        r = rdp()
        best = min(eps, r)
        which = "the RDP accountant's" if r < eps else "the PLD value"
        return best, (f"{why}: epsilon {best:.6g} is {which}, the smaller of PLD {eps:.6g} and "
                      f"RDP {r:.6g} (both are upper bounds)")


#: Set while a calibration evaluates a σ that the PLD accountant refuses (grid too large): the
#: ``"pld"`` ε is then the RDP accountant's (a valid upper bound), so the search can go on.
_RDP_FOR_PLD: contextvars.ContextVar = contextvars.ContextVar("dpsim_rdp_for_pld", default=False)
#: Set while a calibration evaluates candidate σ's: their notes are not warned one by one, and a
#: σ whose PLD grid cannot be refined even once within the limit (seconds for an unrefined value)
#: is bounded by RDP instead (:func:`_epsilon_key`, :func:`_solve_eval`).
_QUIET_NOTES: contextvars.ContextVar = contextvars.ContextVar("dpsim_quiet_notes", default=False)
#: A list collecting the notes instead of warning them (:func:`collect_notes`).
_NOTES: contextvars.ContextVar = contextvars.ContextVar("dpsim_accounting_notes", default=None)


class collect_notes:
    """Collect, instead of warning, the :class:`AccountingNote` texts of the ε computed inside.

    Thread- and task-safe: a context variable, not the warnings filters.  For example::

        with accounting.collect_notes() as notes:
            eps = accounting.epsilon(50, 1e-4, 10**6, 1e-5)
        notes   # ['the PLD value did not settle ...: epsilon 0.00514 is the RDP accountant's ...']
    """

    def __enter__(self) -> list:
        self._list: list = []
        self._token = _NOTES.set(self._list)
        return self._list

    def __exit__(self, *exc):
        _NOTES.reset(self._token)
        return False


def _note(text: str, stacklevel: int) -> None:
    if _QUIET_NOTES.get():
        return
    sink = _NOTES.get()
    if sink is not None:
        if text not in sink:
            sink.append(text)
        return
    warnings.warn(text, AccountingNote, stacklevel=stacklevel + 1)


def _epsilon_key(key, q: float, delta: float, accountant: str, sampling: str,
                 unamplified: float = math.inf) -> float:
    """ε of merged step types (cached in :func:`_epsilon_noted`); an :class:`AccountingNote`
    warning carries the note, if any.  Refuses noise multipliers outside :data:`NOISE_RANGE`."""
    for s, _ in key:
        _check_noise_range(s)
    _check_noise_range(unamplified, "noise_multiplier (whole-run, unamplified)")
    if accountant == "pld" and _RDP_FOR_PLD.get():
        accountant = "rdp"
    elif accountant == "pld" and _QUIET_NOTES.get() and key:  # inside a calibration
        pts = _pld_points(key, q, unamplified)
        if pts / PLD_INTERVALS[0] + pts / PLD_INTERVALS[1] > PLD_MAX_POINTS:
            raise AccountingTooExpensiveError("a PLD grid that cannot be refined within the limit")
    eps, note = _epsilon_noted(key, q, delta, accountant, sampling, unamplified)
    if note:
        _note(note, stacklevel=3)
    return eps
