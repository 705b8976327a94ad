"""Argument checks shared by the bound modules of :mod:`dpsim.analysis`.

Every bound accepts scalars or NumPy arrays (broadcasting) and raises ``ValueError`` naming the
first argument that leaves the theorem's assumptions.  :func:`real` converts and checks one
argument, :func:`steps` a step count, :func:`require` an elementwise condition with a formatted
message, and :func:`out` turns a result back into a float when it is 0-d.
"""

from __future__ import annotations

import numpy as np

__all__ = ["real", "steps", "require", "out"]


def real(name: str, x, *, finite: bool = True, nonempty: bool = False, positive: bool = False,
         nonneg: bool = False, integer: bool = False, lo=None, lo_open: bool = False, hi=None,
         hi_open: bool = False) -> np.ndarray:
    """``x`` as a float array, or ``ValueError`` naming ``name`` and the value.

    NaN is always rejected; ``finite=False`` admits ``±inf``.  ``positive``/``nonneg`` ask for
    ``> 0``/``≥ 0``; ``lo``/``hi`` bound the values (open ends with ``lo_open``/``hi_open``);
    ``integer`` asks for whole numbers (``inf`` counts as one); ``nonempty`` rejects size 0.
    """
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number or an array of reals, got {name}={x!r}") from None
    got = f"got {name}={x!r}"
    if nonempty and a.size == 0:
        raise ValueError(f"{name} must be non-empty, {got}")
    if np.any(np.isnan(a)):
        raise ValueError(f"{name} must {'be finite' if finite else 'not be NaN'}, {got}")
    if finite and np.any(np.isinf(a)):
        raise ValueError(f"{name} must be finite, {got}")
    if positive and np.any(a <= 0):
        raise ValueError(f"{name} must be positive, {got}")
    if nonneg and np.any(a < 0):
        raise ValueError(f"{name} must be non-negative, {got}")
    below = lo is not None and np.any(a <= lo if lo_open else a < lo)
    above = hi is not None and np.any(a >= hi if hi_open else a > hi)
    if below or above:
        if lo is not None and hi is not None:
            rng = f"{'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
            raise ValueError(f"{name} must lie in {rng}, {got}")
        if below:
            raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo:g}, {got}")
        raise ValueError(f"{name} must be {'<' if hi_open else '<='} {hi:g}, {got}")
    if integer and np.any(a != np.round(a)):
        raise ValueError(f"{name} must be an integer, {got}")
    return a


def steps(name: str, t) -> np.ndarray:
    """A step count: an integer ``≥ 1``, or ``inf`` for the large-``t`` limit."""
    return real(name, t, finite=False, lo=1, integer=True)


def require(cond, msg: str, **values) -> None:
    """Raise ``ValueError(msg)`` formatted with the first element where ``cond`` is False.

    ``values`` are broadcast against ``cond``; integral values print without a decimal point.
    """
    cond = np.asarray(cond)
    if cond.all():
        return
    shape = np.broadcast_shapes(cond.shape, *(np.shape(v) for v in values.values()))
    bad = ~np.broadcast_to(cond, shape)
    shown = {}
    for k, v in values.items():
        vv = float(np.broadcast_to(np.asarray(v, dtype=float), shape)[bad].flat[0])
        shown[k] = int(vv) if vv.is_integer() and abs(vv) < 1e15 else vv
    raise ValueError(msg.format(**shown))


def out(x, shape=None):
    """``x`` as a float array (reshaped to ``shape`` when given); a Python float when 0-d."""
    x = np.asarray(x, dtype=float)
    if shape is not None:
        x = x.reshape(shape)
    return float(x) if x.ndim == 0 else x
