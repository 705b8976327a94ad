"""Adaptive rules and their post-processing private versions; DP-AdamBC.

Update rules (coordinate-wise; the recursions are in :mod:`dpsim.transforms.preconditioners`):

* ``adagrad``: ``v ← v + g²``; ``rmsprop``: ``v ← β v + (1−β) g²``; ``yogi``:
  ``v ← v − (1−β) sign(v − g²) g²``; all step ``w ← w − η g / (√v + ε)``.
* ``adam``: ``m ← β1 m + (1−β1) g``, ``v ← β2 v + (1−β2) g²``, ``w ← w − η m̂ / (√v̂ + ε)`` with
  ``m̂ = m/(1−β1^t)``, ``v̂ = v/(1−β2^t)``.
* ``dp_adagrad``, ``dp_rmsprop``, ``dp_adam``: the same rule fed the privatized gradient
  ``g̃ = (1/b)(Σ clip(g_i, C) + N(0, σ²C²I))`` ([DP2] §2, [DESIGN] §3.1) — post-processing.
* ``dp_adam_bc`` ([ADAMBC] Alg. 1): ``w ← w − η m̂ / √max(v̂ − Φ, γ')``, ``Φ = (σC/b)²``;
  ``γ'`` is ``"auto"`` by default: ``γ' = 0.01·Φ`` (:func:`auto_gamma_prime`).

Pieces: ``"privatizer"``/``"gradient"``, ``"preconditioner"`` (``PreconditionState(v)``, or
``AdamState(m, v, count)`` with the raw ``v``), ``"lr"``.

Hyperparameter ranges: ``lr`` ∈ [0, ∞); ``beta``, ``beta1``, ``beta2`` ∈ [0, 1); ``eps`` ∈ [0, ∞);
``gamma_prime`` ``"auto"`` or ∈ (0, ∞); ``clip`` ∈ (0, ∞] (``inf`` only with σ = 0);
``noise_multiplier`` ∈ [0, ∞); ``noise`` ``"gaussian" | "sqrt_toeplitz" | "banded:<k>"``.

Scale: ``eps`` (1e-8) and ``lr`` are absolute; on a private run ``√v̂ ≥ σC/b`` makes ε
immaterial unless it nears ``σC/b``, see docs/defaults.md.
"""

from __future__ import annotations

import numpy as np

from .._validate import any_inf, hyper
from ..privacy.privatizers import check_clip_sigma, gaussian_privatizer
from ..transforms.base import mean_gradient, named_chain
from ..transforms.preconditioners import (adam_v_hat, adagrad as adagrad_rule, precondition,
                                          rmsprop as rmsprop_rule, scale_by_adam, yogi as yogi_rule)
from ._hyper import BETA, CLIP, EPS, LR, NOISE, SIGMA, OrNone, Real, RealOrAuto
from ._registry import Optimizer, optimizer, register
from .baselines import learning_rate

__all__ = ["adagrad", "rmsprop", "yogi", "adam", "dp_adagrad", "dp_rmsprop", "dp_adam", "dp_adam_bc",
           "noise_variance", "auto_gamma_prime", "GAMMA_PRIME_RATIO", "GAMMA_PRIME_FALLBACK"]


#: ``c`` of ``gamma_prime="auto"``: ``γ' = c·Φ``.  [ADAMBC] §5, Table 2 (SNLI: B = 256, C = 0.1,
#: σ = 0.4, so Φ ≈ 2.441e-8, with γ' = 3e-10 ≈ 0.012·Φ; the same γ' in Fig. 4 middle).
GAMMA_PRIME_RATIO = 0.01
#: γ' of ``gamma_prime="auto"`` where ``Φ = 0`` (σ = 0 or C = ∞: no noise, nothing to scale by):
#: the former absolute default, i.e. a floor √γ' = 1e-4 on Adam's denominator.
GAMMA_PRIME_FALLBACK = 1e-8
#: [ADAMBC]'s floor γ' of the debiased second moment: ``"auto"`` (γ' = 0.01·Φ) or an absolute value.
GAMMA_PRIME = RealOrAuto("(0, inf)", typical=(1e-12, 1e-4), log=True,
                         rule="γ' = 0.01·Φ, Φ = (σC/b)² with b the nominal batch size, "
                              "[ADAMBC] §5 Table 2; 1e-8 where Φ = 0")
# DP-AdamBC's assumed noise variance Φ' (None: the true Φ = (σC/b)²)
PHI_PRIME = OrNone(Real("[0, inf)", typical=(1e-8, 1e-2), log=True))


def _gradient():
    return ("gradient", mean_gradient())


def _private(clip, noise_multiplier, noise):
    return ("privatizer", gaussian_privatizer(clip, noise_multiplier, noise=noise))


@register
def adagrad(lr: LR = 0.1, eps: EPS = 1e-8) -> Optimizer:
    """AdaGrad: per-coordinate step sizes from the sum of squared gradients.  Not private.

    Update rule (``g_t`` the minibatch mean gradient)::

        v_t = v_{t-1} + g_t²
        w_t = w_{t-1} - η g_t / (√v_t + ε)

    Source: Duchi, Hazan, Singer 2011; [DESIGN] Alg. 3 (ALGORITHMS §1).  Pieces ``"gradient"``,
    ``"preconditioner"`` (``PreconditionState(v)``), ``"lr"``.

    Scale: ``eps`` (1e-8) is relative to the gradient scale (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> opt = dpsim.optimizers.adagrad(lr=0.5)
    >>> opt
    adagrad(lr=0.5, eps=1e-08)
    >>> opt.private
    False
    """
    return optimizer(named_chain(_gradient(), ("preconditioner", precondition(adagrad_rule(eps))),
                                 learning_rate(lr)))


@register
def rmsprop(lr: LR = 0.01, beta: BETA = 0.9, eps: EPS = 1e-8) -> Optimizer:
    """RMSProp: per-coordinate step sizes from a moving average of squared gradients.  Not private.

    Update rule (``g_t`` the minibatch mean gradient)::

        v_t = β v_{t-1} + (1-β) g_t²
        w_t = w_{t-1} - η g_t / (√v_t + ε)

    Source: Tieleman and Hinton 2012 (ALGORITHMS §1).  Pieces ``"gradient"``, ``"preconditioner"``
    (``PreconditionState(v)``), ``"lr"``.

    Scale: ``eps`` (1e-8) is relative to the gradient scale (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> dpsim.optimizers.rmsprop(beta=0.99)
    rmsprop(lr=0.01, beta=0.99, eps=1e-08)
    """
    return optimizer(named_chain(_gradient(), ("preconditioner", precondition(rmsprop_rule(beta, eps))),
                                 learning_rate(lr)))


@register
def yogi(lr: LR = 0.01, beta: BETA = 0.9, eps: EPS = 1e-8) -> Optimizer:
    """Yogi: RMSProp with an additive, sign-controlled second-moment update.  Not private.

    Update rule (``g_t`` the minibatch mean gradient)::

        v_t = v_{t-1} - (1-β) sign(v_{t-1} - g_t²) g_t²
        w_t = w_{t-1} - η g_t / (√v_t + ε)

    Source: Zaheer et al. 2018 (the standard rule; ALGORITHMS §1).  Pieces ``"gradient"``,
    ``"preconditioner"`` (``PreconditionState(v)``), ``"lr"``.

    Scale: ``eps`` (1e-8) is relative to the gradient scale (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> dpsim.optimizers.yogi().transform.names
    ('gradient', 'preconditioner', 'lr')
    """
    return optimizer(named_chain(_gradient(), ("preconditioner", precondition(yogi_rule(beta, eps))),
                                 learning_rate(lr)))


@register
def adam(lr: LR = 0.01, beta1: BETA = 0.9, beta2: BETA = 0.999, eps: EPS = 1e-8) -> Optimizer:
    """Adam: bias-corrected first and second moments.  Not private.

    Update rule (``g_t`` the minibatch mean gradient)::

        m_t = β₁ m_{t-1} + (1-β₁) g_t
        v_t = β₂ v_{t-1} + (1-β₂) g_t²
        m̂_t = m_t / (1-β₁ᵗ),  v̂_t = v_t / (1-β₂ᵗ)
        w_t = w_{t-1} - η m̂_t / (√v̂_t + ε)

    Source: Kingma and Ba 2015; [DESIGN] Alg. 2 (ALGORITHMS §1).  Pieces ``"gradient"``,
    ``"preconditioner"`` (``AdamState(m, v, count)``, raw ``v``), ``"lr"``.

    Scale: ``eps`` (1e-8) is relative to the gradient scale (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> dpsim.optimizers.adam(lr=0.1)
    adam(lr=0.1, beta1=0.9, beta2=0.999, eps=1e-08)
    """
    return optimizer(named_chain(_gradient(), ("preconditioner", scale_by_adam(beta1, beta2, eps)),
                                 learning_rate(lr)))


@register
def dp_adagrad(lr: LR = 0.1, eps: EPS = 1e-8, clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0,
               noise: NOISE = "gaussian") -> Optimizer:
    """DP-AdaGrad: AdaGrad on the privatized gradient (post-processing).

    Update rule (``ξ_t ~ N(0, I_d)``, ``b`` the nominal batch size)::

        g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i, C) + σC ξ_t)
        v_t = v_{t-1} + g̃_t²
        w_t = w_{t-1} - η g̃_t / (√v_t + ε)

    Source: [DP2] §2, [DESIGN] §3.1 (ALGORITHMS §2.1).  One Gaussian release of multiplier σ per
    step: accounted as DP-SGD.  Pieces ``"privatizer"``, ``"preconditioner"``
    (``PreconditionState(v)``), ``"lr"``.

    Scale: ``eps`` (1e-8) is absolute, immaterial while ≪ ``σC/b``, the noise floor of ``√v``
    (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> opt = dpsim.optimizers.dp_adagrad(noise_multiplier=2.0)
    >>> opt.private, opt.transform.names
    (True, ('privatizer', 'preconditioner', 'lr'))
    """
    return optimizer(named_chain(_private(clip, noise_multiplier, noise),
                                 ("preconditioner", precondition(adagrad_rule(eps))), learning_rate(lr)))


@register
def dp_rmsprop(lr: LR = 0.01, beta: BETA = 0.9, eps: EPS = 1e-8, clip: CLIP = 1.0,
               noise_multiplier: SIGMA = 1.0, noise: NOISE = "gaussian") -> Optimizer:
    """DP-RMSProp: RMSProp on the privatized gradient (post-processing).

    Update rule (``ξ_t ~ N(0, I_d)``, ``b`` the nominal batch size)::

        g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i, C) + σC ξ_t)
        v_t = β v_{t-1} + (1-β) g̃_t²
        w_t = w_{t-1} - η g̃_t / (√v_t + ε)

    Source: [DP2] §2 (ALGORITHMS §2.1).  One Gaussian release of multiplier σ per step: accounted
    as DP-SGD.  Pieces ``"privatizer"``, ``"preconditioner"`` (``PreconditionState(v)``), ``"lr"``.

    Scale: ``eps`` (1e-8) is absolute, immaterial while ≪ ``σC/b``, the noise floor of ``√v``
    (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> dpsim.optimizers.dp_rmsprop(lr=[0.01, 0.1]).trial_count()
    2
    """
    return optimizer(named_chain(_private(clip, noise_multiplier, noise),
                                 ("preconditioner", precondition(rmsprop_rule(beta, eps))),
                                 learning_rate(lr)))


@register
def dp_adam(lr: LR = 0.01, beta1: BETA = 0.9, beta2: BETA = 0.999, eps: EPS = 1e-8, clip: CLIP = 1.0,
            noise_multiplier: SIGMA = 1.0, noise: NOISE = "gaussian") -> Optimizer:
    """DP-Adam: Adam on the privatized gradient (post-processing).

    Update rule (``ξ_t ~ N(0, I_d)``, ``b`` the nominal batch size)::

        g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i, C) + σC ξ_t)
        m_t = β₁ m_{t-1} + (1-β₁) g̃_t
        v_t = β₂ v_{t-1} + (1-β₂) g̃_t²
        m̂_t = m_t / (1-β₁ᵗ),  v̂_t = v_t / (1-β₂ᵗ)
        w_t = w_{t-1} - η m̂_t / (√v̂_t + ε)

    Source: [DESIGN] §3.1, Alg. 5; [DP2] §2 (ALGORITHMS §2.1).  One Gaussian release of multiplier
    σ per step: accounted as DP-SGD.  ``E[v̂_t]`` exceeds the clean value by ``Φ = (σC/b)²``
    ([ADAMBC] Eq. 2).  Pieces ``"privatizer"``, ``"preconditioner"`` (``AdamState(m, v, count)``,
    raw ``v``), ``"lr"``.

    Scale: ``eps`` (1e-8) is absolute, immaterial while ≪ ``σC/b``, the noise floor of ``√v̂``
    (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> problem = dpsim.problems.logistic_regression(200, 5, seed=0)
    >>> res = dpsim.simulate(problem, dpsim.optimizers.dp_adam(lr=0.05), steps=3, batch_size=8,
    ...                      trials=2, seed=0)
    >>> res.loss.shape, res.config["optimizer"]
    ((4, 2), 'dp_adam')
    """
    return optimizer(named_chain(_private(clip, noise_multiplier, noise),
                                 ("preconditioner", scale_by_adam(beta1, beta2, eps)), learning_rate(lr)))


def auto_gamma_prime(phi, xp=None):
    """The floor ``γ'`` of ``dp_adam_bc(gamma_prime="auto")`` for the DP bias ``Φ``.

    ``γ' = c·Φ`` where ``Φ > 0`` and ``γ' = γ'₀`` where ``Φ = 0``, with ``c`` =
    :data:`GAMMA_PRIME_RATIO` = 0.01 and ``γ'₀`` = :data:`GAMMA_PRIME_FALLBACK` = 1e-8.

    Source of ``c``: the paper gives no formula for γ', only tuned absolute values, so ``c`` is
    read off its own worked example.  [ADAMBC] §5 ("Empirical effect of bias correction",
    Table 2; Fig. 4 middle) runs SNLI with ``B = 256, C = 0.1, σ = 0.4``, i.e.
    ``Φ = (σC/B)² ≈ 2.441e-8`` as the paper prints, and ``γ' = 3e-10 ≈ 0.012·Φ``.  Its tuned
    values in App. A span ``0.004·Φ`` (SNLI, ``γ' = 1e-10``) through ``0.12·Φ`` (QNLI,
    ``3e-9``) to ``0.84·Φ`` (CIFAR-10: ``C = 1, σ = 2, B = 8192``, ``γ' = 5e-8``).  §4 (after
    Prop. 4) wants γ' scaled "based on the realized trajectory", and App. G calls it "an
    important hyperparameter": ``"auto"`` is a starting point that moves with σ, C and b, not a
    substitute for tuning (the ``adambc`` experiment tunes ``γ'/Φ`` over a grid).
    ``Φ = 0`` (``σ = 0`` or ``C = ∞``) leaves nothing to scale by: γ' falls back to 1e-8, not 0
    (a zero floor would divide by ``√0`` wherever ``v̂ = 0``).

    Parameters
    ----------
    phi : float or array
        ``Φ = (σC/b)²`` (:func:`noise_variance`), a float or a per-trial column.
    xp : array namespace, optional
        The namespace of ``phi`` when it is an array (``ctx.xp``); default NumPy.

    Returns
    -------
    float or array
        ``γ'``, a float for a float ``Φ``, else an array shaped as ``phi``.  The chain, the fused
        release and the small-d kernel of :mod:`dpsim.fast.block` all call this function on the Φ they
        computed, so they use the same floor, bit for bit.
    """
    if isinstance(phi, float):
        return GAMMA_PRIME_RATIO * phi if phi > 0.0 else GAMMA_PRIME_FALLBACK
    xp = np if xp is None else xp
    return xp.where(phi > 0.0, GAMMA_PRIME_RATIO * phi, GAMMA_PRIME_FALLBACK)


def noise_variance(clip, noise_multiplier):
    """``Φ = (σC/b)²`` ([ADAMBC] Eq. 2), the per-coordinate variance of the privatized gradient's
    noise, as a function of the step context (``b`` is its batch size).

    Parameters
    ----------
    clip : float or sequence of float
        The clipping norm C.
    noise_multiplier : float or sequence of float
        The noise multiplier σ.

    Returns
    -------
    callable
        ``ctx -> Φ`` (a float or a per-trial column).
    """
    c, s = check_clip_sigma(clip, noise_multiplier)
    if any_inf(c):  # only valid with σ = 0: no noise, Φ = 0
        return lambda ctx: 0.0

    def phi(ctx):
        return (ctx.hp(s) * ctx.hp(c) / float(ctx.batch_size)) ** 2

    return phi


def _gamma_prime(gamma_prime, clip, noise_multiplier):
    """``γ'`` as ``scale_by_adam``'s ``floor`` reads it: the validated absolute value (float or
    per-trial array), or for ``"auto"`` a function of the step context,
    ``ctx ↦ auto_gamma_prime(Φ(ctx))`` with the true ``Φ = (σC/b)²``."""
    if isinstance(gamma_prime, str):  # "auto" (the spec refuses any other string)
        true_phi = noise_variance(clip, noise_multiplier)

        def gamma(ctx):
            return auto_gamma_prime(true_phi(ctx), ctx.xp)

        return gamma
    return hyper("gamma_prime", gamma_prime, "(0, inf)")


def _above_floor_probe(phi, gamma, beta2):
    """Fraction of coordinates with ``v̂ − Φ > γ'`` (DP-AdamBC diagnostic, [ADAMBC] §4)."""

    def probe(state, params, ctx):
        xp = ctx.xp
        adam_state = state["preconditioner"]
        if adam_state.count == 0:
            return xp.zeros(params.shape[0], dtype=params.dtype)
        floor = gamma(ctx) if callable(gamma) else ctx.hp(gamma)
        above = (adam_v_hat(adam_state, ctx.hp(beta2)) - phi(ctx)) > floor
        return xp.mean(xp.astype(above, params.dtype), axis=1)

    return probe


_BC_DOC = {
    "gamma_prime": "The floor ``γ'`` of the debiased second moment.  ``\"auto\"``: ``γ' = 0.01·Φ`` "
                   "with ``Φ = (σC/b)²`` and ``b`` the nominal batch size of the run (per trial when "
                   "σ or C is), and ``γ' = 1e-8`` where ``Φ = 0`` (σ = 0 or C = ∞) "
                   "(:func:`auto_gamma_prime`; the factor 0.01 is [ADAMBC] §5 Table 2's "
                   "``γ' = 3e-10`` at ``Φ ≈ 2.441e-8``).  A number is an absolute ``γ'``.  With "
                   "``phi_prime`` set, ``\"auto\"`` still scales with the true Φ, so a Φ' sweep keeps "
                   "one γ'.",
    "phi_prime": "``None`` subtracts the true ``Φ``; a number ``Φ'`` subtracts ``Φ'`` instead — the "
                 "mis-specified bias of [ADAMBC] Fig. 5 (upper left) and Fig. 2 (right).  It changes "
                 "only the update, not the privatizer, so ε is that of the same σ either way.",
}


@register(doc=_BC_DOC)
def dp_adam_bc(lr: LR = 0.01, beta1: BETA = 0.9, beta2: BETA = 0.999,
               gamma_prime: GAMMA_PRIME = "auto", clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0, noise: NOISE = "gaussian",
               phi_prime: PHI_PRIME = None) -> Optimizer:
    """DP-AdamBC: DP-Adam with the DP noise variance removed from the second moment.

    Update rule (``ξ_t ~ N(0, I_d)``, ``b`` the nominal batch size, ``Φ = (σC/b)²``, or ``Φ'`` when
    ``phi_prime`` is set)::

        g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i, C) + σC ξ_t)
        m_t = β₁ m_{t-1} + (1-β₁) g̃_t
        v_t = β₂ v_{t-1} + (1-β₂) g̃_t²
        m̂_t = m_t / (1-β₁ᵗ),  v̂_t = v_t / (1-β₂ᵗ)
        w_t = w_{t-1} - η m̂_t / √max(v̂_t - Φ, γ')

    with no additive ε.  Source: [ADAMBC] Alg. 1, Eq. 4 (ALGORITHMS §2.2).  One Gaussian release of
    multiplier σ per step: accounted as DP-SGD.

    Scale: the default ``γ'`` is relative to the DP bias Φ (``"auto"``: ``γ' = 0.01·Φ``), as the
    paper's tuned values are (docs/defaults.md).

    Returns
    -------
    Optimizer
        With probe ``frac_above_floor``: fraction of coordinates with ``v̂ − Φ' > γ'``
        (``Φ' = Φ`` by default).

    Examples
    --------
    >>> import dpsim
    >>> opt = dpsim.optimizers.dp_adam_bc(gamma_prime="auto")
    >>> opt.private, sorted(opt.probes)
    (True, ['frac_above_floor'])
    """
    if phi_prime is None:
        phi = noise_variance(clip, noise_multiplier)
    else:
        pp = hyper("phi_prime", phi_prime, "[0, inf)")

        def phi(ctx):
            return ctx.hp(pp)
    gamma = _gamma_prime(gamma_prime, clip, noise_multiplier)
    b2 = hyper("beta2", beta2, "[0, 1)")
    tx = named_chain(_private(clip, noise_multiplier, noise),
                     ("preconditioner", scale_by_adam(beta1, b2, 0.0, phi=phi, floor=gamma)),
                     learning_rate(lr))
    return optimizer(tx,
                     probes={"frac_above_floor": _above_floor_probe(phi, gamma, b2)})
