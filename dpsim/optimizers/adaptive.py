"""Adaptive rules and their post-processing private versions; DP-AdamBC.

Update rules (coordinate-wise; the recursions are in :mod:`dpsim.transforms.preconditioners`):

* ``adagrad``: ``v ← v + g²``; ``rmsprop``: ``v ← β v + (1−β) g²``; ``yogi``:
  ``v ← v − (1−β) sign(v − g²) g²``; all step ``w ← w − η g / (√v + ε)``.
* ``adam``: ``m ← β1 m + (1−β1) g``, ``v ← β2 v + (1−β2) g²``, ``w ← w − η m̂ / (√v̂ + ε)`` with
  ``m̂ = m/(1−β1^t)``, ``v̂ = v/(1−β2^t)``.
* ``dp_adagrad``, ``dp_rmsprop``, ``dp_adam``: the same rule fed the privatized gradient
  ``g̃ = (1/b)(Σ clip(g_i, C) + N(0, σ²C²I))`` ([DP2] §2, [DESIGN] §3.1) — post-processing.
* ``dp_adam_bc`` ([ADAMBC] Alg. 1): ``w ← w − η m̂ / √max(v̂ − Φ, γ')``, ``Φ = (σC/b)²``.

Pieces: ``"privatizer"``/``"gradient"``, ``"preconditioner"`` (``PreconditionState(v)``, or
``AdamState(m, v, count)`` with the raw ``v``), ``"lr"``.

Hyperparameter ranges: ``lr`` ∈ [0, ∞); ``beta``, ``beta1``, ``beta2`` ∈ [0, 1); ``eps`` ∈ [0, ∞);
``gamma_prime`` ∈ (0, ∞); ``clip`` ∈ (0, ∞] (``inf`` only with σ = 0); ``noise_multiplier`` ∈
[0, ∞); ``noise`` ``"gaussian" | "sqrt_toeplitz" | "banded:<k>"``.
"""

from __future__ import annotations

from .._validate import any_inf, hyper
from ..privacy.privatizers import check_clip_sigma, gaussian_privatizer
from ..transforms.base import mean_gradient, named_chain
from ..transforms.preconditioners import (adam_v_hat, adagrad as adagrad_rule, precondition,
                                          rmsprop as rmsprop_rule, scale_by_adam, yogi as yogi_rule)
from ._hyper import BETA, CLIP, EPS, LR, NOISE, SIGMA, OrNone, Real
from ._registry import Optimizer, optimizer, register
from .baselines import MEAN, learning_rate, post, release

__all__ = ["adagrad", "rmsprop", "yogi", "adam", "dp_adagrad", "dp_rmsprop", "dp_adam", "dp_adam_bc",
           "noise_variance"]


#: [ADAMBC]'s floor γ' of the debiased second moment.
GAMMA_PRIME = Real("(0, inf)", typical=(1e-12, 1e-4), log=True)
# DP-AdamBC's assumed noise variance Φ' (None: the true Φ = (σC/b)²)
PHI_PRIME = OrNone(Real("[0, inf)", typical=(1e-8, 1e-2), log=True))


def _gradient():
    return ("gradient", mean_gradient())


def _beta(beta, name="beta"):
    return hyper(name, beta, "[0, 1)")


def _eps(eps):
    return hyper("eps", eps, "[0, inf)")


def _adam(beta1, beta2, eps):
    """The validated constants of ``scale_by_adam(beta1, beta2, eps)`` for its description."""
    return {"piece": "preconditioner", "beta1": _beta(beta1, "beta1"), "beta2": _beta(beta2, "beta2"),
            "eps": _eps(eps)}


def _private(clip, noise_multiplier, noise):
    return ("privatizer", gaussian_privatizer(clip, noise_multiplier, noise=noise))


@register
def adagrad(lr: LR = 0.1, eps: EPS = 1e-8) -> Optimizer:
    """AdaGrad: ``v ← v + g²``, ``w ← w − η g / (√v + ε)``.  Not private."""
    tx = named_chain(_gradient(), ("preconditioner", precondition(adagrad_rule(eps))), learning_rate(lr))
    return optimizer(post(tx, MEAN, "adagrad", lr, piece="preconditioner", eps=_eps(eps)))


@register
def rmsprop(lr: LR = 0.01, beta: BETA = 0.9, eps: EPS = 1e-8) -> Optimizer:
    """RMSProp: ``v ← β v + (1−β) g²``, ``w ← w − η g / (√v + ε)``.  Not private."""
    tx = named_chain(_gradient(), ("preconditioner", precondition(rmsprop_rule(beta, eps))),
                     learning_rate(lr))
    return optimizer(post(tx, MEAN, "rmsprop", lr, piece="preconditioner", beta=_beta(beta), eps=_eps(eps)))


@register
def yogi(lr: LR = 0.01, beta: BETA = 0.9, eps: EPS = 1e-8) -> Optimizer:
    """Yogi (Zaheer et al. 2018): ``v ← v − (1−β) sign(v − g²) g²``, ``w ← w − η g / (√v + ε)``.
    Not private."""
    return optimizer(named_chain(_gradient(), ("preconditioner", precondition(yogi_rule(beta, eps))),
                                 learning_rate(lr)))


@register
def adam(lr: LR = 0.01, beta1: BETA = 0.9, beta2: BETA = 0.999, eps: EPS = 1e-8) -> Optimizer:
    """Adam: ``w ← w − η m̂ / (√v̂ + ε)`` (module docstring).  Not private."""
    tx = named_chain(_gradient(), ("preconditioner", scale_by_adam(beta1, beta2, eps)), learning_rate(lr))
    return optimizer(post(tx, MEAN, "adam", lr, **_adam(beta1, beta2, eps)))


@register
def dp_adagrad(lr: LR = 0.1, eps: EPS = 1e-8, clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0,
               noise: NOISE = "gaussian") -> Optimizer:
    """DP-AdaGrad: AdaGrad on the privatized gradient ``g̃`` (post-processing)."""
    tx = named_chain(_private(clip, noise_multiplier, noise),
                     ("preconditioner", precondition(adagrad_rule(eps))), learning_rate(lr))
    rel = release(clip, noise_multiplier, noise, correlated=True)
    return optimizer(post(tx, rel, "adagrad", lr, piece="preconditioner", eps=_eps(eps)))


@register
def dp_rmsprop(lr: LR = 0.01, beta: BETA = 0.9, eps: EPS = 1e-8, clip: CLIP = 1.0,
               noise_multiplier: SIGMA = 1.0, noise: NOISE = "gaussian") -> Optimizer:
    """DP-RMSProp: RMSProp on the privatized gradient ``g̃`` (post-processing)."""
    tx = named_chain(_private(clip, noise_multiplier, noise),
                     ("preconditioner", precondition(rmsprop_rule(beta, eps))), learning_rate(lr))
    rel = release(clip, noise_multiplier, noise, correlated=True)
    return optimizer(post(tx, rel, "rmsprop", lr, piece="preconditioner", beta=_beta(beta),
                          eps=_eps(eps)))


@register
def dp_adam(lr: LR = 0.01, beta1: BETA = 0.9, beta2: BETA = 0.999, eps: EPS = 1e-8, clip: CLIP = 1.0,
            noise_multiplier: SIGMA = 1.0, noise: NOISE = "gaussian") -> Optimizer:
    """DP-Adam: Adam on the privatized gradient ``g̃`` (post-processing; [DESIGN] §3.1)."""
    tx = named_chain(_private(clip, noise_multiplier, noise),
                     ("preconditioner", scale_by_adam(beta1, beta2, eps)), learning_rate(lr))
    return optimizer(post(tx, release(clip, noise_multiplier, noise, correlated=True), "adam", lr,
                          **_adam(beta1, beta2, eps)))


def noise_variance(clip, noise_multiplier):
    """``Φ = (σC/b)²`` ([ADAMBC] Eq. 2), the per-coordinate variance of the privatized gradient's
    noise, as a function of the step context (``b`` is its batch size)."""
    c, s = check_clip_sigma(clip, noise_multiplier)
    if any_inf(c):  # only valid with σ = 0: no noise, Φ = 0
        return lambda ctx: 0.0

    def phi(ctx):
        return (ctx.hp(s) * ctx.hp(c) / float(ctx.batch_size)) ** 2

    return phi


def _above_floor_probe(phi, gamma, beta2):
    """Fraction of coordinates with ``v̂ − Φ > γ'`` (DP-AdamBC diagnostic, [ADAMBC] §4)."""

    def probe(state, params, ctx):
        xp = ctx.xp
        adam_state = state["preconditioner"]
        if adam_state.count == 0:
            return xp.zeros(params.shape[0], dtype=params.dtype)
        above = (adam_v_hat(adam_state, ctx.hp(beta2)) - phi(ctx)) > ctx.hp(gamma)
        return xp.mean(xp.astype(above, params.dtype), axis=1)

    return probe


@register
def dp_adam_bc(lr: LR = 0.01, beta1: BETA = 0.9, beta2: BETA = 0.999, gamma_prime: GAMMA_PRIME = 1e-8,
               clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0, noise: NOISE = "gaussian",
               phi_prime: PHI_PRIME = None) -> Optimizer:
    """DP-AdamBC ([ADAMBC] Alg. 1, Eq. 4): DP-Adam with the noise variance removed from the
    second moment, ``w ← w − η m̂ / √max(v̂ − Φ, γ')`` with ``Φ = (σC/b)²`` and no additive ε.

    ``phi_prime``: ``None`` (default) subtracts the true ``Φ``; a number ``Φ'`` subtracts ``Φ'``
    instead — the mis-specified bias of [ADAMBC] Fig. 5 (upper left) and Fig. 2 (right), where
    ``Φ'`` is swept around ``Φ``.  It changes only the update, not the privatizer, so ε is that
    of the same σ either way.

    Probe ``frac_above_floor``: fraction of coordinates with ``v̂ − Φ' > γ'`` (``Φ' = Φ`` by
    default)."""
    if phi_prime is None:
        phi = noise_variance(clip, noise_multiplier)
    else:
        pp = hyper("phi_prime", phi_prime, "[0, inf)")

        def phi(ctx):
            return ctx.hp(pp)
    gamma = hyper("gamma_prime", gamma_prime, "(0, inf)")
    b2 = hyper("beta2", beta2, "[0, 1)")
    tx = named_chain(_private(clip, noise_multiplier, noise),
                     ("preconditioner", scale_by_adam(beta1, b2, 0.0, phi=phi, floor=gamma)),
                     learning_rate(lr))
    tx = post(tx, release(clip, noise_multiplier, noise, correlated=True), "adam", lr,
              **_adam(beta1, b2, 0.0), phi=phi, floor=gamma)
    return optimizer(tx,
                     probes={"frac_above_floor": _above_floor_probe(phi, gamma, b2)})
