"""[DP2] rows and bounds added for issue 34 ("theorem checks with teeth"): Theorem 2 in its proof
form at the tightest searched instance and as printed where it fails, Corollary 1's rate, the
delay–noise trade-off, h(s) at its tight (full-batch) instance; and the parts of
:mod:`dpsim.analysis.delay` that mutation testing found untested (the proof form's terms, the
printed rate, the tracer's default ε_a, ``HTraces.steps``, a one-step trace, the trade-off
derivative at ``c3 = c4 = 0``).

Oracles are independent: plain-Python loops over the formulas of [DP2] Theorem 2 / Eqs. (15),
(18), (22)–(24), closed forms of the noiseless runs, and the rows' own numbers recomputed here.
Statistical rows use the checks' fixed seeds; the assertions here are about what each row claims.
"""

import dataclasses
import math

import numpy as np
import pytest

import dpsim
from dpsim.analysis import delay as D
from dpsim.analysis.checks import dp2


# ------------------------------------------------------------------------------------------------
# Theorem 2, proof form: an independent reference


def _naive_theorem2_proof(R, C, sig, b, T, s, d, eps, beta, h, D_l1=None, kappa=None):
    """(1/T)[Σ_{t∈T_v} R² D_t/(2α^t) + κ D_T/α^T + Σ_t (α^t/2)(σC/b)² D_t] with the rate
    α^t = α^{⌊(t−1)/s⌋+1}/√t (Eq. 18 at the 0-based index; Hermite's identity), term by term.
    Returns (first, second)."""
    M = C * C + sig * sig * C * C / (s * b * b)
    alpha = min(eps, 1.0 / (math.sqrt(M) + eps), 1.0)
    if kappa is None:
        kappa = max(alpha * alpha * C * C, C * h / (eps * math.sqrt(1.0 - beta)))
    if D_l1 is None:
        D_l1 = [d * (math.sqrt(M) + eps) if (t - 1) % (2 * s) >= s else float(d)
                for t in range(1, T + 1)]
    lr = [alpha ** ((t - 1) // s + 1) / math.sqrt(t) for t in range(1, T + 1)]
    Tv = list(range(2 * s, T + 1, 2 * s))
    if not Tv or Tv[-1] != T:
        Tv.append(T)
    first = sum(R * R * D_l1[t - 1] / (2.0 * lr[t - 1]) for t in Tv) + kappa * D_l1[T - 1] / lr[T - 1]
    second = sum(lr[t - 1] / 2.0 * (sig * C / b) ** 2 * D_l1[t - 1] for t in range(1, T + 1))
    return first / T, second / T


@pytest.mark.parametrize("args", [
    (4.0, 2.0, 1.0, 16, 100, 25, 10, 1.0, 0.9, 0.7),   # four switch steps
    (1.0, 0.5, 3.0, 4, 37, 5, 3, 0.1, 0.5, 2.0),       # eps < 1: α = ε; last block partial
    (3.0, 1.5, 2.0, 1, 60, 7, 4, 0.3, 0.99, 1.3),
    (2.0, 0.3, 16.0, 1, 40, 20, 1, 1.0, 0.9, 0.2),     # the wall instance's shape, one switch
    (2.0, 0.3, 1.0, 4, 40, 20, 1, 1.0, 0.9, 0.2),      # small M: α = 1/(√M + ε) ≈ 0.77 > 1/2
])
def test_theorem2_proof_form_matches_the_naive_terms(args):
    rhs, first, second, kappa, alpha, M = D.theorem2_rhs(*args, form="proof", terms=True)
    f, n = _naive_theorem2_proof(*args)
    assert second > 0  # σ > 0: the noise term is exercised
    assert first == pytest.approx(f, rel=1e-12) and second == pytest.approx(n, rel=1e-12)
    assert rhs == pytest.approx(f + n, rel=1e-12)
    T = args[4]
    Dl = np.linspace(1.0, 3.0, T)
    f2, n2 = _naive_theorem2_proof(*args, D_l1=list(Dl), kappa=500.0)
    assert D.theorem2_rhs(*args, D_l1=Dl, kappa=500.0, form="proof") == pytest.approx(f2 + n2, rel=1e-12)


def test_theorem2_proof_form_hand_value_with_noise():
    # T = 2, s = 1, d = 1, R = C = 1, σ = 1, b = 1, ε = 1, β = 3/4, h = 1/2, D = (1, 3):
    # M = 1 + 1 = 2, α = min(1, 1/(√2 + 1), 1) = √2 − 1, κ = max(α², (1/2)/(1/2)) = 1.
    # Rates: α^1 = α, α^2 = α²/√2; T_v = {2}.
    # first = (1/2)[R²·3/(2α²/√2) + κ·3/(α²/√2)] = (1/2)(3√2/(2α²) + 3√2/α²) = 9√2/(4α²)
    # second = (1/2)[(α/2)·1·1 + (α²/(2√2))·1·3] = α/4 + 3α²/(4√2)
    a = math.sqrt(2.0) - 1.0
    rhs, first, second, kappa, alpha, M = D.theorem2_rhs(1, 1, 1, 1, 2, 1, 1, 1.0, 0.75, 0.5,
                                                         D_l1=np.array([1.0, 3.0]), form="proof",
                                                         terms=True)
    assert (alpha, M, kappa) == (pytest.approx(a), pytest.approx(2.0), pytest.approx(1.0))
    # α = min{ε, 1/(√M + ε), 1}: with ε = 1 and M = 1/100 it is 1/1.1, above one half
    assert D.theorem2_rhs(1, 0.1, 0, 1, 2, 1, 1, 1.0, 0.75, 0.5, terms=True)[4] == pytest.approx(1 / 1.1)
    assert first == pytest.approx(9 * math.sqrt(2) / (4 * a * a), rel=1e-12)
    assert second == pytest.approx(a / 4 + 3 * a * a / (4 * math.sqrt(2)), rel=1e-12)


def test_theorem2_printed_rate_takes_the_floors_at_t():
    t = np.arange(1, 200)
    for s in [1, 2, 5, 13]:
        a = 0.4
        printed = D.theorem2_lr(t, s, a, zero_based=False)
        np.testing.assert_allclose(printed, a ** (t // s + 1) / np.sqrt(t), rtol=1e-13)
        code = D.theorem2_lr(t, s, a)
        np.testing.assert_allclose(code, a ** ((t - 1) // s + 1) / np.sqrt(t), rtol=1e-13)
        # they differ exactly at t = k s: the printed rate drops one step before the switch
        differ = ~np.isclose(printed, code, rtol=1e-13, atol=0.0)
        np.testing.assert_array_equal(differ, t % s == 0)


# ------------------------------------------------------------------------------------------------
# the tracer: default ε_a, steps/trials, init, one-step traces


def test_tracer_reads_eps_from_the_optimizer_and_defaults_to_dp2s():
    # an optimizer whose recorded hyperparameters omit eps uses DP²'s default ε_a = 1e-8 in the
    # tracer's ||D^t||_1 and in HTraces.eps (the transform itself was built with eps = 1e-8)
    from dpsim.transforms import lookup

    p = dpsim.problems.logistic_regression(60, 4, seed=3)
    opt = dpsim.optimizers.get("dp2_rmsprop", s1=2, s2=2, lr=0.5, lr2=0.05, clip=1.0,
                               noise_multiplier=1.0, beta=0.9)
    assert opt.hyperparameters["eps"] == 1e-8
    hp = {k: v for k, v in opt.hyperparameters.items() if k != "eps"}
    bare = dataclasses.replace(opt, hyperparameters=hp)
    traced = D._traced_optimizer(bare)
    probes = dict(traced.probes)
    probes["v0"] = lambda st, w, ctx: lookup(st, "preconditioner").v[:, 0]
    probes["v1"] = lambda st, w, ctx: lookup(st, "preconditioner").v[:, 1]
    probes["v2"] = lambda st, w, ctx: lookup(st, "preconditioner").v[:, 2]
    probes["v3"] = lambda st, w, ctx: lookup(st, "preconditioner").v[:, 3]
    res = dpsim.simulate(p, dataclasses.replace(traced, probes=probes), steps=9, batch_size=8,
                         trials=3, seed=2, sampling="fixed", record_every=1, metrics=())
    V = np.stack([np.asarray(res.records[f"v{j}"]) for j in range(4)], axis=-1)
    adaptive = np.asarray(res.records["h_D_l1"])[V.sum(axis=-1)[:, 0] > 0]
    assert adaptive.size > 0
    want = np.sum(np.sqrt(np.maximum(V, 0.0)) + 1e-8, axis=-1)
    np.testing.assert_allclose(np.asarray(res.records["h_D_l1"]), want, rtol=0, atol=1e-15)
    tr = D.HTraces.from_result(res)
    assert tr.eps == 1e-8


def test_htraces_steps_and_trials_are_the_two_axes():
    p = dpsim.problems.logistic_regression(60, 3, seed=1)
    tr = D.record_h_traces(p, 2, steps=11, batch_size=6, trials=4, seed=0, metrics=())
    assert (tr.steps, tr.trials) == (11, 4)
    assert tr.g_l1.shape == (11, 4)


def test_record_h_traces_starts_at_init():
    p, w_star = dp2._wall_problem(0.3, 0)
    tr = D.record_h_traces(p, 2, steps=6, batch_size=1, trials=2, seed=1, noise_multiplier=0.0,
                           clip=0.3, eps=1.0, lr=0.1, init=np.array([-w_star]))
    # F(w) − F* = c (1 − w w*) on the 1-D wall problem: 0.6 at the far corner
    np.testing.assert_allclose(tr.excess[0], 0.6, rtol=1e-12)
    assert np.all(np.diff(tr.excess[:, 0]) < 0)  # noiseless: the iterate climbs towards w*


def test_trace_state_starts_empty_and_keeps_the_closed_window():
    # before any step nothing is measured (the step-0 records are 0 even from a nonzero start),
    # and during an adaptive phase the window sum is the one of the SGD phase that closed it
    p = dpsim.problems.logistic_regression(80, 3, seed=4)
    s = 3
    tr = D.record_h_traces(p, s, steps=4 * s, batch_size=8, trials=2, seed=3, metrics=(), lr=0.3,
                           lr2=0.03, init=np.array([0.5, -1.0, 2.0]))
    rec = tr.result.records
    for k in ("h_g_l1", "h_diff_l1", "h_b_l1"):
        np.testing.assert_array_equal(np.asarray(rec[k])[0], 0.0)
    b = np.asarray(rec["h_b_l1"])
    assert np.all(b[s] > 0)
    for cyc in (0, 1):
        closed = b[cyc * 2 * s + s]  # record after the last SGD step of the phase
        for t in range(cyc * 2 * s + s + 1, cyc * 2 * s + 2 * s + 1):  # its adaptive steps
            np.testing.assert_array_equal(b[t], closed)
        assert not np.allclose(b[cyc * 2 * s + s - 1], closed)  # it did grow inside the phase


def test_a2_bound_default_drift_reads_the_second_step_on():
    # a two-step trace: M' is the one consecutive difference ||g^2 − g^1||_1 (row 1 of diff_l1)
    two = np.ones((2, 2))
    diff = np.array([[0.0, 0.0], [0.3, 0.5]])
    tr = D.HTraces(s1=1, s2=1, d=1, eps=1.0, g_l1=two, acc_l1=two, b_l1=two, diff_l1=diff,
                   D_l1=two, dist=np.array([1.0, 1.0]), adaptive=np.array([False, True]))
    assert D.h_bound_a2(tr) == pytest.approx((1.0 + 1.0 * 0.5) / 2.0, rel=1e-14)
    assert D.h_bound_a2(tr, form="paper") == pytest.approx(1.0 / 2.0 + 1 * 0.5 / 1.0, rel=1e-14)
    # ε_a = 0 with no drift: Eq. (57)'s s M'/(dε) is 0/0, taken as 0 (no drift, no term)
    still = dataclasses.replace(tr, eps=0.0, diff_l1=np.zeros((2, 2)))
    assert D.h_bound_a2(still, form="paper") == pytest.approx(1.0, rel=1e-14)
    assert D.h_bound_a2(dataclasses.replace(still, diff_l1=diff), form="paper") == math.inf


def _naive_corollary1(T, s, d, C, sig, b, eps, D_l1=None):
    """(1/√T) max_{t∈T_s} D_t + (1/T) Σ_t (σC/b)² D_t/√t, with Lemma 1's D when none is given."""
    M = C * C + sig * sig * C * C / (s * b * b)
    if D_l1 is None:
        D_l1 = [d * (math.sqrt(M) + eps) if (t - 1) % (2 * s) >= s else float(d)
                for t in range(1, T + 1)]
    Ts = list(range(2 * s, T + 1, 2 * s))
    if not Ts or Ts[-1] != T:
        Ts.append(T)
    return (max(D_l1[t - 1] for t in Ts) / math.sqrt(T)
            + sum((sig * C / b) ** 2 * D_l1[t - 1] / math.sqrt(t) for t in range(1, T + 1)) / T)


@pytest.mark.parametrize("args", [(100, 25, 10, 2.0, 1.0, 16, 1.0), (37, 5, 3, 0.5, 3.0, 4, 0.1),
                                  (60, 60, 2, 1.0, 0.0, 8, 2.0), (41, 20, 1, 0.2, 4.0, 1, 1.0)])
def test_corollary1_matches_the_naive_sum(args):
    assert D.corollary1_rhs(*args) == pytest.approx(_naive_corollary1(*args), rel=1e-12)
    T = args[0]
    Dl = np.stack([np.linspace(1.0, 4.0, T), np.linspace(4.0, 1.0, T)])
    got = D.corollary1_rhs(*args, D_l1=Dl)
    assert got.shape == (2,)
    for i in range(2):
        assert got[i] == pytest.approx(_naive_corollary1(*args, D_l1=list(Dl[i])), rel=1e-12)


def test_optimal_delay_fraction_finds_an_optimum_below_the_second_grid_point():
    # c4 = 0: d log f/dv = c2/(c1 + c2 v) − log(√c3 + ε)/v², zero at v0 when
    # c2 = L c1/(1 − L v0) with L = log(√c3 + ε)/v0²; v0 = 1.02e-4 lies between the first two
    # points of the search grid (1e-4 and 1e-4·1e4^(1/199) ≈ 1.047e-4), so only the refinement on
    # the bracket that starts at the first grid point can reach it
    c1, c3, eps, v0 = 1.0, 1.0, 5e-5, 1.02e-4
    L = math.log(math.sqrt(c3) + eps) / v0 ** 2
    c2 = L * c1 / (1.0 - L * v0)
    assert float(D.delay_tradeoff_dlogv(v0, c1, c2, c3, 0.0, eps)) == pytest.approx(0.0, abs=1e-6 * L)
    v_star, f_star = D.optimal_delay_fraction(c1, c2, c3, 0.0, eps)
    assert float(v_star) == pytest.approx(v0, rel=1e-5)
    assert float(f_star) < float(D.delay_tradeoff(1e-4, c1, c2, c3, 0.0, eps))


def test_htraces_eps_from_a_one_trial_per_trial_array():
    p = dpsim.problems.logistic_regression(60, 3, seed=1)
    tr = D.record_h_traces(p, 2, steps=7, batch_size=6, trials=1, seed=0, metrics=(),
                           eps=np.array([2e-3]))
    assert tr.eps == 2e-3


def test_a2_bound_of_a_one_step_trace_has_no_drift():
    # one recorded step: there is no consecutive difference, so M' = 0 and both forms of the A.2
    # bound reduce to E||b_t||_1/(E||G/s||_1 + dε) (a hand-built trace; dist_t = 2 would show M')
    one = np.ones((1, 2))
    tr = D.HTraces(s1=1, s2=1, d=2, eps=0.25, g_l1=0.8 * one, acc_l1=1.5 * one, b_l1=1.0 * one,
                   diff_l1=0.0 * one, D_l1=2.0 * one, dist=np.array([2.0]),
                   adaptive=np.array([True]))
    assert tr.steps == 1
    want = 1.0 / (1.5 + 2 * 0.25)
    assert D.h_bound_a2(tr) == pytest.approx(want, rel=1e-14)
    assert D.h_bound_a2(tr, form="paper") == pytest.approx(want, rel=1e-14)
    assert D.h_bound_a2(tr, M_diff=0.5) == pytest.approx((1.0 + 2.0 * 0.5) / 2.0, rel=1e-14)


def test_tradeoff_derivative_without_noise_terms():
    # c3 = c4 = 0: f(v) = (c1 + c2 v) ε^{(2+v)/(2v)}, d log f/dv = c2/(c1 + c2 v) − log(ε)/v²
    for v in (0.1, 0.5, 0.9):
        got = float(D.delay_tradeoff_dlogv(v, 1.0, 2.0, 0.0, 0.0, 1.5))
        assert math.isfinite(got)
        assert got == pytest.approx(2.0 / (1.0 + 2.0 * v) - math.log(1.5) / v ** 2, rel=1e-13)
        h = 1e-6 * v
        num = (float(D.delay_tradeoff(v + h, 1.0, 2.0, 0.0, 0.0, 1.5, log=True))
               - float(D.delay_tradeoff(v - h, 1.0, 2.0, 0.0, 0.0, 1.5, log=True))) / (2 * h)
        assert got == pytest.approx(num, rel=1e-5)


# ------------------------------------------------------------------------------------------------
# the rows


@pytest.fixture(scope="module")
def thm2_rows():
    return dp2._check_theorem2("quick", 0)


def test_theorem2_proof_row_is_tight_and_is_theorem2(thm2_rows):
    row = thm2_rows[0]
    assert row.check.startswith("dp2_theorem2 (proof form")
    assert row.verdict == "pass" and row.strengthened() == "fail"
    assert 1.0 < row.margin < 2.0
    # the bound is theorem2_rhs(form="proof") at the instance the row prints, recomputed from the
    # same run (h and E||D^t||_1 read back from the row's own simulation)
    k = dp2._THM2_WALL
    run = dp2._wall_run(8000, 200, 0, **k)
    rhs = D.theorem2_rhs(2.0, k["c"], k["sigma"], 1, 8000, 4000, 1, k["eps"], k["beta"], run["h"],
                         D_l1=run["Dl"], form="proof")
    assert row.bound == pytest.approx(float(rhs), rel=1e-12)
    assert row.estimate == pytest.approx(float(run["avg"].mean()), rel=1e-12)
    assert "Searched: (a) absolute regression" in row.detail


def test_theorem2_printed_row_shows_the_failure(thm2_rows):
    row = thm2_rows[1]
    assert row.check == "dp2_theorem2 (printed form, violated)" and row.verdict == "reported"
    k = dp2._THM2_PRINTED
    c, eps, beta, s = k["c"], k["eps"], k["beta"], k["s"]
    T = s + 1
    # the noiseless run in closed form: w^{t+1} = w^t + c·lr_t from −1 (w* = 1 after a flip of
    # sign), lr_t = α^{⌊t/s⌋+1}/√t as printed; F(w^T) − F* = c (1 − w^T)
    alpha = min(eps, 1.0 / (c + eps), 1.0)
    t = np.arange(1, T)
    w_T = min(-1.0 + c * float(np.sum(alpha ** (t // s + 1) / np.sqrt(t))), 1.0)
    assert row.estimate == pytest.approx(c * (1.0 - w_T), rel=1e-9)
    # the printed right-hand side, by hand: σ = 0 leaves (R² + κ)/α^{e_T} · ||D^T||_1/√T, with
    # e_T = ⌊T/2s⌋ + ⌊(T+s)/2s⌋ = 1, ||D^T||_1 = √((1−β)c²) + ε, h = 1 + ε (§4.1's form)
    D_T = math.sqrt((1.0 - beta) * c * c) + eps
    kappa = max(alpha ** 2 * c * c, c * (1.0 + eps) / (eps * math.sqrt(1.0 - beta)))
    assert row.bound == pytest.approx((4.0 + kappa) / alpha * D_T / math.sqrt(T), rel=1e-9)
    assert row.estimate > row.bound


@pytest.fixture(scope="module")
def cor1_row():
    return dp2._check_corollary1("quick", 0)


def test_corollary1_row_compares_exponents(cor1_row):
    row = cor1_row
    assert row.verdict == "pass" and row.strengthened() == "fail"
    # Corollary 1's own exponent between T = 1000 and 4000, from its formula with Lemma 1's
    # E||D^t||_1 (the row uses the simulated one: the two agree to the few-percent size of √v)
    k = dp2._COR1_WALL
    c1 = D.corollary1_rhs(1000, 500, 1, k["c"], k["sigma"], 1, k["eps"])
    c4 = D.corollary1_rhs(4000, 2000, 1, k["c"], k["sigma"], 1, k["eps"])
    p_formula = math.log(float(c1) / float(c4)) / math.log(4.0)
    assert row.bound == pytest.approx(p_formula, abs=0.01)
    assert 0.45 < row.bound < 0.5  # 1/√T up to Σ 1/√t = 2√T + ζ(1/2) + …
    lo, hi = row.estimate - row.ci, row.estimate + row.ci
    assert lo <= row.bound <= hi and not (lo <= 2 * row.bound <= hi) and not (lo <= row.bound / 2 <= hi)


def test_tradeoff_row_region():
    row = dp2._check_tradeoff("quick", 0)
    assert row.verdict in ("pass", "sanity") and row.holds(1.0)
    s_list, trs, T, R, hp = dp2._h_standin_runs("quick", 0)
    fit = D.fit_h(s_list, [D.h_of_s(tr) for tr in trs])
    Rad = max(float(np.max(tr.result.dist_to_opt)) for tr in trs)
    consts = D.tradeoff_constants(Rad, 1.0, 1.0, 32, T, fit, hp["eps"], hp["beta"])
    v_s = float(D.optimal_delay_fraction(*consts, hp["eps"])[0])
    assert row.bound == pytest.approx(v_s, rel=1e-12)
    v_e, inside = dp2._tradeoff_region(consts, hp["eps"], T)
    # the exact form's minimizer over v = s/T, by brute force
    grid = np.arange(1, T + 1) / T
    f = [float(D.delay_tradeoff(v, *consts, hp["eps"], exact=True)) for v in grid]
    assert v_e == pytest.approx(grid[int(np.argmin(f))]) and row.estimate == pytest.approx(v_e)
    assert inside(v_s) and inside(v_e)
    if row.verdict == "pass":
        assert not inside(2 * v_s) or not inside(v_s / 2)


@pytest.fixture(scope="module")
def h_rows():
    return dp2._check_h("quick", 0)


def test_h_rows_are_tight_at_full_batch(h_rows):
    full = [r for r in h_rows if "full batch" in r.check]
    assert len(full) == 4
    for r in full:
        assert r.verdict == "pass" and r.strengthened() == "fail"
        assert r.estimate <= r.bound < 2 * r.estimate
    # the drift term's share grows with s: the (3s−1)/2 weight is exercised
    assert [r.margin for r in full] == sorted(r.margin for r in full)
    assert full[-1].margin > full[0].margin * 1.1
    fit = h_rows[-1]
    assert fit.check.startswith("dp2_h_of_s (fit")


def test_theorem3_forms_differ_by_the_factor_sqrt_m_plus_eps():
    """Eq. (81) carries √M + ε where the statement (Eq. 83) prints √M + 1: equal at ε = 1, and the
    ratio of the two right-hand sides is (√M + ε)/(√M + 1) for any other ε."""
    C, sig, s, b = 2.0, 3.0, 1, 2
    M = C * C + sig * sig * C * C / (s * b * b)
    args = (1.0, 1.0, 10, 0.25, C, sig, b, s, 3, 0.5)
    assert D.theorem3_rhs(*args, 1.0, form="proof") == D.theorem3_rhs(*args, 1.0)
    for eps in (0.25, 4.0, 64.0):
        ratio = D.theorem3_rhs(*args, eps, form="proof") / D.theorem3_rhs(*args, eps, form="printed")
        assert ratio == pytest.approx((math.sqrt(M) + eps) / (math.sqrt(M) + 1.0), rel=1e-12)
    with pytest.raises(ValueError, match="form"):
        D.theorem3_rhs(*args, 1.0, form="main")


def test_theorem3_rows_tight_vacuous_and_printed_failure():
    rows = dp2._check_theorem3("quick", 0)
    kinds = {r.check: r.verdict for r in rows}
    assert kinds == {"dp2_theorem3 (tight quadratic)": "pass", "dp2_theorem3 (logistic)": "vacuous",
                     "dp2_theorem3 (printed, eps_a=64)": "reported"}
    printed = rows[-1]
    # the printed bound is beaten by more than the CI, and by a clear factor
    assert printed.estimate - printed.ci > 2.0 * printed.bound
    assert "(holds)" in printed.detail
    vac = rows[1]
    assert 2.0 < vac.margin < 20.0 and "searched" in vac.detail and "Sanity only" not in vac.detail
