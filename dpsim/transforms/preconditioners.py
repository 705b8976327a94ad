"""Adaptive preconditioning transforms: AdaGrad, RMSProp, Yogi, Adam and its DP corrections.

All rules are coordinate-wise (ALGORITHMS §1):

* AdaGrad:  ``v ← v + g²``,                              ``u = g / (√v + ε_a)``
* RMSProp:  ``v ← β v + (1−β) g²``,                      ``u = g / (√v + ε_a)``
* Yogi:     ``v ← v − (1−β) sign(v − g²) g²``  (Zaheer et al. 2018; seed 000 App. D prints a
  garbled form, the standard rule is used), ``u = g / (√v + ε_a)``
* Adam:     ``m ← β1 m + (1−β1) g``, ``v ← β2 v + (1−β2) g²``, ``m̂ = m/(1−β1^t)``,
  ``v̂ = v/(1−β2^t)``, ``u = m̂ / (√v̂ + ε_a)``

Bias corrections of the second moment for DP noise (``Φ = (σC/b)²``, seed 004 Eq. 2):

* DP-AdamBC (seed 004 Alg. 1, Eq. 4): ``u = m̂ / √max(v̂ − Φ, γ')`` — no additive ε_a.
* Corrected DP-Adam (seed 002 Alg. 7, reconstructed): ``v_t − (1−β2^t)Φ`` before Adam's own
  correction, positive part, then ``√· + ε_a``; equivalently ``u = m̂ / (√max(v̂ − Φ, 0) + ε_a)``.

Both are one transform, :func:`scale_by_adam` with ``phi`` and ``floor``.

A transform may receive :class:`MomentInputs` instead of a plain array: then the first moment is
fed with ``.g`` and the second moment with ``.sq`` (a separately released or noiseless square
statistic — independent moment estimation and the noiseless-preconditioner oracles of seed 002).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .transforms import GradientTransformation

__all__ = ["MomentInputs", "second_moment_update", "scale_by_precondition", "scale_by_adam",
           "PreconditionState", "AdamState", "RULES"]

RULES = ("adagrad", "rmsprop", "yogi")


class MomentInputs(NamedTuple):
    g: Any  # (R, d) input of the first moment / the step direction
    sq: Any  # (R, d) input of the second moment (replaces g²)


def _split(u):
    if isinstance(u, MomentInputs):
        return u.g, u.sq
    return u, u * u


def second_moment_update(rule: str, v, sq, beta, xp):
    """One step of the second-moment recursion ``rule`` with input ``sq`` (≈ g²)."""
    if rule == "adagrad":
        return v + sq
    if rule == "rmsprop":
        return v * beta + sq * (1.0 - beta)
    if rule == "yogi":
        return v - (1.0 - beta) * xp.sign(v - sq) * sq
    raise ValueError(f"unknown second-moment rule {rule!r}; expected one of {', '.join(RULES)}")


class PreconditionState(NamedTuple):
    v: Any  # (R, d) second-moment accumulator


def scale_by_precondition(rule: str, beta=0.9, eps=1e-8) -> GradientTransformation:
    """AdaGrad / RMSProp / Yogi preconditioning: update ``v`` with ``g²`` (or ``.sq``), emit
    ``g / (√max(v, 0) + ε_a)`` (the positive part only matters for noisy ``.sq`` inputs)."""
    if rule not in RULES:
        raise ValueError(f"unknown second-moment rule {rule!r}; expected one of {', '.join(RULES)}")

    def init(params):
        return PreconditionState(v=params * 0.0)

    def update(u, state, params, ctx):
        xp = ctx.xp
        g, sq = _split(u)
        v = second_moment_update(rule, state.v, sq, ctx.hp(beta), xp)
        vpos = v if not isinstance(u, MomentInputs) else xp.maximum(v, 0.0)
        return g / (xp.sqrt(vpos) + ctx.hp(eps)), PreconditionState(v=v)

    return GradientTransformation(init, update)


class AdamState(NamedTuple):
    m: Any  # (R, d) first moment
    v: Any  # (R, d) second moment (raw, before bias correction)
    count: int  # number of updates so far (t)


def scale_by_adam(beta1=0.9, beta2=0.999, eps=1e-8, *, phi=None, floor=None) -> GradientTransformation:
    """Adam with optional subtraction of the DP noise variance from the bias-corrected ``v̂``.

    ``phi=None``: plain Adam ``m̂/(√v̂ + ε)``.  ``phi`` given (scalar, per trial, or a function
    of the step context, e.g. ``Φ = (σC/b)²`` needs the batch size):
    ``m̂ / (√max(v̂ − Φ, floor) + ε)``; DP-AdamBC is ``floor=γ', eps=0``, the corrected DP-Adam of
    seed 002 is ``floor=0``.  With ``MomentInputs`` the positive part ``max(v̂, 0)`` is taken
    before the square root (a noisy second-moment statistic can drive ``v`` negative).
    """

    def init(params):
        z = params * 0.0
        return AdamState(m=z, v=z * 1.0, count=0)

    def update(u, state, params, ctx):
        xp = ctx.xp
        g, sq = _split(u)
        b1, b2 = ctx.hp(beta1), ctx.hp(beta2)
        t = state.count + 1
        m = state.m * b1 + g * (1.0 - b1)
        v = state.v * b2 + sq * (1.0 - b2)
        m_hat = m / (1.0 - b1 ** t)
        v_hat = v / (1.0 - b2 ** t)
        if phi is not None:
            ph = phi(ctx) if callable(phi) else ctx.hp(phi)
            v_hat = xp.maximum(v_hat - ph, ctx.hp(floor if floor is not None else 0.0))
        elif isinstance(u, MomentInputs):
            v_hat = xp.maximum(v_hat, 0.0)
        e = ctx.hp(eps)
        denom = xp.sqrt(v_hat) if (isinstance(e, float) and e == 0.0) else xp.sqrt(v_hat) + e
        return m_hat / denom, AdamState(m=m, v=v, count=t)

    return GradientTransformation(init, update)
