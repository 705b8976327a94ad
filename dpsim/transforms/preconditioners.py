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

Each rule is written once, over an array namespace ``xp`` (:func:`dpsim.transforms.elements.on`):
the pieces' updates evaluate it on arrays, and the same function compiled for one coordinate is
the piece's element (:mod:`dpsim.transforms.elements`), which the fused release composes, and the
body of the NumPy kernels here (Adam's one-pass step) and in the IME pass.  The constants (``1−β``,
``1−βᵗ`` by :func:`bias_correction`, ``Φ``, the floor) are computed once per step by the piece's
``consts`` and handed to both.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numba
import numpy as np

from .._validate import hyper
from . import _scalar
from .base import GradientTransformation
from .elements import Accumulate, ApplyDelayed, Element, PerNorm, on, register, table

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


@numba.njit(inline="always")
def _ema(x, y, beta, one_minus_beta):
    """``x·β + y·(1−β)`` with ``1−β`` given: the EMA's operations, on arrays (``.py_func``) or one
    coordinate."""
    return x * beta + y * one_minus_beta


def ema(x, y, beta):
    """Exponential moving average ``β x + (1−β) y`` (RMSProp's v, Adam's m and v).

    Parameters
    ----------
    x : array or float
        The previous average.
    y : array or float
        The new value.
    beta : float or array
        The decay β.

    Returns
    -------
    array or float
        ``β x + (1−β) y``.

    Examples
    --------
    >>> from dpsim.transforms.preconditioners import ema
    >>> ema(1.0, 3.0, 0.5)
    2.0
    """
    return _ema.py_func(x, y, beta, 1.0 - beta)


# Each rule below is written once over an array namespace ``xp`` (dpsim.transforms.elements.on):
# the chain evaluates it on (R, d) arrays, the fused release compiles it for one coordinate.
# ``a`` and ``k`` are tuples of the rule's constants, computed by the Preconditioner's ``consts``.

def _ema_acc(xp):
    def acc(v, sq, a):  # RMSProp: v·β + sq·(1−β)   (a = (β, 1−β))
        return v * a[0] + sq * a[1]
    return acc


def _sum_acc(xp):
    def acc(v, sq, a):  # AdaGrad: v + sq   (a = ())
        return v + sq
    return acc


def _yogi_acc(xp):
    def acc(v, sq, a):  # Yogi: v − (1−β)·sign(v − sq)·sq   (a = (1−β,))
        return v - a[0] * xp.sign(v - sq) * sq
    return acc


def _add_eps_den(xp):
    def den(v, e):  # √max(v, 0) + ε   (e = (ε,))
        return xp.sqrt(xp.maximum(v, 0.0)) + e[0]
    return den


def _max_eps_den(xp):
    def den(v, e):  # max(√v, ε)   (e = (ε,); PAGAN)
        return xp.maximum(xp.sqrt(v), e[0])
    return den


_STEPS: dict = {}


def _step_rule(acc, den, na):
    """The rule of :func:`precondition` over ``acc`` and ``den`` (one object per triple):
    ``v ← acc(v, sq, k[:na])``, ``u = g / den(v, k[na:])``."""
    rule = _STEPS.get((acc, den, na))
    if rule is None:
        def rule(xp):
            a_fn, d_fn = on(acc, xp), on(den, xp)

            def step(g, sq, v, k):
                v = a_fn(v, sq, k[:na])
                return v, g / d_fn(v, k[na:])
            return step
        _STEPS[(acc, den, na)] = rule
    return rule


class Preconditioner(NamedTuple):
    """A second-moment recursion and the denominator it gives.

    ``init(params) -> v``; ``square(g, xp) -> statistic`` (``g²``, or ``||g||²`` per row);
    ``accumulate(v, sq, ctx) -> v``; ``denominator(v, ctx) -> D``.  ``rule``: the step
    ``(g, sq, v, k) -> (v', g / D(v'))`` written once over a namespace
    (:func:`dpsim.transforms.elements.on`), of which ``accumulate`` and ``denominator`` evaluate the
    parts; ``consts(ctx) -> k`` its constants (the recursion's, then the denominator's); ``key``:
    the element key of :func:`precondition` for a per-coordinate statistic, else ``None``;
    ``norm_rule``: the rule's name for a per-trial ``||g||²`` statistic (:func:`precondition`'s
    :class:`~dpsim.transforms.elements.PerNorm`), else ``None``.
    """

    init: Callable
    square: Callable
    accumulate: Callable
    denominator: Callable
    rule: Callable | None = None
    consts: Callable | None = None
    key: str | None = None
    norm_rule: str | None = None


def _zeros(params):
    return params * 0.0


def _trial_zeros(params):
    return params[:, :1] * 0.0


def _coordinate_square(g, xp):
    return g * g


def _norm_square(g, xp):
    return xp.sum(g * g, axis=1, keepdims=True)


def _register_element(key, rule, n_consts):
    """Register (once) the rule of :func:`precondition`'s element ``key``: ``rule`` on one
    coordinate fed ``g·g``, the coordinate square (:func:`_coordinate_square`)."""
    if key not in RULE_KEYS:
        step = on(rule, _scalar)

        def element(g, v, k):
            return step(g, g * g, v, k)

        RULE_KEYS[key] = register(key, numba.njit(inline="always")(element), 1, n_consts)


#: element key -> registered rule of :func:`precondition` (:func:`_register_element`)
RULE_KEYS: dict = {}


def _preconditioner(name, acc, na, den, consts, per="coordinate") -> Preconditioner:
    """A :class:`Preconditioner` from its recursion ``acc`` (``na`` constants) and denominator
    ``den``; ``consts(ctx)`` gives the recursion's constants followed by the denominator's."""

    def accumulate(v, sq, ctx):
        return on(acc, ctx.xp)(v, sq, consts(ctx)[:na])

    def denominator(v, ctx):
        return on(den, ctx.xp)(v, consts(ctx)[na:])

    rule = _step_rule(acc, den, na)
    if per == "coordinate":
        init, square, key, norm_rule = _zeros, _coordinate_square, f"precondition:{name}", None
        _register_element(key, rule, na + 1)  # every denominator has one constant, ε
    elif per == "norm":
        init, square, key, norm_rule = _trial_zeros, _norm_square, None, name
    else:
        raise ValueError(f"per must be 'coordinate' or 'norm', got per={per!r}")
    return Preconditioner(init, square, accumulate, denominator, rule, consts, key, norm_rule)


def adagrad(eps=1e-8, *, guard="add", per="coordinate") -> Preconditioner:
    """AdaGrad ``v ← v + g²``.  ``guard="add"``: ``D = √max(v, 0) + ε``; ``guard="max"``:
    ``D = max(√v, ε)`` (PAGAN, [PAGAN] Alg. 2).  ``per="norm"``: one accumulator per trial fed
    ``||g||²`` (PASAN's step size, [PAGAN] Alg. 1).

    Parameters
    ----------
    eps : float or sequence of float
        The constant ε of the denominator.
    guard : {'add', 'max'}
        ``√max(v, 0) + ε`` or ``max(√v, ε)``.
    per : {'coordinate', 'norm'}
        One accumulator per coordinate, or one per trial fed ``||g||²``.

    Returns
    -------
    Preconditioner
        The rule.
    """
    if guard == "add":
        eps = hyper("eps", eps, "[0, inf)")
        den, name = _add_eps_den, "adagrad"
    elif guard == "max":
        eps = hyper("eps", eps, "(0, inf)")
        den, name = _max_eps_den, "adagrad_max"
    else:
        raise ValueError(f"guard must be 'add' or 'max', got guard={guard!r}")
    return _preconditioner(name, _sum_acc, 0, den, lambda ctx: (ctx.hp(eps),), per)


def rmsprop(beta=0.9, eps=1e-8) -> Preconditioner:
    """RMSProp ``v ← β v + (1−β) g²``, ``D = √max(v, 0) + ε``.

    Parameters
    ----------
    beta : float or sequence of float
        The decay β.
    eps : float or sequence of float
        The constant ε of the denominator.

    Returns
    -------
    Preconditioner
        The rule.
    """
    beta = hyper("beta", beta, "[0, 1)")
    eps = hyper("eps", eps, "[0, inf)")

    def consts(ctx):
        b = ctx.hp(beta)
        return (b, 1.0 - b, ctx.hp(eps))

    return _preconditioner("rmsprop", _ema_acc, 2, _add_eps_den, consts)


def yogi(beta=0.9, eps=1e-8) -> Preconditioner:
    """Yogi ``v ← v − (1−β) sign(v − g²) g²``, ``D = √max(v, 0) + ε``.

    Parameters
    ----------
    beta : float or sequence of float
        The decay β.
    eps : float or sequence of float
        The constant ε of the denominator.

    Returns
    -------
    Preconditioner
        The rule.
    """
    beta = hyper("beta", beta, "[0, 1)")
    eps = hyper("eps", eps, "[0, inf)")

    def consts(ctx):
        return (1.0 - ctx.hp(beta), ctx.hp(eps))

    return _preconditioner("yogi", _yogi_acc, 1, _add_eps_den, consts)


#: AdaGrad's step ``(g, sq, v, (ε,)) -> (v + sq, g/(√max(v + sq, 0) + ε))`` on one coordinate: the
#: rule of ``precondition(adagrad(ε))`` compiled (the fused release's IME pass feeds it ``s̃``).
_ADAGRAD_STEP = on(_step_rule(_sum_acc, _add_eps_den, 0), _scalar)


def by_rule(rule: str, beta=0.9, eps=1e-8) -> Preconditioner:
    """The preconditioner named ``rule`` (``adagrad`` ignores ``beta``).

    Parameters
    ----------
    rule : {'adagrad', 'rmsprop', 'yogi'}
        The rule's name.
    beta : float or sequence of float
        The decay β (RMSProp, Yogi).
    eps : float or sequence of float
        The constant ε.

    Returns
    -------
    Preconditioner
        The rule.
    """
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
    :class:`MomentInputs`), emit ``g / D(v)``.  For a per-coordinate ``P`` the element
    ``"precondition:<rule>"`` (slot ``v``) evaluates the same rule, ``P.rule``; for a per-norm
    ``P`` (one accumulator per trial, PASAN) the element is its
    :class:`~dpsim.transforms.elements.PerNorm` (the rule's name and constants).

    Parameters
    ----------
    P : Preconditioner
        A second-moment rule (:func:`adagrad`, :func:`rmsprop`, :func:`yogi`).

    Returns
    -------
    GradientTransformation
        The preconditioning piece (state :class:`PreconditionState`).
    """

    def init(params):
        return PreconditionState(v=P.init(params))

    def update(u, state, params, ctx):
        if isinstance(u, MomentInputs):
            g, sq = u
        else:
            g, sq = u, P.square(u, ctx.xp)
        v, out = on(P.rule, ctx.xp)(g, sq, state.v, P.consts(ctx))
        return out, PreconditionState(v=v)

    element = None
    if P.key is not None:
        element = Element(RULE_KEYS[P.key], ("v",), lambda state, ctx: P.consts(ctx),
                          lambda state, arrays: PreconditionState(v=arrays[0]))
    elif P.norm_rule is not None:
        element = PerNorm(P.norm_rule, lambda state, ctx: P.consts(ctx))
    return GradientTransformation(init, update, element=element)


def scale_by_precondition(rule: str, beta=0.9, eps=1e-8) -> GradientTransformation:
    """AdaGrad / RMSProp / Yogi preconditioning (:func:`precondition` of :func:`by_rule`).

    Parameters
    ----------
    rule : {'adagrad', 'rmsprop', 'yogi'}
        The rule's name.
    beta : float or sequence of float
        The decay β.
    eps : float or sequence of float
        The constant ε.

    Returns
    -------
    GradientTransformation
        ``precondition(by_rule(rule, beta, eps))``.
    """
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
    ``(β, t)`` pairs, which would break the bit-for-bit contract with the chain.

    Parameters
    ----------
    beta : float or array
        The decay β.
    t : int
        The step count.

    Returns
    -------
    float or array
        ``1 − βᵗ``.

    Examples
    --------
    >>> from dpsim.transforms.preconditioners import bias_correction
    >>> round(bias_correction(0.9, 2), 12)
    0.19
    """
    return 1.0 - beta ** t


def adam_v_hat(adam_state: AdamState, beta2):
    """Bias-corrected second moment ``v̂ = v / (1 − β2^count)`` of an :class:`AdamState`
    (``beta2`` a float or a per-trial column, e.g. ``ctx.hp(beta2)``).

    Parameters
    ----------
    adam_state : AdamState
        An Adam piece's state.
    beta2 : float or array
        Its β2.

    Returns
    -------
    array
        ``v̂``.
    """
    return adam_state.v / bias_correction(beta2, adam_state.count)


def _adam_rule(xp):
    """Adam's step, written once (:func:`dpsim.transforms.elements.on`): ``(m', v', u)`` with
    ``m' = ema(m, g, β1)``, ``v' = ema(v, sq, β2)``, ``m̂ = m'/(1−β1ᵗ)``, ``v̂ = v'/(1−β2ᵗ)``,
    then ``v̂ ← max(v̂ − Φ, floor)`` (``use_phi``: [ADAMBC] Eq. 4, [DESIGN] Alg. 7) or
    ``v̂ ← max(v̂, 0)`` (``positive``: a moment-input statistic may be negative), and
    ``u = m̂ / (√v̂ [+ ε])`` (``add_eps``); ``max`` is ``xp.maximum`` (NaN-propagating).
    ``k = (β1, 1−β1, β2, 1−β2, 1−β1ᵗ, 1−β2ᵗ, Φ, floor, ε)`` (:func:`scale_by_adam`'s
    constants; ``Φ``, ``floor``, ``ε`` unused where their flag is off)."""
    ema_ = _ema if xp is _scalar else _ema.py_func

    def adam(g, sq, m, v, k, use_phi, positive, add_eps):
        m = ema_(m, g, k[0], k[1])
        v = ema_(v, sq, k[2], k[3])
        m_hat = m / k[4]
        v_hat = v / k[5]
        if use_phi:
            v_hat = xp.maximum(v_hat - k[6], k[7])
        elif positive:
            v_hat = xp.maximum(v_hat, 0.0)
        den = xp.sqrt(v_hat)
        if add_eps:
            den = den + k[8]
        return m, v, m_hat / den

    return adam


#: Adam's step on one coordinate (:func:`_adam_rule` compiled; flags as arguments).
_ADAM = on(_adam_rule, _scalar)

_ADAM_ELEMENTS: dict = {}


def _adam_element_rule(use_phi: bool, add_eps: bool):
    """The registered rule of :func:`scale_by_adam`'s element: :data:`_ADAM` fed ``g·g``, with
    the flags compiled in (key ``"adam"``, ``":phi"``, ``":eps"``)."""
    key = "adam" + (":phi" if use_phi else "") + (":eps" if add_eps else "")
    rule = _ADAM_ELEMENTS.get(key)
    if rule is None:
        def element(g, m, v, k):
            return _ADAM(g, g * g, m, v, k, use_phi, False, add_eps)

        rule = _ADAM_ELEMENTS[key] = register(key, numba.njit(inline="always")(element), 2, 9)
    return rule


def scale_by_adam(beta1=0.9, beta2=0.999, eps=1e-8, *, phi=None, floor=None) -> GradientTransformation:
    """Adam with optional subtraction of the DP noise variance from the bias-corrected ``v̂``.

    ``phi=None``: plain Adam ``m̂/(√v̂ + ε)``.  ``phi`` given (scalar, per trial, or a function
    of the step context, e.g. ``Φ = (σC/b)²`` needs the batch size):
    ``m̂ / (√max(v̂ − Φ, floor) + ε)``, ``floor`` likewise a scalar, per trial, or a function of
    the step context (DP-AdamBC's ``gamma_prime="auto"``, ``γ' = 0.01·Φ``); DP-AdamBC is
    ``floor=γ', eps=0``, the corrected DP-Adam of
    [DESIGN] is ``floor=0``.  With ``MomentInputs`` the positive part ``max(v̂, 0)`` is taken
    before the square root (a noisy second-moment statistic can drive ``v`` negative).
    ``beta1``, ``beta2`` in [0, 1); ``eps`` ≥ 0.  The rule is :func:`_adam_rule`; the element
    (slots ``m``, ``v``) evaluates it on the same constants (:func:`bias_correction` included).

    Parameters
    ----------
    beta1 : float or sequence of float
        Decay β1 of ``m``.
    beta2 : float or sequence of float
        Decay β2 of ``v``.
    eps : float or sequence of float
        The constant ε.
    phi : float, array or callable, optional
        The noise variance Φ subtracted from ``v̂``.
    floor : float, array or callable, optional
        The floor of ``v̂ − Φ``.

    Returns
    -------
    GradientTransformation
        The Adam piece (state :class:`AdamState`).
    """
    beta1 = hyper("beta1", beta1, "[0, 1)")
    beta2 = hyper("beta2", beta2, "[0, 1)")
    eps = hyper("eps", eps, "[0, inf)")
    use_phi = phi is not None
    add_eps = not (isinstance(eps, float) and eps == 0.0)

    def init(params):
        z = params * 0.0
        return AdamState(m=z, v=z * 1.0, count=0)

    def consts(state, ctx):
        """``(β1, 1−β1, β2, 1−β2, 1−β1ᵗ, 1−β2ᵗ, Φ, floor, ε)`` of the step ``t = count + 1``."""
        b1, b2 = ctx.hp(beta1), ctx.hp(beta2)
        t = state.count + 1
        ph = fl = 0.0
        if use_phi:
            ph = phi(ctx) if callable(phi) else ctx.hp(phi)
            fl = floor(ctx) if callable(floor) else ctx.hp(floor if floor is not None else 0.0)
        return (b1, 1.0 - b1, b2, 1.0 - b2, bias_correction(b1, t), bias_correction(b2, t), ph, fl,
                ctx.hp(eps) if add_eps else 0.0)

    def update(u, state, params, ctx):
        k = consts(state, ctx)
        t = state.count + 1
        if not isinstance(u, MomentInputs) and _fusable(u, state.m, state.v):
            return _adam_fused(u, state, t, k, use_phi, add_eps, getattr(ctx, "donate_state", False))
        g, sq = _split(u)
        m, v, out = on(_adam_rule, ctx.xp)(g, sq, state.m, state.v, k, use_phi,
                                           isinstance(u, MomentInputs), add_eps)
        return out, AdamState(m=m, v=v, count=t)

    element = Element(_adam_element_rule(use_phi, add_eps), ("m", "v"), consts,
                      lambda state, arrays: AdamState(m=arrays[0], v=arrays[1], count=state.count + 1),
                      varying=True)
    return GradientTransformation(init, update, element=element)


def _fusable(g, m, v) -> bool:
    """The NumPy fast path applies: three C-contiguous (R, d) arrays of one float dtype."""
    return (isinstance(g, np.ndarray) and isinstance(m, np.ndarray) and isinstance(v, np.ndarray)
            and g.ndim == 2 and g.shape == m.shape == v.shape and g.dtype == m.dtype == v.dtype
            and g.flags.c_contiguous and m.flags.c_contiguous and v.flags.c_contiguous)


def _col(x, dt):
    """A scalar or (R, 1) hyperparameter as a (1, 1) or (R, 1) array of ``dt``; a Python float is
    rounded to ``dt`` exactly as NumPy rounds a Python scalar operand (NEP 50)."""
    return np.ascontiguousarray(np.asarray(x, dtype=dt).reshape(-1, 1))


def _adam_fused(g, state, t, k, use_phi, add_eps, donate):
    """Adam's step in one pass over ``(R, d)`` (NumPy): :func:`_adam_rule` on each coordinate
    (:data:`_ADAM`; each operation rounded once, Numba compiles without fast-math, so no fused
    multiply-add), hence bit-for-bit the array form's result (``tests/transforms/test_transforms.py``)
    without the ~10 temporaries of size ``R·d``; ``k`` the constants of :func:`scale_by_adam`.

    ``donate`` (``StepContext.donate_state``): the caller drops the old state, so ``m`` and ``v``
    are overwritten in place; otherwise new arrays hold them (the old state stays valid)."""
    dt = g.dtype
    m_out = state.m if donate else np.empty_like(state.m)
    v_out = state.v if donate else np.empty_like(state.v)
    out = np.empty_like(g)
    _adam_kernel(g, state.m, state.v, m_out, v_out, out, table(k, dt), use_phi, add_eps)
    return out, AdamState(m=m_out, v=v_out, count=t)


@numba.njit(inline="always")
def _adam_moments_element(g, sq, m, v, b1, ob1, b2, ob2, c1, c2, e, add_eps):
    """``(m', v', u)`` of Adam on moment inputs (``MomentInputs(g, sq)``, independent moment
    estimation): :func:`_adam_rule` with ``positive`` (``max(v̂, 0)``) on one coordinate.  The
    element of :func:`dpsim.optimizers.design_space._adam_moments_kernel` and of the fused
    release's IME pass."""
    return _ADAM(g, sq, m, v, (b1, ob1, b2, ob2, c1, c2, e, e, e), False, True, add_eps)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _adam_kernel(g, m, v, m_out, v_out, out, K, use_phi, add_eps):
    """:data:`_ADAM` over ``(R, d)``; ``K`` the constants, one row per trial or one for all.
    ``error_model="numpy"``: ``x/0`` gives ``inf``/``NaN`` as the chain's array expressions do,
    rather than raising (``eps = 0`` with σ = 0 on a coordinate never seen is 0/0, which the
    run flags as diverged)."""
    R, d = g.shape
    for r in range(R):
        c = r if K.shape[0] > 1 else 0
        k = (K[c, 0], K[c, 1], K[c, 2], K[c, 3], K[c, 4], K[c, 5], K[c, 6], K[c, 7], K[c, 8])
        for j in range(d):
            gj = g[r, j]
            mj, vj, u = _ADAM(gj, gj * gj, m[r, j], v[r, j], k, use_phi, False, add_eps)
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
    after, in the same step.

    Parameters
    ----------
    then_refresh : callable, optional
        A :func:`refresh` run right after the accumulation.

    Returns
    -------
    GradientTransformation
        The accumulating piece (state :class:`DelayedState`; element
        :class:`~dpsim.transforms.elements.Accumulate`, which the fast paths read).
    """

    def update(u, state, params, ctx):
        state = DelayedState(state.v, state.G + u)
        if then_refresh is not None:
            state = then_refresh(state, ctx)
        return u, state

    return GradientTransformation(_delayed_init, update, element=Accumulate(then_refresh))


def apply_delayed(P: Preconditioner) -> GradientTransformation:
    """Emit ``g / D(v)`` with the delayed ``v`` (no moment update).

    Parameters
    ----------
    P : Preconditioner
        A second-moment rule (:func:`adagrad`, :func:`rmsprop`, :func:`yogi`).

    Returns
    -------
    GradientTransformation
        The piece that divides by the delayed ``D(v)`` (element
        :class:`~dpsim.transforms.elements.ApplyDelayed`, which the fast paths read).
    """

    def update(u, state, params, ctx):
        return u / P.denominator(state.v, ctx), state

    return GradientTransformation(_delayed_init, update, element=ApplyDelayed(P))


def refresh(P: Preconditioner, delay: int, bias=None) -> Callable:
    """``(state, ctx) -> state``: ``v ← P(v, (G/s)² − bias/(s b²))`` with ``s = delay`` (``bias``
    ``σ²C²``, or ``None``: no unbiasing, [DP2] §3.2), ``G ← 0``.

    Parameters
    ----------
    P : Preconditioner
        A second-moment rule (:func:`adagrad`, :func:`rmsprop`, :func:`yogi`).
    delay : int
        The delay ``s``.
    bias : float or array, optional
        ``σ²C²`` to unbias with (``None``: none).

    Returns
    -------
    callable
        ``(state, ctx) -> state``.
    """

    def fn(state: DelayedState, ctx) -> DelayedState:
        avg_sq = (state.G / float(delay)) ** 2
        if bias is not None:
            avg_sq = avg_sq - ctx.hp(bias) / (float(delay) * float(ctx.batch_size) ** 2)
        return DelayedState(P.accumulate(state.v, avg_sq, ctx), state.G * 0.0)

    return fn
