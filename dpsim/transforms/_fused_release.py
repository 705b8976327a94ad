"""The fused release: one pass per trial that clips, draws the noise, and applies the update.

The general engine computes a private step as a sequence of whole-array operations over
``(R, d)``: the clipped sum ``S`` (:meth:`dpsim.transforms.Batch.clipped_sum`), the noise ``z``
drawn as a fresh ``(R, d)`` array, ``g̃ = (z·σC + S)/b``, then each piece of the chain (moment
recursions, the learning rate) and ``w + u``, each a pass over ``(R, d)`` arrays of several MB
(workload W: R = 64, d = 10⁴).  At large ``d`` those passes, not arithmetic, cost what the
normals do not.  Here a *recognized* chain runs, per trial ``r``, as

    S_r    = Σ_{i∈B_r} clip(s_r ⊙ g_i(w_r), C_r)    (a GLM: the engine's CSR/dense kernel body,
                                                      into one row buffer of d numbers; any other
                                                      problem: its own clipped sum, computed first)
    for j:  z = next normal of the run's noise Generator
            g̃ = (z·std_r + S_rj) / b
            the pieces' rules on g̃ in chain order (momentum, RMSProp/AdaGrad/Yogi, Adam, the
            learning rate; DP²'s accumulator), each on its own state
            w_rj ← w_rj + u

so ``z``, ``g̃`` and the update never exist as ``(R, d)`` arrays, and the row buffer stays in
cache.

**Bit for bit the chain's result.**  The normals come from the run's own
``numpy.random.Generator`` through Numba's compiled ``Generator.standard_normal``, or, for a
float64 release of :data:`INLINE_NORMALS_MIN` normals or more, through :mod:`dpsim._bitgen`'s
inlined copy of NumPy's PCG64 and ziggurat on the Generator's state array (both: the same ziggurat
on the same bit generator, values and final state equal ``gen.standard_normal((R, d))``,
``tests/test_w_fast.py``, ``tests/test_bitgen.py``), in the chain's C order (trial by trial, coordinate by coordinate; the
clipped sum draws no randomness, so computing it per trial does not move any draw).  Every
element goes through the chain's operations in the chain's order, each rounded once to the run's
dtype (Numba compiles without fast-math: no reassociation, no fused multiply-add); the
hyperparameters enter as the values the chain computes (``StepContext.hp``, then rounded to the
dtype exactly as NumPy rounds a scalar operand).  The GLM trial body is the engine's own
(:func:`dpsim.problems._glm_kernels._trial_row`), writing one row buffer instead of a row of an
``(R, d)`` output, and each piece's recursion is the piece's own rule
(:mod:`dpsim.transforms.elements`), the one its update evaluates on arrays.
``tests/test_w_fast.py`` checks equality with ``assert_array_equal`` for every optimizer on this
path, several seeds, every sampler, float64 and float32.

**Which chains.**  A chain whose pieces compose (:func:`dpsim.transforms._compose.composition`:
a Gaussian privatizer — i.i.d. or correlated noise — or ``mean_gradient``, possibly behind
scale-then-privatize, then pieces that carry an element: ``scale``, ``trace``,
``precondition(adagrad | rmsprop | yogi)``, ``scale_by_adam`` with its DP corrections) runs as
one kernel per structure (:func:`_make_composed`), whoever built it.  Other shapes are recognized
by a description that the optimizer function registers with :func:`describe`, made from the same
validated hyperparameters and keyed by the chain's ``update`` function object: DP²'s three
arrangements and its non-private form (:class:`Delayed`), AdaDPS (:class:`Prepared`), PAGAN and
PASAN (:class:`Ellipsoid`: the privatizer's own projected-sum kernel per trial; PASAN's
``||ĝ||²`` is NumPy's pairwise row sum, :func:`_row_sum`) and independent moment estimation
(:class:`Ime`: one pass per trial, the first release's normals drawn before it, since its two
releases draw one after the other from the one stream).  :func:`spec_of` returns either;
:func:`why_not` says why a chain has neither, naming the piece.  The run must be on NumPy
(``backend="numpy"``, or ``"numpy:blocked"``: there the normals are the step's unit-noise array
drawn up front by the backend's thread pool, as the chain draws it, and the kernel reads it
instead of a Generator) and without a public split, except AdaDPS, which reads one.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, fields
from typing import Any, Callable

import numba
import numpy as np
from numba import types
from numba.extending import overload
from numba.np.unsafe.ndarray import to_fixed_tuple

from .. import _bitgen
from .._validate import is_zero
from ..privacy import _ellipsoid as _E
from ..problems import _glm_kernels as _K
from . import _compose
from . import preconditioners as _P
from .elements import Release, table
from .preconditioners import _ADAGRAD_STEP, _adam_moments_element

__all__ = ["Release", "Delayed", "Prepared", "Ellipsoid", "Ime", "describe", "spec_of", "FusedStep",
           "plan", "why_not"]


# ------------------------------------------------------------------------------------------------
# descriptions


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


def spec_of(tx):
    """What the fused release runs for ``tx``: the description registered for it (by its
    ``update`` function), else its :class:`~dpsim.transforms._compose.Composition` when its pieces
    compose, else ``None`` (:func:`why_not` then says which piece stops it)."""
    spec = _spec(tx)
    return None if isinstance(spec, str) else spec


def _spec(tx):
    """:func:`spec_of`, with the sentence of :func:`dpsim.transforms._compose.composition` in place
    of ``None``."""
    try:
        spec = _SPECS.get(tx.update)
    except TypeError:  # pragma: no cover - an update that cannot be weakly referenced
        spec = None
    return spec if spec is not None else _compose.composition(tx)


# ------------------------------------------------------------------------------------------------
# kernels
#
# The overloads below are inlined into their callers in Numba's IR (``inline="always"``): Numba
# optimizes each function, loop vectorizer included, before it links the functions it calls, so a
# call left for LLVM to inline keeps the element loops around it scalar (RMSProp's row at W:
# 4.1 ns a coordinate with ``_normal_at`` a call, 2.2 ns inlined, on an Emerald Rapids core).

def _draw(gen, like):  # pragma: no cover - replaced by the overload in compiled code
    raise NotImplementedError


@overload(_draw, inline="always")
def _draw_impl(gen, like):
    """One standard normal of ``like``'s dtype from ``gen`` (as ``gen.standard_normal(dtype=…)``)."""
    if isinstance(like, types.Array) and like.dtype == types.float32:
        def impl(gen, like):
            return gen.standard_normal(dtype=np.float32)
        return impl

    def impl(gen, like):
        return gen.standard_normal()
    return impl


def _normal_at(src, like, j):  # pragma: no cover - replaced by the overload in compiled code
    raise NotImplementedError


@overload(_normal_at, inline="always")
def _normal_at_impl(src, like, j):
    """The normal of coordinate ``j`` of the current trial: the next draw of the run's Generator
    (``numpy`` stream layout, drawn in C order) through Numba's ``Generator.standard_normal``, or
    ``src[j]`` when ``src`` is the trial's row of normals drawn before the row is processed
    (:func:`_trial_source`).  Chosen by type when the kernel is compiled, so neither path has a
    branch in its loop."""
    if isinstance(src, types.Array):
        def impl(src, like, j):
            return src[j]
        return impl

    def impl(src, like, j):
        return _draw(src, like)
    return impl


def _trial_source(src, r, zbuf, noisy):  # pragma: no cover - replaced by the overload
    raise NotImplementedError


@overload(_trial_source)
def _trial_source_impl(src, r, zbuf, noisy):
    """Trial ``r``'s noise source: the Generator itself; row ``r`` of the step's noise array (the
    blocked layout); or, when ``src`` is the Generator's PCG64 state as a ``uint64`` array, the
    row buffer ``zbuf`` filled with the trial's ``d`` normals by :func:`dpsim._bitgen.standard_normal`
    (NumPy's float64 ziggurat inlined: the same numbers in the same order, ~6–7 ns a normal
    against ~10–14 ns through the Generator; a loop of its own, since drawn inside the row's
    update loop the state's loads and stores cannot be kept apart from the row's)."""
    if isinstance(src, types.Array) and src.ndim == 2:
        def impl(src, r, zbuf, noisy):
            return src[r]
        return impl
    if isinstance(src, types.Array) and src.dtype == types.uint64:
        def impl(src, r, zbuf, noisy):
            if noisy:
                for j in range(zbuf.shape[0]):
                    zbuf[j] = _bitgen.standard_normal(src)
            return zbuf
        return impl

    def impl(src, r, zbuf, noisy):
        return src
    return impl



#: A float64 release on the stream layout draws its normals with :mod:`dpsim._bitgen` (NumPy's
#: ziggurat inlined, on the Generator's state array) from this many (R·d) on; below it, through
#: Numba's ``Generator.standard_normal``.  Both give the Generator's own stream: the threshold
#: moves time only (the state's round trip, ~8 µs, against ~4–6 ns saved a normal).
INLINE_NORMALS_MIN = 4096

def _unscale(x, U, r, j):  # pragma: no cover - replaced by the overload in compiled code
    raise NotImplementedError


@overload(_unscale, inline="always")
def _unscale_impl(x, U, r, j):
    """``x / U[r, j]`` (scale-then-privatize's unscaled release), or
    ``x`` when ``U`` is ``None`` — chosen when the kernel is compiled, no branch in the loops."""
    if isinstance(U, types.NoneType):
        return lambda x, U, r, j: x
    return lambda x, U, r, j: x / U[r, j]


def _unscale_sq(q, U, r, j):  # pragma: no cover - replaced by the overload in compiled code
    raise NotImplementedError


@overload(_unscale_sq, inline="always")
def _unscale_sq_impl(q, U, r, j):
    """``q / (U[r, j]·U[r, j])`` (scale-then-privatize's unscaled moment input ``sq / (s·s)``), or
    ``q`` when ``U`` is ``None`` — chosen when the kernel is compiled."""
    if isinstance(U, types.NoneType):
        return lambda q, U, r, j: q
    return lambda q, U, r, j: q / (U[r, j] * U[r, j])


# op codes of DP²'s steps (Delayed): the SGD phase's accumulate-and-step, the extra query's side
# release into G, the noise-first phase's division by D
OP_ACC_SGD, OP_ACC, OP_DIV = range(3)
# where the clipped sum comes from
SRC_CSR, SRC_DENSE, SRC_TOTAL = 0, 1, 2
# rows of the hyperparameter table H (NH, R or 1), in the run's dtype: noise std, nominal b, the
# learning-rate factor, a zero of the dtype, then the recursion's constants h1..h9
H_STD, H_B, H_NEGLR, H_ZERO, H_1, H_2, H_3, H_4, H_5, H_6, H_7, H_8, H_9 = range(13)
NH = 13


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _noisy_mean(gen, like, j, noisy, sd, s, bb, recip):
    """``add_noise``'s element: ``(z·σC + S)/b`` (``z`` the normal of coordinate ``j``,
    :func:`_normal_at`), or ``S/b`` without noise.

    ``recip``: ``bb`` holds ``1/b`` for a power of two ``b``, and the quotient is a product:
    ``x/2^k`` and ``x·2^-k`` are both the exact ``x·2^-k`` rounded once (``2^-k`` is exact), so
    they are the same number — subnormal, infinite and NaN results included — and a product
    costs a fraction of a division."""
    if noisy:
        x = _normal_at(gen, like, j) * sd + s
    else:
        x = s
    if recip:
        return x * bb
    return x / bb


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _inverse_root(v, E, out):
    """``out = 1/(√max(v, 0) + ε)`` of a float64 ``(R, d)`` array, ``E`` the flat ``ε`` (one value,
    or one per trial): the NumPy expression ``1.0 / (np.sqrt(np.maximum(v, 0.0)) + ε)`` element by
    element, each operation rounded once as there (``max`` NaN-propagating and ``-0.0 → 0.0``, as
    ``np.maximum(v, 0.0)``)."""
    R, d = v.shape
    for r in range(R):
        e = E[r if E.shape[0] > 1 else 0]
        for j in range(d):
            x = v[r, j]
            mv = x if (x > 0.0 or x != x) else 0.0
            out[r, j] = 1.0 / (np.sqrt(mv) + e)


def _inverse_root_of(v, e, dt, out):
    """``1/(√max(v, 0) + e)`` as a C-contiguous array of ``dt``: for float64 ``(R, d)`` ``v`` one
    pass of :func:`_inverse_root` into ``out`` (a float64 buffer of ``v``'s shape), returned;
    otherwise the NumPy expression itself (four passes; ``out`` unused)."""
    if dt == np.float64 and isinstance(v, np.ndarray) and v.dtype == np.float64 and v.ndim == 2:
        _inverse_root(v, _row(e, np.float64), out)
        return out
    return np.ascontiguousarray(1.0 / (np.sqrt(np.maximum(v, 0.0)) + e), dtype=dt)


def _composed_row(key, src, z, noisy, recip, H, slots, K, r, W, U):  # pragma: no cover
    raise NotImplementedError  # replaced by the overload in compiled code


@overload(_composed_row, prefer_literal=True)
def _composed_row_impl(key, src, z, noisy, recip, H, slots, K, r, W, U):
    """Trial ``r``'s row of the chain whose structure key is the literal ``key``
    (:func:`dpsim.transforms._compose.body`): per coordinate the release ``g̃ = (z·σC + S)/b``
    (:func:`_noisy_mean`; divided by ``U[r, j]`` under scale-then-privatize, :func:`_unscale`),
    the elements in chain order on ``g̃`` (each updating its slots of ``slots``), and
    ``w ← w + u``.  ``K``: the constants, one row per trial or one for all, in the run's dtype."""
    if not isinstance(key, types.StringLiteral):
        return None
    body, _, nk = _compose.body(key.literal_value.split("#")[0])

    if nk == 0:
        def consts(K, r):
            return ()
    else:
        def consts(K, r):
            return to_fixed_tuple(K[r if K.shape[0] > 1 else 0], nk)
    consts = numba.njit(inline="always")(consts)

    def impl(key, src, z, noisy, recip, H, slots, K, r, W, U):
        d = W.shape[1]
        c = r if H.shape[1] > 1 else 0
        sd = H[H_STD, c]
        bb = H[H_B, c]
        k = consts(K, r)
        for j in range(d):
            g = _unscale(_noisy_mean(z, W, j, noisy, sd, src[j], bb, recip), U, r, j)
            W[r, j] = W[r, j] + body(g, slots, k, r, j)
    return impl


def _make_composed(KEY):
    """The kernel of the structure ``KEY`` (``"<key>#<fingerprint>"``): every trial in order, its
    clipped sum (:func:`_clipped_row`) and its row (:func:`_composed_row`).  Numba caches it on
    disk under the hash of its closure, i.e. of ``KEY``, whose fingerprint
    (:func:`dpsim.transforms._compose.fingerprint`) changes with the rules' source files."""

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def composed(srck, data, indices, indptr, rn2, X, idx, W, y, kind, lam, S, want_scale, C, mask,
                 want_mask, total, buf, gen, zbuf, noisy, recip, H, slots, K, U):
        R = W.shape[0]
        for r in range(R):
            z = _trial_source(gen, r, zbuf, noisy)
            src = _clipped_row(srck, data, indices, indptr, rn2, X, idx, W, y, kind, lam, S,
                               want_scale, C, mask, want_mask, total, buf, r)
            _composed_row(KEY, src, z, noisy, recip, H, slots, K, r, W, U)

    return composed


_COMPOSED: dict = {}


def _composed_apply(key, *args):
    """Run the kernel of the structure ``key`` (made on first use, :func:`_make_composed`) on the
    arguments of :func:`_release_args`, then ``H``, the slots, the constants and ``U``."""
    kernel = _COMPOSED.get(key)
    if kernel is None:
        kernel = _COMPOSED[key] = _make_composed(f"{key}#{_compose.fingerprint(key)}")
    kernel(*args)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _apply_row(op, src, gen, noisy, recip, H, r, W, B, D):
    """Noise, DP²'s step ``op`` and the update of trial ``r``, coordinate by coordinate, on the
    clipped-sum row ``src`` (each operation as the chain's array expression, rounded once to the
    dtype: every operand is of the dtype, so Numba keeps float32 arithmetic in float32).  One loop
    per ``op`` (a branch inside the loop costs ~30%)."""
    d = W.shape[1]
    c = r if H.shape[1] > 1 else 0
    sd = H[H_STD, c]
    bb = H[H_B, c]
    nl = H[H_NEGLR, c]
    if op == OP_ACC_SGD:  # DP² SGD phase: G = G + g; w + g·(−η)
        for j in range(d):
            g = _noisy_mean(gen, W, j, noisy, sd, src[j], bb, recip)
            B[r, j] = B[r, j] + g
            W[r, j] = W[r, j] + g * nl
    elif op == OP_ACC:  # DP² extra query's side release: G = G + g
        for j in range(d):
            B[r, j] = B[r, j] + _noisy_mean(gen, W, j, noisy, sd, src[j], bb, recip)
    else:  # OP_DIV: DP² noise-first adaptive phase: (g / D)·(−η2)
        for j in range(d):
            g = _noisy_mean(gen, W, j, noisy, sd, src[j], bb, recip)
            W[r, j] = W[r, j] + (g / D[r, j]) * nl


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _release_apply(srck, data, indices, indptr, rn2, X, idx, W, y, kind, lam, S, want_scale, C,
                   mask, want_mask, total, buf, gen, zbuf, noisy, recip, H, op, B, D):
    """Every trial in order: its clipped sum (:func:`_clipped_row`), then :func:`_apply_row`.
    ``gen``: the run's Generator, or the step's ``(R, d)`` unit-noise array (the blocked layout;
    any array when ``noisy`` is false), or the Generator's state array (then ``zbuf``, of length
    ``d``, holds each trial's normals)."""
    R = W.shape[0]
    for r in range(R):
        z = _trial_source(gen, r, zbuf, noisy)
        src = _clipped_row(srck, data, indices, indptr, rn2, X, idx, W, y, kind, lam, S, want_scale,
                           C, mask, want_mask, total, buf, r)
        _apply_row(op, src, z, noisy, recip, H, r, W, B, D)


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _clipped_row(srck, data, indices, indptr, rn2, X, idx, W, y, kind, lam, S, want_scale, C, mask,
                 want_mask, total, buf, r):
    """Trial ``r``'s clipped sum: the engine's CSR or dense GLM trial body
    (:func:`dpsim.problems._glm_kernels._trial_row`) into ``buf`` (norms not kept), or the
    precomputed row ``total[r]`` (``srck``)."""
    if srck == SRC_CSR:
        _K._trial_row(None, data, indices, indptr, rn2, idx, W, y, kind, lam, S, want_scale, C,
                      mask, want_mask, buf, None, r)
        return buf
    if srck == SRC_DENSE:
        _K._trial_row(X, None, None, None, None, idx, W, y, kind, lam, S, want_scale, C, mask,
                      want_mask, buf, None, r)
        return buf
    return total[r]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _block_sum(a, lo, n):
    """A leaf of NumPy's pairwise summation (:func:`_row_sum`): ``n ≤ 128`` terms from ``lo``."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i]
        return res
    r0 = a[lo]
    r1 = a[lo + 1]
    r2 = a[lo + 2]
    r3 = a[lo + 3]
    r4 = a[lo + 4]
    r5 = a[lo + 5]
    r6 = a[lo + 6]
    r7 = a[lo + 7]
    m = n - n % 8
    i = 8
    while i < m:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _row_sum(a):
    """``np.sum(a)`` of a contiguous float64 row, bit for bit: NumPy's pairwise summation
    (``np.add.reduce`` over a contiguous axis) — below 8 terms in order; up to 128 with eight
    interleaved partial sums combined as ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))``,
    then the rest in order (:func:`_block_sum`); above, the two halves (the first ``n/2`` rounded
    down to a multiple of 8) summed apart and added — after NumPy's ``0.0`` start.  Written
    without recursion (Numba's cache cannot load a recursive function): an explicit stack walks
    the same tree in the same order.  ``tests/test_w_fast.py`` checks it against
    ``np.sum(x, axis=1)`` over many lengths and shapes, so a NumPy that sums otherwise fails
    there, not silently."""
    n = a.shape[0]
    if n <= 128:
        return 0.0 + _block_sum(a, 0, n)
    los = np.empty(128, dtype=np.int64)  # depth ≤ log2(n) + 1 < 64: room for two entries a level
    ns = np.empty(128, dtype=np.int64)
    done = np.empty(128, dtype=np.bool_)
    vals = np.empty(128)
    sp = 0
    vp = 0
    los[0] = 0
    ns[0] = n
    done[0] = False
    sp = 1
    while sp > 0:
        sp -= 1
        lo = los[sp]
        k = ns[sp]
        if k <= 128:
            vals[vp] = _block_sum(a, lo, k)
            vp += 1
        elif done[sp]:  # both halves summed: left + right
            vp -= 1
            vals[vp - 1] = vals[vp - 1] + vals[vp]
        else:
            k2 = k // 2
            k2 -= k2 % 8
            done[sp] = True  # revisit after the halves
            sp += 1
            los[sp], ns[sp], done[sp] = lo + k2, k - k2, False  # right, summed second
            sp += 1
            los[sp], ns[sp], done[sp] = lo, k2, False  # left, summed first
            sp += 1
    return 0.0 + vals[0]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _ellipsoid_apply(vals, cols, ptr, dense_d, y, kind, reg, W, idx, mask, use_mask, Amat, SA, ISA,
                     arow, const_a, total, lam, gen, zbuf, noisy, STD, recip, H, V, per_norm, sq):
    """PAGAN's step, every trial in order: its projected sum ``Σ_i π_A(g_i)`` into ``total[r]``
    (the privatizer's own kernel, :func:`dpsim.privacy._ellipsoid._glm_trial`, multipliers into
    ``lam[r]``), then per coordinate the chain's operations in its order: ``g = S/b``, ``g = g +
    z·std_j`` (``std`` row 0 or ``r`` of ``STD``), ``v = v + g·g``, ``D = max(√v, ε)``
    (NaN-propagating, as ``np.maximum``), ``w = w + (g/D)·(−η)``.  ``H``: the table's ``b`` (or
    ``1/b``, :func:`_noisy_mean`), ``−η`` and ``ε`` (row ``H_3``).  ``per_norm`` (PASAN): ``ĝ``
    is kept in ``total[r]`` and its squares in ``sq``, then ``v_r = v_r + Σ_j ĝ_j²`` (NumPy's
    row sum, :func:`_row_sum`), ``D = max(√v_r, ε)`` and ``w = w + (ĝ/D)·(−η)``."""
    R, d = W.shape
    for r in range(R):
        z = _trial_source(gen, r, zbuf, noisy)
        _E._glm_trial(r, vals, cols, ptr, dense_d, y, kind, reg, W, idx, mask, use_mask, Amat, SA,
                      ISA, arow, const_a, total, lam)
        c = r if H.shape[1] > 1 else 0
        bb = H[H_B, c]
        nl = H[H_NEGLR, c]
        e = H[H_3, c]
        cs = r if STD.shape[0] > 1 else 0
        if per_norm:
            for j in range(d):
                g = total[r, j] * bb if recip else total[r, j] / bb
                if noisy:
                    g = g + _normal_at(z, W, j) * STD[cs, j]
                total[r, j] = g
                sq[j] = g * g
            v = V[r, 0] + _row_sum(sq)
            V[r, 0] = v
            q = np.sqrt(v)
            den = q if (q > e or q != q) else e
            for j in range(d):
                W[r, j] = W[r, j] + (total[r, j] / den) * nl
        elif noisy:
            for j in range(d):
                g = total[r, j] * bb if recip else total[r, j] / bb
                g = g + _normal_at(z, W, j) * STD[cs, j]
                v = V[r, j] + g * g
                V[r, j] = v
                q = np.sqrt(v)
                den = q if (q > e or q != q) else e
                W[r, j] = W[r, j] + (g / den) * nl
        else:
            for j in range(d):
                g = total[r, j] * bb if recip else total[r, j] / bb
                v = V[r, j] + g * g
                V[r, j] = v
                q = np.sqrt(v)
                den = q if (q > e or q != q) else e
                W[r, j] = W[r, j] + (g / den) * nl


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _ime_square(s, bb, recip, f, noisy, z, W, j, k):
    """IME's second release of coordinate ``j``: ``u = (S/b)·f``, ``u·u + z·k`` (``z`` its normal,
    :func:`_normal_at`), or ``u·u`` without noise — ``ime_privatizer``'s element."""
    u = (s * bb if recip else s / bb) * f
    q = u * u
    if noisy:
        q = q + _normal_at(z, W, j) * k
    return q


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _ime_factor(s, bb, recip, cr, sqb, project):
    """IME's projection factor of one trial's clipped sum ``s`` (a row): ``C/‖s/b‖`` where
    ``‖s/b‖ > C`` (``‖·‖²`` NumPy's row sum, :func:`_row_sum`, through the row buffer ``sqb``),
    else 1; 1 without ``project``."""
    f = 1.0
    if project:
        for j in range(s.shape[0]):
            x = s[j] * bb if recip else s[j] / bb
            sqb[j] = x * x
        nrm = np.sqrt(_row_sum(sqb))
        if nrm > cr:
            f = cr / (nrm if nrm > 0 else 1.0)
    return f


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _ime_fused(srck, data, indices, indptr, rn2, X, idx, W, y, kind, lam, S, want_scale, C, mask,
               want_mask, total, buf, gen, zbuf, noisy, recip, H1, g1, A, B, gen2, zbuf2, noisy2,
               project, Cc, K, H, sqb, adam, add_eps, U):
    """IME's step in one pass, trial by trial: the clipped sum (:func:`_clipped_row`), the first release's ``g̃`` into the row ``g1`` (``gen``, ``zbuf``,
    ``noisy``: its noise source, :func:`_trial_source`), the factor ``f = C/‖ḡ‖`` where
    ``‖ḡ‖ > C`` with ``project`` (:func:`_ime_factor`), then per coordinate ``u = ḡ·f``,
    ``s̃ = u·u + z·k`` (``z`` the second release's normal from ``gen2``/``zbuf2`` when ``noisy2``,
    ``k = σ2·Δ₂`` row ``r`` or 0 of ``K``), AdaGrad (``v = v + s̃``, ``g̃/(√max(v, 0) + ε)``,
    ``H_3`` ε) or ``adam`` (the element of
    :func:`dpsim.optimizers.design_space._adam_moments_kernel`: ``H_1`` β1, ``H_2`` 1−β1,
    ``H_3`` β2, ``H_4`` 1−β2, ``H_5`` 1−β1ᵗ, ``H_6`` 1−β2ᵗ, ``H_9`` ε) and ``w = w + u·(−η)``
    — the chain's operations in its order, each rounded once (:func:`_ime_row`).

    The chain draws every trial's first-release normals before any second-release normal: when
    both releases are noisy, ``gen`` is the step's ``(R, d)`` array of first-release normals,
    drawn before the kernel (from the Generator's stream in C order, or the blocked layout's
    array), and ``gen2`` draws on; when the second release draws nothing, ``gen`` may be the
    Generator itself.  Trials are independent, so finishing trial ``r`` before the next one's
    clipped sum changes no number.  ``H1``: the first release's table, ``H``: the second's."""
    R, d = W.shape
    for r in range(R):
        z = _trial_source(gen, r, zbuf, noisy)
        src = _clipped_row(srck, data, indices, indptr, rn2, X, idx, W, y, kind, lam, S, want_scale,
                           C, mask, want_mask, total, buf, r)
        c1 = r if H1.shape[1] > 1 else 0
        sd = H1[H_STD, c1]
        b1 = H1[H_B, c1]
        for j in range(d):
            g1[j] = _unscale(_noisy_mean(z, W, j, noisy, sd, src[j], b1, recip), U, r, j)
        z2 = _trial_source(gen2, r, zbuf2, noisy2)
        c = r if H.shape[1] > 1 else 0
        bb = H[H_B, c]
        nl = H[H_NEGLR, c]
        zero = H[H_ZERO, c]
        kr = K[r if K.shape[0] > 1 else 0]
        f = _ime_factor(src, bb, recip, Cc[r if Cc.shape[0] > 1 else 0], sqb, project)
        # one loop per (recip, noisy2): the flags are constants in each inlined copy, so the
        # element loop carries no branch on them
        if recip:
            if noisy2:
                _ime_row(g1, src, W, A, B, r, H, c, bb, nl, zero, f, z2, kr, True, True, adam,
                         add_eps, U)
            else:
                _ime_row(g1, src, W, A, B, r, H, c, bb, nl, zero, f, z2, kr, True, False, adam,
                         add_eps, U)
        elif noisy2:
            _ime_row(g1, src, W, A, B, r, H, c, bb, nl, zero, f, z2, kr, False, True, adam,
                     add_eps, U)
        else:
            _ime_row(g1, src, W, A, B, r, H, c, bb, nl, zero, f, z2, kr, False, False, adam,
                     add_eps, U)


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _ime_row(G, S, W, A, B, r, H, c, bb, nl, zero, f, z, kr, recip, noisy, adam, add_eps, U):
    """:func:`_ime_fused`'s element loop for trial ``r`` (the moment recursion and the update);
    ``G`` and ``S`` the trial's rows of ``g̃`` and of the clipped sums."""
    d = W.shape[1]
    if adam:
        b1 = H[H_1, c]
        ob1 = H[H_2, c]
        b2 = H[H_3, c]
        ob2 = H[H_4, c]
        c1 = H[H_5, c]
        c2 = H[H_6, c]
        e = H[H_9, c]
        for j in range(d):
            q = _unscale_sq(_ime_square(S[j], bb, recip, f, noisy, z, W, j, kr), U, r, j)
            mj, vj, u = _adam_moments_element(G[j], q, A[r, j], B[r, j], b1, ob1, b2, ob2,
                                              c1, c2, e, add_eps)
            A[r, j] = mj
            B[r, j] = vj
            W[r, j] = W[r, j] + u * nl
    else:
        k = (H[H_3, c],)
        for j in range(d):
            q = _unscale_sq(_ime_square(S[j], bb, recip, f, noisy, z, W, j, kr), U, r, j)
            v, u = _ADAGRAD_STEP(G[j], q, A[r, j], k)
            A[r, j] = v
            W[r, j] = W[r, j] + u * nl


# ------------------------------------------------------------------------------------------------
# the driver


def _row(x, dt):
    """A hyperparameter as the chain uses it (a Python float, or an (R, 1) column of the run's
    dtype from ``StepContext.hp``) → a flat array of ``dt`` (a float rounded to ``dt`` as NumPy
    rounds a Python scalar operand, NEP 50)."""
    return np.asarray(x, dtype=dt).reshape(-1)


def _own(a, dt, ctx):
    """``a`` itself when the engine donates it (``StepContext.donate_state``: it keeps only what a
    step returns, so the step may update the array in place) and it is a writeable C-contiguous
    NumPy array of ``dt``; else a private copy.  (No ``(R, d)`` copy of the state or of the
    parameters is made at the first step: peak memory stays that of the chain.)"""
    if (getattr(ctx, "donate_state", False) and isinstance(a, np.ndarray) and a.dtype == dt
            and a.flags.c_contiguous and a.flags.writeable):
        return a
    return np.array(a, dtype=dt, order="C", copy=True)


def _table(dt, R, entries):
    """The (NH, R or 1) hyperparameter table from ``{row: value}``."""
    rows = {k: _row(v, dt) for k, v in entries.items()}
    width = R if any(a.shape[0] > 1 for a in rows.values()) else 1
    H = np.zeros((NH, width), dtype=dt)
    for k, a in rows.items():
        H[k, :] = a
    return H


def why_not(tx, backend, *, public_idx=None) -> str | None:
    """Why the transform ``tx`` cannot take the fused release on ``backend``, in one sentence, or
    ``None`` when it can (what :func:`plan` and :func:`dpsim.explain` both read).

    ``tx`` takes it when its pieces compose (:func:`dpsim.transforms._compose.composition`: a
    Gaussian privatizer — i.i.d. or correlated noise — or ``mean_gradient``, possibly behind
    scale-then-privatize, then pieces with elements) or when it carries a registered description
    (:class:`Delayed`, :class:`Prepared`, :class:`Ellipsoid`, :class:`Ime`).  ``public_idx``: the
    run's public split; only a :class:`Prepared` chain (which reads it) runs fused with one, and
    it always has one."""
    spec = _spec(tx)
    if isinstance(spec, str):
        return spec
    if public_idx is not None and not isinstance(spec, Prepared):
        return "the run has a public split, and only a public-data (Prepared) description reads one"
    if public_idx is None and isinstance(spec, Prepared):
        return "its description prepares public data, and the run has no public split"
    if _correlated(spec) and not isinstance(spec, (_compose.Composition, Ime)):
        return (f"its {type(spec).__name__} description draws correlated noise, which the fused "
                "release takes only for composed chains and IME descriptions")
    if backend.name != "numpy":  # either noise layout (dpsim.backend.NOISE_LAYOUTS) is handled
        return f"backend {backend.name!r}: the fused release runs on NumPy only"
    return None


def plan(problem, tx, backend, *, public_idx=None):
    """A :class:`FusedStep` for the transform ``tx`` on ``problem`` (a backend view), or ``None``
    when :func:`why_not` gives a reason (pieces that do not compose and no description, a public
    split it does not read, correlated noise it does not take, a backend other than NumPy)."""
    if why_not(tx, backend, public_idx=public_idx) is not None:
        return None
    return FusedStep(_spec(tx), problem, tx, public_idx)


def _correlated(spec) -> bool:
    """Whether a release of ``spec`` draws correlated noise (:attr:`Release.source`)."""
    return any(isinstance(v, Release) and v.source is not None
               for v in (getattr(spec, f.name) for f in fields(spec)))


class FusedStep:
    """One engine step of a composed or described chain (:func:`plan`):
    ``step(...) -> (params, state)``, updating ``params`` and the state's arrays in place (the
    engine keeps only what ``step`` returns, as with ``StepContext.donate_state``)."""

    def __init__(self, spec, problem, tx=None, public_idx=None):
        from ..problems.glm import _GLMProblem, _LINKS  # noqa: PLC0415 - problems is below

        self.spec = spec
        self.problem = problem
        self.tx = tx
        self.public_idx = public_idx
        glm = (isinstance(problem, _GLMProblem) and problem.backend_name == "numpy"
               and type(problem).clipped_grad_sum is _GLMProblem.clipped_grad_sum
               and type(problem)._fast_clipped_grad_sum is _GLMProblem._fast_clipped_grad_sum)
        self.srck = SRC_TOTAL
        e1 = np.zeros(1)
        self.data, self.indices, self.indptr, self.rn2, self.X, self.y = (
            e1, np.zeros(1, dtype=np.int32), np.zeros(2, dtype=np.int32), e1, np.zeros((1, 1)), e1)
        self.kind, self.lam = 0, 0.0
        if glm:
            X = problem.X
            self.kind, self.lam = _LINKS.index(problem.link), float(problem.reg)
            self.rn2, self.y = problem._rn2, problem.y
            if problem.sparse:
                self.srck = SRC_CSR
                self.data, self.indices, self.indptr = X.data, X.indices, X.indptr
            else:
                self.srck = SRC_DENSE
                self.X = X
        self.W = None
        self.A = self.B = None
        self.buf = None
        self._z = None  # the row of normals drawn inline (_trial_source)
        self._static: dict = {}
        self._scale = None  # (v, s) of DP²'s delayed scale
        self._s = None  # scale-then-privatize's s, recomputed each step (_stp_scale)
        self._den = None  # (v, D) of DP²'s delayed denominator
        self._total = None  # PAGAN's projected sums (Ellipsoid)
        self._sq = None  # PASAN's row of squares
        self._ime_bufs = None  # IME's rows of g̃ and of squares
        self._z1 = None  # IME's first-release normals (R, d), when drawn before its pass
        self._slots: dict = {}  # (piece, field) -> the state array a composed step updates

    # -- pieces ---------------------------------------------------------------------------------
    def _adopt(self, params, ctx):
        """The parameter array to update in place: the one returned by the last step, or a new
        one (the first step; a projection's output) taken over (:func:`_own`)."""
        if params is not self.W:
            self.W = _own(params, params.dtype, ctx)
            self.buf = np.empty(self.W.shape[1], dtype=self.W.dtype)
        return self.W

    def _release(self, rel, W, idx, mask, ctx, S, H, op, B, D):
        """One release of ``rel`` on the batch (scaled by ``S`` unless ``None``) and DP²'s step
        ``op`` (one kernel call, :func:`_release_apply`)."""
        args, z = self._release_args(rel, W, idx, mask, ctx, S)
        _release_apply(*args, H, op, B if B is not None else self._dummy(W),
                       D if D is not None else self._dummy(W))
        self._store_draws(z, ctx)

    def _release_composed(self, key, rel, W, idx, mask, ctx, S, slots, K, U=None, z=None):
        """One release of ``rel`` on the batch (scaled by ``S`` unless ``None``; divided by ``U``
        unless ``None``), the elements of the structure ``key`` on ``slots`` with the constants
        ``K``, and the update, in one kernel call (:func:`_composed_apply`); ``z``: the step's unit
        noise drawn already (:meth:`_correlated_noise`), else drawn as :meth:`_noise` says."""
        H = self._static.get(("release", id(rel)))
        if H is None:
            H = self._static[("release", id(rel))] = _table(W.dtype, W.shape[0],
                                                        self._base(rel, None, ctx, W.dtype))
        args, z = self._release_args(rel, W, idx, mask, ctx, S, z)
        _composed_apply(key, *args, H, slots, K, U)
        self._store_draws(z, ctx)

    def _release_step(self, rel, neglr, W, idx, mask, ctx, S):
        """A release of ``rel`` (of the batch scaled by ``S`` unless ``None``) taken as the step
        with the learning-rate factor ``neglr``: the structure ``"scale"``."""
        K = self._static.get(("scale", id(neglr)))
        if K is None:
            K = self._static[("scale", id(neglr))] = table((ctx.hp(neglr),), W.dtype)
        self._release_composed("scale", rel, W, idx, mask, ctx, S, (), K)

    @staticmethod
    def _store_draws(z, ctx):
        """After a kernel that drew its normals inline on the Generator's state array ``z``, move
        the Generator on to that state."""
        if isinstance(z, np.ndarray) and z.dtype == np.uint64:
            _bitgen.store_state(ctx.backend._gen, z)

    def _release_args(self, rel, W, idx, mask, ctx, S, z=None):
        """The leading arguments of :func:`_release_apply` (and :func:`_ime_fused`) for one release
        of ``rel`` on the batch, through ``recip``; and the release's noise source (``z``: a
        state array whose Generator the caller moves on after the kernel; given: drawn already)."""
        R = W.shape[0]
        dt = W.dtype
        if rel.clip is None:
            clip_arg = None
        else:
            clip_arg = rel.clip if isinstance(rel.clip, float) else ctx.hp_vec(rel.clip)
        total = self.buf.reshape(1, -1)  # unused unless srck == SRC_TOTAL
        want_scale = S is not None
        Sk = W if S is None else np.ascontiguousarray(S, dtype=dt)
        want_mask = mask is not None
        M = _K._NO_MASK if mask is None else np.ascontiguousarray(mask, dtype=np.bool_)
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        if self.srck == SRC_TOTAL:
            from .base import Batch  # noqa: PLC0415

            batch = Batch(self.problem, W, idx, mask, ctx.batch_size)
            total = np.ascontiguousarray(batch.clipped_sum(clip_arg, scale=S), dtype=dt)
            C = np.zeros(1)
        else:
            from ..problems.glm import _clip_per_trial  # noqa: PLC0415

            C = np.ascontiguousarray(_clip_per_trial(clip_arg, R), dtype=np.float64)
        if z is None:
            z = self._noise(rel.noisy, W, ctx)
        return ((self.srck, self.data, self.indices, self.indptr, self.rn2, self.X, idx, W, self.y,
                 self.kind, self.lam, Sk, want_scale, C, M, want_mask, total, self.buf, z,
                 self._zbuf(z, W), rel.noisy, self._recip(ctx)), z)

    @staticmethod
    def _noise(noisy, W, ctx):
        """Where the release's normals come from: the run's Generator (stream layout: drawn in the
        kernel, in C order); on the blocked layout the step's ``(R, d)`` unit-noise array, drawn
        here exactly as the chain's :func:`dpsim.privacy.noise.add_noise` draws it (one
        ``backend.normal(shape)`` per noisy release, so the block streams advance as in the chain
        and the thread pool prepares the next step's noise while this step's clipped sums run);
        no draw (``W`` as a placeholder the kernel never reads) for a noiseless release.  On the
        stream layout a float64 release of at least :data:`INLINE_NORMALS_MIN` normals draws
        them with :mod:`dpsim._bitgen` on a copy of the Generator's PCG64 state, written back
        after the kernel (the same numbers and the same final state; reading and writing the
        state costs ~8 µs, which the faster draws repay from a few thousand normals on)."""
        be = ctx.backend
        if be.noise_layout == "stream":
            gen = be._gen
            if (noisy and W.dtype == np.float64 and W.size >= INLINE_NORMALS_MIN
                    and _bitgen.supports(gen)):
                return _bitgen.state_of(gen)  # drawn inline, stored back after the kernel
            return gen
        if not noisy:
            return W
        z = be.normal(W.shape)
        if not (isinstance(z, np.ndarray) and z.dtype == W.dtype and z.flags.c_contiguous):
            z = np.ascontiguousarray(z, dtype=W.dtype)  # pragma: no cover - the backend's own dtype
        return z

    def _zbuf(self, z, W):
        """The row buffer of the inlined draws (a state array ``z``); else a placeholder."""
        if not (isinstance(z, np.ndarray) and z.dtype == np.uint64):
            return self.buf
        if self._z is None or self._z.shape[0] != W.shape[1]:
            self._z = np.empty(W.shape[1], dtype=np.float64)
        return self._z

    @staticmethod
    def _dummy(W):
        return np.zeros((1, 1), dtype=W.dtype)

    def _base(self, rel, neglr, ctx, dt):
        """The table entries every release has: noise std, b, the learning-rate factor (none for
        ``neglr=None``), zero."""
        std = 0.0 if not rel.noisy else ctx.hp(rel.std)
        b = float(ctx.batch_size)
        ent = {H_STD: std, H_B: 1.0 / b if self._recip(ctx) else b, H_ZERO: 0.0}
        if neglr is not None:
            ent[H_NEGLR] = ctx.hp(neglr)
        return ent

    @staticmethod
    def _recip(ctx):
        """``b`` a power of two: the kernel multiplies by the exact ``1/b`` (:func:`_noisy_mean`)."""
        b = int(ctx.batch_size)
        return 0 < b < 2 ** 60 and b & (b - 1) == 0

    def _static_table(self, key, rel, neglr, ctx, dt, R, extra=None):
        H = self._static.get(key)
        if H is None:
            ent = self._base(rel, neglr, ctx, dt)
            ent.update(extra or {})
            H = self._static[key] = _table(dt, R, ent)
        return H

    # -- one step -------------------------------------------------------------------------------
    def step(self, params, idx, mask, state, ctx):
        W = self._adopt(params, ctx)
        if isinstance(self.spec, _compose.Composition):
            return W, self._composed(W, idx, mask, state, ctx)
        if isinstance(self.spec, Prepared):
            return self._prepared(W, idx, mask, state, ctx)
        if isinstance(self.spec, Ellipsoid):
            return self._ellipsoid(W, idx, mask, state, ctx)
        if isinstance(self.spec, Ime):
            return self._ime(W, idx, mask, state, ctx)
        return W, self._delayed(W, idx, mask, state, ctx)

    def _prepared(self, W, idx, mask, state, ctx):
        """The optimizer's own first part (:class:`Prepared`), then the scaled release and the
        learning rate in one kernel call; a step without a fast first part runs the chain."""
        from .base import Batch  # noqa: PLC0415

        sp = self.spec
        batch = Batch(self.problem, W, idx, mask, ctx.batch_size, self.public_idx)
        out = sp.prepare(batch, state, W, ctx)
        if out is None:
            updates, state = self.tx.update(batch, state, W, ctx)
            return W + updates, state
        state, s = out
        self._release_step(sp.release, sp.neglr, W, idx, mask, ctx, s)
        return W, state

    def _ellipsoid(self, W, idx, mask, state, ctx):
        """PAGAN's or PASAN's step (:class:`Ellipsoid`): the privatizer's preparation, then
        projected sums, noise, AdaGrad with the max guard (per coordinate, or per trial on
        ``||ĝ||²``), the learning rate and the update in one kernel call;
        a step without a GLM form (or not float64) runs the chain."""
        from .base import Batch  # noqa: PLC0415
        from .preconditioners import PreconditionState  # noqa: PLC0415

        sp = self.spec
        batch = Batch(self.problem, W, idx, mask, ctx.batch_size)
        out = sp.glm_release(batch, state["privatizer"], W, ctx) if W.dtype == np.float64 else None
        if out is None:
            updates, state = self.tx.update(batch, state, W, ctx)
            return W + updates, state
        pst, rows, kb, std = out
        state = dict(state)
        v = state["preconditioner"].v
        if self.A is None or v is not self.A:
            self.A = _own(v, W.dtype, ctx)
        noisy = std is not None
        STD = np.ascontiguousarray(std, dtype=np.float64) if noisy else self._dummy(W)
        H = self._static.get("ellipsoid")
        if H is None:
            b = float(ctx.batch_size)
            H = self._static["ellipsoid"] = _table(W.dtype, W.shape[0], {
                H_B: 1.0 / b if self._recip(ctx) else b, H_NEGLR: ctx.hp(sp.neglr),
                H_3: ctx.hp(sp.eps)})
        R, d = W.shape
        if self._total is None or self._total.shape != (R, d):
            self._total = np.empty((R, d))
        lam = np.empty(kb[0].shape)
        z = self._noise(noisy, W, ctx)
        if self._sq is None or self._sq.shape[0] != d:
            self._sq = np.empty(d)
        _ellipsoid_apply(*rows, W, *kb, self._total, lam, z, self._zbuf(z, W), noisy, STD,
                         self._recip(ctx), H, self.A, sp.per_norm, self._sq)
        self._store_draws(z, ctx)
        M = None if kb[2] is False else kb[1]
        state["privatizer"] = pst._replace(projected=_E.projected_fraction(lam, M), noise=None)
        state["preconditioner"] = PreconditionState(v=self.A)
        return W, state

    def _ime(self, W, idx, mask, state, ctx):
        """IME's step (:class:`Ime`) in one kernel call, trial by trial (:func:`_ime_fused`): the
        first release, the second, the moment recursion and the update; the noise of each
        release drawn as the chain draws it — all of the first release's normals (an ``(R, d)``
        array drawn before the kernel, on the stream layout from the run's Generator in C order)
        before the second's, unless the second draws nothing (``σ2 = 0``: the noiseless oracles,
        or a zero noise multiplier), when the first release draws inside the kernel.  Not
        float64: the chain runs."""
        from .base import Batch  # noqa: PLC0415
        from .preconditioners import AdamState, PreconditionState  # noqa: PLC0415

        sp = self.spec
        if W.dtype != np.float64:
            batch = Batch(self.problem, W, idx, mask, ctx.batch_size)
            updates, state = self.tx.update(batch, state, W, ctx)
            return W + updates, state
        R, d = W.shape
        if self._ime_bufs is None or self._ime_bufs[0].shape[0] != d:
            self._ime_bufs = (np.empty(d), np.empty(d))  # g̃'s row, a row of squares
        g1, sqb = self._ime_bufs
        noisy2 = not is_zero(sp.s2)  # 0 for the noiseless oracles: the second release draws nothing
        H1 = self._static_table("ime1", sp.release, sp.neglr, ctx, W.dtype, R)
        # scale-then-privatize: s from the rule's v before this step (None for a plain chain)
        s = None if sp.stp_eps is None else self._stp_scale(state["preconditioner"].v, ctx, W.dtype)
        state = dict(state)
        z1 = z2 = None  # the first release draws inside the kernel, unless:
        if sp.release.source is not None:  # correlated noise: both releases' arrays, in order
            z1, z2 = self._correlated_pair(sp.release, noisy2, W, state, ctx)
        elif noisy2 and sp.release.noisy:  # every first-release normal before the second's
            be = ctx.backend
            if be.noise_layout == "stream":
                if self._z1 is None or self._z1.shape != (R, d):
                    self._z1 = np.empty((R, d))
                z1 = self._z1
                _bitgen.fill_normals(be._gen, z1)  # gen.standard_normal(out=z1)'s numbers
            else:
                z1 = self._noise(True, W, ctx)  # the blocked layout's array, as the chain's
        args, z = self._release_args(sp.release, W, idx, mask, ctx, s, z=z1)
        # the second release's constants, with the privatizer's expressions
        b = float(ctx.batch_size)
        c = ctx.hp(sp.clip)
        project = ctx.sampling != "fixed" and not sp.noiseless
        if project:
            sens2 = c ** 2 * (2.0 / b)
        else:
            sens2 = c ** 2 * (2.0 * b - 1.0) / (b * b)
        K = _row(ctx.hp(sp.s2) * sens2 if noisy2 else 0.0, np.float64)
        Cc = _row(c, np.float64)
        st = state["preconditioner"]
        ent = {H_B: 1.0 / b if self._recip(ctx) else b, H_NEGLR: ctx.hp(sp.neglr), H_ZERO: 0.0}
        adam = sp.rule == "adam"
        add_eps = True
        if adam:
            if self.A is None or st.m is not self.A or st.v is not self.B:
                self.A = _own(st.m, W.dtype, ctx)
                self.B = _own(st.v, W.dtype, ctx)
            b1, b2 = ctx.hp(sp.beta1), ctx.hp(sp.beta2)
            t = st.count + 1
            e = ctx.hp(sp.eps)
            add_eps = not (isinstance(e, float) and e == 0.0)
            ent.update({H_1: b1, H_2: 1.0 - b1, H_3: b2, H_4: 1.0 - b2, H_5: _P.bias_correction(b1, t),
                        H_6: _P.bias_correction(b2, t), H_9: e if add_eps else 0.0})
            H = _table(W.dtype, R, ent)
        else:
            if self.A is None or st.v is not self.A:
                self.A = _own(st.v, W.dtype, ctx)
            H = self._static.get("ime2")
            if H is None:
                ent[H_3] = ctx.hp(sp.eps)
                H = self._static["ime2"] = _table(W.dtype, R, ent)
        if z2 is None:
            z2 = self._noise(noisy2, W, ctx)  # after the first release's draws
        _ime_fused(*args, H1, g1, self.A, self.B if adam else self._dummy(W), z2, self._zbuf(z2, W),
                   noisy2, project, Cc, K, H, sqb, adam, add_eps, s)
        for zz in (z, z2):  # the inlined draws: move the Generator on
            self._store_draws(zz, ctx)
        if adam:
            state["preconditioner"] = AdamState(m=self.A, v=self.B, count=t)
        else:
            state["preconditioner"] = PreconditionState(v=self.A)
        return W, state

    @staticmethod
    def _draw_correlated(rel, state, field, W, ctx, piece="privatizer"):
        """One release's unit noise ``(R, d)`` drawn through its noise source
        (:attr:`Release.source`) on the privatizer's stream state ``state[piece].<field>``,
        which ``state`` (the step's copy) then holds moved on: the draw of
        :func:`dpsim.privacy.noise.add_noise` in the privatizer, so the same array and the same
        stream state as the chain."""
        pst = state[piece]
        u, ns = rel.source.draw(getattr(pst, field), ctx, W.shape)
        state[piece] = pst._replace(**{field: ns})
        if not (isinstance(u, np.ndarray) and u.dtype == W.dtype and u.flags.c_contiguous):
            u = np.ascontiguousarray(u, dtype=W.dtype)  # pragma: no cover - the backend's own dtype
        return u

    def _correlated_noise(self, rel, W, state, ctx, piece):
        """A composed step's unit noise of a correlated release (:meth:`_draw_correlated`, on the
        state of the privatizer ``piece``); ``None`` for i.i.d. noise (drawn by the kernel or
        :meth:`_noise`) or a noiseless release (the privatizer draws nothing then either)."""
        if rel.source is None or not rel.noisy:
            return None
        return self._draw_correlated(rel, state, "noise", W, ctx, piece)

    def _correlated_pair(self, rel, noisy2, W, state, ctx):
        """An :class:`Ime` step's two unit-noise arrays of a correlated release, drawn as its
        privatizer draws them (:meth:`_draw_correlated`): the first release's on ``noise1`` (a
        noiseless oracle's on ``noise``), then, unless the second release draws nothing, the
        second's on ``noise2``; ``None`` for a release that draws nothing."""
        first = "noise1" if hasattr(state["privatizer"], "noise1") else "noise"
        z1 = self._draw_correlated(rel, state, first, W, ctx) if rel.noisy else None
        z2 = self._draw_correlated(rel, state, "noise2", W, ctx) if noisy2 else None
        return z1, z2

    def _composed(self, W, idx, mask, state, ctx):
        """A composed chain's step (:class:`~dpsim.transforms._compose.Composition`): its release
        (the correlated noise drawn first, on the privatizer's stream state, as the privatizer
        draws it; under scale-then-privatize ``s`` from the piece's ``v`` before the step), every
        element and the update in one kernel call, on the pieces' state arrays in place; each
        piece's state then advanced by its element (e.g. Adam's count)."""
        comp = self.spec
        dt = W.dtype
        state = dict(state)
        z = self._correlated_noise(comp.release, W, state, ctx, comp.release_piece)
        slots = []
        for name, el in comp.pieces:
            st = state[name]
            for field in el.slots:
                a = getattr(st, field)
                own = self._slots.get((name, field))
                if own is None or a is not own:
                    own = _own(a, dt, ctx)
                    if any(own is b for b in slots):  # one array in two slots: keep them apart
                        own = np.array(a, dtype=dt, order="C", copy=True)
                    self._slots[(name, field)] = own
                slots.append(own)
        s = None
        if comp.stp_eps is not None:  # from v before this step's update
            s = self._stp_scale(self._slots[(comp.stp_piece, "v")], ctx, dt)
        K = self._static.get("consts")
        if K is None:
            consts = []
            for name, el in comp.pieces:
                consts.extend(el.consts(state[name], ctx))
            K = table(consts, dt)
            if not any(el.varying for _, el in comp.pieces):
                self._static["consts"] = K
        slots = tuple(slots)
        self._release_composed(comp.key, comp.release, W, idx, mask, ctx, s, slots, K, U=s, z=z)
        i = 0
        for name, el in comp.pieces:
            n = len(el.slots)
            state[name] = el.advance(state[name], slots[i:i + n])
            i += n
        return state

    def _stp_scale(self, v, ctx, dt):
        """Scale-then-privatize's ``s = 1/(√max(v, 0) + ε_s)``, the expression of
        :func:`dpsim.transforms.combinators.scale_then_privatize` (``ε_s`` the spec's
        ``stp_eps``), or ``None`` for a plain post-processing chain.  Float64: one pass of :func:`_inverse_root` into a buffer kept
        across steps (recomputed each step before the kernel updates ``v`` in place; the four
        NumPy passes with their temporaries cost ~4 ms a step at R·d = 6.4·10⁵); otherwise the
        NumPy expression."""
        if self.spec.stp_eps is None:
            return None
        if self._s is None or self._s.shape != v.shape:
            self._s = np.empty(v.shape)
        return _inverse_root_of(v, ctx.hp(self.spec.stp_eps), dt, self._s)

    def _delayed(self, W, idx, mask, state, ctx):
        from .preconditioners import DelayedState  # noqa: PLC0415

        sp = self.spec
        dt, R = W.dtype, W.shape[0]
        state = dict(state)
        q = state["preconditioner"]
        if self.B is None or q.G is not self.B:  # G is updated in place: own it
            self.B = _own(q.G, dt, ctx)
            q = state["preconditioner"] = DelayedState(q.v, self.B)
        if sp.order == "extra_query":
            p = (ctx.t - 1) % sp.s1
            if p == 0:  # release 1 into G, refresh, step with it (η1)
                H = self._static_table("sgd", sp.rel1, sp.neglr, ctx, dt, R)
                self._release(sp.rel1, W, idx, mask, ctx, None, H, OP_ACC_SGD, self.B, None)
                q = sp.refresh(DelayedState(q.v, self.B), ctx)
                self.B = _own(q.G, dt, ctx)
                state["preconditioner"] = DelayedState(q.v, self.B)
                return state
            # side release 1 into G (no step), then the preconditioned release 2 (η2)
            H = self._static_table("side", sp.rel1, sp.neglr, ctx, dt, R)
            self._release(sp.rel1, W, idx, mask, ctx, None, H, OP_ACC, self.B, None)
            self._release_step(sp.rel2, sp.neglr2, W, idx, mask, ctx, self._delayed_scale(q.v, ctx))
            return state
        p = (ctx.t - 1) % (sp.s1 + sp.s2)
        if p < sp.s1:  # SGD phase: G ← G + g̃, w ← w − η1 g̃
            H = self._static_table("sgd", sp.rel1, sp.neglr, ctx, dt, R)
            self._release(sp.rel1, W, idx, mask, ctx, None, H, OP_ACC_SGD, self.B, None)
            return state
        if p == sp.s1:  # the switch: refresh v from G, G ← 0 (the chain's on_switch)
            q = sp.refresh(q, ctx)
            self.B = _own(q.G, dt, ctx)
            q = state["preconditioner"] = DelayedState(q.v, self.B)
        if sp.order == "noise_first":  # release, then divide by D(v)
            H = self._static_table("adaptive", sp.rel2, sp.neglr2, ctx, dt, R)
            self._release(sp.rel2, W, idx, mask, ctx, None, H, OP_DIV, None,
                          self._delayed_den(q.v, ctx))
        else:  # release of the batch scaled by 1/D(v)
            self._release_step(sp.rel2, sp.neglr2, W, idx, mask, ctx, self._delayed_scale(q.v, ctx))
        return state

    def _delayed_scale(self, v, ctx):
        """``s = 1/(√max(v, 0) + ε)``, the expression of :func:`dpsim.optimizers.dp2._delayed_scale_release`
        (and of ``scale_then_privatize``), recomputed whenever ``v`` is another array (a refresh)."""
        if self._scale is None or self._scale[0] is not v:
            self._scale = (v, _inverse_root_of(v, ctx.hp(self.spec.eps), v.dtype, np.empty(v.shape)))
        return self._scale[1]

    def _delayed_den(self, v, ctx):
        """``D(v)`` of :func:`dpsim.transforms.preconditioners.apply_delayed`, per refresh."""
        if self._den is None or self._den[0] is not v:
            self._den = (v, np.ascontiguousarray(self.spec.P.denominator(v, ctx)))
        return self._den[1]
