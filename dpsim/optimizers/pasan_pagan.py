"""PASAN and PAGAN ([PAGAN] Algorithms 1 and 2): ellipsoid privatizer + adaptive steps.

The privatizer, its privacy argument and the Theorem 1/2 radius helpers are in
:mod:`dpsim.privacy.ellipsoid` (re-exported here).  Update rules (``x ← proj_X(·)`` is applied by
the engine after every step):

* PASAN (Alg. 1, lines 7–8): ``α_k = α / max(√(Σ_{i≤k} ||ĝ^i||²), ε)``, ``x ← proj_X(x − α_k ĝ^k)``
  — AdaGrad on the squared norm (one accumulator per trial).
* PAGAN (Alg. 2, lines 7–8): ``H_k = diag(Σ_{i≤k} ĝ^i ĝ^{iᵀ})^{1/2} / α``,
  ``x ← proj_X^{H_k}(x − H_k^{-1} ĝ^k)``, i.e. ``x_j ← x_j − α ĝ_j / max(√(Σ_{i≤k} (ĝ_j^i)²), ε)``
  — diagonal AdaGrad.  The ``H_k``-norm projection onto a box is coordinate-wise clipping, the
  engine's Euclidean box projection; for other domains the two differ and PAGAN raises
  ``ValueError``.

The guard ``max(·, ε)`` (default ``1e-12``) only avoids ``0/0``: the sums include the current
``ĝ``, so a zero sum means a zero numerator.  The paper returns the average iterate; like every
dpsim optimizer these record the last iterate.

Pieces: ``"privatizer"`` (:class:`~dpsim.privacy.ellipsoid.EllipsoidState`, with ``.projected``),
``"preconditioner"`` (``PreconditionState(v)``: ``Σ ||ĝ||²`` of shape ``(R, 1)`` for PASAN,
``Σ ĝ²`` for PAGAN), ``"lr"``.  Probe ``projected_fraction``: fraction of the step's examples
moved by the projection.

Ranges: ``lr`` ∈ [0, ∞); ``noise_multiplier`` ∈ [0, ∞); ``radius`` ∈ (0, ∞] or ``None`` (Theorem
1/2 formula); ``scaling`` ``"identity" | "optimal" |`` positive ``(d,)``/``(R, d)`` array;
``sigma_hat`` positive ``(d,)`` (with ``scaling="optimal"``); ``eps`` ∈ (0, ∞); ``noise``
``"gaussian" | "sqrt_toeplitz" | "banded:<k>"``.
"""

from __future__ import annotations

from ..privacy.ellipsoid import (OPTIMAL_EXPONENT, EllipsoidState, ellipsoid_parts,  # noqa: F401
                                 ellipsoid_privatizer, ellipsoid_radius, empirical_moment,
                                 project_ellipsoid, scaling_diagonal)
from ..transforms.base import named_chain
from ..transforms.preconditioners import adagrad, precondition
from ._hyper import EPS_POSITIVE, LR, NOISE, SIGMA, Opaque, OrNone, Real
from ._registry import Optimizer, optimizer, register
from .baselines import learning_rate

__all__ = ["pasan", "pagan", "ellipsoid_privatizer", "ellipsoid_radius", "empirical_moment",
           "scaling_diagonal", "project_ellipsoid", "EllipsoidState", "OPTIMAL_EXPONENT"]

_PER_COORDINATE = ("scaling", "sigma_hat")

#: ``radius=None`` (Theorem 1/2) needs a box domain and known Lipschitz rows: not drawn.
RADIUS = OrNone(Real("(0, inf]", typical=(0.1, 10.0), log=True), draw_none=False)
SCALING = Opaque("'identity', 'optimal' or positive C_jj of shape (d,) or (R, d)",
                 examples=("identity",), type="str or array_like")
SIGMA_HAT = Opaque("None or positive (d,) coordinate scales (with scaling='optimal')",
                   type="array_like or None")
_DOC = {
    "lr": "Base step size α.",
    "noise_multiplier": "Noise multiplier σ: the release's noise is ``(σ/b) ξ``, ``ξ ~ N(0, A⁻¹)``.",
    "radius": "Longest semi-axis B of the ellipsoid (``None``: the Theorem 1/2 formula on the "
              "training data, which makes the run non-private).",
    "scaling": "The ellipsoid's shape ``C`` of ``A = C/B²``: ``'identity'`` (ℓ2 clipping), "
               "``'optimal'`` (Theorem 1/2 from coordinate scales) or an explicit positive array.",
    "sigma_hat": "Coordinate scales for ``scaling='optimal'`` (``None``: the problem's).",
    "eps": "Guard of ``max(√(…), ε)``; it only avoids 0/0.",
}


def _projected_probe(state, params, ctx):
    return state["privatizer"].projected


def _build(algorithm, lr, noise_multiplier, radius, scaling, sigma_hat, eps, noise):
    priv = ellipsoid_privatizer(noise_multiplier, radius=radius, scaling=scaling,
                                sigma_hat=sigma_hat, algorithm=algorithm, noise=noise)
    per = "norm" if algorithm == "pasan" else "coordinate"
    step = precondition(adagrad(eps, guard="max", per=per))
    # the fast paths derive its shape from these pieces (dpsim.fast.compose.ellipsoid: per trial
    # projected sum, noise, AdaGrad, update; bit for bit this chain, tests/fast/test_w_fast.py)
    tx = named_chain(("privatizer", priv), ("preconditioner", step), learning_rate(lr))
    return optimizer(tx, probes={"projected_fraction": _projected_probe})


@register(per_coordinate=_PER_COORDINATE, doc=_DOC)
def pasan(lr: LR = 0.1, noise_multiplier: SIGMA = 1.0, radius: RADIUS = None, scaling: SCALING = "identity",
          sigma_hat: SIGMA_HAT = None, eps: EPS_POSITIVE = 1e-12, noise: NOISE = "gaussian") -> Optimizer:
    """PASAN: ellipsoid privatizer and an AdaGrad-norm step size.

    Update rule (``π_A`` the Euclidean projection onto the ellipsoid ``{x : xᵀAx ≤ 1}``,
    ``A = C/B²``, ``ξ_k ~ N(0, A⁻¹)``, ``α`` = ``lr``; ``proj_X`` applied by the engine)::

        ĝ^k = (1/b) Σ_{i∈B_k} π_A(g_i) + (σ/b) ξ_k
        α_k = α / max(√(Σ_{i≤k} ‖ĝ^i‖²), ε)
        x_k = proj_X(x_{k-1} - α_k ĝ^k)

    Source: [PAGAN] Alg. 1, lines 7–8; radius from Theorem 1 (ALGORITHMS §2.4).  One Gaussian
    release of multiplier σ per step (``radius=None`` is data-dependent: declared non-private).

    Scale: ``lr`` (0.1) is absolute; [PAGAN] Thm 1 takes ``α = diam₂(X)`` (docs/defaults.md).

    Returns
    -------
    Optimizer
        With probe ``projected_fraction``: the fraction of the step's examples moved by the
        projection.

    Examples
    --------
    >>> import dpsim
    >>> opt = dpsim.optimizers.pasan(radius=2.0)
    >>> opt.private, sorted(opt.probes)
    (True, ['projected_fraction'])
    """
    return _build("pasan", lr, noise_multiplier, radius, scaling, sigma_hat, eps, noise)


@register(per_coordinate=_PER_COORDINATE, doc=_DOC)
def pagan(lr: LR = 0.1, noise_multiplier: SIGMA = 1.0, radius: RADIUS = None, scaling: SCALING = "identity",
          sigma_hat: SIGMA_HAT = None, eps: EPS_POSITIVE = 1e-12, noise: NOISE = "gaussian") -> Optimizer:
    """PAGAN: ellipsoid privatizer and a diagonal AdaGrad step.

    Update rule (``ĝ^k`` the ellipsoid release of :func:`pasan`, ``α`` = ``lr``)::

        x_{k,j} = x_{k-1,j} - α ĝ^k_j / max(√(Σ_{i≤k} (ĝ^i_j)²), ε)
        x_k = proj_X(x_k)               (box domains only)

    i.e. ``H_k = diag(Σ_{i≤k} ĝ^i ĝ^{iᵀ})^{1/2} / α``, ``x ← proj_X^{H_k}(x − H_k⁻¹ ĝ^k)``.

    Source: [PAGAN] Alg. 2, lines 7–8; radius from Theorem 2 (ALGORITHMS §2.4).  One Gaussian
    release of multiplier σ per step.

    Scale: ``lr`` (0.1) is absolute; [PAGAN] Thm 2 takes ``α = diam_∞(X)`` (docs/defaults.md).

    Returns
    -------
    Optimizer
        With probe ``projected_fraction``: the fraction of the step's examples moved by the
        projection.

    Examples
    --------
    >>> import dpsim
    >>> dpsim.optimizers.pagan(radius=1.0, scaling="optimal").hyperparameters["scaling"]
    'optimal'
    """
    return _build("pagan", lr, noise_multiplier, radius, scaling, sigma_hat, eps, noise)
