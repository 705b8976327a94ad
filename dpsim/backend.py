"""Array backend selection and randomness.

dpsim code on hot paths is written against an array namespace ``xp`` that follows the array API
standard (2023.12) and never calls ``numpy`` directly on device arrays.  One code path serves all
backends; the namespaces come from ``array-api-compat``:

* ``numpy``: NumPy's own main namespace when NumPy ≥ 2 (it implements the standard; no wrapper
  call on the hot path), ``array_api_compat.numpy`` on NumPy 1.x;
* ``cupy``: ``array_api_compat.cupy`` (CuPy's main namespace lacks parts of the standard, e.g.
  ``linalg.vector_norm`` in CuPy 14; the compat namespace supplies them);
* ``array_api_strict`` (tests): the reference implementation, which rejects everything outside
  the standard.  The suite also runs the engine on a stricter stand-in that drops the extension
  functions (``tests/core/test_array_namespace.py``, through :data:`STRICT_NAMESPACE`).

A function that gets arrays but no namespace asks :func:`array_namespace`.

Randomness.  The array API standard has no random number generator, so randomness is owned here:
a :class:`Backend` bundles a namespace with a generator seeded from a
:class:`numpy.random.SeedSequence`.

* ``numpy``: draws come from ``numpy.random.Generator(PCG64)``, one stream (large float64 normal
  draws, and every block of the blocked layout, are made by :func:`dpsim._bitgen.fill_normals`,
  NumPy's algorithm inlined in Numba: the same numbers, faster).
* ``numpy:blocked``: the *blocked* noise layout.  Every draw is cut, in C order, into fixed blocks
  of :data:`NOISE_BLOCK` elements; block ``j`` is always filled from its own stream
  ``PCG64(SeedSequence(entropy, spawn_key=key + (j,)))``, continuing where that block's previous
  draw stopped.  The blocks of one draw are filled by a pool of threads (NumPy's generators release
  the GIL while filling an ``out=`` array), so the noise of one step uses every core that is free;
  since the partition is fixed, the result is the same for every thread count (1 included) —
  ``tests/core/test_backend.py`` checks it.  With two or more threads the next draw of the same shape is
  also generated ahead, in the background, while the rest of the step runs (if the next request
  has another shape, the block streams are rewound and it is drawn afresh, so the numbers never
  depend on the guess).  The thread count is ``threads=`` or the environment variable
  ``DPSIM_NOISE_THREADS`` (default: the CPUs this process may use).  The stream differs from the
  ``numpy`` layout's (a different, equally valid sequence of i.i.d. normals), which is why it is
  an opt-in name.
* ``cupy``: draws come from ``cupy.random.Generator`` (XORWOW bit generator) seeded from the
  same ``SeedSequence``; the streams differ from NumPy's (documented, not a bug).
* ``array_api_strict``: draws are made by NumPy and converted with ``xp.asarray``; this backend
  exists to catch NumPy-only calls in backend-generic code.  ``array_api_strict:blocked`` uses the
  blocked layout.

``dtype="float32"``: every state array, the noise and the problem data are float32 (the fused GLM
kernels still accumulate in float64).  Its accuracy is checked in ``tests/core/test_float32.py``.

Results are always handed back to users as NumPy arrays (:func:`to_numpy`).
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _bitgen

BACKENDS = ("numpy", "cupy", "array_api_strict")
NOISE_LAYOUTS = ("stream", "blocked")
NOISE_BLOCK = 1 << 16  # elements per block of the blocked noise layout (fixed: part of the stream)
#: float64 normal draws of at least this many elements are made by :func:`dpsim._bitgen.fill_normals`
#: (NumPy's PCG64 and ziggurat inlined in Numba: the same numbers and final state, measured faster
#: per normal than NumPy's own; reading and writing the state has a fixed cost, hence the threshold;
#: the measurements are in docs/performance.md).
INLINE_FILL_MIN = 4096


def _size(shape) -> int:
    return math.prod(shape) if isinstance(shape, (tuple, list)) else int(shape)

# The namespace used for array_api_strict arrays.  ``None``: the array_api_strict module itself.
# tests/core/test_array_namespace.py substitutes a stand-in without the standard's extensions.
STRICT_NAMESPACE = None


def _import_cupy():
    try:
        import cupy  # noqa: PLC0415
    except Exception as exc:  # ImportError, or CUDA driver errors raised at import
        raise ValueError(
            f"backend='cupy' was requested but CuPy is not usable here ({type(exc).__name__}: {exc}); "
            "install the 'gpu-cuda12' or 'gpu-cuda13' extra (pip install 'dpsim[gpu-cuda13]') on a "
            "machine with a CUDA GPU"
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
    """True when CuPy imports and sees at least one CUDA device.

    Returns
    -------
    bool
        Whether the ``"cupy"`` backend can run.
    """
    try:
        _import_cupy()
    except ValueError:
        return False
    return True


def _numpy_namespace():
    if int(np.__version__.split(".")[0]) >= 2:
        return np
    import array_api_compat.numpy as xnp  # noqa: PLC0415

    return xnp


def _cupy_namespace():
    _import_cupy()
    import array_api_compat.cupy as xcp  # noqa: PLC0415

    return xcp


def _strict_namespace():
    if STRICT_NAMESPACE is not None:
        return STRICT_NAMESPACE
    try:
        import array_api_strict  # noqa: PLC0415
    except ImportError:
        raise ValueError(
            "backend='array_api_strict' needs the array-api-strict package (test extra)"
        ) from None
    return array_api_strict


def parse_backend(spec: str) -> tuple[str, str]:
    """``"numpy"`` → ``("numpy", "stream")``; ``"numpy:blocked"`` → ``("numpy", "blocked")``.

    Parameters
    ----------
    spec : str
        ``"numpy"``, ``"numpy:blocked"``, ``"cupy"`` or ``"array_api_strict"``.

    Returns
    -------
    tuple of str
        ``(name, noise layout)``.

    Examples
    --------
    >>> from dpsim.backend import parse_backend
    >>> parse_backend("numpy"), parse_backend("numpy:blocked")
    (('numpy', 'stream'), ('numpy', 'blocked'))
    """
    if not isinstance(spec, str):
        raise ValueError(f"backend must be a string such as 'numpy' or 'numpy:blocked', got {spec!r}")
    name, _, layout = spec.partition(":")
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {spec!r}; expected one of {', '.join(BACKENDS)} "
                         "(optionally with ':blocked')")
    layout = layout or "stream"
    if layout not in NOISE_LAYOUTS:
        raise ValueError(f"unknown noise layout {layout!r} in backend={spec!r}; expected 'blocked'")
    if layout == "blocked" and name == "cupy":
        raise ValueError("backend='cupy:blocked' is not supported: CuPy's generator already fills "
                         "the whole array in parallel on the GPU; use backend='cupy'")
    return name, layout


def get_namespace(name: str):
    """The array namespace of a backend name (``numpy``, ``cupy``, ``array_api_strict``).

    Parameters
    ----------
    name : str
        The backend name.

    Returns
    -------
    module
        The array namespace (``numpy``, ``cupy`` or ``array_api_strict``).
    """
    base, _ = parse_backend(name)
    if base == "numpy":
        return _numpy_namespace()
    if base == "cupy":
        return _cupy_namespace()
    return _strict_namespace()


def array_namespace(*arrays):
    """Namespace of the given arrays (NumPy for Python scalars / NumPy arrays).

    Parameters
    ----------
    *arrays : array or scalar
        Arrays of one backend.

    Returns
    -------
    module
        Their array namespace.
    """
    for a in arrays:
        if a is None or isinstance(a, (int, float, np.ndarray, np.generic)):
            continue
        mod = type(a).__module__.split(".")[0]
        if mod == "cupy":
            import array_api_compat.cupy as xcp  # noqa: PLC0415

            return xcp
        if mod == "array_api_strict":
            return _strict_namespace()
    return _numpy_namespace()


def to_numpy(a) -> np.ndarray:
    """Copy any backend array (or scalar) to a NumPy array.

    Parameters
    ----------
    a : array or scalar
        A backend array.

    Returns
    -------
    numpy.ndarray
        A host copy.
    """
    if a is None:
        return None
    if isinstance(a, np.ndarray):
        return a
    mod = type(a).__module__.split(".")[0]
    if mod == "cupy":
        return a.get()
    if mod == "array_api_strict":
        # array_api_strict arrays on the CPU device wrap a NumPy array
        return np.asarray(a._array) if hasattr(a, "_array") else np.asarray(a)
    return np.asarray(a)


def noise_threads(threads=None) -> int:
    """Thread count for the blocked noise layout: ``threads``, else ``DPSIM_NOISE_THREADS``, else the
    number of CPUs this process may run on.

    Parameters
    ----------
    threads : int, optional
        An explicit thread count.

    Returns
    -------
    int
        The thread count.
    """
    if threads is None:
        env = os.environ.get("DPSIM_NOISE_THREADS")
        if env:
            try:
                threads = int(env)
            except ValueError:
                raise ValueError(f"DPSIM_NOISE_THREADS must be a positive integer, got {env!r}") from None
        else:
            try:
                threads = len(os.sched_getaffinity(0))
            except AttributeError:  # pragma: no cover - not Linux
                threads = os.cpu_count() or 1
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got threads={threads!r}")
    return int(threads)


class _BlockedNormals:
    """The blocked noise layout (module docstring): block ``j`` of every draw comes from stream
    ``j``; blocks are filled by a thread pool; the next draw of the same shape is prepared ahead."""

    def __init__(self, ss: np.random.SeedSequence, threads: int):
        self._ss = ss
        self._gens: list = []
        self.threads = threads
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="dpsim-noise") if threads > 1 else None
        self._ahead = None  # (shape, dtype, out, futures, saved states) of a draw made in advance
        self._lock = threading.Lock()

    def _gen(self, j):
        while len(self._gens) <= j:
            k = len(self._gens)
            ss = np.random.SeedSequence(self._ss.entropy, spawn_key=tuple(self._ss.spawn_key) + (k,),
                                        pool_size=self._ss.pool_size)
            self._gens.append(np.random.Generator(np.random.PCG64(ss)))
        return self._gens[j]

    def _launch(self, shape, dtype, kind):
        """Start filling a fresh array; returns (out, futures or None, saved stream states)."""
        out = np.empty(shape, dtype=dtype)
        flat = out.reshape(-1)
        n = flat.size
        nblocks = -(-n // NOISE_BLOCK)
        gens = [self._gen(j) for j in range(nblocks)]
        saved = [g.bit_generator.state for g in gens]

        def fill(j):
            part = flat[j * NOISE_BLOCK:min(n, (j + 1) * NOISE_BLOCK)]
            if kind == "normal":  # NumPy's fill, or its inlined copy (float64 PCG64: faster)
                _bitgen.fill_normals(gens[j], part)
            else:
                gens[j].random(out=part, dtype=dtype)

        if self._pool is None or nblocks == 0:
            for j in range(nblocks):
                fill(j)
            return out, None, saved
        return out, [self._pool.submit(fill, j) for j in range(nblocks)], saved

    def draw(self, shape, dtype, kind):
        shape = tuple(int(s) for s in shape)
        dtype = np.dtype(dtype)
        with self._lock:
            ahead, self._ahead = self._ahead, None
            out = None
            if ahead is not None:
                a_shape, a_dtype, a_kind, a_out, a_futs, a_saved = ahead
                for f in a_futs or ():
                    f.result()
                if (a_shape, a_dtype, a_kind) == (shape, dtype, kind):
                    out = a_out
                else:  # wrong guess: rewind the block streams, then draw what was asked
                    for j, st in enumerate(a_saved):
                        self._gens[j].bit_generator.state = st
            if out is None:
                out, futs, _ = self._launch(shape, dtype, kind)
                for f in futs or ():
                    f.result()
            if self._pool is not None and kind == "normal" and out.size >= NOISE_BLOCK:
                nxt = self._launch(shape, dtype, kind)
                self._ahead = (shape, dtype, kind) + nxt
            return out

    def get_state(self) -> list:
        """The block streams' states as if no draw had been made ahead (a draw made ahead is
        made again after :meth:`set_state`, from the same states: the same numbers)."""
        with self._lock:
            if self._ahead is not None:
                for f in self._ahead[4] or ():
                    f.result()
            states = [g.bit_generator.state for g in self._gens]
            if self._ahead is not None:
                states[:len(self._ahead[5])] = self._ahead[5]
            return states

    def set_state(self, states: list) -> None:
        with self._lock:
            if self._ahead is not None:
                for f in self._ahead[4] or ():
                    f.result()
                self._ahead = None
            for j, st in enumerate(states):
                self._gen(j).bit_generator.state = st

    def close(self):
        if self._ahead is not None:
            for f in self._ahead[4] or ():
                f.result()
            self._ahead = None
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


@dataclass
class Backend:
    """An array namespace plus the random generator that feeds it.

    Parameters
    ----------
    name : ``"numpy"``, ``"cupy"`` or ``"array_api_strict"``, optionally with the blocked noise
        layout, ``"numpy:blocked"`` (module docstring).  After construction ``name`` is the
        namespace's name and ``noise_layout`` the layout (``"stream"`` or ``"blocked"``).
    seed : int or :class:`numpy.random.SeedSequence` — the generator is a pure function of it.
    dtype : floating dtype name used for all state (``"float64"`` default, ``"float32"``).
    threads : threads of the blocked layout (default :func:`noise_threads`); results do not depend
        on it.  Ignored by the ``stream`` layout.
    """

    name: str = "numpy"
    seed: Any = 0
    dtype: str = "float64"
    threads: Any = None
    noise_layout: str = field(init=False, default="stream")
    xp: Any = field(init=False, repr=False)
    _gen: Any = field(init=False, repr=False)
    _blocked: Any = field(init=False, repr=False, default=None)

    def __post_init__(self):
        if self.dtype not in ("float64", "float32"):
            raise ValueError(f"dtype must be 'float64' or 'float32', got {self.dtype!r}")
        self.name, self.noise_layout = parse_backend(self.name)
        self.xp = get_namespace(self.name)
        ss = self.seed if isinstance(self.seed, np.random.SeedSequence) else np.random.SeedSequence(self.seed)
        if self.name == "cupy":
            # CuPy's Generator takes an integer seed; derive a 64-bit one from the SeedSequence.
            import cupy  # noqa: PLC0415

            self._gen = cupy.random.Generator(cupy.random.XORWOW(int(ss.generate_state(1, np.uint64)[0])))
        elif self.noise_layout == "blocked":
            self.threads = noise_threads(self.threads)
            self._gen = None
            self._blocked = _BlockedNormals(ss, self.threads)
        else:
            self._gen = np.random.Generator(np.random.PCG64(ss))

    @property
    def float_dtype(self):
        return getattr(self.xp, self.dtype)

    # -- randomness -----------------------------------------------------------------------------
    def _host(self, a):
        return a if self.name == "numpy" else self.xp.asarray(a)

    def normal(self, shape, scale=1.0):
        """``scale * N(0, 1)`` draws of the given shape, on this backend, in its float dtype; a
        fresh array that the caller owns (it may scale it in place).

        ``scale`` may be a Python float or a backend array broadcastable to ``shape``.

        Parameters
        ----------
        shape : tuple of int
            The draw's shape.
        scale : float or array
            The standard deviation.

        Returns
        -------
        array
            A fresh array.
        """
        if self.name == "cupy":
            z = self._gen.standard_normal(shape, dtype=self.float_dtype)
        elif self._blocked is not None:
            z = self._host(self._blocked.draw(shape, self.dtype, "normal"))
        elif self.dtype == "float64" and _size(shape) >= INLINE_FILL_MIN and _bitgen.supports(self._gen):
            z = np.empty(shape)  # NumPy's numbers, drawn by its inlined copy (dpsim._bitgen)
            _bitgen.fill_normals(self._gen, z)
            z = self._host(z)
        else:
            z = self._host(self._gen.standard_normal(shape, dtype=np.dtype(self.dtype)))
        if isinstance(scale, (int, float)) and scale == 1.0:
            return z
        return z * scale

    @property
    def can_checkpoint(self) -> bool:
        """Whether :meth:`random_state` can save the noise stream (host NumPy generators)."""
        return self.name != "cupy"

    def random_state(self):
        """The noise stream's state (picklable), for :mod:`dpsim.checkpoint`: the generator's
        bit-generator state, or the blocked layout's block states.

        Returns
        -------
        object
            The state, picklable.
        """
        if not self.can_checkpoint:
            raise ValueError(f"the {self.name} backend's generator state cannot be saved")
        if self._blocked is not None:
            return {"blocked": self._blocked.get_state()}
        return {"stream": self._gen.bit_generator.state}

    def set_random_state(self, state) -> None:
        """Restore what :meth:`random_state` returned: the next draws are those that followed it.

        Parameters
        ----------
        state : object
            What :meth:`random_state` returned.
        """
        if self._blocked is not None:
            self._blocked.set_state(state["blocked"])
        else:
            self._gen.bit_generator.state = state["stream"]

    def uniform(self, shape):
        """Uniform draws on ``[0, 1)``.

        Parameters
        ----------
        shape : tuple of int
            The draw's shape.

        Returns
        -------
        array
            A fresh array.
        """
        if self.name == "cupy":
            return self._gen.random(shape, dtype=self.float_dtype)
        if self._blocked is not None:
            return self._host(self._blocked.draw(shape, self.dtype, "uniform"))
        return self._host(self._gen.random(shape, dtype=np.dtype(self.dtype)))

    def close(self):
        """Stop the noise threads of the blocked layout (idempotent; also done at exit)."""
        if self._blocked is not None:
            self._blocked.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    # -- conversion -----------------------------------------------------------------------------
    def asarray(self, a, dtype=None):
        """Move host data (NumPy array or scalar) onto this backend, float dtype by default.

        Parameters
        ----------
        a : numpy.ndarray or scalar
            Host data.
        dtype : dtype, optional
            Default: this backend's float dtype.

        Returns
        -------
        array
            The data on this backend.
        """
        dt = self.float_dtype if dtype is None else dtype
        if self.name == "array_api_strict":
            return self.xp.asarray(np.asarray(a), dtype=dt)
        return self.xp.asarray(a, dtype=dt)

    def asindex(self, a):
        """Move a host integer index array onto this backend.

        Parameters
        ----------
        a : numpy.ndarray
            Host integer indices.

        Returns
        -------
        array
            The indices on this backend.
        """
        if self.name == "array_api_strict":
            return self.xp.asarray(np.asarray(a, dtype=np.int64))
        return self.xp.asarray(a, dtype=self.xp.int64)
