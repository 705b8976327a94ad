"""Optimization problems for dpsim: empirical risks ``F(w) = (1/n) sum_i f(x_i; w)``.

Contract
--------
Every factory returns a :class:`Problem` that the simulation engine drives through exactly these
members (``R`` trials, ``b`` examples per batch, ``d`` parameters):

========================================  ======================================================
``name, n, d, config, has_domain``        identity; ``config`` is a JSON-serializable dict whose
                                          ``"name"`` is the factory name and whose other keys are
                                          the factory's arguments (``get(**config)`` rebuilds it)
``optimum``                               ``(w_star (d,), F(w_star))`` as host NumPy float64, or
                                          ``None``; computed lazily on first access and cached
``on(backend)``                           the same problem with its data on ``backend.xp`` in
                                          ``backend.dtype`` (cached per backend name and dtype)
``loss(w) -> (R,)``                       full objective ``F`` over all ``n`` examples
``grad(w) -> (R, d)``                     ``grad F``
``per_example_grads(w, idx) -> (R,b,d)``  ``grad f(x_{idx[r,i]}; w_r)``; ``idx`` an int64 array
``project(w) -> (R, d)``                  Euclidean projection onto the domain (identity if none)
``clipped_grad_sum(w, idx, clip, *,       ``(S, norms)``: ``S_r = sum_{i: mask[r,i]}
mask=None, scale=None)``                  clip(s_r * g_{r,i}, C_r)`` and ``norms[r,i] =
                                          ||s_r * g_{r,i}||_2`` (0 where masked out)
========================================  ======================================================

``clip(g, C) = g * min(1, C / ||g||_2)``; ``C`` is a Python float, ``math.inf``, ``None`` (no
clipping) or an ``(R,)`` backend array; a zero gradient stays zero.  With ``C`` ``None`` or
``inf`` the clip factor is exactly ``1.0``, so those two calls are bit-identical (the engine relies
on ``dp_sgd(noise=0, clip=inf)`` reproducing ``sgd``).  ``scale`` is ``None`` or an ``(R, d)``
array ``s`` (scale-then-privatize / preconditioned clipping).  ``mask`` is ``None`` or an ``(R, b)``
boolean array; masked entries (Poisson padding) hold a valid dummy index and contribute nothing.

The base class implements everything with array-API calls only (it runs under
``array_api_strict``); the default ``clipped_grad_sum`` materializes ``per_example_grads``.
Generalized linear models (``least_squares``, ``logistic_regression``, ``absolute_regression``,
``sparse_logistic_1d`` and the linear ``linear_box``) have ``g_i = c_i x_i + lam w`` with
``c_i = l'(x_i . w, y_i)``; on the NumPy backend their ``clipped_grad_sum`` works from the margins
``x_i . w_r`` with the Numba kernels of :mod:`dpsim._glm_kernels` and never forms ``(R, b, d)``:
``||s*(c x + lam w)||^2 = c^2 ||s*x||^2 + 2 c lam x.(s^2*w) + lam^2 ||s*w||^2`` and the clipped
sum is ``s * (sum_i f_i c_i x_i + lam w sum_i f_i)`` with ``f_i`` the clip factors.  Sparse
features (``scipy.sparse.csr_matrix``) stay sparse end to end.

All factories are deterministic in ``seed`` (``numpy.random.default_rng(seed)``) and raise
``ValueError`` naming the offending value.
"""

from __future__ import annotations

import copy
import math
import numbers

import numpy as np
import scipy.sparse as sp

from . import _glm_kernels as _K
from .backend import Backend

__all__ = [
    "Problem",
    "least_squares",
    "logistic_regression",
    "absolute_regression",
    "random_quadratic",
    "sparse_logistic_1d",
    "quadratic_2d",
    "linear_box",
    "FACTORIES",
    "names",
    "get",
]

_UNSET = object()


# =============================================================================================
# argument validation
# =============================================================================================


def _pos_int(name, v):
    if isinstance(v, bool) or not isinstance(v, (numbers.Integral,)) or v <= 0:
        raise ValueError(f"{name} must be a positive integer, got {name}={v!r}")
    return int(v)


def _seed(v):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0:
        raise ValueError(f"seed must be a non-negative integer, got seed={v!r}")
    return int(v)


def _real(name, v, *, lo=None, lo_open=False, hi=None, hi_open=False):
    """Validate a finite real number in the given (half-)open/closed interval."""
    ok = isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(float(v))
    if ok:
        x = float(v)
        if lo is not None and (x < lo or (lo_open and x == lo)):
            ok = False
        if hi is not None and (x > hi or (hi_open and x == hi)):
            ok = False
    if not ok:
        lb = "" if lo is None else f"{'(' if lo_open else '['}{lo}"
        ub = "" if hi is None else f"{hi}{')' if hi_open else ']'}"
        rng = f" in {lb or '(-inf'}, {ub or 'inf)'}" if (lo is not None or hi is not None) else ""
        raise ValueError(f"{name} must be a finite number{rng}, got {name}={v!r}")
    return float(v)


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


def _is_scalar(c):
    return isinstance(c, (numbers.Real, np.generic)) or (isinstance(c, np.ndarray) and c.ndim == 0)


def _clip_factor(xp, norms, clip):
    """Per-example clip factors ``min(1, C/||g||)`` of shape (R, b), or ``None`` for no clipping.

    ``None`` and a scalar ``inf`` return ``None`` (factor exactly 1); an ``(R,)`` array with
    ``inf`` entries gives factors exactly ``1.0`` there.  Zero norms get factor 1 (no 0/0).
    """
    if clip is None:
        return None
    ones = xp.ones_like(norms)
    safe = xp.where(norms > 0, norms, ones)
    if _is_scalar(clip):
        C = float(clip)
        if math.isnan(C) or C < 0:
            raise ValueError(f"clip must be a non-negative number, math.inf or None, got clip={clip!r}")
        if math.isinf(C):
            return None
        return xp.where(norms > C, C / safe, ones)
    Cb = xp.expand_dims(clip, axis=-1)
    return xp.where(norms > Cb, Cb / safe, ones)


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


def _stable_sigmoid(xp, t):
    e = xp.exp(-xp.abs(t))
    return xp.where(t >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


# =============================================================================================
# base class
# =============================================================================================


class Problem:
    """Finite-sum objective ``F(w) = (1/n) sum_i f(x_i; w)`` over ``w in R^d`` (see module doc).

    Subclasses set their data arrays (host NumPy) in ``__init__``, list the names of the floating
    arrays in ``_float_arrays`` (moved by :meth:`on`), and implement :meth:`loss`, :meth:`grad`,
    :meth:`per_example_grads` and ``_compute_optimum``.
    """

    has_domain: bool = False
    _float_arrays: tuple = ()

    def __init__(self, *, name: str, n: int, d: int, config: dict):
        self.name = name
        self.n = int(n)
        self.d = int(d)
        self.config = config
        self.xp = np
        self.backend_name = "numpy"
        self.dtype = "float64"
        self._host = self
        self._views = {}
        self._optimum = _UNSET

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.config.items() if k != "name")
        where = "" if self.backend_name == "numpy" and self.dtype == "float64" else f" on {self.backend_name}/{self.dtype}"
        return f"<Problem {self.name}({args}) n={self.n} d={self.d}{where}>"

    # -- optimum ------------------------------------------------------------------------------
    @property
    def optimum(self):
        """``(w_star, F(w_star))`` (host NumPy float64) or ``None``; lazy and cached."""
        host = self._host
        if host._optimum is _UNSET:
            host._optimum = host._compute_optimum()
        return host._optimum

    def _compute_optimum(self):
        return None

    # -- backends -----------------------------------------------------------------------------
    def on(self, backend) -> "Problem":
        """This problem with its data on ``backend`` (a :class:`dpsim.backend.Backend` or a name)."""
        if isinstance(backend, str):
            backend = Backend(backend)
        key = (backend.name, backend.dtype)
        if key == (self.backend_name, self.dtype):
            return self
        host = self._host
        if key == ("numpy", "float64"):
            return host
        view = host._views.get(key)
        if view is None:
            view = copy.copy(host)
            view.xp = backend.xp
            view.backend_name = backend.name
            view.dtype = backend.dtype
            view._views = None  # only the host keeps the cache
            host._move_arrays(view, backend)
            host._views[key] = view
        return view

    def _move_arrays(self, view, backend):
        for attr in self._float_arrays:
            v = getattr(self, attr)
            if v is not None:
                setattr(view, attr, backend.asarray(v))

    # -- the interface ------------------------------------------------------------------------
    def loss(self, w):
        """Full objective ``F(w_r)`` for each row of ``w`` (R, d) -> (R,)."""
        raise NotImplementedError

    def grad(self, w):
        """Full gradient (R, d).  Default: mean of all per-example gradients (small problems)."""
        xp = self.xp
        R = w.shape[0]
        idx = xp.reshape(xp.arange(self.n, dtype=xp.int64), (1, self.n))
        idx = xp.broadcast_to(idx, (R, self.n))
        return xp.sum(self.per_example_grads(w, idx), axis=1) / self.n

    def per_example_grads(self, w, idx):
        """``g[r, i] = grad f(x_{idx[r, i]}; w_r)``: (R, d), (R, b) -> (R, b, d)."""
        raise NotImplementedError

    def loss_and_grad(self, w):
        """``(loss(w), grad(w))``; problems override it to share work between the two."""
        return self.loss(w), self.grad(w)

    def project(self, w):
        """Euclidean projection of each row onto the domain; ``w`` itself when there is none."""
        return w

    def clipped_grad_sum(self, w, idx, clip, *, mask=None, scale=None):
        """``(S, norms)`` with ``S_r = sum_i clip(s_r * g_{r,i}, C_r)`` (generic, materializing)."""
        xp = self.xp
        g = self.per_example_grads(w, idx)
        if scale is not None:
            g = g * xp.expand_dims(scale, axis=1)
        norms = xp.sqrt(xp.sum(g * g, axis=-1))
        f = _clip_factor(xp, norms, clip)
        if f is not None:
            g = g * xp.expand_dims(f, axis=-1)
        if mask is not None:
            g = xp.where(xp.expand_dims(mask, axis=-1), g, xp.zeros_like(g))
            norms = xp.where(mask, norms, xp.zeros_like(norms))
        return xp.sum(g, axis=1), norms


class _BoxDomain:
    """Mixin: the box ``[-radius, radius]^d`` (seed 001's X_inf with radius 1)."""

    has_domain = True
    radius = 1.0

    def project(self, w):
        return self.xp.clip(w, -self.radius, self.radius)


# =============================================================================================
# generalized linear models
# =============================================================================================

_GLM_KINDS = ("squared", "logistic", "absolute", "linear")


class _GLMProblem(Problem):
    """``f_i(w) = l(x_i . w, y_i) + (reg/2)||w||^2`` with ``l`` one of:

    * ``squared``:  ``l = (m - y)^2 / 2``,            ``l' = m - y``
    * ``logistic``: ``l = log(1 + exp(-y m))``,        ``l' = -y sigmoid(-y m)``  (y in {-1, +1})
    * ``absolute``: ``l = |m - y|``,                   ``l' = sign(m - y)`` (sign(0) = 0)
    * ``linear``:   ``l = -m``,                        ``l' = -1``  (y unused)

    ``X`` is a dense (n, d) array or a ``scipy.sparse.csr_matrix`` (kept sparse).
    """

    _float_arrays = ("y", "_rn2")

    def __init__(self, *, name, X, y, kind, reg, config):
        n, d = X.shape
        super().__init__(name=name, n=n, d=d, config=config)
        if kind not in _GLM_KINDS:  # pragma: no cover - internal
            raise ValueError(f"unknown GLM kind {kind!r}")
        self.kind = kind
        self.reg = float(reg)
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
        self._xbar = np.asarray(X.mean(axis=0)).reshape(d) if kind == "linear" else None

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

    # -- the link functions (array-API generic; used by all backends) ---------------------------
    def _ell(self, m, y):
        xp = self.xp
        k = self.kind
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
        k = self.kind
        if k == "squared":
            return m - y
        if k == "logistic":
            return -y * _stable_sigmoid(xp, -y * m)
        if k == "absolute":
            return xp.sign(m - y)
        return -xp.ones_like(m)

    # -- full-data quantities: one (sparse) matrix product ------------------------------------
    def _margins_all(self, w):
        """(n, R) margins ``X @ w.T``."""
        if self.backend_name == "numpy":
            return self.X @ np.ascontiguousarray(w.T)
        return self.X @ w.T

    def loss(self, w):
        xp = self.xp
        if self.kind == "linear":
            out = -xp.sum(w * self._xbar, axis=1)
        else:
            M = self._margins_all(w)
            out = xp.mean(self._ell(M, xp.expand_dims(self.y, axis=1)), axis=0)
        if self.reg:
            out = out + (0.5 * self.reg) * xp.sum(w * w, axis=1)
        return out

    def grad(self, w):
        return self._grad_from_margins(w, None)

    def loss_and_grad(self, w):
        """Loss and gradient from one ``X @ W.T`` product (the engine's records use this)."""
        if self.kind == "linear":
            return self.loss(w), self.grad(w)
        xp = self.xp
        M = self._margins_all(w)
        out = xp.mean(self._ell(M, xp.expand_dims(self.y, axis=1)), axis=0)
        if self.reg:
            out = out + (0.5 * self.reg) * xp.sum(w * w, axis=1)
        return out, self._grad_from_margins(w, M)

    def _grad_from_margins(self, w, M):
        xp = self.xp
        if self.kind == "linear":
            G = xp.zeros_like(w) - self._xbar
        else:
            if M is None:
                M = self._margins_all(w)
            C = self._dell(M, xp.expand_dims(self.y, axis=1))  # (n, R)
            G = (self.X.T @ C).T / self.n
            if self.backend_name == "numpy":
                G = np.ascontiguousarray(G)
        if self.reg:
            G = G + self.reg * w
        return G

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
        kind = _GLM_KINDS.index(self.kind)
        if self.sparse:
            return _K.clip_sum_csr(X.data, X.indices, X.indptr, self._rn2, idx, w, self.y, kind,
                                   self.reg, C, scale, mask, self._avg_nnz)
        return _K.clip_sum_dense(X, idx, w, self.y, kind, self.reg, C, scale, mask)


# =============================================================================================
# least squares
# =============================================================================================


class _LeastSquares(_GLMProblem):
    def _compute_optimum(self):
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
    """
    n, d = _pos_int("n", n), _pos_int("d", d)
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
    p = _LeastSquares(name="least_squares", X=X, y=y, kind="squared", reg=0.0, config=config)
    p.w_true = w_true
    return p


# =============================================================================================
# logistic regression (dense or sparse bag-of-words)
# =============================================================================================


def _pcg(matvec, rhs, precond_diag, rtol, maxiter):
    """Preconditioned conjugate gradients for an SPD operator (Jacobi preconditioner)."""
    x = np.zeros_like(rhs)
    r = rhs.copy()
    z = r / precond_diag
    p = z.copy()
    rz = r @ z
    stop = rtol * np.linalg.norm(rhs)
    for _ in range(maxiter):
        if np.linalg.norm(r) <= stop:
            break
        Ap = matvec(p)
        alpha = rz / (p @ Ap)
        x += alpha * p
        r -= alpha * Ap
        z = r / precond_diag
        rz_new = r @ z
        p = z + (rz_new / rz) * p
        rz = rz_new
    return x


def _logistic_newton(X, y, reg, *, tol=1e-10, max_iter=100):
    """Minimize ``mean(log(1+exp(-y Xw))) + reg/2 ||w||^2`` by (truncated) Newton.

    Small ``d``: exact Newton steps with a dense Hessian.  Large ``d``: Newton-CG with Hessian-
    vector products ``X^T (D (X v)) / n + reg v`` and a Jacobi preconditioner.  Armijo
    backtracking far from the optimum; full steps once ``||grad|| < 1e-6``.  Iterates until
    ``||grad F|| < tol``.
    """
    n, d = X.shape
    sparse = sp.issparse(X)
    w = np.zeros(d)

    def fg(w):
        m = X @ w
        t = -y * m
        f = np.mean(np.logaddexp(0.0, t)) + 0.5 * reg * (w @ w)
        g = X.T @ (-y * _stable_sigmoid(np, t)) / n + reg * w
        return f, g, m

    f, g, m = fg(w)
    X2 = X.multiply(X).tocsr() if sparse else None
    for _ in range(max_iter):
        gn = np.linalg.norm(g)
        if gn < tol:
            return w
        e = np.exp(-np.abs(m))
        D = e / (1.0 + e) ** 2  # sigmoid(m) sigmoid(-m)
        if d <= 1500:
            XD = X.T @ sp.diags(D) if sparse else X.T * D
            H = np.asarray(XD @ X if not sparse else (XD @ X).toarray()) / n + reg * np.eye(d)
            p = -np.linalg.solve(H, g)
        else:
            def hv(v, D=D):
                return X.T @ (D * (X @ v)) / n + reg * v

            diag = (X2.T @ D if sparse else (X * X).T @ D) / n + reg
            p = -_pcg(hv, g, diag, rtol=min(0.1, math.sqrt(gn)), maxiter=2000)
        slope = g @ p
        if slope >= 0:  # not a descent direction (CG breakdown): fall back to steepest descent
            p = -g
            slope = -(g @ g)
        if gn < 1e-6:
            w_new = w + p
            f_new, g_new, m_new = fg(w_new)
            if np.linalg.norm(g_new) >= gn:
                break
        else:
            t = 1.0
            while True:
                w_new = w + t * p
                f_new, g_new, m_new = fg(w_new)
                if f_new <= f + 1e-4 * t * slope or t < 1e-10:
                    break
                t *= 0.5
        w, f, g, m = w_new, f_new, g_new, m_new
    gn = np.linalg.norm(g)
    if gn < max(tol, 1e-8):
        return w
    raise RuntimeError(
        f"Newton's method for the logistic optimum stopped at ||grad F|| = {gn:.3g} > {tol:g}; "
        "the data may be separable (use reg > 0)"
    )


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
    norms = np.sqrt(_K.row_sq_norms_csr(X.data, X.indptr, n))
    X.data /= np.repeat(norms, np.diff(X.indptr))
    return X


def logistic_regression(n, d, *, density=1.0, reg=1e-4, zipf=1.0, signal=2.0, seed=0) -> Problem:
    """L2-regularized logistic regression on a planted model.

    ``f_i(w) = log(1 + exp(-y_i x_i . w)) + (reg/2) ||w||^2``, ``y_i in {-1, +1}`` drawn from
    ``P(y = 1 | x) = sigmoid(x . w_true)``, ``w_true ~ N(0, signal^2 I_d)``.

    * ``density = 1``: dense features, ``x_i ~ N(0, I_d)`` scaled to unit l2 norm.
    * ``density < 1``: synthetic bag-of-words features standing in for the IMDB task of
      *Differentially Private Adaptive Optimization with Delayed Preconditioners* (Li et al.,
      ICLR 2023, §5): nonnegative, Zipf-like column popularity (exponent ``zipf``; column 0 is
      the most frequent), about ``density * d`` nonzeros per row, log term counts, rows of unit
      l2 norm.  Stored as ``scipy.sparse.csr_matrix`` and never densified.

    The optimum is found by Newton's method (Newton-CG with Hessian-vector products for large
    ``d``) to ``||grad F|| < 1e-10``, lazily on first access of ``.optimum``.
    """
    n, d = _pos_int("n", n), _pos_int("d", d)
    density = _real("density", density, lo=0.0, lo_open=True, hi=1.0)
    reg = _real("reg", reg, lo=0.0)
    zipf = _real("zipf", zipf, lo=0.0)
    signal = _real("signal", signal, lo=0.0)
    seed = _seed(seed)
    rng = np.random.default_rng(seed)
    if density < 1.0:
        X = _bag_of_words(rng, n, d, density, zipf)
    else:
        X = rng.standard_normal((n, d))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
    w_true = signal * rng.standard_normal(d)
    m = X @ w_true
    y = np.where(rng.random(n) < _stable_sigmoid(np, m), 1.0, -1.0)
    config = {"name": "logistic_regression", "n": n, "d": d, "density": density, "reg": reg,
              "zipf": zipf, "signal": signal, "seed": seed}
    p = _Logistic(name="logistic_regression", X=X, y=y, kind="logistic", reg=reg, config=config)
    p.w_true = w_true
    return p


# =============================================================================================
# absolute regression (seed 001 §6.1)
# =============================================================================================


class _AbsoluteRegression(_BoxDomain, _GLMProblem):
    has_domain = True

    def __init__(self, *, box, **kw):
        super().__init__(**kw)
        self.has_domain = bool(box)

    def project(self, w):
        return _BoxDomain.project(self, w) if self.has_domain else w

    def _compute_optimum(self):
        return _lad_optimum(self.X, self.y, self.radius if self.has_domain else None)


def _lad_optimum(A, b, radius):
    """Exact minimizer of ``F(x) = (1/n) sum_i |a_i . x - b_i|`` (over ``[-radius, radius]^d``).

    Solved through the LP dual, which has ``n + d`` variables and only ``2d`` (box) or ``d``
    (no domain) constraints and so is much faster for ``n >> d`` than the primal LP:

        max_{|y_i| <= 1/n}  -b . y - radius ||A^T y||_1        (box)
        max_{|y_i| <= 1/n, A^T y = 0}  -b . y                  (no domain)

    (weak duality: ``F(x) >= sum_i y_i (a_i . x - b_i) >= -b . y - radius ||A^T y||_1`` for
    feasible ``y``).  The primal ``x*`` is read from the constraint multipliers (HiGHS), then
    polished to the exact LP vertex: coordinates at the box boundary are fixed and the remaining
    ones solve the square system of the examples with the smallest residuals.  The duality gap
    is checked; if the polish cannot close it, the primal LP is solved directly.
    Returns ``(x*, F(x*))``.
    """
    from scipy.optimize import linprog  # noqa: PLC0415

    n, d = A.shape

    def F(x):
        return float(np.mean(np.abs(A @ x - b)))

    At = sp.csr_matrix(A.T)
    if radius is not None:
        Id = sp.identity(d, format="csr")
        A_ub = sp.vstack([sp.hstack([At, -Id]), sp.hstack([-At, -Id])], format="csr")
        res = linprog(np.concatenate([b, np.full(d, float(radius))]), A_ub=A_ub, b_ub=np.zeros(2 * d),
                      bounds=[(-1.0 / n, 1.0 / n)] * n + [(0, None)] * d, method="highs")
        mu = res.ineqlin.marginals if res.status == 0 else None
        cands = [] if mu is None else [mu[:d] - mu[d:], mu[d:] - mu[:d]]
        cands = [np.clip(c, -radius, radius) for c in cands]
    else:
        res = linprog(b, A_eq=At, b_eq=np.zeros(d), bounds=[(-1.0 / n, 1.0 / n)] * n, method="highs")
        cands = [] if res.status != 0 else [res.eqlin.marginals, -res.eqlin.marginals]
    dual = -res.fun if res.status == 0 else -np.inf
    best = min(cands, key=F) if cands else None

    if best is not None:  # polish to the exact vertex
        x = best.copy()
        bound = np.zeros(d, dtype=bool) if radius is None else np.abs(x) >= radius * (1 - 1e-9)
        if radius is not None:
            x[bound] = np.sign(x[bound]) * radius
        free = np.flatnonzero(~bound)
        if free.size:
            r = A @ x - b
            Z = np.argsort(np.abs(r), kind="stable")[: free.size]
            rhs = b[Z] - A[np.ix_(Z, np.flatnonzero(bound))] @ x[bound]
            try:
                x_free = np.linalg.solve(A[np.ix_(Z, free)], rhs)
                x_new = x.copy()
                x_new[free] = x_free
                if radius is not None:
                    x_new = np.clip(x_new, -radius, radius)
                if F(x_new) <= F(x):
                    x = x_new
            except np.linalg.LinAlgError:
                pass
        if F(x) - dual <= 1e-12 * max(1.0, abs(dual)) or F(x) <= F(best):
            best = x
    if best is None or F(best) - dual > 1e-9 * max(1.0, abs(dual)):  # pragma: no cover - fallback
        I = sp.identity(n, format="csr")
        A_eq = sp.hstack([sp.csr_matrix(A), -I, I], format="csr")
        c = np.concatenate([np.zeros(d), np.full(2 * n, 1.0 / n)])
        xb = (-radius, radius) if radius is not None else (None, None)
        res = linprog(c, A_eq=A_eq, b_eq=b, bounds=[xb] * d + [(0, None)] * (2 * n), method="highs")
        if res.status != 0:
            raise RuntimeError(f"linprog failed for the absolute-regression optimum: {res.message}")
        best = res.x[:d].copy()
        if radius is not None:
            best = np.clip(best, -radius, radius)
    return best, F(best)


def absolute_regression(n, d, *, scales="power", tau=0.01, domain="box", seed=0) -> Problem:
    """Absolute-loss (least absolute deviations) regression of seed 001 §6.1.

    Source: Asi, Duchi, Fallah, Javidbakht, Talwar, *Private Adaptive Gradient Methods for
    Convex Optimization* (ICML 2021), §6.1, problem (11):

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
    """
    n, d = _pos_int("n", n), _pos_int("d", d)
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
    p = _AbsoluteRegression(name="absolute_regression", X=A, y=b, kind="absolute", reg=0.0,
                            config=config, box=domain == "box")
    p.w_true = x_true
    p.scales = sig
    return p


# =============================================================================================
# linear losses over the l_inf box (seed 001 §5.1)
# =============================================================================================


class _LinearBox(_BoxDomain, _GLMProblem):
    def _compute_optimum(self):
        zbar = self._host._xbar
        w = np.where(zbar >= 0, 1.0, -1.0) * self.radius
        return w, float(-self.radius * np.abs(zbar).sum())


def linear_box(n, d, *, scales="power", bias=0.1, seed=0) -> Problem:
    """Linear losses over the l_inf box: the lower-bound instance of seed 001 §5.1.

    Source: Asi, Duchi, Fallah, Javidbakht, Talwar, *Private Adaptive Gradient Methods for
    Convex Optimization* (ICML 2021), §5.1 (Proposition 1, Theorem 4):

    ``f(x; z_i) = -z_i . x``,  ``F(x) = -x . zbar``,  ``x in X_inf = [-1, 1]^d``,

    with ``|z_ij| <= sigma_j``.  Data: ``z_ij = sigma_j s_ij``, ``s_ij in {-1, +1}`` with
    ``P(s_ij = +1) = (1 + bias * v_j) / 2`` for random signs ``v_j``, so every coordinate has a
    mean of size about ``bias * sigma_j`` (our choice; the paper's instance is a worst case over
    such data sets).  ``scales="power"`` gives ``sigma_j = j^{-3/2}``.  The minimizer is the
    corner ``x*_j = sign(zbar_j)`` (``+1`` where ``zbar_j = 0``) with ``F* = -||zbar||_1``.
    Gradients do not depend on ``x``: ``grad f(x; z_i) = -z_i``.  ``project`` clips to the box.
    """
    n, d = _pos_int("n", n), _pos_int("d", d)
    sig, scales_cfg = _scales(scales, d)
    bias = _real("bias", bias, lo=0.0, hi=1.0)
    seed = _seed(seed)
    rng = np.random.default_rng(seed)
    v = rng.choice(np.array([-1.0, 1.0]), size=d)
    s = np.where(rng.random((n, d)) < 0.5 * (1.0 + bias * v), 1.0, -1.0)
    Z = s * sig
    config = {"name": "linear_box", "n": n, "d": d, "scales": scales_cfg, "bias": bias, "seed": seed}
    p = _LinearBox(name="linear_box", X=Z, y=np.zeros(n), kind="linear", reg=0.0, config=config)
    p.scales = sig
    return p


# =============================================================================================
# one-dimensional sparse logistic regression (seed 002 §5.1, reconstructed)
# =============================================================================================


class _SparseLogistic1D(_Logistic):
    def _compute_optimum(self):
        x = self.X[:, 0]
        nz = x != 0
        z = self.y[nz] * x[nz]  # f_i(w) = log(1 + exp(-z_i w)) on the nonzero examples
        n = self.n

        def d1(w):
            return -np.sum(z * _stable_sigmoid(np, -z * w)) / n

        def d2(w):
            e = np.exp(-np.abs(z * w))
            return np.sum(z * z * e / (1.0 + e) ** 2) / n

        # F' is increasing; bracket the root, then safeguarded Newton.
        lo, hi = -1.0, 1.0
        while d1(lo) > 0:
            lo *= 2.0
        while d1(hi) < 0:
            hi *= 2.0
        w = 0.0
        for _ in range(200):
            g = d1(w)
            if abs(g) < 1e-15:
                break
            if g > 0:
                hi = w
            else:
                lo = w
            w_new = w - g / d2(w)
            if not lo < w_new < hi:
                w_new = 0.5 * (lo + hi)
            if w_new == w:
                break
            w = w_new
        wv = np.array([w])
        return wv, float(self.loss(wv[None, :])[0])

    def test_loss(self, w, *, nodes=200):
        """Population (test) loss ``E log(1 + exp(-y x w))`` with ``x ~ N(0, 1)`` (no zeroing) and
        ``P(y=1|x) = sigmoid(w_star x)``, by Gauss-Hermite quadrature.  ``w``: (R, 1) -> (R,)
        host NumPy.  At ``w = w_star = 1`` this is about 0.598."""
        from .backend import to_numpy  # noqa: PLC0415

        wv = np.asarray(to_numpy(w), dtype=np.float64).reshape(-1)
        t, wt = np.polynomial.hermite_e.hermegauss(nodes)
        wt = wt / wt.sum()
        ws = self.w_star
        p = _stable_sigmoid(np, ws * t)
        m = wv[:, None] * t[None, :]
        vals = p * np.logaddexp(0.0, -m) + (1 - p) * np.logaddexp(0.0, m)
        return vals @ wt


def sparse_logistic_1d(n=1000, *, zero_fraction=0.9, w_star=1.0, seed=0) -> Problem:
    """One-dimensional sparse logistic regression of seed 002 §5.1 (**reconstructed**).

    Source: Ganesh, McMahan, Thakurta, *On Design Principles for Private Adaptive Optimizers*
    (2025), §5.1.  The paper's formulas were lost in extraction; this is the reconstruction of
    the dpsim spec (ALGORITHMS.md §5.4):

    ``f_i(w) = log(1 + exp(-y_i x_i w))``, ``d = 1``, no regularization,

    inputs ``x_i ~ N(0, 1)`` of which ``round(zero_fraction * n)`` (chosen at random) are set to
    ``0`` (their gradient is ``0``), labels ``y_i in {-1, +1}`` with
    ``P(y = 1 | x) = sigmoid(w_star x)`` drawn from the un-zeroed input.  The empirical optimum
    comes from a safeguarded 1-D Newton iteration; a linearly separable data set (no finite
    optimum) raises ``ValueError``.  :meth:`test_loss` gives the population loss on un-zeroed
    ``N(0,1)`` inputs (about 0.598 at ``w = w_star = 1``).
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
    p = _SparseLogistic1D(name="sparse_logistic_1d", X=x[:, None], y=y, kind="logistic", reg=0.0,
                          config=config)
    p.w_star = w_star
    return p


# =============================================================================================
# random quadratic (seed 003 App. C.1)
# =============================================================================================


class _RandomQuadratic(Problem):
    _float_arrays = ("W", "Y", "_Wflat", "_Yflat")

    def __init__(self, *, W, Y, reg, config):
        m, k, d = W.shape
        super().__init__(name="random_quadratic", n=m, d=d, config=config)
        self.W, self.Y, self.reg, self.k = W, Y, float(reg), k
        self._Wflat = W.reshape(m * k, d)
        self._Yflat = Y.reshape(m * k)

    def _residuals_all(self, w):  # (m*k, R)
        return self._Wflat @ w.T - self.xp.expand_dims(self._Yflat, axis=1)

    def loss(self, w):
        xp = self.xp
        r = self._residuals_all(w)
        return xp.sum(r * r, axis=0) / self.n + (self.reg / self.n) * xp.sum(w * w, axis=1)

    def grad(self, w):
        r = self._residuals_all(w)
        return (2.0 / self.n) * (self._Wflat.T @ r).T + (2.0 * self.reg / self.n) * w

    def per_example_grads(self, w, idx):
        xp = self.xp
        R, b = idx.shape
        flat = xp.reshape(idx, (-1,))
        Wb = xp.reshape(xp.take(self.W, flat, axis=0), (R, b, self.k, self.d))
        Yb = xp.reshape(xp.take(self.Y, flat, axis=0), (R, b, self.k))
        wb = xp.expand_dims(xp.expand_dims(w, axis=1), axis=1)  # (R, 1, 1, d)
        res = xp.sum(Wb * wb, axis=-1) - Yb  # (R, b, k)
        g = 2.0 * xp.sum(Wb * xp.expand_dims(res, axis=-1), axis=-2)
        return g + (2.0 * self.reg / self.n) * xp.expand_dims(w, axis=1)

    def _compute_optimum(self):
        H = self._Wflat.T @ self._Wflat + self.reg * np.eye(self.d)
        w = np.linalg.solve(H, self._Wflat.T @ self._Yflat)
        return w, float(self.loss(w[None, :])[0])


def random_quadratic(m=60, d=2, *, reg=1e-3, seed=0) -> Problem:
    """Random least-squares quadratic of seed 003 App. C.1.

    Source: Hong, Wang, Wang, Zhou, *Learning Model-Based Privacy Protection under Budget
    Constraints* (AAAI 2021), Appendix C.1:

    ``min_theta  sum_{i=1}^{m} ||W_i theta - y_i||^2 + reg ||theta||^2``  (paper: ``m = 60``,
    ``reg = 0.001``, ``W_i in R^{2x2}``, "normally randomized" ``W`` and ``y``).

    Here ``W_i in R^{d x d}`` and ``y_i in R^d`` have iid ``N(0, 1)`` entries (``d = 2`` is the
    paper's case).  The ``m`` examples are ``f_i(theta) = ||W_i theta - y_i||^2 +
    (reg/m) ||theta||^2``, so dpsim's ``F = (1/m) sum_i f_i`` is exactly the paper's objective
    divided by ``m`` (same minimizer; losses and gradients are ``1/m`` of the paper's).  Closed-
    form optimum ``theta* = (sum W_i^T W_i + reg I)^{-1} sum W_i^T y_i``.
    """
    m, d = _pos_int("m", m), _pos_int("d", d)
    reg = _real("reg", reg, lo=0.0)
    seed = _seed(seed)
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((m, d, d))
    Y = rng.standard_normal((m, d))
    config = {"name": "random_quadratic", "m": m, "d": d, "reg": reg, "seed": seed}
    return _RandomQuadratic(W=W, Y=Y, reg=reg, config=config)


# =============================================================================================
# 2-D quadratic (seed 002 §4.1, reconstructed)
# =============================================================================================


class _NoisyQuadratic(Problem):
    _float_arrays = ("h", "xi", "xibar")

    def __init__(self, *, h, xi, config):
        n, d = xi.shape
        super().__init__(name="quadratic_2d", n=n, d=d, config=config)
        self.h, self.xi = h, xi
        self.xibar = xi.mean(axis=0)  # zero up to rounding (xi is centred)

    def loss(self, w):
        xp = self.xp
        return 0.5 * xp.sum(self.h * w * w, axis=1) + xp.sum(w * self.xibar, axis=1)

    def grad(self, w):
        return self.h * w + self.xibar

    def per_example_grads(self, w, idx):
        xp = self.xp
        R, b = idx.shape
        xi = xp.reshape(xp.take(self.xi, xp.reshape(idx, (-1,)), axis=0), (R, b, self.d))
        return xp.expand_dims(self.h * w, axis=1) + xi

    def _compute_optimum(self):
        return np.zeros(self.d), 0.0


def quadratic_2d(a, b, *, noise=1.0, n=1000, noise_shape="hessian", seed=0) -> Problem:
    """Two-dimensional noisy quadratic of seed 002 §4.1 (**reconstructed**).

    Source: Ganesh, McMahan, Thakurta, *On Design Principles for Private Adaptive Optimizers*
    (2025), §4.1 ("A Quadratic Example"); the formulas were lost in extraction.

    ``F(w) = (a w_1^2 + b w_2^2) / 2``,  ``f_i(w) = (a w_1^2 + b w_2^2) / 2 + xi_i . w``,

    with the ``xi_i`` centred so that ``mean_i xi_i = 0`` (the full gradient ``(a w_1, b w_2)``
    is exact; minibatch gradients are noisy).  Optimum ``w* = 0``, ``F* = 0``.

    * ``noise_shape="hessian"`` (default): ``xi_i = -(a u_i1, b u_i2)``, ``u_i ~ N(0, noise^2 I)``,
      i.e. ``f_i(w) = (a (w_1 - u_i1)^2 + b (w_2 - u_i2)^2)/2`` minus a constant: the paper's
      example whose gradient coordinates are within a constant factor of ``a`` and ``b`` near
      the origin (so Adam's preconditioner approximates the inverse Hessian).
    * ``noise_shape="isotropic"``: ``xi_i ~ N(0, noise^2 I)``.
    """
    a = _real("a", a, lo=0.0, lo_open=True)
    b = _real("b", b, lo=0.0, lo_open=True)
    noise = _real("noise", noise, lo=0.0)
    n = _pos_int("n", n)
    if noise_shape not in ("hessian", "isotropic"):
        raise ValueError(f"noise_shape must be 'hessian' or 'isotropic', got noise_shape={noise_shape!r}")
    seed = _seed(seed)
    rng = np.random.default_rng(seed)
    h = np.array([a, b])
    u = noise * rng.standard_normal((n, 2))
    u -= u.mean(axis=0)
    xi = -h * u if noise_shape == "hessian" else u
    config = {"name": "quadratic_2d", "a": a, "b": b, "noise": noise, "n": n,
              "noise_shape": noise_shape, "seed": seed}
    return _NoisyQuadratic(h=h, xi=xi, config=config)


# =============================================================================================
# registry
# =============================================================================================

FACTORIES = {
    "least_squares": least_squares,
    "logistic_regression": logistic_regression,
    "absolute_regression": absolute_regression,
    "random_quadratic": random_quadratic,
    "sparse_logistic_1d": sparse_logistic_1d,
    "quadratic_2d": quadratic_2d,
    "linear_box": linear_box,
}


def names() -> list[str]:
    """Names of all problem factories."""
    return list(FACTORIES)


def get(name: str, **kwargs) -> Problem:
    """Build a problem by factory name; ``get(**problem.config)`` rebuilds ``problem``."""
    try:
        factory = FACTORIES[name]
    except KeyError:
        raise ValueError(f"unknown problem {name!r}; expected one of {', '.join(FACTORIES)}") from None
    return factory(**kwargs)
