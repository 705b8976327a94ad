"""Truncated CDP ([L2P] App. A): conversions, subsampling conditions, Algorithm 3, sinh-normal.

Oracles: closed forms re-derived by hand, sympy (symbolic identity for ρ_a), mpmath (high
precision), brute-force minimization over Rényi orders, brute-force sensitivity on a grid,
quadrature and a Kolmogorov–Smirnov test for the sinh-normal mechanism.
"""

import math

import mpmath
import numpy as np
import pytest
from scipy import optimize, stats

from dpsim.analysis import tcdp as T
import dpsim.privacy.tcdp as core
from dpsim.testing import assert_distribution_matches


EPS_GRID = np.array([0.01, 0.05, 0.1, 0.5, 1.0, 4.0, 20.0])
DELTA_GRID = np.array([1e-12, 1e-8, 1e-5, 1e-2, 0.3])


# ------------------------------------------------------------------------------------------------
# ρ_a and ω_a


def test_reexports_are_the_core_functions():
    for name in ["rho_a", "omega_a", "tcdp_to_dp", "ctcdp_to_dp", "gaussian_zcdp", "subsample",
                 "norm_sq_sensitivity", "init_budget", "compose"]:
        assert getattr(T, name) is getattr(core, name)


def test_rho_a_solves_the_epsilon_equation_numerically():
    eps, dlt = np.meshgrid(EPS_GRID, DELTA_GRID)
    r = T.rho_a(eps, dlt)
    assert r.shape == eps.shape
    L = np.log(1 / dlt)
    np.testing.assert_allclose(r + 2 * np.sqrt(r * L), eps, rtol=1e-12)
    # the paper's printed form (Eq. (12)) is the same number
    a = L / eps
    s = np.sqrt(a * (a + 1))
    paper = eps * s / (((1 + a) + s) * (a + s))
    np.testing.assert_allclose(r, paper, rtol=1e-10)


def test_rho_a_matches_mpmath_root():
    for eps, dlt in [(0.05, 1e-8), (1.0, 1e-5), (8.0, 1e-3)]:
        mpmath.mp.dps = 40
        L = -mpmath.log(mpmath.mpf(dlt))
        root = mpmath.findroot(lambda x: x * x + 2 * x * mpmath.sqrt(L) - eps, 0.01)  # x = √ρ
        assert T.rho_a(eps, dlt) == pytest.approx(float(root ** 2), rel=1e-12)


def test_rho_a_symbolic_identity():
    sp = pytest.importorskip("sympy")
    x, eps = sp.symbols("x epsilon", positive=True)
    a = sp.sinh(x) ** 2          # a > 0; then √(a(a+1)) = sinh x cosh x
    s = sp.sinh(x) * sp.cosh(x)
    rho = eps * s / (((1 + a) + s) * (a + s))  # paper Eq. (12) with √(a(a+1)) written out
    L = a * eps                                # log(1/δ) = a ε
    # ρ + 2√(ρL) − ε, with √(ρL) = ε sinh x / (sinh x + cosh x) (both factors positive)
    sqrt_rhoL = eps * sp.sinh(x) / (sp.sinh(x) + sp.cosh(x))
    assert sp.simplify((sqrt_rhoL ** 2 - rho * L).rewrite(sp.exp)) == 0
    assert sp.simplify((rho + 2 * sqrt_rhoL - eps).rewrite(sp.exp)) == 0
    # ω_a is the root of log(1/δ) = (ω − 1)² ρ_a
    omega = (1 + a) + s
    assert sp.simplify(((omega - 1) ** 2 * rho - L).rewrite(sp.exp)) == 0


def test_omega_a_is_the_admissible_root():
    eps, dlt = np.meshgrid(EPS_GRID, DELTA_GRID)
    om = T.omega_a(eps, dlt)
    r = T.rho_a(eps, dlt)
    L = np.log(1 / dlt)
    a = L / eps
    np.testing.assert_allclose((om - 1) ** 2 * r, L, rtol=1e-10)
    # substituting Eq. (11) into log(1/δ) ≥ (ω−1)²ρ gives aω ≥ (ω − 1)(ω − (a + 1)) (the paper
    # prints "ω ≥ ..." without the factor a, but its roots are those of this quadratic):
    # ω_a and (1 + a) − √(a(a+1)); only ω_a is ≥ a + 1 > 1
    other = (1 + a) - np.sqrt(a * (a + 1))
    np.testing.assert_allclose(a * om, (om - 1) * (om - (a + 1)), rtol=1e-10)
    np.testing.assert_allclose(a * other, (other - 1) * (other - (a + 1)), rtol=1e-6, atol=1e-9)
    assert np.all(om >= a + 1) and np.all(other < a + 1)
    assert T.omega_of_a(a[0, 0]) == pytest.approx(om[0, 0])


# ------------------------------------------------------------------------------------------------
# Theorem A.1 and Lemma A.7


def _brute_force_eps(rho, omega, delta):
    """min over 1 < α ≤ ω of ρα + log(1/δ)/(α − 1) (standard RDP → DP, Mironov 2017 Prop. 3)."""
    L = math.log(1 / delta)
    f = lambda al: rho * al + L / (al - 1)  # noqa: E731
    hi = omega if math.isfinite(omega) else 1 + 1e3 * (1 + math.sqrt(L / rho))
    grid = 1 + np.geomspace(1e-9, hi - 1, 20001)
    best = float(np.min(f(grid)))
    res = optimize.minimize_scalar(f, bounds=(1 + 1e-12, hi), method="bounded",
                                   options={"xatol": 1e-12})
    return min(best, float(res.fun))


@pytest.mark.parametrize("rho", [1e-6, 1e-3, 0.05, 1.0])
@pytest.mark.parametrize("omega", [1.5, 3.0, 30.0, 1e4, math.inf])
@pytest.mark.parametrize("delta", [1e-10, 1e-5, 0.1])
def test_tcdp_to_dp_matches_brute_force_over_orders(rho, omega, delta):
    eps = T.tcdp_to_dp(rho, omega, delta)
    bf = _brute_force_eps(rho, omega, delta)
    assert eps == pytest.approx(bf, rel=1e-6)
    assert eps <= bf * (1 + 1e-9)


def test_tcdp_to_dp_both_branches_and_zero():
    L = math.log(1e5)
    # first branch: log(1/δ) ≤ (ω−1)²ρ
    assert T.tcdp_to_dp(1.0, 100.0, 1e-5) == pytest.approx(1.0 + 2 * math.sqrt(L))
    # second branch: ω binds
    assert T.tcdp_to_dp(1e-4, 2.0, 1e-5) == pytest.approx(2e-4 + L)
    # branches agree on the boundary
    rho = L / 9.0  # (ω − 1)² ρ = L at ω = 4
    assert T.tcdp_to_dp(rho, 4.0, 1e-5) == pytest.approx(rho + 2 * math.sqrt(rho * L), rel=1e-12)
    assert T.tcdp_to_dp(rho, 4.0, 1e-5) == pytest.approx(4 * rho + L / 3, rel=1e-12)
    assert T.tcdp_to_dp(0.0, 5.0, 1e-5) == 0.0
    out = T.tcdp_to_dp(np.array([[1e-4], [1.0]]), np.array([2.0, 100.0]), 1e-5)
    assert out.shape == (2, 2)


def test_budget_round_trip_through_theorem_a1():
    eps, dlt = np.meshgrid(EPS_GRID, DELTA_GRID)
    back = T.tcdp_to_dp(T.rho_a(eps, dlt), T.omega_a(eps, dlt), dlt)
    np.testing.assert_allclose(back, eps, rtol=1e-9)


def test_lemma_a7_numbers():
    eps, dlt = 0.05, 1e-8
    a = math.log(1 / dlt) / eps
    assert a == pytest.approx(368.4136148790473, rel=1e-12)
    ra = T.rho_a(eps, dlt)
    # at ρ = ρ_a: exactly the budget
    e, d = T.ctcdp_to_dp(ra, a)
    assert e == pytest.approx(eps, rel=1e-12) and d == pytest.approx(dlt, rel=1e-9)
    # at ρ = ρ_a / 2: ε halves, δ = e^{−aε/2} = √δ_budget = 1e-4
    e2, d2 = T.ctcdp_to_dp(ra / 2, a)
    assert e2 == pytest.approx(eps / 2, rel=1e-12) and d2 == pytest.approx(1e-4, rel=1e-9)
    # hand computation of the slope (ω_a − 1)ω_a/(ω_a − a − 1) = (√a + √(a+1))²
    om = 1 + a + math.sqrt(a * (a + 1))
    assert e2 / (ra / 2) == pytest.approx((om - 1) * om / (om - a - 1), rel=1e-12)
    assert e2 / (ra / 2) == pytest.approx((math.sqrt(a) + math.sqrt(a + 1)) ** 2, rel=1e-12)
    # Lemma A.7's point lies on the Theorem A.1 curve, exactly on its branch boundary
    for rho in [ra, ra / 3, ra / 100]:
        e, d = T.ctcdp_to_dp(rho, a)
        assert T.tcdp_to_dp(rho, om, d) == pytest.approx(e, rel=1e-9)
        assert math.log(1 / d) == pytest.approx((om - 1) ** 2 * rho, rel=1e-9)
    # vectorized
    e_arr, d_arr = T.ctcdp_to_dp(np.array([ra, ra / 2]), a)
    np.testing.assert_allclose(e_arr, [eps, eps / 2], rtol=1e-12)


def test_gaussian_zcdp_and_compose():
    assert T.gaussian_zcdp(2.0, 4.0) == pytest.approx(4.0 / 32.0)
    np.testing.assert_allclose(T.gaussian_zcdp(1.0, np.array([1.0, 2.0])), [0.5, 0.125])
    assert T.compose([0.1, 0.2, 0.3]) == pytest.approx(0.6)
    np.testing.assert_allclose(T.compose(np.ones((3, 4)), axis=0), 3 * np.ones(4))


# ------------------------------------------------------------------------------------------------
# Lemma A.3: sensitivity of the squared norm of a clipped-gradient sum


def _brute_norm_sq_sensitivity(b, C, adjacency, k=9):
    """Max |‖S‖² − ‖S'‖²| over 1-D configurations on a grid (extremes are attained in 1-D)."""
    vals = np.linspace(-C, C, k)
    best = 0.0
    import itertools

    for rest in itertools.product(vals, repeat=b - 1):
        R = sum(rest)
        for g in vals:
            if adjacency == "remove":
                best = max(best, abs((R + g) ** 2 - R ** 2))
            else:
                for g2 in vals:
                    best = max(best, abs((R + g) ** 2 - (R + g2) ** 2))
    return best


@pytest.mark.parametrize("b", [1, 2, 3, 4])
@pytest.mark.parametrize("adjacency", ["remove", "replace"])
def test_norm_sq_sensitivity_matches_brute_force(b, adjacency):
    C = 1.5
    assert T.norm_sq_sensitivity(b, C, adjacency=adjacency) == pytest.approx(
        _brute_norm_sq_sensitivity(b, C, adjacency))


def test_norm_sq_sensitivity_lemma_a3_formula_and_bound_in_d_dims():
    assert T.norm_sq_sensitivity(10, 2.0) == pytest.approx(19 * 4.0)
    np.testing.assert_allclose(T.norm_sq_sensitivity(np.array([1, 5]), 1.0, adjacency="replace"), [1.0, 16.0])
    rng = np.random.default_rng(0)
    b, C, d = 5, 1.0, 4
    bound_rm = T.norm_sq_sensitivity(b, C)
    bound_rp = T.norm_sq_sensitivity(b, C, adjacency="replace")
    for _ in range(2000):
        g = rng.standard_normal((b + 1, d))
        g *= np.minimum(1, C / np.linalg.norm(g, axis=1))[:, None]
        S = g[:b].sum(0)
        assert abs(S @ S - (S - g[0]) @ (S - g[0])) <= bound_rm + 1e-12
        S2 = S - g[0] + g[b]
        assert abs(S @ S - S2 @ S2) <= bound_rp + 1e-12
    with pytest.raises(ValueError, match="adjacency"):
        T.norm_sq_sensitivity(3, 1.0, adjacency="swap")


# ------------------------------------------------------------------------------------------------
# Lemma A.6 / Theorem A.3: subsampling conditions


def test_subsample_value_and_conditions_pass():
    assert T.subsample(1e-3, 0.05, 10.0) == pytest.approx(13 * 0.05 ** 2 * 1e-3)
    out = T.subsample(np.array([1e-4, 1e-3]), 0.05, 10.0)
    np.testing.assert_allclose(out, 13 * 0.0025 * np.array([1e-4, 1e-3]))
    assert T.subsample(0.0, 0.05, 10.0) == 0.0


@pytest.mark.parametrize("rho,q,a,kw,name,value", [
    (1e-3, 0.2, 10.0, {}, "q_range", "0.2"),
    (0.2, 0.05, 0.01, {}, "rho_range", "0.2"),
    (0.01, 0.09, 100.0, {}, r"\(10a\)", "0.01"),
    (1e-3, 0.05, 10.0, {"rho_tot": 1e-6}, r"\(10b\)", "3.25e-05"),
])
def test_subsample_raises_naming_the_condition(rho, q, a, kw, name, value):
    with pytest.raises(ValueError, match=name) as exc:
        T.subsample(rho, q, a, **kw)
    assert value in str(exc.value)


def test_subsample_conditions_report_9_and_13():
    c = T.subsample_conditions(0.5, 0.5, 0.05)
    # (9): log 2 = 0.69 < 3·0.5·(2 + 1) = 4.5
    assert not c["(9)"]["ok"] and c["(9)"]["rhs"] == pytest.approx(4.5)
    # (13): 0.5 > log(2)/6; with a = 0.05, ω_a = 1.28 < 1.5, so (13) is tighter than (10a)
    assert not c["(13)"]["ok"]
    assert c["(10a)"]["rhs"] > c["(13)"]["rhs"]
    # with ρ, q ≤ 0.1, (9) always holds: 3ρ(2 + log2(1/ρ)) ≤ 1.6 < log 10
    rho = np.geomspace(1e-12, 0.1, 200)[:, None]
    q = np.geomspace(1e-6, 0.1, 50)[None, :]
    assert np.all(T.subsample_conditions(rho, q, 1.0)["(9)"]["ok"])


def test_validation_errors_name_values():
    with pytest.raises(ValueError, match="epsilon=-1"):
        T.rho_a(-1.0, 1e-5)
    with pytest.raises(ValueError, match="delta=1.5"):
        T.omega_a(1.0, np.array([1e-5, 1.5]))
    with pytest.raises(ValueError, match="omega=0.5"):
        T.tcdp_to_dp(0.1, 0.5, 1e-5)
    with pytest.raises(ValueError, match="rho=-0.1"):
        T.tcdp_to_dp(-0.1, 5.0, 1e-5)
    with pytest.raises(ValueError, match="a=0"):
        T.ctcdp_to_dp(0.1, 0.0)
    with pytest.raises(ValueError, match="sigma=0"):
        T.gaussian_zcdp(1.0, 0.0)
    with pytest.raises(ValueError, match="batch_size=2.5"):
        T.norm_sq_sensitivity(2.5, 1.0)
    with pytest.raises(ValueError, match="steps=0"):
        T.init_budget(1.0, 1e-5, 0, 100, 1.0)
    with pytest.raises(ValueError, match="sensitivity=-1"):
        T.init_budget(1.0, 1e-5, 10, 100, -1.0)


# ------------------------------------------------------------------------------------------------
# Algorithm 3


def _hand_budget(eps, delta, T_, n, D, b):
    L = math.log(1 / delta)
    a = L / eps
    om = 1 + a + math.sqrt(a * (a + 1))
    rho_tot = (math.sqrt(L + eps) - math.sqrt(L)) ** 2
    q = b / n
    rho0 = rho_tot / T_ / (13 * q * q)
    rho_ub = min(math.log(1 / q) / (4 * om), math.log(1 / q) / 6, rho_tot / (13 * q * q), 0.1)
    return dict(a=a, omega_a=om, rho_tot=rho_tot, q=q, rho_0=rho0, rho_ub=rho_ub,
                sigma_g=D / math.sqrt(2 * rho0), sigma_min=D / math.sqrt(2 * rho_ub))


def test_init_budget_paper_setting_quadratic():
    """(0.05, 1e-8)-DP on the n = 60 quadratic of App. C.1, T = 30, Δ = 2 (C = 1, replace-one)."""
    out = T.init_budget(0.05, 1e-8, 30, 60, 2.0)
    assert out["q_nominal"] == pytest.approx((math.sqrt(60) + 10) / 60)   # 0.296 > 0.1
    assert out["batch_size"] == 6 and out["q"] == pytest.approx(0.1)      # ⌊0.1·60⌋
    hand = _hand_budget(0.05, 1e-8, 30, 60, 2.0, 6)
    for k, v in hand.items():
        assert out[k] == pytest.approx(v, rel=1e-10), k
    # concrete numbers
    assert out["rho_tot"] == pytest.approx(3.3883286591e-05, rel=1e-9)
    assert out["sigma_g"] == pytest.approx(479.7936952, rel=1e-8)
    assert out["sigma_min"] < out["sigma_g"]
    assert all(bool(c["ok"]) for c in out["conditions"].values())
    assert set(out["conditions"]) == {"q_range", "rho_range", "(9)", "(10a)", "(10b)", "(13)"}
    # the uniform schedule spends exactly ρ_tot in T steps
    assert 30 * 13 * out["q"] ** 2 * 2.0 ** 2 / (2 * out["sigma_g"] ** 2) == pytest.approx(out["rho_tot"])


def test_init_budget_large_n_keeps_the_paper_rate():
    out = T.init_budget(1.0, 1e-5, 1000, 10_000, 1.0)
    assert out["batch_size"] == 110 and out["q"] == pytest.approx(0.011)  # (√n + 10)/n exactly
    hand = _hand_budget(1.0, 1e-5, 1000, 10_000, 1.0, 110)
    for k, v in hand.items():
        assert out[k] == pytest.approx(v, rel=1e-10), k


def test_init_budget_raises_q_to_the_smaller_root():
    n, T_ = 1_000_000, 10
    out = T.init_budget(1.0, 1e-5, T_, n, 1.0)
    b = out["batch_size"]
    assert b > (math.sqrt(n) + 10)           # moved up from the nominal 1010
    rho_step = out["rho_step"]
    c = 4 * out["omega_a"] * rho_step / 13    # (10a) boundary: q² log(1/q) = c, smaller root
    q_root = optimize.brentq(lambda q: q * q * math.log(1 / q) - c, 1e-6, 0.5)
    assert b == math.ceil(q_root * n)
    assert all(bool(c["ok"]) for c in out["conditions"].values())
    with pytest.raises(ValueError, match=r"\(10a\)"):
        T.subsample(rho_step / (13 * ((b - 1) / n) ** 2), (b - 1) / n, out["a"])


def test_init_budget_infeasible_and_options():
    with pytest.raises(ValueError, match="more steps"):
        T.init_budget(1.0, 1e-5, 1, 1_000_000, 1.0)
    with pytest.raises(ValueError, match="n=5"):
        T.init_budget(1.0, 1e-5, 100, 5, 1.0)
    nn = T.init_budget(0.05, 1e-8, 30, 60, 2.0, noise_norm=True)
    base = T.init_budget(0.05, 1e-8, 30, 60, 2.0)
    assert nn["sigma_g"] == pytest.approx(base["sigma_g"] * math.sqrt(2))
    # gradient at σ_min plus the norm release at σ_g cost exactly ρ_ub (inner)
    assert 2.0 ** 2 / (2 * nn["sigma_min"] ** 2) + 2.0 ** 2 / (2 * nn["sigma_g"] ** 2) == pytest.approx(nn["rho_ub"])
    given = T.init_budget(0.05, 1e-8, 30, 60, 2.0, q=0.05)
    assert given["batch_size"] == 3 and not given["q_adjusted"]
    assert base["q_adjusted"]  # the paper's (√60 + 10)/60 = 0.296 was moved to 0.1
    with pytest.raises(ValueError, match=r"q=0.3 gives batch floor\(q n\)=18 for n=60"):
        T.init_budget(0.05, 1e-8, 30, 60, 2.0, q=0.3)
    arr = T.init_budget(np.array([0.05, 0.1, 1.6]), 1e-8, 30, 60, 2.0)
    assert arr["batch_size"].tolist() == [6, 6, 6] and arr["sigma_g"].shape == (3,)
    assert np.all(np.diff(arr["sigma_g"]) < 0)


# ------------------------------------------------------------------------------------------------
# Theorem A.2: sinh-normal mechanism


def test_sinh_normal_sampler_matches_pdf_and_cdf():
    m = T.sinh_normal(A=3.0, sigma=5.0)
    x = m.sample(1.5, size=20_000, rng=np.random.default_rng(12345))

    class SinhNormal(stats.rv_continuous):  # the mechanism's own CDF as a scipy law
        def _cdf(self, y):
            return m.cdf(y, 1.5)

    assert_distribution_matches(x, SinhNormal(name="sinh_normal")(), alpha=1e-3, seed=12345,
                                what="sinh-normal samples (A=3, sigma=5, shift 1.5)")
    from scipy import integrate

    tot, _ = integrate.quad(lambda y: m.pdf(y, 1.5), -np.inf, np.inf)
    assert tot == pytest.approx(1.0, abs=1e-8)
    for lo, hi in [(-2.0, 0.5), (0.5, 4.0), (4.0, 9.0)]:
        p, _ = integrate.quad(lambda y: m.pdf(y, 1.5), lo, hi, epsabs=1e-13)
        assert p == pytest.approx(m.cdf(hi, 1.5) - m.cdf(lo, 1.5), abs=1e-10)


@pytest.mark.parametrize("D,omega,rho", [(1.0, 2.0, 0.5), (1.0, 10.0, 0.0025), (0.3, 5.0, 0.2),
                                         (2.0, 50.0, 1e-3), (1.0, 3.0, 15.0)])
def test_sinh_normal_renyi_divergence_within_tcdp_bound(D, omega, rho):
    m = T.sinh_normal_for_tcdp(D, rho, omega)
    assert m.A == pytest.approx(8 * D * omega) and 8 * D * D / m.sigma ** 2 == pytest.approx(rho)
    assert m.tcdp_parameters(D) == pytest.approx((rho, omega))
    alphas = np.linspace(1.001, omega * (1 - 1e-9), 12)
    for shift in (D, -D, D / 2):
        div = m.renyi_divergence(alphas, shift)
        assert np.all(div <= rho * alphas)
        assert np.all(np.diff(div) >= -1e-10)   # non-decreasing in α


def test_sinh_normal_quadrature_oracle_and_condition_is_not_vacuous():
    # A → ∞: Gaussian, D_α = α Δ²/(2σ²) exactly
    g = T.sinh_normal(A=1e6, sigma=2.0)
    for al in (1.0, 1.5, 4.0, 20.0):
        assert g.renyi_divergence(al, 1.0) == pytest.approx(al / 8.0, rel=1e-6)
    # below Thm A.2's lower limit ρ ≥ 1/(4ω²) the bound D_α ≤ ρα fails for some α < ω
    D, omega, rho = 1.0, 10.0, 1e-4
    with pytest.raises(ValueError, match="1/\\(4 omega\\^2\\)"):
        T.sinh_normal_for_tcdp(D, rho, omega)
    bad = T.sinh_normal(8 * D * omega, D * math.sqrt(8 / rho))
    alphas = np.linspace(1.01, omega * 0.999, 12)
    assert np.any(bad.renyi_divergence(alphas, D) > rho * alphas)
    with pytest.raises(ValueError, match="sigma=-1"):
        T.sinh_normal(1.0, -1.0)


# ------------------------------------------------------------------------------------------------
# gaps found by mutation testing (tools/mutation.py): boundaries that no test reached


def test_condition_13_value_and_boundary():
    # (13): ρ <= log(1/q)/6, checked at q = 1/2 where it is the binding condition
    from dpsim.privacy import tcdp as P

    q, a = 0.5, 1.0
    edge = math.log(2.0) / 6.0
    for rho, ok in ((edge * (1 - 1e-9), True), (edge * (1 + 1e-9), False)):
        c = P.subsample_conditions(rho, q, a)["(13)"]
        assert bool(c["ok"]) is ok
        assert float(c["rhs"]) == pytest.approx(edge, rel=1e-15)


def test_init_budget_rate_raised_by_the_rho_0_cap():
    # a huge per-step budget: the nominal rate would give ρ_0 = ρ'_0/(13q²) > 0.1, so q moves up
    # to the smallest batch with ρ_0 <= 0.1, i.e. q >= √(ρ'_0/1.3)
    from dpsim.privacy import tcdp as P

    n = 10 ** 6
    b = P.init_budget(100.0, 1e-2, 10 ** 6, n, 1.0)
    assert b["q_adjusted"] and b["q"] > b["q_nominal"]
    q_lo = math.sqrt(b["rho_step"] / 1.3)
    assert b["batch_size"] == math.ceil(q_lo * n - 1e-6)
    assert b["rho_0"] <= 0.1 and b["rho_0"] == pytest.approx(b["rho_step"] / (13 * b["q"] ** 2))
    assert b["rho_0"] > 0.1 * (1 - 2.0 / b["batch_size"])  # the cap binds (one batch less breaks it)


def test_init_budget_noise_multiplier_with_sensitivity():
    from dpsim.privacy import tcdp as P

    b1 = P.init_budget(1.0, 1e-5, 1000, 10 ** 4, 1.0)
    b = P.init_budget(1.0, 1e-5, 1000, 10 ** 4, 2.5)
    assert b["sigma_g"] == pytest.approx(2.5 / math.sqrt(2 * b["rho_0"]))
    assert b["sigma_g"] == pytest.approx(2.5 * b1["sigma_g"])
    assert b["noise_multiplier"] == pytest.approx(b["sigma_g"] / 2.5) == pytest.approx(b1["noise_multiplier"])


def test_sinh_normal_divergence_zero_shift_and_finiteness_threshold():
    # D_α(P‖P) = 0; the divergence is finite exactly for α − 1 < 1/(e^{2|s|/A} − 1)
    from dpsim.analysis import tcdp as T

    m = T.sinh_normal(2.0, 1.0)
    assert m.renyi_divergence(3.0, 0.0) == 0.0
    a_star = 1.0 + 1.0 / math.expm1(2.0 * 1.0 / 2.0)  # 1.5820 for shift 1, A = 2
    below, above = m.renyi_divergence([a_star - 1e-3, a_star + 1e-3], 1.0)
    assert math.isfinite(below) and below > 0 and math.isinf(above)
    assert math.isinf(m.renyi_divergence(1.9, -1.0))  # |shift|: the same threshold
    assert math.isfinite(m.renyi_divergence(1.3, 1.0))
