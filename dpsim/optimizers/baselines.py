"""SGD, heavy-ball momentum and their private versions (DP-SGD, DP-SGDM).

Hyperparameter ranges: ``lr`` ∈ [0, ∞), ``beta`` ∈ [0, 1), ``clip`` ∈ (0, ∞] (``inf`` only with
``noise_multiplier = 0``), ``noise_multiplier`` ∈ [0, ∞); each may be a scalar or one value per
trial.  ``noise``: ``"gaussian"`` (i.i.d.), ``"sqrt_toeplitz"`` or ``"banded:<k>"`` (correlated
noise, DP-MF).
"""

from __future__ import annotations

from .._validate import any_inf, hyper, negated, product
from ..privacy.noise import NoiseSource
from ..privacy.privatizers import check_clip_sigma, gaussian_privatizer
from ..transforms import _fused_release as _fr
from ..transforms.base import mean_gradient, named_chain, scale, trace
from ._hyper import BETA, CLIP, LR, NOISE, SIGMA
from ._registry import Optimizer, optimizer, register

__all__ = ["sgd", "momentum", "dp_sgd", "dp_sgdm", "learning_rate"]


def neg_lr(lr, name="lr"):
    """``−lr`` of a validated ``lr`` ∈ [0, ∞): the factor of :func:`learning_rate`'s piece."""
    return negated(hyper(name, lr, "[0, inf)"))


def learning_rate(lr, name="lr"):
    """The last piece of every optimizer: ``("lr", scale(−lr))`` with ``lr`` ∈ [0, ∞) (``name``:
    the hyperparameter's name in errors)."""
    return ("lr", scale(neg_lr(lr, name)))


def release(clip, noise_multiplier, noise="gaussian", *, scaled=False, correlated=False):
    """The release (:class:`dpsim.transforms.elements.Release`) of
    ``gaussian_privatizer(clip, noise_multiplier, noise=noise)`` for a description of the fused
    release (:class:`~dpsim.transforms._fused_release.Delayed`, ``Prepared``, ``Ime``): the same
    validated clip and noise std ``σ·C`` (``None`` with an infinite clip).  Correlated noise
    (DP-MF): ``None`` (no fused path), unless ``correlated`` — for an ``Ime`` description whose
    piece ``"privatizer"`` draws through that source — when the release carries its noise source
    (the fused step draws each step's unit noise through it, on the privatizer's own state).  A
    chain composed from its pieces needs none of this: the privatizer exposes its release."""
    source = None
    if noise != "gaussian":
        if not correlated:
            return None
        source = NoiseSource(noise)
    c, s = check_clip_sigma(clip, noise_multiplier)
    return _fr.Release(clip=c, std=None if any_inf(c) else product(s, c), scaled=scaled,
                       source=source)


#: The description of the non-private ``mean_gradient`` piece (no clipping, no noise).
MEAN = _fr.Release(clip=None, std=None)


def described(tx, spec):
    """``tx`` with its fused-release description ``spec`` registered (``spec`` ``None``: as is)."""
    return tx if spec is None else _fr.describe(tx, spec)


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
