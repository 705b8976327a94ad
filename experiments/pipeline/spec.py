"""Experiment specs and their keys: :class:`Experiment`, :class:`Cell`, the seed of a cell, the
declared numerics version, the config checks and :func:`cache_key` (the package docstring says
what a key is)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

import dpsim


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
    run: Callable[[Any, "Cache"], dict]  # noqa: F821 (.cache.Cache, which imports this module)
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
