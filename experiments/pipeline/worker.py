"""Computing cells, in this process or on a Dask worker: the pickles that carry a batch's cells
(objects they share sent once per worker), the run of one cell under its checkpoints, and the
worker's own set-up (allocator thresholds, cached Numba kernels)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import sys
import threading
import time
import traceback
import types
import uuid
from pathlib import Path

import dpsim
import dpsim.checkpoint

from . import spec

#: Seconds between two checkpoints of a cell's simulation (:func:`_run_cell`): long beside the
#: time to write one, even for the largest full-scale cell (a few (R, d) arrays).
CHECKPOINT_EVERY = 300.0


def _worker_versions() -> dict:
    """What a worker must share with the process that owns the cache for its cells to be the
    cells the key names."""
    return {"dpsim": dpsim.__version__, "numerics": spec.DPSIM_NUMERICS}


def _dumps_cell(compute, shared: "_SharedObjects | None" = None) -> bytes:
    """``compute`` (a cell's, or a list of them) pickled by cloudpickle for a worker, solving
    (``.optimum``) every :class:`dpsim.problems.Problem` it captures first: once here rather than
    once per task, and a problem pickled before its optimum is known would reach the worker
    without it.

    The pickle is ``(contents, root)``: every ``Problem`` reachable from ``compute``, and every
    ``dict`` a closure holds (a variable of the enclosing function, such as a cache filled on
    first use), is pickled on its own into ``contents`` under a token ``"<identity>-<hash>"``
    (the object's identity in this process, numbered by ``shared``, and the SHA-256 of its
    pickle) and referred to by that token from ``root`` and from the other contents.  A worker
    (:func:`_loads_cell`) keeps the objects it unpickled by token, so a batch that refers to an
    object an earlier batch of the same sweep sent unchanged gets the worker's copy of it,
    including what earlier cells stored in it (a problem built or a σ calibrated on first use and
    kept in a dict of the experiment's ``run``): the worker then shares objects across batches as
    the cells of a sequential run share them in one process.  An object changed here since it
    was sent (another hash) is sent afresh.  ``shared=None``: identities numbered for this call
    only (nothing is shared with other calls)."""
    import io

    import cloudpickle

    problem_type = dpsim.problems.Problem
    if shared is None:
        shared = _SharedObjects()
    contents: dict[str, bytes] = {}
    # this call: id -> (object, token); the token is None while the object is being pickled,
    # and the object is kept so that a temporary (a state dict made by a __reduce__) cannot
    # free its id for another object
    tokens: dict[int, tuple[object, str | None]] = {}

    def token(obj) -> str | None:
        hit = tokens.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]  # None: a cycle back to an object being pickled (pickled inline)
        tokens[id(obj)] = (obj, None)
        data = dump(obj, obj)
        tok = f"{shared.number(obj)}-{hashlib.sha256(data).hexdigest()[:24]}"
        contents[tok] = data
        tokens[id(obj)] = (obj, tok)
        return tok

    closure_dicts: dict[int, dict] = {}  # the dicts closures hold (in a cell of __closure__)

    class _Pickler(cloudpickle.Pickler):
        def __init__(self, file, root):
            super().__init__(file)
            self._root = root

        def persistent_id(self, obj):
            if obj is self._root:
                return None
            if isinstance(obj, problem_type) or (type(obj) is dict and
                                                 closure_dicts.get(id(obj)) is obj):
                return token(obj)
            return None

        def reducer_override(self, obj):
            if isinstance(obj, problem_type):
                obj.optimum  # noqa: B018 (solved and cached on the object)
            elif isinstance(obj, types.FunctionType):
                for c in obj.__closure__ or ():
                    try:
                        v = c.cell_contents
                    except ValueError:  # an empty cell
                        continue
                    if type(v) is dict:
                        closure_dicts[id(v)] = v
            return super().reducer_override(obj)

    def dump(obj, root) -> bytes:
        buf = io.BytesIO()
        _Pickler(buf, root).dump(obj)
        return buf.getvalue()

    root = dump(compute, None)
    import pickle

    return pickle.dumps((contents, root), protocol=pickle.HIGHEST_PROTOCOL)


class _SharedObjects:
    """Numbers the objects :func:`_dumps_cell` pickles by token, for one runner: an object
    keeps its number for the runner's life (and is kept alive, so that its ``id`` is never
    reused by another object); numbers start with a random prefix of the runner, so two
    processes sending cells to one cluster never share an object."""

    def __init__(self):
        self._numbers: dict[int, tuple[object, str]] = {}
        self._lock = threading.Lock()
        self._prefix = uuid.uuid4().hex[:16]  # no two runners (processes) share a number

    def number(self, obj) -> str:
        with self._lock:
            entry = self._numbers.get(id(obj))
            if entry is None or entry[0] is not obj:
                entry = self._numbers[id(obj)] = (obj, f"{self._prefix}.{len(self._numbers)}")
            return entry[1]


#: On a worker: the objects unpickled by :func:`_loads_cell`, by token (least recently used
#: first), at most :data:`_SHARED_MAX` of them and :data:`_SHARED_BYTES` of their pickles.
_SHARED: dict = {}
_SHARED_MAX = 100_000
_SHARED_BYTES = 2 << 30


def _loads_cell(blob: bytes):
    """The inverse of :func:`_dumps_cell`, on a worker: an object whose token this worker has
    seen is the worker's copy of it (see :func:`_dumps_cell`); the others are unpickled from
    the blob and kept.  Call under :data:`_BATCHES_LOCK`."""
    import io
    import pickle

    contents, root = pickle.loads(blob)

    def resolve(tok):
        hit = _SHARED.pop(tok, None)
        if hit is None:
            hit = (load(contents[tok]), len(contents[tok]))
        _SHARED[tok] = hit  # most recently used last
        return hit[0]

    def load(data: bytes):
        up = pickle.Unpickler(io.BytesIO(data))
        up.persistent_load = resolve
        return up.load()

    out = load(root)
    while len(_SHARED) > _SHARED_MAX or sum(n for _, n in _SHARED.values()) > _SHARED_BYTES:
        del _SHARED[next(iter(_SHARED))]
    return out


def load_cached_kernels(prefix: str = "dpsim") -> int:
    """Load into this process every compiled overload that Numba's on-disk cache holds for this
    machine, of every ``@njit(cache=True)`` function of the modules already imported under
    ``prefix``; returns how many were loaded.

    Only cache *hits* are loaded: an overload is taken from a cache index whose entries were
    written for this CPU (Numba's target "magic tuple") and for the current source (Numba
    discards an index whose source file changed), so nothing is compiled here.  ``parallel=True``
    kernels are left alone: the fork server that calls this (:mod:`dpsim.experiments._warm`)
    must not start Numba's thread pool before it forks.  Uses Numba's cache internals
    (``Dispatcher._cache``), which it checks for: on another Numba it loads nothing and returns 0;
    a worker then loads each kernel on first use, as it would anyway."""
    try:
        from numba.core.registry import CPUDispatcher
    except ImportError:  # pragma: no cover - numba is a dependency
        return 0
    loaded = 0
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name == prefix or name.startswith(prefix + ".")):
            continue
        for obj in list(vars(mod).values()):
            if not isinstance(obj, CPUDispatcher) or getattr(obj, "__module__", None) != name:
                continue
            if obj.targetoptions.get("parallel"):
                continue
            try:
                index = obj._cache._cache_file._load_index()
                magic = obj.targetctx.codegen().magic_tuple()
            except Exception:  # noqa: BLE001 - no cache, or other Numba internals
                continue
            for key in index:
                if not (isinstance(key, tuple) and len(key) >= 2 and key[1] == magic):
                    continue
                try:
                    obj.compile(key[0])  # a hit: loaded from the cache, not compiled
                    loaded += 1
                except Exception:  # noqa: BLE001 - the cell would load (or compile) it itself
                    pass
    return loaded


#: glibc ``mallopt`` parameters (``<malloc.h>``).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MALLOC_RESTORED = False


def restore_malloc_thresholds() -> bool:
    """Undo, in this process, what ``MALLOC_TRIM_THRESHOLD_`` in the environment does to glibc's
    allocator; ``True`` if it was changed here (once per process), else ``False``.

    Dask's nanny starts every worker with ``MALLOC_TRIM_THRESHOLD_=65536`` (its default
    ``distributed.nanny.pre-spawn-environ``) so that freed memory returns to the OS.  Setting
    that variable also switches off glibc's *dynamic* mmap threshold (``mallopt(3)``): every
    allocation of 128 KiB or more is then served by a fresh ``mmap`` and returned by ``munmap``
    when freed, so each temporary array of the step loop costs page faults on first touch.
    On a sparse cell that is many times the minor page faults, and a clearly larger CPU time,
    than the same cell without the variable.  This sets the two thresholds to
    the values the dynamic rule itself converges to for large arrays (mmap threshold 32 MiB, its
    maximum on 64-bit; trim threshold twice that), so a freed array is reused instead of unmapped.
    Glibc only; elsewhere, or without the variable, it does nothing."""
    global _MALLOC_RESTORED
    if _MALLOC_RESTORED or not os.environ.get("MALLOC_TRIM_THRESHOLD_"):
        return False
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    ok = mallopt(_M_MMAP_THRESHOLD, 32 << 20) == 1 and mallopt(_M_TRIM_THRESHOLD, 64 << 20) == 1
    _MALLOC_RESTORED = ok
    return ok


def _run_cell(compute, seed, expected: dict, in_worker: bool = False, partial=None):
    """Compute one cell (in a worker or in this process): ``(Result, wall seconds, CPU
    seconds, timing)``, the CPU time being that of the thread that computed the cell
    (``time.thread_time``) and ``timing`` ``{"worker": "host:pid", "t_start", "t_stop"}`` (Unix
    seconds: the timeline of a sweep, from which a worker's idle time follows), plus
    ``resumed_s`` when part of the cell was restored from checkpoints; ``compute`` may come pickled (:func:`_dumps_cell`).  On a Dask
    worker (``in_worker``) the allocator thresholds are restored first
    (:func:`restore_malloc_thresholds`).

    ``partial``: the cell's checkpoint directory (:meth:`Cache.partial`): its simulations run
    inside :func:`dpsim.checkpoint.checkpoints` there, every :data:`CHECKPOINT_EVERY` seconds, so
    a cell killed in the middle (a sweep stopped, a session ended) resumes from its last
    checkpoint with the same result."""
    if in_worker:
        restore_malloc_thresholds()
    if isinstance(compute, bytes):
        with _BATCHES_LOCK:
            compute = _loads_cell(compute)
    here = _worker_versions()
    if here != expected:
        raise RuntimeError(f"a Dask worker runs dpsim {here} but the sweep was keyed for "
                           f"{expected}; install the same dpsim on every worker")
    start, t0, c0 = time.time(), time.perf_counter(), time.thread_time()
    scope = None
    with contextlib.ExitStack() as stack:
        if partial is not None:
            scope = stack.enter_context(dpsim.checkpoint.checkpoints(partial, every=CHECKPOINT_EVERY))
        res = compute(seed)
    wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
    timing = {"worker": _worker_id(), "t_start": round(start, 3), "t_stop": round(start + wall, 3)}
    if scope is not None and scope.resumed_wall > 0:
        timing["resumed_s"] = round(scope.resumed_wall, 3)
    return res, wall, cpu, timing


def _worker_id() -> str:
    """Who computed a cell (saved in the manifest with its start and stop times): ``host:pid``
    of this process (read at each call: a worker forked from a fork server that imported this
    module has another pid than the server)."""
    return f"{platform.node()}:{os.getpid()}"


_BATCHES: dict = {}  # batch id -> (the unpickled computes of a batch, blob size), in a worker
_BATCHES_LOCK = threading.Lock()
#: A worker keeps the unpickled cells of at most this many batches (least recently used first
#: out) and of at most :data:`_BATCHES_BYTES` of pickles (the newest batch always): several
#: experiments run their batches at the same time on one cluster, so a worker alternates
#: between batches and would otherwise unpickle (and rebuild the problems of) a batch again.
_BATCHES_MAX = 32
_BATCHES_BYTES = 1 << 30


def _cell_file_bytes(res) -> bytes | None:
    """The bytes of the cell file of ``res`` (what :meth:`dpsim.Result.save` writes: the one
    cell-file format), made in memory: an anonymous memory file (``memfd_create``, Linux) or,
    elsewhere, a temporary file.  ``None`` when ``res`` is not a :class:`dpsim.Result` (the
    process that owns the cache then reports the bad cell)."""
    if not isinstance(res, dpsim.Result):
        return None
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("dpsim-cell", 0)
        try:
            res.save(f"/proc/self/fd/{fd}", format="npz")
            return os.pread(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="dpsim-cell-") as d:
        path = Path(d) / "cell.npz"
        res.save(path, format="npz")
        return path.read_bytes()


def _run_batch_cell(blob: bytes, batch: str, i: int, seed, expected: dict, partial=None):
    """Compute cell ``i`` of a batch on a worker: the batch's computes, pickled together
    (:func:`_dumps_cell` of the list), are unpickled once per worker process and kept for the
    batch's later cells (the most recently used batches are kept, see :data:`_BATCHES_MAX`).
    Pickled together, the cells share what they share in the parent -- a problem built lazily
    on first use by one cell is built once per worker, not once per cell.

    Returns ``(Result, wall, cpu, timing, file bytes)``: the worker also makes the cell's file
    (:func:`_cell_file_bytes`: compressing the arrays is most of the cost of saving a cell), so
    the process that owns the cache only writes the bytes and hashes them."""
    restore_malloc_thresholds()
    with _BATCHES_LOCK:
        hit = _BATCHES.pop(batch, None)
        if hit is None:
            hit = (_loads_cell(blob), len(blob))
        _BATCHES[batch] = hit  # most recently used last
        while len(_BATCHES) > 1 and (len(_BATCHES) > _BATCHES_MAX or
                                     sum(n for _, n in _BATCHES.values()) > _BATCHES_BYTES):
            del _BATCHES[next(iter(_BATCHES))]
    res, wall, cpu, timing = _run_cell(hit[0][i], seed, expected, in_worker=True, partial=partial)
    return res, wall, cpu, timing, _cell_file_bytes(res)


def _run_batch_cells(blob: bytes, batch: str, cells: list, expected: dict) -> list:
    """Cells ``[(i, seed, partial), ...]`` of a batch, one after another on a worker (one Dask task for
    several short cells, see :meth:`DaskRunner._chunks`): ``[(i, output or exception)]``
    where an output is :func:`_run_batch_cell`'s.  A cell that raises ends the chunk; the cells
    before it are returned, so the process that owns the cache saves them before it reports the
    error."""
    out = []
    for i, seed, *partial in cells:
        try:
            out.append((i, _run_batch_cell(blob, batch, i, seed, expected, *partial)))
        except Exception as err:  # noqa: BLE001 - reported by the owner of the cache
            # returned, not raised: its traceback would not travel, so it goes as a note
            err.add_note(f"in cell {i} of the batch on worker {_worker_id()}:\n"
                         + traceback.format_exc())
            out.append((i, err))
            break
    return out
