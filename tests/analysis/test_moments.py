"""Tests of analysis.moments ([PAGAN]: Asi, Duchi, Fallah, Javidbakht, Talwar, ICML 2021).

Oracles: closed forms (χ² moments, Hölder), sympy for the Theorem 1/2 algebra, Monte Carlo with
fixed seeds and confidence intervals, a naive loop implementation of Algorithm 3, dpsim's
accountant for the Gaussian-mechanism helpers, and dpsim.simulate for the PASAN/PAGAN bounds.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import gammaln

import dpsim
from dpsim.analysis import moments as M
from dpsim.analysis import verify
from dpsim.analysis.checks import pagan as checks
from dpsim.privacy.ellipsoid import ellipsoid_radius, empirical_moment, scaling_diagonal
from dpsim.testing import assert_bound_holds
from dpsim.testing.strategies import dp_budgets, seeds

POWER = lambda d: np.arange(1, d + 1, dtype=float) ** -1.5  # noqa: E731  σ_j = j^{-3/2} (§3.2, §6.1)


# ------------------------------------------------------------------------------------------------
# Numbers printed in [PAGAN] for these bounds (source in each line)


def test_printed_numbers():
    # Thm 3: T = 32 log d rounds (natural log, ceiling)
    assert M.algorithm3_rounds(10) == math.ceil(32 * math.log(10)) == 74
    # Thm 3: Ĉ_j = (r σ̂_j)^{-4/3} / 4
    assert M.theorem3_scaling(np.array([1.0, 0.5]), 2.0) == pytest.approx([2 ** (-4 / 3) / 4, 1 / 4])
    # Thm 3, condition (10): ½ max{σ_j, d^{-3/2}} ≤ σ̂_j ≤ 2σ_j
    s = np.array([1.0, 0.1, 8 ** -1.5, 0.3, 0.2, 0.2, 0.2, 0.2])
    assert M.theorem3_guarantee(np.array([0.5, 0.2, 0.5 * 8 ** -1.5, 0.6, 0.1, 0.2, 0.2, 0.2]), s).all()
    assert not M.theorem3_guarantee(np.array([0.49, 0.2, 0.0442, 0.3, 0.2, 0.2, 0.2, 0.2]), s)[0]
    assert not M.theorem3_guarantee(np.array([0.5, 0.21, 0.0442, 0.3, 0.2, 0.2, 0.2, 0.2]), s)[1]
    # Thm 3 sample size (reconstructed reading), 1000 r² log(8d/β) max{...}: the r² branch
    assert M.theorem3_sample_size(10, 1.05, 1.0, 1e-5, 0.1) == math.ceil(1000 * 1.05 ** 4 * math.log(800))
    # Lemma 3.2: Ĝ_p ≤ G_p + G_2p ≤ 2 G_2p
    assert M.lemma32_bound(1.0, 1.5) == 2.5 <= 2 * 1.5
    # §3.2: (Σσ^{2/3})^{3/2} ≤ √d Σσ with equality for equal σ ("by as much as √d")
    g = M.geometry_comparison(np.full(16, 0.3))
    assert g["pagan"] == pytest.approx(g["sqrt_d_pasan"]) == pytest.approx(4 * 16 * 0.3)
    # §3.2: σ_j = j^{-3/2}: (Σσ^{2/3})^{3/2} = H_d^{3/2}; Σσ_j → ζ(3/2) = 2.612…
    g = M.geometry_comparison(POWER(100))
    assert g["pagan"] == pytest.approx(np.sum(1 / np.arange(1, 101)) ** 1.5)
    assert g["pasan"] == pytest.approx(2.41287, abs=1e-5)
    assert g["pasan"] < 2.6124
    # Thm 4 / Prop. 1: (Σσ^{2/3})^{3/2}/(nε log^{5/2} d); Thm 5: Σσ/(nε log d); Prop. 2 min{σ√d, dσ/(nε)}
    lb_box = g["pagan"] / (5000 * math.log(100) ** 2.5)
    assert M.lower_bound_box(POWER(100), 5000, 1.0) == pytest.approx(lb_box)
    assert M.lower_bound_ball(POWER(100), 5000, 1.0) == pytest.approx(g["pasan"] / (5000 * math.log(100)))
    assert M.prop2_bound(1.0, 100, 5000, 1.0) == pytest.approx(100 / 5000)
    assert M.prop2_bound(1.0, 100, 5, 1.0) == pytest.approx(10.0)


# ------------------------------------------------------------------------------------------------
# G_p, Ĝ_p, Example 1, Lemma 3.2


@given(d=st.integers(1, 40), w=st.floats(1e-3, 1e3), p=st.floats(1.0, 14.0))
def test_G_p_equal_weights_closed_form(d, w, p):
    # ||z||_C² = w χ²_d: E||z||^p = (2w)^{p/2} Γ(d/2 + p/2)/Γ(d/2)
    exact = math.sqrt(2 * w) * math.exp((gammaln(d / 2 + p / 2) - gammaln(d / 2)) / p)
    assert M.G_p(np.full(d, w), np.ones(d), p) == pytest.approx(exact, rel=1e-8)


@given(seed=st.integers(0, 10 ** 6), lam=st.floats(0.01, 100.0), p=st.floats(1.0, 10.0))
def test_G_p_homogeneity_monotonicity_and_p2_p4(seed, lam, p):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 12))
    C, s = rng.uniform(0.1, 5, d), rng.uniform(0.05, 2, d)
    g = M.G_p(C, s, p)
    assert M.G_p(lam * C, s, p) == pytest.approx(math.sqrt(lam) * g, rel=1e-8)
    assert M.G_p(C, lam * s, p) == pytest.approx(lam * g, rel=1e-8)
    assert M.G_p(C, s, p + 0.5) >= g * (1 - 1e-10)  # moments increase with p
    w = C * s * s
    assert M.G_p(C, s, 2) == pytest.approx(math.sqrt(w.sum()), rel=1e-12)
    assert M.G_p(C, s, 4) == pytest.approx((w.sum() ** 2 + 2 * (w * w).sum()) ** 0.25, rel=1e-12)


def test_G_p_against_monte_carlo_and_continuity_in_p():
    s = POWER(20)
    C = s ** (-4 / 3)
    rng = np.random.default_rng(7)
    z = rng.standard_normal((400_000, 20)) * s
    nrm = np.sqrt((z * z) @ C)
    for p in (1.0, 2.7, 4.6, 9.2):
        x = nrm ** p
        hw = 4 * x.std() / math.sqrt(x.size)  # ~4 standard errors
        assert abs(M.G_p(C, s, p) ** p - x.mean()) <= hw
    # the integer (cumulant) and fractional (quadrature) branches agree at the seam
    assert M.G_p(C, s, 4 - 1e-7) == pytest.approx(M.G_p(C, s, 4.0), rel=1e-6)
    assert M.G_p(C, s, 6 + 1e-7) == pytest.approx(M.G_p(C, s, 6.0), rel=1e-6)


def test_G_p_and_G_hat_p_vectorization_and_errors():
    s = POWER(5)
    out = M.G_p(np.ones((3, 5)), s, np.array([[1.0], [2.0]]))
    assert out.shape == (2, 3) and np.allclose(out[1], math.sqrt((s * s).sum()))
    S = np.random.default_rng(0).standard_normal((50, 5))
    C = np.vstack([np.ones(5), np.arange(1, 6.0)])
    h = M.G_hat_p(S, C, np.array([1.0, 2.0]))
    direct = [np.mean(np.sqrt((S * S) @ C[i]) ** p) ** (1 / p) for i, p in enumerate([1.0, 2.0])]
    assert h.shape == (2,) and np.allclose(h, direct)
    assert M.G_hat_p(S, C[1], 3.0) == pytest.approx(float(np.mean(np.sqrt((S * S) @ C[1]) ** 3) ** (1 / 3)))
    assert M.G_hat_p(S, C[1], 3.0) == pytest.approx(empirical_moment(C[1], S, 3.0))
    with pytest.raises(ValueError, match="p must be a finite number >= 1, got p=0.5"):
        M.G_hat_p(S, C, 0.5)
    with pytest.raises(ValueError, match="C_diag must be positive and finite, got C_diag\\[2\\]=-1"):
        M.G_p(np.array([1.0, 1.0, -1.0]), np.ones(3), 2)
    with pytest.raises(ValueError, match="p must be positive"):
        M.G_p(np.ones(3), np.ones(3), 0.0)


@given(seed=st.integers(0, 10 ** 6), p=st.floats(1.0, 12.0), mu=st.floats(0.0, 3.0))
def test_example1_bound_dominates_gaussian_moments(seed, p, mu):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 30))
    C, s = rng.uniform(0.01, 10, d), rng.uniform(0.01, 3, d)
    assert M.G_p(C, s, p) <= M.example1_bound(C, s, p) * (1 + 1e-10)  # N(0, σ²) is σ²-sub-Gaussian
    assert M.example1_bound(C, s, p, mu) == pytest.approx(mu + M.example1_bound(C, s, p))
    assert M.example1_bound(C, s, p) <= math.sqrt(3 * max(p, 1)) * math.sqrt(np.sum(C * s * s)) * (1 + 1e-12)


def test_example1_bound_is_tight_at_p2_and_holds_for_rademacher():
    s = POWER(8)
    C = s ** -1.0
    assert M.example1_bound(C, s, 2.0) == pytest.approx(M.G_p(C, s, 2.0), rel=1e-12)
    # Z_j = ±σ_j (σ_j²-sub-Gaussian, not Gaussian): ||Z||_C² = Σ C_jj σ_j² for every sign pattern,
    # so G_p = √(Σ C_jj σ_j²) for every p, equal to the bound for p ≤ 2 and below it for p > 2
    W = float(np.sum(C * s * s))
    for p in (1.0, 2.0):
        assert M.example1_bound(C, s, p) == pytest.approx(math.sqrt(W), rel=1e-12)
    for p in (3.0, 8.0):
        assert math.sqrt(W) < M.example1_bound(C, s, p)


def test_lemma32_by_simulation_and_validation():
    s = POWER(10)
    n, p, m = 10, 3.0, 4000
    Gp, G2p = M.G_p(np.ones(10), s, p), M.G_p(np.ones(10), s, 2 * p)
    rng = np.random.default_rng(11)
    z = rng.standard_normal((m, n, 10)) * s
    ghat = np.mean(np.sum(z * z, axis=-1) ** (p / 2), axis=1) ** (1 / p)
    # P(violation) ≤ 1/n shown at 95% confidence (the Clopper–Pearson upper limit is below 1/n)
    assert_bound_holds(ghat > M.lemma32_bound(Gp, G2p), 1 / n, kind="probability", alpha=0.05,
                       demonstrate=True, rtol=0.0, what="P(G_hat_p > Lemma 3.2 bound)")
    # without the G_2p slack the statement is false: Ĝ_p exceeds G_p about half the time
    # (shown by the two-sided 95% interval's lower end, i.e. one-sided 2.5%)
    assert_bound_holds(ghat > Gp, 1 / n, kind="probability", side="lower", alpha=0.025,
                       demonstrate=True, rtol=0.0, what="P(G_hat_p > G_p)")
    with pytest.raises(ValueError, match="G_p must not exceed G_2p"):
        M.lemma32_bound(2.0, 1.0)


# ------------------------------------------------------------------------------------------------
# Theorems 1–2: algebra (sympy), consistency with dpsim.privacy.ellipsoid.ellipsoid_radius, simulation


def test_theorem_privacy_term_sympy_identity():
    import sympy as sp

    D, DC, G, P, p = sp.symbols("D D_C G P p", positive=True)
    K = DC / (D * P)  # B = 2 G K^{1/p}
    B = 2 * G * K ** (1 / p)
    expr = sp.Rational(3, 2) * D * B * P + DC * G ** p / B ** (p - 1)  # pasan_bound's privacy + bias
    target = (3 + 2 ** (1 - p)) * D * G * P ** ((p - 1) / p) * (DC / D) ** (1 / p)
    assert sp.simplify(sp.powsimp(sp.expand_power_base(expr / target, force=True), force=True)) == 1
    # the same B minimizes a D B P + DC G^p B^{1-p} only up to the factor ((p-1)·2/3 / 2^p)^{1/p}:
    a = sp.Rational(3, 2)
    Bstar = ((p - 1) * DC * G ** p / (a * D * P)) ** (1 / p)
    ratio = sp.simplify(sp.powsimp(sp.expand_power_base(B / Bstar, force=True), force=True))
    assert sp.simplify(ratio - 2 * (a / (p - 1)) ** (1 / p)) == 0


@settings(max_examples=12)
@given(seed=seeds(10 ** 6), budget=dp_budgets(epsilon=(0.1, 8.0), delta=1e-5),
       kappa=st.sampled_from([0.0, 1.0, 4 / 3]), alg=st.sampled_from(["pasan", "pagan"]))
def test_theorem_bound_equals_explicit_bound_at_theorem_choices(seed, budget, kappa, alg):
    eps = budget.epsilon  # δ = 1e-5 below
    rng = np.random.default_rng(seed)
    n, d, b = 400, int(rng.integers(2, 30)), int(rng.choice([1, 2, 4, 5, 8, 10, 16, 20, 25, 40]))
    s = POWER(d)
    X = rng.standard_normal((n, d)) * s
    C = s ** -kappa
    sig = math.sqrt(math.log(1e5)) / eps
    p = max(1.0, math.log(d))
    B = ellipsoid_radius(C, X, n=n, noise_multiplier=sig, algorithm=alg)
    G = M.G_hat_p(X, C, 2 * p)
    geo = M.geometry(C)
    T = (n / b) ** 2
    if alg == "pasan":
        thm = M.theorem1_bound(C, X, n=n, noise_multiplier=sig, batch_size=b)
        rterm = geo["diam2"] * math.sqrt(np.mean(np.sum(X * X, 1))) / math.sqrt(T)
        priv = 1.5 * geo["diam2"] * B * sig * math.sqrt(geo["trace_Cinv"]) / n
        assert thm == pytest.approx(M.theorem1_bound(C, X, epsilon=eps, delta=1e-5, n=n, batch_size=b))
    else:
        thm = M.theorem2_bound(C, X, n=n, noise_multiplier=sig, batch_size=b)
        rterm = geo["diam_inf"] * np.sum(np.sqrt(np.mean(X * X, 0))) / math.sqrt(T)
        priv = 1.5 * geo["diam_inf"] * B * sig * geo["trace_Cinv_half"] / n
    # the theorem's form is the finite-T bound at B and T = n²/b² with the bias in moment form
    assert thm == pytest.approx(1.5 * rterm + priv + geo["diam_Cinv"] * G ** p / B ** (p - 1), rel=1e-9)
    # and it dominates the finite-T bound with the exact projection bias (T = n²/b² is an integer)
    fin = (M.pasan_bound if alg == "pasan" else M.pagan_bound)(
        C, X, radius=B, noise_multiplier=sig, steps=int(T), batch_size=b)
    assert fin <= thm * (1 + 1e-12)
    assert M.projection_bias(C, X, B) <= G ** p / B ** (p - 1) * (1 + 1e-9)


def test_explicit_bounds_hand_computed():
    # two examples in d = 2 on the box [-1, 1]², C = diag(1, 4), B = 1.5, σ = 2, b = 4, T = 25
    X = np.array([[1.0, 0.5], [0.2, -1.0]])
    C = np.array([1.0, 4.0])
    nC = np.sqrt((X * X) @ C)                      # ||x_i||_C = (1.4142, 2.0100)
    bias = np.mean(np.where(nC > 1.5, nC, 0.0))    # only the second exceeds B
    DC = 2 * math.sqrt(1 + 1 / 4)
    s = 2.0 * 1.5 / 4                              # σB/b
    # PASAN: (D²/(2α) + α) √(Ḡ² + s² tr C⁻¹)/√T + D_C bias, α = D = 2√2
    D2 = 2 * math.sqrt(2)
    G2 = np.mean(np.sum(X * X, 1))
    want = 1.5 * D2 * math.sqrt(G2 + s * s * 1.25) / 5 + DC * bias
    got = M.pasan_bound(C, X, radius=1.5, noise_multiplier=2.0, steps=25, batch_size=4)
    assert got == pytest.approx(want, rel=1e-12)
    # α ≠ D: the regret factor D²/(2α) + α
    got = M.pasan_bound(C, X, radius=1.5, noise_multiplier=2.0, steps=25, batch_size=4, lr=1.0)
    assert got == pytest.approx((8 / 2 + 1) * math.sqrt(G2 + s * s * 1.25) / 5 + DC * bias, rel=1e-12)
    # PAGAN: (3/2) D_∞ Σ_j √(Ḡ_j² + s²/C_jj)/√T + D_C bias, D_∞ = 2
    Gj2 = np.mean(X * X, 0)
    want = 1.5 * 2 * np.sum(np.sqrt(Gj2 + s * s / C)) / 5 + DC * bias
    got = M.pagan_bound(C, X, radius=1.5, noise_multiplier=2.0, steps=25, batch_size=4)
    assert got == pytest.approx(want, rel=1e-12)
    assert M.projection_bias(C, X, 1.5) == pytest.approx(bias, rel=1e-12)
    assert M.pagan_bound(C, X, radius=1.5, noise_multiplier=2.0, steps=25, batch_size=4, bias=0.0) == \
        pytest.approx(want - DC * bias, rel=1e-12)


def _avg_iterate_excess(alg, *, eps, scaling, seed, n=600, d=12, b=20, T=300, R=8):
    prob = dpsim.problems.absolute_regression(n, d, seed=seed)
    X = checks._lipschitz_rows(prob)
    C = scaling_diagonal(prob.scales, alg) if scaling == "optimal" else np.ones(d)
    sig = math.sqrt(math.log(1e5)) / eps
    B = ellipsoid_radius(C, X, n=n, noise_multiplier=sig, algorithm=alg)
    lr = 2 * math.sqrt(d) if alg == "pasan" else 2.0
    opt = dpsim.optimizers.get(alg, lr=lr, noise_multiplier=sig, radius=B, scaling=C)
    _, avg, _ = checks._simulate_average(prob, opt, steps=T, batch_size=b, trials=R, seed=seed + 1,
                                    sampling="replacement")
    ex = np.asarray(prob.loss(avg)) - prob.optimum[1]
    bound = (M.pasan_bound if alg == "pasan" else M.pagan_bound)(
        C, X, radius=B, noise_multiplier=sig, steps=T, batch_size=b, lr=lr)
    return ex, bound


@settings(max_examples=6)
@given(seed=seeds(1000), budget=dp_budgets(epsilon=[0.5, 2.0, 8.0], delta=1e-5),
       alg=st.sampled_from(["pasan", "pagan"]), scaling=st.sampled_from(["identity", "optimal"]))
def test_simulated_average_iterate_below_explicit_bound(seed, budget, alg, scaling):
    """E[F(w̄_T)] − F* ≤ the explicit bound, shown by the upper end of the two-sided 95% Student-t
    interval (one-sided 2.5%; σ = √ln(1/δ)/ε with δ = 1e-5)."""
    ex, bound = _avg_iterate_excess(alg, eps=budget.epsilon, scaling=scaling, seed=seed)
    assert_bound_holds(ex, bound, alpha=0.025, demonstrate=True, rtol=0.0, seed=seed,
                       what="E[F(w_avg)] - F*")


def test_explicit_bound_is_not_vacuous_and_fails_when_weakened():
    ex, bound = _avg_iterate_excess("pagan", eps=8.0, scaling="optimal", seed=3, T=400)
    m = float(assert_bound_holds(ex, bound, alpha=0.025, demonstrate=True, rtol=0.0, what="E[F(w_avg)] - F*")[0])
    assert bound <= 12 * m   # within an order of magnitude of the simulated loss
    # so dividing the bound by 12 is detected (the 95% interval lies above bound/12)
    assert_bound_holds(ex, bound / 12, side="lower", alpha=0.025, demonstrate=True, rtol=0.0,
                       what="E[F(w_avg)] - F* above bound/12")


def test_geometry_matches_ellipsoid_radius_conventions():
    C = np.array([1.0, 4.0, 9.0])
    g = M.geometry(C, domain_radius=2.0)
    assert g["diam2"] == pytest.approx(4 * math.sqrt(3)) and g["diam_inf"] == 4.0
    assert g["diam_Cinv"] == pytest.approx(4 * math.sqrt(1 + 1 / 4 + 1 / 9))
    assert g["trace_Cinv_half"] == pytest.approx(1 + 1 / 2 + 1 / 3)
    b = M.geometry(C, domain="ball")
    assert b["diam2"] == b["diam_inf"] == 2.0 and b["diam_Cinv"] == pytest.approx(2.0)
    X = np.random.default_rng(1).standard_normal((100, 3))
    p = math.log(3) if math.log(3) > 1 else 1.0
    G = M.G_hat_p(X, C, 2 * p)
    B = ellipsoid_radius(C, X, n=100, noise_multiplier=2.0, algorithm="pagan", domain_radius=2.0)
    K = g["diam_Cinv"] * 100 / (2.0 * g["diam_inf"] * g["trace_Cinv_half"])
    assert B == pytest.approx(2 * G * K ** (1 / p))
    with pytest.raises(ValueError, match="domain must be 'box' or 'ball'"):
        M.geometry(C, domain="simplex")


def test_theorem_bounds_validation():
    C, X = np.ones(4), np.ones((5, 4))
    with pytest.raises(ValueError, match="either noise_multiplier or"):
        M.theorem1_bound(C, X, n=5)
    with pytest.raises(ValueError, match="r_std"):
        M.theorem1_bound(C, 2.0, n=5, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="delta must be in \\(0, 1\\), got delta=2"):
        M.theorem2_bound(C, X, n=5, epsilon=1.0, delta=2.0)
    with pytest.raises(ValueError, match="n must be a positive integer, got n=2.5"):
        M.theorem2_bound(C, X, n=2.5, noise_multiplier=1.0)
    out = M.theorem2_bound(np.ones((3, 4)), np.array([1.0, 2.0, 3.0]), n=10, noise_multiplier=1.0, r_ada=0.0)
    assert out.shape == (3,) and np.all(np.diff(out) > 0)


@given(seed=st.integers(0, 10 ** 6))
def test_holder_sandwich_and_rates(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 200))
    s = rng.uniform(1e-4, 1, d)
    g = M.geometry_comparison(s)
    assert g["pasan"] * (1 - 1e-12) <= g["pagan"] <= g["sqrt_d_pasan"] * (1 + 1e-12)
    # on the box diam_2 = √d diam_∞, so Eq. (8)'s rate never exceeds Eq. (9)'s
    assert M.pagan_rate(s, 1000, 1.0, 1e-6) <= M.pasan_rate(s, 1000, 1.0, 1e-6) * (1 + 1e-12)
    # upper / lower bound ratios: logarithmic factors only (optimality "up to logs", §5)
    ratio_box = M.pagan_rate(s, 10 ** 6, 1.0, 1e-6) / M.lower_bound_box(s, 10 ** 6, 1.0)
    assert ratio_box == pytest.approx(2 * math.log(d / 1e-6) * math.log(d) ** 2.5)
    ratio_ball = M.pasan_rate(s, 10 ** 6, 1.0, 1e-6, diam2=2.0) / M.lower_bound_ball(s, 10 ** 6, 1.0)
    assert ratio_ball == pytest.approx(2 * math.log(d / 1e-6) * math.log(d))


def test_corollary_gap_grows_like_n_to_the_one_over_p():
    d = 100
    s = POWER(d)
    C = s ** (-4 / 3)
    p = math.log(d)
    G = M.G_p(C, s, 2 * p)
    r = [M.theorem2_bound(C, G, n=n, epsilon=1.0, delta=1e-5, r_ada=0.0) / M.pagan_rate(s, n, 1.0, 1e-5)
         for n in (10 ** 4, 10 ** 8)]
    assert r[1] / r[0] == pytest.approx(10 ** (4 / p), rel=1e-9)


# ------------------------------------------------------------------------------------------------
# Algorithm 3 and Theorem 3


def _naive_alg3(z, r, eps, delta, rng, T, rule="paper"):
    n, d = z.shape
    out = [None] * d
    S = list(range(d))
    Delta = 1.0
    for t in range(1, T + 1):
        rho = 4 * r * Delta * math.log(r)
        std = math.sqrt(rho ** 4 * T * d * math.log(T / delta) / (n * n * eps * eps))
        keep = []
        draws = rng.standard_normal(len(S)) if S else []
        for j, xi in zip(S, draws):
            est2 = sum(min(z[i, j] ** 2, rho ** 2) for i in range(n)) / n + std * xi
            if rule == "paper":
                hit = est2 >= 0 and math.sqrt(est2) >= 2.0 ** (-t - 1)
            else:
                hit = est2 >= 2.0 ** (-t - 1)
            if hit:
                out[j] = 2.0 ** (-t)
            else:
                keep.append(j)
        S = keep
        Delta /= 2
    for j in S:
        out[j] = 2.0 ** (-T)
    return np.array(out)


@settings(max_examples=10)
@given(seed=st.integers(0, 10 ** 6), rule=st.sampled_from(["paper", "squared"]),
       eps=st.floats(0.5, 50.0), r=st.floats(1.2, 4.0))
def test_algorithm3_matches_naive_loop(seed, rule, eps, r):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 6))
    z = rng.standard_normal((200, d)) * POWER(d)
    z0 = z.copy()
    T = M.algorithm3_rounds(d)
    fast, info = M.private_second_moment(z, r, eps, 1e-5, seed=seed, rule=rule, full_output=True)
    slow = _naive_alg3(z, r, eps, 1e-5, np.random.default_rng(seed), T, rule)
    assert np.array_equal(fast, slow)
    assert np.array_equal(z, z0)  # input not modified
    assert info["rounds"] == T and np.all((info["frozen_round"] >= 1) & (info["frozen_round"] <= T + 1))
    assert np.allclose(fast, 2.0 ** -np.minimum(info["frozen_round"], T))


def test_algorithm3_meets_theorem3_at_its_sample_size():
    d, r, eps, delta, beta = 8, 1.5, 2.0, 1e-5, 0.1
    s = POWER(d)
    n = int(M.theorem3_sample_size(d, r, eps, delta, beta))
    rng = np.random.default_rng(2024)
    fails = 0
    for _ in range(6):
        z = checks._gaussian_data(rng, n, s)
        fails += not M.theorem3_guarantee(M.private_second_moment(z, r, eps, delta, seed=rng), s).all()
    assert fails == 0


def test_algorithm3_readings_that_break_theorem3():
    d, eps, delta = 10, 1.0, 1e-5
    s = POWER(d)
    rng = np.random.default_rng(5)
    z = checks._gaussian_data(rng, int(M.theorem3_sample_size(d, 1.5, eps, delta, 0.1)), s)
    # ALGORITHMS.md's squared threshold: σ_2 = 0.35 frozen at 2^{-3} < σ_2/2; σ_j ≤ 0.19 never frozen
    sq = M.private_second_moment(z, 1.5, eps, delta, seed=1, rule="squared")
    ok = M.theorem3_guarantee(sq, s)
    assert sq[1] == 2.0 ** -3 and not ok[1]
    assert np.all(sq[2:] == 2.0 ** -M.algorithm3_rounds(d)) and not ok[2:].any()
    assert M.theorem3_guarantee(M.private_second_moment(z, 1.5, eps, delta, seed=1), s).all()
    # r close to 1: ρ_t = 4 r Δ log r < Δ/4 — nothing is ever frozen
    small = M.private_second_moment(z[:20000], 1.05, eps, delta, seed=1)
    assert np.all(small == 2.0 ** -M.algorithm3_rounds(d))
    assert M.gaussian_moment_ratio(d) == pytest.approx(math.sqrt(2 / math.pi))


def test_algorithm3_validation():
    z = np.ones((10, 3))
    with pytest.raises(ValueError, match="r must be finite and > 1 .*got r=1.0"):
        M.private_second_moment(z, 1.0, 1.0, 1e-5)
    with pytest.raises(ValueError, match="rule must be one of"):
        M.private_second_moment(z, 2.0, 1.0, 1e-5, rule="other")
    with pytest.raises(ValueError, match="d >= 2"):
        M.private_second_moment(np.ones((10, 1)), 2.0, 1.0, 1e-5)
    with pytest.raises(ValueError, match="epsilon must be positive"):
        M.private_second_moment(z, 2.0, -1.0, 1e-5)
    assert M.private_second_moment(np.ones((10, 1)), 2.0, 1.0, 1e-5, rounds=3).shape == (1,)


def test_gaussian_mechanism_helpers_against_dpsim_accountant():
    for eps, delta in [(0.5, 1e-5), (2.0, 1e-6)]:
        mu = M.gaussian_mu(eps, delta)
        assert M.gaussian_epsilon(mu, delta) == pytest.approx(eps, rel=1e-9)
        # the Gaussian mechanism is a full-batch (q = 1) single release with noise multiplier 1/μ
        e_acc = dpsim.accounting.epsilon(1.0 / mu, 1.0, 1, delta)
        assert e_acc == pytest.approx(eps, rel=2e-2) and e_acc >= eps * (1 - 1e-9)
    out = M.algorithm3_epsilon(np.array([0.1, 1.0]), 1e-5, 10)
    T = M.algorithm3_rounds(10)
    mu = np.array([0.1, 1.0]) / math.sqrt(math.log(T / 1e-5))
    assert out == pytest.approx(M.gaussian_epsilon(mu, 1e-5))
    assert M.algorithm3_epsilon(1.0, 1e-8, 10) > 1.0 > M.algorithm3_epsilon(1.0, 1e-5, 10)


def test_theorem3_bound_and_scaling_formulas():
    s = POWER(20)
    v = M.theorem3_bound(s, 2.0, 1000, 1.0, 1e-5, r_ada=0.1)
    assert v == pytest.approx(0.1 + 2 * 2.0 * np.sum(s ** (2 / 3)) ** 1.5 * math.log(20 / 1e-5) / 1000)
    # the scaling constant is immaterial under the theorem radius: A = C/B² is scale-invariant
    X = np.random.default_rng(0).standard_normal((300, 20)) * s
    C = M.theorem3_scaling(s, 2.0)
    B1 = ellipsoid_radius(C, X, n=300, noise_multiplier=1.0, algorithm="pagan")
    B2 = ellipsoid_radius(scaling_diagonal(s, "pagan"), X, n=300, noise_multiplier=1.0, algorithm="pagan")
    assert np.allclose(C / B1 ** 2, scaling_diagonal(s, "pagan") / B2 ** 2)


# ------------------------------------------------------------------------------------------------
# Lower bounds


def test_lower_bounds_conditions_and_vectorization():
    with pytest.raises(ValueError, match="sqrt\\(d\\) log d <= n epsilon"):
        M.lower_bound_box(POWER(100), 10, 1.0)
    with pytest.raises(ValueError, match="sqrt\\(d\\) <= n epsilon"):
        M.lower_bound_ball(POWER(100), 5, 1.0)
    with pytest.raises(ValueError, match="d >= 2"):
        M.lower_bound_box(np.ones(1), 10, 1.0)
    out = M.lower_bound_box(np.vstack([POWER(10), np.ones(10)]), np.array([100, 1000]), 1.0)
    assert out.shape == (2,) and out[1] == pytest.approx(10 ** 1.5 / (1000 * math.log(10) ** 2.5))
    assert M.prop2_bound(np.array([1.0, 2.0]), 4, 100, 1.0) == pytest.approx([0.04, 0.08])


@given(n=st.integers(100, 10 ** 6), eps=st.floats(0.1, 10), d=st.integers(2, 100))
def test_lower_bounds_scale_like_one_over_n_epsilon(n, eps, d):
    s = POWER(d)
    if math.sqrt(d) * math.log(d) <= n * eps:
        assert M.lower_bound_box(s, n, eps) * n * eps == pytest.approx(M.lower_bound_box(s, 1, 1e9) * 1e9)
    if math.sqrt(d) <= n * eps:
        lb = M.lower_bound_ball(s, n, eps)
        assert lb == pytest.approx(np.sum(s) / (n * eps * math.log(d)))


# ------------------------------------------------------------------------------------------------
# verify rows (the cheap ones; the simulation rows run in `dpsim verify`)


def test_verify_rows_quick():
    registered = verify.registered()
    names = {k for k, (fam, _) in registered.items() if fam == checks.FAMILY}
    assert {"pagan_theorem1_pasan", "pagan_theorem2_pagan", "pagan_alg3_theorem3",
            "pagan_lower_bounds", "pagan_alg3_privacy", "pagan_example1_lemma32"} <= names
    for name in ("pagan_alg3_privacy", "pagan_example1_lemma32", "pagan_corollaries"):
        rows = registered[name][1]("quick", 0)
        rows = rows if isinstance(rows, list) else [rows]
        assert rows and all(r.verdict in ("pass", "sanity", "reported") for r in rows)
        assert all(r.family == checks.FAMILY and r.source.startswith("[PAGAN]") for r in rows)


def test_pasan_rate_default_diameter_is_the_box():
    # Eq. (9) with diam_2 = 2√d (the box [−1, 1]^d): hand value
    sigma = np.arange(1, 11, dtype=float) ** -1.5
    n, eps, dlt = 5000, 1.0, 1e-5
    hand = 2 * math.sqrt(10) * sigma.sum() * math.log(10 / dlt) / (n * eps)
    assert float(M.pasan_rate(sigma, n, eps, dlt)) == pytest.approx(hand, rel=1e-12)
    assert float(M.pasan_rate(sigma, n, eps, dlt, diam2=1.0)) == pytest.approx(
        hand / (2 * math.sqrt(10)), rel=1e-12)
