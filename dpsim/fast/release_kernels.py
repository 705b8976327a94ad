"""The kernels of the per-step fused release (:mod:`dpsim.fast.release`): one pass per trial.

Per trial: its clipped sum (the engine's CSR or dense GLM trial body into one row buffer, or the
problem's own clipped sum computed first), the noise drawn in the chain's C order (the run's
Generator, NumPy's ziggurat inlined on its state array, or the step's noise array drawn up front
on the blocked layout), the rule, and ``w ← w + u``.  A composed chain's rule is its elements
(:func:`_composed_row`: :func:`dpsim.fast.compose.body` of the literal structure key); the other
shapes (:func:`dpsim.fast.compose.spec`) have their kernels here (DP²'s steps, :func:`_apply_row`; PAGAN/PASAN,
:func:`_ellipsoid_apply`; IME, :func:`_ime_fused`).  Every operation is the chain's, in the
chain's order, rounded once to the run's dtype (no fast-math), so the results are the chain's
bits (``tests/fast/test_w_fast.py``).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.extending import overload
from numba.np.unsafe.ndarray import to_fixed_tuple

from .. import _bitgen
from ..privacy import _ellipsoid as _E
from ..problems import _glm_kernels as _K
from ..transforms.preconditioners import _ADAGRAD_STEP, _adam_moments_element
from . import compose as _compose

__all__: list[str] = []  # private: the driver (dpsim.fast.release) imports what it calls


def _row(x, dt):
    """A hyperparameter as the chain uses it (a Python float, or an (R, 1) column of the run's
    dtype from ``StepContext.hp``) → a flat array of ``dt`` (a float rounded to ``dt`` as NumPy
    rounds a Python scalar operand, NEP 50)."""
    return np.asarray(x, dtype=dt).reshape(-1)


#
# The overloads below are inlined into their callers in Numba's IR (``inline="always"``): Numba
# optimizes each function, loop vectorizer included, before it links the functions it calls, so a
# call left for LLVM to inline keeps the element loops around it scalar (a row with
# ``_normal_at`` a call ran about half as fast as with it inlined).

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
    (NumPy's float64 ziggurat inlined: the same numbers in the same order, faster than a call
    through the Generator per normal; a loop of its own, since drawn inside the row's
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
#: moves time only (the state's round trip, a fixed cost, against the time saved a normal).
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
    (:func:`dpsim.fast.compose.body`): per coordinate the release ``g̃ = (z·σC + S)/b``
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
    (:func:`dpsim.fast.compose.fingerprint`) changes with the rules' source files."""

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
    per ``op`` (a branch inside the loop keeps it from vectorizing)."""
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
    the same tree in the same order.  ``tests/fast/test_w_fast.py`` checks it against
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
