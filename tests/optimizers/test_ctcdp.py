"""Budget-constrained DP-SGD under ctCDP (``dp_sgd_ctcdp``, [L2P] App. A–B).

Oracles: the budget invariant as a hypothesis property (budgets and schedules drawn by the public
strategies of :mod:`dpsim.testing.strategies`, from ``dp_sgd_ctcdp``'s declared ranges), a naive
single-trial reference with the engine's noise draws injected, a χ² confidence interval for the
noise scale and a Kolmogorov–Smirnov test of its Gaussian law (``assert_distribution_matches``),
and the tCDP → DP conversion of the privacy record.
"""

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st
from scipy import stats

import dpsim
from dpsim.optimizers import ctcdp as C
from dpsim import problems
from dpsim.privacy import tcdp
from dpsim.backend import Backend
from dpsim.transforms import StepContext
from dpsim.testing import assert_distribution_matches
from dpsim.testing.strategies import dp_budgets, hyperparameter

from support.naive import clip as naive_clip
from support.naive import example_grad, streams


@pytest.fixture(scope="module")
def quad():
    return problems.random_quadratic(seed=3)  # [L2P] App. C.1: m = 60, d = 2


def _opt(**kw):
    base = dict(lr=0.002, clip=1.0, epsilon=0.05, delta=1e-8)
    base.update(kw)
    return dpsim.optimizers.get("dp_sgd_ctcdp", **base)


def _step_costs(pl, schedule, param, T, steps, noise_norm=False):
    """ρ_t for t = 1..steps from the documented schedule formula (by hand, not via the module)."""
    D = pl["sensitivity"]
    sg, smin = pl["sigma_g"], pl["sigma_min"]
    t = np.arange(1, steps + 1)
    tau = np.clip((np.minimum(t, T) - 1) / (T - 1), 0, 1) if T > 1 else np.zeros(steps)
    tau_all = (np.arange(1, T + 1) - 1) / (T - 1) if T > 1 else np.zeros(1)
    if schedule == "uniform":
        phi, phi_all = np.ones(steps), np.ones(T)
    elif schedule == "linear":
        phi, phi_all = 1 + param * (1 - 2 * tau), 1 + param * (1 - 2 * tau_all)
    else:
        phi, phi_all = np.exp(param * (1 - 2 * tau)), np.exp(param * (1 - 2 * tau_all))
    kappa = math.sqrt(np.mean(phi_all ** -2.0))
    sig = np.clip(sg * kappa * phi, smin, 2 * sg) * (1 + C.ROUNDING_GUARD)
    cost = 13 * pl["q"] ** 2 * D ** 2 / (2 * sig ** 2)
    if noise_norm:
        cost = cost + 13 * pl["q"] ** 2 * D ** 2 / (2 * (sg * (1 + C.ROUNDING_GUARD)) ** 2)
    return sig, cost


def test_registered_and_plan_is_algorithm_3_with_replace_one_sensitivity(quad):
    assert "dp_sgd_ctcdp" in dpsim.optimizers.names()
    pl = C.plan(0.05, 1e-8, 30, quad.n, 0.7)
    ref = tcdp.init_budget(0.05, 1e-8, 30, quad.n, 1.4)
    for k in ("rho_tot", "sigma_g", "sigma_min", "q", "batch_size"):
        assert pl[k] == ref[k]
    assert pl["adjacency"] == "replace-one" and pl["sensitivity"] == pytest.approx(1.4)
    assert pl["norm_sq_sensitivity"] == pytest.approx(4 * 5 * 0.49)


def test_uniform_takes_exactly_the_planned_steps_then_stops(quad):
    T = 30
    pl = C.plan(0.05, 1e-8, T, quad.n, 1.0)
    res = dpsim.simulate(quad, _opt(planned_steps=T), steps=T + 7, batch_size=pl["batch_size"],
                         sampling="fixed", trials=16, seed=4, record_every=1)
    taken = res.records["steps_taken"]
    spent = res.records["rho_spent"]
    assert np.all(taken[-1] == T)
    np.testing.assert_array_equal(taken[:, 0], np.minimum(res.steps, T))
    assert np.all(spent[-1] <= pl["rho_tot"]) and np.all(spent[-1] >= pl["rho_tot"] * (1 - 1e-8))
    assert np.all(np.diff(spent, axis=0) >= 0) and np.all(spent[0] == 0)
    # stopped trials do not move
    w_hist = res.loss[T:]
    assert np.all(w_hist == w_hist[0])
    np.testing.assert_allclose(res.records["sigma"][1], pl["sigma_g"] * (1 + C.ROUNDING_GUARD))
    rec = res.privacy
    assert rec["kind"] == "ctcdp" and rec["steps_taken"] == [T] * 16
    assert rec["rho_tot"] == pytest.approx(pl["rho_tot"]) and rec["planned_steps"] == T
    # Result.epsilon at the budget's δ is at most the budget's ε (equal up to the rounding guard)
    eps = res.epsilon(1e-8)
    assert eps <= 0.05 and eps == pytest.approx(0.05, rel=1e-8)
    # any other δ is answered from Theorem A.1 with ω_a
    assert res.epsilon(1e-5) == pytest.approx(
        tcdp.tcdp_to_dp(spent[-1][0], tcdp.omega_a(0.05, 1e-8), 1e-5))
    assert res.epsilon(1e-12) > 0.05


def test_privacy_record_survives_save_and_load(quad, tmp_path):
    pl = C.plan(0.1, 1e-6, 20, quad.n, 1.0)
    res = dpsim.simulate(quad, _opt(epsilon=0.1, delta=1e-6, schedule="linear", schedule_param=[0.0, 0.4]),
                         steps=20, batch_size=pl["batch_size"], sampling="fixed", trials=2)
    res.save(tmp_path / "r.npz")
    back = dpsim.load(tmp_path / "r.npz")
    np.testing.assert_array_equal(back.epsilon(1e-6), res.epsilon(1e-6))
    np.testing.assert_array_equal(back.records["steps_taken"], res.records["steps_taken"])
    assert res.to_xarray()["probe_rho_spent"].shape == res.records["rho_spent"].shape


def test_budget_record_when_no_step_is_taken(quad):
    pl = C.plan(0.05, 1e-8, 30, quad.n, 1.0)
    res = dpsim.simulate(quad, _opt(planned_steps=30), steps=0, batch_size=pl["batch_size"],
                         sampling="fixed", trials=2)
    assert res.epsilon(1e-8) == 0.0 and res.privacy["steps_taken"] == [0, 0]


HP = dpsim.optimizers.hyperparameters("dp_sgd_ctcdp")  # the declared ranges the draws come from


@given(budget=dp_budgets(epsilon=(0.02, 1.0), delta=[1e-8, 1e-5]),
       T=hyperparameter(HP["planned_steps"], (8, 40), name="planned_steps"),
       extra=st.integers(0, 12),  # steps run past the planned horizon
       schedule=hyperparameter(HP["schedule"]), param=hyperparameter(HP["schedule_param"], (-0.9, 0.9)),
       noise_norm=hyperparameter(HP["noise_norm"]))
def test_never_spends_more_than_the_budget(quad, budget, T, extra, schedule, param, noise_norm):
    eps, delta = budget
    pl = C.plan(eps, delta, T, quad.n, 1.0, noise_norm=noise_norm)
    R = 6
    params = [param * (r / (R - 1)) for r in range(R)]  # per-trial schedule parameters
    opt = _opt(epsilon=eps, delta=delta, schedule=schedule, schedule_param=params,
               noise_norm=noise_norm, planned_steps=T)
    steps = T + extra
    res = dpsim.simulate(quad, opt, steps=steps, batch_size=pl["batch_size"], sampling="fixed",
                         trials=R, seed=1, metrics=())
    spent = np.asarray(res.privacy["rho_spent"])
    taken = np.asarray(res.privacy["steps_taken"])
    assert np.all(spent <= pl["rho_tot"])
    assert np.all(taken <= steps)
    for r in range(R):
        _, cost = _step_costs(pl, schedule, params[r], T, steps + 1, noise_norm)
        k = taken[r]
        assert spent[r] == pytest.approx(cost[:k].sum(), rel=1e-12)
        # the trial stopped only because the next step did not fit (or the run ended)
        assert k == steps or cost[: k + 1].sum() > pl["rho_tot"] * (1 - 1e-12)
        if schedule == "uniform" or params[r] == 0:
            assert k == T
    assert np.all(np.asarray(res.epsilon(delta)) <= eps)


def test_clamping_to_2_sigma_g_ends_a_schedule_early(quad):
    # exponential with p = 1.2: the early σ_t would exceed 2σ_g; clamped down, they cost more
    T = 30
    pl = C.plan(0.05, 1e-8, T, quad.n, 1.0)
    sig = C.noise_schedule("exponential", np.arange(1, T + 1), T, sigma_g=pl["sigma_g"],
                           sigma_min=pl["sigma_min"], param=1.2)
    assert sig.max() == pytest.approx(2 * pl["sigma_g"]) and sig.min() >= pl["sigma_min"]
    res = dpsim.simulate(quad, _opt(schedule="exponential", schedule_param=1.2), steps=T,
                         batch_size=pl["batch_size"], sampling="fixed", trials=3, metrics=())
    assert 0 < res.privacy["steps_taken"][0] < T


def test_noise_scale_matches_sigma_t():
    """Privatizer with zero gradients: updates are σ_t ξ / b; χ² 1e-6 two-sided CI on the variance."""
    n, T, R, d = 60, 20, 4000, 3
    pl = C.plan(0.5, 1e-6, T, n, 0.8)
    b = pl["batch_size"]
    tx = C.ctcdp_privatizer(0.8, 0.5, 1e-6, schedule="linear", schedule_param=0.6)

    class ZeroBatch:
        batch_size = b

        def clipped_sum(self, clip=None, scale=None):
            return np.zeros((R, d))

    ctx = StepContext(Backend("numpy", 7), R, b, T, n=n, sampling="fixed")
    params = np.zeros((R, d))
    state = tx.init(params)
    sig = C.noise_schedule("linear", np.arange(1, T + 1), T, sigma_g=pl["sigma_g"],
                           sigma_min=pl["sigma_min"], param=0.6)
    _, cost = _step_costs(pl, "linear", 0.6, T, T)
    fits = np.cumsum(cost) <= pl["rho_tot"]
    assert fits[0] and not fits[-1]  # early σ_t clamped down to 2σ_g: the last step does not fit
    N = R * d
    lo, hi = stats.chi2.ppf(5e-7, N) / N, stats.chi2.ppf(1 - 5e-7, N) / N
    standardized = []
    for t in range(1, T + 1):
        ctx.t = t
        u, state = tx.update(ZeroBatch(), state, params, ctx)
        if fits[t - 1]:
            ratio = np.mean((np.asarray(u) * b) ** 2) / sig[t - 1] ** 2
            assert lo <= ratio <= hi, (t, ratio)
            standardized.append(np.asarray(u) * b / sig[t - 1])
        else:
            assert np.all(np.asarray(u) == 0)
    # the law, not only the scale: every update of a step that fits is σ_t ξ / b, ξ ~ N(0, I)
    assert_distribution_matches(np.concatenate(standardized), stats.norm(0.0, 1.0), alpha=1e-6,
                                what="b u_t / sigma_t")
    assert np.all(state.steps_taken == fits.sum())
    assert np.all(state.rho_spent <= pl["rho_tot"])


def naive_dp_sgd_ctcdp(problem, *, lr, clip_norm, epsilon, delta, schedule, param, planned_steps,
                       steps, trials, seed, noise_norm=False):
    """One trial at a time, from the module docstring: budget check, clip, noise, step."""
    pl = C.plan(epsilon, delta, planned_steps, problem.n, clip_norm, noise_norm=noise_norm)
    b = pl["batch_size"]
    sig, cost = _step_costs(pl, schedule, param, planned_steps, steps, noise_norm)
    sampler, noise_rng = streams(seed, problem.n, b, trials, "fixed")
    d = problem.d
    w = np.zeros((trials, d))
    spent = np.zeros(trials)
    taken = np.zeros(trials, dtype=int)
    active = np.ones(trials, dtype=bool)
    norms = np.full(trials, np.nan)
    for t in range(steps):
        bi = sampler.draw()
        take = active & (spent + cost[t] <= pl["rho_tot"])
        active = take
        if not take.any():
            continue
        z = noise_rng.standard_normal((trials, d))
        zn = noise_rng.standard_normal(trials) if noise_norm else None
        for r in range(trials):
            if not take[r]:
                continue
            total = np.zeros(d)
            for i in bi.idx[r]:
                total += naive_clip(example_grad(problem, w[r], int(i)), clip_norm)
            if noise_norm:
                dns = max(4 * (b - 1), 1) * clip_norm ** 2
                norms[r] = (total @ total + pl["noise_multiplier"] * (1 + C.ROUNDING_GUARD) * dns * zn[r]) / b ** 2
            w[r] = w[r] - lr * (total + sig[t] * z[r]) / b
            spent[r] += cost[t]
            taken[r] += 1
    return w, spent, taken, norms


@pytest.mark.parametrize("schedule,param,noise_norm", [("uniform", 0.0, False), ("exponential", -0.7, True),
                                                       ("linear", 0.5, False)])
def test_matches_naive_reference(quad, schedule, param, noise_norm):
    kw = dict(epsilon=0.4, delta=1e-5, planned_steps=12)
    T = 12
    steps = 18
    w, spent, taken, norms = naive_dp_sgd_ctcdp(quad, lr=0.01, clip_norm=2.0, schedule=schedule,
                                                param=param, steps=steps, trials=3, seed=11,
                                                noise_norm=noise_norm, **kw)
    pl = C.plan(0.4, 1e-5, T, quad.n, 2.0, noise_norm=noise_norm)
    opt = _opt(lr=0.01, clip=2.0, schedule=schedule, schedule_param=param, noise_norm=noise_norm, **kw)
    res = dpsim.simulate(quad, opt, steps=steps, batch_size=pl["batch_size"], sampling="fixed",
                         trials=3, seed=11, metrics=())
    np.testing.assert_allclose(res.params, w, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(res.privacy["rho_spent"], spent, rtol=1e-12)
    assert res.privacy["steps_taken"] == taken.tolist()
    if noise_norm:
        np.testing.assert_allclose(res.records["noisy_norm_sq"][-1], norms, rtol=1e-10)
    if schedule == "uniform":
        assert taken.tolist() == [T] * 3


def test_per_trial_budgets_and_array_api_strict_backend(quad):
    eps = [0.05, 0.1, 0.4]
    pl = C.plan(np.array(eps), 1e-8, 30, quad.n, 1.0)
    assert pl["batch_size"].tolist() == [6, 6, 6]
    res = dpsim.simulate(quad, _opt(epsilon=eps, lr=[0.001, 0.002, 0.003]), steps=30, batch_size=6,
                         sampling="fixed", trials=3, backend="array_api_strict", metrics=("loss",))
    out = res.epsilon(1e-8)
    assert out.shape == (3,) and np.all(out <= np.array(eps)) and np.allclose(out, eps, rtol=1e-8)


def test_wrong_sampler_or_batch_size_errors(quad):
    pl = C.plan(0.05, 1e-8, 30, quad.n, 1.0)
    with pytest.raises(ValueError, match="sampling='fixed', batch_size=6"):
        dpsim.simulate(quad, _opt(), steps=30, batch_size=6, sampling="poisson")
    with pytest.raises(ValueError, match="got batch_size=10.*batch_size=6"):
        dpsim.simulate(quad, _opt(), steps=30, batch_size=10, sampling="fixed")
    assert pl["batch_size"] == 6


@pytest.mark.parametrize("kw,match", [
    ({"schedule": "cosine"}, "schedule 'cosine'"),
    ({"schedule": "linear", "schedule_param": 1.5}, "schedule_param=1.5"),
    ({"delta": 2.0}, "delta=2.0"),
    ({"epsilon": -1.0}, "epsilon"),
    ({"planned_steps": 0}, "planned_steps=0"),
    ({"noise_norm": "yes"}, "noise_norm='yes'"),
])
def test_invalid_hyperparameters(kw, match):
    with pytest.raises(ValueError, match=match):
        _opt(**kw)


def test_infeasible_plan_is_reported_before_training(quad):
    # one step of a large budget on 60 examples: no q ≤ 0.1 satisfies (10a)
    with pytest.raises(ValueError, match="more steps"):
        dpsim.simulate(quad, _opt(epsilon=4.0), steps=1, batch_size=6, sampling="fixed")
