"""The :class:`Problem` base class of :mod:`dpsim.problems` (backend views, capabilities), the
domains :class:`Box` and :class:`Ball`, and the argument checks shared by the factories (the
contract is in the package docstring)."""

from __future__ import annotations

import copy
import math
import numbers
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..backend import Backend

class _Unset:
    """Sentinel for "optimum not computed yet" that survives pickling (a problem sent to another
    process keeps meaning "not computed", instead of becoming a fresh, unequal ``object()``)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __reduce__(self):
        return (_Unset, ())

    def __repr__(self):
        return "<unset>"


_UNSET = _Unset()


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


def _stable_sigmoid(xp, t):
    e = xp.exp(-xp.abs(t))
    return xp.where(t >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


# =============================================================================================
# domains
# =============================================================================================


def _radius(radius):
    return _real("radius", radius, lo=0.0, lo_open=True)


@dataclass(frozen=True)
class Box:
    """The box ``{w : |w_j| <= radius for every j}`` (the l_inf ball).

    With ``radius = 1`` it is the constraint set ``X_inf = [-1, 1]^d`` of [PAGAN] §3.2 and §5.1.
    The Euclidean projection clips every coordinate to ``[-radius, radius]``.

    Examples
    --------
    >>> import numpy as np
    >>> from dpsim.problems import Box
    >>> Box(1.0).project(np.array([[2.0, -0.5, -3.0]]))
    array([[ 1. , -0.5, -1. ]])
    """

    radius: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "radius", _radius(self.radius))

    def project(self, w, xp=np):
        """Euclidean projection of each row of ``w`` (array namespace ``xp``).

        Parameters
        ----------
        w : array
            Parameters, ``(R, d)``.
        xp : module
            The array namespace.

        Returns
        -------
        array
            The rows clipped to [-radius, radius].
        """
        return xp.clip(w, -self.radius, self.radius)


@dataclass(frozen=True)
class Ball:
    """The Euclidean ball ``{w : ||w||_2 <= radius}`` (the ``X_2`` set of [PAGAN] §5.2).

    The Euclidean projection rescales a row of norm above ``radius`` to norm ``radius``.
    """

    radius: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "radius", _radius(self.radius))

    def project(self, w, xp=np):
        """Euclidean projection of each row of ``w`` (array namespace ``xp``).

        Parameters
        ----------
        w : array
            Parameters, ``(R, d)``.
        xp : module
            The array namespace.

        Returns
        -------
        array
            The rows scaled into the ball.
        """
        nrm = xp.sqrt(xp.sum(w * w, axis=-1, keepdims=True))
        outside = nrm > self.radius
        return xp.where(outside, w * (self.radius / xp.where(outside, nrm, xp.ones_like(nrm))), w)


# =============================================================================================
# base class
# =============================================================================================


class GLMView(NamedTuple):
    """What a compiled kernel may read of a built-in generalized linear model
    (:meth:`Problem.kernel_view`): ``f_i(w) = l(x_i·w, y_i) + (reg/2)||w||²``.

    ``X``: dense ``(n, d)`` C-contiguous float64 features (``None`` when sparse); ``data``,
    ``indices``, ``indptr``: the CSR arrays when sparse (``None`` when dense); ``y``: ``(n,)``
    labels; ``link``: the kernel code of ``l`` (:mod:`dpsim.problems._glm_kernels`: 0 squared,
    1 logistic, 2 absolute, 3 linear); ``reg``; ``row_sq_norms``: ``(n,)`` ``||x_i||²``."""

    X: Any
    data: Any
    indices: Any
    indptr: Any
    y: Any
    link: int
    reg: float
    row_sq_norms: Any

    @property
    def sparse(self) -> bool:
        return self.X is None


class QuadraticView(NamedTuple):
    """What a compiled kernel may read of ``random_quadratic``:
    ``f_i(w) = ||W_i w − Y_i||² + (reg/n)||w||²`` (``W`` ``(m, k, d)``, ``Y`` ``(m, k)``;
    ``reg_grad = 2·reg/n`` is the coefficient of ``w`` in a per-example gradient)."""

    W: Any
    Y: Any
    reg_grad: float


class NoisyQuadraticView(NamedTuple):
    """What a compiled kernel may read of ``quadratic_2d``: ``∇f_i(w) = h ⊙ w + ξ_i``
    (``h`` ``(d,)``, ``xi`` ``(n, d)``)."""

    h: Any
    xi: Any


class Problem:
    """Finite-sum objective ``F(w) = (1/n) sum_i f(x_i; w)`` over ``w in R^d`` (see package doc).

    Subclasses set their data arrays (host NumPy) in ``__init__``, list the names of the floating
    arrays in ``_float_arrays`` (moved by :meth:`on`), and implement :meth:`loss`, :meth:`grad`,
    :meth:`per_example_grads` and ``_compute_optimum``.  A subclass with a constraint set passes
    ``domain=Box(r)`` or ``domain=Ball(r)`` to ``__init__``; :meth:`project` follows from it.

    Read-only capabilities (the same on every backend view, see :meth:`on`):

    * ``domain``: :class:`Box`, :class:`Ball` or ``None`` (unconstrained); ``has_domain`` is
      ``domain is not None``.
    * ``link``: for a generalized linear model ``f_i(w) = l(x_i . w, y_i) + (reg/2)||w||^2``
      the name of ``l`` (``"squared"``, ``"logistic"``, ``"absolute"``, ``"linear"``), else ``None``.
    * ``reg``: the l2 regularization coefficient of the factory (``0.0`` when there is none; where
      it enters ``F`` is in the factory's docstring).
    * ``features``: a GLM's host feature matrix ``X`` (NumPy ``(n, d)`` or ``scipy.sparse`` CSR;
      do not modify it), else ``None``.
    * ``scales``: host ``(d,)`` read-only float64 array of coordinate scales ``sigma_j`` when the
      data are built from them (``absolute_regression``, ``linear_box``), else ``None``.
    """

    _float_arrays: tuple = ()
    #: Rows of the held-out split (:func:`dpsim.problems.from_data`); 0 when there is none.
    n_test: int = 0

    def __init__(self, *, name: str, n: int, d: int, config: dict, domain=None, reg=0.0,
                 scales=None):
        if domain is not None and not isinstance(domain, (Box, Ball)):
            raise ValueError(f"domain must be a Box, a Ball or None, got domain={domain!r}")
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
        self._domain = domain
        self._reg = float(reg)
        if scales is not None:
            scales = np.asarray(scales, dtype=np.float64)
            scales.flags.writeable = False
        self._scales = scales

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.config.items() if k != "name")
        where = "" if self.backend_name == "numpy" and self.dtype == "float64" else f" on {self.backend_name}/{self.dtype}"
        return f"<Problem {self.name}({args}) n={self.n} d={self.d}{where}>"

    # -- capabilities (class docstring) ---------------------------------------------------------
    @property
    def domain(self):
        """The constraint set: :class:`Box`, :class:`Ball` or ``None``."""
        return self._domain

    @property
    def has_domain(self) -> bool:
        """Whether :meth:`project` constrains (``domain is not None``)."""
        return self.domain is not None

    @property
    def link(self):
        """The GLM link name, or ``None`` for a problem that is not a GLM."""
        return None

    @property
    def reg(self) -> float:
        """The l2 regularization coefficient (``0.0`` when none)."""
        return self._reg

    @property
    def features(self):
        """A GLM's host feature matrix (NumPy or ``scipy.sparse``), else ``None``."""
        return None

    @property
    def labels(self):
        """A GLM's host labels ``y`` (NumPy ``(n,)``), else ``None``."""
        return None

    @property
    def scales(self):
        """Host ``(d,)`` read-only coordinate scales, or ``None``."""
        return self._scales

    def lipschitz_rows(self):
        """Host ``(n, d)`` matrix ``V`` with ``|grad f_i(w)_j| <= |V_ij|`` for every ``w``, or ``None``.

        Known for unregularized GLMs whose link has ``|l'| <= 1`` (logistic, absolute, linear):
        there ``grad f_i(w) = l'(x_i . w, y_i) x_i``, so ``V = features``.  Used for the
        per-example Lipschitz constants ``G(z; C) = ||V_i||_C`` of [PAGAN] Thm. 1/2.
        """
        return None

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

    # -- kernel view --------------------------------------------------------------------------
    def kernel_view(self):
        """What compiled kernels may read of this problem (host arrays, float64), or ``None``.

        A :class:`GLMView`, :class:`QuadraticView` or :class:`NoisyQuadraticView` for the
        built-in problems whose per-example gradients the kernels reproduce; ``None`` for any
        other problem, including a subclass of a built-in one (it may override its gradients),
        which then runs on the general engine.  The fast paths read problems only through this."""
        return None

    # -- held-out split -----------------------------------------------------------------------
    @property
    def has_heldout(self) -> bool:
        """Whether the problem has a held-out split (``n_test > 0``), whose loss and accuracy
        :func:`dpsim.simulate` can record (``metrics=("test_loss", "test_accuracy")``)."""
        return self.n_test > 0

    def heldout_loss(self, w):
        """Mean loss on the held-out rows per row of ``w`` (R, d) -> host (R,); only problems
        with a held-out split (:func:`dpsim.problems.from_data` with ``test=``) have one.

        Parameters
        ----------
        w : array
            Parameters, ``(R, d)``.

        Returns
        -------
        numpy.ndarray
            (R,) on the host.
        """
        raise ValueError(f"problem {self.name!r} has no held-out split; build it with "
                         "dpsim.problems.from_data(..., test=...) to record test metrics")

    def heldout_accuracy(self, w):
        """Classification accuracy on the held-out rows (see :meth:`heldout_loss`).

        Parameters
        ----------
        w : array
            Parameters, ``(R, d)``.

        Returns
        -------
        numpy.ndarray
            (R,) on the host.
        """
        raise ValueError(f"problem {self.name!r} has no held-out split; build it with "
                         "dpsim.problems.from_data(..., test=...) to record test metrics")

    # -- backends -----------------------------------------------------------------------------
    def on(self, backend) -> "Problem":
        """This problem with its data on ``backend`` (a :class:`dpsim.backend.Backend` or a name).

        Parameters
        ----------
        backend : Backend or str
            The backend (or its name).

        Returns
        -------
        Problem
            The problem on that backend (cached).
        """
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
        """Full objective ``F(w_r)`` for each row of ``w`` (R, d) -> (R,).

        Parameters
        ----------
        w : array
            Parameters, ``(R, d)``.

        Returns
        -------
        array
            (R,).
        """
        raise NotImplementedError

    def grad(self, w):
        """Full gradient (R, d).  Default: mean of all per-example gradients (small problems).

        Parameters
        ----------
        w : array
            Parameters, ``(R, d)``.

        Returns
        -------
        array
            (R, d).
        """
        xp = self.xp
        R = w.shape[0]
        idx = xp.reshape(xp.arange(self.n, dtype=xp.int64), (1, self.n))
        idx = xp.broadcast_to(idx, (R, self.n))
        return xp.sum(self.per_example_grads(w, idx), axis=1) / self.n

    def per_example_grads(self, w, idx):
        """``g[r, i] = grad f(x_{idx[r, i]}; w_r)``: (R, d), (R, b) -> (R, b, d).

        Parameters
        ----------
        w : array
            Parameters, ``(R, d)``.
        idx : array
            Example indices, (R, b) int64.

        Returns
        -------
        array
            (R, b, d).
        """
        raise NotImplementedError

    def loss_and_grad(self, w):
        """``(loss(w), grad(w))``; problems override it to share work between the two.

        Parameters
        ----------
        w : array
            Parameters, ``(R, d)``.

        Returns
        -------
        tuple
            (loss (R,), grad (R, d)).
        """
        return self.loss(w), self.grad(w)

    def project(self, w):
        """Euclidean projection of each row onto :attr:`domain`; ``w`` itself when there is none.

        Parameters
        ----------
        w : array
            Parameters, ``(R, d)``.

        Returns
        -------
        array
            (R, d).
        """
        domain = self.domain
        return w if domain is None else domain.project(w, self.xp)

    def clipped_grad_sum(self, w, idx, clip, *, mask=None, scale=None):
        """``(S, norms)`` with ``S_r = sum_i clip(s_r * g_{r,i}, C_r)`` (generic, materializing).

        Parameters
        ----------
        w : array
            Parameters, ``(R, d)``.
        idx : array
            Example indices, (R, b) int64.
        clip : float, array or None
            C (None or inf: no clipping), scalar or (R,).
        mask : array, optional
            (R, b) boolean: which slots count.
        scale : array, optional
            (R, d) scaling s of the gradients before clipping.

        Returns
        -------
        tuple
            (S (R, d), norms (R, b)).
        """
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
