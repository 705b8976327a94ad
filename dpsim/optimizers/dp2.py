"""DP² — private adaptive optimization with delayed preconditioners (seed 000, Alg. 1, App. D).

Phases alternate: ``s1`` private-SGD steps, then ``s2`` private-adaptive steps.  With
``p = (t − 1) mod (s1 + s2)`` for the 1-based step ``t``:

* SGD phase (``p < s1``): ``g̃ = (1/b)(Σ clip(g_i, C1) + N(0, σ²C1²I))``; ``G ← G + g̃``;
  ``w ← w − η1 g̃``.
* At the switch (``p = s1``, before this step's update): the delayed preconditioner is refreshed
  with the average of the accumulated releases, ``v ← β v + (1−β)(G/s1)²`` (RMSProp),
  ``v ← v + (G/s1)²`` (AdaGrad) or the Yogi rule; optionally unbiased by subtracting
  ``σ²C1²/(s1 b²)`` (seed 000 §3.2); ``G ← 0``.
* Adaptive phase (``p ≥ s1``): precondition **before** privatizing,
  ``g̃ = (1/b)(Σ clip(g_i / D, C2) + N(0, σ²C2²I))`` with ``D = √v + ε_a``; ``w ← w − η2 g̃``.
  These releases are not accumulated into ``G`` (official code).

Privacy: one Gaussian release of noise multiplier σ per step, as DP-SGD (seed 000, Theorem 1).

Ablations (seed 000 App. D):

* ``extra_query`` (Alg. 2, "variant 1"), with delay ``s = s1``: every step releases the raw
  clipped gradient with ``C1`` and accumulates it into ``G``.  On steps with ``(t−1) mod s = 0``
  the preconditioner is refreshed with ``(G/s)²``, ``G`` reset, and the step uses that release
  (``η1``); on all other steps the preconditioned gradient is **also** released with ``C2`` and the
  step uses it (``η2``) — two releases on those steps, declared to the accountant.
* ``noise_first`` ("variant 2"): the adaptive phase privatizes the raw gradient with ``C2`` and
  then divides by ``D``.

Non-private DP² (``delayed_rmsprop``, §3.1): the same schedule without clipping or noise.
The phase schedule is shared by all trials, so ``s1`` and ``s2`` are scalars (other
hyperparameters may be per trial).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .adaptive import second_moment_update
from .privacy import NoiseSource, _add_noise, _any_inf, _check_clip_sigma, _clip_arg, _times
from .transforms import GradientTransformation, as_hyper

__all__ = ["dp2", "DP2State", "adaptive_steps", "extra_query_steps"]


class DP2State(NamedTuple):
    v: Any  # (R, d) delayed second moment
    G: Any  # (R, d) sum of the SGD-phase releases since the last switch
    noise: Any = None  # noise-stream state of the per-step release
    noise2: Any = None  # noise-stream state of the extra release (ablation 1)


def _phase_len(name, s):
    if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1:
        raise ValueError(f"{name} must be a positive integer (shared by all trials), got {name}={s!r}")
    return int(s)


def adaptive_steps(s1: int, s2: int, steps: int) -> np.ndarray:
    """Boolean mask (T,) of the adaptive-phase steps (index ``t−1`` for step ``t``)."""
    t = np.arange(steps)
    return (t % (s1 + s2)) >= s1


def extra_query_steps(s: int, steps: int) -> np.ndarray:
    """Steps of ablation variant 1 that make a second release: ``(t−1) mod s ≠ 0``."""
    return (np.arange(steps) % s) != 0


def dp2(*, s1, s2=None, lr, lr2=None, clip=1.0, clip2=None, noise_multiplier=1.0, beta=0.9,
        eps=1e-8, rule="rmsprop", unbias=False, private=True, variant="dp2",
        noise="gaussian") -> GradientTransformation:
    """The DP² transform (emits the full update ``−η g̃``).

    ``variant``: ``"dp2"`` (Alg. 1), ``"extra_query"`` (ablation 1) or ``"noise_first"``
    (ablation 2).  ``private=False`` gives the non-private delayed preconditioner (no clipping, no
    noise).  ``lr2``/``clip2`` default to ``lr``/``clip``.
    """
    if variant not in ("dp2", "extra_query", "noise_first"):
        raise ValueError(f"unknown DP² variant {variant!r}")
    s1 = _phase_len("s1", s1)
    s2 = s1 if s2 is None else _phase_len("s2", s2)
    lr1 = as_hyper("lr", lr, nonneg=True)
    lr2 = lr1 if lr2 is None else as_hyper("lr2", lr2, nonneg=True)
    beta = as_hyper("beta", beta, nonneg=True)
    eps = as_hyper("eps", eps, nonneg=True)
    if private:
        c1, sigma = _check_clip_sigma(clip, noise_multiplier)
        c2, _ = _check_clip_sigma(clip if clip2 is None else clip2, noise_multiplier)
        std1 = None if _any_inf(c1) else _times(sigma, c1)
        std2 = None if _any_inf(c2) else _times(sigma, c2)
        bias = None
        if unbias:
            if _any_inf(c1):
                raise ValueError("unbias=True needs a finite clip")
            bias = _times(_times(sigma, sigma), _times(c1, c1))  # σ²C1², divided by s1 b² below
    cycle = s1 + s2
    src, src2 = NoiseSource(noise), NoiseSource(noise)

    def init(params):
        z = params * 0.0
        return DP2State(v=z, G=z * 1.0)

    def release(batch, ctx, clip_, std, nstate, scale=None, source=src):
        """One (possibly preconditioned) release and the new noise-stream state."""
        b = float(batch.batch_size)
        if not private:
            total = batch.clipped_sum(None, scale=scale)
            return total / b, nstate
        total = batch.clipped_sum(_clip_arg(clip_, ctx), scale=scale)
        return _add_noise(total, std, b, ctx, source, nstate)

    def refresh(v, G, batch, ctx):
        avg_sq = (G / float(s1)) ** 2
        if private and bias is not None:
            avg_sq = avg_sq - ctx.hp(bias) / (float(s1) * float(batch.batch_size) ** 2)
        return second_moment_update(rule, v, avg_sq, ctx.hp(beta), ctx.xp), G * 0.0

    def precond(v, ctx):
        return ctx.xp.sqrt(ctx.xp.maximum(v, 0.0)) + ctx.hp(eps)

    def update(batch, state, params, ctx):
        v, G, n1, n2 = state.v, state.G, state.noise, state.noise2
        if variant == "extra_query":
            g1, n1 = release(batch, ctx, c1, std1, n1)
            G = G + g1
            if (ctx.t - 1) % s1 == 0:
                v, G = refresh(v, G, batch, ctx)
                return g1 * (-ctx.hp(lr1)), DP2State(v, G, n1, n2)
            g, n2 = release(batch, ctx, c2, std2, n2, scale=1.0 / precond(v, ctx), source=src2)
            return g * (-ctx.hp(lr2)), DP2State(v, G, n1, n2)
        p = (ctx.t - 1) % cycle
        if p < s1:  # SGD phase
            g, n1 = release(batch, ctx, c1 if private else None, std1 if private else None, n1)
            return g * (-ctx.hp(lr1)), DP2State(v, G + g, n1, n2)
        if p == s1:  # refresh the delayed preconditioner
            v, G = refresh(v, G, batch, ctx)
        D = precond(v, ctx)
        if variant == "noise_first" or not private:
            g, n1 = release(batch, ctx, c2 if private else None, std2 if private else None, n1)
            g = g / D
        else:
            g, n1 = release(batch, ctx, c2, std2, n1, scale=1.0 / D)
        return g * (-ctx.hp(lr2)), DP2State(v, G, n1, n2)

    releases = ()
    if private:
        releases = (src.release(sigma),)
        if variant == "extra_query":
            releases += (src2.release(sigma, when=lambda T: extra_query_steps(s1, T)),)
    return GradientTransformation(init, update, releases)
