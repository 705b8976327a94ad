"""Privacy accounting for subsampled Gaussian releases, built on Google's ``dp_accounting``.

This module computes (ε, δ) for DP-SGD-style training and calibrates the noise multiplier for a
target ε.  It does no privacy arithmetic of its own: it turns the run's releases into a
``dp_accounting`` :class:`~dp_accounting.DpEvent` (:func:`make_event`) and asks one of the
library's accountants for ε.  The one piece of reasoning done here — merging the releases that
share a batch — is stated in the contract below together with its source.

Contract
--------
**Release.**  A release is the Gaussian mechanism applied to a sum of per-example terms of ℓ2
norm at most ``C`` (the clip norm): ``Σ_{i∈B} clip(g_i, C) + N(0, σ²C² I)``.  Its *noise
multiplier* ``σ`` is the noise standard deviation divided by the release's ℓ2 sensitivity under
add/remove adjacency, which is ``C``.  Dividing the sum by a batch size (nominal or actual) is
post-processing and changes nothing here.  ``σ = 0`` is non-private (ε = ∞); ``σ = ∞`` releases
nothing about the data and costs nothing.

**Step.**  A step draws one batch ``B`` with the sampler and makes one or more releases from that
same batch.  Releases on the same batch are *not* independently subsampled: a step releasing
Gaussians with noise multipliers ``σ_1 … σ_r`` on the same batch costs exactly one Gaussian
release with

    σ_eff = (Σ_i σ_i^{-2})^{-1/2}          (= σ/√r for r equal releases).

For queries fixed before the step this is an equivalence (the precision-weighted average of the
r noisy sums is a sufficient statistic, and each output is a post-processing of the other).  For
adaptively chosen queries (the second depends on the first output) σ_eff is still a valid bound:
the adaptive composition of Gaussian mechanisms is dominated by the single Gaussian with
μ = (Σ μ_i²)^{1/2} (GDP composition theorem of Dong, Roth & Su, "Gaussian Differential Privacy",
JRSS-B 2022), and Poisson subsampling acts on dominating pairs (Zhu, Dong & Wang, "Optimal
Accounting of Differential Privacy via Characteristic Function", AISTATS 2022).  This is the
reduction ``dp_accounting`` itself applies to a ``PoissonSampledDpEvent`` of composed Gaussians
(``rdp_privacy_accountant._effective_gaussian_noise_multiplier``, citing §3 of arXiv:1812.06210).  Note that treating the r releases as r *independent* subsampled steps would be
wrong in the unsafe direction: for small ``q`` the per-step RDP is about
``q²α(e^{r/σ²} − 1)/2`` for the shared batch but ``r·q²α(e^{1/σ²} − 1)/2`` for independent
batches, and ``e^{rx} − 1 ≥ r(e^x − 1)``.  So put releases that share a batch in one step type.

**Samplers, accountants and neighbouring relations.**  ``sample_rate`` is ``q`` (``b/n``).

=================  ==============  =======================================================
sampling           accountant      what is computed
=================  ==============  =======================================================
``"poisson"``      ``"pld"``       ``PLDAccountant``, ADD_OR_REMOVE_ONE: the privacy-loss
                   (default)       distribution of ``PoissonSampledDpEvent(q, Gaussian(σ_eff))``
                                   composed over the steps, pessimistic discretization (an
                                   upper bound on the exact ε), refined until stable to
                                   :data:`PLD_RTOL` (see below).
``"poisson"``      ``"rdp"``       ``RdpAccountant``, ADD_OR_REMOVE_ONE: RDP of the Poisson
                                   sampled Gaussian (Mironov, Talwar & Zhang, "Rényi
                                   Differential Privacy of the Sampled Gaussian Mechanism",
                                   2019) on :data:`RDP_ORDERS`, converted with the improved
                                   bound of Canonne, Kamath & Steinke 2020 (arXiv:2004.00010
                                   Prop. 12) / Asoodeh et al. 2020.  An upper bound on the
                                   exact ε, typically 5–25% above the PLD value.
``"fixed"``        ``"rdp"``       ``RdpAccountant``, **REPLACE_ONE** (substitution; ``n`` is
                                   public): ``SampledWithoutReplacementDpEvent`` with sample
                                   size/dataset size = ``q``, RDP bound of Wang, Balle &
                                   Kasiviswanathan, "Subsampled Rényi DP and Analytical Moments
                                   Accountant", AISTATS 2019, Thm. 27, on
                                   :data:`RDP_ORDERS_FIXED`.  Under replace-one a sum of terms of
                                   norm ≤ C has sensitivity **2C**, so the event carries the
                                   Gaussian noise multiplier ``σ_eff/2`` (ALGORITHMS §2.4: "1 under
                                   add/remove, 2 under replace-one").  The resulting ε is a
                                   replace-one guarantee; it is not comparable to add/remove ε.
``"fixed"``        ``"pld"``       **ValueError.**  ``PLDAccountant`` has no sampling-without-
                                   replacement event; its REPLACE_ONE Poisson PLD uses the pair
                                   ``(1−q)N(0,σ²)+qN(−1,σ²)`` vs ``(1−q)N(0,σ²)+qN(1,σ²)``, but
                                   fixed-size batches realize ``(1−q)N(0,σ²)+qN(2,σ²)`` vs
                                   ``N(0,σ²)`` (all other examples equal to y, x' = y, x = −y;
                                   cf. Zhu, Dong & Wang 2022 on sampling without replacement
                                   under substitution).  At σ=1.5, q=0.04, 2250 steps, δ=1e-5 the
                                   former gives ε≈13.5, the latter ≥ 25.5: it would under-report.
``"cyclic_poisson   either          Cyclic Poisson sampling (:mod:`dpsim.sampling`), add/remove:
:<k>"``                            an example belongs to one of ``k`` fixed groups and can
                                   only be sampled, at rate ``q_k = min(1, k·q)``, on the
                                   steps of its group (every k-th step, at most ``⌈T/k⌉``
                                   of them).  So each example sees a Poisson-subsampled
                                   run of ``⌈T/k⌉`` steps at rate ``q_k``: ε is that of the
                                   worst group, accounted as ``"poisson"`` at ``q_k``.  Banded
                                   DP-MF with bandwidth ≤ k is amplified the same way
                                   (:mod:`dpsim.privacy.mf`).  ``k = 1`` is ``"poisson"``.
``"replacement"``  either          **ValueError** (:class:`UnsupportedAccountingError`).
                                   ``SampledWithReplacementDpEvent`` exists in
                                   ``dp_accounting`` but neither accountant supports it, and an
                                   example drawn k times has sensitivity kC.  No number is
                                   returned rather than a wrong one.
=================  ==============  =======================================================

**Add/remove with the rate fixed in advance.**  The Poisson (and cyclic Poisson) ε is an
add/remove guarantee in which the sampling rate ``q = b/n`` is fixed before the data are seen: the
neighbour one example shorter is sampled at the same ``q``.  A neighbour sampled at its own
``b/(n − 1)`` is another mechanism; at ``b = n − 1`` its rate is 1 and the claim fails (exact
one-step ε 17.6 against 4.37 at n = 100, σ = 1), so :func:`dpsim.sampling.check_sampling` refuses
that case (docs/privacy-claims.md).  Every ε says what it does not cover
(:data:`EPSILON_SCOPE`): tuning on the same private data, and the diagnostics a run records.

**Limits.**  Where an accountant cannot give its usual answer it returns another valid upper
bound and says so (:class:`AccountingNote`, :func:`collect_notes`): PLD that cannot refine (grid
limit, or no two intervals agreeing) returns the smaller of its value and the RDP bound; a δ below
``PLD_TAIL_MASS × steps`` is accounted by RDP; a single unamplified Gaussian beyond the PLD grid
gets its exact closed form; a calibration uses the RDP bound of a σ the PLD grid cannot afford.
δ below :data:`MIN_DELTA` and finite noise multipliers outside :data:`NOISE_RANGE` are one-line
errors; ``cyclic_poisson:<k>`` with ``k·q > 1`` is refused.

**Numerical settings.**

* RDP orders (:data:`RDP_ORDERS`): a superset of ``dp_accounting``'s ``DEFAULT_RDP_ORDERS`` —
  1.01…1.09 (step 0.01), 1.1…11.95 (step 0.05), 12…63.75 (step 0.25), 64…256 (step 16),
  320…1024 (step 64), 1280, 1536, 2048.  A superset can only lower ε (the bound is a minimum over
  orders).  Orders at which the library's fractional-order series does not converge are
  excluded by the library (RDP = ∞), which is safe.  At fractional orders dp_accounting 0.6's
  series (``_compute_log_a_frac``) sums the absolute values of binomial terms that alternate in
  sign, so its RDP there is an upper bound, not the exact value: about 10–20% high near α = 1–1.5,
  0.5% at 2.5 and < 1e-4 from α ≈ 4 on (measured against quadrature in the tests).  Integer
  orders are exact.  This only loosens (never invalidates) ε when the optimal order is < 3,
  i.e. at large ε.  For ``"fixed"`` (:data:`RDP_ORDERS_FIXED`):
  2…11.75 (step 0.25), integers 12…64, 72…256 sparse, 320…1024 (step 64), 1536, 2048 — the
  library's bound at non-integer orders is an interpolation and below 2 is useless, and the
  exact bound costs O(α²) per order up to 256.
* PLD discretization: ``value_discretization_interval`` h runs through :data:`PLD_INTERVALS`
  (1e-3, 10^-3.5, 1e-4, 10^-4.5, 1e-5) and stops at the first h whose ε differs from the previous
  one by at most ``PLD_RTOL · ε`` (relative 1e-3; observed error shrinks ≈ h², so the returned
  value is well inside that).  Every value along the way is a valid upper bound (pessimistic
  rounding, ``dp_accounting`` supplementary material Observation 1), so stopping early never
  under-reports.  A single ``epsilon`` call therefore costs 2–5 PLD constructions
  (typically 0.05–2 s).

Results are cached (``functools.lru_cache`` on the normalized arguments), since a simulator asks
for the same ε many times.

Runs: events → record → ε
-------------------------
This module is the only consumer of the privacy events optimizers declare
(:mod:`dpsim.privacy.events`).  After a run, :func:`privacy_record` resolves them into a JSON-able
record (``Result.privacy``): the Gaussian releases become per-trial *step types* (the σ's released
on a step, and how many steps release exactly those), a ctCDP budget is read from the final state
of the piece that declared it, and any ``NonPrivate`` event makes the run non-private.
:func:`epsilon_of_record` turns a record into ε.

Correlated-noise (DP-MF) releases are accounted one of two ways, and the record says which
(``events[i]["accounting"]``, ``correlated_accounting``, ``note``):

* **amplified** — with ``"poisson"`` (one group) or ``"cyclic_poisson:<k>"`` sampling, a strategy
  of bandwidth ``w ≤ k`` released on every step: by the reduction of Choquette-Choo et al. 2023
  (derived in :mod:`dpsim.privacy.mf`) each example's participations are independent
  Poisson-subsampled Gaussian mechanisms with noise multiplier σ, so the release is accounted
  exactly like an i.i.d. Gaussian release with σ on every step of the example's group (merged with
  the other releases of that step's batch).  ``banded:1`` is then DP-SGD.
* **unamplified** — otherwise (``w > k``, e.g. ``banded:4`` or ``sqrt_toeplitz`` under
  ``"poisson"``; fixed-size batches; a release restricted to some steps, whose stream index is
  not the step index): one Gaussian mechanism for the whole run with noise multiplier
  ``σ·sens(M)/worst_sens(M)``, without amplification by sampling; this bound holds for every
  participation pattern, the cyclic one included.

For ``"cyclic_poisson:<k>"`` the record also holds ``participation`` (groups, per-step rate
``q_k``, at most ``⌈T/k⌉`` participations, ``k`` steps apart) and ``group_step_types``: per trial,
the step types one group's example sees, for every group not dominated by another (ε is the
maximum over them).
"""

from __future__ import annotations

import functools
import logging
import math
import numbers
from fractions import Fraction
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # pragma: no cover - annotations only; the library is imported on first use
    import dp_accounting

import contextvars
import warnings

import numpy as np

from .sampling import CYCLIC, cyclic_rate, parse_sampling

__all__ = [
    "ACCOUNTANTS",
    "SAMPLERS",
    "ADJACENCY",
    "adjacency",
    "RDP_ORDERS",
    "RDP_ORDERS_FIXED",
    "PLD_INTERVALS",
    "PLD_RTOL",
    "UnsupportedAccountingError",
    "AccountingNote",
    "collect_notes",
    "check_release_noise",
    "check_cyclic_rate",
    "EPSILON_SCOPE",
    "MIN_DELTA",
    "NOISE_RANGE",
    "AccountingTooExpensiveError",
    "PLD_MAX_POINTS",
    "solve_noise_multiplier",
    "epsilon",
    "noise_multiplier",
    "epsilon_from_releases",
    "effective_noise_multiplier",
    "make_event",
    "rdp_curve",
    "privacy_record",
    "epsilon_of_record",
]

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
    """``dp_accounting``, imported on first use (``import dpsim`` does not import it: about 1–2 s
    of its own imports, SciPy's signal and stats modules among them).  ``_lib.ev``,
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
#: ``import dpsim`` does not import the library (``tests/test_accounting.py`` checks it is the same).
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
    from .privacy import events as ev

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


# ---------------------------------------------------------------------------------------------
# Step types -> events


def effective_noise_multiplier(noise_multipliers) -> float:
    """Noise multiplier of one Gaussian equivalent to several Gaussians on the same batch.

    ``σ_eff = (Σ_i σ_i^{-2})^{-1/2}``; ``σ/√r`` exactly (in floating point) when all r are equal.
    ``σ_i = ∞`` contributes nothing; any ``σ_i = 0`` gives 0; no finite ``σ_i`` gives ``∞``.
    See the module docstring for why this is exact for releases sharing a batch (and a valid
    bound when the queries are chosen adaptively).
    """
    if _is_real(noise_multipliers):
        noise_multipliers = (noise_multipliers,)
    sig = [_check_noise(s) for s in noise_multipliers]
    if not sig:
        raise ValueError("noise_multipliers must name at least one release, got ()")
    if any(s == 0.0 for s in sig):
        return 0.0
    finite = [s for s in sig if math.isfinite(s)]
    if not finite:
        return math.inf
    if all(s == finite[0] for s in finite):
        return finite[0] / math.sqrt(len(finite))
    return math.fsum(s ** -2.0 for s in finite) ** -0.5


def _normalize(releases) -> tuple[tuple[float, int], ...]:
    """Validate step types and merge them into sorted ``((σ_eff, count), ...)``, dropping free ones."""
    if isinstance(releases, (str, bytes)) or not isinstance(releases, Iterable):
        raise ValueError(f"releases must be a sequence of (noise_multipliers, count) pairs, "
                         f"got releases={releases!r}")
    merged: dict[float, int] = {}
    for item in releases:
        try:
            sig, count = item
        except (TypeError, ValueError):
            raise ValueError(f"each release must be a (noise_multipliers, count) pair, "
                             f"got {item!r}") from None
        count = _check_count(count, "count")
        s = effective_noise_multiplier(sig)
        if count == 0 or math.isinf(s):
            continue
        merged[s] = merged.get(s, 0) + count
    return tuple(sorted(merged.items()))


def _wor_fraction(q: float) -> tuple[int, int]:
    """(sample_size, dataset_size) with ratio q, for ``SampledWithoutReplacementDpEvent``."""
    f = Fraction(q).limit_denominator(10 ** 12)
    return f.numerator, f.denominator


def _event(key, q: float, sampling: str, unamplified: float = math.inf) -> dp_accounting.DpEvent:
    events = []
    if math.isfinite(unamplified):  # a whole-run Gaussian mechanism (correlated noise, DP-MF)
        s = unamplified if sampling == "poisson" else unamplified / 2.0
        events.append(_lib.ev.GaussianDpEvent(s))
    for s, count in key:
        if sampling == "poisson":
            ev = _lib.ev.PoissonSampledDpEvent(q, _lib.ev.GaussianDpEvent(s))
        else:  # "fixed": replace-one sensitivity is 2C, so the library's multiplier is σ/2
            b, n = _wor_fraction(q)
            ev = _lib.ev.SampledWithoutReplacementDpEvent(n, b, _lib.ev.GaussianDpEvent(s / 2.0))
        events.append(_lib.ev.SelfComposedDpEvent(ev, count))
    if not events:
        return _lib.ev.NoOpDpEvent()
    return events[0] if len(events) == 1 else _lib.ev.ComposedDpEvent(events)


def make_event(releases, sample_rate, *, sampling="poisson") -> dp_accounting.DpEvent:
    """The ``dp_accounting`` event for ``releases`` (see :func:`epsilon_from_releases`).

    Poisson: ``SelfComposed(PoissonSampled(q, Gaussian(σ_eff)), count)`` per step type, for
    add/remove accountants.  Fixed: ``SelfComposed(SampledWithoutReplacement(n, b,
    Gaussian(σ_eff/2)), count)`` for a REPLACE_ONE RDP accountant (sensitivity 2C under
    replace-one).  Releases costing nothing give ``NoOpDpEvent``.
    """
    q = _check_rate(sample_rate)
    _no_cyclic(sampling, "make_event")
    if sampling == "replacement":
        _check_options("rdp", sampling)
    return _event(_normalize(releases), q, sampling)


def _no_cyclic(sampling, what: str) -> None:
    """Refuse cyclic sampling where whole-run step counts cannot be mapped to groups."""
    kind, k = _sampling(sampling)
    if kind == CYCLIC:
        raise ValueError(
            f"{what} takes whole-run step counts, which do not say which group's steps they are; "
            f"for sampling={sampling!r} pass the step types one example's group sees, with "
            f"sampling='poisson' and sample_rate=q_k=min(1, {k}*b/n) (dpsim.sampling.cyclic_rate), "
            f"or use accounting.epsilon / privacy_record")


# ---------------------------------------------------------------------------------------------
# Accountants


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
#: construction costs about 4 µs and 100 bytes per point, so this keeps a call near 10 s and well
#: under 1 GiB; finer refinements beyond it are skipped (the coarser ε is a valid upper bound).
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
    """Collect, instead of warning, the :class:`AccountingNote` texts of the ε computed inside
    the block (thread- and task-safe: a context variable, not the warnings filters)::

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


# ---------------------------------------------------------------------------------------------
# Public API


def epsilon_from_releases(releases, sample_rate, delta, *, accountant="pld",
                          sampling="poisson", unamplified=()) -> float:
    """ε at ``delta`` for a run made of several step types.

    ``releases`` is a sequence of ``(noise_multipliers, count)``: ``count`` steps, each drawing a
    batch with ``sampling`` at rate ``sample_rate`` and making one Gaussian release per entry of
    ``noise_multipliers`` (a float, or a tuple for several releases on the *same* batch; each
    release has ℓ2 sensitivity 1 in units of the clip norm).  A step type costs as one release
    with ``σ_eff = (Σ σ_i^{-2})^{-1/2}``; step types compose.  Example: a variant that makes a
    second release on every k-th step's batch is ``[((σ,), T - T_k), ((σ, σ2), T_k)]``.

    Returns ``inf`` if any counted step has σ_eff = 0, and 0 for no (costly) steps.  Which
    accountant and neighbouring relation apply is in the module docstring.

    ``unamplified``: noise multipliers of whole-run Gaussian mechanisms composed with the rest
    *without* amplification by sampling (correlated noise: a DP-MF run with unrestricted
    participation is one Gaussian mechanism of noise multiplier ``σ·sens(M)/worst_sens(M)``, see
    :mod:`dpsim.privacy.mf`); they combine as ``(Σ σ_i^{-2})^{-1/2}``.
    """
    q = _check_rate(sample_rate)
    d = _check_delta(delta)
    _check_options(accountant, sampling)
    _no_cyclic(sampling, "epsilon_from_releases")
    un = effective_noise_multiplier(tuple(unamplified)) if len(unamplified) else math.inf
    return _epsilon_key(_normalize(releases), q, d, accountant, sampling, un)


def epsilon(noise_multiplier, sample_rate, steps, delta, *, accountant="pld",
            releases_per_step=1, sampling="poisson") -> float:
    """ε at ``delta`` after ``steps`` steps of the subsampled Gaussian mechanism.

    Each step draws a batch at rate ``sample_rate`` and makes ``releases_per_step`` Gaussian
    releases with noise multiplier σ from that same batch — exactly one release with σ/√r (see
    module docstring).  ``accountant``: ``"pld"`` (default, tight) or ``"rdp"``; ``sampling``:
    ``"poisson"`` (add/remove), ``"fixed"`` (RDP only, replace-one), ``"replacement"`` (error),
    ``"cyclic_poisson:<k>"`` (add/remove: each example sees ``⌈steps/k⌉`` steps at rate
    ``min(1, k·sample_rate)``; also the amplified ε of banded DP-MF with bandwidth ≤ k).
    """
    sigma = _check_noise(noise_multiplier)
    q = _check_rate(sample_rate)
    steps = _check_count(steps, "steps")
    d = _check_delta(delta)
    r = _check_releases_per_step(releases_per_step)
    _check_options(accountant, sampling)
    q, steps, sampling = _per_example(q, steps, sampling)
    # r equal releases on one batch are one release with σ/√r (effective_noise_multiplier's own
    # expression, so the same float and cache key as epsilon_from_releases), without an r-tuple
    key = _normalize([(_equal_releases(sigma, r), steps)])
    return _epsilon_key(key, q, d, accountant, sampling, math.inf)  # same cache key as epsilon_from_releases


def _equal_releases(sigma: float, r: int) -> tuple:
    """``(σ_eff,)`` of ``r`` equal releases with σ: ``σ/√r`` (0 and ∞ stay as they are)."""
    if r == 1 or sigma == 0.0 or math.isinf(sigma):
        return (sigma,)
    return (sigma / math.sqrt(r),)


def _per_example(q: float, steps: int, sampling):
    """What one example sees: cyclic Poisson sampling with ``k`` groups is ``⌈steps/k⌉`` Poisson
    steps at rate ``k·q`` (at most 1); the other samplers are unchanged."""
    kind, k = _sampling(sampling)
    if kind != CYCLIC:
        return q, steps, sampling
    check_cyclic_rate(q, k)
    return cyclic_rate(q, k), -(-steps // k), "poisson"


def check_cyclic_rate(q: float, k: int) -> None:
    """Refuse cyclic Poisson sampling whose groups cannot supply the nominal batch: ``k·q > 1``
    (the sampler needs ``b·k ≤ n``; :func:`dpsim.sampling.check_sampling`)."""
    if k * q > 1.0 + 1e-12:
        raise ValueError(f"sampling='cyclic_poisson:{k}' at sample_rate={q:g} is impossible: "
                         f"each of the {k} groups would need a rate k*sample_rate = {k * q:g} > 1 "
                         f"(batch_size*k must be <= n); use k <= {max(1, int(1.0 / q + 1e-9))}")


def _check_releases_per_step(r) -> int:
    ok = (isinstance(r, numbers.Integral) and not isinstance(r, bool)) or (
        isinstance(r, float) and r.is_integer())
    if not ok or int(r) < 1:
        raise ValueError(f"releases_per_step must be an integer >= 1, "
                         f"got releases_per_step={r!r}")
    return int(r)


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


def rdp_curve(releases, sample_rate, *, sampling="poisson") -> tuple[np.ndarray, np.ndarray]:
    """``(orders, rdp)``: the composed RDP curve of ``releases`` as the ``"rdp"`` accountant sees it.

    ``orders`` is :data:`RDP_ORDERS` (Poisson, add/remove) or :data:`RDP_ORDERS_FIXED` (fixed,
    replace-one); ``rdp[i]`` is the Rényi divergence bound at ``orders[i]`` (``inf`` where the
    library excludes an order).  Useful for converting with another rule or to zCDP.
    """
    q = _check_rate(sample_rate)
    _check_options("rdp", sampling)
    _no_cyclic(sampling, "rdp_curve")
    key = _normalize(releases)
    acc = _rdp_accountant(sampling)
    if any(s == 0.0 for s, _ in key):
        return acc.orders, np.full(len(acc.orders), np.inf)
    with _quiet_absl():
        _compose(acc, _event(key, q, sampling))
    return acc.orders, acc.rdp


# ---------------------------------------------------------------------------------------------
# Runs: privacy events -> record -> epsilon

RECORD_FORMAT = "dpsim-privacy-2"


def _state_at(state, path):
    for key in path:
        state = state[key]
    return state


def _per_trial(sigma, i):
    return sigma if isinstance(sigma, float) else sigma[i]


def _describe(event, steps: int) -> dict:
    from .privacy import events as ev

    out = {"type": type(event).__name__, "piece": "/".join(map(str, event.path))}
    if isinstance(event, (ev.GaussianRelease, ev.CorrelatedRelease)):
        s = event.noise_multiplier
        out.update(noise_multiplier=s if isinstance(s, float) else list(s),
                   sensitivity=event.sensitivity, steps=int(ev.schedule_mask(event, steps).sum()))
        if isinstance(event, ev.CorrelatedRelease):
            out["strategy"] = event.strategy
    elif isinstance(event, ev.NonPrivate):
        out["reason"] = event.reason
    return out


def privacy_record(events, final_state, *, steps: int, sample_rate: float, sampling: str,
                   trials: int) -> dict:
    """Resolve the privacy ``events`` of a finished run into a JSON-able record.

    ``final_state``: the optimizer's state after the last step (state-dependent events, e.g. a
    :class:`~dpsim.privacy.events.TcdpBudget`, read their piece's state at ``event.path``).  Keys:
    ``private``; ``events`` (each event described; a correlated release also says how it is
    ``accounting``); for Gaussian releases ``sampling``, ``adjacency``, ``participation``,
    ``sample_rate`` (the nominal ``b/n``), ``steps``, ``step_types`` (per trial ``[[σ of each
    release on the step], count]`` over the whole run, amplified correlated releases included)
    and, with cyclic sampling, ``group_rate`` and ``group_step_types`` (per trial, the step types
    of each non-dominated group); with correlated noise ``correlated_accounting``
    (``"amplified"``, ``"unamplified"`` or ``"mixed"``), ``unamplified`` (per trial, the
    whole-run noise multipliers of the unamplified ones) and ``note``; for a ctCDP budget its
    fields (``kind="ctcdp"``, ``rho_spent``, ``steps_taken``, ``rho_tot``, ``a``, ``omega_a``,
    ...).  The module docstring says when correlated noise is amplified.
    """
    from .privacy import events as ev
    from .privacy.mf import noise_stream

    events = tuple(events)
    if not events:
        raise ValueError("no privacy event declared: nothing to account (an optimizer must declare "
                         "its releases or NonPrivate)")
    rec = {"format": RECORD_FORMAT, "events": [_describe(e, steps) for e in events]}
    reasons = [e.reason for e in events if isinstance(e, ev.NonPrivate)]
    if reasons:
        rec.update(private=False, note="; ".join(dict.fromkeys(reasons)))
        return rec
    budgets = [e for e in events if isinstance(e, ev.TcdpBudget)]
    if budgets:
        if len(budgets) != len(events):
            raise UnsupportedAccountingError("a ctCDP budget composed with other releases is not supported")
        if len(budgets) > 1:
            raise UnsupportedAccountingError("more than one ctCDP budget in one optimizer is not supported")
        b = budgets[0]
        rec.update(b.budget)
        rec.update(b.spend(_state_at(final_state, b.path)))
        rec.update(private=True, sampling=sampling, sample_rate=float(sample_rate), steps=int(steps))
        if rec.get("planned_steps") is None:
            rec["planned_steps"] = int(steps)
        return rec
    kind, k = _sampling(sampling)
    groups = k if kind == CYCLIC else (1 if kind == "poisson" else None)  # None: no amplification
    releases = [e for e in events if isinstance(e, ev.GaussianRelease)]
    correlated = [e for e in events if isinstance(e, ev.CorrelatedRelease)]
    unamplified = [[] for _ in range(trials)]
    how = []
    for idx, e in enumerate(events):
        if not isinstance(e, ev.CorrelatedRelease):
            continue
        mask = ev.schedule_mask(e, steps) if steps else np.zeros(0, bool)
        if not np.any(mask):
            rec["events"][idx]["accounting"] = "no release"
            continue
        st = noise_stream(e.strategy, steps)
        label = _correlated_verdict(st, groups, kind, k, bool(np.all(mask)))
        rec["events"][idx]["accounting"] = label
        rec["events"][idx]["bandwidth"] = st.bandwidth
        if label.startswith("amplified"):
            releases.append(e)  # one subsampled Gaussian at σ per step of the example's group
            how.append("amplified")
            continue
        how.append("unamplified")
        for i in range(trials):
            unamplified[i].append(st.equivalent_noise_multiplier(_per_trial(e.noise_multiplier, i),
                                                                 participation="any"))
    masks = [ev.schedule_mask(e, steps) for e in releases]
    folded = bool("unamplified" in how and any(np.any(m) for m in masks))
    if folded:
        # An unamplified correlated release shares its batches with subsampled ones.  Its output
        # may reveal the participation pattern (its ε can be large), and amplification of the
        # others needs that pattern hidden, so composing their amplified ε would not be sound.
        # For every fixed batch sequence each release is a plain Gaussian mechanism, and a mixture
        # over batch sequences keeps the worst-case bound (joint convexity), so the whole run is
        # accounted without amplification: a release with σ on m steps is one Gaussian with
        # multiplier σ/√m (m compositions of sensitivity-C queries at noise σC).
        for j, e in enumerate(releases):
            m = int(np.count_nonzero(masks[j]))
            if not m:
                continue
            label = ("unamplified (shares its batches with an unamplified correlated release, "
                     "so no release of the run is amplified)")
            for idx, e2 in enumerate(events):
                if e2 is e:
                    rec["events"][idx]["accounting"] = label
            for i in range(trials):
                unamplified[i].append(_per_trial(e.noise_multiplier, i) / math.sqrt(m))
        how = ["unamplified" for _ in how]
        releases, masks = [], []
    step_mat = np.stack(masks, axis=1) if masks and steps else np.zeros((steps, 0), bool)
    if all(isinstance(e.noise_multiplier, float) for e in releases):
        sig = [tuple(e.noise_multiplier for e in releases)] * trials  # shared by every trial
    else:
        sig = [tuple(_per_trial(e.noise_multiplier, i) for e in releases) for i in range(trials)]
    patterns = _step_patterns(step_mat)  # the schedule is the same for every trial
    rec.update(private=True, sampling=sampling, adjacency=adjacency(sampling),
               participation=_participation(kind, k, sample_rate, steps),
               sample_rate=sample_rate, steps=steps,
               step_types=_per_sigmas(sig, lambda s_i: _types_of(patterns, s_i)))
    if kind == CYCLIC:
        per_group = _group_patterns(step_mat, k)
        rec["group_rate"] = cyclic_rate(sample_rate, k)
        rec["group_step_types"] = _per_sigmas(sig, lambda s_i: [_types_of(pg, s_i) for pg in per_group])
    if correlated:
        rec["unamplified"] = unamplified
        verdicts = set(how)
        rec["correlated_accounting"] = (verdicts.pop() if len(verdicts) == 1 else
                                        "mixed" if verdicts else "no release")
        if "unamplified" in how:
            rec["note"] = ("correlated noise (DP-MF) accounted UNAMPLIFIED: one Gaussian mechanism "
                           "per release sequence with noise multiplier sigma*sens(M)/worst_sens(M), "
                           "without amplification by sampling (see events[].accounting)")
            if folded:
                rec["note"] += ("; the i.i.d. releases sharing its batches are accounted without "
                                "amplification too (an unamplified release may reveal who took part)")
        elif how:
            rec["note"] = ("correlated noise (DP-MF) accounted AMPLIFIED: banded strategy under "
                           f"{'cyclic Poisson' if kind == CYCLIC else 'Poisson'} sampling reduces to "
                           "DP-SGD on each example's group (Choquette-Choo et al. 2023)")
    return rec


def _correlated_verdict(stream, groups, kind: str, k, every_step: bool) -> str:
    """How a correlated release is accounted (module docstring): ``"amplified (...)"`` or
    ``"unamplified (reason)"``."""
    w = stream.bandwidth
    if groups is None:
        return f"unamplified ({kind} sampling: no amplification for correlated noise)"
    scheme = f"cyclic_poisson:{k}" if kind == CYCLIC else "poisson"
    if not every_step:
        return ("unamplified (the release is restricted to some steps, so its noise stream does "
                "not follow the step index)")
    if stream.amplifiable(groups):
        return f"amplified (bandwidth {w} <= {groups} groups of {scheme})"
    return (f"unamplified (bandwidth {w} > {groups} group{'s' if groups > 1 else ''} of {scheme}; "
            f"amplification needs sampling='cyclic_poisson:<k>' with k >= {w})")


def _participation(kind: str, k, q: float, steps: int) -> dict:
    """What the accountant assumes about how often, and how far apart, an example takes part."""
    if kind == CYCLIC:
        return {"scheme": "cyclic Poisson", "groups": k, "rate": cyclic_rate(q, k),
                "max_participations": -(-int(steps) // k), "min_separation": k,
                "rule": "example i in group i mod k; step t samples group (t-1) mod k"}
    if kind == "poisson":
        return {"scheme": "Poisson", "groups": 1, "rate": float(q),
                "max_participations": int(steps), "min_separation": 1}
    return {"scheme": kind, "rate": float(q)}


def _group_patterns(step_mat: np.ndarray, k: int) -> list:
    """For each group of cyclic sampling (step index ``i`` in group ``i mod k``), its release
    patterns and counts, keeping only groups not dominated by another (same patterns, each count
    at most the other's: ε is monotone in every count)."""
    out = []
    for g in range(min(k, step_mat.shape[0])):
        sub = step_mat[g::k]
        if sub.shape[1]:
            out.append(_row_counts(sub))
        else:
            out.append({})
    distinct = []
    for a in out:
        if a not in distinct:
            distinct.append(a)
    keep = [a for a in distinct
            if not any(b != a and all(b.get(p, 0) >= c for p, c in a.items()) for b in distinct)]
    return keep or [{}]


def _types_of(patterns: dict, sig) -> list:
    groups: dict[tuple, int] = {}
    for pat, c in patterns.items():
        key = tuple(s for s, a in zip(sig, pat) if a)
        if key:
            groups[key] = groups.get(key, 0) + int(c)
    return [[list(key), c] for key, c in groups.items()]


def _per_sigmas(sig: list, make) -> list:
    """``[make(s_i) for s_i in sig]``, computed once per distinct tuple of σ's (trials with the
    same σ's share the value: it is read, never modified)."""
    done: dict = {}
    out = []
    for s_i in sig:
        v = done.get(s_i)
        if v is None:
            v = done[s_i] = make(s_i)
        out.append(v)
    return out


def _step_patterns(step_mat: np.ndarray) -> dict:
    """``{release pattern: number of steps}`` of a ``(steps, releases)`` schedule (``{}`` when
    empty); :func:`_types_of` turns it, with one trial's σ's, into that trial's whole-run step
    types ``[[σ's of the releases on the step], count]``."""
    if not step_mat.shape[0] or not step_mat.shape[1]:
        return {}
    return _row_counts(step_mat)


def _row_counts(mat: np.ndarray) -> dict:
    """``{row as a tuple of bools: count}`` of a boolean matrix.  A uniform schedule (every row
    the same: every release on every step, the common case) is counted in one vectorized
    comparison instead of ``np.unique``'s sort of the rows (O(T log T): 36 ms at T = 1e5)."""
    first = mat[0]
    if bool(np.all(mat == first)):
        return {tuple(bool(a) for a in first): int(mat.shape[0])}
    r = mat.shape[1]
    if r <= 20:
        # each row as an integer, its first column the most significant bit: ascending codes are
        # np.unique(mat, axis=0)'s lexicographic order of the rows (the same dict, bit for bit),
        # counted in O(T) by bincount instead of a sort of the rows
        codes = mat.astype(np.int64) @ (np.int64(1) << np.arange(r - 1, -1, -1, dtype=np.int64))
        counts = np.bincount(codes, minlength=1 << r)
        return {tuple(bool((int(c) >> (r - 1 - j)) & 1) for j in range(r)): int(counts[c])
                for c in np.flatnonzero(counts)}
    pats, counts = np.unique(mat, axis=0, return_counts=True)
    return {tuple(bool(a) for a in p): int(c) for p, c in zip(pats, counts)}


def _tcdp_epsilon(record: dict, delta: float):
    """Each trial is ``(ρ_spent, ω_a)``-tCDP ([L2P] Thm B.1 with Lemma A.2); Theorem A.1 gives ε at
    the requested δ (any δ ∈ (0, 1)); ``ρ_spent = 0`` gives 0."""
    from .privacy import tcdp

    rho = np.asarray(record["rho_spent"], dtype=float)
    om = np.broadcast_to(np.asarray(record["omega_a"], dtype=float), rho.shape)
    return np.asarray(tcdp.tcdp_to_dp(rho, om, float(delta)), dtype=float).reshape(rho.shape)


def epsilon_of_record(record: dict, delta: float, *, accountant: str = "pld"):
    """ε at ``delta`` of a run's privacy record (:func:`privacy_record`).

    ``inf`` for a non-private run.  Returns a float when every trial spent the same, else an
    ``(R,)`` array (per-trial noise multipliers or budgets).  A ctCDP record converts each trial's
    spend with [L2P] Thm A.1 (``accountant`` does not apply).
    """
    d = _check_delta(delta)
    if not record.get("private"):
        return math.inf
    if record.get("kind") == "ctcdp":
        out = _tcdp_epsilon(record, d)
    else:
        types = record["step_types"]
        unamp = record.get("unamplified")
        sampling, q = record["sampling"], record["sample_rate"]
        cyclic = "group_step_types" in record  # cyclic Poisson: each example sees its group's steps
        groups = record["group_step_types"] if cyclic else types
        if cyclic:
            q, sampling = record["group_rate"], "poisson"
        out = np.empty(len(types))
        frozen: dict = {}  # id of a trial's (shared) entry -> its hashable form
        memo: dict = {}    # trials with the same step types and unamplified σ's have the same ε
        for i, g in enumerate(groups):
            per_group = frozen.get(id(g))
            if per_group is None:
                per_group = frozen[id(g)] = tuple(
                    tuple((tuple(s), c) for s, c in st) for st in (g if cyclic else (g,)))
            un = tuple(unamp[i]) if unamp else ()
            key = (per_group, un)
            if key not in memo:
                memo[key] = max(
                    0.0 if not st and not un else
                    epsilon_from_releases(list(st), q, d, accountant=accountant,
                                          sampling=sampling, unamplified=un)
                    for st in per_group)
            out[i] = memo[key]
    if out.size and np.all(out == out.flat[0]):
        return float(out.flat[0])
    return out
