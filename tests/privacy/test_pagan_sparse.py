"""The GLM path of the ellipsoid privatizer (``dpsim.privacy._ellipsoid.glm_projected_sum``).

It computes ``Σ_i π_A(g_i)`` from the feature rows (the nonzeros of a CSR row when the gradient is
sparse) without forming the ``(R, b, d)`` per-example gradients.  Checked against

* a naive reference: a Python loop over trials and examples, the dense gradient
  ``l'(x·w, y) x + ρ w`` from NumPy, the multiplier from ``scipy.optimize.brentq`` on the secular
  equation ``Σ_j a_j g_j²/(1 + λa_j)² = 1`` (an independent root-finder), and
* the materializing path of the privatizer (``per_example()`` + the dense projection kernel),
  end to end through ``simulate`` with the same seed: the random streams are untouched (the noise
  is drawn after the projection in both paths), so the final parameters agree to rounding.

Tolerances: the two computations differ only in the order of floating-point sums (margins over
the nonzeros instead of the dense row; λ from Newton vs Brent to a relative 4·2⁻⁵²), so the
results agree to a few hundred ulps of the largest entry; ``rtol = atol = 1e-12`` relative to that
scale leaves a margin of ~10³ over the observed differences (< 1e-15).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import brentq

import dpsim
import dpsim.privacy.ellipsoid as E
from dpsim import optimizers, problems
from dpsim.privacy._ellipsoid import glm_projected_sum


def _link_derivative(link, m, y):
    if link == "squared":
        return m - y
    if link == "logistic":
        return -y / (1.0 + math.exp(y * m))
    if link == "absolute":
        return float(np.sign(m - y))
    return -1.0


def _naive_projection(g, a):
    """π_A(g) with λ from brentq on φ(λ) = Σ a_j g_j²/(1 + λ a_j)² − 1 (λ = 0 inside)."""
    w = a * g * g
    if not np.any(a > 0) or w.sum() <= 1.0:
        return g.copy(), 0.0

    def phi(lam):
        return float(np.sum(w / (1.0 + lam * a) ** 2)) - 1.0

    pos = a > 0
    hi = 2.0 * math.sqrt(float(np.sum(g[pos] ** 2 / a[pos]))) + 1.0
    lam = brentq(phi, 0.0, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=2000)
    return g / (1.0 + lam * a), lam


def naive_glm_projected_sum(X, y, link, reg, W, idx, mask, Amat, arow):
    Xd = X.toarray() if sp.issparse(X) else np.asarray(X)
    R, b = idx.shape
    out = np.zeros_like(W)
    lam = np.zeros((R, b))
    for r in range(R):
        a = Amat[arow[r]]
        for i in range(b):
            if mask is not None and not mask[r, i]:
                continue
            x = Xd[idx[r, i]]
            g = _link_derivative(link, float(x @ W[r]), y[idx[r, i]]) * x + reg * W[r]
            p, lam[r, i] = _naive_projection(g, a)
            out[r] += p
    return out, lam


def _data(rng, n, d, sparse, density=0.2):
    if sparse:
        X = sp.random(n, d, density=density, format="csr", random_state=rng, dtype=np.float64)
        X.data = rng.standard_normal(X.data.size)
        X.sort_indices()
    else:
        X = rng.standard_normal((n, d))
    return X


CASES = [  # (link, sparse, reg, A varies along j)
    ("logistic", True, 0.0, True),
    ("logistic", True, 0.3, False),
    ("logistic", True, 0.3, True),
    ("squared", False, 0.0, True),
    ("squared", False, 0.2, False),
    ("absolute", False, 0.0, True),
    ("linear", True, 0.0, True),
    ("absolute", True, 0.1, True),
    ("logistic", True, 0.0, False),
    ("linear", False, 0.0, False),
]


@pytest.mark.parametrize("link,sparse,reg,varying", CASES)
def test_kernel_matches_naive_loop(link, sparse, reg, varying):
    rng = np.random.default_rng(7)
    n, d, R, b = 40, 12, 3, 6
    X = _data(rng, n, d, sparse)
    y = rng.choice([-1.0, 1.0], n) if link == "logistic" else rng.standard_normal(n)
    W = 2.0 * rng.standard_normal((R, d))
    idx = rng.integers(0, n, (R, b))
    mask = rng.random((R, b)) < 0.8
    if varying:  # one ellipsoid per trial, axis ratio up to 10^3; the last trial unconstrained
        Amat = 10.0 ** rng.uniform(-1.5, 1.5, (R, d))
        Amat[-1] = 0.0
    else:
        Amat = np.array([[0.7] * d, [4.0] * d, [0.0] * d])
    arow = np.arange(R)
    got, lam = glm_projected_sum(X, y, link, reg, W, idx, mask, Amat, arow)
    ref, lam_ref = naive_glm_projected_sum(X, y, link, reg, W, idx, mask, Amat, arow)
    scale = np.max(np.abs(ref))
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(lam, lam_ref, rtol=1e-10, atol=1e-14)
    assert np.array_equal(lam > 0, lam_ref > 0)
    assert np.all(lam[~mask] == 0)
    # some examples are projected and some are not, in every constrained trial
    assert np.all((lam[:-1] > 0).any(axis=1))


def test_sparse_rows_give_the_dense_kernels_bits():
    """ρ = 0: the projection over the nonzeros is bit-identical to the dense kernel applied to the
    densified gradient row with the same entries (zeros add +0 to every secular sum)."""
    rng = np.random.default_rng(3)
    n, d, R, b = 30, 25, 2, 5
    X = _data(rng, n, d, True, density=0.3)
    Xd = X.toarray()
    W = rng.standard_normal((R, d))
    y = rng.standard_normal(n)
    Amat = 10.0 ** rng.uniform(-1, 2, (1, d))
    idx = rng.integers(0, n, (R, b))
    got, lam = glm_projected_sum(X, y, "linear", 0.0, W, idx, None, Amat, np.zeros(R, np.int64))
    G = -Xd[idx].reshape(-1, d)  # linear link: g = -x exactly, so both see the same entries
    p, lam_d = dpsim.privacy.project_ellipsoid(G, Amat[0], return_lambda=True)
    assert np.array_equal(lam.reshape(-1), lam_d)
    # the projected rows are the same bits; only the order of the sum over the batch may differ
    np.testing.assert_allclose(got, p.reshape(R, b, d).sum(axis=1), rtol=0,
                               atol=b * np.finfo(float).eps * np.max(np.abs(p)))


def _simulate(problem, fast, monkeypatch, **kw):
    if not fast:  # the materializing reference path
        monkeypatch.setattr(E, "_glm_inputs", lambda batch, params: None)
    opt = optimizers.get(kw.pop("algorithm", "pagan"), **kw)
    res = dpsim.simulate(problem, opt, steps=6, batch_size=12, trials=3, seed=5, record_every=2,
                         metrics=("loss",))
    monkeypatch.undo()
    return res


@pytest.mark.parametrize("case", ["sparse_logistic_reg", "sparse_logistic_optimal", "absreg_optimal",
                                  "least_squares_pasan"])
def test_simulate_matches_materializing_path(case, monkeypatch):
    if case == "sparse_logistic_reg":  # reg = 1e-4 (the default), identity scaling
        prob, kw = problems.logistic_regression(300, 40, density=0.1, seed=0), dict(radius=0.05)
    elif case == "sparse_logistic_optimal":  # reg = 0.01 with a varying A: the dense-scratch case
        prob = problems.logistic_regression(300, 40, density=0.1, reg=0.01, seed=0)
        kw = dict(radius=0.05, scaling=np.linspace(1.0, 20.0, 40))
    elif case == "absreg_optimal":  # PAGAN's own experiment: dense, reg = 0, C ∝ σ^{-4/3}
        prob, kw = problems.absolute_regression(200, 15, seed=0), dict(radius=0.2, scaling="optimal")
    else:
        prob = problems.least_squares(200, 10, seed=0)
        kw = dict(radius=0.5, algorithm="pasan", noise_multiplier=0.7)
    fast = _simulate(prob, True, monkeypatch, **dict(kw))
    ref = _simulate(prob, False, monkeypatch, **dict(kw))
    scale = np.max(np.abs(ref.params))
    np.testing.assert_allclose(fast.params, ref.params, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(fast.loss, ref.loss, rtol=1e-12)
    np.testing.assert_array_equal(fast.records["projected_fraction"], ref.records["projected_fraction"])
    assert 0 < np.mean(ref.records["projected_fraction"]) < 1  # the projection was exercised


def test_fast_path_is_taken_and_never_materializes(monkeypatch):
    prob = problems.logistic_regression(300, 40, density=0.1, seed=0)

    def boom(*a, **k):
        raise AssertionError("per-example gradients materialized")

    monkeypatch.setattr(type(prob), "per_example_grads", boom)
    res = dpsim.simulate(prob, optimizers.get("pagan", radius=0.05), steps=2, batch_size=8, trials=2,
                         seed=0)
    assert np.all(np.isfinite(res.params))


def test_constant_a_with_reg_stays_inside_under_cancellation():
    """ρ ≠ 0, constant A, w concentrated on the example's support with the data term cancelling
    the ridge term there: ||g||² = Σ_S(...)² + ρ²(||w||² − Σ_S w_j²) cancels catastrophically.
    The norm is rounded up (never down), so the projection stays inside the ball."""
    d, R = 200, 1
    X = sp.csr_matrix((np.array([1.0]), (np.array([0]), np.array([0]))), shape=(1, d))
    w = np.full(d, 1e-9)
    w[0] = 1e8  # ||w||² ≈ w_0²: the off-support mass is lost in the difference
    W = w[None, :]
    reg = 1e-3
    # squared link, y chosen so that c x_0 + ρ w_0 = (w_0 − y) + ρ w_0 is tiny
    y = np.array([w[0] * (1 + reg) - 1e-6])
    alpha = 1.0 / (1e-7) ** 2  # radius 1e-7, below ||g|| ≈ ρ·1e-9·√199 + 1e-6
    got, lam = glm_projected_sum(X, y, "squared", reg, W, np.zeros((R, 1), np.int64), None,
                                 np.full((1, d), alpha), np.zeros(R, np.int64))
    assert lam[0, 0] > 0
    assert math.sqrt(alpha) * np.linalg.norm(got[0]) <= 1.0 + 1e-12
