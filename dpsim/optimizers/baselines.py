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


def neg_lr(lr, name="lr"):
    """``−lr`` of a validated ``lr`` ∈ [0, ∞): the factor of :func:`learning_rate`'s piece."""
    return negated(hyper(name, lr, "[0, inf)"))


def learning_rate(lr, name="lr"):
    """The last piece of every optimizer: ``("lr", scale(−lr))`` with ``lr`` ∈ [0, ∞) (``name``:
    the hyperparameter's name in errors).

    Parameters
    ----------
    lr : float or sequence of float
        The step size η.
    name : str
        Its name in errors.

    Returns
    -------
    tuple
        ``("lr", scale(−lr))``, a named piece.
    """
    return ("lr", scale(neg_lr(lr, name)))


def _momentum(beta):
    return ("momentum", trace(hyper("beta", beta, "[0, 1)")))


@register
def sgd(lr: LR = 0.1) -> Optimizer:
    """SGD on the minibatch mean gradient.  Not private.

    Update rule (``g_t = (1/|B_t|) Σ_{i∈B_t} g_i``)::

        w_t = w_{t-1} - η g_t

    Source: Robbins and Monro 1951 (ALGORITHMS §1).  Pieces ``"gradient"``, ``"lr"``.

    Examples
    --------
    >>> import dpsim
    >>> opt = dpsim.optimizers.sgd(lr=0.5)
    >>> opt, opt.private
    (sgd(lr=0.5), False)
    """
    return optimizer(named_chain(("gradient", mean_gradient()), learning_rate(lr)))


@register
def momentum(lr: LR = 0.1, beta: BETA = 0.9) -> Optimizer:
    """Heavy-ball momentum on the minibatch mean gradient.  Not private.

    Update rule::

        b_t = β b_{t-1} + g_t
        w_t = w_{t-1} - η b_t

    Source: [ADAMBC] §3 (ALGORITHMS §1).  Pieces ``"gradient"``, ``"momentum"``, ``"lr"``.

    Examples
    --------
    >>> import dpsim
    >>> dpsim.optimizers.momentum(beta=0.5).transform.names
    ('gradient', 'momentum', 'lr')
    """
    return optimizer(named_chain(("gradient", mean_gradient()), _momentum(beta), learning_rate(lr)))


@register
def dp_sgd(lr: LR = 0.1, clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0, noise: NOISE = "gaussian") -> Optimizer:
    """DP-SGD: SGD on the Gaussian release of the clipped minibatch sum.

    Update rule (``ξ_t ~ N(0, I_d)``, ``b`` the nominal batch size)::

        g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i, C) + σC ξ_t)
        w_t = w_{t-1} - η g̃_t

    Source: Abadi et al. 2016; [DESIGN] Alg. 1 (ALGORITHMS §2.1).  One Gaussian release of noise
    multiplier σ per step.  Pieces ``"privatizer"``, ``"lr"``.

    Examples
    --------
    >>> import dpsim
    >>> problem = dpsim.problems.logistic_regression(200, 5, seed=0)
    >>> res = dpsim.simulate(problem, dpsim.optimizers.dp_sgd(lr=0.5), steps=3, batch_size=8,
    ...                      trials=2, seed=0)
    >>> res.loss.shape, res.config["optimizer"]
    ((4, 2), 'dp_sgd')
    """
    return optimizer(named_chain(("privatizer", gaussian_privatizer(clip, noise_multiplier, noise=noise)),
                                 learning_rate(lr)))


@register
def dp_sgdm(lr: LR = 0.1, beta: BETA = 0.9, clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0,
            noise: NOISE = "gaussian") -> Optimizer:
    """DP-SGDM: heavy-ball momentum on the privatized gradient (post-processing).

    Update rule (``ξ_t ~ N(0, I_d)``, ``b`` the nominal batch size)::

        g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i, C) + σC ξ_t)
        b_t = β b_{t-1} + g̃_t
        w_t = w_{t-1} - η b_t

    Source: [ADAMBC] §3 (ALGORITHMS §2.1).  One Gaussian release per step.  Pieces
    ``"privatizer"``, ``"momentum"``, ``"lr"``.

    Examples
    --------
    >>> import dpsim
    >>> dpsim.optimizers.dp_sgdm(beta=0.9).private
    True
    """
    return optimizer(named_chain(("privatizer", gaussian_privatizer(clip, noise_multiplier, noise=noise)),
                                 _momentum(beta), learning_rate(lr)))
