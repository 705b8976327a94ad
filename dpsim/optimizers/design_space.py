"""The DP-Adam design space of [DESIGN] (reconstructed): bias-corrected, independent-moment,
scale-then-privatize variants and two non-private oracles.

* ``dp_adam_corrected`` ([DESIGN] Alg. 7): ``w ← w − η m̂ / (√max(v̂ − Φ, 0) + ε)``, ``Φ = (σC/b)²``.
* ``dp_adam_ime`` (independent moment estimation, Kalinin et al. 2025): ``m`` fed ``g̃`` released
  at ``√2σ``, ``v`` fed a separate release of ``ḡ²`` at ``√2σ`` (the pair costs one DP-SGD step);
  ``dp_adam_ime_free`` releases both at σ (two releases per step, accounted as such).
* ``dp_adam_stp`` ([DESIGN] Alg. 8): scale-then-privatize — the same pieces as ``dp_adam`` with the
  privatizer behind the scaling ``s = 1/(√v + ε_s)`` read from the preconditioner's raw ``v``
  (:func:`~dpsim.transforms.scale_then_privatize`); ``base="rmsprop"|"adagrad"`` swaps Adam for
  that rule (for RMSProp, ``beta2`` is RMSProp's β).
* ``dp_adam_noiseless_v``, ``dp_adam_stp_noiseless_v`` ([DESIGN] Alg. 9): oracles whose second
  moment is fed the noiseless clipped gradient; they declare
  :class:`~dpsim.privacy.events.NonPrivate`, so their ε is infinite.

Pieces: ``"privatizer"``, ``"preconditioner"`` (``AdamState`` with raw ``v``, or
``PreconditionState``), ``"lr"``.  Ranges: ``lr`` ∈ [0, ∞); ``beta1``, ``beta2`` ∈ [0, 1); ``eps``
∈ [0, ∞); ``eps_scale`` ∈ (0, ∞); ``clip`` ∈ (0, ∞] (``inf`` only with σ = 0), except
``dp_adam_ime`` and ``dp_adam_ime_free``: ``clip`` ∈ (0, ∞) (independent moment estimation
releases ``ḡ²``, whose sensitivity needs a finite clip); ``noise_multiplier`` ∈ [0, ∞);
``base`` ∈ {adam, rmsprop, adagrad}.
"""

from __future__ import annotations

from .._validate import choice, hyper
from ..privacy.privatizers import gaussian_privatizer, ime_privatizer, noiseless_v_privatizer
from ..transforms.base import named_chain
from ..transforms.combinators import scale_then_privatize
from ..transforms.preconditioners import adagrad, precondition, rmsprop, scale_by_adam
from ._hyper import BETA, CLIP, EPS, LR, NOISE, SIGMA, Choice, Real
from ._registry import Optimizer, optimizer, register
from .adaptive import noise_variance
from .baselines import learning_rate

#: The scale-then-privatize guard ε_s of s = 1/(√v + ε_s).
EPS_SCALE = Real("(0, inf)", typical=(1e-4, 1e-1), log=True)
#: The rule of dp_adam_stp.
BASE = Choice(("adam", "rmsprop", "adagrad"))
#: Independent moment estimation needs a finite clip.
CLIP_FINITE = Real("(0, inf)", typical=(0.05, 10.0), log=True)

__all__ = ["dp_adam_corrected", "dp_adam_ime", "dp_adam_ime_free", "dp_adam_stp", "dp_adam_noiseless_v",
           "dp_adam_stp_noiseless_v"]


@register
def dp_adam_corrected(lr: LR = 0.01, beta1: BETA = 0.9, beta2: BETA = 0.999, eps: EPS = 1e-8,
                      clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0, noise: NOISE = "gaussian") -> Optimizer:
    """Corrected DP-Adam ([DESIGN] Alg. 7): ``m̂ / (√max(v̂ − Φ, 0) + ε)`` with ``Φ = (σC/b)²``."""
    phi = noise_variance(clip, noise_multiplier)
    return optimizer(named_chain(
        ("privatizer", gaussian_privatizer(clip, noise_multiplier, noise=noise)),
        ("preconditioner", scale_by_adam(beta1, beta2, eps, phi=phi, floor=0.0)), learning_rate(lr)))


@register
def dp_adam_ime(lr: LR = 0.01, beta1: BETA = 0.9, beta2: BETA = 0.999, eps: EPS = 1e-8,
                clip: CLIP_FINITE = 1.0, noise_multiplier: SIGMA = 1.0, noise: NOISE = "gaussian") -> Optimizer:
    """DP-Adam with independent moment estimation: two releases per step at ``√2σ`` each."""
    return optimizer(named_chain(("privatizer", ime_privatizer(clip, noise_multiplier, noise=noise)),
                                 ("preconditioner", scale_by_adam(beta1, beta2, eps)), learning_rate(lr)))


@register
def dp_adam_ime_free(lr: LR = 0.01, beta1: BETA = 0.9, beta2: BETA = 0.999, eps: EPS = 1e-8,
                     clip: CLIP_FINITE = 1.0, noise_multiplier: SIGMA = 1.0, noise: NOISE = "gaussian") -> Optimizer:
    """The "IME for free" comparator: both moments released at σ (two releases per step; its ε is
    larger than DP-Adam's)."""
    sigma = hyper("noise_multiplier", noise_multiplier, "[0, inf)")
    return optimizer(
        named_chain(("privatizer", ime_privatizer(clip, sigma, split=(sigma, sigma), noise=noise)),
                    ("preconditioner", scale_by_adam(beta1, beta2, eps)), learning_rate(lr)),
        note="IME 'for free' comparator: both moments released at σ; its ε (two releases per step) "
             "is larger than DP-Adam's and must not be reported as DP-Adam's")


def _stp(privatizer, base, lr, beta1, beta2, eps, eps_scale):
    base = choice("base", base, ("adam", "rmsprop", "adagrad"))
    if base == "adam":
        pre = scale_by_adam(beta1, beta2, eps)
    elif base == "rmsprop":
        pre = precondition(rmsprop(hyper("beta2", beta2, "[0, 1)"), eps))
    else:
        pre = precondition(adagrad(eps))
    eps_scale = hyper("eps_scale", eps_scale, "(0, inf)")
    return named_chain(scale_then_privatize(privatizer, pre, eps_scale=eps_scale), learning_rate(lr))


@register
def dp_adam_stp(lr: LR = 0.01, beta1: BETA = 0.9, beta2: BETA = 0.999, eps: EPS = 1e-8,
                eps_scale: EPS_SCALE = 1e-3, clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0,
                base: BASE = "adam", noise: NOISE = "gaussian") -> Optimizer:
    """Scale-then-privatize over ``base`` ([DESIGN] Alg. 8): release
    ``g̃ = (1/b)(Σ clip(s ⊙ g_i, C) + N(0, σ²C²I)) / s`` with ``s = 1/(√v + ε_s)`` from the
    preconditioner's raw ``v`` before this step, then the ``base`` rule on ``g̃``."""
    return optimizer(_stp(gaussian_privatizer(clip, noise_multiplier, noise=noise), base, lr, beta1,
                          beta2, eps, eps_scale))


_ORACLE_NOTE = ("non-private oracle: the second moment is fed the noiseless clipped gradient, "
                "which is released without noise, so epsilon is infinite")


@register
def dp_adam_noiseless_v(lr: LR = 0.01, beta1: BETA = 0.9, beta2: BETA = 0.999, eps: EPS = 1e-8,
                        clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0, noise: NOISE = "gaussian") -> Optimizer:
    """Oracle ([DESIGN] Alg. 9): DP-Adam whose ``v`` is fed the noiseless clipped ``ḡ²``.  Not
    private (declares NonPrivate)."""
    return optimizer(named_chain(("privatizer", noiseless_v_privatizer(clip, noise_multiplier, noise=noise)),
                                 ("preconditioner", scale_by_adam(beta1, beta2, eps)), learning_rate(lr)),
                     note=_ORACLE_NOTE)


@register
def dp_adam_stp_noiseless_v(lr: LR = 0.01, beta1: BETA = 0.9, beta2: BETA = 0.999, eps: EPS = 1e-8,
                            eps_scale: EPS_SCALE = 1e-3, clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0,
                            base: BASE = "adam", noise: NOISE = "gaussian") -> Optimizer:
    """Oracle ([DESIGN] Alg. 9 with STP): ``dp_adam_stp`` whose ``v`` is fed the noiseless
    ``(Σ clip(s ⊙ g_i, C)/(b s))²``.  Not private (declares NonPrivate)."""
    return optimizer(_stp(noiseless_v_privatizer(clip, noise_multiplier, noise=noise), base, lr, beta1,
                          beta2, eps, eps_scale), note=_ORACLE_NOTE)
