"""Combinators: the same pieces in another order.

* Post-processing is a plain chain: ``named_chain(("privatizer", P), ("preconditioner", Q), ...)``
  — privatize, then precondition the release.
* :func:`scale_then_privatize` ``(P, Q)``: precondition *before* privatizing, reading the
  preconditioner's denominator from ``Q``'s own state ([DESIGN] Alg. 8, [DP2] Alg. 1's adaptive
  phase, AdaDPS).
* :func:`alternate`: phases of ``s1`` and ``s2`` steps over one named state (DP²'s SGD and adaptive
  phases), with a hook at the switch.
* :func:`alongside`: run a side transform on the same batch before the main one (DP²'s extra
  query: a second release on the same batch).

Each returns a transform with a *named* state (``transform.names``), so it splices into a
:func:`~dpsim.transforms.named_chain` and its pieces can be read with
:func:`~dpsim.transforms.lookup`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .._validate import hyper, positive_int
from ..privacy.events import at, restrict, same_release, union
from .base import GradientTransformation
from .elements import Alongside, Alternate, Scaled
from .preconditioners import MomentInputs

__all__ = ["scale_then_privatize", "alternate", "alongside"]


def scale_then_privatize(privatizer: GradientTransformation, preconditioner: GradientTransformation,
                         *, eps_scale, unscale: bool = True, lookahead: Callable | None = None,
                         names=("privatizer", "preconditioner")) -> GradientTransformation:
    """Privatize the preconditioned per-example gradients ``s ⊙ g_i``.

    ``s = 1/(√max(v, 0) + ε_s)`` with ``v`` the raw second moment in the preconditioner's own state
    (``state.v``) before this step's update.  The privatizer receives the batch scaled by ``s``
    (:meth:`~dpsim.transforms.Batch.scaled`), so clipping and noise act in the preconditioned
    coordinates.  Then:

    * ``unscale=True`` ([DESIGN] Alg. 8): the release is divided by ``s`` and fed to the
      preconditioner, which updates ``v`` and emits its step (e.g. Adam's ``m̂/(√v̂ + ε)``): the
      post-processing chain with the privatizer moved behind the scaling.  With ``σ = 0`` and
      ``C = ∞`` it equals the post-processing chain up to rounding.
    * ``unscale=False`` ([DP2] adaptive phase, AdaDPS): the release of ``s ⊙ g`` is the step
      direction; the preconditioner only supplies ``v`` (it is fed elsewhere: DP²'s refresh, or
      ``lookahead``).

    ``lookahead(batch, ctx) -> g``: a statistic fed to the preconditioner before ``s`` is computed
    (AdaDPS: the mean public gradient).  ``names``: the names of the two pieces in the state.
    A :class:`~dpsim.transforms.preconditioners.MomentInputs` release (an oracle's noiseless
    second-moment input) is unscaled in both parts.

    Parameters
    ----------
    privatizer : GradientTransformation
        The privatizer, fed the scaled batch.
    preconditioner : GradientTransformation
        The preconditioner whose ``state.v`` gives the scale.
    eps_scale : float or sequence of float
        ``ε_s`` > 0.
    unscale : bool
        Divide the release by ``s`` and feed it to the preconditioner.
    lookahead : callable, optional
        ``lookahead(batch, ctx) -> g`` fed to the preconditioner first.
    names : tuple of str
        The names of the two pieces.

    Returns
    -------
    GradientTransformation
        With a named state over ``names``.

    Examples
    --------
    >>> from dpsim.privacy.privatizers import gaussian_privatizer
    >>> from dpsim.transforms import scale_then_privatize
    >>> from dpsim.transforms.preconditioners import precondition, rmsprop
    >>> tx = scale_then_privatize(gaussian_privatizer(1.0, 1.0), precondition(rmsprop(0.9, 1e-8)),
    ...                           eps_scale=1e-3)
    >>> tx.names, len(tx.privacy)
    (('privatizer', 'preconditioner'), 1)
    """
    eps_scale = hyper("eps_scale", eps_scale, "[0, inf)")
    pname, qname = names

    def init(params):
        return {pname: privatizer.init(params), qname: preconditioner.init(params)}

    def update(batch, state, params, ctx):
        xp = ctx.xp
        q = state[qname]
        if lookahead is not None:
            _, q = preconditioner.update(lookahead(batch, ctx), q, params, ctx)
        s = 1.0 / (xp.sqrt(xp.maximum(q.v, 0.0)) + ctx.hp(eps_scale))
        g, p = privatizer.update(batch.scaled(s), state[pname], params, ctx)
        if unscale:
            g = MomentInputs(g.g / s, g.sq / (s * s)) if isinstance(g, MomentInputs) else g / s
            g, q = preconditioner.update(g, q, params, ctx)
        return g, {pname: p, qname: q}

    privacy = tuple(at(e, pname) for e in privatizer.privacy) + tuple(
        at(e, qname) for e in preconditioner.privacy)
    return GradientTransformation(init, update, privacy, (pname, qname),
                                  element=Scaled(privatizer, preconditioner, eps_scale, unscale,
                                                 lookahead, (pname, qname)))


def _twins(e, f) -> bool:
    """Two declarations of one shared piece (same place in the state, same mechanism)."""
    return e.path == f.path and (e == f or same_release(e, f))


def _phase_mask(lo: int, hi: int, cycle: int):
    def mask(T: int) -> np.ndarray:
        p = np.arange(T) % cycle
        return (p >= lo) & (p < hi)

    return mask


def alternate(first, second, *, on_switch: Callable | None = None) -> GradientTransformation:
    """Cycle through ``first = (s1, tx1)`` for ``s1`` steps, then ``second = (s2, tx2)`` for ``s2``.

    With ``p = (t − 1) mod (s1 + s2)`` for the 1-based step ``t``, step ``t`` runs ``tx1`` when
    ``p < s1`` and ``tx2`` otherwise.  Both transforms have named states; the combined state is one
    dict over the union of their names, and **a name in both phases is one piece**: one state
    (e.g. one correlated-noise stream, one delayed preconditioner) and one privacy event whose
    schedule is the union of the phases' steps.  Every other event is restricted to its phase's
    steps.  ``on_switch = (name, fn)``: before the first step of ``tx2`` in every cycle, piece
    ``name``'s state becomes ``fn(state, ctx)``.  ``s1``, ``s2`` are positive integers shared by
    all trials.

    Parameters
    ----------
    first : tuple
        ``(s1, tx1)``.
    second : tuple
        ``(s2, tx2)``.
    on_switch : tuple, optional
        ``(name, fn)`` run before the first step of ``tx2`` in every cycle.

    Returns
    -------
    GradientTransformation
        The alternation, with a named state over both phases' names (element: its parts,
        :class:`~dpsim.transforms.elements.Alternate`).
    """
    (s1, tx1), (s2, tx2) = first, second
    s1, s2 = positive_int("s1", s1), positive_int("s2", s2)
    for tx in (tx1, tx2):
        if not tx.names:
            raise ValueError("alternate needs transforms with a named state (named_chain)")
    cycle = s1 + s2
    names = tuple(dict.fromkeys(tx1.names + tx2.names))
    if on_switch is not None and on_switch[0] not in names:
        raise ValueError(f"on_switch names piece {on_switch[0]!r}, not one of {names}")

    def init(params):
        state = tx2.init(params)
        state.update(tx1.init(params))
        return {k: state[k] for k in names}

    def update(batch, state, params, ctx):
        p = (ctx.t - 1) % cycle
        tx = tx1 if p < s1 else tx2
        new = dict(state)
        if p == s1 and on_switch is not None:
            name, fn = on_switch
            new[name] = fn(new[name], ctx)
        u, sub = tx.update(batch, {k: new[k] for k in tx.names}, params, ctx)
        new.update(sub)
        return u, new

    ev1 = [restrict(e, _phase_mask(0, s1, cycle)) for e in tx1.privacy]
    ev2 = [restrict(e, _phase_mask(s1, cycle, cycle)) for e in tx2.privacy]
    privacy = []
    for e in ev1:
        twin = next((f for f in ev2 if _twins(e, f)), None)
        if twin is not None:
            ev2.remove(twin)
            e = union(e, twin) if same_release(e, twin) else e
        privacy.append(e)
    privacy.extend(ev2)
    return GradientTransformation(init, update, tuple(privacy), names,
                                  element=Alternate(s1, tx1, s2, tx2, on_switch))


def alongside(side: GradientTransformation, main: GradientTransformation) -> GradientTransformation:
    """Run ``side`` on the step's batch (its output is discarded; its state and releases count),
    then ``main`` on the same batch.  Both have named states; shared names are one piece.

    Parameters
    ----------
    side : GradientTransformation
        Run first; its output is discarded.
    main : GradientTransformation
        Run second; its output is the step's.

    Returns
    -------
    GradientTransformation
        Both, with one named state (element: its parts,
        :class:`~dpsim.transforms.elements.Alongside`).
    """
    for tx in (side, main):
        if not tx.names:
            raise ValueError("alongside needs transforms with a named state (named_chain)")
    names = tuple(dict.fromkeys(side.names + main.names))

    def init(params):
        state = main.init(params)
        state.update(side.init(params))
        return {k: state[k] for k in names}

    def update(batch, state, params, ctx):
        new = dict(state)
        _, sub = side.update(batch, {k: new[k] for k in side.names}, params, ctx)
        new.update(sub)
        u, sub = main.update(batch, {k: new[k] for k in main.names}, params, ctx)
        new.update(sub)
        return u, new

    privacy = list(side.privacy)
    for e in main.privacy:
        if not any(_twins(e, f) for f in side.privacy):
            privacy.append(e)
    return GradientTransformation(init, update, tuple(privacy), names, element=Alongside(side, main))
