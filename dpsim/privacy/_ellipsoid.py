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
(``tests/test_pagan.py``).
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
def _secular_sums(uu, Amat, k, lam):
    """``(Σ_j v_j², Σ_j a_j v_j² / (1 + λ a_j))`` with ``v_j = u_j / (1 + λ a_j)``."""
    Q = 0.0
    S = 0.0
    for j in range(uu.shape[0]):
        a = Amat[k, j]
        inv = 1.0 / (1.0 + lam * a)
        v = uu[j] * inv
        v2 = v * v
        Q += v2
        S += a * v2 * inv
    return Q, S


@numba.njit(cache=True)
def _project_row(G, Amat, SA, ISA, aidx, out, lam_out, i):
    """Project row ``i`` of ``G`` onto the ellipsoid of row ``aidx[i]`` of ``Amat``
    (``SA = √Amat``, ``ISA = 1/√Amat``, precomputed per ellipsoid)."""
    d = G.shape[1]
    k = aidx[i]
    # pass 1: scale of the whitened vector h = sqrt(a) * g and of g / sqrt(a)
    m = 0.0
    m2 = 0.0
    finite = True
    for j in range(d):
        ag = abs(G[i, j])
        if not ag < math.inf:
            finite = False
        h = SA[k, j] * ag
        if h > m:
            m = h
        h2 = ISA[k, j] * ag
        if h2 > m2:
            m2 = h2
    if not finite:  # inf or nan entries: no meaningful projection
        for j in range(d):
            out[i, j] = math.nan
        lam_out[i] = math.nan
        return
    if m == 0.0:  # zero row (also a masked / padded slot; or an all-zero row of `Amat`: no
        for j in range(d):  # constraint): the projection is the row itself
            out[i, j] = G[i, j]
        lam_out[i] = 0.0
        return
    # pass 2: whitened, scaled u = sqrt(a) g / m (|u_j| <= 1), ||A^{1/2} g|| and the bracket's
    # upper end ||A^{-1/2} g|| (where N <= 1)
    uu = np.empty(d)
    q = 0.0
    q2 = 0.0
    im = 1.0 / m
    im2 = 1.0 / m2
    for j in range(d):
        u = SA[k, j] * G[i, j] * im
        uu[j] = u
        q += u * u
        u2 = ISA[k, j] * G[i, j] * im2
        q2 += u2 * u2
    if m * math.sqrt(q) <= 1.0:  # already inside
        for j in range(d):
            out[i, j] = G[i, j]
        lam_out[i] = 0.0
        return
    lo = 0.0
    hi = m2 * math.sqrt(q2)
    lam = 0.0
    for _ in range(MAX_ITER):
        Q, S = _secular_sums(uu, Amat, k, lam)
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
            out[i, j] = G[i, j] / (1.0 + lam * Amat[k, j])
        if _a_norm(out, i, SA, k) <= 1.0:
            break
        lam += step
        step *= 2.0
    lam_out[i] = lam


@numba.njit(cache=True)
def _a_norm(X, i, SA, k):
    """``||A^{1/2} x||`` for row ``i`` of ``X``, computed exactly as the inside test of
    :func:`_project_row` does (largest whitened entry factored out)."""
    d = X.shape[1]
    m = 0.0
    for j in range(d):
        h = SA[k, j] * abs(X[i, j])
        if h > m:
            m = h
    if m == 0.0:
        return 0.0
    im = 1.0 / m
    q = 0.0
    for j in range(d):
        u = SA[k, j] * X[i, j] * im
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
