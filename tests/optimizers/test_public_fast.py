"""The GLM paths of AdaDPS and PDP-SGD (``dpsim.optimizers.public``) against their references.

* AdaDPS's mean public gradient ``X_pubᵀ c / m + ρ w`` is the reference's
  ``mean(public_per_example())`` summed in another order: agreement to rounding (``1e-12``
  relative to the largest entry, a margin of ~10³ over the observed ~1e-15).
* PDP-SGD's projection ``Pᵀ U_k Λ_k⁻¹ U_kᵀ P g`` from the ``m × m`` Gram matrix is the reference's
  ``V_k V_kᵀ g`` from the SVD of ``P``.  Singular vectors are defined up to sign (and rotation inside
  a repeated singular value), so projections are compared, never vectors.  Both are accurate to
  ``O(ε_mach · s_1 / (s_k − s_{k+1}))`` times the top-``k`` block's condition number ``s_1/s_k`` (the
  Gram side); the tolerances below are that bound, computed from the test matrix's own singular
  values, times a safety factor of 100.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import dpsim
import dpsim.optimizers.public as PB
from dpsim import optimizers, problems

EPS = np.finfo(float).eps


def _run(problem, name, fast, monkeypatch, steps=5, **kw):
    if not fast:  # the materializing reference
        monkeypatch.setattr(PB._PUBLIC, "get", lambda batch: None)
    try:
        opt = optimizers.get(name, **kw)
        return dpsim.simulate(problem, opt, steps=steps, batch_size=16, trials=3, seed=2,
                              record_every=1, metrics=("loss",))  # no optimum (an LP) needed
    finally:
        monkeypatch.undo()


PROBLEMS = {
    "sparse_logistic": lambda: problems.logistic_regression(2000, 300, density=0.05, seed=0),
    "sparse_logistic_noreg": lambda: problems.logistic_regression(2000, 300, density=0.05, reg=0.0,
                                                                  seed=1),
    "least_squares": lambda: problems.least_squares(3000, 60, seed=0),
    "absolute_regression": lambda: problems.absolute_regression(1500, 40, domain=None, seed=0),
    "linear_box": lambda: problems.linear_box(3000, 40, seed=0),
}


@pytest.mark.parametrize("which", sorted(PROBLEMS))
def test_adadps_matches_reference(which, monkeypatch):
    prob = PROBLEMS[which]()
    fast = _run(prob, "adadps", True, monkeypatch, public_fraction=0.01)
    ref = _run(prob, "adadps", False, monkeypatch, public_fraction=0.01)
    scale = np.max(np.abs(ref.params))
    np.testing.assert_allclose(fast.params, ref.params, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(fast.loss, ref.loss, rtol=1e-12)


def _naive_projection(P, g, k):
    """V_k V_kᵀ g from NumPy's SVD of the dense public gradients P (m, d)."""
    _, s, vh = np.linalg.svd(P, full_matrices=False)
    V = vh[:k]
    return V.T @ (V @ g), s


def _dense_public_grads(X, y, link, reg, w):
    Xd = X.toarray() if sp.issparse(X) else X
    m = Xd @ w
    c = PB._link_derivative(link, m, y)
    return c[:, None] * Xd + reg * w[None, :]


@pytest.mark.parametrize("link,sparse,reg", [("logistic", True, 0.0), ("logistic", True, 1e-2),
                                              ("squared", False, 0.0), ("squared", False, 0.5),
                                              ("absolute", True, 0.1), ("linear", False, 0.0)])
def test_gram_projection_matches_svd(link, sparse, reg):
    rng = np.random.default_rng(11)
    m, d, R, k = 30, 80, 4, 5
    if sparse:
        X = sp.random(m, d, density=0.2, format="csr", random_state=rng, dtype=np.float64)
        X.data = rng.standard_normal(X.data.size)
    else:
        X = rng.standard_normal((m, d))
    y = rng.choice([-1.0, 1.0], m) if link == "logistic" else rng.standard_normal(m)
    W = rng.standard_normal((R, d))
    G = rng.standard_normal((R, d))
    pub = PB._PublicGLM(X, X, y, link, reg, np.arange(m))
    got = PB._project_public_subspace(pub, W, G, k)
    for r in range(R):
        P = _dense_public_grads(X, y, link, reg, W[r])
        ref, s = _naive_projection(P, G[r], k)
        bound = 100 * EPS * (s[0] / s[k - 1]) * s[0] / (s[k - 1] - s[k]) * np.linalg.norm(G[r])
        assert np.linalg.norm(got[r] - ref) <= bound
        # and it is a projection onto a k-dimensional subspace of P's row space
        np.testing.assert_allclose(got[r] @ (G[r] - got[r]), 0.0, atol=1e-10 * (G[r] @ G[r]))


@pytest.mark.parametrize("which", ["sparse_logistic", "least_squares", "absolute_regression",
                                   "lanczos"])
def test_pdp_sgd_matches_reference(which, monkeypatch):
    if which == "lanczos":  # m = 400 public examples, k = 2: the Lanczos branch
        prob = problems.logistic_regression(4000, 420, density=0.05, seed=0)
        kw = dict(public_fraction=0.1, k=2)
        steps = 2
    else:
        prob = PROBLEMS[which]()
        kw = dict(public_fraction=0.01, k=3)
        steps = 5
    fast = _run(prob, "pdp_sgd", True, monkeypatch, steps=steps, **kw)
    ref = _run(prob, "pdp_sgd", False, monkeypatch, steps=steps, **kw)
    scale = np.max(np.abs(ref.params))
    # measured differences ~1e-15; the bound of the module docstring for these public splits
    # (s_1/s_k ≤ 10, s_1/(s_k − s_{k+1}) ≤ 10³) is ~1e-12 per step
    np.testing.assert_allclose(fast.params, ref.params, rtol=1e-10, atol=1e-10 * scale)


def test_rank_deficient_public_gradients_fall_back_to_the_svd(monkeypatch):
    """Three distinct public feature rows, k = 5: λ_4 = λ_5 = 0 in the Gram matrix and the top-k
    right singular vectors include two arbitrary null directions of P (the reference's answer
    there is whatever LAPACK returns).  The trial falls back to the SVD; what is determined — the
    projection onto P's row space — equals the reference's, and the result is the orthogonal
    projection of g onto a k-dimensional subspace containing that row space."""
    rng = np.random.default_rng(0)
    m, d, k = 20, 12, 5
    X = rng.standard_normal((3, d))[rng.integers(0, 3, m)]
    y = rng.standard_normal(m)
    W = rng.standard_normal((2, d))
    G = rng.standard_normal((2, d))
    pub = PB._PublicGLM(X, X, y, "squared", 0.0, np.arange(m))
    calls = []
    real_svd = np.linalg.svd
    monkeypatch.setattr(np.linalg, "svd", lambda *a, **kw: calls.append(1) or real_svd(*a, **kw))
    got = PB._project_public_subspace(pub, W, G, k)
    assert len(calls) == 2  # both trials fell back
    for r in range(2):
        P = _dense_public_grads(X, y, "squared", 0.0, W[r])
        ref, s = _naive_projection(P, G[r], k)
        _, s, vh = real_svd(P, full_matrices=False)
        row = vh[:3]  # s[3:] are zero: the row space is 3-dimensional
        assert s[3] < 1e-12 * s[0]
        np.testing.assert_allclose(row @ got[r], row @ ref, atol=1e-12 * np.linalg.norm(G[r]))
        np.testing.assert_allclose(row @ got[r], row @ G[r], atol=1e-12 * np.linalg.norm(G[r]))
        np.testing.assert_allclose(got[r] @ (G[r] - got[r]), 0.0, atol=1e-12 * (G[r] @ G[r]))


@pytest.mark.parametrize("name", ["adadps", "pdp_sgd"])
def test_fast_paths_never_materialize_public_gradients(name, monkeypatch):
    prob = problems.logistic_regression(2000, 300, density=0.05, seed=0)

    def boom(*a, **k):
        raise AssertionError("per-example gradients materialized")

    monkeypatch.setattr(type(prob), "per_example_grads", boom)
    kw = dict(public_fraction=0.01) if name == "adadps" else dict(public_fraction=0.01, k=4)
    res = dpsim.simulate(prob, optimizers.get(name, **kw), steps=2, batch_size=8, trials=2, seed=0)
    assert np.all(np.isfinite(res.params))


def test_pdp_sgd_k_larger_than_the_public_split():
    prob = problems.logistic_regression(500, 300, density=0.05, seed=0)
    with pytest.raises(ValueError, match="k=10 exceeds"):
        dpsim.simulate(prob, optimizers.get("pdp_sgd", k=10, public_fraction=0.01), steps=1,
                       batch_size=8, trials=1, seed=0)


def test_lanczos_and_dense_eigenpairs_give_the_same_projector(monkeypatch):
    """The two solvers of ``_top_eigenpairs`` on one Gram matrix (m = 120 with the Lanczos
    threshold lowered): same eigenvalues, same spectral projector ``U Uᵀ``, to the Davis–Kahan
    bound ``100 m ε ||K|| / (λ_k − λ_{k+1})``."""
    rng = np.random.default_rng(5)
    m, d, k = 120, 400, 3
    X = sp.random(m, d, density=0.05, format="csr", random_state=rng, dtype=np.float64)
    c = rng.uniform(0.2, 0.5, m) * rng.choice([-1.0, 1.0], m)
    K = (X @ X.T).toarray() * np.outer(c, c)
    ev = np.linalg.eigvalsh(K)
    bound = 100 * m * EPS * ev[-1] / (ev[-k] - ev[-k - 1])
    monkeypatch.setattr(PB, "LANCZOS_MIN_M", 10)
    calls = []
    real = PB.scipy.sparse.linalg.eigsh
    monkeypatch.setattr(PB.scipy.sparse.linalg, "eigsh", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    dense = []
    real_eigh = PB.scipy.linalg.eigh
    monkeypatch.setattr(PB.scipy.linalg, "eigh", lambda *a, **kw: dense.append(1) or real_eigh(*a, **kw))
    lam_l, U_l = PB._top_eigenpairs(K.copy(), k)
    assert calls and not dense  # the Lanczos branch ran and its residuals were accepted
    monkeypatch.setattr(PB, "LANCZOS_MIN_M", 10**9)
    lam_d, U_d = PB._top_eigenpairs(K.copy(), k)
    np.testing.assert_allclose(lam_l, lam_d, rtol=1e-12)
    np.testing.assert_allclose(lam_l, ev[-k:], rtol=1e-12)
    assert np.max(np.abs(U_l @ U_l.T - U_d @ U_d.T)) <= bound


def _csr_with_duplicates(rng, m, d, density, unsorted=False):
    """A CSR matrix with empty rows and columns, negative entries, and (when ``unsorted``) rows
    listing their columns out of order and twice (not canonical, as a custom problem might)."""
    X = sp.random(m, d, density=density, format="csr", random_state=rng, dtype=np.float64)
    X.data = rng.standard_normal(X.data.size)
    X = X.tolil()
    X[3, :] = 0.0  # an empty row
    X[:, 5] = 0.0  # an empty column
    X = X.tocsr()
    X.eliminate_zeros()
    if not unsorted:
        return X
    data, indices, indptr = [], [], [0]
    for i in range(m):
        lo, hi = X.indptr[i], X.indptr[i + 1]
        cols, vals = X.indices[lo:hi][::-1], X.data[lo:hi][::-1]
        if hi > lo:  # the row's first column once more, split into two entries
            cols = np.append(cols, cols[0])
            vals = np.append(vals * 0.5, vals[0] * 0.5)
            vals[0] = X.data[hi - 1] * 0.5
        data.extend(vals)
        indices.extend(cols)
        indptr.append(len(data))
    return sp.csr_matrix((np.array(data), np.array(indices, dtype=np.int32), np.array(indptr)),
                         shape=X.shape)


@pytest.mark.parametrize("unsorted", [False, True], ids=["canonical", "unsorted-duplicates"])
def test_adadps_column_order_kernels_equal_scipy_bit_for_bit(unsorted):
    """The kernels of ``_adadps_fast`` against SciPy's products and the reference's NumPy
    expressions, with ``R`` and ``d`` not multiples of the tiles: margins (canonical rows only; a
    non-canonical split is detected and takes SciPy's loop), ``X_pubᵀ C`` followed by RMSProp,
    and the logistic derivative at edge margins."""
    rng = np.random.default_rng(3)
    m, d, R = 37, 203, 11
    X = _csr_with_duplicates(rng, m, d, 0.08, unsorted)
    y = rng.choice([-1.0, 1.0], m)
    pub = PB._PublicGLM(X, X, y, "logistic", 1e-3, np.arange(m))
    assert pub.rows_sorted is (not unsorted)
    colptr, rows, values = pub.csc
    W = rng.standard_normal((R, d))
    ref_S = np.asarray(X @ np.ascontiguousarray(W.T))
    if not unsorted:
        S = np.zeros((m, R))
        PB._csc_margins(colptr, rows, values, W, S, 8)
        np.testing.assert_array_equal(S, ref_S)
    ref_S[0, :4] = [0.0, -0.0, 800.0, -800.0]
    ref_S[1, :3] = [np.nan, np.inf, -np.inf]
    np.testing.assert_array_equal(PB._public_derivatives(pub, ref_S),
                                  PB._link_derivative("logistic", ref_S, y[:, None]))
    C = PB._link_derivative("logistic", np.asarray(X @ np.ascontiguousarray(W.T)), y[:, None])
    v = rng.random((R, d)) * 1e-3
    v[0, :3] = [-1e-300, np.nan, 0.0]  # max(v, 0) and NaN propagation
    beta = rng.uniform(0.5, 0.99, (R, 1))
    eps = np.full((1, 1), 1e-8)
    g = np.ascontiguousarray((X.T @ C).T)
    g /= m
    g += 1e-3 * W
    ref_v = v * beta + (g * g) * (1.0 - beta)
    ref_s = 1.0 / (np.sqrt(np.maximum(ref_v, 0.0)) + eps)
    got_v, s = v.copy(), np.empty_like(v)
    PB._csc_rmsprop_scale(colptr, rows, values, np.ascontiguousarray(C), float(m), 1e-3, W, got_v,
                          beta, 1.0 - beta, eps, s, 16)
    np.testing.assert_array_equal(got_v, ref_v)
    np.testing.assert_array_equal(s, ref_s)


def test_adadps_fast_path_on_unsorted_rows_equals_the_reference(monkeypatch):
    """The SciPy-order margins (taken when a public split's rows are not in column order) give
    the reference's numbers too."""
    prob = problems.logistic_regression(2000, 300, density=0.05, seed=0)
    monkeypatch.setattr(PB._PublicGLM, "rows_sorted", property(lambda self: False))
    calls = []
    kernel = PB._csr_matvecs
    monkeypatch.setattr(PB, "_csr_matvecs", lambda *a: calls.append(1) or kernel(*a))
    fast = dpsim.simulate(prob, optimizers.get("adadps", public_fraction=0.05), steps=4,
                          batch_size=16, trials=3, seed=2, record_every=2, fast=False)
    assert len(calls) == 4
    monkeypatch.setattr(PB._PUBLIC, "get", lambda batch: None)
    ref = dpsim.simulate(prob, optimizers.get("adadps", public_fraction=0.05), steps=4,
                         batch_size=16, trials=3, seed=2, record_every=2, fast=False)
    np.testing.assert_allclose(fast.params, ref.params, rtol=1e-12, atol=1e-15)


def _gram_case(rng, m, d, R, reg, link="logistic"):
    X = sp.random(m, d, density=0.02, format="csr", random_state=rng, dtype=np.float64)
    X.data = rng.random(X.data.size)
    y = rng.choice([-1.0, 1.0], m)
    pub = PB._PublicGLM(X, X, y, link, reg, np.arange(m))
    W = 0.3 * rng.standard_normal((R, d))
    S = pub.margins(W)
    return pub, W, S, pub.derivatives(W, S)


def _dense_gram(pub, W, S, C, r):
    c = C[:, r]
    K = pub.gram * np.outer(c, c)
    if pub.reg:
        u = c * S[:, r]
        K += pub.reg * (u[:, None] + u[None, :]) + pub.reg ** 2 * float(W[r] @ W[r])
    return K


@pytest.mark.parametrize("reg", [0.0, 1e-2])
def test_batched_lanczos_gives_the_dense_projector(reg):
    """All trials' Gram matrices at once (``_batched_top_eigenpairs``, the path for ``m ≥ 400``)
    against LAPACK's dense ``eigh`` of each formed ``K_r``: eigenvalues to 1e-12 relative, spectral
    projectors to the Davis–Kahan bound ``100 m ε ||K|| / (λ_k − λ_{k+1})`` (the same bound as the
    per-trial Lanczos test), every trial accepted by the residual check."""
    rng = np.random.default_rng(8)
    m, d, R, k = 420, 3000, 3, 3
    pub, W, S, C = _gram_case(rng, m, d, R, reg)
    lam, U, ok = PB._batched_top_eigenpairs(pub.gram, C, S, W, reg, k)
    assert ok.all()
    for r in range(R):
        K = _dense_gram(pub, W, S, C, r)
        ev, V = np.linalg.eigh(K)
        np.testing.assert_allclose(lam[r], ev[-k:], rtol=1e-12)
        bound = 100 * m * EPS * ev[-1] / (ev[-k] - ev[-k - 1])
        Vk = V[:, -k:]
        diff = np.max(np.abs(U[r] @ U[r].T - Vk @ Vk.T))
        assert diff <= bound
        assert diff <= 1e-12  # ARPACK's stopping rule: observed ~1e-15, as ARPACK's own projectors


def test_unconverged_batched_trials_take_the_per_trial_solver(monkeypatch):
    """With too few Lanczos steps allowed no trial converges: every trial takes
    ``_top_eigenpairs`` (ARPACK) and the projection is unchanged to the Davis–Kahan bound."""
    rng = np.random.default_rng(9)
    m, d, R, k = 400, 2500, 2, 2
    pub, W, S, C = _gram_case(rng, m, d, R, 1e-3)
    G = rng.standard_normal((R, d))
    full = PB._project_public_subspace(pub, W, G, k)
    monkeypatch.setattr(PB, "LANCZOS_MAX_STEPS", 5)
    _, _, ok = PB._batched_top_eigenpairs(pub.gram, C, S, W, pub.reg, k)
    assert not ok.any()
    calls = []
    real = PB._top_eigenpairs
    monkeypatch.setattr(PB, "_top_eigenpairs", lambda *a: calls.append(1) or real(*a))
    short = PB._project_public_subspace(pub, W, G, k)
    assert len(calls) == R
    for r in range(R):
        ev = np.linalg.eigvalsh(_dense_gram(pub, W, S, C, r))
        bound = 100 * m * EPS * ev[-1] / (ev[-k] - ev[-k - 1]) * np.linalg.norm(G[r])
        assert np.linalg.norm(full[r] - short[r]) <= bound


def test_small_public_splits_never_take_the_batched_solver(monkeypatch):
    """Below ``LANCZOS_MIN_M`` public examples (pagan_absreg's dense d = 100 with m = 50, noisy
    AdaGrad's m = 250) the per-trial dense ``eigh`` runs as before: the batched Lanczos solver is
    never called."""
    def boom(*a, **k):
        raise AssertionError("batched Lanczos on a small public split")

    monkeypatch.setattr(PB, "_batched_top_eigenpairs", boom)
    prob = problems.absolute_regression(2000, 100, seed=0)
    res = dpsim.simulate(prob, optimizers.get("pdp_sgd", k=5, public_fraction=0.025), steps=3,
                         batch_size=20, trials=2, seed=0, metrics=("loss",))
    assert np.all(np.isfinite(res.params))


def test_batched_lanczos_in_trial_chunks(monkeypatch):
    """Trials are solved in chunks of ``LANCZOS_TRIALS``: with chunks of 2 (three calls for five
    trials) the projections equal the one-chunk ones to the Davis–Kahan bound."""
    rng = np.random.default_rng(10)
    m, d, R, k = 400, 2500, 5, 2
    pub, W, S, C = _gram_case(rng, m, d, R, 1e-3)
    G = rng.standard_normal((R, d))
    whole = PB._project_public_subspace(pub, W, G, k)
    calls = []
    real = PB._batched_top_eigenpairs
    monkeypatch.setattr(PB, "_batched_top_eigenpairs", lambda *a: calls.append(a[1].shape[1]) or real(*a))
    monkeypatch.setattr(PB, "LANCZOS_TRIALS", 2)
    chunked = PB._project_public_subspace(pub, W, G, k)
    assert calls == [2, 2, 1]
    for r in range(R):
        ev = np.linalg.eigvalsh(_dense_gram(pub, W, S, C, r))
        bound = 100 * m * EPS * ev[-1] / (ev[-k] - ev[-k - 1]) * np.linalg.norm(G[r])
        assert np.linalg.norm(whole[r] - chunked[r]) <= bound
