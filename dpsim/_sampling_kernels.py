"""O(R·b) batch samplers for R trials: a Numba kernel for uniform subsets (Floyd's algorithm).

Layer 0 (beside :mod:`dpsim.sampling`, which uses it).

The stream ("floyd-v1")
-----------------------
One step of ``R`` trials with batch sizes ``k_r`` (``Binomial(n, q)`` for Poisson sampling, drawn
by the caller from the sampler's PCG64 generator, or ``b`` for fixed-size sampling) consumes
exactly ``K = Σ_r k_r`` uniforms ``u ∈ [0, 1)`` drawn in one vectorized call
``rng.random(K)`` from the same host generator (so the run stays a deterministic function of the
seed, and the kernel needs no generator state of its own: Numba's ``np.random`` inside ``njit``
has a per-thread state that the host ``Generator`` does not seed).  Trial ``r`` takes the next
``k_r`` uniforms ``u_0 … u_{k−1}`` and runs Floyd's algorithm (Bentley & Floyd, "Programming
pearls: a sample of brilliance", CACM 30(9), 1987):

    S = ∅
    for i = 0 … k−1:   j = n − k + i;   t = ⌊u_i · (j + 1)⌋        (t uniform on {0, …, j})
                       if t ∈ S: add j to S  else: add t to S

which returns a uniformly random ``k``-subset of ``{0, …, n−1}`` (by induction on ``j``: after the
step for ``j`` the set is a uniform ``(i+1)``-subset of ``{0, …, j}``).  The members are written
in insertion order (the *set* is uniform; the order is not a uniform permutation — every consumer
sums over the batch, which does not depend on the order).  Membership is a bitmap of ``n`` bits
(cleared after each trial by unsetting the chosen bits), so a trial costs ``O(k)`` and a step
``O(R·b)`` plus ``O(n/64)`` once.

``⌊u (j+1)⌋`` with a 53-bit uniform ``u`` is uniform on ``{0, …, j}`` up to a relative
non-uniformity of at most ``(j+1)·2^{-53}`` per value (``≤ 1.2e-10`` for ``n = 10^6``), far
below anything a simulation can resolve; ``t`` is also clamped to ``j`` (``u·(j+1)`` cannot round
up to ``j+1`` for ``u ≤ 1 − 2^{-53}`` and ``j < 2^{52}``, the clamp is a guard).

The fused kernel (:mod:`dpsim.fast.block`) draws the same ``k_r`` uniforms one at a time from the same
generator through :mod:`dpsim._bitgen` (NumPy's ``next_double`` inlined: the values of
``rng.random(K)``, in the same order) and calls :func:`floyd_row` on them, so its batches are
these.

This stream replaces the earlier one (first ``k`` distinct values of an i.i.d. index stream, found
with argsorts of ``(R, m)`` candidates: ~65% of a small-d step).  The batch-size draws are
unchanged; the indices differ.  Statistical equivalence (inclusion frequencies, batch sizes,
uniformity of subsets) is tested in ``tests/core/test_sampling_kernels.py``.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["uniform_subsets", "subsets_and_mask", "floyd_fill", "floyd_row", "STREAM"]

#: Name of the index stream drawn here (recorded for reference in docs and reports).
STREAM = "floyd-v1"


@numba.njit(cache=True, nogil=True, _nrt=False)
def floyd_row(n, k, u, bits, out):
    """``out[:k]``: a uniform ``k``-subset of ``range(n)`` in Floyd's insertion order, from the
    uniforms ``u[:k]`` (stream ``floyd-v1``, module docstring).  ``bits`` is a zeroed bitmap of at
    least ``ceil(n / 64)`` words; it is left zeroed (only this subset's words are touched)."""
    for i in range(k):
        j = n - k + i
        t = np.int64(u[i] * (j + 1))
        if t > j:
            t = j
        w = t >> 6
        m = np.uint64(1) << np.uint64(t & 63)
        if bits[w] & m:
            t = j
            w = t >> 6
            m = np.uint64(1) << np.uint64(t & 63)
        bits[w] |= m
        out[i] = t
    for i in range(k):  # clear this subset's bits
        bits[out[i] >> 6] = np.uint64(0)


@numba.njit(cache=True, nogil=True)
def floyd_fill(n, sizes, u, out):
    """Row ``r`` of ``out`` (R, ≥ max(sizes)) int64: a uniform ``sizes[r]``-subset of ``range(n)``
    (insertion order) from the next ``sizes[r]`` entries of ``u``; remaining columns set to 0.
    Returns the number of uniforms consumed (``sum(sizes)``)."""
    R = sizes.shape[0]
    kmax = out.shape[1]
    bits = np.zeros((n + 63) // 64, dtype=np.uint64)
    pos = 0
    for r in range(R):
        k = sizes[r]
        row = out[r]
        floyd_row(n, k, u[pos:pos + k], bits, row)
        for i in range(k, kmax):
            row[i] = 0
        pos += k
    return pos


@numba.njit(cache=True)
def _subsets_and_mask(n, sizes, u):
    R = sizes.shape[0]
    kmax = 0
    kmin = n + 1
    for r in range(R):
        kmax = max(kmax, sizes[r])
        kmin = min(kmin, sizes[r])
    out = np.empty((R, kmax), dtype=np.int64)
    floyd_fill(n, sizes, u, out)
    mask = np.empty((R, kmax), dtype=np.bool_)
    for r in range(R):
        for i in range(kmax):
            mask[r, i] = i < sizes[r]
    return out, mask, kmin == kmax


def subsets_and_mask(rng: np.random.Generator, n: int, sizes: np.ndarray):
    """``(idx, mask)`` of one step: :func:`uniform_subsets` and the ``(R, max(sizes))`` mask of
    the real slots (``None`` when every row is full), in one kernel call.  ``sizes`` must lie in
    ``[0, n]`` (the samplers guarantee it; not re-checked here)."""
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    u = rng.random(int(sizes.sum()))
    idx, mask, full = _subsets_and_mask(int(n), sizes, u)
    return idx, (None if full else mask)


def uniform_subsets(rng: np.random.Generator, n: int, sizes: np.ndarray) -> np.ndarray:
    """Row r: a uniformly random ``sizes[r]``-subset of ``range(n)`` (stream ``floyd-v1``, module
    docstring), padded with 0 to ``max(sizes)`` columns; draws ``sum(sizes)`` uniforms from
    ``rng``."""
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    R = sizes.shape[0]
    kmax = int(sizes.max()) if R else 0
    out = np.empty((R, kmax), dtype=np.int64)
    if kmax == 0:
        return out
    if int(sizes.max()) > n or int(sizes.min()) < 0:
        raise ValueError(f"batch sizes must be in [0, n={n}], got sizes in "
                         f"[{int(sizes.min())}, {int(sizes.max())}]")
    u = rng.random(int(sizes.sum()))
    floyd_fill(int(n), sizes, u, out)
    return out
