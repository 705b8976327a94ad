"""Checkpoints (:mod:`dpsim.checkpoint`): a run killed after any step and called again returns the
uninterrupted run's result bit for bit — for every registered optimizer, both noise layouts and
every sampler — and a sweep's cell killed in the middle resumes from its checkpoint."""

import dataclasses
import json
import math
import pickle
import warnings

import numpy as np
import pytest

import dpsim
from dpsim import checkpoint as ckpt
from dpsim import optimizers, problems, sampling
from dpsim.experiments import pipeline
from support.optimizer_setup import table_setup


class Killed(Exception):
    """Stands for the process being killed right after a checkpoint was written."""


@pytest.fixture(scope="module")
def logreg():
    return problems.logistic_regression(300, 8, seed=1)


def _setup(name, prob, steps):
    """:func:`support.optimizer_setup.table_setup`, with DP² switching phase every 3 steps."""
    opt_kw, sim_kw = table_setup(name, prob, steps)
    if name.startswith("dp2_"):
        opt_kw = dict(opt_kw, s1=3)
    return opt_kw, sim_kw


def _kill_after(monkeypatch, steps_to_kill):
    """Make :meth:`Checkpoint.save` raise :class:`Killed` right after writing the checkpoint of
    each step in ``steps_to_kill`` (once each)."""
    real = ckpt.Checkpoint.save
    left = set(steps_to_kill)

    def save(self, payload):
        real(self, payload)
        if payload["t"] in left:
            left.discard(payload["t"])
            raise Killed(payload["t"])

    monkeypatch.setattr(ckpt.Checkpoint, "save", save)


def assert_same_result(a, b):
    for field in ("steps", "loss", "excess_loss", "grad_norm_sq", "dist_to_opt", "params",
                  "mean_batch_size"):
        x, y = getattr(a, field), getattr(b, field)
        if x is None:
            assert y is None, field
            continue
        np.testing.assert_array_equal(x, y, err_msg=field)
    assert a.records.keys() == b.records.keys()
    for k in a.records:
        np.testing.assert_array_equal(a.records[k], b.records[k], err_msg=k)
    assert a.privacy == b.privacy
    assert a.config["engine"] == b.config["engine"] != "block"  # checkpoints: the step loop


def _killed_and_resumed(prob, opt, path, kills, monkeypatch, **kw):
    _kill_after(monkeypatch, kills)
    for _ in kills:
        with pytest.raises(Killed):
            dpsim.simulate(prob, opt, checkpoint=path, checkpoint_every=0, **kw)
    return dpsim.simulate(prob, opt, checkpoint=path, checkpoint_every=0, **kw)


@pytest.mark.parametrize("name", optimizers.names())
def test_a_killed_run_resumes_bit_for_bit(logreg, name, tmp_path, monkeypatch):
    """Every registered optimizer: killed after step 4 (between two records) and after step 9 (a
    record step), then called again — the uninterrupted run's result, state-dependent privacy
    records (ctCDP's spend) included.  DP² variants switch phase every 3 steps, so the kills fall
    in both phases."""
    steps = 14
    opt_kw, sim_kw = _setup(name, logreg, steps)
    opt = optimizers.get(name, **opt_kw)
    kw = dict(steps=steps, batch_size=24, trials=3, seed=5, record_every=3)
    kw.update(sim_kw)
    want = dpsim.simulate(logreg, opt, fast=False, **kw)
    got = _killed_and_resumed(logreg, opt, tmp_path / "run.ckpt", [4, 9], monkeypatch, **kw)
    assert_same_result(want, got)


@pytest.mark.parametrize("backend,threads", [("numpy:blocked", "1"), ("numpy:blocked", "2"),
                                             ("array_api_strict", None)])
@pytest.mark.parametrize("name", ["dp_sgd", "dp_adam", "dp2_rmsprop"])
def test_resume_on_every_noise_layout(name, backend, threads, tmp_path, monkeypatch):
    """The blocked layout draws the next step's noise ahead on its threads: the checkpoint saves
    the block streams rewound past that draw, so the resumed run draws it again — the same noise.
    A draw of two blocks (R·d > NOISE_BLOCK) puts the pool and the look-ahead in play."""
    if threads is not None:
        monkeypatch.setenv("DPSIM_NOISE_THREADS", threads)
    if backend == "array_api_strict":
        pytest.importorskip("array_api_strict")
    if backend == "array_api_strict":  # no sparse arrays there
        prob = problems.logistic_regression(200, 20, seed=7)
    else:
        prob = problems.logistic_regression(200, 3 * 10 ** 4, density=0.002, seed=7)
        assert 3 * prob.d > 1 << 16
    opt = optimizers.get(name, **({"s1": 2} if name == "dp2_rmsprop" else {}))
    kw = dict(steps=7, batch_size=8, trials=3, seed=3, record_every=2, backend=backend)
    want = dpsim.simulate(prob, opt, fast=False, **kw)
    got = _killed_and_resumed(prob, opt, tmp_path / "run.ckpt", [3], monkeypatch, **kw)
    assert_same_result(want, got)


@pytest.mark.parametrize("how", ["fixed", "replacement", "cyclic_poisson:2"])
def test_resume_under_every_sampler(logreg, how, tmp_path, monkeypatch):
    """The sampler's generator and its draw counter (cyclic Poisson samples group (t−1) mod k)."""
    kw = dict(steps=9, batch_size=20, trials=2, seed=8, record_every=4, sampling=how)
    opt = optimizers.get("dp_sgd", noise="banded:2") if how.startswith("cyclic") else optimizers.get("dp_sgd")
    want = dpsim.simulate(logreg, opt, fast=False, **kw)
    got = _killed_and_resumed(logreg, opt, tmp_path / "run.ckpt", [5], monkeypatch, **kw)
    assert_same_result(want, got)


def test_a_finished_run_returns_from_its_final_checkpoint(logreg, tmp_path, monkeypatch):
    """A run that wrote a checkpoint leaves its final state: called again it draws nothing."""
    kw = dict(steps=6, batch_size=16, trials=2, seed=1, record_every=2)
    path = tmp_path / "run.ckpt"
    first = dpsim.simulate(logreg, "dp_adam", checkpoint=path, checkpoint_every=0, **kw)
    with open(path, "rb") as fh:
        assert pickle.load(fh)["t"] == 6

    def no_draws(self):
        raise AssertionError("the finished run drew a batch again")

    monkeypatch.setattr(sampling.Sampler, "draw", no_draws)
    again = dpsim.simulate(logreg, "dp_adam", checkpoint=path, checkpoint_every=0, **kw)
    assert_same_result(first, again)


def test_a_checkpoint_of_another_run_is_ignored(logreg, tmp_path, monkeypatch):
    """Another seed (or any other argument) is another fingerprint: warned about, overwritten."""
    kw = dict(steps=8, batch_size=16, trials=2, record_every=2)
    path = tmp_path / "run.ckpt"
    _kill_after(monkeypatch, [5])
    with pytest.raises(Killed):
        dpsim.simulate(logreg, "dp_sgd", checkpoint=path, checkpoint_every=0, seed=1, **kw)
    want = dpsim.simulate(logreg, "dp_sgd", fast=False, seed=2, **kw)
    with pytest.warns(RuntimeWarning, match="written by another run"):
        got = dpsim.simulate(logreg, "dp_sgd", checkpoint=path, checkpoint_every=0, seed=2, **kw)
    assert_same_result(want, got)
    path.write_bytes(b"torn")
    with pytest.warns(RuntimeWarning, match="unreadable checkpoint"):
        got = dpsim.simulate(logreg, "dp_sgd", checkpoint=path, checkpoint_every=0, seed=2, **kw)
    assert_same_result(want, got)


def test_a_location_that_breaks_during_the_run_warns_and_the_run_goes_on(logreg, tmp_path,
                                                                        monkeypatch):
    """A checkpoint path that cannot be written is refused before the run
    (``tests/core/test_bad_inputs_wave3.py``); one that breaks after that check only warns, and the run
    finishes with the uninterrupted result (the up-front check is skipped here to get there)."""
    monkeypatch.setattr(ckpt, "check_writable", lambda path: None)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    kw = dict(steps=5, batch_size=16, trials=2, seed=1)
    want = dpsim.simulate(logreg, "dp_sgd", fast=False, **kw)
    with pytest.warns(RuntimeWarning, match="cannot write checkpoint"):
        got = dpsim.simulate(logreg, "dp_sgd", checkpoint=blocker / "run.ckpt",
                             checkpoint_every=0, **kw)
    assert_same_result(want, got)


def test_bad_checkpoint_arguments_are_refused(logreg, tmp_path):
    kw = dict(steps=3, batch_size=16)
    with pytest.raises(ValueError, match="checkpoint_every"):
        dpsim.simulate(logreg, "dp_sgd", checkpoint=tmp_path / "a", checkpoint_every=-1, **kw)
    with pytest.raises(ValueError, match="checkpoint_every"):
        dpsim.simulate(logreg, "dp_sgd", checkpoint=tmp_path / "a", checkpoint_every=math.nan, **kw)
    with pytest.raises(ValueError, match="fast=True"):
        dpsim.simulate(logreg, "dp_sgd", checkpoint=tmp_path / "a", fast=True, **kw)
    with pytest.raises(ValueError, match="checkpoint must be a file path"):
        dpsim.simulate(logreg, "dp_sgd", checkpoint=3, **kw)
    with pytest.raises(ValueError, match="directory"):
        with ckpt.checkpoints(None):
            pass


def test_calls_in_a_block_are_numbered(logreg, tmp_path):
    """Inside :func:`checkpoints` the k-th call uses ``call-<k>.ckpt``; a run the small-d kernel
    takes (``fast`` left to the engine) is not checkpointed but still counts."""
    kw = dict(steps=4, batch_size=16, trials=2, seed=1)
    with ckpt.checkpoints(tmp_path / "cell", every=0) as scope:
        dpsim.simulate(logreg, "dp_sgd", fast=False, **kw)
        fused = dpsim.simulate(logreg, "dp_sgd", **kw)
        dpsim.simulate(logreg, "dp_adam", fast=False, **kw)
    assert fused.config["engine"] == "block"
    assert scope.calls == 3
    assert sorted(p.name for p in (tmp_path / "cell").iterdir()) == [
        "call-0000.ckpt", "call-0000.json", "call-0002.ckpt", "call-0002.json"]
    side = json.loads((tmp_path / "cell" / "call-0002.json").read_text())
    assert (side["t"], side["steps"]) == (4, 4) and side["wall_s"] >= 0


def _cell_compute(prob, steps):
    def compute(seed):
        dpsim.simulate(prob, "dp_sgd", steps=3, batch_size=16, trials=2, seed=seed, fast=False)
        return dpsim.simulate(prob, "dp2_rmsprop", steps=steps, batch_size=16, trials=3,
                              seed=seed, record_every=4, fast=False)
    return compute


def test_a_killed_sweep_cell_resumes_from_its_checkpoint(logreg, tmp_path, monkeypatch):
    """:class:`pipeline.Cache` runs each cell in a checkpoint block under
    ``<key>/partial/<label>``: a cell killed in its second simulation resumes there (the first is
    recomputed or restored), gives the uninterrupted cell's result, records the restored wall
    time, and its checkpoints are removed once it is saved."""
    from dpsim.experiments.pipeline import Cache, Cell

    monkeypatch.setattr(pipeline.worker, "CHECKPOINT_EVERY", 0.0)
    cell = Cell("c", 0, _cell_compute(logreg, 12))
    want = _cell_compute(logreg, 12)(pipeline.cell_seed(7, 0))

    @dataclasses.dataclass(frozen=True)
    class Config:
        seed: int = 7

    def cache(root):
        return Cache(root, experiment="e", scale="s", config=Config(), version="v", progress=False)

    _kill_after(monkeypatch, [6])
    c = cache(tmp_path / "r")
    with pytest.raises(Killed):
        c.run([cell])
    partial = c.partial("c")
    assert (partial / "call-0001.ckpt").exists()
    c = cache(tmp_path / "r")
    got = c.run([cell])["c"]
    assert_same_result(want, got)
    assert not partial.exists()
    entry = c.manifest["cells"]["c"]
    assert entry["resumed_s"] > 0


def _change_probe(with_state):
    """A probe with memory between records: the change of w[:, 0] since the previous record."""
    memo: dict = {}

    def probe(state, params, ctx):
        x = np.array(params[:, 0], dtype=float)
        prev = memo.get("x")
        memo["x"] = x
        return np.full(x.shape, np.nan) if prev is None else x - prev

    if with_state:
        probe.probe_state = memo
    return probe


def test_probe_memory_is_saved_or_the_run_is_not_checkpointed(logreg, tmp_path, monkeypatch):
    """A probe exposing its closure's memory as ``probe_state`` is restored on resume (its first
    record after the resume is the uninterrupted one, not a fresh start); the experiments'
    stateful probes (dp2_logistic's preconditioner stability) expose theirs; a probe hiding its
    memory is refused with ``checkpoint=`` and left uncheckpointed in a block."""
    from dpsim.experiments import dp2_logistic

    kw = dict(steps=10, batch_size=16, trials=2, seed=4, record_every=2)
    for key, make in (("change", lambda: {"change": _change_probe(True)}),
                      ("pc_change", lambda: dp2_logistic.stability_probes(1e-3))):
        want = dpsim.simulate(logreg, "dp_rmsprop", fast=False, probes=make(), **kw)
        path = tmp_path / f"{key}.ckpt"
        _kill_after(monkeypatch, [5])
        with pytest.raises(Killed):
            dpsim.simulate(logreg, "dp_rmsprop", probes=make(), checkpoint=path, checkpoint_every=0, **kw)
        got = dpsim.simulate(logreg, "dp_rmsprop", probes=make(), checkpoint=path, checkpoint_every=0, **kw)
        assert_same_result(want, got)
        assert np.isfinite(got.records[key][3]).all()  # step 6, the first record after the resume
    assert ckpt.unsaved_probe_memory({"hidden": _change_probe(False), "fine": lambda s, w, c: w[:, 0]}) == ["hidden"]
    with pytest.raises(ValueError, match="probe_state"):
        dpsim.simulate(logreg, "dp_sgd", probes={"hidden": _change_probe(False)},
                       checkpoint=tmp_path / "h.ckpt", **kw)
    with pytest.warns(RuntimeWarning, match="not checkpointed"):
        with ckpt.checkpoints(tmp_path / "block", every=0):
            dpsim.simulate(logreg, "dp_sgd", fast=False, probes={"hidden": _change_probe(False)}, **kw)
    assert not (tmp_path / "block").exists()


def test_a_checkpoint_written_before_probe_memories_were_saved(logreg, tmp_path, monkeypatch):
    """A file without the ``probe_states`` entry (written by dpsim before it saved them): a run
    whose probes keep no memory resumes from it; one whose probes do starts afresh. Both give
    the uninterrupted result."""
    kw = dict(steps=10, batch_size=16, trials=2, seed=4, record_every=2)
    for probes, resumed in ((None, True), ({"change": _change_probe(True)}, False)):
        make = (lambda: None) if probes is None else (lambda: {"change": _change_probe(True)})
        want = dpsim.simulate(logreg, "dp_rmsprop", fast=False, probes=make(), **kw)
        path = tmp_path / f"old{resumed}.ckpt"
        _kill_after(monkeypatch, [5])
        with pytest.raises(Killed):
            dpsim.simulate(logreg, "dp_rmsprop", probes=make(), checkpoint=path, checkpoint_every=0, **kw)
        monkeypatch.undo()
        with open(path, "rb") as fh:
            payload = pickle.load(fh)
        del payload["probe_states"]
        path.write_bytes(pickle.dumps(payload))
        draws = []
        real = sampling.Sampler.draw
        monkeypatch.setattr(sampling.Sampler, "draw", lambda self: draws.append(1) or real(self))
        got = dpsim.simulate(logreg, "dp_rmsprop", probes=make(), checkpoint=path, checkpoint_every=0, **kw)
        monkeypatch.undo()
        assert_same_result(want, got)
        assert len(draws) == (5 if resumed else 10)


# ---------------------------------------------------------------------------------------------
# The fingerprint holds the problem's data (issue 33, Build 4)


class _Table(problems.Problem):
    """A user-defined problem whose config says only its name and shapes (the review's case)."""

    _float_arrays = ("G",)

    def __init__(self, G):
        G = np.asarray(G, dtype=float)
        super().__init__(name="my_table", n=G.shape[0], d=G.shape[1],
                         config={"name": "my_table", "n": G.shape[0], "d": G.shape[1]})
        self.G = G

    def loss(self, w):
        return w @ self.G.mean(axis=0)

    def per_example_grads(self, w, idx):
        return self.G[idx]


def test_problem_identity_hashes_user_data_and_trusts_configs_that_fix_it():
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(20, 3)), rng.normal(size=(20, 3))
    ia, ib, ia2 = (ckpt.problem_identity(_Table(x)) for x in (A, B, A.copy()))
    assert ia["name"] == ib["name"] and ia["n"] == ib["n"]
    assert ia["data_sha256"] != ib["data_sha256"] and ia == ia2
    # a view on another dtype hashes its host's data
    assert ckpt.problem_identity(_Table(A).on(dpsim.backend.Backend("numpy", dtype="float32"))) == ia
    # the data of a problem built from a seed are its config; from_data carries its own hash
    lr = problems.logistic_regression(50, 3, seed=4)
    assert ckpt.problem_identity(lr) == lr.config
    fd = problems.from_data(A, np.sign(A[:, 0]), loss="logistic")
    assert ckpt.problem_identity(fd) == fd.config and "data_sha256" in fd.config
    # every attribute that is data counts, not only the arrays listed in _float_arrays
    t1, t2 = _Table(A), _Table(A)
    t2.offset = 1.0
    assert ckpt.problem_data_hash(t1) != ckpt.problem_data_hash(t2)


def test_an_audit_in_a_checkpoint_block_is_not_returned_for_another_table(tmp_path):
    """The review's case: the same block, two tables of one shape: two different results."""
    T1 = np.zeros((4, 1))
    T1[-1, 0] = 1e3
    T2 = np.zeros((4, 1))
    T2[-1, 0] = 1e-3   # a tiny canary: nothing to detect
    kw = dict(trials=2_000, seed=0, noise_multiplier=0.5)
    fresh1, fresh2 = dpsim.audit("dp_sgd", table=T1, **kw), dpsim.audit("dp_sgd", table=T2, **kw)
    assert fresh1.epsilon_lower > fresh2.epsilon_lower
    with ckpt.checkpoints(tmp_path / "a", every=0):
        first = dpsim.audit("dp_sgd", table=T1, **kw)
    with ckpt.checkpoints(tmp_path / "a", every=0), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "written by another run": overwritten
        second = dpsim.audit("dp_sgd", table=T2, **kw)
    assert first.epsilon_lower == fresh1.epsilon_lower
    assert second.epsilon_lower == fresh2.epsilon_lower


def test_one_checkpoint_path_two_datasets_two_results(tmp_path):
    """Same ``checkpoint=`` path, same shapes, other data: the second call computes its own
    result.  Needs the engine to fingerprint ``checkpoint.problem_identity(problem)``."""
    rng = np.random.default_rng(1)
    A, B = rng.normal(size=(30, 2)), rng.normal(size=(30, 2))
    opt = optimizers.get("dp_sgd", noise_multiplier=1.0, lr=0.1)
    kw = dict(steps=6, batch_size=5, trials=2, seed=3, fast=False, checkpoint_every=0.0)
    ref_a = dpsim.simulate(_Table(A), opt, steps=6, batch_size=5, trials=2, seed=3, fast=False)
    ref_b = dpsim.simulate(_Table(B), opt, steps=6, batch_size=5, trials=2, seed=3, fast=False)
    path = tmp_path / "run.ckpt"
    got_a = dpsim.simulate(_Table(A), opt, checkpoint=path, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got_b = dpsim.simulate(_Table(B), opt, checkpoint=path, **kw)
    assert_same_result(got_a, ref_a)
    assert not np.array_equal(ref_a.params, ref_b.params)
    assert not np.array_equal(got_b.params, ref_a.params), (
        "dataset A's result came back for dataset B: the engine's run_identity must fingerprint "
        "dpsim.checkpoint.problem_identity(problem), not dict(problem.config)")
    assert_same_result(got_b, ref_b)
