"""What a compiled path may read of a piece: its per-coordinate rule, its release, its parts.

Every piece of :mod:`dpsim.transforms` whose update acts coordinate by coordinate carries an
:class:`Element` (``GradientTransformation.element``): its rule written **once**, the names of the
state fields the rule reads and rewrites (its *slots*), and a function computing its constants
with the piece's own Python expressions (``ctx.hp(β)``, ``1.0 − β``, Adam's
:func:`~dpsim.transforms.preconditioners.bias_correction`).  The chain's update and the fused
release (:mod:`dpsim.fast.compose`, :mod:`dpsim.fast.release`, :mod:`dpsim.fast.block`) all evaluate
that one rule on those constants:

* a rule is a function of an array namespace, ``rule(xp) -> f``, written with arithmetic operators
  and ``xp.sqrt``, ``xp.maximum``, ``xp.sign`` only; :func:`on` instantiates it for the run's
  namespace (NumPy, CuPy, array-API strict: the chain's array code) or, with
  :mod:`dpsim.transforms._scalar` as ``xp``, compiles it with Numba for one coordinate
  (``inline="always"``), where each operation is rounded once, in the same order, to the same
  value as NumPy's element (no fast-math: no reassociation, no fused multiply-add);
* the constants are computed by the piece for the chain and for the fused release alike, so no
  constant is recomputed in compiled code (Numba's ``float ** int`` is not Python's ``pow``: a
  constant recomputed there differs in the last bit, docs/ARCHITECTURE.md's ``1 − βᵗ`` finding).

A composed kernel is compiled once per *structure key* (the element keys, in chain order) and
cached on disk by Numba; :data:`RULES` maps a key to its compiled scalar rule, registered when the
module defining the rule is imported.

The first piece of a chain exposes its :class:`Release` (a Gaussian privatizer's clip, noise std
``σC`` and noise source; :func:`~dpsim.transforms.mean_gradient`'s plain mean), and every
privatizer and combinator a fast path runs exposes its *parts*, built by its own constructor from
its validated values: :func:`~dpsim.transforms.scale_then_privatize` its :class:`Scaled` (with,
on AdaDPS's piece, its faster exact ``prepare``), a privatizer of moment inputs (IME, the noiseless
oracle) its :class:`Moments`, :func:`~dpsim.transforms.alternate` and
:func:`~dpsim.transforms.alongside` their :class:`Alternate` and :class:`Alongside`, DP²'s
:func:`~dpsim.transforms.preconditioners.accumulate` and
:func:`~dpsim.transforms.preconditioners.apply_delayed` their :class:`Accumulate` and
:class:`ApplyDelayed`, the ellipsoid privatizer
(:func:`~dpsim.privacy.ellipsoid.ellipsoid_privatizer`) its :class:`Projected` and a per-norm
``precondition`` (PASAN's step size) its :class:`PerNorm`.
So a chain is recognized by its pieces, whoever built it, and no description is written beside
it: :func:`dpsim.fast.compose.spec` reads a composition, or derives the shapes not composed from
elements alone — :class:`Delayed` (DP²'s three arrangements and its non-private form),
:class:`Prepared` (a release of the batch scaled by a prepared ``s``: AdaDPS), :class:`Ime`
(independent moment estimation and its oracles) and :class:`Ellipsoid` (PAGAN/PASAN) — from the
privatizer's parts, the moment, delayed or preconditioning piece's element or parts and
constants, and the ``"scale"`` element of the learning rate; a chain it cannot derive runs
through its pieces, and :func:`dpsim.explain` names the piece that stops it.  This module sits in
the transforms layer so that the pieces can expose their parts; the fast paths
(:mod:`dpsim.fast`) read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numba
import numpy as np

from .._validate import is_zero
from . import _scalar

__all__ = ["Rule", "Element", "Release", "Moments", "Scaled", "Accumulate", "ApplyDelayed",
           "Alternate", "Alongside", "Projected", "PerNorm", "RULES", "register", "on", "table",
           "Delayed", "Prepared", "Ellipsoid", "Ime"]


_INSTANCES: dict = {}


def on(rule: Callable, xp):
    """The rule ``rule(xp)`` for the namespace ``xp``, built once per ``(rule, xp)``: for
    :mod:`dpsim.transforms._scalar` the Numba-compiled scalar function (``inline="always"``: it is
    inlined into the loop that calls it, whose error model it then follows), else the plain
    function over ``xp``'s arrays."""
    key = (rule, xp)
    fn = _INSTANCES.get(key)
    if fn is None:
        fn = rule(xp)
        if xp is _scalar:
            fn = numba.njit(inline="always")(fn)
        _INSTANCES[key] = fn
    return fn


def table(consts, dt) -> np.ndarray:
    """A rule's constants (floats, or per-trial ``(R, 1)`` columns as ``ctx.hp`` gives them) as a
    C-contiguous ``(R or 1, n)`` array of ``dt``, one column per constant (``(1, 1)`` when there is
    none): a Python float rounded to ``dt`` as NumPy rounds a scalar operand (NEP 50), a column of
    ``dt`` as it is — the numbers the chain's array code operates with."""
    rows = [np.asarray(x, dtype=dt).reshape(-1) for x in consts]
    width = max((a.shape[0] for a in rows), default=1)
    out = np.empty((width, max(len(rows), 1)), dtype=dt)
    for i, a in enumerate(rows):
        out[:, i] = a
    return out


@dataclass(frozen=True, eq=False)
class Rule:
    """A compiled per-coordinate rule as the fused release calls it.

    ``fn(g, *slot_values, k) -> (*slot_values', u)`` (``u`` alone without slots): ``g`` the
    coordinate's input, the slot values the coordinate's entries of the piece's state arrays, ``k``
    the tuple of the piece's ``n_consts`` constants for the trial (in the run's dtype); ``u`` the
    coordinate's output, fed to the next piece.  ``key`` names the rule with every compile-time
    choice it makes (e.g. ``"adam:phi,eps"``): two rules with one key are one rule."""

    key: str
    fn: Any
    n_slots: int
    n_consts: int


#: key -> :class:`Rule`; what a composed kernel is compiled from (:func:`register`).
RULES: dict[str, Rule] = {}


def register(key: str, fn, n_slots: int, n_consts: int) -> Rule:
    """Register the compiled rule ``fn`` under ``key`` (once; a second registration of the key must
    be the same function) and return its :class:`Rule`."""
    rule = RULES.get(key)
    if rule is not None:
        if rule.fn is not fn or rule.n_slots != n_slots or rule.n_consts != n_consts:
            raise ValueError(f"element rule {key!r} is registered already with another function")
        return rule
    rule = RULES[key] = Rule(key, fn, n_slots, n_consts)
    return rule


@dataclass(frozen=True, eq=False)
class Element:
    """A piece's per-coordinate rule with what it needs from the piece.

    ``rule``: the registered :class:`Rule`.  ``slots``: the fields of the piece's state
    (``NamedTuple``) that the rule reads and rewrites, one ``(R, d)`` array each, in the rule's
    order.  ``consts(state, ctx) -> tuple``: the rule's constants for this step, each a float or a
    per-trial ``(R, 1)`` column as ``ctx.hp`` gives it, computed by the piece's own expressions —
    the tuple the piece's update passes to the same rule.  ``advance(state, arrays) -> state``: the
    piece's state after the step, given its slots' updated arrays.  ``varying``: the constants
    change from step to step (Adam's ``1 − βᵗ``); otherwise a run computes them once."""

    rule: Rule
    slots: tuple
    consts: Callable
    advance: Callable
    varying: bool = False

    @property
    def key(self) -> str:
        return self.rule.key


@dataclass(frozen=True)
class Release:
    """One release as a chain's first piece computes it: ``clip`` (validated; ``None``: the
    non-private mean gradient, no clipping), ``std`` = σ·C (``None`` or zero: no noise is drawn),
    ``scaled``: the batch is scaled first (scale-then-privatize, DP²'s delayed preconditioner,
    AdaDPS).  ``source``: ``None`` for i.i.d. Gaussian noise; for correlated noise (DP-MF) the
    privatizer's :class:`~dpsim.privacy.noise.NoiseSource`, through which a fused step draws the
    step's unit noise ``(R, d)`` on the privatizer's own stream state, exactly as the privatizer's
    ``add_noise`` does."""

    clip: Any
    std: Any
    scaled: bool = False
    source: Any = None

    @property
    def noisy(self) -> bool:
        return not (self.std is None or is_zero(self.std))


@dataclass(frozen=True)
class Moments:
    """The releases of a privatizer that emits moment inputs
    (:class:`~dpsim.transforms.preconditioners.MomentInputs` ``(g̃, s̃)``), built by the privatizer
    from its validated values: independent moment estimation
    (:func:`~dpsim.privacy.privatizers.ime_privatizer`) and the non-private oracle
    (:func:`~dpsim.privacy.privatizers.noiseless_v_privatizer`).

    ``release``: the first release (the clipped mean, noise std ``σ1·C``; for correlated noise the
    privatizer's noise source, through which the fused step draws both releases' unit noise on the
    privatizer's ``noise1``/``noise2``, or the oracle's ``noise``); ``clip``: the validated ``C``;
    ``s2``: the second release's ``σ2`` (noise std ``σ2·Δ₂`` on ``Π_C(ḡ)²``, ``Δ₂`` from the
    sampler as the privatizer computes it; 0: nothing drawn); ``noiseless``: the second moment is
    fed the plain square ``ḡ²`` of the clipped mean — not projected, no noise (the oracle; ``s2``
    is then 0)."""

    release: Release
    clip: Any
    s2: Any
    noiseless: bool = False


@dataclass(frozen=True)
class Scaled:
    """The parts of :func:`~dpsim.transforms.scale_then_privatize`: ``privatizer`` releases the
    batch scaled by ``s = 1/(√max(v, 0) + eps_scale)`` (``v`` the ``preconditioner``'s before the
    step); ``unscale``: the release is divided by ``s`` and fed to ``preconditioner``;
    ``lookahead``: a statistic fed to the preconditioner first (``None``: none); ``names``: the two
    pieces' names in the state.  ``prepare``: ``None``, or — on a piece that runs these parts in
    fewer passes (AdaDPS's, :func:`dpsim.optimizers.public._adadps_fast`) — its exact form of
    the part before the release, ``prepare(batch, state, params, ctx) -> (state', s)`` (``state'``
    the named state with the preconditioner fed the lookahead, ``s`` C-contiguous; ``None``: no
    fast form for this step, which then runs through the piece's update)."""

    privatizer: Any
    preconditioner: Any
    eps_scale: Any
    unscale: bool
    lookahead: Callable | None
    names: tuple
    prepare: Callable | None = None


@dataclass(frozen=True)
class Accumulate:
    """The part of :func:`~dpsim.transforms.preconditioners.accumulate`: the piece emits ``g``
    unchanged and adds it to the delayed state's ``G``; ``refresh`` (``(DelayedState, ctx) ->
    DelayedState``, or ``None``) runs right after, in the same step."""

    refresh: Callable | None = None


@dataclass(frozen=True)
class ApplyDelayed:
    """The part of :func:`~dpsim.transforms.preconditioners.apply_delayed`: the piece emits
    ``g / D(v)`` with the delayed ``v`` and ``D`` the second-moment rule ``P``'s
    (:class:`~dpsim.transforms.preconditioners.Preconditioner`) denominator."""

    P: Any


@dataclass(frozen=True)
class Alternate:
    """The parts of :func:`~dpsim.transforms.combinators.alternate`: ``first`` runs ``s1`` steps,
    then ``second`` ``s2`` steps, in cycles; ``on_switch`` ``(name, fn)`` or ``None``, run on the
    piece ``name``'s state before the first step of ``second`` in every cycle."""

    s1: int
    first: Any
    s2: int
    second: Any
    on_switch: tuple | None


@dataclass(frozen=True)
class Alongside:
    """The parts of :func:`~dpsim.transforms.combinators.alongside`: ``side`` runs on the step's
    batch first (its output discarded), then ``main``, whose output is the step's."""

    side: Any
    main: Any


@dataclass(frozen=True)
class Projected:
    """The parts of :func:`~dpsim.privacy.ellipsoid.ellipsoid_privatizer` ([PAGAN]'s projection
    onto an ellipsoid, then Gaussian noise ``N(0, s²A⁻¹)``), built by the privatizer from its
    validated values: ``glm_release(batch, state, params, ctx) -> (state', rows, kernel_batch,
    std) | None``, its own preparation of a GLM step (its set-up on the first step, the
    projected-sum kernel's arguments, the noise std ``(M, d)`` or ``None``; ``None``: no GLM form,
    the step runs through the piece); ``source``: ``None`` for i.i.d. Gaussian noise, else the
    privatizer's :class:`~dpsim.privacy.noise.NoiseSource` (correlated noise, which no fused
    ellipsoid pass draws)."""

    glm_release: Callable
    source: Any = None


@dataclass(frozen=True)
class PerNorm:
    """The parts of :func:`~dpsim.transforms.preconditioners.precondition` of a rule with one
    accumulator per trial fed ``||g||²`` (``per="norm"``: PASAN's step size, [PAGAN] Alg. 1), which
    has no per-coordinate element: ``rule`` the rule's name (``"adagrad_max"``: ``v ← v +
    ||g||²``, ``D = max(√v, ε)``), ``consts(state, ctx) -> k`` its constants as the piece's update
    computes them (``(ε,)`` for ``"adagrad_max"``)."""

    rule: str
    consts: Callable


# ------------------------------------------------------------------------------------------------
# the shapes a fast path runs besides a composition, derived by dpsim.fast.compose.spec from the
# chain's pieces (Delayed, Prepared, Ellipsoid, Ime)


@dataclass(frozen=True)
class Delayed:
    """DP² (:mod:`dpsim.optimizers.dp2`) as :func:`dpsim.fast.compose.spec` derives it from the
    pieces: :func:`~dpsim.transforms.combinators.alternate` (:class:`Alternate`) of an SGD phase
    ``named_chain((p, P1), (q, accumulate()), (l, scale(−η1)))`` and an adaptive phase over the
    same delayed state ``q`` — ``order`` ``"dp2"``: ``named_chain(scale_then_privatize(P2,
    apply_delayed(P), unscale=False), (l2, scale(−η2)))``; ``"noise_first"``:
    ``named_chain((p2, P2), (q, apply_delayed(P)), (l2, scale(−η2)))`` — with ``on_switch = (q,
    refresh)``; or ``order`` ``"extra_query"``: ``alternate((1, first), (s − 1, alongside(side,
    main)))`` (or ``first`` alone for ``s = 1``) with ``first`` the SGD phase whose
    ``accumulate(then_refresh=refresh)`` refreshes, ``side`` the SGD phase's privatizer into
    ``accumulate()`` and ``main`` the ``"dp2"`` adaptive phase.  ``P1``, ``P2``: Gaussian
    privatizers or ``mean_gradient`` (their :class:`Release`).

    ``s1`` the SGD phase's steps (``"extra_query"``: the delay ``s``), ``s2`` the adaptive
    phase's (``"extra_query"``: ``s − 1``, the steps with a second release); ``P`` the rule of
    ``apply_delayed`` (``None`` for ``"extra_query"`` with ``s = 1``), ``eps`` scale-then-privatize's
    ``ε`` of ``s = 1/(√max(v, 0) + ε)`` (``None`` for ``"noise_first"``, which divides by
    ``P``'s ``D(v)``), ``refresh`` the chain's refresh function, ``rel1``/``rel2`` the SGD and the
    adaptive phase's releases, ``lr``/``lr2`` their ``"scale"`` elements (``consts`` gives
    ``−η``), ``piece`` the delayed state's name."""

    order: str
    s1: int
    s2: int
    P: Any
    eps: Any
    refresh: Callable
    rel1: Release
    rel2: Release
    lr: Element
    lr2: Element
    piece: str = "preconditioner"


@dataclass(frozen=True)
class Prepared:
    """A release of the batch scaled by ``s``, prepared from data the chain may read without
    privacy, as :func:`dpsim.fast.compose.spec` derives it from ``named_chain(stp, (l,
    scale(−η)))`` with ``stp`` a :func:`~dpsim.transforms.combinators.scale_then_privatize`
    (:class:`Scaled`) of a Gaussian privatizer that keeps its release scaled and feeds a
    ``lookahead`` first (AdaDPS: RMSProp on the mean public gradient,
    ``s = 1/(√max(v, 0) + ε)``).  ``prepare(batch, state, params, ctx) -> (state', s)`` is that
    first part exactly as the chain runs it (the piece's own :attr:`Scaled.prepare`, else the
    combinator's expressions on its parts), or ``None`` when it has no fast form for this step
    (the step then runs through the chain); ``release`` (``scaled=True``) is the privatizer's
    release of ``s ⊙ g_i``, the step direction; ``lr`` the last piece's ``"scale"`` element."""

    release: Release
    lr: Element
    prepare: Callable


@dataclass(frozen=True)
class Ellipsoid:
    """PAGAN ([PAGAN] Alg. 2) and PASAN (Alg. 1) as :func:`dpsim.fast.compose.spec` derives them
    from a chain's pieces: ``named_chain((p, ellipsoid_privatizer(...)), (q, precondition(adagrad(ε,
    guard="max", per=...))), (l, scale(−η)))`` — the privatizer's :class:`Projected`, then AdaGrad
    with ``D = max(√v, ε)``, per coordinate (PAGAN: its :class:`Element`
    ``"precondition:adagrad_max"``) or per trial fed ``||ĝ||²`` (PASAN: its :class:`PerNorm`,
    ``per_norm=True``; summed as NumPy sums a row, :func:`dpsim.fast.release_kernels._row_sum`),
    then the learning rate.

    ``glm_release``: the privatizer's :attr:`Projected.glm_release`; ``pre``: the AdaGrad piece's
    :class:`Element` or :class:`PerNorm` (``pre.consts`` gives ``(ε,)``, the guard of
    ``D = max(√v, ε)``); ``lr``: the last piece's ``"scale"`` element (``lr.consts`` gives
    ``−η``); ``names``: the privatizer's and the AdaGrad piece's names in the state."""

    glm_release: Callable
    pre: Any
    lr: Element
    names: tuple
    per_norm: bool = False


@dataclass(frozen=True)
class Ime:
    """Independent moment estimation ([DESIGN] §3) as :func:`dpsim.fast.compose.spec` derives it
    from a chain's pieces: ``named_chain((p, P), (q, Q), (l, scale(−η)))`` with ``P`` a privatizer
    exposing :class:`Moments` (:func:`~dpsim.privacy.privatizers.ime_privatizer`,
    :func:`~dpsim.privacy.privatizers.noiseless_v_privatizer`), ``Q`` a piece whose element is
    AdaGrad's (``precondition(adagrad(eps))``: ``v ← v + s̃``, ``g̃/(√max(v, 0) + ε)``) or Adam's
    without Φ (:func:`~dpsim.transforms.preconditioners.scale_by_adam`, fed the moment inputs:
    ``max(v̂, 0)`` before the root); or ``named_chain(scale_then_privatize(P, Q), (l, scale(−η)))``
    with the oracle's ``P``.

    ``release``, ``clip``, ``s2``, ``noiseless``: the privatizer's :class:`Moments`
    (``release.scaled`` under scale-then-privatize); ``rule`` ``"adagrad"`` or ``"adam"``;
    ``pre``: ``Q``'s :class:`Element` (its constants — ``(ε,)``, or Adam's nine with ``1 − βᵗ`` —
    are computed by ``pre.consts`` on ``Q``'s state, and its key says whether ε is added);
    ``lr``: the last piece's ``"scale"`` element (``lr.consts`` gives ``−η``); ``names``: the
    privatizer's and the preconditioner's names in the state.

    The two releases draw their ``(R, d)`` normals one after the other from the one noise stream,
    the second after *all* of the first: the first release's normals are drawn up front into an
    ``(R, d)`` array, then one pass over the trials does each trial's clipped sum, ``g̃``, the
    square's release (drawing on), the moment recursion and the update
    (:func:`dpsim.fast.release_kernels._ime_fused`).

    ``stp_eps`` set (the oracle behind scale-then-privatize, e.g. ``dp_adam_stp_noiseless_v``): the
    release is of the batch scaled by ``s = 1/(√max(v, 0) + stp_eps)`` (``v`` the rule's before
    the step), ``g̃`` is divided by ``s`` and the square by ``s·s`` before the rule."""

    release: Release
    clip: Any
    s2: Any
    rule: str
    pre: Element
    lr: Element
    names: tuple
    noiseless: bool = False
    stp_eps: Any = None

