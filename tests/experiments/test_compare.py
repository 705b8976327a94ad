"""dpsim.compare: {optimizer: grid} x trials -> one Dataset through the sweep machinery (cache,
Dask, resume), calibrated, with the selection and its grid-edge flags; dpsim.plot.curves; the
`dpsim compare` command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import dpsim

pytestmark = pytest.mark.xdist_group("compare")

GRIDS = {"dp_sgd": {"lr": [0.3, 1.0, 3.0]},
         "dp_adam": {"lr": [0.01, 0.03, 0.1]},
         "dp_adam_bc": {"lr": [0.003, 0.01, 0.03]}}
KW = dict(steps=40, batch_size=40, trials=20, seed=7, target_epsilon=1.0, target_delta=1e-5,
          accountant="rdp")


@pytest.fixture(scope="module")
def problem():
    return dpsim.problems.logistic_regression(600, 6, col_scale=1.0, seed=0)


@pytest.fixture(scope="module")
def ds(problem):
    return dpsim.compare(problem, GRIDS, **KW)


def test_dataset_layout_calibration_and_selection(problem, ds):
    assert dict(ds.sizes) == {"optimizer": 3, "config": 3, "trial": 20, "step": ds.sizes["step"]}
    assert list(ds["optimizer"].values) == list(GRIDS)
    np.testing.assert_array_equal(ds["lr"].values, [GRIDS[n]["lr"] for n in GRIDS])
    # every configuration calibrated to the target: one σ per optimizer (lr declares nothing)
    assert np.allclose(ds["epsilon"].values, 1.0, rtol=1e-3)
    for o in range(3):
        assert np.unique(ds["noise_multiplier"].values[o]).size == 1
    # the documented rule, recomputed: lowest mean final loss over trials, first on a tie
    final = ds["loss"].values[:, :, :, -1]
    for o, name in enumerate(GRIDS):
        scores = [np.mean(final[o, j]) if not ds["diverged"].values[o, j].any() else np.inf
                  for j in range(3)]
        assert int(ds["selected"].values[o]) == int(np.argmin(scores))
        lr = GRIDS[name]["lr"][int(np.argmin(scores))]
        assert ds["selected_lr"].values[o] == lr
        assert bool(ds["edge_lr"].values[o]) == (lr in (min(GRIDS[name]["lr"]), max(GRIDS[name]["lr"])))
    # mean and Student-t interval from dpsim.analysis.stats.mean_ci over the trials
    from dpsim.analysis.stats import mean_ci

    m, h = mean_ci(ds["excess_loss"].values[1, 2, :, -1])
    assert ds["excess_loss_mean"].values[1, 2, -1] == pytest.approx(m)
    assert ds["excess_loss_hi"].values[1, 2, -1] == pytest.approx(m + h)
    assert "tuning over the grid" in ds.attrs["epsilon_scope"]
    # each cell is the simulate call it says, with its seed derived from what it runs
    from dpsim.experiments import compare as cmp
    from dpsim.experiments.pipeline import cell_seed

    sigma = float(ds["noise_multiplier"].values[0, 1])
    _, index = cmp._cell_id("dp_sgd", {"lr": 1.0, "noise_multiplier": sigma})
    res = dpsim.simulate(problem, dpsim.optimizers.dp_sgd(lr=1.0, noise_multiplier=sigma),
                         steps=40, batch_size=40, trials=20, seed=cell_seed(7, index),
                         metrics=("loss",), accountant="rdp")
    np.testing.assert_array_equal(res.loss.T, ds["loss"].values[0, 1])


def test_same_numbers_on_two_dask_workers(problem, ds):
    ds2 = dpsim.compare(problem, GRIDS, workers=2, **KW)
    for v in ("loss", "excess_loss", "noise_multiplier", "epsilon", "selected"):
        np.testing.assert_array_equal(ds[v].values, ds2[v].values)


def test_kill_and_rerun_recomputes_nothing_finished(problem, ds, tmp_path):
    script = textwrap.dedent(f"""
        import dpsim
        prob = dpsim.problems.logistic_regression(600, 6, col_scale=1.0, seed=0)
        dpsim.compare(prob, {GRIDS!r}, results={str(tmp_path)!r}, **{KW!r})
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    finished = 0
    deadline = time.time() + 240
    try:
        while time.time() < deadline and proc.poll() is None:
            for m in tmp_path.rglob("manifest.json"):
                try:
                    finished = len(json.loads(m.read_text())["cells"])
                except (ValueError, KeyError):
                    pass
            if finished >= 3:
                break
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert 3 <= finished < 9, finished
    again = dpsim.compare(problem, GRIDS, results=tmp_path, **KW)
    assert again.attrs["cells_reused"] >= finished
    assert again.attrs["cells_reused"] + again.attrs["cells_computed"] == 9
    for v in ("loss", "selected", "noise_multiplier"):
        np.testing.assert_array_equal(ds[v].values, again[v].values)
    third = dpsim.compare(problem, GRIDS, results=tmp_path, **KW)
    assert third.attrs["cells_computed"] == 0


def test_widening_a_grid_reuses_the_points_it_had(problem, tmp_path):
    small = {"dp_sgd": {"lr": [0.3, 1.0]}}
    a = dpsim.compare(problem, small, results=tmp_path, steps=20, batch_size=40, trials=3)
    b = dpsim.compare(problem, {"dp_sgd": {"lr": [0.3, 1.0, 3.0]}}, results=tmp_path, steps=20,
                      batch_size=40, trials=3)
    assert b.attrs["cells_reused"] == 2 and b.attrs["cells_computed"] == 1
    np.testing.assert_array_equal(a["loss"].values[0, :2], b["loss"].values[0, :2])


def test_held_out_metrics_and_plot(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4)) / 2
    y = (X @ np.array([2.0, -1.0, 0.0, 1.0]) + 0.3 * rng.standard_normal(300) > 0).astype(int)
    prob = dpsim.problems.from_data(X, y, loss="logistic", reg=1e-3, test=0.25)
    ds = dpsim.compare(prob, {"dp_sgd": {"lr": [0.5, 2.0]}, "sgd": {}}, steps=30,
                       batch_size=30, trials=4, select="test_accuracy")
    assert {"test_loss_mean", "test_accuracy_mean", "loss_mean"} <= set(ds.data_vars)
    assert np.isinf(ds["epsilon"].values[1, 0])  # sgd: non-private
    acc = ds["test_accuracy"].values[0, :, :, -1].mean(axis=1)
    assert int(ds["selected"].values[0]) == int(np.argmax(acc))
    fig = dpsim.plot.curves(ds, metric="test_accuracy", configs="all")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("ε=" in t for t in labels) and any("ε=∞" in t for t in labels)
    fig.savefig(tmp_path / "c.png")
    with pytest.raises(ValueError, match="not in this comparison"):
        dpsim.plot.curves(ds, metric="grad_norm_sq")
    from dpsim.experiments.compare import write_dataset
    import xarray as xr

    write_dataset(ds, tmp_path / "c.nc")
    with xr.open_dataset(tmp_path / "c.nc") as back:
        np.testing.assert_array_equal(back["loss"].values, ds["loss"].values)


def test_noise_multiplier_on_a_grid_is_a_coordinate(problem):
    """σ tuned on a grid (no calibration): one ``noise_multiplier`` coordinate holding the σ each
    cell ran with (the grid's values; another optimizer's default σ), ε falling with σ."""
    ds = dpsim.compare(problem, {"dp_sgd": {"noise_multiplier": [0.5, 2.0]}, "dp_adam": {}},
                       steps=10, batch_size=40, trials=2, progress=False)
    assert "noise_multiplier" in ds.coords and "noise_multiplier" not in ds.data_vars
    sig = ds["noise_multiplier"].values
    np.testing.assert_array_equal(sig[0], [0.5, 2.0])
    assert sig[1, 0] == dpsim.optimizers.get("dp_adam").hyperparameters["noise_multiplier"]
    eps = ds["epsilon"].values
    assert eps[0, 0] > eps[0, 1] > 0


def test_bad_arguments_are_one_line_errors(problem):
    with pytest.raises(ValueError, match="unknown optimizer 'dp_sgdd'"):
        dpsim.compare(problem, {"dp_sgdd": {}}, steps=1, batch_size=10, trials=1)
    with pytest.raises(ValueError, match="noise_multiplier is on the grid"):
        dpsim.compare(problem, {"dp_sgd": {"noise_multiplier": [1, 2]}}, steps=1, batch_size=10,
                      trials=1, target_epsilon=1.0, target_delta=1e-5)
    with pytest.raises(ValueError, match="select must be one of"):
        dpsim.compare(problem, {"dp_sgd": {}}, steps=1, batch_size=10, trials=1, select="acc")
    with pytest.raises(ValueError, match="is empty"):
        dpsim.compare(problem, {"dp_sgd": {"lr": []}}, steps=1, batch_size=10, trials=1)
    with pytest.raises(ValueError, match="held-out split"):
        dpsim.compare(problem, {"dp_sgd": {}}, steps=1, batch_size=10, trials=1, select="test_loss")


def test_cli_compare_from_toml(tmp_path):
    cfg = tmp_path / "study.toml"
    cfg.write_text(textwrap.dedent("""
        [problem]
        name = "logistic_regression"
        n = 300
        d = 4
        [run]
        steps = 20
        batch_size = 30
        trials = 3
        target_epsilon = 2.0
        target_delta = 1e-5
        accountant = "rdp"
        [grids.dp_sgd]
        lr = [0.5, 1.0]
        [grids.dp_adam]
        lr = [0.01]
    """))
    out = subprocess.run([sys.executable, "-m", "dpsim", "compare", str(cfg)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "dp_sgd" in out.stdout and "ε=" in out.stdout
    import xarray as xr

    with xr.open_dataset(tmp_path / "study.nc") as back:
        assert list(back["optimizer"].values) == ["dp_sgd", "dp_adam"]
    assert (tmp_path / "study.png").stat().st_size > 0
    bad = tmp_path / "bad.toml"
    bad.write_text("[problem]\nname='logistic_regression'\n[run]\nsteps=1\n[grids]\n")
    out = subprocess.run([sys.executable, "-m", "dpsim", "compare", str(bad)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2 and "needs batch_size" in out.stderr
    assert "Traceback" not in out.stderr
