"""The validation module of the core: hyperparameters, integers and names.

A *hyperparameter* is a Python float (shared by every trial) or a read-only float64 NumPy array of
shape ``(R,)`` (one value per trial: a grid folded into the trial axis).  :func:`hyper` turns a
user's value into that form and checks it against the range the optimizer declares, written as an
interval, e.g.::

    hyper("beta2", beta2, "[0, 1)")        # ValueError: beta2 must be in [0, 1), got beta2=1.5
    hyper("clip", clip, "(0, inf]")        # inf allowed (the non-private limit)
    hyper("lr", lr, "[0, inf)")

Transforms read a validated value with :meth:`dpsim.transforms.StepContext.hp` (a float, or an
``(R, 1)`` column on the backend).  :func:`product` and :func:`negated` combine validated values
without leaving that form.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["hyper", "product", "negated", "readonly", "positive_int", "choice", "is_zero", "any_inf",
           "any_positive"]

_INTERVAL = re.compile(r"^\s*([\[(])\s*(-inf|[-+0-9.e]+)\s*,\s*(inf|[-+0-9.e]+)\s*([\])])\s*$")


def _parse(interval: str):
    m = _INTERVAL.match(interval)
    if m is None:
        raise ValueError(f"bad interval {interval!r}; expected e.g. '[0, 1)' or '(0, inf]'")
    lo_b, lo, hi, hi_b = m.groups()
    return float(lo), lo_b == "[", float(hi), hi_b == "]"


def readonly(a) -> np.ndarray:
    """A read-only float64 copy of ``a``."""
    out = np.array(a, dtype=float)
    out.setflags(write=False)
    return out


def hyper(name: str, value, interval: str = "(-inf, inf)"):
    """Validate a hyperparameter against ``interval``; return a float or a read-only ``(R,)`` array.

    ``value``: a real number, or a non-empty 1-D sequence with one value per trial.  NaN is never
    accepted; ``inf`` only when the interval is closed at infinity (``"(0, inf]"``).  The error
    names the value and the allowed range.
    """
    lo, lo_closed, hi, hi_closed = _parse(interval)
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a number in {interval}, got {name}={value!r}")
    if isinstance(value, (int, float, np.integer, np.floating)):
        arr = None
        vals = np.array([float(value)])
    else:
        try:
            arr = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number or one number per trial, got {name}={value!r}") from None
        if arr.ndim == 0:
            vals, arr = arr.reshape(1), None
            value = float(vals[0])
        elif arr.ndim == 1 and arr.size > 0:
            vals = arr
        else:
            raise ValueError(f"{name} must be a scalar or a 1-D sequence (one per trial), got {value!r}")
    ok = ~np.isnan(vals)
    ok &= (vals >= lo) if lo_closed else (vals > lo)
    ok &= (vals <= hi) if hi_closed else (vals < hi)
    if not ok.all():
        bad = float(vals[np.argmin(ok)])
        what = f"{name}={value!r}" if arr is None else f"{name}={bad!r} (in {list(map(float, vals))})"
        raise ValueError(f"{name} must be in {interval}, got {what}")
    if arr is None:
        return float(vals[0])
    return readonly(arr)


def product(a, b):
    """``a · b`` of two validated hyperparameters (float × float stays a float)."""
    if isinstance(a, float) and isinstance(b, float):
        return a * b
    return readonly(np.broadcast_to(np.asarray(a, dtype=float) * np.asarray(b, dtype=float),
                                    np.broadcast(np.asarray(a), np.asarray(b)).shape))


def negated(a):
    """``−a`` of a validated hyperparameter."""
    return -a if isinstance(a, float) else readonly(-np.asarray(a))


def is_zero(a) -> bool:
    """True for the scalar 0.0 (a per-trial array is never 'zero': its trials share one code path)."""
    return isinstance(a, float) and a == 0.0


def any_inf(a) -> bool:
    return bool(np.any(np.isinf(a)))


def any_positive(a) -> bool:
    return bool(np.any(np.asarray(a) > 0))


def positive_int(name: str, value) -> int:
    """A positive Python int (bools refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {name}={value!r}")
    return int(value)


def choice(name: str, value, allowed) -> str:
    """``value`` if it is one of ``allowed``, else a ValueError listing them."""
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {name}={value!r}")
    return value

