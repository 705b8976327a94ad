"""Noisy AdaGrad with a privatized, publicly projected diagonal preconditioner ([DP2] App. C.6).

[DP2] Fig. 12 compares DP² with "a noisy AdaGrad variant based on Kairouz et al. (2021a)"
(*(Nearly) dimension independent private ERM with AdaGrad rates via publicly estimated
subspaces*, COLT 2021) in which the gradients and the preconditioner are privatized
*separately*.  The paper describes it in words only: in each iteration the clean gradients are
clipped and noised, and so is "the preconditioner estimated using clean gradients"; public data
give a gradient subspace — the top-``k`` eigenspace of ``M_t = (1/|X_pub|) Σ_{x∈X_pub} ∇f(x; w_t)
∇f(x; w_t)ᵀ`` (Zhou et al. 2021, as for PDP-SGD) — onto which the noisy preconditioner is
projected; the noisy gradient is then divided by the noisy preconditioner, in the *diagonal* form
(the paper's simplification of Kairouz et al.'s full matrix).  ALGORITHMS.md does not specify it;
the rule below is dpsim's reconstruction (**reconstructed**), with per-example gradients ``g_i``,
nominal batch size ``b``, step noise ``z_t, z'_t ~ N(0, I_d)`` drawn in that order:

    g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i, C)          + σ_g C  z_t)      (release 1: the gradient)
    s̃_t = (1/b) (Σ_{i∈B_t} clip(g_i ⊙ g_i, C₂)   + σ_v C₂ z'_t)     (release 2: the squares)
    v_t  = v_{t−1} + s̃_t                                          (AdaGrad accumulator)
    G_t  = √max(v_t, 0)                                           (diagonal AdaGrad preconditioner)
    H_t  = V_t V_tᵀ G_t                                           (projection, V_t: d × k, public)
    w_t  = w_{t−1} − η g̃_t / (max(H_t, 0) + ε)

``clip(u, C) = u · min(1, C/‖u‖₂)`` as everywhere; ``V_t`` holds the top-``k`` right singular
vectors of the public per-example gradients at ``w_{t−1}`` (the top eigenvectors of ``M_t``),
recomputed every step (the expensive part the paper mentions: an eigendecomposition per step).

Choices where the paper is silent, and why:

* **What is released for the preconditioner.**  The per-step statistic ``(1/b) Σ g_i ⊙ g_i`` — the
  diagonal of the per-step increment ``(1/b) Σ g_i g_iᵀ`` of a (full-matrix) AdaGrad second moment
  — privatized on the step's own batch, and accumulated *after* the noise (post-processing).  The
  authors' code instead clips and noises the square root of the whole accumulated clean sum at
  every step; that statistic depends on every earlier batch, so each of its releases would have to
  be accounted without amplification by sampling and with a sensitivity that covers all past
  participations — a cost their reported ε does not include.  The per-step release keeps the
  declared ε exact (below).
* **The clip of the squares.**  The vector ``q_i = g_i ⊙ g_i`` (coordinates ``g_{ij}²``, so
  ``‖q_i‖₂ = ‖g_i‖₄²``) is clipped to ℓ2 norm ``C₂``, a hyperparameter separate from ``C``
  (``clip(q_i, C₂)`` keeps ``q_i ≥ 0``).  Clipping ``g_i`` to ``√C₂`` first and squaring would also
  bound ``‖q_i‖₂ ≤ C₂`` but shrinks the squares of every example whose ℓ2 norm exceeds ``√C₂``
  even when its ℓ4 norm does not.
* **Projection of ``G`` (the preconditioner), not of ``v``**, with the positive part before the
  division.  Projecting a non-negative vector onto a ``k``-dimensional subspace leaves coordinates
  outside the subspace near zero or negative; ``max(H, 0) + ε`` keeps every denominator ≥ ε (the
  authors' code adds ε to the raw projection, so it may divide by a negative or tiny number).  The
  guard can only help the method.  ``k = d`` with public gradients spanning ``R^d`` (at least
  ``d`` public examples) makes ``V Vᵀ = I``: then ``H = G ≥ 0``.
* **The split of the budget** between the two releases: ``σ_g = σ/√(1−ρ)`` and ``σ_v = σ/√ρ``
  with ``ρ`` = ``precond_share`` (default ½: ``σ_g = σ_v = √2 σ``), so that
  ``σ_g⁻² + σ_v⁻² = σ⁻²`` and one step costs exactly one DP-SGD step at noise multiplier ``σ``.
  Comparisons "at the same σ" are then comparisons at the same ε.

**Privacy declaration and sensitivity.**  Two Gaussian releases per step, on the same batch
(sampled from the private part only; the public split is carved out by the engine and used without
privacy, ε covers the private part):

* release 1 is the clipped sum ``Σ clip(g_i, C)``: adding or removing one example moves it by at
  most ``C`` in ℓ2; noise std ``σ_g C``, declared as ``GaussianRelease(σ_g)``;
* release 2 is ``Σ clip(q_i, C₂)``: one example moves it by at most ``‖clip(q_i, C₂)‖₂ ≤ C₂``
  (every batch size, so the Poisson add/remove argument applies as for DP-SGD); noise std
  ``σ_v C₂``, declared as ``GaussianRelease(σ_v)`` with that sensitivity;
* the accountant merges the releases of one step (the whitened shift of the pair has squared norm
  at most ``σ_g⁻² + σ_v⁻²``): ``σ_eff = (σ_g⁻² + σ_v⁻²)^{-1/2} = σ``.  Under replace-one
  adjacency the accountant doubles both sensitivities, as for every release.

Everything else — the accumulator, the square root, the projection (a function of the public split
and of ``w_{t−1}``, itself a post-processing of earlier releases), the division and the step — is
post-processing.  ``C`` and ``C₂`` are hyperparameters (no data-dependent constant).

Limits: ``σ = 0``, ``C = C₂ = ∞``, ``k = d`` (full-rank public gradients) and ``b = 1`` is
non-private diagonal AdaGrad ``v ← v + g², w ← w − η g / (√v + ε)``; with ``b > 1`` the accumulator
is fed the mean of the per-example squares ``(1/b) Σ g_i²`` (not the square of the mean).

Cost: the squares need the per-example gradients (``O(nnz)`` per example for a sparse GLM,
:func:`_glm_square_sum`; materialized ``(R, b, d)`` otherwise) and the projection one partial
eigendecomposition per trial and step (the public-Gram path of :mod:`dpsim.optimizers.public`,
reused, for a GLM with ``m ≤ d``; else the SVD of the ``(m, d)`` public gradients).  A step
costs several DP-SGD steps, growing with the public split ``m`` (the eigendecomposition,
``O(m³)``, dominates at large ``m``); the measurements on the sparse logistic problems of
``experiments/dp2_noisy_adagrad.py`` are in docs/performance.md.

Ranges: ``lr`` ∈ [0, ∞); ``clip``, ``clip2`` ∈ (0, ∞] (``inf`` only with σ = 0);
``noise_multiplier`` ∈ [0, ∞); ``precond_share`` ∈ (0, 1); ``k`` a positive integer at most
``d`` and the number of public examples (default 1, which any public split allows); ``eps`` ∈
(0, ∞) (default 0.1, not AdaGrad's usual 1e-8: coordinates outside the public subspace get
``max(H, 0) ≈ 0``, and a tiny ε turns them into steps of ``η g̃/ε``); ``public_fraction`` ∈
(0, 1); ``noise``: a noise name of :class:`~dpsim.privacy.noise.NoiseSource` (both releases).  Pieces:
``"privatizer"`` (both releases), ``"preconditioner"`` (``PreconditionState(v)``: the noisy
accumulator), ``"lr"``.

Registration: the module registers ``noisy_adagrad`` when imported.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numba
import numpy as np

from .._validate import any_inf, any_positive, hyper, is_zero, positive_int, product
from ..privacy.noise import NoiseSource
from ..privacy.privatizers import gaussian_privatizer
from ..transforms.base import GradientTransformation, named_chain
from ..transforms.preconditioners import PreconditionState
from ._hyper import CLIP, EPS_POSITIVE, FRACTION, LR, NOISE, SIGMA
from ._registry import Optimizer, optimizer, register
from .baselines import learning_rate
from .public import _PUBLIC, _PUBLIC_NOTE, SUBSPACE, _project_public_subspace

__all__ = ["noisy_adagrad", "noisy_moment_privatizer", "NoisyMoments", "NoisyMomentState",
           "clipped_square_sum", "public_projection"]

#: Declared sensitivity of the second release, in words (what its noise multiplier is relative to).
SQUARES_SENSITIVITY = ("C2 (sum of per-example squared gradients g_i*g_i, each clipped to l2 norm "
                       "<= C2; add/remove)")


class NoisyMoments(NamedTuple):
    """What the privatizer emits: the gradient release ``g`` (R, d), the square release ``sq``
    (R, d) and ``project``, ``x (R, d) -> V Vᵀ x`` for this step's public subspace."""

    g: Any
    sq: Any
    project: Callable


class NoisyMomentState(NamedTuple):
    grad: Any = None  # state of release 1 (gaussian_privatizer's)
    noise: Any = None  # noise-stream state of release 2 (None for i.i.d. Gaussian noise)


def clipped_square_sum(batch, clip2, ctx):
    """``Σ_{i∈B} clip(g_i ⊙ g_i, C₂)`` per trial, shape (R, d); ``clip2`` a float (``inf``: no
    clipping) or a per-trial array.  A GLM with CSR features on host NumPy float64 takes
    :func:`_glm_square_sum` (no per-example gradients built); every other problem or backend the
    reference: the materialized per-example gradients (padded slots are zero and add nothing).

    Parameters
    ----------
    batch : Batch
        The step's batch.
    clip2 : float or array
        C₂ (``inf``: no clipping), scalar or per trial.
    ctx : StepContext
        The step's context.

    Returns
    -------
    array
        ``(R, d)``.
    """
    fast = _glm_square_sum(batch, clip2)
    if fast is not None:
        return fast
    xp = ctx.xp
    P = batch.per_example()  # (R, b_max, d)
    Q = P * P
    if isinstance(clip2, float) and np.isinf(clip2):
        return xp.sum(Q, axis=1)
    c = ctx.hp(clip2)  # float or (R, 1)
    norm = xp.sqrt(xp.sum(Q * Q, axis=2))  # (R, b_max) = ‖g_i‖₄²
    factor = xp.where(norm > c, c / xp.where(norm > 0, norm, 1.0), 1.0)
    return xp.sum(Q * factor[:, :, None], axis=1)


def _glm_square_sum(batch, clip2):
    """The GLM path of :func:`clipped_square_sum` (``None`` when it does not apply).

    A GLM's per-example gradient is ``g_i = c_i x_i + ρ w`` (``c_i = l'(x_i·w, y_i)``, the
    problem's own derivative), so with ``S_i`` the support of the sparse row ``x_i``

        ‖g_i ⊙ g_i‖₂² = Σ_{j∈S_i} (c_i x_ij + ρ w_j)⁴ + ρ⁴ (‖w‖₄⁴ − Σ_{j∈S_i} w_j⁴)
        Σ_i f_i g_i² = Σ_i f_i (c_i² x_i² + 2ρ c_i x_i ⊙ w) + ρ² w² Σ_i f_i

    with ``f_i = min(1, C₂/‖g_i ⊙ g_i‖₂)``: ``O(nnz)`` per example instead of ``O(d)``.  The same
    values as the reference up to rounding (other summation order; ``tests/optimizers/test_noisy_adagrad.py``)."""
    problem, W = batch.problem, batch.params
    X = getattr(problem, "X", None)
    if (batch.scale is not None or not getattr(problem, "sparse", False)
            or getattr(problem, "backend_name", None) != "numpy" or getattr(X, "format", None) != "csr"
            or X.dtype != np.float64 or not isinstance(W, np.ndarray) or W.dtype != np.float64
            or not isinstance(batch.idx, np.ndarray)):
        return None
    W = np.ascontiguousarray(W)
    idx = np.ascontiguousarray(batch.idx, dtype=np.int64)
    R, b = idx.shape
    mask = np.ones((R, b), dtype=np.bool_) if batch.mask is None else np.ascontiguousarray(batch.mask,
                                                                                            dtype=np.bool_)
    margins = np.zeros((R, b))
    _csr_margins(X.data, X.indices, X.indptr, idx, W, margins)
    c = np.ascontiguousarray(problem._dell(margins, np.asarray(problem.y)[idx]), dtype=np.float64)
    C = np.broadcast_to(np.asarray(clip2, dtype=np.float64), (R,)).copy()
    out = np.zeros_like(W)
    _csr_square_sum(X.data, X.indices, X.indptr, idx, mask, c, W, float(problem.reg), C, out)
    return out


@numba.njit(cache=True, nogil=True)
def _csr_margins(data, indices, indptr, idx, W, out):
    R, b = idx.shape
    for r in range(R):
        for i in range(b):
            row = idx[r, i]
            acc = 0.0
            for p in range(indptr[row], indptr[row + 1]):
                acc += data[p] * W[r, indices[p]]
            out[r, i] = acc


@numba.njit(cache=True, nogil=True)
def _csr_square_sum(data, indices, indptr, idx, mask, c, W, reg, C, out):
    """``out[r] = Σ_i f_i g_i²`` (docstring of :func:`_glm_square_sum`); ``C[r] = inf``: f = 1."""
    R, b = idx.shape
    d = W.shape[1]
    for r in range(R):
        w4 = 0.0
        if reg != 0.0:
            for j in range(d):
                w2 = W[r, j] * W[r, j]
                w4 += w2 * w2
        fsum = 0.0
        for i in range(b):
            if not mask[r, i]:
                continue
            row = idx[r, i]
            ci = c[r, i]
            s4 = 0.0
            rest = w4
            for p in range(indptr[row], indptr[row + 1]):
                j = indices[p]
                g = ci * data[p] + reg * W[r, j]
                g2 = g * g
                s4 += g2 * g2
                if reg != 0.0:
                    wj2 = W[r, j] * W[r, j]
                    rest -= wj2 * wj2
            if reg != 0.0:
                r2 = reg * reg
                s4 += r2 * r2 * max(rest, 0.0)
            nrm = np.sqrt(s4)
            f = 1.0
            if nrm > C[r]:
                f = C[r] / nrm
            fsum += f
            for p in range(indptr[row], indptr[row + 1]):
                j = indices[p]
                x = ci * data[p]
                out[r, j] += f * (x * x + 2.0 * reg * x * W[r, j])
        if reg != 0.0:
            for j in range(d):
                out[r, j] += reg * reg * W[r, j] * W[r, j] * fsum


def _svd_projection(batch, x, k):
    """``V Vᵀ x`` per trial with ``V`` the top-``k`` right singular vectors of the public
    per-example gradients (R, m, d) at the batch's parameters (the reference path)."""
    xp = _xp(x)
    P = batch.public_per_example()
    if k > min(P.shape[1], P.shape[2]):
        raise ValueError(f"k={k} exceeds the rank available from {P.shape[1]} public examples "
                         f"in d={P.shape[2]}")
    _, _, vh = xp.linalg.svd(P, full_matrices=False)
    V = vh[:, :k, :]  # (R, k, d)
    coef = xp.sum(V * x[:, None, :], axis=2)  # (R, k)
    return xp.sum(V * coef[:, :, None], axis=1)


def _xp(a):
    from ..backend import array_namespace

    return array_namespace(a)


def public_projection(batch, params, k) -> Callable:
    """``x -> V Vᵀ x`` for the top-``k`` public gradient subspace at ``params``: for a GLM on host
    NumPy with ``m ≤ d`` public examples the public-Gram path of :mod:`dpsim.optimizers.public`
    (PDP-SGD's, same projection to rounding), else the SVD of the public gradients.

    Parameters
    ----------
    batch : Batch
        The step's batch (its public split).
    params : array
        ``(R, d)`` parameters.
    k : int
        Subspace dimension.

    Returns
    -------
    callable
        ``x -> V Vᵀ x``.
    """

    def project(x):
        pub = _PUBLIC.get(batch)
        if pub is None or pub.m > params.shape[1]:
            return _svd_projection(batch, x, k)
        m, d = pub.m, params.shape[1]
        if k > min(m, d):
            raise ValueError(f"k={k} exceeds the rank available from {m} public examples in d={d}")
        return _project_public_subspace(pub, params, np.ascontiguousarray(x), k)

    return project


def noisy_moment_privatizer(clip, clip2, noise_multiplier, *, k, precond_share=0.5,
                            noise="gaussian") -> GradientTransformation:
    """The two releases of :func:`noisy_adagrad` on one batch (module docstring): the clipped
    gradient sum at ``σ_g = σ/√(1−ρ)`` (the Gaussian privatizer, noise drawn first) and the clipped
    sum of per-example squared gradients at ``σ_v = σ/√ρ`` (``ρ = precond_share``); emits
    :class:`NoisyMoments` with the step's public projection.  Declares two
    :class:`~dpsim.privacy.events.GaussianRelease` events, which the accountant merges into one
    release at ``σ`` per step (sensitivities ``C`` and ``C₂``, add/remove).  ``noise``: a noise
    name of :class:`~dpsim.privacy.noise.NoiseSource`; with DP-MF correlated noise both releases
    use that strategy, each with its own stream (two ``CorrelatedRelease`` events, merged the same
    way by the accountant).

    Parameters
    ----------
    clip : float or sequence of float
        Clipping norm C of the gradients.
    clip2 : float or sequence of float
        Clipping norm C₂ of the squared gradients.
    noise_multiplier : float or sequence of float
        σ of the pair.
    k : int
        Dimension of the public subspace.
    precond_share : float
        ρ.
    noise : str
        The noise name.

    Returns
    -------
    GradientTransformation
        The privatizer, declaring two releases.
    """
    k = positive_int("k", k)
    rho = hyper("precond_share", precond_share, "(0, 1)")
    sigma = hyper("noise_multiplier", noise_multiplier, "[0, inf)")
    s_g = product(sigma, _inv_sqrt(1.0 - np.asarray(rho)) if not isinstance(rho, float)
                  else 1.0 / (1.0 - rho) ** 0.5)
    s_v = product(sigma, _inv_sqrt(np.asarray(rho)) if not isinstance(rho, float) else 1.0 / rho ** 0.5)
    clip2 = hyper("clip2", clip2, "(0, inf]")
    if any_inf(clip2) and any_positive(s_v):
        raise ValueError(f"clip2=inf with noise_multiplier={noise_multiplier!r} > 0 has unbounded "
                         "noise; use a finite clip2 or noise_multiplier=0")
    grad = gaussian_privatizer(clip, s_g, noise=noise)
    src = NoiseSource(noise)
    std_v = None if any_inf(clip2) else product(s_v, clip2)

    def init(params):
        d = params.shape[1]
        if k > d:
            raise ValueError(f"k={k} exceeds the dimension d={d} (the subspace has at most d "
                             "dimensions)")
        return NoisyMomentState(grad=grad.init(params), noise=None)

    def update(batch, state, params, ctx):
        g, gs = grad.update(batch, state.grad, params, ctx)
        total = clipped_square_sum(batch, clip2, ctx)
        ns = state.noise
        if std_v is not None and not is_zero(std_v):
            z, ns = src.draw(ns, ctx, total.shape)
            total = total + z * ctx.hp(std_v)
        sq = total / float(batch.batch_size)
        return NoisyMoments(g, sq, public_projection(batch, params, k)), NoisyMomentState(gs, ns)

    events = grad.privacy + (src.event(s_v, sensitivity=SQUARES_SENSITIVITY),)
    return GradientTransformation(init, update, events)


def _inv_sqrt(a):
    return 1.0 / np.sqrt(a)


def projected_adagrad(eps) -> GradientTransformation:
    """The ``"preconditioner"`` piece: ``v ← v + s̃``, ``H = V Vᵀ √max(v, 0)``, emit
    ``g̃ / (max(H, 0) + ε)`` (module docstring); consumes :class:`NoisyMoments`."""
    eps = hyper("eps", eps, "(0, inf)")

    def init(params):
        return PreconditionState(v=params * 0.0)

    def update(u, state, params, ctx):
        if not isinstance(u, NoisyMoments):
            raise TypeError("projected_adagrad consumes the NoisyMoments of noisy_moment_privatizer, "
                            f"got {type(u).__name__}")
        xp = ctx.xp
        v = state.v + u.sq
        H = u.project(xp.sqrt(xp.maximum(v, 0.0)))
        return u.g / (xp.maximum(H, 0.0) + ctx.hp(eps)), PreconditionState(v=v)

    return GradientTransformation(init, update)


_DOC = {
    "clip": "Clipping norm C of the per-example gradients (release 1).",
    "clip2": "Clipping norm C₂ of the per-example squared gradients ``g_i ⊙ g_i`` (release 2).",
    "noise_multiplier": "Noise multiplier σ of the pair of releases (split by ``precond_share``).",
    "k": "Dimension of the public gradient subspace the preconditioner is projected onto.",
    "eps": "Additive constant ε of the denominator (unrelated to the privacy ε).",
    "precond_share": "Share ρ of the privacy cost spent on the preconditioner: "
                     "``σ_g = σ/√(1-ρ)``, ``σ_v = σ/√ρ``.",
}


@register(doc=_DOC)
def noisy_adagrad(lr: LR = 0.1, clip: CLIP = 1.0, clip2: CLIP = 1.0, noise_multiplier: SIGMA = 1.0,
                  k: SUBSPACE = 1, eps: EPS_POSITIVE = 0.1, precond_share: FRACTION = 0.5,
                  public_fraction: FRACTION = 0.01, noise: NOISE = "gaussian") -> Optimizer:
    """Noisy AdaGrad with a privatized preconditioner projected onto a public gradient subspace.

    Update rule (**reconstructed**, module docstring; ``σ_g = σ/√(1-ρ)``, ``σ_v = σ/√ρ`` with
    ``ρ`` = ``precond_share``; ``V_t`` the top-``k`` right singular vectors of the public
    per-example gradients at ``w_{t-1}``)::

        g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i, C) + σ_g C ξ_t)
        s̃_t = (1/b) (Σ_{i∈B_t} clip(g_i ⊙ g_i, C₂) + σ_v C₂ ξ'_t)
        v_t = v_{t-1} + s̃_t
        H_t = V_t V_tᵀ √max(v_t, 0)
        w_t = w_{t-1} - η g̃_t / (max(H_t, 0) + ε)

    Source: [DP2] App. C.6, Fig. 12 (after Kairouz et al. 2021a).  The pair of releases costs one
    DP-SGD step at σ.  Needs public data.

    Scale: ``eps`` (0.1) and ``k`` (1) are absolute, relative to ``√v`` and to ``d``
    (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> opt = dpsim.optimizers.noisy_adagrad(k=2)
    >>> opt.public_fraction, opt.private
    (0.01, True)
    """
    pub = hyper("public_fraction", public_fraction, "(0, 1)")
    if not isinstance(pub, float):
        raise ValueError(f"public_fraction must be one number shared by every trial, got "
                         f"public_fraction={public_fraction!r}")
    return optimizer(named_chain(("privatizer", noisy_moment_privatizer(clip, clip2, noise_multiplier,
                                                                        k=k, precond_share=precond_share,
                                                                        noise=noise)),
                                 ("preconditioner", projected_adagrad(eps)),
                                 learning_rate(lr)),
                     note=_PUBLIC_NOTE, public_fraction=pub)
