"""``dpsim verify`` rows for [PAGAN] (Asi et al., ICML 2021): moments, Theorems 1–3, Algorithm 3,
lower bounds.  The bounds live in :mod:`dpsim.analysis.moments`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpsim.analysis.checks import base as _b
from dpsim.analysis.checks.base import check
from dpsim.analysis.stats import clopper_pearson, clopper_pearson_upper, mean_ci
from dpsim.analysis.moments import (
    G_p,
    algorithm3_epsilon,
    algorithm3_rounds,
    example1_bound,
    gaussian_moment_ratio,
    gaussian_mu,
    geometry_comparison,
    lemma32_bound,
    lower_bound_ball,
    lower_bound_box,
    pagan_bound,
    pagan_rate,
    pasan_bound,
    pasan_rate,
    private_second_moment,
    prop2_bound,
    theorem1_bound,
    theorem2_bound,
    theorem3_bound,
    theorem3_guarantee,
    theorem3_sample_size,
    theorem3_scaling,
)

FAMILY = "[PAGAN] moments"


def _lipschitz_rows(problem):
    """Per-example gradient magnitudes ``|a_i|`` of a GLM with ``|ℓ'| ∈ {0, 1}`` via the public API:
    ``per_example_grads`` at ``w = 0`` (absolute loss: ``sign(−b_i) a_i``; linear: ``−z_i``)."""
    n, d = problem.n, problem.d
    g = np.asarray(problem.per_example_grads(np.zeros((1, d)), np.arange(n)[None, :]))[0]
    return np.abs(g)


def _simulate_average(problem, optimizer, *, steps, batch_size, trials, seed, sampling):
    """Run ``dpsim.simulate`` recording every iterate through a probe; return the averages
    ``x̄ = (1/T) Σ_{k=0}^{T−1} x^k`` (the proof's) and ``(1/T) Σ_{k=1}^{T} x^k`` (Alg. 1–2, line 10)."""
    import dpsim

    acc: dict[str, Any] = {}

    def probe(state, params, ctx):
        p = np.array(params, dtype=float)
        if "sum" not in acc:
            acc["sum"] = np.zeros_like(p)
            acc["first"] = p.copy()
        acc["sum"] += p
        acc["last"] = p
        return np.zeros(p.shape[0])

    res = dpsim.simulate(problem, optimizer, steps=steps, batch_size=batch_size, trials=trials,
                         seed=seed, sampling=sampling, record_every=1, metrics=(),
                         probes={"iterate_sum": probe})
    avg_proof = (acc["sum"] - acc["last"]) / steps
    avg_paper = (acc["sum"] - acc["first"]) / steps
    return res, avg_proof, avg_paper


_SIM = {"quick": dict(n=2000, d=50, b=40, trials=24), "full": dict(n=5000, d=100, b=70, trials=64)}


def _theorem12_rows(scale, seed, algorithm):
    """One with-replacement simulation, trials split between ε = 1 and ε = 4 (per-trial σ and B)."""
    import dpsim
    from dpsim.privacy.ellipsoid import ellipsoid_radius, scaling_diagonal

    cfg = _SIM[scale]
    n, d, b, R = cfg["n"], cfg["d"], cfg["b"], cfg["trials"]
    delta, epss = 1e-5, (1.0, 4.0)
    # the theorem's noise scale √log(1/δ)/(bε) is dpsim's σ/b with σ = √log(1/δ)/ε
    sigs = [math.sqrt(math.log(1.0 / delta)) / e for e in epss]
    T = (n // b) ** 2  # T = c n²/b², c = 1
    prob = dpsim.problems.absolute_regression(n, d, seed=seed + 11)
    f_star = float(prob.optimum[1])
    X = _lipschitz_rows(prob)
    C = scaling_diagonal(prob.scales, algorithm)
    Bs = [ellipsoid_radius(C, X, n=n, noise_multiplier=s, algorithm=algorithm) for s in sigs]
    lr = 2.0 * math.sqrt(d) if algorithm == "pasan" else 2.0
    per = R // len(epss)
    opt = dpsim.optimizers.get(algorithm, lr=lr, noise_multiplier=list(np.repeat(sigs, per)),
                               radius=list(np.repeat(Bs, per)), scaling=C)
    _, avg, avg_paper = _simulate_average(prob, opt, steps=T, batch_size=b, trials=per * len(epss),
                                          seed=seed + 12, sampling="replacement")
    ex = (np.asarray(prob.loss(avg)) - f_star).reshape(len(epss), per)
    ex_paper = (np.asarray(prob.loss(avg_paper)) - f_star).reshape(len(epss), per)
    f0 = float(np.asarray(prob.loss(np.zeros((1, d))))[0]) - f_star
    rows = []
    for i, (eps, sig, B) in enumerate(zip(epss, sigs, Bs)):
        m, hw = mean_ci(ex[i])
        if algorithm == "pasan":
            bound = theorem1_bound(C, X, n=n, noise_multiplier=sig, batch_size=b)
            explicit = pasan_bound(C, X, radius=B, noise_multiplier=sig, steps=T, batch_size=b, lr=lr)
            src, name = "[PAGAN] Thm 1", "PASAN"
        else:
            bound = theorem2_bound(C, X, n=n, noise_multiplier=sig, batch_size=b)
            explicit = pagan_bound(C, X, radius=B, noise_multiplier=sig, steps=T, batch_size=b, lr=lr)
            src, name = "[PAGAN] Thm 2", "PAGAN"
        # the ε actually accounted for this σ, q = b/n, T (Poisson sampling standing in for the
        # with-replacement batches, which no accountant covers): add/remove, and replace-one by
        # group privacy of 2
        eps_ar = float(dpsim.accounting.epsilon(sig, b / n, T, delta))
        rows.append(_b.upper(
            f"pagan_theorem{'1_pasan' if algorithm == 'pasan' else '2_pagan'}",
            f"{src} (σ of nominal ε={eps:g}; accounted ε≈{eps_ar:.3g} add/remove, "
            f"{2 * eps_ar:.3g} replace-one)",
            FAMILY, float(bound), m, hi=m + hw, ci=hw, relation="estimate + ci <= bound",
            why_loose=(f"the theorem's constants are worst-case over the Lipschitz class; the "
                       f"excess loss at x=0 is {f0:.3g}, so no run of this instance can come "
                       f"within a factor 2 of the bound." if bound > 2 * f0 else
                       "online-to-batch conversion and the regret bound are each loose by a "
                       "constant factor on smooth data such as this instance. Tried for a tight "
                       "instance: the same run on linear_box (the linear-loss instance of the "
                       "lower bounds, §5.1) with bias 0.05, 0.2 and 1 gives bound/(estimate + ci) "
                       "of at least 3.1 (PAGAN) and 4.6 (PASAN)."),
            detail=(f"ε={eps} nominal (σ=√log(1/δ)/ε); accounted ε={eps_ar:.3g} (add/remove, "
                    f"Poisson q=b/n proxy, T={T}), {2 * eps_ar:.3g} (replace-one): {name} (optimal C, B={B:.4g} from the theorem, α = diam) on "
                    f"absolute_regression(n={n}, d={d}), b={b}, T=n²/b²={T}, with-replacement "
                    f"batches, σ=√log(1/δ)/ε={sig:.4g} (δ={delta}; the theorem's noise — Lemma 3.1's "
                    f"privacy constants are unstated, and Result.epsilon refuses replacement "
                    f"sampling); {per} trials, 95% t-interval. Estimate: excess loss of the average "
                    f"iterate (1/T)Σ_{{k<T}} x^k accumulated by a probe (paper's (1/T)Σ_{{k=1..T}} "
                    f"x^k: {float(np.mean(ex_paper[i])):.4g}). Bound: the theorem's form with our "
                    f"explicit constants (3/2, 3+2^(1-p)), p=ln d; the finite-T bound it dominates "
                    f"is {float(explicit):.4g} (ratio to the estimate {float(explicit) / m:.2g}); "
                    f"excess loss at x=0 is {f0:.4g}.")))
    return rows


@check("pagan_theorem1_pasan", family=FAMILY)
def _check_theorem1(scale, seed):
    return _theorem12_rows(scale, seed, "pasan")


@check("pagan_theorem2_pagan", family=FAMILY)
def _check_theorem2(scale, seed):
    return _theorem12_rows(scale, seed, "pagan")


_ALG3 = {"quick": dict(d=10, trials=30), "full": dict(d=10, trials=300)}


def _gaussian_data(rng, n, sigma):
    """``(n, d)`` rows ``z_i ~ N(0, diag σ²)``, stored column-major (the columns Algorithm 3 reads)."""
    z = rng.standard_normal((sigma.size, n))
    z *= np.asarray(sigma, dtype=float)[:, None]
    return z.T


@check("pagan_alg3_theorem3", family=FAMILY)
def _check_alg3(scale, seed):
    cfg = _ALG3[scale]
    d, R = cfg["d"], cfg["trials"]
    r, eps, delta, beta = 1.5, 1.0, 1e-5, 0.1
    sigma = np.arange(1, d + 1, dtype=float) ** -1.5  # max σ_j = 1, min σ_j = d^{-3/2}
    n = int(theorem3_sample_size(d, r, eps, delta, beta))
    ss = np.random.SeedSequence([seed, 3001])
    fails = 0
    worst = 0.0
    for child in ss.spawn(R):
        rng = np.random.default_rng(child)
        z = _gaussian_data(rng, n, sigma)
        sh = private_second_moment(z, r, eps, delta, seed=rng)
        ok = theorem3_guarantee(sh, sigma)
        fails += int(not ok.all())
        worst = max(worst, float(np.max(sh / (2 * sigma))),
                    float(np.max(0.5 * np.maximum(sigma, d ** -1.5) / sh)))
    up = clopper_pearson_upper(fails, R)
    return _b.predicate(
        "pagan_alg3_theorem3", "[PAGAN] Thm 3 / Alg. 3", FAMILY, beta, fails / R,
        holds=lambda f: up <= f * beta, margin=beta / up if up > 0 else math.inf, stronger=(),
        ci=(0.0, up), relation="P(fail) <= beta: one-sided 95% CP upper <= beta",
        why_loose=(f"the observed failure frequency is {fails}/{R}; with {R} runs the upper "
                   f"confidence limit cannot fall below β/2 even with no failure, so the row cannot "
                   f"tell β from β/2."),
        detail=(f"Algorithm 3 (line 6 read as sqrt(σ̂²) >= 2^(-t-1)) on z ~ N(0, diag(j^-3/2)²), "
                f"d={d}, r={r} (Gaussian moment ratio is {gaussian_moment_ratio(d):.3f} <= r), "
                f"ε={eps}, δ={delta}, β={beta}, T={algorithm3_rounds(d)}; n={n} from Theorem 3's "
                f"condition (reconstructed reading); {R} independent data sets and noise draws; "
                f"one-sided 95% Clopper–Pearson upper limit {up:.3g}. Largest violation ratio "
                f"max(σ̂/2σ, ½max(σ,d^-3/2)/σ̂) = {worst:.3g} (<= 1 means inside (10))."))


def _alg3_failures(entropy, runs, n, sigma, r, eps, delta, **kw):
    """In how many of ``runs`` independent data sets (``n`` Gaussian rows of scales ``sigma``) and
    noise draws Algorithm 3's output misses condition (10)."""
    fails = 0
    for child in np.random.SeedSequence(entropy).spawn(runs):
        rng = np.random.default_rng(child)
        sh = private_second_moment(_gaussian_data(rng, n, sigma), r, eps, delta, seed=rng, **kw)
        fails += int(not theorem3_guarantee(sh, sigma).all())
    return fails


@check("pagan_alg3_readings", family=FAMILY)
def _check_alg3_readings(scale, seed):
    """Disagreements 1–3 of the module docstring, each shown on data meeting Theorem 3's hypotheses."""
    d, eps, delta, beta = 10, 1.0, 1e-5, 0.1
    sigma = np.arange(1, d + 1, dtype=float) ** -1.5
    rows = []
    R = 3 if scale == "quick" else 20
    # 1. ALGORITHMS.md's squared threshold
    r = 1.5
    n = int(theorem3_sample_size(d, r, eps, delta, beta))
    fails = _alg3_failures([seed, 3002], R, n, sigma, r, eps, delta, rule="squared")
    ci1 = clopper_pearson(fails, R)
    rows.append(_b.disagreement(
        "pagan_alg3_readings", "[PAGAN] Alg. 3 line 6 vs ALGORITHMS.md §2.4", FAMILY, beta,
        fails / R, observed=ci1[0] > beta, ci=ci1,
        relation="P(fail) > beta: CP lower end > beta (the squared reading fails)",
        detail=(f"ALGORITHMS.md reads line 6 as σ̂² >= 2^(-t-1) (second moment vs a first-moment "
                f"scale); on the data of pagan_alg3_theorem3 (n={n}) condition (10) fails in "
                f"{fails}/{R} runs (σ_2=0.35 is frozen at 2^-3 < σ_2/2; σ_j <= 0.19 are never frozen, "
                f"since ρ_t² ∝ 4^-t drops below 2^(-t-1), and get 2^-T). The paper prints σ̂ >= "
                f"2^(-t-1); the code follows the paper (rule='paper'); rule='squared' exists only "
                f"to show this.")))
    # 2. ρ_t = 4 r Δ log r with r close to 1
    r2 = 1.05
    n2 = int(theorem3_sample_size(d, r2, eps, delta, beta))
    R2 = R
    fails2 = _alg3_failures([seed, 3003], R2, n2, sigma, r2, eps, delta)
    ci2 = clopper_pearson(fails2, R2)
    rows.append(_b.disagreement(
        "pagan_alg3_readings", "[PAGAN] Alg. 3 line 4 / Thm 3", FAMILY, beta, fails2 / R2,
        observed=ci2[0] > beta, ci=ci2, relation="P(fail) > beta: CP lower end > beta",
        detail=(f"r={r2} is a valid moment ratio for Gaussian data (theirs is "
                f"{gaussian_moment_ratio(d):.3f}); Theorem 3's n is then {n2}, but the printed "
                f"ρ_t = 4rΔ log r = {4 * r2 * math.log(r2):.3f}Δ < Δ/4 makes √(truncated mean) < "
                f"2^(-t-1): nothing is ever frozen and every σ̂_j = 2^-T; (10) fails in "
                f"{fails2}/{R2} runs. The code follows the printed formula (r > 1 required).")))
    # 3. the d^{-3/2} floor of condition (10)
    r = 1.5
    sig3 = sigma.copy()
    sig3[-1] = d ** -1.5 / 10.0
    fails3 = _alg3_failures([seed, 3004], R2, n, sig3, r, eps, delta)
    ci3 = clopper_pearson(fails3, R2)
    rows.append(_b.disagreement(
        "pagan_alg3_readings", "[PAGAN] Thm 3, Eq. (10)", FAMILY, beta, fails3 / R2,
        observed=ci3[0] > beta, ci=ci3, relation="P(fail) > beta: CP lower end > beta",
        detail=(f"σ_d = d^(-3/2)/10: with T = 32 log d the coordinate is frozen near its own scale, "
                f"below ½d^(-3/2); (10) as printed fails in {fails3}/{R2} runs. It cannot hold "
                f"for σ_j < d^(-3/2)/4 with any T (upper side 2σ_j vs a floor of d^(-3/2)); the "
                f"code follows the printed T and checks use σ_j >= d^(-3/2).")))
    return rows


#: (ε, δ) where the printed noise of Alg. 3 is documented as too small (analysis.moments).
_ALG3_TOO_LITTLE_NOISE = {(1.0, 1e-8), (4.0, 1e-5)}


@check("pagan_alg3_privacy", family=FAMILY)
def _check_alg3_privacy(scale, seed):
    rows = []
    d = 10
    T = algorithm3_rounds(d)
    for eps, delta in [(0.1, 1e-5), (1.0, 1e-5), (1.0, 1e-8), (4.0, 1e-5)]:
        e_exact = float(algorithm3_epsilon(eps, delta, d))
        mu = eps / math.sqrt(math.log(T / delta))
        ok = e_exact <= eps
        kw = dict(relation="exact epsilon <= claimed epsilon", detail=(f"d={d}, T={algorithm3_rounds(d)}, δ={delta}: the printed noise makes the T "
                    f"rounds a μ-GDP mechanism, μ = ε/√log(T/δ) = {mu:.4g} "
                    f"(replace-one); exact ε(δ) (Balle–Wang) = {e_exact:.4g}"
                    + ("" if ok else f" exceeds the claimed ε={eps}: the noise constant is "
                       f"{e_exact / eps:.3f}x too small for (ε, δ)-DP here (code follows the printed "
                       f"noise).")))
        src = "[PAGAN] Thm 3 (privacy) / Alg. 3 line 5"
        if (eps, delta) in _ALG3_TOO_LITTLE_NOISE:  # documented in analysis.moments
            rows.append(_b.disagreement("pagan_alg3_privacy", src, FAMILY, eps, e_exact,
                                        observed=not ok, **kw))
        else:
            rows.append(_b.upper("pagan_alg3_privacy", src, FAMILY, eps, e_exact, **kw))
    return rows


@check("pagan_theorem3_pagan", family=FAMILY)
def _check_theorem3_pagan(scale, seed):
    import dpsim
    from dpsim.privacy.ellipsoid import ellipsoid_radius

    n, d, b = (2000, 20, 40) if scale == "quick" else (5000, 20, 70)
    R = 16 if scale == "quick" else 32
    r, eps, delta, beta = 1.5, 1.0, 1e-5, 0.1
    prob = dpsim.problems.absolute_regression(n, d, seed=seed + 21)
    sigma = prob.scales
    # Algorithm 3 needs Theorem 3's n; the optimization data set is smaller, so it runs on an
    # independent sample of that size from the same feature law N(0, diag σ²).
    n3 = int(theorem3_sample_size(d, r, eps, delta, beta))
    rng = np.random.default_rng(np.random.SeedSequence([seed, 3005]))
    sh = private_second_moment(_gaussian_data(rng, n3, sigma), r, eps, delta, seed=rng)
    cond10 = bool(theorem3_guarantee(sh, sigma).all())
    C = theorem3_scaling(sh, r)
    sig = math.sqrt(math.log(1.0 / delta)) / eps
    T = (n // b) ** 2
    X = _lipschitz_rows(prob)
    B = ellipsoid_radius(C, X, n=n, noise_multiplier=sig, algorithm="pagan")
    opt = dpsim.optimizers.get("pagan", lr=2.0, noise_multiplier=sig, radius=B, scaling=C)
    _, avg, _ = _simulate_average(prob, opt, steps=T, batch_size=b, trials=R, seed=seed + 22,
                                  sampling="replacement")
    f_star = float(prob.optimum[1])
    m, hw = mean_ci(np.asarray(prob.loss(avg)) - f_star)
    bound2 = float(theorem2_bound(C, X, n=n, noise_multiplier=sig, batch_size=b))
    r_ada = 2.0 * float(np.sum(np.sqrt(np.mean(X * X, axis=0)))) / math.sqrt(T)
    printed = float(theorem3_bound(sigma, r, n, eps, delta, r_ada=r_ada))
    return _b.predicate(
        "pagan_theorem3_pagan", "[PAGAN] Thm 3 (Alg. 3 + PAGAN)", FAMILY, bound2, m,
        holds=lambda f: cond10 and m + hw <= f * bound2, margin=bound2 / (m + hw), ci=hw,
        relation="estimate + ci <= bound (given (10))",
        why_loose="as for pagan_theorem2_pagan: the constants are worst-case over the class.",
        detail=(f"σ̂ from Algorithm 3 (r={r}, ε={eps}, δ={delta}) on an independent sample of "
                f"Theorem 3's size n={n3} (condition (10) holds: {cond10}); PAGAN with "
                f"Ĉ_j=(rσ̂_j)^(-4/3)/4, theorem radius, σ=√log(1/δ)/ε on absolute_regression(n={n}, "
                f"d={d}), b={b}, T={T}, with replacement, {R} trials. Bound: Theorem 2 at Ĉ with "
                f"our constants; Theorem 3's printed form with O(1)=1 is {printed:.4g} "
                f"({'above' if printed >= m + hw else 'below'} the estimate). Privacy: Alg. 3 and "
                f"PAGAN each spend the (ε, δ) budget (2ε in total)."))


@check("pagan_example1_lemma32", family=FAMILY)
def _check_example1_lemma32(scale, seed):
    rows = []
    # Example 1: exact Gaussian moments vs the explicit bound, over a grid of p and C
    d = 20
    sigma = np.arange(1, d + 1, dtype=float) ** -1.5
    ps = np.array([1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 2 * math.log(d), 6.0, 10.0])
    worst, arg = 0.0, None
    for kappa in (0.0, 1.0, 4.0 / 3.0):
        C = sigma ** -kappa
        ratio = G_p(C, sigma, ps) / example1_bound(C, sigma, ps)
        i = int(np.argmax(ratio))
        if ratio[i] > worst:
            worst, arg = float(ratio[i]), (kappa, float(ps[i]))
    rows.append(_b.upper(
        "pagan_example1_lemma32", "[PAGAN] Example 1 (Eq. (3))", FAMILY, 1.0 + 1e-9, worst,
        relation="max G_p(C) / bound <= 1",
        detail=(f"Exact G_p(C) of z ~ N(0, diag σ²) (σ_j=j^-3/2, d={d}; C = σ^-κ, κ ∈ {{0, 1, 4/3}}; "
                f"p ∈ {{1, …, 10}}) over the explicit bound μ + c_p√(Σ C_jj σ_j²), μ=0; worst at "
                f"(κ, p) = {arg}. Equality at p = 2 (c_2 = 1 is exact for Gaussians).")))
    # Lemma 3.2: P(Ĝ_p(S; C) > G_p + G_2p) <= 1/n over fresh data sets S of n points
    n, p = 20, 2.0
    M = 2000 if scale == "quick" else 20000
    C = np.ones(d)
    Gp, G2p = G_p(C, sigma, p), G_p(C, sigma, 2 * p)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 3006]))
    z = rng.standard_normal((M, n, d)) * sigma
    Ghat = np.mean(np.sum(z * z, axis=-1) ** (p / 2), axis=1) ** (1 / p)
    k = int(np.sum(Ghat > lemma32_bound(Gp, G2p)))
    up = clopper_pearson_upper(k, M)
    rows.append(_b.upper(
        "pagan_example1_lemma32", "[PAGAN] Lemma 3.2", FAMILY, 1.0 / n, k / M, hi=up, ci=(0.0, up),
        relation="P(Ĝ_p > G_p + G_2p) <= 1/n: one-sided 95% CP upper <= 1/n",
        why_loose="the lemma rests on Chebyshev's inequality, which is loose for Gaussian data.",
        detail=(f"{M} data sets of n={n} Gaussian points (σ_j=j^-3/2, d={d}, C=I, p={p}); "
                f"G_p={Gp:.4g}, G_2p={G2p:.4g} exact; max Ĝ_p seen {float(Ghat.max()):.4g}. "
                f"Chebyshev makes the lemma loose: violations are far rarer than 1/n.")))
    # the σ_j = j^{-3/2} comparison of §3.2
    ds = np.array([10, 100, 1000, 10000])
    vals = [geometry_comparison(np.arange(1, dd + 1, dtype=float) ** -1.5) for dd in ds]
    okh = all(v["pasan"] <= v["pagan"] <= v["sqrt_d_pasan"] for v in vals)
    H = [float(np.sum(1.0 / np.arange(1, dd + 1))) ** 1.5 for dd in ds]
    errH = max(abs(v["pagan"] - h) / h for v, h in zip(vals, H))
    pag = np.array([v["pagan"] for v in vals])
    rows.append(_b.predicate(
        "pagan_example1_lemma32", "[PAGAN] §3.2 (Hölder, σ_j = j^-3/2)", FAMILY, 0.0, errH,
        holds=lambda f: okh and float(np.max(np.abs(f * pag - np.array(H)) / np.array(H))) < 1e-12,
        margin=1.0 + errH, stronger=(0.5, 2.0),
        relation="Σσ <= (Σσ^{2/3})^{3/2} <= √d Σσ and (Σσ^{2/3})^{3/2} = H_d^{3/2}",
        detail="; ".join(f"d={dd}: (Σσ^(2/3))^(3/2)={v['pagan']:.4g}, Σσ={v['pasan']:.4g}, "
                         f"√dΣσ={v['sqrt_d_pasan']:.4g}" for dd, v in zip(ds, vals))
        + " — PAGAN's factor grows like (log d)^(3/2), PASAN's √d Σσ like √d ζ(3/2)."))
    return rows


@check("pagan_lower_bounds", family=FAMILY)
def _check_lower_bounds(scale, seed):
    import dpsim

    rows = []
    n, d, b, T = (2000, 20, 40, 300) if scale == "quick" else (5000, 50, 50, 1000)
    reps = 6 if scale == "quick" else 16
    delta, sig = 1e-5, 2.0
    eps_ar = float(dpsim.accounting.epsilon(sig, b / n, T, delta))  # Poisson, add/remove (PLD)
    eps_ro = 2.0 * eps_ar  # replace-one (the paper's neighbouring relation): group privacy of 2
    prob = dpsim.problems.linear_box(n, d, seed=seed + 31)
    sigma = prob.scales
    lb = float(lower_bound_box(sigma, n, eps_ro))
    lrs = [0.1, 0.3, 1.0]
    lr = np.repeat(lrs, reps)
    best, best_name, best_hw = math.inf, "", 0.0
    Z = _lipschitz_rows(prob)
    clip = float(np.max(np.sqrt(np.sum(Z * Z, axis=1))))
    methods = [("pagan", dict(scaling="optimal"), 1.0), ("pasan", dict(scaling="identity"), 1.0),
               ("dp_sgd", dict(clip=clip), 0.1)]
    for name, hp, scale_lr in methods:
        opt = dpsim.optimizers.get(name, lr=list(lr * scale_lr), noise_multiplier=sig, **hp)
        res = dpsim.simulate(prob, opt, steps=T, batch_size=b, trials=lr.size, seed=seed + 32,
                             sampling="poisson", record_every=T, metrics=("loss",))
        ex = res.excess_loss[-1].reshape(len(lrs), reps)
        for i, lr_i in enumerate(lrs):
            m, hw = mean_ci(ex[i])
            if m < best:
                best, best_name, best_hw = m, f"{name}(lr={lr_i * scale_lr:g})", hw
    rows.append(_b.predicate(
        "pagan_lower_bounds", "[PAGAN] Prop. 1 / Thm 4", FAMILY, lb, best,
        holds=lambda f: f * lb <= best - best_hw, margin=(best - best_hw) / lb, stronger=(),
        ci=best_hw, relation="bound <= estimate - ci",
        why_loose=("a minimax lower bound constrains only the worst data set of the class; "
                   "on one instance neither pass nor fail is evidence about the bound."),
        detail=(f"linear_box(n={n}, d={d}, σ_j=j^-3/2): best of PAGAN (optimal C), PASAN, DP-SGD "
                f"over lr ∈ {lrs} (last iterate, {reps} trials each, 95% t-interval) is "
                f"{best_name}; Poisson b={b}, T={T}, σ={sig}: ε={eps_ar:.3g} add/remove (PLD), "
                f"so ε={eps_ro:.3g} replace-one (the paper's relation) is used in the bound. A "
                f"minimax lower bound only constrains the worst data set; this instance is a "
                f"sanity check (the bound is far below any achievable loss here).")))
    # Theorem 5 / Prop. 2 (ℓ2 ball): dpsim has no ball-domain linear problem, so the private method
    # is the Gaussian mechanism on z̄ followed by the ball's best response x = ẑ/||ẑ||.
    eps = 1.0
    mu = float(gaussian_mu(eps, delta))
    rng = np.random.default_rng(np.random.SeedSequence([seed, 3007]))
    draws = 4000 if scale == "quick" else 40000
    for which, scales in (("Thm 5", "power"), ("Prop. 2", "ones")):
        worst, worst_hw, worst_bias = -math.inf, 0.0, None
        for bias in (0.0, 0.02, 0.05, 0.1, 0.3):
            p2 = dpsim.problems.linear_box(n, d, scales=scales, bias=bias, seed=seed + 33)
            Zs = -np.asarray(p2.per_example_grads(np.zeros((1, d)), np.arange(n)[None, :]))[0]
            zbar = Zs.mean(axis=0)
            s = 2.0 * float(np.sqrt(np.sum(p2.scales ** 2))) / n / mu  # replace-one ℓ2 sensitivity / μ
            zh = zbar + s * rng.standard_normal((draws, d))
            x = zh / np.linalg.norm(zh, axis=1, keepdims=True)
            risk = float(np.linalg.norm(zbar)) - x @ zbar
            m, hw = mean_ci(risk)
            if m > worst:
                worst, worst_hw, worst_bias = m, hw, bias
        if which == "Thm 5":
            lbb = float(lower_bound_ball(p2.scales, n, eps))
        else:
            lbb = float(prop2_bound(1.0, d, n, eps))
        rows.append(_b.predicate(
            "pagan_lower_bounds", f"[PAGAN] {which}", FAMILY, lbb, worst,
            holds=lambda f, lbb=lbb, w=worst - worst_hw: f * lbb <= w,
            margin=(worst - worst_hw) / lbb, stronger=(), ci=worst_hw,
            relation="bound <= estimate - ci (hardest of 5 data sets)",
            why_loose=("a minimax lower bound constrains only the worst data set of the class; "
                   "on one instance neither pass nor fail is evidence about the bound."),
            detail=(f"Unit ℓ2 ball, f(x)=-xᵀz̄, z from linear_box(n={n}, d={d}, scales={scales!r}) "
                    f"with bias ∈ {{0, .02, .05, .1, .3}} (hardest: {worst_bias}); method: "
                    f"Gaussian mechanism on z̄ (replace-one sensitivity 2||σ||/n, exact μ={mu:.4g} "
                    f"for ε={eps}, δ={delta}) then x=ẑ/||ẑ||; {draws} draws, 95% t-interval. "
                    f"Printed bounds have no constant (constant 1 used).")))
    return rows


@check("pagan_corollaries", family=FAMILY)
def _check_corollaries(scale, seed):
    """Eqs. (8)–(9) drop the factor ``(nε D_{C⁻¹}/(D √log(1/δ) tr))^{1/p}`` of Theorems 1–2."""
    d, eps, delta = 100, 1.0, 1e-5
    sigma = np.arange(1, d + 1, dtype=float) ** -1.5
    p = math.log(d)
    ns = (5000, 10 ** 6, 10 ** 9)
    rows = []
    for alg, kappa in (("pagan", 4.0 / 3.0), ("pasan", 1.0)):
        C = sigma ** -kappa
        G = G_p(C, sigma, 2 * p)  # exact population moment, Gaussian features
        if alg == "pagan":
            thm = [float(theorem2_bound(C, G, n=n, epsilon=eps, delta=delta, p=p, r_ada=0.0)) for n in ns]
            rate = [float(pagan_rate(sigma, n, eps, delta)) for n in ns]
            src = "[PAGAN] Eq. (8) vs Thm 2"
        else:
            thm = [float(theorem1_bound(C, G, n=n, epsilon=eps, delta=delta, p=p, r_std=0.0)) for n in ns]
            rate = [float(pasan_rate(sigma, n, eps, delta)) for n in ns]
            src = "[PAGAN] Eq. (9) vs Thm 1"
        ratio = [a / b for a, b in zip(thm, rate)]
        rows.append(_b.disagreement(
            "pagan_corollaries", src, FAMILY, rate[0], thm[0],
            observed=ratio[-1] > 2.0 * ratio[0],  # not O(1) uniformly in n: it grows with n
            relation="Theorem's privacy term / corollary grows with n (not O(1))",
            detail=(f"σ_j=j^-3/2, d={d}, p=ln d, ε={eps}, δ={delta}, C=σ^-{kappa:.3g}, G_2p exact "
                    f"(Gaussian): Theorem privacy term / printed corollary (O(1)=1) = "
                    + ", ".join(f"{r:.3g} at n={n:.0e}" for r, n in zip(ratio, ns))
                    + f". The ratio grows like n^(1/p) = n^(1/ln d): setting p = log d turns "
                    f"(…/(nε))^((p-1)/p) into (1/(nε))·(nε·…)^(1/ln d), which is O(1) only while nε "
                    f"<= poly(d). The corollary's 1/(nε) rate is therefore not implied for nε >> "
                    f"poly(d); the code's theorem1/2_bound follow the theorems, pasan/pagan_rate "
                    f"the printed corollaries.")))
    return rows
