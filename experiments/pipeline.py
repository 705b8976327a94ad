"""The reproduction pipeline: experiment specs, the per-cell results cache, cells on Dask, the
results table, figures and REPORT.md.

An experiment is one module in this package exposing ``EXPERIMENT = Experiment(...)``: a frozen
config dataclass with named presets (``tiny`` for the smoke tests, ``quick`` for a laptop,
``full`` for the paper), a ``run(config, cache) -> dict[label, Result]`` function and the names of
the figure scripts in :mod:`paper_figures` that render its saved results.

Cache layout (``results/<experiment>/<scale>/``)::

    LATEST                 the key of the last finished run at this scale (what figures read)
    <key>/manifest.json    key, config, seed, numerics versions, backend, package versions, one
                           entry per cell (file, SHA-256, time, the cell's metadata, the git
                           commit of the code that computed it), notes (the
                           tuning selections, ...)
    <key>/<label>.npz      one dpsim.Result per sweep cell (Result.save), written as it finishes
    <key>/partial/<label>/ checkpoints of a cell being computed (removed once it is saved)
    <key>/table.nc         the results table: one row per cell and trial (config columns and
                           final metrics), netCDF, ``xarray.open_dataset(path).to_dataframe()``

A sweep *cell* is one :func:`dpsim.simulate` call (all trials of one setting, a hyperparameter grid
folded into the trial axis).

**The key** is ``sha256(experiment name, config as JSON, numerics version, backend)``.  The config
holds the seed.  The *numerics version* (:func:`numerics_version`) is *declared*, not hashed from
the sources: :data:`DPSIM_NUMERICS` for the simulator core and this package's shared modules and
``Experiment.numerics`` for the experiment's own module.  Bump the first when a change to
``dpsim`` (or to ``pipeline``/``tuning``) could change a number any cell produces, the second when
a change to the experiment's ``run`` could change its numbers without changing its config.  So a
comment, a docstring, a refactor or a new experiment recomputes nothing, and changing one
experiment's config recomputes only that experiment's cells.  Results under another key (an older
config or numerics version) are kept until ``dpsim cache prune`` (:func:`prune`).

A cell is reused only when the manifest of its key lists it and the file's SHA-256 matches the one
recorded when it was written; otherwise (missing, truncated or corrupted file, unreadable
manifest) it is recomputed.  ``force=True`` recomputes every cell of the run.  Since every cell is
saved the moment it finishes, an interrupted sweep loses no finished work; and since each cell's
simulations checkpoint themselves every :data:`CHECKPOINT_EVERY` seconds under
``<key>/partial/<label>/`` (:mod:`dpsim.checkpoint`), it loses at most that much of the cells it
was computing: run again, they resume from their last checkpoint with the same results (a remote
worker that cannot reach the folder warns and computes without checkpoints).

**Concurrency.**  Files are written to a unique temporary name (``.<name>.<pid>.<random>.tmp``)
and renamed into place (atomic on one filesystem); every manifest update re-reads the manifest
(unless the file is still the one this cache wrote last: same inode, size and mtime), merges the
change and writes it back while holding an exclusive lock on ``<key>/.lock``, so two processes
reproducing into one folder (the same experiment or different ones) both finish and lose nothing;
at worst they compute the same cell twice, with identical results.  Cells that finish together
(on a cluster) are listed in one update, each once its file is whole.

**Several experiments at once.**  With a parallel runner, ``reproduce`` runs every experiment in
its own thread of this process (:func:`experiments._run_all`), their cells sharing one cluster;
each experiment's manifest is still written by its one thread.  A thread's later batches get a
higher Dask priority, so an experiment's tuning → evaluation chain keeps moving.  Every cell's
manifest entry records ``worker`` (``host:pid``), ``t_start`` and ``t_stop`` (Unix seconds) and
every finished run ``run_t_start``/``run_t_stop``: the timeline of a sweep, from which the idle
time of each worker follows.

**Where cells run.**  A :class:`Cache` hands the cells it must compute to a *runner*:
:class:`InProcess` (one after another, in this process) or :class:`DaskRunner` (each cell a task on
a ``dask.distributed`` cluster: a ``LocalCluster`` of worker processes on the loopback interface,
started on first need, or an existing cluster by scheduler address).  Workers only compute: the
finished :class:`dpsim.Result` travels back to this process, which writes the cell file and owns
the manifest (so a cluster needs no shared filesystem).  Results are bitwise identical whatever the
runner, the number of workers or the order cells finish in, because cell ``i`` runs with
``SeedSequence(config.seed, spawn_key=(i,))`` (the ``i``-th child of
``SeedSequence(config.seed).spawn``), so cells are independent of the order they run in.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime as _dt
import hashlib
import importlib
import json
import math
import multiprocessing
import os
import platform
import re
import shutil
import sys
import threading
import time
import traceback
import types
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

import dpsim
import dpsim.checkpoint

__all__ = ["Experiment", "Cell", "Cache", "Saved", "InProcess", "DaskRunner", "make_runner",
           "numerics_version", "cache_key", "cell_seed", "package_versions", "results_table",
           "prune", "require_positive_grids", "require_positive_ints", "restore_malloc_thresholds",
           "LOCAL_WORKER_CONFIG", "DPSIM_NUMERICS", "BACKENDS"]

_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.=+-]*$")
_KEY = re.compile(r"^[0-9a-f]{16}$")
_MANIFEST = "manifest.json"
_LATEST = "LATEST"
_TABLE = "table.nc"
_LOCK = ".lock"
_PARTIAL = "partial"  # checkpoints of the cells being computed (Cache.partial)
#: Seconds between two checkpoints of a cell's simulation (:func:`_run_cell`).  A checkpoint of
#: the largest full-scale cell (DP² tuning: 480 trials × d = 10 000, a few (R, d) arrays) is
#: about 0.2 GB and 0.3 s to write.
CHECKPOINT_EVERY = 300.0

#: Seconds a Dask client waits to connect to an existing scheduler (``--scheduler``), handshake
#: included, before the run stops with one line naming the address (Dask's default, 30 s, bounds
#: only the TCP connect: a silent peer held the client for ever).
SCHEDULER_CONNECT_TIMEOUT = 5.0

_FORMAT = "dpsim-experiment-cache-2"
_OLD_FORMATS = ("dpsim-experiment-cache-1",)

#: Declared numerics version of the simulator core (``dpsim``) and of this package's shared
#: modules (``pipeline``, ``tuning``): bump it in any change that could alter a number a sweep
#: cell produces (an update rule, a sampler, the noise stream, a kernel's summation order, the
#: tuning rule...).  Comments, docs, refactors and new features leave it alone, and so leave every
#: cached result valid.  Part of every cache key (:func:`numerics_version`).
DPSIM_NUMERICS = 3
# 2: the O(R·b) Floyd sampler (batch-index stream floyd-v1) and the GLM paths of PAGAN/AdaDPS/PDP-SGD.
# 3: the small-d block kernel takes Adam's 1 − βᵗ from the chain's expression (last-bit changes).

#: Backends an experiment can run on (``dpsim.simulate(backend=...)``).
BACKENDS = ("numpy", "cupy")


@dataclass(frozen=True)
class Experiment:
    """One reproduced experiment.

    name : registry name (also the results folder name).
    title : one line for the report.
    presets : scale name → frozen config dataclass instance (must define ``seed``).
    run : ``run(config, cache) -> dict[label, Result]``; every result must come from ``cache``.
    figures : module names in :mod:`paper_figures` (``render`` + ``evaluate``) fed with the results.
    module : the experiment's module name.
    numerics : declared numerics version of the experiment's own code (part of the cache key):
        bump it when a change to ``run`` could change a cell's numbers without changing the config.
    """

    name: str
    title: str
    presets: Mapping[str, Any]
    run: Callable[[Any, "Cache"], dict]
    figures: tuple[str, ...]
    module: str
    numerics: int = 1

    def config(self, scale: str):
        """The frozen config of ``scale``; ``ValueError`` naming an unknown scale."""
        if scale not in self.presets:
            raise ValueError(
                f"unknown scale {scale!r} for experiment {self.name!r}; "
                f"known: {', '.join(self.presets)}"
            )
        return self.presets[scale]


@dataclass(frozen=True)
class Cell:
    """One sweep cell: a label (file name), a stable index (seed), ``compute(seed) -> Result`` and
    ``meta``, JSON data describing the cell (e.g. its method and ε) that is saved in the manifest
    (and as columns of the results table) so that figures read it instead of parsing the label.

    ``compute`` may run in another process (a Dask worker): it must be picklable by cloudpickle
    (closures are) and must not capture the :class:`Cache` (use :func:`cell_seed` for another
    cell's seed)."""

    label: str
    index: int
    compute: Callable[[np.random.SeedSequence], "dpsim.Result"]
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def cell_seed(seed: int, index: int) -> np.random.SeedSequence:
    """The seed of cell ``index`` of a sweep seeded with ``seed``:
    ``SeedSequence(seed, spawn_key=(index,))``, the ``index``-th child of ``SeedSequence(seed)``."""
    return np.random.SeedSequence(int(seed), spawn_key=(int(index),))


# ------------------------------------------------------------------------------------------------
# Keys and versions


def numerics_version(experiment: "Experiment | None" = None) -> str:
    """The declared numerics version of the code a cell of ``experiment`` runs:
    ``"dpsim=<DPSIM_NUMERICS>"`` plus ``";<name>=<Experiment.numerics>"``."""
    v = f"dpsim={DPSIM_NUMERICS}"
    if experiment is not None:
        v += f";{experiment.name}={int(experiment.numerics)}"
    return v


def package_versions() -> dict:
    """Versions of the interpreter and of the packages a result depends on (recorded in the
    manifest for provenance; not part of the key)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "dpsim": dpsim.__version__}
    for dist in ("numpy", "scipy", "numba", "dp-accounting", "matplotlib", "xarray", "dask",
                 "distributed", "cupy-cuda12x"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out


_COMMIT: list = []  # [the git commit of the running code, or None], filled on first use


def code_commit() -> str | None:
    """The git commit of the checkout this ``dpsim`` is imported from (``<sha>``, with
    ``-dirty`` when tracked files differ from it), or ``None`` outside a git checkout: saved
    with every computed cell (``commit``) for provenance (``dpsim gallery publish`` prints it);
    not part of the key.  Read once per process."""
    if not _COMMIT:
        import subprocess

        where = str(Path(dpsim.__file__).resolve().parent)
        try:
            sha = subprocess.run(["git", "-C", where, "rev-parse", "HEAD"], capture_output=True,
                                 text=True, timeout=30)
            dirty = subprocess.run(["git", "-C", where, "status", "--porcelain",
                                    "--untracked-files=no"], capture_output=True, text=True,
                                   timeout=60)
            ok = sha.returncode == 0 and dirty.returncode == 0
            _COMMIT.append(sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
                           if ok else None)
        except (OSError, subprocess.SubprocessError):
            _COMMIT.append(None)
    return _COMMIT[0]


def require_positive_ints(config, names) -> None:
    """Check that each attribute ``names`` of ``config`` (an experiment's config, in its
    ``__post_init__``) is a positive ``int`` (a ``bool`` is not): ``ValueError`` naming the
    first that is not, with its value."""
    for name in names:
        v = getattr(config, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {name}={v!r}")


def require_positive_grids(config, names, optional=()) -> None:
    """Check that each attribute ``names`` of ``config`` (a tuning grid of an experiment's
    config) is non-empty with every value ``> 0`` (NaN refused); one of ``optional`` may also be
    ``None``.  ``ValueError`` naming the first that is not, with its value."""
    for name in names:
        v = getattr(config, name)
        if v is None and name in optional:
            continue
        if not v or any(not x > 0 for x in v):
            raise ValueError(f"{name} must be non-empty and positive, got {name}={v!r}")


def require_nonnegative_finite(config, names) -> None:
    """Check that each attribute ``names`` of ``config`` is a finite real number ``>= 0`` (a
    ``bool`` is not): ``ValueError`` naming the first that is not, with its value."""
    for name in names:
        v = getattr(config, name)
        if (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                or v < 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {name}={v!r}")


def config_json(config) -> dict:
    """The config dataclass as plain JSON data (tuples become lists)."""
    if not dataclasses.is_dataclass(config):
        raise TypeError(f"an experiment config must be a dataclass, got {type(config).__name__}")
    return json.loads(json.dumps(dataclasses.asdict(config), sort_keys=True))


def cache_key(name: str, config, version: str, backend: str = "numpy") -> str:
    """16 hex digits of ``sha256(name, config, numerics version, backend)``."""
    blob = {"experiment": name, "config": config_json(config), "numerics": version}
    if backend != "numpy":  # numpy keys stay those of a run that never named a backend
        blob["backend"] = backend
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]


def check_backend(backend: str) -> str:
    """``backend`` if experiments can run on it here; ``ValueError`` naming it otherwise (an
    unknown name, or ``"cupy"`` without a usable CuPy and CUDA device)."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r} for experiments; known: {', '.join(BACKENDS)}")
    if backend != "numpy":
        dpsim.backend.get_namespace(backend)  # ValueError naming the backend if unusable here
    return backend


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _tmp_name(path: Path) -> Path:
    """A temporary name beside ``path`` unique to this process and call."""
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` to a unique temporary name, then rename it onto ``path``."""
    tmp = _tmp_name(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _atomic_write_text(path: Path, text: str) -> None:
    _atomic_write(Path(path), lambda tmp: tmp.write_text(text))


@contextmanager
def file_lock(path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``path`` (created if missing) for the ``with`` block:
    ``fcntl.flock`` on POSIX, ``msvcrt.locking`` on Windows.  Released when the process dies."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        try:
            import fcntl
        except ImportError:  # Windows
            import msvcrt

            while True:
                try:
                    msvcrt.locking(fh.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:
                    time.sleep(0.05)
            try:
                yield
            finally:
                fh.seek(0)
                msvcrt.locking(fh.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _try_lock(path: Path):
    """An open handle holding the exclusive lock on ``path``, or ``None`` if another process
    holds it (POSIX; on Windows always ``None``: prune then skips the folder)."""
    try:
        import fcntl
    except ImportError:
        return None
    fh = open(path, "a+")
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        return None
    return fh


# ------------------------------------------------------------------------------------------------
# Runners: where the cells a cache must compute run


def _worker_versions() -> dict:
    """What a worker must share with the process that owns the cache for its cells to be the
    cells the key names."""
    return {"dpsim": dpsim.__version__, "numerics": DPSIM_NUMERICS}


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
    Measured on a sparse ``dpsgd_logistic`` quick cell: about 28x as many minor page faults and
    1.6x the CPU time of the same cell without the variable.  This sets the two thresholds to
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


class InProcess:
    """Run cells one after another in this process."""

    workers = 1
    parallel = False

    def run(self, jobs: Sequence[tuple]):
        """Jobs ``(cell, seed[, checkpoint directory])``.  Yield ``[(cell, result, wall seconds,
        CPU seconds, timing)]`` per job, in order (a group of one: the cells a runner yields
        together are saved with one manifest update)."""
        expected = _worker_versions()
        for cell, seed, *partial in jobs:
            yield [(cell, *_run_cell(cell.compute, seed, expected, False, *partial))]

    def start(self) -> None:
        pass

    def stop(self, reason: BaseException | None = None) -> None:
        pass

    def close(self) -> None:
        pass

    def describe(self) -> str:
        return "in this process"


#: Dask settings of the workers of a local cluster (:class:`DaskRunner`), read when it starts.
#: ``pre-spawn-environ`` is Dask's default minus ``MALLOC_TRIM_THRESHOLD_`` (which makes the
#: step loop's allocations page-fault, see :func:`restore_malloc_thresholds`): one BLAS/OpenMP
#: thread per worker process, as a cell vectorizes over trials itself.  The rest removes CPU the
#: worker's own threads take from the cells (measured beside the cell's thread: 24% of its CPU
#: time with Dask's defaults, 1.6% with these): the statistical profiler (samples every
#: thread's stack every 10 ms) is off, and the event loop's blocked-loop monitor and the system
#: monitor (psutil) wake every second and every 5 s instead of every 20 ms and 500 ms.  Each
#: worker has dpsim imported as it starts (``preload``; about 2.5 s of CPU, paid once by the fork
#: server where there is one, see :data:`_FORKSERVER`), while this process is still building the
#: experiments' problems, rather than when its first cell arrives.
LOCAL_WORKER_CONFIG = {
    "distributed.worker.preload": ["dpsim.experiments.pipeline"],
    "distributed.nanny.pre-spawn-environ": {"MALLOC_TRIM_THRESHOLD_": None, "OMP_NUM_THREADS": 1,
                                            "MKL_NUM_THREADS": 1, "OPENBLAS_NUM_THREADS": 1},
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
}


#: Local workers are forked from a fork server that has imported dpsim and loaded its cached
#: kernels (:mod:`dpsim.experiments._warm`) where the platform has one (Linux, macOS): once for
#: all workers, rather than each worker importing and loading them itself.
_FORKSERVER = "forkserver" in multiprocessing.get_all_start_methods()


def _preload_forkserver() -> None:
    """Make the fork server (started with the first worker) import ``distributed`` and
    :mod:`dpsim.experiments._warm`.  Dask sets its own preload list on its first call of
    ``get_mp_context``; this call comes after it and replaces it.  A server already running in
    this process (an earlier cluster) keeps what it has."""
    from distributed.utils import get_mp_context

    get_mp_context().set_forkserver_preload(["distributed", "dpsim.experiments._warm"])


def _connect_scheduler(address: str, timeout: float):
    """A ``distributed.Client`` of the scheduler at ``address``, or one ``ConnectionError``
    naming it after at most about ``timeout`` seconds.  Dask's own ``timeout`` bounds the TCP
    connect only: a peer that accepts and then never answers its handshake (or answers with
    something else than Dask's protocol) would hold ``Client()`` forever, so the client is made
    in a daemon thread that this one stops waiting for."""
    from distributed import Client

    box: dict = {}

    def connect():
        try:
            box["client"] = Client(address, timeout=f"{timeout:g}s")
        except BaseException as exc:  # noqa: BLE001 - reported below, in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=connect, name="dpsim-dask-connect", daemon=True)
    thread.start()
    thread.join(timeout + 2.0)
    if thread.is_alive():
        raise ConnectionError(f"cannot connect to the Dask scheduler at {address!r}: no Dask "
                              f"handshake within {timeout:g} s (is a Dask scheduler listening "
                              f"there?)")
    if "error" in box:
        exc = box["error"]
        text = (str(exc).splitlines() or [""])[0] or type(exc).__name__
        raise ConnectionError(f"cannot connect to the Dask scheduler at {address!r} "
                              f"({type(exc).__name__}: {text})") from None
    return box["client"]


class DaskRunner:
    """Run cells as tasks on a ``dask.distributed`` cluster.

    workers : start a ``LocalCluster`` of this many single-threaded worker processes listening
        on 127.0.0.1 only (no dashboard), on first need, with :data:`LOCAL_WORKER_CONFIG`;
        closed by :meth:`close`.
    scheduler : instead, the address of an existing scheduler (``tcp://host:8786``); its workers
        must have the same dpsim installed (checked: a mismatch is an error naming both).

    A worker started with ``MALLOC_TRIM_THRESHOLD_`` set (Dask's default for ``dask worker``)
    gets glibc's allocator thresholds restored before its first cell
    (:func:`restore_malloc_thresholds`): otherwise it spends about 1.5x the CPU time per cell.

    The cells of one batch (one :meth:`Cache.run`) are pickled together and broadcast to the
    workers once; each worker unpickles them once (:func:`_run_batch_cell`), so objects the
    cells share -- a problem an experiment builds on first use -- are built once per worker.

    Tasks are submitted all at once and yielded as they finish; a worker that dies is replaced
    by its nanny and its task rerun (Dask's ``allowed-failures``), so a sweep survives losing a
    worker.  When every worker holding a batch's data dies at once the scheduler cancels the
    batch's tasks; its unfinished cells are then submitted again (at most :attr:`RESUBMITS`
    times).  A cell that raises stops the sweep with that error (cells already finished are
    saved).
    """

    parallel = True
    #: how many times a batch's unfinished cells are submitted again after the scheduler
    #: cancelled them because the batch's scattered data was lost (all workers holding it died
    #: at once, e.g. a machine suspended past the workers' time-to-live)
    RESUBMITS = 3
    #: Cells per Dask task: a batch of many cells is cut into about this many tasks per worker
    #: (:meth:`_chunks`), at most :attr:`MAX_CELLS_PER_TASK` cells each.  Each task costs the
    #: scheduler, this process and a worker a few milliseconds of CPU (measured: about 6 ms here
    #: and 3 ms on the worker per task), which short cells (0.1 s: ``ctcdp_quadratic``) feel;
    #: a batch of few cells keeps one cell per task, so long cells still spread over the workers.
    TASKS_PER_WORKER = 8
    MAX_CELLS_PER_TASK = 16

    def __init__(self, workers: int | None = None, scheduler: str | None = None):
        if scheduler is not None and workers is not None:
            raise ValueError("give either workers or scheduler, not both")
        if scheduler is None:
            if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
                raise ValueError(f"workers must be a positive integer, got workers={workers!r}")
        self.n_workers = None if workers is None else int(workers)
        self.scheduler = scheduler
        self._cluster = None
        self._client = None
        self._scheduler_error: ConnectionError | None = None
        self._lock = threading.Lock()      # one cluster, whichever thread asks first
        self._pending: set = set()         # futures not yet collected, over every thread's batch
        self._stopped: BaseException | None = None
        self._starter: threading.Thread | None = None
        self._shared = _SharedObjects()    # objects' numbers across this runner's batches
        self._phases = threading.local()   # batches submitted by each thread (its priority)
        self._setup = threading.Semaphore(1)  # see setup_turn
        self._setup_held = threading.local()

    @property
    def workers(self) -> int | None:
        return self.n_workers

    @property
    def client(self):
        """The ``distributed.Client`` (starting the local cluster or connecting on first use;
        thread-safe: several experiments' threads share one cluster)."""
        with self._lock:
            if self._stopped is not None:
                raise RuntimeError("this Dask runner was stopped") from self._stopped
            if self._client is None:
                self._client = self._connect()
            return self._client

    def _connect(self):
        import logging

        from distributed import Client, LocalCluster

        if self.scheduler is not None:
            if self._scheduler_error is not None:  # the early start() already waited for it
                raise ConnectionError(*self._scheduler_error.args)
            try:
                return _connect_scheduler(self.scheduler, SCHEDULER_CONNECT_TIMEOUT)
            except ConnectionError as exc:
                self._scheduler_error = exc
                raise
        import dask

        config = dict(LOCAL_WORKER_CONFIG)
        if _FORKSERVER:
            config["distributed.worker.multiprocessing-method"] = "forkserver"
        with dask.config.set(config):
            if _FORKSERVER:
                _preload_forkserver()
            # Every server of the cluster on 127.0.0.1: the scheduler's and each nanny's and
            # worker's comm port, and the small HTTP servers (health, metrics) that scheduler
            # and workers start even without a dashboard -- the scheduler's on a free port
            # rather than Dask's default 8787.  No dashboard.
            self._cluster = LocalCluster(
                n_workers=self.n_workers, threads_per_worker=1, processes=True,
                host="127.0.0.1", dashboard_address=None, worker_dashboard_address=None,
                memory_limit=0, silence_logs=logging.ERROR,
                scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"})
        return Client(self._cluster)

    def start(self) -> None:
        """Start the cluster (or connect) in a background thread now, so that it comes up while
        this process does the experiments' own work before their first cells (building
        problems, calibrating σ); the first :meth:`run` waits for it.  Errors surface there."""
        if self._client is None and self._starter is None:
            def warm():
                try:
                    self.client  # noqa: B018
                except Exception:  # reported by the first run, which connects again
                    pass

            self._starter = threading.Thread(target=warm, name="dpsim-dask-start", daemon=True)
            self._starter.start()

    @contextmanager
    def setup_turn(self) -> Iterator[None]:
        """Hold the set-up turn for an experiment's thread (:func:`experiments._run_all`): from
        its start until its first batch is pickled (:meth:`run`; or the block ends), one
        experiment at a time builds its problems, solves their optima and calibrates its σ.
        Several experiments' set-ups at once share this process's one interpreter lock (and
        with it the event loop starting the cluster), so each would submit its first cells
        only once nearly all had finished their set-up; one at a time, the first experiment's
        cells reach the workers as soon as the cluster is up, and the next set-up overlaps
        them.  Later work of the threads (storing cells, tuning) is not serialized."""
        self._setup.acquire()
        self._setup_held.on = True
        try:
            yield
        finally:
            self._end_setup_turn()

    def _end_setup_turn(self) -> None:
        if getattr(self._setup_held, "on", False):
            self._setup_held.on = False
            self._setup.release()

    def run(self, jobs: Sequence[tuple]):
        """Submit every job, ``(cell, seed[, checkpoint directory])``; yield ``[(cell, result, wall seconds, CPU seconds, timing, file
        bytes)]``, the cells that have finished since the last group (one manifest update per
        group; the worker made the cell's file, :func:`_cell_file_bytes`).

        Several threads may call it at once (one per experiment): their cells share the
        cluster, each thread collecting its own.  A thread's ``k``-th batch runs at Dask
        priority ``k``: the cells of an experiment's later phase (its evaluation, made from its
        tuning) go before the first-phase cells still queued, so an experiment's chain of
        phases keeps moving and no long chain is left for the end."""
        from distributed import as_completed
        from distributed.client import FutureCancelledError

        jobs = list(jobs)
        if not jobs:
            self._end_setup_turn()
            return
        expected = _worker_versions()
        run_id = uuid.uuid4().hex[:8]
        # One pickle for the whole batch, sent once to every worker (not once per task).  Made
        # before waiting for the cluster: solving the problems' optima here overlaps its start.
        pickled = _dumps_cell([job[0].compute for job in jobs], self._shared)
        self._end_setup_turn()  # set-up done: the next experiment's may start
        client = self.client
        phase = getattr(self._phases, "n", 0)
        self._phases.n = phase + 1
        todo = dict(enumerate(jobs))  # batch position -> job, until its cell is collected
        for attempt in range(1 + self.RESUBMITS):
            if attempt:  # the nannies replace dead workers; scatter needs one to be up
                client.wait_for_workers(1, timeout=600)
            blob = client.scatter(pickled, broadcast=True, hash=False)
            futures = {}
            with self._lock:
                if self._stopped is not None:
                    raise RuntimeError("this Dask runner was stopped") from self._stopped
                for chunk in self._chunks(list(todo), client):
                    cell = todo[chunk[0]][0]
                    fut = client.submit(_run_batch_cells, blob, run_id,
                                        [(i, *todo[i][1:]) for i in chunk], expected,
                                        pure=False, priority=phase,
                                        key=f"dpsim-cells-{cell.label}+{len(chunk) - 1}-{run_id}-{attempt}")
                    futures[fut] = chunk
                self._pending.update(futures)
            lost = None
            try:
                for done in as_completed(list(futures)).batches():
                    group, error = [], None
                    for fut in done:
                        try:
                            outs = fut.result()
                        except FutureCancelledError as err:
                            # cancelled by stop(), or by the scheduler when every worker holding
                            # the batch's data died at once: resubmitted below unless stopped
                            lost = lost or err
                            continue
                        except BaseException as err:  # the others of the group are saved first
                            error = error or err
                            continue
                        futures.pop(fut)
                        for i, out in outs:
                            if isinstance(out, BaseException):
                                error = error or out
                            else:
                                group.append((todo.pop(i)[0], *out))
                    with self._lock:
                        self._pending.difference_update(done)
                    if group:
                        yield group
                    if error is not None:
                        raise error
            finally:
                if futures:  # stopped early (an error, Ctrl-C, lost data): free the cluster
                    with self._lock:
                        self._pending.difference_update(futures)
                    client.cancel(list(futures))
            if not todo:
                return
            if self._stopped is not None:
                raise RuntimeError("this Dask runner was stopped") from self._stopped
            if lost is None:  # pragma: no cover - as_completed ends only when all are done
                break
        raise RuntimeError(
            f"{len(todo)} cell(s) of this batch were cancelled by the Dask scheduler in "
            f"{1 + self.RESUBMITS} submissions (every worker holding the batch's data died each "
            f"time); the cells already finished are saved: run again to continue") from lost

    def _chunks(self, positions: list, client) -> list:
        """``positions`` (a batch's cells to run) in consecutive chunks, one Dask task each:
        about :attr:`TASKS_PER_WORKER` tasks per worker, at most :attr:`MAX_CELLS_PER_TASK`
        cells per task, one cell per task for a batch of fewer than twice as many cells as
        that many tasks."""
        workers = self.n_workers
        if workers is None:  # an existing cluster: as many workers as it has now
            try:
                workers = len(client.scheduler_info()["workers"])
            except Exception:  # noqa: BLE001 - any answer is only a granularity
                workers = 1
        size = max(1, min(self.MAX_CELLS_PER_TASK,
                          len(positions) // (self.TASKS_PER_WORKER * max(1, workers))))
        return [positions[k:k + size] for k in range(0, len(positions), size)]

    def stop(self, reason: BaseException | None = None) -> None:
        """Cancel every cell submitted and not yet collected, by any thread, and refuse new
        ones: the other experiments of a ``reproduce`` stop when one of them fails."""
        with self._lock:
            self._stopped = reason if reason is not None else RuntimeError("stopped")
            pending, self._pending = list(self._pending), set()
            client = self._client
        if client is not None and pending:
            client.cancel(pending)

    def close(self) -> None:
        if self._starter is not None:
            self._starter.join()
            self._starter = None
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def describe(self) -> str:
        if self.scheduler is not None:
            return f"on the Dask cluster at {self.scheduler}"
        return f"on a local Dask cluster of {self.n_workers} worker processes"


def default_workers() -> int:
    """Every core this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def make_runner(workers: int | None = None, scheduler: str | None = None):
    """The runner for ``workers``/``scheduler``: ``InProcess`` for one worker (no cluster is
    started), else a :class:`DaskRunner` (``workers=None``: every core)."""
    if scheduler is not None:
        if workers is not None:
            raise ValueError(f"give --workers or --scheduler, not both (workers={workers!r}, "
                             f"scheduler={scheduler!r})")
        if not isinstance(scheduler, str) or not scheduler.strip():
            raise ValueError(f"scheduler must be an address such as tcp://host:8786, got {scheduler!r}")
        return DaskRunner(scheduler=scheduler)
    if workers is None:
        workers = default_workers()
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got workers={workers!r}")
    return InProcess() if workers == 1 else DaskRunner(workers=int(workers))


# ------------------------------------------------------------------------------------------------
# Progress


class _Progress:
    """Progress over the cells of one ``Cache.run``: a tqdm bar on a terminal (or when
    ``progress=True``), one plain line per finished cell on stderr otherwise (``progress=None``
    and stderr not a terminal), nothing for ``progress=False``."""

    def __init__(self, mode: bool | None, desc: str, total: int, reused: int):
        self.bar = None
        self.lines = False
        self.desc, self.total, self.done = desc, total, reused
        tty = sys.stderr.isatty()
        if mode is True or (mode is None and tty):
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=reused, desc=desc, unit="cell", leave=False,
                            file=sys.stderr)
        elif mode is None:
            self.lines = True
            if reused:
                self._say(f"{desc}: {reused}/{total} cells reused from the cache")

    def _say(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def tick(self, label: str, wall: float) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(f"{label} {wall:.1f}s", refresh=False)
            self.bar.update(1)
        elif self.lines:
            self._say(f"{self.desc}: {self.done}/{self.total} {label} computed in {wall:.2f} s")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ------------------------------------------------------------------------------------------------
# The cache


class Cache:
    """Per-cell results cache of one experiment at one scale and one key (module docstring).

    ``cache.run(cells)`` returns ``{label: Result}``, loading valid cached cells and computing
    the others through ``runner`` (:class:`InProcess` by default), saving each as it finishes.
    ``cache.note(key, value)`` stores derived JSON data (e.g. the learning rate chosen per
    setting) in the manifest.  ``cache.path(label)`` is a cell's file; ``cache.root`` the key's
    folder (``<scale_dir>/<key>``).  Counters ``computed`` / ``reused`` say what happened.

    scale_dir : ``results/<experiment>/<scale>``.
    version : the numerics version (:func:`numerics_version`).
    backend : the backend cells run on (part of the key; handed to the experiments through
        :attr:`simulate_options`).
    """

    def __init__(self, scale_dir, *, experiment: str, scale: str, config, version: str,
                 backend: str = "numpy", force: bool = False, progress: bool | None = None,
                 runner=None):
        self.scale_dir = Path(scale_dir)
        self.experiment = experiment
        self.scale = scale
        self.config = config
        self.seed = int(getattr(config, "seed"))
        self.version = version
        self.backend = backend
        self.key = cache_key(experiment, config, version, backend)
        self.root = self.scale_dir / self.key
        self.force = bool(force)
        self.progress = progress
        self.runner = runner if runner is not None else InProcess()
        self.computed: list[str] = []
        self.reused: list[str] = []
        self.used: dict[str, dict] = {}   # label -> table rows of every cell of this run
        self._indices: dict[int, str] = {}
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # one line naming the results folder, not a traceback
            raise ValueError(f"cannot create the results folder {str(self.root)!r} "
                             f"({exc.strerror or exc}); pass a writable --results") from None
        self.manifest: dict = {}
        self._stamp = None  # (inode, size, mtime) of the manifest this cache wrote last
        self._text = _ManifestText()
        self._update(lambda m: None)

    def __reduce__(self):
        raise TypeError("a Cache cannot be pickled: a cell's compute must not capture the cache "
                        "(it may run on a Dask worker); use pipeline.cell_seed(seed, index)")

    @property
    def show_progress(self) -> bool:
        """Whether simulations show their own progress bars: only in this process and on a
        terminal (``progress=None``) or when asked (``progress=True``)."""
        if getattr(self.runner, "parallel", False):
            return False
        return bool(self.progress) if self.progress is not None else sys.stderr.isatty()

    @property
    def simulate_options(self) -> dict:
        """Keyword arguments every ``dpsim.simulate`` of a cell takes: ``progress``, ``backend``."""
        return {"progress": self.show_progress, "backend": self.backend}

    # -- manifest ------------------------------------------------------------------------------
    def _fresh_manifest(self) -> dict:
        return {
            "format": _FORMAT,
            "experiment": self.experiment,
            "scale": self.scale,
            "key": self.key,
            "numerics_version": self.version,
            "backend": self.backend,
            "config": config_json(self.config),
            "seed": self.seed,
            "seed_rule": "cell i runs with numpy.random.SeedSequence(seed, spawn_key=(i,))",
            "versions": package_versions(),
            "created": _now(),
            "cells": {},
            "notes": {},
        }

    def _read_manifest(self) -> dict | None:
        path = self.root / _MANIFEST
        try:
            m = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(m, dict) or m.get("format") != _FORMAT or m.get("key") != self.key:
            return None
        if not isinstance(m.get("cells"), dict) or not isinstance(m.get("notes"), dict):
            return None
        return m

    def _update(self, change: Callable[[dict], None]) -> None:
        """Re-read the manifest, apply ``change`` and write it back, under the key's lock (so
        concurrent processes merge their updates instead of overwriting each other's)."""
        path = self.root / _MANIFEST
        with file_lock(self.root / _LOCK):
            m = None
            if self._stamp is not None and self._stamp == _stamp(path):
                m = self.manifest  # the file is the one this cache wrote last: no re-read
            if m is None:
                m = self._read_manifest() or self._fresh_manifest()
            self._stamp = None
            change(m)
            _atomic_write_text(path, self._text(m))
            self._stamp = _stamp(path)
        self.manifest = m

    def _refresh(self) -> None:
        """See what other processes wrote to the manifest since this cache wrote it last (a
        re-read and a merge, :meth:`_update`); nothing to do while the file is still the one
        this cache wrote."""
        if self._stamp is None or self._stamp != _stamp(self.root / _MANIFEST):
            self._update(lambda m: None)

    # -- cells ---------------------------------------------------------------------------------
    def cell_seed(self, index: int) -> np.random.SeedSequence:
        """The seed of cell ``index``: ``SeedSequence(config.seed, spawn_key=(index,))``."""
        return cell_seed(self.seed, index)

    def path(self, label: str) -> Path:
        return self.root / f"{label}.npz"

    def partial(self, label: str) -> Path:
        """The checkpoint directory of a cell being computed (``<root>/partial/<label>``; removed
        once the cell is saved): its simulations resume from there after a kill."""
        return self.root / _PARTIAL / label

    def _check(self, cell: Cell) -> None:
        if not _LABEL.match(cell.label):
            raise ValueError(f"cell label must match {_LABEL.pattern}, got label={cell.label!r}")
        if isinstance(cell.index, bool) or not isinstance(cell.index, (int, np.integer)) or cell.index < 0:
            raise ValueError(f"cell index must be a non-negative integer, got index={cell.index!r}")
        prev = self._indices.get(int(cell.index))
        if prev is not None and prev != cell.label:
            raise ValueError(f"cells {prev!r} and {cell.label!r} share index {cell.index}")
        self._indices[int(cell.index)] = cell.label

    def _load_valid(self, cell: Cell):
        entry = self.manifest["cells"].get(cell.label)
        path = self.path(cell.label)
        if entry is None or entry.get("index") != int(cell.index) or not path.exists():
            return None
        try:
            if entry.get("sha256") != _sha256(path):
                return None
            return dpsim.load(path)
        except Exception:  # unreadable or corrupt file: recompute
            return None

    def _store(self, finished: Sequence[tuple]) -> None:
        """Save finished cells, ``[(cell, result, wall, cpu, meta, timing, data)]``: each file,
        then one manifest update listing them all (a cell is listed only once its file is
        whole).  ``data``: the file's bytes when a worker made them (:func:`_cell_file_bytes`;
        written as they are and hashed in memory), else ``None`` (saved here)."""
        entries = {}
        try:
            for cell, res, wall, cpu, meta, timing, data in finished:
                if not isinstance(res, dpsim.Result):
                    raise TypeError(f"cell {cell.label!r} returned {type(res).__name__}, "
                                    "expected dpsim.Result")
                path = self.path(cell.label)
                if data is None:
                    _atomic_write(path, lambda tmp: res.save(tmp, format="npz"))
                    digest = _sha256(path)
                else:
                    _atomic_write(path, lambda tmp: tmp.write_bytes(data))
                    digest = hashlib.sha256(data).hexdigest()
                entries[cell.label] = {
                    "index": int(cell.index), "file": path.name, "sha256": digest,
                    "wall_time_s": round(wall, 3), "cpu_time_s": round(cpu, 3),
                    "finished": _now(), "meta": meta, **dict(timing or {})}
                commit = code_commit()
                if commit is not None:
                    entries[cell.label]["commit"] = commit
        finally:
            if entries:
                self._update(lambda m: m["cells"].update(entries))
                self.computed.extend(entries)
                for label in entries:  # saved: its checkpoints are no longer needed
                    shutil.rmtree(self.partial(label), ignore_errors=True)

    def get(self, cell: Cell):
        """Load ``cell`` from the cache if valid, else compute and save it; returns the Result."""
        return self.run([cell])[cell.label]

    def run(self, cells: Sequence[Cell], *, desc: str | None = None) -> dict:
        """Run (or load) ``cells``; ``{label: Result}`` in the order of ``cells``.

        Valid cached cells are loaded; the others go to the runner together (in parallel on a
        Dask runner), each saved as soon as it finishes."""
        cells = list(cells)
        labels = [c.label for c in cells]
        if len(set(labels)) != len(labels):
            raise ValueError(f"duplicate cell labels in {labels}")
        for c in cells:
            self._check(c)
        metas = {c.label: json.loads(json.dumps(dict(c.meta))) for c in cells}
        self._refresh()  # see cells other processes finished meanwhile
        out, pending, meta_fix = {}, [], {}
        for c in cells:
            res = None if self.force else self._load_valid(c)
            if res is None:
                pending.append(c)
                continue
            if self.manifest["cells"][c.label].get("meta", {}) != metas[c.label]:
                meta_fix[c.label] = metas[c.label]
            out[c.label] = res
            self.reused.append(c.label)
        if meta_fix:
            def fix(m):
                for lab, meta in meta_fix.items():
                    if lab in m["cells"]:
                        m["cells"][lab]["meta"] = meta
            self._update(fix)
        bar = _Progress(self.progress, desc or f"{self.experiment} [{self.scale}]", len(cells),
                        len(cells) - len(pending))
        try:
            for group in self.runner.run([(c, self.cell_seed(c.index), str(self.partial(c.label)))
                                          for c in pending]):
                # (cell, result, wall, cpu, timing[, file bytes made by the worker])
                group = [(*g[:5], g[5] if len(g) > 5 else None) for g in group]
                self._store([(cell, res, wall, cpu, metas[cell.label], timing, data)
                             for cell, res, wall, cpu, timing, data in group])
                for cell, res, wall, *_ in group:
                    out[cell.label] = res
                    bar.tick(cell.label, wall)
        finally:
            bar.close()
        for c in cells:
            self.used[c.label] = _cell_rows(c.label, int(c.index), metas[c.label], out[c.label])
        return {lab: out[lab] for lab in labels}

    def note(self, key: str, value) -> None:
        """Store derived JSON data in the manifest (``notes[key]``)."""
        value = json.loads(json.dumps(value))
        self._update(lambda m: m["notes"].__setitem__(key, value))

    def finish(self, labels: Sequence[str], run_wall: float | None = None,
               run_start: float | None = None) -> None:
        """Mark the run complete (``results``: the labels ``run`` returned), write the results
        table and point ``<scale_dir>/LATEST`` at this key.  ``run_wall``: the wall seconds of
        the experiment's ``run`` (its simulation phase: cells computed or loaded, tuning,
        calibration; no figures), saved as ``run_wall_s`` with ``runner`` (where cells ran);
        ``run_start``: when it started (Unix seconds), saved as ``run_t_start``/``run_t_stop``
        (with every cell's ``t_start``/``t_stop``/``worker``: the run's timeline)."""
        labels = list(labels)

        def done(m):
            m["complete"] = True
            m["results"] = labels
            m["finished"] = _now()
            if run_wall is not None:
                m["run_wall_s"] = round(float(run_wall), 3)
                m["runner"] = self.runner.describe()
                if run_start is not None:
                    m["run_t_start"] = round(float(run_start), 3)
                    m["run_t_stop"] = round(float(run_start) + float(run_wall), 3)

        self._update(done)
        write_table(self.root / _TABLE, self.used, labels,
                    {"experiment": self.experiment, "scale": self.scale, "key": self.key,
                     "numerics_version": self.version, "backend": self.backend,
                     "config": json.dumps(config_json(self.config), sort_keys=True)})
        with file_lock(self.scale_dir / _LOCK):
            _atomic_write_text(self.scale_dir / _LATEST, self.key + "\n")


class _ManifestText:
    """The JSON text of a manifest, for :meth:`Cache._update` (which writes it once per group
    of finished cells): the data of ``json.dumps(manifest, sort_keys=True)``, laid out with one
    line per top-level key and one per cell, each part written by json's C encoder (``indent``
    would select its pure-Python encoder) and reused while it is unchanged (the same object,
    equal to a copy taken when it was encoded).  So an update costs about the size of what
    changed plus a join, not a re-encoding of every cell (with hundreds of cells that made a
    sweep's manifest writes grow with the square of its cells)."""

    def __init__(self):
        self._memo: dict = {}

    def _encode(self, memo: dict, slot, value) -> str:
        hit = self._memo.get(slot)
        if hit is not None and hit[0] is value and hit[1] == value:
            text = hit[2]
        else:
            text = json.dumps(value, sort_keys=True)
            hit = (value, copy.deepcopy(value), text)
        memo[slot] = hit
        return text

    def __call__(self, m: Mapping) -> str:
        memo: dict = {}
        lines = []
        for key in sorted(m):
            value = m[key]
            name = json.dumps(key)
            if key == "cells" and isinstance(value, dict) and value:
                cells = ",\n".join(f"  {json.dumps(lab)}: {self._encode(memo, ('cell', lab), value[lab])}"
                                   for lab in sorted(value))
                lines.append(f" {name}: {{\n{cells}\n }}")
            else:
                lines.append(f" {name}: {self._encode(memo, ('key', key), value)}")
        self._memo = memo  # parts no longer in the manifest are forgotten
        return "{\n" + ",\n".join(lines) + "\n}\n"


def _stamp(path: Path):
    """``(inode, size, mtime_ns)`` of ``path`` (``None`` if missing): every manifest write is a
    rename of a new file, so another process's write changes it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# ------------------------------------------------------------------------------------------------
# The results table


def _cell_rows(label: str, index: int, meta: dict, res) -> dict:
    """Columns (name -> list of R values) of one cell's rows: one row per trial."""
    R = int(res.trials)
    cfg = res.config
    cols: dict[str, list] = {"cell": [label] * R, "cell_index": [index] * R,
                             "trial": list(range(R))}
    for k, v in meta.items():
        cols[f"meta_{k}"] = [v] * R
    cols["optimizer"] = [str(cfg.get("optimizer", ""))] * R
    problem = cfg.get("problem", {})
    cols["problem"] = [str(problem.get("name", "")) if isinstance(problem, dict) else str(problem)] * R
    for k in ("steps", "batch_size", "sampling", "backend", "dtype"):
        if k in cfg:
            cols[k] = [cfg[k]] * R
    for k, v in cfg.get("hyperparameters", {}).items():
        cols[f"hp_{k}"] = list(v) if isinstance(v, list) and len(v) == R else [v] * R
    if res.steps is not None and len(res.steps):
        cols["final_step"] = [int(res.steps[-1])] * R
        for k in dpsim.results.METRICS:
            a = getattr(res, k)
            if a is not None:
                cols[f"final_{k}"] = [float(x) for x in np.asarray(a)[-1]]
        for k, a in res.records.items():
            a = np.asarray(a)
            if a.ndim == 2 and a.shape[1] == R:
                cols[f"final_probe_{k}"] = [float(x) for x in a[-1]]
    if res.mean_batch_size is not None:
        mb = np.asarray(res.mean_batch_size, dtype=float)
        cols["mean_batch_size"] = list(mb) if mb.shape == (R,) else [float(mb.mean())] * R
    return cols


def _column(values: list):
    """One table column as a NumPy array netCDF can hold: float (NaN for missing), int, or str
    (JSON for lists and dicts, "" for missing)."""
    present = [v for v in values if v is not None]
    kinds = set(map(type, present))  # the tests below look at each distinct type once

    def all_of(classes, but=None) -> bool:
        return bool(kinds) and all(issubclass(k, classes) and not (but and issubclass(k, but))
                                   for k in kinds)

    if all_of((bool, np.bool_)):
        return np.array([-1 if v is None else int(v) for v in values], dtype=np.int32)
    if all_of((int, np.integer), but=bool):
        if len(present) == len(values) and all(-2**31 < int(v) < 2**31 for v in present):
            return np.array(values, dtype=np.int32)
        return np.array([np.nan if v is None else float(v) for v in values])
    if all_of((int, float, np.integer, np.floating), but=bool):
        return np.array([np.nan if v is None else float(v) for v in values])
    return np.array(["" if v is None else v if isinstance(v, str) else json.dumps(v)
                     for v in values], dtype=str)


def _column_of_parts(parts: Sequence[list]):
    """:func:`_column` of the concatenated ``parts`` (one list per cell), the same array, made
    part by part by NumPy's converters where a part's values allow it (no ``None``; strings or
    numbers): a sweep with folded grids has hundreds of thousands of rows."""
    kinds: set = set()
    for p in parts:
        kinds.update(map(type, p))
    kinds.discard(type(None))
    if not kinds or any(None in p for p in parts if p):
        return _column([v for p in parts for v in p])

    def all_of(classes, but=None) -> bool:
        return all(issubclass(k, classes) and not (but and issubclass(k, but)) for k in kinds)

    if all_of(str):
        return np.concatenate([np.array(p, dtype=str) for p in parts]) if parts else _column([])
    if kinds == {int}:
        try:
            a = np.concatenate([np.array(p, dtype=np.int64) for p in parts])
        except OverflowError:
            a = None
        if a is not None and (a.size == 0 or (a.min() > -2**31 and a.max() < 2**31)):
            return a.astype(np.int32)
        return _column([v for p in parts for v in p])
    if kinds <= {float, np.float64, int}:
        # Python floats (and ints) as float64: what float(v) gives, value by value
        return np.concatenate([np.array(p, dtype=np.float64) for p in parts])
    return _column([v for p in parts for v in p])


def results_table(used: Mapping[str, dict], results: Sequence[str] = ()):
    """The ``xarray.Dataset`` of the results table: dimension ``row`` (one per cell and trial);
    columns ``cell``, ``cell_index``, ``trial``, ``is_result`` (1 for the cells the experiment
    returns, 0 for intermediate ones such as tuning cells), ``meta_*`` (the cell's metadata),
    ``optimizer``, ``problem``, ``steps``, ``batch_size``, ``sampling``, ``backend``, ``dtype``,
    ``hp_*`` (hyperparameters, per trial when folded), ``final_step`` and ``final_*`` (every
    recorded metric and probe at the last record step)."""
    import xarray as xr

    names: list[str] = []
    for cols in used.values():
        names += [k for k in cols if k not in names]
    n = {lab: len(cols["trial"]) for lab, cols in used.items()}
    data = {}
    res_set = set(results)
    for name in names:
        parts = [cols.get(name, [None] * n[lab]) for lab, cols in used.items()]
        data[name] = ("row", _column_of_parts(parts))
    data["is_result"] = ("row", np.array([int(lab in res_set) for lab, cols in used.items()
                                          for _ in range(n[lab])], dtype=np.int32))
    return xr.Dataset(data)


def write_table(path: Path, used: Mapping[str, dict], results: Sequence[str], attrs: dict) -> None:
    """Write the results table (:func:`results_table`) to ``path`` as netCDF (scipy engine)."""
    ds = _ascii_as_bytes(results_table(used, results))
    ds.attrs.update({k: str(v) for k, v in attrs.items()})
    _atomic_write(Path(path), lambda tmp: ds.to_netcdf(tmp, engine="scipy"))


def _ascii_as_bytes(ds):
    """``ds`` with each all-ASCII text column as the UTF-8 bytes xarray would write for it (NumPy
    converts in C; xarray encodes a text column string by string, ~1 s per 300 000 rows), marked
    ``_Encoding = "utf-8"`` exactly as xarray marks it, so the file is byte for byte the one
    xarray writes from the text column and opens as text.  Columns with other characters are left
    to xarray."""
    for name, var in ds.data_vars.items():
        if var.dtype.kind != "U":
            continue
        try:
            raw = var.values.astype("S")
        except UnicodeEncodeError:
            continue
        ds[name] = (var.dims, raw, {**var.attrs, "_Encoding": "utf-8"})
    return ds


# ------------------------------------------------------------------------------------------------
# Pruning stale results


def prune(results_dir, experiments: dict, *, dry_run: bool = False) -> list[Path]:
    """Delete results no current key names; returns what was (or, ``dry_run``, would be) deleted.

    Under ``results_dir/<experiment>/<scale>/`` a key folder is kept when its key is the current
    key of that registered experiment and scale for some backend (:data:`BACKENDS`); other key
    folders holding a dpsim manifest are deleted, unless a process holds their lock (in use).
    Also deleted: files of the old cache layout (a ``manifest.json`` of format
    ``dpsim-experiment-cache-1`` directly in the scale folder, and the cells it lists) and
    temporary files left by killed processes.  Folders of unregistered experiments and files
    dpsim did not write are left alone.  ``experiments``: the registered experiments,
    ``{name: Experiment}`` (``dpsim.experiments`` passes its registry; the pipeline does not import
    the package that imports it).
    """

    results_dir = Path(results_dir)
    gone: list[Path] = []
    if not results_dir.is_dir():
        return gone

    def remove(p: Path):
        gone.append(p)
        if dry_run:
            return
        if p.is_dir():
            import shutil

            shutil.rmtree(p)
        elif p.exists():
            p.unlink()

    for name, exp in experiments.items():
        for scale_dir in sorted(p for p in (results_dir / name).glob("*") if p.is_dir()):
            scale = scale_dir.name
            current = set()
            if scale in exp.presets:
                v = numerics_version(exp)
                current = {cache_key(name, exp.presets[scale], v, b) for b in BACKENDS}
            old = scale_dir / _MANIFEST
            if old.exists():
                try:
                    m = json.loads(old.read_text())
                except ValueError:
                    m = None
                if isinstance(m, dict) and m.get("format") in _OLD_FORMATS:
                    for entry in m.get("cells", {}).values():
                        f = scale_dir / str(entry.get("file", ""))
                        if f.suffix == ".npz" and f.parent == scale_dir and f.exists():
                            remove(f)
                    remove(old)
            for tmp in sorted(scale_dir.glob(".*.tmp")):
                if not _owner_alive(tmp):
                    remove(tmp)
            for key_dir in sorted(p for p in scale_dir.iterdir() if p.is_dir()):
                if not _KEY.match(key_dir.name) or not (key_dir / _MANIFEST).exists():
                    continue
                if key_dir.name in current:
                    for tmp in sorted([*key_dir.glob(".*.tmp"), *key_dir.glob(f"{_PARTIAL}/*/.*.tmp")]):
                        if not _owner_alive(tmp):
                            remove(tmp)
                    continue
                fh = _try_lock(key_dir / _LOCK)
                if fh is None:
                    continue
                try:
                    remove(key_dir)
                finally:
                    fh.close()
    return gone


def _owner_alive(tmp: Path) -> bool:
    """Whether the process that named temporary file ``tmp`` (``.<name>.<pid>.<hex>.tmp``) runs."""
    parts = tmp.name.split(".")
    try:
        pid = int(parts[-3])
    except (IndexError, ValueError):
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ------------------------------------------------------------------------------------------------
# Saved results, as figures read them


class Saved(Mapping):
    """The saved results of one experiment at one scale, as figures read them.

    A mapping ``label -> .npz path`` (what ``render``/``evaluate`` receive) that also reads, once
    per instance, each :class:`dpsim.Result` (:meth:`result`), the ``manifest.json`` beside the
    files (:attr:`manifest`, :attr:`notes`), the metadata saved with every cell (:meth:`meta`) and
    the tuning choices (:meth:`selection`, see :mod:`experiments.tuning`).  :func:`render_figures`
    hands one instance to every figure of an experiment, so they share the loads; a figure called
    with a plain mapping wraps it with :meth:`of`.
    """

    def __init__(self, results: Mapping[str, Any], manifest: Mapping | None = None):
        self._paths = {str(k): Path(v) for k, v in results.items()}
        self._manifest = None if manifest is None else dict(manifest)
        self._results: dict = {}
        self._memo: dict = {}

    @classmethod
    def of(cls, results) -> "Saved":
        """``results`` itself if it is a :class:`Saved`, else a new one over the mapping."""
        return results if isinstance(results, cls) else cls(results)

    @classmethod
    def from_dir(cls, root) -> "Saved":
        """The results listed in ``root/manifest.json`` (a finished run's key folder); ``root``
        may also be a scale folder (``results/<experiment>/<scale>``): its ``LATEST`` run."""
        root = latest_dir(root)
        manifest = json.loads((root / _MANIFEST).read_text())
        if "results" not in manifest:
            raise ValueError(f"{root} holds an unfinished run (no 'results' in its manifest); "
                             "rerun `dpsim reproduce`")
        return cls({label: root / f"{label}.npz" for label in manifest["results"]}, manifest)

    def __getitem__(self, label: str) -> Path:
        return self._paths[label]

    def __iter__(self):
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def result(self, label: str):
        """The :class:`dpsim.Result` of ``label`` (loaded once)."""
        if label not in self._results:
            self._results[label] = dpsim.load(self._paths[label])
        return self._results[label]

    @property
    def manifest(self) -> dict:
        """The manifest beside the result files (``{}`` when there is none)."""
        if self._manifest is None:
            self._manifest = {}
            for folder in sorted({p.parent for p in self._paths.values()}):
                path = folder / _MANIFEST
                if path.exists():
                    self._manifest = json.loads(path.read_text())
                    break
        return self._manifest

    @property
    def notes(self) -> dict:
        return self.manifest.get("notes", {})

    def meta(self, label: str) -> dict:
        """The metadata the experiment saved with cell ``label``; ``KeyError`` naming it if none."""
        entry = self.manifest.get("cells", {}).get(label)
        if entry is None or "meta" not in entry:
            raise KeyError(f"no saved metadata for cell {label!r} (results written by an older "
                           "dpsim? run `dpsim reproduce --force`)")
        return entry["meta"]

    def selection(self, key: str) -> dict:
        """The tuning choice saved under ``key`` (:meth:`experiments.tuning.Selection.to_json`)."""
        saved = self.notes.get("selection", {})
        if key not in saved:
            raise KeyError(f"no saved tuning selection {key!r}; saved: {sorted(saved)}")
        return saved[key]

    def memo(self, key, compute: Callable[[], Any]):
        """``compute()``, evaluated once per ``key`` for this instance (e.g. an ε shared by figures)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]


def latest_dir(root) -> Path:
    """``root`` itself if it holds a manifest of the current format; for a scale folder
    (``results/<experiment>/<scale>``), the key folder its ``LATEST`` file names."""
    root = Path(root)
    latest = root / _LATEST
    if not (root / _MANIFEST).exists() or latest.exists():
        try:
            key = latest.read_text().strip()
        except OSError:
            raise FileNotFoundError(f"{root} holds no finished dpsim results (neither a "
                                    f"{_MANIFEST} nor a {_LATEST} file)") from None
        if not _KEY.match(key):
            raise ValueError(f"{latest} names no key: {key!r}")
        return root / key
    return root


# ------------------------------------------------------------------------------------------------
# Reproduce: experiments → figures → REPORT.md


def run_experiment(exp: Experiment, scale: str, *, results_dir, force=False, progress=None,
                   runner=None, backend: str = "numpy"):
    """Run (or load) ``exp`` at ``scale``; returns ``(cache, {label: Path})``."""
    config = exp.config(scale)
    cache = Cache(Path(results_dir) / exp.name / scale, experiment=exp.name, scale=scale,
                  config=config, version=numerics_version(exp), backend=backend, force=force,
                  progress=progress, runner=runner)
    start, t0 = time.time(), time.perf_counter()
    results = exp.run(config, cache)
    wall = time.perf_counter() - t0
    missing = [k for k in results if k not in cache.manifest["cells"]]
    if missing:
        raise RuntimeError(f"experiment {exp.name!r} returned results not produced by its cache: {missing}")
    cache.finish(list(results), run_wall=wall, run_start=start)
    return cache, {label: cache.path(label) for label in results}


def render_figures(exp: Experiment, paths: Mapping[str, Path], out_dir: Path) -> list[dict]:
    """Render each figure of ``exp`` from saved results; one report entry per figure."""
    entries = []
    saved = Saved(paths)
    for fig_name in exp.figures:
        mod = importlib.import_module(f"dpsim.paper_figures.{fig_name}")
        files = [Path(p) for p in mod.render(saved, out_dir)]
        finding = mod.evaluate(saved)
        from . import verdicts

        category = verdicts.category_of(finding)
        holds = verdicts.holds_of(category)
        entries.append({
            "figure": fig_name,
            "files": [p.name for p in files],
            "claim": str(finding["claim"]),
            "measured": str(finding["measured"]),
            "holds": holds,
            "category": category,
            "verdict": str(finding.get("verdict", "")),
        })
    return entries


def write_report(out_dir: Path, entries: Mapping[str, dict], order: Sequence[str]) -> Path:
    """Write ``out_dir/REPORT.md`` from the per-experiment entries (kept in ``report.json``)."""
    lines = [
        "# dpsim reproduction report",
        "",
        "Generated by `dpsim reproduce` (see `experiments/`). Each section: the figure, the claim it",
        "tests, what was measured here, and whether the claim holds at this scale. Figures read only",
        "the saved results under the listed results folder.",
        "",
        EPSILON_SCOPE_NOTE,
        "",
        "| experiment | scale | verdicts (holds / does not hold / inconclusive / setting does not test the claim / out of scope) |",
        "|---|---|---|",
    ]
    ordered = [n for n in order if n in entries]
    for name in ordered:
        e = entries[name]
        lines.append(f"| [{name}](#{name}) | {e['scale']} | "
                     + ", ".join(_category(f) for f in e["figures"]) + " |")
    lines.append("")
    for name in ordered:
        e = entries[name]
        cells = e["cells"]
        lines += [
            f'<a id="{name}"></a>',
            f"## {name}: {e['title']}",
            "",
            f"Scale `{e['scale']}`; results in `{e['results_dir']}` (cache key `{e['key']}`, "
            f"numerics version `{e.get('numerics_version', e.get('code_version'))}`, backend "
            f"`{e.get('backend', 'numpy')}`); {cells['total']} cells, {cells['reused']} reused "
            f"from the cache, {cells['computed']} computed; generated {e['generated']}.",
            "",
        ]
        tuned = _tuning_note(e)
        if tuned:
            lines += [tuned, ""]
        for f in e["figures"]:
            png = next((x for x in f["files"] if x.endswith(".png")), None)
            others = [x for x in f["files"] if x != png]
            lines += [f"### {f['figure']}", ""]
            if png:
                lines += [f"![{f['figure']}]({png})", ""]
            if others:
                lines += ["Also: " + ", ".join(f"[{x}]({x})" for x in others), ""]
            lines += [
                f"**Claim.** {f['claim']}",
                "",
                "**Measured.**",
                "",
                f["measured"],
                "",
                f"**Verdict:** {_category(f)}." + (f" {f['verdict']}" if f["verdict"] else ""),
                "",
            ]
    path = out_dir / "REPORT.md"
    _atomic_write_text(path, "\n".join(lines).rstrip() + "\n")
    return path


#: What every ε of the report covers (issue 33): said once above the table, and beside the ε of
#: every experiment that tunes on the private data (:func:`_tuning_note`).
EPSILON_SCOPE_NOTE = (
    "**What ε covers.** Every ε in this report (in the tables, axes and texts of the figures) is "
    "the privacy of one training run of one configuration, under add/remove adjacency with the "
    "sampling rate fixed in advance (replace-one where a figure says so). It does not cover "
    "hyperparameter tuning on the same private data (the sections of experiments that tune say "
    "so), nor the diagnostics recorded from the private data without noise (losses, gradient "
    "norms, probes, batch sizes).")


def _tuning_note(entry: Mapping) -> str:
    """The line said beside the ε of an experiment that tuned on its private data (its manifest
    holds tuning selections, :mod:`experiments.tuning`); ``""`` when it did not, or when its
    results folder is gone."""
    try:
        manifest = json.loads((Path(entry["results_dir"]) / _MANIFEST).read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    selections = (manifest.get("notes") or {}).get("selection") or {}
    if not selections:
        return ""
    return (f"**ε and tuning.** This experiment chooses hyperparameters on the same private data "
            f"({len(selections)} tuning choice{'s' if len(selections) != 1 else ''}, saved with the "
            f"results): every ε in this section is that of the selected run alone and does not "
            f"include the privacy cost of the tuning.")


def _holds_text(h) -> str:
    return {True: "yes", False: "no", None: "inconclusive"}[h]


def _category(f: Mapping) -> str:
    """The verdict category of a report entry (entries written before categories: from holds)."""
    from . import verdicts

    return f.get("category") or verdicts.category_of({"holds": f["holds"]})
