"""Sweeps at scale: cells on a real dask.distributed LocalCluster (bitwise identical to the
sequential run, surviving a killed worker), concurrent `dpsim reproduce` on one folder, cache keys
that ignore source edits, `dpsim cache prune`, the results table, progress lines and `--backend`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import types
from pathlib import Path

import numpy as np
import pytest

import dpsim
from dpsim import cli, experiments
from dpsim.experiments import cli as experiments_cli
from dpsim.experiments import dpsgd_logistic, pipeline

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def _arrays(res) -> dict:
    out = {k: getattr(res, k) for k in ("steps", "loss", "excess_loss", "grad_norm_sq",
                                         "dist_to_opt", "params", "mean_batch_size")}
    out.update({f"probe_{k}": v for k, v in res.records.items()})
    return {k: None if v is None else (np.asarray(v).dtype.str, np.asarray(v).shape,
                                       np.asarray(v).tobytes()) for k, v in out.items()}


def _same_results(a: dict, b: dict) -> None:
    """Bitwise identical results: every array's bytes, the config (minus wall-clock) and privacy."""
    assert sorted(a) == sorted(b)
    for lab in a:
        assert _arrays(a[lab]) == _arrays(b[lab]), lab
        assert a[lab].config == b[lab].config and a[lab].privacy == b[lab].privacy, lab


def _saved(root: Path) -> dict:
    return {p.stem: dpsim.load(p) for p in sorted(root.glob("*.npz"))}


@pytest.fixture(scope="module")
def cluster():
    """One real LocalCluster of 2 worker processes on 127.0.0.1, shared by the Dask tests."""
    runner = pipeline.DaskRunner(workers=2)
    try:
        yield runner
    finally:
        runner.close()


@pytest.fixture(scope="module")
def sequential(tmp_path_factory):
    """The tiny dpsgd_logistic sweep computed in this process (the reference)."""
    tmp = tmp_path_factory.mktemp("seq")
    exp = experiments.get("dpsgd_logistic")
    cache, _ = pipeline.run_experiment(exp, "tiny", results_dir=tmp, progress=False)
    return cache


# ---------------------------------------------------------------------------------------------
# Cells on Dask


def test_make_runner_one_worker_is_in_process_and_default_is_every_core():
    assert isinstance(pipeline.make_runner(1), pipeline.InProcess)
    r = pipeline.make_runner(None)
    n = pipeline.default_workers()
    assert (isinstance(r, pipeline.InProcess) if n == 1 else r.workers == n)
    assert pipeline.make_runner(scheduler="tcp://127.0.0.1:1").scheduler == "tcp://127.0.0.1:1"
    for bad in (0, -2, 1.5, True, "2"):
        with pytest.raises(ValueError, match=repr(bad).replace(".", r"\.")):
            pipeline.make_runner(bad)
    with pytest.raises(ValueError, match="not both"):
        pipeline.make_runner(2, scheduler="tcp://127.0.0.1:1")


def test_local_cluster_sweep_is_bitwise_identical_to_the_sequential_run(cluster, sequential,
                                                                          tmp_path):
    exp = experiments.get("dpsgd_logistic")
    cache, _ = pipeline.run_experiment(exp, "tiny", results_dir=tmp_path, progress=False,
                                       runner=cluster)
    workers = cluster.client.run(os.getpid)
    assert len(workers) == 2 and os.getpid() not in workers.values()  # really other processes
    # the workers run without Dask's MALLOC_TRIM_THRESHOLD_ and without the profiler's sampling
    assert set(cluster.client.run(_worker_settings).values()) == {(None, False, "1")}
    assert len(cache.computed) == len(sequential.computed) == len(cache.used)
    _same_results(_saved(cache.root), _saved(sequential.root))
    a, b = cache.manifest, sequential.manifest
    assert (a["key"], a["notes"], a["results"]) == (b["key"], b["notes"], b["results"])
    assert a["runner"] == "on a local Dask cluster of 2 worker processes" and a["run_wall_s"] > 0
    assert b["runner"] == "in this process" and b["run_wall_s"] > 0
    assert {k: v["meta"] for k, v in a["cells"].items()} == {k: v["meta"] for k, v in b["cells"].items()}
    # the workers made the files' bytes, the parent wrote them: the sha256 in the manifest is
    # the file's
    for lab, entry in a["cells"].items():
        assert entry["sha256"] == pipeline._sha256(cache.path(lab))
        assert 0 < entry["cpu_time_s"] <= entry["wall_time_s"] + 0.01  # one thread's CPU time
        # the timeline: which worker process computed the cell, from when to when
        assert int(entry["worker"].rsplit(":", 1)[1]) in workers.values()
        assert a["run_t_start"] <= entry["t_start"] <= entry["t_stop"] <= a["run_t_stop"]
    assert {int(e["worker"].rsplit(":", 1)[1]) for e in b["cells"].values()} == {os.getpid()}


def _toy_failing_cells(n, bad):
    """``n`` toy cells; cell ``bad`` raises."""
    cells = _toy_cells(n)

    def boom(seed):
        raise ArithmeticError("cell t%d fails" % bad)

    cells[bad] = pipeline.Cell(f"t{bad}", bad, boom)
    return cells


def test_short_cells_run_several_to_a_task_bitwise_as_one_by_one(cluster, tmp_path, monkeypatch):
    """A batch of many cells goes to the workers in chunks (one Dask task each): every cell's
    file is the sequential run's, each chunk's cells ran on one worker one after another, and a
    cell that raises inside a chunk reports its error after the cells before it are saved."""
    assert [len(c) for c in cluster._chunks(list(range(40)), None)] == [2] * 20
    assert [len(c) for c in cluster._chunks(list(range(31)), None)] == [1] * 31
    assert max(len(c) for c in cluster._chunks(list(range(10_000)), None)) == 16
    monkeypatch.setattr(pipeline.DaskRunner, "TASKS_PER_WORKER", 2)  # chunks of 10 cells
    assert [c[0] for c in cluster._chunks(list(range(40)), None)] == [0, 10, 20, 30]
    seq = pipeline.Cache(tmp_path / "seq", experiment="toy", scale="tiny", config=_Cfg(),
                         version="v", progress=False)
    seq.run(_toy_cells(40))
    par = pipeline.Cache(tmp_path / "par", experiment="toy", scale="tiny", config=_Cfg(),
                         version="v", progress=False, runner=cluster)
    par.run(_toy_cells(40))
    _same_results(_saved(par.root), _saved(seq.root))
    cells = par.manifest["cells"]
    for first in (0, 10, 20, 30):  # one worker per chunk, its cells one after another
        chunk = [cells[f"t{i}"] for i in range(first, first + 10)]
        assert len({e["worker"] for e in chunk}) == 1
        assert all(a["t_stop"] <= b["t_start"] for a, b in zip(chunk, chunk[1:]))
    bad = pipeline.Cache(tmp_path / "bad", experiment="toy", scale="tiny", config=_Cfg(),
                         version="v", progress=False, runner=cluster)
    with pytest.raises(ArithmeticError, match="cell t13 fails") as raised:
        bad.run(_toy_failing_cells(40, 13))
    # returned by the worker rather than raised there: its traceback comes along as a note
    assert "in cell 13 of the batch on worker" in "".join(raised.value.__notes__)
    saved = set(bad.manifest["cells"])
    assert {f"t{i}" for i in range(10, 13)} <= saved and "t13" not in saved


def test_the_local_cluster_listens_on_the_loopback_interface_only(cluster):
    """Scheduler, nannies, workers and their HTTP servers (health/metrics; no dashboard): every
    listening socket of this process and its children is on 127.0.0.1."""
    psutil = pytest.importorskip("psutil")
    cluster.client  # noqa: B018 (started)
    me = psutil.Process()
    listening = [(p.pid, c.laddr) for p in [me, *me.children(recursive=True)]
                 for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    pids = {p for p, _ in listening}
    assert os.getpid() in pids and set(cluster.client.run(os.getpid).values()) <= pids
    assert len(listening) >= 5 and {a.ip for _, a in listening} == {"127.0.0.1"}, listening
    # the scheduler's HTTP server answers health checks on the loopback, and has no dashboard
    import urllib.error
    import urllib.request

    port = cluster.client.scheduler_info()["services"]["dashboard"]
    assert ("127.0.0.1", port) in {(a.ip, a.port) for _, a in listening} and port != 8787
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30) as r:
        assert r.read() == b"ok"
    with pytest.raises(urllib.error.HTTPError, match="404"):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=30)


def _worker_settings():
    import dask

    return (os.environ.get("MALLOC_TRIM_THRESHOLD_"),
            dask.config.get("distributed.worker.profile.enabled"), os.environ.get("OMP_NUM_THREADS"))


_FAULTS = """
import resource, numpy as np
from dpsim.experiments import pipeline
def faults():  # minor page faults of 100 allocations of 1 MiB, each freed before the next
    r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(100):
        a = np.ones(1 << 17)
        del a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0
# Fill the holes of ≥ 1 MiB that imports may have left in the heap (it is < 64 MiB here), and
# keep them filled: a free chunk that fits is reused whatever the thresholds, which made the
# count depend on the import's allocation pattern (0 faults in about one run in three).
hold = [np.ones(1 << 17) for _ in range(64)]
faults()
before = faults()
changed = pipeline.restore_malloc_thresholds(), pipeline.restore_malloc_thresholds()
print(before, faults(), *changed)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or
                    __import__("platform").libc_ver()[0] != "glibc", reason="glibc's allocator")
def test_restored_malloc_thresholds_reuse_freed_arrays_instead_of_faulting_them_in_again(
        monkeypatch):
    """With MALLOC_TRIM_THRESHOLD_ set (as Dask's nanny sets it), every 1 MiB array is a fresh
    mmap whose 256 pages fault on first touch; after restore_malloc_thresholds() the freed block
    is reused.  Without the variable nothing is changed."""
    p = subprocess.run([PY, "-c", _FAULTS], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, MALLOC_TRIM_THRESHOLD_="65536"))
    assert p.returncode == 0, p.stderr[-2000:]
    before, after, first, second = p.stdout.split()
    assert int(before) >= 100 * 200 and int(after) < int(before) / 20
    assert (first, second) == ("True", "False")  # changed once per process
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    monkeypatch.setattr(pipeline.worker, "_MALLOC_RESTORED", False)
    assert pipeline.restore_malloc_thresholds() is False


def test_a_killed_worker_does_not_stop_the_sweep(cluster, tmp_path):
    """Cell 3 SIGKILLs the worker process that runs it (once, recorded in a marker file); its
    nanny starts a new worker, Dask reruns the task and the sweep ends identical to the
    sequential run."""
    prob = dpsim.problems.logistic_regression(300, 4, seed=0)
    prob.optimum  # solved here: a Problem pickled before its optimum is known loses it (core bug)
    marker = tmp_path / "killed"
    parent = os.getpid()

    def make(i):
        def compute(seed):
            if i == 3 and os.getpid() != parent:
                try:
                    fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    pass
                else:
                    os.write(fd, str(os.getpid()).encode())
                    os.close(fd)
                    os.kill(os.getpid(), signal.SIGKILL)
            opt = dpsim.optimizers.get("dp_sgd", lr=0.5, clip=1.0, noise_multiplier=1.0)
            return dpsim.simulate(prob, opt, steps=200, batch_size=20, trials=4, seed=seed)
        return pipeline.Cell(f"c{i}", i, compute, {"i": i})

    @dataclasses.dataclass(frozen=True)
    class Cfg:
        seed: int = 11

    def cache(sub, runner=None):
        return pipeline.Cache(tmp_path / sub, experiment="kill", scale="tiny", config=Cfg(),
                              version="v", progress=False, runner=runner)

    on_dask = cache("dask", cluster).run([make(i) for i in range(6)])
    killed = int(marker.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(killed, 0)  # that worker is gone ...
    cluster.client.wait_for_workers(2, timeout=120)  # ... and is replaced by its nanny
    assert killed not in cluster.client.run(os.getpid).values()
    here = cache("seq").run([make(i) for i in range(6)])
    _same_results(on_dask, here)


def test_a_batch_whose_workers_all_die_at_once_is_submitted_again(tmp_path):
    """Both workers are SIGKILLed at once while cell 2 runs: the batch's data scattered to them
    is lost, the scheduler cancels the batch's tasks, and the runner submits the unfinished
    cells again (:attr:`pipeline.DaskRunner.RESUBMITS`); the sweep ends identical to the
    sequential run (before, the sweep stopped with ``FutureCancelledError``)."""
    prob = dpsim.problems.logistic_regression(300, 4, seed=0)
    prob.optimum
    started, killed = tmp_path / "started", tmp_path / "killed"
    parent = os.getpid()

    def make(i):
        def compute(seed):
            if i == 2 and os.getpid() != parent and not killed.exists():
                started.touch()
                time.sleep(120)  # killed long before this ends
            opt = dpsim.optimizers.get("dp_sgd", lr=0.5, clip=1.0, noise_multiplier=1.0)
            return dpsim.simulate(prob, opt, steps=200, batch_size=20, trials=4, seed=seed)
        return pipeline.Cell(f"c{i}", i, compute, {"i": i})

    @dataclasses.dataclass(frozen=True)
    class Cfg:
        seed: int = 12

    def cache(sub, runner=None):
        return pipeline.Cache(tmp_path / sub, experiment="lost", scale="tiny", config=Cfg(),
                              version="v", progress=False, runner=runner)

    runner = pipeline.DaskRunner(workers=2)  # its own cluster: the shared one stays whole
    try:
        runner.client.wait_for_workers(2, timeout=120)
        before = set(runner.client.run(os.getpid).values())
        out: dict = {}
        sweep = threading.Thread(target=lambda: out.update(
            res=cache("dask", runner).run([make(i) for i in range(6)])))
        sweep.start()
        deadline = time.monotonic() + 600  # a loaded machine: the cluster starts slowly
        while not started.exists():
            assert time.monotonic() < deadline and sweep.is_alive(), "cell 2 never started"
            time.sleep(0.05)
        killed.touch()
        for pid in before:
            os.kill(pid, signal.SIGKILL)
        sweep.join(timeout=300)
        assert not sweep.is_alive() and "res" in out
        for pid in before:  # both workers are gone: the cells ran on their replacements
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    finally:
        runner.close()
    _same_results(out["res"], cache("seq").run([make(i) for i in range(6)]))


def _lazy_sweep():
    """Closures as an experiment's ``run`` makes them: a problem built on first use and kept
    in a dict of the enclosing function, a problem built up front."""
    built: dict = {}
    prob = dpsim.problems.least_squares(60, 3, seed=1)

    def make(i):
        def compute(seed):
            if "p" not in built:
                built["p"] = dpsim.problems.least_squares(50, 3, seed=2)
                built["builds"] = built.get("builds", 0) + 1
            return built, prob
        return compute
    return built, prob, make


def test_batches_share_what_the_cells_share_and_changes_are_sent_afresh(monkeypatch):
    """A worker keeps the objects of earlier batches by token: a dict a closure holds (filled
    on the worker by the first cell) and a problem are the same objects in a later batch; a
    dict changed in this process since is sent afresh; another runner shares nothing."""
    monkeypatch.setattr(pipeline.worker, "_SHARED", {})
    built, prob, make = _lazy_sweep()
    shared = pipeline._SharedObjects()
    first = pipeline._loads_cell(pipeline._dumps_cell([make(0), make(1)], shared))
    second = pipeline._loads_cell(pipeline._dumps_cell([make(2)], shared))
    (b0, p0), (b1, p1), (b2, p2) = (c(None) for c in first + second)
    assert b0 is b1 is b2 and b2["builds"] == 1 and p0 is p1 is p2 and p0 is not prob
    # the problem arrives whole (its optimum solved once here; its self-reference intact)
    np.testing.assert_array_equal(p0.optimum[0], prob.optimum[0])
    assert vars(p0).keys() == vars(prob).keys()
    assert built == {}  # nothing ran here
    built["changed"] = True
    b3, p3 = pipeline._loads_cell(pipeline._dumps_cell([make(3)], shared))[0](None)
    assert b3 is not b0 and b3["changed"] and b3["builds"] == 1 and p3 is p0
    b4, p4 = pipeline._loads_cell(pipeline._dumps_cell([make(4)], pipeline._SharedObjects()))[0](None)
    assert b4 is not b3 and p4 is not p0
    # without a runner's numbering (one call), nothing is shared with earlier calls
    b5, _ = pipeline._loads_cell(pipeline._dumps_cell([make(5)]))[0](None)
    assert b5 is not b3


def test_a_cell_file_made_by_a_worker_is_the_file_result_save_writes(sequential, tmp_path,
                                                                      monkeypatch):
    """A worker makes a cell's file in memory (``_cell_file_bytes``: a memfd, else a temporary
    file) with ``Result.save`` itself: the same entries, and it loads to the same result."""
    labels = sorted(sequential.manifest["cells"])[:2]
    for memfd in (True, False):
        if not memfd:
            monkeypatch.delattr(os, "memfd_create", raising=False)
        for lab in labels:
            res = dpsim.load(sequential.path(lab))
            (tmp_path / "w.npz").write_bytes(pipeline._cell_file_bytes(res))
            res.save(tmp_path / "p.npz")
            with np.load(tmp_path / "w.npz") as zw, np.load(tmp_path / "p.npz") as zp:
                assert zw.files == zp.files
            _same_results({lab: dpsim.load(tmp_path / "w.npz")}, {lab: dpsim.load(tmp_path / "p.npz")})
    assert pipeline._cell_file_bytes("not a result") is None  # the parent names the bad cell


def test_manifest_text_holds_the_manifest_and_follows_every_change(sequential):
    """The manifest is written with one line per cell, parts reused while unchanged: the text
    always parses to the manifest, also after a cell entry is changed in place."""
    m = json.loads(json.dumps(sequential.manifest))
    text = pipeline._ManifestText()
    assert json.loads(text(m)) == m
    lab = sorted(m["cells"])[0]
    m["cells"][lab]["meta"] = {"changed": [1, 2.5, None]}  # in place, as a meta fix does
    m["notes"]["x"] = {"y": float("inf")}
    m["cells"]["new"] = {"index": 10_000}
    out = text(m)
    assert json.loads(out) == m
    assert sum(line.startswith('  "') for line in out.splitlines()) == len(m["cells"])
    del m["cells"]["new"], m["notes"]["x"]
    m["cells"][lab]["meta"]["changed"].append(3)
    assert json.loads(text(m)) == m
    m["cells"].clear()
    assert json.loads(text(m)) == m


def test_worker_with_other_dpsim_is_refused():
    with pytest.raises(RuntimeError, match="same dpsim"):
        pipeline._run_cell(lambda seed: None, None, {"dpsim": "0.0", "numerics": -1})


def test_a_cell_that_captures_the_cache_is_refused_with_a_clear_error(sequential):
    import cloudpickle

    with pytest.raises(TypeError, match="must not capture the cache"):
        cloudpickle.dumps(lambda seed: sequential.cell_seed(0))


# ---------------------------------------------------------------------------------------------
# Two reproduce processes on one checkout


@pytest.fixture(scope="module")
def concurrent(tmp_path_factory):
    """Two `dpsim reproduce` processes started together on one results and one figure folder:
    the same two experiments in opposite order (so they run the same experiment at the same time
    and different experiments at the same time)."""
    tmp = tmp_path_factory.mktemp("concurrent")
    order = [["dpsgd_logistic", "pagan_absreg"], ["pagan_absreg", "dpsgd_logistic"]]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([PY, "-m", "dpsim", "reproduce", *names, "--scale", "tiny",
                               "--workers", "1", "--force", "--results", str(tmp / "results"),
                               "--out", str(tmp / "out")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for names in order]
    outs = [p.communicate(timeout=600) for p in procs]
    return tmp, [p.returncode for p in procs], outs


def test_two_concurrent_reproduce_both_finish_and_the_report_keeps_every_section(concurrent):
    tmp, codes, outs = concurrent
    assert codes == [0, 0], [o[1][-2000:] for o in outs]
    text = (tmp / "out" / "REPORT.md").read_text()
    assert "## dpsgd_logistic:" in text and "## pagan_absreg:" in text
    assert sorted(json.loads((tmp / "out" / "report.json").read_text())) == ["dpsgd_logistic",
                                                                             "pagan_absreg"]
    for name in ("dpsgd_logistic", "pagan_absreg"):
        root = pipeline.latest_dir(tmp / "results" / name / "tiny")
        m = json.loads((root / "manifest.json").read_text())
        assert m["complete"]
        # no manifest update was lost: every cell file on disk is listed with its true SHA-256
        on_disk = {p.stem for p in root.glob("*.npz")}
        assert on_disk == set(m["cells"]) and len(on_disk) > 0
        for lab, entry in m["cells"].items():
            assert entry["sha256"] == pipeline._sha256(root / f"{lab}.npz")
        assert not list(root.glob(".*.tmp"))  # no temporary file left behind


def test_after_concurrent_runs_nothing_is_recomputed(concurrent, monkeypatch):
    tmp, codes, _ = concurrent
    assert codes == [0, 0]
    monkeypatch.setattr(dpsim, "simulate", _refuse)
    for name in ("dpsgd_logistic", "pagan_absreg"):
        cache, _ = pipeline.run_experiment(experiments.get(name), "tiny",
                                           results_dir=tmp / "results", progress=False)
        assert cache.computed == [] and len(cache.reused) == len(cache.used) > 0


def _refuse(*a, **k):
    raise AssertionError("a cached cell was recomputed")


# ---------------------------------------------------------------------------------------------
# Several experiments at once on one cluster (what `reproduce` does with more than one worker)


def test_experiments_run_at_once_on_one_cluster_bitwise_as_sequential_runs(cluster, concurrent,
                                                                           tmp_path):
    """Both experiments in their own thread, their cells on the same two workers: every cell,
    note and selection is bitwise that of the sequential runs (the `concurrent` fixture, one
    worker), each manifest is complete, and the two runs overlapped in time."""
    tmp, codes, _ = concurrent
    assert codes == [0, 0]
    exps = [experiments.get("dpsgd_logistic"), experiments.get("pagan_absreg")]

    def run_one(exp):
        return pipeline.run_experiment(exp, "tiny", results_dir=tmp_path, force=True,
                                       progress=False, runner=cluster)

    runs = experiments._run_all(exps, run_one, cluster)
    assert list(runs) == ["dpsgd_logistic", "pagan_absreg"]
    spans = []
    for exp in exps:
        cache, paths = runs[exp.name]
        ref = pipeline.latest_dir(tmp / "results" / exp.name / "tiny")
        _same_results(_saved(cache.root), _saved(ref))
        m, r = cache.manifest, json.loads((ref / "manifest.json").read_text())
        assert m["complete"] and (m["key"], m["notes"], m["results"]) == (r["key"], r["notes"],
                                                                          r["results"])
        assert len(cache.computed) == len(m["cells"]) > 0
        spans.append((m["run_t_start"], m["run_t_stop"]))
    (a0, a1), (b0, b1) = spans
    assert a0 < b1 and b0 < a1  # at the same time


class _FakeParallel(pipeline.InProcess):
    """An in-process runner that says it is parallel and records stop()."""

    parallel = True

    def __init__(self):
        import threading

        self.stopped = threading.Event()
        self.reason = None

    def run(self, jobs):
        if self.stopped.is_set():
            raise RuntimeError("stopped")
        yield from super().run(jobs)

    def stop(self, reason=None):
        self.reason = reason
        self.stopped.set()


def test_experiments_take_turns_at_their_set_up_then_run_at_once():
    """On a Dask runner each experiment's thread holds the set-up turn until its first batch is
    pickled: set-ups never overlap, and after them the experiments run at the same time (the
    barrier needs all three past their set-up at once)."""
    runner = pipeline.DaskRunner(workers=2)  # never started: no batch here has cells
    lock, state = threading.Lock(), {"in_setup": 0, "most": 0}
    together = threading.Barrier(3, timeout=120)

    def run_one(exp):
        with lock:
            state["in_setup"] += 1
            state["most"] = max(state["most"], state["in_setup"])
        time.sleep(0.05)  # building problems ...
        with lock:
            state["in_setup"] -= 1
        list(runner.run([]))  # the first batch ends the turn (here: every cell cached)
        together.wait()
        return exp.name

    exps = [types.SimpleNamespace(name=n) for n in ("a", "b", "c")]
    assert experiments._run_all(exps, run_one, runner) == {"a": "a", "b": "b", "c": "c"}
    assert state["most"] == 1
    # the turn is given back also by an experiment that ends (or fails) before any batch
    with runner.setup_turn():
        pass
    assert runner._setup.acquire(timeout=1)
    runner._setup.release()


def test_one_failing_experiment_stops_the_others_and_its_error_is_raised(tmp_path):
    runner = _FakeParallel()
    finished = []

    class Boom(RuntimeError):
        pass

    def run_one(exp):
        if exp.name == "bad":
            raise Boom("bad experiment")
        assert runner.stopped.wait(60)  # the other experiment, still running when bad fails
        cache = pipeline.Cache(tmp_path, experiment="ok", scale="tiny", config=_Cfg(),
                               version="v", progress=False, runner=runner)
        try:
            cache.run(_toy_cells())
        finally:
            finished.append(exp.name)

    exps = [argparse.Namespace(name="ok"), argparse.Namespace(name="bad")]
    with pytest.raises(Boom, match="bad experiment"):
        experiments._run_all(exps, run_one, runner)
    assert isinstance(runner.reason, Boom) and finished == ["ok"]  # waited for, and stopped
    assert not list(tmp_path.glob("*/*.npz"))  # its cells were refused
    # one experiment, or a sequential runner: no threads, same results
    assert experiments._run_all(exps[:1], lambda e: e.name, runner) == {"ok": "ok"}


# ---------------------------------------------------------------------------------------------
# Keys: source edits recompute nothing, a config change only its experiment's cells


def test_a_comment_in_a_dpsim_source_file_recomputes_nothing(concurrent, tmp_path):
    """A copy of the package with a comment added to dpsim/engine.py, imported in a fresh
    process, reuses every cell computed by the original."""
    src, codes, _ = concurrent
    assert codes == [0, 0]
    pkg = tmp_path / "src" / "dpsim"
    ignore = shutil.ignore_patterns("__pycache__", "out")
    shutil.copytree(ROOT / "dpsim", pkg, ignore=ignore)
    for sub in ("experiments", "analysis", "paper_figures"):
        shutil.copytree(ROOT / sub, pkg / sub, ignore=ignore)
    engine = pkg / "engine.py"
    engine.write_text(engine.read_text() + "\n# a comment changes no number\n")
    shutil.copytree(src / "results", tmp_path / "results")
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path / 'src')!r})
        import dpsim
        from dpsim import experiments
        assert dpsim.__file__.startswith({str(tmp_path / 'src')!r}), dpsim.__file__
        def refuse(*a, **k):
            raise SystemExit("recomputed a cell")
        dpsim.simulate = refuse
        from dpsim.experiments import pipeline
        cache, _ = pipeline.run_experiment(experiments.get("dpsgd_logistic"), "tiny",
                                           results_dir={str(tmp_path / 'results')!r},
                                           progress=False)
        assert cache.computed == [] and len(cache.reused) > 0
        print("reused")
    """)
    p = subprocess.run([PY, "-c", script], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path)
    assert p.returncode == 0 and "reused" in p.stdout, p.stderr[-2000:]


def test_a_config_change_recomputes_only_that_experiments_cells(concurrent, tmp_path, monkeypatch):
    src, codes, _ = concurrent
    assert codes == [0, 0]
    shutil.copytree(src / "results", tmp_path / "results")
    n_dpsgd = len(json.loads((pipeline.latest_dir(
        tmp_path / "results" / "dpsgd_logistic" / "tiny") / "manifest.json").read_text())["cells"])
    changed = dataclasses.replace(dpsgd_logistic.PRESETS["tiny"], trials=3)
    monkeypatch.setitem(dpsgd_logistic.PRESETS, "tiny", changed)
    computed = {name: pipeline.run_experiment(experiments.get(name), "tiny", progress=False,
                                              results_dir=tmp_path / "results")[0].computed
                for name in ("dpsgd_logistic", "pagan_absreg")}
    assert len(computed["dpsgd_logistic"]) == n_dpsgd and computed["pagan_absreg"] == []


# ---------------------------------------------------------------------------------------------
# dpsim cache prune


def _cache_parser():
    parser = argparse.ArgumentParser(prog="dpsim")
    experiments_cli.register_cache(parser.add_subparsers(dest="command"))
    return parser


def test_cache_prune_deletes_only_what_no_current_key_names(sequential, tmp_path, capsys):
    results = tmp_path / "results"
    scale_dir = results / "dpsgd_logistic" / "tiny"
    shutil.copytree(sequential.root, scale_dir / sequential.key)
    # a stale key folder (an older config), one in use by another process, an old-layout cache,
    # a temporary file of a dead process, a foreign file and an unregistered experiment
    stale, busy = scale_dir / ("0" * 16), scale_dir / ("1" * 16)
    for d in (stale, busy):
        shutil.copytree(sequential.root, d)
        m = json.loads((d / "manifest.json").read_text())
        m["key"] = d.name
        (d / "manifest.json").write_text(json.dumps(m))
    (scale_dir / "manifest.json").write_text(json.dumps(
        {"format": "dpsim-experiment-cache-1", "cells": {"old": {"file": "old.npz"}}}))
    (scale_dir / "old.npz").write_bytes(b"old")
    dead_tmp = scale_dir / sequential.key / ".x.npz.999999999.0a1b.tmp"
    dead_tmp.write_bytes(b"partial")
    live_tmp = scale_dir / sequential.key / f".y.npz.{os.getpid()}.0a1b.tmp"
    live_tmp.write_bytes(b"being written")
    (scale_dir / "notes.txt").write_text("mine")
    (results / "someone_else" / "x").mkdir(parents=True)

    parser = _cache_parser()
    args = parser.parse_args(["cache", "prune", "--results", str(results), "--dry-run"])
    held = pipeline._try_lock(busy / ".lock")
    try:
        assert args.handler(args) == 0
        listed = capsys.readouterr().out
        assert str(stale) in listed and "would delete" in listed and stale.exists()
        args = parser.parse_args(["cache", "prune", "--results", str(results)])
        assert args.handler(args) == 0
    finally:
        held.close()
    out = capsys.readouterr().out
    assert not stale.exists() and busy.exists()  # a folder in use is skipped
    assert not (scale_dir / "manifest.json").exists() and not (scale_dir / "old.npz").exists()
    assert not dead_tmp.exists() and live_tmp.exists()
    assert (scale_dir / "notes.txt").exists() and (results / "someone_else" / "x").exists()
    assert _saved(scale_dir / sequential.key).keys() == _saved(sequential.root).keys()
    assert f"deleted {stale}" in out
    with pytest.raises(ValueError, match="prune"):
        args.handler(parser.parse_args(["cache"]))


# ---------------------------------------------------------------------------------------------
# The results table


def test_results_table_opens_with_xarray_one_row_per_cell_and_trial(sequential):
    import xarray as xr

    path = sequential.root / "table.nc"
    with xr.open_dataset(path) as ds:
        df = ds.to_dataframe()
    m = sequential.manifest
    results = _saved(sequential.root)
    assert len(df) == sum(r.trials for r in results.values())
    assert set(df["cell"]) == set(m["cells"]) == set(results)
    for lab, res in results.items():
        rows = df[df["cell"] == lab].sort_values("trial")
        assert rows["trial"].tolist() == list(range(res.trials))
        assert rows["cell_index"].iloc[0] == m["cells"][lab]["index"]
        assert (rows["is_result"] == int(lab in m["results"])).all()
        np.testing.assert_array_equal(rows["final_loss"], res.loss[-1])
        np.testing.assert_array_equal(rows["final_step"], res.steps[-1])
        lr = res.config["hyperparameters"]["lr"]
        np.testing.assert_array_equal(rows["hp_lr"], lr if isinstance(lr, list) else [lr] * res.trials)
        for k, v in m["cells"][lab]["meta"].items():
            assert (rows[f"meta_{k}"] == v).all(), (lab, k)


# ---------------------------------------------------------------------------------------------
# Progress and --backend


def _toy_cells(n=3):
    prob = dpsim.problems.logistic_regression(50, 3, seed=0)
    return [pipeline.Cell(f"t{i}", i, lambda seed: dpsim.simulate(
        prob, dpsim.optimizers.get("sgd", lr=0.5), steps=3, batch_size=5, trials=2, seed=seed))
        for i in range(n)]


@dataclasses.dataclass(frozen=True)
class _Cfg:
    seed: int = 3


def test_table_columns_made_cell_by_cell_are_the_columns_of_all_rows_at_once():
    """The results table converts each cell's values with NumPy where it can
    (``_column_of_parts``): the same dtype and bytes as converting every row at once."""
    cases = [[[True], [None, np.bool_(False)]], [[1, None], [2]], [[1], [2**40]], [[2**70], [1]],
             [[np.int64(3)], [4]], [[1, 2.5], [np.float32(1)]], [[1.5, 2**70], [3]], [[True, 1]],
             [["a"], ["bcd", "ef"]], [["a"], [None]], [["a", [1]]], [[None], [None]], [], [[]],
             [[], ["x"]], [[1.0], ["x"]], [[float("nan"), float("-inf")], [1]], [[1], [2, -3]],
             [[np.float64(0.1)], [0.2]], [[2**31 - 1], [-2**31 + 1]], [[2**31], [0]], [[{"a": 1}], ["b"]]]
    for parts in cases:
        a, b = pipeline._column_of_parts(parts), pipeline._column([v for p in parts for v in p])
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), parts


def test_table_file_is_the_file_xarray_writes_from_the_text_columns(tmp_path):
    """``write_table`` hands all-ASCII text columns to xarray as bytes (NumPy converts them in C):
    the file is byte for byte the one xarray writes from the text, and opens as text; a column
    with other characters is left to xarray."""
    used = {"c0": {"trial": [0, 1], "cell": ["c0", "c0"], "meta_note": ["σ=1", "plain"],
                   "optimizer": ["dp_sgd", "dp_sgd"], "final_loss": [0.5, 0.25]},
            "c1": {"trial": [0], "cell": ["c1"], "meta_note": [None],
                   "optimizer": ["pagan"], "final_loss": [0.125]}}
    fast = tmp_path / "fast.nc"
    pipeline.write_table(fast, used, ["c1"], {"experiment": "toy"})
    plain = tmp_path / "plain.nc"
    ds = pipeline.results_table(used, ["c1"])
    ds.attrs["experiment"] = "toy"
    ds.to_netcdf(plain, engine="scipy")
    assert fast.read_bytes() == plain.read_bytes()
    import xarray as xr

    with xr.open_dataset(fast) as back:
        assert back["optimizer"].values.tolist() == ["dp_sgd", "dp_sgd", "pagan"]
        assert back["meta_note"].values.tolist() == ["σ=1", "plain", ""]
        assert back["cell"].values.tolist() == ["c0", "c0", "c1"]


def test_progress_is_a_plain_line_per_cell_off_a_terminal(tmp_path, capsys):
    assert not sys.stderr.isatty()
    cache = pipeline.Cache(tmp_path, experiment="toy", scale="tiny", config=_Cfg(), version="v",
                           progress=None)
    cache.run(_toy_cells(), desc="toy")
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(line.startswith(f"toy: {i + 1}/3 t{i} computed in ")
                                 and line.endswith(" s") for i, line in enumerate(err))
    cache.run(_toy_cells(), desc="toy")
    assert capsys.readouterr().err.splitlines() == ["toy: 3/3 cells reused from the cache"]
    pipeline.Cache(tmp_path / "q", experiment="toy", scale="tiny", config=_Cfg(), version="v",
                   progress=False).run(_toy_cells())
    assert capsys.readouterr().err == ""
    pipeline.Cache(tmp_path / "bar", experiment="toy", scale="tiny", config=_Cfg(), version="v",
                   progress=True).run(_toy_cells(), desc="toy")
    assert "toy:" in capsys.readouterr().err  # a tqdm bar (forced on), erased when done


def test_backend_is_validated_and_reaches_every_experiments_simulate(tmp_path, monkeypatch, capsys):
    with pytest.raises(ValueError, match="'torch'"):
        experiments.reproduce(["dpsgd_logistic"], scale="tiny", backend="torch",
                              results_dir=tmp_path, out_dir=tmp_path / "out")
    assert cli.main(["reproduce", "dpsgd_logistic", "--backend", "torch"]) == 2
    assert "'torch'" in capsys.readouterr().err
    if not dpsim.backend.cupy_available():
        with pytest.raises(ValueError, match="cupy"):
            experiments.reproduce(["dpsgd_logistic"], scale="tiny", backend="cupy",
                                  results_dir=tmp_path, out_dir=tmp_path / "out")
    assert not (tmp_path / "dpsgd_logistic").exists()  # refused before any work

    class Seen(Exception):
        pass

    def spy(*a, **k):
        raise Seen(k.get("backend"))

    monkeypatch.setattr(dpsim, "simulate", spy)
    for name in experiments.names():
        exp = experiments.get(name)
        cache = pipeline.Cache(tmp_path / name, experiment=name, scale="tiny",
                               config=exp.config("tiny"), version="v", backend="cupy",
                               progress=False)
        with pytest.raises(Seen) as e:
            exp.run(exp.config("tiny"), cache)
        assert e.value.args == ("cupy",), name
    assert pipeline.cache_key("x", _Cfg(), "v", "cupy") != pipeline.cache_key("x", _Cfg(), "v")
