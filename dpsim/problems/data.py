"""A generalized linear model on the researcher's own data: :func:`from_data`.

The problem is the same object the built-in factories return (the same classes, hence the same
fused Numba kernels, exact optimum and records), with an optional held-out split whose loss and
accuracy the engine records as ordinary metrics (``metrics=("loss", "test_loss",
"test_accuracy")``).  Its ``config`` carries a SHA-256 of the data, so that caches and checkpoints
keyed by the config can never mix two data sets.
"""

from __future__ import annotations

import hashlib
import numbers

import numpy as np
import scipy.sparse as sp

from .base import Problem, _real, _seed
from .glm import _AbsoluteRegression, _LeastSquares, _Logistic

__all__ = ["from_data", "LOSSES", "data_hash"]

#: The losses :func:`from_data` accepts (the GLM links of :mod:`dpsim.problems.glm`).
LOSSES = ("logistic", "squared", "absolute")

_CLASSES = {"logistic": _Logistic, "squared": _LeastSquares, "absolute": _AbsoluteRegression}


def _features(X, what):
    """``X`` as float64 CSR (sparse input) or a C-contiguous float64 copy (dense), validated."""
    if sp.issparse(X):
        try:
            X = sp.csr_matrix(X, dtype=np.float64, copy=True)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what} must be a numeric 2-D array or scipy.sparse matrix ({exc})") from None
        vals = X.data
    else:
        try:
            X = np.array(X, dtype=np.float64, order="C", copy=True)
        except (TypeError, ValueError):
            raise ValueError(f"{what} must be a numeric 2-D array or scipy.sparse matrix, "
                             f"got {type(X).__name__}") from None
        if X.ndim != 2:
            raise ValueError(f"{what} must be 2-D (n examples x d features), got shape {X.shape}")
        vals = X
    n, d = X.shape
    if n < 1 or d < 1:
        raise ValueError(f"{what} must have at least one row and one column, got shape {X.shape}")
    if not np.all(np.isfinite(vals)):
        raise ValueError(f"{what} has non-finite entries (NaN or inf); impute or drop them first")
    return X


def _labels(y, n, what):
    try:
        y = np.asarray(y)
    except (TypeError, ValueError):  # pragma: no cover - asarray takes almost anything
        raise ValueError(f"{what} must be a 1-D array of numbers") from None
    if y.ndim == 2 and 1 in y.shape:
        y = y.reshape(-1)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"{what} must be a 1-D array of {n} labels (one per row of X), got shape {y.shape}")
    if y.dtype == bool:
        y = y.astype(np.float64)
    if not (np.issubdtype(y.dtype, np.number)):
        raise ValueError(f"{what} must be numeric, got dtype {y.dtype}; encode the classes as "
                         "{0, 1} or {-1, +1}")
    y = y.astype(np.float64)
    if not np.all(np.isfinite(y)):
        raise ValueError(f"{what} has non-finite entries (NaN or inf)")
    return y


def _encoding(y_train, y_test):
    """The label encoding of a logistic problem: ``"{0, 1}"`` or ``"{-1, +1}"``; anything else is
    an error naming the values seen.  Both parts must use one encoding and the training part must
    hold both classes."""
    seen = np.unique(y_train if y_test is None else np.concatenate([y_train, y_test]))
    if set(seen.tolist()) <= {0.0, 1.0}:
        enc = "{0, 1}"
    elif set(seen.tolist()) <= {-1.0, 1.0}:
        enc = "{-1, +1}"
    else:
        shown = ", ".join(f"{v:g}" for v in seen[:6]) + (", ..." if seen.size > 6 else "")
        raise ValueError(f"loss='logistic' needs labels in {{0, 1}} or {{-1, +1}}, got the values "
                         f"{{{shown}}}")
    if np.unique(y_train).size < 2:
        raise ValueError(f"loss='logistic' needs both classes in the training labels, got only "
                         f"{{{np.unique(y_train)[0]:g}}} (no finite optimum without both)")
    return enc


def _pm1(y, enc):
    return np.where(y > 0, 1.0, -1.0) if enc == "{0, 1}" else y.copy()


def data_hash(X, y, X_test=None, y_test=None) -> str:
    """SHA-256 (hex) of the training and held-out arrays as :func:`from_data` stores them
    (float64 values, shapes, sparse structure), so two problems share a hash only if their data
    are identical.

    Parameters
    ----------
    X : array_like or scipy.sparse matrix
        Training features.
    y : array_like
        Training labels.
    X_test : array_like or scipy.sparse matrix, optional
        Held-out features.
    y_test : array_like, optional
        Held-out labels.

    Returns
    -------
    str
        The hex digest.
    """
    h = hashlib.sha256()
    for part in (X, y, X_test, y_test):
        if part is None:
            h.update(b"none;")
        elif sp.issparse(part):
            h.update(f"csr{part.shape};".encode())
            for a in (part.indptr, part.indices, part.data):
                h.update(np.ascontiguousarray(a).tobytes())
        else:
            h.update(f"dense{part.shape};".encode())
            h.update(np.ascontiguousarray(part, dtype=np.float64).tobytes())
    return h.hexdigest()


def _take_rows(X, rows):
    return X[rows] if sp.issparse(X) else np.ascontiguousarray(X[rows])


def from_data(X, y, *, loss, reg=0.0, test=None, seed=0, name=None) -> Problem:
    """A generalized linear model on your own data.

    ``F(w) = (1/n) Σ_i ℓ(x_i · w, y_i) + (reg/2) ||w||²`` over the ``n`` training rows, with

    * ``loss="logistic"``: ``ℓ(m, y) = log(1 + exp(−y m))``, labels ``{0, 1}`` or ``{−1, +1}``
      (``0`` is read as ``−1``; ``res.problem``'s ``config["labels"]`` says which was seen);
    * ``loss="squared"``: ``ℓ(m, y) = (m − y)² / 2``, real labels (ridge regression with ``reg``);
    * ``loss="absolute"``: ``ℓ(m, y) = |m − y|``, real labels, ``reg = 0`` only (the exact optimum
      is a linear program).

    There is no intercept: append a constant column to ``X`` for one.  Per-example gradients are
    ``ℓ'(x_i · w, y_i) x_i + reg·w``, so clipping at ``C`` bites on rows with ``||x_i||`` of order
    ``C``: scale the features first (:mod:`dpsim.datasets` documents what its loaders do).

    Parameters
    ----------
    X : array_like or scipy.sparse matrix, shape (n, d)
        Features; a sparse matrix stays sparse (CSR) end to end.  Copied, never modified.
    y : array_like, shape (n,)
        Labels (see ``loss``).
    loss : {"logistic", "squared", "absolute"}
        The link ``ℓ``.
    reg : float, default 0.0
        The l2 coefficient; with ``loss="logistic"`` on separable data use ``reg > 0`` (else the
        optimum is at infinity and constructing ``.optimum`` raises).
    test : None, float in (0, 1), or (X_test, y_test), default None
        A held-out split: a fraction of the rows drawn at random with ``seed`` (removed from the
        training data), or your own held-out arrays.  ``None``: no held-out metrics.
    seed : int, default 0
        Seed of the random split (``numpy.random.default_rng(seed).permutation(n)``).
    name : str, optional
        The problem's name (default ``"from_data"``), shown in progress bars and results.

    Returns
    -------
    Problem
        The built-in GLM class of that loss (the fused kernels and the exact optimum of
        :func:`logistic_regression` / :func:`least_squares` / :func:`absolute_regression`), with
        ``n`` the training rows.  ``config`` holds ``"data_sha256"`` (:func:`data_hash`), the loss,
        ``reg``, the split and the label encoding; such a problem cannot be rebuilt by name
        (``dpsim.problems.get``), pass the object.  Held-out metrics: :meth:`heldout_loss`
        (the unregularized mean loss on the held-out rows) and, for ``"logistic"``,
        :meth:`heldout_accuracy`; ``dpsim.simulate(..., metrics=("loss", "test_loss",
        "test_accuracy"))`` records them.

    Raises
    ------
    ValueError
        One line naming the offending value: an unknown loss, labels outside the accepted set,
        shapes that disagree, non-finite entries, a split fraction leaving an empty part.

    Examples
    --------
    >>> import numpy as np, dpsim
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 3)) / 2
    >>> y = (X @ np.array([1.0, -1.0, 0.5]) > 0).astype(int)          # labels in {0, 1}
    >>> prob = dpsim.problems.from_data(X, y, loss="logistic", reg=1e-2, test=0.25, seed=0)
    >>> prob.n, prob.n_test, prob.config["labels"]
    (150, 50, '{0, 1}')
    """
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {', '.join(map(repr, LOSSES))}, got loss={loss!r}")
    reg = _real("reg", reg, lo=0.0)
    if loss == "absolute" and reg != 0.0:
        raise ValueError(f"loss='absolute' supports reg=0 only (its exact optimum is a linear "
                         f"program), got reg={reg!r}")
    seed = _seed(seed)
    if name is None:
        name = "from_data"
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be a non-empty string, got name={name!r}")
    X = _features(X, "X")
    n, d = X.shape
    y = _labels(y, n, "y")
    X_test = y_test = None
    split = None
    if test is None:
        pass
    elif isinstance(test, tuple) and len(test) == 2:
        X_test = _features(test[0], "X_test")
        if X_test.shape[1] != d:
            raise ValueError(f"X_test must have d={d} columns like X, got shape {X_test.shape}")
        y_test = _labels(test[1], X_test.shape[0], "y_test")
        split = "given"
    elif isinstance(test, numbers.Real) and not isinstance(test, bool):
        frac = _real("test", test, lo=0.0, lo_open=True, hi=1.0, hi_open=True)
        n_test = int(round(frac * n))
        if n_test < 1 or n_test > n - 1:
            raise ValueError(f"test={test!r} of n={n} rows leaves {n_test} held-out and "
                             f"{n - n_test} training rows; both must be at least 1")
        perm = np.random.default_rng(seed).permutation(n)
        held, kept = np.sort(perm[:n_test]), np.sort(perm[n_test:])
        X_test, y_test = _take_rows(X, held), y[held]
        X, y = _take_rows(X, kept), y[kept]
        n = X.shape[0]
        split = float(frac)
    else:
        raise ValueError(f"test must be None, a fraction in (0, 1) or a tuple (X_test, y_test), "
                         f"got test={test!r}")
    labels = None
    if loss == "logistic":
        labels = _encoding(y, y_test)
        y = _pm1(y, labels)
        if y_test is not None:
            y_test = _pm1(y_test, labels)
    if loss == "absolute" and sp.issparse(X):
        raise ValueError("loss='absolute' needs dense features (its exact optimum is solved on a "
                         "dense matrix); pass X.toarray()")
    config = {"name": "from_data", "dataset": name, "loss": loss, "n": int(n), "d": int(d),
              "reg": reg, "test": split, "n_test": 0 if X_test is None else int(X_test.shape[0]),
              "seed": seed, "data_sha256": data_hash(X, y, X_test, y_test)}
    if labels is not None:
        config["labels"] = labels
    cls = _CLASSES[loss]
    p = cls(name=name, X=X, y=y, link=loss, reg=reg, config=config)
    if X_test is not None:
        p._set_heldout(X_test, y_test)
    return p
