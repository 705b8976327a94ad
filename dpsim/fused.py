"""The small-d fast path of :func:`dpsim.simulate`: whole blocks of steps in one compiled Numba kernel.

Layer 5 (beside :mod:`dpsim.engine`, which calls it; it imports nothing above the optimizers).

The general engine (:mod:`dpsim.engine`) pays ~30 µs of Python per step and materializes a few
``(R, d)`` temporaries per piece of the chain; for small ``d`` that, not arithmetic, is the cost.
Here the step loop of a *recognized* (problem, optimizer) pair runs inside one kernel from one
record step to the next — batches and noise included, no Python per step:

    for t in block:                                       (step-major, as the engine)
        B_r ~ sampler (sizes of all trials first, then trial by trial: Floyd's subset)
        for r in trials:
            S_r = Σ_{i∈B_r} clip(s_r ⊙ g_i(w_r), C_r)       (the problem's per-example gradients)
            g̃_r = (S_r + σ_r C_r z_{t,r}) / b                (z: d normals of the noise stream)
            optimizer recursion on g̃_r (module of the rule: dpsim.transforms.preconditioners)
            w_r ← proj_X(w_r − η_r · direction)

**Same random streams as the engine, bit for bit.**  The kernel draws from the run's two NumPy
generators — the sampler's (:class:`dpsim.sampling.Sampler`) and the backend's noise generator,
both ``Generator(PCG64)`` — through :mod:`dpsim._bitgen`: before a block their bit generator
states are read into two 6-word arrays, the kernel draws with an inlined copy of NumPy's PCG64
and of NumPy's ``binomial``, ``random``, ``integers`` and ``standard_normal`` algorithms on those
arrays (the same numbers NumPy computes: ``tests/test_bitgen.py`` checks values and final states
against NumPy), and after the block the states are written back, so the generators stand exactly
where NumPy's own draws would have left them.  (Numba's compiled ``Generator`` methods draw the
same streams through a function pointer per draw, ~2× slower on the draws; ``DPSIM_FUSED_RNG=numba``
selects them, for A/B checks — ``tests/test_fused.py`` compares the two bit for bit — and they are
used for any other bit generator.)  The draws come in the engine's order: per step the ``R`` batch sizes (``Binomial(n, b/n)``, Poisson
and cyclic Poisson), then per trial its ``k_r`` uniforms and Floyd's subset (stream ``floyd-v1``
of :mod:`dpsim._sampling_kernels`, the same row function) or its ``b`` bounded integers
(replacement); the noise generator gives per trial ``d`` normals, the C order of the engine's
``(R, d)`` draw.  So no stream changes: the fused run *is* the engine's run.  The arithmetic
follows the engine's order of operations (dense GLM clipped sums reproduce
:func:`dpsim.problems._glm_kernels._dense_trial` on four-lane vectors with the same summation
order: margins four examples at a time, squared-link clip factors on vectors, the scatter with
its per-column partial sums in registers, each element receiving the same products in the same
order; other problems call the engine's kernels) and constants the chain computes (Adam's
``1 − βᵗ`` by :func:`dpsim.transforms.preconditioners.bias_correction`, see
:func:`_bias_corrections`), so the two agree to the last bit (``tests/test_fused.py`` asserts
equality of every record, the parameters and the privacy record, for every optimizer, problem
and sampler it covers).  The chain state is rebuilt with the engine's own
state types at record steps and at the end, so probes and the privacy record (the declared events,
the sampler, q, T) are computed by the same code as in the engine: privacy accounting is unchanged.

Recognized optimizers: :data:`SUPPORTED_OPTIMIZERS`, checked against a rebuild from the recorded
hyperparameters (same piece names, declared event types and noise multipliers, probes;
``noise="gaussian"`` only); which registered optimizer takes this path on which problem is the
generated table docs/fast-paths.md, and :func:`dpsim.explain` answers for any run.  PASAN and PAGAN
take their first step through the engine's own transform (it sets up the ellipsoid and the noise
scale); GLM rows are projected by the engine's kernel (:mod:`dpsim.privacy._ellipsoid`), except on
the ℓ2 ball (identity scaling), where :func:`_ball_dense_trial` computes the engine's closed form
with the examples in vector lanes.  Problems: dense GLMs, ``random_quadratic``, ``quadratic_2d``;
domains none, box or ball; all four samplers; backend ``numpy``, ``float64``.  :func:`plan` says
why anything else is not.
"""

from __future__ import annotations

import math
import os
from typing import Any, NamedTuple

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from . import _bitgen as _BG
from . import _sampling_kernels as _SK
from . import optimizers
from ._validate import any_inf, hyper, is_zero, product
from .privacy import _ellipsoid as _E
from .problems import Ball, Box
from .sampling import CYCLIC, cyclic_rate
from .problems import _glm_kernels as _K
from .transforms import preconditioners as _PRE
from .transforms.base import Batch
from .problems.base import GLMView, NoisyQuadraticView, QuadraticView

__all__ = ["plan", "FusedPlan", "SUPPORTED_OPTIMIZERS"]

# optimizer codes
SGD, MOMENTUM, ADAM, DP2, ELLIPSOID = 0, 1, 2, 3, 4
# problem codes
P_GLM, P_RQUAD, P_NQUAD = 0, 1, 2
# domain codes
D_NONE, D_BOX, D_BALL = 0, 1, 2
# sampling codes
S_POISSON, S_FIXED, S_REPLACEMENT, S_CYCLIC = 0, 1, 2, 3
# DP² second-moment rules
RULE = {"dp2_rmsprop": 0, "dp2_adagrad": 1, "dp2_yogi": 2}

SUPPORTED_OPTIMIZERS = ("sgd", "momentum", "dp_sgd", "dp_sgdm", "adam", "dp_adam", "dp_adam_bc",
                        "dp2_rmsprop", "dp2_adagrad", "dp2_yogi", "pasan", "pagan")

#: A kernel call (a block) runs at most this many trial-numbers, ``K·R·(d + b)``, before it
#: returns to Python (keeps progress bars and Ctrl-C responsive in runs without records; the
#: blocks hold no buffers, so this costs one call per ~10 ms of work).
BLOCK_ELEMENTS = 1 << 22


# ------------------------------------------------------------------------------------------------
# kernels

# Four-lane SIMD building blocks for the dense GLM rows.  Numba builds without LLVM's SLP vectorizer
# (off by default since numba#8705), so the four-accumulator dot product of the engine's kernel
# (:func:`dpsim.problems._glm_kernels._dense_dot`) runs scalar; these intrinsics emit the *same*
# arithmetic on ``<4 x double>`` vectors: lane ``l`` accumulates the products of the columns
# ``j ≡ l (mod 4)`` of the whole chunks of four, in order, the tail goes into lane 0, and the result
# is ``(m0 + m1) + (m2 + m3)`` — bit for bit the engine's sum (separate multiply and add, no FMA
# contraction).  The axpy is elementwise, so its vector form has the scalar loop's bits.

if numba.config.DISABLE_JIT:

    def _dot_lanes(X, xoff, W, woff, n):
        """Pure-Python stand-in (NUMBA_DISABLE_JIT=1) with the same summation order."""
        x, w = X.reshape(-1), W.reshape(-1)
        m = [0.0, 0.0, 0.0, 0.0]
        nch = n // 4
        for c in range(nch):
            for lane in range(4):
                m[lane] += x[xoff + 4 * c + lane] * w[woff + 4 * c + lane]
        for j in range(4 * nch, n):
            m[0] += x[xoff + j] * w[woff + j]
        return (m[0] + m[1]) + (m[2] + m[3])

    def _axpy_lanes(Y, yoff, a, X, xoff, n):
        """Pure-Python stand-in (NUMBA_DISABLE_JIT=1)."""
        y, x = Y.reshape(-1), X.reshape(-1)
        for j in range(n):
            y[yoff + j] += a * x[xoff + j]

    def _dots4_lanes(X, ib, i, W, woff, n, mm):
        """Pure-Python stand-in (NUMBA_DISABLE_JIT=1): four :func:`_dot_lanes`."""
        for k in range(4):
            mm[i + k] = _dot_lanes(X, ib[i + k] * n, W, woff, n)

    def _dots4_scaled_lanes(X, ib, i, W, woff, S2, n, mm, aa, cc):
        """Pure-Python stand-in (NUMBA_DISABLE_JIT=1): four :func:`_K._dense_dot_scaled` sums."""
        w = W.reshape(-1)
        for k in range(4):
            row = ib[i + k]
            acc = [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]  # (m, a, c) × (even, odd) columns
            for j in range(n):
                h = j % 2 if j < n - n % 2 else 0  # an odd last column goes to the first sum
                x = X[row, j]
                xw = x * w[woff + j]
                acc[0][h] += xw
                acc[1][h] += S2[j] * x * x
                acc[2][h] += S2[j] * xw
            mm[i + k] = acc[0][0] + acc[0][1]
            aa[i + k] = acc[1][0] + acc[1][1]
            cc[i + k] = acc[2][0] + acc[2][1]

    def _make_gather_axpy(skip_zero, maxvec):
        def gather_axpy(Y, yoff, cf, X, ib, kr, n):
            """Pure-Python stand-in (NUMBA_DISABLE_JIT=1): the axpys in example order."""
            for i in range(kr):
                if cf[i] != 0.0 or not skip_zero:
                    _axpy_lanes(Y, yoff, cf[i], X, ib[i] * n, n)
        return gather_axpy

    def _make_rows_t(G):
        def rows_t(X, ib, i, W, woff, n, XT, mm):
            """Pure-Python stand-in (NUMBA_DISABLE_JIT=1): transpose and sequential margins."""
            w = W.reshape(-1)
            for k in range(4 * G):
                m = 0.0
                for t in range(n):
                    x = X[ib[i + k], t]
                    XT[t, i + k] = x
                    m += x * w[woff + t]
                mm[i + k] = m
        return rows_t

    def _make_sumsq_t(G, ridge):
        def sumsq_t(XT, i, n, cc, im, W, woff, reg, qq):
            """Pure-Python stand-in (NUMBA_DISABLE_JIT=1): sequential sums of squares."""
            w = W.reshape(-1)
            for k in range(4 * G):
                q = 0.0
                for t in range(n):
                    if ridge:
                        v = cc[i + k] * XT[t, i + k] + reg * w[woff + t]
                    else:
                        v = cc[i + k] * XT[t, i + k] * im[i + k]
                    q += v * v
                qq[i + k] = q
        return sumsq_t

else:
    # LLVM types and the small pieces every intrinsic below is built from (Python run at
    # compile time only: the code they emit is the same as if written out in each intrinsic)
    _I64 = ir.IntType(64)
    _I32 = ir.IntType(32)
    _DBL = ir.DoubleType()
    _V4 = ir.VectorType(_DBL, 4)
    _V2 = ir.VectorType(_DBL, 2)

    def _i64(v):
        return ir.Constant(_I64, v)

    def _lane(k):
        return ir.Constant(_I32, k)

    def _arrays(*tys):
        """Whether every typed argument is an array (else the intrinsic does not apply)."""
        return all(isinstance(t, types.Array) for t in tys)

    def _operands(context, builder, signature, args):
        """The intrinsic's arguments as its code uses them: an array as its struct (``.data``,
        ``.shape``), an integer cast to int64, a float to float64."""
        out = []
        for ty, v in zip(signature.args, args):
            if isinstance(ty, types.Array):
                out.append(context.make_array(ty)(context, builder, v))
            elif isinstance(ty, types.Integer):
                out.append(context.cast(builder, v, ty, types.int64))
            else:
                out.append(context.cast(builder, v, ty, types.float64))
        return out

    def _splat(builder, s):
        """``<s, s, s, s>``."""
        v = ir.Constant(_V4, ir.Undefined)
        for k in range(4):
            v = builder.insert_element(v, s, _lane(k))
        return v

    def _shuffle(builder, a, b, lanes):
        return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(_I32, len(lanes)), lanes))

    def _vec_ptr(builder, base, off, ty=_V4):
        """``base + off`` (double pointer, element offset) as a pointer to ``ty``."""
        return builder.bitcast(builder.gep(base, [off]), ty.as_pointer())

    def _vload(builder, base, off, ty=_V4):
        """An unaligned (8-byte aligned) vector load at ``base + off``."""
        return builder.load(_vec_ptr(builder, base, off, ty), align=8)

    def _madd(builder, acc, x, y, align=None):
        """``*acc = *acc + x·y``: a multiply, then an add (never contracted into an FMA)."""
        builder.store(builder.fadd(builder.load(acc, align=align), builder.fmul(x, y)), acc, align=align)

    def _zeros(builder):
        """A fresh ``<0, 0, 0, 0>`` accumulator."""
        return cgutils.alloca_once_value(builder, ir.Constant(_V4, [0.0, 0.0, 0.0, 0.0]))

    def _chunks(builder, n):
        """``(number of whole chunks of four, index of the first tail element)`` of ``n``."""
        nch = builder.ashr(n, _i64(2))
        return nch, builder.shl(nch, _i64(2))

    @intrinsic
    def _dot_lanes(typingctx, X, xoff, W, woff, n):
        """Σ_j X.flat[xoff + j] · W.flat[woff + j] (j < n) with four lane accumulators m_l (j ≡ l mod 4
        over whole chunks of four, the tail into m_0), returned as (m_0 + m_1) + (m_2 + m_3)."""
        if not _arrays(X, W):
            return None
        sig = types.float64(X, xoff, W, woff, n)

        def codegen(context, builder, signature, args):
            xa, xoff_, wa, woff_, n_ = _operands(context, builder, signature, args)
            xp = builder.gep(xa.data, [xoff_])
            wp = builder.gep(wa.data, [woff_])
            acc = _zeros(builder)
            nch, start = _chunks(builder, n_)
            with cgutils.for_range(builder, nch, intp=_I64) as loop:
                off = builder.shl(loop.index, _i64(2))
                _madd(builder, acc, _vload(builder, xp, off), _vload(builder, wp, off))
            v = builder.load(acc)
            m0 = cgutils.alloca_once_value(builder, builder.extract_element(v, _lane(0)))
            with cgutils.for_range_slice(builder, start, n_, _i64(1), intp=_I64) as (j, _):
                _madd(builder, m0, builder.load(builder.gep(xp, [j])), builder.load(builder.gep(wp, [j])))
            e = [builder.extract_element(v, _lane(k)) for k in (1, 2, 3)]
            return builder.fadd(builder.fadd(builder.load(m0), e[0]), builder.fadd(e[1], e[2]))

        return sig, codegen

    @intrinsic
    def _axpy_lanes(typingctx, Y, yoff, a, X, xoff, n):
        """Y.flat[yoff + j] += a · X.flat[xoff + j] for j < n (elementwise: the same bits as the scalar
        loop; four at a time)."""
        if not _arrays(X, Y):
            return None
        sig = types.void(Y, yoff, a, X, xoff, n)

        def codegen(context, builder, signature, args):
            ya, yoff_, av, xa, xoff_, n_ = _operands(context, builder, signature, args)
            yp = builder.gep(ya.data, [yoff_])
            xp = builder.gep(xa.data, [xoff_])
            avec = _splat(builder, av)
            nch, start = _chunks(builder, n_)
            with cgutils.for_range(builder, nch, intp=_I64) as loop:
                off = builder.shl(loop.index, _i64(2))
                _madd(builder, _vec_ptr(builder, yp, off), avec, _vload(builder, xp, off), align=8)
            with cgutils.for_range_slice(builder, start, n_, _i64(1), intp=_I64) as (j, _):
                _madd(builder, builder.gep(yp, [j]), av, builder.load(builder.gep(xp, [j])))
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def _dots4_lanes(typingctx, X, ib, i, W, woff, n, mm):
        """``mm[i + k] = _dot_lanes(X, ib[i + k]·n, W, woff, n)`` for ``k < 4``: the four rows'
        lane sums interleaved (one load of each chunk of ``W``, four independent accumulators), each
        with exactly :func:`_dot_lanes`'s operations and order, so the same bits."""
        if not _arrays(X, W, ib, mm):
            return None
        sig = types.void(X, ib, i, W, woff, n, mm)

        def codegen(context, builder, signature, args):
            xa, ia, i_, wa, woff_, n_, ma = _operands(context, builder, signature, args)
            wp = builder.gep(wa.data, [woff_])
            xps = []
            accs = []
            for k in range(4):
                row = builder.load(builder.gep(ia.data, [builder.add(i_, _i64(k))]))
                xps.append(builder.gep(xa.data, [builder.mul(row, n_)]))
                accs.append(_zeros(builder))
            nch, start = _chunks(builder, n_)
            with cgutils.for_range(builder, nch, intp=_I64) as loop:
                off = builder.shl(loop.index, _i64(2))
                vw = _vload(builder, wp, off)
                for k in range(4):
                    _madd(builder, accs[k], _vload(builder, xps[k], off), vw)
            vs = [builder.load(a) for a in accs]
            m0s = [cgutils.alloca_once_value(builder, builder.extract_element(v, _lane(0))) for v in vs]
            with cgutils.for_range_slice(builder, start, n_, _i64(1), intp=_I64) as (j, _):
                wj = builder.load(builder.gep(wp, [j]))
                for k in range(4):
                    _madd(builder, m0s[k], builder.load(builder.gep(xps[k], [j])), wj)
            for k in range(4):
                e = [builder.extract_element(vs[k], _lane(q)) for q in (1, 2, 3)]
                res = builder.fadd(builder.fadd(builder.load(m0s[k]), e[0]), builder.fadd(e[1], e[2]))
                builder.store(res, builder.gep(ma.data, [builder.add(i_, _i64(k))]))
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def _dots4_scaled_lanes(typingctx, X, ib, i, W, woff, S2, n, mm, aa, cc):
        """``(mm, aa, cc)[i + k] = (x·w, Σ s² x x, Σ s² x w)`` of the rows ``ib[i + k]``, ``k < 4``:
        :func:`dpsim.problems._glm_kernels._dense_dot_scaled`'s three sums, each in its two
        accumulators (even and odd columns, an odd last column into the first), ``s²`` the row
        ``S2`` (``s·s`` precomputed: the same rounding as the kernel's ``s * s``).  Two examples
        share a four-lane vector (lanes 0, 1: example ``i + 2p``'s even and odd sums; lanes 2, 3:
        example ``i + 2p + 1``'s), so every lane runs the scalar loop's operations in its order
        (``(s² x) x``, ``s² (x w)``, multiply then add): the same bits, twelve sums at a time."""
        if not _arrays(X, ib, W, S2, mm, aa, cc):
            return None
        sig = types.void(X, ib, i, W, woff, S2, n, mm, aa, cc)

        def codegen(context, builder, signature, args):
            xa, ia, i_, wa, woff_, sa, n_, ma, aa_, ca = _operands(context, builder, signature, args)
            wp = builder.gep(wa.data, [woff_])
            sp = sa.data
            xps = []
            for k in range(4):
                row = builder.load(builder.gep(ia.data, [builder.add(i_, _i64(k))]))
                xps.append(builder.gep(xa.data, [builder.mul(row, n_)]))
            acc = [[_zeros(builder) for _ in range(3)] for _ in range(2)]  # (m, a, c) of each pair
            npair = builder.ashr(n_, _i64(1))
            with cgutils.for_range(builder, npair, intp=_I64) as loop:
                off = builder.shl(loop.index, _i64(1))
                w2 = _vload(builder, wp, off, _V2)
                s2 = _vload(builder, sp, off, _V2)
                wv = _shuffle(builder, w2, w2, [0, 1, 0, 1])
                sv = _shuffle(builder, s2, s2, [0, 1, 0, 1])
                for p in range(2):
                    xv = _shuffle(builder, _vload(builder, xps[2 * p], off, _V2),
                                  _vload(builder, xps[2 * p + 1], off, _V2), [0, 1, 2, 3])
                    xw = builder.fmul(xv, wv)
                    am, aq, ac = acc[p]
                    builder.store(builder.fadd(builder.load(am), xw), am)
                    builder.store(builder.fadd(builder.load(aq), builder.fmul(builder.fmul(sv, xv), xv)), aq)
                    builder.store(builder.fadd(builder.load(ac), builder.fmul(sv, xw)), ac)
            last = builder.sub(n_, _i64(1))
            odd = builder.icmp_signed("!=", builder.shl(npair, _i64(1)), n_)
            for p in range(2):
                vs = [builder.load(a) for a in acc[p]]
                for h in range(2):
                    k = 2 * p + h
                    lo = [cgutils.alloca_once_value(builder, builder.extract_element(v, _lane(2 * h)))
                          for v in vs]
                    hi = [builder.extract_element(v, _lane(2 * h + 1)) for v in vs]
                    with builder.if_then(odd):  # the last column, into the even sums
                        x = builder.load(builder.gep(xps[k], [last]))
                        xw = builder.fmul(x, builder.load(builder.gep(wp, [last])))
                        s = builder.load(builder.gep(sp, [last]))
                        builder.store(builder.fadd(builder.load(lo[0]), xw), lo[0])
                        builder.store(builder.fadd(builder.load(lo[1]), builder.fmul(builder.fmul(s, x), x)),
                                      lo[1])
                        builder.store(builder.fadd(builder.load(lo[2]), builder.fmul(s, xw)), lo[2])
                    dst = builder.add(i_, _i64(k))
                    for q, arr in enumerate((ma, aa_, ca)):
                        builder.store(builder.fadd(builder.load(lo[q]), hi[q]), builder.gep(arr.data, [dst]))
            return context.get_dummy_value()

        return sig, codegen

    def _make_gather_axpy(skip_zero, maxvec):
        """An intrinsic ``Y.flat[yoff + j] += cf[i] · X[ib[i], j]`` for ``i = 0 … kr−1`` in order
        (skipping ``cf[i] == 0`` when ``skip_zero``: for finite rows that adds ±0 to a sum that
        started at +0 and so never is −0, a no-op): the loop of :func:`_axpy_lanes` calls, but with
        the partial sums of a block of columns held in registers across the examples instead of
        stored and reloaded after every example — blocks of ``maxvec`` vectors of four, then one
        block with the leftover vectors and the scalar tail columns (a switch over its shape).
        Every element receives the same products in the same order, so the same bits."""

        @intrinsic
        def gather_axpy(typingctx, Y, yoff, cf, X, ib, kr, n):
            if not _arrays(X, Y, ib, cf):
                return None
            sig = types.void(Y, yoff, cf, X, ib, kr, n)

            def codegen(context, builder, signature, args):
                ya, yoff_, ca, xa, ia, kr_, n_ = _operands(context, builder, signature, args)
                yp = builder.gep(ya.data, [yoff_])
                zero = ir.Constant(_DBL, 0.0)

                def block(base, nvec, nscalar):
                    # columns base … base + 4·nvec + nscalar − 1 accumulated over the examples
                    slots = [(4 * k, True) for k in range(nvec)] + [(4 * nvec + k, False) for k in range(nscalar)]
                    ptrs = [_vec_ptr(builder, yp, builder.add(base, _i64(off)), _V4 if vec else _DBL)
                            for off, vec in slots]
                    accs = [cgutils.alloca_once(builder, _V4 if vec else _DBL) for _, vec in slots]
                    for q, a in zip(ptrs, accs):
                        builder.store(builder.load(q, align=8), a)
                    with cgutils.for_range(builder, kr_, intp=_I64) as loop:
                        av = builder.load(builder.gep(ca.data, [loop.index]))

                        def add_example():
                            row = builder.load(builder.gep(ia.data, [loop.index]))
                            xp = builder.gep(xa.data, [builder.add(builder.mul(row, n_), base)])
                            mul = _splat(builder, av)
                            for (off, vec), a in zip(slots, accs):
                                vx = builder.load(_vec_ptr(builder, xp, _i64(off), _V4 if vec else _DBL), align=8)
                                _madd(builder, a, mul if vec else av, vx)

                        if skip_zero:
                            with builder.if_then(builder.fcmp_unordered("!=", av, zero)):
                                add_example()
                        else:
                            add_example()
                    for q, a in zip(ptrs, accs):
                        builder.store(builder.load(a), q, align=8)

                width = 4 * maxvec
                nblk = builder.sdiv(n_, _i64(width))
                with cgutils.for_range(builder, nblk, intp=_I64) as loop:
                    block(builder.mul(loop.index, _i64(width)), maxvec, 0)
                base = builder.mul(nblk, _i64(width))
                done = builder.append_basic_block("gather_axpy.done")
                sw = builder.switch(builder.sub(n_, base), done)
                for cols in range(1, width):
                    bb = builder.append_basic_block(f"gather_axpy.rest{cols}")
                    sw.add_case(_i64(cols), bb)
                    with builder.goto_block(bb):
                        block(base, cols // 4, cols % 4)
                        builder.branch(done)
                builder.position_at_end(done)
                return context.get_dummy_value()

            return sig, codegen

        return gather_axpy

    # Lanes = examples: the building blocks of the ℓ2-ball kernel (:func:`_ball_dense_trial`).
    # The engine's closed form sums over the columns t of one example *sequentially* (its margin
    # Σ_t x_t w_t and its Σ_t (c x_t / m)²), so the vector lanes cannot run over columns as in
    # _dot_lanes; they run over examples instead: the batch's rows are transposed in 4×4 blocks
    # (lane k of the vector of column t holds x_{i+k, t}) and every lane accumulates its own
    # example's sum over t in order, one multiply and one add per term (no FMA) — each lane is the
    # engine's scalar loop, so the same bits, eight or sixteen examples at a time.

    def _cols4(builder, rows, off):
        """Columns ``off … off+3`` of the four rows (pointers ``rows``) as four vectors, lane k = row
        k: two-element loads joined into ``<r0[h], r0[h+1], r2[h], r2[h+1]>`` and
        ``<r1[h], r1[h+1], r3[h], r3[h+1]>``, then interleaved (moves only, no arithmetic)."""
        cols = []
        for h in (0, 2):
            o = builder.add(off, _i64(h))
            lo = [_vload(builder, rp, o, _V2) for rp in rows]
            a = _shuffle(builder, lo[0], lo[2], [0, 1, 2, 3])
            b = _shuffle(builder, lo[1], lo[3], [0, 1, 2, 3])
            cols.append(_shuffle(builder, a, b, [0, 4, 2, 6]))
            cols.append(_shuffle(builder, a, b, [1, 5, 3, 7]))
        return cols

    def _make_rows_t(G):
        """An intrinsic over ``4G`` examples ``ib[i … i+4G−1]`` (``G`` vectors interleaved, ``G``
        independent dependency chains): writes the rows transposed, ``XT[t, i+k] = X[ib[i+k], t]``,
        and the margins ``mm[i+k] = (…((0 + x_0 w_0) + x_1 w_1) + …) + x_{n−1} w_{n−1}`` with
        ``w = W.flat[woff:woff+n]`` (the engine's sequential sum, one lane per example)."""

        @intrinsic
        def rows_t(typingctx, X, ib, i, W, woff, n, XT, mm):
            if not _arrays(X, ib, W, XT, mm):
                return None
            sig = types.void(X, ib, i, W, woff, n, XT, mm)

            def codegen(context, builder, signature, args):
                xa, ia, i_, wa, woff_, n_, ta, ma = _operands(context, builder, signature, args)
                ldt = cgutils.unpack_tuple(builder, ta.shape, 2)[1]
                wp = builder.gep(wa.data, [woff_])
                tps = [builder.gep(ta.data, [builder.add(i_, _i64(4 * g))]) for g in range(G)]
                rows = [builder.gep(xa.data, [builder.mul(builder.load(
                    builder.gep(ia.data, [builder.add(i_, _i64(k))])), n_)]) for k in range(4 * G)]
                accs = [_zeros(builder) for _ in range(G)]

                def put(g, col, t, wv):
                    builder.store(col, _vec_ptr(builder, tps[g], builder.mul(t, ldt)), align=8)
                    _madd(builder, accs[g], col, wv)

                nch, start = _chunks(builder, n_)
                with cgutils.for_range(builder, nch, intp=_I64) as loop:
                    off = builder.shl(loop.index, _i64(2))
                    wvs = [_splat(builder, builder.load(builder.gep(wp, [builder.add(off, _i64(q))])))
                           for q in range(4)]
                    for g in range(G):
                        for q, col in enumerate(_cols4(builder, rows[4 * g: 4 * g + 4], off)):
                            put(g, col, builder.add(off, _i64(q)), wvs[q])
                with cgutils.for_range_slice(builder, start, n_, _i64(1), intp=_I64) as (t, _):
                    wv = _splat(builder, builder.load(builder.gep(wp, [t])))
                    for g in range(G):
                        col = ir.Constant(_V4, ir.Undefined)
                        for k in range(4):
                            col = builder.insert_element(col, builder.load(builder.gep(rows[4 * g + k], [t])),
                                                         _lane(k))
                        put(g, col, t, wv)
                for g in range(G):
                    builder.store(builder.load(accs[g]),
                                  _vec_ptr(builder, ma.data, builder.add(i_, _i64(4 * g))), align=8)
                return context.get_dummy_value()

            return sig, codegen

        return rows_t

    def _make_sumsq_t(G, ridge):
        """An intrinsic over the ``4G`` lanes ``i … i+4G−1`` of the transposed rows, one lane per
        example, ``G`` chains interleaved, each the engine's sequential sum over t: without
        ``ridge`` ``qq[l] = Σ_t ((cc[l]·XT[t, l])·im[l])²`` (``v = c x_t imx; q += v v``; ``W``,
        ``woff``, ``reg`` unused), with ``ridge`` ``qq[l] = Σ_t (cc[l]·XT[t, l] + reg·w_t)²``
        (``g_t = c x_t + ρ w_t; q += g_t g_t`` with ``w = W.flat[woff:]``; ``im`` unused)."""

        @intrinsic
        def sumsq_t(typingctx, XT, i, n, cc, im, W, woff, reg, qq):
            if not _arrays(XT, cc, im, W, qq):
                return None
            sig = types.void(XT, i, n, cc, im, W, woff, reg, qq)

            def codegen(context, builder, signature, args):
                ta, i_, n_, ca, ima, wa, woff_, reg_, qa = _operands(context, builder, signature, args)
                ldt = cgutils.unpack_tuple(builder, ta.shape, 2)[1]
                wp = builder.gep(wa.data, [woff_])
                offs = [builder.add(i_, _i64(4 * g)) for g in range(G)]
                cs = [_vload(builder, ca.data, o) for o in offs]
                ims = [_vload(builder, ima.data, o) for o in offs]
                accs = [_zeros(builder) for _ in range(G)]
                with cgutils.for_range(builder, n_, intp=_I64) as loop:
                    base = builder.mul(loop.index, ldt)
                    if ridge:
                        rw = _splat(builder, builder.fmul(reg_, builder.load(builder.gep(wp, [loop.index]))))
                    for g in range(G):
                        x = _vload(builder, ta.data, builder.add(base, offs[g]))
                        if ridge:
                            v = builder.fadd(builder.fmul(cs[g], x), rw)
                        else:
                            v = builder.fmul(builder.fmul(cs[g], x), ims[g])
                        _madd(builder, accs[g], v, v)
                for g in range(G):
                    builder.store(builder.load(accs[g]), _vec_ptr(builder, qa.data, offs[g]), align=8)
                return context.get_dummy_value()

            return sig, codegen

        return sumsq_t

_gather_axpy = _make_gather_axpy(True, 4)
_gather_axpy_all = _make_gather_axpy(False, 8)
_rows8_t, _rows16_t = _make_rows_t(2), _make_rows_t(4)
_sumsq8_t, _sumsq16_t = _make_sumsq_t(2, False), _make_sumsq_t(4, False)
_ridge_sumsq8_t, _ridge_sumsq16_t = _make_sumsq_t(2, True), _make_sumsq_t(4, True)


@numba.njit(cache=True, error_model="numpy")
def _glm_clip_coef(kind, m, sx2, yv, lam, lam2_sw2, Cr):
    """``(a, f)`` of one example: :func:`dpsim.problems._glm_kernels._finish_example` without its
    branches (the clip factor's division is computed and selected, so an unpredictable "clipped or
    not" costs no mispredicted branch; the same expressions, hence the same bits)."""
    c = _K.link_derivative(kind, m, yv)
    n2 = c * c * sx2
    if lam != 0.0:
        n2 += 2.0 * lam * c * m + lam2_sw2
    nrm = math.sqrt(n2 if n2 > 0.0 else 0.0)  # the engine's "sqrt(n2) if n2 > 0 else 0" (NaN → 0)
    q = Cr / (nrm if nrm > 0.0 else 1.0)  # selected operands: no branch, no division by zero
    f = 1.0
    if nrm > Cr:
        f = q
    return f * c, f


@numba.njit(cache=True, error_model="numpy")
def _row_sq_norms(X):
    """``||x_i||²`` of every row by the engine's own four-accumulator sum (the same bits as the
    ``sx2`` the engine's kernel recomputes at every example)."""
    out = np.empty(X.shape[0])
    for i in range(X.shape[0]):
        out[i] = _K._dense_dot(X, i, X, i)[1]
    return out


@numba.njit(cache=True, error_model="numpy", _nrt=False)
def _squared_clip_coefs(mm, y, rn2, ib, kr, Cr, cf, yb, sb):
    """``cf[i] = f_i c_i`` for the squared link without regularization: ``c = m − y``,
    ``||g||² = c·c·||x||²``, ``f = C/||g||`` when ``||g|| > C`` else 1 —
    :func:`_glm_clip_coef`'s expressions for ``kind = squared``, ``λ = 0``, over gathered
    contiguous ``y``/``||x||²`` so that the loop runs on vectors (square roots and divisions of
    four examples at once; each lane computes the scalar expression, so the same bits)."""
    for i in range(kr):
        row = ib[i]
        yb[i] = y[row]
        sb[i] = rn2[row]
    for i in range(kr):
        c = mm[i] - yb[i]
        n2 = c * c * sb[i]
        nrm = math.sqrt(n2 if n2 > 0.0 else 0.0)
        q = Cr / (nrm if nrm > 0.0 else 1.0)
        f = q if nrm > Cr else 1.0
        cf[i] = f * c


@numba.njit(cache=True, error_model="numpy", _nrt=False)
def _glm_clipped_trial(kind, X, rn2, ib, kr, W, y, lam, Cr, out, mm, cf, yb, sb, r):
    """``out[r] = Σ_{i<kr} clip(g_{ib[i]}(w_r), C_r)`` for a dense GLM: the engine's
    :func:`dpsim.problems._glm_kernels._dense_trial` (unscaled) in three passes — the margins (on
    four-lane vectors, four examples interleaved), the clip coefficients (a loop without
    dependences between examples, so the square roots and divisions of different examples
    overlap — on vectors for the squared link; row norms precomputed in ``rn2``), and the scatter
    ``Σ a_i x_i`` in example order (partial sums held in registers, :func:`_gather_axpy`).  Every
    number is computed by the same expression as in the engine's kernel, and the sums run in the
    same order, so the result has the same bits.  ``mm``, ``cf``, ``yb``, ``sb``: scratch of
    length ≥ ``kr``."""
    d = X.shape[1]
    lam2_sw2 = lam * lam * _K._init_trial(out, W, W, False, lam != 0.0, r)
    wo = r * d
    i = 0
    while i + 4 <= kr:
        _dots4_lanes(X, ib, i, W, wo, d, mm)
        i += 4
    while i < kr:
        mm[i] = _dot_lanes(X, ib[i] * d, W, wo, d)
        i += 1
    fsum = 0.0
    if kind == _K.SQUARED and lam == 0.0:
        # fsum (Σ f ≤ kr, finite) only enters through λ·fsum = 0: not needed
        _squared_clip_coefs(mm, y, rn2, ib, kr, Cr, cf, yb, sb)
    else:
        for i in range(kr):
            row = ib[i]
            a, f = _glm_clip_coef(kind, mm[i], rn2[row], y[row], lam, lam2_sw2, Cr)
            cf[i] = a
            fsum += f
    _gather_axpy(out, wo, cf, X, ib, kr, d)
    _K._finish_trial(out, W, W, False, lam, fsum, r)


@numba.njit(cache=True, error_model="numpy", _nrt=False)
def _glm_scaled_trial(kind, X, ib, kr, W, S, y, lam, Cr, out, mm, cf, aa, cc, s2, r):
    """``out[r] = s_r ⊙ Σ_{i<kr} clip(s_r ⊙ g_{ib[i]}(w_r), C_r)`` for a dense GLM (DP²'s
    preconditioned phase): the engine's :func:`dpsim.problems._glm_kernels._dense_trial` with
    ``want_scale`` in passes, as :func:`_glm_clipped_trial` — the scaled sums ``(x·w, Σ s²x², Σ s²xw)``
    of four examples at a time (:func:`_dots4_scaled_lanes`, the kernel's two-accumulator order;
    the rest by the kernel's own :func:`~dpsim.problems._glm_kernels._dense_dot_scaled`), the clip
    coefficients by the kernel's :func:`~dpsim.problems._glm_kernels._finish_example`, the scatter
    in example order with the partial sums in registers, then the kernel's ``_finish_trial``
    (``⊙ s_r``, and ``+ λ Σf w``).  The same expressions in the same order: the same bits.
    ``mm``, ``cf``, ``aa``, ``cc``: scratch of length ≥ ``kr``; ``s2``: of length ``d`` (gets
    ``s_r ⊙ s_r``)."""
    d = X.shape[1]
    lam2_sw2 = lam * lam * _K._init_trial(out, W, S, True, lam != 0.0, r)
    for j in range(d):
        s2[j] = S[r, j] * S[r, j]
    wo = r * d
    i = 0
    while i + 4 <= kr:
        _dots4_scaled_lanes(X, ib, i, W, wo, s2, d, mm, aa, cc)
        i += 4
    while i < kr:
        m, a, c = _K._dense_dot_scaled(X, ib[i], W, S, r)
        mm[i] = m
        aa[i] = a
        cc[i] = c
        i += 1
    fsum = 0.0
    for i in range(kr):
        a, f, _ = _K._finish_example(kind, mm[i], aa[i], cc[i], y[ib[i]], lam, lam2_sw2, Cr)
        cf[i] = a
        fsum += f
    _gather_axpy(out, wo, cf, X, ib, kr, d)
    _K._finish_trial(out, W, S, True, lam, fsum, r)


@numba.njit(cache=True, error_model="numpy")
def _row_abs_max(X):
    """``max_j |x_ij|`` of every row."""
    out = np.zeros(X.shape[0])
    for i in range(X.shape[0]):
        m = 0.0
        for j in range(X.shape[1]):
            v = abs(X[i, j])
            if v > m:
                m = v
        out[i] = m
    return out


@numba.njit(cache=True, error_model="numpy", _nrt=False)
def _ball_dense_trial(kind, X, xmax, ib, kr, W, y, alpha, reg, out, XT, sc, r):
    """PASAN/PAGAN with a constant ellipsoid ``a_j = α`` (the ℓ2 ball of radius ``1/√α``) on a
    dense GLM (ρ = ``reg``): ``out[r] = Σ_{i<kr} π(g_i)`` over the examples ``ib[:kr]``; returns
    the number of projected examples (``λ_i > 0``).

    The engine's closed form (:func:`dpsim.privacy._ellipsoid._glm_trial`, constant-``a`` case):
    ``c_i = l'(x_i·w, y_i)`` with the margin summed over the columns in order, ``m = max_t |c x_t|``,
    ``||g|| = m √(Σ_t (c x_t / m)²)`` (in order of t), ``(f, λ)`` =
    :func:`dpsim.privacy._ellipsoid._ball_factor`, ``out += f c x_i`` in example order; with
    ``ρ ≠ 0`` ``||g||² = Σ_t (c x_t + ρ w_t)² + ρ²·(rounding bound)`` and ``out += ρ (Σ_i f_i) w``
    at the end (the engine's ρ ≠ 0 branch; :func:`_make_sumsq_t` with ``ridge``).  Same
    expressions, same order, so the same bits; faster because the examples run in vector lanes:
    the rows are transposed in 4×4 blocks into ``XT`` (``(d, ≥ kr + 8)`` scratch) while the margins
    of sixteen (then eight) examples accumulate in four (two) vectors (:func:`_make_rows_t`), the
    sums of squares likewise (:func:`_make_sumsq_t`), the factors on vectors (the loop has no
    branches), and the scatter keeps the row's partial sums in registers (:func:`_make_gather_axpy`).
    ``max_t |c x_t| = |c| · max_t |x_t|`` (rounding is monotone, so the product of ``|c|`` with the
    row's precomputed ``xmax`` is the maximum of the rounded products); a non-finite ``c`` takes the
    engine's loop.  The batch is padded to a multiple of eight lanes with copies of a valid row
    (``ib`` needs room for ``kr + 7`` indices) whose coefficients are set to zero, so every vector
    loop runs whole; the padded lanes are never added to ``out`` nor counted.  ``sc``: scratch
    ``(5, ≥ kr + 8)``."""
    d = X.shape[1]
    mm = sc[0]
    cc = sc[1]
    mxa = sc[2]
    im = sc[3]
    qq = sc[4]
    sqa = math.sqrt(alpha) if alpha > 0.0 else 0.0
    kp = (kr + 7) & ~7
    pad = ib[0] if kr > 0 else 0
    for i in range(kr, kp):
        ib[i] = pad
    # margins (lanes = examples, each a sequential sum over t) and the transposed rows
    wo = r * d
    i = 0
    while i + 16 <= kp:
        _rows16_t(X, ib, i, W, wo, d, XT, mm)
        i += 16
    if i < kp:
        _rows8_t(X, ib, i, W, wo, d, XT, mm)
    if kind == _E._SQUARED:
        for i in range(kr):
            cc[i] = mm[i] - y[ib[i]]
    elif kind == _E._LINEAR:
        for i in range(kr):
            cc[i] = -1.0
    else:
        for i in range(kr):
            cc[i] = _E._link_derivative(kind, mm[i], y[ib[i]])
    for i in range(kr, kp):
        cc[i] = 0.0
    if reg == 0.0:
        # m = max_t |c x_t| and 1/m (0 where m is 0 or not finite: the engine then leaves q = 0)
        for i in range(kr):
            mxa[i] = xmax[ib[i]]
        for i in range(kr, kp):
            mxa[i] = 0.0
        for i in range(kp):
            mx = abs(cc[i]) * mxa[i]
            mxa[i] = mx
            im[i] = 1.0 / (mx if (mx > 0.0 and mx < math.inf) else math.inf)
        for i in range(kr):
            c = cc[i]
            if not abs(c) < math.inf:  # the engine's loop (NaN products never win the max)
                mx = 0.0
                for t in range(d):
                    v = abs(c * XT[t, i])
                    if v > mx:
                        mx = v
                mxa[i] = mx
                im[i] = 1.0 / (mx if (mx > 0.0 and mx < math.inf) else math.inf)
        i = 0
        while i + 16 <= kp:
            _sumsq16_t(XT, i, d, cc, im, W, wo, reg, qq)
            i += 16
        if i < kp:
            _sumsq8_t(XT, i, d, cc, im, W, wo, reg, qq)
        for i in range(kp):
            mx = mxa[i]
            q = qq[i] if (mx > 0.0 and mx < math.inf) else 0.0
            f, lm = _E._ball_factor(mx * math.sqrt(q), sqa, alpha)
            cc[i] = f * cc[i]
            im[i] = lm
    else:
        # ||g||² = Σ_t (c x_t + ρ w_t)² + ρ²(||w||² − Σ_t w_t²) with the engine's rounding bound
        # added to the second term; on dense rows its Σ_t w_t² is ||w||² summed in the same
        # order, so the difference is w2 − w2 (0, or NaN when w2 is not finite)
        w2 = 0.0
        for j in range(d):
            w2 += W[r, j] * W[r, j]
        rest = w2 - w2 + (d + d + 2) * 0.5 * _E._EPS * w2
        if rest < 0.0:
            rest = 0.0
        i = 0
        while i + 16 <= kp:
            _ridge_sumsq16_t(XT, i, d, cc, im, W, wo, reg, qq)
            i += 16
        if i < kp:
            _ridge_sumsq8_t(XT, i, d, cc, im, W, wo, reg, qq)
        for i in range(kp):
            f, lm = _E._ball_factor(math.sqrt(qq[i] + reg * reg * rest), sqa, alpha)
            mxa[i] = f
            cc[i] = f * cc[i]
            im[i] = lm
    nproj = 0
    for i in range(kr):
        nproj += im[i] > 0.0
    for j in range(d):
        out[r, j] = 0.0
    _gather_axpy_all(out, wo, cc, X, ib, kr, d)
    if reg != 0.0:  # + ρ (Σ_i f_i) w, the f_i summed in example order
        wcoef = 0.0
        for i in range(kr):
            wcoef += mxa[i]
        cw = reg * wcoef
        for j in range(d):
            out[r, j] += cw * W[r, j]
    return nproj


@numba.njit(cache=True, _nrt=False)
def _example_grad(pk, W, r, row, Wq, Yq, h, xi, qreg, g):
    """Per-example gradient of a quadratic problem into ``g`` (d,)."""
    d = W.shape[1]
    if pk == P_NQUAD:  # h ⊙ w + ξ_i
        for j in range(d):
            g[j] = h[j] * W[r, j] + xi[row, j]
    else:  # 2 W_iᵀ (W_i w − y_i) + (2 reg / n) w
        k = Wq.shape[1]
        for j in range(d):
            g[j] = 0.0
        for a in range(k):
            s = 0.0
            for j in range(d):
                s += Wq[row, a, j] * W[r, j]
            res = s - Yq[row, a]
            for j in range(d):
                g[j] += Wq[row, a, j] * res
        for j in range(d):
            g[j] = 2.0 * g[j] + qreg * W[r, j]


@numba.njit(cache=True, _nrt=False)
def _quad_trial(pk, ib, kr, W, S, want_scale, Cr, Wq, Yq, h, xi, qreg, out, g, r):
    """``out[r] = Σ_i clip(s_r ⊙ g_i, C_r)`` over the ``kr`` examples ``ib[:kr]`` of trial ``r``
    for a quadratic problem (the engine's generic path: materialize, scale, clip, add)."""
    d = W.shape[1]
    for j in range(d):
        out[r, j] = 0.0
    for i in range(kr):
        _example_grad(pk, W, r, ib[i], Wq, Yq, h, xi, qreg, g)
        n2 = 0.0
        for j in range(d):
            if want_scale:
                g[j] = g[j] * S[r, j]
            n2 += g[j] * g[j]
        nrm = math.sqrt(n2)
        f = 1.0
        if nrm > Cr:
            f = Cr / nrm
        for j in range(d):
            out[r, j] += g[j] * f


@numba.njit(cache=True)
def _ellipsoid_trial(pk, ib, kr, W, Wq, Yq, h, xi, qreg, vals, cols, ptr, dense_d, y, link,
                     reg, Amat, SA, ISA, arow, const_a, out, lam, nomask, g, pv, uu, r):
    """``out[r] = Σ_i π_A(g_i)`` over the ``kr`` examples ``ib[:kr]``, the multipliers into
    ``lam[0, :kr]`` (the engine's two paths: GLM rows through
    :func:`dpsim.privacy._ellipsoid._glm_trial`, other problems per materialized gradient; the
    step loop calls :func:`_ball_dense_trial` itself for the ℓ2 ball on a dense GLM)."""
    if pk == P_GLM:
        # the engine's kernel on one-row views of this trial (row 0 of each view is trial r)
        _E._glm_trial(0, vals, cols, ptr, dense_d, y, link, reg, W[r:r + 1],
                      ib[:kr].reshape((1, kr)), nomask, False, Amat, SA, ISA, arow[r:r + 1],
                      const_a, out[r:r + 1], lam)
        return
    d = W.shape[1]
    k = arow[r]
    for j in range(d):
        out[r, j] = 0.0
    for i in range(kr):
        _example_grad(pk, W, r, ib[i], Wq, Yq, h, xi, qreg, g)
        lam[0, i] = _E._project_vec(g, Amat[k], SA[k], ISA[k], pv, uu)
        for j in range(d):
            out[r, j] += pv[j]


@numba.njit(cache=True, inline="always")
def _draw_batch(sk, srng, n_s, sizes, r, kcyc, grp, b, bits, ub, ib, private_idx):
    """Trial ``r``'s batch of this step into ``ib[:k]``; returns ``k``.  Draws from the sampler's
    generator exactly what :meth:`dpsim.sampling.Sampler.draw` draws for this trial (the batch
    sizes of the step were drawn before, in ``sizes``): ``k`` uniforms and Floyd's subset
    (stream ``floyd-v1``) for Poisson, fixed and cyclic Poisson sampling, ``b`` bounded integers
    for sampling with replacement; then the cyclic group's and the public split's index maps."""
    if sk == S_REPLACEMENT:
        k = b
        for i in range(k):
            ib[i] = _BG.draw_integers(srng, 0, n_s)
    else:
        k = sizes[r]
        for i in range(k):
            ub[i] = _BG.draw_double(srng)
        _SK.floyd_row(n_s, k, ub, bits, ib)
        if sk == S_CYCLIC:
            for i in range(k):
                ib[i] = grp + kcyc * ib[i]
    if private_idx.shape[0] > 0:
        for i in range(k):
            ib[i] = private_idx[ib[i]]
    return k


@numba.njit(cache=True, error_model="numpy", _nrt=False)
def _ellipsoid_update(out, z, ens, noisy, fb, fbi, recip, A, W, eps_r, neglr_r, per_norm, r):
    """PASAN/PAGAN's step for trial ``r`` from ``out[r] = Σ_i π(g_i)``: ``ĝ = out/b + z ⊙ σ``
    (``σ = ens[r]``, or ``ens[0]`` for all trials; into ``out[r]``; ``out·fbi`` when ``recip``, ``b``
    a power of two and ``fbi = 1/b``: the same number), then AdaGrad per coordinate
    (PAGAN: ``A += ĝ²``, ``w += −η ĝ/max(√A, ε)``) or on ``||ĝ||²`` (PASAN: ``A[r, 0]``) — the
    engine's expressions in its order.  Each loop is elementwise with its invariant branches
    outside and NumPy's error model (a division by zero gives inf/NaN, as in the engine's NumPy
    arithmetic, rather than raising), so the loops run on vectors."""
    d = W.shape[1]
    er = 0 if ens.shape[0] == 1 else r
    if noisy and recip:
        for j in range(d):
            out[r, j] = out[r, j] * fbi + z[j] * ens[er, j]
    elif noisy:
        for j in range(d):
            out[r, j] = out[r, j] / fb + z[j] * ens[er, j]
    elif recip:
        for j in range(d):
            out[r, j] = out[r, j] * fbi
    else:
        for j in range(d):
            out[r, j] = out[r, j] / fb
    if per_norm:
        qq = 0.0
        for j in range(d):
            qq += out[r, j] * out[r, j]
        v = A[r, 0] + qq
        A[r, 0] = v
        den = max(math.sqrt(v), eps_r)
        for j in range(d):
            W[r, j] = W[r, j] + (out[r, j] / den) * neglr_r
    else:
        for j in range(d):
            gt = out[r, j]
            v = A[r, j] + gt * gt
            A[r, j] = v
            W[r, j] = W[r, j] + (gt / max(math.sqrt(v), eps_r)) * neglr_r


@numba.njit(cache=True)
def _scratch(cap, bd):
    """Per-trial scratch of :func:`_run_steps` for batches of up to ``cap`` examples: ``ib``
    (indices, with room for the ℓ2-ball kernel's eight padding lanes), the ball kernel's
    transposed rows ``XT`` (``(bd, cap + 8)``; ``bd = 0`` when it does not run) and its five
    vectors ``sc``, then ``ub`` (uniforms), ``lam`` (multipliers) and ``mm``, ``cf``, ``yb``,
    ``sb`` (the clipped-sum kernel's)."""
    return (np.empty(cap + 8, dtype=np.int64), np.empty((bd, cap + 8)),
            np.zeros((5 if bd > 0 else 0, cap + 8)), np.empty(cap), np.empty((1, cap)),
            np.empty(cap), np.empty(cap), np.empty(cap), np.empty(cap))


class Draws(NamedTuple):
    """The sampler's side of a block: its kind code, the ``n`` (per cyclic group) and ``q`` it
    draws with, the number of cyclic groups, the private rows (empty: all), Σ batch sizes."""

    sk: int
    n_all: Any
    p_all: Any
    kcyc: int
    private_idx: Any
    bsum: Any


class ProblemArgs(NamedTuple):
    """The problem as the kernel reads it (from :meth:`dpsim.problems.Problem.kernel_view`;
    dummies of the right types for the other kinds) and the domain's code and radius."""

    pk: int
    X: Any
    rn2: Any
    xmax: Any
    y: Any
    link: int
    reg: float
    Wq: Any
    Yq: Any
    h: Any
    xi: Any
    qreg: float
    dk: int
    drad: float
    vals: Any
    cols: Any
    ptr: Any
    dense_d: int


class Hyper(NamedTuple):
    """Per-trial hyperparameters ``(R,)`` and the optimizer's static switches."""

    b: int
    noisy: bool
    neglr: Any
    neglr2: Any
    clip: Any
    clip2: Any
    std: Any
    std2: Any
    beta: Any
    beta1: Any
    beta2: Any
    eps: Any
    phi: Any
    floor: Any
    use_phi: bool
    eps_zero: bool
    s1: int
    s2: int
    rule: int
    bias: Any
    per_norm: bool


class BlockState(NamedTuple):
    """Parameters ``W`` and the optimizer's two state arrays (updated in place)."""

    W: Any
    A: Any
    Bst: Any


class EllipsoidArgs(NamedTuple):
    """PASAN/PAGAN's ellipsoid (from the privatizer's state) and the projected fractions."""

    Amat: Any
    SA: Any
    ISA: Any
    arow: Any
    const_a: Any
    ens: Any
    frac: Any


class Scratch(NamedTuple):
    """Work arrays the block reuses (no allocation per step)."""

    out: Any
    S: Any
    g: Any
    pv: Any
    uu: Any


def _make_run_steps(ok):
    """The step loop of :func:`run` for the optimizer kind ``ok`` (``SGD``, ``MOMENTUM``,
    ``ADAM``, ``DP2`` or ``ELLIPSOID``), which the compiled loop holds as a constant: each kind
    gets its own machine code with the other kinds' branches removed (one loop with ``ok`` as an
    argument ran ~8 % slower at d = 20: a large function whose register allocation serves every
    kind).  Numba caches each kind's loop under the hash of its closure, i.e. of ``ok``."""

    @numba.njit(cache=True)
    def run_steps(t0, K, step0, count, srng, nrng, cor1, cor2, dr, pr, hy, st, el, sc):
        """Steps ``t0 + 1 … t0 + K`` of the engine loop, batches and noise included, in place on
        ``W`` (params), ``A``, ``Bst`` (optimizer state: momentum trace | Adam m, v | DP² v, G |
        PASAN/PAGAN v) and ``bsum`` (Σ batch sizes); returns the Adam count after the block.

        Random draws, in the engine's order: per step, the sampler generator ``srng`` gives the ``R``
        batch sizes (one ``Binomial`` each, Poisson and cyclic Poisson), then trial by trial that
        trial's uniforms (Floyd) or bounded integers (replacement); the noise generator ``nrng``
        gives, trial by trial, ``d`` standard normals (the C order of the engine's ``(R, d)`` draw).
        ``srng``/``nrng`` are 6-word PCG64 state arrays (:mod:`dpsim._bitgen`, the default) or the
        ``Generator`` objects themselves (Numba's compiled methods); both produce NumPy's streams bit
        for bit (``tests/test_bitgen.py``, ``tests/test_fused.py``), so this is the engine's run.  The
        binomial set-up (NumPy's ``binomial_t`` and BTPE's table of ratios) is computed once per
        ``(n, p)``.  Step-major: at each step every trial takes its step (the draws are step-major).

        Arguments besides the step numbers, the Adam count, the two generators and Adam's
        ``(K, R)`` bias corrections come as NamedTuples: :class:`Draws`, :class:`ProblemArgs`,
        :class:`Hyper`, :class:`BlockState`, :class:`EllipsoidArgs`, :class:`Scratch`."""
        sk, n_all, p_all, kcyc, private_idx, bsum = dr
        (pk, X, rn2, xmax, y, link, reg, Wq, Yq, h, xi, qreg, dk, drad, vals, cols, ptr,
         dense_d) = pr
        (b, noisy, neglr, neglr2, clip, clip2, std, std2, beta, beta1, beta2, eps, phi, floor,
         use_phi, eps_zero, s1, s2, rule, bias, per_norm) = hy
        W, A, Bst = st
        Amat, SA, ISA, arow, const_a, ens, frac = el
        out, S, g, pv, uu = sc
        R, d = W.shape
        fb = float(b)
        # b a power of two: x / b and x · (1/b) are the same number (both the exact x·2^-k rounded
        # once, subnormal, infinite and NaN results included), and a product costs a fraction of
        # a division (the chain divides; dpsim.transforms._fused_release._noisy_mean does the same)
        recip = b > 0 and (b & (b - 1)) == 0
        fbi = 1.0 / fb
        cycle = s1 + s2
        n = n_all[0]
        sizes = np.empty(R, dtype=np.int64)
        cap = 16
        # the ℓ2-ball kernel pads a batch to a multiple of eight lanes: ib has room for 8 more, and
        # its scratch (the transposed rows XT, five vectors sc) is only allocated when it runs
        ball = ok == ELLIPSOID and pk == P_GLM
        ib, XT, sc, ub, lam, mm, cf, yb, sb = _scratch(cap, d if ball else 0)
        bits = np.zeros((n + 63) // 64, dtype=np.uint64)
        z = np.zeros(d)
        nomask = np.ones((1, 1), dtype=np.bool_)
        cnt = count
        p = 0
        bn = -1  # the n of the binomial set-up held in bp, btab (p_all[0] is fixed in a call)
        bp = _BG.binomial_setup(0, 0.0)
        btab = _BG.binomial_table(bp)
        b1 = b2 = c1 = c2 = 0.0
        for k in range(K):
            t = t0 + k + 1
            # -- the step's batch sizes (all trials first, as Sampler.draw does)
            grp = 0
            n_s = n
            if sk == S_CYCLIC:
                grp = (step0 + k) % kcyc
                n_s = n_all[grp]
            kmax = b
            if sk == S_POISSON or sk == S_CYCLIC:
                if n_s != bn:  # NumPy's binomial_t and BTPE's ratios: once per (n, p)
                    bn = n_s
                    bp = _BG.binomial_setup(n_s, p_all[0])
                    btab = _BG.binomial_table(bp)
                kmax = 0
                for r in range(R):
                    sizes[r] = _BG.draw_binomial(srng, bp, btab)
                    if sizes[r] > kmax:
                        kmax = sizes[r]
            elif sk == S_FIXED:
                for r in range(R):
                    sizes[r] = b
            if kmax > cap:
                cap = max(kmax, 2 * cap)
                ib, XT, sc, ub, lam, mm, cf, yb, sb = _scratch(cap, d if ball else 0)
            if ok == ADAM:
                cnt += 1
            phase2 = False
            if ok == DP2:
                p = (t - 1) % cycle
                phase2 = p >= s1
            Cv = clip2 if phase2 else clip
            for r in range(R):
                kr = _draw_batch(sk, srng, n_s, sizes, r, kcyc, grp, b, bits, ub, ib, private_idx)
                bsum[r] += kr
                if noisy:
                    for j in range(d):
                        z[j] = _BG.draw_normal(nrng)
                if ok == DP2:
                    if p == s1:  # refresh v from the accumulated releases (before this step's update)
                        for j in range(d):
                            a = Bst[r, j] / float(s1)
                            sq = a * a
                            if bias.shape[0] > 0:
                                sq = sq - bias[r] / (float(s1) * fb * fb)
                            v = A[r, j]
                            if rule == 0:
                                v = v * beta[r] + sq * (1.0 - beta[r])
                            elif rule == 1:
                                v = v + sq
                            else:
                                df = v - sq
                                sg = 1.0 if df > 0 else (-1.0 if df < 0 else 0.0)
                                v = v - (1.0 - beta[r]) * sg * sq
                            A[r, j] = v
                            Bst[r, j] = Bst[r, j] * 0.0
                    if phase2:
                        for j in range(d):
                            v = A[r, j]
                            S[r, j] = 1.0 / (math.sqrt(v if v > 0.0 else 0.0) + eps[r])
                if ok == ELLIPSOID:
                    if ball and const_a[arow[r]] >= 0.0:
                        # the closed form, called here rather than through _ellipsoid_trial: a call
                        # with its thirty arguments cost ~0.4 µs a trial-step at d = 20
                        nproj = _ball_dense_trial(link, X, xmax, ib, kr, W, y, const_a[arow[r]], reg,
                                                  out, XT, sc, r)
                    else:
                        _ellipsoid_trial(pk, ib, kr, W, Wq, Yq, h, xi, qreg, vals, cols, ptr,
                                         dense_d, y, link, reg, Amat, SA, ISA, arow, const_a, out, lam,
                                         nomask, g, pv, uu, r)
                        nproj = 0
                        for i in range(kr):
                            if lam[0, i] > 0:
                                nproj += 1
                    frac[r] = nproj / max(kr, 1)
                    _ellipsoid_update(out, z, ens, noisy, fb, fbi, recip, A, W, eps[r], neglr[r],
                                      per_norm, r)
                    _project_domain(W, r, dk, drad)
                    continue
                if pk == P_GLM and not phase2:
                    _glm_clipped_trial(link, X, rn2, ib, kr, W, y, reg, Cv[r], out, mm, cf, yb, sb, r)
                elif pk == P_GLM:  # DP² phase 2: the preconditioned clipped sum (g: scratch for s²)
                    _glm_scaled_trial(link, X, ib, kr, W, S, y, reg, Cv[r], out, mm, cf, yb, sb, g, r)
                else:
                    _quad_trial(pk, ib, kr, W, S, phase2, Cv[r], Wq, Yq, h, xi, qreg, out, g, r)
                sd = std2[r] if phase2 else std[r]
                if ok == ADAM:
                    b1 = beta1[r]
                    b2 = beta2[r]
                    c1 = cor1[k, r]  # 1 − β1ᵗ, 1 − β2ᵗ: the chain's values (see _bias_corrections)
                    c2 = cor2[k, r]
                for j in range(d):
                    if noisy:
                        x = z[j] * sd + out[r, j]
                    else:
                        x = out[r, j]
                    gt = x * fbi if recip else x / fb
                    if ok == SGD:
                        u = gt * neglr[r]
                    elif ok == MOMENTUM:
                        tr = A[r, j] * beta[r] + gt
                        A[r, j] = tr
                        u = tr * neglr[r]
                    elif ok == ADAM:
                        m = A[r, j] * b1 + gt * (1.0 - b1)
                        v = Bst[r, j] * b2 + (gt * gt) * (1.0 - b2)
                        A[r, j] = m
                        Bst[r, j] = v
                        m_hat = m / c1
                        v_hat = v / c2
                        if use_phi:
                            v_hat = max(v_hat - phi[r], floor[r])
                        den = math.sqrt(v_hat) if eps_zero else math.sqrt(v_hat) + eps[r]
                        u = (m_hat / den) * neglr[r]
                    else:  # DP²
                        if phase2:
                            u = gt * neglr2[r]
                        else:
                            Bst[r, j] = Bst[r, j] + gt
                            u = gt * neglr[r]
                    W[r, j] = W[r, j] + u
                _project_domain(W, r, dk, drad)
        return cnt

    return run_steps


_RUN_STEPS: dict[int, object] = {}


def _run_steps(ok):
    """The compiled step loop for the optimizer kind ``ok`` (made once per process, compiled on
    its first call or loaded from Numba's cache)."""
    f = _RUN_STEPS.get(ok)
    if f is None:
        f = _RUN_STEPS[ok] = _make_run_steps(ok)
    return f


@numba.njit(cache=True, _nrt=False)
def _project_domain(W, r, dk, drad):
    d = W.shape[1]
    if dk == D_BOX:
        for j in range(d):
            W[r, j] = min(max(W[r, j], -drad), drad)
    elif dk == D_BALL:
        n2 = 0.0
        for j in range(d):
            n2 += W[r, j] * W[r, j]
        nrm = math.sqrt(n2)
        if nrm > drad:
            f = drad / nrm
            for j in range(d):
                W[r, j] = W[r, j] * f


# ------------------------------------------------------------------------------------------------
# planning: recognize the (problem, optimizer) pair, or say why not


def _col(v, R):
    return np.ascontiguousarray(np.broadcast_to(np.asarray(v, dtype=np.float64), (R,)))


def _gauss_std(clip, sigma):
    """``(std, draws)`` exactly as :func:`dpsim.privacy.privatizers.gaussian_privatizer` decides:
    no noise when any clip is infinite or σ is the scalar 0."""
    c = hyper("clip", clip, "(0, inf]")
    s = hyper("noise_multiplier", sigma, "[0, inf)")
    if any_inf(c):
        return None, False
    std = product(s, c)
    return std, not is_zero(std)


def _same_chain(optimizer) -> str | None:
    """Why ``optimizer`` is not the registered optimizer of its name with its hyperparameters."""
    try:
        ref = optimizers.get(optimizer.name, **optimizer.hyperparameters)
    except (KeyError, ValueError, TypeError) as exc:
        return f"cannot rebuild {optimizer.name!r} from its hyperparameters ({exc})"
    if tuple(ref.transform.names) != tuple(optimizer.transform.names):
        return f"piece names {optimizer.transform.names} differ from the registered {ref.transform.names}"
    ev_a = [(type(e).__name__, getattr(e, "noise_multiplier", None)) for e in optimizer.events]
    ev_b = [(type(e).__name__, getattr(e, "noise_multiplier", None)) for e in ref.events]
    if ev_a != ev_b:
        return "declared events differ from the registered optimizer's"
    if set(optimizer.probes) != set(ref.probes) or optimizer.public_fraction != ref.public_fraction:
        return "probes or public split differ from the registered optimizer's"
    return None


class FusedPlan:
    """A recognized (problem, optimizer) pair: the kernel's codes and per-trial hyperparameters."""

    def __init__(self, problem, optimizer, R):
        self.problem, self.optimizer, self.R = problem, optimizer, R

    def describe(self):
        return f"{self.optimizer.name} on {self.problem.name}"


def plan(problem, optimizer, *, trials, backend="numpy", dtype="float64"):
    """A :class:`FusedPlan` when the fast path covers this run, else a string saying why not."""
    if backend != "numpy" or dtype != "float64":
        return f"the fast path runs on backend='numpy' with dtype='float64' (got {backend}/{dtype})"
    name = optimizer.name
    if name not in SUPPORTED_OPTIMIZERS:
        return f"optimizer {name!r} has no fused kernel (supported: {', '.join(SUPPORTED_OPTIMIZERS)})"
    why = _same_chain(optimizer)
    if why is not None:
        return why
    hp = dict(optimizer.hyperparameters)
    if hp.get("phi_prime") is not None:
        return "dp_adam_bc with a Φ' override (phi_prime) has no fused kernel"
    if hp.get("noise", "gaussian") != "gaussian":
        return f"correlated noise ({hp['noise']!r}) has no fused kernel"
    R = trials
    P = FusedPlan(problem, optimizer, R)
    # -- problem: only through its kernel view (Problem.kernel_view)
    view = P.view = problem.kernel_view()
    if isinstance(view, GLMView):
        if view.sparse:
            return "sparse GLM features have no fused kernel (the engine's CSR kernel is used)"
        P.pk = P_GLM
    elif isinstance(view, QuadraticView):
        P.pk = P_RQUAD
    elif isinstance(view, NoisyQuadraticView):
        P.pk = P_NQUAD
    else:
        return (f"problem {problem.name!r} has no kernel view (only the built-in GLMs and "
                "quadratics, not subclasses, have one)")
    dom = problem.domain
    if dom is None:
        P.dk, P.drad = D_NONE, 0.0
    elif isinstance(dom, Box):
        P.dk, P.drad = D_BOX, float(dom.radius)
    elif isinstance(dom, Ball):
        P.dk, P.drad = D_BALL, float(dom.radius)
    else:  # pragma: no cover - Problem only accepts Box/Ball
        return f"domain {dom!r} has no fused projection"
    # -- optimizer
    z = np.zeros(R)
    P.neglr2 = P.clip2 = P.std2 = P.beta = P.beta1 = P.beta2 = P.eps = P.phi = P.floor = z
    P.use_phi, P.eps_zero, P.s1, P.s2, P.rule, P.bias = False, False, 1, 1, 0, np.zeros(0)
    P.per_norm = False
    P.neglr = _col(-np.asarray(hyper("lr", hp["lr"], "[0, inf)")), R)
    private = name.startswith("dp")
    if name in ("pasan", "pagan"):
        P.noisy, P.clip, P.std = False, z, z  # the noise scale is read from the state in run()
    elif private:
        std, P.noisy = _gauss_std(hp["clip"], hp["noise_multiplier"])
        P.clip = _col(hp["clip"], R)
        P.std = _col(std if std is not None else 0.0, R)
    else:
        P.noisy = False
        P.clip = _col(np.inf, R)
        P.std = z
    if name in ("sgd", "dp_sgd"):
        P.ok = SGD
    elif name in ("momentum", "dp_sgdm"):
        P.ok = MOMENTUM
        P.beta = _col(hp["beta"], R)
    elif name in ("adam", "dp_adam", "dp_adam_bc"):
        P.ok = ADAM
        P.beta1, P.beta2 = _col(hp["beta1"], R), _col(hp["beta2"], R)
        if name == "dp_adam_bc":
            P.eps_zero = True
            P.use_phi = True
            # γ' = "auto" is 0.01·Φ: resolved in run() with Φ, by the chain's own function
            P.gamma_auto = isinstance(hp["gamma_prime"], str)
            P.floor = z if P.gamma_auto else _col(hp["gamma_prime"], R)
            # Φ = (σC/b)² needs the batch size: set in run() (0 without clipping)
            P.phi_pending = not any_inf(hp["clip"])
        else:
            P.eps = _col(hp["eps"], R)
            P.eps_zero = False
    elif name in ("pasan", "pagan"):
        # A, the noise scale and the radius are set up by the privatizer at the first step, which
        # the engine's own transform takes (run()); the kernel continues from its state
        P.ok = ELLIPSOID
        P.per_norm = name == "pasan"
        P.eps = _col(hp["eps"], R)
    else:  # DP²
        P.ok = DP2
        P.rule = RULE[name]
        P.s1 = int(hp["s1"])
        P.s2 = P.s1 if hp["s2"] is None else int(hp["s2"])
        lr2 = hp["lr"] if hp["lr2"] is None else hp["lr2"]
        P.neglr2 = _col(-np.asarray(hyper("lr2", lr2, "[0, inf)")), R)
        clip2 = hp["clip"] if hp["clip2"] is None else hp["clip2"]
        std2, noisy2 = _gauss_std(clip2, hp["noise_multiplier"])
        if noisy2 != P.noisy:
            return "DP² phases that differ in whether they draw noise have no fused kernel"
        P.clip2 = _col(clip2, R)
        P.std2 = _col(std2 if std2 is not None else 0.0, R)
        P.beta = _col(hp["beta"], R)
        P.eps = _col(hp["eps"], R)
        if hp["unbias"]:
            s = np.asarray(hp["noise_multiplier"], dtype=float)
            c = np.asarray(hp["clip"], dtype=float)
            P.bias = _col((s * s) * (c * c), R)
    return P


# ------------------------------------------------------------------------------------------------
# state ↔ arrays


def _bias_corrections(P, count, K, R):
    """Adam's divisors ``1 − β1ᵗ`` and ``1 − β2ᵗ`` for the block's steps ``t = count + 1 …
    count + K``, as ``(K, R)`` arrays computed by the chain's own expression
    (:func:`dpsim.transforms.preconditioners.bias_correction`) on the chain's operands (a Python
    float, or the per-trial ``(R, 1)`` column ``ctx.hp`` makes): the kernel reads them instead of
    raising β to a power itself, so its Adam is the chain's to the last bit.  ``(1, 1)`` dummies
    for the other optimizers."""
    if P.ok != ADAM:
        return _DUMMY_COR, _DUMMY_COR
    hp = P.optimizer.hyperparameters
    out = []
    for name in ("beta1", "beta2"):
        beta = hp[name]
        beta = beta if isinstance(beta, float) else np.asarray(beta, dtype=np.float64).reshape(-1, 1)
        c = np.empty((K, R))
        for k in range(K):
            c[k] = np.reshape(_PRE.bias_correction(beta, count + k + 1), -1)
        out.append(c)
    return out[0], out[1]


_DUMMY_COR = np.zeros((1, 1))


def _state_arrays(P, state, params):
    """``(A, Bst, count)`` kernel arrays from the chain state (copies)."""
    R, d = params.shape
    zero = np.zeros((R, d))
    if P.ok == MOMENTUM:
        return np.array(state["momentum"].trace, dtype=np.float64, order="C"), zero, 0
    if P.ok == ADAM:
        s = state["preconditioner"]
        return (np.array(s.m, dtype=np.float64, order="C"), np.array(s.v, dtype=np.float64, order="C"),
                int(s.count))
    if P.ok == DP2:
        s = state["preconditioner"]
        return np.array(s.v, dtype=np.float64, order="C"), np.array(s.G, dtype=np.float64, order="C"), 0
    if P.ok == ELLIPSOID:
        v = np.asarray(state["preconditioner"].v, dtype=np.float64)
        A = np.zeros((R, d))
        A[:, : v.shape[1]] = v
        return A, zero, 0
    return zero, zero, 0


def _rebuild_state(P, state, A, Bst, count):
    """The chain state with this block's arrays (the engine's own state types)."""
    new = dict(state)
    if P.ok == MOMENTUM:
        new["momentum"] = state["momentum"]._replace(trace=A.copy())
    elif P.ok == ADAM:
        new["preconditioner"] = state["preconditioner"]._replace(m=A.copy(), v=Bst.copy(), count=count)
    elif P.ok == DP2:
        new["preconditioner"] = state["preconditioner"]._replace(v=A.copy(), G=Bst.copy())
    elif P.ok == ELLIPSOID:
        v = A[:, :1].copy() if P.per_norm else A.copy()
        new["preconditioner"] = state["preconditioner"]._replace(v=v)
        new["privatizer"] = state["privatizer"]._replace(projected=P.frac.copy())
    return new


# ------------------------------------------------------------------------------------------------
# the loop


def _sampler_args(sampler):
    """``(kind code, n per group, rate, k)`` of a :class:`dpsim.sampling.Sampler` for the kernel:
    ``n_all`` holds ``n`` (or, for cyclic Poisson sampling, each group's size ``n_g``) and
    ``p_all[0]`` the inclusion rate, computed by the same expressions as ``Sampler.draw``."""
    n = sampler.n
    if sampler.kind == CYCLIC:
        k = sampler.k
        n_all = np.array([(n - g + k - 1) // k for g in range(k)], dtype=np.int64)
        return S_CYCLIC, n_all, np.array([cyclic_rate(sampler.b / n, k)]), k
    kind = {"poisson": S_POISSON, "fixed": S_FIXED, "replacement": S_REPLACEMENT}[sampler.sampling]
    return kind, np.array([n], dtype=np.int64), np.array([sampler.b / n]), 1


#: Environment switch for benchmarks and A/B checks: ``DPSIM_FUSED_RNG=numba`` makes the kernel
#: draw through Numba's compiled ``Generator`` methods (the reference path) instead of the inlined
#: bit generator of :mod:`dpsim._bitgen`; both give the same streams (``tests/test_fused.py``).
RNG_ENV = "DPSIM_FUSED_RNG"


def _inline_rng(srng, nrng) -> bool:
    """Whether the kernel draws through :mod:`dpsim._bitgen` on state arrays: both generators
    are ``Generator(PCG64)`` (what it reproduces) and ``DPSIM_FUSED_RNG`` is not ``numba``."""
    mode = os.environ.get(RNG_ENV, "inline")
    if mode not in ("inline", "numba"):
        raise ValueError(f"{RNG_ENV} must be 'inline' or 'numba', got {mode!r}")
    return mode == "inline" and _BG.supports(srng) and _BG.supports(nrng)


def run(P, *, params, state, steps, rec_steps, record, sampler, private_idx, backend, ctx,
        batch_sizes_sum, bar=None):
    """Steps ``1 … steps`` of the engine loop in fused blocks (ending at record steps).

    ``record(k, params, state)`` is the engine's recorder; ``params``/``state`` are the engine's
    initial ones (already recorded at step 0).  Returns ``(params, state)`` after the last step.
    """
    prob = P.problem
    R, d = params.shape
    b = ctx.batch_size
    t = 0
    next_rec = 1
    K_rec = rec_steps.size
    if P.ok == ELLIPSOID and state["privatizer"].a is None and steps > 0:
        # step 1 through the engine's own transform: the privatizer sets up A = C/B² and the noise
        # scale from the problem (its checks and errors included); the kernel continues from there
        ctx.t = 1
        bi = sampler.draw()
        batch_sizes_sum += bi.sizes
        idx = bi.idx if private_idx is None else private_idx[bi.idx]
        batch = Batch(prob, params, idx, bi.mask, b, None)
        updates, state = P.optimizer.transform.update(batch, state, params, ctx)
        params = params + updates
        if prob.has_domain:
            params = prob.project(params)
        t = 1
        if bar is not None:
            bar.update(1)
        if next_rec < K_rec and int(rec_steps[next_rec]) == 1:
            record(next_rec, params, state)
            next_rec += 1
    W = np.array(params, dtype=np.float64, order="C")
    A, Bst, count = _state_arrays(P, state, W)
    e1 = np.zeros(1)
    e2 = np.zeros((1, 1))
    e3 = np.zeros((1, 1, 1))
    ie1 = np.zeros(1, dtype=np.int64)
    Amat, SA, ISA, arow, const_a, ens = e2, e2, e2, ie1, e1, e2
    P.frac = np.zeros(R)
    if P.ok == ELLIPSOID:
        es = state["privatizer"]
        Amat = np.ascontiguousarray(es.a, dtype=np.float64)
        SA = np.sqrt(Amat)
        with np.errstate(divide="ignore"):
            ISA = 1.0 / SA
        arow = (np.zeros(R, dtype=np.int64) if Amat.shape[0] == 1 else np.arange(R, dtype=np.int64))
        first = Amat[:, :1]
        const_a = np.ascontiguousarray(np.where(np.all(Amat == first, axis=1), first[:, 0], -1.0))
        P.noisy = es.noise_std is not None
        if P.noisy:
            ens = np.ascontiguousarray(np.asarray(es.noise_std, dtype=np.float64).reshape(-1, d))
        P.frac = np.array(es.projected, dtype=np.float64) if es.projected is not None else P.frac
    if P.ok == ADAM and getattr(P, "phi_pending", False):
        hp = P.optimizer.hyperparameters
        P.phi = _col((np.asarray(hp["noise_multiplier"], dtype=float) * np.asarray(hp["clip"], dtype=float)
                      / float(b)) ** 2, R)
    if P.ok == ADAM and getattr(P, "gamma_auto", False):
        # dp_adam_bc(gamma_prime="auto"): the chain's γ' = auto_gamma_prime(Φ), Φ as above (the
        # zeros of plan() without clipping), the same float64 operations, hence the same floor
        P.floor = _col(optimizers.adaptive.auto_gamma_prime(P.phi), R)
    # problem arrays (dummies of the right types where unused)
    X, y, link, reg = e2, e1, 0, 0.0
    vals, cols, ptr, dense_d = e1, ie1, ie1, 0
    Wq, Yq, h, xi, qreg = e3, e2, e1, e2, 0.0
    rn2 = xmax = e1
    view = P.view
    if P.pk == P_GLM:
        X, y = view.X, view.y
        rn2 = _row_sq_norms(X)
        if P.ok == ELLIPSOID:
            xmax = _row_abs_max(X)
        link, reg = view.link, view.reg
        if P.ok == ELLIPSOID:  # the row layout of dpsim.privacy._ellipsoid.glm_projected_sum
            vals, cols, dense_d = X.reshape(-1), np.arange(d, dtype=np.int64), d
    elif P.pk == P_RQUAD:
        Wq, Yq, qreg = view.W, view.Y, view.reg_grad
    else:
        h, xi = view.h, view.xi
    out = np.empty((R, d))
    S = np.ones((R, d))
    g = np.empty(d)
    pv = np.empty(d)
    uu = np.empty(d)
    sk, n_all, p_all, kcyc = _sampler_args(sampler)
    pidx = np.zeros(0, dtype=np.int64) if private_idx is None else np.ascontiguousarray(private_idx, dtype=np.int64)
    srng = sampler.rng
    nrng = backend._gen
    inline = _inline_rng(srng, nrng)
    bsum = np.zeros(R)
    per_step = R * (d + b)
    draws = Draws(sk, n_all, p_all, kcyc, pidx, bsum)
    prob_args = ProblemArgs(P.pk, X, rn2, xmax, y, link, reg, Wq, Yq, h, xi, qreg, P.dk, P.drad,
                            vals, cols, ptr, dense_d)
    hyper_args = Hyper(b, P.noisy, P.neglr, P.neglr2, P.clip, P.clip2, P.std, P.std2, P.beta,
                       P.beta1, P.beta2, P.eps, P.phi, P.floor, P.use_phi, P.eps_zero, P.s1, P.s2,
                       P.rule, P.bias, P.per_norm)
    arrays = BlockState(W, A, Bst)
    ell = EllipsoidArgs(Amat, SA, ISA, arow, const_a, ens, P.frac)
    scratch = Scratch(out, S, g, pv, uu)
    while t < steps:
        stop = int(rec_steps[next_rec]) if next_rec < K_rec else steps
        # a block ends at the next record step, or earlier after BLOCK_ELEMENTS trial-numbers
        # (keeps progress bars and interrupts responsive in long runs without records)
        K = min(stop - t, max(1, BLOCK_ELEMENTS // per_step))
        if inline:  # the generators' states as arrays (one array when both are one generator)
            s_arg = _BG.state_of(srng)
            n_arg = s_arg if nrng is srng else _BG.state_of(nrng)
        else:
            s_arg, n_arg = srng, nrng
        cor1, cor2 = _bias_corrections(P, count, K, R)
        try:
            count = _run_steps(P.ok)(t, K, sampler.step, count, s_arg, n_arg, cor1, cor2, draws, prob_args,
                                     hyper_args, arrays, ell, scratch)
        finally:
            if inline:  # the generators continue exactly where NumPy's own draws would leave them
                _BG.store_state(srng, s_arg)
                if nrng is not srng:
                    _BG.store_state(nrng, n_arg)
        sampler.step += K
        t += K
        if bar is not None:
            bar.update(K)
        if next_rec < K_rec and t == int(rec_steps[next_rec]):
            ctx.t = t
            record(next_rec, W.copy(), _rebuild_state(P, state, A, Bst, count))
            next_rec += 1
    batch_sizes_sum += bsum
    ctx.t = steps
    return W, _rebuild_state(P, state, A, Bst, count)
