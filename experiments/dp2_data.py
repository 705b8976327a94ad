"""The DP² stand-in for IMDB: a synthetic bag-of-words sentiment task whose classes are balanced
and whose labels come from the very features the model sees, with a held-out split.

Why a new generator (``../shared/reviews/reproduction.md`` §2): the earlier stand-in
(:func:`dpsim.problems.logistic_regression` with ``density < 1`` and ``col_scale``) had 87.8 % of
its labels in one class, drew the labels from the features *before* rescaling its columns, and
normalized every non-negative row to unit norm with ~65 columns present in every row and no
intercept; its exact optimum predicted the majority class for every example, so at σ = 1 no
private method learned anything past the class prior and none could beat another.

:func:`bag_of_words` builds instead (every choice is the paper's IMDB task as far as
[DP2] App. C.1 describes it, or says why not):

* **Vocabulary and document frequencies.**  ``words`` columns, word ``j`` (0-based, the most
  frequent first) present in a document with probability ``df_j = min(df_max, c (j+1)^-zipf)``
  (Zipf-like document frequencies, heavy-tailed: at ``zipf = 1`` the rarest of 10⁴ words is in
  about 0.1 % of the documents), ``c`` set so a document holds ``words_per_doc`` distinct words
  on average (IMDB reviews hold about 130 distinct words of a 10⁴-word vocabulary).
* **Entries.**  ``values="logcount"`` (the experiments' choice): ``1 + log k`` for a word counted
  ``k`` times, where a present word occurs ``1 + Poisson(occ_j/df_j − 1)`` times and
  ``occ_j = c (j+1)^-zipf`` is its expected count per document — the frequent words, capped at
  ``df_max``, repeat (sublinear tf, the usual log-count weighting); ``"binary"``: 1 for a present
  word (the multi-hot encoding of IMDB in Keras).  Rows are **not** normalized: a review with
  more (or more repeated) words has a larger norm, as in the raw encoding, and per-example
  clipping at ``C`` (the paper tunes ``C ≤ 1``) binds on every example — the regime DP-SGD runs
  in on IMDB.  The frequent words' larger entries stretch the Hessian's diagonal over decades
  (stop words against rare words), the geometry in which per-coordinate step sizes pay.
* **Intercept.**  A constant column (the last one, value ``intercept``) as the paper's
  ``10 001 = 10⁴ + 1`` parameters: the model can represent the class prior.
* **Planted model.**  ``w_true_j ~ N(0, signal²)`` on a random fraction ``informative`` of the
  words (sentiment words, anywhere in the frequency ranking), 0 elsewhere; the weight of word
  ``j`` is multiplied by ``(df_j / median df)^-rare_boost`` (rare words carry stronger sentiment
  when ``rare_boost > 0``; 0, the experiments' value, leaves them as common ones).
* **Labels** drawn from the features the model sees, the intercept excluded:
  ``P(y = 1 | x) = sigmoid(x·w_true − t)`` with ``t`` the median of ``x·w_true`` over all rows,
  so the classes are balanced (a threshold at the median margin).
* **Held-out split.**  ``n + n_test`` rows drawn i.i.d.; the last ``n_test`` are held out
  (:func:`dpsim.problems.from_data` with ``test=(X_test, y_test)``: held-out loss and accuracy
  are recorded by ``dpsim.simulate(..., metrics=("loss", "test_loss", "test_accuracy"))``).

:func:`premise_numbers` computes the static premises of the DP² experiments from a problem
(majority rate, the exact optimum's training and held-out accuracy, the class-prior excess
loss); :func:`train_accuracy_probe` records the training accuracy (the DP² code's selection
metric) during a run.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

import dpsim

__all__ = ["bag_of_words", "arrays", "real_text", "premise_numbers", "class_prior_loss",
           "train_accuracy", "train_accuracy_probe"]


def _doc_freqs(words: int, words_per_doc: float, zipf: float, df_max: float):
    """``(df, occ)``: each word's document frequency ``min(df_max, c·(j+1)^-zipf)`` with
    ``Σ df = words_per_doc``, and its expected occurrences per document ``c·(j+1)^-zipf``."""
    pop = np.arange(1, words + 1, dtype=np.float64) ** -float(zipf)
    target = float(words_per_doc)
    if not 0 < target < df_max * words:
        raise ValueError(f"words_per_doc must be in (0, df_max·words = {df_max * words:g}), "
                         f"got words_per_doc={words_per_doc!r}")
    lo, hi = 0.0, target / pop[-1] + 1.0
    for _ in range(200):  # bisection: sum(min(df_max, c·pop)) = words_per_doc
        c = 0.5 * (lo + hi)
        if np.minimum(df_max, c * pop).sum() < target:
            lo = c
        else:
            hi = c
    return np.minimum(df_max, hi * pop), hi * pop


def arrays(n: int, words: int, *, n_test: int, words_per_doc: float = 130.0, zipf: float = 1.0,
           df_max: float = 0.5, informative: float = 0.1, signal: float = 1.0,
           rare_boost: float = 0.0, values: str = "binary", intercept: float = 1.0,
           seed: int = 0):
    """``(X, y, X_test, y_test, info)``: the arrays of :func:`bag_of_words` (labels in {−1, +1},
    CSR features with the intercept as the last column) and ``info`` (``df``: document
    frequencies, ``w_true`` (the planted words' weights, the intercept's 0 appended),
    ``threshold``: the median margin subtracted)."""
    for name, v in (("n", n), ("words", words), ("n_test", n_test)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {name}={v!r}")
    if values not in ("binary", "logcount"):
        raise ValueError(f"values must be 'binary' or 'logcount', got values={values!r}")
    if not 0.0 < informative <= 1.0:
        raise ValueError(f"informative must be in (0, 1], got informative={informative!r}")
    if not 0.0 < df_max <= 1.0:
        raise ValueError(f"df_max must be in (0, 1], got df_max={df_max!r}")
    rng = np.random.default_rng(seed)
    N = int(n) + int(n_test)
    df, occ = _doc_freqs(int(words), words_per_doc, zipf, df_max)
    counts = rng.binomial(N, df)
    rows = np.empty(int(counts.sum()), dtype=np.int64)
    pos = 0
    for j in np.flatnonzero(counts):
        cj = counts[j]
        rows[pos:pos + cj] = rng.choice(N, size=cj, replace=False)
        pos += cj
    cols = np.repeat(np.arange(words, dtype=np.int64), counts)
    if values == "binary":
        vals = np.ones(rows.size)
    else:
        # a present word occurs 1 + Poisson(occ_j/df_j − 1) times (its expected occurrences per
        # document beyond the df cap become repeats: the frequent words repeat); entry 1 + log k
        extra = np.repeat(np.maximum(occ / df - 1.0, 0.0), counts)
        vals = 1.0 + np.log1p(rng.poisson(extra).astype(np.float64))
    W = sp.csr_matrix((vals, (rows, cols)), shape=(N, words))
    W.sum_duplicates()
    W.sort_indices()
    # the planted model: a random subset of the words, rare ones optionally stronger
    k = max(1, int(round(informative * words)))
    idx = rng.choice(words, size=k, replace=False)
    w = np.zeros(words)
    boost = (df[idx] / np.median(df)) ** (-float(rare_boost)) if rare_boost else 1.0
    w[idx] = signal * rng.standard_normal(k) * boost
    m = np.asarray(W @ w).reshape(-1)
    t = float(np.median(m))
    y = np.where(rng.random(N) < _sigmoid(m - t), 1.0, -1.0)
    ones = sp.csr_matrix(np.full((N, 1), float(intercept))) if intercept else None
    X = sp.hstack([W, ones], format="csr") if ones is not None else W
    X.sort_indices()
    info = {"df": df, "w_true": np.concatenate([w, [0.0]]) if ones is not None else w,
            "threshold": t, "margin_std": float(np.std(m))}
    return X[:n], y[:n], X[n:], y[n:], info


def _sigmoid(z):
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    e = np.exp(z[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def bag_of_words(n: int, words: int, *, n_test: int, reg: float = 1e-4, name: str = "bow_sentiment",
                 **kw) -> "dpsim.problems.Problem":
    """The problem: :func:`dpsim.problems.from_data` on :func:`arrays` (logistic loss, ``reg``,
    the last ``n_test`` rows held out).  Keywords as :func:`arrays`; they are added to the
    problem's ``config`` (``generator``: ``"dp2_data.bag_of_words"``) so that results say how the
    data were made."""
    X, y, Xt, yt, info = arrays(n, words, n_test=n_test, **kw)
    prob = dpsim.problems.from_data(X, y, loss="logistic", reg=reg, test=(Xt, yt), name=name)
    gen = {"generator": "dp2_data.bag_of_words", "words": int(words), "n_test": int(n_test)}
    gen.update({k: (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                for k, v in kw.items()})
    prob.config.update(gen)
    prob.w_true = info["w_true"]
    return prob


def real_text(dataset: str = "trump_tweets", *, n: int | None = None, n_test: int | None = None,
              max_features: int = 2000, reg: float = 1e-4, values: str = "logcount",
              seed: int = 0) -> "dpsim.problems.Problem":
    """Real text with the geometry of :func:`bag_of_words`: ``dpsim.datasets.arrays(dataset,
    vectorizer="count", balance=True, rows="none", test=0.2, seed=seed)`` (classes balanced by
    subsampling the majority; vocabulary and counts fitted on the training rows only), entries
    ``1 + log k`` (``values="logcount"``) or 1 (``"binary"``) for a word counted ``k ≥ 1`` times,
    rows not normalized, an intercept column appended; then ``n`` training rows and ``n_test``
    held-out rows drawn at random without replacement (by ``seed``; ``None``: all).  ``dataset``: ``"trump_tweets"`` (which phone wrote a tweet,
    Android or iPhone; needs the ``dpsim[data]`` packages)."""
    import dpsim.datasets as ds

    if values not in ("binary", "logcount"):
        raise ValueError(f"values must be 'binary' or 'logcount', got values={values!r}")
    X, y, info = ds.arrays(dataset, vectorizer="count", balance=True, rows="none", test=0.2,
                           seed=seed, max_features=max_features)
    Xt, yt = info["test"]
    rng = np.random.default_rng(seed)
    if n and n < X.shape[0]:  # the loader keeps the source's order (sorted by class): draw
        keep = np.sort(rng.choice(X.shape[0], n, replace=False))
        X, y = X[keep], y[keep]
    if n_test and n_test < Xt.shape[0]:
        keep = np.sort(rng.choice(Xt.shape[0], n_test, replace=False))
        Xt, yt = Xt[keep], yt[keep]

    def encode(A):
        A = sp.csr_matrix(A, dtype=np.float64, copy=True)
        A.data = np.ones_like(A.data) if values == "binary" else 1.0 + np.log(A.data)
        return sp.hstack([A, np.ones((A.shape[0], 1))], format="csr")

    prob = dpsim.problems.from_data(encode(X), y, loss="logistic", reg=reg,
                                    test=(encode(Xt), yt), name=dataset)
    prob.config.update({"generator": "dp2_data.real_text", "words": int(X.shape[1]),
                        "max_features": int(max_features), "values": values,
                        "n_test": int(Xt.shape[0]), "source": info["source"],
                        "labels_meaning": info["labels"]})
    return prob


def class_prior_loss(y) -> float:
    """The training log-loss of predicting the class frequency for every example (no feature
    used): the entropy of the labels' empirical distribution."""
    p = float(np.mean(np.asarray(y) > 0))
    if p in (0.0, 1.0):
        return 0.0
    return -(p * math.log(p) + (1 - p) * math.log(1 - p))


def train_accuracy(problem, w) -> np.ndarray:
    """Training accuracy of the sign classifier per row of ``w`` ((R, d) or (d,)): the mean of
    ``1[y (x·w) > 0]``, a zero margin counting 1/2 (as ``heldout_accuracy``)."""
    from dpsim.backend import to_numpy

    W = np.asarray(to_numpy(w), dtype=np.float64)
    W = W.reshape(1, -1) if W.ndim == 1 else W
    M = np.asarray(problem.features @ W.T)
    s = np.asarray(problem.labels).reshape(-1, 1) * M
    return (np.sum(s > 0, axis=0) + 0.5 * np.sum(s == 0, axis=0)) / s.shape[0]


def train_accuracy_probe(problem) -> dict:
    """``{"train_accuracy": probe}`` for ``dpsim.simulate(probes=...)``: the training accuracy
    (:func:`train_accuracy`) at every record step."""
    return {"train_accuracy": lambda state, w, ctx: train_accuracy(problem, w)}


def premise_numbers(problem) -> dict:
    """The static premises of the DP² experiments on ``problem`` (a logistic problem with a
    held-out split): ``majority`` (majority rate over the training and held-out labels),
    ``majority_train``, ``f_star``, ``prior_loss`` (:func:`class_prior_loss` of the training
    labels), ``prior_excess`` (``prior_loss − F*``: the excess loss of the class-prior model;
    with the l2 term F* includes ``reg/2·||w*||²``), ``wstar_train_accuracy``,
    ``wstar_test_accuracy``, ``wstar_test_loss``, ``n``, ``n_test``."""
    y = np.asarray(problem.labels)
    yt = np.asarray(problem._host._yt) if getattr(problem._host, "n_test", 0) else None
    w_star, f_star = problem.optimum
    both = y if yt is None else np.concatenate([y, yt])
    maj = float(max(np.mean(both > 0), np.mean(both <= 0)))
    out = {"n": int(problem.n), "n_test": int(getattr(problem._host, "n_test", 0) or 0),
           "majority": maj, "majority_train": float(max(np.mean(y > 0), np.mean(y <= 0))),
           "f_star": float(f_star), "prior_loss": class_prior_loss(y)}
    out["prior_excess"] = out["prior_loss"] - out["f_star"]
    out["wstar_train_accuracy"] = float(train_accuracy(problem, w_star)[0])
    if yt is not None:
        out["wstar_test_accuracy"] = float(problem.heldout_accuracy(w_star[None, :])[0])
        out["wstar_test_loss"] = float(problem.heldout_loss(w_star[None, :])[0])
    return out
