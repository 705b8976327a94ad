"""The reproduction pipeline: registry, per-cell cache, resume, figures and REPORT.md (tiny scale)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import dpsim
from dpsim import experiments
from dpsim import cli
from dpsim.experiments import cli as experiments_cli
from dpsim.experiments import dpsgd_logistic, pipeline, tuning, verdicts

ROOT = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class Boom(RuntimeError):
    pass


def _reproduce(tmp, name="dpsgd_logistic", **kw):
    return experiments.reproduce([name], scale="tiny", out_dir=tmp / "out",
                                 results_dir=tmp / "results", progress=False, verbose=False, **kw)


def _key_dir(tmp, name="dpsgd_logistic", scale="tiny"):
    """The cell folder of ``name``'s current key: ``results/<name>/<scale>/<key>``."""
    exp = experiments.get(name)
    key = pipeline.cache_key(name, exp.config(scale), pipeline.numerics_version(exp))
    return tmp / "results" / name / scale / key


def _cells(tmp, name="dpsgd_logistic", scale="tiny"):
    root = _key_dir(tmp, name, scale)
    return root, json.loads((root / "manifest.json").read_text())


def _copy_results(src_tmp, dst_tmp, name="dpsgd_logistic"):
    """Start ``dst_tmp`` from ``name``'s results in the module's tiny run (saves one reproduce)."""
    shutil.copytree(src_tmp / "results" / name, dst_tmp / "results" / name)
    root, m = _cells(dst_tmp, name)
    return len(m["cells"])


def _count_simulate(monkeypatch, fail_after=None):
    """Patch dpsim.simulate: count calls; raise Boom on call number ``fail_after + 1``."""
    real = dpsim.simulate
    calls = []

    def wrapped(*a, **k):
        if fail_after is not None and len(calls) >= fail_after:
            raise Boom("simulated interruption")
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(dpsim, "simulate", wrapped)
    return calls


@pytest.fixture(scope="module")
def tiny_run(tiny_all):
    """Every registered experiment reproduced once at the tiny scale into one tmp folder (the
    session's run, ``conftest.tiny_all``): ``(tmp, REPORT.md)``.  Read only: a test that
    reproduces again works on a copy (:func:`_copy_results`)."""
    return tiny_all.tmp, tiny_all.report


# ---------------------------------------------------------------------------------------------
# Registry


def test_registry_lists_experiments_with_presets_and_figures():
    names = experiments.names()
    assert "dpsgd_logistic" in names
    for name in names:
        exp = experiments.get(name)
        assert exp.name == name
        for scale in experiments.SCALES:
            cfg = exp.config(scale)
            assert dataclasses.is_dataclass(cfg)
            with pytest.raises(dataclasses.FrozenInstanceError):
                cfg.seed = 1
            json.dumps(pipeline.config_json(cfg))
        for fig in exp.figures:
            mod = __import__(f"dpsim.paper_figures.{fig}", fromlist=["render"])
            assert callable(mod.render) and callable(mod.evaluate)


def test_unknown_name_and_scale_are_errors_that_name_the_value(tmp_path):
    with pytest.raises(KeyError, match="no_such_experiment"):
        experiments.get("no_such_experiment")
    with pytest.raises(KeyError, match="no_such_experiment"):
        experiments.reproduce(["no_such_experiment"], out_dir=tmp_path, results_dir=tmp_path)
    with pytest.raises(ValueError, match="'huge'"):
        experiments.reproduce(["dpsgd_logistic"], scale="huge", out_dir=tmp_path,
                              results_dir=tmp_path)
    assert not any(tmp_path.iterdir())  # validated before any work


def _reproduce_parser():
    parser = argparse.ArgumentParser(prog="dpsim")
    experiments_cli.register(parser.add_subparsers(dest="command"))
    return parser


def test_reproduce_command_registers_and_names_bad_values(tmp_path, monkeypatch):
    parser = _reproduce_parser()
    args = parser.parse_args(["reproduce", "dpsgd_logistic", "--scale", "tiny", "--out",
                              str(tmp_path), "--force"])
    assert (args.names, args.all, args.scale, args.out, args.force) == (
        ["dpsgd_logistic"], False, "tiny", str(tmp_path), True)
    with pytest.raises(KeyError, match="no_such_experiment"):
        args.handler(parser.parse_args(["reproduce", "no_such_experiment"]))
    with pytest.raises(ValueError, match="'huge'"):
        args.handler(parser.parse_args(["reproduce", "--all", "--scale", "huge"]))
    with pytest.raises(ValueError, match="--all"):
        args.handler(parser.parse_args(["reproduce"]))
    calls = []
    monkeypatch.setattr(experiments_cli, "reproduce", lambda names, **kw: calls.append((names, kw)))
    assert args.handler(parser.parse_args(["reproduce", "--all", "--scale", "tiny"])) == 0
    assert calls == [(experiments.names(), {"scale": "tiny", "out_dir": None, "force": False,
                                            "workers": None})]  # --workers: every core
    args = parser.parse_args(["reproduce", "x", "--workers", "3", "--backend", "cupy",
                              "--results", str(tmp_path)])
    args.handler(args)
    assert calls[-1][1] == {"scale": "quick", "out_dir": None, "force": False, "workers": 3,
                            "backend": "cupy", "results_dir": str(tmp_path)}
    args.handler(parser.parse_args(["reproduce", "x", "--scheduler", "tcp://10.0.0.1:8786"]))
    assert calls[-1][1]["scheduler"] == "tcp://10.0.0.1:8786" and calls[-1][1]["workers"] is None
    with pytest.raises(ValueError, match="'0'"):
        args.handler(parser.parse_args(["reproduce", "x", "--workers", "0"]))
    with pytest.raises(SystemExit):  # argparse: not both
        parser.parse_args(["reproduce", "x", "--workers", "2", "--scheduler", "tcp://h:1"])


def test_cli_reproduce_bad_input_exits_2_with_one_line(capsys):
    assert cli.main(["reproduce", "no_such_experiment"]) == 2
    err = capsys.readouterr().err
    assert "no_such_experiment" in err and err.count("\n") == 1
    assert cli.main(["reproduce", "--all", "--scale", "huge"]) == 2
    assert "huge" in capsys.readouterr().err


def test_experiments_and_figures_use_only_public_dpsim_api():
    # the applications (dpsim.analysis, dpsim.experiments, dpsim.paper_figures) may share their own
    # helpers; what they may not touch is a private name of the simulator core
    app = r"(?!\.(?:analysis|experiments|paper_figures)\b)"
    private = re.compile(rf"\bdpsim{app}(?:\.[A-Za-z]\w*)*\._[A-Za-z]|from dpsim{app}[.\w]* import [^\n]*\b_[A-Za-z]")
    for pkg in ("experiments", "paper_figures"):
        for path in (ROOT / pkg).rglob("*.py"):
            text = path.read_text()
            assert not private.search(text), f"{path} reaches into dpsim internals"


# ---------------------------------------------------------------------------------------------
# End to end: figures and report


def test_figures_exist_and_are_png_and_pdf(tiny_run):
    tmp, _ = tiny_run
    for name in experiments.names():
        for fig in experiments.get(name).figures:
            png, pdf = tmp / "out" / f"{fig}.png", tmp / "out" / f"{fig}.pdf"
            assert png.stat().st_size > 5000 and png.read_bytes()[:8] == PNG_MAGIC
            assert pdf.stat().st_size > 1000 and pdf.read_bytes()[:5] == b"%PDF-"


def test_report_has_image_claim_measurement_and_verdict_per_figure(tiny_run):
    tmp, report = tiny_run
    assert report == tmp / "out" / "REPORT.md"
    text = report.read_text()
    entries = json.loads((tmp / "out" / "report.json").read_text())
    for name in experiments.names():
        assert f"## {name}:" in text
        for fig in entries[name]["figures"]:
            assert f"![{fig['figure']}]({fig['figure']}.png)" in text
            assert fig["claim"] and fig["claim"] in text
            assert fig["measured"] in text
            assert fig["category"] in verdicts.CATEGORIES
            assert fig["holds"] == verdicts.holds_of(fig["category"])
            assert f"**Verdict:** {fig['category']}." in text
    assert text.count("**Verdict:**") == sum(len(e["figures"]) for e in entries.values())
    assert text.count("Scale `tiny`") == len(experiments.names())


def test_manifest_records_config_seed_versions_and_chosen_lr(tiny_run):
    tmp, _ = tiny_run
    root, m = _cells(tmp)
    cfg = dpsgd_logistic.PRESETS["tiny"]
    assert m["config"] == pipeline.config_json(cfg) and m["seed"] == cfg.seed
    assert {"numpy", "dpsim", "python"} <= set(m["versions"])
    assert m["complete"] and len(m["cells"]) == 4 * (1 + len(cfg.noise_multipliers))
    for label in m["results"]:
        res = dpsim.load(root / f"{label}.npz")
        meta = m["cells"][label]["meta"]
        tune = dpsim.load(root / f"{meta['problem']}-tune-{meta['setting']}.npz")
        chosen = tuning.select(tune, {"lr": cfg.lr_grid}, cfg.tune_trials).point["lr"]
        assert m["notes"]["selection"][label]["point"]["lr"] == chosen
        assert res.config["hyperparameters"]["lr"] == chosen
        assert res.config["hyperparameters"].get("noise_multiplier", 0.0) == meta["noise_multiplier"]
        assert res.trials == cfg.trials and "versions" in res.config


# ---------------------------------------------------------------------------------------------
# Cache: reuse, invalidation, resume


def test_second_reproduce_reuses_the_cache(tiny_run, tmp_path, monkeypatch):
    _copy_results(tiny_run[0], tmp_path)  # the session's run stays as it is for other modules
    root, _ = _cells(tmp_path)
    before = {p.name: p.stat().st_mtime_ns for p in root.glob("*.npz")}
    _count_simulate(monkeypatch, fail_after=0)  # any simulation raises
    _reproduce(tmp_path)
    assert {p.name: p.stat().st_mtime_ns for p in root.glob("*.npz")} == before
    entry = json.loads((tmp_path / "out" / "report.json").read_text())["dpsgd_logistic"]
    assert entry["cells"]["computed"] == 0 and entry["cells"]["reused"] == len(before)


def test_config_change_recomputes_under_a_new_key_and_keeps_the_old_results(tiny_run, tmp_path,
                                                                           monkeypatch):
    n_cells = _copy_results(tiny_run[0], tmp_path)
    calls = _count_simulate(monkeypatch)
    old_root, old = _cells(tmp_path)
    old_files = {p.name: p.read_bytes() for p in old_root.glob("*.npz")}
    changed = dataclasses.replace(dpsgd_logistic.PRESETS["tiny"], steps=12)
    monkeypatch.setitem(dpsgd_logistic.PRESETS, "tiny", changed)
    _reproduce(tmp_path)
    assert len(calls) == n_cells
    root, m = _cells(tmp_path)
    assert m["key"] != old["key"] and m["config"]["steps"] == 12 and root != old_root
    assert all(dpsim.load(root / f"{lab}.npz").steps[-1] == 12 for lab in m["results"])
    # the stale results stay under their key (until `dpsim cache prune`) ...
    assert {p.name: p.read_bytes() for p in old_root.glob("*.npz")} == old_files
    # ... so going back to the old config recomputes nothing
    monkeypatch.undo()
    calls = _count_simulate(monkeypatch, fail_after=0)
    _reproduce(tmp_path)
    assert (tmp_path / "results" / "dpsgd_logistic" / "tiny" / "LATEST").read_text().strip() == old["key"]


def test_numerics_version_bump_recomputes(tiny_run, tmp_path, monkeypatch):
    n_cells = _copy_results(tiny_run[0], tmp_path)
    calls = _count_simulate(monkeypatch)
    monkeypatch.setattr(pipeline.spec, "DPSIM_NUMERICS", pipeline.DPSIM_NUMERICS + 1)
    _reproduce(tmp_path)
    assert len(calls) == n_cells


def test_key_is_config_seed_declared_numerics_and_backend():
    exp = experiments.get("dpsgd_logistic")
    cfg = exp.config("tiny")
    v = pipeline.numerics_version(exp)
    assert v == f"dpsim={pipeline.DPSIM_NUMERICS};dpsgd_logistic={exp.numerics}"
    k = pipeline.cache_key(exp.name, cfg, v)
    assert re.fullmatch(r"[0-9a-f]{16}", k) and k == pipeline.cache_key(exp.name, cfg, v)
    others = {pipeline.cache_key(exp.name, dataclasses.replace(cfg, seed=1), v),
              pipeline.cache_key(exp.name, dataclasses.replace(cfg, trials=5), v),
              pipeline.cache_key(exp.name, cfg, v + "x"),
              pipeline.cache_key(exp.name, cfg, v, "cupy"),
              pipeline.cache_key("other", cfg, v)}
    assert len(others) == 5 and k not in others


def test_corrupt_cell_file_is_recomputed(tiny_run, tmp_path, monkeypatch):
    _copy_results(tiny_run[0], tmp_path)
    calls = _count_simulate(monkeypatch)
    root, m = _cells(tmp_path)
    (root / f"{m['results'][0]}.npz").write_bytes(b"not a result")
    _reproduce(tmp_path)
    assert len(calls) == 1


def test_interrupted_sweep_resumes_and_matches_an_uninterrupted_run(tiny_run, tmp_path, monkeypatch):
    _count_simulate(monkeypatch, fail_after=1)
    with pytest.raises(Boom):
        _reproduce(tmp_path)
    root, m = _cells(tmp_path)
    assert len(m["cells"]) == 1 and not m.get("complete")
    (first,) = m["cells"]
    mtime = (root / f"{first}.npz").stat().st_mtime_ns

    monkeypatch.undo()
    calls = _count_simulate(monkeypatch)
    _reproduce(tmp_path)
    root, m = _cells(tmp_path)
    assert m["complete"] and len(calls) == len(m["cells"]) - 1
    assert (root / f"{first}.npz").stat().st_mtime_ns == mtime
    # Same config and code, cells seeded by index: identical to the one-shot run.
    ref_root, _ = _cells(tiny_run[0])
    for label in m["cells"]:
        a, b = dpsim.load(root / f"{label}.npz"), dpsim.load(ref_root / f"{label}.npz")
        np.testing.assert_array_equal(a.loss, b.loss)
        np.testing.assert_array_equal(a.params, b.params)


def test_force_recomputes(tiny_run, tmp_path, monkeypatch):
    n_cells = _copy_results(tiny_run[0], tmp_path)
    calls = _count_simulate(monkeypatch)
    _reproduce(tmp_path, force=True)
    assert len(calls) == n_cells


# ---------------------------------------------------------------------------------------------
# Seeds and the lr rule


def test_cell_seeds_are_spawned_children_and_order_independent(tmp_path):
    @dataclasses.dataclass(frozen=True)
    class Cfg:
        seed: int = 7

    def cache(sub):
        return pipeline.Cache(tmp_path / sub, experiment="x", scale="tiny", config=Cfg(),
                              version="v", progress=False)

    kids = np.random.SeedSequence(7).spawn(5)
    c = cache("a")
    for i in range(5):
        assert c.cell_seed(i).generate_state(4).tolist() == kids[i].generate_state(4).tolist()

    prob = dpsim.problems.logistic_regression(50, 3, seed=0)

    def cell(i):
        return pipeline.Cell(f"c{i}", i, lambda seed: dpsim.simulate(
            prob, dpsim.optimizers.get("dp_sgd", lr=0.5), steps=5, batch_size=5, trials=2, seed=seed))

    fwd = cache("fwd").run([cell(i) for i in range(3)])
    rev = cache("rev").run([cell(i) for i in reversed(range(3))])
    for i in range(3):
        np.testing.assert_array_equal(fwd[f"c{i}"].params, rev[f"c{i}"].params)
    with pytest.raises(ValueError, match="share index"):
        cache("dup").run([cell(0), pipeline.Cell("other", 0, cell(0).compute)])


def test_select_picks_best_final_mean_training_loss():
    class Fake:
        loss = np.array([[1.0] * 6, [0.5, 0.7, 0.4, 0.5, np.nan, 0.1]])

    sel = tuning.select(Fake, {"lr": (0.1, 1.0, 10.0)}, 2)
    assert sel.point == {"lr": 1.0} and sel.trials == (2, 4) and sel.at_edge == []
    assert sel.scores[:2] == pytest.approx((0.6, 0.45)) and sel.scores[2] == np.inf
    assert sel.to_json()["scores"] == {"lr=0.1": sel.scores[0], "lr=1": 0.45, "lr=10": np.inf}


def test_saved_reader_gives_paths_results_metadata_and_selection(tiny_run):
    tmp, _ = tiny_run
    root, m = _cells(tmp)
    saved = pipeline.Saved.from_dir(root)
    assert list(saved) == m["results"] and saved[m["results"][0]] == root / f"{m['results'][0]}.npz"
    label = m["results"][-1]
    assert saved.result(label) is saved.result(label)  # loaded once per reader
    assert saved.meta(label) == m["cells"][label]["meta"]
    assert saved.selection(label) == m["notes"]["selection"][label]
    with pytest.raises(KeyError, match="nope"):
        saved.selection("nope")
    with pytest.raises(KeyError, match="'elsewhere'"):  # a cell the manifest does not list
        pipeline.Saved({"elsewhere": root / "elsewhere.npz"}).meta("elsewhere")


_TRIALS_FIELD = {"design_space": "neg_trials"}


@pytest.mark.parametrize("name", experiments.names())
@pytest.mark.parametrize("bad", [0, -3, True, 2.0, "4"])
def test_every_config_refuses_a_count_that_is_not_a_positive_int(name, bad):
    """Each experiment's config checks its counts with ``pipeline.require_positive_ints``:
    the error names the field and the value (a bool is not a count)."""
    cfg = experiments.get(name).config("tiny")
    field = _TRIALS_FIELD.get(name, "trials")
    with pytest.raises(ValueError, match=rf"{field} must be a positive integer, got {field}={bad!r}"):
        dataclasses.replace(cfg, **{field: bad})


_GRID_FIELD = {"design_space": "ada_lr_grid", "dp2_compute": "lr_sgd_grid",
               "dp2_logistic": "lr_sgd_grid", "dp2_noisy_adagrad": "lr_sgd_grid"}


@pytest.mark.parametrize("name", sorted(_GRID_FIELD))
@pytest.mark.parametrize("bad", [(), (1.0, 0.0), (float("nan"),), (-1.0, 2.0)])
def test_configs_refuse_an_empty_or_nonpositive_tuning_grid(name, bad):
    """``pipeline.require_positive_grids``: the error names the grid and its value (NaN too)."""
    cfg = experiments.get(name).config("tiny")
    field = _GRID_FIELD[name]
    with pytest.raises(ValueError, match=rf"{field} must be non-empty and positive, got {field}="):
        dataclasses.replace(cfg, **{field: bad})


def test_an_optional_grid_may_be_none_and_only_an_optional_one():
    cfg = experiments.get("dp2_logistic").config("tiny")
    assert dataclasses.replace(cfg, dp2_lr2_grid=None).dp2_lr2_grid is None
    with pytest.raises(ValueError, match="clip_grid must be non-empty and positive, got clip_grid=None"):
        dataclasses.replace(cfg, clip_grid=None)
