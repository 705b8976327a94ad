"""SGD, heavy-ball momentum and their private versions (DP-SGD, DP-SGDM).

Hyperparameter ranges: ``lr`` ∈ [0, ∞), ``beta`` ∈ [0, 1), ``clip`` ∈ (0, ∞] (``inf`` only with
``noise_multiplier = 0``), ``noise_multiplier`` ∈ [0, ∞); each may be a scalar or one value per
trial.  ``noise``: ``"gaussian"`` (i.i.d.), ``"sqrt_toeplitz"`` or ``"banded:<k>"`` (correlated
noise, DP-MF).
"""

from __future__ import annotations

from .._validate import hyper, negated
from ..privacy.privatizers import gaussian_privatizer
from ..transforms.base import mean_gradient, named_chain, scale, trace
from ._hyper import BETA, CLIP, LR, NOISE, SIGMA
from ._registry import Optimizer, optimizer, register

__all__ = ["sgd", "momentum", "dp_sgd", "dp_sgdm", "learning_rate"]


def learning_rate(lr, name="lr"):
    """The last piece of every optimizer: ``("lr", scale(−lr))`` with ``lr`` ∈ [0, ∞) (``name``:
    the hyperparameter's name in errors)."""
    return ("lr", scale(negated(hyper(name, lr, "[0, inf)"))))


def _momentum(beta):
    return ("momentum", trace(hyper("beta", beta, "[0, 1)")))


@register
def sgd(lr: LR = 0.1) -> Optimizer:
    """SGD: ``w ← w − η g`` with the minibatch mean gradient ``g``.  Not private."""
    return optimizer(named_chain(("gradient", mean_gradient()), learning_rate(lr)))


@register
def momentum(lr: LR = 0.1, beta: BETA = 0.9) -> Optimizer:
    """Heavy-ball momentum ([ADAMBC] §3): ``b_t = β b_{t−1} + g``, ``w ← w − η b_t``.  Not private."""
    return optimizer(named_chain(("gradient", mean_gradient()), _momentum(beta), learning_rate(lr)))


@register
def dp_sgd(lr: LR = 0.1, clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0, noise: NOISE = "gaussian") -> Optimizer:
    """DP-SGD (Abadi et al. 2016): SGD on ``g̃ = (1/b)(Σ clip(g_i, C) + N(0, σ²C²I))``.

    One Gaussian release of noise multiplier σ per step."""
    return optimizer(named_chain(("privatizer", gaussian_privatizer(clip, noise_multiplier, noise=noise)),
                                 learning_rate(lr)))


@register
def dp_sgdm(lr: LR = 0.1, beta: BETA = 0.9, clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0,
            noise: NOISE = "gaussian") -> Optimizer:
    """DP-SGD with heavy-ball momentum on ``g̃`` ([ADAMBC] §3): ``b_t = β b_{t−1} + g̃``,
    ``w ← w − η b_t``.  One Gaussian release per step."""
    return optimizer(named_chain(("privatizer", gaussian_privatizer(clip, noise_multiplier, noise=noise)),
                                 _momentum(beta), learning_rate(lr)))
