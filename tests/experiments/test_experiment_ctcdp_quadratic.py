"""Experiment ``ctcdp_quadratic`` ([L2P] App. C.1) end to end at the tiny scale, plus its pieces."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from support.experiment_fixtures import check_figures_and_report, tiny_run

import dpsim
from dpsim.analysis import tcdp as tcdp_bounds
from dpsim.experiments import ctcdp_quadratic as cq
from dpsim.experiments import pipeline, tuning, verdicts
from dpsim.paper_figures import ctcdp_common
from dpsim.paper_figures import fig_ctcdp_eps_sweep, fig_ctcdp_subsampling, fig_ctcdp_trajectories

NAME = "ctcdp_quadratic"

tiny = tiny_run(NAME)


def test_figures_and_report_section(tiny):
    check_figures_and_report(tiny)


def test_manifest_records_choices_and_every_method_per_eps(tiny):
    root, m = tiny.root, tiny.manifest
    cfg = cq.PRESETS["tiny"]
    assert m["complete"] and m["config"] == pipeline.config_json(cfg)
    expected = {cq.label(e, k) for e in cfg.epsilons for k in cfg.methods}
    assert set(m["results"]) == expected
    notes = m["notes"]
    assert set(notes["selection"]) == expected
    # heavy-tailed final losses: the tuning rule scores grid points by their median
    assert {sel["stat"] for sel in notes["selection"].values()} == {"median"}
    # the premise notes: the clipped mean at the far start and the bound per ε
    assert 0.5 < notes["premise"]["clipped_mean_norm_at_start"] <= 1.0
    assert set(notes["premise"]["improvement_bound"]) == {f"{e:g}" for e in cfg.epsilons}
    # eps=1.6 with T=10 has no feasible ctCDP batch for n=60 (Algorithm 3): recorded, not run
    assert "eps1.6-uniform-T10" in notes["infeasible"]
    assert notes["selection"]["eps1.6-uniform"]["grid"]["steps"] == [
        T for T in cfg.steps_grid if T != 10]
    for lab in m["results"]:
        res = dpsim.load(root / f"{lab}.npz")
        c = notes["selection"][lab]["point"]
        assert m["cells"][lab]["meta"] == {"epsilon": float(lab[3:].split("-")[0]),
                                           "method": lab.split("-", 1)[1]}
        hp = res.config["hyperparameters"]
        assert hp["lr"] == c["lr"] and c["lr"] in cfg.lr_grid
        assert res.trials == cfg.trials
        # every run starts at the common initial point theta* + offset
        np.testing.assert_allclose(res.records["theta0"][0], notes["initial_point"][0])
        np.testing.assert_allclose(res.records["theta1"][0], notes["initial_point"][1])
        if res.config["optimizer"] == "dp_sgd":
            assert res.steps[-1] == c["steps"]
        else:
            assert res.privacy["planned_steps"] == c["steps"]


def test_uniform_ctcdp_runs_spend_exactly_their_budget_then_stop(tiny):
    root = tiny.root

    past = 0
    for eps in cq.PRESETS["tiny"].epsilons:
        res = dpsim.load(root / f"{cq.label(eps, 'uniform')}.npz")
        p = res.privacy
        ratio = np.asarray(p["rho_spent"]) / p["rho_tot"]
        np.testing.assert_allclose(ratio, 1.0, rtol=0, atol=1e-8)
        assert ratio.max() <= 1.0
        assert set(p["steps_taken"]) == {p["planned_steps"]}
        assert res.steps[-1] == max(cq.PRESETS["tiny"].steps_grid)
        if res.steps[-1] > p["planned_steps"]:               # simulated past T ...
            past += 1
            after = res.loss[p["planned_steps"]:]            # ... but frozen once the budget is spent
            np.testing.assert_array_equal(after, np.broadcast_to(after[0], after.shape))
        assert float(np.max(res.epsilon(cq.Config.delta))) == pytest.approx(eps, rel=1e-8)
    assert past >= 1


def test_sgd_adv_zcdp_calibration_spends_rho_a_and_is_private():
    eps, delta, T = 0.05, 1e-8, 30
    nm = cq.sgd_adv_noise_multiplier(eps, delta, T, "zcdp")
    # T Gaussian releases with sensitivity 2C and std nm*C: T * (2C)^2 / (2 (nm C)^2) = rho_a
    assert T * 4.0 / (2.0 * nm**2) == pytest.approx(float(tcdp_bounds.rho_a(eps, delta)), rel=1e-12)
    prob = dpsim.problems.random_quadratic(m=60, d=2, seed=0)
    res = dpsim.simulate(prob, dpsim.optimizers.get("dp_sgd", lr=0.1, clip=1.0, noise_multiplier=nm),
                         steps=T, batch_size=60, sampling="fixed", trials=2, seed=0, metrics=("loss",))
    assert float(np.max(res.epsilon(delta, accountant="rdp"))) <= eps


def test_sgd_adv_advanced_composition_calibration():
    eps, delta, T = 0.4, 1e-8, 20
    nm = cq.sgd_adv_noise_multiplier(eps, delta, T, "advanced")
    d0 = delta / (2 * T)
    e0 = 2.0 * math.sqrt(2.0 * math.log(1.25 / d0)) / nm      # invert sigma/Delta = sqrt(2 log(1.25/d0))/e0
    total = math.sqrt(2 * T * math.log(2 / delta)) * e0 + T * e0 * math.expm1(e0)
    assert total == pytest.approx(eps, rel=1e-9)
    assert nm > cq.sgd_adv_noise_multiplier(eps, delta, T, "zcdp")   # looser than zCDP here
    with pytest.raises(ValueError, match="composition 'rdp'"):
        cq.sgd_adv_noise_multiplier(eps, delta, T, "rdp")
    with pytest.raises(ValueError, match="epsilon0="):
        cq.sgd_adv_noise_multiplier(1e4, delta, 1, "advanced")


def test_selection_over_T_p_and_lr_concatenates_the_T_cells():
    class Fake:
        def __init__(self, final):
            self.loss = np.array([np.zeros_like(final), final])

    grid = {"steps": (10, 20), "schedule_param": (-0.5, 0.5), "lr": (0.1, 0.2)}
    # one cell per T, trials ordered (p, lr, repeat)
    a = Fake(np.array([5.0, 5.0, 4.0, 4.0, 3.0, 3.0, 6.0, 6.0]))
    b = Fake(np.array([9.0, 9.0, 9.0, 9.0, 1.0, np.nan, 2.5, 2.5]))   # NaN counts as inf
    sel = tuning.select(tuning.final_losses(a, b), grid, 2)
    assert sel.point == {"steps": 20, "schedule_param": 0.5, "lr": 0.2} and sel.score == 2.5
    assert sel.scores[6] == np.inf and sel.at_edge == ["steps", "schedule_param", "lr"]


def test_config_validation_names_bad_values():
    base = cq.PRESETS["tiny"]
    with pytest.raises(ValueError, match="linear_params"):
        dataclasses.replace(base, linear_params=(1.0,))
    with pytest.raises(ValueError, match="epsilons"):
        dataclasses.replace(base, epsilons=(0.05, -1.0))
    with pytest.raises(ValueError, match="'sgd_mystery'"):
        dataclasses.replace(base, methods=("sgd_mystery",))
    for scale in ("tiny", "quick", "full"):
        cfg = cq.EXPERIMENT.config(scale)
        assert dataclasses.is_dataclass(cfg) and cfg.delta == 1e-8
        json.dumps(pipeline.config_json(cfg))
    full = cq.PRESETS["full"]
    assert full.epsilons == (0.05, 0.1, 0.2, 0.4, 0.8, 1.6) and full.trials == 100
    for cfg in (full, cq.PRESETS["quick"]):
        # the paper's T and step-size grids, widened on the sides where the winners sat
        assert set((10, 20, 30, 40, 50, 60)) < set(cfg.steps_grid)
        assert min(cfg.steps_grid) < 10 and max(cfg.steps_grid) > 60
        paper_lr = [round(60 * 0.001 * k, 6) for k in range(1, 21)]
        assert set(paper_lr) < set(cfg.lr_grid) and min(cfg.lr_grid) < 0.06
        assert max(cfg.lr_grid) == pytest.approx(60 * 0.04)  # widened above the paper's 60 × 0.02


def test_edges_treat_the_feasibility_limit_of_T_as_no_edge():
    sel = {"eps0.8-uniform": {"point": {"steps": 10, "lr": 0.06}, "at_edge": ["steps", "lr"],
                              "grid": {"steps": [10, 20], "lr": [0.06, 1.2]}},
           "eps0.4-uniform": {"point": {"steps": 5, "lr": 0.5}, "at_edge": ["steps"],
                              "grid": {"steps": [5, 20], "lr": [0.06, 1.2]}}}
    notes = {"selection": sel, "infeasible": ["eps0.8-uniform-T5", "eps1.6-uniform-T5"]}
    assert ctcdp_common.edges(notes, ["eps0.8-uniform", "eps0.4-uniform"]) == {
        "eps0.8-uniform: lr": 0.06, "eps0.4-uniform: steps": 5}
    cat, note = ctcdp_common.with_edges(verdicts.HOLDS, notes, ["eps0.4-uniform"])
    assert cat == verdicts.INCONCLUSIVE and "steps=5" in note


def test_improvement_bound_matches_a_monte_carlo_of_the_optimal_one_shot_step():
    """E‖θ − θ*‖²/D² after moving λ = D/(1 + d/s²) along the noisy released direction equals
    1/(1 + s²/d); checked by Monte Carlo (standard error from the sample)."""
    eps, delta, m, d, cm = 0.4, 1e-8, 60, 2, 0.75
    b = cq.improvement_bound(eps, delta, m, d, cm)
    rho = float(tcdp_bounds.rho_a(eps, delta))
    snr = cm * m * math.sqrt(2 * rho) / 2
    rng = np.random.default_rng(7)
    D = 3.0
    u = np.array([1.0, 0.0])                                   # direction toward θ*
    est = u[None, :] + rng.standard_normal((200_000, d)) / snr  # released direction, per-coord std 1/s
    lam = D / (1 + d / snr**2)
    dist2 = np.sum((D * u[None, :] - lam * est) ** 2, axis=1) / D**2
    se = dist2.std() / math.sqrt(dist2.size)
    assert abs(dist2.mean() - b) < 4 * se
    # more budget, more possible improvement; none without budget
    assert cq.improvement_bound(0.05, delta, m, d, cm) > b > cq.improvement_bound(1.6, delta, m, d, cm)


def test_clipped_mean_norm_against_per_example_gradients():
    prob = cq.make_problem(cq.PRESETS["tiny"])
    theta = np.array([3.0, -2.0])
    g = prob.per_example_grads(theta[None, :], np.arange(prob.n)[None, :])[0]
    n = np.linalg.norm(g, axis=1, keepdims=True)
    naive = np.linalg.norm(np.mean(g / np.maximum(1.0, n / 0.5), axis=0)) / 0.5
    assert cq.clipped_mean_norm(prob, theta, 0.5) == pytest.approx(naive, rel=1e-12)


def test_figure_verdicts_use_the_categories(tiny):
    paths = {lab: tiny.root / f"{lab}.npz" for lab in tiny.manifest["results"]}
    data = ctcdp_common.load(paths)
    prem = ctcdp_common.premise(data)
    assert set(prem) == set(data)
    for eps, p in prem.items():
        m, lo, hi = p["ratio"]
        assert lo <= m <= hi and p["holds"] == (hi < 1) and p["best"] in data[eps]
    traj = fig_ctcdp_trajectories.evaluate(paths)
    assert traj["category"] == verdicts.OUT_OF_SCOPE and "L2P" in traj["verdict"]
    for mod in (fig_ctcdp_eps_sweep, fig_ctcdp_subsampling):
        out = mod.evaluate(paths)
        assert out["category"] in verdicts.CATEGORIES
        assert out["holds"] == verdicts.holds_of(out["category"])
        if not any(p["holds"] for p in prem.values()):
            assert out["category"] == verdicts.UNTESTED


def test_median_ci_and_bootstrap_ratio():
    x = np.arange(30.0)[::-1]
    assert ctcdp_common.median_ci(x) == (14.5, 9.0, 20.0)   # [x_(10), x_(21)], coverage 0.957
    rng = np.random.default_rng(1)
    a, b = rng.lognormal(np.log(3.0), 0.2, 80), rng.lognormal(0.0, 0.2, 80)
    r, lo, hi = ctcdp_common.boot_ratio(a, b)
    assert r == pytest.approx(np.median(a) / np.median(b)) and 2.4 < lo < r < hi < 3.8
    assert ctcdp_common.boot_ratio(a, b) == (r, lo, hi)      # seeded


def test_edges_by_side_follow_the_direction_of_the_claim():
    """A holds falls to inconclusive only for the claimed loser's edge, a does-not-hold only for
    the claimed winner's; cells whose side is not given (positional) downgrade either."""
    sel = {"eps0.8-uniform": {"point": {"steps": 20, "lr": 1.2}, "at_edge": ["lr"],
                              "grid": {"steps": [10, 20, 30], "lr": [0.06, 1.2]}},
           "eps0.8-sgd_adv": {"point": {"steps": 20, "lr": 0.5}, "at_edge": [],
                              "grid": {"steps": [10, 20, 30], "lr": [0.06, 0.5, 1.2]}}}
    notes = {"selection": sel}
    win, lose = ["eps0.8-sgd_adv"], ["eps0.8-uniform"]
    assert ctcdp_common.with_edges(verdicts.HOLDS, notes, winners=win, losers=lose)[0] == \
        verdicts.INCONCLUSIVE
    assert ctcdp_common.with_edges(verdicts.FAILS, notes, winners=win, losers=lose)[0] == \
        verdicts.FAILS
    cat, note = ctcdp_common.with_edges(verdicts.HOLDS, notes, winners=lose, losers=win)
    assert cat == verdicts.HOLDS and "eps0.8-uniform: lr=1.2" in note
    assert ctcdp_common.with_edges(verdicts.FAILS, notes, winners=lose, losers=win)[0] == \
        verdicts.INCONCLUSIVE
    assert ctcdp_common.with_edges(verdicts.HOLDS, notes, lose)[0] == verdicts.INCONCLUSIVE
