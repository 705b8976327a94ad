"""Composable gradient transformations (optax style) over a leading trial axis.

A transform is a pair of pure functions::

    init(params)                        -> state          # params: (R, d)
    update(grads, state, params, ctx)   -> (updates, state)

over explicit ``NamedTuple`` states, plus the *privacy events* it declares
(:mod:`dpsim.privacy.events`).  :func:`chain` and :func:`named_chain` feed the updates of one
transform into the next and collect the declarations, so the accountant never inspects the code
that follows a privatizer.

The first transform of every optimizer consumes a :class:`Batch` — the per-example gradient oracle of
the current step — and emits an ``(R, d)`` array: either :func:`mean_gradient` (non-private: it
declares :class:`~dpsim.privacy.events.NonPrivate`) or a privatizer from
:mod:`dpsim.privacy.privatizers`.  All later transforms see ``(R, d)`` arrays.  The engine adds the
final updates to the parameters (``w ← proj_X(w + u)``), so the last piece of an optimizer is the
learning rate, ``("lr", scale(-lr))``.

Named state: :func:`named_chain` keeps its state as a dict keyed by piece name; read a piece's state
with ``state["preconditioner"]`` or, from anywhere in nested combinator states, with
:func:`lookup`.  A transform with a named state lists its names in ``names``; :func:`named_chain`
splices such a transform in (its names join the chain's), so combinators compose without nesting.

Hyperparameters may be Python scalars or one value per trial (validated by
:func:`dpsim._validate.hyper`); :meth:`StepContext.hp` turns them into a scalar or an ``(R, 1)``
backend column that broadcasts against ``(R, d)`` state.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numba

from ..privacy.events import NonPrivate, at
from .elements import Element, Release, register

__all__ = [
    "GradientTransformation",
    "StepContext",
    "Batch",
    "chain",
    "named_chain",
    "lookup",
    "replace_piece",
    "mean_gradient",
    "scale",
    "trace",
    "EmptyState",
    "TraceState",
]


class GradientTransformation(NamedTuple):
    """``init(params) -> state``; ``update(grads, state, params, ctx) -> (updates, state)``.

    ``privacy``: the privacy events (:mod:`dpsim.privacy.events`) the transform declares, located in
    its state by their ``path``.  ``names``: for a transform whose state is a dict of named pieces,
    those names (empty otherwise).  ``element``: what a compiled path may read of the piece
    (:mod:`dpsim.transforms.elements`): an :class:`~dpsim.transforms.elements.Element` (its
    per-coordinate rule, the one its ``update`` evaluates), a
    :class:`~dpsim.transforms.elements.Release` (a first piece's release), or the parts of a
    privatizer or combinator (:class:`~dpsim.transforms.elements.Scaled`,
    :class:`~dpsim.transforms.elements.Moments`, :class:`~dpsim.transforms.elements.Alternate`,
    :class:`~dpsim.transforms.elements.Alongside`, :class:`~dpsim.transforms.elements.Accumulate`,
    :class:`~dpsim.transforms.elements.ApplyDelayed`, :class:`~dpsim.transforms.elements.Projected`,
    :class:`~dpsim.transforms.elements.PerNorm`); ``None``: nothing, the piece runs only
    through ``update``.  ``parts``: :func:`named_chain`'s ``(name, transform)``
    pairs in order (``name`` ``None`` for a spliced transform with a named state).
    """

    init: Callable
    update: Callable
    privacy: tuple = ()
    names: tuple = ()
    element: Any = None
    parts: tuple = ()


class EmptyState(NamedTuple):
    pass


class TraceState(NamedTuple):
    trace: Any  # (R, d) momentum buffer b_t


class StepContext:
    """What a transform may use besides its own state: backend, step counter, trial count.

    Attributes: ``backend`` (:class:`dpsim.backend.Backend`), ``xp``, ``t`` (1-based index of the
    step being taken), ``trials`` (R), ``batch_size`` (nominal b), ``num_steps`` (T), ``n`` (number
    of training examples, when the engine knows it), ``sampling`` (the sampler's name),
    ``donate_state`` (default ``False``; the engine's loop sets it ``True``): the caller will never
    use a state again after passing it to ``update`` (it keeps only the returned state), so a piece
    may overwrite the arrays of its *own* state in place instead of allocating new ones — buffer
    donation.  Pieces that do so (:func:`~dpsim.transforms.preconditioners.scale_by_adam`) touch
    only arrays they created themselves (in ``init`` or an earlier ``update``), never their input.
    With ``False`` every ``update`` is a pure function of its arguments.
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
        self.donate_state = False
        self._cache: dict = {}

    def hp(self, value):
        """Scalar hyperparameter → float; per-trial array → cached ``(R, 1)`` backend column.

        Parameters
        ----------
        value : float or array
            A validated hyperparameter.

        Returns
        -------
        float or array
            A float, or an ``(R, 1)`` column.
        """
        if isinstance(value, float):
            return value
        return self._col(value, 2)

    def hp_vec(self, value):
        """Scalar → float; per-trial array → cached ``(R,)`` backend vector.

        Parameters
        ----------
        value : float or array
            A validated hyperparameter.

        Returns
        -------
        float or array
            A float, or an ``(R,)`` vector.
        """
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
    ``scale`` (``None`` or ``(R, d)``): a coordinate-wise preconditioner applied to every
    per-example gradient before clipping (:meth:`scaled`; scale-then-privatize).
    """

    def __init__(self, problem, params, idx, mask, batch_size: int, public_idx=None, scale=None):
        self.problem = problem
        self.params = params
        self.idx = idx
        self.mask = mask
        self.batch_size = batch_size
        self.public_idx = public_idx  # (m,) indices of the public split, or None
        self.scale = scale

    def scaled(self, s) -> "Batch":
        """The same batch with every per-example gradient multiplied by ``s`` ((R, d)).

        Parameters
        ----------
        s : array
            ``(R, d)`` scaling.

        Returns
        -------
        Batch
            The scaled batch.
        """
        if self.scale is not None:
            raise ValueError("this batch is already scaled")
        return Batch(self.problem, self.params, self.idx, self.mask, self.batch_size,
                     self.public_idx, scale=s)

    def clipped_sum(self, clip=None, scale=None):
        """``Σ_i clip(s ⊙ g_i, C)`` over the batch, shape (R, d); ``clip=None``: plain sum.
        ``s`` is ``scale`` if given, else the batch's own :attr:`scale` (one of the two).

        Parameters
        ----------
        clip : float or array, optional
            ``C`` (``None``: no clipping).
        scale : array, optional
            ``(R, d)`` scaling ``s``.

        Returns
        -------
        array
            ``(R, d)``.
        """
        if scale is not None and self.scale is not None:
            raise ValueError("this batch is already scaled")
        total, _ = self.problem.clipped_grad_sum(self.params, self.idx, clip, mask=self.mask,
                                                 scale=self.scale if scale is None else scale)
        return total

    def per_example(self):
        """Materialized per-example gradients (R, b_max, d), zero in padded slots.

        Returns
        -------
        array
            ``(R, b_max, d)``.
        """
        if self.scale is not None:
            raise ValueError("per_example() of a scaled batch is not supported")
        g = self.problem.per_example_grads(self.params, self.idx)
        if self.mask is not None:
            xp = _xp_of(g)
            g = g * xp.astype(self.mask, g.dtype)[:, :, None]
        return g

    def public_per_example(self):
        """Per-example gradients on the whole public split at the current parameters (R, m, d).

        Only for optimizers built with ``Optimizer.public_fraction > 0`` (the engine then carves
        the public split out of the training data and never samples it for the private
        batches).

        Returns
        -------
        array
            ``(R, m, d)``.
        """
        if self.public_idx is None:
            raise ValueError("this optimizer needs public data: give it public_fraction > 0")
        xp = _xp_of(self.params)
        R = self.params.shape[0]
        m = self.public_idx.shape[0]
        idx = xp.broadcast_to(xp.reshape(self.public_idx, (1, m)), (R, m))
        return self.problem.per_example_grads(self.params, idx)

    def mean(self):
        """Non-private minibatch gradient ``(1/b) Σ_i g_i``.

        Returns
        -------
        array
            ``(R, d)``.
        """
        return self.clipped_sum(None) / float(self.batch_size)


def _xp_of(a):
    from ..backend import array_namespace

    return array_namespace(a)


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """Compose transforms left to right; the state is a tuple, the declarations are collected.

    Parameters
    ----------
    *transforms : GradientTransformation
        The pieces, in order.

    Returns
    -------
    GradientTransformation
        Their composition.
    """

    def init(params):
        return tuple(t.init(params) for t in transforms)

    def update(grads, state, params, ctx):
        new_state = []
        for t, s in zip(transforms, state):
            grads, s = t.update(grads, s, params, ctx)
            new_state.append(s)
        return grads, tuple(new_state)

    privacy = tuple(at(e, i) for i, t in enumerate(transforms) for e in t.privacy)
    return GradientTransformation(init, update, privacy)


def named_chain(*pieces) -> GradientTransformation:
    """Compose named pieces left to right; the state is a dict ``{name: piece state}``.

    Each piece is ``(name, transform)``, or a transform with a named state (``transform.names``,
    e.g. :func:`~dpsim.transforms.combinators.scale_then_privatize`), whose names are spliced into
    the chain's.  Names must be unique.

    Parameters
    ----------
    *pieces : tuple or GradientTransformation
        ``(name, transform)`` pairs, or transforms with named states.

    Returns
    -------
    GradientTransformation
        The composition, with ``names`` listing the pieces.

    Raises
    ------
    ValueError
        If two pieces share a name.

    Examples
    --------
    >>> from dpsim.transforms import mean_gradient, named_chain, scale, trace
    >>> tx = named_chain(("gradient", mean_gradient()), ("momentum", trace(0.9)),
    ...                  ("lr", scale(-0.1)))
    >>> tx.names
    ('gradient', 'momentum', 'lr')
    """
    steps = []  # (name or None, transform, names it owns)
    names: list[str] = []
    for p in pieces:
        if isinstance(p, GradientTransformation):
            if not p.names:
                raise ValueError("named_chain takes (name, transform) pairs or transforms with a named "
                                 "state; give this piece a name")
            steps.append((None, p, p.names))
            names.extend(p.names)
        else:
            name, tx = p
            if not isinstance(name, str) or not isinstance(tx, GradientTransformation):
                raise ValueError(f"named_chain piece must be (name, transform), got {p!r}")
            steps.append((name, tx, (name,)))
            names.append(name)
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"named_chain has duplicate piece names {dup}")

    def init(params):
        state = {}
        for name, tx, _ in steps:
            if name is None:
                state.update(tx.init(params))
            else:
                state[name] = tx.init(params)
        return state

    def update(grads, state, params, ctx):
        new = dict(state)
        for name, tx, own in steps:
            if name is None:
                grads, sub = tx.update(grads, {k: new[k] for k in own}, params, ctx)
                new.update(sub)
            else:
                grads, new[name] = tx.update(grads, new[name], params, ctx)
        return grads, new

    privacy = tuple(e if name is None else at(e, name) for name, tx, _ in steps for e in tx.privacy)
    return GradientTransformation(init, update, privacy, tuple(names),
                                  parts=tuple((name, tx) for name, tx, _ in steps))


def _children(state):
    if isinstance(state, dict):
        return list(state.values())
    if isinstance(state, tuple) and not hasattr(state, "_fields"):
        return list(state)
    return []


def lookup(state, name: str):
    """The state of the piece called ``name``, searched depth-first through named and plain chain
    states (and the named states of combinators).  ``KeyError`` naming the pieces found when no
    piece has that name.

    Parameters
    ----------
    state : dict or tuple
        A chain's state.
    name : str
        A piece's name.

    Returns
    -------
    object
        That piece's state.

    Raises
    ------
    KeyError
        Naming the pieces found, when none is called ``name``.
    """
    stack = [state]
    seen: list[str] = []
    while stack:
        s = stack.pop(0)
        if isinstance(s, dict):
            if name in s:
                return s[name]
            seen.extend(s)
        stack[0:0] = _children(s)
    raise KeyError(f"no piece named {name!r} in this state; named pieces: {', '.join(seen) or 'none'}")


def replace_piece(state: dict, name: str, piece_state) -> dict:
    """A copy of a named state with piece ``name`` replaced (top level only).

    Parameters
    ----------
    state : dict
        A named chain's state.
    name : str
        The piece to replace.
    piece_state : object
        Its new state.

    Returns
    -------
    dict
        The new state (``state`` is not modified).
    """
    if name not in state:
        raise KeyError(f"no piece named {name!r}; pieces: {', '.join(state)}")
    out = dict(state)
    out[name] = piece_state
    return out


def mean_gradient() -> GradientTransformation:
    """Non-private gradient estimate: ``g = (1/b) Σ_{i∈B} ∇f(x_i; w)``.  Declares
    :class:`~dpsim.privacy.events.NonPrivate`.

    Returns
    -------
    GradientTransformation
        The non-private gradient piece.
    """

    def init(params):
        return EmptyState()

    def update(batch, state, params, ctx):
        return batch.mean(), state

    return GradientTransformation(init, update, (NonPrivate("no privatizer: the minibatch mean "
                                                            "gradient is used as is"),),
                                  element=Release(clip=None, std=None))


@numba.njit(inline="always")
def _scaled(u, factor):
    """:func:`scale`'s rule ``u · factor``: the chain calls it on arrays (``.py_func``), the fused
    release on one coordinate."""
    return u * factor


@numba.njit(inline="always")
def _scale_element(g, k):
    return _scaled(g, k[0])


@numba.njit(inline="always")
def _traced(u, b, beta):
    """:func:`trace`'s rule ``b·β + u`` (arrays through ``.py_func``, or one coordinate)."""
    return b * beta + u


@numba.njit(inline="always")
def _trace_element(g, b, k):
    b = _traced(g, b, k[0])
    return b, b


_SCALE = register("scale", _scale_element, 0, 1)
_TRACE = register("trace", _trace_element, 1, 1)


def scale(factor) -> GradientTransformation:
    """``u ← factor · u`` (factor scalar or per-trial).  Element ``"scale"``.

    Parameters
    ----------
    factor : float or sequence of float
        The factor, scalar or per trial.

    Returns
    -------
    GradientTransformation
        The scaling piece.
    """

    def init(params):
        return EmptyState()

    def consts(state, ctx):
        return (ctx.hp(factor),)

    def update(u, state, params, ctx):
        return _scaled.py_func(u, *consts(state, ctx)), state

    return GradientTransformation(init, update,
                                  element=Element(_SCALE, (), consts, lambda state, arrays: state))


def trace(beta) -> GradientTransformation:
    """Heavy-ball momentum buffer ([ADAMBC] §3): ``b_t = β b_{t−1} + g_t``, emits ``b_t``.
    Element ``"trace"`` (slot ``trace``).

    Parameters
    ----------
    beta : float or sequence of float
        The momentum β ∈ [0, 1).

    Returns
    -------
    GradientTransformation
        The momentum piece (state :class:`TraceState`).
    """

    def init(params):
        return TraceState(trace=params * 0.0)

    def consts(state, ctx):
        return (ctx.hp(beta),)

    def update(u, state, params, ctx):
        b = _traced.py_func(u, state.trace, *consts(state, ctx))
        return b, TraceState(trace=b)

    return GradientTransformation(init, update, element=Element(
        _TRACE, ("trace",), consts, lambda state, arrays: TraceState(trace=arrays[0])))
