"""Four-lane SIMD building blocks of the small-d block kernel's dense GLM rows, as LLVM IR.

Why IR: Numba builds without LLVM's SLP vectorizer (off by default since numba#8705), so the
four-accumulator sums of the engine's kernels (:mod:`dpsim.problems._glm_kernels`,
:mod:`dpsim.privacy._ellipsoid`) run scalar when written in Python.  Each intrinsic here emits
the *same* arithmetic on ``<4 x double>`` vectors — the same products and sums in the same
order, separate multiply and add (no FMA contraction) — so the block kernel's clipped sums have
the engine's bits while running several examples or columns per instruction.  They hold no
optimizer rule: the per-coordinate updates are the chain's elements
(:mod:`dpsim.fast.compose`).  Every intrinsic has a pure-Python stand-in with the same summation
order for ``NUMBA_DISABLE_JIT=1``.
"""

from __future__ import annotations

import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


__all__: list[str] = []  # private: the kernels of dpsim.fast.rows import the names they call

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

