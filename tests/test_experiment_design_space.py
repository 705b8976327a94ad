"""design_space ([DESIGN], reconstructed settings): tiny-scale end to end run, figures, report, and
the figures reading the tuning selection saved with the results."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from experiment_fixtures import check_figures_and_report, tiny_run

import dpsim
from dpsim.analysis import stats
from dpsim.experiments import design_space, pipeline, tuning
from dpsim.paper_figures import fig_design_adagrad_table

NAME = "design_space"

tiny = tiny_run(NAME)


def test_figures_and_report_section(tiny):
    check_figures_and_report(tiny)
    assert (tiny.tmp / "out" / "fig_design_adagrad_table.md").exists()


def test_every_tuned_cell_has_its_saved_selection(tiny):
    m, cfg = tiny.manifest, design_space.PRESETS["tiny"]
    tuned = [lab for lab in m["results"] if not lab.startswith("neg-")]
    assert m["complete"] and set(m["notes"]["selection"]) == set(tuned)
    assert {m["cells"][lab]["meta"]["part"] for lab in m["results"]} == {"ada", "neg", "var", "quad"}
    for lab in tuned:
        saved = m["notes"]["selection"][lab]
        res = dpsim.load(tiny.root / f"{lab}.npz")
        sel = tuning.select(res, saved["grid"], saved["reps"])
        assert (sel.point, list(sel.trials)) == (saved["point"], saved["trials"])
        lr = np.asarray(res.config["hyperparameters"]["lr"])
        assert np.all(lr[slice(*saved["trials"])] == saved["point"]["lr"])
    assert m["notes"]["selection"]["ada-z0.5-stp"]["grid"] == {"lr": list(cfg.ada_lr_grid),
                                                                "eps_scale": list(cfg.ada_eps_scale_grid)}


def test_figure_follows_the_saved_selection(tiny, tmp_path):
    """Change the saved choice of one cell: the figure reports the other grid point's trials."""
    root = tmp_path / "tiny"
    shutil.copytree(tiny.root, root)
    label = "ada-z0.5-dp_adagrad"
    before = fig_design_adagrad_table.evaluate(pipeline.Saved.from_dir(root))
    m = json.loads((root / "manifest.json").read_text())
    sel = m["notes"]["selection"][label]
    other = 1 - sel["index"]  # the tiny grid has two learning rates
    reps = sel["reps"]
    sel.update(index=other, point={"lr": sel["grid"]["lr"][other]},
               trials=[other * reps, (other + 1) * reps])
    (root / "manifest.json").write_text(json.dumps(m))
    after = fig_design_adagrad_table.evaluate(pipeline.Saved.from_dir(root))

    res = dpsim.load(root / f"{label}.npz")
    mean, half = stats.mean_ci(res.records["test_loss"][-1][other * reps:(other + 1) * reps])
    cell = f"{mean:.4f} ± {half:.4f}"
    assert cell in after["measured"] and cell not in before["measured"]
    rows = fig_design_adagrad_table._table(pipeline.Saved.from_dir(root))[1]
    assert rows[(0.5, "dp_adagrad")]["lr"] == sel["grid"]["lr"][other]
    # the other cells' numbers did not move
    np.testing.assert_array_equal(rows[(0.5, "stp")]["test"],
                                  fig_design_adagrad_table._table(tiny.saved())[1][(0.5, "stp")]["test"])


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
