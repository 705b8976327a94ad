"""Experiment ``dp2_logistic`` ([DP2], DP²) end to end at the tiny scale, plus its helpers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from experiment_fixtures import check_figures_and_report, tiny_run

import dpsim
from dpsim.experiments import dp2_logistic as X
from dpsim.experiments import tuning
from dpsim.paper_figures import dp2_common

NAME = "dp2_logistic"

tiny = tiny_run(NAME)


def test_figures_and_report_section(tiny):
    check_figures_and_report(tiny)


def test_manifest_records_the_tuning_and_every_result_uses_it(tiny):
    root, m = tiny.root, tiny.manifest
    cfg = X.PRESETS["tiny"]
    assert m["config"]["s_grid"] == list(cfg.s_grid) and m["seed"] == cfg.seed and m["complete"]
    notes = m["notes"]
    assert notes["delta"] == X.delta_for(cfg.n)
    assert set(notes["chosen_s"]) == {"dp2_rmsprop", "dp2_extra_query", "dp2_noise_first", "dp2_adagrad"}
    assert set(m["cells"]) == set(X.cell_labels(cfg))
    entries = dp2_common.load(tiny.saved())  # what the figures see
    for label in m["results"]:
        res = dpsim.load(root / f"{label}.npz")
        assert res.trials == (cfg.np_trials or cfg.trials if label.startswith("np-") else cfg.trials)
        info = m["cells"][label]["meta"]
        assert (entries[label].method, entries[label].s) == (info["method"], info["s"])
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
    root = tiny.root
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


def test_labels_are_unique_and_cell_metadata():
    for scale in ("tiny", "quick", "full"):
        labels = X.cell_labels(X.PRESETS[scale])
        assert len(labels) == len(set(labels))
    assert X.cell_meta("dp2_rmsprop", 0.5, s=25) == {"private": True, "sigma": 0.5,
                                                      "method": "dp2_rmsprop", "s": 25, "h": False}
    assert X.cell_meta("dp2_rmsprop", 1, s=25, h=True)["h"] is True
    assert X.cell_meta("delayed_rmsprop", None)["private"] is False
    assert X.cell_meta("dp_sgd", 0.0)["sigma"] == 0.0


def test_delta_follows_the_papers_rule():
    assert X.delta_for(25000) == pytest.approx(1e-5)
    assert X.delta_for(10000) == pytest.approx(1e-4)
    assert X.delta_for(5000) == pytest.approx(1e-4)


def test_selection_in_product_order_with_divergence_as_inf():
    class Fake:
        loss = np.array([[1.0] * 8, [0.5, 0.7, 0.4, 0.5, np.nan, 0.1, 0.3, 0.3]])

    grid = {"lr": (0.1, 1.0), "eps": (1e-3, 1e-7)}
    sel = tuning.select(Fake, grid, 2)
    # product order: (0.1,1e-3) (0.1,1e-7) (1,1e-3) (1,1e-7)
    assert sel.point == {"lr": 1.0, "eps": 1e-7} and sel.score == pytest.approx(0.3)
    assert sel.scores[2] == np.inf and sel.trials == (6, 8)
    with pytest.raises(ValueError, match="trials"):
        tuning.select(Fake, {"lr": (0.1, 1.0)}, 3)
    # one-value axes are passed as scalars, the others per trial
    assert tuning.fold({"lr": (0.1, 1.0), "eps": (1e-3,)}, 2, scalars=True) == {
        "lr": [0.1, 0.1, 1.0, 1.0], "eps": 1e-3}


def test_config_validation_names_the_value():
    import dataclasses

    with pytest.raises(ValueError, match="s_grid"):
        dataclasses.replace(X.PRESETS["tiny"], s_grid=(100,))
    with pytest.raises(ValueError, match="sigma"):
        dataclasses.replace(X.PRESETS["tiny"], sigma=3.0)
