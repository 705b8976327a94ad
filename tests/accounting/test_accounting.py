"""Tests for :mod:`dpsim.accounting` against independent oracles.

Oracles (none of them calls ``dp_accounting``):

* **RDP by quadrature** — the Rényi divergence of the Poisson-subsampled Gaussian at order α is
  ``log A_α / (α − 1)`` with ``A_α = E_{z∼μ0}[(μ(z)/μ0(z))^α]``, ``μ0 = N(0, σ²)``,
  ``μ = (1−q)μ0 + qN(1, σ²)`` (Mironov, Talwar & Zhang, "Rényi Differential Privacy of the
  Sampled Gaussian Mechanism", arXiv:1908.10530, §3 — the add/remove worst case).  We integrate
  that definition with ``mpmath.quad`` (Gauss–Legendre, 30 digits) on [−14σ, α + 14σ] split at
  0, ½ and α.  The integrand is N(0,σ²)-shaped near 0 and N(α,σ²)-shaped near α (log-integrand
  ≈ −(z−α)²/(2σ²) + const for large z), so the cut tails are below e^{−98} relative, and
  against tanh-sinh on the whole line at 40 digits the result agrees to < 1e-16: far beyond the
  1e-10 we assert.
* **RDP → (ε, δ)** — the conversion of Canonne, Kamath & Steinke 2020 (arXiv:2004.00010 v4,
  Prop. 12; also Asoodeh et al. 2020, arXiv:2001.05990 eq. 20), the one ``dp_accounting`` uses:
  ``ε = min_α RDP(α) + log(1 − 1/α) − log(δ α)/(α − 1)``; and the classic one of Mironov 2017
  (arXiv:1702.07476 Prop. 3) ``ε = min_α RDP(α) + log(1/δ)/(α − 1)`` used by the moments
  accountant and old TF Privacy, for published numbers.
* **Exact (ε, δ) of one Gaussian release** — Balle & Wang, "Improving the Gaussian Mechanism for
  Differential Privacy: Analytical Calibration and Optimal Denoising", ICML 2018, Thm. 8:
  ``δ(ε) = Φ(−εσ + 1/(2σ)) − e^ε Φ(−εσ − 1/(2σ))``; T releases compose to σ/√T exactly.
* **Exact (ε, δ) of one Poisson-subsampled Gaussian step** — the hockey-stick divergence of the
  pair above in both directions, in closed form (the likelihood ratio is monotone in z).
* **Published values** — Abadi et al., "Deep Learning with Differential Privacy", CCS 2016, §3.1
  and the TF Privacy MNIST tutorial README (both under the classic conversion).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from scipy.optimize import brentq
from scipy.stats import norm

from dpsim import accounting as acc
from dpsim.testing.strategies import privacy_params

DPS = 30


# ---------------------------------------------------------------------------------------------
# Oracles


def rdp_quad(q, sigma, alpha):
    """RDP of the Poisson-subsampled Gaussian at order ``alpha`` by quadrature (mpmath)."""
    with mp.workdps(DPS):
        q, s, a = mp.mpf(q), mp.mpf(sigma), mp.mpf(alpha)
        if q == 1:
            return a / (2 * s * s)

        def integrand(z):
            return mp.npdf(z, 0, s) * ((1 - q) + q * mp.exp((2 * z - 1) / (2 * s * s))) ** a

        pts = sorted({-14 * s, mp.mpf(0), mp.mpf("0.5"), a, a + 14 * s})
        return mp.log(mp.quad(integrand, pts, method="gauss-legendre")) / (a - 1)


def eps_improved(rdp, alpha, delta):
    """Canonne–Kamath–Steinke 2020 Prop. 12 at one order (mpmath)."""
    with mp.workdps(DPS):
        a = mp.mpf(alpha)
        return mp.mpf(rdp) + mp.log1p(-1 / a) - mp.log(mp.mpf(delta) * a) / (a - 1)


def eps_classic(rdp, alpha, delta):
    """Mironov 2017 Prop. 3 / the moments accountant's tail bound at one order."""
    return rdp + math.log(1 / delta) / (alpha - 1)


def integer_min(f, lo=2, hi=64):
    """min over integers in [lo, hi] of a unimodal f (ternary search + final scan; cached)."""
    cache = {}

    def g(k):
        if k not in cache:
            cache[k] = f(k)
        return cache[k]

    while hi - lo > 4:
        m1, m2 = lo + (hi - lo) // 3, hi - (hi - lo) // 3
        if g(m1) <= g(m2):
            hi = m2
        else:
            lo = m1
    k = min(range(lo, hi + 1), key=g)
    return g(k), k


def gaussian_delta(eps, sigma):
    """Balle & Wang 2018 Thm. 8: exact δ(ε) of the Gaussian mechanism, sensitivity 1."""
    return norm.cdf(-eps * sigma + 1 / (2 * sigma)) - math.exp(eps) * norm.cdf(-eps * sigma - 1 / (2 * sigma))


def gaussian_eps(sigma, delta):
    if gaussian_delta(0.0, sigma) <= delta:
        return 0.0
    return brentq(lambda e: gaussian_delta(e, sigma) - delta, 0.0, 500.0, xtol=1e-14, rtol=1e-14)


def subsampled_delta(eps, q, sigma):
    """Exact δ(ε) of one Poisson-subsampled Gaussian step under add/remove (mpmath).

    Remove: P = (1−q)N(0,σ²) + qN(1,σ²) vs Q = N(0,σ²); P/Q > e^ε iff z > z1.
    Add:    P = N(0,σ²) vs Q = (1−q)N(0,σ²) + qN(1,σ²); P/Q > e^ε iff z < z2 (needs e^−ε > 1−q).
    δ = max of the two hockey-stick divergences ∫(P − e^ε Q)_+.
    """
    with mp.workdps(DPS):
        e, q, s = mp.mpf(eps), mp.mpf(q), mp.mpf(sigma)
        sf = lambda x: mp.ncdf(-x)  # noqa: E731
        z1 = s * s * mp.log((mp.exp(e) - 1 + q) / q) + mp.mpf("0.5")
        d_remove = (1 - q) * sf(z1 / s) + q * sf((z1 - 1) / s) - mp.exp(e) * sf(z1 / s)
        d_add = mp.mpf(0)
        if mp.exp(-e) > 1 - q:
            z2 = s * s * mp.log((mp.exp(-e) - 1 + q) / q) + mp.mpf("0.5")
            d_add = mp.ncdf(z2 / s) - mp.exp(e) * ((1 - q) * mp.ncdf(z2 / s) + q * mp.ncdf((z2 - 1) / s))
        return float(max(d_remove, d_add))


def subsampled_eps(q, sigma, delta):
    return brentq(lambda e: subsampled_delta(e, q, sigma) - delta, 0.0, 100.0, xtol=1e-13)


def _idx(orders, alpha):
    i = int(np.argmin(np.abs(np.asarray(orders) - alpha)))
    assert abs(orders[i] - alpha) < 1e-9, f"order {alpha} not in the grid"
    return i


# ---------------------------------------------------------------------------------------------
# 1. RDP accountant vs the quadrature oracle

RDP_CASES = [(0.04, 1.5), (0.01, 4.0), (0.01, 1.1), (0.2, 0.8)]


@pytest.mark.parametrize("q,sigma", RDP_CASES)
def test_rdp_per_order_matches_quadrature(q, sigma):
    orders, rdp = acc.rdp_curve([(sigma, 1)], q)
    # Integer orders: the library's binomial sum is exact; agreement to 1e-10 (quadrature and
    # float64 summation errors are both far below that).
    for a in (2, 3, 5, 8, 13, 32, 64):
        assert rdp[_idx(orders, a)] == pytest.approx(float(rdp_quad(q, sigma, a)), rel=1e-10)
    # Fractional orders: dp_accounting 0.6's series (arXiv:1908.10530 §3.3, `_compute_log_a_frac`)
    # adds |binomial(α, i)| terms although they alternate in sign for i > α, so it returns an
    # upper bound (safe), not the exact value; the *signed* series reproduces the quadrature to
    # 1e-13.  Measured excess over these cases: up to 19% at α = 1.05, 10% at 1.5, 2% at 1.9,
    # 0.5% at 2.5, 3e-5 at 3.95, below 1e-6 from α ≈ 7 on.  Assert the bound and those sizes.
    for a, slack in ((1.05, 0.25), (1.5, 0.12), (1.9, 0.025), (2.5, 6e-3), (3.95, 1e-4),
                     (7.25, 1e-6), (13.75, 1e-6)):
        exact = float(rdp_quad(q, sigma, a))
        got = rdp[_idx(orders, a)]
        if math.isfinite(got):  # the library excludes orders whose series does not converge
            assert exact * (1 - 1e-10) <= got <= exact * (1 + slack)


@pytest.mark.parametrize("q,sigma,steps,delta", [
    (0.04, 1.5, 2250, 1e-5),
    (0.01, 4.0, 10000, 1e-5),
    (0.01, 1.1, 1000, 1e-6),
])
def test_rdp_epsilon_matches_quadrature_oracle(q, sigma, steps, delta):
    # Oracle: quadrature RDP × steps, improved conversion, minimized over the module's order grid
    # (ε(α) is unimodal: ternary search over integers, then every grid order within ±1 of the
    # best integer).  The library is exact at integer orders, so ε ≤ the integer-order oracle;
    # at fractional orders it is an upper bound within 1e-4 for α ≥ 3.9 (see the test above),
    # so the exact grid oracle ≤ ε ≤ grid oracle · (1 + 1e-4).
    def eps_at(a):
        return float(eps_improved(steps * rdp_quad(q, sigma, a), a, delta))

    oracle_int, k = integer_min(eps_at)
    assert k >= 4  # the cases below have optimal orders where the 1e-4 claim holds
    oracle_grid = min(eps_at(a) for a in acc.RDP_ORDERS if k - 1 <= a <= k + 1)
    got = acc.epsilon(sigma, q, steps, delta, accountant="rdp")
    assert got <= oracle_int * (1 + 1e-12)
    assert oracle_grid * (1 - 1e-10) <= got <= oracle_grid * (1 + 1e-4)
    # Composition and conversion in isolation: the composed curve is steps × the one-step curve,
    # and converting it with the oracle's formula reproduces the module's ε to 1e-12.
    orders, rdp_t = acc.rdp_curve([(sigma, steps)], q)
    _, rdp_1 = acc.rdp_curve([(sigma, 1)], q)
    np.testing.assert_allclose(rdp_t, steps * rdp_1, rtol=1e-12)
    conv = min(float(eps_improved(r, a, delta)) for a, r in zip(orders, rdp_t)
               if math.isfinite(r) and a > 1.01)
    assert got == pytest.approx(conv, rel=1e-12)


def test_rdp_orders_are_a_superset_of_library_default():
    from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS

    for a in DEFAULT_RDP_ORDERS:
        _idx(acc.RDP_ORDERS, a)
    assert acc.RDP_ORDERS == tuple(sorted(acc.RDP_ORDERS))


# ---------------------------------------------------------------------------------------------
# 2. Published values


def test_issue_value_7_33():
    # Our issue quoted "σ = 1.5, q = 0.04, δ = 1e-5, 2250 steps ≈ 7.33 under RDP".  Verified:
    # dp_accounting's RdpAccountant with its DEFAULT_RDP_ORDERS and the improved conversion gives
    # 7.3293 (optimal order 3.9); our denser grid gives 7.3285 (order 3.95); the classic
    # conversion would give 8.07 and the PLD accountant gives 6.769.  So 7.33 is the RDP
    # accountant with the Canonne-Kamath-Steinke conversion; the quadrature oracle agrees
    # (test_rdp_epsilon_matches_quadrature_oracle, first case).
    assert round(acc.epsilon(1.5, 0.04, 2250, 1e-5, accountant="rdp"), 2) == 7.33
    assert acc.epsilon(1.5, 0.04, 2250, 1e-5) == pytest.approx(6.769, abs=2e-3)


def _classic_eps(sigma, q, steps, delta, orders):
    grid, rdp = acc.rdp_curve([(sigma, steps)], q)
    return min(eps_classic(rdp[_idx(grid, a)], a, delta) for a in orders)


def test_abadi_2016_moments_accountant():
    # Abadi et al. 2016, §3.1: "with L = 0.01N, σ = 4, δ = 10^-5, and T = 10000, we have
    # ε ≈ 1.26 using the moments accountant".  The moments accountant uses moments λ ≤ 32
    # (orders α = λ + 1 ≤ 33) and the tail bound ε = (α(λ) + log(1/δ))/λ (classic conversion).
    assert round(_classic_eps(4.0, 0.01, 10000, 1e-5, range(2, 34)), 2) == 1.26
    # The module's (improved, denser) RDP value can only be lower, PLD lower still.
    assert acc.epsilon(4.0, 0.01, 10000, 1e-5, accountant="rdp") < 1.26
    assert acc.epsilon(4.0, 0.01, 10000, 1e-5) < acc.epsilon(4.0, 0.01, 10000, 1e-5, accountant="rdp")


@pytest.mark.parametrize("sigma,epochs,printed", [(1.12, 60, 2.92), (1.12, 1, 1.00), (1.12, 2, 1.04),
                                                  (1.2, 10, 1.20)])
def test_tf_privacy_mnist_tutorial(sigma, epochs, printed):
    # tensorflow/privacy tutorials/README.md: MNIST (n = 60000), batch 256, δ = 1e-5; expected
    # output "epsilon is: 1.00 / 1.04 / 2.92" after 1 / 2 / 60 epochs at σ = 1.12, and the table
    # row σ = 1.2, 10 epochs → 1.20.  mnist_dpsgd_tutorial.py: steps = epoch · (60000 // 256),
    # orders [1.1, 1.2, ..., 10.9] + range(12, 64), classic conversion (get_privacy_spent of that
    # era: eps = rdp − log(δ)/(α − 1)).  (The table row σ = 0.6, 30 epochs → 9.74 is not
    # asserted: we get 9.754, a difference in the third digit we cannot attribute to a source.)
    orders = [1 + x / 10 for x in range(1, 100)] + list(range(12, 64))
    steps = epochs * (60000 // 256)
    assert round(_classic_eps(sigma, 256 / 60000, steps, 1e-5, orders), 2) == printed


# ---------------------------------------------------------------------------------------------
# 3. PLD accountant: exact single-release values, and RDP as an upper bound


@pytest.mark.parametrize("sigma,steps,delta", [(0.8, 1, 1e-5), (2.0, 1, 1e-6), (3.0, 16, 1e-5),
                                               (1.0, 1, 1e-3)])
def test_pld_full_batch_equals_analytic_gaussian(sigma, steps, delta):
    # q = 1: T releases of σ are one Gaussian of σ/√T (exact); Balle & Wang 2018 Thm. 8 gives its
    # exact ε.  The PLD value is a pessimistic (upper) estimate refined to PLD_RTOL.
    exact = gaussian_eps(sigma / math.sqrt(steps), delta)
    got = acc.epsilon(sigma, 1.0, steps, delta)
    assert exact * (1 - 1e-9) <= got <= exact * (1 + 2 * acc.PLD_RTOL) + 1e-6


@pytest.mark.parametrize("q,sigma,delta", [(0.1, 1.0, 1e-5), (0.01, 0.7, 1e-5), (0.3, 2.0, 1e-4)])
def test_pld_single_subsampled_step_is_exact(q, sigma, delta):
    exact = subsampled_eps(q, sigma, delta)
    got = acc.epsilon(sigma, q, 1, delta)
    assert exact * (1 - 1e-9) <= got <= exact * (1 + 2 * acc.PLD_RTOL) + 1e-6


@pytest.mark.parametrize("sigma,q,steps,delta", [
    (1.5, 0.04, 2250, 1e-5), (1.1, 0.01, 1000, 1e-5), (4.0, 0.01, 10000, 1e-5),
    (0.8, 0.1, 200, 1e-5), (6.0, 0.005, 500, 1e-6), (1.0, 1.0, 1, 1e-5)])
def test_pld_below_rdp(sigma, q, steps, delta):
    # RDP-derived ε is an upper bound on the exact ε; PLD is tight up to PLD_RTOL, so PLD ≤ RDP.
    # The RDP conversion gap is typically 5–25% in this regime; 1.5× flags a gross error.
    pld = acc.epsilon(sigma, q, steps, delta)
    rdp = acc.epsilon(sigma, q, steps, delta, accountant="rdp")
    assert pld <= rdp
    assert rdp <= 1.5 * pld


# ---------------------------------------------------------------------------------------------
# 4. Calibration and monotonicity

#: (σ, q, T, δ): the public privacy_params strategy, σ ∈ [0.9, 5], q ∈ [1e-3, 0.1], T ≤ 300,
#: δ ∈ [1e-6, 1e-5]
PARAMS = privacy_params(min_noise=0.9, max_noise=5.0, min_sample_rate=1e-3, max_sample_rate=0.1,
                        max_steps=300, min_delta=1e-6, max_delta=1e-5)


@settings(max_examples=5, deadline=None)  # 5, not 6: the privacy_params draws cost ~11% more CPU
@given(p=PARAMS)
def test_rdp_monotone(p):
    sigma, q, steps, delta = p
    e = acc.epsilon(sigma, q, steps, delta, accountant="rdp")
    assert acc.epsilon(1.25 * sigma, q, steps, delta, accountant="rdp") <= e
    assert acc.epsilon(sigma, q, 2 * steps, delta, accountant="rdp") >= e
    assert acc.epsilon(sigma, min(1.0, 1.5 * q), steps, delta, accountant="rdp") >= e


@settings(max_examples=5, deadline=None)  # 5, not 6: the privacy_params draws cost ~11% more CPU
@given(p=PARAMS)
def test_pld_monotone(p):
    sigma, q, steps, delta = p
    # PLD values carry a relative discretization error up to PLD_RTOL, hence the slack.
    tol = 1 + 2 * acc.PLD_RTOL
    e = acc.epsilon(sigma, q, steps, delta)
    assert acc.epsilon(1.25 * sigma, q, steps, delta) <= e * tol
    assert acc.epsilon(sigma, q, 2 * steps, delta) * tol >= e
    assert acc.epsilon(sigma, min(1.0, 1.5 * q), steps, delta) * tol >= e


@settings(max_examples=4, deadline=None)
@given(p=privacy_params(min_noise=0.8, max_noise=3.0, min_sample_rate=1e-3, max_sample_rate=0.1,
                        max_steps=300, min_delta=1e-5, max_delta=1e-5))
def test_rdp_noise_multiplier_inverts_epsilon(p):
    sigma, q, steps, _ = p  # δ = 1e-5
    # ε(σ) is strictly decreasing under RDP, so the smallest σ meeting ε(σ0) is σ0 itself and the
    # returned value lies in [σ0, σ0(1 + 1e-4)].
    target = acc.epsilon(sigma, q, steps, 1e-5, accountant="rdp")
    s = acc.noise_multiplier(target, 1e-5, q, steps, accountant="rdp")
    assert sigma * (1 - 1e-12) <= s <= sigma * (1 + 1e-4) * (1 + 1e-12)
    assert acc.epsilon(s, q, steps, 1e-5, accountant="rdp") <= target
    assert acc.epsilon(s / (1 + 1e-4), q, steps, 1e-5, accountant="rdp") > target


@pytest.mark.parametrize("target,q,steps", [(1.0, 0.01, 500)])
def test_pld_noise_multiplier_meets_target(target, q, steps):
    s = acc.noise_multiplier(target, 1e-5, q, steps)
    assert acc.epsilon(s, q, steps, 1e-5) <= target
    # Minimal up to the PLD's own resolution: 0.5% less noise already overshoots the target.
    assert acc.epsilon(s * (1 - 5e-3), q, steps, 1e-5) > target
    # PLD is tighter than RDP, so it needs less noise.
    assert s < acc.noise_multiplier(target, 1e-5, q, steps, accountant="rdp")


def test_noise_multiplier_releases_per_step_and_edges():
    s1 = acc.noise_multiplier(2.0, 1e-5, 0.02, 300, accountant="rdp")
    assert acc.noise_multiplier(2.0, 1e-5, 0.02, 300, accountant="rdp", releases_per_step=4) == 2 * s1
    assert acc.noise_multiplier(2.0, 1e-5, 0.02, 0) == 0.0
    # ε = 1e5 for one full-batch release needs σ ≈ 0.002: below the calibrated range.
    with pytest.raises(ValueError, match="epsilon=100000.0"):
        acc.noise_multiplier(1e5, 1e-5, 1.0, 1, accountant="rdp")


def test_calls_are_cached():
    args = (1.3, 0.02, 77, 1e-5)
    acc.epsilon(*args)
    before = acc._epsilon_noted.cache_info().hits
    acc.epsilon(*args)
    acc.epsilon_from_releases([((1.3,), 77)], 0.02, 1e-5)
    assert acc._epsilon_noted.cache_info().hits == before + 2


# ---------------------------------------------------------------------------------------------
# 5. Releases per step and step types


@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_same_batch_releases_equal_one_release(accountant):
    # Two releases of σ on one batch are exactly one release of σ/√2 (module docstring).
    a = acc.epsilon(1.2, 0.03, 400, 1e-5, accountant=accountant, releases_per_step=2)
    b = acc.epsilon(1.2 / math.sqrt(2), 0.03, 400, 1e-5, accountant=accountant)
    assert a == b
    c = acc.epsilon_from_releases([((1.2, 1.2), 400)], 0.03, 1e-5, accountant=accountant)
    assert c == a
    # ... which costs more than two independently subsampled steps (the unsafe shortcut).
    assert a > acc.epsilon(1.2, 0.03, 800, 1e-5, accountant=accountant)


def test_effective_noise_multiplier():
    assert acc.effective_noise_multiplier((3.0, 4.0)) == pytest.approx(12 / 5)  # 1/9+1/16 = 25/144
    assert acc.effective_noise_multiplier((2.0, 2.0, 2.0, 2.0)) == 1.0
    assert acc.effective_noise_multiplier((2.0, math.inf)) == 2.0
    assert acc.effective_noise_multiplier((math.inf,)) == math.inf
    assert acc.effective_noise_multiplier((1.0, 0.0)) == 0.0
    assert acc.effective_noise_multiplier(1.5) == 1.5


@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_step_types_compose(accountant):
    kw = dict(accountant=accountant)
    # Same type split in two is the same run.
    assert acc.epsilon_from_releases([(1.0, 300), ((1.0,), 200)], 0.02, 1e-5, **kw) == \
        acc.epsilon(1.0, 0.02, 500, 1e-5, **kw)
    # A mixed run lies between the all-cheap and all-expensive runs.
    mixed = acc.epsilon_from_releases([(1.0, 300), ((1.0, 2.0), 200)], 0.02, 1e-5, **kw)
    lo = acc.epsilon(1.0, 0.02, 500, 1e-5, **kw)
    hi = acc.epsilon(acc.effective_noise_multiplier((1.0, 2.0)), 0.02, 500, 1e-5, **kw)
    assert lo < mixed < hi
    # Free releases and empty runs.
    assert acc.epsilon_from_releases([((1.0, math.inf), 300), (math.inf, 9)], 0.02, 1e-5, **kw) == \
        acc.epsilon(1.0, 0.02, 300, 1e-5, **kw)
    assert acc.epsilon_from_releases([], 0.02, 1e-5, **kw) == 0.0
    assert acc.epsilon_from_releases([(1.0, 0)], 0.02, 1e-5, **kw) == 0.0
    assert acc.epsilon(math.inf, 0.02, 10, 1e-5, **kw) == 0.0
    assert acc.epsilon(1.0, 0.02, 0, 1e-5, **kw) == 0.0
    assert acc.epsilon(0.0, 0.02, 10, 1e-5, **kw) == math.inf
    assert acc.epsilon_from_releases([(1.0, 5), ((2.0, 0.0), 1)], 0.02, 1e-5, **kw) == math.inf


def test_rdp_curve_adds_over_step_types():
    _, a = acc.rdp_curve([(1.0, 300)], 0.02)
    _, b = acc.rdp_curve([((1.0, 2.0), 200)], 0.02)
    _, ab = acc.rdp_curve([(1.0, 300), ((1.0, 2.0), 200)], 0.02)
    np.testing.assert_allclose(ab, a + b, rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# 6. Samplers and validation


def test_fixed_size_sampling_is_rdp_replace_one_with_sensitivity_two():
    import dp_accounting
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    # The event the module builds: WOR sampling, REPLACE_ONE, Gaussian noise multiplier σ/2.
    got = acc.epsilon(1.5, 0.04, 500, 1e-5, accountant="rdp", sampling="fixed")
    ref = rdp.RdpAccountant(acc.RDP_ORDERS_FIXED, dp_accounting.NeighboringRelation.REPLACE_ONE)
    ref.compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.SampledWithoutReplacementDpEvent(25, 1, dp_accounting.GaussianDpEvent(0.75)), 500))
    assert got == ref.get_epsilon(1e-5)
    # Independent check of the sensitivity convention at q = 1: replacing one example moves the
    # clipped sum by up to 2C, so RDP(α) = α·2²/(2σ²) per step (Mironov 2017, Gaussian RDP).
    sigma, steps, delta = 3.0, 10, 1e-5
    oracle = min(float(eps_improved(steps * 2 * a / sigma ** 2, a, delta)) for a in acc.RDP_ORDERS_FIXED)
    assert acc.epsilon(sigma, 1.0, steps, delta, accountant="rdp", sampling="fixed") == \
        pytest.approx(oracle, rel=1e-12)
    # Replace-one with sensitivity 2C costs more than add/remove with C.
    assert got > acc.epsilon(1.5, 0.04, 500, 1e-5, accountant="rdp")


def test_fixed_size_with_pld_and_replacement_sampling_raise():
    with pytest.raises(ValueError, match="accountant='pld' with sampling='fixed'"):
        acc.epsilon(1.0, 0.01, 10, 1e-5, sampling="fixed")
    with pytest.raises(ValueError, match="accountant='pld' with sampling='fixed'"):
        acc.noise_multiplier(1.0, 1e-5, 0.01, 10, sampling="fixed")
    for accountant in ("pld", "rdp"):
        with pytest.raises(NotImplementedError, match="sampling='replacement'"):
            acc.epsilon(1.0, 0.01, 10, 1e-5, accountant=accountant, sampling="replacement")
        with pytest.raises(ValueError, match="sampling='replacement'"):
            acc.epsilon_from_releases([(1.0, 10)], 0.01, 1e-5, accountant=accountant,
                                      sampling="replacement")


BAD_EPSILON_CALLS = [
    (dict(noise_multiplier=-1.0), "noise_multiplier=-1.0"),
    (dict(noise_multiplier=float("nan")), "noise_multiplier=nan"),
    (dict(noise_multiplier="1"), "noise_multiplier='1'"),
    (dict(delta=0.0), "delta=0.0"),
    (dict(delta=1.5), "delta=1.5"),
    (dict(sample_rate=0.0), "sample_rate=0.0"),
    (dict(sample_rate=1.5), "sample_rate=1.5"),
    (dict(steps=-3), "steps=-3"),
    (dict(steps=2.5), "steps=2.5"),
    (dict(accountant="moments"), "accountant='moments'"),
    (dict(sampling="shuffle"), "sampling='shuffle'"),
    (dict(releases_per_step=0), "releases_per_step=0"),
    (dict(releases_per_step=1.5), "releases_per_step=1.5"),
]


@pytest.mark.parametrize("bad,needle", BAD_EPSILON_CALLS)
def test_epsilon_validation(bad, needle):
    kw = dict(noise_multiplier=1.0, sample_rate=0.01, steps=10, delta=1e-5) | bad
    with pytest.raises(ValueError) as info:
        acc.epsilon(**kw)
    assert needle in str(info.value)


@pytest.mark.parametrize("bad,needle", [
    (dict(epsilon=0.0), "epsilon=0.0"), (dict(epsilon=-2.0), "epsilon=-2.0"),
    (dict(epsilon=math.inf), "epsilon=inf"), (dict(delta=1.0), "delta=1.0"),
    (dict(sample_rate=-0.1), "sample_rate=-0.1"), (dict(steps=-1), "steps=-1"),
    (dict(releases_per_step=0), "releases_per_step=0"), (dict(accountant="x"), "accountant='x'"),
])
def test_noise_multiplier_validation(bad, needle):
    kw = dict(epsilon=1.0, delta=1e-5, sample_rate=0.01, steps=10) | bad
    with pytest.raises(ValueError) as info:
        acc.noise_multiplier(**kw)
    assert needle in str(info.value)


@pytest.mark.parametrize("releases,needle", [
    ([(1.0, -2)], "count=-2"), ([(-1.0, 2)], "noise_multiplier=-1.0"), ([(1.0,)], "(1.0,)"),
    ("abc", "releases='abc'"), ([((), 3)], "noise_multipliers"),
])
def test_releases_validation(releases, needle):
    with pytest.raises(ValueError) as info:
        acc.epsilon_from_releases(releases, 0.01, 1e-5)
    assert needle in str(info.value)


def test_integral_floats_accepted():
    assert acc.epsilon(1.0, 0.01, 100.0, 1e-5) == acc.epsilon(1.0, 0.01, 100, 1e-5)
    assert acc.epsilon(np.float64(1.0), np.float64(0.01), np.int64(100), np.float64(1e-5)) == \
        acc.epsilon(1.0, 0.01, 100, 1e-5)


def test_record_and_epsilon_of_many_trials_equal_the_one_trial_runs():
    """Trials share the schedule's step patterns and, when their σ's agree, their step types and ε
    (computed once): each trial's record entry and ε equal those of a one-trial run at its σ."""
    import dpsim
    from dpsim import optimizers, problems

    prob = problems.logistic_regression(60, 3, seed=0)
    sig = [0.8, 2.0, 0.8, 1.3]
    kw = dict(steps=7, batch_size=6, seed=2, sampling="cyclic_poisson:2")
    many = dpsim.simulate(prob, optimizers.get("dp2_extra_query", s1=3, noise_multiplier=sig),
                          trials=len(sig), **kw)
    eps = many.epsilon(1e-5)
    for i, s in enumerate(sig):
        one = dpsim.simulate(prob, optimizers.get("dp2_extra_query", s1=3, noise_multiplier=s),
                             trials=1, **kw)
        for key in ("step_types", "group_step_types"):
            assert many.privacy[key][i] == one.privacy[key][0]
        assert eps[i] == one.epsilon(1e-5)
    assert eps[0] == eps[2] and len(set(eps.tolist())) == 3
    assert acc.epsilon_of_record(many.privacy, 1e-5).tolist() == eps.tolist()


# ---------------------------------------------------------------------------------------------
# Import cost and the step schedule (issue 32)


def test_import_dpsim_does_not_import_dp_accounting():
    import subprocess
    import sys

    code = ("import sys, dpsim; dpsim.accounting; "
            "print(int('dp_accounting' in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "0", out.stderr
    # and the first ε imports it
    code = "import sys, dpsim; dpsim.accounting.epsilon(1, .1, 3, 1e-5); print(int('dp_accounting' in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip() == "1", out.stderr


def test_the_written_out_library_orders_are_the_library_s():
    from dp_accounting.rdp import rdp_privacy_accountant

    assert acc.LIBRARY_DEFAULT_RDP_ORDERS == tuple(rdp_privacy_accountant.DEFAULT_RDP_ORDERS)
    assert set(np.round(rdp_privacy_accountant.DEFAULT_RDP_ORDERS, 10)) <= set(acc.RDP_ORDERS)


def test_step_schedules_are_counted_as_np_unique_counts_them():
    """The uniform schedule (one comparison) and the bit-coded count (bincount) give the dict
    np.unique(axis=0) gave, in its order: the records and ε are unchanged bit for bit."""
    rng = np.random.default_rng(0)
    for r in (1, 2, 3, 5, 8):
        for T in (1, 7, 1000):
            for m in (rng.random((T, r)) < 0.5, np.ones((T, r), bool), np.zeros((T, r), bool)):
                pats, counts = np.unique(m, axis=0, return_counts=True)
                ref = {tuple(bool(a) for a in p): int(c) for p, c in zip(pats, counts)}
                assert list(acc._row_counts(m).items()) == list(ref.items())
