"""Baselines that use public data: a ``public_fraction`` of the training set is carved out by the
engine, used without privacy, and never sampled for the private batches; ε covers the private part.

* ``pdp_sgd`` (Zhou et al. 2021, a baseline of [PAGAN] §6): DP-SGD with the release projected onto
  the top-``k`` subspace of the public per-example gradients.
* ``adadps`` (AdaDPS-RMSProp, Li et al. 2022; [DP2] §5.2): an RMSProp preconditioner fed the mean
  public gradient, ``v ← β v + (1−β) ḡ_pub²``, ``D = √v + ε``; the private release is of the
  preconditioned gradients, ``g̃ = (1/b)(Σ clip(g_i / D, C) + N(0, σ²C²I))``, and ``w ← w − η g̃``
  (:func:`~dpsim.transforms.scale_then_privatize` without unscaling, with the public statistic as
  lookahead).

Pieces: ``"privatizer"``, ``"preconditioner"`` (adadps), ``"lr"``.  Ranges: ``lr`` ∈ [0, ∞),
``clip`` ∈ (0, ∞], ``noise_multiplier`` ∈ [0, ∞), ``beta`` ∈ [0, 1), ``eps`` ∈ (0, ∞), ``k`` a
positive integer, ``public_fraction`` ∈ (0, 1).
"""

from __future__ import annotations

from .._validate import hyper
from ..privacy.privatizers import gaussian_privatizer, public_subspace_privatizer
from ..transforms.base import named_chain
from ..transforms.combinators import scale_then_privatize
from ..transforms.preconditioners import precondition, rmsprop
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


@register
def pdp_sgd(lr: LR = 0.1, clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0, k: SUBSPACE = 10,
            public_fraction: FRACTION = 0.01, noise: NOISE = "gaussian") -> Optimizer:
    """PDP-SGD: the DP-SGD release projected onto the top-``k`` public gradient subspace."""
    return optimizer(named_chain(("privatizer", public_subspace_privatizer(clip, noise_multiplier, k=k,
                                                                           noise=noise)),
                                 learning_rate(lr)),
                     note=_PUBLIC_NOTE, public_fraction=_fraction(public_fraction))


def _public_mean_gradient(batch, ctx):
    return ctx.xp.mean(batch.public_per_example(), axis=1)


@register
def adadps(lr: LR = 0.1, clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0, beta: BETA = 0.9,
           eps: EPS_POSITIVE = 1e-8, public_fraction: FRACTION = 0.01, noise: NOISE = "gaussian") -> Optimizer:
    """AdaDPS-RMSProp: preconditioner from public gradients, preconditioned per-example clipping."""
    eps = hyper("eps", eps, "(0, inf)")
    stp = scale_then_privatize(gaussian_privatizer(clip, noise_multiplier, noise=noise),
                               precondition(rmsprop(beta, eps)), eps_scale=eps, unscale=False,
                               lookahead=_public_mean_gradient)
    return optimizer(named_chain(stp, learning_rate(lr)), note=_PUBLIC_NOTE,
                     public_fraction=_fraction(public_fraction))
