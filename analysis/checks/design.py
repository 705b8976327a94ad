"""``dpsim verify`` rows for [DESIGN] (Ganesh, McMahan, Thakurta 2025): negative fractions, the
corrected variance, post-processing bias (i.i.d. and DP-MF noise), the scale-then-privatize
fixed point and its isotropic update noise under DP-MF.  The bounds live in :mod:`dpsim.analysis.bias`."""

from __future__ import annotations

import math

import numpy as np

from dpsim.transforms import lookup
from dpsim.analysis.checks import base as _b
from dpsim.analysis.checks.base import check
from dpsim.analysis.stats import clopper_pearson, z_two_sided
from dpsim.analysis.bias import (
    corrected_variance,
    ema_sqrt_strategy,
    ema_weights,
    mf_variance_lower_bound,
    mf_weighted_variance,
    max_dimension,
    negative_fraction,
    negative_probability,
    postprocessing_bias,
    stp_fixed_point,
    stp_update_noise_variance,
)


FAMILY = "[DESIGN] bias"


def _adam_vhat_probe(beta2, fn):
    """Probe on the Adam state (chain position 1 of dp_adam / dp_adam_corrected)."""

    def probe(state, params, ctx):
        xp = ctx.xp
        a = lookup(state, "preconditioner")
        if a.count == 0:
            return xp.zeros(params.shape[0], dtype=params.dtype)
        vhat = a.v / (1.0 - beta2 ** a.count)
        return fn(vhat, xp)

    return probe


def _clean_mean(problem, clip, batch_size):
    """Clipped mean ``ḡ`` over all examples (host NumPy) when every step sees every example's
    gradient set (identical examples, or a full batch)."""
    from dpsim.privacy import clip_l2

    w = np.zeros((1, problem.d))
    idx = np.arange(problem.n, dtype=np.int64)[None, :]
    g = np.asarray(problem.per_example_grads(w, idx))[0]
    return np.asarray(clip_l2(g, clip)).mean(axis=0), g


def _neg_fraction_runs(d_grid, *, b, sigma, beta2, steps, trials, seed, regime="optimistic", coords=None):
    """dp_adam_corrected with lr = 0 on ``linear_box`` (gradients do not depend on the parameters),
    fixed-size batches.  Optimistic: ``bias=1`` makes every example's gradient the same ±1 vector,
    so the clipped mean is ``±C/√d`` in every coordinate (``||ḡ|| = C``).  Pessimistic: ``n = b``
    examples with independent random signs (nearly orthogonal), each step the full batch, so the
    clipped mean is constant with ``E||ḡ||² = C²/b``."""
    import dpsim
    from dpsim import optimizers, problems

    C = 1.0
    phi = (sigma * C / b) ** 2
    out = []
    for i, d in enumerate(d_grid):
        R = trials if coords is None else max(4, int(coords) // int(d))
        if regime == "optimistic":
            prob = problems.linear_box(b, int(d), scales="ones", bias=1.0, seed=seed + i)
        else:
            prob = problems.linear_box(b, int(d), scales="ones", bias=0.0, seed=seed + i)
        gbar, _ = _clean_mean(prob, C, b)
        opt = optimizers.get("dp_adam_corrected", lr=0.0, beta2=beta2, clip=C, noise_multiplier=sigma)
        g2 = gbar * gbar

        def neg(vhat, xp):
            return xp.sum(xp.astype(vhat - phi < 0, vhat.dtype), axis=1)

        def dev1(vhat, xp, g2=g2):
            return xp.sum(vhat - phi - xp.asarray(g2), axis=1)

        def dev2(vhat, xp, g2=g2):
            r = vhat - phi - xp.asarray(g2)
            return xp.sum(r * r, axis=1)

        res = dpsim.simulate(prob, opt, steps=steps, batch_size=b, trials=R, seed=seed + 1000 + i,
                             sampling="fixed", record_every=steps, metrics=(),
                             probes={"neg": _adam_vhat_probe(beta2, neg),
                                     "dev1": _adam_vhat_probe(beta2, dev1),
                                     "dev2": _adam_vhat_probe(beta2, dev2)})
        out.append({"d": int(d), "gbar": gbar, "phi": phi, "trials": R,
                    "neg": np.asarray(res.records["neg"])[-1],
                    "dev1": np.asarray(res.records["dev1"])[-1],
                    "dev2": np.asarray(res.records["dev2"])[-1]})
    return out


def _fraction_row(name, source, target, k, n, level, relation, detail):
    """Row: the predicted fraction ``target`` must lie in the Clopper–Pearson ``level`` interval of
    the simulated fraction ``k/n``."""
    lo, hi = clopper_pearson(k, n, level)
    return _b.equal(name, source, FAMILY, target, k / n, lo=lo, hi=hi, ci=(lo, hi), relation=relation,
                    detail=detail,
                    why_loose="the predicted fraction is so small that the simulated count cannot "
                              "tell it from half or twice its value.")


@check("design_negative_fraction_optimistic", family=FAMILY)
def _check_negative_fraction_optimistic(scale, seed):
    """[DESIGN] Fig. 4 analogue: predicted vs simulated fraction of negative ``v̂ − Φ`` over a grid
    of ``d`` (optimistic regime), through ``dpsim.simulate``."""
    b, sigma, beta2 = 8, 2.0, 0.99
    steps, coords = (300, 8192) if scale == "quick" else (1500, 131072)  # coordinates per grid point
    d_grid = [32, 64, 128, 256, 512, 1024]
    level = 1.0 - 0.01 / len(d_grid)  # 99% family-wise (Bonferroni over the grid)
    runs = _neg_fraction_runs(d_grid, b=b, sigma=sigma, beta2=beta2, steps=steps, trials=None, seed=seed,
                              coords=coords)
    rows = []
    for r in runs:
        d = r["d"]
        n = r["trials"] * d
        k = int(round(float(r["neg"].sum())))
        pred = negative_fraction(d, b, sigma, beta2, regime="optimistic", t=steps)
        gauss = negative_fraction(d, b, sigma, beta2, regime="optimistic", t=steps, method="gaussian")
        rows.append(_fraction_row(
            f"design_negative_fraction_optimistic[d={d}]",
            "[DESIGN] §4.4.1 Eq. 2 / Fig. 4 (reconstructed)", pred, k, n, level, "bound in CI(estimate)",
            (f"dp_adam_corrected, lr=0, linear_box(bias=1, n=b) ⇒ ḡ_j = ±C/√d; b={b}, σ={sigma}, "
                    f"β2={beta2}, t={steps}, λ=b²/(σ²d)={b * b / (sigma ** 2 * d):.4g}; {n} coordinates; "
                    f"Clopper–Pearson {level:.4f} (99% family-wise); exact (Imhof) prediction; "
                    f"Gaussian approximation gives {gauss:.4g}")))
    return rows


@check("design_negative_fraction_pessimistic", family=FAMILY)
def _check_negative_fraction_pessimistic(scale, seed):
    """Pessimistic regime through ``dpsim.simulate``: ``n = b`` near-orthogonal random-sign examples,
    full batch each step.  The prediction averages the exact per-coordinate probability over the
    actual ``ḡ_j²``; the regime formula (uniform ``g_j² = C²/(bd)``) is reported beside it."""
    b, sigma, beta2 = 16, 0.5, 0.99
    steps, coords = (300, 8192) if scale == "quick" else (1500, 131072)
    d_grid = [64, 256, 1024]
    level = 1.0 - 0.01 / len(d_grid)
    runs = _neg_fraction_runs(d_grid, b=b, sigma=sigma, beta2=beta2, steps=steps, trials=None,
                              seed=seed + 77, regime="pessimistic", coords=coords)
    rows = []
    for r in runs:
        d = r["d"]
        n = r["trials"] * d
        k = int(round(float(r["neg"].sum())))
        g2 = np.round(r["gbar"] ** 2, 14)
        uniq, counts = np.unique(g2, return_counts=True)
        probs = negative_probability(np.sqrt(uniq), r["phi"], beta2, t=steps)
        pred = float(np.dot(np.atleast_1d(probs), counts) / d)
        regime_pred = negative_fraction(d, b, sigma, beta2, regime="pessimistic", t=steps)
        rows.append(_fraction_row(
            f"design_negative_fraction_pessimistic[d={d}]",
            "[DESIGN] §4.4.1 Eq. 3 (reconstructed)", pred, k, n, level, "bound in CI(estimate)",
            (f"dp_adam_corrected, lr=0, linear_box(bias=0, n=b={b}) full batch; σ={sigma}, β2={beta2}, "
                    f"t={steps}; b·||ḡ||²/C² = {b * float(r['gbar'] @ r['gbar']):.3f} (orthogonal: 1); "
                    f"prediction = mean_j P(neg | λ_j = ḡ_j²/Φ) (exact); the regime formula with uniform "
                    f"g_j² = C²/(bd) gives {regime_pred:.4g} (lower: non-uniform |ḡ_j| raise the fraction, "
                    f"cf. [DESIGN] Fig. 6); Clopper–Pearson {level:.4f}")))
        if d == _REGIME_PREMISE_BROKEN_AT:
            lo, hi = clopper_pearson(k, n, level)
            zero = float(np.mean(g2 == 0))
            rows.append(_b.disagreement(
                f"design_negative_fraction_pessimistic[d={d}, regime formula]",
                "[DESIGN] §4.4.1 Eq. 3 (reconstructed) outside its premise", FAMILY, regime_pred,
                k / n, observed=(lo > 2 * regime_pred) or (hi < regime_pred / 2), ci=(lo, hi),
                relation="the uniform-∣ḡ_j∣ regime formula is off by more than 2× here",
                detail=(f"the same run: {100 * zero:.1f}% of the coordinates have ḡ_j = 0 (an even "
                        f"split of b={b} random signs), which breaks the formula's premise g_j² = "
                        f"C²/(bd); it predicts {regime_pred:.3g} against the measured {k / n:.3g}. "
                        f"The per-coordinate prediction above follows the data; the formula itself is "
                        f"checked where its premise holds (design_negative_fraction_pessimistic_regime).")))
    return rows


#: the d of the pessimistic run where the regime formula's failure is documented (ḡ_j = 0 on
#: about a fifth of the coordinates, 1e-12 predicted against about 0.1 measured)
_REGIME_PREMISE_BROKEN_AT = 64


def _orthogonal_mean(b, d, clip):
    """``b`` orthogonal per-example gradients of norm ``clip`` whose mean has every coordinate of
    magnitude ``clip/√(bd)`` — the premise of the pessimistic regime: the columns ``clip·Q e_i``
    of a Householder reflection ``Q`` mapping ``Σ_i e_i/√b`` to ``(1, …, 1)/√d``."""
    e = np.zeros(d)
    e[:b] = 1.0 / math.sqrt(b)
    u = np.full(d, 1.0 / math.sqrt(d))
    w = e - u
    Q = np.eye(d) - 2.0 * np.outer(w, w) / float(w @ w)
    G = clip * Q[:, :b].T  # (b, d): rows are the per-example gradients
    return G, G.mean(axis=0)


@check("design_negative_fraction_pessimistic_regime", family=FAMILY)
def _check_pessimistic_regime(scale, seed):
    """[DESIGN] §4.4.1 Eq. 3 (reconstructed) where its premise holds: ``b`` orthogonal clipped
    gradients whose mean has uniform ``|ḡ_j| = C/√(bd)``; direct Monte Carlo of the bias-corrected
    EMA ``v̂_t = Σ_j w_j (ḡ + z_j)²``, ``z_j ~ N(0, Φ)``, vs :func:`negative_fraction`."""
    b, sigma, beta2, clip = 16, 0.5, 0.99, 1.0
    t = 300
    coords = 8192 if scale == "quick" else 65536
    rng = np.random.default_rng(np.random.SeedSequence([seed, 2003]))
    w = ema_weights(beta2, t)
    phi = (sigma * clip / b) ** 2
    d_grid = (256, 1024)
    level = 1.0 - 0.01 / len(d_grid)
    rows = []
    for d in d_grid:
        G, gbar = _orthogonal_mean(b, d, clip)
        gram = G @ G.T
        if not np.allclose(gram, clip * clip * np.eye(b), atol=1e-9):
            raise RuntimeError("the pessimistic-regime gradients are not orthogonal of norm C")
        reps = max(1, coords // d)
        gb = np.tile(gbar, reps)
        acc = np.zeros(gb.size)
        for j in range(t):
            acc += w[j] * (gb + rng.standard_normal(gb.size) * math.sqrt(phi)) ** 2
        k = int(np.sum(acc - phi < 0))
        pred = float(negative_fraction(d, b, sigma, beta2, regime="pessimistic", t=t))
        rows.append(_fraction_row(
            f"design_negative_fraction_pessimistic_regime[d={d}]",
            "[DESIGN] §4.4.1 Eq. 3 (reconstructed), premise met", pred, k, gb.size, level,
            "bound in CI(estimate)",
            (f"b={b} orthogonal per-example gradients of norm C={clip} (Householder columns) with "
             f"∣ḡ_j∣ = C/√(bd) = {abs(gbar[0]):.4g} in every coordinate (spread "
             f"{float(np.ptp(np.abs(gbar))):.1e}); σ={sigma}, β2={beta2}, t={t}, Φ={phi:.4g}, "
             f"λ = b/(σ²d) = {b / (sigma ** 2 * d):.4g}; {gb.size} coordinates of direct Monte Carlo "
             f"of v̂_t; Clopper–Pearson {level:.4f} (99% family-wise)")))
    return rows


@check("design_negative_fraction_threshold_mc", family=FAMILY)
def _check_threshold_mc(scale, seed):
    """Direct Monte Carlo of the bias-corrected EMA at the paper's β2 = 0.999 in both regimes, at
    ``d = max_dimension(fraction=0.05)``: the simulated fraction must be 5% within its CI; the
    paper-form threshold ``max_dimension(kappa=2)`` is reported alongside."""
    beta2, p = 0.999, 0.05
    t = 2000 if scale == "quick" else 6000
    ncoord = 20000 if scale == "quick" else 100000
    rng = np.random.default_rng(np.random.SeedSequence([seed, 2002]))
    rows = []
    w = ema_weights(beta2, t)
    level = 0.995  # two rows: 99% family-wise
    for regime, b, sigma in (("optimistic", 64, 1.0), ("pessimistic", 256, 1.0)):
        d = max_dimension(b, sigma, beta2, regime="pessimistic" if regime == "pessimistic" else "optimistic",
                          t=t, fraction=p)
        d_paper = max_dimension(b, sigma, beta2, regime=regime, t=t, kappa=2.0)
        phi = (sigma / b) ** 2
        g = math.sqrt(1.0 / d) if regime == "optimistic" else math.sqrt(1.0 / (b * d))
        acc = np.zeros(ncoord)
        for j in range(t):  # v̂_t = Σ_j w_j (g + z_j)²
            z = rng.standard_normal(ncoord) * math.sqrt(phi)
            acc += w[j] * (g + z) ** 2
        k = int(np.sum(acc - phi < 0))
        rows.append(_fraction_row(
            f"design_negative_fraction_threshold_mc[{regime}]",
            f"[DESIGN] §4.4.1 Eq. {2 if regime == 'optimistic' else 3} (reconstructed)", p, k, ncoord, level,
            "target fraction in CI(estimate)",
            (f"direct Monte Carlo of the EMA, b={b}, σ={sigma}, β2={beta2}, t={t}: "
                    f"d = max_dimension(fraction={p}) = {d:.4g}; paper form b^{2 if regime == 'optimistic' else 1}/(κ'σ²) "
                    f"with κ=2 gives {d_paper:.4g}; Clopper–Pearson {level}")))
    return rows


@check("design_corrected_variance", family=FAMILY)
def _check_corrected_variance(scale, seed):
    """Simulated ``Var(v̂_t − Φ)`` (and mean ``g²``) of dp_adam_corrected with frozen parameters vs
    :func:`corrected_variance` at finite ``t``; plus the sympy derivation."""
    b, sigma, beta2 = 8, 2.0, 0.99
    steps, trials = (300, 100) if scale == "quick" else (1200, 400)
    d = 128
    (r,) = _neg_fraction_runs([d], b=b, sigma=sigma, beta2=beta2, steps=steps, trials=trials, seed=seed + 5)
    phi = r["phi"]
    g = 1.0 / math.sqrt(d)
    var_pred = corrected_variance(g, phi, beta2, t=steps)
    per_trial_var = r["dev2"] / d  # mean over coordinates of (v̂ − Φ − g²)², per trial (iid trials)
    est = float(per_trial_var.mean())
    z = z_two_sided(0.99)
    half = z * float(per_trial_var.std(ddof=1)) / math.sqrt(trials)
    per_trial_mean = r["dev1"] / d
    mean_est = float(per_trial_mean.mean())
    mean_half = z * float(per_trial_mean.std(ddof=1)) / math.sqrt(trials)
    ok_sym, msg, ratios = _sympy_variance_derivation(with_ratios=True)
    rows = [
        _b.equal("design_corrected_variance[simulate]", "[DESIGN] §4.4.1 / App. C (reconstructed)",
                 FAMILY, var_pred, est, lo=est - half, hi=est + half, ci=half,
                 relation="∣estimate − bound∣ <= CI",
                    detail=(f"dp_adam_corrected lr=0 on linear_box(bias=1), d={d}, b={b}, σ={sigma}, β2={beta2}, "
                            f"t={steps}, {trials} trials; exact finite-t formula (2Φ²+4g²Φ)Σw²; large-t form "
                            f"{corrected_variance(g, phi, beta2):.4g}; 99% normal CI over trials; unbiasedness: "
                            f"mean(v̂−Φ−g²) = {mean_est:.3g} ± {mean_half:.2g}")),
        _b.predicate("design_corrected_variance[sympy]", "[DESIGN] §4.4.1 / App. C (reconstructed)",
                     FAMILY, 0.0, 0.0 if ok_sym else 1.0,
                     holds=lambda f: ok_sym and max(abs(f * r - 1.0) for r in ratios) < 1e-12,
                     margin=1.0, stronger=(0.5, 2.0),
                     relation="symbolic identity; corrected_variance × f against it",
                     detail=msg),
    ]
    return rows


def _sympy_variance_derivation(with_ratios=False):
    """Symbolic check of :func:`corrected_variance`: ``Var((g+z)²) = 2Φ² + 4g²Φ`` and
    ``E[(g+z)²] − Φ = g²`` for ``z ~ N(0, Φ)``; ``Σ_{j≤t} w_j²`` (summed by sympy) equals the closed
    form ``((1−β)/(1+β))(1+β^t)/(1−β^t)`` for ``β ∈ [0, 1)``; its ``t → ∞`` limit is
    ``(1−β)/(1+β)``.  Returns ``(ok, message)`` (and, with ``with_ratios``, the ratios of
    :func:`corrected_variance` to the symbolic value at the sample points)."""
    import sympy as sp
    from sympy.stats import E, Normal, variance

    g = sp.symbols("g", real=True)
    phi, beta, x = sp.symbols("Phi beta x", positive=True)
    t, k = sp.symbols("t k", integer=True, positive=True)
    z = Normal("z", 0, sp.sqrt(phi))
    v1 = sp.simplify(variance((g + z) ** 2) - (2 * phi ** 2 + 4 * g ** 2 * phi))
    m1 = sp.simplify(E((g + z) ** 2) - phi - g ** 2)
    # Σ_{j=1..t} w_j², w_j = (1−β)β^{t−j}/(1−β^t); with k = t − j a geometric sum in β²
    geo = sp.summation(beta ** (2 * k), (k, 0, t - 1))
    if isinstance(geo, sp.Piecewise):  # branches β² = 1 and "otherwise"; β ∈ [0, 1) is the latter
        geo = geo.args[-1][0]
    s2 = (1 - beta) ** 2 / (1 - beta ** t) ** 2 * geo
    closed = (1 - beta) / (1 + beta) * (1 + beta ** t) / (1 - beta ** t)
    diff = sp.simplify(sp.expand_power_exp(s2 - closed).subs(beta ** t, x))
    lim = sp.simplify(sp.limit(closed.subs(beta ** t, x), x, 0) - (1 - beta) / (1 + beta))
    # the code: corrected_variance at sample points equals the symbolic (2Φ²+4g²Φ)·Σ_j w_j²
    sym = (2 * phi ** 2 + 4 * g ** 2 * phi) * s2
    pts = [(0.3, 0.05, 0.9, 1), (0.01, 0.5, 0.999, 7), (1.5, 2.0, 0.5, 40), (0.0, 1.0, 0.99, 300)]
    code_err = max(abs(corrected_variance(gv, pv, bv, t=tv) / float(sym.subs({g: gv, phi: pv, beta: bv, t: tv})) - 1.0)
                   for gv, pv, bv, tv in pts)
    ratios = [corrected_variance(gv, pv, bv, t=tv) / float(sym.subs({g: gv, phi: pv, beta: bv, t: tv}))
              for gv, pv, bv, tv in pts]
    ok = v1 == 0 and m1 == 0 and diff == 0 and lim == 0 and code_err < 1e-12
    msg = (f"sympy: Var((g+z)²) − (2Φ²+4g²Φ) = {v1}; E[(g+z)²] − Φ − g² = {m1}; "
           f"Σ_j w_j² − closed form = {diff}; limit (β^t → 0) − (1−β)/(1+β) = {lim}; "
           f"max relative gap of corrected_variance to the symbolic value = {code_err:.2g}")
    return (ok, msg, ratios) if with_ratios else (ok, msg)


@check("design_postprocessing_bias_iid", family=FAMILY)
def _check_postprocessing_bias_iid(scale, seed):
    """E[v̂] − v̂_clean = Φ (bias-corrected) and E[v] − v_clean = (1−β2^t)Φ (raw; [ADAMBC] Eq. 2)
    for DP-Adam via post-processing (dp_adam, lr = 0) at a small and a large t."""
    import dpsim
    from dpsim import optimizers, problems

    b, sigma, C, beta2, d = 4, 1.5, 0.5, 0.999, 64
    trials = 200 if scale == "quick" else 2000
    prob = problems.linear_box(b, d, scales="ones", bias=1.0, seed=seed)
    gbar, _ = _clean_mean(prob, C, b)
    g2 = gbar * gbar
    opt = optimizers.get("dp_adam", lr=0.0, beta2=beta2, clip=C, noise_multiplier=sigma)

    def raw_dev(state, params, ctx):
        a = lookup(state, "preconditioner")
        xp = ctx.xp
        vc = (1.0 - beta2 ** a.count) * xp.asarray(g2)  # clean raw v for a constant stream
        return xp.mean(a.v - vc, axis=1)

    rows = []
    z = z_two_sided(0.995)
    for steps in (5, 300):
        res = dpsim.simulate(prob, opt, steps=steps, batch_size=b, trials=trials, seed=seed + steps,
                             sampling="fixed", record_every=steps, metrics=(),
                             probes={"dev": _adam_vhat_probe(beta2, lambda vh, xp: xp.mean(vh - xp.asarray(g2), axis=1)),
                                     "raw": raw_dev})
        for key, raw in (("dev", False), ("raw", True)):
            x = np.asarray(res.records[key])[-1]
            est, half = float(x.mean()), z * float(x.std(ddof=1)) / math.sqrt(trials)
            bound = postprocessing_bias(sigma, C, b, beta2=beta2, t=steps, raw=raw)
            rows.append(_b.equal(
                f"design_postprocessing_bias_iid[{'raw v' if raw else 'v̂'}, t={steps}]",
                "[ADAMBC] Eq. 2" if raw else "[DESIGN] §3.1 (reconstructed); [ADAMBC] Eq. 2",
                FAMILY, bound, est, lo=est - half, hi=est + half, ci=half,
                relation="∣estimate − bound∣ <= CI",
                detail=(f"dp_adam lr=0 on linear_box(bias=1): constant clean stream; b={b}, C={C}, σ={sigma}, "
                        f"β2={beta2}, d={d}, {trials} trials; Φ={(sigma * C / b) ** 2:.4g}; 99.5% normal CI "
                        f"(4 rows: 98% family-wise)")))
    return rows


def _mf_simulate(name, T, beta2, sigma, C, b, *, R, d, seed):
    """dp_adam with correlated noise ``noise=name`` (DP-MF, horizon T = the run's steps), lr = 0, on
    ``linear_box(bias=1)`` (constant clean mean); per-trial means over coordinates of
    ``v̂_T − v̂_T^c``."""
    import dpsim
    from dpsim import optimizers, problems

    prob = problems.linear_box(b, d, scales="ones", bias=1.0, seed=seed)
    gbar, _ = _clean_mean(prob, C, b)
    g2 = gbar * gbar
    opt = optimizers.get("dp_adam", lr=0.0, beta2=beta2, clip=C, noise_multiplier=sigma, noise=name)
    res = dpsim.simulate(prob, opt, steps=T, batch_size=b, trials=R, seed=seed + 17, sampling="fixed",
                         record_every=T, metrics=(),
                         probes={"dev": _adam_vhat_probe(beta2, lambda vh, xp: xp.mean(vh - xp.asarray(g2), axis=1))})
    return np.asarray(res.records["dev"])[-1]


@check("design_postprocessing_bias_mf", family=FAMILY)
def _check_postprocessing_bias_mf(scale, seed):
    """DP-MF bias ``Φ Σ_j w_j E[u_j²]`` ([DESIGN] App. A, reconstructed) vs ``dpsim.simulate`` of
    DP-Adam via post-processing with correlated noise (``noise="sqrt_toeplitz"``, ``"banded:4"``)."""
    beta2, T, sigma, C, b = 0.9, 48, 1.0, 1.0, 4
    phi = (sigma * C / b) ** 2
    R, d = (200, 100) if scale == "quick" else (1000, 200)
    z = z_two_sided(0.995)  # two rows: 99% family-wise
    rows = []
    from dpsim.privacy import mf

    for name in ("sqrt_toeplitz", "banded:4"):
        x = _mf_simulate(name, T, beta2, sigma, C, b, R=R, d=d, seed=seed)
        est, half = float(x.mean()), z * float(x.std(ddof=1)) / math.sqrt(R)
        bound = postprocessing_bias(sigma, C, b, beta2=beta2, t=T, strategy=name)
        # ALGORITHMS §4.3's literal shorthand Φ·sens²·Σ_j w_j (M⁻¹)_{Tj}² (row T of M⁻¹)
        M = mf.strategy(name, T)
        Minv = np.linalg.inv(M)
        literal = phi * mf.sensitivity(M) ** 2 * float(np.dot(ema_weights(beta2, T), Minv[T - 1] ** 2))
        rows.append(_b.equal(
            f"design_postprocessing_bias_mf[{name}]", "[DESIGN] App. A (reconstructed)", FAMILY, bound,
            est, lo=est - half, hi=est + half, ci=half, relation="∣estimate − bound∣ <= CI",
            detail=(f"dp_adam(noise={name!r}) lr=0 on linear_box(bias=1), T={T} steps (the strategy's horizon), "
                    f"β2={beta2}, Φ={phi:.4g}, {R} trials × d={d}, 99.5% normal CI over trials; i.i.d. noise "
                    f"would give Φ={phi:.4g}; the literal shorthand Φ·sens²·Σ_j w_j (M⁻¹)_{{Tj}}² of "
                    f"ALGORITHMS §4.3 = {literal:.4g} is {abs(literal - est) / (half / z):.0f} standard errors "
                    f"away (rejected; the code uses the row norms Σ_k (M⁻¹)_{{jk}}²)")))
    return rows


def _mf_ema_noise(strategy, weights, R, seed):
    """``R`` draws of ``Σ_j w_j u_j`` with ``u`` the unit-scale DP-MF noise: from dpsim's own
    streaming generator (:func:`dpsim.privacy.mf.noise_stream`) for a strategy name, or as
    ``sens(M)·M⁻¹Z`` (a triangular solve) for a matrix."""
    from scipy.linalg import solve_triangular

    from dpsim.backend import Backend
    from dpsim.privacy import mf

    T = weights.size
    if isinstance(strategy, str):
        stream = mf.noise_stream(strategy, T)
        be = Backend("numpy", np.random.SeedSequence([seed, 5101]))
        st = stream.init((R,), be)
        acc = np.zeros(R)
        for j in range(T):
            u, st = stream.next(st, be)
            acc += weights[j] * np.asarray(u)
        return acc
    Z = np.random.default_rng([seed, 5102]).standard_normal((T, R))
    U = mf.sensitivity(strategy) * solve_triangular(strategy, Z, lower=True)
    return weights @ U


@check("design_dpmf_variance_lower_bound", family=FAMILY)
def _check_dpmf_lower_bound(scale, seed):
    """[DESIGN] §4.4.1's DP-MF variance lower bound for Adam's decaying second-moment sum
    (reconstructed: "the variance of privatizing just the highest-weight term"), against the
    variance of dpsim's strategies (simulated with its noise generator) and of the decaying
    square-root factorization :func:`ema_sqrt_strategy`."""
    from scipy import stats

    T = 200
    R = 4000 if scale == "quick" else 40000
    names = ("identity", "sqrt_toeplitz", "banded:4")
    level = 0.999  # per row (two-sided chi-square interval for a Gaussian variance)
    rows = []
    for beta in (0.8, 0.999):
        w = ema_weights(beta, T)
        lb = mf_variance_lower_bound(w)
        best = None
        for name in (*names, "ema_sqrt"):
            strat = ema_sqrt_strategy(beta, T) if name == "ema_sqrt" else name
            x = _mf_ema_noise(strat, w, R, seed)
            exact = mf_weighted_variance(w, strat)
            v = float(np.mean(x * x))  # the noise has mean 0
            lo = v * R / float(stats.chi2.ppf(0.5 + level / 2, R))
            hi = v * R / float(stats.chi2.ppf(0.5 - level / 2, R))
            if best is None or lo < best[1]:
                best = (name, lo, v, exact)
            if name in names and beta == 0.8:
                rows.append(_b.equal(
                    f"design_dpmf_weighted_variance[{name}]", "[DESIGN] §2.1 / App. A (reconstructed)",
                    FAMILY, exact, v, lo=lo, hi=hi, ci=(lo, hi),
                    relation="exact sens(M)²∣∣wᵀM⁻¹∣∣² inside the 99.9% chi-square interval",
                    detail=(f"noise of Adam's bias-corrected v̂_T (β2={beta}, T={T}) from dpsim's DP-MF "
                            f"stream noise={name!r} at unit scale, {R} draws; the lower bound "
                            f"max_j w_j² is {lb:.4g}")))
        name, lo, v, exact = best
        rows.append(_b.lower(
            f"design_dpmf_variance_lower_bound[beta2={beta}]",
            "[DESIGN] §4.4.1 DP-MF variance lower bound (reconstructed)", FAMILY, lb, v, lo=lo,
            ci=(lo, None), relation="bound <= lowest variance of any strategy tried (99.9% lower end)",
            why_loose=(f"for β2 near 1 no strategy tried comes within 2× of the bound (the best, "
                       f"{name}, is {exact / lb:.3g}×; the decaying square root tends to "
                       f"((2/π)K(β2))² × the bound as T grows); the bound is the paper's "
                       f"optimistic assumption, exact for a single weighted term only."),
            detail=(f"Var(Σ_j w_j u_j) ≥ max_j w_j² = ((1−β2)/(1−β2^T))² for every strategy "
                    f"(Cauchy–Schwarz: w_j = (wᵀM⁻¹)(M e_j) ≤ ∣∣wᵀM⁻¹∣∣·sens(M)); β2={beta}, T={T}, "
                    f"unit noise scale; strategies identity, sqrt_toeplitz, banded:4 (dpsim's DP-MF "
                    f"stream, {R} draws each) and the decaying square root (I − β2 S)^(−1/2) "
                    f"(triangular solve); lowest: {name}, simulated {v:.4g}, exact {exact:.4g}, "
                    f"ratio to the bound {exact / lb:.3g}; i.i.d. noise gives "
                    f"{mf_weighted_variance(w, 'identity') / lb:.3g}× the bound.")))
    return rows


@check("design_stp_fixed_point", family=FAMILY)
def _check_stp_fixed_point(scale, seed):
    """Scale-then-privatize: simulated stationary ``v`` of dp_adam_stp with frozen parameters vs
    :func:`stp_fixed_point` in every coordinate (clipping verified inactive after burn-in)."""
    import dpsim
    from dpsim import optimizers, problems

    b, sigma, C, beta2, eps_s = 16, 1.0, 10.0, 0.99, 1e-3
    scales = np.array([1.0, 0.5, 0.25, 0.125])
    d, n = scales.size, 1000
    steps, burn, trials = (1600, 1000, 128) if scale == "quick" else (6000, 2000, 512)
    prob = problems.linear_box(n, d, scales=scales, bias=0.5, seed=seed)
    _, G = _clean_mean(prob, C, b)  # unclipped per-example gradients (||g_i|| = ||scales|| < C)
    mean = G.mean(axis=0)
    popvar = G.var(axis=0)
    m2 = mean ** 2 + popvar / b  # E[ḡ_t²] for b examples drawn with replacement
    phi = (sigma * C / b) ** 2
    vstar = np.asarray(stp_fixed_point(m2, sigma, C, b, eps_scale=eps_s))
    width = 2.0 * phi * eps_s * np.sqrt(vstar) / (1.0 - phi)  # v* − v_lo (fixed-point identity)
    opt = optimizers.get("dp_adam_stp", lr=0.0, beta2=beta2, clip=C, noise_multiplier=sigma, eps_scale=eps_s)
    sc = scales

    def coord(j):
        return lambda state, params, ctx: lookup(state, "preconditioner").v[:, j]

    def scaled_norm(state, params, ctx):  # ||s ⊙ g_i|| for the NEXT step (same for every example)
        xp = ctx.xp
        s = 1.0 / (xp.sqrt(xp.maximum(lookup(state, "preconditioner").v, 0.0)) + eps_s)
        return xp.sqrt(xp.sum((s * xp.asarray(sc)) ** 2, axis=1))

    probes = {f"v{j}": coord(j) for j in range(d)}
    probes["snorm"] = scaled_norm
    res = dpsim.simulate(prob, opt, steps=steps, batch_size=b, trials=trials, seed=seed + 31, sampling="replacement",
                         record_every=1, metrics=(), probes=probes)
    st = np.asarray(res.steps)
    keep = st >= burn
    max_norm = float(np.asarray(res.records["snorm"])[keep].max())
    z = z_two_sided(1.0 - 0.01 / d)  # 99% family-wise over the d coordinates
    zs, ests, halves = [], [], []
    for j in range(d):
        per_trial = np.asarray(res.records[f"v{j}"])[keep].mean(axis=0)  # time average, per trial
        est, half = float(per_trial.mean()), z * float(per_trial.std(ddof=1)) / math.sqrt(trials)
        ests.append(est / m2[j])
        halves.append(half / m2[j])
        zs.append(abs(est - vstar[j]) <= half + width[j])
    worst = int(np.argmax([abs(e - vstar[j] / m2[j]) / h for j, (e, h) in enumerate(zip(ests, halves))]))
    ests_a, halves_a = np.array(ests), np.array(halves)
    pred, wid = vstar / m2, width / m2

    def holds(f):  # the fixed point v* scaled by f, every coordinate
        return bool(np.all(np.abs(ests_a - f * pred) <= halves_a + f * wid)) and max_norm <= C

    lo_f = float(np.max((ests_a - halves_a) / (pred + wid)))
    hi_f = float(np.min((ests_a + halves_a) / np.maximum(pred - wid, 1e-300)))
    return _b.predicate(
        "design_stp_fixed_point", "[DESIGN] §4.3.1 / App. B (reconstructed)", FAMILY,
        float(vstar[worst] / m2[worst]), ests[worst], holds=holds, margin=max(hi_f, 1.0 / lo_f),
        stronger=(0.5, 2.0), ci=halves[worst],
        relation="∣estimate − v*∣/m <= CI + (v* − v_lo)/m, all coordinates",
        detail=(f"dp_adam_stp lr=0 on linear_box(scales={[float(v) for v in sc]}, bias=0.5), b={b}, C={C}, σ={sigma} "
                f"(Φ={phi:.4g}), β2={beta2}, ε_s={eps_s}, batches with replacement, {trials} trials, time average over steps "
                f"{burn}..{steps}; v/m per coordinate = {[round(float(e), 4) for e in ests]} vs 1/(1−Φ) = "
                f"{1 / (1 - phi):.4f} (proportional to the clean second moment; post-processing would give "
                f"{[round(float(1 + phi / mm), 2) for mm in m2]}); max ||s⊙g_i|| after burn-in = {max_norm:.3g} "
                f"≤ C={C} (clipping inactive); 99% family-wise normal CI over trials"))


def _update_noise_run(name, prob, gbar, *, lr, beta2, clip, sigma, eps_scale, strategy, steps,
                      trials, seed):
    """dp_adam or dp_adam_stp (β1 = 0) with DP-MF noise on a linear problem whose full-batch
    clipped mean ``gbar`` is constant: per run and coordinate, the noise part of every update,
    ``Δθ_t + lr ḡ/(√v̂_t + ε)``, and the raw ``v`` before each step, ``(steps + 1, R, d)``."""
    import dpsim
    from dpsim import optimizers

    d = gbar.size
    kw = dict(lr=lr, beta1=0.0, beta2=beta2, eps=1e-12, clip=clip, noise_multiplier=sigma,
              noise=strategy)
    if name == "dp_adam_stp":
        kw["eps_scale"] = eps_scale
    probes = {f"v{j}": (lambda s, w, c, j=j: lookup(s, "preconditioner").v[:, j]) for j in range(d)}
    probes.update({f"w{j}": (lambda s, w, c, j=j: w[:, j]) for j in range(d)})
    res = dpsim.simulate(prob, optimizers.get(name, **kw), steps=steps, batch_size=prob.n,
                         trials=trials, seed=seed, sampling="fixed", record_every=1, metrics=(),
                         probes=probes)
    V = np.stack([np.asarray(res.records[f"v{j}"]) for j in range(d)], axis=-1)
    W = np.stack([np.asarray(res.records[f"w{j}"]) for j in range(d)], axis=-1)
    tau = np.arange(1, steps + 1, dtype=float)[:, None, None]
    vhat = V[1:] / (1.0 - beta2 ** tau)
    noise = (W[1:] - W[:-1]) + lr * gbar / (np.sqrt(vhat) + 1e-12)
    return noise, V, float(np.abs(W).max())


@check("design_stp_mf_update_noise", family=FAMILY)
def _check_stp_mf_update_noise(scale, seed):
    """[DESIGN] §4.5 (reconstructed): under scale-then-privatize with DP-MF noise, the noise in a
    window of Adam's updates has the same variance in every coordinate, the DP-SGD prefix-sum
    objective ``stp_update_noise_variance`` (so the strategy can be chosen offline), whatever the
    coordinates' gradient scales; DP-Adam via post-processing, run alongside, does not."""
    from scipy import stats

    from dpsim import problems

    b, sigma, C, beta2, lr, eps_s, strategy = 64, 1.0, 10.0, 0.99, 1e-4, 1e-6, "sqrt_toeplitz"
    steps, start = 600, 300
    R = 500 if scale == "quick" else 2000
    scales = np.array([1.0, 0.1, 0.01, 0.001])
    d = scales.size
    prob = problems.linear_box(b, d, scales=scales, bias=1.0, seed=seed + 4501)
    gbar, G = _clean_mean(prob, C, b)
    m = gbar * gbar
    phi = (sigma * C / b) ** 2
    pred = stp_update_noise_variance(beta2, phi, strategy, steps, start=start)
    ones = np.zeros(steps)
    ones[start:] = 1.0
    sgd = mf_weighted_variance(ones, strategy, steps=steps)
    iid = mf_weighted_variance(ones, "identity", steps=steps)
    out = {}
    for name in ("dp_adam_stp", "dp_adam"):
        noise, V, travel = _update_noise_run(name, prob, gbar, lr=lr, beta2=beta2, clip=C, sigma=sigma,
                                             eps_scale=eps_s, strategy=strategy, steps=steps,
                                             trials=R, seed=seed + 4502)
        S = noise[start:].sum(axis=0)  # (R, d): noise in θ_T − θ_start
        out[name] = (S.var(axis=0, ddof=1) / (lr * lr * phi), V, travel)
    vs, V, travel = out["dp_adam_stp"]
    vp = out["dp_adam"][0]
    # clipping in the scaled geometry must be inactive on the window: max_i ||s ⊙ g_i|| ≤ C
    s2 = 1.0 / (np.sqrt(np.maximum(V[start:steps], 0.0)) + eps_s) ** 2  # (steps − start, R, d)
    snorm = float(np.sqrt(np.max(s2.reshape(-1, d) @ (G * G).T)))
    level = 1.0 - 0.01 / d  # 99% family-wise over the coordinates
    lo = vs * (R - 1) / float(stats.chi2.ppf(0.5 + level / 2, R - 1))
    hi = vs * (R - 1) / float(stats.chi2.ppf(0.5 - level / 2, R - 1))
    worst = int(np.argmax(np.maximum(hi / pred, pred / lo)))

    def holds(f):
        return bool(np.all((lo <= f * pred) & (f * pred <= hi))) and snorm <= C and travel < 1.0

    return _b.predicate(
        "design_stp_mf_update_noise", "[DESIGN] §4.5 STP × DP-MF (reconstructed)", FAMILY, pred,
        float(vs[worst]), holds=holds, margin=float(np.max(np.maximum(hi / pred, pred / lo))),
        stronger=(0.5, 2.0), ci=(float(lo[worst]), float(hi[worst])),
        relation="Var(noise in θ_T − θ_t0)/(η²Φ) = stp_update_noise_variance in every coordinate (CI)",
        detail=(f"dp_adam_stp (β1=0, lr={lr}, β2={beta2}, ε_s={eps_s}) with noise={strategy!r} "
                f"(horizon T={steps}) on linear_box(n=b={b}, scales={scales.tolist()}, bias=1), full "
                f"batches, C={C}, σ={sigma} (Φ={phi:.4g}): clean second moments m_j = "
                f"{[float(f'{x:.3g}') for x in m]} span {m.max() / m.min():.3g}×; window "
                f"t0={start}..T, {R} runs, chi-square CI {level:.4f} per coordinate (99% "
                f"family-wise). Simulated variance per coordinate "
                f"{[round(float(x), 3) for x in vs]} against {pred:.4g} (the DP-SGD objective "
                f"with c ≡ 1 is {sgd:.4g}; i.i.d. noise would give {iid:.4g}); max ∣∣s⊙g_i∣∣ on the "
                f"window = {snorm:.3g} ≤ C (clipping inactive), max ∣θ∣ = {travel:.3g} (inside the "
                f"box). DP-Adam via post-processing with the same noise: "
                f"{[round(float(x), 3) for x in vp]}, a spread of {vp.max() / vp.min():.3g}× across "
                f"coordinates (its coefficient 1/√v̂ follows each coordinate's m_j + Φ), against "
                f"{vs.max() / vs.min():.3g}× under scale-then-privatize."))
