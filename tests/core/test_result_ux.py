"""What a user sees of a Result: its summary (repr, HTML), the tidy DataFrame, the xarray Dataset,
the .npz / .nc files, the divergence flags, and the `dpsim run` summary and --out suffixes."""

import dataclasses
import json
import warnings

import numpy as np
import pytest

import dpsim
from dpsim import optimizers, problems
from dpsim.cli import main
from dpsim.results import DIVERGENCE_FACTOR

STEPS, B, R = 20, 20, 3


def _sum_probe(state, params, ctx):
    return np.asarray(params).sum(axis=1)


@pytest.fixture(scope="module")
def res():
    """A private run with one probe (K = 21 records, R = 3 trials)."""
    return dpsim.simulate(problems.logistic_regression(200, 5, seed=0),
                          optimizers.dp_sgd(lr=0.5, clip=1.0, noise_multiplier=1.0),
                          steps=STEPS, batch_size=B, trials=R, seed=0, probes={"psum": _sum_probe})


@pytest.fixture(scope="module")
def per_trial():
    """Per-trial noise multipliers: ε differs per trial."""
    return dpsim.simulate(problems.logistic_regression(200, 5, seed=0),
                          optimizers.dp_sgd(lr=0.5, clip=1.0, noise_multiplier=[1.0, 2.0, 0.5]),
                          steps=STEPS, batch_size=B, trials=R, seed=0)


@pytest.fixture(scope="module")
def blowup():
    """Trial 0 converges; trial 1 (lr = 3 on a quadratic) grows geometrically but stays finite."""
    return dpsim.simulate(problems.least_squares(50, 3, seed=0), optimizers.sgd(lr=[0.05, 3.0]),
                          steps=30, batch_size=5, trials=2, seed=0)


# ---------------------------------------------------------------------------------------------
# repr / HTML


def test_repr_is_short_and_names_the_run(res):
    text = repr(res)
    lines = text.splitlines()
    assert len(lines) <= 20
    eps = res.epsilon(1e-5)
    assert "dp_sgd" in text and "logistic_regression (n=200, d=5)" in text
    assert f"ε = {eps:.4g} at δ = 1e-05 (default δ)" in text
    assert "20 steps, batch size 20, 3 trials" in text and "engine block" in text
    assert "0 of 3 trials" in text and "wall time" in text
    mean_loss = np.mean(res.loss[-1])
    assert any(line.split()[:2] == ["loss", f"{mean_loss:.6g}"] for line in lines)
    assert any(line.split()[:3] == ["probe", "psum", f"{np.mean(res.records['psum'][-1]):.6g}"]
               for line in lines)
    assert "[[" not in text and "array(" not in text  # no arrays


def test_repr_stays_short_with_many_probes_and_per_trial_epsilon(res, per_trial):
    many = dataclasses.replace(res, records={f"p{i}": res.loss for i in range(30)})
    text = repr(many)
    assert len(text.splitlines()) <= 20 and "more (see to_dataframe())" in text
    eps = per_trial.epsilon(1e-5)
    assert f"ε = {eps.min():.4g} .. {eps.max():.4g} (per trial)" in repr(per_trial)


def test_repr_delta_is_the_calibration_target_and_non_private_says_so(res, blowup):
    cal = dataclasses.replace(res, config={**res.config, "calibration": {
        "target_epsilon": 2.0, "target_delta": 1e-6, "accountant": "pld", "noise_multiplier": 1.0}})
    assert cal.report_delta() == (1e-6, "calibration target")
    assert f"ε = {res.epsilon(1e-6):.4g} at δ = 1e-06 (calibration target δ)" in repr(cal)
    assert res.report_delta() == (1e-5, "default")
    assert "ε = inf (not private)" in repr(blowup)


def test_repr_html_is_an_escaped_table_with_the_same_content(res):
    odd = dataclasses.replace(res, config={**res.config, "optimizer": "<b>dp&sgd</b>"})
    page = odd._repr_html_()
    assert page.startswith("<table>") and page.endswith("</table>")
    assert "&lt;b&gt;dp&amp;sgd&lt;/b&gt;" in page and "<b>dp&sgd" not in page
    eps = res.epsilon(1e-5)
    assert f"ε = {eps:.4g}" in page and "logistic_regression" in page


# ---------------------------------------------------------------------------------------------
# DataFrame


def test_dataframe_is_tidy_one_row_per_trial_and_record(res):
    df = res.to_dataframe()
    K = res.steps.size
    assert df.shape[0] == R * K
    assert list(df.columns) == ["trial", "step", "loss", "excess_loss", "grad_norm_sq",
                                "dist_to_opt", "psum", "optimizer", "lr", "clip", "noise",
                                "noise_multiplier", "epsilon", "delta", "diverged"]
    for r in range(R):
        rows = df[df["trial"] == r]
        np.testing.assert_array_equal(rows["step"], res.steps)
        np.testing.assert_array_equal(rows["loss"], res.loss[:, r])
        np.testing.assert_array_equal(rows["excess_loss"], res.excess_loss[:, r])
        np.testing.assert_array_equal(rows["psum"], res.records["psum"][:, r])
    assert (df["optimizer"] == "dp_sgd").all() and (df["noise"] == "gaussian").all()
    assert (df["lr"] == 0.5).all() and (df["noise_multiplier"] == 1.0).all()
    assert np.allclose(df["epsilon"], res.epsilon(1e-5)) and (df["delta"] == 1e-5).all()
    assert df["diverged"].dtype == bool and not df["diverged"].any()
    assert df.attrs["delta"] == 1e-5 and df.attrs["delta_source"] == "default"
    assert np.allclose(res.to_dataframe(delta=1e-7)["epsilon"], res.epsilon(1e-7))


def test_dataframe_expands_per_trial_values(per_trial, blowup):
    df = per_trial.to_dataframe()
    K = per_trial.steps.size
    eps = per_trial.epsilon(1e-5)
    np.testing.assert_array_equal(df["noise_multiplier"], np.repeat([1.0, 2.0, 0.5], K))
    np.testing.assert_allclose(df["epsilon"], np.repeat(eps, K))
    # a non-private run: ε is inf, σ is NaN; a per-trial lr gives each trial its own
    bd = blowup.to_dataframe()
    assert np.isinf(bd["epsilon"]).all() and np.isnan(bd["noise_multiplier"]).all()
    np.testing.assert_array_equal(bd["lr"], np.repeat([0.05, 3.0], blowup.steps.size))
    np.testing.assert_array_equal(bd["diverged"], np.repeat([False, True], blowup.steps.size))


def test_dataframe_without_recorded_loss_and_with_colliding_names(res):
    no_loss = dpsim.simulate(problems.logistic_regression(200, 5, seed=0),
                             optimizers.dp_sgd(lr=0.5), steps=5, batch_size=B, trials=2, seed=0,
                             metrics=("grad_norm_sq",))
    df = no_loss.to_dataframe()
    assert "loss" not in df.columns and "grad_norm_sq" in df.columns and df.shape[0] == 2 * 6
    # ctCDP's budget hyperparameters `epsilon` / `delta` do not shadow the accounted ones
    hp = {**res.config["hyperparameters"], "epsilon": 2.0, "delta": 1e-6}
    odd = dataclasses.replace(res, config={**res.config, "hyperparameters": hp})
    df = odd.to_dataframe()
    assert (df["hp_epsilon"] == 2.0).all() and (df["hp_delta"] == 1e-6).all()
    assert np.allclose(df["epsilon"], res.epsilon(1e-5))
    # probes named like a column get the prefix probe_
    probed = dataclasses.replace(res, records={"loss": res.grad_norm_sq, "diverged": res.loss})
    df = probed.to_dataframe()
    np.testing.assert_array_equal(df["probe_loss"], res.grad_norm_sq.T.reshape(-1))
    np.testing.assert_array_equal(df["loss"], res.loss.T.reshape(-1))
    assert "probe_diverged" in df.columns and df["diverged"].dtype == bool
    ds = odd.to_xarray()
    assert float(ds["hp_epsilon"]) == 2.0 and float(ds["epsilon"]) == pytest.approx(res.epsilon(1e-5))


# ---------------------------------------------------------------------------------------------
# xarray and files


def test_to_xarray_has_the_summary_variables(res, per_trial):
    ds = res.to_xarray()
    assert ds["loss"].dims == ("step", "trial") and ds.sizes == {"step": 21, "trial": 3, "dim": 5}
    assert ds["optimizer"].ndim == 0 and ds["optimizer"].item() == "dp_sgd"
    assert float(ds["lr"]) == 0.5 and ds["noise"].item() == "gaussian"
    assert float(ds["noise_multiplier"]) == 1.0 and float(ds["delta"]) == 1e-5
    assert float(ds["epsilon"]) == pytest.approx(res.epsilon(1e-5))
    assert ds["diverged"].dims == ("trial",) and ds["diverged"].dtype == bool
    assert json.loads(ds.attrs["config"]) == json.loads(json.dumps(res.config))
    pt = per_trial.to_xarray()
    np.testing.assert_array_equal(pt["noise_multiplier"], [1.0, 2.0, 0.5])  # a trial coordinate
    np.testing.assert_allclose(pt["epsilon"], per_trial.epsilon(1e-5))


def _assert_same(a, b):
    for k in ("steps", "loss", "excess_loss", "grad_norm_sq", "dist_to_opt", "test_loss",
              "test_accuracy", "params", "mean_batch_size"):
        x, y = getattr(a, k), getattr(b, k)
        assert (x is None) == (y is None), k
        if x is not None:
            np.testing.assert_array_equal(x, y, err_msg=k)
            assert np.asarray(x).dtype == np.asarray(y).dtype, k
    assert a.records.keys() == b.records.keys()
    for k in a.records:
        np.testing.assert_array_equal(a.records[k], b.records[k])
    assert json.loads(json.dumps(a.config)) == b.config
    assert json.loads(json.dumps(a.privacy)) == b.privacy
    assert a.wall_time == b.wall_time
    np.testing.assert_array_equal(a.epsilon(1e-5), b.epsilon(1e-5))
    np.testing.assert_array_equal(a.diverged, b.diverged)


@pytest.mark.parametrize("suffix", [".npz", ".nc"])
def test_save_load_round_trip(res, per_trial, blowup, tmp_path, suffix):
    for i, r in enumerate((res, per_trial, blowup)):
        path = tmp_path / f"r{i}{suffix}"
        r.save(path)
        _assert_same(r, dpsim.load(path))
        _assert_same(r, dpsim.load(str(path)))


def test_held_out_metrics_are_saved_and_converted(res, tmp_path):
    held = dataclasses.replace(res, test_loss=res.loss + 0.1, test_accuracy=np.full_like(res.loss, 0.75))
    for suffix in (".npz", ".nc"):
        held.save(tmp_path / f"h{suffix}")
        _assert_same(held, dpsim.load(tmp_path / f"h{suffix}"))
    df = held.to_dataframe()
    np.testing.assert_array_equal(df["test_loss"], (res.loss + 0.1).T.reshape(-1))
    assert (df["test_accuracy"] == 0.75).all()
    assert any(line.split() == ["test_accuracy", "0.75"] for line in repr(held).splitlines())


def test_npz_layout_is_unchanged(res, tmp_path):
    path = tmp_path / "r.npz"
    res.save(path)
    with np.load(path) as z:
        assert sorted(z.files) == sorted(["__meta__", "steps", "loss", "params", "grad_norm_sq",
                                          "excess_loss", "dist_to_opt", "probe__psum",
                                          "mean_batch_size"])
        assert json.loads(str(z["__meta__"]))["format"] == "dpsim-result-2"


def test_netcdf_opens_with_xarray_and_stores_bools_as_int8(blowup, tmp_path):
    import xarray as xr

    path = tmp_path / "r.nc"
    blowup.save(path)
    with xr.open_dataset(path) as ds:
        assert ds["optimizer"].item() == "sgd"
        assert ds["diverged"].values.tolist() == [False, True]
        assert ds["diverged_reason"].values[1].startswith("excess loss grew")
        np.testing.assert_array_equal(ds["lr"], [0.05, 3.0])
        assert np.isinf(float(ds["epsilon"])) and np.isnan(float(ds["noise_multiplier"]))
    from scipy.io import netcdf_file

    raw = netcdf_file(path, "r", mmap=False)  # the bytes on disk: netCDF 3 has no bool type
    try:
        assert raw.variables["diverged"].data.dtype == np.int8
        assert raw.variables["diverged"].data.tolist() == [0, 1]
    finally:
        raw.close()


def test_bad_suffix_is_one_error_naming_path_and_suffixes(res, tmp_path):
    path = tmp_path / "r.csv"
    with pytest.raises(ValueError) as exc:
        res.save(path)
    msg = str(exc.value)
    assert str(path) in msg and ".npz" in msg and ".nc" in msg and "\n" not in msg
    assert not path.exists()
    with pytest.raises(ValueError, match="format='h5'"):
        res.save(tmp_path / "r.nc", format="h5")


def test_format_argument_and_loading_by_content(res, tmp_path):
    for fmt in ("npz", "nc"):
        path = tmp_path / f"noext-{fmt}"
        res.save(path, format=fmt)
        _assert_same(res, dpsim.load(path))
    foreign = tmp_path / "notes.txt"
    foreign.write_text("hello")
    with pytest.raises(ValueError) as exc:
        dpsim.load(foreign)
    assert str(foreign) in str(exc.value) and "\n" not in str(exc.value)
    bad_nc = tmp_path / "broken.nc"
    bad_nc.write_bytes(b"CDF\x01garbage")
    with pytest.raises(ValueError) as exc:
        dpsim.load(bad_nc)
    assert str(bad_nc) in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(ValueError, match="missing.nc"):
        dpsim.load(tmp_path / "missing.nc")


# ---------------------------------------------------------------------------------------------
# divergence


def test_finite_blowup_is_diverged_and_a_normal_run_is_not(res, blowup):
    assert np.all(np.isfinite(blowup.params)) and np.all(np.isfinite(blowup.loss))
    assert blowup.diverged.tolist() == [False, True]
    assert blowup.diverged_reason[0] == "" and "excess loss grew" in blowup.diverged_reason[1]
    assert not res.diverged.any() and list(res.diverged_reason) == ["", "", ""]


def _with_final(res, loss_last=None, excess_last=None, **kw):
    loss, ex = res.loss.copy(), None if res.excess_loss is None else res.excess_loss.copy()
    if loss_last is not None:
        loss[-1] = loss_last
    if excess_last is not None:
        ex[-1] = excess_last
    return dataclasses.replace(res, loss=loss, excess_loss=ex, **kw)


def test_divergence_rule_is_scale_sensible(res):
    e0, l0 = res.excess_loss[0], res.loss[0]
    # 0.69 -> 9.5e17 is diverged; ending 10x above the start is not
    r = _with_final(res, loss_last=[l0[0], 9.5e17, l0[2]], excess_last=[e0[0], 9.5e17, 10 * e0[2]])
    assert r.diverged.tolist() == [False, True, False]
    # the excess-loss factor is the rule's threshold
    r = _with_final(res, excess_last=e0 * np.array([0.5, 0.99, 1.01]) * DIVERGENCE_FACTOR)
    assert r.diverged.tolist() == [False, False, True]
    # without an excess loss: the loss must rise by more than 100 x max(|first loss|, 1)
    no_ex = dataclasses.replace(res, excess_loss=None)
    rise = DIVERGENCE_FACTOR * np.maximum(np.abs(l0), 1.0)
    r = _with_final(no_ex, loss_last=l0 + rise * np.array([0.5, 1.01, 0.99]))
    assert r.diverged.tolist() == [False, True, False]
    assert "loss rose by" in r.diverged_reason[1]
    # the same rule on a rescaled objective (x 1e6): the excess-loss ratio does not change
    big = dataclasses.replace(res, loss=res.loss * 1e6, excess_loss=res.excess_loss * 1e6)
    r = _with_final(big, excess_last=big.excess_loss[0] * np.array([50, 150, 1]))
    assert r.diverged.tolist() == [False, True, False]


def test_divergence_without_a_recorded_loss_counts_only_parameters(res):
    cfg = {**res.config, "metrics": ["grad_norm_sq"]}
    nan = np.full_like(res.loss, np.nan)
    params = res.params.copy()
    params[2, 0] = np.inf
    r = dataclasses.replace(res, config=cfg, loss=nan, excess_loss=None, params=params)
    assert r.diverged.tolist() == [False, False, True]
    assert r.diverged_reason[2] == "non-finite final parameters"
    # a non-finite final loss is flagged as such when the loss is recorded
    r = _with_final(res, loss_last=[np.nan, res.loss[-1, 1], res.loss[-1, 2]])
    assert r.diverged.tolist() == [True, False, False]
    assert r.diverged_reason[0] == "non-finite final loss"


def test_non_finite_blowup_is_still_flagged():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = dpsim.simulate(problems.least_squares(50, 3, seed=0), optimizers.sgd(lr=[0.01, 1e3]),
                           steps=200, batch_size=5, trials=2)
    assert r.diverged.tolist() == [False, True]
    assert "1 of 2 trials: trial 1 non-finite" in repr(r)


# ---------------------------------------------------------------------------------------------
# dpsim run


RUN = ["run", "--problem", "least_squares", "--problem-arg", "n=50", "--problem-arg", "d=3",
       "--optimizer", "sgd", "--set", "lr=0.05,3", "--steps", "30", "--batch-size", "5",
       "--trials", "2", "--seed", "0", "--no-progress"]


def test_cli_bad_out_suffix_exits_2_before_running(tmp_path, capsys, monkeypatch):
    def no_run(*a, **k):
        raise AssertionError("simulate must not be called")

    monkeypatch.setattr(dpsim, "simulate", no_run)
    out = tmp_path / "r.csv"
    code = main(RUN + ["--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("dpsim: error:")
    assert "'.csv'" in err[0] and ".npz" in err[0] and ".nc" in err[0] and str(out) in err[0]
    assert list(tmp_path.iterdir()) == []


def test_cli_reports_a_finite_blowup_apart_and_saves_netcdf(tmp_path, capsys):
    out = tmp_path / "r.nc"
    code = main(RUN + ["--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    res = dpsim.load(out)
    assert res.diverged.tolist() == [False, True] and np.all(np.isfinite(res.loss))
    assert f"final loss      {res.loss[-1, 0]:.6g} ± 0 over the 1 trial(s) not diverged; " \
           "1 diverged" in text
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("diverged"))
    assert "1 of 2 trial(s): trial 1 excess loss grew" in line and "rule:" in line
    assert f"{DIVERGENCE_FACTOR:g}x its first record" in line
    assert f"saved to {out}" in text and [p.name for p in tmp_path.iterdir()] == ["r.nc"]
