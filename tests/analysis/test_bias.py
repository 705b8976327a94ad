"""``analysis.bias``: the DP-Adam design space of [DESIGN] (reconstructed) and Φ of [ADAMBC].

Oracles: published numbers ([ADAMBC]), closed forms (non-central χ², a double integral for two
terms), sympy (the variance derivation), direct Monte Carlo of the EMA, dpsim.privacy.mf's streamed
correlated noise, and ``dpsim.simulate`` runs with frozen parameters (lr = 0) so that the clean
clipped mean is known.  Statistical tolerances are confidence intervals (levels stated at each
test) asserted with :mod:`dpsim.testing` (``assert_bound_holds``: Student t for means, exact
Clopper–Pearson for fractions); hyperparameters come from its public strategies
(``bound_params``, ``seeds``); hypothesis runs derandomized in CI (tests/conftest.py).

[DESIGN] printed numbers: none of the paper's example values (its "consider setting σ = …, b = …,
the dimension should be ≲ …" examples, App. C's "equal to roughly …", the Fig. 4 percentages)
survived text extraction, so there is nothing of [DESIGN] to reproduce numerically; the
functions are checked against their derivations and simulation instead.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from dpsim.transforms import lookup
import dpsim
from dpsim.analysis import bias as B
from dpsim.analysis import verify
from dpsim.analysis.checks import design as checks
from dpsim import optimizers, problems
from dpsim.privacy import mf
from dpsim.testing import assert_bound_holds, scaled_trials
from dpsim.testing.strategies import bound_params, seeds

Z4 = 4.0  # the mean tests below allow ±4 standard errors (two-sided 6e-5 for a normal mean)


def _mean_equals(x, value, what):
    """``E[x] = value`` (per column of ``x``): two one-sided Student-t assertions whose tolerance is
    ±Z4 standard errors, i.e. at the one-sided level ``t.sf(Z4, R − 1)`` per side and column (the
    level a ±4 s.e. interval really has with ``R`` trials)."""
    x = np.asarray(x, dtype=float)
    m = x.shape[1] if x.ndim == 2 else 1
    a = m * float(stats.t.sf(Z4, x.shape[0] - 1))  # assert_bound_holds divides by m (Bonferroni)
    for side in ("upper", "lower"):
        assert_bound_holds(x, value, side=side, alpha=a, what=what)


def _fraction_equals(k, n, p, what, level=1e-4):
    """``k`` of ``n`` independent 0/1 outcomes have probability ``p``: exact two-sided
    Clopper–Pearson at ``level`` (``level/2`` per side)."""
    hits = np.repeat([1.0, 0.0], [k, n - k])  # the interval depends on (k, n) only
    for side in ("upper", "lower"):
        assert_bound_holds(hits, p, kind="probability", side=side, alpha=level / 2, rtol=0.0, what=what)


def _ema_mc(g, phi, beta2, t, n, rng):
    """Direct Monte Carlo of v̂_t = Σ_j w_j (g + z_j)², z_j ~ N(0, Φ), n independent coordinates."""
    w = B.ema_weights(beta2, t)
    acc = np.zeros(n)
    for wj in w:
        acc += wj * (g + math.sqrt(phi) * rng.standard_normal(n)) ** 2
    return acc


# ------------------------------------------------------------------------------------------------
# published numbers ([ADAMBC]) and Φ
# ------------------------------------------------------------------------------------------------
# (source, (σ, C, B), printed Φ, relative tolerance = half a unit of the last printed digit)
ADAMBC_PHI = [
    ("[ADAMBC] §3 Fig. 1 / Table 2 (SNLI: B=256, C=0.1, σ=0.4)", (0.4, 0.1, 256), 2.441e-8, 0.0005 / 2.441),
    ("[ADAMBC] §3 Fig. 2 'small Φ' / §5 Fig. 5 (Φ = 2.4e-8)", (0.4, 0.1, 256), 2.4e-8, 0.05 / 2.4),
    ("[ADAMBC] §3 Fig. 2 'large Φ' (B=256, C=1, σ=1)", (1.0, 1.0, 256), 1.5e-5, 0.05 / 1.5),
]


@pytest.mark.parametrize("source,args,printed,rtol", ADAMBC_PHI, ids=[s[0][:30] for s in ADAMBC_PHI])
def test_adambc_printed_phi(source, args, printed, rtol):
    assert B.noise_variance(*args) == pytest.approx(printed, rel=rtol)
    assert B.postprocessing_bias(*args) == pytest.approx(printed, rel=rtol)


def test_adambc_eq2_raw_bias():
    """[ADAMBC] Eq. 2: E[v_t] = E[v_t^c] + (1 − β2^t) Φ (before Adam's correction)."""
    phi = B.noise_variance(0.4, 0.1, 256)
    for t in (1, 10, 1000, 10000):
        assert B.postprocessing_bias(0.4, 0.1, 256, beta2=0.999, t=t, raw=True) == pytest.approx(
            (1 - 0.999 ** t) * phi, rel=1e-12)
        assert B.postprocessing_bias(0.4, 0.1, 256, beta2=0.999, t=t) == pytest.approx(phi, rel=1e-15)
    assert B.postprocessing_bias(0.4, 0.1, 256, beta2=0.999, t=None, raw=True) == pytest.approx(phi)


def test_vectorized_shapes():
    s = np.array([0.5, 1.0, 2.0])
    b = np.array([[16], [64]])
    out = B.postprocessing_bias(s, 1.0, b)
    assert out.shape == (2, 3)
    np.testing.assert_allclose(out, (s / b) ** 2)
    assert isinstance(B.postprocessing_bias(1.0, 1.0, 4), float)
    assert B.corrected_variance(np.ones(4), 0.5, 0.9, t=np.array([1, 2, 3, 4])).shape == (4,)
    assert B.negative_fraction(np.array([10, 100, 1000]), 8, 1.0, 0.9, t=50).shape == (3,)
    assert B.max_dimension(np.array([8, 16]), 1.0, 0.999).shape == (2,)
    assert B.stp_fixed_point(np.array([1.0, 2.0]), 1.0, 1.0, 4).shape == (2,)
    assert B.ema_weight_sq_sum(np.array([0.5, 0.9]), np.array([[1], [10]])).shape == (2, 2)


@pytest.mark.parametrize("call", [
    lambda: B.noise_variance(-1.0, 1.0, 4),
    lambda: B.noise_variance(1.0, 0.0, 4),
    lambda: B.noise_variance(1.0, 1.0, 0),
    lambda: B.postprocessing_bias(1.0, 1.0, 4, beta2=1.0, t=3, raw=True),
    lambda: B.postprocessing_bias(1.0, 1.0, 4, t=3, raw=True),  # beta2 missing
    lambda: B.postprocessing_bias(1.0, 1.0, 4, beta2=0.9, t=0, raw=True),
    lambda: B.postprocessing_bias(1.0, 1.0, 4, beta2=0.9, t=2.5, raw=True),
    lambda: B.postprocessing_bias(1.0, 1.0, 4, beta2=0.9, strategy="sqrt_toeplitz"),  # t missing
    lambda: B.postprocessing_bias(1.0, 1.0, 4, beta2=0.9, t=10, strategy="banded:2", steps=5),
    lambda: B.postprocessing_bias(1.0, 1.0, 4, beta2=0.9, t=3, strategy="nonsense"),
    lambda: B.postprocessing_bias(1.0, 1.0, 4, beta2=0.9, t=3, strategy=np.triu(np.ones((3, 3)))),
    lambda: B.corrected_variance(1.0, -0.1, 0.9),
    lambda: B.corrected_variance(1.0, 0.1, -0.5),
    lambda: B.negative_probability(1.0, 0.1, 0.9, method="magic"),
    lambda: B.negative_fraction(100, 8, 1.0, 0.9, regime="average"),
    lambda: B.negative_fraction(4, 8, 1.0, 0.9, regime="pessimistic"),  # d < b: not orthogonal
    lambda: B.negative_fraction(0, 8, 1.0, 0.9),
    lambda: B.max_dimension(8, 0.0, 0.9),
    lambda: B.max_dimension(8, 1.0, 0.9, fraction=0.7),
    lambda: B.max_dimension(8, 1.0, 0.9, kappa=-1.0),
    lambda: B.stp_fixed_point(1.0, 1.0, 4.0, 4),  # Φ = 1: no steady state
    lambda: B.stp_fixed_point(-1.0, 1.0, 1.0, 4),
    lambda: B.ema_weights(0.9, None),
])
def test_value_errors(call):
    with pytest.raises(ValueError):
        call()


# ------------------------------------------------------------------------------------------------
# EMA weights and the variance derivation (sympy)
# ------------------------------------------------------------------------------------------------
def test_ema_weights_sum_to_one_and_sq_sum_closed_form():
    for beta, t in [(0.0, 5), (0.5, 1), (0.9, 7), (0.999, 3000)]:
        w = B.ema_weights(beta, t)
        assert w.sum() == pytest.approx(1.0, rel=1e-12)
        assert (w * w).sum() == pytest.approx(B.ema_weight_sq_sum(beta, t), rel=1e-10)
    assert B.ema_weight_sq_sum(0.999) == pytest.approx(0.001 / 1.999)


def test_corrected_variance_sympy_derivation():
    ok, msg = checks._sympy_variance_derivation()
    assert ok, msg


def test_corrected_variance_large_t_is_papers_form():
    g, phi, beta = 0.03, 0.01, 0.999
    paper = (1 - beta) / (1 + beta) * (2 * phi ** 2 + 4 * g ** 2 * phi)
    assert B.corrected_variance(g, phi, beta) == pytest.approx(paper, rel=1e-14)
    assert B.corrected_variance(g, phi, beta, t=10 ** 6) == pytest.approx(paper, rel=1e-12)
    # finite t is larger: fewer averaged steps
    assert B.corrected_variance(g, phi, beta, t=100) > 10 * paper


@settings(max_examples=20)
@given(g=st.floats(0.0, 2.0), phi=st.floats(0.01, 4.0),
       hp=bound_params(beta=[0.0, 0.5, 0.9, 0.97, 0.99], steps=(1, 120)), seed=seeds())
def test_corrected_variance_monte_carlo(g, phi, hp, seed):
    beta, t = hp.beta, hp.steps
    n = scaled_trials(40_000)
    x = _ema_mc(g, phi, beta, t, n, np.random.default_rng(seed)) - phi
    var = x.var(ddof=1)
    se = math.sqrt(max(np.mean((x - x.mean()) ** 4) - var ** 2, 0.0) / n)
    pred = B.corrected_variance(g, phi, beta, t=t)
    assert abs(var - pred) <= Z4 * se, (var, pred, se)
    _mean_equals(x, g * g, "E[v_hat - Phi] = g^2")  # unbiased


# ------------------------------------------------------------------------------------------------
# distribution of v̂ − Φ
# ------------------------------------------------------------------------------------------------
def test_exact_single_term_is_noncentral_chi2():
    for lam in (0.0, 0.05, 0.7, 3.0):
        ref = stats.chi2.cdf(1.0, 1) if lam == 0 else stats.ncx2.cdf(1.0, 1, lam)
        assert B._imhof_cdf(np.array([1.0]), lam) == pytest.approx(ref, abs=1e-9)
        # t = 1 (or β2 = 0): v̂_1 − Φ = (g + z)² − Φ
        assert B.negative_probability(math.sqrt(lam), 1.0, 0.9, t=1) == pytest.approx(ref, abs=1e-12)
        assert B.negative_probability(math.sqrt(lam), 1.0, 0.0) == pytest.approx(ref, abs=1e-12)


@pytest.mark.parametrize("a1,a2,lam", [(0.6, 0.4, 0.1), (0.5, 0.5, 1.0), (0.9, 0.1, 0.01)])
def test_exact_two_terms_double_integral(a1, a2, lam):
    f = lambda x: stats.ncx2.pdf(x, 1, lam) * stats.ncx2.cdf(max((1 - a1 * x) / a2, 0.0), 1, lam)  # noqa: E731
    ref = integrate.quad(f, 0.0, 1.0 / a1, limit=500)[0]
    assert B._imhof_cdf(np.array([a1, a2]), lam) == pytest.approx(ref, abs=1e-8)


@pytest.mark.parametrize("beta,t", [(0.9, None), (0.99, 400), (0.999, 2000)])
def test_approximations_against_exact(beta, t):
    lams = np.array([0.005, 0.03, 0.1, 0.2])
    g = np.sqrt(lams)
    ex = B.negative_probability(g, 1.0, beta, t=t)
    sp_ = B.negative_probability(g, 1.0, beta, t=t, method="saddlepoint")
    ga = B.negative_probability(g, 1.0, beta, t=t, method="gamma")
    gs = B.negative_probability(g, 1.0, beta, t=t, method="gaussian")
    m = ex > 1e-6
    np.testing.assert_allclose(sp_[m], ex[m], rtol=5e-3)
    np.testing.assert_allclose(ga[m], ex[m], rtol=0.2)
    assert np.all(np.diff(ex) < 0)  # decreasing in λ = g²/Φ
    small = ex < 0.05
    assert np.all(gs[small] > ex[small])  # the Gaussian approximation overestimates small fractions


@settings(max_examples=25)
@given(regime=st.sampled_from(B.REGIMES),
       hp=bound_params(batch_size=(2, 64), noise_multiplier=(0.3, 4.0), beta=[0.0, 0.5, 0.9, 0.95, 0.99],
                       steps=(1, 150)),
       factor=st.floats(0.2, 5.0), seed=seeds())
def test_negative_fraction_monte_carlo(regime, hp, factor, seed):
    """Predicted vs directly simulated fraction; d drawn around the κ=1 threshold."""
    b, sigma, beta, t = hp.batch_size, hp.noise_multiplier, hp.beta, hp.steps
    d = max(1.0, round(factor * B.max_dimension(b, sigma, beta, kappa=1.0, regime=regime, t=t)))
    if regime == "pessimistic":
        d = max(d, b)
    C = 1.0
    phi = (sigma * C / b) ** 2
    g = math.sqrt(C * C / d) if regime == "optimistic" else math.sqrt(C * C / (b * d))
    n = scaled_trials(20_000)
    k = int(np.sum(_ema_mc(g, phi, beta, t, n, np.random.default_rng(seed)) - phi < 0))
    pred = B.negative_fraction(d, b, sigma, beta, clip=C, regime=regime, t=t)
    _fraction_equals(k, n, pred, "P(v_hat - Phi < 0)")


@settings(max_examples=6)
@given(hp=bound_params(batch_size=[4, 8], noise_multiplier=(1.0, 3.0), beta=[0.9, 0.95, 0.99], steps=(20, 150)),
       d=st.sampled_from([16, 64, 256]), seed=seeds(1000))
def test_negative_fraction_against_simulate(hp, d, seed):
    """dp_adam_corrected, lr = 0, on linear_box(bias=1): every example's gradient is the same ±1
    vector, so the clipped mean is ±C/√d in every coordinate (the optimistic regime exactly)."""
    b, sigma, beta, t = hp.batch_size, hp.noise_multiplier, hp.beta, hp.steps
    C = 1.0
    phi = (sigma * C / b) ** 2
    R = max(4, scaled_trials(4096) // d)
    prob = problems.linear_box(b, d, scales="ones", bias=1.0, seed=seed)
    opt = optimizers.get("dp_adam_corrected", lr=0.0, beta2=beta, clip=C, noise_multiplier=sigma)

    def neg(state, params, ctx):
        a = lookup(state, "preconditioner")
        vhat = a.v / (1.0 - beta ** a.count) if a.count else a.v + phi
        return ctx.xp.sum(ctx.xp.astype(vhat - phi < 0, vhat.dtype), axis=1)

    res = dpsim.simulate(prob, opt, steps=t, batch_size=b, trials=R, seed=seed, sampling="fixed",
                         record_every=t, metrics=(), probes={"neg": neg})
    k = int(np.asarray(res.records["neg"])[-1].sum())
    pred = B.negative_fraction(d, b, sigma, beta, regime="optimistic", t=t)
    _fraction_equals(k, R * d, pred, "P(v_hat - Phi < 0) in dpsim.simulate")


def test_negative_fraction_limits_and_clip_invariance():
    f = B.negative_fraction(np.array([10.0, 1e3, 1e5, 1e9]), 16, 1.0, 0.99, t=500)
    assert np.all(np.diff(f) > 0)
    w = B.ema_weights(0.99, 500)
    assert f[-1] == pytest.approx(B._imhof_cdf(w, 0.0), abs=1e-5)  # d → ∞: g → 0
    assert B.negative_fraction(100, 16, 0.0, 0.99) == 0.0  # no noise
    assert B.negative_fraction(300, 16, 1.0, 0.99, clip=0.1) == B.negative_fraction(300, 16, 1.0, 0.99, clip=7.0)
    # the regimes differ exactly by d → d·b
    assert B.negative_fraction(4000, 16, 1.0, 0.99, regime="pessimistic", t=300) == pytest.approx(
        B.negative_fraction(64000, 16, 1.0, 0.99, regime="optimistic", t=300), rel=1e-12)


# ------------------------------------------------------------------------------------------------
# thresholds
# ------------------------------------------------------------------------------------------------
def test_max_dimension_formula_and_scaling():
    beta, kappa = 0.999, 2.0
    kp = kappa * math.sqrt(2 * (1 - beta) / (1 + beta))
    assert B.max_dimension(64, 1.0, beta, kappa=kappa) == pytest.approx(64 ** 2 / kp, rel=1e-12)
    assert B.max_dimension(64, 2.0, beta, kappa=kappa, regime="pessimistic") == pytest.approx(64 / (4 * kp), rel=1e-12)
    # d_max ∝ b² (optimistic) and ∝ b (pessimistic), ∝ 1/σ²
    r = B.max_dimension(np.array([32, 64]), 1.0, beta)
    assert r[1] / r[0] == pytest.approx(4.0)
    r = B.max_dimension(np.array([32, 64]), 1.0, beta, regime="pessimistic")
    assert r[1] / r[0] == pytest.approx(2.0)
    assert B.max_dimension(64, 2.0, beta) == pytest.approx(B.max_dimension(64, 1.0, beta) / 4)


@pytest.mark.parametrize("kappa", [1.0, 2.0, 3.0])
def test_max_dimension_kappa_is_a_z_score(kappa):
    """At d = d_max(κ) the Gaussian-approximation fraction is Φ_N(−κ/√(1 + 2κ√(2Σw²))) ≥ Φ_N(−κ)."""
    b, s, beta, t = 64, 1.0, 0.999, 3000
    d = B.max_dimension(b, s, beta, kappa=kappa, t=t)
    f = B.negative_fraction(d, b, s, beta, t=t, method="gaussian")
    c = B.ema_weight_sq_sum(beta, t)
    assert f == pytest.approx(stats.norm.cdf(-kappa / math.sqrt(1 + 2 * kappa * math.sqrt(2 * c))), rel=1e-9)
    assert f >= stats.norm.cdf(-kappa)


@pytest.mark.parametrize("regime", B.REGIMES)
def test_max_dimension_fraction_inverts_negative_fraction(regime):
    for p in (0.01, 0.1, 0.3):
        d = B.max_dimension(128, 1.5, 0.99, regime=regime, t=1000, fraction=p)
        assert B.negative_fraction(d, 128, 1.5, 0.99, regime=regime, t=1000) == pytest.approx(p, rel=1e-6)


# ------------------------------------------------------------------------------------------------
# post-processing bias against simulation (i.i.d. and DP-MF)
# ------------------------------------------------------------------------------------------------
@settings(max_examples=10)
@given(hp=bound_params(batch_size=(1, 12), noise_multiplier=(0.2, 3.0), clip=(0.1, 3.0),
                       beta=[0.0, 0.9, 0.99, 0.999], steps=(1, 60)), seed=seeds(1000))
def test_postprocessing_bias_iid_against_simulate(hp, seed):
    b, sigma, C, beta, t = hp.batch_size, hp.noise_multiplier, hp.clip, hp.beta, hp.steps
    d, R = 32, scaled_trials(100)
    prob = problems.linear_box(b, d, scales="ones", bias=1.0, seed=seed)
    g2 = min(1.0, C / math.sqrt(d)) ** 2  # every coordinate of the clipped mean is ±min(1, C/√d)
    opt = optimizers.get("dp_adam", lr=0.0, beta2=beta, clip=C, noise_multiplier=sigma)

    def dev(state, params, ctx):
        a = lookup(state, "preconditioner")
        return ctx.xp.mean(a.v / (1.0 - beta ** a.count) - g2, axis=1) if a.count else a.v[:, 0]

    def raw(state, params, ctx):
        a = lookup(state, "preconditioner")
        return ctx.xp.mean(a.v - (1.0 - beta ** a.count) * g2, axis=1)

    res = dpsim.simulate(prob, opt, steps=t, batch_size=b, trials=R, seed=seed, sampling="fixed",
                         record_every=t, metrics=(), probes={"dev": dev, "raw": raw})
    for key, is_raw in (("dev", False), ("raw", True)):
        x = np.asarray(res.records[key])[-1]
        pred = B.postprocessing_bias(sigma, C, b, beta2=beta, t=t, raw=is_raw)
        _mean_equals(x, pred, f"post-processing bias ({key})")


def test_mf_identity_is_iid_and_matrix_path_matches_names():
    assert B.postprocessing_bias(1.0, 1.0, 4, beta2=0.9, t=7, strategy="identity") == pytest.approx(1 / 16)
    for name in ("sqrt_toeplitz", "banded:3"):
        T = 12
        M = mf.strategy(name, T)
        for t in (1, 5, 12):
            a = B.postprocessing_bias(1.0, 2.0, 4, beta2=0.8, t=t, strategy=name, steps=T)
            m = B.postprocessing_bias(1.0, 2.0, 4, beta2=0.8, t=t, strategy=M)
            assert a == pytest.approx(m, rel=1e-10)
            # App. A recursion: B_t = β B_{t−1} + (1−β) Φ E[u_t²], bias B_t/(1−β^t)
            sv = B.mf_step_variance(M, T)
            Bt = 0.0
            for j in range(t):
                Bt = 0.8 * Bt + 0.2 * 0.25 * sv[j]
            assert a == pytest.approx(Bt / (1 - 0.8 ** t), rel=1e-10)
            assert B.postprocessing_bias(1.0, 2.0, 4, beta2=0.8, t=t, strategy=M, raw=True) == pytest.approx(Bt, rel=1e-10)
    # sqrt_toeplitz noise has larger per-step variance than i.i.d. (sens(M)² = Σ c_k² grows)
    assert B.postprocessing_bias(1.0, 1.0, 1, beta2=0.9, t=50, strategy="sqrt_toeplitz") > 1.0


@settings(max_examples=12)
@given(name=st.sampled_from(["sqrt_toeplitz", "banded:2", "banded:3", "banded:6"]),
       hp=bound_params(steps=(4, 40), beta=[0.5, 0.9, 0.99]), frac=st.floats(0.05, 1.0), g=st.floats(0.0, 1.0),
       seed=seeds(1000))
def test_postprocessing_bias_mf_monte_carlo(name, hp, frac, g, seed):
    """E[v̂_t] − v̂_t^c against a Monte Carlo with dpsim.privacy.mf's streamed correlated noise."""
    from dpsim.backend import Backend

    T, beta = hp.steps, hp.beta
    t = max(1, int(round(frac * T)))
    sigma, C, b = 1.0, 1.0, 2
    phi = (sigma * C / b) ** 2
    R, d = scaled_trials(200), 50
    be = Backend("numpy", seed=seed)
    stream = mf.noise_stream(name, T)
    state = stream.init((R, d), be)
    v = np.zeros((R, d))
    for _ in range(t):
        u, state = stream.next(state, be)
        v = beta * v + (1 - beta) * (g + math.sqrt(phi) * np.asarray(u)) ** 2
    x = (v / (1 - beta ** t) - g * g).mean(axis=1)
    pred = B.postprocessing_bias(sigma, C, b, beta2=beta, t=t, strategy=name, steps=T)
    _mean_equals(x, pred, "DP-MF post-processing bias (Monte Carlo)")


@settings(max_examples=6)
@given(name=st.sampled_from(["sqrt_toeplitz", "banded:2", "banded:4"]),
       hp=bound_params(steps=(3, 40), beta=[0.5, 0.9, 0.99], noise_multiplier=(0.5, 2.0)), seed=seeds(1000))
def test_postprocessing_bias_mf_against_simulate(name, hp, seed):
    """dp_adam with ``noise=`` (DP-MF, horizon = the run's T steps), lr = 0, constant clean mean:
    E[v̂_T] − v̂_T^c against the App. A formula."""
    T, beta, sigma = hp.steps, hp.beta, hp.noise_multiplier
    b, C, d, R = 4, 1.0, 32, scaled_trials(150)
    prob = problems.linear_box(b, d, scales="ones", bias=1.0, seed=seed)
    g2 = 1.0 / d
    opt = optimizers.get("dp_adam", lr=0.0, beta2=beta, clip=C, noise_multiplier=sigma, noise=name)

    def dev(state, params, ctx):
        a = lookup(state, "preconditioner")
        return ctx.xp.mean(a.v / (1.0 - beta ** a.count) - g2, axis=1) if a.count else a.v[:, 0]

    res = dpsim.simulate(prob, opt, steps=T, batch_size=b, trials=R, seed=seed, sampling="fixed",
                         record_every=T, metrics=(), probes={"dev": dev})
    x = np.asarray(res.records["dev"])[-1]
    pred = B.postprocessing_bias(sigma, C, b, beta2=beta, t=T, strategy=name)
    _mean_equals(x, pred, "DP-MF post-processing bias (dpsim.simulate)")


# ------------------------------------------------------------------------------------------------
# scale-then-privatize steady state
# ------------------------------------------------------------------------------------------------
def test_stp_fixed_point_algebra():
    m = np.array([0.0, 1e-4, 0.3, 2.0])
    for eps in (0.0, 1e-3, 0.5):
        lo, v = B.stp_fixed_point(m, 1.0, 2.0, 4, eps_scale=eps, bracket=True)
        phi = 0.25
        np.testing.assert_allclose(v, m + phi * (np.sqrt(v) + eps) ** 2, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(lo, (m + phi * eps * eps) / (1 - phi), rtol=1e-12)
        np.testing.assert_allclose(v - lo, 2 * phi * eps * np.sqrt(v) / (1 - phi), rtol=1e-9, atol=1e-15)
        assert np.all(lo <= v * (1 + 1e-12))
    np.testing.assert_allclose(B.stp_fixed_point(m, 1.0, 2.0, 4), m / 0.75, rtol=1e-14)


@settings(max_examples=5)
@given(phi=st.floats(0.05, 0.4), hp=bound_params(clip=(8.0, 20.0)), bias=st.floats(0.3, 0.9), seed=seeds(1000))
def test_stp_fixed_point_against_simulate(phi, hp, bias, seed):
    """dp_adam_stp, lr = 0, on linear_box (bounded per-example gradients, batches with
    replacement): the time-averaged stationary v is within CI + (v* − v_lo) of v* in every
    coordinate, and clipping is inactive after burn-in (the derivation's premise).

    ``v`` follows a random multiplicative recursion (the noise scales with √v), whose stationary
    law has a power tail ``P(v > x) ~ x^{−κ}`` with ``E[(β + (1−β)Φξ²)^κ] = 1``; β2 = 0.95 and
    Φ ≤ 0.4 keep ``κ > 30`` so that the normal CI over trials is valid (for β2 = 0.9, Φ = 0.6,
    ``κ`` is only about 5 and the t-statistic's left tail is visibly heavier)."""
    C = hp.clip
    b, eps, beta = 16, 1e-3, 0.95
    sigma = b * math.sqrt(phi) / C
    scales = np.array([1.0, 0.3, 0.05])
    prob = problems.linear_box(200, 3, scales=scales, bias=bias, seed=seed)
    G = -np.asarray(prob.per_example_grads(np.zeros((1, 3)), np.arange(200)[None, :]))[0]
    m2 = G.mean(0) ** 2 + G.var(0) / b
    hi = B.stp_fixed_point(m2, sigma, C, b, eps_scale=eps)
    # E v_∞ ∈ [v_lo, v*] with v* − v_lo = 2Φε√v*/(1−Φ) (from the fixed-point equation)
    width = 2 * phi * eps * np.sqrt(hi) / (1 - phi)
    tau = 1.0 / ((1 - beta) * (1 - phi))
    burn = int(25 * tau)
    steps, R = burn + 400, scaled_trials(256)
    opt = optimizers.get("dp_adam_stp", lr=0.0, beta2=beta, clip=C, noise_multiplier=sigma, eps_scale=eps)
    probes = {f"v{j}": (lambda j: lambda s, p, c: lookup(s, "preconditioner").v[:, j])(j) for j in range(3)}
    probes["snorm"] = lambda s, p, c: c.xp.sqrt(c.xp.sum((c.xp.asarray(scales) / (c.xp.sqrt(lookup(s, "preconditioner").v) + eps)) ** 2, axis=1))
    res = dpsim.simulate(prob, opt, steps=steps, batch_size=b, trials=R, seed=seed, sampling="replacement",
                         record_every=1, metrics=(), probes=probes)
    keep = np.asarray(res.steps) >= burn
    assert np.asarray(res.records["snorm"])[keep].max() <= C
    x = np.stack([np.asarray(res.records[f"v{j}"])[keep].mean(axis=0) for j in range(3)], axis=1)  # (R, 3)
    a = 3 * float(stats.t.sf(Z4, R - 1))  # ±Z4 s.e. per coordinate (Bonferroni factor undone)
    assert_bound_holds(x, hi + width, side="upper", alpha=a, what="E[v_inf] <= v* + (v* - v_lo)")
    assert_bound_holds(x, hi - width, side="lower", alpha=a, what="E[v_inf] >= v* - (v* - v_lo)")


# ------------------------------------------------------------------------------------------------
# verify registry
# ------------------------------------------------------------------------------------------------
def test_checks_registered():
    names = [k for k, (fam, _) in verify.registered().items() if fam == checks.FAMILY]
    for expected in ("design_negative_fraction_optimistic", "design_negative_fraction_pessimistic",
                     "design_negative_fraction_threshold_mc", "design_corrected_variance",
                     "design_postprocessing_bias_iid", "design_postprocessing_bias_mf",
                     "design_stp_fixed_point"):
        assert expected in names


def test_cheap_checks_pass():
    for name in ("design_postprocessing_bias_iid", "design_postprocessing_bias_mf"):
        rows = verify.registered()[name][1]("quick", 0)
        assert rows and all(r.verdict == "pass" for r in rows), [(r.check, r.detail) for r in rows]


# ------------------------------------------------------------------------------------------------
# [DESIGN] Eq. 3's pessimistic regime where its premise holds, and where it does not


def test_pessimistic_premise_construction():
    from dpsim.analysis.checks import design as checks_design

    G, gbar = checks_design._orthogonal_mean(16, 256, 2.0)
    np.testing.assert_allclose(G @ G.T, 4.0 * np.eye(16), atol=1e-12)
    np.testing.assert_allclose(np.abs(gbar), 2.0 / math.sqrt(16 * 256), rtol=1e-12)


def test_pessimistic_regime_rows_pass_and_catch_a_factor_2():
    from dpsim.analysis.checks import design as checks_design

    rows = checks_design._check_pessimistic_regime("quick", 0)
    assert [r.verdict for r in rows] == ["pass", "pass"]
    assert all(r.strengthened() == "fail" and r.margin < 2 for r in rows)


def test_pessimistic_regime_formula_outside_its_premise_is_reported():
    from dpsim.analysis.checks import design as checks_design

    rows = checks_design._check_negative_fraction_pessimistic("quick", 0)
    reg = [r for r in rows if "regime formula" in r.check]
    assert len(reg) == 1 and reg[0].verdict == "reported"
    assert reg[0].bound < 1e-9 < 0.05 < reg[0].estimate  # 1e-12 predicted, about 0.1 measured


def test_cumulants_match_the_noncentral_chi_square():
    # Q = Σ_j a_j X_j, X_j ~ noncentral χ²_1(λ) i.i.d.: κ_n(Q) = Σ_j a_j^n κ_n(X), with κ_n(X)
    # from scipy's ncx2 (mean, variance, skewness) — independent of the module's closed forms
    from scipy.stats import ncx2

    from dpsim.analysis import bias as B

    a = np.array([0.5, 0.3, 0.2, 0.05])
    for lam in (0.0, 0.7, 4.0):
        m, v, sk = (float(x) for x in ncx2(1, lam).stats(moments="mvs"))
        k1, k2, k3 = B._cumulants(a, lam)
        assert k1 == pytest.approx(a.sum() * m, rel=1e-12)
        assert k2 == pytest.approx(np.sum(a ** 2) * v, rel=1e-12)
        assert k3 == pytest.approx(np.sum(a ** 3) * sk * v ** 1.5, rel=1e-10)


def test_saddlepoint_at_the_mean_against_the_exact_cdf():
    # Lugannani–Rice at the mean: 1/2 + κ3/(6√(2π) κ2^{3/2}); against Imhof's exact P(Q < E Q)
    from dpsim.analysis import bias as B

    a = np.full(30, 1.0 / 30)
    for lam in (0.0, 1.0):
        k1, k2, k3 = B._cumulants(a, lam)
        sp = B._saddlepoint_cdf(a, lam, x=k1)
        assert sp == pytest.approx(0.5 + k3 / (6 * math.sqrt(2 * math.pi) * k2 ** 1.5), rel=1e-12)
        assert sp == pytest.approx(B._imhof_cdf(a, lam, x=k1), abs=2e-3)
