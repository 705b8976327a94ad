"""Euclidean projection onto axis-aligned ellipsoids (the clipping step of PASAN / PAGAN).

Source: Asi, Duchi, Fallah, Javidbakht, Talwar, *Private Adaptive Gradient Methods for Convex
Optimization* (ICML 2021), §2 (notation ``π_A``) and Algorithms 1–2, line 5.

For a diagonal ``A = diag(a)``, ``a_j > 0``, the ellipsoid is ``E_A = {x : Σ_j a_j x_j² ≤ 1}`` and

    π_A(g) = argmin_{x ∈ E_A} ||x − g||₂,      π_A(g)_j = g_j / (1 + λ a_j),

with ``λ = 0`` when ``g ∈ E_A`` and otherwise ``λ > 0`` the unique root of the secular equation

    φ(λ) = Σ_j a_j g_j² / (1 + λ a_j)² − 1 = 0

(KKT: ``g − π = λ A π``, ``λ ≥ 0``, ``λ (πᵀAπ − 1) = 0``).

Root-finder
-----------
With ``h_j = √a_j g_j`` and ``N(λ) = ||A^{1/2} π_λ(g)||₂ = (Σ_j h_j² / (1 + λ a_j)²)^{1/2}``,
the function ``ψ(λ) = 1/N(λ)`` is **concave and increasing** on ``λ ≥ 0`` (it is the secular
function of a trust-region subproblem, ``N(λ) = ||(D + λI)^{-1} h'||`` with ``D = diag(1/a)``,
``h'_j = g_j/√a_j``; Moré & Sorensen 1983).  Newton's method on ``ψ(λ) − 1 = 0`` started at
``λ = 0`` (where ``ψ < 1``) therefore increases monotonically to the root without overshooting,
and converges quadratically; ``ψ`` is nearly linear (exactly linear for ``d = 1``, where one step
suffices), so a handful of steps is typical even for axis ratios ``a_max/a_min`` of ``10^16``.
The Newton step is

    Δλ = (N³ − N²) / S,     S = Σ_j a_j h_j² / (1 + λ a_j)³.

Safeguards: a bracket ``[lo, hi]`` with ``hi = (Σ_j g_j²/a_j)^{1/2}`` (there ``N ≤ 1``) is kept and
a step that leaves it is replaced by bisection; ``h`` is scaled by ``max_j |h_j|`` so that large or
tiny gradients neither overflow nor underflow; the iteration stops when the step is below
``4·2^{-52}·λ`` (or after :data:`MAX_ITER` steps, a bound never reached in the tests).  Because
the iterates approach the root from below, the point is then inside ``E_A`` up to rounding; a final
nudge of ``λ`` by a few ulps makes the kernel's own inside test accept it, so the projection is
idempotent bit for bit and ``πᵀAπ ≤ 1 + O(d·2^{-52})`` in any evaluation order.

The kernel is private, deterministic (rows are independent; the parallel build gives the same
bits as the serial one) and also runs, slowly, under ``NUMBA_DISABLE_JIT=1``.  The public wrapper
is :func:`project_ellipsoid`; the test oracle is ``scipy.optimize.brentq`` on ``φ``
(``tests/optimizers/test_pagan.py``).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ..backend import array_namespace, to_numpy

__all__ = ["project_ellipsoid", "MAX_ITER"]

#: Upper bound on Newton/bisection steps per row (typically 2–12 are taken, see the benchmark).
MAX_ITER = 200

_EPS = 2.0 ** -52


@numba.njit(cache=True)
def _secular_sums(uu, a, lam):
    """``(Σ_j v_j², Σ_j a_j v_j² / (1 + λ a_j))`` with ``v_j = u_j / (1 + λ a_j)``."""
    Q = 0.0
    S = 0.0
    for j in range(uu.shape[0]):
        aj = a[j]
        inv = 1.0 / (1.0 + lam * aj)
        v = uu[j] * inv
        v2 = v * v
        Q += v2
        S += aj * v2 * inv
    return Q, S


@numba.njit(cache=True)
def _project_vec(g, a, sa, isa, out, uu):
    """Project the vector ``g`` onto ``{x : Σ_j a_j x_j² ≤ 1}`` into ``out``; return ``λ``.

    ``sa = √a``, ``isa = 1/√a`` (precomputed), ``uu`` a scratch vector of ``g``'s length.  All
    are 1-D of the same length; the sums run over that length in index order, so a vector holding
    only the nonzero entries of a sparse ``g`` (with the matching entries of ``a``) gives the same
    bits as the dense vector (a zero entry adds an exact ``+0`` to every sum and never wins a max).
    """
    d = g.shape[0]
    # pass 1: scale of the whitened vector h = sqrt(a) * g and of g / sqrt(a)
    m = 0.0
    m2 = 0.0
    finite = True
    for j in range(d):
        ag = abs(g[j])
        if not ag < math.inf:
            finite = False
        h = sa[j] * ag
        if h > m:
            m = h
        h2 = isa[j] * ag
        if h2 > m2:
            m2 = h2
    if not finite:  # inf or nan entries: no meaningful projection
        for j in range(d):
            out[j] = math.nan
        return math.nan
    if m == 0.0:  # zero vector (also a masked / padded slot; or an all-zero `a`: no
        for j in range(d):  # constraint): the projection is the vector itself
            out[j] = g[j]
        return 0.0
    # pass 2: whitened, scaled u = sqrt(a) g / m (|u_j| <= 1), ||A^{1/2} g|| and the bracket's
    # upper end ||A^{-1/2} g|| (where N <= 1)
    q = 0.0
    q2 = 0.0
    im = 1.0 / m
    im2 = 1.0 / m2
    for j in range(d):
        u = sa[j] * g[j] * im
        uu[j] = u
        q += u * u
        u2 = isa[j] * g[j] * im2
        q2 += u2 * u2
    if m * math.sqrt(q) <= 1.0:  # already inside
        for j in range(d):
            out[j] = g[j]
        return 0.0
    lo = 0.0
    hi = m2 * math.sqrt(q2)
    lam = 0.0
    for _ in range(MAX_ITER):
        Q, S = _secular_sums(uu[:d], a, lam)
        N = m * math.sqrt(Q)
        if N > 1.0:
            lo = lam
        elif N < 1.0:
            hi = lam
        else:
            break
        # Newton on 1/N(λ) − 1 (concave increasing): Δλ = (N³ − N²)/(m² S) = Q (N − 1) / S
        new = lam + Q * (N - 1.0) / S
        if not (new > lo and new < hi):
            new = 0.5 * (lo + hi)
        if abs(new - lam) <= 4.0 * _EPS * new or hi - lo <= 4.0 * _EPS * hi:
            lam = new
            break
        lam = new
    # Rounding can leave π a few ulps outside; nudge λ up (steps doubling from 4 ulps) until the
    # same norm computation as the inside test above says ≤ 1, so that π_A(π_A(g)) = π_A(g)
    # bit for bit.  Typically zero or one nudge, each changing π by O(2^-50) relative.
    step = 4.0 * _EPS * lam
    for _ in range(MAX_ITER):
        for j in range(d):
            out[j] = g[j] / (1.0 + lam * a[j])
        if _a_norm(out, sa) <= 1.0:
            break
        lam += step
        step *= 2.0
    return lam


@numba.njit(cache=True)
def _project_row(G, Amat, SA, ISA, aidx, out, lam_out, i):
    """Project row ``i`` of ``G`` onto the ellipsoid of row ``aidx[i]`` of ``Amat``
    (``SA = √Amat``, ``ISA = 1/√Amat``, precomputed per ellipsoid)."""
    k = aidx[i]
    uu = np.empty(G.shape[1])
    lam_out[i] = _project_vec(G[i], Amat[k], SA[k], ISA[k], out[i], uu)


@numba.njit(cache=True)
def _a_norm(x, sa):
    """``||A^{1/2} x||`` for the vector ``x``, computed exactly as the inside test of
    :func:`_project_vec` does (largest whitened entry factored out)."""
    d = x.shape[0]
    m = 0.0
    for j in range(d):
        h = sa[j] * abs(x[j])
        if h > m:
            m = h
    if m == 0.0:
        return 0.0
    im = 1.0 / m
    q = 0.0
    for j in range(d):
        u = sa[j] * x[j] * im
        q += u * u
    return m * math.sqrt(q)


@numba.njit(cache=True)
def _project_serial(G, Amat, SA, ISA, aidx, out, lam_out):
    for i in range(G.shape[0]):
        _project_row(G, Amat, SA, ISA, aidx, out, lam_out, i)


@numba.njit(cache=True, parallel=True)
def _project_parallel(G, Amat, SA, ISA, aidx, out, lam_out):
    for i in numba.prange(G.shape[0]):
        _project_row(G, Amat, SA, ISA, aidx, out, lam_out, i)


# Same policy as dpsim._glm_kernels: the thread pool only pays off with enough work and threads.
PARALLEL_MIN_WORK = 200_000
PARALLEL_MIN_THREADS = 4


def _use_parallel(rows, work):
    if rows < 2 or work < PARALLEL_MIN_WORK or numba.config.NUMBA_NUM_THREADS < PARALLEL_MIN_THREADS:
        return False
    return numba.get_num_threads() >= PARALLEL_MIN_THREADS


def _project_flat(G, Amat, aidx):
    """Kernel driver on prepared host arrays: ``G`` (N, d) float64 C-contiguous, ``Amat`` (M, d)
    positive float64 C-contiguous, ``aidx`` (N,) int64 row map.  Returns ``(out, lam)``."""
    N, d = G.shape
    out = np.empty_like(G)
    lam = np.empty(N, dtype=np.float64)
    if N == 0:
        return out, lam
    fn = _project_parallel if _use_parallel(N, N * d) else _project_serial
    SA = np.sqrt(Amat)
    with np.errstate(divide="ignore"):  # internal callers may pass all-zero rows: no constraint
        ISA = 1.0 / SA
    fn(G, Amat, SA, ISA, aidx, out, lam)
    return out, lam


def _prepare_a(a, gshape):
    """Validate ``a`` against ``g``'s shape; return ``(Amat (M, d), aidx (N,))``."""
    a = np.asarray(a, dtype=np.float64)
    d = gshape[-1]
    bad = ~np.isfinite(a)
    if bad.any():
        pos = tuple(int(v) for v in np.argwhere(bad)[0])
        raise ValueError(f"a must be finite, got a{list(pos)}={a[pos]!r}")
    bad = a <= 0
    if bad.any():
        pos = tuple(int(v) for v in np.argwhere(bad)[0])
        raise ValueError(f"a must be positive, got a{list(pos)}={float(a[pos])!r}")
    if a.ndim > len(gshape):
        raise ValueError(f"a has shape {a.shape}, which does not broadcast to g's shape {gshape}")
    a_nd = a.reshape((1,) * (len(gshape) - a.ndim) + a.shape)
    try:
        bshape = np.broadcast_shapes(a_nd.shape, gshape)
    except ValueError:
        bshape = None
    if bshape != tuple(gshape):
        raise ValueError(f"a has shape {a.shape}, which does not broadcast to g's shape {gshape}")
    lead = a_nd.shape[:-1]
    M = int(np.prod(lead, dtype=np.int64))
    Amat = np.ascontiguousarray(np.broadcast_to(a_nd, lead + (d,)).reshape(M, d))
    aidx = np.ascontiguousarray(
        np.broadcast_to(np.arange(M, dtype=np.int64).reshape(lead), tuple(gshape[:-1])).reshape(-1)
    )
    return Amat, aidx


def project_ellipsoid(g, a, *, return_lambda=False):
    """Euclidean projection of each row of ``g`` onto ``E_A = {x : Σ_j a_j x_j² ≤ 1}``.

    [PAGAN] (Asi et al., *Private Adaptive Gradient Methods for Convex Optimization*, ICML 2021),
    §2 notation and Algorithms 1–2, line 5:

        π_A(g)_j = g_j / (1 + λ a_j),   λ ≥ 0 the root of Σ_j a_j g_j² / (1 + λ a_j)² = 1

    (``λ = 0`` and ``π_A(g) = g`` when ``g`` is already inside).  The root is found per row by a
    safeguarded Newton iteration on the concave increasing function ``1/||A^{1/2}π_λ(g)||``
    (module docstring), accurate to a few ulps of ``λ``.

    Parameters
    ----------
    g : array ``(..., d)``: rows to project (e.g. per-example gradients ``(R, b, d)``).  Zero rows
        map to zero; rows with ``inf``/``nan`` entries map to ``nan``.
    a : positive finite array of shape ``(d,)`` or broadcastable to ``g`` (``(R, 1, d)`` gives one
        ellipsoid per trial; a scalar gives the ball of radius ``1/√a``).
    return_lambda : also return the multipliers ``λ`` of shape ``g.shape[:-1]``.

    Returns
    -------
    ``π`` with ``g``'s shape and dtype (and ``λ`` as float64 when ``return_lambda``).  Computation
    is in float64.  Inputs are never modified.

    Backends: the kernel is a Numba (CPU) kernel; non-NumPy arrays (CuPy, ``array_api_strict``)
    are copied to NumPy, projected, and copied back into ``g``'s namespace (for CuPy that is a
    device→host→device round trip).

    Raises ``ValueError`` naming the value when ``a`` is not positive and finite, or its shape does
    not broadcast to ``g``'s shape.
    """
    xp = array_namespace(g, a)
    g_np = np.asarray(to_numpy(g))
    a_np = np.asarray(to_numpy(a))
    if g_np.ndim < 1:
        raise ValueError(f"g must have at least one axis (..., d), got shape {g_np.shape}")
    if not (np.issubdtype(g_np.dtype, np.floating) or np.issubdtype(g_np.dtype, np.integer)):
        raise ValueError(f"g must be a real floating array, got dtype {g_np.dtype}")
    out_dtype = g_np.dtype if np.issubdtype(g_np.dtype, np.floating) else np.dtype(np.float64)
    Amat, aidx = _prepare_a(a_np, g_np.shape)
    d = g_np.shape[-1]
    G = np.ascontiguousarray(g_np.reshape(-1, d), dtype=np.float64)
    if d == 0:
        out, lam = G.copy(), np.zeros(G.shape[0])
    else:
        out, lam = _project_flat(G, Amat, aidx)
    out = out.reshape(g_np.shape).astype(out_dtype, copy=False)
    lam = lam.reshape(g_np.shape[:-1])
    if xp is not np:
        out = xp.asarray(out)
        lam = xp.asarray(lam)
    return (out, lam) if return_lambda else out


# ------------------------------------------------------------------------------------------------
# Generalized linear models: Σ_i π_A(g_i) straight from the feature rows
#
# For f_i(w) = l(x_i·w, y_i) + (ρ/2)||w||² the per-example gradient is g_i = c_i x_i + ρ w with
# c_i = l'(x_i·w, y_i).  With ρ = 0 it is zero off the nonzeros S_i of x_i, so π_A(g_i) is zero there
# too (π_A(g)_j = g_j/(1 + λ a_j)) and the secular sums of φ(λ) = Σ_j a_j g_j²/(1 + λ a_j)² − 1 run
# over S_i only: :func:`_project_vec` on the |S_i| gathered entries gives the dense row's bits.
# With a constant row of A (a_j = α: the ℓ2 ball of radius 1/√α, scaling="identity") the root is
# explicit, π_A(g) = g·min(1, 1/(√α||g||)) (φ is then (√α||g||)²/(1 + λα)² − 1), with
# ||g||² = Σ_{S_i} (c_i x_ij + ρ w_j)² + ρ²(||w||² − Σ_{S_i} w_j²), so the example costs O(|S_i|)
# also when ρ ≠ 0 and its sum contributes Σ_i f_i c_i x_i + ρ (Σ_i f_i) w.  The difference of sums
# of squares is rounded up by its error bound: ||g|| is never underestimated, so the projected
# gradient never leaves E_A by more than the rounding of the final scaling (privacy: the
# per-example contributions stay in the ellipsoid).
# With ρ ≠ 0 and a varying A every coordinate is nonzero and enters φ with its own a_j: the dense
# g_i is formed in a length-d scratch vector (never the (R, b, d) array) and projected there.

_SQUARED, _LOGISTIC, _ABSOLUTE, _LINEAR = 0, 1, 2, 3
#: link names in kernel-code order (the names of ``Problem.link``)
LINKS = ("squared", "logistic", "absolute", "linear")


@numba.njit(cache=True)
def _link_derivative(kind, m, y):
    """``l'(m, y)``: squared ``m − y``; logistic ``−y·sigmoid(−y m)`` (stable); absolute
    ``sign(m − y)`` (``sign(0) = 0``); linear ``−1``."""
    if kind == _SQUARED:
        return m - y
    if kind == _LOGISTIC:
        t = -y * m
        if t >= 0:
            e = math.exp(-t)
            return -y * (1.0 / (1.0 + e))
        e = math.exp(t)
        return -y * (e / (1.0 + e))
    if kind == _ABSOLUTE:
        r = m - y
        if r > 0:
            return 1.0
        if r < 0:
            return -1.0
        return 0.0
    return -1.0


@numba.njit(cache=True, error_model="numpy")
def _ball_factor(nrm, sqa, alpha):
    """``(f, λ)`` of the projection onto the ℓ2 ball ``{√α ||x|| ≤ 1}`` of a vector of norm
    ``nrm`` (``sqa = √α``): ``f = 1/(√α nrm)`` and ``λ = (√α nrm − 1)/α`` when ``√α nrm > 1``,
    else ``f = 1``, ``λ = 0``; both NaN when ``nrm`` is not finite ([PAGAN] §2: ``π_A(g) = g/(1 + λα)``
    with ``1 + λα = √α ||g||``).  Written without branches (the operands are selected, so no
    division by zero is ever evaluated and the result is the same under either error model): the
    fused kernel (:mod:`dpsim.fast.block`) runs it on vectors of examples with the same bits."""
    s = sqa * nrm
    out = s > 1.0
    f = 1.0 / (s if out else 1.0)
    lam = (s - 1.0 if out else 0.0) / (alpha if out else 1.0)
    fin = nrm < math.inf
    return (f if fin else math.nan), (lam if fin else math.nan)


@numba.njit(cache=True)
def _glm_trial(r, vals_all, cols_all, ptr, dense_d, y, kind, reg, W, idx, mask, use_mask,
               Amat, SA, ISA, arow, const_a, out, lam_out):
    """Σ over trial ``r``'s batch of π_A(g_i) into ``out[r]``; λ's into ``lam_out[r]``.

    Rows are given as CSR (``vals_all``, ``cols_all``, ``ptr``) or, when ``dense_d > 0``, as a
    dense row-major matrix flattened into ``vals_all`` (``cols_all`` unused).  Three cases per
    ellipsoid row (comment above :data:`LINKS`): constant ``a`` — closed form; varying ``a``,
    ``ρ = 0`` — the root-find over the row's nonzeros; varying ``a``, ``ρ ≠ 0`` — the root-find
    over a dense length-``d`` scratch gradient."""
    d = W.shape[1]
    bmax = idx.shape[1]
    dense = dense_d > 0
    k = arow[r]
    a = Amat[k]
    sa = SA[k]
    isa = ISA[k]
    alpha = const_a[k]  # >= 0: every a_j equals it; < 0: a varies
    w = W[r]
    maxnnz = d
    if not dense:
        maxnnz = 0
        for i in range(bmax):
            row = idx[r, i]
            nz = ptr[row + 1] - ptr[row]
            if nz > maxnnz:
                maxnnz = nz
    scratch_dense = reg != 0.0 and alpha < 0.0
    gv = np.empty(d if scratch_dense else maxnnz)
    pv = np.empty(d if scratch_dense else maxnnz)
    uu = np.empty(d if scratch_dense else maxnnz)
    nb = 0 if (dense or alpha >= 0.0 or scratch_dense) else maxnnz
    av = np.empty(nb)
    sav = np.empty(nb)
    isav = np.empty(nb)
    w2 = 0.0
    if reg != 0.0:
        for j in range(d):
            w2 += w[j] * w[j]
        if scratch_dense:
            for j in range(d):
                gv[j] = reg * w[j]
    sqa = math.sqrt(alpha) if alpha > 0.0 else 0.0
    wcoef = 0.0  # Σ_i f_i over the examples (constant-a case with ρ ≠ 0)
    for j in range(d):
        out[r, j] = 0.0
    for i in range(bmax):
        if use_mask and not mask[r, i]:
            lam_out[r, i] = 0.0
            continue
        row = idx[r, i]
        if dense:
            s0 = row * dense_d
            nz = dense_d
        else:
            s0 = ptr[row]
            nz = ptr[row + 1] - s0
        c = -1.0
        if kind != _LINEAR:
            mg = 0.0
            if dense:
                for t in range(nz):
                    mg += vals_all[s0 + t] * w[t]
            else:
                for t in range(nz):
                    mg += vals_all[s0 + t] * w[cols_all[s0 + t]]
            c = _link_derivative(kind, mg, y[row])
        if alpha >= 0.0:
            # constant a = α: the ℓ2 ball of radius 1/√α, π = g·min(1, 1/(√α||g||))
            if reg == 0.0:
                mx = 0.0
                for t in range(nz):
                    v = abs(c * vals_all[s0 + t])
                    if v > mx:
                        mx = v
                q = 0.0
                if mx > 0.0 and mx < math.inf:
                    imx = 1.0 / mx
                    for t in range(nz):
                        v = c * vals_all[s0 + t] * imx
                        q += v * v
                nrm = mx * math.sqrt(q)
            else:  # ||g||² = Σ_S (c x_j + ρ w_j)² + ρ²(||w||² − Σ_S w_j²)
                q = 0.0
                ws = 0.0
                for t in range(nz):
                    j = t if dense else cols_all[s0 + t]
                    gj = c * vals_all[s0 + t] + reg * w[j]
                    q += gj * gj
                    ws += w[j] * w[j]
                # ||w||² − Σ_S w_j² can cancel: add the rounding bound of the two sums of squares
                # ((d + |S|) u ||w||², u = 2^-53), so that nrm ≥ ||g|| and π stays inside E_A
                rest = w2 - ws + (d + nz + 2) * 0.5 * _EPS * w2
                if rest < 0.0:
                    rest = 0.0
                nrm = math.sqrt(q + reg * reg * rest)
            f, lam = _ball_factor(nrm, sqa, alpha)
            lam_out[r, i] = lam
            fc = f * c
            if dense:
                for t in range(nz):
                    out[r, t] += fc * vals_all[s0 + t]
            else:
                for t in range(nz):
                    out[r, cols_all[s0 + t]] += fc * vals_all[s0 + t]
            wcoef += f
        elif not scratch_dense:  # ρ = 0: the nonzeros of c x only
            if dense:
                for t in range(nz):
                    gv[t] = c * vals_all[s0 + t]
                lam = _project_vec(gv[:nz], a, sa, isa, pv[:nz], uu)
                for t in range(nz):
                    out[r, t] += pv[t]
            else:
                for t in range(nz):
                    j = cols_all[s0 + t]
                    gv[t] = c * vals_all[s0 + t]
                    av[t] = a[j]
                    sav[t] = sa[j]
                    isav[t] = isa[j]
                lam = _project_vec(gv[:nz], av[:nz], sav[:nz], isav[:nz], pv[:nz], uu)
                for t in range(nz):
                    out[r, cols_all[s0 + t]] += pv[t]
            lam_out[r, i] = lam
        else:  # ρ ≠ 0, varying a: the dense gradient in the scratch vector (holding ρ w)
            for t in range(nz):
                j = t if dense else cols_all[s0 + t]
                gv[j] = c * vals_all[s0 + t] + reg * w[j]
            lam = _project_vec(gv, a, sa, isa, pv, uu)
            lam_out[r, i] = lam
            for j in range(d):
                out[r, j] += pv[j]
            for t in range(nz):  # restore the scratch to ρ w
                j = t if dense else cols_all[s0 + t]
                gv[j] = reg * w[j]
    if reg != 0.0 and alpha >= 0.0:
        cw = reg * wcoef
        for j in range(d):
            out[r, j] += cw * w[j]


@numba.njit(cache=True)
def _glm_serial(vals_all, cols_all, ptr, dense_d, y, kind, reg, W, idx, mask, use_mask,
                Amat, SA, ISA, arow, const_a, out, lam_out):
    for r in range(W.shape[0]):
        _glm_trial(r, vals_all, cols_all, ptr, dense_d, y, kind, reg, W, idx, mask, use_mask,
                   Amat, SA, ISA, arow, const_a, out, lam_out)


@numba.njit(cache=True, parallel=True)
def _glm_parallel(vals_all, cols_all, ptr, dense_d, y, kind, reg, W, idx, mask, use_mask,
                  Amat, SA, ISA, arow, const_a, out, lam_out):
    for r in numba.prange(W.shape[0]):
        _glm_trial(r, vals_all, cols_all, ptr, dense_d, y, kind, reg, W, idx, mask, use_mask,
                   Amat, SA, ISA, arow, const_a, out, lam_out)


def glm_arguments(X, y, link, reg, W, idx, mask, Amat, arow):
    """The arguments of the GLM kernel (:func:`_glm_trial`) after ``W``, in its order, and the
    pass's work estimate: ``((vals, cols, ptr, dense_d, y, kind, reg), (idx, mask, use_mask,
    Amat, SA, ISA, arow, const_a), work)`` — the rows as CSR or flattened dense, the link's code,
    the per-row constants of ``A`` (``√a``, ``1/√a``, the constant value of a row or ``-1``).
    Shared by :func:`glm_projected_sum` and the fused release of PAGAN
    (:mod:`dpsim.fast.release`), so both run the kernel on the same inputs."""
    d = W.shape[1]
    R = W.shape[0]
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    bmax = idx.shape[1]
    use_mask = mask is not None
    mask_a = (np.ascontiguousarray(mask, dtype=np.bool_) if use_mask
              else np.ones((1, 1), dtype=np.bool_))
    Amat = np.ascontiguousarray(Amat, dtype=np.float64)
    SA = np.sqrt(Amat)
    with np.errstate(divide="ignore"):
        ISA = 1.0 / SA
    first = Amat[:, :1]
    const_a = np.where(np.all(Amat == first, axis=1), first[:, 0], -1.0)
    if isinstance(X, np.ndarray):
        Xd = np.ascontiguousarray(X, dtype=np.float64)
        vals, cols, ptr, dense_d = Xd.reshape(-1), np.arange(d, dtype=np.int64), np.zeros(1, np.int64), d
    else:
        vals, cols, ptr, dense_d = X.data, X.indices, X.indptr, 0
    work = R * bmax * (d if (dense_d or (reg != 0.0 and np.any(const_a < 0))) else
                       max(1.0, float(len(vals)) / max(X.shape[0], 1)))
    rows = (vals, cols, ptr, dense_d, np.ascontiguousarray(y, dtype=np.float64), LINKS.index(link),
            float(reg))
    batch = (idx, mask_a, use_mask, Amat, SA, ISA, np.ascontiguousarray(arow, dtype=np.int64),
             const_a)
    return rows, batch, work


def projected_fraction(lam, mask):
    """Per trial, the fraction of the batch's valid slots whose gradient was projected
    (``λ > 0``): ``lam`` ``(R, b)``, ``mask`` ``(R, b)`` bool or ``None`` (every slot valid)."""
    R, bmax = lam.shape
    valid = (bmax * np.ones(R) if mask is None else mask.sum(axis=1))
    return (lam > 0).sum(axis=1) / np.maximum(valid, 1)


def glm_projected_sum(X, y, link, reg, W, idx, mask, Amat, arow):
    """``(S, λ)`` with ``S_r = Σ_i π_{A_r}(g_{r,i})`` over the valid slots and ``λ`` the multipliers.

    ``g_{r,i} = l'(x·w_r, y)·x + ρ w_r`` for the row ``x = X[idx[r, i]]`` (the per-example gradient
    of the GLM ``l(x·w, y) + (ρ/2)||w||²``, ``l`` = ``link``), projected onto ``{Σ_j a_j g_j² ≤ 1}``
    with ``a = Amat[arow[r]]`` (rows of zeros: no constraint).  ``X``: dense ``(n, d)`` float64 or
    ``scipy.sparse`` CSR with sorted indices; ``W`` ``(R, d)``; ``idx`` ``(R, b)`` int;
    ``mask`` ``(R, b)`` bool or ``None``.  Padded (masked) slots contribute nothing and get
    ``λ = 0``.  Host NumPy float64 in and out; the ``(R, b, d)`` gradients are never formed (see the
    comment above :data:`LINKS` for the three cases and their cost).
    """
    W = np.ascontiguousarray(W, dtype=np.float64)
    R, d = W.shape
    rows, batch, work = glm_arguments(X, y, link, reg, W, idx, mask, Amat, arow)
    out = np.empty((R, d))
    lam = np.empty((R, batch[0].shape[1]))
    fn = _glm_parallel if _use_parallel(R, work) else _glm_serial
    fn(*rows, W, *batch, out, lam)
    return out, lam
