"""dpsim.problems.from_data: your own data as a GLM with the built-in kernels, exact optimum,
held-out metrics and a data hash in the config."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import dpsim
from dpsim.fast import block as fused
from dpsim.problems import from_data
from dpsim.problems.glm import _Logistic


def _blobs(n=240, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) / np.sqrt(d)
    w = rng.standard_normal(d) * 3
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ w))).astype(int)  # {0, 1}
    return X, y


def test_breast_cancer_fast_path_optimum_and_test_accuracy():
    sk = pytest.importorskip("sklearn.datasets")
    X, y = sk.load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    X /= np.linalg.norm(X, axis=1).max()
    prob = from_data(X, y, loss="logistic", reg=1e-3, test=0.2, seed=0, name="breast_cancer")
    assert (prob.n, prob.n_test, prob.d) == (455, 114, 30)
    assert prob.config["labels"] == "{0, 1}"
    w, f = prob.optimum
    g = prob.grad(w[None, :])[0]
    assert np.linalg.norm(g) < 1e-9  # the exact optimum
    assert not isinstance(fused.plan(prob, dpsim.optimizers.dp_sgd(lr=1.0), trials=3,
                                     backend="numpy", dtype="float64"), str)
    res = dpsim.simulate(prob, dpsim.optimizers.dp_sgd(lr=2.0, noise_multiplier=1.0), steps=200,
                         batch_size=64, trials=3, seed=1,
                         metrics=("loss", "test_loss", "test_accuracy"))
    assert res.config["engine"] == "block"  # the small-d kernel of the built-in factories
    acc = res.test_accuracy
    assert acc.shape == (res.steps.size, 3)
    assert np.all(acc[0] == 0.5)  # w = 0: every margin 0, a tie counts 1/2
    assert np.all(acc[-1] > 0.85)  # a linear model separates this data well
    # the held-out accuracy of w* computed by hand
    Xt, yt = prob._Xt, prob._yt
    assert prob.heldout_accuracy(w[None, :])[0] == pytest.approx(np.mean(np.sign(Xt @ w) == yt))
    assert res.excess_loss[-1].min() > -1e-12


def test_labels_validated_with_one_line_errors():
    X, y = _blobs()
    with pytest.raises(ValueError, match=r"\{0, 1\} or \{-1, \+1\}, got the values \{0, 2\}"):
        from_data(X, 2 * y, loss="logistic")
    with pytest.raises(ValueError, match="both classes"):
        from_data(X, np.ones(len(y)), loss="logistic")
    with pytest.raises(ValueError, match="numeric"):
        from_data(X, np.array(["a"] * len(y)), loss="logistic")
    with pytest.raises(ValueError, match="loss must be one of"):
        from_data(X, y, loss="hinge")
    with pytest.raises(ValueError, match="240 labels"):
        from_data(X, y[:-1], loss="logistic")
    with pytest.raises(ValueError, match="non-finite"):
        Xn = X.copy()
        Xn[0, 0] = np.nan
        from_data(Xn, y, loss="logistic")
    with pytest.raises(ValueError, match="leaves 0 held-out"):
        from_data(X, y, loss="logistic", test=0.001)
    with pytest.raises(ValueError, match="reg=0 only"):
        from_data(X, y.astype(float), loss="absolute", reg=0.1)
    with pytest.raises(ValueError, match="cannot be rebuilt by name"):
        dpsim.problems.get(**from_data(X, y, loss="logistic").config)


def test_pm1_and_01_labels_give_the_same_problem():
    X, y = _blobs()
    a = from_data(X, y, loss="logistic", reg=1e-2)
    b = from_data(X, 2 * y - 1, loss="logistic", reg=1e-2)
    assert a.config["labels"] == "{0, 1}" and b.config["labels"] == "{-1, +1}"
    assert a.config["data_sha256"] == b.config["data_sha256"]  # the same data once encoded
    np.testing.assert_array_equal(a.optimum[0], b.optimum[0])


def test_same_as_the_builtin_factory_bit_for_bit():
    """from_data on the data of logistic_regression is that problem: same run, same numbers."""
    ref = dpsim.problems.logistic_regression(300, 6, seed=3)
    mine = from_data(ref.features, ref.labels, loss="logistic", reg=ref.reg)
    assert type(mine) is _Logistic
    opt = dpsim.optimizers.dp_adam(lr=0.05)
    r1 = dpsim.simulate(ref, opt, steps=40, batch_size=30, trials=3, seed=5)
    r2 = dpsim.simulate(mine, opt, steps=40, batch_size=30, trials=3, seed=5)
    np.testing.assert_array_equal(r1.loss, r2.loss)
    np.testing.assert_array_equal(r1.params, r2.params)
    np.testing.assert_array_equal(r1.excess_loss, r2.excess_loss)


def test_data_hash_separates_datasets_and_inputs_are_not_modified():
    X, y = _blobs()
    X0 = X.copy()
    a = from_data(X, y, loss="logistic", test=0.25, seed=0)
    np.testing.assert_array_equal(X, X0)
    b = from_data(X, y, loss="logistic", test=0.25, seed=1)  # another split: other data
    X2 = X.copy()
    X2[5, 1] += 1e-12
    c = from_data(X2, y, loss="logistic", test=0.25, seed=0)
    hashes = {p.config["data_sha256"] for p in (a, b, c)}
    assert len(hashes) == 3
    assert a.config == from_data(X, y, loss="logistic", test=0.25, seed=0).config


def test_sparse_ridge_regression_optimum_and_test_loss():
    rng = np.random.default_rng(2)
    n, d = 400, 60
    X = sp.random(n, d, density=0.05, random_state=3, format="csr")
    X = X + sp.hstack([sp.csr_matrix(np.ones((n, 1))), sp.csr_matrix((n, d - 1))])
    y = X @ rng.standard_normal(d) + 0.1 * rng.standard_normal(n)
    prob = from_data(sp.csr_matrix(X), y, loss="squared", reg=1e-2, test=0.2, seed=0)
    assert prob.sparse
    w, f = prob.optimum
    dense = X.toarray()
    keep = np.sort(np.random.default_rng(0).permutation(n)[80:])
    A, b = dense[keep], y[keep]
    w_ref = np.linalg.solve(A.T @ A / len(keep) + 1e-2 * np.eye(d), A.T @ b / len(keep))
    np.testing.assert_allclose(w, w_ref, rtol=1e-8, atol=1e-10)
    res = dpsim.simulate(prob, dpsim.optimizers.sgd(lr=0.5), steps=30, batch_size=40, trials=2,
                         metrics=("loss", "test_loss"))
    held = np.sort(np.random.default_rng(0).permutation(n)[:80])
    np.testing.assert_allclose(res.test_loss[-1],
                               [0.5 * np.mean((dense[held] @ p - y[held]) ** 2) for p in res.params],
                               rtol=1e-12)
    assert res.test_accuracy is None
    with pytest.raises(ValueError, match="test_accuracy.*classification"):
        dpsim.simulate(prob, "sgd", steps=1, batch_size=10, metrics=("test_accuracy",))


def test_given_test_split_and_metric_errors():
    X, y = _blobs()
    prob = from_data(X[:200], y[:200], loss="logistic", test=(X[200:], y[200:]))
    assert prob.n_test == 40 and prob.config["test"] == "given"
    with pytest.raises(ValueError, match="one encoding|got the values"):
        from_data(X[:200], y[:200], loss="logistic", test=(X[200:], 3 * y[200:]))
    with pytest.raises(ValueError, match="d=4 columns"):
        from_data(X[:200], y[:200], loss="logistic", test=(X[200:, :3], y[200:]))
    no_split = from_data(X, y, loss="logistic")
    with pytest.raises(ValueError, match="held-out split"):
        dpsim.simulate(no_split, "sgd", steps=1, batch_size=10, metrics=("loss", "test_loss"))
    with pytest.raises(ValueError, match="a single name goes in a tuple"):
        dpsim.simulate(no_split, "sgd", steps=1, batch_size=10, metrics="loss")


def test_absolute_loss_optimum():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((150, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + rng.laplace(size=150) * 0.1
    prob = from_data(X, y, loss="absolute", test=0.2)
    w, f = prob.optimum
    # an LP optimum: no direction improves F (checked on the coordinate directions)
    for j in range(3):
        for s in (1e-6, -1e-6):
            e = np.zeros(3)
            e[j] = s
            assert prob.loss((w + e)[None, :])[0] >= f - 1e-14
