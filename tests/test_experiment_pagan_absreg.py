"""Experiment ``pagan_absreg`` (seed 001 §6.1, Fig. 1) end to end at the tiny scale, plus its rules
and statistics helpers."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from scipy import stats as st

import dpsim
from dpsim import experiments
from dpsim.experiments import pagan_absreg, pipeline
from dpsim.paper_figures import fig_pagan_absreg as fig

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NAME = "pagan_absreg"


def _fixed_version(module=None):
    return "pagan-absreg-test"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The experiment reproduced once at the tiny scale (registered for this module only)."""
    mp = pytest.MonkeyPatch()
    mp.setitem(experiments._REGISTRY, NAME, "dpsim.experiments.pagan_absreg")
    # A fixed code version: the real one hashes every module of dpsim/ and experiments/, which
    # others may be editing while this module runs (invalidation is tested in test_experiments).
    mp.setattr(pipeline, "code_version", _fixed_version)
    tmp = tmp_path_factory.mktemp("pagan_absreg")
    report = experiments.reproduce([NAME], scale="tiny", out_dir=tmp / "out",
                                   results_dir=tmp / "results", progress=False, verbose=False)
    yield tmp, report
    mp.undo()


def test_figures_and_report_section(tiny):
    tmp, report = tiny
    exp = pagan_absreg.EXPERIMENT
    assert set(exp.figures) == {"fig_pagan_absreg", "fig_pagan_absreg_curves"}
    for name in exp.figures:
        png, pdf = tmp / "out" / f"{name}.png", tmp / "out" / f"{name}.pdf"
        assert png.stat().st_size > 5000 and png.read_bytes()[:8] == PNG_MAGIC
        assert pdf.stat().st_size > 1000 and pdf.read_bytes()[:5] == b"%PDF-"
    text = report.read_text()
    assert f"## {NAME}:" in text and "Scale `tiny`" in text
    entry = json.loads((tmp / "out" / "report.json").read_text())[NAME]
    for f in entry["figures"]:
        assert f"![{f['figure']}]({f['figure']}.png)" in text
        assert f["claim"] in text and f["measured"] in text
        assert f["holds"] in (True, False, None)
    assert "95% CI" in text and "δ = 1e-5" in text and "PAGAN, optimal A" in text


def test_manifest_records_tuning_privacy_and_results(tiny):
    tmp, _ = tiny
    cfg = pagan_absreg.PRESETS["tiny"]
    root = tmp / "results" / NAME / "tiny"
    m = json.loads((root / "manifest.json").read_text())
    assert m["complete"] and m["config"] == pipeline.config_json(cfg) and m["seed"] == cfg.seed
    sets = pagan_absreg.settings(cfg, {float(k): v for k, v in m["notes"]["sigma_by_epsilon"].items()})
    assert len(m["cells"]) == 2 * len(sets) == 2 * (2 + 4 * len(cfg.epsilons))
    assert m["results"] == [s["label"] for s in sets]
    notes = m["notes"]
    for st_ in sets:
        label = st_["label"]
        res = dpsim.load(root / f"{label}.npz")
        hp = res.config["hyperparameters"]
        assert res.trials == cfg.trials and res.config["steps"] == cfg.steps
        assert hp["lr"] == notes["chosen"][label]["lr"] and hp["lr"] in cfg.lr_grid
        if st_["method"] in ("pasan", "pagan", "pagan_opt"):
            assert hp["radius"] == notes["chosen"][label]["radius"] in cfg.radius_grid
            assert hp["scaling"] == ("optimal" if st_["method"] == "pagan_opt" else "identity")
            # the Theorem 1/2 radius is above every radius tried
            assert notes["theorem_radius"][label] > max(cfg.radius_grid)
        if st_["method"] == "pdp_sgd":
            assert hp["clip"] in cfg.pdp_clip_grid and hp["k"] == cfg.pdp_k
        if np.isfinite(st_["eps"]):
            p = notes["privacy"][label]
            # accounted ε of the run: at most the target (σ calibrated at the largest rate),
            # equal to it (up to calibration tolerance) for PDP-SGD, whose rate was used
            assert p["epsilon"] <= st_["eps"] * (1 + 1e-3)
            if label == sets[-1]["label"]:  # one PLD evaluation: the recorded ε is the run's
                assert res.epsilon(cfg.delta) == pytest.approx(p["epsilon"], rel=1e-6)
            if st_["method"] == "pdp_sgd":
                assert p["epsilon"] == pytest.approx(st_["eps"], rel=1e-2)
        else:
            assert hp["noise_multiplier"] == 0.0 and hp["radius"] == float("inf")


def test_second_reproduce_reuses_cells_and_calibration(tiny, monkeypatch):
    tmp, _ = tiny
    monkeypatch.setitem(experiments._REGISTRY, NAME, "dpsim.experiments.pagan_absreg")
    monkeypatch.setattr(pipeline, "code_version", _fixed_version)

    def boom(*a, **k):
        raise AssertionError("recomputed on a valid cache")

    monkeypatch.setattr(dpsim, "simulate", boom)
    monkeypatch.setattr(pagan_absreg, "calibrate", boom)
    cache, paths = pipeline.run_experiment(pagan_absreg.EXPERIMENT, "tiny",
                                           results_dir=tmp / "results", progress=False)
    assert not cache.computed and len(cache.reused) == len(cache.manifest["cells"])
    assert list(paths) == cache.manifest["results"]


def test_presets_and_config_validation():
    full = pagan_absreg.PRESETS["full"]
    assert full.lr_grid == pagan_absreg.PAPER_LR_GRID
    assert (full.n, full.d, full.batch_size, full.epsilons, full.trials) == (5000, 100, 70,
                                                                             (0.1, 1.0, 4.0), 30)
    assert pagan_absreg.PRESETS["quick"].epsilons == (0.1, 1.0, 4.0)
    with pytest.raises(ValueError, match="sampling"):
        dataclasses.replace(full, sampling="fixed")
    with pytest.raises(ValueError, match="radius_grid"):
        dataclasses.replace(full, radius_grid=())


def test_select_uses_median_final_loss_per_point():
    class Fake:
        loss = np.array([[1.0] * 6, [0.5, 0.1, 0.2, 0.3, 0.05, np.nan]])

    # medians per point: 0.3, 0.25, inf (a diverged trial counts as inf)
    i, med = pagan_absreg.select(Fake, [(0.1, 1.0), (0.1, 2.0), (1.0, 1.0)], 2)
    assert i == 1 and med[:2] == pytest.approx([0.3, 0.25]) and med[2] == np.inf
    with pytest.raises(ValueError, match="trials"):
        pagan_absreg.select(Fake, [(0.1, 1.0)], 2)


def test_median_ci_has_the_binomial_coverage():
    # 30 trials: the interval is [x_(10), x_(21)], coverage 1 − 2 P(Bin(30, ½) ≤ 9) ≈ 0.957
    x = np.arange(30.0)[::-1]
    med, lo, hi = fig.median_ci(x)
    assert (med, lo, hi) == (14.5, 9.0, 20.0)
    assert 1 - 2 * st.binom.cdf(9, 30, 0.5) >= 0.95 > 1 - 2 * st.binom.cdf(10, 30, 0.5)
    # few trials: the range
    assert fig.median_ci([3.0, 1.0, 2.0])[1:] == (1.0, 3.0)
    # along an axis
    m, l, h = fig.median_ci(np.tile(np.arange(30.0), (4, 1)), axis=1)
    assert m.shape == l.shape == h.shape == (4,)


def test_boot_ratio_point_ci_and_min_over_groups():
    rng = np.random.default_rng(0)
    a, b = rng.lognormal(np.log(4.0), 0.2, 60), rng.lognormal(0.0, 0.2, 60)
    r, lo, hi, reps = fig.boot_ratio(a, b)
    assert r == pytest.approx(np.median(a) / np.median(b)) and lo < r < hi and 2.5 < lo and hi < 6
    assert reps.shape == (fig.N_BOOT,)
    r2 = fig.boot_ratio([a, 2 * b], b)[0]
    assert r2 == pytest.approx(2.0 * np.median(b) / np.median(b))
    assert fig.boot_ratio(a, b)[1] == lo  # deterministic (seeded)
