"""Experiment ``dp2_noisy_adagrad`` ([DP2] App. C.6, Fig. 12) end to end at the tiny scale: the
cells, the saved tuning, the privacy of every evaluation run, and the figure with its verdict."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.figure_checks import capture_figures, figure_problems

import dpsim
from dpsim.experiments import dp2_noisy_adagrad as X
from dpsim.experiments import dp2_logistic, pipeline, tuning, verdicts
from dpsim.paper_figures import fig_dp2_noisy_adagrad as F

CFG = X.PRESETS["tiny"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dp2_noisy_adagrad")
    cache, paths = pipeline.run_experiment(X.EXPERIMENT, "tiny", results_dir=tmp / "results",
                                           progress=False)
    with capture_figures() as figs:
        entries = pipeline.render_figures(X.EXPERIMENT, paths, tmp / "out")
    return cache, paths, entries, figs, tmp


def test_cells_and_tuning_are_saved(tiny):
    cache, paths, _, _, _ = tiny
    m = cache.manifest
    assert sorted(m["cells"], key=lambda k: m["cells"][k]["index"]) == X.cell_labels(CFG)
    assert set(paths) == set(X.EVAL) | set(X.NONPRIVATE)
    notes = m["notes"]
    assert notes["delta"] == 10.0 ** -3  # n = 400: the dp2_logistic rule 10^-k ≤ 1/n
    sel = notes["selection"]
    assert set(sel) == {"dp_sgd"} | {f"dp2_rmsprop-s{s}" for s in CFG.s_grid} | {
        f"noisy_adagrad-k{k}" for k in CFG.k_grid} | set(X.NONPRIVATE)
    assert set(notes["premise"]) >= {"majority", "wstar_test_accuracy", "prior_excess"}
    for key, s in sel.items():  # every grid point scored on tune_trials trials
        assert s["reps"] == CFG.tune_trials and len(s["scores"]) == len(tuning.points(s["grid"]))
    saved = pipeline.Saved(paths)
    for label in X.EVAL:
        res = saved.result(label)
        hp = res.config["hyperparameters"]
        for k, v in notes["chosen"][label].items():
            if k != "optimizer":
                assert hp[k] == pytest.approx(v), (label, k)
        assert res.trials == CFG.trials and res.config["steps"] == CFG.steps
        assert res.config["problem"]["generator"] == "dp2_data.bag_of_words"
        assert res.test_accuracy is not None  # the paper's metric
        assert saved.meta(label)["method"] == notes["chosen"][label]["optimizer"]
    # the small-ε variant is the best point of the same cells with ε_a at the grid's smallest
    assert notes["chosen"]["noisy_adagrad-small_eps"]["eps"] == min(CFG.na_eps_grid)
    assert notes["chosen"]["dp2_rmsprop"]["clip"] == notes["chosen"]["dp_sgd"]["clip"]


def test_every_method_spends_one_release_at_sigma_per_step(tiny):
    """DP-SGD and DP² at σ; noisy AdaGrad's two releases merge into one at σ, on the private
    part (rate b/(n − m)): its ε is the accountant's for that rate, finite and close to DP-SGD's."""
    _, paths, _, _, _ = tiny
    saved = pipeline.Saved(paths)
    delta = X.delta_for(CFG.n)
    m = round(CFG.public_fraction * CFG.n)
    eps = {lab: float(np.max(saved.result(lab).epsilon(delta))) for lab in X.EVAL}
    sgd = dpsim.accounting.epsilon(CFG.sigma, CFG.batch_size / CFG.n, CFG.steps, delta)
    na = dpsim.accounting.epsilon(CFG.sigma, CFG.batch_size / (CFG.n - m), CFG.steps, delta)
    assert eps["dp_sgd"] == pytest.approx(sgd, rel=1e-6) and eps["dp2_rmsprop"] == pytest.approx(sgd, rel=1e-6)
    assert eps["noisy_adagrad"] == pytest.approx(na, rel=1e-6)
    assert eps["noisy_adagrad-small_eps"] == pytest.approx(na, rel=1e-6)
    assert math.isfinite(na) and na < 1.2 * sgd
    assert len(saved.result("noisy_adagrad").privacy["events"]) == 2


def test_figure_and_verdict(tiny):
    _, paths, entries, figs, tmp = tiny
    assert [e["figure"] for e in entries] == ["fig_dp2_noisy_adagrad"]
    e = entries[0]
    assert (tmp / "out" / "fig_dp2_noisy_adagrad.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert e["category"] in verdicts.CATEGORIES and e["claim"] == F.CLAIM
    assert "Grid edges" in e["measured"] and "Premise" in e["measured"] and "| P4 |" in e["measured"]
    assert F.evaluate(pipeline.Saved(paths))["measured"] == e["measured"]
    (name, fig), = figs
    assert figure_problems(fig) == [], figure_problems(fig)


def test_verdict_rule_on_constructed_numbers(tiny, monkeypatch):
    """The rule on the saved runs with their accuracy gains over random guessing replaced (every
    premise made to hold): noisy AdaGrad barely above guessing and DP² far above → holds; noisy
    AdaGrad as good as DP² → does not hold (and stays so on a grid edge, since it gains far more
    than the margin of a perfect classifier's gain); a premise not met → not tested."""
    _, paths, _, _, _ = tiny
    saved = pipeline.Saved(paths)
    rng = np.random.default_rng(0)
    n = CFG.trials
    monkeypatch.setattr(F, "premise_ok", lambda checks: True)

    def with_gains(gains):
        def fake_gained(res):
            lab = next(k for k in X.EVAL if saved.result(k) is res)
            return gains.get(lab, np.full(n, 0.1))

        def fake_compare(a, b):
            ga, gb = fake_gained(a), fake_gained(b)
            return (True if ga.mean() > gb.mean() + 0.02 else (False if gb.mean() > ga.mean() + 0.02
                                                                 else None)), "constructed"

        monkeypatch.setattr(F, "gained", fake_gained)
        monkeypatch.setattr(F, "compare", fake_compare)

    with_gains({"dp2_rmsprop": 0.3 + 0.01 * rng.random(n),
                "noisy_adagrad": 0.01 + 0.01 * rng.random(n)})
    out = F.evaluate(saved)
    assert out["category"] in (verdicts.HOLDS, verdicts.INCONCLUSIVE)  # inconclusive only by an edge
    if not saved.notes["edges"].get("noisy_adagrad"):  # only the loser's edge can flip a holds
        assert out["category"] == verdicts.HOLDS
    with_gains({"dp2_rmsprop": 0.3 + 0.01 * rng.random(n),
                "noisy_adagrad": 0.3 + 0.01 * rng.random(n)})
    assert F.evaluate(saved)["category"] == verdicts.FAILS
    monkeypatch.setattr(F, "premise_ok", lambda checks: False)
    assert F.evaluate(saved)["category"] == verdicts.UNTESTED


def test_presets_are_consistent():
    for scale, cfg in X.PRESETS.items():
        labels = X.cell_labels(cfg)
        assert len(labels) == len(set(labels))
        if scale != "tiny":
            assert cfg.tune_trials >= 3 and round(cfg.public_fraction * cfg.n) >= 3 * max(cfg.k_grid)
    for scale in ("quick", "full"):  # the very problem of dp2_logistic at this scale
        cfg, d2 = X.PRESETS[scale], dp2_logistic.PRESETS[scale]
        for f in dp2_logistic.PROBLEM_FIELDS:
            assert getattr(cfg, f) == getattr(d2, f), (scale, f)
    prob = X.make_problem(X.PRESETS["tiny"])
    assert prob.has_heldout and prob.config["generator"] == "dp2_data.bag_of_words"
    with pytest.raises(ValueError, match="reg=nan"):
        X.Config(**{**X.PRESETS["tiny"].__dict__, "reg": math.nan})
    with pytest.raises(ValueError, match="k_grid"):
        X.Config(**{**X.PRESETS["tiny"].__dict__, "k_grid": (0,)})
