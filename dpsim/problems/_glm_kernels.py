"""Private Numba kernels for the generalized-linear-model fast path of :mod:`dpsim.problems`.

For a generalized linear model the per-example gradient is ``g_i = c_i x_i + lam w`` with the
scalar ``c_i = l'(x_i . w, y_i)``.  Per-example clipping of a minibatch then needs, per example,
only the margin ``m = x_i . w_r`` and (with a coordinate scale ``s``) the two gathers
``sum_j s_j^2 x_ij^2`` and ``sum_j s_j^2 x_ij w_j``:

    ||s * g_i||^2 = c^2 ||s * x_i||^2 + 2 c lam x_i . (s^2 * w) + lam^2 ||s * w||^2,

and the clipped sum is ``s * (sum_i f_i c_i x_i + lam w sum_i f_i)`` with the clip factors
``f_i = min(1, C / ||s * g_i||)``.  Because ``f_i`` depends on example ``i`` alone, one fused pass
per trial does everything: for each example, read its row once (margin and gathers), compute
``c_i``, its norm and ``f_i``, then scatter ``f_i c_i x_i`` while the row is still in cache.  The
``(R, b, d)`` tensor of per-example gradients is never formed.

``clip_sum_dense`` takes a dense ``X`` (n, d); ``clip_sum_csr`` a CSR matrix as ``(data,
indices, indptr)``.  Each has a serial and a ``parallel=True`` build (``prange`` over trials; a
trial writes only its own rows of the outputs, so results do not depend on the thread schedule)
sharing one per-trial body.  Everything is deterministic and also runs, slowly, with
``NUMBA_DISABLE_JIT=1``.  The kernels release the GIL (``nogil=True``), so the noise threads of the
blocked layout (:mod:`dpsim.backend`) run while a step's clipped sum is computed.  The naive NumPy oracles live in ``tests/problems/test_problems.py``.

Arguments of the drivers
    idx (R, b) int64 row indices; W (R, d) parameters; y (n,) labels; kind 0 squared, 1 logistic,
    2 absolute, 3 linear (see ``dpsim.problems.glm._GLMProblem``); lam the L2 coefficient;
    S (R, d) scale (ignored unless want_scale); C (R,) clip norms (``inf`` = no clipping, which
    gives a factor of exactly 1.0); mask (R, b) bool (ignored unless want_mask);
    outputs out (R, d) and norms (R, b), overwritten.  Accumulation is in float64.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["clip_sum_dense", "clip_sum_csr", "row_sq_norms_csr", "link_derivative"]

SQUARED, LOGISTIC, ABSOLUTE, LINEAR = 0, 1, 2, 3


@numba.njit(cache=True, nogil=True)
def link_derivative(kind, m, y):
    """``l'(m, y)`` for the four GLM links (scalar)."""
    if kind == SQUARED:
        return m - y
    if kind == LOGISTIC:
        t = -y * m  # c = -y sigmoid(t), sigmoid computed stably
        e = math.exp(-abs(t))
        sig = 1.0 / (1.0 + e) if t >= 0 else e / (1.0 + e)
        return -y * sig
    if kind == ABSOLUTE:
        r = m - y
        if r > 0:
            return 1.0
        if r < 0:
            return -1.0
        return 0.0
    return -1.0



# ---------------------------------------------------------------------------------------------
# software prefetch: the rows of a minibatch are scattered over X (tens of MB for the benchmark
# problem), so each example starts with cache misses.  Requesting the next example's row while
# the current one is processed hides part of that latency (~25% on the sparse benchmark).  A
# prefetch is only a hint: it never changes results.  With NUMBA_DISABLE_JIT=1 it is a no-op.
# ---------------------------------------------------------------------------------------------

if numba.config.DISABLE_JIT:

    def _prefetch(arr, i):
        """No-op stand-in for the LLVM prefetch hint when JIT is disabled."""
        return None

else:

    @intrinsic
    def _prefetch(typingctx, arr, i):
        """Prefetch hint for the cache line holding flat element ``i`` of a C-contiguous array."""
        if not isinstance(arr, types.Array) or not isinstance(i, types.Integer):
            return None
        sig = types.void(arr, i)

        def codegen(context, builder, signature, args):
            ary = context.make_array(signature.args[0])(context, builder, args[0])
            ptr = builder.gep(ary.data, [args[1]])
            i8p = ir.IntType(8).as_pointer()
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
            fn = builder.module.declare_intrinsic("llvm.prefetch", fnty=fnty)
            # (address, rw = read, locality = 3 (keep in all levels), cache type = data)
            builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3),
                              ir.Constant(i32, 1)])
            return context.get_dummy_value()

        return sig, codegen


_u = numba.uintp  # unsigned column index: no negative-index wraparound code in the hot loops


@numba.njit(cache=True, nogil=True)
def _prefetch_csr_row(data, indices, indptr, row):
    start = indptr[row]
    stop = indptr[row + 1]
    for k in range(start, stop, 8):
        _prefetch(data, k)
        _prefetch(indices, k)


@numba.njit(cache=True, nogil=True)
def _prefetch_dense_row(X, row):
    d = X.shape[1]
    base = row * d
    for j in range(0, d, 8):
        _prefetch(X, base + j)


@numba.njit(cache=True, nogil=True)
def _next_row(idx, r, i):
    """Index of the example processed after (r, i) within trial r (itself at the end)."""
    if i + 1 < idx.shape[1]:
        return idx[r, i + 1]
    return idx[r, i]


# Dot products with four independent accumulators: a single running sum is bound by the latency
# of floating-point addition; four partial sums (combined as (s0 + s1) + (s2 + s3)) run about
# three times faster.  The order is fixed, so results stay deterministic.


@numba.njit(cache=True, nogil=True)
def _csr_dot(data, indices, start, stop, W, r):
    s0 = s1 = s2 = s3 = 0.0
    k = start
    while k + 4 <= stop:
        s0 += data[k] * W[r, _u(indices[k])]
        s1 += data[k + 1] * W[r, _u(indices[k + 1])]
        s2 += data[k + 2] * W[r, _u(indices[k + 2])]
        s3 += data[k + 3] * W[r, _u(indices[k + 3])]
        k += 4
    while k < stop:
        s0 += data[k] * W[r, _u(indices[k])]
        k += 1
    return (s0 + s1) + (s2 + s3)


@numba.njit(cache=True, nogil=True, inline="always")
def _acc_scaled(m, a, c, x, s, w):
    """One term of the scaled gathers: ``(m + x w, a + s^2 x x, c + s^2 (x w))``, each rounded as
    written (``s^2 x x`` is ``(s^2 x) x``)."""
    xw = x * w
    s2 = s * s
    return m + xw, a + s2 * x * x, c + s2 * xw


@numba.njit(cache=True, nogil=True)
def _csr_dot_scaled(data, indices, start, stop, W, S, r):
    """(x.w, sum s^2 x^2, sum s^2 x w) over one CSR row, two accumulators each."""
    m0 = m1 = a0 = a1 = c0 = c1 = 0.0
    k = start
    while k + 2 <= stop:
        j = _u(indices[k])
        m0, a0, c0 = _acc_scaled(m0, a0, c0, data[k], S[r, j], W[r, j])
        j = _u(indices[k + 1])
        m1, a1, c1 = _acc_scaled(m1, a1, c1, data[k + 1], S[r, j], W[r, j])
        k += 2
    if k < stop:
        j = _u(indices[k])
        m0, a0, c0 = _acc_scaled(m0, a0, c0, data[k], S[r, j], W[r, j])
    return m0 + m1, a0 + a1, c0 + c1


@numba.njit(cache=True, nogil=True, _nrt=False)
def _dense_dot(X, row, W, r):
    """(x.w, ||x||^2) over one dense row, four accumulators each."""
    d = X.shape[1]
    m0 = m1 = m2 = m3 = 0.0
    q0 = q1 = q2 = q3 = 0.0
    j = 0
    while j + 4 <= d:
        x0 = X[row, j]
        x1 = X[row, j + 1]
        x2 = X[row, j + 2]
        x3 = X[row, j + 3]
        m0 += x0 * W[r, j]
        m1 += x1 * W[r, j + 1]
        m2 += x2 * W[r, j + 2]
        m3 += x3 * W[r, j + 3]
        q0 += x0 * x0
        q1 += x1 * x1
        q2 += x2 * x2
        q3 += x3 * x3
        j += 4
    while j < d:
        x0 = X[row, j]
        m0 += x0 * W[r, j]
        q0 += x0 * x0
        j += 1
    return (m0 + m1) + (m2 + m3), (q0 + q1) + (q2 + q3)


@numba.njit(cache=True, nogil=True)
def _dense_dot_scaled(X, row, W, S, r):
    """:func:`_csr_dot_scaled` over one dense row."""
    d = X.shape[1]
    m0 = m1 = a0 = a1 = c0 = c1 = 0.0
    j = 0
    while j + 2 <= d:
        m0, a0, c0 = _acc_scaled(m0, a0, c0, X[row, j], S[r, j], W[r, j])
        m1, a1, c1 = _acc_scaled(m1, a1, c1, X[row, j + 1], S[r, j + 1], W[r, j + 1])
        j += 2
    if j < d:
        m0, a0, c0 = _acc_scaled(m0, a0, c0, X[row, j], S[r, j], W[r, j])
    return m0 + m1, a0 + a1, c0 + c1


@numba.njit(cache=True, nogil=True)
def _finish_example(kind, m, sx2, sxw, yv, lam, lam2_sw2, Cr):
    """Return (a, f, norm): the coefficient a = f c of x_i, the clip factor, and ||s g_i||."""
    c = link_derivative(kind, m, yv)
    n2 = c * c * sx2
    if lam != 0.0:
        n2 += 2.0 * lam * c * sxw + lam2_sw2
    nrm = math.sqrt(n2) if n2 > 0.0 else 0.0
    f = 1.0
    if nrm > Cr:
        f = Cr / nrm
    return f * c, f, nrm


@numba.njit(cache=True, nogil=True, _nrt=False)
def _init_row(o, W, S, want_scale, want_norm, r):
    """Zero the output row ``o`` (d,); return ``||w_r||^2`` (or ``||s_r * w_r||^2``) when asked,
    else 0.

    One pass over the row, four accumulators (a single running sum is bound by the latency of
    floating-point addition)."""
    d = W.shape[1]
    q0 = q1 = q2 = q3 = 0.0
    if not want_norm:
        for j in range(d):
            o[j] = 0.0
        return 0.0
    j = 0
    while j + 4 <= d:
        v0 = W[r, j]
        v1 = W[r, j + 1]
        v2 = W[r, j + 2]
        v3 = W[r, j + 3]
        if want_scale:
            v0 *= S[r, j]
            v1 *= S[r, j + 1]
            v2 *= S[r, j + 2]
            v3 *= S[r, j + 3]
        q0 += v0 * v0
        q1 += v1 * v1
        q2 += v2 * v2
        q3 += v3 * v3
        o[j] = 0.0
        o[j + 1] = 0.0
        o[j + 2] = 0.0
        o[j + 3] = 0.0
        j += 4
    while j < d:
        v0 = W[r, j]
        if want_scale:
            v0 *= S[r, j]
        q0 += v0 * v0
        o[j] = 0.0
        j += 1
    return (q0 + q1) + (q2 + q3)


@numba.njit(cache=True, nogil=True, _nrt=False)
def _finish_row(o, W, S, want_scale, lam, fsum, r):
    """``o = s_r * (o + lam * fsum * w_r)`` in one pass (``o`` trial r's output row)."""
    d = o.shape[0]
    beta = lam * fsum
    if beta != 0.0:
        if want_scale:
            for j in range(d):
                o[j] = (o[j] + beta * W[r, j]) * S[r, j]
        else:
            for j in range(d):
                o[j] += beta * W[r, j]
    elif want_scale:
        for j in range(d):
            o[j] *= S[r, j]


@numba.njit(cache=True, nogil=True, _nrt=False)
def _init_trial(out, W, S, want_scale, want_norm, r):
    """:func:`_init_row` on ``out[r]``."""
    return _init_row(out[r], W, S, want_scale, want_norm, r)


@numba.njit(cache=True, nogil=True, _nrt=False)
def _finish_trial(out, W, S, want_scale, lam, fsum, r):
    """:func:`_finish_row` on ``out[r]``."""
    _finish_row(out[r], W, S, want_scale, lam, fsum, r)


@numba.njit(cache=True, nogil=True)
def _trial_row(X, data, indices, indptr, rn2, idx, W, y, kind, lam, S, want_scale, C, mask,
              want_mask, o, norms, r):
    """The clipped sum of trial ``r`` into the row ``o`` (d,), the per-trial body of every driver
    here and of :mod:`dpsim.fast.release` (which passes its row buffer).

    The rows come from the dense ``X`` (n, d) when it is given, else (``X=None``) from the CSR
    ``(data, indices, indptr)`` with squared row norms ``rn2``; ``norms[r, i] = ||s g_i||`` (0
    where masked) unless ``norms`` is ``None``.  Exactly one of ``X`` and ``data`` is ``None``:
    Numba prunes a branch ``if a is not None`` of an argument ``a`` passed as ``None`` at compile
    time (hence two ``if`` blocks, not ``if``/``else``), so each specialization holds one layout's
    code only and costs what the separate dense and CSR bodies did."""
    b = idx.shape[1]
    lam2_sw2 = lam * lam * _init_row(o, W, S, want_scale, lam != 0.0, r)
    Cr = C[r]
    fsum = 0.0
    for i in range(b):
        if want_mask and not mask[r, i]:
            if norms is not None:
                norms[r, i] = 0.0
            continue
        row = idx[r, i]
        if X is not None:
            _prefetch_dense_row(X, _next_row(idx, r, i))
            if want_scale:
                m, sx2, sxw = _dense_dot_scaled(X, row, W, S, r)
            else:
                m, sx2 = _dense_dot(X, row, W, r)
                sxw = m
        if data is not None:
            _prefetch_csr_row(data, indices, indptr, _next_row(idx, r, i))
            if want_scale:
                m, sx2, sxw = _csr_dot_scaled(data, indices, indptr[row], indptr[row + 1], W, S, r)
            else:
                m = _csr_dot(data, indices, indptr[row], indptr[row + 1], W, r)
                sx2 = rn2[row]
                sxw = m
        a, f, nrm = _finish_example(kind, m, sx2, sxw, y[row], lam, lam2_sw2, Cr)
        if norms is not None:
            norms[r, i] = nrm
        fsum += f
        if a != 0.0:
            if X is not None:
                for j in range(X.shape[1]):
                    o[j] += a * X[row, j]
            if data is not None:
                for k in range(indptr[row], indptr[row + 1]):
                    o[_u(indices[k])] += a * data[k]
    _finish_row(o, W, S, want_scale, lam, fsum, r)


@numba.njit(cache=True, nogil=True)
def _dense_trial(X, idx, W, y, kind, lam, S, want_scale, C, mask, want_mask, out, norms, r):
    """:func:`_trial_row` of a dense ``X`` into ``out[r]``."""
    _trial_row(X, None, None, None, None, idx, W, y, kind, lam, S, want_scale, C, mask, want_mask,
              out[r], norms, r)


@numba.njit(cache=True, nogil=True)
def _csr_trial(data, indices, indptr, rn2, idx, W, y, kind, lam, S, want_scale, C, mask, want_mask,
               out, norms, r):
    """:func:`_trial_row` of a CSR matrix into ``out[r]``."""
    _trial_row(None, data, indices, indptr, rn2, idx, W, y, kind, lam, S, want_scale, C, mask,
              want_mask, out[r], norms, r)


@numba.njit(cache=True, nogil=True)
def _dense_serial(X, idx, W, y, kind, lam, S, want_scale, C, mask, want_mask, out, norms):
    for r in range(idx.shape[0]):
        _dense_trial(X, idx, W, y, kind, lam, S, want_scale, C, mask, want_mask, out, norms, r)


@numba.njit(cache=True, parallel=True, nogil=True)
def _dense_parallel(X, idx, W, y, kind, lam, S, want_scale, C, mask, want_mask, out, norms):
    for r in numba.prange(idx.shape[0]):
        _dense_trial(X, idx, W, y, kind, lam, S, want_scale, C, mask, want_mask, out, norms, r)


@numba.njit(cache=True, nogil=True)
def _csr_serial(data, indices, indptr, rn2, idx, W, y, kind, lam, S, want_scale, C, mask, want_mask,
                out, norms):
    for r in range(idx.shape[0]):
        _csr_trial(data, indices, indptr, rn2, idx, W, y, kind, lam, S, want_scale, C, mask,
                   want_mask, out, norms, r)


@numba.njit(cache=True, parallel=True, nogil=True)
def _csr_parallel(data, indices, indptr, rn2, idx, W, y, kind, lam, S, want_scale, C, mask,
                  want_mask, out, norms):
    for r in numba.prange(idx.shape[0]):
        _csr_trial(data, indices, indptr, rn2, idx, W, y, kind, lam, S, want_scale, C, mask,
                   want_mask, out, norms, r)


@numba.njit(cache=True, nogil=True)
def _row_sq_norms_csr(data, indptr, out):
    for row in range(out.shape[0]):
        s = 0.0
        for k in range(indptr[row], indptr[row + 1]):
            s += data[k] * data[k]
        out[row] = s


# The parallel build is used only when the call has enough work to amortize waking the thread
# pool (tiny batches, e.g. the 1-D problems with b = 1, stay serial) and Numba has at least
# PARALLEL_MIN_THREADS threads: on small virtual machines (2 vCPUs) waking an idle vCPU can cost
# more than the kernel itself (measured on the 25k x 10k sparse benchmark with R = b = 64: the
# parallel build was no faster than the serial one there; docs/performance.md).
PARALLEL_MIN_WORK = 100_000
PARALLEL_MIN_THREADS = 4

_NO_MASK = np.ones((1, 1), dtype=np.bool_)


def _use_parallel(R, work):
    if R < 2 or work < PARALLEL_MIN_WORK or numba.config.NUMBA_NUM_THREADS < PARALLEL_MIN_THREADS:
        return False
    return numba.get_num_threads() >= PARALLEL_MIN_THREADS


def _prepare(idx, W, S, C, mask):
    R, b = idx.shape
    want_scale = S is not None
    want_mask = mask is not None
    out = np.empty(W.shape, dtype=W.dtype)
    norms = np.empty((R, b), dtype=W.dtype)
    return (
        (W if S is None else S),
        want_scale,
        np.ascontiguousarray(C, dtype=np.float64),
        (_NO_MASK if mask is None else np.ascontiguousarray(mask, dtype=np.bool_)),
        want_mask,
        out,
        norms,
    )


def clip_sum_dense(X, idx, W, y, kind, lam, C, S=None, mask=None):
    """Fused clipped per-example-gradient sum for dense ``X``: returns ``(out, norms)``.

    ``out[r] = S[r] * sum_{i: mask} f_ri g_ri`` and ``norms[r, i] = ||S[r] * g_ri||`` (0 where
    masked) with ``g_ri = l'(X[idx[r,i]] . W[r], y[idx[r,i]]) X[idx[r,i]] + lam W[r]`` and
    ``f_ri = min(1, C[r] / norms[r, i])`` (exactly 1 when ``C[r] = inf``).
    """
    S_, ws, C_, M_, wm, out, norms = _prepare(idx, W, S, C, mask)
    R, b = idx.shape
    fn = _dense_parallel if _use_parallel(R, R * b * X.shape[1]) else _dense_serial
    fn(X, idx, W, y, int(kind), float(lam), S_, ws, C_, M_, wm, out, norms)
    return out, norms


def clip_sum_csr(data, indices, indptr, rn2, idx, W, y, kind, lam, C, S=None, mask=None, avg_nnz=1.0):
    """CSR version of :func:`clip_sum_dense`; ``rn2`` holds the squared row norms ``||x_i||^2``."""
    S_, ws, C_, M_, wm, out, norms = _prepare(idx, W, S, C, mask)
    R, b = idx.shape
    fn = _csr_parallel if _use_parallel(R, R * (b * avg_nnz + W.shape[1])) else _csr_serial
    fn(data, indices, indptr, rn2, idx, W, y, int(kind), float(lam), S_, ws, C_, M_, wm, out, norms)
    return out, norms


def row_sq_norms_csr(data, indptr, n_rows):
    """``||x_i||^2`` for every row of a CSR matrix, in float64."""
    out = np.empty(n_rows, dtype=np.float64)
    _row_sq_norms_csr(data, indptr, out)
    return out
