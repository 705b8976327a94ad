"""Options and their checks: the samplers, accountants and neighbouring relations, the numerical
settings (RDP orders, PLD intervals), the errors, and ``dp_accounting`` imported on first use
(the contract is in :mod:`dpsim.accounting`)."""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..sampling import CYCLIC, parse_sampling


ACCOUNTANTS = ("pld", "rdp")
SAMPLERS = ("poisson", "fixed", "replacement")
#: The neighbouring relation behind the ε of each sampler (module docstring, "Add/remove with
#: the rate fixed in advance").  Under Poisson sampling the rate ``q = b/n`` is fixed before the data are seen: the
#: neighbour one example shorter is sampled at the same ``q`` (not at ``b/(n − 1)``).
ADJACENCY = {"poisson": "add/remove one example, with the sampling rate q = b/n fixed in advance",
             "fixed": "replace one example (n public)",
             "replacement": "none (no accountant supports with-replacement sampling)"}

#: What a printed ε covers and what it does not (every ε dpsim prints says so).
EPSILON_SCOPE = ("ε covers one run of this configuration; it does not cover hyperparameter tuning "
                 "on the same private data, nor the recorded diagnostics (losses, gradient norms, "
                 "probes, batch sizes), which read the private data without noise")
#: :data:`EPSILON_SCOPE` in a few words, for one-line summaries.
EPSILON_SCOPE_SHORT = "not covered: tuning on this data, recorded diagnostics"

#: Smallest δ accepted: below it an (ε, δ) statement says nothing a user can act on, and the
#: accountants' arithmetic degenerates (PLD's truncated tails, ``log δ`` underflow).
MIN_DELTA = 1e-50
#: Finite noise multipliers (``σ_eff`` of a step, or of a whole-run release) outside this range
#: overflow the accountants' arithmetic; σ = 0 (not private) and σ = ∞ (no release) are exact.
NOISE_RANGE = (1e-100, 1e100)
#: dp_accounting's PLD drops about this much tail mass per composition: a δ below
#: ``PLD_TAIL_MASS × steps`` is not resolved by it (the RDP accountant is used, with a note).
PLD_TAIL_MASS = 1e-15


class AccountingNote(UserWarning):
    """A note on how an ε was computed, when an accountant reached one of its limits and the
    value returned is another valid bound (e.g. the RDP accountant's where PLD could not refine).
    The text says which bound and why; the CLI and :meth:`dpsim.Result.privacy_report` show it."""



class _Lib:
    """``dp_accounting``, imported on first use (``import dpsim`` does not import it: its own
    imports are slow, SciPy's signal and stats modules among them).  ``_lib.ev``,
    ``_lib.pld``, ``_lib.rdp``, ``_lib.rel`` are ``dp_accounting.dp_event``, the PLD and RDP
    accountant modules and ``NeighboringRelation``."""

    def __getattr__(self, name):
        import dp_accounting
        from dp_accounting import dp_event
        from dp_accounting.pld import pld_privacy_accountant
        from dp_accounting.rdp import rdp_privacy_accountant

        self.ev, self.pld, self.rdp = dp_event, pld_privacy_accountant, rdp_privacy_accountant
        self.rel = dp_accounting.NeighboringRelation
        return object.__getattribute__(self, name)


_lib = _Lib()


def _sampling(sampling) -> tuple[str, int | None]:
    """``(kind, k)`` of a sampler name (``k`` the number of cyclic groups, else None); the same
    error as before for anything else."""
    try:
        return parse_sampling(sampling)
    except ValueError:
        raise ValueError(f"sampling must be one of {SAMPLERS} or 'cyclic_poisson:<k>' (k >= 1), "
                         f"got sampling={sampling!r}") from None


def adjacency(sampling) -> str:
    """The neighbouring relation behind the ε of ``sampling`` (:data:`ADJACENCY`; cyclic Poisson
    sampling is add/remove with the groups and the rate fixed in advance by a public rule)."""
    kind, k = _sampling(sampling)
    if kind == CYCLIC:
        return (f"add/remove one example, with its group (one of {k}, fixed in advance) and the "
                f"sampling rate fixed in advance")
    return ADJACENCY[kind]


def _grid(*parts) -> tuple[float, ...]:
    arr = np.unique(np.round(np.concatenate([np.asarray(p, dtype=float) for p in parts]), 10))
    return tuple(float(a) for a in arr)


#: ``dp_accounting.rdp.rdp_privacy_accountant.DEFAULT_RDP_ORDERS`` (0.4–0.6), written out so that
#: ``import dpsim`` does not import the library (``tests/accounting/test_accounting.py`` checks it is the same).
LIBRARY_DEFAULT_RDP_ORDERS: tuple[float, ...] = tuple(
    [1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024])

#: Orders for ``accountant="rdp"`` with Poisson sampling (a superset of the library default).
RDP_ORDERS: tuple[float, ...] = _grid(
    LIBRARY_DEFAULT_RDP_ORDERS,
    1 + np.arange(1, 10) / 100,             # 1.01 .. 1.09
    1.1 + np.arange(0, 218) * 0.05,         # 1.10 .. 11.95
    12 + np.arange(0, 208) * 0.25,          # 12 .. 63.75
    np.arange(64, 257, 16),                 # 64 .. 256
    np.arange(320, 1025, 64),               # 320 .. 1024
    [1280, 1536, 2048],
)

#: Orders for ``sampling="fixed"`` (sampling without replacement; WBK19 Thm. 27 is O(α²) per order).
RDP_ORDERS_FIXED: tuple[float, ...] = _grid(
    2 + np.arange(0, 40) * 0.25,            # 2 .. 11.75
    np.arange(12, 65),                      # 12 .. 64
    [72, 80, 96, 112, 128, 160, 192, 256],
    np.arange(320, 1025, 64),
    [1536, 2048],
)

#: PLD value discretization intervals, coarse to fine (see module docstring).
PLD_INTERVALS: tuple[float, ...] = (1e-3, 10 ** -3.5, 1e-4, 10 ** -4.5, 1e-5)
#: Relative change between successive PLD refinements at which refinement stops.
PLD_RTOL: float = 1e-3

# Calibration: relative tolerance on σ and the range searched.
_SIGMA_RTOL = 1e-4
_SIGMA_MIN = 1e-2
_SIGMA_MAX = 1e7


class UnsupportedAccountingError(ValueError, NotImplementedError):
    """A sampler/accountant combination that ``dp_accounting`` cannot account for correctly.

    Subclasses both ``ValueError`` (bad option: the CLI reports it as bad input) and
    ``NotImplementedError`` (a known, deliberate gap).
    """


# ---------------------------------------------------------------------------------------------
# Validation


def _is_real(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _check_noise(x, name="noise_multiplier") -> float:
    if not _is_real(x) or not (float(x) >= 0.0):  # also rejects NaN
        raise ValueError(f"{name} must be a non-negative number (inf allowed), got {name}={x!r}")
    return float(x)


def _check_delta(delta) -> float:
    if not _is_real(delta) or not (0.0 < float(delta) < 1.0):
        raise ValueError(f"delta must be in (0, 1), got delta={delta!r}")
    if float(delta) < MIN_DELTA:
        raise ValueError(f"delta={delta!r} is below {MIN_DELTA:g}: an (epsilon, delta) guarantee "
                         f"there is not computed reliably and means nothing more than at 1e-12; use "
                         f"a delta well below 1/n, e.g. 1e-5 .. 1e-12")
    return float(delta)


def _check_noise_range(sig: float, name: str = "noise_multiplier") -> None:
    """A finite positive σ outside :data:`NOISE_RANGE` is refused (one line naming it)."""
    lo, hi = NOISE_RANGE
    if 0.0 < sig < lo or hi < sig < math.inf:
        raise ValueError(f"{name}={sig!r} is outside [{lo:g}, {hi:g}], where the accountants "
                         f"compute epsilon without overflow (noise_multiplier=0: not private; "
                         f"inf: nothing released)")


def check_release_noise(events) -> None:
    """Refuse, before a run, Gaussian releases whose noise multiplier the accountants cannot
    handle (:data:`NOISE_RANGE`), so that a run never ends in an accounting overflow.

    ``events``: an optimizer's declared events (:attr:`dpsim.optimizers.Optimizer.events`);
    per-trial multipliers are checked one by one.  Cheap: no ε is computed."""
    from ..privacy import events as ev

    for e in events:
        if isinstance(e, (ev.GaussianRelease, ev.CorrelatedRelease)):
            for s in np.atleast_1d(np.asarray(e.noise_multiplier, dtype=float)):
                _check_noise_range(float(s))


def _check_rate(q) -> float:
    if not _is_real(q) or not (0.0 < float(q) <= 1.0):
        raise ValueError(f"sample_rate must be in (0, 1], got sample_rate={q!r}")
    return float(q)


def _check_count(n, name) -> int:
    ok = (isinstance(n, numbers.Integral) and not isinstance(n, bool)) or (
        isinstance(n, float) and n.is_integer())
    if not ok or int(n) < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {name}={n!r}")
    return int(n)


def _check_options(accountant, sampling) -> None:
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got accountant={accountant!r}")
    kind, _ = _sampling(sampling)
    if kind == "replacement":
        raise UnsupportedAccountingError(
            f"sampling='replacement' (with-replacement batches) is not supported by "
            f"accountant={accountant!r}: dp_accounting has no correct accountant for "
            f"SampledWithReplacementDpEvent; use sampling='poisson' (add/remove) or "
            f"sampling='fixed' with accountant='rdp' (replace-one)")
    if kind == "fixed" and accountant == "pld":
        raise UnsupportedAccountingError(
            "accountant='pld' with sampling='fixed' is not supported: dp_accounting's PLD "
            "accountant has no sampling-without-replacement event (its Poisson PLD is not a "
            "valid bound for fixed-size batches); use accountant='rdp' with sampling='fixed' "
            "(replace-one adjacency, Wang-Balle-Kasiviswanathan 2019 Thm. 27)")
