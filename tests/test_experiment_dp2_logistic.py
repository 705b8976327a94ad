"""Experiment ``dp2_logistic`` (seed 000, DP²) end to end at the tiny scale, plus its helpers."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import dpsim
from dpsim import experiments
from dpsim.experiments import dp2_logistic as X
from dpsim.paper_figures import fig_dp2_curves as F

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NAME = "dp2_logistic"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dp2")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(experiments._REGISTRY, NAME, "dpsim.experiments.dp2_logistic")
        report = experiments.reproduce([NAME], scale="tiny", out_dir=tmp / "out",
                                       results_dir=tmp / "results", progress=False, verbose=False)
    root = tmp / "results" / NAME / "tiny"
    return tmp, report, root, json.loads((root / "manifest.json").read_text())


def test_figures_are_written_as_png_and_pdf(tiny):
    tmp, _, _, _ = tiny
    for fig in X.EXPERIMENT.figures:
        png, pdf = tmp / "out" / f"{fig}.png", tmp / "out" / f"{fig}.pdf"
        assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 5000, fig
        assert pdf.read_bytes()[:5] == b"%PDF-", fig


def test_report_has_a_section_per_figure_with_claim_and_verdict(tiny):
    tmp, report, _, _ = tiny
    text = report.read_text()
    assert f"## {NAME}:" in text and "Scale `tiny`" in text
    entry = json.loads((tmp / "out" / "report.json").read_text())[NAME]
    assert [f["figure"] for f in entry["figures"]] == list(X.EXPERIMENT.figures)
    for f in entry["figures"]:
        assert f"### {f['figure']}" in text and f"![{f['figure']}]({f['figure']}.png)" in text
        assert f["claim"] in text and f["measured"] in text
        assert f["holds"] in (True, False, None)
        assert "95% CI" in f["measured"] or "bootstrap" in f["measured"]


def test_manifest_records_the_tuning_and_every_result_uses_it(tiny):
    _, _, root, m = tiny
    cfg = X.PRESETS["tiny"]
    assert m["config"]["s_grid"] == list(cfg.s_grid) and m["seed"] == cfg.seed and m["complete"]
    notes = m["notes"]
    assert notes["delta"] == X.delta_for(cfg.n)
    assert set(notes["chosen_s"]) == {"dp2_rmsprop", "dp2_extra_query", "dp2_noise_first", "dp2_adagrad"}
    assert set(m["cells"]) == set(X.cell_labels(cfg))
    for label in m["results"]:
        res = dpsim.load(root / f"{label}.npz")
        assert res.trials == (cfg.np_trials or cfg.trials if label.startswith("np-") else cfg.trials)
        info = X.parse_label(label)
        assert info == F.parse_label(label)
        key = label
        if info["h"]:  # h(s) traces: DP²'s main setting with only s changed
            key = f"{X.sigma_tag(info['sigma'])}-dp2_rmsprop"
            assert res.config["hyperparameters"]["s1"] == info["s"]
        if key not in notes["chosen"]:  # DP² variants at the main σ: their tuned delay's cell
            key = f"{key}-s{notes['chosen_s'][info['method']]}"
        hp = res.config["hyperparameters"]
        for k, v in notes["chosen"][key].items():
            if k != "optimizer" and not (info["h"] and k == "s1"):
                assert hp[k] == pytest.approx(v), (label, k)
    # DP² at the main σ runs at the delay the rule chose
    main = dpsim.load(root / f"{X.sigma_tag(cfg.sigma)}-dp2_rmsprop.npz")
    assert main.config["hyperparameters"]["s1"] == notes["chosen_s"]["dp2_rmsprop"]


def test_h_cells_trace_every_step_and_extra_query_spends_more(tiny):
    _, _, root, _ = tiny
    cfg = X.PRESETS["tiny"]
    sg = X.sigma_tag(cfg.sigma)
    for s in cfg.s_grid:
        res = dpsim.load(root / f"{sg}-dp2_rmsprop-s{s}-h.npz")
        assert np.array_equal(res.steps, np.arange(cfg.steps + 1))
        assert {"h_g_l1", "h_G_l1"} <= set(res.records)
        assert "h_g_l1" not in dpsim.load(root / f"{sg}-dp2_rmsprop-s{s}.npz").records
    delta = X.delta_for(cfg.n)
    e_dp2 = dpsim.load(root / f"{sg}-dp2_rmsprop.npz").epsilon(delta)
    e_v1 = dpsim.load(root / f"{sg}-dp2_extra_query.npz").epsilon(delta)
    e_sgd = dpsim.load(root / f"{sg}-dp_sgd.npz").epsilon(delta)
    assert e_dp2 == pytest.approx(e_sgd) and e_v1 > 1.2 * e_dp2
    assert math.isinf(dpsim.load(root / "np-delayed_rmsprop.npz").epsilon(delta))


def test_labels_are_unique_and_parse():
    for scale in ("tiny", "quick", "full"):
        labels = X.cell_labels(X.PRESETS[scale])
        assert len(labels) == len(set(labels))
    assert X.parse_label("sig0.5-dp2_rmsprop-s25") == {"private": True, "sigma": 0.5,
                                                       "method": "dp2_rmsprop", "s": 25, "h": False}
    assert X.parse_label("sig1-dp2_rmsprop-s25-h")["h"] is True
    with pytest.raises(ValueError, match="sig1-dp2_rmsprop-x"):
        X.parse_label("sig1-dp2_rmsprop-x")
    assert X.parse_label("np-delayed_rmsprop")["private"] is False
    assert X.parse_label("clip-dp_sgd")["sigma"] == 0.0


def test_delta_follows_the_papers_rule():
    assert X.delta_for(25000) == pytest.approx(1e-5)
    assert X.delta_for(10000) == pytest.approx(1e-4)
    assert X.delta_for(5000) == pytest.approx(1e-4)


def test_select_picks_lowest_mean_final_loss_and_treats_divergence_as_inf():
    class Fake:
        loss = np.array([[1.0] * 8, [0.5, 0.7, 0.4, 0.5, np.nan, 0.1, 0.3, 0.3]])

    grid = {"lr": (0.1, 1.0), "eps": (1e-3, 1e-7)}
    hp, loss, means = X.select(Fake, grid, 2)
    # product order: (0.1,1e-3) (0.1,1e-7) (1,1e-3) (1,1e-7)
    assert hp == {"lr": 1.0, "eps": 1e-7} and loss == pytest.approx(0.3)
    assert means[2] == np.inf
    with pytest.raises(ValueError, match="trials"):
        X.select(Fake, {"lr": (0.1, 1.0)}, 3)


def test_config_validation_names_the_value():
    import dataclasses

    with pytest.raises(ValueError, match="s_grid"):
        dataclasses.replace(X.PRESETS["tiny"], s_grid=(100,))
    with pytest.raises(ValueError, match="sigma"):
        dataclasses.replace(X.PRESETS["tiny"], sigma=3.0)
