"""Checkpoints of a long :func:`dpsim.simulate` run, so that a killed run resumes where it stopped.

A run that is given a checkpoint (``simulate(..., checkpoint=path)``, or any ``simulate`` call
inside :func:`checkpoints`) writes, every ``every`` seconds of its step loop, everything the rest
of the run depends on, taken between two steps:

* the step ``t`` reached, the parameters and the optimizer's state (pickled together, so arrays
  they share stay shared),
* the records made so far and the running batch-size sums,
* the sampler's generator state and draw counter, and the backend's noise-stream state (for the
  blocked layout the state of every block stream, rewound past a draw made ahead of time, so the
  next draw is made again from the same point),
* the wall time spent so far.

A later call with the same arguments (the *fingerprint* below) loads it and continues from step
``t + 1``: the batches and the noise it draws are the ones the uninterrupted run would have drawn,
and its result is the uninterrupted run's bit for bit (``tests/core/test_checkpoint.py`` checks this for
every registered optimizer).  A run that wrote at least one checkpoint also writes its final state,
so calling it again returns at once; a checkpoint whose fingerprint does not match is ignored
(with a warning) and overwritten.

The fingerprint hashes what the run's numbers depend on: the problem's config and, unless the
config determines them (a registered factory's sizes and seed, or :func:`dpsim.problems.from_data`'s
``data_sha256``), a content hash of the problem's data (:func:`problem_identity`: every array,
sparse matrix, number and string the problem keeps, its features and labels), the optimizer's
name and hyperparameters (per-trial arrays by their bytes), steps, batch size, trials, seed,
sampling, backend, dtype, record steps, metrics, probe names, the initial point and dpsim's
version.  Two different chains registered under one name with equal hyperparameters are not told
apart: give a custom optimizer its own name.

**Probes** are saved with the run only through their results so far; a probe must be a function
of ``(state, params, ctx)``, or expose the memory it keeps between records as a dict attribute
``probe_state`` (saved and restored in place; probes sharing one dict share it again).  A probe
whose closure holds a mutable container (dict, list, set) without ``probe_state`` would silently
forget it on resume, so such a run is not checkpointed (:func:`unsaved_probe_memory`: an explicit
``checkpoint=`` is refused, a run inside :func:`checkpoints` goes on without, with a warning).

Beside each checkpoint ``<name>.ckpt`` a small ``<name>.json`` says how far it is (step, steps,
wall seconds; ``dpsim gallery status`` lists them).  Files are written next to their final name and renamed (a kill mid-write leaves the previous
checkpoint whole).  They are pickles: load only checkpoints you wrote.  Not covered: the CuPy
backend (its generator state lives on the device; a ``checkpoint=`` there is refused, and runs
inside :func:`checkpoints` are not checkpointed) and the small-d compiled kernel of
:mod:`dpsim.fast.block` (a whole run in one kernel call: checkpoints apply to the general engine's step
loop, ``fast=False``, or the chain runs the engine picks by itself for larger problems).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import math
import os
import pickle
import time
import warnings
from pathlib import Path

import numpy as np

__all__ = ["checkpoints", "Checkpoint", "FORMAT", "DEFAULT_EVERY", "problem_identity",
           "problem_data_hash", "check_writable"]

#: Version of the checkpoint file layout; a file of another format is ignored.
FORMAT = 1
#: Seconds between two checkpoints of one run, unless told otherwise.
DEFAULT_EVERY = 600.0

_SCOPE: contextvars.ContextVar = contextvars.ContextVar("dpsim_checkpoints", default=None)


class _Scope:
    """The directory of a :func:`checkpoints` block and the number of ``simulate`` calls made in it."""

    def __init__(self, directory: Path, every: float):
        self.directory = directory
        self.every = every
        self.calls = 0
        self.resumed_wall = 0.0  # simulation wall seconds restored from checkpoints in this block
        self.written = 0         # checkpoint files written in this block

    def next_path(self) -> Path:
        k = self.calls
        self.calls += 1
        return self.directory / f"call-{k:04d}.ckpt"


def _check_every(every) -> float:
    if isinstance(every, bool) or not isinstance(every, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(every)) or every < 0:
        raise ValueError(f"checkpoint_every must be a finite number of seconds >= 0, got {every!r}")
    return float(every)


@contextlib.contextmanager
def checkpoints(directory, every: float = DEFAULT_EVERY):
    """Checkpoint every :func:`dpsim.simulate` call made inside this block.

    The ``k``-th call (0-based, in the order they are made, so a deterministic computation finds
    its own files again) uses ``directory/call-<k>.ckpt``; the directory is made on the first
    write.  Unlike an explicit ``checkpoint=`` path, a directory where no file can be written
    only warns, and the runs go on without checkpoints (a Dask worker of ``dpsim reproduce`` on
    another machine may not see the client's results folder).  ``every``: seconds between two
    checkpoints of a run (0: after every step, for tests).
    Yields the block's record: ``calls``, ``written`` (files written) and ``resumed_wall`` (wall
    seconds of simulation restored from earlier checkpoints rather than recomputed).

    Used by ``dpsim reproduce``: each cell of a sweep runs inside one block whose directory is
    removed once the cell's result is saved, so a sweep killed in the middle of a long cell
    resumes that cell from its last checkpoint instead of from its first step.

    Parameters
    ----------
    directory : str or path-like
        Where the checkpoint files go.
    every : float
        Seconds between two checkpoints of a run (0: after every step).

    Yields
    ------
    dict
        The block's record: ``calls``, ``written``, ``resumed_wall``.
    """
    if directory is None:
        raise ValueError("checkpoints needs a directory, got directory=None")
    if not isinstance(directory, (str, os.PathLike)) or not os.fspath(directory):
        raise ValueError(f"checkpoints needs a directory path, got directory={directory!r}")
    scope = _Scope(Path(directory), _check_every(every))
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


def _jsonable(obj):
    if isinstance(obj, np.ndarray):
        a = np.ascontiguousarray(obj)
        return {"array": str(a.dtype), "shape": list(a.shape),
                "sha256": hashlib.sha256(a.tobytes()).hexdigest()}
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        return obj.item()
    if isinstance(obj, np.random.SeedSequence):
        return {"entropy": str(obj.entropy), "spawn_key": list(obj.spawn_key)}
    return repr(obj)


def _holds_memory(obj, seen) -> bool:
    """Whether a function's closure (or the closures of functions it closes over) holds a
    mutable container."""
    if id(obj) in seen:
        return False
    seen.add(id(obj))
    if isinstance(obj, (dict, list, set)):
        return True
    cells = getattr(obj, "__closure__", None) or ()
    for cell in cells:
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(value, (dict, list, set)) or (callable(value) and _holds_memory(value, seen)):
            return True
    return False


def unsaved_probe_memory(probes: dict) -> list[str]:
    """Names of the probes whose closures keep memory a checkpoint would not save: a mutable
    container (dict, list, set) in the closure, directly or through a function it calls, and no
    ``probe_state`` dict attribute exposing it (module docstring)."""
    return sorted(name for name, fn in probes.items()
                  if not isinstance(getattr(fn, "probe_state", None), dict)
                  and _holds_memory(fn, set()))


def probe_states(probes: dict) -> dict:
    """``{name: probe.probe_state}`` of the probes that expose their memory."""
    return {name: fn.probe_state for name, fn in probes.items()
            if isinstance(getattr(fn, "probe_state", None), dict)}


def restore_probe_states(probes: dict, saved: dict) -> None:
    """Put the saved memories back into the probes' own dicts (in place: their closures hold them)."""
    live = probe_states(probes)
    for name, state in saved.items():
        if name in live:
            target = live[name]
            if target is not state:
                target.clear()
                target.update(state)


#: Attributes of a :class:`~dpsim.problems.Problem` that are not its data (caches, backend views,
#: the array namespace); every other attribute enters :func:`problem_data_hash`.
_NOT_DATA = frozenset({"_host", "_views", "_optimum", "xp", "backend_name", "dtype"})


def _digest(h, obj, seen: set, depth: int = 0) -> None:
    """Feed ``obj`` into the hash ``h``: arrays by dtype, shape and bytes; sparse matrices by
    their structure and values; numbers and strings by ``repr``; containers and plain objects
    recursively (functions, modules and classes are skipped: they are code, not data)."""
    import types

    if id(obj) in seen or depth > 8:
        return
    if isinstance(obj, np.ndarray):
        a = np.ascontiguousarray(obj)
        h.update(f"array{a.dtype.str}{a.shape};".encode())
        h.update(a.tobytes() if a.dtype != object else repr(a.tolist()).encode())
        return
    if hasattr(obj, "tocsr") and hasattr(obj, "nnz"):  # scipy.sparse
        m = obj.tocsr()
        h.update(f"sparse{m.dtype.str}{m.shape};".encode())
        for part in (m.indptr, m.indices, m.data):
            h.update(np.ascontiguousarray(part).tobytes())
        return
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes, np.generic)):
        h.update(f"{type(obj).__name__}:{obj!r};".encode())
        return
    if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                        types.ModuleType, type)):
        return
    seen.add(id(obj))
    if isinstance(obj, dict):
        for k in sorted(obj, key=repr):
            h.update(f"key:{k!r};".encode())
            _digest(h, obj[k], seen, depth + 1)
        return
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = sorted(obj, key=repr) if isinstance(obj, (set, frozenset)) else obj
        h.update(f"{type(obj).__name__}[{len(items)}];".encode())
        for v in items:
            _digest(h, v, seen, depth + 1)
        return
    state = getattr(obj, "__dict__", None)
    if isinstance(state, dict):
        h.update(f"object:{type(obj).__qualname__};".encode())
        _digest(h, state, seen, depth + 1)
        return
    h.update(f"{type(obj).__qualname__}:{obj!r};".encode())


def problem_data_hash(problem) -> str:
    """SHA-256 (hex) of a problem's data: every attribute of its host copy that is not a cache or
    a backend view (:data:`_NOT_DATA`) — its float arrays (``_float_arrays``), features and
    labels, and any other array, sparse matrix, number or string it keeps — so two problems with
    the same config but other data hash apart.

    Parameters
    ----------
    problem : Problem
        Any problem.

    Returns
    -------
    str
        The hex digest.
    """
    host = getattr(problem, "_host", problem)
    h = hashlib.sha256()
    h.update(f"{type(host).__module__}.{type(host).__qualname__};".encode())
    attrs = {k: v for k, v in vars(host).items() if k not in _NOT_DATA}
    _digest(h, attrs, set())
    for name in ("features", "labels"):  # properties a subclass may compute from elsewhere
        try:
            value = getattr(host, name)
        except Exception:  # noqa: BLE001 - a property that cannot be read adds nothing
            continue
        if value is not None:
            h.update(f"property:{name};".encode())
            _digest(h, value, set())
    return h.hexdigest()


def problem_identity(problem) -> dict:
    """The problem's part of a run's fingerprint: its ``config``, plus ``data_sha256`` (a content
    hash of its data, :func:`problem_data_hash`) unless the config determines the data already —
    it holds a ``data_sha256`` (:func:`dpsim.problems.from_data`), or the problem is one of the
    registered factories (:func:`dpsim.problems.names`), whose data are a function of their
    config (sizes and seed).  A user-defined :class:`~dpsim.problems.Problem` (e.g.
    :class:`dpsim.audit.GradientTable`) whose config is only ``{name, n, d}`` is so told apart
    from another with the same shapes and other data: the same ``checkpoint=`` path never returns
    a result computed on other data.

    Parameters
    ----------
    problem : Problem
        The problem of a run.

    Returns
    -------
    dict
        Its ``config``, with ``data_sha256`` where the config does not determine the data.

    Examples
    --------
    >>> import dpsim
    >>> from dpsim.checkpoint import problem_identity
    >>> sorted(problem_identity(dpsim.problems.least_squares(50, 3, seed=0)))
    ['condition', 'd', 'n', 'name', 'noise', 'rotate', 'seed']
    """
    cfg = dict(problem.config)
    if "data_sha256" in cfg:
        return cfg
    from . import problems as _problems

    host = getattr(problem, "_host", problem)
    if (type(host).__module__.startswith("dpsim.problems")
            and cfg.get("name") in _problems.names()):
        return cfg
    cfg["data_sha256"] = problem_data_hash(problem)
    return cfg


def fingerprint(**parts) -> str:
    """SHA-256 of ``parts`` as canonical JSON (arrays by dtype, shape and the hash of their bytes)."""
    text = json.dumps(parts, sort_keys=True, default=_jsonable)
    return hashlib.sha256(text.encode()).hexdigest()


def check_writable(path) -> None:
    """Refuse, before the run starts, an explicit ``checkpoint=`` path where no file can be
    written: one ``ValueError`` naming it.  Checked by creating (and removing) a file beside
    it, since ``os.access`` answers yes to root everywhere (e.g. ``/proc``); folders missing on
    the way are made for the test and removed again (the first save makes them for good).  A
    write that fails later (a full disk) still only warns: the run goes on without checkpoints.

    Parameters
    ----------
    path : str or path-like
        The ``checkpoint=`` path of a run.

    Raises
    ------
    ValueError
        Naming the path where no file can be written.
    """
    path = Path(path)
    shown = f"checkpoint={os.fspath(path)!r}"
    if path.exists() and not path.is_file():
        raise ValueError(f"{shown} exists and is not a file")
    made = []
    try:
        folder = path.parent
        missing = [f for f in (folder, *folder.parents) if not f.exists()]
        for f in reversed(missing):
            f.mkdir()
            made.append(f)
        probe = folder / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.write-test"
        with open(probe, "wb"):
            pass
        probe.unlink()
    except OSError as err:
        raise ValueError(f"{shown}: cannot write a file there ({err.strerror or err}); give a "
                         f"writable path") from None
    finally:
        for f in reversed(made):
            with contextlib.suppress(OSError):
                f.rmdir()


class Checkpoint:
    """One run's checkpoint file: :meth:`load` what an earlier run left, :meth:`due` and
    :meth:`save` during the loop.  Made by :meth:`for_run`."""

    def __init__(self, path: Path, every: float, fingerprint: str, scope: _Scope | None = None):
        self.path = Path(path)
        self.every = every
        self.fingerprint = fingerprint
        self.scope = scope
        self.written = False
        self.last_t = None  # the step of the last checkpoint written
        self._next = time.monotonic() + every
        self._failed = False

    @classmethod
    def for_run(cls, checkpoint, every, backend, identity, compiled: bool = False, probes=None):
        """The checkpoint of a run: the explicit ``checkpoint`` path, else the next file of the
        enclosing :func:`checkpoints` block, else ``None``.  Refuses an explicit path on a
        backend whose generator state cannot be saved (CuPy); skips such runs in a block, and
        runs of the compiled small-d kernel (``compiled``), which still take their number.
        ``identity()``: the run's arguments, hashed into the fingerprint (called only when the
        run is checkpointed)."""
        scope = None
        if checkpoint is None:
            scope = _SCOPE.get()
            if scope is None:
                return None
            path, every = scope.next_path(), scope.every
        else:
            if not isinstance(checkpoint, (str, os.PathLike)) or not os.fspath(checkpoint):
                raise ValueError(f"checkpoint must be a file path, got checkpoint={checkpoint!r}")
            if Path(checkpoint).is_dir():
                raise ValueError(f"checkpoint={os.fspath(checkpoint)!r} is a directory; give a file "
                                 "path (e.g. <dir>/run.ckpt), or use dpsim.checkpoint.checkpoints(dir) "
                                 "for a block of runs")
            path, every = Path(checkpoint), _check_every(every)
            check_writable(path)
        if compiled:
            return None
        unsaved = unsaved_probe_memory(probes or {})
        if unsaved:
            msg = (f"probes {unsaved} keep memory in their closures that a checkpoint cannot save; "
                   "give each a dict attribute probe_state holding it (dpsim.checkpoint)")
            if scope is None:
                raise ValueError(msg)
            warnings.warn(msg + "; this run is not checkpointed", RuntimeWarning, stacklevel=3)
            return None
        if not backend.can_checkpoint:
            if scope is None:
                raise ValueError(f"checkpoints need a NumPy backend (their generator state is "
                                 f"saved on the host), got backend={backend.name!r}")
            return None
        return cls(path, every, fingerprint(format=FORMAT, **identity()), scope)

    def load(self) -> dict | None:
        """The saved payload of this run, or ``None`` (no file, an unreadable one, another
        format or another run's: the latter two with a warning).

        Returns
        -------
        dict or None
            The payload, or ``None``.
        """
        try:
            with open(self.path, "rb") as fh:
                payload = pickle.load(fh)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except Exception as err:  # noqa: BLE001 - a torn or foreign file: start afresh
            warnings.warn(f"ignoring unreadable checkpoint {self.path}: {err}", RuntimeWarning,
                          stacklevel=3)
            return None
        if not isinstance(payload, dict) or payload.get("format") != FORMAT \
                or payload.get("fingerprint") != self.fingerprint:
            warnings.warn(f"ignoring checkpoint {self.path}: it was written by another run "
                          "(other arguments, code version or format); it will be overwritten",
                          RuntimeWarning, stacklevel=3)
            return None
        if self.scope is not None:
            self.scope.resumed_wall += float(payload["wall"])
        return payload

    @staticmethod
    def progress_path(path) -> Path:
        """The small JSON file beside a checkpoint (``<name>.json``: ``t``, ``steps``, ``wall_s``,
        ``written``), for progress reports that should not unpickle the state."""
        path = Path(path)
        return path.with_name(path.stem + ".json")

    def due(self) -> bool:
        """Whether ``every`` seconds have passed since the last save.

        Returns
        -------
        bool
            True when a checkpoint is due.
        """
        return time.monotonic() >= self._next

    def save(self, payload: dict) -> None:
        """Write ``payload`` (plus format and fingerprint) atomically; an unwritable location
        warns once and turns checkpointing off for this run, which itself goes on.

        Parameters
        ----------
        payload : dict
            What the run needs to resume.
        """
        self._next = time.monotonic() + self.every
        if self._failed:
            return
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as fh:
                pickle.dump({"format": FORMAT, "fingerprint": self.fingerprint, **payload}, fh,
                            protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.path)
            progress = {"t": payload.get("t"), "steps": payload.get("steps"),
                        "wall_s": round(float(payload.get("wall", 0.0)), 3), "written": time.time()}
            side = self.progress_path(self.path)
            tmp = side.with_name(f".{side.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
            tmp.write_text(json.dumps(progress) + "\n")
            os.replace(tmp, side)
        except OSError as err:
            self._failed = True
            with contextlib.suppress(OSError):
                tmp.unlink()
            warnings.warn(f"cannot write checkpoint {self.path} ({err}); the run goes on "
                          "without checkpoints", RuntimeWarning, stacklevel=3)
            return
        self.written = True
        self.last_t = payload.get("t")
        if self.scope is not None:
            self.scope.written += 1
