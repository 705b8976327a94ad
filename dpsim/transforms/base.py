"""Composable gradient transformations (optax style) over a leading trial axis.

A transform is a pair of pure functions::

    init(params)                        -> state          # params: (R, d)
    update(grads, state, params, ctx)   -> (updates, state)

over explicit ``NamedTuple`` states, plus a *declaration* of the privacy it spends
(:class:`Release` entries).  ``chain(t1, t2, ...)`` feeds the updates of one transform into the next
and concatenates the declarations, so the accountant never inspects the code that follows a
privatizer.

The first transform of every optimizer consumes a :class:`Batch` — the per-example gradient oracle of
the current step — and emits an ``(R, d)`` array: either :func:`mean_gradient` (non-private) or a
privatizer from :mod:`dpsim.privacy`.  All later transforms see ``(R, d)`` arrays.  The engine adds
the final updates to the parameters (``w ← proj_X(w + u)``), so the last transform of an optimizer
is typically ``scale(-lr)``.

Hyperparameters may be Python scalars or one value per trial; :meth:`StepContext.hp` turns them into
a scalar or an ``(R, 1)`` backend column that broadcasts against ``(R, d)`` state.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

__all__ = [
    "Release",
    "GradientTransformation",
    "StepContext",
    "Batch",
    "chain",
    "mean_gradient",
    "scale",
    "trace",
    "EmptyState",
    "TraceState",
    "as_hyper",
]


class Release(NamedTuple):
    """One Gaussian release per active step, declared by a privatizer.

    noise_multiplier : σ — noise std divided by the release's ℓ2 sensitivity; a float or a
        per-trial tuple of floats.
    when : ``None`` (every step) or a function ``T -> bool array (T,)`` marking the steps
        (1-based step ``t`` at index ``t-1``) on which the release happens.
    mf : ``None`` for i.i.d. noise (a subsampled Gaussian per step), or the correlated-noise name;
        then the whole sequence of this release is one Gaussian mechanism with noise multiplier
        ``σ·sens(M)/worst_sens(M)`` (:meth:`dpsim.mf.NoiseStream.equivalent_noise_multiplier`),
        composed without amplification by sampling.
    """

    noise_multiplier: Any
    when: Callable[[int], np.ndarray] | None = None
    mf: str | None = None  # correlated noise (DP-MF strategy name): accounted without amplification


class GradientTransformation(NamedTuple):
    init: Callable
    update: Callable
    releases: tuple = ()  # tuple[Release, ...]


class EmptyState(NamedTuple):
    pass


class TraceState(NamedTuple):
    trace: Any  # (R, d) momentum buffer b_t


def as_hyper(name: str, value, *, positive=False, nonneg=False, allow_inf=False):
    """Validate a hyperparameter: a finite scalar, or a 1-D sequence with one value per trial.

    Returns a Python float or a read-only float64 NumPy array.
    """
    arr = np.asarray(value, dtype=float) if not isinstance(value, (int, float)) else None
    if arr is None:
        v = float(value)
        vals = np.array([v])
    else:
        if arr.ndim == 0:
            v = float(arr)
            vals = arr.reshape(1)
            arr = None
        elif arr.ndim == 1 and arr.size > 0:
            vals = arr
        else:
            raise ValueError(f"{name} must be a scalar or a 1-D sequence (one per trial), got {value!r}")
    if np.any(np.isnan(vals)) or (not allow_inf and np.any(np.isinf(vals))):
        raise ValueError(f"{name} must be finite, got {name}={value!r}")
    if positive and np.any(vals <= 0):
        raise ValueError(f"{name} must be positive, got {name}={value!r}")
    if nonneg and np.any(vals < 0):
        raise ValueError(f"{name} must be non-negative, got {name}={value!r}")
    if arr is None:
        return v
    arr = arr.copy()
    arr.setflags(write=False)
    return arr


class StepContext:
    """What a transform may use besides its own state: backend, step counter, trial count.

    Attributes: ``backend`` (:class:`dpsim.backend.Backend`), ``xp``, ``t`` (1-based index of the
    step being taken), ``trials`` (R), ``batch_size`` (nominal b), ``num_steps`` (T), ``n`` (number
    of training examples, when the engine knows it), ``sampling`` (the sampler's name).
    """

    def __init__(self, backend, trials: int, batch_size: int, num_steps: int, n: int | None = None,
                 sampling: str | None = None):
        self.backend = backend
        self.xp = backend.xp
        self.trials = trials
        self.batch_size = batch_size
        self.num_steps = num_steps
        self.n = n
        self.sampling = sampling
        self.t = 0
        self._cache: dict = {}

    def hp(self, value):
        """Scalar hyperparameter → float; per-trial array → cached ``(R, 1)`` backend column."""
        if isinstance(value, float):
            return value
        return self._col(value, 2)

    def hp_vec(self, value):
        """Scalar → float; per-trial array → cached ``(R,)`` backend vector."""
        if isinstance(value, float):
            return value
        return self._col(value, 1)

    def _col(self, value, ndim):
        key = (id(value), ndim)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is value:
            return hit[1]
        if value.shape != (self.trials,):
            raise ValueError(
                f"a per-trial hyperparameter has {value.shape[0]} values but trials={self.trials}"
            )
        col = self.backend.asarray(value.reshape((-1, 1)) if ndim == 2 else value)
        self._cache[key] = (value, col)
        return col


class Batch:
    """Per-example gradient oracle of one step (what privatizers consume).

    ``idx`` (R, b_max) example indices, ``mask`` (R, b_max) validity (``None``: all valid; Poisson
    batches have varying sizes and are padded), ``batch_size`` the nominal b that every average
    divides by (also under Poisson sampling — an unbiased estimate of the mean gradient).
    """

    def __init__(self, problem, params, idx, mask, batch_size: int, public_idx=None):
        self.problem = problem
        self.params = params
        self.idx = idx
        self.mask = mask
        self.batch_size = batch_size
        self.public_idx = public_idx  # (m,) indices of the public split, or None
        self.norms = None  # (R, b_max) per-example norms of the last clipped_sum call

    def clipped_sum(self, clip=None, scale=None):
        """``Σ_i clip(s ⊙ g_i, C)`` over the batch, shape (R, d); ``clip=None``: plain sum."""
        total, self.norms = self.problem.clipped_grad_sum(
            self.params, self.idx, clip, mask=self.mask, scale=scale
        )
        return total

    def per_example(self):
        """Materialized per-example gradients (R, b_max, d), zero in padded slots."""
        g = self.problem.per_example_grads(self.params, self.idx)
        if self.mask is not None:
            xp = _xp_of(g)
            g = g * xp.astype(self.mask, g.dtype)[:, :, None]
        return g

    def public_per_example(self):
        """Per-example gradients on the whole public split at the current parameters (R, m, d).

        Only for optimizers that declare ``public_fraction`` (the engine then carves the public
        split out of the training data and never samples it for the private batches)."""
        if self.public_idx is None:
            raise ValueError("this optimizer needs public data: give it public_fraction > 0")
        xp = _xp_of(self.params)
        R = self.params.shape[0]
        m = self.public_idx.shape[0]
        idx = xp.broadcast_to(xp.reshape(self.public_idx, (1, m)), (R, m))
        return self.problem.per_example_grads(self.params, idx)

    def mean(self):
        """Non-private minibatch gradient ``(1/b) Σ_i g_i``."""
        return self.clipped_sum(None) / float(self.batch_size)


def _xp_of(a):
    from .backend import array_namespace

    return array_namespace(a)


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """Compose transforms left to right; states are a tuple, declarations are concatenated."""

    def init(params):
        return tuple(t.init(params) for t in transforms)

    def update(grads, state, params, ctx):
        new_state = []
        for t, s in zip(transforms, state):
            grads, s = t.update(grads, s, params, ctx)
            new_state.append(s)
        return grads, tuple(new_state)

    releases = tuple(r for t in transforms for r in t.releases)
    return GradientTransformation(init, update, releases)


def mean_gradient() -> GradientTransformation:
    """Non-private gradient estimate: ``g = (1/b) Σ_{i∈B} ∇f(x_i; w)``."""

    def init(params):
        return EmptyState()

    def update(batch, state, params, ctx):
        return batch.mean(), state

    return GradientTransformation(init, update)


def scale(factor) -> GradientTransformation:
    """``u ← factor · u`` (factor scalar or per-trial)."""

    def init(params):
        return EmptyState()

    def update(u, state, params, ctx):
        return u * ctx.hp(factor), state

    return GradientTransformation(init, update)


def trace(beta) -> GradientTransformation:
    """Heavy-ball momentum buffer (seed 004 §3): ``b_t = β b_{t−1} + g_t``, emits ``b_t``."""

    def init(params):
        return TraceState(trace=params * 0.0)

    def update(u, state, params, ctx):
        b = state.trace * ctx.hp(beta) + u
        return b, TraceState(trace=b)

    return GradientTransformation(init, update)


def is_finite_scalar(x) -> bool:
    return isinstance(x, float) and math.isfinite(x)


def per_trial_values(value, trials: int) -> Sequence[float]:
    """Expand a validated hyperparameter to a list of R floats."""
    if isinstance(value, float):
        return [value] * trials
    return [float(v) for v in value]
