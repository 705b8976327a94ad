"""NumPy's PCG64 bit generator and the four distributions the fused kernel draws, inlined in Numba.

Layer 0 (beside :mod:`dpsim._sampling_kernels`; imports only NumPy and Numba).

Why
---
Numba compiles ``np.random.Generator`` methods by calling the bit generator through its C
function pointers (``bitgen.next_uint64(state)``, an indirect call per draw that LLVM cannot
inline), and its scalar ``integers`` allocates a one-element array per draw.  In the small-d
fused kernel (:mod:`dpsim.fast.block`) that costs as much as the rest of a trial-step (measured:
docs/performance.md).  Here the
generator's state is an explicit array and every draw is ordinary inlinable code, *computing the
same numbers as NumPy* — so a run that draws here and writes the state back into the
``Generator`` leaves it exactly where NumPy's own draws would have.

The state (:func:`state_of`, :func:`store_state`)
------------------------------------------------
A ``uint64`` array of :data:`WORDS` = 6 words ``[s_hi, s_lo, c_hi, c_lo, has_uint32, uinteger]``:
the 128-bit LCG state ``s`` and increment ``c`` of ``numpy.random.PCG64`` (``bit_generator.state``
``["state"]["state"]`` and ``["inc"]``) and its buffered half word for 32-bit draws.

The algorithms (each reproduces NumPy's C code, ``numpy/random/src``; NumPy ≥ 1.17, PCG64 only)
---------------------------------------------------------------------------------------------
* ``next_uint64`` (PCG-XSL-RR 128/64, O'Neill 2014, ``pcg64.h``): advance first,
  ``s ← s·M + c mod 2^128`` with ``M = 0x2360ed051fc65da4_4385df649fccf645``, then output
  ``rotr64(s_hi ⊕ s_lo, s_hi >> 58)``.  The 128-bit product is LLVM ``i128`` arithmetic (an
  intrinsic), so it is exact modular arithmetic, not an emulation.
* ``next_uint32``: the low half of a fresh 64-bit word, its high half buffered for the next call
  (``has_uint32``/``uinteger``).  ``next_double`` = ``(next_uint64 >> 11) · 2^-53`` (does not
  touch the buffer).  ``random()`` is ``next_double``.
* ``standard_normal``: NumPy's 256-layer ziggurat (``random_standard_normal``) with its tables
  (``wi``, ``ki``, ``fi``, ``r``; taken from Numba's copy ``numba.np.random._constants``, the same
  constants as NumPy's ``ziggurat_constants.h``).  One 64-bit word per accepted fast-path draw:
  8 bits of layer, 1 sign bit, 52 bits of abscissa; the wedge and tail tests draw doubles.
* ``integers(low, high)`` (int64, ``high`` exclusive): ``off + bounded(rng)`` with
  ``rng = high − 1 − low``: ``rng = 0`` → no draw; ``rng < 2^32 − 1`` → Lemire's multiply-shift
  rejection on *buffered* 32-bit draws (``buffered_bounded_lemire_uint32``); ``rng = 2^32 − 1``
  → one 32-bit draw; larger ranges → Lemire on 64-bit words (``bounded_lemire_uint64``, the
  128-bit product high word), ``rng = 2^64 − 1`` → one word.
* ``binomial(n, p)`` (``random_binomial``): ``0`` when ``n = 0`` or ``p = 0``; with
  ``r = min(p, 1 − p)``, inversion when ``n·r ≤ 30`` (``random_binomial_inversion``), else
  Kachitvichyanukul & Schmeiser's BTPE (Comm. ACM 31(2), 1988; ``random_binomial_btpe``,
  including the Stirling squeeze constants of the NumPy version installed: NumPy 2.5 corrected
  them, numpy#31238); ``n − X`` when ``p > 1/2``.  NumPy keeps the set-up quantities of the last
  ``(n, p)`` in the ``Generator`` (``binomial_t``) only as a cache: they are a pure function of
  ``(n, p)``, so computing them once per ``(n, p)`` (:func:`binomial_setup`) and reusing them gives
  the same draws.  Likewise BTPE's explicit ratios ``f(y)/f(m)`` for ``|y − m| ≤ 20`` (a loop of
  up to ``|y − m|`` divisions at each draw that reaches that test) are tabulated once per ``(n, p)``
  by the same loop (:func:`binomial_table`): a table entry has the bits the loop would produce.

Exactness is checked against NumPy itself (``tests/core/test_bitgen.py``: values and the
``Generator``'s final state, many seeds, every branch, interleaved draws, buffered half words).

``draw_*`` dispatch on the generator argument at compile time: a NumPy ``Generator`` (its
Numba-compiled methods: the reference path the state-array path is tested against) or a state
array (the inlined path), so one kernel source serves both.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types
from numba.extending import overload

try:  # Numba's copy of NumPy's ziggurat tables (ziggurat_constants.h)
    from numba.np.random._constants import (fi_double as _FI, ki_double as _KI, wi_double as _WI,
                                            ziggurat_nor_inv_r as _ZIG_INV_R,
                                            ziggurat_nor_r as _ZIG_R)
except ImportError:  # pragma: no cover - exercised only on a Numba without the tables
    _FI = _KI = _WI = None
    _ZIG_R = _ZIG_INV_R = None

__all__ = ["WORDS", "state_of", "store_state", "supports", "next_uint64", "next_uint32",
           "next_double", "standard_normal", "fill_standard_normal", "fill_normals", "integers",
           "binomial_setup", "binomial_table", "binomial",
           "draw_double", "draw_normal", "draw_integers", "draw_binomial"]

WORDS = 6
_M64 = (1 << 64) - 1
#: PCG's default 128-bit multiplier (PCG_DEFAULT_MULTIPLIER_128 of pcg64.h).
MULT = (0x2360ED051FC65DA4 << 64) | 0x4385DF649FCCF645
_MULT_HI = np.uint64(MULT >> 64)
_MULT_LO = np.uint64(MULT & _M64)

_NP25 = tuple(int(x) for x in np.__version__.split(".")[:2]) >= (2, 5)

if _WI is not None:
    _WI = np.ascontiguousarray(_WI, dtype=np.float64)
    _KI = np.ascontiguousarray(_KI, dtype=np.uint64)
    _FI = np.ascontiguousarray(_FI, dtype=np.float64)
    _ZIG_R = float(_ZIG_R)
    _ZIG_INV_R = float(_ZIG_INV_R)


def supports(gen) -> bool:
    """True when ``gen`` is a NumPy ``Generator`` on a ``PCG64`` bit generator (what this module
    reproduces) and the ziggurat tables are available."""
    return (isinstance(gen, np.random.Generator) and type(gen.bit_generator) is np.random.PCG64
            and _WI is not None)


def state_of(gen) -> np.ndarray:
    """The 6-word state array of a ``Generator(PCG64)`` (a copy: draws on it do not move ``gen``
    until :func:`store_state`)."""
    if not supports(gen):
        raise TypeError(f"dpsim._bitgen reproduces numpy.random.Generator(PCG64) only, got "
                        f"{type(getattr(gen, 'bit_generator', gen)).__name__}")
    st = gen.bit_generator.state
    s, c = int(st["state"]["state"]), int(st["state"]["inc"])
    return np.array([s >> 64, s & _M64, c >> 64, c & _M64, int(st["has_uint32"]),
                     int(st["uinteger"])], dtype=np.uint64)


def store_state(gen, arr) -> None:
    """Set ``gen``'s bit generator to the state array ``arr`` (after draws on it)."""
    a = [int(x) for x in np.asarray(arr, dtype=np.uint64)]
    gen.bit_generator.state = {"bit_generator": "PCG64",
                               "state": {"state": (a[0] << 64) | a[1], "inc": (a[2] << 64) | a[3]},
                               "has_uint32": a[4], "uinteger": a[5]}


# ------------------------------------------------------------------------------------------------
# the 128-bit step and the output function

def _py_next_uint64(st):
    """Pure-Python ``next_uint64`` on Python ints (the NUMBA_DISABLE_JIT=1 stand-in, and an
    independent statement of the arithmetic for the tests)."""
    s = (int(st[0]) << 64) | int(st[1])
    c = (int(st[2]) << 64) | int(st[3])
    s = (s * MULT + c) & ((1 << 128) - 1)
    hi, lo = s >> 64, s & _M64
    st[0], st[1] = np.uint64(hi), np.uint64(lo)
    x = hi ^ lo
    rot = hi >> 58
    return np.uint64(((x >> rot) | (x << ((64 - rot) & 63))) & _M64)


if numba.config.DISABLE_JIT:
    next_uint64 = _py_next_uint64

else:
    from llvmlite import ir
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def _pcg64_next(typingctx, st):
        """Advance the LCG in ``st[0:4]`` (i128 multiply-add, stored back) and return the
        XSL-RR output of the new state."""
        if not (isinstance(st, types.Array) and st.dtype == types.uint64):
            return None
        sig = types.uint64(st)

        def codegen(context, builder, signature, args):
            arr = context.make_array(signature.args[0])(context, builder, args[0])
            i64, i128 = ir.IntType(64), ir.IntType(128)
            p = arr.data
            ptrs = [builder.gep(p, [ir.Constant(i64, k)]) for k in range(4)]
            shi, slo, chi, clo = [builder.load(q) for q in ptrs]

            def wide(hi, lo):
                return builder.or_(builder.shl(builder.zext(hi, i128), ir.Constant(i128, 64)),
                                   builder.zext(lo, i128))

            s = builder.add(builder.mul(wide(shi, slo), ir.Constant(i128, MULT)), wide(chi, clo))
            nhi = builder.trunc(builder.lshr(s, ir.Constant(i128, 64)), i64)
            nlo = builder.trunc(s, i64)
            builder.store(nhi, ptrs[0])
            builder.store(nlo, ptrs[1])
            x = builder.xor(nhi, nlo)
            rot = builder.lshr(nhi, ir.Constant(i64, 58))
            fshr = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64] * 3),
                                                  "llvm.fshr.i64")
            return builder.call(fshr, [x, x, rot])  # rotate right by rot (mod 64)

        return sig, codegen

    @numba.njit(inline="always")
    def next_uint64(st):
        """NumPy PCG64's ``next_uint64`` on the state array ``st`` (module docstring)."""
        return _pcg64_next(st)


@numba.njit(inline="always")
def next_uint32(st):
    """NumPy PCG64's ``next_uint32``: a buffered high half word if there is one, else the low half
    of a fresh word (its high half buffered)."""
    if st[4] != np.uint64(0):
        st[4] = np.uint64(0)
        return np.uint32(st[5])
    w = next_uint64(st)
    st[4] = np.uint64(1)
    st[5] = w >> np.uint64(32)
    return np.uint32(w & np.uint64(0xFFFFFFFF))


@numba.njit(inline="always")
def next_double(st):
    """``(next_uint64 >> 11) · 2^-53``: NumPy's ``next_double`` (and ``Generator.random()``)."""
    return np.float64(next_uint64(st) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


# ------------------------------------------------------------------------------------------------
# standard normal: NumPy's ziggurat


@numba.njit(inline="always")
def _normal_slow(st, idx, rabs, x):
    """The ziggurat's rare branches (tail for layer 0, wedge otherwise); ``None``-free: returns
    ``(accepted, value)``."""
    if idx == 0:
        while True:
            xx = -_ZIG_INV_R * math.log1p(-next_double(st))
            yy = -math.log1p(-next_double(st))
            if yy + yy > xx * xx:
                if (rabs >> np.uint64(8)) & np.uint64(1):
                    return True, -(_ZIG_R + xx)
                return True, _ZIG_R + xx
    if (_FI[idx - 1] - _FI[idx]) * next_double(st) + _FI[idx] < math.exp(-0.5 * x * x):
        return True, x
    return False, 0.0


@numba.njit(inline="always")
def standard_normal(st):
    """NumPy's ``random_standard_normal`` (256-layer ziggurat) on the state array ``st``."""
    while True:
        r = next_uint64(st)
        idx = np.intp(r & np.uint64(0xFF))
        r = r >> np.uint64(8)
        rabs = (r >> np.uint64(1)) & np.uint64(0x000FFFFFFFFFFFFF)
        # the sign bit as a factor ±1 (exact, -0.0 included) instead of a branch that mispredicts
        # half of the time
        x = np.float64(rabs) * _WI[idx] * (1.0 - 2.0 * np.float64(r & np.uint64(1)))
        if rabs < _KI[idx]:
            return x
        ok, v = _normal_slow(st, idx, rabs, x)
        if ok:
            return v


@numba.njit(cache=True, nogil=True)
def fill_standard_normal(st, out):
    """``out[:] = `` the next ``out.size`` normals of the state array ``st`` (a 1-D float64
    array, in order): ``Generator.standard_normal(out=out)``'s numbers, measured faster per normal
    than NumPy's (docs/performance.md); releases the GIL (the blocked noise layout fills its blocks
    on threads)."""
    for i in range(out.shape[0]):
        out[i] = standard_normal(st)


def fill_normals(gen, out) -> None:
    """``gen.standard_normal(out=out)`` for a ``Generator(PCG64)`` and a C-contiguous float64
    ``out``, drawn by :func:`fill_standard_normal` on ``gen``'s state (stored back): the same
    numbers and the same final state, faster.  Any other generator or array: NumPy's own fill."""
    if (supports(gen) and isinstance(out, np.ndarray) and out.dtype == np.float64
            and out.flags.c_contiguous and out.flags.writeable):
        st = state_of(gen)
        fill_standard_normal(st, out.reshape(-1))
        store_state(gen, st)
    else:
        gen.standard_normal(out=out, dtype=out.dtype)


# ------------------------------------------------------------------------------------------------
# bounded integers: NumPy's random_bounded_uint64 (Lemire)


@numba.njit(inline="always")
def _lemire32(st, rng):
    """``buffered_bounded_lemire_uint32`` for ``rng < 2^32 − 1`` (a uint64 holding the range)."""
    excl = rng + np.uint64(1)
    m = np.uint64(next_uint32(st)) * excl
    left = m & np.uint64(0xFFFFFFFF)
    if left < excl:
        thr = (np.uint64(0xFFFFFFFF) - rng) % excl
        while left < thr:
            m = np.uint64(next_uint32(st)) * excl
            left = m & np.uint64(0xFFFFFFFF)
    return m >> np.uint64(32)


@numba.njit(inline="always")
def _lemire64(st, rng):
    """``bounded_lemire_uint64`` for ``2^32 ≤ rng < 2^64 − 1``: the high word of the 128-bit
    product of a 64-bit draw with ``rng + 1``, with Lemire's rejection on the low word."""
    excl = rng + np.uint64(1)
    x = next_uint64(st)
    left = x * excl
    if left < excl:
        thr = (np.uint64(0xFFFFFFFFFFFFFFFF) - rng) % excl
        while left < thr:
            x = next_uint64(st)
            left = x * excl
    mask = np.uint64(0xFFFFFFFF)
    x0, x1 = x & mask, x >> np.uint64(32)
    e0, e1 = excl & mask, excl >> np.uint64(32)
    w0 = x0 * e0
    t = x1 * e0 + (w0 >> np.uint64(32))
    w1 = (t & mask) + x0 * e1
    return x1 * e1 + (t >> np.uint64(32)) + (w1 >> np.uint64(32))


@numba.njit(inline="always")
def integers(st, low, high):
    """NumPy's ``Generator.integers(low, high)`` (int64, ``high`` exclusive, ``low < high``)."""
    rng = np.uint64(high - 1 - low)
    if rng == np.uint64(0):
        return np.int64(low)
    if rng < np.uint64(0xFFFFFFFF):
        return np.int64(low) + np.int64(_lemire32(st, rng))
    if rng == np.uint64(0xFFFFFFFF):
        return np.int64(low) + np.int64(next_uint32(st))
    if rng == np.uint64(0xFFFFFFFFFFFFFFFF):
        return np.int64(np.uint64(low) + next_uint64(st))
    return np.int64(np.uint64(low) + _lemire64(st, rng))


# ------------------------------------------------------------------------------------------------
# binomial: NumPy's random_binomial (inversion or BTPE), set-up computed once per (n, p)


@numba.njit(cache=True)
def binomial_setup(n, p):
    """The set-up of ``Binomial(n, p)`` draws: ``(method, flip, n, r, q, c_0 … c_11, p)`` with
    ``method`` 0 (constant 0), 1 (inversion) or 2 (BTPE) and ``flip`` when ``p > 1/2`` (draw with
    ``r = 1 − p`` and return ``n − X``).  The constants are NumPy's (``binomial_t``): inversion
    ``(qn = q^n, np, bound)``; BTPE ``(nrq, m, p1, xm, xl, xr, c, laml, lamr, p2, p3, p4)``."""
    z = 0.0
    n = np.int64(n)
    if n == 0 or p == 0.0:
        return (0, False, n, z, z, z, z, z, z, z, z, z, z, z, z, z, z, p)
    flip = p > 0.5
    r = 1.0 - p if flip else p
    q = 1.0 - r
    if r * n <= 30.0:
        qn = math.exp(n * math.log(q))
        npr = n * r
        bound = min(float(n), npr + 10.0 * math.sqrt(npr * q + 1))
        return (1, flip, n, r, q, qn, npr, bound, z, z, z, z, z, z, z, z, z, p)
    fm = n * r + r
    m = math.floor(fm)
    p1 = math.floor(2.195 * math.sqrt(n * r * q) - 4.6 * q) + 0.5
    xm = m + 0.5
    xl = xm - p1
    xr = xm + p1
    c = 0.134 + 20.5 / (15.3 + m)
    a = (fm - xl) / (fm - xl * r)
    laml = a * (1.0 + a / 2.0)
    a = (xr - fm) / (xr * q)
    lamr = a * (1.0 + a / 2.0)
    p2 = p1 * (1.0 + 2.0 * c)
    p3 = p2 + c / laml
    p4 = p3 + c / lamr
    return (2, flip, n, r, q, n * r * q, m, p1, xm, xl, xr, c, laml, lamr, p2, p3, p4, p)


@numba.njit
def _stirling_reject(A, xm, m, n, y, r, q):
    """BTPE's final (case 52) test, ``True`` to reject, with the installed NumPy's constants."""
    x1 = y + 1.0
    f1 = m + 1.0
    z = n + 1.0 - m
    w = n - y + 1.0
    x2 = x1 * x1
    f2 = f1 * f1
    z2 = z * z
    w2 = w * w
    base = xm * math.log(f1 / x1) + (n - m + 0.5) * math.log(z / w) \
        + (y - m) * math.log(w * r / (x1 * q))
    if _NP25:
        k = 13860.
        return A > (base
                    + (k - (462. - (132. - (99. - 140. / f2) / f2) / f2) / f2) / f1 / 166320.
                    + (k - (462. - (132. - (99. - 140. / z2) / z2) / z2) / z2) / z / 166320.
                    - (k - (462. - (132. - (99. - 140. / x2) / x2) / x2) / x2) / x1 / 166320.
                    - (k - (462. - (132. - (99. - 140. / w2) / w2) / w2) / w2) / w / 166320.)
    k = 13680.
    return A > (base
                + (k - (462. - (132. - (99. - 140. / f2) / f2) / f2) / f2) / f1 / 166320.
                + (k - (462. - (132. - (99. - 140. / z2) / z2) / z2) / z2) / z / 166320.
                + (k - (462. - (132. - (99. - 140. / x2) / x2) / x2) / x2) / x1 / 166320.
                + (k - (462. - (132. - (99. - 140. / w2) / w2) / w2) / w2) / w / 166320.)


#: Half-width of the table of BTPE's explicit ratios ``f(y)/f(m)`` (:func:`binomial_table`): the
#: explicit evaluation is used for every ``|y − m| ≤ 20`` (and beyond only when ``nrq`` is small).
TABLE_HALF = 20


@numba.njit(cache=True)
def _ratio(n, m, y, a, s):
    """BTPE's explicit ``F = f(y)/f(m)`` by NumPy's recursion (products in the order of ``i``)."""
    F = 1.0
    if m < y:
        for i in range(m + 1, y + 1):
            F = F * (a / i - s)
    elif m > y:
        for i in range(y + 1, m + 1):
            F = F / (a / i - s)
    return F


@numba.njit(cache=True)
def binomial_table(bp):
    """``F(m + k)`` for ``|k| ≤ TABLE_HALF`` (NaN where ``m + k ∉ [0, n]`` or without BTPE): the
    ratios BTPE computes by a loop at each draw that reaches its explicit test, computed once per
    ``(n, p)`` by the same loop (the same operations in the same order, so the same bits).  Pass
    it to :func:`binomial`; an empty array means "no table"."""
    tab = np.full(2 * TABLE_HALF + 1, np.nan)
    if bp[0] != 2:
        return tab
    n, r, q = bp[2], bp[3], bp[4]
    m = np.int64(bp[6])
    s = r / q
    a = s * (n + 1)
    for k in range(-TABLE_HALF, TABLE_HALF + 1):
        y = m + k
        if 0 <= y <= n:
            tab[k + TABLE_HALF] = _ratio(n, m, y, a, s)
    return tab


@numba.njit(inline="always")
def _btpe(st, bp, tab):
    """BTPE (NumPy's ``random_binomial_btpe`` from its set-up ``bp``): triangle, parallelograms,
    exponential tails; squeezes, then the explicit or Stirling-based acceptance tests (the
    explicit ratio read from ``tab`` when it holds it)."""
    n, r, q = bp[2], bp[3], bp[4]
    nrq, mf, p1, xm, xl, xr = bp[5], bp[6], bp[7], bp[8], bp[9], bp[10]
    c, laml, lamr, p2, p3, p4 = bp[11], bp[12], bp[13], bp[14], bp[15], bp[16]
    m = np.int64(mf)
    use_tab = tab.shape[0] == 2 * TABLE_HALF + 1
    while True:
        u = next_double(st) * p4
        v = next_double(st)
        if u <= p1:  # the triangle: accepted at once
            return np.int64(math.floor(xm - p1 * v + u))
        if u <= p2:  # the parallelograms
            x = xl + (u - p1) / c
            v = v * c + 1.0 - math.fabs(m - x + 0.5) / p1
            if v > 1.0:
                continue
            y = np.int64(math.floor(x))
        elif u <= p3:  # left exponential tail
            y = np.int64(math.floor(xl + math.log(v) / laml))
            if y < 0 or v == 0.0:
                continue
            v = v * (u - p2) * laml
        else:  # right exponential tail
            y = np.int64(math.floor(xr - math.log(v) / lamr))
            if y > n or v == 0.0:
                continue
            v = v * (u - p3) * lamr
        k = abs(y - m)
        if not (k > 20 and k < nrq / 2.0 - 1):
            # explicit evaluation of f(y)/f(m) by the recursion (or its tabulated value)
            F = tab[y - m + TABLE_HALF] if use_tab and k <= TABLE_HALF else math.nan
            if F != F:
                s = r / q
                F = _ratio(n, m, y, s * (n + 1), s)
            if v > F:
                continue
            return y
        # squeezing with the normal approximation, then Stirling's formula
        rho = (k / nrq) * ((k * (k / 3.0 + 0.625) + 0.16666666666666666) / nrq + 0.5)
        t = -k * k / (2 * nrq)
        A = math.log(v)
        if A < t - rho:
            return y
        if A > t + rho:
            continue
        if _stirling_reject(A, xm, m, n, y, r, q):
            continue
        return y


@numba.njit(inline="always")
def _inversion(st, bp):
    """NumPy's ``random_binomial_inversion`` from its set-up ``bp``."""
    n, r, q, qn, bound = bp[2], bp[3], bp[4], bp[5], bp[7]
    X = np.int64(0)
    px = qn
    U = next_double(st)
    while U > px:
        X += 1
        if X > bound:
            X = np.int64(0)
            px = qn
            U = next_double(st)
        else:
            U -= px
            px = ((n - X + 1) * r * px) / (X * q)
    return X


@numba.njit(inline="always")
def binomial(st, bp, tab):
    """One ``Binomial(n, p)`` draw, NumPy's ``random_binomial``, with ``bp = binomial_setup(n, p)``
    and ``tab = binomial_table(bp)`` or an empty float64 array (the table only saves work)."""
    if bp[0] == 0:
        return np.int64(0)
    if bp[0] == 1:
        X = _inversion(st, bp)
    else:
        X = _btpe(st, bp, tab)
    return bp[2] - X if bp[1] else X


# ------------------------------------------------------------------------------------------------
# dispatch: a NumPy Generator (Numba's compiled methods) or a state array (the code above)


def draw_double(rng):
    """``rng.random()`` (a ``Generator``) or :func:`next_double` (a state array)."""
    return rng.random() if isinstance(rng, np.random.Generator) else next_double(rng)


def draw_normal(rng):
    """``rng.standard_normal()`` or :func:`standard_normal`."""
    return rng.standard_normal() if isinstance(rng, np.random.Generator) else standard_normal(rng)


def draw_integers(rng, low, high):
    """``rng.integers(low, high)`` or :func:`integers`."""
    return rng.integers(low, high) if isinstance(rng, np.random.Generator) else integers(rng, low, high)


def draw_binomial(rng, bp, tab):
    """``rng.binomial(n, p)`` or :func:`binomial` from the set-up ``bp = binomial_setup(n, p)``
    and ``tab = binomial_table(bp)`` (the ``Generator`` path reads ``n`` and ``p`` back from
    ``bp``)."""
    if isinstance(rng, np.random.Generator):
        return rng.binomial(bp[2], bp[17])
    return binomial(rng, bp, tab)


def _is_state(rng):
    return isinstance(rng, types.Array) and rng.dtype == types.uint64 and rng.ndim == 1


@overload(draw_double, inline="always")
def _ol_draw_double(rng):
    if isinstance(rng, types.NumPyRandomGeneratorType):
        return lambda rng: rng.random()
    if _is_state(rng):
        return lambda rng: next_double(rng)


@overload(draw_normal, inline="always")
def _ol_draw_normal(rng):
    if isinstance(rng, types.NumPyRandomGeneratorType):
        return lambda rng: rng.standard_normal()
    if _is_state(rng):
        return lambda rng: standard_normal(rng)


@overload(draw_integers, inline="always")
def _ol_draw_integers(rng, low, high):
    if isinstance(rng, types.NumPyRandomGeneratorType):
        return lambda rng, low, high: rng.integers(low, high)
    if _is_state(rng):
        return lambda rng, low, high: integers(rng, low, high)


@overload(draw_binomial, inline="always")
def _ol_draw_binomial(rng, bp, tab):
    if isinstance(rng, types.NumPyRandomGeneratorType):
        return lambda rng, bp, tab: rng.binomial(bp[2], bp[17])
    if _is_state(rng):
        return lambda rng, bp, tab: binomial(rng, bp, tab)
