"""Experiment ``adambc`` ([ADAMBC]) end to end at the tiny scale, plus its pieces."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from experiment_fixtures import check_figures_and_report, tiny_run

from dpsim.transforms import lookup
import dpsim
from dpsim.analysis.concentration import dp_bias, sgdm_equivalent_lr
from dpsim.experiments import adambc, pipeline, tuning

NAME = "adambc"

tiny = tiny_run(NAME)


def test_figures_and_report_section(tiny):
    check_figures_and_report(tiny)


def test_manifest_records_settings_and_every_cell(tiny):
    root, m = tiny.root, tiny.manifest
    cfg = adambc.PRESETS["tiny"]
    assert m["complete"] and m["config"] == pipeline.config_json(cfg)
    assert set(m["results"]) == {adambc.label(e, s) for e in cfg.epsilons for s in adambc.SLOTS}
    for e in cfg.epsilons:
        for slot in adambc.SLOTS:  # the metadata the figures read instead of parsing labels
            assert m["cells"][adambc.label(e, slot)]["meta"]["slot"] == slot
        st = m["notes"]["settings"][f"eps{e:g}"]
        # the saved selection is the rule applied to the saved tuning cell
        sel = tuning.select(dpsim.load(root / f"{adambc.label(e, 'tune-adambc')}.npz"),
                            {"lr": cfg.lr_grid_bc, "gamma_ratio": cfg.gamma_ratios}, cfg.tune_trials)
        assert m["notes"]["selection"][f"eps{e:g}-adambc"]["point"] == sel.point
        assert (st["adambc_lr"], st["adambc_gamma_ratio"]) == (sel.point["lr"], sel.point["gamma_ratio"])
        assert st["adam_lr"] in cfg.lr_grid_adam and st["adambc_lr"] in cfg.lr_grid_bc
        assert st["adambc_gamma_ratio"] in cfg.gamma_ratios
        phi = dp_bias(st["noise_multiplier"], cfg.clip, cfg.batch_size)
        assert st["phi"] == pytest.approx(phi)
        assert st["sgdm_lr_eq3"] == pytest.approx(sgdm_equivalent_lr(st["adam_lr"], cfg.beta1, np.inf, phi))
        # σ is calibrated to the target ε
        res = dpsim.load(root / f"{adambc.label(e, 'adam')}.npz")
        assert res.epsilon(cfg.delta) == pytest.approx(e, rel=1e-3)
        sg = dpsim.load(root / f"{adambc.label(e, 'sgdm-eq3')}.npz")
        assert sg.config["hyperparameters"]["lr"] == pytest.approx(st["sgdm_lr_eq3"])
        fc = dpsim.load(root / f"{adambc.label(e, 'frozen-clean')}.npz")
        fp = dpsim.load(root / f"{adambc.label(e, 'frozen-private')}.npz")
        assert fc.config["hyperparameters"]["noise_multiplier"] == 0.0
        assert fp.config["hyperparameters"]["lr"] == 0.0
        assert {f"m{j}" for j in range(cfg.d)} <= set(fp.records)


def test_second_run_reuses_every_cell(tiny, monkeypatch):
    calls = []
    real = dpsim.simulate
    monkeypatch.setattr(dpsim, "simulate", lambda *a, **k: calls.append(1) or real(*a, **k))
    cache, _ = pipeline.run_experiment(adambc.EXPERIMENT, "tiny", results_dir=tiny.tmp / "results")
    assert calls == [] and len(cache.reused) == len(adambc.SLOTS) * len(adambc.PRESETS["tiny"].epsilons)


def test_clean_counterpart_matches_noiseless_v_oracle_and_pairing():
    """The frozen clean run (dp_adam, σ = 0) has the v of dp_adam_noiseless_v on the same seed,
    and dp_sgdm with the seed of dp_adam sees the same noisy gradients (b_t = m_t/(1−β1))."""
    prob = dpsim.problems.logistic_regression(n=200, d=4, seed=1)
    kw = dict(steps=15, batch_size=10, trials=3, seed=7, record_every=5, metrics=())
    clean = dpsim.simulate(prob, dpsim.optimizers.get("dp_adam", lr=0.0, noise_multiplier=0.0),
                           probes=adambc.moment_probes(4), **kw)
    oracle = dpsim.simulate(prob, dpsim.optimizers.get("dp_adam_noiseless_v", lr=0.0,
                                                       noise_multiplier=1.3),
                            probes=adambc.moment_probes(4), **kw)
    for j in range(4):
        np.testing.assert_allclose(clean.records[f"v{j}"], oracle.records[f"v{j}"], rtol=1e-12)
    priv = dpsim.simulate(prob, dpsim.optimizers.get("dp_adam", lr=0.0, noise_multiplier=1.3),
                          probes=adambc.moment_probes(4), **kw)
    # oracle's m is fed the same noisy gradient as DP-Adam's
    np.testing.assert_allclose(priv.records["m0"], oracle.records["m0"], rtol=1e-12)
    sgdm = dpsim.simulate(prob, dpsim.optimizers.get("dp_sgdm", lr=0.0, beta=0.9,
                                                     noise_multiplier=1.3),
                          probes={"b0": lambda s, w, c: s["momentum"].trace[:, 0]}, **kw)
    np.testing.assert_allclose(sgdm.records["b0"][1:], priv.records["m0"][1:] / (1 - 0.9), rtol=1e-9)


def test_config_validation():
    cfg = adambc.PRESETS["tiny"]
    with pytest.raises(ValueError, match="gamma_ratios"):
        dataclasses.replace(cfg, gamma_ratios=())
    with pytest.raises(ValueError, match="freeze_steps"):
        dataclasses.replace(cfg, freeze_steps=21)
    with pytest.raises(ValueError, match="unknown slot"):
        adambc.label(1.0, "nope")
    for scale in ("tiny", "quick", "full"):
        assert adambc.EXPERIMENT.config(scale) is adambc.PRESETS[scale]


def test_evaluation_seeds_are_disjoint_from_tuning_seeds(tiny):
    """Tuning as the paper tunes: the settings are chosen on tuning cells and reported on cells
    whose random streams (SeedSequence(seed, spawn_key)) were never used for tuning."""
    saved = tiny.saved()
    seeds = {lab: saved.result(lab).config["seed"] for lab in saved}
    key = {lab: (s["entropy"], tuple(s["spawn_key"])) for lab, s in seeds.items()}
    tuning_keys = {key[lab] for lab in saved if saved.meta(lab)["slot"].startswith("tune-")}
    evaluated = [lab for lab in saved if not saved.meta(lab)["slot"].startswith("tune-")]
    assert tuning_keys and evaluated
    assert all(key[lab] not in tuning_keys for lab in evaluated)
    assert all(sel["reps"] >= 2 for sel in tiny.manifest["notes"]["selection"].values())
    for scale in ("quick", "full"):  # at least 3 tuning trials per grid point where claims count
        assert adambc.PRESETS[scale].tune_trials >= 3
