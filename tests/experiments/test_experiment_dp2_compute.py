"""Experiment ``dp2_compute`` ([DP2] Fig. 9 right: 4× the computation at the same ε) end to end at
the tiny scale: the cells and the saved tuning, σ calibrated so that 1× and 4× spend the same ε,
the 4× cells really sampling 4b, the figure and its verdict, and the verdict rule on constructed
numbers.

Cost: one tiny run shared by the module's tests, ≈ 10 CPU-s on a loaded 2-core machine: 3–6 s to
calibrate the four σ (PLD accountant, ≈ 1 s each), ≈ 2 s of simulation, ≈ 2 s for the figure."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.figure_checks import capture_figures, figure_problems

import dpsim
from dpsim.experiments import dp2_compute as X
from dpsim.experiments import dp2_logistic, pipeline, tuning, verdicts
from dpsim.paper_figures import fig_dp2_compute as F

CFG = X.PRESETS["tiny"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dp2_compute")
    cache, paths = pipeline.run_experiment(X.EXPERIMENT, "tiny", results_dir=tmp / "results",
                                           progress=False)
    with capture_figures() as figs:
        entries = pipeline.render_figures(X.EXPERIMENT, paths, tmp / "out")
    return cache, paths, entries, figs, tmp


def test_cells_and_tuning_are_saved(tiny):
    cache, paths, _, _, _ = tiny
    m = cache.manifest
    labels = X.cell_labels(CFG)  # cell i seeded by spawn_key (i,)
    assert sorted(m["cells"]) == sorted(labels)
    assert all(m["cells"][lab]["index"] == i for i, lab in enumerate(labels))
    assert set(paths) == {f"{X.tag(k, e)}-{meth}" for k in CFG.factors for e in CFG.epsilons
                          for meth in X.METHODS} | {f"np-{m}" for m in X.NONPRIVATE}
    notes = m["notes"]
    assert notes["delta"] == dp2_logistic.delta_for(CFG.n)
    sel = notes["selection"]
    assert set(sel) == {lab[len("tune-"):] for lab in X.cell_labels(CFG) if lab.startswith("tune-")}
    for s in sel.values():  # every grid point scored on tune_trials trials
        assert s["reps"] == CFG.tune_trials and len(s["scores"]) == len(tuning.points(s["grid"]))
    saved = pipeline.Saved(paths)
    assert set(notes["premise"]) >= {"majority", "wstar_test_accuracy", "prior_excess"}
    for label in paths:
        res, meta = saved.result(label), saved.meta(label)
        assert res.test_accuracy is not None, label  # the paper's metric
        if not meta.get("private", True):
            continue
        hp = res.config["hyperparameters"]
        for k, v in notes["chosen"][label].items():
            if k != "optimizer":
                assert hp[k] == pytest.approx(v), (label, k)
        assert res.config["optimizer"] == meta["method"] == notes["chosen"][label]["optimizer"]
        assert res.trials == CFG.trials and res.config["steps"] == CFG.steps
        assert res.config["problem"]["generator"] == "dp2_data.bag_of_words"  # dp2_logistic tiny's
        t = X.tag(meta["factor"], meta["epsilon"])
        assert hp["noise_multiplier"] == notes["sigma"][t] == meta["sigma"]
        assert hp["clip"] == CFG.clip
        if meta["method"] == "dp2_rmsprop":  # SGD-phase η = DP-SGD's tuned η at the same (k, ε)
            assert hp["lr"] == notes["chosen"][f"{t}-dp_sgd"]["lr"] and hp["clip2"] == CFG.clip2
            assert hp["s1"] == notes["chosen_s"][t]


def test_4x_cells_sample_4b_at_the_same_steps(tiny):
    """Every cell at factor k (tuning and evaluation) runs batch k·b (Poisson rate k·b/n) for T
    steps; the saved result files say so, not only the metadata."""
    cache, paths, _, _, _ = tiny
    root = paths[next(iter(paths))].parent
    for label, cell in cache.manifest["cells"].items():
        res = dpsim.load(root / cell["file"])
        if "np-" in label:  # the non-private premise runs: batch b
            assert res.config["batch_size"] == CFG.batch_size
            continue
        k = int(label.split("-")[1 if label.startswith("tune-") else 0][1:])
        assert k in CFG.factors
        assert res.config["batch_size"] == k * CFG.batch_size, label
        assert res.config["steps"] == CFG.steps and res.config["sampling"] == CFG.sampling
        assert res.privacy["sample_rate"] == pytest.approx(k * CFG.batch_size / CFG.n), label


def test_sigma_at_4x_spends_the_same_epsilon(tiny):
    """σ(ε, k) from the accountant meets each target ε at rate k·b/n (ε spent within 0.2% of the
    target — the search stops within 1e-4 relative in σ — and never above it), the runs' own ε
    (from their declared releases) equals it, and 4× needs a larger σ but adds less noise per
    mean gradient."""
    cache, paths, _, _, _ = tiny
    saved = pipeline.Saved(paths)
    delta = dp2_logistic.delta_for(CFG.n)
    sig = X.sigmas(CFG)
    assert cache.manifest["notes"]["sigma"] == sig
    for e in CFG.epsilons:
        for k in CFG.factors:
            s = sig[X.tag(k, e)]
            spent = dpsim.accounting.epsilon(s, k * CFG.batch_size / CFG.n, CFG.steps, delta)
            assert spent <= e and spent == pytest.approx(e, rel=2e-3), (k, e, spent)
            for m in X.METHODS:
                res = saved.result(f"{X.tag(k, e)}-{m}")
                assert float(np.max(res.epsilon(delta))) == pytest.approx(spent, rel=1e-9)
        s1, s4 = sig[X.tag(1, e)], sig[X.tag(4, e)]
        assert s4 > s1 and s4 / 4 < s1


def test_figure_and_verdict(tiny):
    cache, paths, entries, figs, tmp = tiny
    assert [e["figure"] for e in entries] == ["fig_dp2_compute"]
    e = entries[0]
    assert (tmp / "out" / "fig_dp2_compute.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert e["category"] in verdicts.CATEGORIES and e["claim"] == F.CLAIM
    for part in ("(A) every method improves", "(B) DP²'s gain", "Grid edges", "| 4× |",
                 "| P3 |", "| P4 (ε = "):
        assert part in e["measured"], part
    assert F.evaluate(pipeline.Saved(paths))["measured"] == e["measured"]
    (name, fig), = figs
    assert figure_problems(fig) == [], figure_problems(fig)
    legend = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert len(legend) == len(X.METHODS) * len(CFG.factors)
    assert all("η=" in t for t in legend)
    prior = cache.manifest["notes"]["premise"]["prior_excess"]  # the class-prior line
    assert any(prior in set(np.ravel(line.get_ydata())) for ax in fig.axes for line in ax.get_lines())
    assert any("accuracy" in ax.get_ylabel() for ax in fig.axes)


def _with_values(monkeypatch, saved, values):
    """Replace the verdict's metric (:func:`F.values`, lower is better) by ``values[(method, k,
    ε)]`` (arrays), and let every premise hold."""
    runs = F.load(saved)[1]
    ident = {id(r): key for key, r in runs.items()}
    monkeypatch.setattr(F, "values", lambda res: values[ident[id(res)]])
    monkeypatch.setattr(F, "premise_ok", lambda checks: True)
    monkeypatch.setattr(F, "dp_sgd_below_prior", lambda res, prior: {
        "name": "P4", "requirement": "", "measured": "", "ok": True})


def _no_edges(saved):
    manifest = {**saved.manifest, "notes": {**saved.notes, "edges": {}}}
    return pipeline.Saved({lab: saved[lab] for lab in saved}, manifest)


def test_verdict_rule_on_constructed_numbers(tiny, monkeypatch):
    """Every method better at 4× and DP²'s gain the same → holds; DP²'s gain ten times larger
    at 4× → does not hold; one method worse at 4× → does not hold; DP² no better than the
    baselines at 1× → the setting does not test (B); a tuned value on a grid edge of a 4× run
    → inconclusive; an edge of a 1× run does not undo a failure of (A) alone (4×, the claimed
    winner of (A), could only get better)."""
    _, paths, _, _, _ = tiny
    saved = _no_edges(pipeline.Saved(paths))
    rng = np.random.default_rng(0)
    n = CFG.trials

    def values(gain1, gain4, worse=None):
        out = {}
        for e in CFG.epsilons:
            for k, base in ((1, 1.0), (4, 0.7)):
                g = gain1 if k == 1 else gain4
                for m in X.METHODS:
                    level = base - (g if m == "dp2_rmsprop" else 0.0) + (0.5 if (m, k) == worse else 0)
                    out[(m, k, e)] = level + 1e-3 * rng.standard_normal(n)
        return out

    _with_values(monkeypatch, saved, values(0.1, 0.1))
    assert F.evaluate(saved)["category"] == verdicts.HOLDS
    _with_values(monkeypatch, saved, values(0.05, 0.5))
    assert F.evaluate(saved)["category"] == verdicts.FAILS
    _with_values(monkeypatch, saved, values(0.1, 0.1, worse=("dp_sgd", 4)))
    assert F.evaluate(saved)["category"] == verdicts.FAILS
    _with_values(monkeypatch, saved, values(0.0, 0.1))
    out = F.evaluate(saved)
    assert out["category"] == verdicts.UNTESTED and "premise fails" in out["measured"]

    def edged(edges, vals):
        ed = pipeline.Saved({lab: saved[lab] for lab in saved},
                            {**saved.manifest, "notes": {**saved.notes, "edges": edges}})
        _with_values(monkeypatch, ed, vals)
        return F.evaluate(ed)

    out = edged({"x4-e1-dp_sgd": {"lr": 10.0}}, values(0.1, 0.1))
    assert out["category"] == verdicts.INCONCLUSIVE and "x4-e1-dp_sgd.lr=10" in out["verdict"]
    # (A) fails (DP-SGD worse at 4×) and (B) holds: an edge of a 1× run cannot flip it
    worse = values(0.1, 0.1, worse=("dp_sgd", 4))
    assert edged({"x1-e1-dp_sgd": {"lr": 10.0}}, worse)["category"] == verdicts.FAILS
    assert edged({"x4-e1-dp_sgd": {"lr": 10.0}}, worse)["category"] == verdicts.INCONCLUSIVE


def test_premises_gate_the_verdict(tiny):
    """At the tiny scale the run's own premises decide: a premise not met gives "setting does not
    test the claim"; the premise table is printed either way."""
    _, paths, _, _, _ = tiny
    saved = pipeline.Saved(paths)
    out = F.evaluate(saved)
    assert "| P1 |" in out["measured"] and "| P2 |" in out["measured"]
    failing = pipeline.Saved({lab: saved[lab] for lab in saved}, {
        **saved.manifest, "notes": {**saved.notes, "premise": {**saved.notes["premise"],
                                                               "majority": 0.9}}})
    assert F.evaluate(failing)["category"] == verdicts.UNTESTED


def test_presets_are_consistent():
    for scale, cfg in X.PRESETS.items():
        labels = X.cell_labels(cfg)
        assert len(labels) == len(set(labels))
        d2 = dp2_logistic.PRESETS[scale]  # the very problem of dp2_logistic at this scale
        for f in dp2_logistic.PROBLEM_FIELDS:
            assert getattr(cfg, f) == getattr(d2, f), (scale, f)
        assert cfg.factors == (1, 4)
        if scale != "tiny":
            assert cfg.tune_trials >= 3 and len(cfg.epsilons) >= 3
            assert cfg.steps == d2.steps and cfg.batch_size == d2.batch_size
    with pytest.raises(ValueError, match="factors"):
        X.Config(**{**CFG.__dict__, "factors": (4,)})
    with pytest.raises(ValueError, match="exceeds n"):
        X.Config(**{**CFG.__dict__, "factors": (1, 100)})
    with pytest.raises(ValueError, match="epsilons"):
        X.Config(**{**CFG.__dict__, "epsilons": (1.0, math.inf)})
    with pytest.raises(ValueError, match="reg=-1"):
        X.Config(**{**CFG.__dict__, "reg": -1.0})
