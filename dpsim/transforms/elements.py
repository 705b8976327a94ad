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
``σC`` and noise source; :func:`~dpsim.transforms.mean_gradient`'s plain mean), and
:func:`~dpsim.transforms.scale_then_privatize` exposes its parts (:class:`Scaled`), so a chain is
recognized by its pieces rather than by a description written beside it.  The shapes not yet
composed from elements (DP²'s delayed preconditioner, AdaDPS, PAGAN/PASAN, IME) keep a
*description* (:class:`Delayed`, :class:`Prepared`, :class:`Ellipsoid`, :class:`Ime`) that their
optimizer function registers with :func:`describe`; :func:`description` reads it.  This module
sits in the transforms layer so that the optimizers can describe; the fast paths
(:mod:`dpsim.fast`) read it.
"""

from __future__ import annotations

from dataclasses import dataclass
import weakref
from typing import Any, Callable

import numba
import numpy as np

from .._validate import is_zero
from . import _scalar

__all__ = ["Rule", "Element", "Release", "Scaled", "RULES", "register", "on", "table", "Delayed",
           "Prepared", "Ellipsoid", "Ime", "describe", "description"]


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
class Scaled:
    """The parts of :func:`~dpsim.transforms.scale_then_privatize`: ``privatizer`` releases the
    batch scaled by ``s = 1/(√max(v, 0) + eps_scale)`` (``v`` the ``preconditioner``'s before the
    step); ``unscale``: the release is divided by ``s`` and fed to ``preconditioner``;
    ``lookahead``: a statistic fed to the preconditioner first (``None``: none); ``names``: the two
    pieces' names in the state."""

    privatizer: Any
    preconditioner: Any
    eps_scale: Any
    unscale: bool
    lookahead: Callable | None
    names: tuple


# ------------------------------------------------------------------------------------------------
# descriptions: the shapes a fast path does not yet compose from elements, registered by their
# optimizer functions (built from the same validated values as the chain)


@dataclass(frozen=True)
class Delayed:
    """DP² (:mod:`dpsim.optimizers.dp2`): ``order`` ``"dp2"``, ``"noise_first"`` or
    ``"extra_query"``; ``P`` the second-moment rule, ``eps`` its ε, ``refresh`` the refresh
    function the chain uses (``(DelayedState, ctx) -> DelayedState``), ``rel1``/``rel2`` the SGD
    phase's and the adaptive phase's releases, ``neglr``/``neglr2`` their factors."""

    order: str
    s1: int
    s2: int
    P: Any
    eps: Any
    refresh: Callable
    rel1: Release
    rel2: Release
    neglr: Any
    neglr2: Any


@dataclass(frozen=True)
class Prepared:
    """``named_chain(stp, ("lr", scale(neglr)))`` where ``stp`` releases the batch scaled by a
    vector ``s`` that the optimizer first computes from data it may read without privacy (AdaDPS:
    RMSProp on the mean public gradient, ``s = 1/(√max(v, 0) + ε)``).  ``prepare(batch, state,
    params, ctx) -> (state', s)`` is that first part exactly as the chain runs it (``state'`` the
    chain's state with the preconditioner updated, ``s`` C-contiguous of the run's dtype), or
    ``None`` when it has no fast form for this run (the step then runs through the chain);
    ``release`` (``scaled=True``) is the privatizer's release of ``s ⊙ g_i``, the step direction."""

    release: Release
    neglr: Any
    prepare: Callable


@dataclass(frozen=True)
class Ellipsoid:
    """PAGAN ([PAGAN] Alg. 2): ``named_chain(("privatizer", ellipsoid_privatizer(...)),
    ("preconditioner", precondition(adagrad(eps, guard="max", per=...))), ("lr", scale(neglr)))``,
    and PASAN ([PAGAN] Alg. 1: ``per="norm"``, ``per_norm=True``: one accumulator per trial fed
    ``||ĝ||²``, summed as NumPy sums a row, :func:`_row_sum`).
    ``glm_release(batch, state, params, ctx) -> (state', rows, kernel_batch, std) | None`` is the
    privatizer's own preparation of a GLM step (:func:`dpsim.privacy.ellipsoid.ellipsoid_parts`:
    its set-up on the first step, the projected-sum kernel's arguments, the noise std ``(M, d)``
    or ``None``); ``None`` (no GLM form) runs the step through the chain.  ``eps`` the guard of
    ``D = max(√v, ε)``, ``neglr`` the learning-rate factor."""

    glm_release: Callable
    eps: Any
    neglr: Any
    per_norm: bool = False


@dataclass(frozen=True)
class Ime:
    """Independent moment estimation (:func:`dpsim.privacy.privatizers.ime_privatizer`, [DESIGN]
    §3): ``named_chain(("privatizer", ime), ("preconditioner", rule), ("lr", scale(neglr)))`` with
    ``release`` the first release (the clipped mean, noise std ``σ1·C``), ``clip`` the validated
    ``C``, ``s2`` the second release's ``σ2`` (noise std ``σ2·Δ₂`` on ``Π_C(ḡ)²``, ``Δ₂`` from the
    sampler as the privatizer computes it); ``rule`` ``"adagrad"`` (``precondition(adagrad(eps))``
    fed the moment inputs: ``v ← v + s̃``, ``g̃/(√max(v, 0) + ε)``) or ``"adam"``
    (:func:`dpsim.optimizers.design_space._adam_moments`, with ``beta1``, ``beta2``, ``eps``).

    The two releases draw their ``(R, d)`` normals one after the other from the one noise stream,
    the second after *all* of the first: the first release's normals are drawn up front into an
    ``(R, d)`` array, then one pass over the trials does each trial's clipped sum, ``g̃``, the
    square's release (drawing on), the moment recursion and the update (:func:`_ime_fused`).

    ``noiseless``: the second moment is fed the plain square ``ḡ²`` of the clipped mean — not
    projected, no noise, nothing drawn (``s2`` is then 0) — the non-private oracle of [DESIGN]
    Alg. 9 (:func:`dpsim.privacy.privatizers.noiseless_v_privatizer` with Adam's moment inputs,
    ``dp_adam_noiseless_v``).  ``stp_eps`` set (with ``noiseless``: ``dp_adam_stp_noiseless_v``):
    the chain is scale-then-privatize's — the release is of the batch scaled by
    ``s = 1/(√max(v, 0) + stp_eps)`` (``v`` the rule's before the step), ``g̃`` is divided by ``s``
    and the square by ``s·s`` before the rule."""

    release: Release
    clip: Any
    s2: Any
    rule: str
    neglr: Any
    eps: Any
    beta1: Any = None
    beta2: Any = None
    noiseless: bool = False
    stp_eps: Any = None


_SPECS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def describe(tx, spec):
    """Register ``spec`` as the description of the transform ``tx`` (built from the same
    validated values); returns ``tx``."""
    _SPECS[tx.update] = spec
    return tx


def description(tx):
    """The description registered for the transform ``tx`` (:func:`describe`), or ``None``."""
    try:
        return _SPECS.get(tx.update)
    except TypeError:  # pragma: no cover - an update that cannot be weakly referenced
        return None
