"""Issue 34 ("theorem checks with teeth"), [ADAMBC] and [DESIGN] parts: Props. 6/7 evaluated in
every variant, Adam's travel bound, the scale-then-privatize update-noise coefficients, and the
rows built on them (branching Prop. 4, Prop. 6's searched instance, Lemma 3 / Corollary 1 margins
on δ, STP × DP-MF).  Oracles are independent: hand-worked values, explicit loops and NumPy
re-implementations of the recursions, never the formula under test."""

import math

import numpy as np
import pytest

from dpsim.analysis import bias
from dpsim.analysis import concentration as K


# ------------------------------------------------------------------------------------------------
# [ADAMBC] Props. 6 and 7 evaluated term by term


def test_prop6_terms_at_a_hand_worked_point_for_both_variants():
    """C² + Φ = 4, Φ = 1/4, 1 − β2 = 1/4, ε = 16, d = 2, L = 3, η = 1/2, T = 2, gap = 3."""
    T, eta, d, L, C, phi, b2, eps, gap, a = 2, 0.5, 2, 3.0, math.sqrt(3.75), 0.25, 0.75, 16.0, 3.0, 0.1
    delta = float(K.corollary1_bound(a, T, C, phi, b2))
    first, coef, bracket = K.prop6_bound(T, eta, d, L, C, phi, b2, eps, gap, a, terms=True)
    assert first == pytest.approx(2 * delta * gap / (eta * T), rel=1e-12)
    assert coef == pytest.approx(4 * d * 4 / 0.5 + eta * d * L * 2 / 0.25, rel=1e-12)  # 64 + 24
    assert bracket == pytest.approx(math.log(2.0) / T - math.log(0.75), rel=1e-12)
    assert K.prop6_bound(T, eta, d, L, C, phi, b2, eps, gap, a) == pytest.approx(
        first + coef * bracket, rel=1e-12)
    f_bc, c_bc, br_bc = K.prop6_bound(T, eta, d, L, C, phi, b2, eps, gap, a, variant="dp_adambc",
                                      terms=True)
    assert f_bc == pytest.approx(2 * math.sqrt(delta * delta - phi) * gap / (eta * T), rel=1e-12)
    assert c_bc == pytest.approx(4 * d * 3.75 / 0.5 + eta * d * L * C / 0.25, rel=1e-12)
    # ln(1 − (C² + Φ)/((1 − β2)Φ)) = ln(1 − 64): undefined, computed as nan
    assert math.isnan(br_bc)
    assert float(K.prop6_log_argument(C, phi, b2)) == pytest.approx(-63.0)
    assert math.isnan(K.prop6_bound(T, eta, d, L, C, phi, b2, eps, gap, a, variant="dp_adambc"))


def test_prop6_first_term_scales_as_s_cubed_the_rest_as_s_squared():
    """F → sF: C, √Φ, L, gap × s, ε × s² (Adam's trajectory unchanged).  E‖∇F‖² scales as s²;
    the printed first term as s³ (δ is a squared scale), so bound/C² → the rest as s → 0."""
    T, eta, d, L, C, phi, b2, eps, gap, a = 300, 1e-3, 1, 0.5, 1.0, 1e-2, 0.99, 1e-6, 2.0, 0.05
    f1, c1, b1 = K.prop6_bound(T, eta, d, L, C, phi, b2, eps, gap, a, terms=True)
    for s in (1e-1, 1e-3):
        fs, cs, bs = K.prop6_bound(T, eta, d, s * L, s * C, s * s * phi, b2, s * s * eps, s * gap, a,
                                   terms=True)
        assert fs == pytest.approx(s ** 3 * f1, rel=1e-9)
        assert cs == pytest.approx(s ** 2 * c1, rel=1e-9)
        assert bs == pytest.approx(b1, rel=1e-12)


def test_prop7_log_argument_and_dp_adambc_terms():
    # 1 − δ²/(Φ(1 − β2)): δ = 1, Φ = 1/2, β2 = 3/4 → 1 − 8 = −7
    assert float(K.prop7_log_argument(1.0, 0.5, 0.75)) == pytest.approx(-7.0)
    rng = np.random.default_rng(3)
    ph, b2 = 10 ** rng.uniform(-10, 1, 400), rng.uniform(1e-3, 1 - 1e-6, 400)
    dl = np.sqrt(ph * (1 + rng.uniform(0, 5, 400)))  # δ² ≥ Φ: where √(δ² − Φ) is real
    assert np.all(np.asarray(K.prop7_log_argument(dl, ph, b2)) < 0)
    T, eta, d, L, b1, b2, phi, gap, dl = 5, 0.5, 2, 3.0, 0.5, 0.75, 0.25, 1.5, 2.0
    eps = dl * dl / (1 - b2)
    k = 1 / 3  # 1 − β1/β2
    r, r2 = math.sqrt(dl * dl - phi), dl * dl - phi
    first, E, bracket = K.prop7_bound(T, eta, d, L, b1, b2, eps, phi, gap, dl, variant="dp_adambc",
                                      terms=True)
    assert first == pytest.approx(2 * r * gap / (eta * (T - 1)), rel=1e-12)
    assert E == pytest.approx(eta * d * L * 0.5 * r / (k * 0.25) + 2 * eta ** 2 * d * L ** 2 * b1 /
                              (k * 0.25 ** 1.5) + 12 * d * r2 * math.sqrt(0.5) / (k ** 1.5 * 0.5),
                              rel=1e-12)
    assert math.isnan(bracket)
    f, E_p, br = K.prop7_bound(T, eta, d, L, b1, b2, eps, phi, gap, dl, terms=True)
    assert br == pytest.approx(math.log(2.0) - T * math.log(0.75), rel=1e-12)
    assert K.prop7_bound(T, eta, d, L, b1, b2, eps, phi, gap, dl) == pytest.approx(f + E_p * br, rel=1e-12)


def test_prop7_with_its_missing_one_over_t_is_a_constant_multiple_of_prop6():
    """At β1 = 0, δ² = C² + Φ, gap = 0: restoring the 1/T of Prop. 6's bracket makes
    Prop. 7/Prop. 6 = (ηdLδ/(1−β2) + 12dδ²/√(1−β2))/(ηdLδ/(1−β2) + 4dδ²/√(1−β2)) for every T."""
    d, L, C, b2, eps, eta, phi = 10, 0.25, 1.0, 0.999, 1e-8, 0.01, 4e-4
    dl = math.sqrt(C * C + phi)
    a = eta * d * L * dl / (1 - b2)
    expect = (a + 12 * d * dl ** 2 / math.sqrt(1 - b2)) / (a + 4 * d * dl ** 2 / math.sqrt(1 - b2))
    for T in (10, 200, 1000):
        f7, E7, br7 = K.prop7_bound(T, eta, d, L, 0.0, b2, eps, phi, 0.0, dl, terms=True)
        p6 = K.prop6_bound(T, eta, d, L, C, phi, b2, eps, 0.0, 0.05)
        assert (f7 + E7 * br7 / T) / p6 == pytest.approx(expect, rel=1e-12)


# ------------------------------------------------------------------------------------------------
# Adam's travel bound


def _adam_steps(g, lr, beta2, eps=0.0):
    """Adam without momentum, bias-corrected, on the scalar gradient sequence ``g``: the steps."""
    v, out = 0.0, []
    for t, gt in enumerate(g, 1):
        v = beta2 * v + (1 - beta2) * gt * gt
        vhat = v / (1 - beta2 ** t)
        out.append(lr * gt / (math.sqrt(vhat) + eps) if gt else 0.0)
    return np.array(out)


def test_adam_travel_bound_is_the_sum_of_attained_per_step_bounds():
    lr, b2, T = 0.01, 0.9, 40
    expect = sum(lr * math.sqrt((1 - b2 ** t) / (1 - b2)) for t in range(1, T + 1))
    assert float(K.adam_travel_bound(lr, b2, T)) == pytest.approx(expect, rel=1e-12)
    # step t reaches its bound when every earlier gradient is 0
    for t in (1, 7, 40):
        g = np.zeros(T)
        g[t - 1] = 3.0
        assert _adam_steps(g, lr, b2)[t - 1] == pytest.approx(lr * math.sqrt((1 - b2 ** t) / (1 - b2)))
    # no gradient sequence travels further (random, sparse and signed sequences)
    rng = np.random.default_rng(5)
    for _ in range(50):
        g = rng.standard_normal(T) * (rng.random(T) < rng.uniform(0.05, 1.0))
        assert abs(_adam_steps(g, lr, b2).sum()) <= float(K.adam_travel_bound(lr, b2, T)) + 1e-15
    got = np.asarray(K.adam_travel_bound(np.array([0.01, 0.02]), np.array([[0.9], [0.99]]), 5))
    assert got.shape == (2, 2) and got[0, 1] == pytest.approx(2 * got[0, 0])
    assert float(K.adam_travel_bound(1.0, 0.0, 3)) == pytest.approx(3.0)  # β2 = 0: sign descent
    with pytest.raises(ValueError):
        K.adam_travel_bound(0.1, 1.0, 3)
    with pytest.raises(ValueError):
        K.adam_travel_bound(0.1, 0.9, 2.5)


# ------------------------------------------------------------------------------------------------
# [DESIGN] §4.5: scale-then-privatize's update-noise coefficients


def test_stp_update_noise_coefficients_follow_the_mean_recursion():
    """c_t² = (1 − β2^t) E v_{t−1}/E v_t with E v_t = β2 E v_{t−1} + (1 − β2)(m + Φ E v_{t−1})
    (scale-then-privatize with ε_s = 0), run as a loop from v_0 = 0 with any m > 0."""
    b2, phi, T, m = 0.95, 0.3, 120, 2.5
    ev = [0.0]
    for _ in range(T):
        ev.append(b2 * ev[-1] + (1 - b2) * (m + phi * ev[-1]))
    ev = np.array(ev)
    t = np.arange(1, T + 1)
    expect = np.sqrt((1 - b2 ** t) * ev[:-1] / ev[1:])
    np.testing.assert_allclose(bias.stp_update_noise_coefficients(b2, phi, T), expect, rtol=1e-12,
                               atol=1e-15)
    c = bias.stp_update_noise_coefficients(0.99, 0.01, 3000)
    assert c[0] == 0.0 and abs(c[-1] - 1.0) < 1e-12 and np.all(np.diff(c) > -1e-15)
    assert np.all(c <= np.sqrt((1 - 0.99 ** np.arange(1, 3001)) / 0.99) + 1e-15)
    with pytest.raises(ValueError):
        bias.stp_update_noise_coefficients(0.9, 1.0, 10)  # no steady state for Φ ≥ 1
    with pytest.raises(ValueError):
        bias.stp_update_noise_coefficients(0.9, 0.1, 0)


def test_stp_update_noise_variance_is_the_weighted_dpmf_objective():
    b2, phi, T, start = 0.9, 0.2, 30, 10
    c = bias.stp_update_noise_coefficients(b2, phi, T)
    # identity strategy (i.i.d. noise, sensitivity 1): Σ_{t > start} c_t²
    assert bias.stp_update_noise_variance(b2, phi, "identity", T, start=start) == pytest.approx(
        float(np.sum(c[start:] ** 2)), rel=1e-12)
    # a lower-triangular matrix: sens(M)² ‖wᵀ M⁻¹‖² with an explicit inverse
    rng = np.random.default_rng(2)
    M = np.tril(rng.uniform(-0.3, 0.3, (T, T)), -1) + np.diag(rng.uniform(0.5, 1.5, T))
    w = c.copy()
    w[:start] = 0.0
    sens2 = float(np.max(np.sum(M * M, axis=0)))
    expect = sens2 * float(np.sum((w @ np.linalg.inv(M)) ** 2))
    assert bias.stp_update_noise_variance(b2, phi, M, T, start=start) == pytest.approx(expect, rel=1e-9)
    assert bias.stp_update_noise_variance(b2, phi, "identity", T) == pytest.approx(float(np.sum(c * c)))
    with pytest.raises(ValueError):
        bias.stp_update_noise_variance(b2, phi, "identity", T, start=T)


def test_stp_update_noise_variance_against_a_numpy_scale_then_privatize():
    """One coordinate of scale-then-privatize Adam (β1 = 0), written out in NumPy: release
    (clip(s ḡ, C) + √Φ ξ)/s with s = 1/(√v + ε_s); the noise in the last 200 updates divided by
    η√Φ has the predicted variance with i.i.d. noise (99.9 % normal interval on the variance)."""
    rng = np.random.default_rng(11)
    R, T, start, b2, phi, C, eps_s, gbar = 4000, 400, 200, 0.98, 0.05, 10.0, 1e-6, 0.7
    v = np.zeros(R)
    acc = np.zeros(R)
    for t in range(1, T + 1):
        s = 1.0 / (np.sqrt(v) + eps_s)
        xi = rng.standard_normal(R)
        g = (np.clip(s * gbar, -C, C) + math.sqrt(phi) * xi) / s
        v = b2 * v + (1 - b2) * g * g
        if t > start:
            acc += (math.sqrt(phi) * xi / s) / np.sqrt(v / (1 - b2 ** t)) / math.sqrt(phi)
    pred = bias.stp_update_noise_variance(b2, phi, "identity", T, start=start)
    got = float(acc.var(ddof=1))
    assert abs(got / pred - 1.0) <= 3.29 * math.sqrt(2.0 / (R - 1)), (got, pred)


# ------------------------------------------------------------------------------------------------
# rows


def test_stp_mf_update_noise_row_passes_and_fails_at_half_or_double(monkeypatch):
    from dpsim.analysis.checks import design

    row = design._check_stp_mf_update_noise("quick", 0)
    assert row.verdict == "pass" and row.strengthened() == "fail" and row.margin < 2
    real = design.stp_update_noise_variance
    monkeypatch.setattr(design, "stp_update_noise_variance", lambda *a, **k: 0.5 * real(*a, **k))
    assert design._check_stp_mf_update_noise("quick", 0).verdict == "fail"


def _halved_deviation(real, mu_of):
    """``μ* + ½(δ − μ*)``: the concentration term of Lemma 3 / Corollary 1 halved."""
    def f(alpha, t, C, phi, b2, variant="corrected"):
        mu = np.asarray(mu_of(t, C, phi, b2, variant))
        return mu + 0.5 * (np.asarray(real(alpha, t, C, phi, b2, variant=variant)) - mu)
    return f


def test_lemma3_and_corollary1_rows_scale_the_deviation_not_alpha(monkeypatch):
    from dpsim.analysis.checks import adambc

    l3 = adambc._check_lemma3_sim("quick", 0)
    c1 = adambc._check_cor1_sim("quick", 0)
    corrected = [r for r in l3 + c1 if "(corrected)" in r.source]
    assert len(corrected) == 4 and all(r.verdict == "pass" and r.margin < 2 for r in corrected)

    def mu_of(t, C, phi, b2, variant):
        return K.lemma3_parameters(t, C, phi, b2, variant=variant)[0]

    monkeypatch.setattr(adambc, "lemma3_bound", _halved_deviation(K.lemma3_bound, mu_of))
    monkeypatch.setattr(adambc, "corollary1_bound", _halved_deviation(K.corollary1_bound, mu_of))
    l3 = adambc._check_lemma3_sim("quick", 0)
    c1 = adambc._check_cor1_sim("quick", 0)
    assert all(r.verdict == "fail" for r in l3 + c1 if "(corrected)" in r.source)


def test_prop2_finite_beta_row_has_its_margin_on_epsilon(monkeypatch):
    from dpsim.analysis.checks import adambc

    rows = [r for r in adambc._check_prop2_sim("quick", 0) if r.source.endswith("(finite-β bound)")]
    assert rows and all(r.verdict == "sanity" and "Sanity only" in r.detail for r in rows)
    for r in rows:
        assert r.margin == pytest.approx(1.0 / r.ci[0]) and r.estimate < 1.0
    real = adambc.prop2_error_bound
    small = min(r.ci[0] for r in rows) / 2
    monkeypatch.setattr(adambc, "prop2_error_bound", lambda *a, **k: small * np.asarray(real(*a, **k)))
    rows = [r for r in adambc._check_prop2_sim("quick", 0) if r.source.endswith("(finite-β bound)")]
    assert all(r.verdict == "fail" for r in rows)


# ------------------------------------------------------------------------------------------------
# [ADAMBC] Lemma 3 and Prop. 4 parameters at hand-worked points


def test_lemma3_parameters_at_a_hand_worked_point():
    """β2 = 1/2, t = 2, C = Φ = 1: Σ_{j=1}^2 β2^j = 3/4.  Printed: μ* = (3/4)((1 − 2/π) +
    (1 + √(2/π))²), ν* = 2β2²Φ√((β2^t − 1)/(β2² − 1)) = 1/2, b* = 4β2Φ = 2.  Corrected:
    μ* = (3/4)(C² + Φ) = 3/2, ν* = 2β2(Φ + C√Φ)√((1 − β2^4)/(1 − β2²)) = 2√(5/4),
    b* = 4β2Φ·max(1, (1 + μ)²/(1 + 4μ)) with μ = C/√Φ = 1: 2."""
    mu, nu, b = K.lemma3_parameters(2, 1.0, 1.0, 0.5, variant="paper")
    assert mu == pytest.approx(0.75 * ((1 - 2 / math.pi) + (1 + math.sqrt(2 / math.pi)) ** 2), rel=1e-12)
    assert nu == pytest.approx(0.5, rel=1e-12) and b == pytest.approx(2.0, rel=1e-12)
    mu, nu, b = K.lemma3_parameters(2, 1.0, 1.0, 0.5)
    assert mu == pytest.approx(1.5, rel=1e-12) and nu == pytest.approx(2 * math.sqrt(1.25), rel=1e-12)
    assert b == pytest.approx(2.0, rel=1e-12)
    # t = 3, β2 = 0.9, C = 2, Φ = 1/4 (μ = 4): the sums written out
    t, b2, C, ph = 3, 0.9, 2.0, 0.25
    geom = sum(b2 ** j for j in range(1, t + 1))
    mu, nu, b = K.lemma3_parameters(t, C, ph, b2, variant="paper")
    assert mu == pytest.approx(geom * ((ph - 2 * ph / math.pi) + (C + math.sqrt(2 * ph / math.pi)) ** 2))
    # as printed: (β2^t − 1)/(β2² − 1) under the root (the mis-summed Σ_k β2^{2k})
    assert nu == pytest.approx(2 * b2 ** 2 * ph * math.sqrt((1 - b2 ** t) / (1 - b2 ** 2)))
    mu, nu, b = K.lemma3_parameters(t, C, ph, b2)
    assert mu == pytest.approx(geom * (C * C + ph))
    assert nu == pytest.approx(2 * b2 * (ph + C * math.sqrt(ph)) * math.sqrt(sum(b2 ** (2 * k) for k in range(t))))
    assert b == pytest.approx(4 * b2 * ph * 25 / 17)


def test_prop4_parameters_without_noise_are_zero():
    for conv in ("corrected", "paper"):
        nu, b, c = K.prop4_parameters(50, 0.0, 0.3, 8, 0.9, convention=conv)
        assert nu == 0.0 and b == 0.0 and c == pytest.approx(0.1 / (1 - 0.9 ** 50))
        assert K.prop4_bound(0.05, 50, 0.0, 0.3, 8, 0.9, convention=conv) == 0.0


# ------------------------------------------------------------------------------------------------
# [DESIGN] negative estimates: closed forms that pin λ = g²/Φ and the regimes' λ


def test_negative_probability_at_one_step_is_a_normal_interval():
    """t = 1: v̂ − Φ < 0 ⇔ (g + z)² < Φ ⇔ ∣g + z∣ < √Φ, z ~ N(0, Φ):
    P = N(1 − g/√Φ) − N(−1 − g/√Φ).  Φ ≠ 1, so λ = g²/Φ (not g²Φ) is what the answer depends on."""
    from scipy.stats import norm

    for g, phi in ((0.3, 0.25), (0.05, 4.0), (-1.2, 0.5)):
        r = g / math.sqrt(phi)
        expect = norm.cdf(1 - r) - norm.cdf(-1 - r)
        assert bias.negative_probability(g, phi, 0.9, t=1) == pytest.approx(expect, abs=1e-9)
    got = np.asarray(bias.negative_probability(np.array([0.3, 0.0]), np.array([0.25, 0.0]), 0.9, t=1))
    assert got[0] == pytest.approx(norm.cdf(1 - 0.6) - norm.cdf(-1.6), abs=1e-9) and got[1] == 0.0


def test_negative_fraction_regimes_are_negative_probability_at_their_gradient():
    """Optimistic: g² = C²/d; pessimistic: g² = C²/(bd); Φ = (σC/b)² (σ below and above 1)."""
    b, C, beta2, t = 16, 2.0, 0.95, 40
    for sigma in (0.5, 2.0):
        phi = (sigma * C / b) ** 2
        for d in (64, 256):
            opt = bias.negative_fraction(d, b, sigma, beta2, clip=C, t=t)
            pes = bias.negative_fraction(d, b, sigma, beta2, clip=C, t=t, regime="pessimistic")
            assert opt == pytest.approx(bias.negative_probability(C / math.sqrt(d), phi, beta2, t=t), abs=1e-12)
            assert pes == pytest.approx(bias.negative_probability(C / math.sqrt(b * d), phi, beta2, t=t),
                                        abs=1e-12)
    assert bias.negative_fraction(64, b, 0.0, beta2, t=t) == 0.0


def test_ema_weights_without_memory_put_everything_on_the_last_step():
    np.testing.assert_array_equal(bias.ema_weights(0.0, 4), [0.0, 0.0, 0.0, 1.0])


def test_max_dimension_fraction_with_one_step_needs_a_large_lambda():
    """t = 1: P((ξ + √λ)² < 1) = 0.05 needs λ ≈ 6.8 > 1 (the bracket search must grow); the d it
    returns gives the fraction back, and λ = b²/(σ²d) solves N(1 − √λ) − N(−1 − √λ) = 0.05."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    b, sigma = 32, 1.0
    lam = brentq(lambda l: norm.cdf(1 - math.sqrt(l)) - norm.cdf(-1 - math.sqrt(l)) - 0.05, 1.0, 50.0)
    d = float(bias.max_dimension(b, sigma, 0.9, t=1, fraction=0.05))
    assert d == pytest.approx(b * b / (sigma * sigma * lam), rel=1e-6)
    assert bias.negative_fraction(d, b, sigma, 0.9, t=1) == pytest.approx(0.05, abs=1e-9)
