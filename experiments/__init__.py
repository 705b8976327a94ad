"""Reproduced experiments: a registry and the one-command pipeline behind ``dpsim reproduce``.

    from dpsim import experiments
    experiments.names()                      # ['dpsgd_logistic', ...] in report order
    experiments.get("dpsgd_logistic")        # the Experiment spec (config presets, run, figures)
    experiments.reproduce(["dpsgd_logistic"], scale="quick")

For each experiment, :func:`reproduce` loads its cached results when present and valid (else runs
it, saving every sweep cell as soon as it finishes, under ``results/<experiment>/<scale>/``), then
renders its figures (PNG + PDF) into ``out_dir`` (default ``paper_figures/out/``) from the saved
results only, and finally writes ``<out_dir>/REPORT.md`` — by default ``paper_figures/out/REPORT.md``
— with, per figure, the image, the claim, the measured effect with its uncertainty and whether the
claim holds at this scale.  See :mod:`experiments.pipeline` for the cache and seed design.

Adding an experiment: write ``experiments/<name>.py`` defining ``EXPERIMENT = Experiment(...)`` (tune
with :mod:`experiments.tuning` and save the selections with ``tuning.record``; give each result cell
the ``meta`` its figures need) and figure scripts ``paper_figures/fig_*.py`` (``render(results,
out_dir)`` and ``evaluate(results)``, reading through :class:`experiments.pipeline.Saved`; helpers
shared by one experiment's figures in ``paper_figures/<name>_common.py``), then add one line to
``_REGISTRY`` below.  The ``dpsim reproduce`` command is :mod:`experiments.cli`.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path
from typing import Iterable

__all__ = ["names", "get", "reproduce", "SCALES", "DEFAULT_OUT_DIR", "DEFAULT_RESULTS_DIR"]

# name -> module, in the order the report lists them.
_REGISTRY: dict[str, str] = {
    "dpsgd_logistic": "dpsim.experiments.dpsgd_logistic",
    "pagan_absreg": "dpsim.experiments.pagan_absreg",
    "dp2_logistic": "dpsim.experiments.dp2_logistic",
    "dp2_noisy_adagrad": "dpsim.experiments.dp2_noisy_adagrad",
    "dp2_compute": "dpsim.experiments.dp2_compute",
    "adambc": "dpsim.experiments.adambc",
    "design_space": "dpsim.experiments.design_space",
    "ctcdp_quadratic": "dpsim.experiments.ctcdp_quadratic",
}

SCALES = ("tiny", "quick", "full")
"""``tiny``: smoke test (seconds; claims are not expected to hold); ``quick``: a laptop, well under a
minute per experiment; ``full``: the paper's sizes."""
DEFAULT_OUT_DIR = Path("paper_figures") / "out"  # relative to the working directory
DEFAULT_RESULTS_DIR = Path("results")


def names() -> list[str]:
    """Every registered experiment name, in report order."""
    return list(_REGISTRY)


def registered_modules() -> list[str]:
    return list(_REGISTRY.values())


def get(name: str):
    """The :class:`experiments.pipeline.Experiment` named ``name``; ``KeyError`` naming it if unknown."""
    if name not in _REGISTRY:
        raise KeyError(f"unknown experiment {name!r}; known: {', '.join(names())}")
    mod = importlib.import_module(_REGISTRY[name])
    return mod.EXPERIMENT


def reproduce(names: Iterable[str], *, scale: str = "quick", out_dir=None, force: bool = False,
              results_dir=None, progress: bool | None = None, verbose: bool = True,
              workers: int | None = 1, scheduler: str | None = None,
              backend: str = "numpy") -> Path:
    """Run (or load) the named experiments, render their figures, write the report.

    Parameters
    ----------
    names : iterable of str
        Experiment names (see :func:`names`); an unknown one raises ``KeyError`` naming it.
    scale : {"tiny", "quick", "full"}
        ``"tiny"`` (smoke test), ``"quick"`` (default) or ``"full"``; else ``ValueError``.
    out_dir : path, optional
        Figure folder (default ``paper_figures/out/`` under the working directory); the report
        is written to ``<out_dir>/REPORT.md`` with a machine-readable ``<out_dir>/report.json``
        beside it.  Sections of experiments reproduced earlier into the same folder are kept,
        also when another ``reproduce`` writes to the folder at the same time (the report is
        merged under a lock).
    force : bool
        Recompute every cell (cached results are overwritten).
    results_dir : path, optional
        Cache root (default ``results/`` under the working directory).
    progress : bool or None
        ``None`` (default): a bar over cells on a terminal, else one line per computed cell on
        stderr; ``True``: bars; ``False``: silent.
    verbose : bool
        Print the wall and CPU time of the simulation phase (below) on stderr.
    workers : int or None
        ``1`` (default here; the command line's default is every core): cells run in this
        process, no cluster; ``N > 1``: on a ``dask.distributed`` LocalCluster of ``N`` worker
        processes on 127.0.0.1, started when a sweep first has cells to compute; ``None``: every
        core.  Worker processes are spawned: a script that calls ``reproduce`` with
        ``workers > 1`` needs the usual ``if __name__ == "__main__":`` guard.
    scheduler : str, optional
        Address of an existing Dask scheduler (``tcp://host:8786``) to run cells on instead
        (``workers`` must then be ``None``).
    backend : {"numpy", "cupy"}
        ``"cupy"`` runs cells on the GPU (part of the cache key); ``ValueError`` naming it when
        unknown or when CuPy/CUDA is not usable here.

    Returns
    -------
    pathlib.Path
        The path of ``REPORT.md``.

    Notes
    -----
    With more than one worker (or a scheduler) the experiments run at the same time, one thread
    each in this process, their cells sharing the cluster (see :func:`_run_all`); then every
    experiment's figures are rendered (in as many processes as workers, one experiment each) and
    the report written once.  Results are bitwise identical whatever ``workers``/``scheduler``.
    With ``verbose``, the wall time of the simulation phase (cluster start-up and every
    experiment's ``run``; not the figures) is printed on stderr as ``simulation phase: <s> s
    wall, <c> s CPU in this process ...``: ``<c>``, the CPU time of this process (every thread:
    the experiments' own work, saving cells, the manifest, and with a local cluster its
    scheduler) measures the driver's overhead when cells run on workers; with one worker it
    includes the cells.
    """
    from . import pipeline

    names = list(dict.fromkeys(names))  # each experiment once
    if isinstance(scale, bool) or scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; known: {', '.join(SCALES)}")
    exps = [get(n) for n in names]  # KeyError before any work
    for e in exps:
        e.config(scale)  # ValueError before any work
    pipeline.check_backend(backend)
    runner = pipeline.make_runner(workers=workers, scheduler=scheduler)
    out_dir = Path(out_dir) if out_dir is not None else DEFAULT_OUT_DIR
    results_dir = Path(results_dir) if results_dir is not None else DEFAULT_RESULTS_DIR
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"--out must be a folder, got the file {str(out_dir)!r}")
    if results_dir.exists() and not results_dir.is_dir():
        raise ValueError(f"the results folder must be a folder, got the file {str(results_dir)!r}")
    out_dir.mkdir(parents=True, exist_ok=True)
    if verbose and runner.parallel:
        print(f"cells run {runner.describe()}", file=sys.stderr)

    def run_one(exp):
        return pipeline.run_experiment(exp, scale, results_dir=results_dir, force=force,
                                       progress=progress, runner=runner, backend=backend)

    t0, c0 = time.perf_counter(), time.process_time()
    try:
        if runner.parallel and any(_may_compute(e, scale, results_dir, backend, force)
                                   for e in exps):
            runner.start()  # the cluster comes up while the experiments do their own set-up
        runs = _run_all(exps, run_one, runner)
        sim_wall, sim_cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        runner.close()
    if verbose and exps:
        how = (f"{len(exps)} experiments at once; " if runner.parallel and len(exps) > 1 else "")
        print(f"simulation phase: {sim_wall:.1f} s wall, {sim_cpu:.1f} s CPU in this process "
              f"({how}cells {runner.describe()})", file=sys.stderr)

    # Figures and the report: one process at a time renders into out_dir and merges
    # report.json / REPORT.md (written once, with every section).
    t1 = time.perf_counter()
    new: dict = {}
    with pipeline.file_lock(out_dir / ".report.lock"):
        figures = _render_all(exps, {e.name: runs[e.name][1] for e in exps}, out_dir,
                              processes=_render_processes(runner, len(exps)))
        for exp in exps:
            cache, paths = runs[exp.name]
            entry = {
                "title": exp.title,
                "scale": scale,
                "results_dir": str(cache.root),
                "table": str(cache.root / "table.nc"),
                "key": cache.key,
                "numerics_version": cache.version,
                "backend": cache.backend,
                "generated": pipeline._now(),
                "cells": {"total": len(cache.used), "computed": len(cache.computed),
                          "reused": len(cache.reused)},
            }
            entry["figures"] = figures[exp.name]
            new[exp.name] = entry
        entries = _read_report(out_dir)
        entries.update(new)
        if new:
            pipeline._atomic_write_text(out_dir / "report.json",
                                        json.dumps(entries, indent=1, sort_keys=True) + "\n")
        path = pipeline.write_report(out_dir, entries, list(_REGISTRY))
    if verbose:
        for exp in exps:
            cache, entry = runs[exp.name][0], new[exp.name]
            print(f"{exp.name} [{scale}]: {len(cache.computed)} cell(s) computed, "
                  f"{len(cache.reused)} reused; table: {entry['table']}; figures: "
                  + ", ".join(str(out_dir / f) for fig in entry["figures"] for f in fig["files"]
                              if f.endswith(".png")), file=sys.stdout)
        if exps:
            print(f"figures and report: {time.perf_counter() - t1:.1f} s wall", file=sys.stderr)
        print(f"report: {path}")
    return path


def _render_processes(runner, n_exps: int) -> int:
    """How many processes render figures: one per experiment, at most as many as the local
    workers (every local core for a remote scheduler); 1 (here) for a sequential runner."""
    if not getattr(runner, "parallel", False) or n_exps < 2:
        return 1
    from .pipeline import default_workers

    return max(1, min(n_exps, getattr(runner, "workers", None) or default_workers()))


def _render_one(name: str, paths: dict, out_dir: str) -> list:
    """Render the figures of experiment ``name`` (run in a render process)."""
    from . import pipeline

    return pipeline.render_figures(get(name), paths, Path(out_dir))


def _render_all(exps, paths: dict, out_dir: Path, *, processes: int = 1) -> dict:
    """``{name: report entries of its figures}``: every experiment's figures rendered from its
    saved results, here (``processes=1``) or in a pool of that many fresh processes, one
    experiment per task (figures read only saved files, so they need nothing else from this
    process)."""
    from . import pipeline

    if processes < 2:
        return {e.name: pipeline.render_figures(e, paths[e.name], out_dir) for e in exps}
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=processes,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        futs = {e.name: pool.submit(_render_one, e.name, dict(paths[e.name]), str(out_dir))
                for e in exps}
        return {name: f.result() for name, f in futs.items()}


def _may_compute(exp, scale: str, results_dir: Path, backend: str, force: bool) -> bool:
    """Whether reproducing ``exp`` may compute cells: ``force``, or no complete run saved
    under its current key (a cheap look at the manifest; a corrupt cell file is found later)."""
    from . import pipeline

    if force:
        return True
    key = pipeline.cache_key(exp.name, exp.config(scale), pipeline.numerics_version(exp), backend)
    try:
        m = json.loads((results_dir / exp.name / scale / key / "manifest.json").read_text())
    except (OSError, ValueError):
        return True
    return not (isinstance(m, dict) and m.get("complete"))


def _run_all(exps, run_one, runner) -> dict:
    """``{name: run_one(exp)}`` for every experiment.  On a parallel runner, every experiment
    runs at once in its own thread of this process, their cells sharing the runner's workers:
    while one experiment waits for its tuning cells to finish before it can make its
    evaluation cells (or calibrates σ here), the workers compute the other experiments' cells,
    so no worker idles at an experiment's phase boundary.  The experiments' set-ups (until
    each pickles its first batch) take turns (the runner's ``setup_turn``), so the first cells
    reach the workers early.  Each experiment's manifest is still
    written by one thread of one process, and its cells and seeds are those of the sequential
    run (bitwise identical results).  If one experiment fails, the cells of the others are
    cancelled and the first error is raised."""
    if len(exps) < 2 or not getattr(runner, "parallel", False):
        return {e.name: run_one(e) for e in exps}
    from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

    turn = getattr(runner, "setup_turn", None)  # one experiment's set-up at a time

    def one(exp):
        if turn is None:
            return run_one(exp)
        with turn():
            return run_one(exp)

    pool = ThreadPoolExecutor(max_workers=len(exps), thread_name_prefix="dpsim-reproduce")
    try:
        futs = {pool.submit(one, e): e for e in exps}
        wait(futs, return_when=FIRST_EXCEPTION)
        for f in futs:  # the first experiment (in the given order) that failed
            if f.done() and f.exception() is not None:
                raise f.exception()
        return {futs[f].name: f.result() for f in futs}
    except BaseException as err:  # an experiment failed, or Ctrl-C: stop the others' cells
        runner.stop(err)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _read_report(out_dir: Path) -> dict:
    """The entries of ``out_dir/report.json`` (registered experiments only; ``{}`` if none)."""
    try:
        entries = json.loads((out_dir / "report.json").read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if k in _REGISTRY}
