"""PASAN / PAGAN ([PAGAN], Algorithms 1–2) and the ellipsoid projection kernel.

Oracles: ``scipy.optimize.brentq`` on the secular equation for the projection; naive single-trial,
example-by-example references of the two algorithms (below, written from [PAGAN] Alg. 1–2 and
ALGORITHMS §2.4) fed with the engine's random streams; a direct diagonal AdaGrad loop for the
non-private limit; the chi-square distribution for the declared noise scale; a hand computation
of the Theorem 1 / 2 radius.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats
from scipy.optimize import brentq

import dpsim
from dpsim.privacy import ellipsoid as P
from dpsim import accounting, optimizers, problems
from dpsim.privacy._ellipsoid import project_ellipsoid
from dpsim.backend import Backend
from dpsim.privacy import clip_l2
from dpsim.transforms import Batch, StepContext, named_chain
from dpsim.transforms.preconditioners import adagrad, precondition

from dpsim.testing import assert_distribution_matches
from support.naive import example_grad, streams

# ---------------------------------------------------------------------------------------------
# Oracles


def brentq_project(g, a):
    """π_A(g) and λ by brentq on φ(λ) = Σ a_j g_j² / (1 + λ a_j)² − 1 (math.fsum sums)."""
    g = np.asarray(g, dtype=float)
    a = np.broadcast_to(np.asarray(a, dtype=float), g.shape)
    if math.fsum(a * g * g) <= 1.0:
        return g.copy(), 0.0

    def phi(lam):
        return math.fsum(a * g * g / (1.0 + lam * a) ** 2) - 1.0

    hi = 2.0 * math.sqrt(math.fsum(g * g / a)) + 1.0  # φ(hi) < 0
    lam = brentq(phi, 0.0, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=2000)
    return g / (1.0 + lam * a), lam


def assert_matches_oracle(g, a, rtol=1e-10):
    p, lam = project_ellipsoid(g, a, return_lambda=True)
    pr, lr = brentq_project(g, a)
    # coordinate-wise relative error (π_j = g_j/(1+λa_j) has the sign and support of g)
    np.testing.assert_allclose(p, pr, rtol=rtol, atol=0)
    # λ enters π only through the factors 1/(1 + λ a_j): compare their relative change.  (A
    # relative test on λ itself is ill-conditioned just outside the boundary, where λ ≈ 0.)
    kappa = float(np.max(np.broadcast_to(a, np.shape(g)) / (1.0 + lr * np.asarray(a))))
    assert abs(lam - lr) * kappa <= rtol
    return p, lam


# ---------------------------------------------------------------------------------------------
# Projection: oracle, properties, edge cases


def test_projection_matches_brentq_oracle():
    rng = np.random.default_rng(0)
    for _ in range(300):
        d = int(rng.integers(1, 200))
        span = rng.uniform(0, 8)  # a_max/a_min up to 1e8
        a = 10 ** rng.uniform(-span / 2, span / 2, d)
        g = rng.standard_normal(d) * 10 ** rng.uniform(-3, 3)
        assert_matches_oracle(g, a)
        # just outside the boundary: λ tiny, the hardest case for a relative test on λ
        g2 = g / math.sqrt(math.fsum(a * g * g)) * (1 + 10 ** rng.uniform(-8, -2))
        assert_matches_oracle(g2, a)


@pytest.mark.parametrize("d", [1, 2, 7, 1000, 10_000])
@pytest.mark.parametrize("span", [1e-8, 1e8, 1e16])
def test_projection_extreme_axis_ratios(d, span):
    """a_max/a_min from 1e-8 (nearly a ball) to 1e16 (a from 1e-8 to 1e8), d up to 1e4."""
    rng = np.random.default_rng(d)
    a = 10 ** rng.uniform(-math.log10(span) / 2, math.log10(span) / 2, d) if span > 1 else (
        1.0 + span * rng.random(d))
    for scale in (1e-3, 1.0, 1e3, 1e100):
        g = rng.standard_normal(d) * scale
        assert_matches_oracle(g, a)
    two = np.where(np.arange(d) % 2 == 0, 1e-8, 1e8)  # two extreme groups of axes
    assert_matches_oracle(rng.standard_normal(d) * 50.0, two)


def test_projection_d1_closed_form():
    g = np.array([[3.0], [-0.5], [0.0], [-20.0]])
    a = np.array([4.0])
    p, lam = project_ellipsoid(g, a, return_lambda=True)
    np.testing.assert_allclose(p.ravel(), [0.5, -0.5, 0.0, -0.5], rtol=1e-15)
    np.testing.assert_allclose(lam, [(3 / 0.5 - 1) / 4, 0.0, 0.0, (20 / 0.5 - 1) / 4], rtol=1e-14)


def test_zero_rows_project_to_zero_and_batches_are_rowwise():
    rng = np.random.default_rng(1)
    R, b, d = 3, 5, 6
    g = rng.standard_normal((R, b, d)) * 3
    g[0, 2] = 0.0
    g[2] = 0.0
    a = rng.uniform(0.5, 4.0, (R, 1, d))  # one ellipsoid per trial
    g0 = g.copy()
    a0 = a.copy()
    p, lam = project_ellipsoid(g, a, return_lambda=True)
    assert np.array_equal(g, g0) and np.array_equal(a, a0)  # inputs untouched
    assert np.all(p[0, 2] == 0) and np.all(p[2] == 0) and lam[2].max() == 0 and lam[0, 2] == 0
    for r in range(R):
        for i in range(b):
            pr, _ = brentq_project(g[r, i], a[r, 0])
            np.testing.assert_allclose(p[r, i], pr, rtol=1e-10, atol=0)
    # a shared (d,) ellipsoid broadcasts the same way
    p2 = project_ellipsoid(g, a[1, 0])
    np.testing.assert_array_equal(p2[1], p[1])


def test_scalar_a_is_l2_clipping():
    rng = np.random.default_rng(2)
    g = rng.standard_normal((50, 9)) * 2
    np.testing.assert_allclose(project_ellipsoid(g, 1 / 1.5**2), clip_l2(g, 1.5), rtol=1e-13)


def test_dtype_and_non_numpy_backend():
    import array_api_strict as xps

    rng = np.random.default_rng(3)
    g = rng.standard_normal((4, 5)) * 3
    a = rng.uniform(0.5, 2.0, 5)
    ref = project_ellipsoid(g, a)
    p32 = project_ellipsoid(g.astype(np.float32), a)
    assert p32.dtype == np.float32
    np.testing.assert_allclose(p32, ref, rtol=1e-6)
    ps = project_ellipsoid(xps.asarray(g), xps.asarray(a))
    assert type(ps).__module__.split(".")[0] == "array_api_strict"
    np.testing.assert_array_equal(np.asarray(ps._array), ref)


def test_non_finite_rows_give_nan():
    g = np.array([[np.inf, 1.0], [np.nan, 0.0], [3.0, 4.0]])
    p = project_ellipsoid(g, np.ones(2))
    assert np.all(np.isnan(p[:2])) and np.allclose(p[2], [0.6, 0.8])


@pytest.mark.parametrize("a,needle", [
    (np.array([1.0, 0.0, 2.0]), "a[1]=0.0"),
    (np.array([1.0, -3.0, 2.0]), "a[1]=-3.0"),
    (np.array([1.0, np.nan, 2.0]), "finite"),
    (np.array([np.inf, 1.0, 2.0]), "finite"),
    (np.ones(4), "does not broadcast"),
    (np.ones((2, 2, 3)), "does not broadcast"),
    (np.ones((5, 1, 1, 3)), "does not broadcast"),
])
def test_bad_a_raises_naming_the_value(a, needle):
    with pytest.raises(ValueError, match=None) as exc:
        project_ellipsoid(np.ones((4, 3)), a)
    assert needle in str(exc.value)


@st.composite
def _cases(draw):
    d = draw(st.integers(1, 12))
    g = draw(hnp.arrays(np.float64, d, elements=st.floats(-1e3, 1e3, allow_subnormal=False)))
    loga = draw(hnp.arrays(np.float64, d, elements=st.floats(-4, 4)))
    return g, 10.0 ** loga


@given(_cases())
def test_projection_properties(case):
    g, a = case
    p, lam = project_ellipsoid(g, a, return_lambda=True)
    q = math.fsum(a * p * p)
    assert q <= 1.0 + 1e-12  # inside
    assert lam >= 0.0
    # idempotent, bit for bit (the kernel's final nudge puts π inside by its own test)
    assert np.array_equal(project_ellipsoid(p, a), p)
    # KKT: g − π = λ A π, λ ≥ 0, λ (πᵀAπ − 1) = 0
    nrm = float(np.linalg.norm(g))
    assert np.linalg.norm(g - p - lam * a * p) <= 1e-10 * nrm
    if lam > 0:
        assert abs(q - 1.0) <= 1e-12
        # parallel to the outward normal A π with a non-negative multiplier, independently of λ
        r, nv = g - p, a * p
        mu = float(r @ nv) / float(nv @ nv)
        assert mu >= 0 and np.linalg.norm(r - mu * nv) <= 1e-10 * nrm
    else:
        assert np.array_equal(p, g)
    # points inside are returned unchanged
    if math.fsum(a * g * g) > 0:
        inside = g * (0.999 / math.sqrt(math.fsum(a * g * g)))
        pi, li = project_ellipsoid(inside, a, return_lambda=True)
        assert np.array_equal(pi, inside) and li == 0.0


def test_kernel_without_jit_gives_same_result(jit_on_off):
    """NUMBA_DISABLE_JIT=1: the kernel runs as plain Python and gives the jitted bits."""
    code = (
        "import numpy as np, json, sys\n"
        "from dpsim.privacy._ellipsoid import project_ellipsoid\n"
        "rng = np.random.default_rng(7)\n"
        "g = rng.standard_normal((3, 6, 9)) * 4; g[1, 2] = 0\n"
        "a = 10 ** rng.uniform(-3, 3, (3, 1, 9))\n"
        "p, lam = project_ellipsoid(g, a, return_lambda=True)\n"
        "json.dump([p.tolist(), lam.tolist()], sys.stdout)\n"
    )
    off, on = jit_on_off(code).json()
    for x, y in zip(off, on):
        np.testing.assert_allclose(np.array(x), np.array(y), rtol=1e-14, atol=0)


def test_parallel_and_serial_kernels_agree_bitwise():
    from dpsim.privacy import _ellipsoid as E

    rng = np.random.default_rng(4)
    G = rng.standard_normal((64, 40)) * 3
    A = 10 ** rng.uniform(-2, 2, (4, 40))
    SA = np.sqrt(A)
    aidx = np.repeat(np.arange(4), 16).astype(np.int64)
    outs = []
    for fn in (E._project_serial, E._project_parallel):
        out, lam = np.empty_like(G), np.empty(64)
        fn(G, A, SA, 1 / SA, aidx, out, lam)
        outs.append((out, lam))
    assert np.array_equal(outs[0][0], outs[1][0]) and np.array_equal(outs[0][1], outs[1][1])


# ---------------------------------------------------------------------------------------------
# Naive single-trial references of PASAN / PAGAN ([PAGAN] Alg. 1–2), same streams as the engine


def naive_pasan_pagan(problem, algorithm, *, lr, sigma, radius, C, steps, batch_size, trials=1,
                      seed=0, sampling="replacement", eps=1e-12):
    """Trial by trial, example by example; A = C/radius², ξ ~ N(0, A⁻¹) drawn as z/√a.

    PASAN: α_k = α/√(Σ||ĝ^i||²), x ← proj(x − α_k ĝ);
    PAGAN: x_j ← proj(x_j − α ĝ_j/√(Σ (ĝ_j^i)²)).
    ``radius=inf`` means no projection (only with σ = 0).  Returns the final (R, d) parameters.
    """
    n, d = problem.n, problem.d
    sampler, rng = streams(seed, n, batch_size, trials, sampling)
    C = np.broadcast_to(np.asarray(C, dtype=float), (d,))
    a = C / radius**2
    w = np.zeros((trials, d))
    acc = np.zeros((trials, d)) if algorithm == "pagan" else np.zeros(trials)
    for _ in range(steps):
        bi = sampler.draw()
        z = rng.standard_normal((trials, d)) if sigma > 0 else None
        for r in range(trials):
            total = np.zeros(d)
            for slot in range(bi.idx.shape[1]):
                if bi.mask is not None and not bi.mask[r, slot]:
                    continue
                g = example_grad(problem, w[r], int(bi.idx[r, slot]))
                total += g if math.isinf(radius) else brentq_project(g, a)[0]
            gh = total / batch_size
            if z is not None:
                gh = gh + (sigma / batch_size) * z[r] / np.sqrt(a)
            if algorithm == "pasan":
                acc[r] += float(gh @ gh)
                w[r] = w[r] - lr * gh / max(math.sqrt(acc[r]), eps)
            else:
                acc[r] += gh * gh
                w[r] = w[r] - lr * gh / np.maximum(np.sqrt(acc[r]), eps)
        if problem.has_domain:
            w = np.asarray(problem.project(w))
    return w


@pytest.fixture(scope="module")
def absreg():
    return problems.absolute_regression(80, 6, seed=3)


@pytest.mark.parametrize("sampling", ["replacement", "poisson"])
@pytest.mark.parametrize("algorithm", ["pasan", "pagan"])
@pytest.mark.parametrize("scaling", ["identity", "optimal"])
def test_matches_naive_reference(absreg, algorithm, scaling, sampling):
    kw = dict(steps=12, batch_size=7, trials=3, seed=5, sampling=sampling)
    radius, sigma, lr = 0.6, 0.8, 0.3  # radius below most gradient norms: projection active
    opt = optimizers.get(algorithm, lr=lr, noise_multiplier=sigma, radius=radius, scaling=scaling)
    res = dpsim.simulate(absreg, opt, **kw)
    C = np.ones(absreg.d) if scaling == "identity" else (
        (absreg.scales / absreg.scales.max()) ** -P.OPTIMAL_EXPONENT[algorithm])
    ref = naive_pasan_pagan(absreg, algorithm, lr=lr, sigma=sigma, radius=radius, C=C, **kw)
    np.testing.assert_allclose(res.params, ref, rtol=0, atol=1e-11)
    assert np.nanmax(res.records["projected_fraction"]) > 0.5


def test_per_trial_hyperparameters_match_naive(absreg):
    lrs, sigmas, radii = [0.1, 0.3], [0.5, 2.0], [0.4, 1.5]
    kw = dict(steps=10, batch_size=5, seed=9, sampling="replacement")
    res = dpsim.simulate(absreg, optimizers.get("pagan", lr=lrs, noise_multiplier=sigmas,
                                                radius=radii), trials=2, **kw)
    for r in range(2):
        # trial r of the run sees row r of the (R, b) batches and of the (R, d) noise: rerun the
        # naive reference with R = 2 and keep row r
        ref = naive_pasan_pagan(absreg, "pagan", lr=lrs[r], sigma=sigmas[r], radius=radii[r],
                                C=1.0, trials=2, **kw)
        np.testing.assert_allclose(res.params[r], ref[r], rtol=0, atol=1e-11)


@pytest.mark.parametrize("sampling", ["replacement", "poisson"])
def test_pagan_identity_noiseless_unprojected_is_diagonal_adagrad(absreg, sampling):
    """A = I, radius = inf, σ = 0: w ← proj_box(w − α g/√(Σ g²)) with g the minibatch mean."""
    kw = dict(steps=25, batch_size=8, trials=3, seed=2, sampling=sampling)
    lr = 0.2
    res = dpsim.simulate(absreg, optimizers.get("pagan", lr=lr, noise_multiplier=0.0,
                                                radius=math.inf), **kw)
    sampler, _ = streams(kw["seed"], absreg.n, kw["batch_size"], kw["trials"], sampling)
    w = np.zeros((kw["trials"], absreg.d))
    v = np.zeros_like(w)
    for _ in range(kw["steps"]):
        bi = sampler.draw()
        m = np.ones(bi.idx.shape, bool) if bi.mask is None else bi.mask
        g = absreg.per_example_grads(w, bi.idx) * m[:, :, None]
        g = g.sum(axis=1) / kw["batch_size"]
        v += g * g
        with np.errstate(invalid="ignore", divide="ignore"):
            step = np.where(v > 0, g / np.sqrt(v), 0.0)
        w = np.clip(w - lr * step, -1.0, 1.0)
    np.testing.assert_allclose(res.params, w, rtol=0, atol=1e-13)
    assert res.epsilon(1e-5) == math.inf if sampling == "poisson" else True


# ---------------------------------------------------------------------------------------------
# Declared noise scale


@pytest.mark.parametrize("sigma,radius,b", [(1.0, 0.5, 10), (3.0, 2.0, 4)])
def test_noise_variance_matches_declared_scale(absreg, sigma, radius, b):
    """ĝ − g̃ must be N(0, s²/a_j) per coordinate, s = σ/b, a = C/B² ([PAGAN] Alg. 1, line 6)."""
    be = Backend("numpy", seed=11)
    R, d = 3000, absreg.d
    ctx = StepContext(be, R, b, 1, n=absreg.n, sampling="replacement")
    noisy = P.ellipsoid_privatizer(sigma, radius=radius, scaling="optimal", algorithm="pagan")
    clean = P.ellipsoid_privatizer(0.0, radius=radius, scaling="optimal", algorithm="pagan")
    assert noisy.privacy[0].noise_multiplier == sigma
    w = np.zeros((R, d))
    idx = np.random.default_rng(0).integers(0, absreg.n, size=(R, b))
    batch = Batch(absreg, w, idx, None, b)
    ctx.t = 1
    u, _ = noisy.update(batch, noisy.init(w), w, ctx)
    u0, _ = clean.update(batch, clean.init(w), w, ctx)
    z = u - u0  # (R, d)
    C = (absreg.scales / absreg.scales.max()) ** (-4 / 3)
    var = (sigma / b) ** 2 * radius**2 / C  # s² / a_j
    level = 1e-4 / d  # Bonferroni over coordinates
    for j in range(d):
        stat = float(np.sum(z[:, j] ** 2) / var[j])  # ~ χ²(R) (known zero mean)
        assert stats.chi2.ppf(level / 2, R) <= stat <= stats.chi2.ppf(1 - level / 2, R), j
    # the declared law itself (not only the scale): z_j / √var_j are i.i.d. N(0, 1) over trials and
    # coordinates (independent draws per coordinate; Kolmogorov–Smirnov, false-alarm rate 1e-4)
    assert_distribution_matches(z / np.sqrt(var), stats.norm(0.0, 1.0), alpha=1e-4,
                                what="(g_hat - g_tilde) / declared scale")


# ---------------------------------------------------------------------------------------------
# simulate end to end, accounting


@pytest.mark.parametrize("algorithm", ["pasan", "pagan"])
def test_simulate_end_to_end_both_samplings(algorithm):
    prob = problems.absolute_regression(400, 20, seed=1)
    sigma, T, b = 1.0, 150, 20
    # a public radius: the Theorem 1/2 formula on a public sample from the same distribution
    public = problems.absolute_regression(400, 20, seed=101)
    C = P.scaling_diagonal(public.scales, algorithm)
    B = P.ellipsoid_radius(C, public.X, n=prob.n, noise_multiplier=sigma, algorithm=algorithm,
                           domain="box", domain_radius=public.domain.radius)
    opt = optimizers.get(algorithm, lr=0.2, noise_multiplier=sigma, scaling="optimal", radius=B)
    for sampling in ("replacement", "poisson"):
        res = dpsim.simulate(prob, opt, steps=T, batch_size=b, trials=4, seed=3, sampling=sampling)
        assert np.all(np.isfinite(res.loss))
        assert res.loss[-1].mean() < 0.6 * res.loss[0].mean()
        assert np.all(np.abs(res.params) <= 1.0)
        if sampling == "replacement":
            with pytest.raises(accounting.UnsupportedAccountingError):
                res.epsilon(1e-5)
        else:
            ref = accounting.epsilon(sigma, b / prob.n, T, 1e-5)
            assert res.epsilon(1e-5) == pytest.approx(ref, rel=1e-12)


def test_backends_agree(backend_name, absreg):
    kw = dict(steps=8, batch_size=6, trials=2, seed=4, sampling="poisson")
    opt = optimizers.get("pagan", lr=0.3, noise_multiplier=0.7, radius=0.8, scaling="optimal")
    ref = dpsim.simulate(absreg, opt, **kw)
    got = dpsim.simulate(absreg, opt, backend=backend_name, **kw)
    if backend_name == "cupy":  # different generator: only check it runs and stays in the box
        assert np.all(np.abs(got.params) <= 1.0)
    else:
        np.testing.assert_allclose(got.params, ref.params, rtol=0, atol=1e-13)


def test_registered_and_validated():
    assert {"pasan", "pagan"} <= set(optimizers.names())
    for bad, needle in [(dict(noise="pink"), "pink"),
                        (dict(noise="banded:0"), "banded:0"),
                        (dict(scaling="diagonal"), "scaling='diagonal'"),
                        (dict(sigma_hat=[1.0, 2.0]), "sigma_hat"),
                        (dict(radius=math.inf, noise_multiplier=1.0), "radius=inf"),
                        (dict(radius=-1.0), "radius"),
                        (dict(noise_multiplier=-1.0), "noise_multiplier"),
                        (dict(eps=0.0), "eps"),
                        (dict(scaling=[1.0, -2.0]), "scaling[1]=-2.0")]:
        for name in ("pasan", "pagan"):
            with pytest.raises(ValueError) as exc:
                optimizers.get(name, **bad)
            assert needle in str(exc.value), (bad, str(exc.value))
    assert optimizers.get("pagan", noise="gaussian", radius=1.0).private
    assert not optimizers.get("pagan", noise="gaussian").private  # radius=None: data-dependent


@pytest.mark.parametrize("noise", ["banded:3", "sqrt_toeplitz"])
def test_correlated_noise_in_the_ellipsoid_privatizer(noise):
    """DP-MF noise replaces ξ: ĝ − g̃ = (σ/b)·B/√C ⊙ sens(M)(M⁻¹Z)_t, accounted unamplified."""
    import dpsim
    from dpsim.privacy import mf

    prob = problems.absolute_regression(300, 4, seed=2)
    T, sig, b, B = 6, 0.7, 10, 5.0
    kw = dict(steps=T, batch_size=b, trials=2, seed=4)
    opt = optimizers.get("pasan", lr=0.0, noise_multiplier=sig, radius=B, noise=noise)
    res = dpsim.simulate(prob, opt, **kw)
    assert np.all(np.isfinite(res.params))
    st = mf.noise_stream(noise, T)
    assert res.privacy["unamplified"][0] == [pytest.approx(sig * st.sens / st.worst_sens)]
    assert np.isfinite(res.epsilon(1e-5))


def test_auto_radius_needs_a_known_problem():
    opt = optimizers.get("pasan", noise_multiplier=1.0)  # radius=None
    for prob in (problems.least_squares(50, 3, seed=0),
                 problems.absolute_regression(50, 3, domain=None, seed=0)):
        with pytest.raises(ValueError, match="pass radius=B"):
            dpsim.simulate(prob, opt, steps=2, batch_size=5)
    with pytest.raises(ValueError, match="sigma_hat"):
        dpsim.simulate(problems.least_squares(50, 3, seed=0),
                       optimizers.get("pagan", scaling="optimal", radius=1.0), steps=2, batch_size=5)


def test_pagan_refuses_non_box_domain():
    class Ball(problems.Problem):
        has_domain = True

        def __init__(self):
            super().__init__(name="ball", n=10, d=2, config={"name": "ball"})

        def loss(self, w):
            return np.sum(w * w, axis=1)

        def per_example_grads(self, w, idx):
            return np.broadcast_to(2 * w[:, None, :], idx.shape + (2,)).copy()

        def project(self, w):
            nrm = np.maximum(np.linalg.norm(w, axis=1, keepdims=True), 1.0)
            return w / nrm

    with pytest.raises(ValueError, match="box domain"):
        dpsim.simulate(Ball(), optimizers.get("pagan", radius=1.0), steps=2, batch_size=2)
    dpsim.simulate(Ball(), optimizers.get("pasan", radius=1.0), steps=2, batch_size=2)  # fine


def test_explicit_scaling_array_and_sigma_hat():
    """An explicit C (or sigma_hat) gives the same run as the equivalent built-in choice."""
    prob = problems.absolute_regression(60, 4, seed=2)
    C = (prob.scales / prob.scales.max()) ** (-4 / 3)
    kw = dict(steps=6, batch_size=5, trials=2, seed=1)
    outs = []
    for priv in (P.ellipsoid_privatizer(0.5, radius=0.7, scaling="optimal", algorithm="pagan"),
                 P.ellipsoid_privatizer(0.5, radius=0.7, scaling=C, algorithm="pagan"),
                 P.ellipsoid_privatizer(0.5, radius=0.7, scaling="optimal", algorithm="pagan",
                                        sigma_hat=3.0 * prob.scales)):
        step = precondition(adagrad(guard="max", eps=1e-12))
        opt = optimizers.Optimizer(name="pagan", hyperparameters={},
                                   transform=named_chain(("privatizer", priv), ("preconditioner", step),
                                                         ("lr", dpsim.transforms.scale(-0.2))))
        outs.append(dpsim.simulate(prob, opt, **kw).params)
    np.testing.assert_allclose(outs[1], outs[0], rtol=0, atol=1e-14)
    np.testing.assert_allclose(outs[2], outs[0], rtol=0, atol=1e-14)


# ---------------------------------------------------------------------------------------------
# Theorem 1 / 2 radius


def _hand_radius(C, grads, n, eps, delta, algorithm, p, r=1.0, domain="box"):
    d = len(C)
    normsC = [math.sqrt(sum(C[j] * g[j] ** 2 for j in range(d))) for g in grads]
    G = (sum(x ** (2 * p) for x in normsC) / len(grads)) ** (1 / (2 * p))
    trinv = sum(1 / c for c in C)
    if domain == "box":
        D2, Dinf, DC = 2 * r * math.sqrt(d), 2 * r, 2 * r * math.sqrt(trinv)
    else:
        D2, Dinf, DC = 2 * r, 2 * r, 2 * r / math.sqrt(min(C))
    L = math.log(1 / delta)
    if algorithm == "pasan":
        inner = DC * n * eps / (D2 * math.sqrt(trinv * L))
    else:
        inner = DC * n * eps / (Dinf * math.sqrt(L) * sum(c ** -0.5 for c in C))
    return 2 * G * inner ** (1 / p)


@pytest.mark.parametrize("algorithm", ["pasan", "pagan"])
@pytest.mark.parametrize("domain", ["box", "ball"])
def test_ellipsoid_radius_hand_computation(algorithm, domain):
    C = [1.0, 4.0, 9.0]
    grads = [[1.0, 0.5, -0.2], [0.0, 0.0, 0.0], [-2.0, 0.1, 0.3], [0.3, -0.7, 0.05]]
    n, eps, delta = 1000, 2.0, 1e-6
    for p in (None, 1.0, 2.5):
        pp = max(1.0, math.log(3)) if p is None else p
        want = _hand_radius(C, grads, n, eps, delta, algorithm, pp, r=1.5, domain=domain)
        got = P.ellipsoid_radius(np.array(C), np.array(grads), n=n, epsilon=eps, delta=delta,
                                 algorithm=algorithm, domain=domain, domain_radius=1.5, p=p)
        assert got == pytest.approx(want, rel=1e-13)
        # σ = √log(1/δ)/ε gives the same number (nε/√log(1/δ) ↦ n/σ)
        sig = math.sqrt(math.log(1 / delta)) / eps
        got2 = P.ellipsoid_radius(np.array(C), np.array(grads), n=n, noise_multiplier=sig,
                                  algorithm=algorithm, domain=domain, domain_radius=1.5, p=p)
        assert got2 == pytest.approx(want, rel=1e-13)
    assert P.ellipsoid_radius(np.array(C), np.array(grads), n=n, noise_multiplier=0.0,
                              algorithm=algorithm) == math.inf
    # per-row C and the moment given directly
    rows = P.ellipsoid_radius(np.array([C, [1.0, 1.0, 1.0]]), np.array(grads), n=n,
                              noise_multiplier=1.0, algorithm=algorithm)
    assert rows.shape == (2,)
    G = P.empirical_moment(np.array(C), np.array(grads), 2 * math.log(3))
    assert rows[0] == pytest.approx(P.ellipsoid_radius(np.array(C), G, n=n, noise_multiplier=1.0,
                                                       algorithm=algorithm), rel=1e-13)


def test_empirical_moment_large_p_does_not_overflow():
    g = np.array([[1e200, 0.0], [0.0, 3e199]])
    got = P.empirical_moment(np.ones(2), g, 40.0)
    assert got == pytest.approx(1e200 * ((1 + 0.3**40) / 2) ** (1 / 40), rel=1e-13)


@pytest.mark.parametrize("algorithm", ["pasan", "pagan"])
def test_auto_radius_is_theorem_formula_on_the_problem(algorithm):
    """radius=None on absolute_regression: B from ellipsoid_radius with G(z_i; C) = ||a_i||_C."""
    prob = problems.absolute_regression(300, 8, seed=4)
    sigma, b = 1.3, 10
    be = Backend("numpy", seed=0)
    ctx = StepContext(be, 2, b, 1, n=prob.n, sampling="poisson")
    priv = P.ellipsoid_privatizer(sigma, scaling="optimal", algorithm=algorithm)
    w = np.zeros((2, prob.d))
    ctx.t = 1
    _, state = priv.update(Batch(prob, w, np.zeros((2, b), np.int64), None, b), priv.init(w), w, ctx)
    C = P.scaling_diagonal(prob.scales, algorithm)
    p = math.log(prob.d)
    want = _hand_radius(list(C), prob.X.tolist(), prob.n, 1.0, math.exp(-(sigma**2)), algorithm, p)
    assert state.radius[0] == pytest.approx(want, rel=1e-12)
    np.testing.assert_allclose(state.a[0], C / want**2, rtol=1e-12)


def test_per_coordinate_scaling_through_the_registry():
    """A (d,) scaling array given to optimizers.get is per coordinate, not per trial."""
    import dpsim
    from dpsim import optimizers, problems

    prob = problems.absolute_regression(200, 5, seed=0)
    opt = optimizers.get("pagan", lr=0.1, noise_multiplier=0.5, radius=10.0,
                         scaling=[1.0, 2.0, 3.0, 4.0, 5.0])
    res = dpsim.simulate(prob, opt, steps=5, batch_size=10, trials=3, sampling="replacement")
    assert res.params.shape == (3, 5) and np.all(np.isfinite(res.params))


def test_data_dependent_radius_is_declared_not_private():
    """radius=None computes the Theorem 1/2 radius from the training data: the run is declared
    non-private (ε = ∞, the record says why); a public radius is a Gaussian release whose record
    says the radius is public."""
    import dpsim

    prob = problems.absolute_regression(200, 4, seed=0)
    kw = dict(steps=2, batch_size=10, trials=2, seed=0)
    for name in ("pasan", "pagan"):
        opt = optimizers.get(name, noise_multiplier=1.0)
        assert not opt.private
        res = dpsim.simulate(prob, opt, **kw)
        assert res.epsilon(1e-5) == math.inf
        assert "training data" in res.privacy["note"]
        res = dpsim.simulate(prob, optimizers.get(name, noise_multiplier=1.0, radius=3.0), **kw)
        assert math.isfinite(res.epsilon(1e-5))
        assert "public radius" in res.privacy["events"][0]["sensitivity"]
