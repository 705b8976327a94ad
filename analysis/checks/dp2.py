"""``dpsim verify`` rows for [DP2] (Li et al., ICLR 2023): Lemma 1, h(s), Theorem 2 (at the tightest
instance of a documented search, and as printed where it fails), Corollary 1, the delay–noise
trade-off and Theorem 3, run through :func:`dpsim.simulate`.  The bounds and the h(s) tracer live in
:mod:`dpsim.analysis.delay`."""

from __future__ import annotations

import math

import numpy as np

from dpsim.transforms import lookup
from dpsim.analysis.checks import base as _b
from dpsim.analysis.checks.base import CheckResult, check
from dpsim.analysis.stats import z_one_sided
from dpsim.analysis.delay import (
    _traced_optimizer,
    corollary1_rhs,
    delay_tradeoff,
    fit_h,
    h_bound_a2,
    h_of_s,
    lemma1_bound,
    optimal_delay_fraction,
    record_h_traces,
    theorem2_alpha,
    theorem2_lr,
    theorem2_rhs,
    theorem3_rhs,
    tradeoff_constants,
)

FAMILY = "[DP2] delay"




_SRC = "[DP2]"


def _lemma1_run(problem, *, clip, sigma, b, s, beta, cycles, trials, seed, coords, **hp):
    """Run dp2_rmsprop and return ``(v, k)``: ``v[k, j, r]`` the delayed second moment after
    ``k`` refreshes (records every ``2s`` steps, where ``v`` only changes at refreshes)."""
    import dpsim

    opt = dpsim.optimizers.get("dp2_rmsprop", s1=s, s2=s, clip=clip, noise_multiplier=sigma,
                               beta=beta, **hp)
    probes = {f"v{j}": (lambda st, w, ctx, j=j: lookup(st, "preconditioner").v[:, j]) for j in coords}
    res = dpsim.simulate(problem, opt, steps=2 * s * cycles, batch_size=b, trials=trials,
                         seed=seed, sampling="fixed", record_every=2 * s, probes=probes, metrics=())
    v = np.stack([res.records[f"v{j}"] for j in coords], axis=1)  # (K, J, R)
    return v, res.steps // (2 * s)


def _lemma1_row(name, v, M, level, detail, why_loose=""):
    mean = v.mean(axis=-1)
    se = v.std(axis=-1, ddof=1) / math.sqrt(v.shape[-1])
    m = int(np.count_nonzero(se > 0)) or 1
    z = z_one_sided(level, m)
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.where(se > 0, (mean - M) / se, np.where(mean > M, np.inf, -np.inf))
    i = np.unravel_index(int(np.argmax(score)), score.shape)
    est, ci = float(mean[i]), float(z * se[i])
    lowest = float(np.max(mean - z * se))  # every coordinate's lower confidence end is <= this
    return _b.upper(
        name, f"{_SRC} Lemma 1", FAMILY, float(M), est, hi=lowest, ci=ci,
        relation=f"estimate - ci <= bound (one-sided {level:.1%}, Bonferroni over {m})",
        detail=detail, why_loose=why_loose)


@check("dp2_lemma1", family=FAMILY)
def _check_lemma1(scale, seed):
    """Lemma 1 on dp2_rmsprop: E[v_j] ≤ M = C² + σ²C²/(s b²) (fixed batches of b)."""
    import dpsim

    quick = scale == "quick"
    level = 0.999
    rows = []
    # (a) the proof's equality case: d = 1, every per-example gradient is the same vector of norm
    # 1 > C, so each clipped minibatch mean is exactly C, the clean part never depends on the
    # noise (linear loss: the cross term is 0) and E[v] = (1 − β^k) M after k refreshes.
    C, sig, b, s, beta, cycles = 0.5, 1.0, 8, 4, 0.5, 6
    R = 1000 if quick else 20000
    p = dpsim.problems.linear_box(200, 1, bias=1.0, seed=seed)
    v, k = _lemma1_run(p, clip=C, sigma=sig, b=b, s=s, beta=beta, cycles=cycles, trials=R,
                       seed=seed + 11, coords=[0], lr=0.1)
    M = lemma1_bound(C, sig, s, b)
    exact = (1.0 - beta ** k[-1]) * M
    se = float(v[-1, 0].std(ddof=1) / math.sqrt(R))
    rows.append(_lemma1_row(
        "dp2_lemma1 (equality case)", v, M, level,
        f"linear_box d=1 (all gradients equal, clipped), C={C}, sigma={sig}, b={b}, s={s}, "
        f"beta={beta}, R={R}; after k={k[-1]} refreshes the exact E[v] = (1-beta^k) M = "
        f"{exact:.6g}, simulated {float(v[-1, 0].mean()):.6g} ± {3 * se:.2g} (3 SE)"))
    # (b) sparse logistic regression with active clipping (||g_i|| ≤ 1, C = 0.05): a loose case.
    C, sig, b, s, beta, cycles = 0.05, 1.0, 16, 5, 0.9, 8
    R = 400 if quick else 4000
    d = 20
    p = dpsim.problems.logistic_regression(500, d, density=0.2, seed=seed)
    v, k = _lemma1_run(p, clip=C, sigma=sig, b=b, s=s, beta=beta, cycles=cycles, trials=R,
                       seed=seed + 12, coords=list(range(d)), lr=0.5, lr2=0.05, eps=1e-3)
    M = lemma1_bound(C, sig, s, b)
    rows.append(_lemma1_row(
        "dp2_lemma1 (sparse logistic)", v, M, level,
        f"logistic_regression n=500 d={d} density=0.2, clip={C} (active), sigma={sig}, b={b}, "
        f"s={s}, beta={beta}, R={R}; max over coordinates and {k[-1]} refreshes; "
        f"strict (Cauchy-Schwarz) bound {lemma1_bound(C, sig, s, b, strict=True):.4g}",
        why_loose="with active clipping the clipped mean is far below C in each coordinate; the "
                  "tight instance is the equality case above."))
    return rows


#: The h(s) instances searched for the smallest ratio of App. A.2's bound to h(s).
_H_SEARCH = (
    "DP²-RMSProp on logistic regression (sigma=1, clip=1, eps_a=1e-3, beta=0.9, lr=0.1, T=4s, 50 "
    "trials): n=300, d=8 with batches b in {32, 300 = n} and lr2 in {0.01, 0.05}, s in {5, 10, 20, "
    "40}, and the Fig. 3 stand-in (n=1000, d=50, density 0.1, b=32, lr=0.5, lr2=0.05, T=160) at the "
    "same s. With minibatches M' is the largest step-to-step sampling jump of the clean gradient, "
    "which the (3s-1)/2 drift weight multiplies; full batches remove the sampling jumps and leave "
    "the slow drift of the descent, so they give the smallest ratio, and the row runs there")


def _h_standin_runs(scale, seed):
    """The Fig. 3 stand-in (sparse logistic regression, minibatches of 32) at several ``s``:
    ``(s_list, traces, T, R, hp)``.  Shared by the h(s) fit and the trade-off rows (one run per
    process and arguments)."""
    key = (scale, seed)
    if key not in _STANDIN:
        import dpsim

        quick = scale == "quick"
        s_list = [5, 10, 20, 40] if quick else [2, 5, 10, 20, 40, 80]
        T = 160 if quick else 320
        R = 100 if quick else 400
        p = dpsim.problems.logistic_regression(1000, 50, density=0.1, seed=seed)
        hp = dict(lr=0.5, lr2=0.05, clip=1.0, noise_multiplier=1.0, beta=0.9, eps=1e-3)
        trs = [record_h_traces(p, s, steps=T, batch_size=32, trials=R, seed=seed + 21 + s,
                               metrics=("dist_to_opt",), **hp) for s in s_list]
        _STANDIN.clear()
        _STANDIN[key] = (s_list, trs, T, R, hp)
    return _STANDIN[key]


_STANDIN: dict = {}


@check("dp2_h_of_s", family=FAMILY)
def _check_h(scale, seed):
    """h(s) against App. A.2's drift bound at its tightest instance (full batches), and the
    linear fit ``h(s) ≈ c1 s + c2`` on the Fig. 3 stand-in."""
    import dpsim

    quick = scale == "quick"
    rows = []
    n, d, b_mini = 300, 8, 32
    R = 50 if quick else 200
    hp = dict(lr=0.1, lr2=0.01, clip=1.0, noise_multiplier=1.0, beta=0.9, eps=1e-3)
    p = dpsim.problems.logistic_regression(n, d, seed=seed)
    for s in ([5, 10, 20, 40] if quick else [2, 5, 10, 20, 40, 80]):
        T = 4 * s
        tr = record_h_traces(p, s, steps=T, batch_size=n, trials=R, seed=seed + 21 + s, metrics=(),
                             **hp)
        h, lo, hi = h_of_s(tr, ci=0.95, seed=seed)
        bound = h_bound_a2(tr, form="tight")
        no_drift = h_bound_a2(tr, form="tight", M_diff=0.0)
        M_diff = float(np.max(tr.diff_l1[1:]))
        mini = record_h_traces(p, s, steps=T, batch_size=b_mini, trials=R, seed=seed + 21 + s,
                               metrics=(), **hp)
        mini_ratio = h_bound_a2(mini, form="tight") / h_of_s(mini)
        row = _b.upper(
            f"dp2_h_of_s (s={s}, full batch)", f"{_SRC} §4.1 h(s), App. A.2 Eqs. (53)-(56)", FAMILY,
            bound, h, ci=(lo, hi),
            relation="estimate <= bound (A.2 drift bound, M' = max observed ∣∣g^t - g^(t-1)∣∣_1)",
            detail=(f"logistic_regression n={n} d={d}, full batches b={n} (the clean gradient is "
                    f"grad F(w^t): no sampling jumps), T={T}, R={R}, {hp}; h in the appendix form "
                    f"E||g||_1/(E||G/s||_1 + d eps) maximized over RMSProp steps, 95% bootstrap CI "
                    f"over trials; M' = {M_diff:.3g}, and the drift term dist_t M' (dist_t <= "
                    f"(3s-1)/2) makes "
                    f"{(bound - no_drift) / bound:.1%} of the bound (without it the bound is "
                    f"{no_drift:.4g}); Eq. (57) as printed gives {h_bound_a2(tr, form='paper'):.4g}; "
                    f"the same run with minibatches of b={b_mini} gives bound/h = "
                    f"{mini_ratio:.3g}. Searched: {_H_SEARCH}."))
        rows.append(_b.vacuous(row, search=_H_SEARCH, best_ratio=row.margin))
    s_list, trs, T, R, hp = _h_standin_runs(scale, seed)
    hs = [h_of_s(tr) for tr in trs]
    a2 = [h_bound_a2(tr, form="tight") for tr in trs]
    fit = fit_h(s_list, hs)
    inc = bool(np.all(np.diff(hs) > 0))
    s_max = s_list[-1]
    rows.append(CheckResult(
        check="dp2_h_of_s (fit c1 s + c2, increasing)", source=f"{_SRC} App. A.2, Fig. 3",
        family=FAMILY, bound=fit.c1 * s_max + fit.c2, estimate=hs[-1], ci=None,
        relation="h(s) increasing in s (empirical, Fig. 3); bound = fitted line at the largest s",
        verdict="sanity" if inc else "reported",  # an empirical trend (Fig. 3), not a bound
        detail=(f"logistic_regression n=1000 d=50 density=0.1, b=32, T={T}, R={R}, {hp}: "
                f"h = {[round(x, 4) for x in hs]} at s = {s_list} (App. A.2 bounds "
                f"{[round(x, 4) for x in a2]}); least squares c1 = {fit.c1:.4g}, "
                f"c2 = {fit.c2:.4g}, R^2 = {fit.r2:.4f}, rmse = {fit.rmse:.3g}, max residual "
                f"{fit.max_residual:.3g}. " + ("Sanity only: h increases with s, as Fig. 3 shows "
                                               "on IMDB (an empirical claim, not a theorem)." if inc else
                                               "h is NOT increasing in s on this run: Fig. 3's "
                                               "trend is empirical, not a theorem."))))
    return rows


def _abs_regression_constants(p):
    """``C = max_i ||a_i||`` (subgradients ``sign(·) a_i``) and ``R = sup_{w∈[-1,1]^d} ||w − w*||``."""
    X = np.asarray(p.X)
    C = float(np.max(np.linalg.norm(X, axis=1)))
    w_star = p.optimum[0]
    R = float(np.linalg.norm(1.0 + np.abs(w_star)))
    return C, R


#: Theorem 2: the instance families searched for the smallest ratio of the right-hand side to the
#: simulated average excess loss (the ratios were measured offline; each run recomputes its own).
_THM2_SEARCH = (
    "(a) absolute regression on [-1,1]^d (n=400, d=5, T=200, v in {1/4, 1/2}, clip = max||a_i||, "
    "eps_a=1, beta=0.9, sigma=1, b=20); (b) the linear loss f(w) = -c w on [-1, 1] started at 0, "
    "every gradient equal (linear_box d=1, bias 1, clip = c), c in {0.02, 0.05, 0.1}, T in {100, "
    "400, 1600}, v=1/2, eps_a=1, beta=0, sigma=1, b=20; (c) the same loss started at the optimum "
    "(a face of the box) with b=1: c in {0.2, 0.3, 0.5, 0.7, 1}, sigma in {6, 8, 10, 13, 16, 20}, "
    "eps_a in {1, 1.5, 2}, beta in {0, 0.9, 0.99}, T in {1000, 2000, 4000, 8000}, v in {1/2, "
    "1 - 1/T} (2160 instances, 100 trials each, in a NumPy model of the same recursion). In (a) "
    "and (b) the R^2 term exceeds what the iterates can lose; in (c) the iterate is held at the "
    "face by the drift and pushed off by the noise, a reflected random walk whose mean distance "
    "lr·sigma_N^2/(2c) makes the excess c·E dist equal the noise term lr·sigma_N^2/2 of Eq. (14) "
    "step by step, so the bound's noise term is attained and the R^2 and kappa terms shrink "
    "relative to it as T grows; the row runs the smallest ratio of (c), at the largest T")

#: the tightest instance of family (c) (proof form); v = s/T = 1/2
_THM2_WALL = dict(c=0.3, sigma=16.0, eps=1.0, beta=0.9)

#: Theorem 2 as printed: the noiseless instance family searched for the smallest ratio of the
#: printed right-hand side to min_t F(w^t) − F*.
_THM2_PRINTED_SEARCH = (
    "sigma = 0, f(w) = -c w on [-1, 1] from the far corner -w* (R = 2), the rate as printed, "
    "h(s) in §4.1's form: eps_a in {0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.12, 0.15}, c in {0.005, "
    "0.01, 0.015, 0.02, 0.03, 0.04, 0.06, 0.08, 0.1}, T in {5000, 10000, 20000, 40000}, beta in "
    "{0, 0.5, 0.9}, s = T - 1 (s in {0.55T, 0.75T} were run too and dropped: D < 1 clips the "
    "adaptive steps, which the analysis excludes), then around the smallest ratio at T = 40001: "
    "eps_a in {0.04, 0.045, 0.05, 0.055, 0.06}, c in {0.02, 0.025, 0.03, 0.035, 0.04}, beta in "
    "{0.3, 0.5, 0.7}")

#: the instance of the printed-form search with the smallest ratio (T = s + 1)
_THM2_PRINTED = dict(c=0.03, eps=0.05, beta=0.7, s=40000)


def _wall_problem(c, seed):
    """``f_i(w) = −z w`` on ``[−1, 1]`` with every ``z_i`` equal (``|z| = c``): linear_box with
    ``d = 1`` and bias 1.  Returns the problem and ``w*`` (``±1``, the face the gradient points
    away from)."""
    import dpsim

    p = dpsim.problems.linear_box(50, 1, scales=[c], bias=1.0, seed=seed)
    return p, float(np.asarray(p.optimum[0])[0])


def _wall_run(T, trials, seed, *, c, sigma, eps, beta):
    """Theorem 2's setting on the wall instance: DP²-RMSProp with the rate of Eq. (18), ``v = 1/2``,
    ``b = 1``, clip ``C = c = ||g_i||`` (never active: ``D ≥ ε_a = 1``), started at ``w*``.
    Returns a dict with the per-trial averages ``(1/T) Σ_t F(w^t) − F*``, ``E||D^t||_1``, h(s)
    and the constants."""
    s = T // 2
    p, w_star = _wall_problem(c, seed)
    M = float(lemma1_bound(c, sigma, s, 1))
    alpha = float(theorem2_alpha(eps, M))
    rate = np.asarray(theorem2_lr(np.arange(1, T + 1), s, alpha))  # Eq. (18), evaluated once
    tr = record_h_traces(p, s, steps=T, batch_size=1, trials=trials, seed=seed + 31 + T,
                         lr_schedule=lambda t: rate[t - 1], clip=c,
                         noise_multiplier=sigma, beta=beta, eps=eps, init=np.array([w_star]))
    avg = tr.excess.mean(axis=0)
    return dict(T=T, s=s, avg=avg, Dl=tr.D_l1.mean(axis=1), h=h_of_s(tr), alpha=alpha, M=M,
                w_star=w_star)


@check("dp2_theorem2", family=FAMILY)
def _check_theorem2(scale, seed):
    """Theorem 2 (convex) at the tightest instance of a documented search (proof form), and the
    statement as printed at the instance where it fails."""
    quick = scale == "quick"
    k = _THM2_WALL
    T = 8000
    R = 200 if quick else 1000
    run = _wall_run(T, R, seed, **k)
    avg, s = run["avg"], run["s"]
    est = float(avg.mean())
    ci = float(z_one_sided(0.999, 1) * avg.std(ddof=1) / math.sqrt(R))
    rhs, first, second, kappa, alpha, _ = theorem2_rhs(2.0, k["c"], k["sigma"], 1, T, s, 1, k["eps"],
                                                       k["beta"], run["h"], D_l1=run["Dl"],
                                                       form="proof", terms=True)
    row = _b.upper(
        f"dp2_theorem2 (proof form, v={s / T:g})", f"{_SRC} Theorem 2 / Eqs. (15), (22)-(24)", FAMILY,
        rhs, est, hi=est + ci, ci=ci, relation="estimate + ci <= bound (one-sided 99.9%)",
        why_loose="the early steps, whose noise spreads the iterate over the whole box, lose "
                  "against the noise term; the ratio falls as T grows.",
        detail=(f"f(w) = -c w on [-1, 1] (linear_box d=1, bias 1: every gradient equal, c = "
                f"{k['c']} = C = clip, never clipped since D >= eps_a = {k['eps']}), started at "
                f"w* = {run['w_star']:g}, R = 2 (the box), sigma={k['sigma']}, b=1, T={T}, s={s}, "
                f"beta={k['beta']}, Eq. (18) rate with alpha={alpha:.4g}, R_trials={R}; estimate = "
                f"(1/T) sum_t E[F(w^t)] - F* (the proof's average); h(s)={run['h']:.4g} from the "
                f"run, kappa={kappa:.4g}, E||D^t||_1 from the run; terms: R^2 and kappa "
                f"{first:.4g}, noise {second:.4g}. Searched: {_THM2_SEARCH}."))
    rows = [_b.vacuous(row, search=_THM2_SEARCH, best_ratio=row.margin)]
    rows.append(_theorem2_printed_fails(seed))
    return rows


def _theorem2_printed_fails(seed):
    """Theorem 2 as printed (§4.1: its rate with 1-based floors, h(s) in the §4.1 form, the
    right-hand side of the statement) against ``min_t F(w^t) − F*`` on a noiseless run.

    With ``σ = 0`` every gradient is ``−c`` (a linear loss, all examples equal), so the run is
    deterministic: the iterate climbs from ``−w*`` towards ``w*`` and ``F(w^t)`` decreases, hence
    ``min_{t∈[T]} F(w^t) = F(w^T)`` (checked on the recorded steps).  ``T = s + 1``: one adaptive
    step, whose clipping acts after ``w^T``."""
    import dpsim

    k = _THM2_PRINTED
    c, eps, beta, s = k["c"], k["eps"], k["beta"], k["s"]
    T = s + 1
    p, w_star = _wall_problem(c, seed)
    M = float(lemma1_bound(c, 0.0, s, 1))
    alpha = float(theorem2_alpha(eps, M))
    opt = dpsim.optimizers.get("dp2_rmsprop", s1=s, s2=s, lr=1.0, lr2=1.0, clip=c,
                               noise_multiplier=0.0, beta=beta, eps=eps)
    rate = np.asarray(theorem2_lr(np.arange(1, T + 1), s, alpha, zero_based=False))  # as printed
    traced = _traced_optimizer(opt, lambda t: rate[t - 1])
    every = s // 100
    res = dpsim.simulate(p, traced, steps=T, batch_size=1, trials=1, seed=seed + 37,
                         sampling="fixed", record_every=every, metrics=("loss",),
                         init=np.array([-w_star]))
    steps = np.asarray(res.steps)
    i_s, i_T = int(np.flatnonzero(steps == s)[0]), int(np.flatnonzero(steps == T)[0])
    exc = np.asarray(res.excess_loss)[:, 0]
    monotone = bool(np.all(np.diff(exc[:i_s + 1]) <= 0))
    lhs = float(exc[i_s])  # F(w^T) − F*, w^T = the iterate after s = T − 1 steps
    g_T = float(res.records["h_g_l1"][i_T][0])
    acc = float(res.records["h_G_l1"][i_s][0])
    D_T = float(res.records["h_D_l1"][i_T][0])
    h_main = g_T / acc + eps  # §4.1's h(s) (d = 1), on the one adaptive step
    h_app = g_T / (acc + eps)
    Dl = np.r_[np.ones(s), D_T]
    rhs, first, _, kappa, _, _ = theorem2_rhs(2.0, c, 0.0, 1, T, s, 1, eps, beta, h_main, D_l1=Dl,
                                              form="printed", terms=True)
    proof, proof_first, _, _, _, _ = theorem2_rhs(2.0, c, 0.0, 1, T, s, 1, eps, beta, h_main, D_l1=Dl,
                                                  form="proof", terms=True)
    proof_app = float(theorem2_rhs(2.0, c, 0.0, 1, T, s, 1, eps, beta, h_app, D_l1=Dl, form="proof"))
    observed = monotone and lhs > rhs
    return _b.disagreement(
        "dp2_theorem2 (printed form, violated)", f"{_SRC} Theorem 2 as printed (§4.1)", FAMILY,
        rhs, lhs, observed=observed,
        relation="min_t F(w^t) - F* > printed right-hand side: the statement fails",
        detail=(f"sigma=0, f(w) = -c w on [-1, 1] with c={c} = C = clip, started at the far corner "
                f"{-w_star:g} (R = 2), b=1, T={T}, s={s} (v = 1 - 1/T: one adaptive step), "
                f"eps_a={eps}, beta={beta}, alpha = {alpha:.4g}, the printed rate "
                f"alpha^(floor(t/2s)+floor((t+s)/2s)+1)/sqrt(t); F(w^t) non-increasing on the "
                f"{i_s + 1} recorded steps up to T: {monotone}, so min_t F(w^t) - F* = F(w^T) - F* "
                f"= {lhs:.5g}; h(s) in §4.1's form {h_main:.4g}, kappa={kappa:.4g}, "
                f"||D^T||_1 = {D_T:.4g}: printed right-hand side {rhs:.5g} = {rhs / lhs:.3f} x the "
                f"left-hand side. The printed first term divides by alpha^floor(T/s) where the "
                f"proof's last rate has alpha^(floor((T-1)/s)+1), and carries R^2 for R^2/2: with "
                f"the same h it is {first / proof_first:.3g} times the proof's first term, which "
                f"gives {float(proof):.5g} here ({proof_app:.5g} with the appendix-form h(s) = "
                f"{h_app:.4g} of Eq. (29)), above the left-hand side. Searched: "
                f"{_THM2_PRINTED_SEARCH}."))


#: Corollary 1's instance: the wall instance of Theorem 2 with less noise (sigma/b = 4), so that
#: the iterate's excursions, of mean lr·sigma_N²/(2c), stay well inside the box from T/4 on and the
#: excess is in its 1/√T regime (a NumPy model of the recursion gave local exponents 0.50-0.51 for
#: c in {0.1, 0.2, 0.3}, sigma in {3, 4} between T = 1000, 4000 and 16000; larger sigma spreads
#: the early iterates over the box and the exponent of the first quadrupling drops below 1/2).
_COR1_WALL = dict(c=0.2, sigma=4.0, eps=1.0, beta=0.9)


@check("dp2_corollary1", family=FAMILY)
def _check_corollary1(scale, seed):
    """Corollary 1 (Theorem 2 with its constants dropped: the rate ``(1/√T) max_{T_s} E||D^t||_1
    + (1/T) Σ_t E||N^t||²_{D^t}/√t``) on a wall instance where it is attained: the exponent of
    the simulated average excess loss between ``T/4`` and ``T`` (``v = 1/2``) against the
    corollary's own exponent over the same ``T`` (computed from its right-hand side)."""
    quick = scale == "quick"
    k = _COR1_WALL
    T = 4000 if quick else 16000
    R = 200 if quick else 1000
    z = z_one_sided(0.999, 2)  # two-sided 99.9%
    runs = [_wall_run(TT, R, seed, **k) for TT in (T // 4, T)]
    A = [float(r["avg"].mean()) for r in runs]
    se = [float(r["avg"].std(ddof=1) / math.sqrt(R)) for r in runs]
    cor = [float(corollary1_rhs(r["T"], r["s"], 1, k["c"], k["sigma"], 1, k["eps"], D_l1=r["Dl"]))
           for r in runs]
    p_hat = math.log(A[0] / A[1]) / math.log(4.0)
    se_p = math.sqrt((se[0] / A[0]) ** 2 + (se[1] / A[1]) ** 2) / math.log(4.0)  # delta method
    p_cor = math.log(cor[0] / cor[1]) / math.log(4.0)
    return _b.equal(
        "dp2_corollary1 (rate exponent, T/4 -> T)", f"{_SRC} Corollary 1", FAMILY, p_cor, p_hat,
        lo=p_hat - z * se_p, hi=p_hat + z * se_p, ci=z * se_p,
        relation=("Corollary 1's exponent in CI(exponent of the simulated LHS) (two-sided 99.9%, "
                  "delta method)"),
        detail=(f"f(w) = -c w on [-1, 1] from w* (linear_box d=1, bias 1), c={k['c']} = C = clip, "
                f"sigma={k['sigma']}, b=1, eps_a={k['eps']}, beta={k['beta']}, v=1/2, Eq. (18) rate "
                f"(alpha^t = O(1/sqrt(t))), R_trials={R}; LHS = (1/T) sum_t E[F(w^t)] - F* (the "
                f"proof's average) = {A[0]:.4g} at T={T // 4} and {A[1]:.4g} at T={T}: exponent "
                f"{p_hat:.4f}; Corollary 1's right-hand side with its constants set to 1 and "
                f"E||D^t||_1 from the runs: {cor[0]:.4g} and {cor[1]:.4g}: exponent {p_cor:.4f}. "
                f"The corollary holds with a constant that does not grow in T and is attained when "
                f"the two exponents agree; half the exponent (a rate T^(-{p_cor / 2:.3g})) and "
                f"twice it (T^(-{2 * p_cor:.3g})) must be excluded."))


def _tradeoff_region(consts, eps, T):
    """Where the minimizer of the smooth trade-off must lie, given the exact one.

    With ``x(v) = (2+v)/(2v) − ⌊1/v⌋ ∈ [1/2, 3/2)`` the smooth form is ``f_s = f_e · base^x``
    (``f_e``: the exponent ``⌊1/v⌋``, Hermite's value of Theorem 2's floors; ``base = √(c3 +
    c4/v) + ε``), so ``lo(v) f_e ≤ f_s ≤ hi(v) f_e`` with ``lo, hi`` = the smaller and larger of
    ``base^{1/2}, base^{3/2}``.  If ``v_s`` minimizes ``f_s`` then for any ``v_e``:
    ``f_e(v_s) ≤ f_s(v_s)/lo(v_s) ≤ f_s(v_e)/lo(v_s) ≤ f_e(v_e) hi(v_e)/lo(v_s)``.  Returns
    ``(v_e, inside)``: ``v_e`` the minimizer of ``f_e`` over ``v = s/T``, ``inside(v)`` that
    condition."""
    c3, c4 = consts[2], consts[3]
    grid = np.arange(1, T + 1) / T
    lfe = np.asarray(delay_tradeoff(grid, *consts, eps, exact=True, log=True))
    i = int(np.argmin(lfe))
    v_e = float(grid[i])

    def logbase(v):
        return math.log(math.sqrt(c3 + c4 / v) + eps)

    def inside(v):
        if not (0.0 < v <= 1.0):
            return False
        lb_e, lb = logbase(v_e), logbase(v)
        log_hi_e = max(0.5 * lb_e, 1.5 * lb_e)
        log_lo = min(0.5 * lb, 1.5 * lb)
        return float(delay_tradeoff(v, *consts, eps, exact=True, log=True)) <= lfe[i] + log_hi_e - log_lo

    return v_e, inside


@check("dp2_tradeoff", family=FAMILY)
def _check_tradeoff(scale, seed):
    """The delay–noise trade-off (§4.1): the optimal ``v`` of the smooth form
    ``(c1 + c2 v)(√(c3 + c4/v) + ε)^{(2+v)/2v}`` against the exact form it simplifies (exponent
    ``⌊1/2v⌋ + ⌊(1+v)/2v⌋ = ⌊1/v⌋``), on the constants of the Fig. 3 stand-in (h(s) fitted on its
    runs): the smooth optimum must lie where :func:`_tradeoff_region` allows, and a factor 2 off
    must not."""
    s_list, trs, T, R, hp = _h_standin_runs(scale, seed)
    C, sig, eps, beta, b = hp["clip"], hp["noise_multiplier"], hp["eps"], hp["beta"], 32
    fit = fit_h(s_list, [h_of_s(tr) for tr in trs])
    Rad = max(float(np.max(tr.result.dist_to_opt)) for tr in trs)  # Assumption 1 on these runs
    consts = tradeoff_constants(Rad, C, sig, b, T, fit, eps, beta)
    v_s = float(optimal_delay_fraction(*consts, eps)[0])
    v_e, inside = _tradeoff_region(consts, eps, T)
    ms = np.geomspace(1.0, 4.0, 400)
    up = next((float(m) for m in ms if not inside(m * v_s)), math.inf)
    down = next((float(m) for m in ms if not inside(v_s / m)), math.inf)
    gap = float(delay_tradeoff(v_s, *consts, eps, exact=True, log=True)
                - delay_tradeoff(v_e, *consts, eps, exact=True, log=True))
    return _b.predicate(
        "dp2_tradeoff (optimal v, smooth vs exact exponent)", f"{_SRC} §4.1 trade-off", FAMILY,
        v_s, v_e, holds=lambda f: inside(f * v_s), margin=max(up, down), stronger=(0.5, 2.0),
        relation="f_e(v*) <= f_e(v_e) hi(v_e)/lo(v*) (where a minimizer of the smooth form must lie)",
        detail=(f"constants of the Fig. 3 stand-in (logistic_regression n=1000 d=50 density=0.1, "
                f"b={b}, T={T}, {hp}): R = {Rad:.4g} (largest ||w^t - w*|| of its runs), h(s) = "
                f"{fit.c1:.4g} s + {fit.c2:.4g} (fitted), so (c1, c2, c3, c4) = "
                f"({', '.join(f'{x:.4g}' for x in consts)}); the smooth form is minimized at "
                f"v* = {v_s:.4g} (s = {v_s * T:.4g}), the exact form over v = s/T at v_e = "
                f"{v_e:.4g} (f_e(v*)/f_e(v_e) = exp({gap:.3g}); v* lies between grid points). The exponent "
                f"(2+v)/(2v) exceeds floor(1/v) by 1/2 to 3/2 (DISCREPANCIES['tradeoff_exponent']), "
                f"which bounds how far the smooth optimum can move; v* could be off by a factor "
                f"{up:.3g} upwards and {down:.3g} downwards before leaving that region."))


#: Theorem 3 on logistic regression: the documented search for the smallest ratio of the
#: right-hand side (proof form, √M + ε; equal to the printed one at ε = 1) to the average squared
#: gradient norm, 16 trials per instance.
_THM3_LOGISTIC_SEARCH = (
    "logistic_regression n=300 d=10 reg=0 (unit rows: C = 1, L = 1/4, tau = C), s=10, beta=0.9, "
    "fixed batches, every admissible (L alpha/eps_a <= 1) point of (a) T in {400, 1600, 6400}, "
    "sigma in {0, 1}, b in {4, 64}, alpha in {0.25, 1, 4}, eps_a in {0.25, 1, 4} (96 instances: "
    "smallest ratio 11.0 at T=400, b=64, alpha=0.25, eps_a=1, on the alpha and b edges), then "
    "(b) towards those edges: T in {100, 400, 1600}, sigma=0, b in {64, 256}, alpha in {0.03, "
    "0.06, 0.125, 0.25}, eps_a=1 (24 instances: smallest 9.7 at T=1600, b=256, alpha=0.125, an "
    "interior alpha; 9.7-10.5 across its neighbours, so the ratio has levelled off). On this "
    "family the gradient norm decays faster than the bound's worst case over smooth losses; the "
    "tight instance is the quadratic row")

#: the tightest instance of the search above
_THM3_LOGISTIC = dict(T=1600, sigma=0.0, b=256, lr=0.125, eps=1.0)

#: Theorem 3 as printed with eps_a > 1: the noiseless logistic instance where the printed factor
#: √M + 1 (Eq. 83) is below the proof's √M + ε (Eq. 81) by enough to fail.
_THM3_PRINTED = dict(T=6400, sigma=0.0, b=4, lr=4.0, eps=64.0)


def _theorem3_logistic_run(k, R, seed, n=300, d=10, s=10, beta=0.9):
    """One Theorem 3 run of ``dp2_rmsprop`` on unregularized logistic regression at the instance
    ``k`` (``T, sigma, b, lr, eps``): the per-trial average squared gradient norm and the
    right-hand side in both forms (``C = 1 = τ``, ``L = 1/4``, ``F ≥ 0``)."""
    import dpsim

    T = k["T"]
    p = dpsim.problems.logistic_regression(n, d, reg=0.0, seed=seed)
    opt = dpsim.optimizers.get("dp2_rmsprop", s1=s, s2=s, lr=k["lr"], lr2=k["lr"], clip=1.0,
                               noise_multiplier=k["sigma"], beta=beta, eps=k["eps"])
    res = dpsim.simulate(p, opt, steps=T, batch_size=k["b"], trials=R, seed=seed + 41,
                         sampling="fixed", record_every=1, metrics=("loss", "grad_norm_sq"))
    avg = res.grad_norm_sq[:T].mean(axis=0)
    F1 = float(res.loss[0].mean())  # F(w^1) − inf F ≤ F(w^1): F ≥ 0
    args = (F1, k["lr"], T, 0.25, 1.0, k["sigma"], k["b"], s, d, 1.0, k["eps"])
    text = (f"logistic_regression n={n} d={d} reg=0 (unit-norm rows: ||g_i|| <= 1 = C = clip, "
            f"L = 1/4, F >= 0, tau^2 = C^2 bounds the per-example variance), eps_a={k['eps']:g} "
            f"(no clipping in the adaptive phase), alpha={k['lr']:g} (L alpha/eps_a = "
            f"{0.25 * k['lr'] / k['eps']:g} <= 1), sigma={k['sigma']:g}, b={k['b']} fixed, s={s}, "
            f"beta={beta}, T={T}, R={R}; estimate = (1/T) sum_t E||grad F(w^t)||^2")
    return avg, float(theorem3_rhs(*args, form="printed")), float(theorem3_rhs(*args, form="proof")), text


@check("dp2_theorem3", family=FAMILY)
def _check_theorem3(scale, seed):
    """Theorem 3 (smooth): at the instance where its proof is tight (a quadratic), at the
    tightest logistic-regression instance of a documented search ("vacuous" unless within 2×),
    and as printed with ``ε > 1``, where its factor ``√M + 1`` fails (reported)."""
    quick = scale == "quick"
    R = 100 if quick else 1000
    avg, _, rhs, text = _theorem3_logistic_run(_THM3_LOGISTIC, R, seed)
    est = float(avg.mean())
    ci = float(z_one_sided(0.999, 1) * avg.std(ddof=1) / math.sqrt(R))
    row = _b.upper(
        "dp2_theorem3 (logistic)", f"{_SRC} Theorem 3 / Eq. (84)", FAMILY, rhs, est, hi=est + ci,
        ci=ci, relation="estimate + ci <= bound (one-sided 99.9%)",
        why_loose="Theorem 3 adds the optimization, noise and variance terms of a worst case over "
                  "smooth losses; on logistic regression the gradient norm decays far faster (the "
                  "tight instance is the quadratic row).",
        detail=text + f"; the proof form (sqrt(M) + eps_a) equals the printed one at eps_a = 1.")
    return [_theorem3_tight(quick, seed),
            _b.vacuous(row, search=_THM3_LOGISTIC_SEARCH, best_ratio=row.margin),
            _theorem3_printed_fails(quick, seed)]


def _theorem3_printed_fails(quick, seed):
    """Theorem 3 as printed against the average squared gradient norm with ``ε = 64``.

    Eq. (83) writes ``√M + 1`` for the ``√M + ε`` of Eq. (81) (``D ≤ √M + ε``, Eq. 79), which is
    valid for ``ε ≤ 1`` only.  With ``ε = 64`` the adaptive steps are about ``α/ε``, progress is
    ``ε`` times slower than the printed first term allows, and on a noiseless logistic regression
    the average squared gradient norm stays above the printed right-hand side (reported); the
    proof form, ``ε/1`` times larger here, must hold at the same instance, or the row fails."""
    R = 64 if quick else 400
    avg, printed, proof, text = _theorem3_logistic_run(_THM3_PRINTED, R, seed)
    est = float(avg.mean())
    ci = float(z_one_sided(0.999, 1) * avg.std(ddof=1) / math.sqrt(R))
    observed = est - ci > printed and est + ci <= proof
    return _b.disagreement(
        f"dp2_theorem3 (printed, eps_a={_THM3_PRINTED['eps']:g})", f"{_SRC} Theorem 3 / Eqs. (81), (83)",
        FAMILY, printed, est, observed=observed, ci=ci,
        relation="estimate - ci > printed bound; estimate + ci <= proof-form bound",
        detail=(text + f". The printed right-hand side (sqrt(M) + 1) is {printed:.4g}, "
                f"{est / printed:.3g}x below the estimate; the proof form (sqrt(M) + eps_a, Eq. 81) "
                f"is {proof:.4g}, {proof / est:.3g}x above it "
                f"({'holds' if est + ci <= proof else 'FAILS'}). Eq. (83)'s sqrt(M) + 1 is valid "
                f"for eps_a <= 1 only (DISCREPANCIES['theorem3'])."))


def _theorem3_tight(quick, seed):
    """Theorem 3 on the instance where each step of its proof is an equality.

    Every ``f_i(w) = (L/2)||w − u_i||²`` (``quadratic_2d(L, L)``, centred ``u_i``) is ``L``-smooth
    with curvature exactly ``L``; with ``α = 1/L`` one SGD step lands on ``−ξ/L``, where ``ξ`` is the
    minibatch sampling error plus the Gaussian noise, so ``||∇F(w^1)||² = 2L(F(w^1) − F*)`` and
    afterwards ``E||∇F(w^t)||² = E||ξ||² = τ²(n−b)/(b(n−1)) + dσ²C²/b²`` — the descent lemma's
    two terms with nothing dropped.  The adaptive phase divides by ``D = √v + ε ≈ 1`` (``v`` is of
    order ``C²/100``) and Theorem 3's factor ``√M + 1`` is ``≈ 1`` for small ``C``, so the average
    gradient norm comes within a few percent of the right-hand side.  Clipping never binds: ``C`` is
    set to twice ``L·max_i||u_i||`` plus ``L||w^1||``, and the row reports the largest ``L||w^t||``
    reached."""
    import dpsim

    Lc, n, d, T, b, s, sig, eps, beta = 1.0, 1000, 2, 60, 4, 10, 0.2, 1.0, 0.9
    R = 400 if quick else 4000
    p = dpsim.problems.quadratic_2d(Lc, Lc, noise=0.004, n=n, seed=seed)
    xi = np.asarray(p.xi)  # per-example gradient at w minus L·w: −L u_i
    U = float(np.max(np.linalg.norm(xi, axis=1)))
    tau = float(math.sqrt(np.mean(np.sum(xi * xi, axis=1))))  # Var_i g_i(w) = mean ||L u_i||² (centred)
    w1 = np.full(d, 2.0 * U / (Lc * math.sqrt(d)))  # ||L w^1|| = 2U
    C = 2.0 * U + Lc * float(np.linalg.norm(w1))  # clip: never active (checked below)
    alpha = 1.0 / Lc
    opt = dpsim.optimizers.get("dp2_rmsprop", s1=s, s2=s, lr=alpha, lr2=alpha, clip=C,
                               noise_multiplier=sig, beta=beta, eps=eps)
    res = dpsim.simulate(p, opt, steps=T, batch_size=b, trials=R, seed=seed + 43, sampling="fixed",
                         record_every=1, metrics=("loss", "grad_norm_sq"), init=w1)
    g2 = res.grad_norm_sq[:T]
    avg = g2.mean(axis=0)
    est = float(avg.mean())
    ci = float(z_one_sided(0.999, 1) * avg.std(ddof=1) / math.sqrt(R))
    F1 = float(res.loss[0].mean()) - float(p.optimum[1])  # F(w^1) − inf F (deterministic w^1)
    rhs = theorem3_rhs(F1, alpha, T, Lc, C, sig, b, s, d, tau, eps)
    worst = U + math.sqrt(float(np.max(g2)))  # max_i ||g_i(w^t)|| over the recorded iterates
    return _b.upper(
        "dp2_theorem3 (tight quadratic)", f"{_SRC} Theorem 3 / Eq. (84)", FAMILY, rhs, est,
        hi=est + ci, ci=ci, relation="estimate + ci <= bound (one-sided 99.9%)",
        detail=(f"quadratic_2d(L, L) with L={Lc:g}, n={n}, u_i ~ N(0, 0.004² I) centred "
                f"(tau = sqrt(mean ||L u_i||²) = {tau:.4g}), w^1 = {w1[0]:.4g}·1 (F(w^1) − F* = "
                f"{F1:.4g}), alpha = 1/L, eps_a={eps}, clip C={C:.4g} (largest per-example "
                f"gradient norm on the recorded iterates {worst:.4g}: clipping never binds), "
                f"sigma={sig}, b={b} fixed, s={s}, T={T}, R={R}; sqrt(M)+1 = "
                f"{1 + math.sqrt(lemma1_bound(C, sig, s, b)):.4f}; estimate = (1/T) sum_t "
                f"E||grad F(w^t)||^2. Every inequality of the proof is an equality here up to "
                f"the factor sqrt(M)+1, D ≈ 1 and (n−b)/(n−1)."))
