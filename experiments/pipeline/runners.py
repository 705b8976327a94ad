"""Runners: where the cells a cache must compute run -- :class:`InProcess` or
:class:`DaskRunner` (a local cluster or an existing scheduler) -- and :func:`make_runner`."""

from __future__ import annotations

import multiprocessing
import os
import threading
import uuid
from contextlib import contextmanager
from typing import Iterator, Sequence

import numpy as np

from .worker import _dumps_cell, _run_batch_cells, _run_cell, _SharedObjects, _worker_versions

#: Seconds a Dask client waits to connect to an existing scheduler (``--scheduler``), handshake
#: included, before the run stops with one line naming the address (Dask's default, 30 s, bounds
#: only the TCP connect: a silent peer held the client for ever).
SCHEDULER_CONNECT_TIMEOUT = 5.0


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
#: thread per worker process, as a cell vectorizes over trials itself.  The rest removes most of
#: the CPU the worker's own threads take from the cells: the statistical profiler (samples every
#: thread's stack every 10 ms) is off, and the event loop's blocked-loop monitor and the system
#: monitor (psutil) wake every second and every 5 s instead of every 20 ms and 500 ms.  Each
#: worker has dpsim imported as it starts (``preload``; paid once by the fork server where there
#: is one, see :data:`_FORKSERVER`), while this process is still building the
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
    (:func:`restore_malloc_thresholds`): otherwise it spends markedly more CPU time per cell.

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
    #: scheduler, this process and a worker some CPU of their own, which short cells
    #: (``ctcdp_quadratic``) feel;
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
