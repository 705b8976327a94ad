"""The array-namespace functions a per-coordinate rule uses, for one coordinate in Numba.

A rule of :mod:`dpsim.transforms.elements` is written once as a function of a namespace ``xp``
(``xp.sqrt``, ``xp.maximum``, ``xp.sign``): called with the run's array namespace it is the chain's
array code; with this module as ``xp`` and compiled by Numba it is the same rule on one coordinate,
which the fast paths compose (:mod:`dpsim.fast.compose`).  Each function here is the
NumPy ufunc's value on scalars, bit for bit:

* ``sqrt``: NumPy's ``np.sqrt`` (IEEE square root, correctly rounded, in the operand's dtype);
* ``maximum(x, y)``: ``np.maximum`` — ``x`` where ``x > y`` or ``x`` is NaN, else ``y`` (so a NaN
  in either operand propagates, and ``maximum(-0.0, 0.0)`` is ``+0.0`` as NumPy gives), in
  ``x``'s dtype: a Python-float ``y`` is rounded to it as NumPy rounds a scalar operand (NEP 50);
* ``sign(x)``: ``np.sign`` — ``1``, ``-1``, ``0`` (``±0`` gives ``+0``), NaN for NaN, in ``x``'s
  dtype.

Compiled without fast-math (no reassociation, no fused multiply-add), each operation is rounded
once, as a NumPy array operation rounds each element.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

__all__ = ["sqrt", "maximum", "sign"]

sqrt = np.sqrt


def maximum(x, y):  # pragma: no cover - replaced by the overload in compiled code
    """``np.maximum(x, y)`` of two scalars (compiled code only)."""
    raise NotImplementedError


def sign(x):  # pragma: no cover - replaced by the overload in compiled code
    """``np.sign(x)`` of a scalar (compiled code only)."""
    raise NotImplementedError


@overload(maximum, inline="always")
def _maximum_impl(x, y):
    cast = np.float32 if isinstance(x, types.Float) and x.bitwidth == 32 else np.float64

    def impl(x, y):
        if x > y or x != x:
            return x
        return cast(y)
    return impl


@overload(sign, inline="always")
def _sign_impl(x):
    cast = np.float32 if isinstance(x, types.Float) and x.bitwidth == 32 else np.float64

    def impl(x):
        if x > 0:
            return cast(1.0)
        if x < 0:
            return cast(-1.0)
        if x == 0:
            return cast(0.0)
        return x
    return impl
