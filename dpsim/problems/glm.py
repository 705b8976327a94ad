"""Generalized linear models ``f_i(w) = l(x_i . w, y_i) + (reg/2)||w||^2`` and their NumPy fast path
(:func:`least_squares`, :func:`logistic_regression`, :func:`absolute_regression`,
:func:`linear_box`, :func:`sparse_logistic_1d`)."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from .._validate import check_allocation
from . import _glm_kernels as _K
from ._solvers import _lad_optimum, _logistic_1d_newton, _logistic_newton, _ridge_optimum
from .base import GLMView, Box, Problem, _is_scalar, _pos_int, _real, _seed, _stable_sigmoid


# =============================================================================================
# generalized linear models
# =============================================================================================


def _scales(scales, d):
    """Resolve ``scales`` ("power": sigma_j = j^{-3/2}; "ones"; or a length-d positive array)."""
    if isinstance(scales, str):
        if scales == "power":
            return np.arange(1, d + 1, dtype=np.float64) ** -1.5, "power"
        if scales == "ones":
            return np.ones(d), "ones"
        raise ValueError(f"scales must be 'power', 'ones' or an array of d positive numbers, got scales={scales!r}")
    try:
        s = np.asarray(scales, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"scales must be 'power', 'ones' or an array of d positive numbers, got scales={scales!r}") from None
    if s.shape != (d,) or not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(
            f"scales must be 'power', 'ones' or an array of d={d} positive finite numbers, got scales={scales!r}"
        )
    return s, [float(v) for v in s]


def _check_feature_memory(n, d, density=1.0):
    """Refuse, before drawing it, a feature matrix larger than this machine's memory (one line
    naming n and d): dense ``(n, d)`` float64, or about ``density·n·d`` CSR entries (value and
    column index)."""
    if density >= 1.0:
        check_allocation(f"the features (n={n}, d={d})", (n, d), 8)
    else:
        check_allocation(f"the sparse features (n={n}, d={d}, density={density:g})",
                         (n, max(1, math.ceil(density * d))), 16)


def _clip_per_trial(clip, R):
    """Host (R,) float64 array of clip norms (``inf`` for ``None``/no clipping), validated."""
    if clip is None:
        return np.full(R, math.inf)
    if _is_scalar(clip):
        C = float(clip)
        if math.isnan(C) or C < 0:
            raise ValueError(f"clip must be a non-negative number, math.inf or None, got clip={clip!r}")
        return np.full(R, C)
    return np.asarray(clip, dtype=np.float64).reshape(R)


# Above this size of the (n, R) margin matrix the full-data pass (records) runs by row blocks.
RECORD_BLOCK_BYTES = 64 * 2**20
# In the row-blocked pass over CSR features, the (d, chunk) temporaries of one chunk of trials.
RECORD_TRIAL_BYTES = 8 * 2**20

_LINKS = ("squared", "logistic", "absolute", "linear")  # kernel codes 0..3 (_glm_kernels)
_UNIT_LIPSCHITZ_LINKS = ("logistic", "absolute", "linear")  # |l'| <= 1


def _row_view(X, a, b):
    """Rows ``a..b`` of the CSR matrix ``X`` as a CSR matrix whose ``data`` and ``indices`` are views
    of ``X``'s (``X[a:b]`` holds a copy of the same arrays; SciPy's constructor copies slices)."""
    ptr = X.indptr
    V = sp.csr_matrix((b - a, X.shape[1]), dtype=X.dtype)
    V.data = X.data[ptr[a]:ptr[b]]
    V.indices = X.indices[ptr[a]:ptr[b]]
    V.indptr = ptr[a:b + 1] - ptr[a]
    return V


class _GLMProblem(Problem):
    """``f_i(w) = l(x_i . w, y_i) + (reg/2)||w||^2`` with ``l`` one of:

    * ``squared``:  ``l = (m - y)^2 / 2``,            ``l' = m - y``
    * ``logistic``: ``l = log(1 + exp(-y m))``,        ``l' = -y sigmoid(-y m)``  (y in {-1, +1})
    * ``absolute``: ``l = |m - y|``,                   ``l' = sign(m - y)`` (sign(0) = 0)
    * ``linear``:   ``l = -m``,                        ``l' = -1``  (y unused)

    ``X`` is a dense (n, d) array or a ``scipy.sparse.csr_matrix`` (kept sparse).
    """

    _float_arrays = ("y", "_rn2")

    def __init__(self, *, name, X, y, link, reg, config, domain=None, scales=None):
        n, d = X.shape
        super().__init__(name=name, n=n, d=d, config=config, domain=domain, reg=reg, scales=scales)
        if link not in _LINKS:  # pragma: no cover - internal
            raise ValueError(f"unknown GLM link {link!r}")
        self._link = link
        self.sparse = sp.issparse(X)
        if self.sparse:
            X = sp.csr_matrix(X, dtype=np.float64)
            X.sum_duplicates()
            X.sort_indices()
            self._rn2 = _K.row_sq_norms_csr(X.data, X.indptr, n)
            self._avg_nnz = X.nnz / max(n, 1)
        else:
            X = np.ascontiguousarray(X, dtype=np.float64)
            self._rn2 = np.einsum("ij,ij->i", X, X)
            self._avg_nnz = float(d)
        self.X = X
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        # mean feature vector, used by the linear loss (F(w) = -w . xbar)
        self._xbar = np.asarray(X.mean(axis=0)).reshape(d) if link == "linear" else None

    def kernel_view(self):
        """:class:`~dpsim.problems.base.GLMView` of the host data for the built-in GLM classes
        (exact types: a subclass may override its gradients and gets ``None``)."""
        if type(self) not in _KERNEL_TYPES:
            return None
        host = self._host
        if host.sparse:
            X = host.X
            return GLMView(None, X.data, X.indices, X.indptr, host.y, _LINKS.index(host.link),
                           float(host.reg), host._rn2)
        return GLMView(host.X, None, None, None, host.y, _LINKS.index(host.link), float(host.reg),
                       host._rn2)

    def _move_arrays(self, view, backend):
        super()._move_arrays(view, backend)
        if self._xbar is not None:
            view._xbar = backend.asarray(self._xbar)
        if not self.sparse:
            view.X = backend.asarray(self.X)
        elif backend.name == "numpy":
            view.X = self.X.astype(np.dtype(backend.dtype))
        elif backend.name == "cupy":
            import cupyx.scipy.sparse as csp  # noqa: PLC0415

            xp = backend.xp
            view.X = csp.csr_matrix(
                (
                    xp.asarray(self.X.data, dtype=backend.float_dtype),
                    xp.asarray(self.X.indices),
                    xp.asarray(self.X.indptr),
                ),
                shape=self.X.shape,
            )
        else:
            raise ValueError(
                f"sparse features are not supported on backend={backend.name!r} "
                "(it has no sparse arrays); use 'numpy' or 'cupy', or a dense problem (density=1.0)"
            )

    # -- capabilities (Problem docstring) ------------------------------------------------------
    @property
    def link(self):
        """The name of ``l``: ``"squared"``, ``"logistic"``, ``"absolute"`` or ``"linear"``."""
        return self._link

    @property
    def features(self):
        """The host feature matrix ``X`` (NumPy ``(n, d)`` or ``scipy.sparse`` CSR), on every view."""
        return self._host.X

    @property
    def labels(self):
        """The host labels ``y`` (NumPy ``(n,)``), on every view."""
        return self._host.y

    # -- held-out split (from_data) --------------------------------------------------------------
    def _set_heldout(self, X, y):
        """Attach held-out rows (host float64 dense or CSR ``X``, labels ``y`` already encoded as
        the training labels are)."""
        self._Xt, self._yt, self.n_test = X, np.ascontiguousarray(y, dtype=np.float64), int(X.shape[0])

    def _heldout_pass(self, w, what):
        """``what`` of the held-out rows for each row of ``w``, on the host in float64, by row
        blocks of at most :data:`RECORD_BLOCK_BYTES` of margins: ``"loss"`` the mean of ``l``,
        ``"accuracy"`` the mean of ``1[y m > 0] + 1[m = 0]/2`` (a tie counts half: the expected
        accuracy of a fair coin between the classes, so ``w = 0`` scores 0.5 whatever the class
        balance)."""
        from ..backend import to_numpy  # noqa: PLC0415

        host = self._host
        if not host.n_test:
            return Problem.heldout_loss(self, w)
        W = np.ascontiguousarray(np.asarray(to_numpy(w), dtype=np.float64).T)  # (d, R)
        nt, R = host.n_test, W.shape[1]
        rows = max(1, RECORD_BLOCK_BYTES // max(1, 8 * R))
        total = np.zeros(R)
        for a in range(0, nt, rows):
            b = min(nt, a + rows)
            Xb = host._Xt[a:b] if (a, b) != (0, nt) else host._Xt
            yb = host._yt[a:b, None]
            M = np.asarray(Xb @ W)
            if what == "loss":
                total += np.sum(host._ell(M, yb), axis=0)
            else:
                s = yb * M
                total += np.sum(s > 0, axis=0) + 0.5 * np.sum(s == 0, axis=0)
        return total / nt

    def heldout_loss(self, w):
        """Mean loss ``(1/n_test) Σ_i l(x_i . w, y_i)`` over the held-out rows, without the l2
        term, per row of ``w`` (R, d) -> host (R,) float64."""
        return self._heldout_pass(w, "loss")

    def heldout_accuracy(self, w):
        """Held-out accuracy of the sign classifier ``sign(x . w)`` (logistic link only): the
        mean of ``1[y (x . w) > 0]``, a margin of exactly 0 counting 1/2; (R, d) -> host (R,)."""
        if self._link != "logistic":
            raise ValueError(f"test_accuracy is defined for classification (loss='logistic'), "
                             f"not for loss={self._link!r}; record test_loss instead")
        return self._heldout_pass(w, "accuracy")

    def lipschitz_rows(self):
        """``features`` when ``|l'| <= 1`` and ``reg == 0`` (see :meth:`Problem.lipschitz_rows`)."""
        if self._link in _UNIT_LIPSCHITZ_LINKS and self.reg == 0.0:
            return self.features
        return None

    # -- the link functions (array-API generic; used by all backends) ---------------------------
    def _ell(self, m, y):
        xp = self.xp
        k = self._link
        if k == "squared":
            r = m - y
            return 0.5 * (r * r)
        if k == "logistic":
            t = -y * m
            return xp.logaddexp(xp.zeros_like(t), t)
        if k == "absolute":
            return xp.abs(m - y)
        return -m

    def _dell(self, m, y):
        xp = self.xp
        k = self._link
        if k == "squared":
            return m - y
        if k == "logistic":
            return -y * _stable_sigmoid(xp, -y * m)
        if k == "absolute":
            return xp.sign(m - y)
        return -xp.ones_like(m)

    # -- full-data quantities: one (sparse) matrix product ------------------------------------
    def _row_blocks(self, R):
        """Row ranges of the full-data pass: one block (the whole data) unless the ``(n, R)`` margin
        matrix would exceed :data:`RECORD_BLOCK_BYTES`; then blocks of about ``d/8`` rows, so the
        pass's ``(rows, R)`` temporaries (margins, link values, derivatives: about six) stay
        within ~0.75 of an ``(R, d)`` array.  Blocking changes only the summation order of the loss and
        gradient (the records), never an optimizer step; problems below the limit (every test
        problem) are unaffected."""
        n = self.n
        itemsize = 4 if self.dtype == "float32" else 8
        if n * R * itemsize <= RECORD_BLOCK_BYTES:
            return [(0, n)]
        rows = max(256, self.d // 8)
        return [(a, min(n, a + rows)) for a in range(0, n, rows)]

    def _full_pass(self, w, want_loss, want_grad):
        """``(F(w), ∇F(w))`` over all n examples, by row blocks (:meth:`_row_blocks`)."""
        xp = self.xp
        if self._link == "linear":
            out = G = None
            if want_loss:
                out = -xp.sum(w * self._xbar, axis=1)
            if want_grad:
                G = xp.zeros_like(w) - self._xbar
        elif self.backend_name == "numpy" and self.sparse and len(self._row_blocks(w.shape[0])) > 1:
            return self._full_pass_by_trials(w, want_loss, want_grad)
        else:
            blocks = self._row_blocks(w.shape[0])
            wt = np.ascontiguousarray(w.T) if self.backend_name == "numpy" else w.T
            out = G = None
            for a, b in blocks:
                whole = (a, b) == (0, self.n)
                X = self.X if whole else self.X[a:b]
                y = xp.expand_dims(self.y if whole else self.y[a:b], axis=1)
                M = X @ wt  # (rows, R) margins
                if want_loss:
                    part = xp.sum(self._ell(M, y), axis=0) if not whole else None
                    out = (xp.mean(self._ell(M, y), axis=0) if whole
                           else (part if out is None else out + part))
                if want_grad:
                    C = self._dell(M, y)
                    del M
                    part = X.T @ C  # (d, R)
                    del C
                    if G is None:
                        G = part  # a fresh product: accumulated into in place
                    else:
                        G += part
                        del part
            del wt
            if want_loss and len(blocks) > 1:
                out = out / self.n
            if want_grad:
                G /= self.n
                G = np.ascontiguousarray(G.T) if self.backend_name == "numpy" else G.T
        if self.reg:
            if want_loss:
                out = out + (0.5 * self.reg) * xp.sum(w * w, axis=1)
            if want_grad:
                G += self.reg * w  # G is a fresh array of this pass
        return out, G

    def _full_pass_by_trials(self, w, want_loss, want_grad):
        """The row-blocked pass of :meth:`_full_pass` (host NumPy, CSR ``X``) by chunks of trials,
        so that no ``(d, R)`` temporary (``Wᵀ``, ``Xᵀ C``, their transposes) is formed: at most
        :data:`RECORD_TRIAL_BYTES` per ``(d, chunk)`` array, the gradient written into one
        ``(R, d)`` output (peak memory of a record, issue 10).

        Same numbers as the whole-``R`` pass: SciPy's sparse products compute each column of
        ``X Wᵀ`` and ``Xᵀ C`` on its own (the same loop for any number of columns), the link
        functions are element-wise, and a sum over axis 0 of a C-ordered ``(rows, k)`` array adds
        the rows in order for every ``k ≥ 2`` (a chunk holds at least two trials when ``R ≥ 2``;
        with ``R = 1`` both passes reduce one column); the row blocks are those of the whole
        ``R``, each a view of ``X``'s rows (the same data in the same order as ``X[a:b]``)
        (``tests/problems/test_problems.py``)."""
        xp = self.xp
        R, d = w.shape
        n = self.n
        blocks = [(_row_view(self.X, a, b), xp.expand_dims(self.y[a:b], axis=1))
                  for a, b in self._row_blocks(R)]
        width = max(2, RECORD_TRIAL_BYTES // max(1, d * w.dtype.itemsize))
        starts = list(range(0, R, width))
        if len(starts) > 1 and R - starts[-1] < 2:
            starts.pop()  # a last chunk of one trial joins the one before
        bounds = list(zip(starts, starts[1:] + [R]))
        out = xp.empty(R, dtype=w.dtype) if want_loss else None
        G = xp.empty((R, d), dtype=w.dtype) if want_grad else None
        for r0, r1 in bounds:
            wt = np.ascontiguousarray(w[r0:r1].T)
            lo = Gc = None
            for Xb, y in blocks:
                M = Xb @ wt  # (rows, k) margins
                if want_loss:
                    part = xp.sum(self._ell(M, y), axis=0)
                    lo = part if lo is None else lo + part
                if want_grad:
                    C = self._dell(M, y)
                    del M
                    part = Xb.T @ C  # (d, k)
                    del C
                    if Gc is None:
                        Gc = part
                    else:
                        Gc += part
                        del part
            del wt
            if want_loss:
                out[r0:r1] = lo / n
            if want_grad:
                Gc /= n
                G[r0:r1] = Gc.T
                del Gc
            if self.reg:
                wr = w[r0:r1]
                if want_loss:
                    out[r0:r1] = out[r0:r1] + (0.5 * self.reg) * xp.sum(wr * wr, axis=1)
                if want_grad:
                    G[r0:r1] += self.reg * wr
        return out, G

    def loss(self, w):
        return self._full_pass(w, True, False)[0]

    def grad(self, w):
        return self._full_pass(w, False, True)[1]

    def loss_and_grad(self, w):
        """Loss and gradient from one pass of ``X @ W.T`` products (the engine's records use this)."""
        return self._full_pass(w, True, True)

    # -- per-example quantities ---------------------------------------------------------------
    def _rows(self, flat):
        """Dense (len(flat), d) copy of the requested rows (generic path only)."""
        if not self.sparse:
            return self.xp.take(self.X, flat, axis=0)
        return self.X[flat].toarray()

    def per_example_grads(self, w, idx):
        xp = self.xp
        R, b = idx.shape
        flat = xp.reshape(idx, (-1,))
        rows = xp.reshape(self._rows(flat), (R, b, self.d))
        m = xp.sum(rows * xp.expand_dims(w, axis=1), axis=-1)
        yb = xp.reshape(xp.take(self.y, flat, axis=0), (R, b))
        c = self._dell(m, yb)
        g = xp.expand_dims(c, axis=-1) * rows
        if self.reg:
            g = g + self.reg * xp.expand_dims(w, axis=1)
        return g

    def clipped_grad_sum(self, w, idx, clip, *, mask=None, scale=None):
        if self.backend_name != "numpy":
            return super().clipped_grad_sum(w, idx, clip, mask=mask, scale=scale)
        return self._fast_clipped_grad_sum(w, idx, clip, mask=mask, scale=scale)

    def _fast_clipped_grad_sum(self, w, idx, clip, *, mask=None, scale=None):
        """NumPy path: one fused Numba pass per trial (margin -> c_i -> norm -> clip -> scatter)."""
        w = np.ascontiguousarray(w)
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        if scale is not None:
            scale = np.ascontiguousarray(scale, dtype=w.dtype)
        C = _clip_per_trial(clip, w.shape[0])
        X = self.X
        kind = _LINKS.index(self._link)
        if self.sparse:
            return _K.clip_sum_csr(X.data, X.indices, X.indptr, self._rn2, idx, w, self.y, kind,
                                   self.reg, C, scale, mask, self._avg_nnz)
        return _K.clip_sum_dense(X, idx, w, self.y, kind, self.reg, C, scale, mask)


# =============================================================================================
# least squares
# =============================================================================================


class _LeastSquares(_GLMProblem):
    def _compute_optimum(self):
        if self.sparse or self.reg:
            w = _ridge_optimum(self.X, self.y, self.reg)
        else:  # the factory's path, unchanged (minimum-norm solution when n < d)
            w, *_ = np.linalg.lstsq(self.X, self.y, rcond=None)
        return w, float(self.loss(w[None, :])[0])


def least_squares(n, d, *, condition=10.0, noise=0.1, rotate=True, seed=0) -> Problem:
    """Least-squares regression with a controlled condition number.

    ``f_i(w) = (x_i . w - y_i)^2 / 2``,  ``F(w) = (1/2n) ||X w - y||^2``.

    Features ``x_i = Q diag(sqrt(lambda)) z_i`` with ``z_i ~ N(0, I_d)``, population covariance
    eigenvalues ``lambda_j`` geometric from 1 down to ``1/condition`` (so the covariance has
    condition number ``condition``), and ``Q`` a Haar-random rotation (``rotate=False``: axis
    aligned, ``Q = I``).  Labels ``y = X w_true + noise * N(0, 1)`` with ``w_true ~ N(0, I_d)``.
    The exact optimum is the least-squares solution (minimum-norm when ``n < d``).

    A standard synthetic benchmark (no single source paper); the quadratic member of the
    generalized-linear family used throughout dpsim.

    Parameters
    ----------
    n : int
        Number of examples.
    d : int
        Dimension.
    condition : float
        Condition number of the population feature covariance.
    noise : float
        Standard deviation of the label noise.
    rotate : bool
        Rotate the features by a Haar-random rotation (False: axis aligned).
    seed : int
        Seed of the data (the problem is a deterministic function of its arguments).

    Returns
    -------
    Problem
        With link ``"squared"``, no domain, dense features.

    Examples
    --------
    >>> import dpsim
    >>> prob = dpsim.problems.least_squares(100, 4, seed=0)
    >>> prob.name, prob.n, prob.d, prob.link, prob.domain
    ('least_squares', 100, 4, 'squared', None)
    """
    n, d = _pos_int("n", n), _pos_int("d", d)
    _check_feature_memory(n, d)
    condition = _real("condition", condition, lo=1.0)
    noise = _real("noise", noise, lo=0.0)
    if not isinstance(rotate, bool):
        raise ValueError(f"rotate must be True or False, got rotate={rotate!r}")
    seed = _seed(seed)
    rng = np.random.default_rng(seed)
    lam = np.geomspace(1.0, 1.0 / condition, d) if d > 1 else np.ones(1)
    Z = rng.standard_normal((n, d)) * np.sqrt(lam)
    if rotate and d > 1:
        Q, Rm = np.linalg.qr(rng.standard_normal((d, d)))
        Q = Q * np.sign(np.diag(Rm))  # Haar measure
        X = Z @ Q.T
    else:
        X = Z
    w_true = rng.standard_normal(d)
    y = X @ w_true + noise * rng.standard_normal(n)
    config = {"name": "least_squares", "n": n, "d": d, "condition": condition, "noise": noise,
              "rotate": rotate, "seed": seed}
    p = _LeastSquares(name="least_squares", X=X, y=y, link="squared", reg=0.0, config=config)
    p.w_true = w_true
    return p


# =============================================================================================
# logistic regression (dense or sparse bag-of-words)
# =============================================================================================


class _Logistic(_GLMProblem):
    def _compute_optimum(self):
        w = _logistic_newton(self.X, self.y, self.reg)
        return w, float(self.loss(w[None, :])[0])


def _bag_of_words(rng, n, d, density, zipf):
    """Sparse nonnegative (n, d) CSR features with Zipf-like column popularity.

    Column ``j`` (0-based, most popular first) appears in each row independently with
    probability ``pi_j = min(1, c / (j+1)^zipf)``, ``c`` chosen so ``sum_j pi_j = density * d``
    (so each row has about ``density * d`` nonzeros).  Entries are log term counts
    ``log(1 + k)``, ``k ~ Geometric(1/2)``; rows are scaled to unit l2 norm.  A row left empty
    gets one entry in a column drawn from the popularity distribution.
    """
    k = density * d
    pop = np.arange(1, d + 1, dtype=np.float64) ** -zipf
    lo, hi = 0.0, k / pop[-1] + 1.0
    for _ in range(200):  # bisection for c: sum(min(1, c pop)) = k
        c = 0.5 * (lo + hi)
        if np.minimum(1.0, c * pop).sum() < k:
            lo = c
        else:
            hi = c
    pi = np.minimum(1.0, hi * pop)
    counts = rng.binomial(n, pi)
    rows = np.empty(int(counts.sum()), dtype=np.int64)
    pos = 0
    for j in np.flatnonzero(counts):
        cj = counts[j]
        rows[pos:pos + cj] = rng.choice(n, size=cj, replace=False)
        pos += cj
    cols = np.repeat(np.arange(d, dtype=np.int64), counts)
    vals = np.log1p(rng.geometric(0.5, size=rows.size).astype(np.float64))
    row_nnz = np.bincount(rows, minlength=n)
    empty = np.flatnonzero(row_nnz == 0)
    if empty.size:
        extra_cols = rng.choice(d, size=empty.size, p=pop / pop.sum())
        rows = np.concatenate([rows, empty])
        cols = np.concatenate([cols, extra_cols])
        vals = np.concatenate([vals, np.log1p(rng.geometric(0.5, size=empty.size).astype(np.float64))])
    X = sp.csr_matrix((vals, (rows, cols)), shape=(n, d))
    X.sum_duplicates()
    X.sort_indices()
    return _unit_rows(X)


def _unit_rows(X):
    """``X`` with each row scaled to unit l2 norm, in place (a zero row stays zero); CSR or
    dense."""
    if sp.issparse(X):
        norms = np.sqrt(_K.row_sq_norms_csr(X.data, X.indptr, X.shape[0]))
        X.data /= np.repeat(np.where(norms > 0, norms, 1.0), np.diff(X.indptr))
    else:
        norms = np.linalg.norm(X, axis=1, keepdims=True)
        X /= np.where(norms > 0, norms, 1.0)
    return X


def _scale_columns(X, c):
    """``X diag(c)`` with each row rescaled to unit l2 norm again (:func:`_unit_rows`); a new
    array, sparse CSR stays sparse, dense stays dense."""
    if sp.issparse(X):
        X = X.tocsr(copy=True)
        X.data *= c[X.indices]
        return _unit_rows(X)
    return _unit_rows(X * c)


def logistic_regression(n, d, *, density=1.0, reg=1e-4, zipf=1.0, signal=2.0, col_scale=0.0,
                        seed=0) -> Problem:
    """L2-regularized logistic regression on a planted model.

    ``f_i(w) = log(1 + exp(-y_i x_i . w)) + (reg/2) ||w||^2``, ``y_i in {-1, +1}`` drawn from
    ``P(y = 1 | x) = sigmoid(x . w_true)``, ``w_true ~ N(0, signal^2 I_d)``.

    * ``density = 1``: dense features, ``x_i ~ N(0, I_d)`` scaled to unit l2 norm.
    * ``density < 1``: synthetic bag-of-words features standing in for the IMDB task of [DP2]
      §5: nonnegative, Zipf-like column popularity (exponent ``zipf``; column 0 is
      the most frequent), about ``density * d`` nonzeros per row, log term counts, rows of unit
      l2 norm.  Stored as ``scipy.sparse.csr_matrix`` and never densified.

    * ``col_scale = a > 0``: heterogeneous coordinate scales.  After the labels are drawn, column
      ``j`` is multiplied by ``(j+1)^(-a)`` and the rows are rescaled to unit l2 norm again.  The
      labels stay those of the unscaled features, so in the scaled coordinates the planted model
      weighs column ``j`` about ``(j+1)^a`` times more: small (rare, for bag-of-words) features
      carry large weights.  The Hessian's diagonal then spans a wide range of scales, the regime
      in which per-coordinate step sizes beat one global step size (the premise of the adaptive
      methods of [DP2] §3 and [AdamBC] §4; ``a = 0``, the default, leaves the features as
      above and draws the same random numbers).

    The optimum is found by Newton's method (Newton-CG with Hessian-vector products for large
    ``d``) to ``||grad F|| < 1e-10``, lazily on first access of ``.optimum``.

    Parameters
    ----------
    n : int
        Number of examples.
    d : int
        Dimension.
    density : float
        Fraction of nonzero features per row (1: dense; < 1: sparse bag-of-words, CSR).
    reg : float
        The l2 regularization coefficient.
    zipf : float
        Zipf exponent of the column popularity (sparse features).
    signal : float
        Standard deviation of the planted model's coordinates.
    col_scale : float
        Exponent a of the column scales (j+1)^(-a) (0: none).
    seed : int
        Seed of the data (the problem is a deterministic function of its arguments).

    Returns
    -------
    Problem
        With link ``"logistic"`` and regularization ``reg``.

    Examples
    --------
    >>> import dpsim
    >>> prob = dpsim.problems.logistic_regression(200, 5, seed=0)
    >>> prob.link, prob.reg, prob.features.shape
    ('logistic', 0.0001, (200, 5))
    """
    n, d = _pos_int("n", n), _pos_int("d", d)
    _check_feature_memory(n, d, _real("density", density, lo=0.0, lo_open=True, hi=1.0))
    density = _real("density", density, lo=0.0, lo_open=True, hi=1.0)
    reg = _real("reg", reg, lo=0.0)
    zipf = _real("zipf", zipf, lo=0.0)
    signal = _real("signal", signal, lo=0.0)
    col_scale = _real("col_scale", col_scale, lo=0.0)
    seed = _seed(seed)
    rng = np.random.default_rng(seed)
    if density < 1.0:
        X = _bag_of_words(rng, n, d, density, zipf)
    else:
        X = rng.standard_normal((n, d))
        X = _unit_rows(X)
    w_true = signal * rng.standard_normal(d)
    m = X @ w_true
    y = np.where(rng.random(n) < _stable_sigmoid(np, m), 1.0, -1.0)
    config = {"name": "logistic_regression", "n": n, "d": d, "density": density, "reg": reg,
              "zipf": zipf, "signal": signal, "seed": seed}
    if col_scale > 0.0:
        X = _scale_columns(X, np.arange(1, d + 1, dtype=np.float64) ** -col_scale)
        config["col_scale"] = col_scale  # absent at 0: configs (and cache keys) stay as they were
    p = _Logistic(name="logistic_regression", X=X, y=y, link="logistic", reg=reg, config=config)
    p.w_true = w_true
    return p


# =============================================================================================
# absolute regression ([PAGAN] §6.1)
# =============================================================================================


class _AbsoluteRegression(_GLMProblem):
    def _compute_optimum(self):
        return _lad_optimum(self.X, self.y, None if self.domain is None else self.domain.radius)


def absolute_regression(n, d, *, scales="power", tau=0.01, domain="box", seed=0) -> Problem:
    """Absolute-loss (least absolute deviations) regression of [PAGAN] §6.1, problem (11):

    ``f_i(x) = |a_i . x - b_i|``,  ``F(x) = (1/n) sum_i |a_i . x - b_i|``,

    with the population optimum ``x_true ~ Uni{-1, 1}^d``, ``a_i ~ N(0, diag(sigma)^2)``,
    ``b_i = a_i . x_true + xi_i``, ``xi_i ~ Laplace(0, tau)``.  ``scales="power"`` gives the
    paper's ``sigma_j = j^{-3/2}``; ``"ones"`` or a length-``d`` array are also accepted.  The
    paper's experiment uses ``n = 5000, d = 100, tau = 0.01``.  Subgradient
    ``sign(a_i . x - b_i) a_i`` with ``sign(0) = 0``.

    Domain: ``domain="box"`` (default) is ``X_inf = [-1, 1]^d``, the box on which the paper's
    PAGAN analysis is stated (§3.2) and which contains ``x_true``; §6.1 does not restate the
    constraint set, so this is our reading.  ``domain=None`` drops the constraint.  The exact
    empirical optimum (with the constraint) comes from a linear program (HiGHS).

    Parameters
    ----------
    n : int
        Number of examples.
    d : int
        Dimension.
    scales : {'power', 'ones'} or array_like
        Coordinate scales σ_j (``"power"``: j^{-3/2}).
    tau : float
        Scale of the Laplace label noise.
    domain : {'box', None}
        The box [-1, 1]^d or no constraint.
    seed : int
        Seed of the data (the problem is a deterministic function of its arguments).

    Returns
    -------
    Problem
        With link ``"absolute"``, coordinate ``scales`` and the chosen domain.

    Examples
    --------
    >>> import dpsim
    >>> prob = dpsim.problems.absolute_regression(100, 4, seed=0)
    >>> prob.domain, prob.scales.shape
    (Box(radius=1.0), (4,))
    """
    n, d = _pos_int("n", n), _pos_int("d", d)
    _check_feature_memory(n, d)
    sig, scales_cfg = _scales(scales, d)
    tau = _real("tau", tau, lo=0.0)
    if domain not in ("box", None):
        raise ValueError(f"domain must be 'box' or None, got domain={domain!r}")
    seed = _seed(seed)
    rng = np.random.default_rng(seed)
    x_true = rng.choice(np.array([-1.0, 1.0]), size=d)
    A = rng.standard_normal((n, d)) * sig
    xi = rng.laplace(0.0, tau, size=n) if tau > 0 else np.zeros(n)
    b = A @ x_true + xi
    config = {"name": "absolute_regression", "n": n, "d": d, "scales": scales_cfg, "tau": tau,
              "domain": domain, "seed": seed}
    p = _AbsoluteRegression(name="absolute_regression", X=A, y=b, link="absolute", reg=0.0,
                            config=config, domain=Box(1.0) if domain == "box" else None,
                            scales=sig)
    p.w_true = x_true
    return p


# =============================================================================================
# linear losses over the l_inf box ([PAGAN] §5.1)
# =============================================================================================


class _LinearBox(_GLMProblem):
    def _compute_optimum(self):
        zbar = self._host._xbar
        radius = self.domain.radius
        w = np.where(zbar >= 0, 1.0, -1.0) * radius
        return w, float(-radius * np.abs(zbar).sum())


def linear_box(n, d, *, scales="power", bias=0.1, seed=0) -> Problem:
    """Linear losses over the l_inf box: the lower-bound instance of [PAGAN] §5.1 (Proposition 1,
    Theorem 4):

    ``f(x; z_i) = -z_i . x``,  ``F(x) = -x . zbar``,  ``x in X_inf = [-1, 1]^d``,

    with ``|z_ij| <= sigma_j``.  Data: ``z_ij = sigma_j s_ij``, ``s_ij in {-1, +1}`` with
    ``P(s_ij = +1) = (1 + bias * v_j) / 2`` for random signs ``v_j``, so every coordinate has a
    mean of size about ``bias * sigma_j`` (our choice; the paper's instance is a worst case over
    such data sets).  ``scales="power"`` gives ``sigma_j = j^{-3/2}``.  The minimizer is the
    corner ``x*_j = sign(zbar_j)`` (``+1`` where ``zbar_j = 0``) with ``F* = -||zbar||_1``.
    Gradients do not depend on ``x``: ``grad f(x; z_i) = -z_i``.  ``project`` clips to the box.

    Parameters
    ----------
    n : int
        Number of examples.
    d : int
        Dimension.
    scales : {'power', 'ones'} or array_like
        Coordinate scales σ_j (``"power"``: j^{-3/2}).
    bias : float
        Size of each coordinate's mean relative to its scale.
    seed : int
        Seed of the data (the problem is a deterministic function of its arguments).

    Returns
    -------
    Problem
        With link ``"linear"`` on the box [-1, 1]^d.
    """
    n, d = _pos_int("n", n), _pos_int("d", d)
    _check_feature_memory(n, d)
    sig, scales_cfg = _scales(scales, d)
    bias = _real("bias", bias, lo=0.0, hi=1.0)
    seed = _seed(seed)
    rng = np.random.default_rng(seed)
    v = rng.choice(np.array([-1.0, 1.0]), size=d)
    s = np.where(rng.random((n, d)) < 0.5 * (1.0 + bias * v), 1.0, -1.0)
    Z = s * sig
    config = {"name": "linear_box", "n": n, "d": d, "scales": scales_cfg, "bias": bias, "seed": seed}
    p = _LinearBox(name="linear_box", X=Z, y=np.zeros(n), link="linear", reg=0.0, config=config,
                   domain=Box(1.0), scales=sig)
    return p


# =============================================================================================
# one-dimensional sparse logistic regression ([DESIGN] §5.1, reconstructed)
# =============================================================================================


class _SparseLogistic1D(_Logistic):
    def _compute_optimum(self):
        w = _logistic_1d_newton(self.X[:, 0], self.y)
        wv = np.array([w])
        return wv, float(self.loss(wv[None, :])[0])

    def test_loss(self, w, *, nodes=200):
        """Population (test) loss ``E log(1 + exp(-y x w))`` with ``x ~ N(0, 1)`` (no zeroing) and
        ``P(y=1|x) = sigmoid(w_star x)``, by Gauss-Hermite quadrature.  ``w``: (R, 1) -> (R,)
        host NumPy.  At ``w = w_star = 1`` this is about 0.598."""
        from ..backend import to_numpy  # noqa: PLC0415

        wv = np.asarray(to_numpy(w), dtype=np.float64).reshape(-1)
        t, wt = np.polynomial.hermite_e.hermegauss(nodes)
        wt = wt / wt.sum()
        ws = self.w_star
        p = _stable_sigmoid(np, ws * t)
        m = wv[:, None] * t[None, :]
        vals = p * np.logaddexp(0.0, -m) + (1 - p) * np.logaddexp(0.0, m)
        return vals @ wt


def sparse_logistic_1d(n=1000, *, zero_fraction=0.9, w_star=1.0, seed=0) -> Problem:
    """One-dimensional sparse logistic regression of [DESIGN] §5.1 (**reconstructed**: the
    paper's formulas were lost in extraction; this is the reconstruction of ALGORITHMS §5.4):

    ``f_i(w) = log(1 + exp(-y_i x_i w))``, ``d = 1``, no regularization,

    inputs ``x_i ~ N(0, 1)`` of which ``round(zero_fraction * n)`` (chosen at random) are set to
    ``0`` (their gradient is ``0``), labels ``y_i in {-1, +1}`` with
    ``P(y = 1 | x) = sigmoid(w_star x)`` drawn from the un-zeroed input.  The empirical optimum
    comes from a safeguarded 1-D Newton iteration; a linearly separable data set (no finite
    optimum) raises ``ValueError``.  :meth:`test_loss` gives the population loss on un-zeroed
    ``N(0,1)`` inputs (about 0.598 at ``w = w_star = 1``).

    Parameters
    ----------
    n : int
        Number of examples.
    zero_fraction : float
        Fraction of inputs set to 0.
    w_star : float
        The planted model.
    seed : int
        Seed of the data (the problem is a deterministic function of its arguments).

    Returns
    -------
    Problem
        One-dimensional, link ``"logistic"``, no regularization.

    Raises
    ------
    ValueError
        If the data set is linearly separable (no finite optimum).
    """
    n = _pos_int("n", n)
    zero_fraction = _real("zero_fraction", zero_fraction, lo=0.0, hi=1.0)
    w_star = _real("w_star", w_star)
    seed = _seed(seed)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    y = np.where(rng.random(n) < _stable_sigmoid(np, w_star * x), 1.0, -1.0)
    n_zero = round(zero_fraction * n)
    x[rng.choice(n, size=n_zero, replace=False)] = 0.0
    z = (y * x)[x != 0]
    if not (np.any(z > 0) and np.any(z < 0)):
        raise ValueError(
            f"the data are linearly separable (no finite optimum) for n={n}, "
            f"zero_fraction={zero_fraction}, seed={seed}: use more nonzero examples or another seed"
        )
    config = {"name": "sparse_logistic_1d", "n": n, "zero_fraction": zero_fraction,
              "w_star": w_star, "seed": seed}
    p = _SparseLogistic1D(name="sparse_logistic_1d", X=x[:, None], y=y, link="logistic", reg=0.0,
                          config=config)
    p.w_star = w_star
    return p


#: The GLM classes whose per-example gradients the compiled kernels reproduce
#: (:meth:`_GLMProblem.kernel_view`).
_KERNEL_TYPES = (_GLMProblem, _LeastSquares, _Logistic, _AbsoluteRegression, _LinearBox,
                 _SparseLogistic1D)
