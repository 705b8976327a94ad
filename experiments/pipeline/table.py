"""The results table: one row per cell and trial (config columns and final metrics), written
as netCDF beside the cells."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

import dpsim

from .store import _atomic_write


def _cell_rows(label: str, index: int, meta: dict, res) -> dict:
    """Columns (name -> list of R values) of one cell's rows: one row per trial."""
    R = int(res.trials)
    cfg = res.config
    cols: dict[str, list] = {"cell": [label] * R, "cell_index": [index] * R,
                             "trial": list(range(R))}
    for k, v in meta.items():
        cols[f"meta_{k}"] = [v] * R
    cols["optimizer"] = [str(cfg.get("optimizer", ""))] * R
    problem = cfg.get("problem", {})
    cols["problem"] = [str(problem.get("name", "")) if isinstance(problem, dict) else str(problem)] * R
    for k in ("steps", "batch_size", "sampling", "backend", "dtype"):
        if k in cfg:
            cols[k] = [cfg[k]] * R
    for k, v in cfg.get("hyperparameters", {}).items():
        cols[f"hp_{k}"] = list(v) if isinstance(v, list) and len(v) == R else [v] * R
    if res.steps is not None and len(res.steps):
        cols["final_step"] = [int(res.steps[-1])] * R
        for k in dpsim.results.METRICS:
            a = getattr(res, k)
            if a is not None:
                cols[f"final_{k}"] = [float(x) for x in np.asarray(a)[-1]]
        for k, a in res.records.items():
            a = np.asarray(a)
            if a.ndim == 2 and a.shape[1] == R:
                cols[f"final_probe_{k}"] = [float(x) for x in a[-1]]
    if res.mean_batch_size is not None:
        mb = np.asarray(res.mean_batch_size, dtype=float)
        cols["mean_batch_size"] = list(mb) if mb.shape == (R,) else [float(mb.mean())] * R
    return cols


def _column(values: list):
    """One table column as a NumPy array netCDF can hold: float (NaN for missing), int, or str
    (JSON for lists and dicts, "" for missing)."""
    present = [v for v in values if v is not None]
    kinds = set(map(type, present))  # the tests below look at each distinct type once

    def all_of(classes, but=None) -> bool:
        return bool(kinds) and all(issubclass(k, classes) and not (but and issubclass(k, but))
                                   for k in kinds)

    if all_of((bool, np.bool_)):
        return np.array([-1 if v is None else int(v) for v in values], dtype=np.int32)
    if all_of((int, np.integer), but=bool):
        if len(present) == len(values) and all(-2**31 < int(v) < 2**31 for v in present):
            return np.array(values, dtype=np.int32)
        return np.array([np.nan if v is None else float(v) for v in values])
    if all_of((int, float, np.integer, np.floating), but=bool):
        return np.array([np.nan if v is None else float(v) for v in values])
    return np.array(["" if v is None else v if isinstance(v, str) else json.dumps(v)
                     for v in values], dtype=str)


def _column_of_parts(parts: Sequence[list]):
    """:func:`_column` of the concatenated ``parts`` (one list per cell), the same array, made
    part by part by NumPy's converters where a part's values allow it (no ``None``; strings or
    numbers): a sweep with folded grids has hundreds of thousands of rows."""
    kinds: set = set()
    for p in parts:
        kinds.update(map(type, p))
    kinds.discard(type(None))
    if not kinds or any(None in p for p in parts if p):
        return _column([v for p in parts for v in p])

    def all_of(classes, but=None) -> bool:
        return all(issubclass(k, classes) and not (but and issubclass(k, but)) for k in kinds)

    if all_of(str):
        return np.concatenate([np.array(p, dtype=str) for p in parts]) if parts else _column([])
    if kinds == {int}:
        try:
            a = np.concatenate([np.array(p, dtype=np.int64) for p in parts])
        except OverflowError:
            a = None
        if a is not None and (a.size == 0 or (a.min() > -2**31 and a.max() < 2**31)):
            return a.astype(np.int32)
        return _column([v for p in parts for v in p])
    if kinds <= {float, np.float64, int}:
        # Python floats (and ints) as float64: what float(v) gives, value by value
        return np.concatenate([np.array(p, dtype=np.float64) for p in parts])
    return _column([v for p in parts for v in p])


def results_table(used: Mapping[str, dict], results: Sequence[str] = ()):
    """The ``xarray.Dataset`` of the results table: dimension ``row`` (one per cell and trial);
    columns ``cell``, ``cell_index``, ``trial``, ``is_result`` (1 for the cells the experiment
    returns, 0 for intermediate ones such as tuning cells), ``meta_*`` (the cell's metadata),
    ``optimizer``, ``problem``, ``steps``, ``batch_size``, ``sampling``, ``backend``, ``dtype``,
    ``hp_*`` (hyperparameters, per trial when folded), ``final_step`` and ``final_*`` (every
    recorded metric and probe at the last record step)."""
    import xarray as xr

    names: list[str] = []
    for cols in used.values():
        names += [k for k in cols if k not in names]
    n = {lab: len(cols["trial"]) for lab, cols in used.items()}
    data = {}
    res_set = set(results)
    for name in names:
        parts = [cols.get(name, [None] * n[lab]) for lab, cols in used.items()]
        data[name] = ("row", _column_of_parts(parts))
    data["is_result"] = ("row", np.array([int(lab in res_set) for lab, cols in used.items()
                                          for _ in range(n[lab])], dtype=np.int32))
    return xr.Dataset(data)


def write_table(path: Path, used: Mapping[str, dict], results: Sequence[str], attrs: dict) -> None:
    """Write the results table (:func:`results_table`) to ``path`` as netCDF (scipy engine)."""
    ds = _ascii_as_bytes(results_table(used, results))
    ds.attrs.update({k: str(v) for k, v in attrs.items()})
    _atomic_write(Path(path), lambda tmp: ds.to_netcdf(tmp, engine="scipy"))


def _ascii_as_bytes(ds):
    """``ds`` with each all-ASCII text column as the UTF-8 bytes xarray would write for it (NumPy
    converts in C; xarray encodes a text column string by string, slowly on long tables), marked
    ``_Encoding = "utf-8"`` exactly as xarray marks it, so the file is byte for byte the one
    xarray writes from the text column and opens as text.  Columns with other characters are left
    to xarray."""
    for name, var in ds.data_vars.items():
        if var.dtype.kind != "U":
            continue
        try:
            raw = var.values.astype("S")
        except UnicodeEncodeError:
            continue
        ds[name] = (var.dims, raw, {**var.attrs, "_Encoding": "utf-8"})
    return ds
