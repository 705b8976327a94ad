"""Array backend selection and randomness.

dpsim code on hot paths is written against an array namespace ``xp`` (NumPy, CuPy, or, in tests,
``array_api_strict``) and never calls ``numpy`` directly on device arrays.  The array API standard
has no random number generator, so randomness is owned here: a :class:`Backend` bundles a
namespace with a generator seeded from a :class:`numpy.random.SeedSequence`.

* ``numpy``: draws come from ``numpy.random.Generator(PCG64)``.
* ``cupy``: draws come from ``cupy.random.Generator`` (XORWOW bit generator) seeded from the
  same ``SeedSequence``; the streams differ from NumPy's (documented, not a bug).
* ``array_api_strict``: draws are made by NumPy and converted with ``xp.asarray``; this backend
  exists to catch NumPy-only calls in backend-generic code.

Results are always handed back to users as NumPy arrays (:func:`to_numpy`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

BACKENDS = ("numpy", "cupy", "array_api_strict")


def _import_cupy():
    try:
        import cupy  # noqa: PLC0415
    except Exception as exc:  # ImportError, or CUDA driver errors raised at import
        raise ValueError(
            f"backend='cupy' was requested but CuPy is not usable here ({type(exc).__name__}: {exc}); "
            "install the 'gpu' extra (pip install 'dpsim[gpu]') on a machine with a CUDA GPU"
        ) from None
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
    except Exception as exc:
        raise ValueError(
            f"backend='cupy' was requested but no CUDA device is available ({exc})"
        ) from None
    return cupy


def cupy_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        _import_cupy()
    except ValueError:
        return False
    return True


def get_namespace(name: str):
    """Return the array namespace for a backend name (``numpy``, ``cupy``, ``array_api_strict``)."""
    if name == "numpy":
        return np
    if name == "cupy":
        return _import_cupy()
    if name == "array_api_strict":
        try:
            import array_api_strict  # noqa: PLC0415
        except ImportError:
            raise ValueError(
                "backend='array_api_strict' needs the array-api-strict package (test extra)"
            ) from None
        return array_api_strict
    raise ValueError(f"unknown backend {name!r}; expected one of {', '.join(BACKENDS)}")


def array_namespace(*arrays):
    """Namespace of the given arrays (NumPy for Python scalars / NumPy arrays)."""
    for a in arrays:
        if a is None or isinstance(a, (int, float, np.ndarray, np.generic)):
            continue
        mod = type(a).__module__.split(".")[0]
        if mod == "cupy":
            import cupy  # noqa: PLC0415

            return cupy
        if mod == "array_api_strict":
            import array_api_strict  # noqa: PLC0415

            return array_api_strict
    return np


def to_numpy(a) -> np.ndarray:
    """Copy any backend array (or scalar) to a NumPy array."""
    if a is None:
        return None
    if isinstance(a, np.ndarray):
        return a
    mod = type(a).__module__.split(".")[0]
    if mod == "cupy":
        return a.get()
    if mod == "array_api_strict":
        # array_api_strict arrays implement the buffer protocol via __array__ on the CPU device
        return np.asarray(a._array) if hasattr(a, "_array") else np.asarray(a)
    return np.asarray(a)


@dataclass
class Backend:
    """An array namespace plus the random generator that feeds it.

    Parameters
    ----------
    name : ``"numpy"``, ``"cupy"`` or ``"array_api_strict"``.
    seed : int or :class:`numpy.random.SeedSequence` — the generator is a pure function of it.
    dtype : floating dtype name used for all state (``"float64"`` default, ``"float32"``).
    """

    name: str = "numpy"
    seed: Any = 0
    dtype: str = "float64"
    xp: Any = field(init=False, repr=False)
    _gen: Any = field(init=False, repr=False)

    def __post_init__(self):
        if self.dtype not in ("float64", "float32"):
            raise ValueError(f"dtype must be 'float64' or 'float32', got {self.dtype!r}")
        self.xp = get_namespace(self.name)
        ss = self.seed if isinstance(self.seed, np.random.SeedSequence) else np.random.SeedSequence(self.seed)
        if self.name == "cupy":
            # CuPy's Generator takes an integer seed; derive a 64-bit one from the SeedSequence.
            self._gen = self.xp.random.Generator(
                self.xp.random.XORWOW(int(ss.generate_state(1, np.uint64)[0]))
            )
        else:
            self._gen = np.random.Generator(np.random.PCG64(ss))

    @property
    def float_dtype(self):
        return getattr(self.xp, self.dtype)

    # -- randomness -----------------------------------------------------------------------------
    def normal(self, shape, scale=1.0):
        """``scale * N(0, 1)`` draws of the given shape, on this backend, in its float dtype.

        ``scale`` may be a Python float or a backend array broadcastable to ``shape``.
        """
        if self.name == "cupy":
            z = self._gen.standard_normal(shape, dtype=self.float_dtype)
        else:
            z = self._gen.standard_normal(shape, dtype=np.dtype(self.dtype))
            if self.name != "numpy":
                z = self.xp.asarray(z)
        if isinstance(scale, (int, float)) and scale == 1.0:
            return z
        return z * scale

    def uniform(self, shape):
        """Uniform draws on ``[0, 1)``."""
        if self.name == "cupy":
            return self._gen.random(shape, dtype=self.float_dtype)
        u = self._gen.random(shape, dtype=np.dtype(self.dtype))
        return u if self.name == "numpy" else self.xp.asarray(u)

    # -- conversion -----------------------------------------------------------------------------
    def asarray(self, a, dtype=None):
        """Move host data (NumPy array or scalar) onto this backend, float dtype by default."""
        dt = self.float_dtype if dtype is None else dtype
        if self.name == "array_api_strict":
            return self.xp.asarray(np.asarray(a), dtype=dt)
        return self.xp.asarray(a, dtype=dt)

    def asindex(self, a):
        """Move a host integer index array onto this backend."""
        if self.name == "array_api_strict":
            return self.xp.asarray(np.asarray(a, dtype=np.int64))
        return self.xp.asarray(a, dtype=self.xp.int64)
