"""A word on stderr before a long first Numba compilation.

dpsim's kernels (``@njit(cache=True)``) compile on their first use on a machine — 25 to 65 s with
no output — and load from Numba's on-disk cache afterwards.  :func:`announce_compiles` wraps a
call that may compile them: while the block runs it listens for Numba's ``"numba:compile"``
events, and on the first compilation of a function of a ``dpsim`` module it writes one line::

    dpsim: compiling Numba kernels for dp_sgd on logistic (first use on this machine: about 30-60 s, once; cached in ...)

then stays silent for that ``what`` for the rest of the process.

Numba broadcasts ``"numba:compile"`` from ``Dispatcher.compile`` (``numba/core/dispatcher.py``)
only after the in-memory overloads and the on-disk cache (``self._cache.load_overload``) both
missed, so a kernel loaded from the cache, or already compiled in this process, announces
nothing; the listener is called at the *start* of the compilation, so the line comes before the
wait.  The block costs a few microseconds when nothing compiles (a listener appended to and
removed from Numba's list), and nothing at all when

* the environment variable ``DPSIM_QUIET_COMPILE`` is set (``1``; ``0``, ``false``, ``no``,
  ``off`` or empty count as unset),
* ``NUMBA_DISABLE_JIT=1`` (nothing compiles), or
* ``what`` was announced before in this process.

Blocks nest: only the innermost block of the compiling thread speaks.  Layer 0: imports only
Numba and the standard library.
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager

import numba
from numba.core import event as _event

__all__ = ["announce_compiles"]

QUIET_ENV = "DPSIM_QUIET_COMPILE"
_KIND = "numba:compile"
_PACKAGE = "dpsim"          # functions of this package (and its subpackages) are announced

_announced: set[str] = set()  # the ``what``s announced in this process
_local = threading.local()     # .stack: this thread's active blocks, innermost last


def _watched(module: str | None) -> bool:
    """Is ``module`` (a compiled function's ``__module__``) part of dpsim?"""
    return bool(module) and (module == _PACKAGE or module.startswith(_PACKAGE + "."))


def _quiet() -> bool:
    return os.environ.get(QUIET_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def _cache_location(dispatcher) -> str:
    """Where Numba keeps the compiled kernels: ``NUMBA_CACHE_DIR`` when set, else (Numba's
    default) the ``__pycache__`` folder next to each module, or the folder Numba fell back to."""
    if numba.config.CACHE_DIR:
        return f"NUMBA_CACHE_DIR={numba.config.CACHE_DIR}"
    try:
        path = dispatcher._cache.cache_path
    except Exception:  # pragma: no cover - a dispatcher without Numba's cache attribute
        path = None
    if not path:  # a kernel without cache=True: say where the cached ones go
        return "the __pycache__ folders next to the dpsim modules"
    if os.path.basename(os.path.normpath(path)) == "__pycache__":
        return f"the __pycache__ folders next to the dpsim modules, e.g. {path}"
    return path  # Numba's fallback for a read-only source tree (a user-wide cache folder)


class _Notice(_event.Listener):
    """Listens for ``"numba:compile"`` during one :func:`announce_compiles` block."""

    def __init__(self, what: str):
        self.what = what

    def on_start(self, ev):
        stack = getattr(_local, "stack", None)
        if not stack or stack[-1] is not self or self.what in _announced:
            return  # another thread's compilation, an outer block, or said already
        data = ev.data if isinstance(ev.data, dict) else {}
        dispatcher = data.get("dispatcher")
        py_func = getattr(dispatcher, "py_func", None)
        if not _watched(getattr(py_func, "__module__", None)):
            return
        _announced.add(self.what)
        try:  # never let the notice break the compilation
            stream = sys.stderr
            if stream is not None:
                stream.write(f"dpsim: compiling Numba kernels for {self.what} (first use on this "
                             f"machine: about 30-60 s, once; cached in "
                             f"{_cache_location(dispatcher)})\n")
                stream.flush()
        except Exception:  # pragma: no cover
            pass

    def on_end(self, ev):
        pass


@contextmanager
def announce_compiles(what: str):
    """Within the block, announce on stderr (once per ``what`` and process) that dpsim's Numba
    kernels are being compiled, when one of them is.  See the module docstring."""
    if what in _announced or numba.config.DISABLE_JIT or _quiet():
        yield
        return
    listener = _Notice(what)
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(listener)
    try:
        with _event.install_listener(_KIND, listener):
            yield
    finally:
        stack.remove(listener)
