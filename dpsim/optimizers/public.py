"""Baselines that use public data: a ``public_fraction`` of the training set is carved out by the
engine, used without privacy, and never sampled for the private batches; ε covers the private part.

* ``pdp_sgd`` (Zhou et al. 2021, a baseline of [PAGAN] §6): DP-SGD with the release projected onto
  the top-``k`` subspace of the public per-example gradients.
* ``adadps`` (AdaDPS-RMSProp, Li et al. 2022; [DP2] §5.2): an RMSProp preconditioner fed the mean
  public gradient, ``v ← β v + (1−β) ḡ_pub²``, ``D = √v + ε``; the private release is of the
  preconditioned gradients, ``g̃ = (1/b)(Σ clip(g_i / D, C) + N(0, σ²C²I))``, and ``w ← w − η g̃``
  (:func:`~dpsim.transforms.scale_then_privatize` without unscaling, with the public statistic as
  lookahead).

Structured paths (generalized linear models on host NumPy float64; every other problem or
backend runs the materializing reference).  The public per-example gradients of a GLM are
``p_j = c_j x_j + ρ w`` with ``c_j = l'(x_j·w, y_j)``: they change with ``w`` (so the ``c_j`` are
recomputed every step, one sparse product ``X_pub w``) but the public feature rows do not.  Reused
across steps, and why that is exact:

* the public rows ``X_pub`` (a CSR slice) and their Gram matrix ``M = X_pub X_pubᵀ`` (``m × m``),
  functions of the fixed public split only;
* AdaDPS: the mean public gradient is ``ḡ = X_pubᵀ c / m + ρ w`` — the same sum as
  ``mean_j p_j`` in another order (no ``(R, m, d)`` array);
  with CSR features its two sparse products read the public rows in column order (transposed once
  per public split) and the second runs in one pass with the RMSProp update and scale that
  follow, with the reference's operations in its order (:func:`_adadps_fast`);
* PDP-SGD: with ``P = diag(c) X_pub + ρ 1 wᵀ`` (``m × d``) the top-``k`` right singular vectors of
  ``P`` are ``V_k = Pᵀ U_k Λ_k^{-1/2}`` for the top-``k`` eigenpairs ``(Λ_k, U_k)`` of the Gram
  matrix ``K = P Pᵀ = diag(c) M diag(c) + ρ(u 1ᵀ + 1 uᵀ) + ρ²||w||² 1 1ᵀ``, ``u = c ⊙ X_pub w``
  (an identity: ``P = U Σ Vᵀ`` gives ``K = U Σ² Uᵀ``), so the projection of the release ``g̃`` is
  ``V_k V_kᵀ g̃ = Pᵀ U_k Λ_k^{-1} U_kᵀ (P g̃)``: one ``m × m`` partial eigendecomposition per trial
  (``O(m³)``, :func:`_top_eigenpairs`; for ``m ≥ 400``, ``k ≤ m/20`` Lanczos, all trials at once:
  :func:`_batched_top_eigenpairs`) instead of the SVD of
  the dense ``m × d`` matrix (``O(m² d)`` and ``R m d`` memory).
  Accuracy: the eigenvectors of ``K`` carry an error of order ``ε_mach λ_1 / (λ_k − λ_{k+1})``
  against ``ε_mach s_1 / (s_k − s_{k+1})`` for the SVD (``λ = s²``), i.e. the top-``k`` block's
  condition number ``s_1/s_k`` more; a trial whose ``λ_k < 10⁻⁸ λ_1`` (nearly rank-deficient
  top-``k`` block, where the SVD's trailing directions are themselves ill-determined) falls
  back to the reference SVD of that trial's public gradients (when ``rank P < k`` the reference's
  trailing singular vectors are arbitrary null directions of ``P``, so only the projection onto
  the row space of ``P`` is determined; both paths give that part).  Tested against the reference
  (projections compared, not vectors: singular vectors are defined up to sign).  Used when
  ``m ≤ d``; with ``d < m`` the reference's SVD is the cheaper side and runs as before.

Not reused, because it is not exactly reusable: the ``c_j`` and the eigendecomposition of ``K``,
which move with ``w`` every step.  A solver warm-started from the previous step's ``U_k`` would be
an approximation, and a slow one where it matters: on the foundation workload's public split
(``m = 250``) the spectrum near the cut is flat (``λ_10/λ_11`` ≈ 1.01–1.03 at ``w = 0``), so a
subspace or Krylov iteration needs many ``R m² k`` block products per step.  The exact cost,
``R`` partial ``m × m`` eigendecompositions (``≈ (4/3) m³`` each), is what bounds PDP-SGD's
throughput there.

Large public splits (``m ≥ 400``, ``k ≤ m/20``): every trial's ``K_r = diag(c_r) M diag(c_r) + …``
shares the fixed ``M``, so the trials' Lanczos iterations run together
(:func:`_batched_top_eigenpairs`): one GEMM ``(R × m)(m × m)`` applies all ``K_r`` per step, no
``K_r`` is formed, and full reorthogonalization replaces ARPACK's restarts.  Its projections
agree with the per-trial solvers' to the Davis–Kahan bound, not bit for bit (the only numbers of
this module that moved when it came in; the public splits of the experiments — pagan_absreg's
``m = 50`` at ``d = 100``, noisy AdaGrad's ``m ≤ 250`` — are below 400 and keep the per-trial
dense ``eigh``, unchanged).  A trial it does not settle to ARPACK's residual criterion takes the
per-trial path.

At the throughput workload W (``n = 25 000``, ``d = 10 000``, 1 % dense, ``R = 64``,
``public_fraction = 0.05``: ``m = 1 250``, ``k = 2``) the public Gram spectrum has one spike and
a flat bulk, ``λ_2/λ_3 ≈ 1.01–1.02``: per-trial ARPACK needs many products with the dense ``K``,
one trial after another, and the batched Lanczos, which applies all trials' ``K`` in one GEMM,
is measured several times faster (docs/performance.md).  Why PDP-SGD stays far slower than
DP-SGD with any method returning the reference's projection to rounding: a Krylov method at that
gap needs on the order of 50–100 applications of each ``K_r`` whatever the start (a block method
more); one application to all 64 trials costs at least ``2 nnz(X_pub) R ≈ 1.6·10⁷``
multiply-adds through the sparse rows (``10⁸`` through the dense ``M``), i.e. ≥ 10⁹ a step,
orders of magnitude more than a DP-SGD step's work.  A dense LAPACK eigensolver (``eigh`` with
``subset_by_index``, driver ``evr`` or ``evx``) first reduces ``K_r`` to tridiagonal form
(``(4/3) m³ ≈ 2.6·10⁹`` flops per trial, ``1.7·10¹¹`` a step), slower still.

Pieces: ``"privatizer"``, ``"preconditioner"`` (adadps), ``"lr"``.  Ranges: ``lr`` ∈ [0, ∞),
``clip`` ∈ (0, ∞], ``noise_multiplier`` ∈ [0, ∞), ``beta`` ∈ [0, 1), ``eps`` ∈ (0, ∞), ``k`` a
positive integer, ``public_fraction`` ∈ (0, 1).
"""

from __future__ import annotations

from dataclasses import replace

import numba
import numpy as np
import scipy.linalg
import scipy.sparse.linalg

from .._validate import hyper, positive_int
from ..privacy.privatizers import gaussian_privatizer, public_subspace_privatizer
from ..transforms.base import GradientTransformation, named_chain
from ..transforms.combinators import scale_then_privatize
from ..transforms.preconditioners import PreconditionState, precondition, rmsprop
from ._hyper import BETA, CLIP, EPS_POSITIVE, FRACTION, LR, NOISE, SIGMA, PositiveInt
from ._registry import Optimizer, optimizer, register
from .baselines import learning_rate

__all__ = ["pdp_sgd", "adadps"]

#: The subspace dimension of PDP-SGD; it must not exceed min(public examples, d), which depends on
#: the problem, so generation draws k = 1.
SUBSPACE = PositiveInt(typical=(1, 1))

_PUBLIC_NOTE = ("needs public data: a public_fraction of the training set is carved out, used "
                "without privacy, and excluded from the private part; ε covers the private part")


def _fraction(x) -> float:
    return hyper("public_fraction", x, "(0, 1)")


_DOC = {
    "k": "Dimension of the public gradient subspace (at most min(public examples, d)).",
    "eps": "Additive constant ε of ``D = √v + ε`` (unrelated to the privacy ε).",
    "beta": "Decay β of the public second moment.",
}


@register(doc=_DOC)
def pdp_sgd(lr: LR = 0.1, clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0, k: SUBSPACE = 10,
            public_fraction: FRACTION = 0.01, noise: NOISE = "gaussian") -> Optimizer:
    """PDP-SGD: the DP-SGD release projected onto the top-``k`` public gradient subspace.

    Update rule (``V_t`` (d × k): the top-``k`` right singular vectors of the public per-example
    gradients at ``w_{t-1}``, recomputed each step)::

        g̃_t = V_t V_tᵀ (1/b) (Σ_{i∈B_t} clip(g_i, C) + σC ξ_t)
        w_t = w_{t-1} - η g̃_t

    Source: Zhou et al. 2021, a baseline of [PAGAN] §6 (ALGORITHMS §2.4).  The public split is not
    protected; ε covers the private part.

    Scale: ``k`` (10) must fit ``d`` and the ``public_fraction·n`` public examples
    (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> dpsim.optimizers.pdp_sgd(k=2).public_fraction
    0.01
    """
    return optimizer(named_chain(("privatizer", _subspace_privatizer(clip, noise_multiplier, k, noise)),
                                 learning_rate(lr)),
                     note=_PUBLIC_NOTE, public_fraction=_fraction(public_fraction))


def _public_mean_gradient(batch, ctx):
    """Mean public gradient ``(1/m) Σ_j p_j`` (R, d): ``X_pubᵀ c / m + ρ w`` for a GLM."""
    pub = _PUBLIC.get(batch)
    if pub is None:
        return ctx.xp.mean(batch.public_per_example(), axis=1)
    W = batch.params
    C = pub.derivatives(W)  # (m, R)
    out = np.ascontiguousarray((pub.X.T @ C).T)  # (R, d), a fresh array
    out /= pub.m  # after the sum, as the reference's mean
    if pub.reg:
        out += pub.reg * W
    return out


@register(doc=_DOC)
def adadps(lr: LR = 0.1, clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0, beta: BETA = 0.9,
           eps: EPS_POSITIVE = 1e-8, public_fraction: FRACTION = 0.01, noise: NOISE = "gaussian") -> Optimizer:
    """AdaDPS-RMSProp: preconditioner from public gradients, preconditioned per-example clipping.

    Update rule (``ḡ_pub`` the mean public gradient at ``w_{t-1}``)::

        v_t = β v_{t-1} + (1-β) ḡ_pub²
        D_t = √v_t + ε
        g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i / D_t, C) + σC ξ_t)
        w_t = w_{t-1} - η g̃_t

    Source: Li et al. 2022 (AdaDPS), a baseline of [DP2] §5.2 (ALGORITHMS §2.5).  One Gaussian
    release per step on the private part.

    Scale: ``eps`` (1e-8) is relative to the public ``√v``; [DP2] Table 2 tuned 1e-3 to 1e-2
    (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> opt = dpsim.optimizers.adadps(eps=1e-3)
    >>> opt.private, opt.public_fraction
    (True, 0.01)
    """
    eps = hyper("eps", eps, "(0, inf)")
    beta = hyper("beta", beta, "[0, 1)")
    privatizer = gaussian_privatizer(clip, noise_multiplier, noise=noise)
    stp = scale_then_privatize(privatizer, precondition(rmsprop(beta, eps)), eps_scale=eps,
                               unscale=False, lookahead=_public_mean_gradient)
    return optimizer(named_chain(_adadps_fast(stp, privatizer, beta, eps), learning_rate(lr)),
                     note=_PUBLIC_NOTE, public_fraction=_fraction(public_fraction))


def _adadps_fast(stp, privatizer, beta, eps):
    """AdaDPS's ``scale_then_privatize`` step (``stp``, the reference: same named state, same
    declared release) for a GLM with CSR features on host NumPy float64, in fewer passes.
    ``prepare(batch, state, params, ctx) -> (state', s)`` (or ``None`` off the fast path) is the
    public part below; the transform follows it with the privatizer's release of
    ``batch.scaled(s)``.  Its element is ``stp``'s parts with this ``prepare``
    (:attr:`dpsim.transforms.elements.Scaled.prepare`), from which the engine's fused release
    derives a :class:`dpsim.transforms.elements.Prepared`: ``prepare``, then the same release,
    the learning rate and the parameter update in one kernel pass (bit for bit,
    ``tests/fast/test_w_fast.py``).

    The reference computes the mean public gradient ``ḡ`` (R, d), feeds it to RMSProp
    (``v ← v·β + ḡ²·(1−β)``, and a preconditioned ``ḡ/D`` that it discards) and then forms
    ``s = 1/(√max(v, 0) + ε)``.  Here both sparse products of :func:`_public_mean_gradient`
    read ``X_pub`` in column order (:attr:`_PublicGLM.csc`, built once per public split):

    * ``X_pub Wᵀ`` by :func:`_csc_margins` (``W`` read once in column tiles, the ``m × R``
      result in cache) — each margin summed from 0 in increasing column order, which is SciPy's
      CSR order when the public rows list their columns in increasing order (canonical CSR; else
      :func:`_csr_matvecs`, SciPy's loop on ``Wᵀ``);
    * the link derivatives ``C``: :func:`_public_derivatives` (NumPy's ``exp``, the arithmetic
      around it in Numba, the same expressions);
    * ``X_pubᵀ C`` and RMSProp in one pass, :func:`_csc_rmsprop_scale`: each column's sums (rows
      increasing, from 0: SciPy's ``csc_matvecs`` on ``X_pubᵀ``) go straight into ``v`` (in place
      under ``StepContext.donate_state``, else in a copy) and ``s`` with the reference's operations in its order,
      each rounded once; ``X_pubᵀ C`` never exists as an ``(R, d)`` array, nor ``Wᵀ``.

    Bit-for-bit the reference's numbers (``tests/optimizers/test_variants.py``, ``tests/optimizers/test_public_fast.py``).
    The private release of the batch scaled by ``s`` is the reference's privatizer, unchanged.

    What is left per step, and why none of it can be reused: the two products are over ``W`` and
    ``C``, which change every step (the noise makes ``W`` dense), and the statistic is the square
    of the *mean* public gradient, not a mean of squares, so the fixed ``X_pub ∘ X_pub`` of a GLM's
    per-example second moment (``Σ_j c_j² x_j ∘ x_j``) does not enter.  At workload W (``m = 1 250``,
    ``2 × 8·10⁶`` multiply-adds, ``6.4·10⁵`` divisions and square roots) this path is measured
    faster than the previous one (row-order products through ``Wᵀ`` and an ``(R, d)``
    ``X_pubᵀ C``); the numbers are in docs/performance.md."""
    pname, qname = stp.names

    def prepare(batch, state, params, ctx):
        pub = _PUBLIC.get(batch)
        q = state[qname]
        if (pub is None or getattr(pub.X, "format", None) != "csr" or not isinstance(q.v, np.ndarray)
                or q.v.dtype != np.float64 or q.v.shape != params.shape or not q.v.flags.c_contiguous):
            return None
        W = np.ascontiguousarray(params)
        R, d = W.shape
        colptr, rows, cdata = pub.csc
        if pub.link == "linear":
            C = np.full((pub.m, R), -1.0)
        else:
            S = np.zeros((pub.m, R))
            if pub.rows_sorted:  # column order visits each row's entries in its CSR order
                _csc_margins(colptr, rows, cdata, W, S, _TILE_MARGINS)
            else:
                X = pub.X
                _csr_matvecs(X.data, X.indices, X.indptr, np.ascontiguousarray(W.T), S)
            C = _public_derivatives(pub, S)
            del S
        v_out = q.v if getattr(ctx, "donate_state", False) else q.v.copy()  # updated in place
        s = np.empty_like(q.v)
        b = ctx.hp(beta)
        _csc_rmsprop_scale(colptr, rows, cdata, C, float(pub.m), float(pub.reg), W, v_out, _column(b),
                           _column(1.0 - b), _column(ctx.hp(eps)), s, _TILE_GRADIENT)
        new = dict(state)
        new[qname] = PreconditionState(v=v_out)
        return new, s

    def update(batch, state, params, ctx):
        out = prepare(batch, state, params, ctx)
        if out is None:
            return stp.update(batch, state, params, ctx)
        new, s = out
        g, p = privatizer.update(batch.scaled(s), state[pname], params, ctx)
        return g, {pname: p, qname: new[qname]}

    return GradientTransformation(stp.init, update, stp.privacy, stp.names,
                                  element=replace(stp.element, prepare=prepare))


def _column(x):
    """A scalar or ``(R, 1)`` value as a float64 ``(1, 1)`` or ``(R, 1)`` array."""
    return np.ascontiguousarray(np.asarray(x, dtype=np.float64).reshape(-1, 1))


@numba.njit(cache=True, nogil=True)
def _csr_matvecs(data, indices, indptr, Xt, out):
    """``out += A Xt`` for CSR ``A`` and C-ordered ``Xt`` (cols, R): SciPy's ``csr_matvecs`` loop."""
    R = Xt.shape[1]
    for i in range(indptr.shape[0] - 1):
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            a = data[k]
            for r in range(R):
                out[i, r] += a * Xt[j, r]


#: Columns per tile of :func:`_csc_margins` (a ``(tile, R)`` block of ``Wᵀ`` read once) and of
#: :func:`_csc_rmsprop_scale` (a ``(tile, R)`` block of ``X_pubᵀ C`` kept in cache).
_TILE_MARGINS = 32
_TILE_GRADIENT = 64


@numba.njit(cache=True, nogil=True)
def _csc_of(data, indices, indptr, ncols):
    """The CSR matrix ``(data, indices, indptr)`` in column order: ``(colptr, rows, values)``.
    A stable counting sort by column: within a column the entries keep their CSR order (rows
    increasing, and a row's repeated column in its order)."""
    nnz = indptr[indptr.shape[0] - 1]
    colptr = np.zeros(ncols + 1, np.int64)
    for k in range(nnz):
        colptr[indices[k] + 1] += 1
    for j in range(ncols):
        colptr[j + 1] += colptr[j]
    pos = colptr[:ncols].copy()
    rows = np.empty(nnz, np.int64)
    values = np.empty(nnz, np.float64)
    for i in range(indptr.shape[0] - 1):
        for k in range(indptr[i], indptr[i + 1]):
            p = pos[indices[k]]
            rows[p] = i
            values[p] = data[k]
            pos[indices[k]] = p + 1
    return colptr, rows, values


@numba.njit(cache=True, nogil=True)
def _csc_margins(colptr, rows, values, W, S, tile):
    """``S += X Wᵀ`` (``S`` (m, R) zeros on entry) from ``X`` in column order.  ``S[i, r]``
    receives ``x_ij · W[r, j]`` for ``j`` increasing: when every CSR row of ``X`` lists its columns
    in increasing order that is the order of :func:`_csr_matvecs` (SciPy's ``csr_matvecs``),
    term by term, each sum from 0 — the same numbers.  ``W`` is read once, ``tile`` columns at a
    time into a ``(tile, R)`` block; ``S`` (``m × R``) stays in cache."""
    R, d = W.shape
    blk = np.empty((tile, R))
    for j0 in range(0, d, tile):
        jt = min(tile, d - j0)
        for r in range(R):
            for jj in range(jt):
                blk[jj, r] = W[r, j0 + jj]
        for jj in range(jt):
            j = j0 + jj
            for k in range(colptr[j], colptr[j + 1]):
                i = rows[k]
                a = values[k]
                for r in range(R):
                    S[i, r] += a * blk[jj, r]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _csc_rmsprop_scale(colptr, rows, values, C, m, reg, W, v, beta, one_beta, eps, s, tile):
    """AdaDPS's public statistic and scale in one pass over ``X = X_pub`` in column order.

    Per column ``j``: ``G[j, r] = Σ_i x_ij C[i, r]`` with the rows ``i`` increasing, from 0 —
    SciPy's ``csc_matvecs`` on ``Xᵀ`` (the reference's ``X_pubᵀ C``) term by term (four terms per
    sweep over the accumulator row, each added and rounded in turn: the same sums); then per
    element, as the reference: ``ḡ = G/m (+ reg·W)``, ``v' = v·β + (ḡ·ḡ)·(1−β)``,
    ``s = 1/(√max(v', 0) + ε)`` (NaN propagating like ``np.maximum``); ``v`` is updated in place
    (one array read and written at the same index: the element loop vectorizes, which it does not
    when the output is a second array that may alias ``v``) and ``s`` written.  ``G`` exists only
    as a ``(tile, R)`` block.  IEEE division and square root (``error_model="numpy"`` only drops
    Python's zero-division check)."""
    R, d = W.shape
    acc = np.empty((tile, R))
    accT = np.empty((R, tile))
    for j0 in range(0, d, tile):
        jt = min(tile, d - j0)
        for jj in range(jt):
            j = j0 + jj
            for r in range(R):
                acc[jj, r] = 0.0
            k = colptr[j]
            end = colptr[j + 1]
            while k + 4 <= end:  # four terms per pass over the row of acc, added one by one
                i0, i1, i2, i3 = rows[k], rows[k + 1], rows[k + 2], rows[k + 3]
                a0, a1, a2, a3 = values[k], values[k + 1], values[k + 2], values[k + 3]
                for r in range(R):
                    acc[jj, r] = (((acc[jj, r] + a0 * C[i0, r]) + a1 * C[i1, r]) + a2 * C[i2, r]) + a3 * C[i3, r]
                k += 4
            while k < end:
                a = values[k]
                i = rows[k]
                for r in range(R):
                    acc[jj, r] += a * C[i, r]
                k += 1
        for jj in range(jt):  # transposed in cache, so that the element loop below is contiguous
            for r in range(R):
                accT[r, jj] = acc[jj, r]
        for r in range(R):
            br = beta[r if beta.shape[0] > 1 else 0, 0]
            obr = one_beta[r if one_beta.shape[0] > 1 else 0, 0]
            er = eps[r if eps.shape[0] > 1 else 0, 0]
            _rmsprop_scale_row(accT[r, :jt], m, reg, W[r, j0:j0 + jt], v[r, j0:j0 + jt], br, obr, er,
                               s[r, j0:j0 + jt])


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _rmsprop_scale_row(G, m, reg, w, v, beta, one_beta, eps, s):
    """One row's elements of :func:`_csc_rmsprop_scale` (contiguous 1-D views)."""
    if reg != 0.0:
        for j in range(G.shape[0]):
            g = G[j] / m + reg * w[j]
            x = v[j] * beta + (g * g) * one_beta
            v[j] = x
            if not (x >= 0.0 or x != x):
                x = 0.0
            s[j] = 1.0 / (np.sqrt(x) + eps)
    else:
        for j in range(G.shape[0]):
            g = G[j] / m
            x = v[j] * beta + (g * g) * one_beta
            v[j] = x
            if not (x >= 0.0 or x != x):
                x = 0.0
            s[j] = 1.0 / (np.sqrt(x) + eps)


@numba.njit(cache=True, nogil=True)
def _logistic_exponent(S, y, t, a):
    """``t = (−y) · S`` and ``a = −|t|`` (the logistic link's operands, the reference's order)."""
    m, R = S.shape
    for i in range(m):
        ny = -y[i]
        for r in range(R):
            x = ny * S[i, r]
            t[i, r] = x
            a[i, r] = -abs(x)


@numba.njit(cache=True, nogil=True)
def _logistic_from_exp(t, e, y, out):
    """``out = (−y) · (1/(1 + e) if t ≥ 0 else e/(1 + e))`` elementwise (``e = exp(−|t|)``)."""
    m, R = t.shape
    for i in range(m):
        ny = -y[i]
        for r in range(R):
            x = e[i, r]
            q = 1.0 + x  # both branches' expressions, then a select (the loop vectorizes)
            w1 = 1.0 / q
            w2 = x / q
            out[i, r] = ny * (w1 if t[i, r] >= 0 else w2)


def _public_derivatives(pub, S):
    """``l'(S, y)`` (m, R), C-ordered: :func:`_link_derivative`'s numbers.  For the logistic link
    the arithmetic around the exponential runs in two Numba passes; the exponential itself is
    NumPy's ``np.exp`` on the same contiguous operand (its rounding is NumPy's, whichever SIMD
    loop this machine's NumPy uses)."""
    if pub.link != "logistic":
        return np.ascontiguousarray(_link_derivative(pub.link, S, pub.y[:, None]))
    t = np.empty_like(S)
    a = np.empty_like(S)
    _logistic_exponent(S, pub.y, t, a)
    e = np.exp(a)
    del a
    out = np.empty_like(S)
    _logistic_from_exp(t, e, pub.y, out)
    return out


# ------------------------------------------------------------------------------------------------
# GLM structure of the public split (module docstring)


def _link_derivative(link, m, y):
    """``l'(m, y)`` elementwise: squared ``m − y``; logistic ``−y σ(−y m)`` (stable); absolute
    ``sign(m − y)``; linear ``−1`` (the links of :mod:`dpsim.problems`)."""
    if link == "squared":
        return m - y
    if link == "logistic":
        t = -y * m
        e = np.exp(-np.abs(t))
        return -y * np.where(t >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    if link == "absolute":
        return np.sign(m - y)
    return -np.ones_like(m)



class _PublicGLM:
    """The public split's rows of a GLM: ``X`` (``m × d``, CSR or dense), labels ``y``, ``link``,
    ``reg``, and (lazily) ``gram = X Xᵀ`` (dense ``m × m``)."""

    def __init__(self, features, X, y, link, reg, public_idx):
        self.features = features
        self.public_idx = public_idx
        self.X, self.y, self.link, self.reg = X, y, link, reg
        self.m = X.shape[0]
        self._gram = self._csc = self._rows_sorted = None

    @property
    def csc(self):
        """``X`` (CSR) in column order, :func:`_csc_of`: ``(colptr, rows, values)``."""
        if self._csc is None:
            X = self.X
            self._csc = _csc_of(X.data, X.indices.astype(np.int64), X.indptr.astype(np.int64), X.shape[1])
        return self._csc

    @property
    def rows_sorted(self) -> bool:
        """Whether every CSR row of ``X`` lists its columns in nondecreasing order."""
        if self._rows_sorted is None:
            X = self.X
            step = np.diff(X.indices)
            first = np.zeros(step.shape[0], bool)  # a row's first entry follows another row's last
            starts = X.indptr[1:-1][X.indptr[1:-1] > 0] - 1
            first[starts[starts < step.shape[0]]] = True
            self._rows_sorted = bool(np.all((step >= 0) | first))
        return self._rows_sorted

    @property
    def gram(self):
        if self._gram is None:
            G = self.X @ self.X.T
            self._gram = np.ascontiguousarray(G.toarray() if hasattr(G, "toarray") else G)
        return self._gram

    def margins(self, W):
        """``X_pub W.T`` (m, R)."""
        return np.asarray(self.X @ np.ascontiguousarray(W.T))

    def derivatives(self, W, margins=None):
        """``c_{j r} = l'(x_j · w_r, y_j)`` (m, R)."""
        if self.link == "linear":
            return np.full((self.m, W.shape[0]), -1.0)
        M = self.margins(W) if margins is None else margins
        return _link_derivative(self.link, M, self.y[:, None])


class _PublicCache:
    """One :class:`_PublicGLM` per (feature matrix, public split), rebuilt when either changes."""

    def __init__(self):
        self._entry = None

    def get(self, batch):
        problem = batch.problem
        W = batch.params
        idx = batch.public_idx
        if (idx is None or not isinstance(W, np.ndarray) or W.dtype != np.float64
                or not isinstance(idx, np.ndarray)):
            return None
        link, X = problem.link, problem.features
        y = problem.labels
        if (link not in ("squared", "logistic", "absolute", "linear") or X is None
                or not isinstance(y, np.ndarray) or y.shape != (problem.n,)):
            return None
        if not (isinstance(X, np.ndarray) and X.dtype == np.float64
                or getattr(X, "format", None) == "csr" and X.dtype == np.float64):
            return None
        e = self._entry
        if (e is not None and e.features is X and e.public_idx.shape == idx.shape
                and np.array_equal(e.public_idx, idx) and e.reg == problem.reg and e.link == link):
            return e
        e = _PublicGLM(X, X[idx], np.ascontiguousarray(y[idx]), link, problem.reg, np.array(idx))
        self._entry = e
        return e


_PUBLIC = _PublicCache()

#: A trial whose top-k Gram eigenvalue is below this fraction of the largest uses the reference SVD.
GRAM_RELATIVE_FLOOR = 1e-8


#: Lanczos (ARPACK) instead of the dense partial eigendecomposition when m ≥ this and k ≤ m/20.
LANCZOS_MIN_M = 400


def _top_eigenpairs(K, k):
    """The ``k`` largest eigenpairs ``(λ ascending, U)`` of the symmetric PSD matrix ``K``.

    Dense LAPACK (``dsyevr`` on the index range, ``(4/3) m³`` for the tridiagonal reduction), or
    for a large ``m`` and small ``k`` implicitly restarted Lanczos (ARPACK, ``tol=0``: Ritz residuals
    at machine precision, the dense solver's backward error ``O(ε_mach ||K||)``; a fixed start
    vector, so the result is deterministic).  A Lanczos run that does not converge, or whose
    residuals ``||K u − λ u||`` exceed ``100 m ε_mach λ_max``, is redone densely.
    """
    m = K.shape[0]
    if _use_lanczos(m, k):
        v0 = np.random.default_rng(m).standard_normal(m)
        try:
            lam, U = scipy.sparse.linalg.eigsh(K, k=k, which="LA", tol=0, v0=v0,
                                               ncv=min(m, max(2 * k + 1, 20)))
        except scipy.sparse.linalg.ArpackNoConvergence:
            lam = None
        if lam is not None:
            order = np.argsort(lam)
            lam, U = lam[order], U[:, order]
            res = np.linalg.norm(K @ U - U * lam, axis=0)
            if np.all(res <= 100 * m * np.finfo(float).eps * max(lam[-1], 0.0)):
                return lam, U
    return scipy.linalg.eigh(K, subset_by_index=[m - k, m - 1], driver="evr", overwrite_a=True,
                             check_finite=False)


def _use_lanczos(m, k) -> bool:
    """Krylov instead of the dense partial eigendecomposition: ``m ≥ LANCZOS_MIN_M``, ``k ≤ m/20``."""
    return m >= LANCZOS_MIN_M and 20 * k <= m


#: A reorthogonalization pass that keeps more than this fraction of the vector's norm leaves it
#: orthogonal to the basis to rounding (Daniel, Gragg, Kaufman & Stewart 1976, "twice is enough").
_DGKS = 1 / np.sqrt(2)

#: Most Lanczos steps of :func:`_batched_top_eigenpairs` (its basis holds ``R × (steps + 1) × m``
#: floats); a trial not converged by then takes :func:`_top_eigenpairs`.
LANCZOS_MAX_STEPS = 300

#: Trials per call of :func:`_batched_top_eigenpairs` (bounds its basis: 64 × 301 × m floats,
#: 190 MB at m = 1 250, of which the ~80 steps used at workload W touch a quarter).
LANCZOS_TRIALS = 64


def _batched_top_eigenpairs(M, C, S, W, reg, k):
    """The top-``k`` eigenpairs of every trial's public Gram matrix
    ``K_r = diag(c_r) M diag(c_r) + ρ(u_r 1ᵀ + 1 u_rᵀ) + ρ²||w_r||² 1 1ᵀ`` (module docstring),
    all trials at once, without forming any ``K_r``.

    Lanczos with full reorthogonalization (classical Gram–Schmidt against the whole basis each
    step, a second pass where the first removed more than ``1 − 1/√2`` of the norm — the DGKS
    criterion — so no restarts and no ghost eigenvalues), started from
    :func:`_top_eigenpairs`'s fixed vector.  One step applies every ``K_r`` through one GEMM with
    the fixed ``M``: ``((X ⊙ Cᵀ) M) ⊙ Cᵀ`` for the ``(R, m)`` block of Lanczos vectors, plus the
    rank-two regularization terms.  Every 10 steps the tridiagonal matrix of each unconverged trial
    is solved for its top ``k`` (``eigh_tridiagonal``); a trial stops when the Ritz residual
    estimates ``β_j |s_{j,i}|`` are at most ``ε_mach |θ_i|`` (ARPACK's convergence test at
    ``tol=0``, which :func:`_top_eigenpairs` uses: a looser ``10 m ε_mach λ_max`` left projectors
    ~10⁻¹² from LAPACK's at workload W, against ~10⁻¹⁵ for ARPACK's and for this one).  The Ritz pairs are then
    accepted only if their true residuals ``||K u − λ u||`` (applied batched) are at most
    ``100 m ε_mach λ_max``, :func:`_top_eigenpairs`'s criterion for ARPACK, and the Ritz vectors
    are orthonormal to ``100 m ε_mach`` (the projection ``U Λ⁻¹ Uᵀ`` needs it); a trial that fails or
    does not converge within :data:`LANCZOS_MAX_STEPS` is left to :func:`_top_eigenpairs`.

    Returns ``(lam (R, k) ascending, U (R, m, k), ok (R,) bool)``.  Same accuracy class as the
    per-trial solvers (backward error ``O(m ε_mach ||K||)``), not the same rounding: projections
    agree with theirs to the Davis–Kahan bound (``tests/optimizers/test_public_fast.py``); the floating-point
    sums inside the GEMM may depend on the number of trials in the last bits.
    """
    m, R = C.shape
    eps = np.finfo(float).eps
    Ct = np.ascontiguousarray(C.T)
    if reg:
        Ut = np.ascontiguousarray((C * S).T)
        wn = np.einsum("rd,rd->r", W, W)

    def apply(X):
        Y = (X * Ct) @ M
        Y *= Ct
        if reg:
            s1 = X.sum(axis=1)
            su = np.einsum("rm,rm->r", Ut, X)
            Y += reg * (Ut * s1[:, None] + su[:, None]) + (reg * reg * wn * s1)[:, None]
        return Y

    J = min(LANCZOS_MAX_STEPS, m)
    Q = np.empty((R, J + 1, m))
    v0 = np.random.default_rng(m).standard_normal(m)  # _top_eigenpairs's start vector
    Q[:, 0, :] = v0 / np.linalg.norm(v0)
    alpha = np.zeros((R, J))
    beta = np.zeros((R, J))
    lam = np.zeros((R, k))
    U = np.zeros((R, m, k))
    done = np.zeros(R, bool)
    for j in range(J):
        qj = Q[:, j, :]
        w = apply(qj)
        a = np.einsum("rm,rm->r", w, qj)
        w -= a[:, None] * qj
        if j:
            w -= beta[:, j - 1, None] * Q[:, j - 1, :]
        b = np.linalg.norm(w, axis=1)
        for _ in range(2):  # full reorthogonalization; a second pass only where the first cut w
            h = np.matmul(Q[:, :j + 1, :], w[:, :, None])[:, :, 0]
            w -= np.matmul(h[:, None, :], Q[:, :j + 1, :])[:, 0, :]
            a += h[:, j]
            b_new = np.linalg.norm(w, axis=1)
            if np.all(b_new > _DGKS * b):  # Daniel–Gragg–Kaufman–Stewart: orthogonal to rounding
                b = b_new
                break
            b = b_new
        alpha[:, j] = a
        beta[:, j] = b
        n = j + 1
        if n >= k and (n % 10 == 0 or n == J):
            for r in np.flatnonzero(~done):
                ev, vec = scipy.linalg.eigh_tridiagonal(alpha[r, :n], beta[r, :n - 1], select="i",
                                                        select_range=(n - k, n - 1))
                if np.all(np.abs(b[r] * vec[-1, :]) <= eps * np.abs(ev)):  # ARPACK's tol=0
                    done[r] = True
                    lam[r] = ev
                    U[r] = Q[r, :n, :].T @ vec
            if done.all():
                break
        Q[:, j + 1, :] = w / np.where(b > 0, b, 1.0)[:, None]
    res = np.empty((R, k))
    for i in range(k):
        res[:, i] = np.linalg.norm(apply(np.ascontiguousarray(U[:, :, i])) - U[:, :, i] * lam[:, i, None],
                                   axis=1)
    gram_u = np.matmul(np.transpose(U, (0, 2, 1)), U) - np.eye(k)
    ok = (done & np.all(res <= 100 * m * eps * np.maximum(lam[:, -1:], 0.0), axis=1)
          & (np.max(np.abs(gram_u), axis=(1, 2)) <= 100 * m * eps))
    return lam, U, ok


def _subspace_privatizer(clip, noise_multiplier, k, noise) -> GradientTransformation:
    """PDP-SGD's privatizer: :func:`~dpsim.privacy.privatizers.public_subspace_privatizer` (the
    reference: same state, same declared release) with the projection computed from the public
    Gram matrix for a GLM (module docstring).  The release itself (clipped sum + noise) is the
    reference's Gaussian privatizer, so the random stream is unchanged."""
    k = positive_int("k", k)
    ref = public_subspace_privatizer(clip, noise_multiplier, k=k, noise=noise)
    inner = gaussian_privatizer(clip, noise_multiplier, noise=noise)

    def update(batch, state, params, ctx):
        pub = _PUBLIC.get(batch)
        if pub is None or pub.m > params.shape[1]:  # d < m: the d × d side is the cheap one
            return ref.update(batch, state, params, ctx)
        m, d = pub.m, params.shape[1]
        if k > min(m, d):
            raise ValueError(f"k={k} exceeds the rank available from {m} public examples in d={d}")
        g, state = inner.update(batch, state, params, ctx)
        return _project_public_subspace(pub, params, np.asarray(g), k), state

    return GradientTransformation(ref.init, update, ref.privacy)


def _project_public_subspace(pub, W, g, k):
    """``V_k V_kᵀ g_r`` per trial from the Gram matrix of the public gradients (module docstring)."""
    R, d = W.shape
    m, reg = pub.m, pub.reg
    S = pub.margins(W)  # (m, R)
    C = pub.derivatives(W, S)
    Pg = C * np.asarray(pub.X @ np.ascontiguousarray(g.T))  # (m, R): diag(c) X g
    if reg:
        Pg = Pg + reg * np.sum(W * g, axis=1)[None, :]
    M = pub.gram
    Y = np.empty((m, R))
    fallback = []
    batched = None
    if _use_lanczos(m, k):  # trials in chunks: the Lanczos basis is chunk × (steps + 1) × m floats
        parts = [_batched_top_eigenpairs(M, C[:, r0:r0 + LANCZOS_TRIALS], S[:, r0:r0 + LANCZOS_TRIALS],
                                         W[r0:r0 + LANCZOS_TRIALS], reg, k)
                 for r0 in range(0, R, LANCZOS_TRIALS)]
        batched = [np.concatenate(z) for z in zip(*parts)]
    for r in range(R):
        if batched is not None and batched[2][r]:
            lam, U = batched[0][r], batched[1][r]
        else:
            c = C[:, r]
            K = M * np.outer(c, c)
            if reg:
                u = c * S[:, r]
                K += reg * (u[:, None] + u[None, :]) + reg * reg * float(W[r] @ W[r])
            lam, U = _top_eigenpairs(K, k)
        top = lam[-1]
        if not (lam[0] > GRAM_RELATIVE_FLOOR * top):
            fallback.append(r)
            Y[:, r] = 0.0
            continue
        Y[:, r] = U @ ((U.T @ Pg[:, r]) / lam)
    out = np.ascontiguousarray((pub.X.T @ (C * Y)).T)  # Pᵀ y = X_pubᵀ (c ⊙ y) + ρ (Σ y) w
    if reg:
        out += reg * Y.sum(axis=0)[:, None] * W
    if fallback:
        Xd = pub.X.toarray() if hasattr(pub.X, "toarray") else pub.X
    for r in fallback:  # the reference's SVD on this trial's dense public gradients
        P = C[:, r:r + 1] * Xd
        if reg:
            P = P + reg * W[r]
        _, _, vh = np.linalg.svd(P, full_matrices=False)
        V = vh[:k]
        out[r] = V.T @ (V @ g[r])
    return out
