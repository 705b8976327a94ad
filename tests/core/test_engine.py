"""The simulate() engine: limiting cases, naive reference, declared noise scale, results, errors."""

import math

import numpy as np
import pytest
from scipy import stats

import dpsim
from dpsim import optimizers, problems
from dpsim.backend import Backend
from dpsim.transforms import Batch, StepContext

from support.naive import naive_dp_sgd


@pytest.fixture(scope="module")
def logreg():
    return problems.logistic_regression(300, 12, seed=1)


@pytest.fixture(scope="module")
def sparse_logreg():
    return problems.logistic_regression(400, 60, density=0.1, seed=2)


@pytest.fixture(scope="module")
def lsq():
    return problems.least_squares(200, 8, seed=3)


# ---------------------------------------------------------------------------------------------
# Limiting cases


@pytest.mark.parametrize("sampling", ["poisson", "fixed", "replacement"])
@pytest.mark.parametrize("which", ["logreg", "sparse_logreg", "lsq"])
def test_dp_sgd_without_noise_and_clipping_is_sgd_exactly(which, sampling, request):
    prob = request.getfixturevalue(which)
    kw = dict(steps=40, batch_size=16, trials=5, seed=11, sampling=sampling, record_every=10)
    a = dpsim.simulate(prob, optimizers.get("sgd", lr=0.3), **kw)
    b = dpsim.simulate(prob, optimizers.get("dp_sgd", lr=0.3, clip=math.inf, noise_multiplier=0.0), **kw)
    assert np.array_equal(a.params, b.params)
    assert np.array_equal(a.loss, b.loss)


def test_dp_sgdm_without_noise_and_clipping_is_momentum_exactly(logreg):
    kw = dict(steps=30, batch_size=16, trials=4, seed=5)
    a = dpsim.simulate(logreg, optimizers.get("momentum", lr=0.1, beta=0.9), **kw)
    b = dpsim.simulate(logreg, optimizers.get("dp_sgdm", lr=0.1, beta=0.9, clip=math.inf,
                                              noise_multiplier=0.0), **kw)
    assert np.array_equal(a.params, b.params)


# ---------------------------------------------------------------------------------------------
# Naive single-trial reference, same noise draws injected


@pytest.mark.parametrize("sampling", ["poisson", "fixed", "replacement"])
@pytest.mark.parametrize("which", ["logreg", "sparse_logreg", "lsq"])
def test_dp_sgd_matches_naive_reference(which, sampling, request):
    prob = request.getfixturevalue(which)
    kw = dict(steps=6, batch_size=10, trials=3, seed=7, sampling=sampling)
    res = dpsim.simulate(prob, optimizers.get("dp_sgd", lr=0.5, clip=0.05, noise_multiplier=1.3), **kw)
    ref = naive_dp_sgd(prob, lr=0.5, clip_norm=0.05, sigma=1.3, **kw)
    # Same operations up to summation order: agreement to a few ulps of the O(1) iterates.
    np.testing.assert_allclose(res.params, ref, rtol=0, atol=1e-12)


def test_dp_sgdm_matches_naive_reference(logreg):
    kw = dict(steps=6, batch_size=10, trials=3, seed=8)
    res = dpsim.simulate(logreg, optimizers.get("dp_sgdm", lr=0.2, beta=0.8, clip=0.1,
                                                noise_multiplier=0.7), **kw)
    ref = naive_dp_sgd(logreg, lr=0.2, clip_norm=0.1, sigma=0.7, beta=0.8, **kw)
    np.testing.assert_allclose(res.params, ref, rtol=0, atol=1e-12)


def test_sgd_matches_naive_reference(lsq):
    kw = dict(steps=8, batch_size=12, trials=2, seed=9)
    res = dpsim.simulate(lsq, optimizers.get("sgd", lr=0.05), **kw)
    ref = naive_dp_sgd(lsq, lr=0.05, clip_norm=math.inf, sigma=0.0, private=False, **kw)
    np.testing.assert_allclose(res.params, ref, rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# The empirical noise matches the declared scale


def _variance_ci(s2, n_samples, level=1e-6):
    """Two-sided chi-square confidence interval for σ² given the sample variance of n normals."""
    k = n_samples - 1
    return s2 * k / stats.chi2.ppf(1 - level / 2, k), s2 * k / stats.chi2.ppf(level / 2, k)


@pytest.mark.parametrize("sigma,clip,b", [(1.0, 1.0, 32), (2.5, 0.1, 8), (0.3, 4.0, 50)])
def test_dp_sgd_noise_variance_matches_declared_scale(logreg, sigma, clip, b):
    """g̃ − (1/b)Σclip(g_i, C) must be N(0, (σC/b)²) per coordinate ([ADAMBC], Eq. 2: Φ)."""
    be = Backend("numpy", seed=123)
    prob = logreg.on(be)
    R, d = 400, prob.d
    ctx = StepContext(be, R, b, 1)
    tx = optimizers.get("dp_sgd", lr=1.0, clip=clip, noise_multiplier=sigma).transform
    w = be.asarray(np.random.default_rng(0).normal(size=(R, d)))
    idx = np.random.default_rng(1).integers(0, prob.n, size=(R, b))
    noise = []
    state = tx.init(w)
    for t in range(5):
        ctx.t = t + 1
        batch = Batch(prob, w, idx, None, b)
        clean = batch.clipped_sum(clip) / b
        u, state = tx.update(batch, state, w, ctx)
        noise.append(-u - clean)  # scale(-lr) with lr = 1
    z = np.concatenate([x.ravel() for x in noise])
    lo, hi = _variance_ci(np.var(z, ddof=1), z.size)
    phi = (sigma * clip / b) ** 2
    assert lo <= phi <= hi, (lo, phi, hi)
    assert abs(np.mean(z)) < 6 * math.sqrt(phi / z.size)


def test_per_trial_noise_multiplier_scales_noise(logreg):
    """One σ per trial: each trial's noise has its own declared variance."""
    sig = np.array([0.5, 1.0, 2.0, 4.0])
    R = sig.size
    be = Backend("numpy", seed=3)
    ctx = StepContext(be, R, 20, 1)
    tx = optimizers.get("dp_sgd", lr=1.0, clip=0.5, noise_multiplier=sig).transform
    w = be.asarray(np.zeros((R, logreg.d)))
    zs = []
    state = tx.init(w)
    for t in range(400):
        ctx.t = t + 1
        idx = np.zeros((R, 20), dtype=np.int64)
        batch = Batch(logreg, w, idx, None, 20)
        clean = batch.clipped_sum(0.5) / 20
        u, state = tx.update(batch, state, w, ctx)
        zs.append(-u - clean)
    z = np.stack(zs)  # (T, R, d)
    for r in range(R):
        zr = z[:, r].ravel()
        lo, hi = _variance_ci(np.var(zr, ddof=1), zr.size)
        assert lo <= (sig[r] * 0.5 / 20) ** 2 <= hi


# ---------------------------------------------------------------------------------------------
# Per-trial hyperparameters (a grid on the trial axis)


def test_per_trial_learning_rates_match_scalar_runs(logreg):
    kw = dict(steps=25, batch_size=16, trials=2, seed=4)
    grid = dpsim.simulate(logreg, optimizers.get("dp_sgd", lr=[0.1, 0.4], clip=0.5,
                                                 noise_multiplier=0.0), **kw)
    for r, lr in enumerate([0.1, 0.4]):
        single = dpsim.simulate(logreg, optimizers.get("dp_sgd", lr=lr, clip=0.5,
                                                       noise_multiplier=0.0), **kw)
        np.testing.assert_array_equal(grid.params[r], single.params[r])


def test_per_trial_length_mismatch_is_an_error(logreg):
    with pytest.raises(ValueError, match="trials=3"):
        dpsim.simulate(logreg, optimizers.get("sgd", lr=[0.1, 0.2]), steps=2, batch_size=4, trials=3)


# ---------------------------------------------------------------------------------------------
# Records and results


def test_records_shapes_and_values(lsq):
    res = dpsim.simulate(lsq, optimizers.get("sgd", lr=0.05), steps=50, batch_size=10, trials=3,
                         record_every=20, seed=0)
    np.testing.assert_array_equal(res.steps, [0, 20, 40, 50])
    assert res.loss.shape == (4, 3) and res.excess_loss.shape == (4, 3)
    w0 = np.zeros((1, lsq.d))
    np.testing.assert_allclose(res.loss[0], float(np.asarray(lsq.loss(w0))[0]))
    w_star, f_star = lsq.optimum
    np.testing.assert_allclose(res.excess_loss, res.loss - f_star)
    assert np.all(res.excess_loss > -1e-12)
    np.testing.assert_allclose(res.dist_to_opt[-1], np.linalg.norm(res.params - w_star, axis=1))
    np.testing.assert_allclose(res.grad_norm_sq[-1],
                               np.sum(np.asarray(lsq.grad(res.params)) ** 2, axis=1))
    assert res.loss[-1].mean() < res.loss[0].mean()  # SGD descends


def test_probe_hook_records_state_statistics(logreg):
    probe = {"momentum_norm": lambda state, params, ctx: ctx.xp.linalg.vector_norm(state["momentum"].trace, axis=1)}
    res = dpsim.simulate(logreg, optimizers.get("momentum", lr=0.1), steps=20, batch_size=8,
                         trials=2, record_every=5, probes=probe)
    assert res.records["momentum_norm"].shape == (5, 2)
    assert np.all(res.records["momentum_norm"][0] == 0) and np.all(res.records["momentum_norm"][1:] > 0)


def test_save_load_roundtrip_and_xarray(tmp_path, logreg):
    res = dpsim.simulate(logreg, optimizers.get("dp_sgd", lr=[0.1, 0.2, 0.3], noise_multiplier=1.0),
                         steps=10, batch_size=8, trials=3, record_every=5)
    path = tmp_path / "r.npz"
    res.save(path)
    back = dpsim.load(path)
    for k in ("steps", "loss", "excess_loss", "grad_norm_sq", "dist_to_opt", "params"):
        np.testing.assert_array_equal(getattr(res, k), getattr(back, k))
    assert back.config == res.config
    assert back.epsilon(1e-5) == res.epsilon(1e-5)
    ds = res.to_xarray()
    assert ds["loss"].dims == ("step", "trial")
    np.testing.assert_array_equal(ds["lr"].values, [0.1, 0.2, 0.3])
    np.testing.assert_array_equal(ds["loss"].values, res.loss)
    assert '"optimizer": "dp_sgd"' in ds.attrs["config"]


def test_config_records_everything(logreg):
    res = dpsim.simulate(logreg, optimizers.get("dp_sgd", lr=0.2), steps=3, batch_size=8, seed=42)
    c = res.config
    assert c["optimizer"] == "dp_sgd" and c["seed"] == 42 and c["steps"] == 3
    assert c["hyperparameters"] == {"lr": 0.2, "clip": 1.0, "noise_multiplier": 1.0, "noise": "gaussian"}
    assert c["problem"]["name"] == "logistic_regression"
    assert {"dpsim", "numpy", "scipy", "numba"} <= set(c["versions"])


def test_same_seed_same_result_different_seed_different(logreg):
    opt = optimizers.get("dp_sgd", lr=0.2)
    a = dpsim.simulate(logreg, opt, steps=10, batch_size=8, trials=2, seed=1)
    b = dpsim.simulate(logreg, opt, steps=10, batch_size=8, trials=2, seed=1)
    c = dpsim.simulate(logreg, opt, steps=10, batch_size=8, trials=2, seed=2)
    assert np.array_equal(a.params, b.params) and not np.array_equal(a.params, c.params)


# ---------------------------------------------------------------------------------------------
# Privacy declared by the optimizer


def test_epsilon_from_declaration(logreg):
    from dpsim import accounting

    res = dpsim.simulate(logreg, optimizers.get("dp_sgd", noise_multiplier=1.1), steps=50,
                         batch_size=30, trials=2)
    assert res.epsilon(1e-5) == pytest.approx(accounting.epsilon(1.1, 30 / logreg.n, 50, 1e-5))
    sgd = dpsim.simulate(logreg, optimizers.get("sgd"), steps=5, batch_size=30)
    assert sgd.epsilon(1e-5) == math.inf
    grid = dpsim.simulate(logreg, optimizers.get("dp_sgd", noise_multiplier=[0.8, 2.0]), steps=50,
                          batch_size=30, trials=2)
    eps = grid.epsilon(1e-5)
    assert eps.shape == (2,) and eps[0] > eps[1]
    assert eps[1] == pytest.approx(accounting.epsilon(2.0, 30 / logreg.n, 50, 1e-5))
    zero = dpsim.simulate(logreg, optimizers.get("dp_sgd", noise_multiplier=0.0), steps=3, batch_size=30)
    assert zero.epsilon(1e-5) == math.inf
    with pytest.raises(ValueError, match="delta"):
        res.epsilon(1.5)


# ---------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize("kwargs,match", [
    (dict(noise_multiplier=-1.0), "noise_multiplier=-1.0"),
    (dict(clip=0.0), "clip=0.0"),
    (dict(clip=-2.0), "clip=-2.0"),
    (dict(lr=float("nan")), "lr"),
    (dict(clip=math.inf, noise_multiplier=1.0), "clip=inf"),
])
def test_invalid_hyperparameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        optimizers.get("dp_sgd", **kwargs)


def test_unknown_optimizer_and_hyperparameter():
    with pytest.raises(KeyError, match="dp_nonsense"):
        optimizers.get("dp_nonsense")
    with pytest.raises(ValueError, match="'momentum_beta'"):
        optimizers.get("dp_sgd", momentum_beta=0.9)


@pytest.mark.parametrize("kwargs,match", [
    (dict(batch_size=10_000), "batch_size=10000"),
    (dict(batch_size=0), "batch_size=0"),
    (dict(sampling="bernoulli"), "bernoulli"),
    (dict(steps=-1), "steps=-1"),
    (dict(trials=0), "trials=0"),
    (dict(backend="jax"), "jax"),
    (dict(record_every=0), "record_every=0"),
])
def test_invalid_simulate_arguments(logreg, kwargs, match):
    base = dict(steps=2, batch_size=8)
    base.update(kwargs)
    with pytest.raises(ValueError, match=match):
        dpsim.simulate(logreg, optimizers.get("sgd"), **base)


def test_cupy_requested_but_absent(logreg):
    from dpsim.backend import cupy_available

    if cupy_available():
        pytest.skip("CuPy and a GPU are present here; the absent-CuPy error cannot be provoked")
    with pytest.raises(ValueError, match="cupy"):
        dpsim.simulate(logreg, optimizers.get("sgd"), steps=2, batch_size=8, backend="cupy")


# ---------------------------------------------------------------------------------------------
# Backends: the same program under NumPy, array_api_strict (no NumPy-only calls) and CuPy


def test_backends_agree(backend_name, lsq):
    kw = dict(steps=15, batch_size=10, trials=3, seed=6, record_every=5)
    opt = optimizers.get("dp_sgdm", lr=0.05, clip=0.5, noise_multiplier=0.0)
    ref = dpsim.simulate(lsq, opt, **kw)
    res = dpsim.simulate(lsq, opt, backend=backend_name, **kw)
    np.testing.assert_allclose(res.params, ref.params, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(res.loss, ref.loss, rtol=1e-12)


def test_noisy_run_on_every_backend(backend_name, logreg):
    """With noise the streams differ on CuPy, but the run is finite and the noise scale is right."""
    res = dpsim.simulate(logreg, optimizers.get("dp_sgd", lr=0.5, clip=1.0, noise_multiplier=1.0),
                         steps=20, batch_size=16, trials=4, seed=1, backend=backend_name)
    assert np.all(np.isfinite(res.loss)) and res.params.shape == (4, logreg.d)


def test_metrics_subset_skips_full_data_passes(logreg):
    full = dpsim.simulate(logreg, optimizers.get("sgd", lr=0.2), steps=10, batch_size=8, trials=2,
                          record_every=5)
    part = dpsim.simulate(logreg, optimizers.get("sgd", lr=0.2), steps=10, batch_size=8, trials=2,
                          record_every=5, metrics=("loss",))
    np.testing.assert_array_equal(full.loss, part.loss)
    np.testing.assert_array_equal(full.excess_loss, part.excess_loss)
    assert part.grad_norm_sq is None and part.dist_to_opt is None
    assert "grad_norm_sq" not in part.to_xarray()
    with pytest.raises(ValueError, match="'hessian'"):
        dpsim.simulate(logreg, optimizers.get("sgd"), steps=1, batch_size=8, metrics=("hessian",))


def test_seed_sequence_is_recorded_rebuildably(logreg):
    ss = np.random.SeedSequence(1234, spawn_key=(3,))
    res = dpsim.simulate(logreg, optimizers.get("dp_sgd"), steps=3, batch_size=8, trials=2, seed=ss)
    c = res.config["seed"]
    again = np.random.SeedSequence(c["entropy"], spawn_key=tuple(c["spawn_key"]))
    res2 = dpsim.simulate(logreg, optimizers.get("dp_sgd"), steps=3, batch_size=8, trials=2, seed=again)
    np.testing.assert_array_equal(res.params, res2.params)


def test_record_norms_by_row_blocks_equal_the_whole_array_expression(monkeypatch):
    """The records' ``‖∇F‖²`` and ``‖w − w*‖`` are computed by row blocks (no ``(R, d)``
    temporary); every block size gives the numbers of ``xp.sum(x * x, axis=1)`` on the whole
    array."""
    from dpsim import engine

    rng = np.random.default_rng(0)
    a = rng.standard_normal((37, 1001))
    c = rng.standard_normal((1, 1001))
    whole = np.sum(a * a, axis=1)
    whole_c = np.sum((a - c) * (a - c), axis=1)
    for rows_bytes in (1, 8 * 1001, 8 * 1001 * 5, 2**30):
        monkeypatch.setattr(engine, "RECORD_ROW_BYTES", rows_bytes)
        np.testing.assert_array_equal(engine._row_sq_norms(np, a), whole)
        np.testing.assert_array_equal(engine._row_sq_norms(np, a, c), whole_c)
