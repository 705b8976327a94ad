"""The cost of ``simulate`` outside its kernels (issue 32, item 6), checked deterministically:
what is computed once per process, the default record schedule's rule, and what ``import dpsim``
loads.  No timings here: ``benchmarks/bench_overhead.py`` measures them."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import dpsim
from dpsim import engine, problems
from dpsim.engine import (DEFAULT_RECORDS, RECORD_FLOOR_WORK, RECORD_SMALL_WORK, _record_steps,
                          default_record_every)

#: Workload W of benchmarks/bench_dp_sgd.py: n = 25 000, d = 10 000 at density 1 % (100 nonzeros a
#: row), b = 64, R = 64.
W = dict(rows=25_000, d=10_000, nnz=100.0, batch_size=64, trials=64)


def _tiny_run(**kw):
    prob = problems.least_squares(40, 3, seed=0)
    return dpsim.simulate(prob, "dp_sgd", steps=3, batch_size=4, trials=2, seed=0, **kw)


# -- once per process --------------------------------------------------------------------------

def test_versions_are_looked_up_once_per_process(monkeypatch):
    import importlib.metadata as md

    calls = []
    real = md.version

    def counting(dist):
        calls.append(dist)
        return real(dist)

    monkeypatch.setattr(md, "version", counting)
    engine._version_items.cache_clear()
    try:
        a, b = _tiny_run(), _tiny_run()
        assert sorted(calls) == ["dp-accounting", "dpsim"]  # two look-ups for both runs
        assert a.config["versions"] == b.config["versions"]
        assert a.config["versions"] is not b.config["versions"]  # each result owns its dict
        a.config["versions"]["numpy"] = "edited"
        assert engine._versions()["numpy"] == np.__version__
    finally:
        engine._version_items.cache_clear()


def test_optimum_is_solved_only_when_a_metric_needs_it():
    from dpsim.problems.base import _UNSET

    prob = problems.logistic_regression(60, 4, seed=1)
    res = dpsim.simulate(prob, "dp_sgd", steps=2, batch_size=5, trials=2, metrics=("grad_norm_sq",))
    assert prob._optimum is _UNSET  # no Newton solve: nothing recorded needs w* or F*
    assert res.excess_loss is None and res.dist_to_opt is None
    res = dpsim.simulate(prob, "dp_sgd", steps=2, batch_size=5, trials=2)
    assert prob._optimum is not _UNSET
    assert res.dist_to_opt is not None and res.excess_loss is not None


# -- the default record schedule ---------------------------------------------------------------

@pytest.mark.parametrize("steps", [0, 1, 2, 5, 99, 100, 150, 199, 200, 500, 1000, 3000, 10_000, 100_000])
@pytest.mark.parametrize("sizes", [
    dict(rows=2000, d=50, batch_size=64, trials=100),          # the package docstring's example
    dict(rows=1000, d=20, batch_size=32, trials=256),          # bench_small_d's least squares
    dict(rows=25_000, d=10_000, nnz=100.0, batch_size=64, trials=1),  # workload W, one trial
    dict(rows=0, d=10_000, batch_size=64, trials=64),          # no full-data metric recorded
])
def test_small_runs_keep_about_100_records(steps, sizes):
    assert default_record_every(steps, **sizes) == max(1, steps // DEFAULT_RECORDS)


@pytest.mark.parametrize("steps, every, records", [
    (0, 1, 1), (1, 1, 2), (2, 2, 2), (100, 100, 2), (200, 200, 2), (300, 300, 2),
    (500, 250, 3), (1000, 200, 6), (3000, 167, 19), (10_000, 157, 65), (100_000, 1000, 101),
])
def test_workload_w_records_within_the_steps_work(steps, every, records):
    assert default_record_every(steps, **W) == every
    rec = _record_steps(steps, None, every)
    assert rec.size == records and rec[0] == 0 and rec[-1] == steps
    one = W["trials"] * W["rows"] * W["nnz"]
    budget = max(steps * W["trials"] * (W["batch_size"] * W["nnz"] + W["d"]), RECORD_FLOOR_WORK)
    assert rec.size <= max(2, budget // one)  # the rule's bound (at least the records 0 and T)


def test_rule_boundaries():
    # one record of exactly RECORD_SMALL_WORK multiply-adds is small; one more row is not
    small = dict(rows=RECORD_SMALL_WORK // 64, d=64, batch_size=1, trials=1)
    assert default_record_every(10_000, **small) == 100
    big = dict(small, rows=small["rows"] + 1)
    assert default_record_every(10_000, **big) > 100
    # never more records than the first rule, whatever the budget
    assert default_record_every(1000, rows=10**6, d=100, batch_size=10**6, trials=1) == 10


def test_simulate_uses_the_rule():
    # R·n·d = 10·4000·500 = 2e7 > 2**24: records thinned to max(T·R·(b·d + d), 2**27) of work
    prob = problems.logistic_regression(4000, 500, seed=0)
    kw = dict(steps=100, batch_size=8, trials=10, seed=0)
    every = default_record_every(100, rows=4000, d=500, batch_size=8, trials=10)
    assert every == 20  # 2**27 // 2e7 = 6 records: 0, 20, ..., 100
    res = dpsim.simulate(prob, "dp_sgd", metrics=("loss",), **kw)
    np.testing.assert_array_equal(res.steps, _record_steps(100, every))
    assert res.config["record_every"] == every
    # records that read no data keep the ~100 records
    res = dpsim.simulate(prob, "dp_sgd", metrics=(), **kw)
    np.testing.assert_array_equal(res.steps, np.arange(101))
    # an explicit record_every is taken as given
    res = dpsim.simulate(prob, "dp_sgd", metrics=("loss",), record_every=1, **kw)
    assert res.steps.size == 101


def test_sparse_rows_count_their_nonzeros():
    prob = problems.logistic_regression(300, 1000, density=0.01, seed=0)
    rows, nnz = engine._record_rows_and_nnz(prob, ("loss",))
    X = prob.features
    assert rows == 300 and nnz == pytest.approx(X.nnz / 300) and nnz < 50
    assert engine._record_rows_and_nnz(prob, ())[0] == 0
    assert engine._record_rows_and_nnz(prob, ("dist_to_opt",))[0] == 0


# -- import dpsim ------------------------------------------------------------------------------

#: Not imported by ``import dpsim``: the layers above the engine and the heavy optional libraries
#: come with the first call that needs them.
LAZY = ("dp_accounting", "xarray", "tqdm", "scipy.stats", "scipy.signal", "scipy.optimize",
        "scipy.linalg", "scipy.sparse", "dpsim.optimizers", "dpsim.problems",
        "dpsim.accounting", "dpsim.transforms", "dpsim.calibrate", "dpsim.audit")


def _fresh(code: str):
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_dpsim_is_light():
    loaded = _fresh(f"import sys, json, dpsim; print(json.dumps([m for m in {LAZY!r} if m in sys.modules]))")
    assert loaded == []


def test_lazy_names_still_work():
    code = """
import json, sys, types, dpsim
out = {"simulate": callable(dpsim.simulate), "calibrate": isinstance(dpsim.calibrate, types.FunctionType),
       "audit": isinstance(dpsim.audit, types.FunctionType)}
import dpsim.calibrate, dpsim.audit
from dpsim.audit import GradientTable
out["still_functions"] = [isinstance(dpsim.calibrate, types.FunctionType),
                          isinstance(dpsim.audit, types.FunctionType)]
out["modules"] = [isinstance(sys.modules[m], types.ModuleType) for m in ("dpsim.calibrate", "dpsim.audit")]
res = dpsim.simulate(dpsim.problems.least_squares(30, 2, seed=0), "dp_sgd", steps=2, batch_size=4)
out["ran"] = res.loss.shape == (3, 1)
print(json.dumps(out))
"""
    assert _fresh(code) == {"simulate": True, "calibrate": True, "audit": True,
                            "still_functions": [True, True], "modules": [True, True], "ran": True}


def test_function_modules_imported_first_stay_functions():
    code = """
import json, types
from dpsim.calibrate import calibrate as f      # the module first, then the package's name
import dpsim
print(json.dumps([dpsim.calibrate is f, isinstance(dpsim.audit, types.FunctionType)]))
"""
    assert _fresh(code) == [True, True]


def test_the_package_still_pickles_by_reference():
    """``dpsim`` is a ModuleType subclass (so that its function names stay functions): pickling
    libraries that look modules up by exact type (cloudpickle, used by dask) still pickle it,
    and functions that use it, by reference."""
    import pickle

    cloudpickle = pytest.importorskip("cloudpickle")
    assert pickle.loads(pickle.dumps(dpsim)) is dpsim
    assert cloudpickle.loads(cloudpickle.dumps(dpsim)) is dpsim
    fn = cloudpickle.loads(cloudpickle.dumps(lambda: dpsim.simulate))
    assert fn() is dpsim.simulate
