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
from typing import Iterable

import numpy as np
import dp_accounting
from dp_accounting import dp_event as _ev
from dp_accounting.pld import pld_privacy_accountant as _pld
from dp_accounting.rdp import rdp_privacy_accountant as _rdp

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
#: The neighbouring relation behind the ε of each sampler (module docstring).
ADJACENCY = {"poisson": "add/remove one example", "fixed": "replace one example (n public)",
             "replacement": "none (no accountant supports with-replacement sampling)"}

_NeighborRel = dp_accounting.NeighboringRelation


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
    sampling is add/remove with the groups fixed by a public rule)."""
    kind, k = _sampling(sampling)
    if kind == CYCLIC:
        return f"add/remove one example (in one of {k} fixed groups)"
    return ADJACENCY[kind]


def _grid(*parts) -> tuple[float, ...]:
    arr = np.unique(np.round(np.concatenate([np.asarray(p, dtype=float) for p in parts]), 10))
    return tuple(float(a) for a in arr)


#: Orders for ``accountant="rdp"`` with Poisson sampling (a superset of the library default).
RDP_ORDERS: tuple[float, ...] = _grid(
    _rdp.DEFAULT_RDP_ORDERS,
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
    return float(delta)


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
        events.append(_ev.GaussianDpEvent(s))
    for s, count in key:
        if sampling == "poisson":
            ev = _ev.PoissonSampledDpEvent(q, _ev.GaussianDpEvent(s))
        else:  # "fixed": replace-one sensitivity is 2C, so the library's multiplier is σ/2
            b, n = _wor_fraction(q)
            ev = _ev.SampledWithoutReplacementDpEvent(n, b, _ev.GaussianDpEvent(s / 2.0))
        events.append(_ev.SelfComposedDpEvent(ev, count))
    if not events:
        return _ev.NoOpDpEvent()
    return events[0] if len(events) == 1 else _ev.ComposedDpEvent(events)


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
        return "failed to converge" not in str(record.msg)


class _quiet_absl:
    def __enter__(self):
        self._filter = _DropNonConvergence()
        logging.getLogger("absl").addFilter(self._filter)

    def __exit__(self, *exc):
        logging.getLogger("absl").removeFilter(self._filter)
        return False


def _rdp_accountant(sampling: str) -> _rdp.RdpAccountant:
    if sampling == "poisson":
        return _rdp.RdpAccountant(RDP_ORDERS, _NeighborRel.ADD_OR_REMOVE_ONE)
    return _rdp.RdpAccountant(RDP_ORDERS_FIXED, _NeighborRel.REPLACE_ONE)


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
    for i, (s, count) in enumerate(parts):
        W, mu, sd = _loss_moments(s, 1.0 if i >= len(key) else q)
        total += W if count == 1 else W + count * mu + 12 * math.sqrt(count) * sd  # 1: no composition
    return 1.5 * total


def _pld_epsilon(event, delta: float, points: float = 0.0, describe=None) -> float:
    prev = None
    eps = math.inf
    spent = 0.0
    for i, h in enumerate(PLD_INTERVALS):
        spent += points / h
        if spent > PLD_MAX_POINTS:
            if i == 0:
                raise AccountingTooExpensiveError(
                    f"the PLD accountant would need about {points / h:.3g} grid points (limit "
                    f"{PLD_MAX_POINTS:.3g}: about 10 s and 1 GiB) for {describe()}; the noise "
                    f"multiplier is too small or the steps too many for PLD: use "
                    f"accountant='rdp' (fast, an upper bound)")
            break  # the coarser value already computed is a valid upper bound
        acc = _pld.PLDAccountant(_NeighborRel.ADD_OR_REMOVE_ONE, value_discretization_interval=h)
        eps = float(_compose(acc, event).get_epsilon(delta))
        if prev is not None and abs(prev - eps) <= PLD_RTOL * eps + 1e-12:
            break
        prev = eps
    return eps


@functools.lru_cache(maxsize=4096)
def _epsilon_key(key, q: float, delta: float, accountant: str, sampling: str,
                 unamplified: float = math.inf) -> float:
    if unamplified == 0.0:
        return math.inf
    if not key and not math.isfinite(unamplified):
        return 0.0
    if any(s == 0.0 for s, _ in key):
        return math.inf
    event = _event(key, q, sampling, unamplified)
    with _quiet_absl():
        if accountant == "pld":
            def describe():
                sig = ", ".join(f"noise_multiplier={s:.4g} for {c} steps" for s, c in key)
                un = f", unamplified noise_multiplier={unamplified:.4g}" if math.isfinite(unamplified) else ""
                return f"{sig}{un} at sample_rate={q:g}"
            return _pld_epsilon(event, delta, _pld_points(key, q, unamplified), describe)
        return float(_compose(_rdp_accountant(sampling), event).get_epsilon(delta))


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
    key = _normalize([((sigma,) * r, steps)])
    return _epsilon_key(key, q, d, accountant, sampling, math.inf)  # same cache key as epsilon_from_releases


def _per_example(q: float, steps: int, sampling):
    """What one example sees: cyclic Poisson sampling with ``k`` groups is ``⌈steps/k⌉`` Poisson
    steps at rate ``min(1, k·q)``; the other samplers are unchanged."""
    kind, k = _sampling(sampling)
    if kind != CYCLIC:
        return q, steps, sampling
    return cyclic_rate(q, k), -(-steps // k), "poisson"


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
    return math.sqrt(r) * _calibrate(float(epsilon), d, q, steps, accountant, sampling)


@functools.lru_cache(maxsize=1024)
def _calibrate(target: float, delta: float, q: float, steps: int, accountant: str,
               sampling: str) -> float:
    def eps_at(s: float) -> float:
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
            if _pld_points(((s, steps),), q, math.inf) / PLD_INTERVALS[0] > PLD_MAX_POINTS:
                raise AccountingTooExpensiveError(f"noise_multiplier={s:g}")
            a = _pld.PLDAccountant(_NeighborRel.ADD_OR_REMOVE_ONE,
                                   value_discretization_interval=PLD_INTERVALS[0])
            return float(_compose(a, event_for(s)).get_epsilon(delta))

        try:
            guess = _solve(eps_coarse, target, guess, factor, 1e-3, describe)
            factor = 1.01
        except _Unattainable:
            # the coarse grid cannot resolve a tiny ε (it bounds ε below by about its interval):
            # bracket with the refined ε instead
            guess, factor = 1.0, 2.0
    try:
        return _solve(eps_at, target, guess, factor, _SIGMA_RTOL, describe)
    except _Unattainable as exc:
        raise ValueError(str(exc)) from None


class _Unattainable(ValueError):
    pass


def _solve_eval(eps_at, s: float) -> float:
    """ε at σ, with a PLD computation too large to run counted as ε = ∞ (σ too small)."""
    try:
        return eps_at(s)
    except AccountingTooExpensiveError:
        return math.inf


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


def _solve(eps_at, target: float, guess: float, factor: float, rtol: float, describe) -> float:
    """Smallest σ (to relative ``rtol``) with ``eps_at(σ) <= target``; ``eps_at`` decreasing.

    Brackets geometrically from ``guess`` (the step factor squares each time), then runs Brent's
    method on log σ, then bisects until ``σ_hi/σ_lo <= 1 + rtol``; returns ``σ_hi``, which always
    satisfies the target.
    """
    from scipy.optimize import brentq

    values: dict[float, float] = {}

    def ev(s: float) -> float:
        if s not in values:
            with _quiet_absl():
                values[s] = _solve_eval(eps_at, s)
        return values[s]

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
            pats, counts = np.unique(sub, axis=0, return_counts=True)
            out.append({tuple(bool(a) for a in p): int(c) for p, c in zip(pats, counts)})
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
    pats, counts = np.unique(step_mat, axis=0, return_counts=True)
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
