"""DP-MF strategies and streamed correlated noise (dpsim.mf) against dense-matrix oracles."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import approx_fprime, minimize
from scipy.signal import lfilter

from dpsim.privacy import mf
from dpsim.backend import Backend, to_numpy

NAMES = ["identity", "sqrt_toeplitz", "banded:1", "banded:2", "banded:3", "banded:4"]


# ---- naive oracles (dense matrices, loops) -----------------------------------------------------
def naive_sens(M):
    return max(math.sqrt(sum(M[i, j] ** 2 for i in range(M.shape[0]))) for j in range(M.shape[1]))


def naive_prefix_rmse(M):
    T = M.shape[0]
    B = np.tril(np.ones((T, T))) @ np.linalg.inv(M)
    s = naive_sens(M)
    return math.sqrt(np.mean([s**2 * np.sum(B[t] ** 2) for t in range(T)]))


def subset_max(M, signs=False):
    """max over participation subsets S (and ±1 per step if signs) of ||Σ_{j∈S} ±M_{:,j}||."""
    T = M.shape[1]
    vals = (-1.0, 0.0, 1.0) if signs else (0.0, 1.0)
    return max(np.linalg.norm(M @ np.array(v)) for v in itertools.product(vals, repeat=T))


def streamed(name, steps, shape, backend, **kw):
    s = mf.noise_stream(name, steps, **kw)
    st = s.init(shape, backend)
    out = []
    for _ in range(steps):
        u, st = s.next(st, backend)
        out.append(to_numpy(u))
    return s, np.stack(out)


def reference_draws(seed, steps, shape, dtype="float64"):
    be = Backend("numpy", seed, dtype)
    return np.stack([be.normal(shape) for _ in range(steps)])


# ---- strategies --------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 3, 5, 17, 64, 200])
def test_sqrt_toeplitz_squares_to_prefix_sum(n):
    M = mf.strategy("sqrt_toeplitz", n)
    np.testing.assert_allclose(M @ M, mf.prefix_sum_matrix(n), rtol=0, atol=1e-12)
    assert np.array_equal(M, np.tril(M))


def test_sqrt_coefficients_are_central_binomials():
    c = mf.sqrt_toeplitz_coefficients(80)
    r = mf.sqrt_toeplitz_inverse_coefficients(80)
    for k in range(80):
        exact = Fraction(math.comb(2 * k, k), 4**k)
        assert c[k] == pytest.approx(float(exact), rel=1e-14)
    # (1−x)^{-1/2} (1−x)^{1/2} = 1
    np.testing.assert_allclose(np.convolve(c, r)[:80], np.eye(1, 80)[0], atol=1e-15)
    assert r[1] == -0.5 and np.all(r[1:] < 0)


@pytest.mark.parametrize("T", [1, 4, 30])
def test_identity_cases(T):
    for name in ("identity", "gaussian", "banded:1"):
        M = mf.strategy(name, T)
        assert np.array_equal(M, np.eye(T))
        assert mf.sensitivity(M) == 1.0
        assert mf.worst_case_sensitivity(M) == pytest.approx(math.sqrt(T), rel=1e-15)
        assert mf.prefix_rmse(M) == pytest.approx(math.sqrt((T + 1) / 2), rel=1e-14)
        assert mf.toeplitz_prefix_rmse(mf.toeplitz_coefficients(name, T), T) == pytest.approx(
            math.sqrt((T + 1) / 2), rel=1e-14)
    # every strategy is the identity for a single step
    for name in NAMES:
        assert np.array_equal(mf.strategy(name, 1), np.ones((1, 1)))


@pytest.mark.parametrize("name", NAMES + ["banded:7"])
@pytest.mark.parametrize("T", [1, 2, 7, 12])
def test_matrix_functions_against_naive(name, T):
    M = mf.strategy(name, T)
    assert np.array_equal(M, np.tril(M))
    assert mf.sensitivity(M) == pytest.approx(naive_sens(M), rel=1e-13)
    assert mf.prefix_rmse(M) == pytest.approx(naive_prefix_rmse(M), rel=1e-11)
    if T <= 12:
        # M ≥ 0 for every named strategy: ||M·1|| is exact (brute force over all subsets)
        assert np.all(M >= 0)
        assert mf.worst_case_sensitivity(M) == pytest.approx(subset_max(M), rel=1e-12)


def test_general_lower_triangular_matrices():
    rng = np.random.default_rng(3)
    for T in (3, 6):
        M = np.tril(rng.normal(size=(T, T))) + 3 * np.eye(T)
        assert mf.sensitivity(M) == pytest.approx(naive_sens(M), rel=1e-13)
        assert mf.prefix_rmse(M) == pytest.approx(naive_prefix_rmse(M), rel=1e-11)
        bound = mf.worst_case_sensitivity(M)
        assert bound == pytest.approx(sum(np.linalg.norm(M[:, j]) for j in range(T)), rel=1e-13)
        assert subset_max(M, signs=True) <= bound * (1 + 1e-12)  # a valid upper bound
    with pytest.raises(ValueError, match="lower triangular"):
        mf.prefix_rmse(np.ones((3, 3)))
    with pytest.raises(ValueError, match="square"):
        mf.sensitivity(np.ones((2, 3)))


@pytest.mark.parametrize("T", [1, 2, 7, 33, 100])
def test_coefficient_functions_match_matrices(T):
    rng = np.random.default_rng(T)
    custom = [np.r_[1.0, rng.uniform(-0.4, 0.4, size=5)], np.r_[2.0, rng.uniform(0, 1, size=40)]]
    for c in [mf.toeplitz_coefficients(n, T) for n in NAMES + ["banded:8"]] + custom:
        M = mf.toeplitz_matrix(c, T)
        assert mf.toeplitz_sensitivity(c, T) == pytest.approx(mf.sensitivity(M), rel=1e-13)
        assert mf.toeplitz_worst_case_sensitivity(c, T) == pytest.approx(
            mf.worst_case_sensitivity(M), rel=1e-12)
        assert mf.toeplitz_prefix_rmse(c, T) == pytest.approx(mf.prefix_rmse(M), rel=1e-10)
        Minv = np.linalg.inv(M)
        np.testing.assert_allclose(mf.inverse_coefficients(c, T), Minv[:, 0], rtol=1e-10, atol=1e-12)
        s2 = mf.toeplitz_sensitivity(c, T) ** 2
        np.testing.assert_allclose(mf.toeplitz_step_variance(c, T), s2 * np.diag(Minv @ Minv.T),
                                   rtol=1e-10)


def test_inverse_coefficient_paths_agree():
    T = 5000
    c = mf.sqrt_toeplitz_coefficients(T)  # long: FFT Newton path
    np.testing.assert_allclose(mf.inverse_coefficients(c, T), mf.sqrt_toeplitz_inverse_coefficients(T),
                               rtol=0, atol=1e-14)
    rng = np.random.default_rng(0)
    c = np.r_[1.0, rng.uniform(0, 0.3, 1000) / np.arange(1, 1001) ** 1.5]
    e0 = np.eye(1, T)[0]
    np.testing.assert_allclose(mf._series_inverse_fft(c, T), lfilter([1.0], c, e0), rtol=0, atol=1e-13)
    # sqrt prefix RMSE by the closed-form inverse agrees with the generic path, large T
    T = 10_000
    c = mf.sqrt_toeplitz_coefficients(T)
    assert mf.toeplitz_prefix_rmse(c, T) == pytest.approx(
        mf.toeplitz_prefix_rmse(c, T, inverse=mf.sqrt_toeplitz_inverse_coefficients(T)), rel=1e-12)


# ---- banded optimization -----------------------------------------------------------------------
def _rmse(c, T):
    return mf.toeplitz_prefix_rmse(c, T)


@pytest.mark.parametrize("T", [16, 100, 1000])
def test_banded_beats_truncated_sqrt_and_identity(T):
    ident = math.sqrt((T + 1) / 2)
    prev = ident
    for k in (2, 3, 4, 8):
        c = mf.banded_coefficients(k, T)
        assert c.shape == (min(k, T),) and c[0] == 1.0 and np.all(c > 0)
        got = _rmse(c, T)
        trunc = _rmse(mf.sqrt_toeplitz_coefficients(min(k, T)), T)
        assert got <= trunc * (1 + 1e-12) and got < ident
        if k >= 3 and T >= 100:
            assert got < 0.99 * trunc  # a real improvement, not just the initialization
        assert got <= prev * (1 + 1e-12)  # more bands never hurt
        prev = got
        assert mf.toeplitz_coefficients(f"banded:{k}", T) == pytest.approx(c)


def test_banded_approaches_sqrt_toeplitz():
    T = 64
    sq = _rmse(mf.sqrt_toeplitz_coefficients(T), T)
    ratios = [_rmse(mf.banded_coefficients(k, T), T) / sq for k in (2, 4, 8, 16, 32, 64)]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(ratios, ratios[1:]))
    assert ratios[0] > 1.5 and ratios[-2] < 1.01 and ratios[-1] <= 1.0
    # k > T is the same set as k = T
    assert np.array_equal(mf.banded_coefficients(100, T), mf.banded_coefficients(T, T))


@pytest.mark.parametrize("k,T", [(2, 50), (4, 300), (6, 1000)])
def test_banded_gradient_and_stationarity(k, T):
    e0 = np.eye(1, T)[0]
    w = np.arange(T, 0, -1.0)
    f = lambda x: mf._banded_loss_and_grad(x, T, w, e0)[0]  # noqa: E731
    x = mf.sqrt_toeplitz_coefficients(k)[1:]
    g = mf._banded_loss_and_grad(x, T, w, e0)[1]
    np.testing.assert_allclose(g, approx_fprime(x, f, 1e-7), rtol=1e-4, atol=1e-6)
    # loss = log(T · rmse²)
    assert f(x) == pytest.approx(math.log(T * _rmse(np.r_[1.0, x], T) ** 2), rel=1e-12)
    # the optimum is a local minimum: a derivative-free polish does not improve it
    xo = mf.banded_coefficients(k, T)[1:]
    polished = minimize(f, xo, method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-14})
    assert polished.fun >= f(xo) - 1e-9


def test_banded_cache_returns_copies():
    a = mf.banded_coefficients(4, 128)
    a[:] = 0
    b = mf.banded_coefficients(4, 128)
    assert b[0] == 1.0 and np.all(b > 0)


# ---- streaming ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES + ["banded:10"])
def test_stream_equals_matrix_noise(name, backend_name):
    T, shape, seed = 7, (3, 5), 11
    s, U = streamed(name, T, shape, Backend(backend_name, seed))
    if backend_name == "cupy":  # different generator: draw Z on the same backend
        bz = Backend("cupy", seed)
        Z = np.stack([to_numpy(bz.normal(shape)) for _ in range(T)])
    else:
        Z = reference_draws(seed, T, shape)
    M = mf.strategy(name, T)
    expected = mf.sensitivity(M) * np.linalg.solve(M, Z.reshape(T, -1)).reshape(U.shape)
    np.testing.assert_allclose(U, expected, rtol=1e-12, atol=1e-12)
    assert s.sens == pytest.approx(mf.sensitivity(M), rel=1e-14)
    assert s.worst_sens == pytest.approx(mf.worst_case_sensitivity(M), rel=1e-13)
    assert s.prefix_rmse == pytest.approx(mf.prefix_rmse(M), rel=1e-10)
    if name in ("identity", "banded:1"):
        assert s.kind == "identity" and np.array_equal(U, Z)  # bit-identical to DP-SGD's draws


def test_gaussian_stream_is_bit_identical_to_plain_draws():
    s, U = streamed("gaussian", 20, (4, 9), Backend("numpy", 5))
    assert np.array_equal(U, reference_draws(5, 20, (4, 9)))
    assert s.sens == 1.0 and s.worst_sens == pytest.approx(math.sqrt(20))


@pytest.mark.parametrize("name", ["banded:4", "sqrt_toeplitz"])
def test_stream_float32(name):
    T, shape = 9, (2, 6)
    be = Backend("numpy", 2, "float32")
    s = mf.noise_stream(name, T)
    st = s.init(shape, be)
    out = []
    for _ in range(T):
        u, st = s.next(st, be)
        assert u.dtype == np.float32 and u.shape == shape
        out.append(u)
    Z = reference_draws(2, T, shape, "float32").astype(float)
    M = mf.strategy(name, T)
    expected = mf.sensitivity(M) * np.linalg.solve(M, Z.reshape(T, -1)).reshape(T, *shape)
    np.testing.assert_allclose(np.stack(out), expected, rtol=1e-4, atol=1e-5)


def test_custom_coefficients_stream():
    c = np.array([2.0, 0.7, -0.2])
    T, shape = 8, (3,)
    s, U = streamed(c, T, shape, Backend("numpy", 4))
    M = mf.toeplitz_matrix(c, T)
    Z = reference_draws(4, T, shape)
    np.testing.assert_allclose(U, mf.sensitivity(M) * np.linalg.solve(M, Z), rtol=1e-12, atol=1e-13)
    assert s.worst_sens == pytest.approx(mf.worst_case_sensitivity(M))
    # a single coefficient m_0 ≠ 1: sens·M⁻¹Z = sign(m_0)·Z
    _, U = streamed([-2.0], 5, shape, Backend("numpy", 4))
    np.testing.assert_allclose(U, -reference_draws(4, 5, shape), rtol=1e-15)
    with pytest.raises(ValueError, match="non-zero"):
        mf.noise_stream([0.0, 1.0], 5)


def test_returned_noise_is_not_aliased_with_state():
    for name in ("banded:3", "sqrt_toeplitz"):
        T, shape = 6, (2, 3)
        s = mf.noise_stream(name, T)
        be = Backend("numpy", 8)
        st = s.init(shape, be)
        got = []
        for _ in range(T):
            u, st = s.next(st, be)
            got.append(u.copy())
            u *= 1e6  # a privatizer scaling the noise in place must not corrupt the filter
        _, ref = streamed(name, T, shape, Backend("numpy", 8))
        np.testing.assert_allclose(np.stack(got), ref, rtol=1e-13)


@pytest.mark.parametrize("name", ["banded:3", "sqrt_toeplitz"])
def test_stream_covariance(name):
    """Empirical covariance across steps vs sens² M⁻¹M⁻ᵀ; tolerance: 5 standard errors per entry
    (Var of a sample covariance of Gaussians: (Σ_ii Σ_jj + Σ_ij²)/N)."""
    T, shape = 6, (100, 200)
    s, U = streamed(name, T, shape, Backend("numpy", 123))
    X = U.reshape(T, -1)
    N = X.shape[1]
    emp = X @ X.T / N  # mean zero is known
    Minv = np.linalg.inv(mf.strategy(name, T))
    sigma = s.sens**2 * Minv @ Minv.T
    se = np.sqrt((np.outer(np.diag(sigma), np.diag(sigma)) + sigma**2) / N)
    assert np.all(np.abs(emp - sigma) <= 5 * se), np.max(np.abs(emp - sigma) / se)
    np.testing.assert_allclose(s.step_variance, np.diag(sigma), rtol=1e-12)


def test_prefix_rmse_by_simulation():
    """Mean squared prefix sum of the streamed noise ≈ prefix_rmse²; tolerance 5 standard errors of
    the per-sample quadratic form X = (1/T) ||A u||², Var X = 2 tr(Σ_S²)/T²."""
    T, N = 40, 20_000
    s, U = streamed("banded:4", T, (N,), Backend("numpy", 9))
    S = np.cumsum(U, axis=0)
    est = float(np.mean(S**2))
    M = mf.strategy("banded:4", T)
    B = mf.prefix_sum_matrix(T) @ np.linalg.inv(M)
    sig_s = s.sens**2 * B @ B.T
    se = math.sqrt(2 * np.trace(sig_s @ sig_s)) / T / math.sqrt(N)
    assert abs(est - s.prefix_rmse**2) <= 5 * se


def test_memory_cap():
    be = Backend("numpy", 0)
    s = mf.noise_stream("sqrt_toeplitz", 1000, max_bytes=10_000)
    with pytest.raises(ValueError, match="banded:<k>"):
        s.init((10, 10), be)
    # default 2 GiB cap: T·R·d·8 = 1e4 · 64 · 1e4 · 8 bytes ≫ 2 GiB; raised before allocating
    with pytest.raises(ValueError, match="max_bytes"):
        mf.noise_stream("sqrt_toeplitz", 10_000).init((64, 10_000), be)
    assert mf.noise_stream("sqrt_toeplitz", 1000, max_bytes=800_000).init((10, 10), be).z.shape == (1000, 10, 10)
    # banded state is (k−1)·R·d: fine at the same shape
    mf.noise_stream("banded:4", 10_000).init((64, 10_000), be)


def test_stream_exhaustion_and_privacy_helpers():
    be = Backend("numpy", 0)
    for name in ("identity", "banded:2", "sqrt_toeplitz"):
        s = mf.noise_stream(name, 3)
        st = s.init((2,), be)
        for _ in range(3):
            _, st = s.next(st, be)
        with pytest.raises(ValueError, match="exhausted"):
            s.next(st, be)
    s = mf.noise_stream("identity", 16)
    assert s.equivalent_noise_multiplier(2.0) == 2.0
    assert s.equivalent_noise_multiplier(2.0, "any") == pytest.approx(0.5)
    s = mf.noise_stream("banded:4", 100)
    assert s.equivalent_noise_multiplier(1.0, "any") == pytest.approx(s.sens / s.worst_sens)
    with pytest.raises(ValueError, match="participation"):
        s.equivalent_noise_multiplier(1.0, "twice")


@pytest.mark.parametrize("bad", ["foo", "banded", "banded:", "banded:0", "banded:-2", "banded:x",
                                 "banded:2.5", "Banded:3", "sqrt", "", None, 3])
def test_bad_names(bad):
    with pytest.raises(ValueError, match=repr(bad) if isinstance(bad, str) else "got"):
        mf.strategy(bad, 10)
    with pytest.raises(ValueError):
        mf.noise_stream(bad, 10)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_bad_steps(bad):
    with pytest.raises(ValueError, match="steps"):
        mf.strategy("identity", bad)
    with pytest.raises(ValueError, match="steps"):
        mf.noise_stream("banded:2", bad)
    with pytest.raises(ValueError, match="bands"):
        mf.banded_coefficients(0, 10)


@pytest.mark.parametrize("name", ["banded:2", "banded:4", "banded:7"])
def test_banded_kernel_matches_numpy_expression(monkeypatch, name):
    """The one-pass host kernel of the banded step (``mf._banded_feedback``) against the NumPy
    expressions it replaces (``u·scale − tensordot(coef[p], ring)``, then the ring slot), run in
    lockstep on the same draws for 30 steps (so every ring phase and a full ring).  Both round
    the same terms, in possibly different orders (BLAS may sum the feedback otherwise): per
    element the difference is bounded by ``(k + 1)·ε_mach·Σ|terms|`` (a sum of ``k`` terms
    rounded ``k`` times, plus the scaled draw), and the ring slot written is the step's ``u``."""
    T, shape = 30, (5, 701)  # 3 505 elements: several blocks and a ragged last one
    s = mf.noise_stream(name, T)
    be_k, be_np = Backend("numpy", 11), Backend("numpy", 11)
    st_k, st_np = s.init(shape, be_k), s.init(shape, be_np)
    kernel_calls = []
    real = mf._banded_feedback

    def spy(*a):
        kernel_calls.append(1)
        return real(*a)

    monkeypatch.setattr(mf, "_banded_feedback", spy)
    nb = st_k.ring.shape[0]
    for t in range(T):
        p = t % nb
        ring_before = st_np.ring.copy()
        u_k, st_k = s.next(st_k, be_k)
        with monkeypatch.context() as m:
            m.setattr(mf, "_host_float64", lambda *a: False)
            u_np, st_np = s.next(st_np, be_np)
        terms = np.abs(np.tensordot(np.abs(st_np.coef[p]), np.abs(ring_before), axes=1))
        z_scaled = np.abs(u_np + np.tensordot(st_np.coef[p], ring_before, axes=1))
        bound = (nb + 2) * np.finfo(float).eps * (terms + z_scaled)
        assert np.all(np.abs(u_k - u_np) <= bound), t
        np.testing.assert_array_equal(st_k.ring[p], u_k)
        np.testing.assert_array_equal(st_np.ring[p], u_np)
        st_k = st_k._replace(ring=st_np.ring.copy())  # both continue from the same history
    assert len(kernel_calls) == T
