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

Host NumPy float64 runs the two IME pieces in fewer passes over ``(R, d)`` (:func:`_ime`,
:func:`_adam_moments`): the reference's operations in its order, bit-for-bit its result, the same
state and the same declared releases; other backends run the reference pieces.

Pieces: ``"privatizer"``, ``"preconditioner"`` (``AdamState`` with raw ``v``, or
``PreconditionState``), ``"lr"``.  Ranges: ``lr`` ∈ [0, ∞); ``beta1``, ``beta2`` ∈ [0, 1); ``eps``
∈ [0, ∞); ``eps_scale`` ∈ (0, ∞); ``clip`` ∈ (0, ∞] (``inf`` only with σ = 0), except
``dp_adam_ime`` and ``dp_adam_ime_free``: ``clip`` ∈ (0, ∞) (independent moment estimation
releases ``ḡ²``, whose sensitivity needs a finite clip); ``noise_multiplier`` ∈ [0, ∞);
``base`` ∈ {adam, rmsprop, adagrad}.
"""

from __future__ import annotations

import numba
import numpy as np

from .._validate import choice, hyper, is_zero
from ..privacy.noise import NoiseSource, add_noise
from ..privacy.privatizers import (ImeState, gaussian_privatizer, ime_constants, ime_privatizer,
                                   noiseless_v_privatizer)
from ..transforms.base import GradientTransformation, named_chain
from ..transforms.combinators import scale_then_privatize
from ..transforms.preconditioners import (AdamState, MomentInputs, _adam_moments_element, adagrad,
                                          bias_correction, precondition, rmsprop, scale_by_adam)
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
#: Meanings of the keywords :data:`dpsim.optimizers._hyper.MEANINGS` does not cover.
_DOC = {
    "eps_scale": "Guard ε_s of the scale ``s = 1/(√max(v, 0) + ε_s)`` (separate from ε).",
    "base": "The rule fed the release: Adam, or RMSProp (with β = ``beta2``), or AdaGrad.",
}
_IME_DOC = {"clip": "Per-example clipping norm C (finite: the square's sensitivity needs it)."}

__all__ = ["dp_adam_corrected", "dp_adam_ime", "dp_adam_ime_free", "dp_adam_stp", "dp_adam_noiseless_v",
           "dp_adam_stp_noiseless_v"]


@register
def dp_adam_corrected(lr: LR = 0.01, beta1: BETA = 0.9, beta2: BETA = 0.999, eps: EPS = 1e-8,
                      clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0, noise: NOISE = "gaussian") -> Optimizer:
    """Corrected DP-Adam: DP-Adam with the noise variance Φ subtracted from ``v̂``, floor 0.

    Update rule (``ξ_t ~ N(0, I_d)``, ``Φ = (σC/b)²``)::

        g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i, C) + σC ξ_t)
        m_t = β₁ m_{t-1} + (1-β₁) g̃_t,   v_t = β₂ v_{t-1} + (1-β₂) g̃_t²
        m̂_t = m_t / (1-β₁ᵗ),  v̂_t = v_t / (1-β₂ᵗ)
        w_t = w_{t-1} - η m̂_t / (√max(v̂_t - Φ, 0) + ε)

    Source: [DESIGN] Alg. 7, after [ADAMBC] (ALGORITHMS §2.6; **reconstructed**).  One Gaussian
    release per step: accounted as DP-SGD.

    Scale: where ``v̂ < Φ`` the denominator is ε alone, so the absolute ``eps=1e-8`` diverges where
    ``eps ≈ √Φ = σC/b`` works (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> dpsim.optimizers.dp_adam_corrected(eps=1e-3).private
    True
    """
    phi = noise_variance(clip, noise_multiplier)
    return optimizer(named_chain(("privatizer", gaussian_privatizer(clip, noise_multiplier, noise=noise)),
                                 ("preconditioner", scale_by_adam(beta1, beta2, eps, phi=phi, floor=0.0)),
                                 learning_rate(lr)))


@register(doc=_IME_DOC)
def dp_adam_ime(lr: LR = 0.01, beta1: BETA = 0.9, beta2: BETA = 0.999, eps: EPS = 1e-8,
                clip: CLIP_FINITE = 1.0, noise_multiplier: SIGMA = 1.0, noise: NOISE = "gaussian") -> Optimizer:
    """DP-Adam with independent moment estimation (IME): ``m`` and ``v`` fed separate releases.

    Update rule (``ḡ_t = (1/b) Σ_{i∈B_t} clip(g_i, C)``; ``ξ_t, ξ'_t ~ N(0, I_d)``;
    ``σ₁ = σ₂ = √2 σ``; ``Δ₂ = (2b-1)C²/b²`` with fixed-size batches, else ``2C²/b`` with ``ḡ_t``
    projected onto the C-ball before squaring)::

        g̃_t = ḡ_t + (σ₁C/b) ξ_t                        (release 1)
        s̃_t = ḡ_t² + σ₂Δ₂ ξ'_t                          (release 2)
        m_t = β₁ m_{t-1} + (1-β₁) g̃_t,   v_t = β₂ v_{t-1} + (1-β₂) s̃_t
        m̂_t = m_t / (1-β₁ᵗ),  v̂_t = v_t / (1-β₂ᵗ)
        w_t = w_{t-1} - η m̂_t / (√max(v̂_t, 0) + ε)

    Source: Kalinin et al. 2025; [DESIGN] §3.2, Alg. 6 (ALGORITHMS §2.6; **reconstructed**).  Two
    releases per step at ``√2σ`` each: the pair costs one DP-SGD step at σ.

    Scale: ``eps`` (1e-8) is absolute, but ``max(v̂, 0)`` is often ≈ 0 under the noise of the
    ``ḡ²`` release: set it relative to that noise (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> len(dpsim.optimizers.dp_adam_ime().events)
    2
    """
    tx = named_chain(("privatizer", _ime(clip, noise_multiplier, None, noise)),
                     ("preconditioner", _adam_moments(beta1, beta2, eps)), learning_rate(lr))
    return optimizer(tx)


@register(doc=_IME_DOC)
def dp_adam_ime_free(lr: LR = 0.01, beta1: BETA = 0.9, beta2: BETA = 0.999, eps: EPS = 1e-8,
                     clip: CLIP_FINITE = 1.0, noise_multiplier: SIGMA = 1.0, noise: NOISE = "gaussian") -> Optimizer:
    """The "IME for free" comparator: :func:`dp_adam_ime` with both moments released at σ.

    Update rule: that of :func:`dp_adam_ime` with ``σ₁ = σ₂ = σ``::

        g̃_t = ḡ_t + (σC/b) ξ_t,   s̃_t = ḡ_t² + σΔ₂ ξ'_t
        m_t = β₁ m_{t-1} + (1-β₁) g̃_t,   v_t = β₂ v_{t-1} + (1-β₂) s̃_t
        w_t = w_{t-1} - η m̂_t / (√max(v̂_t, 0) + ε)

    Source: [DESIGN] §3.2's comparator (ALGORITHMS §2.6).  Two releases per step at σ, accounted as
    such: its ε is larger than DP-Adam's and must not be reported as DP-Adam's.

    Scale: as ``dp_adam_ime``, ``eps`` must be relative to the noise of the ``ḡ²`` release
    (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> dpsim.optimizers.dp_adam_ime_free().note.startswith("IME 'for free'")
    True
    """
    sigma = hyper("noise_multiplier", noise_multiplier, "[0, inf)")
    tx = named_chain(("privatizer", _ime(clip, sigma, (sigma, sigma), noise)),
                     ("preconditioner", _adam_moments(beta1, beta2, eps)), learning_rate(lr))
    return optimizer(
        tx,
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


@register(doc=_DOC)
def dp_adam_stp(lr: LR = 0.01, beta1: BETA = 0.9, beta2: BETA = 0.999, eps: EPS = 1e-8,
                eps_scale: EPS_SCALE = 1e-3, clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0,
                base: BASE = "adam", noise: NOISE = "gaussian") -> Optimizer:
    """Scale-then-privatize: clip and noise the preconditioned gradients, then unscale.

    Update rule (``v_{t-1}`` the ``base`` rule's raw second moment, ``ξ_t ~ N(0, I_d)``)::

        s_t = 1 / (√max(v_{t-1}, 0) + ε_s)
        g̃_t = (1/b) (Σ_{i∈B_t} clip(s_t ⊙ g_i, C) + σC ξ_t) / s_t
        then the ``base`` rule on g̃_t (Adam: as dp_adam; ``"rmsprop"``: RMSProp with β = beta2;
        ``"adagrad"``: AdaGrad)

    Source: [DESIGN] Alg. 8 (ALGORITHMS §2.6; **reconstructed**).  Isotropic noise on clipped
    vectors: accounted as DP-SGD.

    Scale: ``eps_scale`` (1e-3) is absolute; at t = 1 ``s = 1/ε_s`` multiplies gradients by 1000
    before clipping at C (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> dpsim.optimizers.dp_adam_stp(base="rmsprop")
    dp_adam_stp(lr=0.01, ..., base='rmsprop', noise='gaussian')
    """
    return optimizer(_stp(gaussian_privatizer(clip, noise_multiplier, noise=noise), base, lr, beta1,
                          beta2, eps, eps_scale))


_ORACLE_NOTE = ("non-private oracle: the second moment is fed the noiseless clipped gradient, "
                "which is released without noise, so epsilon is infinite")


@register
def dp_adam_noiseless_v(lr: LR = 0.01, beta1: BETA = 0.9, beta2: BETA = 0.999, eps: EPS = 1e-8,
                        clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0, noise: NOISE = "gaussian") -> Optimizer:
    """Oracle: DP-Adam whose second moment is fed the noiseless clipped mean.  Not private.

    Update rule (``ḡ_t = (1/b) Σ_{i∈B_t} clip(g_i, C)``)::

        g̃_t = ḡ_t + (σC/b) ξ_t
        m_t = β₁ m_{t-1} + (1-β₁) g̃_t,   v_t = β₂ v_{t-1} + (1-β₂) ḡ_t²
        w_t = w_{t-1} - η m̂_t / (√v̂_t + ε)

    Source: [DESIGN] Alg. 9 (ALGORITHMS §2.6).  Declares
    :class:`~dpsim.privacy.events.NonPrivate`: its ε is infinite.

    Scale: ``eps`` (1e-8) is relative to the clean gradient scale while ``m`` is noisy
    (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> dpsim.optimizers.dp_adam_noiseless_v().private
    False
    """
    tx = named_chain(("privatizer", noiseless_v_privatizer(clip, noise_multiplier, noise=noise)),
                     ("preconditioner", scale_by_adam(beta1, beta2, eps)), learning_rate(lr))
    return optimizer(tx, note=_ORACLE_NOTE)


@register(doc=_DOC)
def dp_adam_stp_noiseless_v(lr: LR = 0.01, beta1: BETA = 0.9, beta2: BETA = 0.999, eps: EPS = 1e-8,
                            eps_scale: EPS_SCALE = 1e-3, clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0,
                            base: BASE = "adam", noise: NOISE = "gaussian") -> Optimizer:
    """Oracle: :func:`dp_adam_stp` with the second moment fed the noiseless mean.  Not private.

    Update rule (``s_t`` as in :func:`dp_adam_stp`)::

        ḡ_t = (1/b) Σ_{i∈B_t} clip(s_t ⊙ g_i, C) / s_t
        g̃_t = ḡ_t + (σC/b) ξ_t / s_t
        the ``base`` rule with m fed g̃_t and v fed ḡ_t²

    Source: [DESIGN] Alg. 9 with scale-then-privatize (ALGORITHMS §2.6).  Declares
    :class:`~dpsim.privacy.events.NonPrivate`: its ε is infinite.

    Scale: ``eps_scale`` as in ``dp_adam_stp`` (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> dpsim.optimizers.dp_adam_stp_noiseless_v(base="adagrad").private
    False
    """
    tx = _stp(noiseless_v_privatizer(clip, noise_multiplier, noise=noise), base, lr, beta1, beta2, eps,
              eps_scale)
    return optimizer(tx, note=_ORACLE_NOTE)


# ------------------------------------------------------------------------------------------------
# Independent moment estimation on host NumPy: the reference pieces with fewer passes over (R, d)


def _ime(clip, noise_multiplier, split, noise) -> GradientTransformation:
    """:func:`~dpsim.privacy.privatizers.ime_privatizer` (the reference: same state, same declared
    releases, same element — its :class:`~dpsim.transforms.elements.Moments` —, same noise draws
    in the same order) computed in fewer passes on host NumPy.

    The reference forms ``ḡ = S/b``, ``Π_C(ḡ)``, its square, the scaled noise and their sum as
    separate ``(R, d)`` arrays.  Here the first release is :func:`~dpsim.privacy.noise.add_noise`
    as in the reference; the ball factor ``min(1, C/‖ḡ‖)`` is computed with the reference's NumPy
    expressions (so its row sums are NumPy's), and the second release
    ``sq̃ = (ḡ · f)² + z₂ · (σ₂ Δ₂)`` is written into the fresh noise array ``z₂`` by
    :func:`_ime_square_kernel`, which performs the reference's operations in its order, each
    rounded once (Numba without fast-math: no fused multiply-add) — bit-for-bit the reference's
    result (``tests/optimizers/test_variants.py``).  Other backends, and float32, run the reference."""
    ref = ime_privatizer(clip, noise_multiplier, split=split, noise=noise)
    clip, _, s2, std1 = ime_constants(clip, noise_multiplier, split)
    src1, src2 = NoiseSource(noise), NoiseSource(noise)

    def update(batch, state, params, ctx):
        if not (isinstance(params, np.ndarray) and params.dtype == np.float64 and params.ndim == 2):
            return ref.update(batch, state, params, ctx)
        b = float(batch.batch_size)
        c = ctx.hp(clip)
        total = batch.clipped_sum(clip if isinstance(clip, float) else ctx.hp_vec(clip))
        g, n1 = add_noise(total, std1, b, ctx, src1, state.noise1)
        R = total.shape[0]
        if ctx.sampling == "fixed":  # the reference's branches (ime_privatizer's docstring)
            sens2 = c ** 2 * (2.0 * b - 1.0) / (b * b)
            factor = np.ones((R, 1))  # u = ḡ: multiplying by 1.0 is exact
        else:
            sens2 = c ** 2 * (2.0 / b)
            g_clean = total / b
            sq = g_clean * g_clean
            del g_clean
            norm = np.sqrt(np.sum(sq, axis=1, keepdims=True))
            del sq
            factor = np.where(norm > c, c / np.where(norm > 0, norm, 1.0), 1.0)
        n2 = state.noise2
        if is_zero(s2):
            z = np.empty_like(total)
            k, has_noise = np.zeros((1, 1)), False
        else:
            z, n2 = src2.draw(n2, ctx, total.shape)
            z = np.asarray(z)
            k, has_noise = _column(ctx.hp(s2) * sens2), True
            if not (z.dtype == np.float64 and z.flags.c_contiguous and z.flags.writeable
                    and z.shape == total.shape):
                z = np.array(z, dtype=np.float64, order="C")
        _ime_square_kernel(np.ascontiguousarray(total), b, _column(factor), z, k, has_noise)
        return MomentInputs(g, z), ImeState(n1, n2)

    return GradientTransformation(ref.init, update, ref.privacy, element=ref.element)


def _column(x):
    """A scalar or ``(R, 1)`` value as a float64 ``(1, 1)`` or ``(R, 1)`` array."""
    return np.ascontiguousarray(np.asarray(x, dtype=np.float64).reshape(-1, 1))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _ime_square_kernel(total, b, factor, z, k, has_noise):
    """``z ← ((S/b)·f)² + z·k`` element-wise (``z ← ((S/b)·f)²`` without noise); ``f`` (R, 1), ``k``
    (1, 1) or (R, 1).  Each operation rounded once, in the reference's order."""
    R, d = total.shape
    for r in range(R):
        fr = factor[r, 0]
        kr = k[r if k.shape[0] > 1 else 0, 0]
        for j in range(d):
            u = (total[r, j] / b) * fr
            sq = u * u
            if has_noise:
                z[r, j] = sq + z[r, j] * kr
            else:
                z[r, j] = sq


def _adam_moments(beta1, beta2, eps) -> GradientTransformation:
    """:func:`~dpsim.transforms.preconditioners.scale_by_adam` (the reference: same state, same
    element) with its
    :class:`~dpsim.transforms.preconditioners.MomentInputs` branch in one pass on host NumPy
    float64: ``m ← m·β1 + g·(1−β1)``, ``v ← v·β2 + sq·(1−β2)``, emit
    ``(m/(1−β1ᵗ)) / (√max(v/(1−β2ᵗ), 0) + ε)`` — the reference's operations in its order, each
    rounded once (:func:`_adam_moments_kernel`).  With ``StepContext.donate_state`` the moments are
    overwritten in place (they are arrays this piece created); otherwise new arrays hold them.
    A plain gradient, or any other backend, runs the reference."""
    ref = scale_by_adam(beta1, beta2, eps)
    beta1 = hyper("beta1", beta1, "[0, 1)")
    beta2 = hyper("beta2", beta2, "[0, 1)")
    eps = hyper("eps", eps, "[0, inf)")

    def update(u, state, params, ctx):
        if not (isinstance(u, MomentInputs) and _host64(u.g, u.sq, state.m, state.v)):
            return ref.update(u, state, params, ctx)
        b1, b2 = ctx.hp(beta1), ctx.hp(beta2)
        t = state.count + 1
        e = ctx.hp(eps)
        add_eps = not (isinstance(e, float) and e == 0.0)
        donate = getattr(ctx, "donate_state", False)
        m_out = state.m if donate else np.empty_like(state.m)
        v_out = state.v if donate else np.empty_like(state.v)
        out = np.empty_like(u.g)
        _adam_moments_kernel(u.g, u.sq, state.m, state.v, m_out, v_out, out, _column(b1),
                             _column(1.0 - b1), _column(b2), _column(1.0 - b2),
                             _column(bias_correction(b1, t)), _column(bias_correction(b2, t)),
                             _column(e if add_eps else 0.0), add_eps)
        return out, AdamState(m=m_out, v=v_out, count=t)

    return GradientTransformation(ref.init, update, ref.privacy, element=ref.element)


def _host64(*arrays) -> bool:
    a0 = arrays[0]
    return all(isinstance(a, np.ndarray) and a.dtype == np.float64 and a.ndim == 2
               and a.shape == a0.shape and a.flags.c_contiguous for a in arrays)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _adam_moments_kernel(g, sq, m, v, m_out, v_out, out, b1, ob1, b2, ob2, c1, c2, e, add_eps):
    """Element-wise Adam on moment inputs (``_adam_moments``); hyperparameters (1, 1) or (R, 1)."""
    R, d = g.shape
    for r in range(R):
        b1r = b1[r if b1.shape[0] > 1 else 0, 0]
        ob1r = ob1[r if ob1.shape[0] > 1 else 0, 0]
        b2r = b2[r if b2.shape[0] > 1 else 0, 0]
        ob2r = ob2[r if ob2.shape[0] > 1 else 0, 0]
        c1r = c1[r if c1.shape[0] > 1 else 0, 0]
        c2r = c2[r if c2.shape[0] > 1 else 0, 0]
        er = e[r if e.shape[0] > 1 else 0, 0]
        for j in range(d):
            mj, vj, u = _adam_moments_element(g[r, j], sq[r, j], m[r, j], v[r, j], b1r, ob1r, b2r,
                                              ob2r, c1r, c2r, er, add_eps)
            m_out[r, j] = mj
            v_out[r, j] = vj
            out[r, j] = u
