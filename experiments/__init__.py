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
from pathlib import Path
from typing import Iterable

__all__ = ["names", "get", "reproduce", "SCALES", "DEFAULT_OUT_DIR", "DEFAULT_RESULTS_DIR"]

# name -> module, in the order the report lists them.
_REGISTRY: dict[str, str] = {
    "dpsgd_logistic": "dpsim.experiments.dpsgd_logistic",
    "pagan_absreg": "dpsim.experiments.pagan_absreg",
    "dp2_logistic": "dpsim.experiments.dp2_logistic",
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

    names : experiment names (see :func:`names`); an unknown one raises ``KeyError`` naming it.
    scale : ``"tiny"`` (smoke test), ``"quick"`` (default) or ``"full"``; else ``ValueError``.
    out_dir : figure folder (default ``paper_figures/out/`` under the working directory); the
        report is written to ``<out_dir>/REPORT.md`` (default ``paper_figures/out/REPORT.md``),
        with a machine-readable ``<out_dir>/report.json`` beside it.  Sections of experiments
        reproduced earlier into the same folder are kept, also when another ``reproduce`` writes
        to the folder at the same time (the report is merged under a lock).
    force : recompute every cell (cached results are overwritten).
    results_dir : cache root (default ``results/`` under the working directory).
    progress : ``None`` (default): a bar over cells on a terminal, else one line per computed
        cell on stderr; ``True``: bars; ``False``: silent.
    workers : ``1`` (default here; the command line's default is every core): cells run in this
        process, no cluster; ``N > 1``: on a ``dask.distributed`` LocalCluster of ``N`` worker
        processes on 127.0.0.1, started when a sweep first has cells to compute; ``None``: every
        core.  (Worker processes are spawned: a script that calls ``reproduce`` with
        ``workers > 1`` needs the usual ``if __name__ == "__main__":`` guard.)
    scheduler : address of an existing Dask scheduler (``tcp://host:8786``) to run cells on
        instead (``workers`` must then be ``None``).
    backend : ``"numpy"`` (default) or ``"cupy"`` (cells run on the GPU; part of the cache key);
        ``ValueError`` naming it when unknown or when CuPy/CUDA is not usable here.

    Results are bitwise identical whatever ``workers``/``scheduler``.  Returns the path of
    REPORT.md.
    """
    from . import pipeline

    names = list(names)
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

    entries: dict = {}
    try:
        for exp in exps:
            cache, paths = pipeline.run_experiment(exp, scale, results_dir=results_dir, force=force,
                                                   progress=progress, runner=runner,
                                                   backend=backend)
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
            # One process at a time renders into out_dir and merges report.json / REPORT.md.
            with pipeline.file_lock(out_dir / ".report.lock"):
                entry["figures"] = pipeline.render_figures(exp, paths, out_dir)
                entries = _read_report(out_dir)
                entries[exp.name] = entry
                pipeline._atomic_write_text(out_dir / "report.json",
                                            json.dumps(entries, indent=1, sort_keys=True) + "\n")
                path = pipeline.write_report(out_dir, entries, list(_REGISTRY))
            if verbose:
                print(f"{exp.name} [{scale}]: {len(cache.computed)} cell(s) computed, "
                      f"{len(cache.reused)} reused; table: {entry['table']}; figures: "
                      + ", ".join(str(out_dir / f) for fig in entry["figures"] for f in fig["files"]
                                  if f.endswith(".png")), file=sys.stdout)
    finally:
        runner.close()
    if not exps:
        with pipeline.file_lock(out_dir / ".report.lock"):
            path = pipeline.write_report(out_dir, _read_report(out_dir), list(_REGISTRY))
    if verbose:
        print(f"report: {path}")
    return path


def _read_report(out_dir: Path) -> dict:
    """The entries of ``out_dir/report.json`` (registered experiments only; ``{}`` if none)."""
    try:
        entries = json.loads((out_dir / "report.json").read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if k in _REGISTRY}
