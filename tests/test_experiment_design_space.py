"""design_space (seed 002, reconstructed settings): tiny-scale end to end run, figures, report."""

from __future__ import annotations

import json

from dpsim import experiments
from dpsim.experiments import design_space

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_design_space_tiny_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setitem(experiments._REGISTRY, "design_space", "dpsim.experiments.design_space")
    report = experiments.reproduce(["design_space"], scale="tiny", out_dir=tmp_path / "out",
                                   results_dir=tmp_path / "results", progress=False, verbose=False)
    text = report.read_text()
    assert "## design_space:" in text
    for fig in design_space.EXPERIMENT.figures:
        png = tmp_path / "out" / f"{fig}.png"
        assert png.read_bytes()[:8] == PNG_MAGIC and (tmp_path / "out" / f"{fig}.pdf").exists()
        assert f"![{fig}]({fig}.png)" in text
    assert (tmp_path / "out" / "fig_design_adagrad_table.md").exists()
    m = json.loads((tmp_path / "results" / "design_space" / "tiny" / "manifest.json").read_text())
    assert m["complete"] and "chosen" in m["notes"] and "reconstructed" in m["notes"]
    assert "RECONSTRUCTED" in design_space.__doc__ and "reconstruction" in text


def test_select_picks_lowest_mean_final_training_loss():
    import numpy as np

    class Fake:
        trials = 6
        config = {"hyperparameters": {"lr": [0.1, 0.1, 1.0, 1.0, 1.0, 1.0],
                                      "eps_scale": [1.0, 1.0, 1.0, 1.0, 2.0, 2.0]}}
        loss = np.array([[1.0] * 6, [0.5, 0.7, 0.4, 0.5, np.nan, 0.1]])

    mask, info = design_space.select(Fake)
    assert info["lr"] == 1.0 and info["eps_scale"] == 1.0
    assert mask.tolist() == [False, False, True, True, False, False]
