"""PASAN and PAGAN: private adaptive SGD and AdaGrad with ellipsoid clipping and adaptive noise.

Source: Asi, Duchi, Fallah, Javidbakht, Talwar, *Private Adaptive Gradient Methods for Convex
Optimization* (ICML 2021) — [PAGAN] — Algorithm 1 (PASAN), Algorithm 2 (PAGAN), Theorems 1–3.

Privatizer (Algorithms 1–2, lines 3–6): :func:`ellipsoid_privatizer`
    ``g̃ = (1/b) Σ_{i∈B} π_A(g_i)``,  ``ĝ = g̃ + s ξ``,  ``ξ ~ N(0, A^{-1})``,  ``s = σ/b``,

with ``π_A`` the Euclidean projection onto ``E_A = {x : xᵀAx ≤ 1}`` (:func:`project_ellipsoid`)
and ``A = C / B²`` diagonal.  Privacy: every ``π_A(g_i)`` lies in ``E_A``, so after the change of
variables ``x ↦ A^{1/2} x`` the per-example contributions lie in the unit ball (ℓ2 sensitivity 1
under add/remove, 2 under replace-one) and the whitened noise ``b s A^{1/2} ξ`` is ``N(0, σ² I)``:
one release of the subsampled Gaussian mechanism with noise multiplier ``σ``.  The privatizer
declares exactly that (a Gaussian release with noise multiplier ``σ``).  The paper writes
``s = √log(1/δ) / (b ε)`` (its Lemma 3.1 calibration with ``T = c n²/b²``); in dpsim ``σ`` is the
``noise_multiplier`` hyperparameter, calibrated by :mod:`dpsim.accounting` for a target (ε, δ).

Sampling.  The paper samples batches uniformly *with replacement* (``simulate(...,
sampling="replacement")`` reproduces it), but no accountant in dp_accounting handles
with-replacement sampling (an example drawn k times has sensitivity k), so ``Result.epsilon``
raises :class:`dpsim.accounting.UnsupportedAccountingError` for such runs; with
``sampling="poisson"`` (add/remove) the run is accounted normally.  The average divides by the
nominal ``b`` under every sampler (padded Poisson slots are zero and project to zero).

Update rules (``x ← proj_X(·)`` is applied by the engine after every step):

* PASAN (Alg. 1, lines 7–8): ``α_k = α / √(Σ_{i≤k} ||ĝ^i||²)``,  ``x ← proj_X(x − α_k ĝ^k)``.
* PAGAN (Alg. 2, lines 7–8): ``H_k = diag(Σ_{i≤k} ĝ^i ĝ^{iᵀ})^{1/2} / α``,
  ``x ← proj_X^{H_k}(x − H_k^{-1} ĝ^k)``, i.e. ``x_j ← x_j − α ĝ_j / √(Σ_{i≤k} (ĝ_j^i)²)``. The
  projection is in the ``H_k``-norm; for a box ``X = Π_j [l_j, u_j]`` and diagonal ``H_k`` it
  separates over coordinates and is coordinate-wise clipping, which is exactly the engine's
  Euclidean box projection.  For other domains (an ℓ2 ball) the two differ, so PAGAN raises
  ``ValueError`` there.

Divide-by-zero guard: both rules divide by ``max(√(Σ ...), eps)`` (``eps``, default ``1e-12``).
Because the sums include the current ``ĝ``, a zero sum means a zero numerator, so the guard only
avoids ``0/0`` and changes nothing whenever the sum is at least ``eps²``.

The paper returns the average iterate ``x̄_T = (1/T) Σ_k x^k``; like every dpsim optimizer these
record the last iterate (average a run's ``params`` trajectory if the average is wanted).

Choice of ``A = C/B²`` (Theorems 1–3)
    ``scaling``: ``"identity"`` (``C = I``: the paper's "naive" PASAN/PAGAN, ``E_A`` the ball of
    radius ``B``, so π_A is ℓ2 clipping at ``B``), ``"optimal"`` (PASAN: ``C_jj = σ_j^{-1}``,
    Theorem 1 with ``p = log d`` (Eq. 9); PAGAN: ``C_jj ∝ σ_j^{-4/3}``, Theorem 2 / Eq. 8 and
    Theorem 3's ``Ĉ_j = (r σ̂_j)^{-4/3}/4``) from the problem's coordinate scales ``σ_j``
    (``problem.scales``) or an explicit ``sigma_hat`` (e.g. [PAGAN] Algorithm 3's private
    estimate), normalized to ``min_j C_jj = 1`` so that ``B`` is the longest semi-axis of
    ``E_A`` (``E_A ⊆`` the ℓ2 ball of radius ``B``); or an explicit positive array ``C_diag`` of
    shape ``(d,)`` or ``(R, d)``, used as given.
    ``radius`` ``B``: a positive number (or one per trial), **public**: chosen without looking at
    the training data (it enters the release's sensitivity, so a radius computed from the data
    would leak it uncharged); ``inf`` switches the projection off (allowed only with
    ``noise_multiplier = 0``: the non-private limit).  ``None`` (the default) uses the Theorem 1 /
    2 formula :func:`ellipsoid_radius` with ``p = max(1, ln d)``, the problem's ``n`` and
    ``nε/√log(1/δ) ↦ n/σ``, computed on the training data: the formula needs the data's moment
    ``Ĝ_{2p}(S; C)``, which the theorems treat as known side information but which is a function
    of the private data (one example scaled ×100 moves B from 24 to 337 on
    ``absolute_regression(2000, 20)``).  That choice is not charged, so with ``radius=None`` the
    privatizer declares :class:`~dpsim.privacy.events.NonPrivate`: the run's ε is infinite,
    :func:`dpsim.calibrate` refuses it, and the result's privacy record says why.  A private run
    needs a public ``radius``: e.g. :func:`ellipsoid_radius` evaluated on public data, or on a
    private estimate of the moment charged separately.  The formula needs the per-example
    Lipschitz constants ``G(z_i; C)`` of Assumption 1 and the domain's diameters, which dpsim
    knows for generalized linear models with a 1-Lipschitz link and no ridge term
    (``absolute_regression``, ``linear_box``, unregularized logistic) on a box domain:
    ``G(z_i; C) = ||x_i||_C`` (exact for the absolute and linear losses).

    The ``"optimal"`` scaling reads ``problem.scales``: the coordinate scales the data were
    *generated* from (a public design parameter of the synthetic problem, not estimated from the
    sample), or ``sigma_hat``; a user who estimates ``sigma_hat`` from private data must charge
    that estimate (e.g. [PAGAN] Algorithm 3).  The noise scale ``σB/b`` uses the nominal ``b``, so
    the release's sensitivity is that of the projected sum, whatever the batch size.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from .._validate import hyper
from ..backend import to_numpy
from ..problems import Box
from ..transforms.base import GradientTransformation
from ..transforms.elements import Projected
from ._ellipsoid import (LINKS, _project_flat, glm_arguments, glm_projected_sum,
                         project_ellipsoid, projected_fraction)
from .events import NonPrivate
from .noise import NoiseSource

__all__ = [
    "project_ellipsoid",
    "ellipsoid_privatizer",
    "ellipsoid_parts",
    "ellipsoid_radius",
    "empirical_moment",
    "scaling_diagonal",
    "EllipsoidState",
    "OPTIMAL_EXPONENT",
]

ALGORITHMS = ("pasan", "pagan")
#: Exponent κ of the "optimal" scaling ``C_jj ∝ σ_j^{-κ}`` ([PAGAN] §3.1–3.2, Theorem 3).
OPTIMAL_EXPONENT = {"pasan": 1.0, "pagan": 4.0 / 3.0}



# ------------------------------------------------------------------------------------------------
# Theorem 1 / 2 helpers


def _positive_array(name, value, *, ndim=(1, 2)):
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of positive numbers, got {name}={value!r}") from None
    if arr.ndim not in ndim or arr.size == 0:
        raise ValueError(f"{name} must have {' or '.join(f'{k}' for k in ndim)} axes, got shape {arr.shape}")
    bad = ~np.isfinite(arr) | (arr <= 0)
    if bad.any():
        pos = tuple(int(v) for v in np.argwhere(bad)[0])
        raise ValueError(f"{name} must be positive and finite, got {name}{list(pos)}={float(arr[pos])!r}")
    arr.setflags(write=False)
    return arr


def scaling_diagonal(sigma, algorithm):
    """The "optimal" diagonal ``C`` of [PAGAN] for coordinate scales ``σ_j``.

    PASAN (Theorem 1, Eq. (9)): ``C_jj = σ_j^{-1}``; PAGAN (Theorem 2, Eq. (8); Theorem 3 uses
    ``Ĉ_j = (r σ̂_j)^{-4/3}/4``): ``C_jj ∝ σ_j^{-4/3}``.  Normalized per row to ``min_j C_jj = 1``,
    i.e. ``C_jj = (σ_j / max_k σ_k)^{-κ}`` with ``κ = 1`` or ``4/3``; the constant is immaterial
    under the Theorem 1/2 radius (``B²`` scales with ``C``) and makes an explicit ``radius`` the
    longest semi-axis of ``E_{C/B²}``.

    ``sigma``: positive ``(d,)`` or ``(R, d)``; returns the same shape.

    Parameters
    ----------
    sigma : numpy.ndarray
        Positive coordinate scales, ``(d,)`` or ``(R, d)``.
    algorithm : {'pasan', 'pagan'}
        Which theorem's exponent (1 or 4/3).

    Returns
    -------
    numpy.ndarray
        ``C_jj``, shaped as ``sigma``, with ``min_j C_jj = 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from dpsim.privacy.ellipsoid import project_ellipsoid, scaling_diagonal
    >>> scaling_diagonal(np.array([1.0, 0.5]), "pasan")
    array([1., 2.])
    >>> project_ellipsoid(np.array([[2.0, 0.0]]), np.array([1.0, 4.0]))
    array([[1., 0.]])
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got algorithm={algorithm!r}")
    s = _positive_array("sigma", sigma)
    kappa = OPTIMAL_EXPONENT[algorithm]
    return (s / s.max(axis=-1, keepdims=True)) ** (-kappa)


def empirical_moment(C_diag, grads, p):
    """Empirical Lipschitz moment of [PAGAN] Eq. (4): ``Ĝ_p(S; C) = ((1/n) Σ_i ||g_i||_C^p)^{1/p}``.

    ``||g||_C = √(Σ_j C_jj g_j²)``; ``grads`` ``(n, d)`` (dense or ``scipy.sparse``) holds
    per-example gradients or any vectors whose ``C``-norms are the Lipschitz constants
    ``G(z_i; C)`` of Assumption 1 (for a GLM with 1-Lipschitz link, the feature rows ``x_i``).
    ``C_diag`` ``(d,)`` → float; ``(M, d)`` → ``(M,)``.  Computed with the largest entry and the
    largest norm factored out, so neither large gradients nor large ``p`` overflow.

    Parameters
    ----------
    C_diag : numpy.ndarray
        The diagonal ``C``, ``(d,)`` or ``(M, d)``.
    grads : array_like or scipy.sparse matrix
        ``(n, d)`` vectors whose ``C``-norms are the Lipschitz constants.
    p : float
        The moment's order.

    Returns
    -------
    float or numpy.ndarray
        ``Ĝ_p``, a float for a ``(d,)`` ``C_diag``, else ``(M,)``.
    """
    C = _positive_array("C_diag", C_diag)
    p = float(p)
    if not (p >= 1.0 and math.isfinite(p)):
        raise ValueError(f"p must be a finite number >= 1, got p={p!r}")
    try:
        import scipy.sparse as sp  # noqa: PLC0415

        sparse = sp.issparse(grads)
    except ImportError:  # pragma: no cover
        sparse = False
    if sparse:
        g = grads.tocsr().astype(np.float64)
        top = float(abs(g).max()) if g.nnz else 0.0
    else:
        g = np.asarray(to_numpy(grads), dtype=np.float64)
        if g.ndim != 2:
            raise ValueError(f"grads must have shape (n, d), got shape {g.shape}")
        top = float(np.max(np.abs(g))) if g.size else 0.0
    if g.shape[1] != C.shape[-1]:
        raise ValueError(f"grads have d={g.shape[1]} but C_diag has d={C.shape[-1]}")
    if not math.isfinite(top):
        raise ValueError("grads must be finite")
    top = top if top > 0 else 1.0
    gs = g.multiply(1.0 / top) if sparse else g / top  # scaled: squares cannot overflow
    G2 = gs.multiply(gs) if sparse else gs * gs
    norms = top * np.sqrt(np.asarray(G2 @ np.atleast_2d(C).T))  # (n, M)
    mx = norms.max(axis=0)
    safe = np.where(mx > 0, mx, 1.0)
    out = mx * np.mean((norms / safe) ** p, axis=0) ** (1.0 / p)
    return float(out[0]) if C.ndim == 1 else out


def ellipsoid_radius(C_diag, grads, *, n, noise_multiplier=None, epsilon=None, delta=None,
                     algorithm="pasan", domain="box", domain_radius=1.0, p=None):
    """Radius ``B`` of ``A = C/B²`` from [PAGAN] Theorem 1 (PASAN) / Theorem 2 (PAGAN).

    Theorem 1 (PASAN):  ``B = 2 G_{2p}(C) · ( D_{C⁻¹} n ε / (D_2 √(tr(C⁻¹) log(1/δ))) )^{1/p}``

    Theorem 2 (PAGAN):  ``B = 2 G_{2p}(C) · ( D_{C⁻¹} n ε / (D_∞ √log(1/δ) tr(C^{-1/2})) )^{1/p}``

    with ``D_2 = diam_2(X)``, ``D_∞ = diam_∞(X)``, ``D_{C⁻¹} = diam_{||·||_{C⁻¹}}(X)``
    (``||x||_{C⁻¹} = √(xᵀC⁻¹x)``) and ``p = log d`` in the paper's corollaries (default here
    ``max(1, ln d)``).  For the box ``[-r, r]^d``: ``D_2 = 2r√d``, ``D_∞ = 2r``,
    ``D_{C⁻¹} = 2r √tr(C⁻¹)``; for the ℓ2 ball of radius ``r``: ``D_2 = D_∞ = 2r``,
    ``D_{C⁻¹} = 2r / √min_j C_jj``.

    Parameters
    ----------
    C_diag : numpy.ndarray
        Positive ``(d,)``, or ``(M, d)`` (one ``C`` per trial).
    grads : array_like, scipy.sparse matrix or float
        Per-example gradients ``(n_s, d)`` (or Lipschitz vectors, see
        :func:`empirical_moment`), giving ``G_{2p}(C) = Ĝ_{2p}(S; C)``; or a positive scalar /
        ``(M,)`` array: the moment ``G_{2p}(C)`` itself.
    n : int
        The data set size in the formula.
    noise_multiplier : float or numpy.ndarray, optional
        σ, dpsim's calibration: replaces ``nε/√log(1/δ)`` by ``n/σ`` (the paper's noise scale
        ``√log(1/δ)/(bε)`` is dpsim's ``σ/b``).  ``σ = 0`` gives ``B = inf``.  Scalar or ``(M,)``.
    epsilon, delta : float, optional
        The paper's parametrization instead of ``noise_multiplier`` (give exactly one of the
        two).
    algorithm : {'pasan', 'pagan'}
        Theorem 1 or Theorem 2.
    domain : {'box', 'ball'}
        ``[-r, r]^d`` or the ℓ2 ball of radius ``r``.
    domain_radius : float
        ``r``.
    p : float, optional
        The moment order ``p ≥ 1`` (default ``max(1, ln d)``).

    Returns
    -------
    float or numpy.ndarray
        ``B``, a float or ``(M,)`` (``inf`` at ``σ = 0``).
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got algorithm={algorithm!r}")
    if domain not in ("box", "ball"):
        raise ValueError(f"domain must be 'box' or 'ball', got domain={domain!r}")
    C = _positive_array("C_diag", C_diag)
    C2 = np.atleast_2d(C)
    d = C2.shape[1]
    r = float(domain_radius)
    if not (r > 0 and math.isfinite(r)):
        raise ValueError(f"domain_radius must be positive and finite, got domain_radius={domain_radius!r}")
    if isinstance(n, bool) or not float(n).is_integer() or n < 1:
        raise ValueError(f"n must be a positive integer, got n={n!r}")
    if p is None:
        p = max(1.0, math.log(d))
    p = float(p)
    if not (p >= 1.0 and math.isfinite(p)):
        raise ValueError(f"p must be a finite number >= 1, got p={p!r}")

    # privacy term  nε/√log(1/δ)  (or n/σ)
    if (noise_multiplier is None) == (epsilon is None and delta is None):
        raise ValueError("give either noise_multiplier or (epsilon, delta), not both / neither")
    if noise_multiplier is not None:
        sig = np.asarray(noise_multiplier, dtype=np.float64)
        if sig.ndim > 1 or np.any(~np.isfinite(sig)) or np.any(sig < 0):
            raise ValueError("noise_multiplier must be non-negative and finite, got "
                             f"noise_multiplier={noise_multiplier!r}")
        with np.errstate(divide="ignore"):
            priv = np.where(sig > 0, float(n) / np.where(sig > 0, sig, 1.0), np.inf)
    else:
        if epsilon is None or delta is None:
            raise ValueError("epsilon and delta must be given together")
        if not (epsilon > 0):
            raise ValueError(f"epsilon must be positive, got epsilon={epsilon!r}")
        if not (0 < delta < 1):
            raise ValueError(f"delta must be in (0, 1), got delta={delta!r}")
        priv = np.asarray(float(n) * float(epsilon) / math.sqrt(math.log(1.0 / float(delta))))

    # moment G_{2p}(C)
    if np.ndim(grads) <= 1:  # the moment itself (scalar or one per row of C)
        G = np.asarray(grads, dtype=np.float64)
        if np.any(~np.isfinite(G)) or np.any(G <= 0):
            raise ValueError(f"the moment G_2p(C) must be positive and finite, got {grads!r}")
    else:
        G = np.asarray(empirical_moment(C2, grads, 2.0 * p))
        if np.any(G <= 0):
            raise ValueError("all gradients are zero: G_2p(C) = 0 gives radius 0; pass radius=")

    inv_tr = np.sum(1.0 / C2, axis=1)  # tr(C^{-1}) per row
    if domain == "box":
        D2, Dinf, DC = 2 * r * math.sqrt(d), 2 * r, 2 * r * np.sqrt(inv_tr)
    else:
        D2, Dinf, DC = 2 * r, 2 * r, 2 * r / np.sqrt(C2.min(axis=1))
    if algorithm == "pasan":
        geom = DC / (D2 * np.sqrt(inv_tr))
    else:
        geom = DC / (Dinf * np.sum(C2 ** -0.5, axis=1))
    B = 2.0 * G * (geom * priv) ** (1.0 / p)
    B = np.asarray(B, dtype=np.float64)
    if C.ndim == 1 and B.size == 1:
        return float(B.reshape(()))
    return B.reshape(-1)


# ------------------------------------------------------------------------------------------------
# The privatizer


class EllipsoidState(NamedTuple):
    a: Any  # (M, d) host float64: diag(A) = C/B² (M = 1 shared or R; None before the first step,
    #         which sets A up from the problem); 0-rows: no projection
    radius: Any  # (M,) host float64: B per row of `a`
    noise_std: Any  # (M, d) backend array s/√a_j = σB/(b√C_jj), or None (no noise)
    projected: Any  # (R,) host float64: fraction of this step's examples with π_A(g_i) ≠ g_i
    noise: Any = None  # noise-stream state (correlated noise)


def _check_scaling(scaling):
    if isinstance(scaling, str):
        if scaling not in ("identity", "optimal"):
            raise ValueError(f"scaling must be 'identity', 'optimal' or an array of positive C_jj, "
                             f"got scaling={scaling!r}")
        return scaling
    return _positive_array("scaling", scaling)


def ellipsoid_privatizer(noise_multiplier, *, radius=None, scaling="identity", sigma_hat=None,
                         algorithm="pasan", noise="gaussian") -> GradientTransformation:
    """[PAGAN]'s privatizer (Algorithms 1–2, lines 3–6): project, average, add ``N(0, s²A⁻¹)``.

    ``ĝ = (1/b) Σ_{i∈B} π_A(g_i) + (σ/b) ξ``, ``ξ ~ N(0, A⁻¹)`` (drawn as ``z/√a``, ``z`` the
    backend's standard normals of shape ``(R, d)``, one draw per step; none when ``σ = 0``),
    ``A = C/B²``.  For a generalized linear model on host NumPy float64 the sum ``Σ_i π_A(g_i)`` comes
    from the feature rows in one Numba pass (:func:`~dpsim.privacy._ellipsoid.glm_projected_sum`:
    ``g_i = l'(x_i·w, y_i) x_i + ρ w``, the root-find over the nonzeros of ``x_i`` when ``ρ = 0``,
    in closed form for a constant ``A`` row, in a length-``d`` scratch vector otherwise; the
    ``(R, b, d)`` gradients are never formed).  Otherwise the per-example gradients are
    materialized (``Batch.per_example()``) and projected with the same root-finder (on the host:
    CuPy arrays make a round trip).  Both paths draw the same noise.

    ``noise_multiplier`` σ ≥ 0 (scalar or per-trial); ``radius`` ``B`` (public; ``None``: the Theorem 1/2
    formula on the training data, declared non-private; module docstring); ``scaling`` ``"identity" | "optimal" | C_diag``; ``sigma_hat``
    coordinate scales for ``"optimal"`` (default: ``problem.scales``); ``algorithm`` ``"pasan"`` or
    ``"pagan"`` selects the optimal exponent and the radius formula, and for ``"pagan"`` checks that
    the domain is a box (or absent).  Declares a release with noise multiplier σ.  A and the noise
    scale are fixed at the first step (``A_k = A`` for all k).
    The transformation is the first item of :func:`ellipsoid_parts`; its element is the
    :class:`~dpsim.transforms.elements.Projected` of its GLM preparation (the second item) and
    noise source, which the fast paths read (:class:`dpsim.transforms.elements.Ellipsoid`).

    Parameters
    ----------
    noise_multiplier : float or sequence of float
        σ ≥ 0.
    radius : float, optional
        ``B`` (``None``: the Theorem 1/2 formula, non-private).
    scaling : str or array_like
        ``"identity"``, ``"optimal"`` or ``C_diag``.
    sigma_hat : array_like, optional
        Coordinate scales for ``"optimal"``.
    algorithm : {'pasan', 'pagan'}
        Which algorithm's exponent and radius formula.
    noise : str
        The noise name.

    Returns
    -------
    GradientTransformation
        The privatizer (state :class:`EllipsoidState`; element
        :class:`~dpsim.transforms.elements.Projected`).
    """
    return ellipsoid_parts(noise_multiplier, radius=radius, scaling=scaling, sigma_hat=sigma_hat,
                           algorithm=algorithm, noise=noise)[0]


def ellipsoid_parts(noise_multiplier, *, radius=None, scaling="identity", sigma_hat=None,
                    algorithm="pasan", noise="gaussian"):
    """``(tx, glm_release)``: :func:`ellipsoid_privatizer`'s transformation ``tx`` and, for the
    fast paths of PAGAN/PASAN (:class:`dpsim.transforms.elements.Ellipsoid`; ``tx``'s element,
    :class:`~dpsim.transforms.elements.Projected`, carries it),
    ``glm_release(batch, state, params, ctx) -> (state', rows, kernel_batch, std) | None``: the
    privatizer's state after its first-step set-up, the GLM kernel's arguments
    (:func:`~dpsim.privacy._ellipsoid.glm_arguments`) and the noise std ``(M, d)`` (``None``: no
    noise is drawn) — what ``tx.update`` hands the kernel and the noise on the same step — or
    ``None`` when the step has no GLM form or the noise is correlated (the chain then runs).

    Parameters
    ----------
    noise_multiplier : float or sequence of float
        σ ≥ 0.
    radius : float, optional
        ``B``.
    scaling : str or array_like
        ``"identity"``, ``"optimal"`` or ``C_diag``.
    sigma_hat : array_like, optional
        Coordinate scales for ``"optimal"``.
    algorithm : {'pasan', 'pagan'}
        Which algorithm.
    noise : str
        The noise name.

    Returns
    -------
    tuple
        ``(tx, glm_release)``.
    """
    src = NoiseSource(noise)  # ValueError naming a bad value
    theorem = radius is None
    sigma, radius, scaling, sigma_hat = _check_parts_arguments(noise_multiplier, radius, scaling,
                                                               sigma_hat, algorithm)
    noiseless = isinstance(sigma, float) and sigma == 0.0

    def init(params):
        return EllipsoidState(a=None, radius=None, noise_std=None,
                              projected=np.zeros(params.shape[0]))

    def setup(batch, params, ctx):
        return _first_step_state(batch, params, ctx, sigma=sigma, radius=radius, scaling=scaling,
                                 sigma_hat=sigma_hat, algorithm=algorithm, noiseless=noiseless)

    def update(batch, state, params, ctx):
        if state.a is None:
            state = setup(batch, params, ctx)
        glm = _glm_inputs(batch, params)
        if glm is not None:  # GLM rows: Σ_i π_A(g_i) without the (R, b, d) gradients
            out, frac = _glm_projected_mean(batch, params, state.a, glm)
        else:
            out, frac = _per_example_projected_mean(batch, state.a, ctx)
        ns = state.noise
        if state.noise_std is not None:
            z, ns = src.draw(ns, ctx, out.shape)
            out = out + z * state.noise_std
        return out, state._replace(projected=frac, noise=ns)

    if theorem:
        event = NonPrivate(
            "radius=None: the ellipsoid radius B comes from the [PAGAN] Theorem 1/2 formula "
            "evaluated on the private training data (its moment G_2p(S; C)) and is not charged; "
            "pass a public radius for a private run")
    else:
        event = src.event(sigma, sensitivity="B (projection onto the ellipsoid of public radius B; "
                                             "whitened sensitivity 1, add/remove)")

    def glm_release(batch, state, params, ctx):
        if src.correlated:
            return None
        glm = _glm_inputs(batch, params)
        if glm is None:
            return None
        if state.a is None:
            state = setup(batch, params, ctx)
        X, y, link, reg = glm
        a = state.a
        R = params.shape[0]
        arow = (np.zeros(R, dtype=np.int64) if a.shape[0] == 1 else np.arange(R, dtype=np.int64))
        mask = None if batch.mask is None else np.asarray(batch.mask)
        rows, kb, _ = glm_arguments(X, y, link, reg, params, batch.idx, mask, a, arow)
        return state, rows, kb, state.noise_std

    return (GradientTransformation(init, update, (event,), element=Projected(
        glm_release, src if src.correlated else None)), glm_release)


def _check_parts_arguments(noise_multiplier, radius, scaling, sigma_hat, algorithm):
    """Validate :func:`ellipsoid_parts`' arguments other than the noise name, in order →
    ``(sigma, radius, scaling, sigma_hat)`` (``radius`` stays ``None``: the Theorem 1/2 formula)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got algorithm={algorithm!r}")
    sigma = hyper("noise_multiplier", noise_multiplier, "[0, inf)")
    if radius is not None:
        radius = hyper("radius", radius, "(0, inf]")
        if np.ndim(radius) and np.ndim(sigma) and np.shape(radius) != np.shape(sigma):
            raise ValueError(f"radius has {np.size(radius)} values but noise_multiplier has "
                             f"{np.size(sigma)}; per-trial hyperparameters need one value per trial")
        if np.any(np.isinf(np.asarray(radius)) & (np.asarray(sigma) > 0)):  # per trial
            raise ValueError(f"radius=inf with noise_multiplier={noise_multiplier!r} > 0 adds noise "
                             "N(0, σ²B²C⁻¹/b²) of infinite scale; use a finite radius or "
                             "noise_multiplier=0")
    scaling = _check_scaling(scaling)
    if sigma_hat is not None:
        if not (isinstance(scaling, str) and scaling == "optimal"):
            raise ValueError(f"sigma_hat is only used with scaling='optimal', got scaling={scaling!r}")
        sigma_hat = _positive_array("sigma_hat", sigma_hat)
    return sigma, radius, scaling, sigma_hat


def _first_step_state(batch, params, ctx, *, sigma, radius, scaling, sigma_hat, algorithm, noiseless):
    """The privatizer's state after its first-step set-up: ``diag(A) = C/B²`` per row (0 where
    ``B = inf``), the radii and the noise std ``σB/(b√C_jj)`` (``None`` when ``noiseless``);
    ``radius=None`` takes ``B`` from the Theorem 1/2 formula."""
    problem = batch.problem
    R, d = params.shape
    if algorithm == "pagan":
        _check_pagan_domain(problem)
    C = _scaling_rows(scaling, sigma_hat, problem, algorithm, R, d)  # (M, d)
    if radius is None:
        B = _auto_radius(problem, C, sigma, ctx.n if ctx.n is not None else problem.n,
                         algorithm, R)
    else:
        B = np.asarray(radius, dtype=np.float64).reshape(-1)  # (1,) or (R,)
    M = max(C.shape[0], B.shape[0])
    C = np.broadcast_to(C, (M, d))
    B = np.broadcast_to(B, (M,)).copy()
    sig = np.broadcast_to(np.asarray(sigma, dtype=np.float64).reshape(-1), (R,))
    inf_rows = np.broadcast_to(np.isinf(B), (R,)) if M == R else np.full(R, np.isinf(B[0]))
    if np.any(inf_rows & (sig > 0)):
        raise ValueError("radius is infinite for a trial with noise_multiplier > 0")
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(np.isinf(B)[:, None], 0.0, C / (B * B)[:, None])
    a = np.ascontiguousarray(a)
    std = None
    if not noiseless:
        # s/√a_j = (σ/b) B /√C_jj, 0 where σ = 0 (also when B = inf)
        Bf = np.where(np.isinf(B), 0.0, B)
        if M == R:
            std_h = (sig / batch.batch_size * Bf)[:, None] / np.sqrt(C)
        else:  # shared A, per-trial or scalar σ
            std_h = (sig / batch.batch_size)[:, None] * (Bf[0] / np.sqrt(C[0]))[None, :]
        std_h = np.where(np.isfinite(std_h), std_h, 0.0)
        if np.all(std_h == std_h[:1]):
            std_h = std_h[:1]
        std = ctx.backend.asarray(np.ascontiguousarray(std_h))
    return EllipsoidState(a=a, radius=B, noise_std=std, projected=None)


def _glm_projected_mean(batch, params, a, glm):
    """``((1/b) Σ_i π_A(g_i), projected fraction)`` for GLM rows ``glm = (X, y, link, reg)`` by
    :func:`glm_projected_sum`, without forming the ``(R, b, d)`` gradients."""
    R, bmax = batch.idx.shape
    X, y, link, reg = glm
    arow = (np.zeros(R, dtype=np.int64) if a.shape[0] == 1
            else np.arange(R, dtype=np.int64))
    mask = None if batch.mask is None else np.asarray(batch.mask)
    total, lam = glm_projected_sum(X, y, link, reg, params, batch.idx, mask, a, arow)
    frac = projected_fraction(lam, mask)
    out = total
    out /= float(batch.batch_size)  # in place: `total` is this step's own array
    return out, frac


def _per_example_projected_mean(batch, a, ctx):
    """``((1/b) Σ_i π_A(g_i), projected fraction)`` from the materialized per-example gradients,
    projected on the host with the same root-finder (CuPy arrays make a round trip)."""
    g = batch.per_example()  # (R, b_max, d), zero in padded slots
    R, bmax, d = g.shape
    if a.shape[0] == 1 and not np.any(a):  # B = inf: no projection
        pg = g
        frac = np.zeros(R)
    else:
        G = np.ascontiguousarray(np.asarray(to_numpy(g), dtype=np.float64).reshape(-1, d))
        aidx = (np.zeros(R * bmax, dtype=np.int64) if a.shape[0] == 1
                else np.repeat(np.arange(R, dtype=np.int64), bmax))
        out, lam = _project_flat(G, a, aidx)
        pg = ctx.backend.asarray(out.reshape(R, bmax, d))
        valid = (bmax * np.ones(R) if batch.mask is None
                 else np.asarray(to_numpy(batch.mask)).sum(axis=1))
        frac = (lam.reshape(R, bmax) > 0).sum(axis=1) / np.maximum(valid, 1)
    out = ctx.xp.sum(pg, axis=1) / float(batch.batch_size)
    return out, frac


def _glm_inputs(batch, params):
    """``(X, y, link, reg)`` when the step can use :func:`glm_projected_sum`, else ``None``.

    Needs a generalized linear model (``problem.link`` one of the four links, ``problem.features``
    a dense array or CSR matrix, labels ``problem.y``), host NumPy float64 parameters and an
    unscaled batch; every other case (other problems, CuPy or float32 runs) materializes the
    per-example gradients and projects them with the same root-finder.
    """
    problem = batch.problem
    if batch.scale is not None or not isinstance(params, np.ndarray) or params.dtype != np.float64:
        return None
    link = problem.link
    X = problem.features
    y = problem.labels
    if link not in LINKS or X is None or not isinstance(y, np.ndarray) or y.shape != (problem.n,):
        return None
    if isinstance(X, np.ndarray):
        ok = X.dtype == np.float64 and X.shape == (problem.n, problem.d)
    else:
        ok = getattr(X, "format", None) == "csr" and X.dtype == np.float64
    if not ok or not isinstance(batch.idx, np.ndarray):
        return None
    return X, y, link, problem.reg



def _is_box(problem) -> bool:
    return isinstance(problem.domain, Box)


def _check_pagan_domain(problem):
    if problem.has_domain and not _is_box(problem):
        raise ValueError(
            f"PAGAN projects in the H_k-norm ([PAGAN] Alg. 2, line 8); that equals the engine's "
            f"Euclidean projection only for a box domain, and problem {problem.name!r} has "
            f"another domain")


def _scaling_rows(scaling, sigma_hat, problem, algorithm, R, d):
    """``C`` as an ``(M, d)`` host array, M = 1 or R."""
    if isinstance(scaling, str) and scaling == "identity":
        return np.ones((1, d))
    if isinstance(scaling, str):  # optimal
        if sigma_hat is not None:
            s, what = sigma_hat, "sigma_hat"
        else:
            s = problem.scales
            what = "problem.scales"
            if s is None:
                raise ValueError(
                    f"scaling='optimal' needs coordinate scales: problem {problem.name!r} has no "
                    "`scales`; pass sigma_hat=(d values), e.g. from [PAGAN] Algorithm 3")
        C = scaling_diagonal(s, algorithm)
    else:
        C, what = scaling, "scaling"
    shape = np.shape(C)
    C = np.atleast_2d(np.asarray(C, dtype=np.float64))
    if C.shape[1] != d or C.shape[0] not in (1, R) or len(shape) == 2 and shape[0] != R:
        raise ValueError(f"{what} has shape {shape}; expected ({d},) or ({R}, {d}) "
                         f"for d={d}, trials={R}")
    return C


def _auto_radius(problem, C, sigma, n, algorithm, R):
    """Theorem 1/2 radius from the problem (module docstring); ``(M,)``."""
    rows = problem.lipschitz_rows()  # (n, d) host, or None
    if rows is None:
        raise ValueError(
            f"radius=None uses the Theorem 1/2 formula, which needs the per-example Lipschitz "
            f"constants G(z; C); dpsim knows them only for unregularized GLMs with a 1-Lipschitz "
            f"link, not for problem {problem.name!r}: pass radius=B")
    if not _is_box(problem):
        raise ValueError(
            f"radius=None uses the Theorem 1/2 formula, which needs a bounded (box) domain; "
            f"problem {problem.name!r} has none: pass radius=B")
    sig = np.asarray(sigma, dtype=np.float64).reshape(-1)
    if C.shape[0] == 1 and sig.size > 1 and np.all(sig == sig[0]):
        sig = sig[:1]
    if C.shape[0] == 1 and sig.size == 1:
        B = ellipsoid_radius(C[0], rows, n=n, noise_multiplier=float(sig[0]),
                             algorithm=algorithm, domain="box", domain_radius=problem.domain.radius)
        return np.array([B])
    Cb = np.broadcast_to(C, (R, C.shape[1]))
    return np.asarray(ellipsoid_radius(Cb, rows, n=n, noise_multiplier=np.broadcast_to(sig, (R,)),
                                       algorithm=algorithm, domain="box",
                                       domain_radius=problem.domain.radius), dtype=np.float64)


