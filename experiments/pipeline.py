"""The reproduction pipeline: experiment specs, the per-cell results cache, figures and REPORT.md.

An experiment is one module in this package exposing ``EXPERIMENT = Experiment(...)``: a frozen
config dataclass with named presets (``tiny`` for the smoke tests, ``quick`` for a laptop,
``full`` for the paper), a ``run(config, cache) -> dict[label, Result]`` function and the names of
the figure scripts in :mod:`paper_figures` that render its saved results.

Cache layout (``results/<experiment>/<scale>/``)::

    manifest.json      key, config, seed, code version, package versions, one entry per cell
                       (file, SHA-256, the cell's metadata), notes (the tuning selections, ...)
    <cell label>.npz   one dpsim.Result per sweep cell (Result.save), written as soon as it finishes

A sweep *cell* is one :func:`dpsim.simulate` call (all trials of one setting, a hyperparameter grid
folded into the trial axis).  The cache key is ``sha256(config as JSON, code version)``; the code
version hashes the sources of the ``dpsim`` package, of this package's shared modules (``__init__``,
``pipeline``, ``tuning``) and of the
experiment's own module (other experiments' modules are excluded, so adding an experiment does not
invalidate the others).  A cell is reused only when the manifest's key equals the current key and
the file's SHA-256 matches the one recorded when it was written; otherwise it is recomputed.  Since
every cell is saved (atomically) the moment it finishes, an interrupted sweep loses no finished
work: the next call reuses the finished cells and computes the rest.

Seeds: cell ``i`` runs with ``SeedSequence(config.seed, spawn_key=(i,))`` (the ``i``-th child of
``SeedSequence(config.seed).spawn``), so cells are independent of the order they run in.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import importlib
import json
import os
import platform
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

import dpsim

__all__ = ["Experiment", "Cell", "Cache", "Saved", "code_version", "package_versions"]

_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.=+-]*$")
_MANIFEST = "manifest.json"
_FORMAT = "dpsim-experiment-cache-1"


@dataclass(frozen=True)
class Experiment:
    """One reproduced experiment.

    name : registry name (also the results folder name).
    title : one line for the report.
    presets : scale name → frozen config dataclass instance (must define ``seed``).
    run : ``run(config, cache) -> dict[label, Result]``; every result must come from ``cache``.
    figures : module names in :mod:`paper_figures` (``render`` + ``evaluate``) fed with the results.
    module : the experiment's module name (hashed into the code version).
    """

    name: str
    title: str
    presets: Mapping[str, Any]
    run: Callable[[Any, "Cache"], dict]
    figures: tuple[str, ...]
    module: str

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
    so that figures read it instead of parsing the label."""

    label: str
    index: int
    compute: Callable[[np.random.SeedSequence], "dpsim.Result"]
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)


# ------------------------------------------------------------------------------------------------
# Code and package versions


def _package_files(pkg_dir: Path, exclude: set[str] = frozenset()) -> list[Path]:
    return sorted(p for p in pkg_dir.rglob("*.py")
                  if "__pycache__" not in p.parts and p.stem not in exclude)


def code_version(experiment_module: str | None = None) -> str:
    """SHA-256 (16 hex digits) of the source files the results depend on.

    Hashes every ``.py`` file of the ``dpsim`` package and the shared modules of this
    ``experiments`` package (``__init__``, ``pipeline``, ``tuning``) plus ``experiment_module`` itself; other
    experiment modules, registered or not, do not affect an experiment's cache.
    """
    h = hashlib.sha256()
    dpsim_dir = Path(dpsim.__file__).resolve().parent
    exp_dir = Path(__file__).resolve().parent
    own = experiment_module.rsplit(".", 1)[-1] if experiment_module else None
    shared = {"__init__", "pipeline", "tuning"}
    others = {p.stem for p in _package_files(exp_dir)} - shared - {own}
    for root, files in ((dpsim_dir, _package_files(dpsim_dir)),
                        (exp_dir, _package_files(exp_dir, exclude=others))):
        for p in files:
            h.update(f"{root.name}/{p.relative_to(root).as_posix()}\0".encode())
            h.update(p.read_bytes())
            h.update(b"\0")
    return h.hexdigest()[:16]


def package_versions() -> dict:
    """Versions of the interpreter and of the packages a result depends on."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "dpsim": dpsim.__version__}
    for dist in ("numpy", "scipy", "numba", "dp-accounting", "matplotlib", "xarray", "cupy-cuda12x"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out


def config_json(config) -> dict:
    """The config dataclass as plain JSON data (tuples become lists)."""
    if not dataclasses.is_dataclass(config):
        raise TypeError(f"an experiment config must be a dataclass, got {type(config).__name__}")
    return json.loads(json.dumps(dataclasses.asdict(config), sort_keys=True))


def cache_key(name: str, config, version: str) -> str:
    blob = json.dumps({"experiment": name, "config": config_json(config), "code": version},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------------
# The cache


class Cache:
    """Per-cell results cache of one experiment at one scale (see the module docstring).

    ``cache.run(cells)`` returns ``{label: Result}``, loading valid cached cells and computing (and
    immediately saving) the others.  ``cache.note(key, value)`` stores derived JSON data (e.g. the
    learning rate chosen per setting) in the manifest.  ``cache.path(label)`` is a cell's file.
    Counters ``computed`` / ``reused`` say what happened.
    """

    def __init__(self, root, *, experiment: str, scale: str, config, version: str,
                 force: bool = False, progress: bool | None = None):
        self.root = Path(root)
        self.experiment = experiment
        self.scale = scale
        self.config = config
        self.seed = int(getattr(config, "seed"))
        self.version = version
        self.key = cache_key(experiment, config, version)
        self.progress = progress
        self.computed: list[str] = []
        self.reused: list[str] = []
        self._indices: dict[int, str] = {}
        self.root.mkdir(parents=True, exist_ok=True)
        self.manifest = self._open_manifest(force)

    @property
    def show_progress(self) -> bool:
        """Whether to show progress bars (``progress``; ``None``: only on a terminal)."""
        return bool(self.progress) if self.progress is not None else sys.stderr.isatty()

    # -- manifest ------------------------------------------------------------------------------
    def _open_manifest(self, force: bool) -> dict:
        path = self.root / _MANIFEST
        old = None
        if path.exists():
            try:
                old = json.loads(path.read_text())
            except (OSError, ValueError):
                old = None
        if old is not None and not force and old.get("format") == _FORMAT and old.get("key") == self.key:
            return old
        if old is not None:  # stale: drop the files it lists so no stale cell can be picked up
            for entry in old.get("cells", {}).values():
                f = self.root / str(entry.get("file", ""))
                if f.suffix == ".npz" and f.parent == self.root and f.exists():
                    f.unlink()
        manifest = {
            "format": _FORMAT,
            "experiment": self.experiment,
            "scale": self.scale,
            "key": self.key,
            "code_version": self.version,
            "config": config_json(self.config),
            "seed": self.seed,
            "seed_rule": "cell i runs with numpy.random.SeedSequence(seed, spawn_key=(i,))",
            "versions": package_versions(),
            "created": _now(),
            "cells": {},
            "notes": {},
        }
        self._write(manifest)
        return manifest

    def _write(self, manifest=None) -> None:
        m = self.manifest if manifest is None else manifest
        _atomic_write_text(self.root / _MANIFEST, json.dumps(m, indent=1, sort_keys=True) + "\n")

    # -- cells ---------------------------------------------------------------------------------
    def cell_seed(self, index: int) -> np.random.SeedSequence:
        """The seed of cell ``index``: ``SeedSequence(config.seed, spawn_key=(index,))``."""
        return np.random.SeedSequence(self.seed, spawn_key=(int(index),))

    def path(self, label: str) -> Path:
        return self.root / f"{label}.npz"

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
        if entry.get("sha256") != _sha256(path):
            return None
        try:
            return dpsim.load(path)
        except Exception:  # corrupt file: recompute
            return None

    def get(self, cell: Cell):
        """Load ``cell`` from the cache if valid, else compute and save it; returns the Result."""
        self._check(cell)
        meta = json.loads(json.dumps(dict(cell.meta)))
        res = self._load_valid(cell)
        if res is not None:
            entry = self.manifest["cells"][cell.label]
            if entry.get("meta", {}) != meta:
                entry["meta"] = meta
                self._write()
            self.reused.append(cell.label)
            return res
        t0 = time.perf_counter()
        res = cell.compute(self.cell_seed(cell.index))
        wall = time.perf_counter() - t0
        if not isinstance(res, dpsim.Result):
            raise TypeError(f"cell {cell.label!r} returned {type(res).__name__}, expected dpsim.Result")
        path = self.path(cell.label)
        tmp = path.with_name(path.name + ".tmp")
        res.save(tmp)
        os.replace(tmp, path)
        self.manifest["cells"][cell.label] = {
            "index": int(cell.index), "file": path.name, "sha256": _sha256(path),
            "wall_time_s": round(wall, 3), "finished": _now(), "meta": meta,
        }
        self._write()
        self.computed.append(cell.label)
        return res

    def run(self, cells: Sequence[Cell], *, desc: str | None = None) -> dict:
        """Run (or load) ``cells`` in order with a progress bar; ``{label: Result}``."""
        from tqdm.auto import tqdm

        cells = list(cells)
        labels = [c.label for c in cells]
        if len(set(labels)) != len(labels):
            raise ValueError(f"duplicate cell labels in {labels}")
        out = {}
        bar = tqdm(cells, desc=desc or f"{self.experiment} [{self.scale}]", unit="cell",
                   disable=not self.show_progress, leave=False, file=sys.stderr)
        for cell in bar:
            bar.set_postfix_str(cell.label, refresh=False)
            out[cell.label] = self.get(cell)
        bar.close()
        return out

    def note(self, key: str, value) -> None:
        """Store derived JSON data in the manifest (``notes[key]``)."""
        self.manifest["notes"][key] = json.loads(json.dumps(value))
        self._write()

    def finish(self, labels: Sequence[str]) -> None:
        self.manifest["complete"] = True
        self.manifest["results"] = list(labels)
        self.manifest["finished"] = _now()
        self._write()


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


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
        """The results listed in ``root/manifest.json`` (a finished run's folder)."""
        root = Path(root)
        manifest = json.loads((root / _MANIFEST).read_text())
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


# ------------------------------------------------------------------------------------------------
# Reproduce: experiments → figures → REPORT.md


def run_experiment(exp: Experiment, scale: str, *, results_dir, force=False, progress=None):
    """Run (or load) ``exp`` at ``scale``; returns ``(cache, {label: Path})``."""
    config = exp.config(scale)
    cache = Cache(Path(results_dir) / exp.name / scale, experiment=exp.name, scale=scale,
                  config=config, version=code_version(exp.module), force=force, progress=progress)
    results = exp.run(config, cache)
    missing = [k for k in results if k not in cache.manifest["cells"]]
    if missing:
        raise RuntimeError(f"experiment {exp.name!r} returned results not produced by its cache: {missing}")
    cache.finish(list(results))
    return cache, {label: cache.path(label) for label in results}


def render_figures(exp: Experiment, paths: Mapping[str, Path], out_dir: Path) -> list[dict]:
    """Render each figure of ``exp`` from saved results; one report entry per figure."""
    entries = []
    saved = Saved(paths)
    for fig_name in exp.figures:
        mod = importlib.import_module(f"dpsim.paper_figures.{fig_name}")
        files = [Path(p) for p in mod.render(saved, out_dir)]
        finding = mod.evaluate(saved)
        holds = finding.get("holds")
        entries.append({
            "figure": fig_name,
            "files": [p.name for p in files],
            "claim": str(finding["claim"]),
            "measured": str(finding["measured"]),
            "holds": None if holds is None else bool(holds),
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
        "| experiment | scale | claim holds |",
        "|---|---|---|",
    ]
    ordered = [n for n in order if n in entries]
    for name in ordered:
        e = entries[name]
        lines.append(f"| [{name}](#{name}) | {e['scale']} | "
                     + ", ".join(_holds_text(f["holds"]) for f in e["figures"]) + " |")
    lines.append("")
    for name in ordered:
        e = entries[name]
        cells = e["cells"]
        lines += [
            f'<a id="{name}"></a>',
            f"## {name}: {e['title']}",
            "",
            f"Scale `{e['scale']}`; results in `{e['results_dir']}` (cache key `{e['key']}`, code "
            f"version `{e['code_version']}`); {cells['total']} cells, {cells['reused']} reused from "
            f"the cache, {cells['computed']} computed; generated {e['generated']}.",
            "",
        ]
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
                f"**Holds here:** {_holds_text(f['holds'])}." + (f" {f['verdict']}" if f["verdict"] else ""),
                "",
            ]
    path = out_dir / "REPORT.md"
    _atomic_write_text(path, "\n".join(lines).rstrip() + "\n")
    return path


def _holds_text(h) -> str:
    return {True: "yes", False: "no", None: "inconclusive"}[h]
