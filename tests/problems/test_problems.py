"""Tests of dpsim.problems and its Numba kernels (dpsim.problems._glm_kernels).

Oracles: central finite differences of the loss, naive per-example loops over materialized
gradients, naive NumPy re-implementations of the fused kernels, an independent primal LP and a
weak-duality certificate for absolute regression, enumeration of the box corners for linear_box.
Everything is deterministic (fixed seeds).
"""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
import scipy.sparse as sp

from dpsim.problems import _glm_kernels as K
from dpsim import problems as P
from dpsim.backend import Backend, to_numpy
from dpsim.problems import Problem

# --------------------------------------------------------------------------------------------
# small instances of every factory
# --------------------------------------------------------------------------------------------

SMALL = {
    "least_squares": lambda: P.least_squares(40, 5, condition=20.0, seed=1),
    "least_squares_axis": lambda: P.least_squares(30, 4, rotate=False, seed=11),
    "logistic_dense": lambda: P.logistic_regression(50, 6, seed=2),
    "logistic_sparse": lambda: P.logistic_regression(120, 30, density=0.1, seed=3),
    "absolute_regression": lambda: P.absolute_regression(60, 5, seed=4),
    "absolute_regression_free": lambda: P.absolute_regression(60, 5, domain=None, seed=4),
    "random_quadratic": lambda: P.random_quadratic(seed=5),
    "random_quadratic_3d": lambda: P.random_quadratic(20, 3, reg=0.1, seed=5),
    "sparse_logistic_1d": lambda: P.sparse_logistic_1d(200, zero_fraction=0.5, seed=6),
    "quadratic_2d": lambda: P.quadratic_2d(1.0, 10.0, n=100, seed=7),
    "quadratic_2d_iso": lambda: P.quadratic_2d(2.0, 0.5, n=50, noise_shape="isotropic", seed=7),
    "linear_box": lambda: P.linear_box(40, 6, seed=8),
}
GLM = ["least_squares", "least_squares_axis", "logistic_dense", "logistic_sparse",
       "absolute_regression", "absolute_regression_free", "sparse_logistic_1d", "linear_box"]
SMOOTH = ["least_squares", "least_squares_axis", "logistic_dense", "logistic_sparse",
          "random_quadratic", "random_quadratic_3d", "sparse_logistic_1d", "quadratic_2d",
          "quadratic_2d_iso"]

_CACHE: dict = {}


def small(name):
    if name not in _CACHE:
        _CACHE[name] = SMALL[name]()
    return _CACHE[name]


def rand_inputs(p, R=4, b=7, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((R, p.d))
    idx = rng.integers(0, p.n, size=(R, b))
    scale = rng.uniform(0.2, 2.0, size=(R, p.d))
    mask = rng.random((R, b)) < 0.7
    mask[0, :] = True
    mask[1, :] = False  # a trial with an empty batch
    return w, idx, scale, mask


# --------------------------------------------------------------------------------------------
# naive oracles
# --------------------------------------------------------------------------------------------


def naive_clipped_sum(p, w, idx, clip, mask=None, scale=None):
    """Loop over trials and examples: clip each materialized (scaled) per-example gradient."""
    G = np.asarray(p.per_example_grads(w, idx))
    R, b, d = G.shape
    S = np.zeros((R, d))
    norms = np.zeros((R, b))
    for r in range(R):
        C = None if clip is None else (float(clip[r]) if np.ndim(clip) else float(clip))
        for i in range(b):
            if mask is not None and not mask[r, i]:
                continue
            g = G[r, i] * (scale[r] if scale is not None else 1.0)
            nrm = math.sqrt(float(g @ g))
            norms[r, i] = nrm
            if C is not None and nrm > C:
                g = g * (C / nrm)
            S[r] += g
    return S, norms


def naive_kernel(X, idx, W, y, kind, lam, C, S=None, mask=None):
    """Reference for _glm_kernels.clip_sum_*: materialize every g = l'(x.w, y) x + lam w."""
    Xd = X.toarray() if sp.issparse(X) else X
    R, b = idx.shape
    out = np.zeros_like(W)
    norms = np.zeros((R, b))
    for r in range(R):
        s = np.ones(W.shape[1]) if S is None else S[r]
        for i in range(b):
            if mask is not None and not mask[r, i]:
                continue
            x = Xd[idx[r, i]]
            m = x @ W[r]
            yy = y[idx[r, i]]
            c = {0: m - yy, 1: -yy / (1 + np.exp(yy * m)), 2: np.sign(m - yy), 3: -1.0}[kind]
            g = s * (c * x + lam * W[r])
            nrm = np.linalg.norm(g)
            norms[r, i] = nrm
            out[r] += g * (min(1.0, C[r] / nrm) if nrm > 0 else 1.0)
    return out, norms


# --------------------------------------------------------------------------------------------
# gradients
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(SMALL))
def test_grad_matches_central_differences(name):
    p = small(name)
    rng = np.random.default_rng(1)
    w = 0.5 * rng.standard_normal((3, p.d))
    if name.startswith("absolute"):
        # piecewise linear: central differences are exact inside a linear piece, so keep every
        # residual farther than h * ||x_i||_1 from its kink; error is then rounding only.
        h = 1e-7
        r = np.abs(p.X @ w.T - p.y[:, None])
        assert r.min() > 10 * h * np.abs(p.X).sum(axis=1).max()
        tol = 1e-7
    else:
        # smooth: truncation h^2 |F'''| / 6 <= 1e-10 * (|F'''| <= 6 here), rounding
        # eps |F| / h ~ 2e-11 |F|; the tolerance 1e-7 (1 + |F|) covers both with margin.
        h = 1e-5
        tol = 1e-7 * (1 + np.abs(p.loss(w)).max())
    g = p.grad(w)
    fd = np.empty_like(w)
    for j in range(p.d):
        e = np.zeros(p.d)
        e[j] = h
        fd[:, j] = (p.loss(w + e) - p.loss(w - e)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=0, atol=tol)


@pytest.mark.parametrize("name", list(SMALL))
def test_mean_of_per_example_grads_is_grad(name):
    p = small(name)
    w = np.random.default_rng(2).standard_normal((3, p.d))
    idx = np.tile(np.arange(p.n), (3, 1))
    G = p.per_example_grads(w, idx)
    assert G.shape == (3, p.n, p.d)
    np.testing.assert_allclose(G.mean(axis=1), p.grad(w), rtol=1e-10, atol=1e-12)
    # the per-example losses average to F: spot-check via the base-class default grad
    np.testing.assert_allclose(Problem.grad(p, w), p.grad(w), rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------------------------
# clipped sums
# --------------------------------------------------------------------------------------------

CLIPS = {
    "none": lambda R: None,
    "inf": lambda R: math.inf,
    "scalar": lambda R: 0.3,
    "per_trial": lambda R: np.array([0.05, 1.0, math.inf, 3.0, 0.2, 0.7][:R]),
    "zero": lambda R: 0.0,
}


@pytest.mark.parametrize("clip", list(CLIPS))
@pytest.mark.parametrize("use_scale", [False, True])
@pytest.mark.parametrize("use_mask", [False, True])
@pytest.mark.parametrize("name", list(SMALL))
def test_clipped_grad_sum_matches_naive_loop(name, clip, use_scale, use_mask):
    p = small(name)
    w, idx, scale, mask = rand_inputs(p)
    C = CLIPS[clip](w.shape[0])
    kw = dict(scale=scale if use_scale else None, mask=mask if use_mask else None)
    S_ref, n_ref = naive_clipped_sum(p, w, idx, C, **kw)
    for impl in (p.clipped_grad_sum, lambda *a, **k: Problem.clipped_grad_sum(p, *a, **k)):
        S, norms = impl(w, idx, C, **kw)
        assert S.shape == (w.shape[0], p.d) and norms.shape == idx.shape
        np.testing.assert_allclose(S, S_ref, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(norms, n_ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", list(SMALL))
def test_clip_inf_is_bit_identical_to_no_clip(name):
    p = small(name)
    w, idx, scale, mask = rand_inputs(p)
    R = w.shape[0]
    for kw in ({}, {"scale": scale}, {"mask": mask}, {"scale": scale, "mask": mask}):
        for impl in (p.clipped_grad_sum, lambda *a, **k: Problem.clipped_grad_sum(p, *a, **k)):
            S0, n0 = impl(w, idx, None, **kw)
            for C in (math.inf, float("inf"), np.full(R, math.inf)):
                S1, n1 = impl(w, idx, C, **kw)
                assert np.array_equal(S0, S1) and np.array_equal(n0, n1)


def test_zero_gradients_stay_zero():
    p = P.sparse_logistic_1d(100, zero_fraction=0.5, seed=3)
    zeros = np.flatnonzero(p.X[:, 0] == 0)[:5]
    idx = np.tile(zeros, (3, 1))
    w = np.array([[0.3], [-2.0], [0.0]])
    s = np.full((3, 1), 2.0)
    for impl in (p.clipped_grad_sum, lambda *a, **k: Problem.clipped_grad_sum(p, *a, **k)):
        for C in (None, 1.0, 0.0, np.array([0.0, 1e-300, 5.0])):
            S, norms = impl(w, idx, C, scale=s)
            assert np.all(S == 0) and np.all(norms == 0)
    # linear_box with a zero scale: every scaled gradient is 0
    q = small("linear_box")
    w, idx, _, _ = rand_inputs(q)
    S, norms = q.clipped_grad_sum(w, idx, 1.0, scale=np.zeros_like(w))
    assert np.all(S == 0) and np.all(norms == 0) and np.all(np.isfinite(S))


def test_bad_clip_raises():
    p = small("least_squares")
    w, idx, _, _ = rand_inputs(p)
    for impl in (p.clipped_grad_sum, lambda *a, **k: Problem.clipped_grad_sum(p, *a, **k)):
        with pytest.raises(ValueError, match="clip=-1.0"):
            impl(w, idx, -1.0)
        with pytest.raises(ValueError, match="clip=nan"):
            impl(w, idx, float("nan"))


# --------------------------------------------------------------------------------------------
# Numba kernels against naive NumPy
# --------------------------------------------------------------------------------------------


def _kernel_data(rng, n, d, density):
    if density < 1:
        X = sp.random(n, d, density=density, format="csr", random_state=rng)
        X.data = rng.standard_normal(X.nnz)
        X.sort_indices()
    else:
        X = rng.standard_normal((n, d))
    return X


@pytest.mark.parametrize("kind", [0, 1, 2, 3])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("lam", [0.0, 0.3])
def test_kernels_match_naive_numpy(kind, sparse, lam):
    rng = np.random.default_rng(kind + 10 * sparse)
    n, d, R, b = 30, 9, 5, 6
    X = _kernel_data(rng, n, d, 0.3 if sparse else 1.0)
    y = rng.choice([-1.0, 1.0], size=n) if kind == 1 else rng.standard_normal(n)
    W = rng.standard_normal((R, d))
    idx = rng.integers(0, n, size=(R, b))
    S = rng.uniform(0.1, 2.0, size=(R, d))
    mask = rng.random((R, b)) < 0.6
    C = np.array([0.1, 1.0, np.inf, 5.0, 0.0])
    for scale in (None, S):
        for m in (None, mask):
            ref = naive_kernel(X, idx, W, y, kind, lam, C, scale, m)
            if sparse:
                rn2 = K.row_sq_norms_csr(X.data, X.indptr, n)
                np.testing.assert_allclose(rn2, np.asarray(X.multiply(X).sum(axis=1)).ravel())
                got = K.clip_sum_csr(X.data, X.indices, X.indptr, rn2, idx, W, y, kind, lam, C,
                                     scale, m, X.nnz / n)
            else:
                got = K.clip_sum_dense(X, idx, W, y, kind, lam, C, scale, m)
            np.testing.assert_allclose(got[0], ref[0], rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(got[1], ref[1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sparse", [False, True])
def test_parallel_and_serial_kernels_agree_bitwise(sparse):
    rng = np.random.default_rng(5)
    n, d, R, b = 200, 50, 8, 16
    X = _kernel_data(rng, n, d, 0.2 if sparse else 1.0)
    y = rng.choice([-1.0, 1.0], size=n)
    W = rng.standard_normal((R, d))
    S = rng.uniform(0.1, 2.0, size=(R, d))
    idx = rng.integers(0, n, size=(R, b))
    mask = rng.random((R, b)) < 0.8
    C = np.full(R, 0.5)
    outs = []
    for fn in ((K._csr_serial, K._csr_parallel) if sparse else (K._dense_serial, K._dense_parallel)):
        out = np.empty_like(W)
        norms = np.empty((R, b))
        if sparse:
            rn2 = K.row_sq_norms_csr(X.data, X.indptr, n)
            fn(X.data, X.indices, X.indptr, rn2, idx, W, y, 1, 0.1, S, True, C, mask, True, out, norms)
        else:
            fn(X, idx, W, y, 1, 0.1, S, True, C, mask, True, out, norms)
        outs.append((out, norms))
    assert np.array_equal(outs[0][0], outs[1][0]) and np.array_equal(outs[0][1], outs[1][1])


def test_kernels_run_without_jit(jit_on_off):
    """NUMBA_DISABLE_JIT=1: the kernels run as plain Python and give the jitted results."""
    code = (
        "import numpy as np, scipy.sparse as sp\n"
        "from dpsim import problems as P\n"
        "out = []\n"
        "for p in (P.logistic_regression(40, 12, density=0.3, seed=1), P.least_squares(20, 3, seed=2)):\n"
        "    rng = np.random.default_rng(0)\n"
        "    w = rng.standard_normal((3, p.d)); idx = rng.integers(0, p.n, (3, 4))\n"
        "    s = rng.uniform(0.5, 2, (3, p.d)); m = rng.random((3, 4)) < 0.7\n"
        "    S, nr = p.clipped_grad_sum(w, idx, np.array([0.1, 1.0, np.inf]), scale=s, mask=m)\n"
        "    out += [S.tolist(), nr.tolist()]\n"
        "import json, sys; json.dump(out, sys.stdout)\n"
    )
    off, on = jit_on_off(code).json()
    for a, b in zip(off, on):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-12, atol=1e-14)


# --------------------------------------------------------------------------------------------
# optima
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SMOOTH)
def test_smooth_optimum_is_stationary(name):
    p = small(name)
    w_star, f_star = p.optimum
    assert w_star.shape == (p.d,) and isinstance(f_star, float)
    assert np.linalg.norm(p.grad(w_star[None, :])) < 1e-8
    assert f_star == pytest.approx(float(p.loss(w_star[None, :])[0]), rel=1e-12, abs=1e-15)
    assert p.optimum is p.optimum  # cached


def test_logistic_optimum_large_d_uses_newton_cg():
    p = P.logistic_regression(3000, 2000, density=0.02, seed=9)  # d > 1500: Newton-CG branch
    w_star, f_star = p.optimum
    assert np.linalg.norm(p.grad(w_star[None, :])) < 1e-8


@pytest.mark.parametrize("density", [0.05, 1.0])
def test_logistic_col_scale_rescales_columns_and_keeps_labels(density):
    base = P.logistic_regression(400, 60, density=density, zipf=2.0, seed=4)
    scaled = P.logistic_regression(400, 60, density=density, zipf=2.0, col_scale=1.0, seed=4)
    assert "col_scale" not in base.config and scaled.config["col_scale"] == 1.0
    assert P.logistic_regression(400, 60, density=density, zipf=2.0, col_scale=0.0,
                                 seed=4).config == base.config
    np.testing.assert_array_equal(scaled.y, base.y)          # labels of the unscaled features
    np.testing.assert_array_equal(scaled.w_true, base.w_true)
    Xb = base.X.toarray() if sp.issparse(base.X) else np.asarray(base.X)
    Xs = scaled.X.toarray() if sp.issparse(scaled.X) else np.asarray(scaled.X)
    assert sp.issparse(scaled.X) == sp.issparse(base.X)
    ref = Xb / np.arange(1.0, 61.0)                          # column j times (j+1)^-1
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)        # rows back to unit norm
    np.testing.assert_allclose(Xs, ref, rtol=1e-13, atol=0)
    np.testing.assert_allclose(np.linalg.norm(Xs, axis=1), 1.0, rtol=1e-13)
    # the point of the knob: the coordinates' second moments spread over a wider range
    m_b, m_s = (np.mean(X * X, axis=0) for X in (Xb, Xs))
    live = (m_b > 0) & (m_s > 0)
    assert (m_s[live].max() / m_s[live].min()) > 10 * (m_b[live].max() / m_b[live].min())
    w_star, _ = scaled.optimum
    assert np.linalg.norm(scaled.grad(w_star[None, :])) < 1e-8


def test_logistic_col_scale_rejects_negative():
    with pytest.raises(ValueError, match="col_scale"):
        P.logistic_regression(50, 5, col_scale=-0.5)


def test_quadratic_2d_optimum_exact():
    p = small("quadratic_2d")
    w_star, f_star = p.optimum
    assert np.array_equal(w_star, np.zeros(2)) and f_star == 0.0
    assert p.loss(np.zeros((1, 2)))[0] == 0.0
    assert np.abs(p.xi.mean(axis=0)).max() < 1e-14  # centred noise: exact full gradient
    # hessian-shaped noise: the gradient noise in coordinate j is proportional to h_j
    u = p.xi / -p.h
    np.testing.assert_allclose(u.std(axis=0), 1.0, rtol=0.3)


def _lad_primal(A, b, radius):
    from scipy.optimize import linprog

    n, d = A.shape
    A_eq = np.hstack([A, -np.eye(n), np.eye(n)])
    c = np.concatenate([np.zeros(d), np.full(2 * n, 1.0 / n)])
    xb = (-radius, radius) if radius else (None, None)
    res = linprog(c, A_eq=A_eq, b_eq=b, bounds=[xb] * d + [(0, None)] * (2 * n), method="highs")
    assert res.status == 0
    return res


@pytest.mark.parametrize("domain", ["box", None])
def test_absolute_regression_optimum_certificate(domain):
    p = P.absolute_regression(400, 12, tau=0.05, domain=domain, seed=21)
    A, b, n = p.X, p.y, p.n
    w_star, f_star = p.optimum
    F = lambda x: float(np.mean(np.abs(A @ x - b)))  # noqa: E731
    assert f_star == pytest.approx(F(w_star), abs=1e-15)
    if domain == "box":
        assert np.all(np.abs(w_star) <= 1.0)
    # (1) weak duality: any y with |y_i| <= 1/n gives F(x) >= -b.y - rho ||A^T y||_1 on the
    # box (rho = 1) or, when A^T y = 0, F(x) >= -b.y everywhere.  Take y from an independent
    # primal LP (either sign convention is a valid y) and require a gap below 1e-9.
    res = _lad_primal(A, b, 1.0 if domain == "box" else None)
    assert f_star <= res.fun + 1e-12
    lower = -np.inf
    for sgn in (1.0, -1.0):
        y = np.clip(sgn * res.eqlin.marginals, -1.0 / n, 1.0 / n)
        if domain == "box":
            lower = max(lower, -b @ y - np.abs(A.T @ y).sum())
        else:
            assert np.abs(A.T @ y).max() < 1e-9
            lower = max(lower, -b @ y - 1e3 * np.abs(A.T @ y).sum())
    assert f_star - lower < 1e-9
    # (2) no random feasible perturbation improves the objective
    rng = np.random.default_rng(0)
    for _ in range(200):
        x = p.project((w_star + 1e-4 * rng.standard_normal(p.d))[None, :])[0]
        assert F(x) >= f_star - 1e-14


def test_absolute_regression_paper_size():
    p = P.absolute_regression(5000, 100, seed=0)
    assert p.config["scales"] == "power"
    np.testing.assert_allclose(p.scales, np.arange(1, 101) ** -1.5)
    assert set(np.unique(p.w_true)) == {-1.0, 1.0}
    w_star, f_star = p.optimum
    assert np.all(np.abs(w_star) <= 1.0)
    # a vertex of the LP: at least d constraints active (zero residuals or box faces)
    active = np.sum(np.abs(p.X @ w_star - p.y) < 1e-10) + np.sum(np.abs(w_star) == 1.0)
    assert active >= p.d
    assert np.mean(np.sign(w_star) == p.w_true) > 0.95
    rng = np.random.default_rng(1)
    for _ in range(50):
        x = p.project((w_star + 1e-5 * rng.standard_normal(p.d))[None, :])
        assert p.loss(x)[0] >= f_star - 1e-14


def test_linear_box_corner_optimum():
    p = small("linear_box")
    w_star, f_star = p.optimum
    assert set(np.abs(w_star)) == {1.0}
    zbar = p.X.mean(axis=0)
    assert f_star == pytest.approx(-np.abs(zbar).sum(), rel=1e-14)
    corners = np.array(np.meshgrid(*[[-1.0, 1.0]] * p.d)).reshape(p.d, -1).T
    assert p.loss(corners).min() >= f_star - 1e-15
    inner = np.random.default_rng(0).uniform(-1, 1, size=(500, p.d))
    assert p.loss(inner).min() >= f_star
    # |z_ij| <= sigma_j ([PAGAN] §5)
    assert np.all(np.abs(p.X) <= p.scales + 1e-15)
    np.testing.assert_allclose(p.grad(inner[:2]), -np.tile(zbar, (2, 1)))


def test_sparse_logistic_1d_reconstruction():
    p = P.sparse_logistic_1d()
    assert p.d == 1 and p.n == 1000
    assert np.sum(p.X[:, 0] == 0) == 900
    # population loss at w* = 1 on N(0, 1) inputs: about 0.598 (ALGORITHMS.md §5.4)
    assert abs(p.test_loss(np.array([[1.0]]))[0] - 0.598) < 0.005
    w_star, _ = p.optimum
    assert abs(p.grad(w_star[None, :])[0, 0]) < 1e-12


# --------------------------------------------------------------------------------------------
# projection, sparsity, determinism, configs, validation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(SMALL))
def test_project(name):
    p = small(name)
    w = 3.0 * np.random.default_rng(0).standard_normal((4, p.d))
    if p.has_domain:
        np.testing.assert_array_equal(p.project(w), np.clip(w, -1.0, 1.0))
    else:
        assert p.project(w) is w


class _NoDense(sp.csr_matrix):
    def toarray(self, *a, **k):
        raise AssertionError("sparse X was densified")

    todense = toarray


def test_sparse_features_stay_sparse():
    p = P.logistic_regression(300, 80, density=0.05, seed=4)
    assert isinstance(p.X, sp.csr_matrix)
    assert p.X.nnz < 0.1 * p.n * p.d
    assert np.all(p.X.data > 0)
    np.testing.assert_allclose(sp.linalg.norm(p.X, axis=1), 1.0)
    p.X = _NoDense(p.X)
    w, idx, scale, mask = rand_inputs(p)
    p.loss(w)
    p.grad(w)
    p.clipped_grad_sum(w, idx, 1.0, scale=scale, mask=mask)
    w_star, _ = p.optimum
    assert np.linalg.norm(p.grad(w_star[None, :])) < 1e-8
    q = p.on(Backend("numpy", dtype="float32"))
    assert sp.issparse(q.X) and q.X.dtype == np.float32


@pytest.mark.parametrize("name", list(SMALL))
def test_deterministic_in_seed(name):
    a, b = SMALL[name](), SMALL[name]()
    assert a.config == b.config
    w, idx, _, _ = rand_inputs(a)
    assert np.array_equal(a.loss(w), b.loss(w))
    assert np.array_equal(a.per_example_grads(w, idx), b.per_example_grads(w, idx))
    cfg = dict(a.config)
    cfg["seed"] = cfg["seed"] + 1
    c = P.get(**cfg)
    assert not np.array_equal(a.loss(w), c.loss(w))


@pytest.mark.parametrize("name", list(SMALL))
def test_config_roundtrip(name):
    p = small(name)
    cfg = json.loads(json.dumps(p.config))
    assert cfg["name"] in P.names()
    q = P.get(**cfg)
    w, _, _, _ = rand_inputs(p)
    assert np.array_equal(p.loss(w), q.loss(w))
    assert (p.n, p.d, p.has_domain) == (q.n, q.d, q.has_domain)


def test_scales_array_in_config():
    s = [1.0, 0.5, 0.25]
    p = P.absolute_regression(20, 3, scales=s, seed=0)
    assert p.config["scales"] == s
    q = P.get(**json.loads(json.dumps(p.config)))
    assert np.array_equal(p.X, q.X)


BAD = [
    (P.least_squares, dict(n=0, d=3), "n=0"),
    (P.least_squares, dict(n=2.5, d=3), "n=2.5"),
    (P.least_squares, dict(n=10, d=-1), "d=-1"),
    (P.least_squares, dict(n=10, d=3, condition=0.5), "condition=0.5"),
    (P.least_squares, dict(n=10, d=3, noise=-0.1), "noise=-0.1"),
    (P.least_squares, dict(n=10, d=3, seed=-1), "seed=-1"),
    (P.least_squares, dict(n=10, d=3, rotate="yes"), "rotate='yes'"),
    (P.logistic_regression, dict(n=10, d=3, density=0.0), "density=0.0"),
    (P.logistic_regression, dict(n=10, d=3, density=1.5), "density=1.5"),
    (P.logistic_regression, dict(n=10, d=3, reg=-1.0), "reg=-1.0"),
    (P.logistic_regression, dict(n=10, d=3, reg=float("inf")), "reg=inf"),
    (P.absolute_regression, dict(n=10, d=3, scales="flat"), "scales='flat'"),
    (P.absolute_regression, dict(n=10, d=3, scales=[1.0, 2.0]), "scales=[1.0, 2.0]"),
    (P.absolute_regression, dict(n=10, d=2, scales=[1.0, -2.0]), "scales=[1.0, -2.0]"),
    (P.absolute_regression, dict(n=10, d=3, tau=-1), "tau=-1"),
    (P.absolute_regression, dict(n=10, d=3, domain="ball"), "domain='ball'"),
    (P.random_quadratic, dict(m=0), "m=0"),
    (P.random_quadratic, dict(reg=-1e-3), "reg=-0.001"),
    (P.sparse_logistic_1d, dict(n=10, zero_fraction=1.2), "zero_fraction=1.2"),
    (P.sparse_logistic_1d, dict(n=10, w_star=float("nan")), "w_star=nan"),
    (P.sparse_logistic_1d, dict(n=2, zero_fraction=0.5), "separable"),
    (P.quadratic_2d, dict(a=-1.0, b=1.0), "a=-1.0"),
    (P.quadratic_2d, dict(a=1.0, b=0.0), "b=0.0"),
    (P.quadratic_2d, dict(a=1.0, b=1.0, n=0), "n=0"),
    (P.quadratic_2d, dict(a=1.0, b=1.0, noise_shape="diag"), "noise_shape='diag'"),
    (P.linear_box, dict(n=10, d=3, bias=2.0), "bias=2.0"),
    (P.get, dict(name="nope"), "'nope'"),
]


@pytest.mark.parametrize("factory,kwargs,needle", BAD, ids=[b[2] for b in BAD])
def test_bad_arguments_raise_naming_the_value(factory, kwargs, needle):
    with pytest.raises(ValueError) as exc:
        factory(**kwargs)
    assert needle in str(exc.value)


# --------------------------------------------------------------------------------------------
# backends: array_api_strict (generic path), float32
# --------------------------------------------------------------------------------------------

STRICT = ["least_squares", "logistic_dense", "absolute_regression", "random_quadratic",
          "sparse_logistic_1d", "quadratic_2d", "linear_box"]


@pytest.mark.parametrize("name", STRICT)
def test_generic_path_under_array_api_strict(name):
    pytest.importorskip("array_api_strict")
    p = small(name)
    be = Backend("array_api_strict")
    q = p.on(be)
    assert q is p.on(be) and q.on(Backend("numpy")) is p
    xp = be.xp
    w, idx, scale, mask = rand_inputs(p)
    W, I, S, M = be.asarray(w), be.asindex(idx), be.asarray(scale), xp.asarray(mask)
    np.testing.assert_allclose(to_numpy(q.loss(W)), p.loss(w), rtol=1e-12)
    np.testing.assert_allclose(to_numpy(q.grad(W)), p.grad(w), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(to_numpy(q.per_example_grads(W, I)), p.per_example_grads(w, idx),
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(to_numpy(q.project(3 * W)), p.project(3 * w))
    Cs = be.asarray(np.array([0.05, 1.0, math.inf, 3.0]))
    for C, Cn in ((None, None), (0.3, 0.3), (Cs, to_numpy(Cs))):
        Sq, nq = q.clipped_grad_sum(W, I, C, scale=S, mask=M)
        Sp, n_p = p.clipped_grad_sum(w, idx, Cn, scale=scale, mask=mask)
        np.testing.assert_allclose(to_numpy(Sq), Sp, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(to_numpy(nq), n_p, rtol=1e-10, atol=1e-12)
    assert q.optimum is p.optimum


def test_sparse_on_array_api_strict_is_an_error():
    pytest.importorskip("array_api_strict")
    with pytest.raises(ValueError, match="array_api_strict"):
        small("logistic_sparse").on(Backend("array_api_strict"))


@pytest.mark.parametrize("name", ["least_squares", "logistic_dense", "logistic_sparse", "random_quadratic"])
def test_float32_numpy_backend(name):
    p = small(name)
    be = Backend("numpy", dtype="float32")
    q = p.on(be)
    w, idx, scale, mask = rand_inputs(p)
    W = w.astype(np.float32)
    assert q.loss(W).dtype == np.float32 and q.grad(W).dtype == np.float32
    np.testing.assert_allclose(q.loss(W), p.loss(w), rtol=1e-4)
    S, nr = q.clipped_grad_sum(W, idx, 0.5, scale=scale.astype(np.float32), mask=mask)
    assert S.dtype == np.float32
    S64, n64 = p.clipped_grad_sum(w, idx, 0.5, scale=scale, mask=mask)
    np.testing.assert_allclose(S, S64, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(nr, n64, rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------------------------
# the benchmark problem
# --------------------------------------------------------------------------------------------


def test_benchmark_problem_builds_fast_and_solves():
    t0 = time.perf_counter()
    p = P.logistic_regression(25_000, 10_000, density=0.01, seed=0)
    build = time.perf_counter() - t0
    assert build < 10.0  # a few seconds on a laptop; generous for slow CI machines
    assert isinstance(p.X, sp.csr_matrix)
    nnz_per_row = np.diff(p.X.indptr)
    assert abs(nnz_per_row.mean() - 100) < 5 and nnz_per_row.min() >= 1
    col_freq = np.diff(p.X.tocsc().indptr)
    assert col_freq[:10].min() > 10 * np.median(col_freq)  # Zipf-like popularity
    w_star, f_star = p.optimum
    assert np.linalg.norm(p.grad(w_star[None, :])) < 1e-8
    assert 0 < f_star < math.log(2)
    rng = np.random.default_rng(0)
    w = 0.1 * rng.standard_normal((64, p.d))
    idx = rng.integers(0, p.n, size=(64, 64))
    S, norms = p.clipped_grad_sum(w, idx, 1.0)
    assert S.shape == (64, p.d) and np.all(norms > 0)
    S_ref, n_ref = Problem.clipped_grad_sum(p, w[:2], idx[:2], 1.0)
    np.testing.assert_allclose(S[:2], S_ref, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(norms[:2], n_ref, rtol=1e-10)


@pytest.mark.parametrize("factory,kw", [
    (P.least_squares, dict(n=60, d=5)),
    (P.logistic_regression, dict(n=80, d=30, density=0.2)),
    (P.absolute_regression, dict(n=50, d=4)),
    (P.linear_box, dict(n=40, d=3)),
    (P.random_quadratic, dict()),
])
def test_loss_and_grad_agrees_with_separate_calls(factory, kw):
    prob = factory(seed=0, **kw)
    w = np.random.default_rng(0).normal(size=(3, prob.d)) * 0.3
    loss, grad = prob.loss_and_grad(w)
    np.testing.assert_array_equal(loss, prob.loss(w))
    np.testing.assert_array_equal(grad, prob.grad(w))


# --------------------------------------------------------------------------------------------
# public capabilities: domain, link, reg, features, scales, lipschitz_rows
# --------------------------------------------------------------------------------------------

# name -> (domain, link, reg, kind of features, has scales)
CAPABILITIES = {
    "least_squares": (None, "squared", 0.0, "dense", False),
    "logistic_dense": (None, "logistic", 1e-4, "dense", False),
    "logistic_sparse": (None, "logistic", 1e-4, "csr", False),
    "absolute_regression": (P.Box(1.0), "absolute", 0.0, "dense", True),
    "absolute_regression_free": (None, "absolute", 0.0, "dense", True),
    "random_quadratic_3d": (None, None, 0.1, None, False),
    "sparse_logistic_1d": (None, "logistic", 0.0, "dense", False),
    "quadratic_2d": (None, None, 0.0, None, False),
    "linear_box": (P.Box(1.0), "linear", 0.0, "dense", True),
}


def _views(p):
    yield p
    yield p.on(Backend("numpy", dtype="float32"))
    try:
        import array_api_strict  # noqa: F401, PLC0415
    except ImportError:
        return
    if not sp.issparse(p.features):
        yield p.on(Backend("array_api_strict"))


@pytest.mark.parametrize("name", list(CAPABILITIES))
def test_capabilities_on_problem_and_backend_views(name):
    domain, link, reg, features, has_scales = CAPABILITIES[name]
    p = small(name)
    host_X = p.features
    for q in _views(p):
        assert q.domain == domain and q.has_domain == (domain is not None)
        assert q.link == link
        assert q.reg == reg and isinstance(q.reg, float)
        if features is None:
            assert q.features is None
        else:
            assert q.features is host_X  # the host matrix, also on a device/float32 view
            assert (sp.isspmatrix_csr(q.features) if features == "csr"
                    else type(q.features) is np.ndarray and q.features.dtype == np.float64)
            assert q.features.shape == (p.n, p.d)
        if has_scales:
            assert type(q.scales) is np.ndarray and q.scales.shape == (p.d,)
            np.testing.assert_array_equal(q.scales, np.arange(1, p.d + 1) ** -1.5)
        else:
            assert q.scales is None


def test_features_are_the_data_the_losses_use():
    p = small("logistic_dense")
    w, _, _, _ = rand_inputs(p)
    m = w @ p.features.T  # (R, n) margins
    y = p.y
    want = np.mean(np.logaddexp(0.0, -y * m), axis=1) + 0.5 * p.reg * np.sum(w * w, axis=1)
    np.testing.assert_allclose(p.loss(w), want, rtol=1e-13)


def test_capabilities_are_read_only():
    p = P.absolute_regression(20, 3, seed=0)
    for attr, value in [("domain", None), ("link", "squared"), ("reg", 1.0), ("features", None),
                        ("scales", None), ("has_domain", False)]:
        with pytest.raises(AttributeError):
            setattr(p, attr, value)
    with pytest.raises(ValueError):
        p.scales[0] = 2.0
    with pytest.raises(AttributeError):
        p.domain.radius = 2.0


@pytest.mark.parametrize("name", list(SMALL))
def test_lipschitz_rows_bound_every_per_example_gradient(name):
    p = small(name)
    V = p.lipschitz_rows()
    unit = p.link in ("logistic", "absolute", "linear") and p.reg == 0.0
    if not unit:
        assert V is None
        return
    assert V is p.features
    w, idx, _, _ = rand_inputs(p, R=6, b=20)
    w = 10.0 * w  # far from the data scale: saturated links too
    G = np.asarray(p.per_example_grads(w, idx))
    Vd = V.toarray() if sp.issparse(V) else V
    assert np.all(np.abs(G) <= np.abs(Vd[idx]) * (1 + 1e-12))


def test_unregularized_logistic_has_lipschitz_rows():
    p = P.logistic_regression(30, 8, density=0.3, reg=0.0, seed=2)
    assert p.lipschitz_rows() is p.features and sp.issparse(p.features)


@pytest.mark.parametrize("domain_cls", [P.Box, P.Ball])
def test_domain_projection_is_the_euclidean_projection(domain_cls):
    rng = np.random.default_rng(3)
    dom = domain_cls(0.7)
    w = 2.0 * rng.standard_normal((50, 4))
    w[0] = 0.0  # the origin stays put
    got = dom.project(w)
    for row, z in zip(w, got):
        if domain_cls is P.Box:
            want = np.array([min(max(v, -0.7), 0.7) for v in row])
        else:
            nrm = math.sqrt(float(row @ row))
            want = row if nrm <= 0.7 else row * (0.7 / nrm)
        np.testing.assert_allclose(z, want, rtol=1e-14, atol=0)
    np.testing.assert_allclose(dom.project(got), got, rtol=1e-14, atol=0)  # idempotent


@pytest.mark.parametrize("radius", [0.0, -1.0, math.inf, math.nan, True, "1"])
@pytest.mark.parametrize("domain_cls", [P.Box, P.Ball])
def test_bad_domain_radius_raises_naming_the_value(domain_cls, radius):
    with pytest.raises(ValueError, match=f"radius={radius!r}".replace("(", r"\(")):
        domain_cls(radius)


class _BallQuadratic(Problem):
    """``f(w) = ||w - c||^2 / 2`` over the unit Euclidean ball (a user-defined problem)."""

    def __init__(self):
        super().__init__(name="ball_quadratic", n=1, d=3, config={"name": "ball_quadratic"},
                         domain=P.Ball(1.0))
        self.c = np.array([2.0, 0.0, 0.0])

    def loss(self, w):
        return 0.5 * np.sum((w - self.c) ** 2, axis=1)

    def per_example_grads(self, w, idx):
        return np.broadcast_to((w - self.c)[:, None, :], idx.shape + (self.d,)).copy()


def test_user_problem_with_a_ball_domain_projects_onto_it():
    p = _BallQuadratic()
    assert p.has_domain and p.domain == P.Ball(1.0) and p.link is None and p.features is None
    w = np.array([[3.0, 4.0, 0.0], [0.1, 0.2, 0.3]])
    np.testing.assert_allclose(p.project(w), [[0.6, 0.8, 0.0], [0.1, 0.2, 0.3]], rtol=1e-15)
    import dpsim  # noqa: PLC0415

    res = dpsim.simulate(p, "sgd", steps=50, batch_size=1)
    np.testing.assert_allclose(res.params, [[1.0, 0.0, 0.0]], atol=1e-6)


def test_problem_rejects_an_unknown_domain():
    with pytest.raises(ValueError, match="domain='box'"):
        Problem(name="x", n=1, d=1, config={"name": "x"}, domain="box")


def test_a_problem_sent_to_another_process_still_computes_its_optimum():
    """The "optimum not computed yet" sentinel survives pickling (Dask workers receive problems
    pickled before their optimum is known)."""
    import cloudpickle

    p = P.logistic_regression(60, 3, seed=0)
    q = cloudpickle.loads(cloudpickle.dumps(p))
    w_star, f_star = q.optimum
    assert f_star == p.optimum[1]
    np.testing.assert_array_equal(w_star, p.optimum[0])


@pytest.mark.parametrize("density", [1.0, 0.2])
def test_full_data_pass_by_row_blocks_matches_one_pass(monkeypatch, density):
    """Above RECORD_BLOCK_BYTES the records' loss and gradient run by row blocks (bounded memory);
    only the summation order changes: agreement to a few ulps of the sums."""
    from dpsim.problems import glm

    p = glm.logistic_regression(600, 12, density=density, seed=2)
    w = np.random.default_rng(0).standard_normal((5, 12))
    f1, g1 = p.loss_and_grad(w)
    monkeypatch.setattr(glm, "RECORD_BLOCK_BYTES", 1000)
    assert len(p._row_blocks(5)) > 1
    f2, g2 = p.loss_and_grad(w)
    np.testing.assert_allclose(f2, f1, rtol=1e-13)
    np.testing.assert_allclose(g2, g1, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(p.loss(w), f1, rtol=1e-13)
    np.testing.assert_allclose(p.grad(w), g1, rtol=1e-12, atol=1e-15)


def _blocked_pass_whole_R(p, w):
    """The row-blocked full-data pass on all R trials at once (the reference of the by-trials pass)."""
    wt = np.ascontiguousarray(w.T)
    out = G = None
    for a, b in p._row_blocks(w.shape[0]):
        X, y = p.X[a:b], p.y[a:b][:, None]
        M = X @ wt
        part = np.sum(p._ell(M, y), axis=0)
        out = part if out is None else out + part
        part = X.T @ p._dell(M, y)
        G = part if G is None else G + part
    out = out / p.n
    G /= p.n
    G = np.ascontiguousarray(G.T)
    if p.reg:
        out = out + (0.5 * p.reg) * np.sum(w * w, axis=1)
        G += p.reg * w
    return out, G


@pytest.mark.parametrize("reg", [1e-3, 0.0])
@pytest.mark.parametrize("R", [1, 2, 3, 7])
def test_full_data_pass_by_trial_chunks_is_bit_for_bit_the_whole_pass(monkeypatch, R, reg):
    """Row-blocked passes over CSR features run by chunks of trials (no (d, R) temporary): the
    same numbers, bit for bit, as the blocked pass over all R trials at once, for every chunk
    width (at least two trials per chunk)."""
    from dpsim.problems import glm

    p = glm.logistic_regression(700, 40, density=0.1, reg=reg, seed=2)
    w = np.random.default_rng(R).standard_normal((R, 40)) * 0.3
    monkeypatch.setattr(glm, "RECORD_BLOCK_BYTES", 1000)
    assert len(p._row_blocks(R)) > 1
    f0, g0 = _blocked_pass_whole_R(p, w)
    for width in (2, 3, 1000):
        monkeypatch.setattr(glm, "RECORD_TRIAL_BYTES", width * 40 * 8)
        f, g = p.loss_and_grad(w)
        np.testing.assert_array_equal(f, f0)
        np.testing.assert_array_equal(g, g0)
        np.testing.assert_array_equal(p.loss(w), f0)
        np.testing.assert_array_equal(p.grad(w), g0)
