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

Layout: :mod:`.spec` (experiments, cells, keys and versions), :mod:`.store` (the cache's files:
names, atomic writes, locks), :mod:`.worker` (computing a cell, here or on a Dask worker),
:mod:`.runners` (:class:`InProcess`, :class:`DaskRunner`), :mod:`.cache` (:class:`Cache`,
:func:`prune`), :mod:`.table` (the results table), :mod:`.saved` (:class:`Saved`, as figures read
results) and :mod:`.report` (:func:`run_experiment`, figures, REPORT.md).  Every name is
importable from ``dpsim.experiments.pipeline`` itself; a test that patches a module global patches
the submodule that reads it (``pipeline.worker.CHECKPOINT_EVERY``, ``pipeline.spec.DPSIM_NUMERICS``).
"""

from __future__ import annotations

from .spec import (BACKENDS, cache_key, Cell, cell_seed, check_backend, code_commit, _COMMIT,
                   config_json, DPSIM_NUMERICS, Experiment, numerics_version, package_versions,
                   require_nonnegative_finite, require_positive_grids, require_positive_ints)  # noqa: F401
from .store import (_atomic_write, _atomic_write_text, file_lock, _FORMAT, _KEY, _LABEL, _LATEST,
                    _LOCK, _MANIFEST, _now, _OLD_FORMATS, _owner_alive, _PARTIAL, _sha256, _stamp,
                    _TABLE, _tmp_name, _try_lock)  # noqa: F401
from .worker import (_BATCHES, _BATCHES_BYTES, _BATCHES_LOCK, _BATCHES_MAX, _cell_file_bytes,
                     CHECKPOINT_EVERY, _dumps_cell, load_cached_kernels, _loads_cell,
                     _M_MMAP_THRESHOLD, _M_TRIM_THRESHOLD, restore_malloc_thresholds,
                     _run_batch_cell, _run_batch_cells, _run_cell, _SHARED, _SHARED_BYTES,
                     _SHARED_MAX, _SharedObjects, _worker_id, _worker_versions)  # noqa: F401
from .runners import (_connect_scheduler, DaskRunner, default_workers, _FORKSERVER, InProcess,
                      LOCAL_WORKER_CONFIG, make_runner, _preload_forkserver,
                      SCHEDULER_CONNECT_TIMEOUT)  # noqa: F401
from .table import (_ascii_as_bytes, _cell_rows, _column, _column_of_parts, results_table,
                    write_table)  # noqa: F401
from .cache import (Cache, _ManifestText, _Progress, prune)  # noqa: F401
from .saved import (latest_dir, Saved)  # noqa: F401
from .report import (_category, EPSILON_SCOPE_NOTE, _holds_text, render_figures, run_experiment,
                     _tuning_note, write_report)  # noqa: F401

__all__ = ["Experiment", "Cell", "Cache", "Saved", "InProcess", "DaskRunner", "make_runner",
           "numerics_version", "cache_key", "cell_seed", "package_versions", "results_table",
           "prune", "require_positive_grids", "require_positive_ints", "restore_malloc_thresholds",
           "LOCAL_WORKER_CONFIG", "DPSIM_NUMERICS", "BACKENDS"]
