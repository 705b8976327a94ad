"""The per-cell results cache of one experiment at one scale and key (:class:`Cache`: its
manifest, the cells it loads or has computed, the progress shown), and :func:`prune`."""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

import dpsim

from .runners import InProcess
from .spec import (BACKENDS, Cell, cache_key, cell_seed, code_commit, config_json,
                   numerics_version, package_versions)
from .store import (_FORMAT, _KEY, _LABEL, _LATEST, _LOCK, _MANIFEST, _OLD_FORMATS, _PARTIAL,
                    _TABLE, _atomic_write, _atomic_write_text, _now, _owner_alive, _sha256,
                    _stamp, _try_lock, file_lock)
from .table import _cell_rows, write_table


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
    """Per-cell results cache of one experiment at one scale and one key (package docstring).

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
