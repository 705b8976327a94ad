"""Adaptive preconditioning: each moment recursion once, and the pieces built from it.

Recursions (coordinate-wise; ALGORITHMS §1), written once in this module:

* EMA (RMSProp's second moment, both of Adam's moments): ``x ← β x + (1−β) y``  (:func:`ema`)
* AdaGrad:  ``v ← v + g²``
* Yogi:     ``v ← v − (1−β) sign(v − g²) g²``  (Zaheer et al. 2018; [DP2] App. D prints a garbled
  form, the standard rule is used)

A :class:`Preconditioner` bundles a recursion with the denominator it gives (``√max(v, 0) + ε_a``;
PAGAN's ``max(√v, ε)``) and the statistic it is fed (``g²``, or ``||g||²`` for PASAN's step size).
Pieces:

* :func:`precondition` ``(P)``: post-processing ``v ← P(v, g²)``, emit ``g / D(v)``;
  ``delayed=True`` only divides by ``D(v)`` (the moment is fed elsewhere: DP²'s refresh).
* :func:`scale_by_adam`: ``m ← ema(m, g, β1)``, ``v ← ema(v, g², β2)``, ``m̂ = m/(1−β1^t)``,
  ``v̂ = v/(1−β2^t)``, ``u = m̂ / (√v̂ + ε_a)``; with the DP bias corrections (``Φ = (σC/b)²``,
  [ADAMBC] Eq. 2): DP-AdamBC ([ADAMBC] Alg. 1, Eq. 4) ``m̂ / √max(v̂ − Φ, γ')`` (``floor=γ',
  eps=0``); corrected DP-Adam ([DESIGN] Alg. 7, reconstructed) ``m̂ / (√max(v̂ − Φ, 0) + ε_a)``.
  :func:`adam_v_hat` reads the bias-corrected ``v̂`` from its state.
* DP²'s delayed preconditioner ([DP2] Alg. 1): :class:`DelayedState` ``(v, G)`` shared by
  :func:`accumulate` (``G ← G + g``), :func:`apply_delayed` (``g / D(v)``) and :func:`refresh`
  (``v ← P(v, (G/s)² [− σ²C²/(s b²)])``, ``G ← 0``).

A piece may receive :class:`MomentInputs` instead of a plain array: then the first moment / step
direction is ``.g`` and the second moment is fed ``.sq`` (a separately released or noiseless square
statistic — independent moment estimation and the noiseless-preconditioner oracles of [DESIGN]).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numba
import numpy as np

from .._validate import hyper
from .base import GradientTransformation

__all__ = ["MomentInputs", "ema", "Preconditioner", "adagrad", "rmsprop", "yogi", "by_rule", "RULES",
           "PreconditionState", "precondition", "scale_by_precondition", "AdamState", "scale_by_adam",
           "adam_v_hat", "bias_correction", "DelayedState", "accumulate", "apply_delayed", "refresh"]

RULES = ("adagrad", "rmsprop", "yogi")


class MomentInputs(NamedTuple):
    g: Any  # (R, d) input of the first moment / the step direction
    sq: Any  # (R, d) input of the second moment (replaces g²)


def _split(u):
    if isinstance(u, MomentInputs):
        return u.g, u.sq
    return u, u * u


def ema(x, y, beta):
    """Exponential moving average ``β x + (1−β) y`` (RMSProp's v, Adam's m and v)."""
    return x * beta + y * (1.0 - beta)


class Preconditioner(NamedTuple):
    """A second-moment recursion and the denominator it gives.

    ``init(params) -> v``; ``square(g, xp) -> statistic`` (``g²``, or ``||g||²`` per row);
    ``accumulate(v, sq, ctx) -> v``; ``denominator(v, ctx) -> D``.
    """

    init: Callable
    square: Callable
    accumulate: Callable
    denominator: Callable


def _zeros(params):
    return params * 0.0


def _coordinate_square(g, xp):
    return g * g


def _norm_square(g, xp):
    return xp.sum(g * g, axis=1, keepdims=True)


def _add_eps(eps):
    def denominator(v, ctx):
        return ctx.xp.sqrt(ctx.xp.maximum(v, 0.0)) + ctx.hp(eps)

    return denominator


def adagrad(eps=1e-8, *, guard="add", per="coordinate") -> Preconditioner:
    """AdaGrad ``v ← v + g²``.  ``guard="add"``: ``D = √max(v, 0) + ε``; ``guard="max"``:
    ``D = max(√v, ε)`` (PAGAN, [PAGAN] Alg. 2).  ``per="norm"``: one accumulator per trial fed
    ``||g||²`` (PASAN's step size, [PAGAN] Alg. 1)."""
    if guard == "add":
        eps = hyper("eps", eps, "[0, inf)")
        den = _add_eps(eps)
    elif guard == "max":
        eps = hyper("eps", eps, "(0, inf)")

        def den(v, ctx):
            return ctx.xp.maximum(ctx.xp.sqrt(v), ctx.hp(eps))
    else:
        raise ValueError(f"guard must be 'add' or 'max', got guard={guard!r}")
    if per == "coordinate":
        init, square = _zeros, _coordinate_square
    elif per == "norm":
        init, square = (lambda params: params[:, :1] * 0.0), _norm_square
    else:
        raise ValueError(f"per must be 'coordinate' or 'norm', got per={per!r}")
    return Preconditioner(init, square, lambda v, sq, ctx: v + sq, den)


def rmsprop(beta=0.9, eps=1e-8) -> Preconditioner:
    """RMSProp ``v ← β v + (1−β) g²``, ``D = √max(v, 0) + ε``."""
    beta = hyper("beta", beta, "[0, 1)")
    eps = hyper("eps", eps, "[0, inf)")
    return Preconditioner(_zeros, _coordinate_square, lambda v, sq, ctx: ema(v, sq, ctx.hp(beta)),
                          _add_eps(eps))


def yogi(beta=0.9, eps=1e-8) -> Preconditioner:
    """Yogi ``v ← v − (1−β) sign(v − g²) g²``, ``D = √max(v, 0) + ε``."""
    beta = hyper("beta", beta, "[0, 1)")
    eps = hyper("eps", eps, "[0, inf)")

    def accumulate(v, sq, ctx):
        return v - (1.0 - ctx.hp(beta)) * ctx.xp.sign(v - sq) * sq

    return Preconditioner(_zeros, _coordinate_square, accumulate, _add_eps(eps))


def by_rule(rule: str, beta=0.9, eps=1e-8) -> Preconditioner:
    """The preconditioner named ``rule`` (``adagrad`` ignores ``beta``)."""
    if rule == "adagrad":
        return adagrad(eps)
    if rule == "rmsprop":
        return rmsprop(beta, eps)
    if rule == "yogi":
        return yogi(beta, eps)
    raise ValueError(f"unknown second-moment rule {rule!r}; expected one of {', '.join(RULES)}")


class PreconditionState(NamedTuple):
    v: Any  # (R, d) second-moment accumulator ((R, 1) for a per-norm accumulator)


def precondition(P: Preconditioner) -> GradientTransformation:
    """Post-processing preconditioning: ``v ← P(v, square(g))`` (or ``.sq`` of
    :class:`MomentInputs`), emit ``g / D(v)``."""

    def init(params):
        return PreconditionState(v=P.init(params))

    def update(u, state, params, ctx):
        if isinstance(u, MomentInputs):
            g, sq = u
        else:
            g, sq = u, P.square(u, ctx.xp)
        v = P.accumulate(state.v, sq, ctx)
        return g / P.denominator(v, ctx), PreconditionState(v=v)

    return GradientTransformation(init, update)


def scale_by_precondition(rule: str, beta=0.9, eps=1e-8) -> GradientTransformation:
    """AdaGrad / RMSProp / Yogi preconditioning (:func:`precondition` of :func:`by_rule`)."""
    return precondition(by_rule(rule, beta, eps))


class AdamState(NamedTuple):
    m: Any  # (R, d) first moment
    v: Any  # (R, d) second moment (raw, before bias correction)
    count: int  # number of updates so far (t)


def bias_correction(beta, t):
    """Adam's bias-correction divisor ``1 − βᵗ`` ([ADAM] Alg. 1; ALGORITHMS §1), the one
    expression every path uses.

    ``beta`` is a Python float (Python's ``float ** int``) or a per-trial ``(R, 1)`` column as
    ``ctx.hp`` gives it (NumPy's ``power``).  The compiled paths receive this function's values
    rather than raising ``β`` to ``t`` themselves: Numba's ``float ** int`` is a product of
    squarings and differs from Python's and NumPy's ``pow`` in the last bit for about half of the
    ``(β, t)`` pairs, which would break the bit-for-bit contract with the chain."""
    return 1.0 - beta ** t


def adam_v_hat(adam_state: AdamState, beta2):
    """Bias-corrected second moment ``v̂ = v / (1 − β2^count)`` of an :class:`AdamState`
    (``beta2`` a float or a per-trial column, e.g. ``ctx.hp(beta2)``)."""
    return adam_state.v / bias_correction(beta2, adam_state.count)


def scale_by_adam(beta1=0.9, beta2=0.999, eps=1e-8, *, phi=None, floor=None) -> GradientTransformation:
    """Adam with optional subtraction of the DP noise variance from the bias-corrected ``v̂``.

    ``phi=None``: plain Adam ``m̂/(√v̂ + ε)``.  ``phi`` given (scalar, per trial, or a function
    of the step context, e.g. ``Φ = (σC/b)²`` needs the batch size):
    ``m̂ / (√max(v̂ − Φ, floor) + ε)``, ``floor`` likewise a scalar, per trial, or a function of
    the step context (DP-AdamBC's ``gamma_prime="auto"``, ``γ' = 0.01·Φ``); DP-AdamBC is
    ``floor=γ', eps=0``, the corrected DP-Adam of
    [DESIGN] is ``floor=0``.  With ``MomentInputs`` the positive part ``max(v̂, 0)`` is taken
    before the square root (a noisy second-moment statistic can drive ``v`` negative).
    ``beta1``, ``beta2`` in [0, 1); ``eps`` ≥ 0.
    """
    beta1 = hyper("beta1", beta1, "[0, 1)")
    beta2 = hyper("beta2", beta2, "[0, 1)")
    eps = hyper("eps", eps, "[0, inf)")

    def init(params):
        z = params * 0.0
        return AdamState(m=z, v=z * 1.0, count=0)

    def update(u, state, params, ctx):
        xp = ctx.xp
        b1, b2 = ctx.hp(beta1), ctx.hp(beta2)
        t = state.count + 1
        ph = fl = None
        if phi is not None:
            ph = phi(ctx) if callable(phi) else ctx.hp(phi)
            fl = floor(ctx) if callable(floor) else ctx.hp(floor if floor is not None else 0.0)
        e = ctx.hp(eps)
        add_eps = not (isinstance(e, float) and e == 0.0)
        if not isinstance(u, MomentInputs) and _fusable(u, state.m, state.v):
            return _adam_fused(u, state, t, b1, b2, ph, fl, e, add_eps,
                               getattr(ctx, "donate_state", False))
        g, sq = _split(u)
        m = ema(state.m, g, b1)
        v = ema(state.v, sq, b2)
        m_hat = m / bias_correction(b1, t)
        v_hat = adam_v_hat(AdamState(m, v, t), b2)
        if phi is not None:
            v_hat = xp.maximum(v_hat - ph, fl)
        elif isinstance(u, MomentInputs):
            v_hat = xp.maximum(v_hat, 0.0)
        denom = xp.sqrt(v_hat) + e if add_eps else xp.sqrt(v_hat)
        return m_hat / denom, AdamState(m=m, v=v, count=t)

    return GradientTransformation(init, update)


def _fusable(g, m, v) -> bool:
    """The NumPy fast path applies: three C-contiguous (R, d) arrays of one float dtype."""
    return (isinstance(g, np.ndarray) and isinstance(m, np.ndarray) and isinstance(v, np.ndarray)
            and g.ndim == 2 and g.shape == m.shape == v.shape and g.dtype == m.dtype == v.dtype
            and g.flags.c_contiguous and m.flags.c_contiguous and v.flags.c_contiguous)


def _col(x, dt):
    """A scalar or (R, 1) hyperparameter as a (1, 1) or (R, 1) array of ``dt``; a Python float is
    rounded to ``dt`` exactly as NumPy rounds a Python scalar operand (NEP 50)."""
    return np.ascontiguousarray(np.asarray(x, dtype=dt).reshape(-1, 1))


def _adam_fused(g, state, t, b1, b2, ph, fl, e, add_eps, donate):
    """Adam's step in one pass over ``(R, d)`` (NumPy): the same operations in the same order as
    the array expressions of :func:`scale_by_adam` (each rounded once; Numba compiles without
    fast-math, so no fused multiply-add), hence bit-for-bit the same result
    (``tests/test_transforms.py``) without the ~10 temporaries of size ``R·d``.

    ``donate`` (``StepContext.donate_state``): the caller drops the old state, so ``m`` and ``v``
    are overwritten in place; otherwise new arrays hold them (the old state stays valid)."""
    dt = g.dtype
    one_b1, one_b2 = 1.0 - b1, 1.0 - b2
    c1, c2 = bias_correction(b1, t), bias_correction(b2, t)
    use_phi = ph is not None
    m_out = state.m if donate else np.empty_like(state.m)
    v_out = state.v if donate else np.empty_like(state.v)
    out = np.empty_like(g)
    zero = _col(0.0, dt)
    _adam_kernel(g, state.m, state.v, m_out, v_out, out, _col(b1, dt), _col(one_b1, dt), _col(b2, dt),
                 _col(one_b2, dt), _col(c1, dt), _col(c2, dt), _col(ph, dt) if use_phi else zero,
                 _col(fl, dt) if use_phi else zero, use_phi, _col(e, dt) if add_eps else zero, add_eps)
    return out, AdamState(m=m_out, v=v_out, count=t)


@numba.njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _adam_moments_element(g, sq, m, v, b1, ob1, b2, ob2, c1, c2, e, add_eps):
    """``(m', v', u)`` of Adam on moment inputs (``MomentInputs(g, sq)``, independent moment
    estimation): ``m' = m·β1 + g·(1−β1)``, ``v' = v·β2 + sq·(1−β2)``,
    ``u = (m'/(1−β1ᵗ)) / (√max(v'/(1−β2ᵗ), 0) [+ ε])`` — ``max`` NaN-propagating as
    ``np.maximum``; each operation rounded once, in this order.  The element of
    :func:`dpsim.optimizers.design_space._adam_moments_kernel` and of the fused release's IME pass."""
    mj = m * b1 + g * ob1
    vj = v * b2 + sq * ob2
    vh = vj / c2
    if not (vh >= 0.0 or vh != vh):
        vh = 0.0
    den = np.sqrt(vh)
    if add_eps:
        den = den + e
    return mj, vj, (mj / c1) / den


@numba.njit(cache=True, nogil=True, inline="always")
def _adam_element(g, m, v, b1, ob1, b2, ob2, c1, c2, ph, fl, use_phi, e, add_eps):
    """Adam on one coordinate: ``(m', v', u)`` with ``m' = m·β1 + g·(1−β1)``,
    ``v' = v·β2 + (g·g)·(1−β2)``, ``v̂ = v'/c2`` (``max(v̂ − Φ, floor)`` with ``use_phi``;
    NaN-propagating like ``np.maximum``), ``u = (m'/c1) / (√v̂ [+ ε])`` — each operation rounded
    once, in the order of :func:`scale_by_adam`'s array expressions.  Shared by
    :func:`_adam_kernel` and the fused release (:mod:`dpsim.transforms._fused_release`); inlined,
    so a division follows the caller's error model."""
    m = m * b1 + g * ob1
    v = v * b2 + (g * g) * ob2
    vh = v / c2
    if use_phi:
        x = vh - ph
        vh = x if (x >= fl or x != x) else fl
    den = np.sqrt(vh)
    if add_eps:
        den = den + e
    return m, v, (m / c1) / den


@numba.njit(cache=True, nogil=True, inline="always")
def _col_at(col, r):
    """Trial ``r``'s value of a (1, 1) or (R, 1) hyperparameter column."""
    return col[r if col.shape[0] > 1 else 0, 0]


@numba.njit(cache=True, nogil=True)
def _adam_kernel(g, m, v, m_out, v_out, out, b1, ob1, b2, ob2, c1, c2, ph, fl, use_phi, e, add_eps):
    """:func:`_adam_element` over ``(R, d)``; hyperparameters are (1, 1) or (R, 1) columns."""
    R, d = g.shape
    for r in range(R):
        b1r, ob1r, b2r, ob2r = _col_at(b1, r), _col_at(ob1, r), _col_at(b2, r), _col_at(ob2, r)
        c1r, c2r, phr, flr, er = _col_at(c1, r), _col_at(c2, r), _col_at(ph, r), _col_at(fl, r), _col_at(e, r)
        for j in range(d):
            mj, vj, u = _adam_element(g[r, j], m[r, j], v[r, j], b1r, ob1r, b2r, ob2r, c1r, c2r, phr,
                                      flr, use_phi, er, add_eps)
            m_out[r, j] = mj
            v_out[r, j] = vj
            out[r, j] = u


# ------------------------------------------------------------------------------------------------
# DP²'s delayed preconditioner ([DP2] Alg. 1): one state, three pieces


class DelayedState(NamedTuple):
    v: Any  # (R, d) delayed second moment (changes only at a refresh)
    G: Any  # (R, d) sum of the statistics accumulated since the last refresh


def _delayed_init(params):
    z = params * 0.0
    return DelayedState(v=z, G=z * 1.0)


def accumulate(then_refresh: Callable | None = None) -> GradientTransformation:
    """Emit ``g`` unchanged and add it to ``G``; ``then_refresh`` (a :func:`refresh`) runs right
    after, in the same step."""

    def update(u, state, params, ctx):
        state = DelayedState(state.v, state.G + u)
        if then_refresh is not None:
            state = then_refresh(state, ctx)
        return u, state

    return GradientTransformation(_delayed_init, update)


def apply_delayed(P: Preconditioner) -> GradientTransformation:
    """Emit ``g / D(v)`` with the delayed ``v`` (no moment update)."""

    def update(u, state, params, ctx):
        return u / P.denominator(state.v, ctx), state

    return GradientTransformation(_delayed_init, update)


def refresh(P: Preconditioner, delay: int, bias=None) -> Callable:
    """``(state, ctx) -> state``: ``v ← P(v, (G/s)² − bias/(s b²))`` with ``s = delay`` (``bias``
    ``σ²C²``, or ``None``: no unbiasing, [DP2] §3.2), ``G ← 0``."""

    def fn(state: DelayedState, ctx) -> DelayedState:
        avg_sq = (state.G / float(delay)) ** 2
        if bias is not None:
            avg_sq = avg_sq - ctx.hp(bias) / (float(delay) * float(ctx.batch_size) ** 2)
        return DelayedState(P.accumulate(state.v, avg_sq, ctx), state.G * 0.0)

    return fn
