"""Saved results, as figures read them (:class:`Saved`), and the key folder a scale folder's
``LATEST`` names (:func:`latest_dir`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping

import dpsim

from .store import _KEY, _LATEST, _MANIFEST


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
