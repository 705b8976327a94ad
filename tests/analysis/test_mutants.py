"""Tests written against the surviving mutants of ``make mutation`` (tools/mutation.py): each
checks a property of the bound or a value worked out independently (by hand, or by another
method), never the mutated constant itself.  The mutant each test was written for is named in
its docstring."""

import math

import numpy as np
import pytest

from dpsim.analysis import concentration as K


def test_prop6_printed_bound_at_a_hand_worked_point():
    """[ADAMBC] Prop. 6 (DP-Adam, printed) where the numbers are round and no factor is 1:
    C² + Φ = 4 (√ = 2), 1 − β2 = 1/4, ε = 16, so the bracket is ln(1 + 4/(¼·16))/T − ln(3/4) and
    the coefficient 4d·4/½ + ηdL·2/¼; with f_gap = 0 the δ term vanishes, and the δ term is
    linear in the gap with slope 2δ/(ηT).  (Mutants: any ``*`` → ``/`` in the coefficient.)"""
    T, eta, d, L, C, phi, b2, eps, a = 2, 0.5, 2, 3.0, math.sqrt(3.75), 0.25, 0.75, 16.0, 0.1
    coef = 4 * d * 4 / 0.5 + eta * d * L * 2 / 0.25  # 64 + 24
    bracket = math.log(2.0) / T + math.log(4.0 / 3.0)
    assert K.prop6_bound(T, eta, d, L, C, phi, b2, eps, 0.0, a) == pytest.approx(coef * bracket, rel=1e-12)
    delta = float(K.corollary1_bound(a, T, C, phi, b2))
    gap = 3.0
    assert (K.prop6_bound(T, eta, d, L, C, phi, b2, eps, gap, a)
            - K.prop6_bound(T, eta, d, L, C, phi, b2, eps, 0.0, a)) == pytest.approx(
        2 * delta * gap / (eta * T), rel=1e-12)


def test_theorem2_kappa_is_the_smallest_allowed_at_hand_worked_points():
    """[DP2] Theorem 2's κ = max{α²C², C h/(ε√(1−β))} with α = min{ε, 1/(√M + ε), 1}.  With
    σ = 0, C = 2, ε = 1: M = 4, α = 1/3, α²C² = 4/9; with h = 0.5, β = 3/4 the other term is
    2·0.5/(1·½) = 2, with h = 0 it is 0.  (Mutants: ``*`` → ``/`` in κ's minimum.)"""
    from dpsim.analysis import delay as D

    common = dict(R=1.0, clip=2.0, noise_multiplier=0.0, batch_size=4, T=8, s=2, d=1, eps=1.0)
    assert D.theorem2_rhs(**common, beta=0.75, h=0.0, terms=True)[3] == pytest.approx(4 / 9)
    assert D.theorem2_rhs(**common, beta=0.75, h=0.5, terms=True)[3] == pytest.approx(2.0)
    assert D.theorem2_rhs(**common, beta=0.75, h=0.5, terms=True)[4] == pytest.approx(1 / 3)


def test_raw_postprocessing_bias_is_the_unrolled_ema_of_phi():
    """Without bias correction, E[v_t] − v_t^c = Σ_j (1−β2)β2^{t−j} Φ = (1 − β2^t)Φ
    ([ADAMBC] Eq. 2), summed here term by term, and Φ itself in the limit t → ∞ (``t=None``).
    (Mutants: the constants of the raw factor ``1 − β2^t`` and of its ``t = ∞`` branch.)"""
    from dpsim.analysis import bias

    sigma, C, b, beta = 1.5, 0.8, 6, 0.7
    phi = (sigma * C / b) ** 2
    for t in (1, 3, 10):
        unrolled = sum((1 - beta) * beta ** (t - j) * phi for j in range(1, t + 1))
        assert bias.postprocessing_bias(sigma, C, b, beta2=beta, t=t, raw=True) == pytest.approx(unrolled)
    assert bias.postprocessing_bias(sigma, C, b, beta2=beta, t=None, raw=True) == pytest.approx(phi)
    assert bias.postprocessing_bias(sigma, C, b, beta2=beta, t=np.inf, raw=True) == pytest.approx(phi)


def test_geometry_diameters_from_extreme_points():
    """``moments.geometry`` against diameters measured on explicit extreme points, for a radius
    r ≠ 1 (every test used r = 1, where r and 1/r agree).  Box [−r, r]^d: opposite corners ±r·1;
    ball of radius r: ±r e_j, the ℓ2 and ℓ∞ diameters are 2r and the C⁻¹-norm diameter is reached
    along the axis of the smallest C_jj.  (Mutant: ``2 * r`` → ``2 / r`` in the ball branch.)"""
    from dpsim.analysis import moments as Mo

    Cd = np.array([0.5, 2.0, 4.0])
    for r in (0.3, 2.5):
        box = Mo.geometry(Cd, domain="box", domain_radius=r)
        hi, lo = np.full(3, r), np.full(3, -r)
        assert box["diam2"] == pytest.approx(np.linalg.norm(hi - lo))
        assert box["diam_inf"] == pytest.approx(np.max(np.abs(hi - lo)))
        assert box["diam_Cinv"] == pytest.approx(math.sqrt(np.sum((hi - lo) ** 2 / Cd)))
        ball = Mo.geometry(Cd, domain="ball", domain_radius=r)
        j = int(np.argmin(Cd))
        e = np.zeros(3)
        e[j] = r
        assert ball["diam2"] == pytest.approx(np.linalg.norm(e - (-e)))
        assert ball["diam_inf"] == pytest.approx(np.max(np.abs(e - (-e))))
        assert ball["diam_Cinv"] == pytest.approx(math.sqrt(np.sum((e - (-e)) ** 2 / Cd)))
        assert ball["trace_Cinv"] == pytest.approx(np.sum(1 / Cd))
        assert ball["trace_Cinv_half"] == pytest.approx(np.sum(Cd ** -0.5))


def test_lemma1_symbolic_taylor_is_the_expansion_of_its_own_mgf():
    """The expansion the lemma's argument uses must be that of the MGF it integrates: the centred
    χ²₁ variable has mean 0, so E e^{u(X²−1)} = 1 + u² + O(u³) with no linear term.  Checked
    against a series of the returned (symbolically integrated) MGF and against Monte-Carlo-free
    numbers: e^{−u}/√(1−2u) at u = 0.01.  (Mutant: ``/ sp.sqrt`` → ``* sp.sqrt`` in the series,
    which keeps the u² coefficient 1 but adds −2u.)"""
    import sympy as sp

    out = K.lemma1_symbolic()
    u = [s for s in out["taylor"].free_symbols if s.name == "u"][0]
    assert sp.expand(out["taylor"] - (1 + u ** 2)) == 0
    assert sp.expand(sp.series(out["mgf"], u, 0, 3).removeO() - out["taylor"]) == 0
    assert float(out["mgf"].subs(u, sp.Rational(1, 100))) == pytest.approx(
        math.exp(-0.01) / math.sqrt(0.98), rel=1e-12)


def test_fit_h_of_constant_values_is_an_exact_horizontal_line():
    """Constant h(s) is fitted exactly by c1 = 0, c2 = h: R² = 1 by convention (no variance to
    explain), zero residuals.  (Mutant: ``ss_tot > 0`` → ``>= 0``, a division by zero.)"""
    from dpsim.analysis import delay as D

    fit = D.fit_h([5, 10, 20], [0.7, 0.7, 0.7])
    assert fit.c1 == pytest.approx(0.0, abs=1e-12) and fit.c2 == pytest.approx(0.7)
    assert fit.r2 == 1.0 and fit.rmse == pytest.approx(0.0, abs=1e-12)


def test_theorem3_rhs_at_a_hand_worked_point_where_the_noise_enters_m():
    """[DP2] Theorem 3 with C = 2, σ = 3, s = 1, b = 2: M = C² + σ²C²/(sb²) = 4 + 9 = 13, so with
    F1 = α = T = L = ε = d = 1 and τ = 0 the bound is 2k + 2k·(σ²C²/(2b²)) = 2k + 9k, k = √13 + 1.
    (Mutants: ``*`` → ``/`` inside M, invisible at C = 1 or when σ²C²/(sb²) is tiny.)"""
    from dpsim.analysis import delay as D

    k = math.sqrt(13.0) + 1.0
    assert D.theorem3_rhs(1.0, 1.0, 1, 1.0, 2.0, 3.0, 2, 1, 1, 0.0, 1.0) == pytest.approx(11.0 * k, rel=1e-12)


def test_theorem3_sample_size_defaults_to_algorithm3s_rounds():
    """Without ``rounds``, Theorem 3's sample size uses Algorithm 3's own T = ⌈32 ln d⌉.
    (Mutant: ``np.log(d)`` → ``d`` in the default.)"""
    from dpsim.analysis import moments as Mo

    for d in (2, 10, 50):
        T = Mo.algorithm3_rounds(d)
        assert Mo.theorem3_sample_size(d, 1.5, 1.0, 1e-5, 0.1) == Mo.theorem3_sample_size(
            d, 1.5, 1.0, 1e-5, 0.1, rounds=T)


def test_saddlepoint_cdf_is_continuous_at_the_mean():
    """The Lugannani–Rice formula has a removable singularity at the mean; the value the code
    returns there must be the limit of its values on either side (their average at ±10⁻³ sd,
    whose first-order terms cancel).  (Mutant: the 6 of the skewness term k3/(6√(2π) k2^{3/2}).)"""
    from dpsim.analysis import bias

    for a, lam in ((np.array([0.5, 0.3, 0.2]), 0.0), (np.array([0.9, 0.1]), 0.4), (np.array([1.0]), 0.0)):
        k1, k2, _ = bias._cumulants(a, lam)
        h = 1e-3 * math.sqrt(k2)
        at = bias._saddlepoint_cdf(a, lam, k1)
        around = 0.5 * (bias._saddlepoint_cdf(a, lam, k1 - h) + bias._saddlepoint_cdf(a, lam, k1 + h))
        assert at == pytest.approx(around, abs=1e-5)


def test_h_of_s_bootstrap_interval_at_level_one_half_is_the_interquartile_range():
    """A percentile bootstrap interval of level c spans the (1−c)/2 and (1+c)/2 quantiles of the
    bootstrap replicates: at c = 0.5 the interquartile range, which has positive width when the
    trials differ, and it nests inside the 0.95 interval; the 0.95 interval is about
    1.96/0.674 ≈ 2.9 times wider for a near-normal bootstrap distribution.  (Mutant: the 2 in
    ``a = (1 − ci)/2``, which collapses the 0.5 interval to the median.)"""
    import dpsim
    from dpsim.analysis import delay as D

    p = dpsim.problems.logistic_regression(200, 8, density=0.5, seed=1)
    tr = D.record_h_traces(p, 5, steps=40, batch_size=16, trials=40, seed=3, noise_multiplier=1.0,
                           lr=0.5, lr2=0.05, clip=1.0, beta=0.9, eps=1e-3)
    _, lo50, hi50 = D.h_of_s(tr, ci=0.5, n_boot=400, seed=0)
    _, lo95, hi95 = D.h_of_s(tr, ci=0.95, n_boot=400, seed=0)
    assert lo95 <= lo50 < hi50 <= hi95
    assert 2.0 < (hi95 - lo95) / (hi50 - lo50) < 4.5


def test_gamma_cdf_is_exact_for_a_scaled_chi_square():
    """The three-cumulant (Pearson III) approximation matches the first three cumulants, so it is
    exact when Q itself is a scaled χ²: equal weights c, λ = 0 give Q = c·χ²_m, a gamma variable
    of shape m/2 = 4/γ² (γ = √(8/m)).  Reference: scipy's χ² CDF.  (Mutant: the 4 of
    ``k = 4/γ²``.)"""
    from scipy.stats import chi2

    from dpsim.analysis import bias

    for m, c in ((1, 1.0), (3, 0.25), (8, 0.1)):
        a = np.full(m, c)
        for x in (0.05, 0.5, 1.0, 2.5):
            assert bias._gamma_cdf(a, 0.0, x) == pytest.approx(chi2.cdf(x / c, m), rel=1e-9, abs=1e-14)


def test_corollary1_rhs_with_a_batch_of_d_traces_is_row_by_row():
    """``D_l1`` of shape (k, T) gives k values, each the one-trace result.  (Mutant:
    ``Dl.shape[-1:]`` → ``Dl.shape[-2:]``, invisible for a single trace.)"""
    from dpsim.analysis import delay as D

    T = 12
    rng = np.random.default_rng(0)
    Dl = 1.0 + rng.random((3, T))
    got = np.asarray(D.corollary1_rhs(T, 3, 4, 1.0, 1.0, 8, 1.0, D_l1=Dl))
    assert got.shape == (3,)
    for i in range(3):
        assert got[i] == pytest.approx(float(D.corollary1_rhs(T, 3, 4, 1.0, 1.0, 8, 1.0, D_l1=Dl[i])))


def test_g_hat_p_with_several_scalings_is_row_by_row():
    """``C_diag`` of shape (M, d) with a scalar p gives M moments, each the single-scaling one,
    and Ĝ_p is computed from its definition ((1/n) Σ_i ||z_i||_C^p)^{1/p} with ||z||_C² = Σ C_j z_j².
    (Mutant: ``C.shape[:-1]`` → ``C.shape[:-2]`` in the output shape.)"""
    from dpsim.analysis import moments as Mo

    rng = np.random.default_rng(1)
    S = rng.normal(size=(30, 4))
    Cs = np.array([[1.0, 2.0, 0.5, 1.0], [0.3, 0.3, 3.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    got = np.asarray(Mo.G_hat_p(S, Cs, 3.0))
    assert got.shape == (3,)
    for i in range(3):
        assert got[i] == pytest.approx(Mo.G_hat_p(S, Cs[i], 3.0))
        norms = np.sqrt(np.sum(Cs[i] * S * S, axis=1))
        assert got[i] == pytest.approx(np.mean(norms ** 3) ** (1 / 3))


def test_saddlepoint_cdf_of_a_scaled_chi_square_is_close_to_exact_on_both_sides_of_the_mean():
    """Lugannani–Rice on c·χ²_m against scipy's exact χ² CDF, below and above the mean: its
    known accuracy is about 1e-2 for one degree of freedom and far better for more (here
    < 0.02, < 2e-3, < 2e-4).  (Mutant: the upper end of the saddlepoint bracket, ``smax·(1 − 1e-15)``
    → ``smax·(2 − 1e-15)``, past the pole of K'.)"""
    from scipy.stats import chi2

    from dpsim.analysis import bias

    for m, c, tol in ((1, 1.0, 0.02), (3, 0.25, 2e-3), (8, 0.1, 2e-4)):
        a = np.full(m, c)
        for f in (0.3, 0.7, 1.5, 3.0):
            x = f * m * c
            assert abs(bias._saddlepoint_cdf(a, 0.0, x) - chi2.cdf(x / c, m)) < tol
