"""Per-trial kernels of the small-d block kernel (:mod:`dpsim.fast.block`): batches, clipped sums, projections.

Everything here is a problem's or a sampler's part of a step, never an optimizer's rule (those are
the chain's elements, composed by :mod:`dpsim.fast.compose`):

* :func:`_draw_batch` draws a trial's batch from the sampler's generator exactly as
  :meth:`dpsim.sampling.Sampler.draw` does (through :mod:`dpsim._bitgen`);
* :func:`_glm_clipped_trial`, :func:`_glm_scaled_trial` compute a dense GLM's clipped sum (scaled:
  scale-then-privatize's and DP²'s) as the engine's :func:`dpsim.problems._glm_kernels._dense_trial`
  does, in passes over the batch with the same expressions and the same summation order (the
  vector sums of :mod:`dpsim.fast.simd`), so with the engine's bits;
* :func:`_quad_trial` the quadratics' clipped sum (materialize, scale, clip, add);
* :func:`_ball_dense_trial`, :func:`_ellipsoid_trial` PASAN/PAGAN's projected sums (the engine's
  closed form for the ℓ2 ball on dense rows, :mod:`dpsim.privacy._ellipsoid` otherwise);
* :func:`_project_domain` the problem's box or ball projection.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .. import _bitgen as _BG
from .. import _sampling_kernels as _SK
from ..privacy import _ellipsoid as _E
from ..problems import _glm_kernels as _K
from .simd import (_dot_lanes, _dots4_lanes, _dots4_scaled_lanes, _gather_axpy, _gather_axpy_all,
                   _ridge_sumsq8_t, _ridge_sumsq16_t, _rows8_t, _rows16_t, _sumsq8_t, _sumsq16_t)

# problem codes
P_GLM, P_RQUAD, P_NQUAD = 0, 1, 2
# domain codes
D_NONE, D_BOX, D_BALL = 0, 1, 2
# sampling codes
S_POISSON, S_FIXED, S_REPLACEMENT, S_CYCLIC = 0, 1, 2, 3


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
