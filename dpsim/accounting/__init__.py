"""Privacy accounting for subsampled Gaussian releases, built on Google's ``dp_accounting``.

This package computes (ε, δ) for DP-SGD-style training and calibrates the noise multiplier for a
target ε.  It does no privacy arithmetic of its own: it turns the run's releases into a
``dp_accounting`` :class:`~dp_accounting.DpEvent` (:func:`make_event`) and asks one of the
library's accountants for ε.  The one piece of reasoning done here — merging the releases that
share a batch — is stated in the contract below together with its source.

Layout
------
The package is split along the steps of that computation; every name is importable from
``dpsim.accounting`` itself:

* :mod:`~dpsim.accounting.options` — samplers, accountants, neighbouring relations, the numerical
  settings below, the errors, the checks of the options, ``dp_accounting`` imported on first use;
* :mod:`~dpsim.accounting.releases` — step types → ``dp_accounting`` events;
* :mod:`~dpsim.accounting.accountants` — the PLD and RDP ε, their limits and notes;
* :mod:`~dpsim.accounting.composition` — ε of a run of step types, :func:`epsilon`, the RDP curve;
* :mod:`~dpsim.accounting.calibration` — the noise multiplier for a target ε;
* :mod:`~dpsim.accounting.records` — a run's events → its privacy record → ε.

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
cyclic_poisson:k   either          Cyclic Poisson sampling (:mod:`dpsim.sampling`), add/remove:
                                   an example belongs to one of ``k`` fixed groups and can
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
  under-reports.  A single ``epsilon`` call therefore costs 2–5 PLD constructions.

Results are cached (``functools.lru_cache`` on the normalized arguments), since a simulator asks
for the same ε many times.

Runs: events → record → ε
-------------------------
This package is the only consumer of the privacy events optimizers declare
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

Examples
--------
ε of 40 steps of the subsampled Gaussian mechanism (σ = 1.2, sampling rate 25/500) at δ = 1e-5:

>>> from dpsim import accounting
>>> round(accounting.epsilon(1.2, 25 / 500, 40, 1e-5), 2)
1.67
"""

from __future__ import annotations

from .options import (ACCOUNTANTS, AccountingNote, ADJACENCY, adjacency, _check_count,
                      _check_delta, _check_noise, _check_noise_range, _check_options, _check_rate,
                      check_release_noise, EPSILON_SCOPE, EPSILON_SCOPE_SHORT, _grid, _is_real,
                      _Lib, _lib, LIBRARY_DEFAULT_RDP_ORDERS, MIN_DELTA, NOISE_RANGE,
                      PLD_INTERVALS, PLD_RTOL, PLD_TAIL_MASS, RDP_ORDERS, RDP_ORDERS_FIXED,
                      SAMPLERS, _sampling, _SIGMA_MAX, _SIGMA_MIN, _SIGMA_RTOL,
                      UnsupportedAccountingError)  # noqa: F401
from .releases import (effective_noise_multiplier, _event, make_event, _no_cyclic, _normalize,
                       _wor_fraction)  # noqa: F401
from .accountants import (AccountingTooExpensiveError, collect_notes, _compose,
                          _DropNonConvergence, _epsilon_key, _epsilon_noted, _gaussian_epsilon,
                          _loss_moments, _note, _NOTES, _pld_epsilon, PLD_MAX_POINTS, _pld_points,
                          _quiet_absl, _QUIET_NOTES, _rdp_accountant, _RDP_FOR_PLD)  # noqa: F401
from .composition import (check_cyclic_rate, _check_releases_per_step, epsilon,
                          epsilon_from_releases, _equal_releases, _per_example, rdp_curve)  # noqa: F401
from .calibration import (_bracket_and_refine, _calibrate, noise_multiplier, _solve, _solve_eval,
                          solve_noise_multiplier, _Unattainable)  # noqa: F401
from .records import (_correlated_verdict, _describe, epsilon_of_record, _group_patterns,
                      _participation, _per_sigmas, _per_trial, privacy_record, RECORD_FORMAT,
                      _row_counts, _state_at, _step_patterns, _tcdp_epsilon, _types_of)  # noqa: F401

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
