"""design_space ([DESIGN], reconstructed settings): tiny-scale end to end run, figures, report, and
the figures reading the tuning selection saved with the results."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from support.experiment_fixtures import check_figures_and_report, tiny_run

import dpsim
from dpsim.analysis import stats
from dpsim.experiments import design_space, pipeline, tuning
from dpsim.paper_figures import fig_design_adagrad_table

NAME = "design_space"
AXIS_ORDER = ("lr", "eps", "gamma_prime", "eps_scale", "clip")  # run()'s grid order

tiny = tiny_run(NAME)


def test_figures_and_report_section(tiny):
    check_figures_and_report(tiny)
    assert (tiny.tmp / "out" / "fig_design_adagrad_table.md").exists()


def test_every_tuned_cell_has_its_saved_selection(tiny):
    m, cfg = tiny.manifest, design_space.PRESETS["tiny"]
    tuned = [lab for lab in m["results"] if lab.startswith("tune-")]
    assert m["complete"] and set(m["notes"]["selection"]) == set(tuned)
    parts = {m["cells"][lab]["meta"]["part"] for lab in m["results"]}
    assert parts == {"ada", "neg", "var", "quad", "tune-ada", "tune-var", "tune-quad"}
    for lab in tuned:
        saved = m["notes"]["selection"][lab]
        assert saved["reps"] >= 3  # at least 3 tuning trials per grid point
        res = dpsim.load(tiny.root / f"{lab}.npz")
        # the manifest is written with sorted keys, so the saved grid's axes come back in
        # alphabetical order: rebuild run()'s fold order (lr, then the stability constants, then
        # STP's clip) before re-applying the rule
        grid = {k: saved["grid"][k] for k in AXIS_ORDER if k in saved["grid"]}
        assert set(grid) == set(saved["grid"])
        sel = tuning.select(res, grid, saved["reps"])
        assert (sel.point, list(sel.trials)) == (saved["point"], saved["trials"])
        lr = np.asarray(res.config["hyperparameters"]["lr"])
        assert np.all(lr[slice(*saved["trials"])] == saved["point"]["lr"])
    assert m["notes"]["selection"]["tune-ada-z0.5-stp"]["grid"] == {
        "lr": list(cfg.ada_lr_grid), "eps_scale": list(cfg.ada_eps_scale_grid)}


def test_every_stability_constant_is_tuned(tiny):
    """Each method's grid holds its learning rate and every stability constant it has, and private
    scale-then-privatize re-tunes its clip norm ([DESIGN] §5.2), in parts (c) and (d)."""
    sel = tiny.manifest["notes"]["selection"]
    cfg = design_space.PRESETS["tiny"]
    expect = {"dp_sgd": {"lr"}, "dp_adam": {"lr", "eps"}, "dp_adam_corrected": {"lr", "eps"},
              "dp_adam_bc": {"lr", "gamma_prime"}, "dp_adam_ime": {"lr", "eps"},
              "dp_adam_stp": {"lr", "eps_scale", "clip"}, "dp_adam_noiseless_v": {"lr", "eps"},
              "dp_adam_stp_noiseless_v": {"lr", "eps_scale"}}
    for noise in ("gaussian", "bandmf"):
        for m, axes in expect.items():
            assert set(sel[f"tune-var-{noise}-{m}"]["grid"]) == axes, (noise, m)
        g = sel[f"tune-var-{noise}-dp_adam_stp"]["grid"]
        assert (g["clip"], g["eps_scale"]) == (list(cfg.var_stp_clip_grid),
                                               list(cfg.var_stp_eps_scale_grid))
    assert sel["tune-var-none-adam"]["grid"]["eps"] == list(cfg.var_premise_eps_grid)
    for m, axes in {"adagrad": {"lr", "eps"}, "dp_adagrad": {"lr", "eps"}, "ime": {"lr", "eps"},
                    "stp_noiseless_v": {"lr", "eps_scale"}}.items():
        assert set(sel[f"tune-ada-z0.5-{m}"]["grid"]) == axes, m
    for m, axes in {"adam": {"lr", "eps"}, "dp_adam": {"lr", "eps"},
                    "dp_adam_noiseless_v": {"lr", "eps"}, "dp_adam_stp": {"lr", "eps_scale", "clip"},
                    "dp_adam_stp_noiseless_v": {"lr", "eps_scale"}}.items():
        assert set(sel[f"tune-quad-{m}"]["grid"]) == axes, m
    assert sel["tune-quad-adam"]["grid"]["eps"] == list(cfg.quad_eps_grid)


def test_stp_runs_its_tuned_clip_and_others_the_fixed_one(tiny):
    """The clip the tuning chose for private STP is the one its evaluation run clipped at (and its
    noise scales with it: same σ, same ε); every other private variant keeps ``var_clip``."""
    saved, cfg = tiny.saved(), design_space.PRESETS["tiny"]
    for noise in ("gaussian", "bandmf"):
        point = saved.meta(f"var-{noise}-dp_adam_stp")["point"]
        hp = saved.result(f"var-{noise}-dp_adam_stp").config["hyperparameters"]
        assert hp["clip"] == point["clip"] and point["clip"] in cfg.var_stp_clip_grid
        tune_hp = saved.result(f"tune-var-{noise}-dp_adam_stp").config["hyperparameters"]
        assert sorted(set(tune_hp["clip"])) == sorted(cfg.var_stp_clip_grid)
        for m in ("dp_adam", "dp_adam_bc", "dp_adam_stp_noiseless_v"):
            assert saved.result(f"var-{noise}-{m}").config["hyperparameters"]["clip"] == cfg.var_clip
    assert saved.result("quad-dp_adam").config["hyperparameters"]["clip"] == cfg.quad_clip
    assert saved.result("quad-dp_adam_stp").config["hyperparameters"]["clip"] in cfg.quad_stp_clip_grid


def test_evaluation_cells_run_the_chosen_point_on_fresh_seeds(tiny):
    m = tiny.manifest
    evals = [lab for lab in m["results"] if m["cells"][lab]["meta"].get("tuned_by")]
    assert evals and all(not lab.startswith("tune-") for lab in evals)
    tune_keys = {tuple(dpsim.load(tiny.root / f"{lab}.npz").config["seed"]["spawn_key"])
                 for lab in m["results"] if lab.startswith("tune-")}
    for lab in evals:
        meta = m["cells"][lab]["meta"]
        sel = m["notes"]["selection"][meta["tuned_by"]]
        res = dpsim.load(tiny.root / f"{lab}.npz")
        hp = res.config["hyperparameters"]
        assert {k: hp[k] for k in sel["point"]} == sel["point"] == meta["point"]
        assert tuple(res.config["seed"]["spawn_key"]) not in tune_keys
        assert meta["at_edge"] == {k: sel["point"][k] for k in sel["at_edge"]}


def test_1d_table_uses_single_epoch_dp_mf_and_ime(tiny):
    """One pass (each example once), DP-MF noise with as many bands as steps, IME present; every
    private method but "IME for free" spends the same ε (one Gaussian mechanism at σ)."""
    saved, cfg = tiny.saved(), design_space.PRESETS["tiny"]
    eps = {}
    for lab in saved:
        meta = saved.meta(lab)
        if meta["part"] != "ada":
            continue
        res = saved.result(lab)
        assert res.config["sampling"] == f"cyclic_poisson:{cfg.ada_n}"
        if meta["method"] != "adagrad":
            assert res.config["hyperparameters"]["noise"] == f"banded:{cfg.ada_n}"
            eps[meta["method"]] = float(np.max(res.epsilon(1e-5)))
    assert {"dp_adagrad", "ime", "ime_free", "stp"} <= set(eps)
    ref = dpsim.accounting.epsilon(cfg.ada_noise_multiplier, 1.0, 1, 1e-5)
    for m in ("dp_adagrad", "ime", "stp"):
        assert eps[m] == pytest.approx(ref, rel=1e-6), m
    assert eps["ime_free"] > ref


def test_noise_settings_are_matched_in_epsilon_and_prefix_rmse(tiny):
    """The settings run() saved (calibrating them again costs seconds): the ε-matched σ's give the
    target ε (Gaussian: Poisson rate b/n over T steps; amplified BandMF: rate b·k/n over ⌈T/k⌉
    steps), and the RMSE-matched σ gives BandMF's prefix-sum RMSE."""
    cfg = design_space.PRESETS["tiny"]
    s = tiny.manifest["notes"]["var_noise_settings"]
    n, b, T, k = cfg.var_n, cfg.var_batch_size, cfg.var_steps, cfg.var_bands
    eps_g = dpsim.accounting.epsilon(s["gaussian"]["sigma"], b / n, T, cfg.var_delta)
    eps_mf = dpsim.accounting.epsilon(s["bandmf"]["sigma"], b * k / n, -(-T // k), cfg.var_delta)
    assert eps_g == pytest.approx(cfg.var_target_epsilon, rel=1e-3)
    assert eps_mf == pytest.approx(cfg.var_target_epsilon, rel=1e-3)
    assert s["gaussian_rmse"]["prefix_rmse"] == pytest.approx(s["bandmf"]["prefix_rmse"], rel=1e-12)
    from dpsim.privacy import mf
    assert s["gaussian_rmse"]["sigma"] * mf.toeplitz_prefix_rmse([1.0], T) == pytest.approx(
        s["bandmf"]["prefix_rmse"], rel=1e-12)
    assert s["bandmf"]["sampling"] == f"cyclic_poisson:{k}" and s["bandmf"]["noise"] == f"banded:{k}"


def test_figures_give_verdict_categories(tiny):
    from dpsim.experiments import verdicts
    from dpsim.paper_figures import fig_design_quadratic2d, fig_design_variants

    saved = tiny.saved()
    for mod in (fig_design_adagrad_table, fig_design_variants, fig_design_quadratic2d):
        out = mod.evaluate(saved)
        assert out["category"] in verdicts.CATEGORIES, mod.NAME
        assert out["holds"] == verdicts.holds_of(out["category"])
    text = fig_design_variants.evaluate(saved)["measured"]
    assert "Premise" in text and "matched in prefix-sum RMSE" in text


def test_figure_follows_the_saved_selection(tiny, tmp_path):
    """The table reports the evaluation cell's trials and prints the saved tuned values: change
    the saved choice of one tuning cell and the printed η follows, the numbers do not."""
    root = tmp_path / "tiny"
    shutil.copytree(tiny.root, root)
    label = "ada-z0.5-dp_adagrad"
    before = fig_design_adagrad_table.evaluate(pipeline.Saved.from_dir(root))
    res = dpsim.load(root / f"{label}.npz")
    mean, half = stats.mean_ci(res.records["test_loss"][-1])
    assert f"{mean:.4f} ± {half:.4f}" in before["measured"]

    m = json.loads((root / "manifest.json").read_text())
    sel = m["notes"]["selection"][f"tune-{label}"]
    old_lr = sel["point"]["lr"]
    new_lr = next(v for v in sel["grid"]["lr"] if v != old_lr)
    sel["point"] = {**sel["point"], "lr": new_lr}
    (root / "manifest.json").write_text(json.dumps(m))
    rows = fig_design_adagrad_table._table(pipeline.Saved.from_dir(root))[1]
    assert rows[(0.5, "dp_adagrad")]["point"]["lr"] == new_lr
    np.testing.assert_array_equal(rows[(0.5, "dp_adagrad")]["test"], res.records["test_loss"][-1])


def test_fold_and_select_share_the_grid_order():
    grid = {"lr": (0.1, 1.0), "eps_scale": (1e-3, 1.0)}
    hp = tuning.fold(grid, 2)
    assert hp["lr"] == [0.1, 0.1, 0.1, 0.1, 1.0, 1.0, 1.0, 1.0]
    assert hp["eps_scale"] == [1e-3, 1e-3, 1.0, 1.0, 1e-3, 1e-3, 1.0, 1.0]

    class Fake:
        loss = np.array([[1.0] * 8, [0.5, 0.7, 0.4, 0.5, np.nan, 0.1, 0.4, 0.5]])

    sel = tuning.select(Fake, grid, 2)
    assert sel.point == {"lr": 0.1, "eps_scale": 1.0} and sel.trials == (2, 4)
    assert sel.at_edge == ["lr", "eps_scale"] and sel.scores[2] == np.inf
    # ties go to the first point in grid order
    assert tuning.select(np.zeros(8), grid, 2).index == 0
    assert sel.best(lr=1.0) == {"lr": 1.0, "eps_scale": 1.0}
    with pytest.raises(KeyError, match="'beta'"):
        sel.best(beta=0.9)


def test_pessimistic_instance_has_the_papers_clipped_mean():
    """b rows on disjoint blocks: every clipped per-example gradient has norm C and the clipped
    mean has ḡ_j² = C²/(bd) on every coordinate (the pessimistic instance of [DESIGN] §4.4.1)."""
    b, d, clip = 5, 40, 0.5
    prob = design_space.pessimistic_problem(d, b, clip)
    assert prob.n == b
    w = np.zeros((1, d))
    idx = np.arange(b)[None, :]
    mean = np.asarray(prob.clipped_grad_sum(w, idx, clip)[0])[0] / b
    np.testing.assert_allclose(mean ** 2, clip ** 2 / (b * d), rtol=1e-12)
    for i in range(b):  # each example alone: norm C, on its own block
        g = np.asarray(prob.clipped_grad_sum(w, np.array([[i]]), clip)[0])[0]
        assert np.linalg.norm(g) == pytest.approx(clip, rel=1e-12)
        assert np.count_nonzero(g) == d // b
    with pytest.raises(ValueError, match="multiple of b"):
        design_space.pessimistic_problem(42, b, clip)
    cfg = design_space.PRESETS["full"]
    assert design_space.pessimistic_dims(cfg) == [d for d in cfg.neg_dims
                                                    if d >= cfg.neg_batch_size]


def test_negative_fraction_simulates_both_instances_and_judges_the_formula(tiny):
    from dpsim.experiments import verdicts
    from dpsim.paper_figures import fig_design_negative_fraction as fig

    saved, cfg = tiny.saved(), design_space.PRESETS["tiny"]
    pess = [lab for lab in saved if lab.startswith("neg-pess-")]
    assert pess == [f"neg-pess-d{d}" for d in design_space.pessimistic_dims(cfg)] and pess
    for lab in pess:
        assert saved.meta(lab)["regime"] == "pessimistic"
        assert saved.result(lab).config["batch_size"] == cfg.neg_batch_size
    data = fig._data(saved)
    assert set(data) == {"optimistic", "pessimistic"}
    out = fig.evaluate(saved)
    assert out["category"] in (verdicts.HOLDS, verdicts.FAILS)
    assert "pessimistic" in out["measured"] and "ε = " in out["verdict"]


def test_variant_evaluation_cells_record_heldout_metrics(tiny):
    """Part (c) runs on a held-out split; its evaluation cells record the held-out loss and
    accuracy (the paper's metric is the test loss), its tuning cells only the training loss."""
    saved, cfg = tiny.saved(), design_space.PRESETS["tiny"]
    for lab in saved:
        meta = saved.meta(lab)
        if meta["part"] not in ("var", "tune-var"):
            continue
        res = saved.result(lab)
        assert res.config["problem"]["n"] == cfg.var_n
        assert res.config["problem"]["n_test"] == cfg.var_test_n
        if meta["part"] == "var":
            assert res.test_loss is not None and res.test_accuracy is not None, lab
            assert np.all((res.test_accuracy[-1] >= 0) & (res.test_accuracy[-1] <= 1))
        else:
            assert res.test_loss is None, lab
    from dpsim.paper_figures import fig_design_variants
    out = fig_design_variants.evaluate(saved)
    assert "held-out test loss" in out["verdict"] and "accuracy" in out["measured"]


def test_1d_table_is_not_a_test_while_its_constants_are_reconstructed(tiny):
    from dpsim.experiments import verdicts

    out = fig_design_adagrad_table.evaluate(tiny.saved())
    assert out["category"] == verdicts.UNTESTED
    assert "2C²/b" in out["verdict"] and "√2σ" in out["verdict"]
