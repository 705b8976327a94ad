"""Compare optimizers on your problem in one call: :func:`compare` (also ``dpsim.compare``).

``{optimizer name: {hyperparameter: values}}`` × trials becomes a set of sweep cells run through
the reproduction pipeline's machinery (:mod:`dpsim.experiments.pipeline`): each cell is one
vectorized :func:`dpsim.simulate` call (one grid point, all its trials), cached as it finishes
under ``results`` (keyed by the problem's config — for :func:`dpsim.problems.from_data`, a hash of
the data — and the run's settings), run in this process or on Dask workers (a local cluster or an
existing one), resumed after a kill without recomputing a finished cell.  Cell ``i`` runs with
``SeedSequence(seed, spawn_key=(i,))`` where ``i`` is derived from the optimizer name and the grid
point (not from its position), so the numbers are the same whatever the runner, the number of
workers, and whatever other points the grids hold: widening a grid recomputes only the new points.

The result is one ``xarray.Dataset`` (dimensions ``optimizer``, ``config``, ``trial``, ``step``);
:func:`dpsim.plot.curves` draws it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

import dpsim

from dpsim.analysis.stats import mean_ci

from . import pipeline

__all__ = ["compare", "SELECT_METRICS", "DEFAULT_DELTA", "run_toml"]

#: Metrics :func:`compare` can select on: lower is better, except ``test_accuracy``.
SELECT_METRICS = ("loss", "excess_loss", "test_loss", "test_accuracy")
#: δ at which ε is reported when no ``target_delta`` is given.
DEFAULT_DELTA = 1e-5
#: Declared numerics version of this module's cells (part of the cache key).
NUMERICS = 1
_LEVEL = 0.95


@dataclass(frozen=True)
class _Config:
    """What a comparison's cells depend on, apart from the grid points (each cell's own label):
    the cache key of :class:`pipeline.Cache`."""

    problem: dict
    steps: int
    batch_size: int
    trials: int
    seed: int
    target_epsilon: float | None
    target_delta: float | None
    metrics: tuple
    sampling: str
    accountant: str
    record_every: int | None


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _check_grids(grids) -> dict:
    if not isinstance(grids, Mapping) or not grids:
        raise ValueError(f"grids must be a non-empty dict {{optimizer name: {{hyperparameter: "
                         f"[values]}}}}, got grids={grids!r}")
    known = dpsim.optimizers.names()
    out = {}
    for name, grid in grids.items():
        if name not in known:
            raise ValueError(f"unknown optimizer {name!r} in grids; see dpsim.optimizers.names()")
        if grid is None:
            grid = {}
        if not isinstance(grid, Mapping):
            raise ValueError(f"grids[{name!r}] must be a dict {{hyperparameter: [values]}}, "
                             f"got {grid!r}")
        axes = {}
        for k, v in grid.items():
            vals = list(v) if isinstance(v, (list, tuple, np.ndarray)) else [v]
            if not vals:
                raise ValueError(f"grids[{name!r}][{k!r}] is empty; give at least one value")
            if len(set(map(repr, vals))) != len(vals):
                raise ValueError(f"grids[{name!r}][{k!r}] repeats a value: {vals!r}")
            axes[str(k)] = [v.item() if isinstance(v, np.generic) else v for v in vals]
        out[str(name)] = axes
    return out


def _points(axes: dict) -> list[dict]:
    return [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())] or [{}]


def _cell_id(name: str, point: dict) -> tuple[str, int]:
    """A cell's label and index from what it runs (not from its position in the grid)."""
    blob = json.dumps({"optimizer": name, "point": point}, sort_keys=True, default=repr)
    h = hashlib.sha256(blob.encode()).hexdigest()
    return f"{name}-{h[:12]}", int(h[:13], 16)


def _calibrated(name, point, *, epsilon, delta, steps, batch_size, n, sampling, accountant, memo):
    """The noise multiplier that makes one run of ``name`` at ``point`` cost (ε, δ); computed
    once per distinct set of declared privacy events (a learning rate declares none, so a
    learning-rate grid is calibrated once)."""
    opt = dpsim.optimizers.get(name, **point)
    key = repr(opt.events)
    if key not in memo:
        cal = dpsim.calibrate(opt, epsilon=epsilon, delta=delta, steps=steps,
                              batch_size=batch_size, n=n, sampling=sampling, accountant=accountant)
        memo[key] = cal.hyperparameters.get("noise_multiplier")
    return memo[key]


def _default_metrics(problem) -> tuple:
    m = ["loss"]
    if problem.has_heldout:
        m.append("test_loss")
        if problem.link == "logistic":
            m.append("test_accuracy")
    return tuple(m)


def _run_cell(problem, name, point, sigma, steps, batch_size, trials, sampling, metrics,
              record_every, accountant):
    """The compute of one cell (runs on a worker: captures no cache)."""
    hp = dict(point)
    if sigma is not None:
        hp["noise_multiplier"] = sigma

    def compute(seed):
        opt = dpsim.optimizers.get(name, **hp)
        return dpsim.simulate(problem, opt, steps=steps, batch_size=batch_size, trials=trials,
                              seed=seed, sampling=sampling, metrics=metrics,
                              record_every=record_every, accountant=accountant)
    return compute


def _check_args(problem, grids, *, steps, batch_size, trials, seed, target_epsilon, target_delta,
                select, metrics) -> tuple[dict, tuple]:
    """Validate :func:`compare`'s arguments (raising ``ValueError`` naming the first bad one) and
    return the checked grids and the recorded metrics (``metrics=None``: the problem's default)."""
    if not isinstance(problem, dpsim.problems.Problem):
        raise ValueError(f"problem must be a dpsim.problems.Problem, got problem={problem!r}")
    grids = _check_grids(grids)
    for k, v in (("steps", steps), ("batch_size", batch_size), ("trials", trials)):
        if not _is_int(v) or v < 1:
            raise ValueError(f"{k} must be a positive integer, got {k}={v!r}")
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got seed={seed!r}")
    if (target_epsilon is None) != (target_delta is None):
        raise ValueError("target_epsilon and target_delta must be given together, got "
                         f"target_epsilon={target_epsilon!r}, target_delta={target_delta!r}")
    if target_epsilon is not None:
        on_grid = [n for n, g in grids.items() if "noise_multiplier" in g]
        if on_grid:
            raise ValueError(f"noise_multiplier is on the grid of {on_grid} but target_epsilon "
                             "solves it; drop one of the two")
    if select not in SELECT_METRICS:
        raise ValueError(f"select must be one of {', '.join(SELECT_METRICS)}, got select={select!r}")
    if select.startswith("test_") and not problem.has_heldout:
        raise ValueError(f"select={select!r} needs a held-out split, and problem {problem.name!r} "
                         "has none: build it with dpsim.problems.from_data(X, y, ..., test=0.2)")
    metrics = _default_metrics(problem) if metrics is None else metrics
    metrics = dpsim.engine.check_metrics(metrics, problem)
    need = "loss" if select == "excess_loss" else select
    if need not in metrics:
        raise ValueError(f"select={select!r} needs the metric {need!r}; add it to metrics={metrics!r}")
    if select == "excess_loss" and problem.optimum is None:
        raise ValueError(f"select='excess_loss' needs the problem's optimum; problem "
                         f"{problem.name!r} has none: select on 'loss'")
    return grids, metrics


def _plan(problem, grids, cfg, *, steps, batch_size, target_epsilon, target_delta) -> list[tuple]:
    """Every cell of a comparison, as ``(optimizer, config index, point, cell)`` in grid order.

    With ``target_epsilon`` each point's noise multiplier is calibrated (once per distinct set of
    declared privacy events, :func:`_calibrated`, with ``steps`` and ``batch_size`` as the caller
    gave them) and becomes part of the cell's label and index.
    """
    trials, metrics, record_every = cfg.trials, cfg.metrics, cfg.record_every
    sampling, accountant = cfg.sampling, cfg.accountant
    memo: dict = {}
    plan = []
    for name, axes in grids.items():
        for j, point in enumerate(_points(axes)):
            sigma = None
            if target_epsilon is not None:
                sigma = _calibrated(name, point, epsilon=target_epsilon, delta=target_delta,
                                    steps=steps, batch_size=batch_size, n=problem.n,
                                    sampling=sampling, accountant=accountant, memo=memo)
            label, index = _cell_id(name, {**point, "noise_multiplier": sigma} if sigma else point)
            meta = {"optimizer": name, "point": json.loads(json.dumps(point, default=repr)),
                    "noise_multiplier": sigma}
            compute = _run_cell(problem, name, point, sigma, int(steps), int(batch_size),
                                int(trials), sampling, tuple(metrics), record_every, accountant)
            plan.append((name, j, point, pipeline.Cell(label, index, compute, meta)))
    return plan


def compare(problem, grids, *, steps, batch_size, trials, seed=0, target_epsilon=None,
            target_delta=None, select="loss", metrics=None, workers=None, scheduler=None,
            results=None, sampling="poisson", accountant="pld", record_every=None, delta=None,
            force=False, progress=None):
    """Run every optimizer over its hyperparameter grid with ``trials`` seeds each, pick each
    optimizer's best configuration, and return everything as one labelled Dataset.

    Parameters
    ----------
    problem : dpsim.problems.Problem
        Any problem, e.g. :func:`dpsim.problems.from_data` or a :mod:`dpsim.datasets` loader.
    grids : dict
        ``{optimizer name: {hyperparameter: [values]}}``; every combination of one optimizer's
        values is a *configuration* (product order, first axis slowest); a scalar is a one-value
        axis; ``{}`` runs the defaults.  With ``target_epsilon``, ``noise_multiplier`` may not be
        on a grid (it is solved).
    steps, batch_size, trials : int
        Steps ``T``, nominal batch size ``b`` and trials (seeds) per configuration.
    seed : int
        The comparison's seed; cell seeds derive from it (module docstring).
    target_epsilon, target_delta : float, optional
        Calibrate each optimizer's ``noise_multiplier`` so that one run costs ``target_epsilon``
        at ``target_delta`` (:func:`dpsim.calibrate`, from its declared events, ``accountant``).
    select : {"loss", "excess_loss", "test_loss", "test_accuracy"}
        The selection metric.  **Rule**: each configuration is scored by the mean over its
        trials of ``select`` at the last record, a diverged trial (:attr:`dpsim.Result.diverged`)
        scoring the worst value (``+inf``; ``-inf`` for accuracy); the best score wins (lowest,
        highest for ``test_accuracy``), the first configuration in grid order on a tie.  The
        selected configuration's numbers come from the same trials that selected it (they are
        optimistic by the selection; for an unbiased estimate rerun it with another ``seed``).
        Selecting on a ``test_*`` metric tunes on the held-out rows.
    metrics : tuple of str, optional
        Recorded metrics (:func:`dpsim.simulate`); default ``("loss",)`` plus ``"test_loss"``
        and (logistic) ``"test_accuracy"`` when the problem has a held-out split.
        ``excess_loss`` comes with ``loss`` when the problem knows its optimum.
    workers, scheduler : optional
        Where cells run: ``workers=None`` or ``1`` in this process, ``workers=N`` on a local
        Dask cluster of ``N`` processes, ``scheduler="tcp://host:port"`` on an existing cluster.
    results : path, optional
        Folder of the cell cache (created if missing): a rerun with the same arguments loads
        every finished cell, and an interrupted one resumes.  ``None``: a temporary folder,
        removed at the end.
    sampling, accountant, record_every :
        As in :func:`dpsim.simulate`.
    delta : float, optional
        δ of the reported ε (default ``target_delta``, else :data:`DEFAULT_DELTA`).
    force : bool
        Recompute every cell.
    progress : bool, optional
        A line per finished cell (default: on a terminal).

    Returns
    -------
    xarray.Dataset
        Dimensions ``optimizer``, ``config`` (padded to the largest grid; ``valid`` marks real
        configurations), ``trial``, ``step``.  Variables: each metric ``(optimizer, config,
        trial, step)`` with ``<metric>_mean``, ``<metric>_lo``, ``<metric>_hi`` (mean and Student-t
        95 % interval over the finite, non-diverged trials) on ``(optimizer, config, step)``;
        ``noise_multiplier`` σ (the σ each cell ran with; a coordinate rather than a variable
        when σ is on a grid) and ``epsilon`` ``(optimizer, config)``; ``diverged``
        ``(optimizer, config, trial)``; ``score`` ``(optimizer, config)`` (the selection score);
        ``selected`` ``(optimizer,)`` (the chosen config); for each hyperparameter ``h`` of a
        grid, a coordinate ``h`` on ``(optimizer, config)`` and ``selected_h`` and
        ``edge_h`` ``(optimizer,)``: whether the chosen value is the smallest or largest of a
        numeric axis with more than one value (the grid may be too narrow there).  ``attrs``:
        the settings, the selection rule, δ, and what ε covers.

    Notes
    -----
    ε is the cost of *one* run of one configuration under the accountant's adjacency
    (add/remove one example, with the sampling rate fixed in advance); trying the grid on the
    same private data and the recorded metrics (full-data losses, held-out metrics) are not
    covered by it.

    Examples
    --------
    >>> import dpsim
    >>> prob = dpsim.problems.logistic_regression(500, 5, seed=0)
    >>> ds = dpsim.compare(prob, {"dp_sgd": {"lr": [0.1, 1.0]}, "dp_adam": {"lr": [0.01, 0.1]}},
    ...                    steps=50, batch_size=50, trials=4, target_epsilon=1.0,
    ...                    target_delta=1e-5)                                  # doctest: +SKIP
    >>> ds["selected_lr"].to_series()                                         # doctest: +SKIP
    """
    grids, metrics = _check_args(problem, grids, steps=steps, batch_size=batch_size, trials=trials,
                                 seed=seed, target_epsilon=target_epsilon,
                                 target_delta=target_delta, select=select, metrics=metrics)
    if delta is None:
        delta = target_delta if target_delta is not None else DEFAULT_DELTA
    runner = pipeline.make_runner(1 if workers is None and scheduler is None else workers, scheduler)
    cfg = _Config(problem=json.loads(json.dumps(problem.config, default=repr)), steps=int(steps),
                  batch_size=int(batch_size), trials=int(trials), seed=int(seed),
                  target_epsilon=None if target_epsilon is None else float(target_epsilon),
                  target_delta=None if target_delta is None else float(target_delta),
                  metrics=tuple(metrics), sampling=sampling, accountant=accountant,
                  record_every=record_every)
    plan = _plan(problem, grids, cfg, steps=steps, batch_size=batch_size,
                 target_epsilon=target_epsilon, target_delta=target_delta)
    return _run(problem, grids, plan, cfg, runner, select=select, delta=delta, results=results,
                force=force, progress=progress)


def _run(problem, grids, plan, cfg, runner, *, select, delta, results, force, progress):
    """Run ``plan``'s cells through a :class:`pipeline.Cache` under ``results`` (a temporary
    folder, removed at the end, when ``None``) and build :func:`compare`'s Dataset from them."""
    tmp = None
    if results is None:
        tmp = tempfile.TemporaryDirectory(prefix="dpsim-compare-")
        results = tmp.name
    try:
        root = Path(results) / "compare" / problem.name.replace("/", "_")
        runner.start()
        try:
            cache = pipeline.Cache(root, experiment="compare", scale=problem.name, config=cfg,
                                   version=pipeline.numerics_version() + f";compare={NUMERICS}",
                                   force=force, progress=progress, runner=runner)
            out = cache.run([c for *_, c in plan], desc=f"compare on {problem.name}")
            cache.finish([c.label for *_, c in plan])
        finally:
            runner.close()
        ds = _dataset(problem, grids, plan, out, select=select, delta=delta, cfg=cfg)
        ds.attrs["cells_computed"] = len(cache.computed)
        ds.attrs["cells_reused"] = len(cache.reused)
        ds.attrs["results"] = "" if tmp is not None else str(cache.root)
        return ds
    finally:
        if tmp is not None:
            tmp.cleanup()


def _final_scores(res, select) -> np.ndarray:
    worst = -np.inf if select == "test_accuracy" else np.inf
    arr = getattr(res, select)
    if arr is None:
        raise ValueError(f"select={select!r} was not recorded for {res.config['optimizer']}")
    v = np.asarray(arr[-1], dtype=float)
    bad = res.diverged | ~np.isfinite(v)
    return np.where(bad, worst, v)


def _dataset(problem, grids, plan, out, *, select, delta, cfg):
    import xarray as xr

    names = list(grids)
    nconf = max(len(_points(grids[n])) for n in names)
    first = out[plan[0][3].label]
    steps = np.asarray(first.steps)
    O, C, R, K = len(names), nconf, cfg.trials, steps.size
    metric_names = [m for m in ("loss", "excess_loss", "grad_norm_sq", "dist_to_opt", "test_loss",
                                "test_accuracy") if getattr(first, m, None) is not None]
    data = {m: np.full((O, C, R, K), np.nan) for m in metric_names}
    sigma = np.full((O, C), np.nan)
    eps = np.full((O, C), np.nan)
    diverged = np.zeros((O, C, R), dtype=bool)
    valid = np.zeros((O, C), dtype=bool)
    score = np.full((O, C), np.nan)
    wall = np.full((O, C), np.nan)
    hp_names = sorted({k for n in names for k in grids[n]})
    numeric = {h: all(isinstance(v, (int, float)) and not isinstance(v, bool)
                      for n in names for v in grids[n].get(h, [])) for h in hp_names}
    hp = {h: np.full((O, C), np.nan) if numeric[h] else np.full((O, C), "", dtype=object)
          for h in hp_names}
    for name, j, point, cell in plan:
        o = names.index(name)
        res = out[cell.label]
        valid[o, j] = True
        for m in metric_names:
            data[m][o, j] = np.asarray(getattr(res, m), dtype=float).T
        diverged[o, j] = res.diverged
        sigma[o, j] = float(res.config["hyperparameters"].get("noise_multiplier") or 0.0) \
            if "noise_multiplier" in res.config["hyperparameters"] else np.nan
        e = res.epsilon(delta)
        eps[o, j] = float(np.max(e))
        s = _final_scores(res, select)
        score[o, j] = float(np.mean(s)) if np.all(np.isfinite(s)) else float(s[~np.isfinite(s)][0])
        wall[o, j] = res.wall_time
        for h, v in point.items():
            hp[h][o, j] = v if numeric[h] else str(v)
    coords = {"optimizer": names, "config": np.arange(C), "trial": np.arange(R), "step": steps}
    for h in hp_names:
        vals = hp[h] if numeric[h] else hp[h].astype(str)
        coords[h] = (("optimizer", "config"), vals)
    if "noise_multiplier" in coords:  # σ on a grid: the coordinate holds the σ every cell ran with
        coords["noise_multiplier"] = (("optimizer", "config"), sigma)
    variables = {}
    for m in metric_names:
        x = data[m]
        good = ~diverged[..., None] & np.isfinite(x)
        mean, half = _masked_mean_ci(x, good)
        variables[m] = (("optimizer", "config", "trial", "step"), x)
        variables[f"{m}_mean"] = (("optimizer", "config", "step"), mean)
        variables[f"{m}_lo"] = (("optimizer", "config", "step"), mean - half)
        variables[f"{m}_hi"] = (("optimizer", "config", "step"), mean + half)
    if "noise_multiplier" not in coords:
        variables["noise_multiplier"] = (("optimizer", "config"), sigma)
    variables["epsilon"] = (("optimizer", "config"), eps)
    variables["diverged"] = (("optimizer", "config", "trial"), diverged)
    variables["valid"] = (("optimizer", "config"), valid)
    variables["score"] = (("optimizer", "config"), score)
    variables["wall_time"] = (("optimizer", "config"), wall)
    selected = np.zeros(O, dtype=np.int64)
    for o, name in enumerate(names):
        n_o = len(_points(grids[name]))
        sc = score[o, :n_o]
        best = np.nanargmax(sc) if select == "test_accuracy" else np.nanargmin(sc)
        if not np.any(np.isfinite(sc)):
            best = 0  # every configuration diverged: the first, flagged by its score
        selected[o] = int(best)
    variables["selected"] = (("optimizer",), selected)
    for h in hp_names:
        sel = np.full(O, np.nan) if numeric[h] else np.full(O, "", dtype=object)
        edge = np.zeros(O, dtype=bool)
        for o, name in enumerate(names):
            axis = grids[name].get(h)
            if axis is None:
                continue
            v = _points(grids[name])[selected[o]][h]
            sel[o] = v if numeric[h] else str(v)
            edge[o] = bool(numeric[h] and len(axis) > 1 and v in (min(axis), max(axis)))
        variables[f"selected_{h}"] = (("optimizer",), sel if numeric[h] else sel.astype(str))
        variables[f"edge_{h}"] = (("optimizer",), edge)
    attrs = {
        "problem": json.dumps(cfg.problem, sort_keys=True),
        "grids": json.dumps(grids, sort_keys=True, default=repr),
        "settings": json.dumps({k: v for k, v in dataclasses.asdict(cfg).items() if k != "problem"},
                               sort_keys=True, default=repr),
        "select": select,
        "select_rule": ("per optimizer, the configuration with the best mean over trials of "
                        f"{select!r} at the last record (lowest; highest for test_accuracy), a "
                        "diverged trial scoring the worst value; the first in grid order on a tie"),
        "interval": f"Student-t {int(_LEVEL * 100)}% interval of the mean over finite, "
                    "non-diverged trials",
        "delta": float(delta),
        "epsilon_scope": ("epsilon: one run of one configuration, adjacency add/remove one example "
                          "with the sampling rate fixed in advance, accountant "
                          f"{cfg.accountant}; it does not cover tuning over the grid on the same "
                          "data, nor the recorded metrics (full-data losses, held-out metrics)"),
    }
    return xr.Dataset(variables, coords=coords, attrs=attrs)


def _masked_mean_ci(x, good):
    """Mean and Student-t half-width over axis 2 (trials) of ``x`` where ``good``."""
    O, C, R, K = x.shape
    mean = np.full((O, C, K), np.nan)
    half = np.full((O, C, K), np.nan)
    for o in range(O):
        for c in range(C):
            for k in range(K):
                v = x[o, c, good[o, c, :, k], k]
                if v.size:
                    m, h = mean_ci(v)
                    mean[o, c, k], half[o, c, k] = float(m), float(h)
    return mean, half


# ------------------------------------------------------------------------------------------------
# `dpsim compare CONFIG.toml`


def run_toml(path, *, out=None, plot=None, workers=None, scheduler=None, results=None,
             force=False) -> tuple:
    """Run the comparison a TOML file describes; write the Dataset (netCDF) and its plot.

    The file::

        [problem]                      # a built-in factory with its arguments ...
        name = "logistic_regression"
        n = 2000
        d = 20
        # ... or a dpsim.datasets loader:  dataset = "breast_cancer"  (+ its options)

        [run]
        steps = 500
        batch_size = 64
        trials = 20
        seed = 0
        target_epsilon = 1.0           # optional, with target_delta
        target_delta = 1e-5
        select = "loss"                # optional
        metrics = ["loss"]             # optional

        [grids.dp_sgd]
        lr = [0.1, 0.3, 1.0]
        [grids.dp_adam]
        lr = [0.001, 0.01]

    Returns ``(dataset, netcdf path, plot path)``; ``out`` defaults to the file's name with
    ``.nc``, ``plot`` to ``.png`` beside it.
    """
    import tomllib

    path = Path(path)
    try:
        spec = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"config file {str(path)!r} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML ({exc})") from None
    unknown = set(spec) - {"problem", "run", "grids"}
    if unknown:
        raise ValueError(f"{path}: unknown tables {sorted(unknown)}; expected problem, run, grids")
    for t in ("problem", "run", "grids"):
        if not isinstance(spec.get(t), dict):
            raise ValueError(f"{path}: needs a [{t}] table")
    run = dict(spec["run"])
    allowed = {"steps", "batch_size", "trials", "seed", "target_epsilon", "target_delta", "select",
               "metrics", "sampling", "accountant", "record_every", "delta"}
    bad = set(run) - allowed
    if bad:
        raise ValueError(f"{path}: unknown [run] keys {sorted(bad)}; allowed: {sorted(allowed)}")
    for k in ("steps", "batch_size", "trials"):
        if k not in run:
            raise ValueError(f"{path}: [run] needs {k}")
    pspec = dict(spec["problem"])
    if "dataset" in pspec:
        from dpsim import datasets

        problem = datasets.load(pspec.pop("dataset"), **pspec)
    elif "name" in pspec:
        problem = dpsim.problems.get(pspec.pop("name"), **pspec)
    else:
        raise ValueError(f"{path}: [problem] needs name = <factory> or dataset = <loader>")
    if "metrics" in run:
        run["metrics"] = tuple(run["metrics"])
    ds = compare(problem, spec["grids"], workers=workers, scheduler=scheduler, results=results,
                 force=force, **run)
    out = Path(out) if out is not None else path.with_suffix(".nc")
    if out.suffix != ".nc":
        raise ValueError(f"--out {str(out)!r}: the Dataset is written as netCDF, use a .nc name")
    write_dataset(ds, out)
    plot = Path(plot) if plot is not None else out.with_suffix(".png")
    from dpsim import plot as dpsim_plot

    metric = "excess_loss" if "excess_loss" in ds else "loss"
    fig = dpsim_plot.curves(ds, metric=metric)
    fig.savefig(plot, dpi=120)
    return ds, out, plot


def write_dataset(ds, path) -> None:
    """Write a :func:`compare` Dataset as netCDF (booleans as int8, strings as text), readable by
    ``xarray.open_dataset``."""
    ds = ds.copy()
    for k in list(ds.variables):
        if ds[k].dtype == bool:
            ds[k] = ds[k].astype(np.int8)
        elif ds[k].dtype == object:
            ds[k] = ds[k].astype(str)
    tmp = Path(path).with_name(f".{Path(path).name}.tmp")
    ds.to_netcdf(tmp)
    tmp.replace(path)


def register(subparsers) -> None:
    """Add ``dpsim compare CONFIG.toml`` to the command line."""
    p = subparsers.add_parser("compare", help="compare optimizers over hyperparameter grids "
                                              "(a TOML file): netCDF Dataset and plot")
    p.add_argument("config", help="the TOML file (see dpsim.experiments.compare.run_toml)")
    p.add_argument("--out", default=None, help="the Dataset (.nc; default CONFIG with .nc)")
    p.add_argument("--plot", default=None, help="the figure (default: --out with .png)")
    p.add_argument("--results", default=None, help="cell cache folder (resumable; default: none)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=None, metavar="N",
                       help="local Dask workers (default: run in this process)")
    where.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="an existing Dask cluster, e.g. tcp://host:8786")
    p.add_argument("--force", action="store_true", help="recompute every cell")
    p.set_defaults(handler=_handle)


def _handle(args) -> int:
    ds, out, plot = run_toml(args.config, out=args.out, plot=args.plot, workers=args.workers,
                             scheduler=args.scheduler, results=args.results, force=args.force)
    print(summary(ds))
    print(f"saved {out} and {plot}")
    return 0


def summary(ds) -> str:
    """A few lines: each optimizer's selected configuration, its final mean ± CI, σ, ε, the edge
    flags and the diverged trials."""
    sel_metric = ds.attrs.get("select", "loss")
    lines = [f"selected by {sel_metric} (mean over trials at the last record); "
             f"ε at δ={ds.attrs.get('delta'):g}, {ds.attrs.get('epsilon_scope', '').split(';')[0]}"]
    grids = json.loads(ds.attrs.get("grids", "{}"))
    for o, name in enumerate(ds["optimizer"].values):
        j = int(ds["selected"].values[o])
        parts = []
        for h in grids.get(str(name), {}):
            edge = " (grid edge)" if bool(ds[f"edge_{h}"].values[o]) else ""
            parts.append(f"{h}={ds[f'selected_{h}'].values[o]}{edge}")
        m = ds[f"{sel_metric}_mean"].values[o, j, -1] if f"{sel_metric}_mean" in ds else math.nan
        lo = ds[f"{sel_metric}_lo"].values[o, j, -1] if f"{sel_metric}_lo" in ds else math.nan
        hi = ds[f"{sel_metric}_hi"].values[o, j, -1] if f"{sel_metric}_hi" in ds else math.nan
        nd = int(ds["diverged"].values[o, j].sum())
        div = f", {nd} diverged trial(s) left out" if nd else ""
        lines.append(f"  {name:<14} {', '.join(parts) or 'defaults'}: {sel_metric} {m:.4g} "
                     f"[{lo:.4g}, {hi:.4g}], σ={ds['noise_multiplier'].values[o, j]:.4g}, "
                     f"ε={ds['epsilon'].values[o, j]:.4g}{div}")
    return "\n".join(lines)
