"""Experiment ``pagan_absreg`` ([PAGAN] §6.1, Fig. 1) end to end at the tiny scale, plus its rules
and statistics helpers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from support.experiment_fixtures import check_figures_and_report, tiny_run
from scipy import stats as st

import dpsim
from dpsim.experiments import pagan_absreg, pipeline, tuning
from dpsim.paper_figures import pagan_common as fig

NAME = "pagan_absreg"

tiny = tiny_run(NAME)


def test_figures_and_report_section(tiny):
    check_figures_and_report(tiny)


def test_manifest_records_tuning_privacy_and_results(tiny):
    cfg = pagan_absreg.PRESETS["tiny"]
    root, m = tiny.root, tiny.manifest
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
        assert hp["lr"] == notes["selection"][label]["point"]["lr"]
        assert hp["lr"] in pagan_absreg.lr_grid_of(cfg)
        # every run records the average iterate's excess loss (the algorithms' output) beside
        # the last iterate's, at the same record steps
        avg = res.records[pagan_absreg.AVG_PROBE]
        assert avg.shape == res.excess_loss.shape and np.all(np.isfinite(avg))
        np.testing.assert_allclose(avg[0], res.excess_loss[0], rtol=1e-12, atol=1e-12)
        if st_["method"] in ("pasan", "pagan", "pagan_opt"):
            assert hp["radius"] == notes["selection"][label]["point"]["radius"] in cfg.radius_grid
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

    def boom(*a, **k):
        raise AssertionError("recomputed on a valid cache")

    monkeypatch.setattr(dpsim, "simulate", boom)
    monkeypatch.setattr(pagan_absreg, "calibrate", boom)
    cache, paths = pipeline.run_experiment(pagan_absreg.EXPERIMENT, "tiny",
                                           results_dir=tiny.tmp / "results", progress=False)
    assert not cache.computed and len(cache.reused) == len(cache.manifest["cells"])
    assert list(paths) == cache.manifest["results"]


def test_iterate_average_probe_matches_the_mean_of_the_recorded_iterates():
    """The probe at step t is F(x̄_t) − F* with x̄_t = (1/t) Σ_{k=1}^t x^k ([PAGAN] Alg. 1–2 line
    10), checked against the iterates recorded at every step; and the piece changes neither the
    updates (last iterate bit for bit) nor the privacy record."""
    prob = dpsim.problems.absolute_regression(200, 4, scales="power", tau=0.01, seed=3)
    base = dpsim.optimizers.get("pagan", lr=0.3, noise_multiplier=1.5, radius=1.0,
                                scaling="optimal")
    opt = pagan_absreg.with_iterate_average(base, prob)
    assert opt.events == base.events and opt.name == "pagan+avg"
    probes = {f"x{j}": (lambda j: lambda state, params, ctx: params[:, j])(j) for j in range(4)}
    kw = dict(steps=12, batch_size=20, trials=3, seed=5, record_every=1, metrics=("loss",))
    res = dpsim.simulate(prob, opt, probes=probes, **kw)
    plain = dpsim.simulate(prob, base, **kw)
    np.testing.assert_array_equal(res.loss, plain.loss)
    np.testing.assert_array_equal(res.params, plain.params)
    assert res.epsilon(1e-5) == plain.epsilon(1e-5)
    x = np.stack([res.records[f"x{j}"] for j in range(4)], axis=-1)   # (T+1, R, d): x^1 … x^{T+1}
    f_star = prob.optimum[1]
    for t in range(1, 13):
        xbar = x[:t].mean(axis=0)                                      # (1/t) Σ_{k=1}^t x^k
        np.testing.assert_allclose(res.records[pagan_absreg.AVG_PROBE][t],
                                   prob.loss(xbar) - f_star, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(res.records[pagan_absreg.AVG_PROBE][0], prob.loss(x[0]) - f_star)


def test_edges_leave_out_the_equivalent_small_radii_of_a_identity():
    sel = {"pasan-eps1": {"point": {"lr": 8.0, "radius": 0.25}, "at_edge": ["lr", "radius"],
                          "grid": {"lr": [0.1, 8.0], "radius": [0.25, 4.0]}},
           "pagan_opt-eps1": {"point": {"lr": 0.2, "radius": 0.25}, "at_edge": ["radius"],
                              "grid": {"lr": [0.1, 0.2, 8.0], "radius": [0.25, 4.0]}}}
    data = {"notes": {"selection": sel, "grad_norm_quantiles": {"0.01": 0.3}}}
    # A = I below the 1% quantile of ||a_i||: not an edge; the optimal-A radius is one
    assert fig.edges(data, ["pasan-eps1", "pagan_opt-eps1"]) == {
        "pasan-eps1: lr": 8.0, "pagan_opt-eps1: radius": 0.25}
    cat, note = fig.with_edges("holds", data, ["pagan_opt-eps1"])
    assert cat == "inconclusive" and "pagan_opt-eps1: radius=0.25" in note
    data["notes"]["grad_norm_quantiles"]["0.01"] = 0.2   # now 0.25 is above it: a real edge
    assert "pasan-eps1: radius" in fig.edges(data, ["pasan-eps1"])
    assert fig.with_edges("does not hold", data, []) == ("does not hold", "")
    # PDP-SGD with a clip below (nearly) every gradient norm: only lr·C matters
    data["notes"]["grad_norm_quantiles"]["0.01"] = 0.3
    sel["pdp_sgd-eps1"] = {"point": {"lr": 8.0, "clip": 0.0625}, "at_edge": ["lr", "clip"],
                           "grid": {"lr": [0.1, 2.0, 8.0], "clip": [0.0625, 0.25]}}
    assert fig.edges(data, ["pdp_sgd-eps1"]) == {}              # 0.5 inside [0.00625, 2]
    sel["pdp_sgd-eps1"]["point"] = {"lr": 0.1, "clip": 0.0625}  # the smallest product: an edge
    assert set(fig.edges(data, ["pdp_sgd-eps1"])) == {"pdp_sgd-eps1: lr", "pdp_sgd-eps1: clip"}


def test_presets_and_config_validation():
    full = pagan_absreg.PRESETS["full"]
    assert full.lr_grid == pagan_absreg.PAPER_LR_GRID
    quick = pagan_absreg.PRESETS["quick"]
    # the paper's nine step sizes (widened above) and its 30 runs already at quick scale
    assert set(pagan_absreg.PAPER_LR_GRID) <= set(pagan_absreg.lr_grid_of(quick))
    assert max(pagan_absreg.lr_grid_of(quick)) > 1.0 and quick.trials == 30
    assert quick.tune_trials >= 3 and full.tune_trials >= 3  # [issue 13]: at least 3 per grid point
    with pytest.raises(ValueError, match="lr_extra"):
        dataclasses.replace(full, lr_extra=(-1.0,))
    assert (full.n, full.d, full.batch_size, full.epsilons, full.trials) == (5000, 100, 70,
                                                                             (0.1, 1.0, 4.0), 30)
    assert pagan_absreg.PRESETS["quick"].epsilons == (0.1, 1.0, 4.0)
    with pytest.raises(ValueError, match="sampling"):
        dataclasses.replace(full, sampling="fixed")
    with pytest.raises(ValueError, match="radius_grid"):
        dataclasses.replace(full, radius_grid=())


def test_selection_with_the_median_statistic():
    class Fake:
        loss = np.array([[1.0] * 9, [0.1, 0.2, 0.9, 0.3, 0.3, 0.3, 0.05, np.nan, np.inf]])

    grid = {"point": (0, 1, 2)}
    # medians 0.2, 0.3, inf (diverged trials count as inf); means 0.4, 0.3, inf
    sel = tuning.select(Fake, grid, 3, stat="median")
    assert sel.index == 0 and sel.scores[:2] == pytest.approx((0.2, 0.3)) and sel.scores[2] == np.inf
    assert tuning.select(Fake, grid, 3).index == 1  # the mean picks the other point
    with pytest.raises(ValueError, match="trials"):
        tuning.select(Fake, grid, 2, stat="median")
    with pytest.raises(ValueError, match="'mode'"):
        tuning.select(Fake, grid, 3, stat="mode")


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
