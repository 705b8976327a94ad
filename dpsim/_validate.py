"""The validation module of the core: hyperparameters, integers and names, and the run arguments
:func:`dpsim.simulate` checks before its loop (seed, init, probes and their outputs, allocations).

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
           "any_positive", "check_seed", "check_init", "check_probes", "check_probe_output",
           "check_allocation"]

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
    if value is None or isinstance(value, (bool, np.bool_)):  # (NumPy would read None as NaN)
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



# ---------------------------------------------------------------------------------------------
# Run arguments that dpsim.simulate checks before its loop (one line naming the value)


def check_seed(seed) -> None:
    """``seed`` must be a non-negative integer (Python or NumPy; not a bool) or a
    ``numpy.random.SeedSequence``: NumPy's own messages for ``-1``, ``1.5`` or ``'abc'`` do not
    name the argument."""
    if isinstance(seed, np.random.SeedSequence):
        return
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer or a numpy.random.SeedSequence, "
                         f"got seed={seed!r}")


def check_init(init, trials: int, d: int) -> None:
    """``init``: ``None``, or finite numbers of shape ``(d,)`` or ``(trials, d)``.  A NaN or
    infinite start would run every trial to NaN and still report an ε."""
    if init is None:
        return
    try:
        w0 = np.asarray(init, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"init must be numbers of shape ({d},) or ({trials}, {d}), "
                         f"got init={_short(init)}") from None
    if w0.shape not in ((d,), (trials, d)):
        raise ValueError(f"init must have shape ({d},) or ({trials}, {d}), got {w0.shape}")
    if not np.all(np.isfinite(w0)):
        bad = float(w0[~np.isfinite(w0)].ravel()[0])
        raise ValueError(f"init must be finite, got a value {bad!r} in init={_short(init)}")


def check_probes(probes) -> dict:
    """``probes``: ``None`` or a mapping ``name (str) -> f(state, params, ctx)``; returns it as a
    dict (one line naming the first bad entry otherwise)."""
    if probes is None:
        return {}
    if not hasattr(probes, "items"):
        raise ValueError(f"probes must be a dict name -> f(state, params, ctx), got "
                         f"probes={_short(probes)}")
    out = {}
    for name, fn in probes.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"probe names must be non-empty strings, got {name!r}")
        if not callable(fn):
            raise ValueError(f"probe {name!r} must be a function f(state, params, ctx) -> (R,), "
                             f"got {_short(fn)}")
        out[name] = fn
    return out


def check_probe_output(name: str, value, trials: int) -> np.ndarray:
    """A probe's result as a host ``(trials,)`` float array; one line naming the probe when it
    returns another shape or something that is not numbers (instead of NumPy's broadcast error)."""
    try:
        if value is None or isinstance(value, (str, bytes)) or np.iscomplexobj(value):
            raise TypeError  # (a complex value would lose its imaginary part with a warning)
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"probe {name!r} must return {trials} numbers (one per trial), got "
                         f"{_short(value)}") from None
    if arr.shape == ():
        arr = np.full(trials, float(arr))
    if arr.shape != (trials,):
        raise ValueError(f"probe {name!r} must return shape ({trials},) (one value per trial), "
                         f"got shape {arr.shape}")
    return arr


def check_allocation(what: str, shape, itemsize: int = 8, *, limit_bytes: float | None = None) -> None:
    """Refuse, before allocating, an array larger than the machine's physical memory (or
    ``limit_bytes``): one line naming ``what``, its shape and the size, instead of NumPy's
    ``MemoryError`` (or an out-of-memory kill)."""
    n = 1
    for s in shape:
        n *= int(s)
    size = float(n) * int(itemsize)
    limit = _physical_memory() if limit_bytes is None else float(limit_bytes)
    if limit and size > limit:
        raise ValueError(f"{what} of shape {tuple(int(s) for s in shape)} needs {_bytes(size)}, "
                         f"more than this machine's {_bytes(limit)} of memory; use fewer trials or "
                         f"a smaller problem")


def _physical_memory() -> float:
    import os

    try:
        return float(os.sysconf("SC_PAGE_SIZE")) * float(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - non-POSIX
        return 0.0


def _bytes(x: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if x < 1024 or unit == "PiB":
            return f"{x:.3g} {unit}"
        x /= 1024
    return f"{x:.3g} PiB"  # pragma: no cover


def _short(value, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."
