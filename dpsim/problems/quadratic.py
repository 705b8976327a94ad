"""Quadratic objectives: :func:`random_quadratic` and :func:`quadratic_2d`."""

from __future__ import annotations

import numpy as np

from .base import NoisyQuadraticView, Problem, QuadraticView, _pos_int, _real, _seed


# =============================================================================================
# random quadratic ([L2P] App. C.1)
# =============================================================================================


class _RandomQuadratic(Problem):
    _float_arrays = ("W", "Y", "_Wflat", "_Yflat")

    def __init__(self, *, W, Y, reg, config):
        m, k, d = W.shape
        super().__init__(name="random_quadratic", n=m, d=d, config=config, reg=reg)
        self.W, self.Y, self.k = W, Y, k
        self._Wflat = W.reshape(m * k, d)
        self._Yflat = Y.reshape(m * k)

    def kernel_view(self):
        """:class:`~dpsim.problems.base.QuadraticView` of the host data (this exact class only)."""
        if type(self) is not _RandomQuadratic:
            return None
        host = self._host
        return QuadraticView(np.ascontiguousarray(host.W), np.ascontiguousarray(host.Y),
                             2.0 * host.reg / host.n)

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
    """Random least-squares quadratic of [L2P] App. C.1:

    ``min_theta  sum_{i=1}^{m} ||W_i theta - y_i||^2 + reg ||theta||^2``  (paper: ``m = 60``,
    ``reg = 0.001``, ``W_i in R^{2x2}``, "normally randomized" ``W`` and ``y``).

    Here ``W_i in R^{d x d}`` and ``y_i in R^d`` have iid ``N(0, 1)`` entries (``d = 2`` is the
    paper's case).  The ``m`` examples are ``f_i(theta) = ||W_i theta - y_i||^2 +
    (reg/m) ||theta||^2``, so dpsim's ``F = (1/m) sum_i f_i`` is exactly the paper's objective
    divided by ``m`` (same minimizer; losses and gradients are ``1/m`` of the paper's).  Closed-
    form optimum ``theta* = (sum W_i^T W_i + reg I)^{-1} sum W_i^T y_i``.

    Parameters
    ----------
    m : int
        Number of examples (W_i, y_i).
    d : int
        Dimension.
    reg : float
        The paper's regularization coefficient (each example carries reg/m).
    seed : int
        Seed of the data (the problem is a deterministic function of its arguments).

    Returns
    -------
    Problem
        With a closed-form optimum.

    Examples
    --------
    >>> import dpsim
    >>> prob = dpsim.problems.random_quadratic(60, 3, seed=0)
    >>> prob.n, prob.d, prob.optimum[0].shape
    (60, 3, (3,))
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
# 2-D quadratic ([DESIGN] §4.1, reconstructed)
# =============================================================================================


class _NoisyQuadratic(Problem):
    _float_arrays = ("h", "xi", "xibar")

    def __init__(self, *, h, xi, config):
        n, d = xi.shape
        super().__init__(name="quadratic_2d", n=n, d=d, config=config)
        self.h, self.xi = h, xi
        self.xibar = xi.mean(axis=0)  # zero up to rounding (xi is centred)

    def kernel_view(self):
        """:class:`~dpsim.problems.base.NoisyQuadraticView` of the host data (this exact class
        only)."""
        if type(self) is not _NoisyQuadratic:
            return None
        host = self._host
        return NoisyQuadraticView(np.ascontiguousarray(host.h), np.ascontiguousarray(host.xi))

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
    """Two-dimensional noisy quadratic of [DESIGN] §4.1 ("A Quadratic Example"; **reconstructed**:
    the paper's formulas were lost in extraction).

    ``F(w) = (a w_1^2 + b w_2^2) / 2``,  ``f_i(w) = (a w_1^2 + b w_2^2) / 2 + xi_i . w``,

    with the ``xi_i`` centred so that ``mean_i xi_i = 0`` (the full gradient ``(a w_1, b w_2)``
    is exact; minibatch gradients are noisy).  Optimum ``w* = 0``, ``F* = 0``.

    * ``noise_shape="hessian"`` (default): ``xi_i = -(a u_i1, b u_i2)``, ``u_i ~ N(0, noise^2 I)``,
      i.e. ``f_i(w) = (a (w_1 - u_i1)^2 + b (w_2 - u_i2)^2)/2`` minus a constant: the paper's
      example whose gradient coordinates are within a constant factor of ``a`` and ``b`` near
      the origin (so Adam's preconditioner approximates the inverse Hessian).
    * ``noise_shape="isotropic"``: ``xi_i ~ N(0, noise^2 I)``.

    Parameters
    ----------
    a : float
        Curvature of the first coordinate.
    b : float
        Curvature of the second coordinate.
    noise : float
        Standard deviation of the gradient noise.
    n : int
        Number of examples.
    noise_shape : {'hessian', 'isotropic'}
        Shape of the per-example noise.
    seed : int
        Seed of the data (the problem is a deterministic function of its arguments).

    Returns
    -------
    Problem
        With optimum w* = 0, F* = 0.
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
