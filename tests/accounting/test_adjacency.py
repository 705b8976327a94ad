"""The neighbouring relation behind ε, said exactly (issue 33, Build 2).

dpsim's Poisson ε is an add/remove guarantee **with the sampling rate q = b/n fixed in advance**:
the neighbour one example shorter is sampled at the same q.  A reader who recomputes the rate from
the neighbour's own size (b/(n−1)) gets another mechanism; for b ≤ n − 2 the claim still held in
every case mapped (adversarial review, P2), but at b = n − 1 the neighbour's rate is 1 and the
claim fails by a factor 4.  These tests compute the exact one-step ε of both readings (the
hockey-stick divergence of the two Gaussian mixtures, by quadrature) and check that dpsim refuses
exactly the case its claim does not cover, and names the relation wherever ε is printed.
"""

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import logsumexp
from scipy.stats import binom

import dpsim
from dpsim import accounting, optimizers, problems
from dpsim.calibrate import epsilon_for
from dpsim.sampling import check_sampling

DELTA = 1e-5


def _log_mixture(y, means, logw, sigma):
    """log density at ``y`` of ``Σ_k w_k N(means_k, σ²)``."""
    z = (y[:, None] - np.asarray(means, dtype=float)[None, :]) / sigma
    return logsumexp(logw[None, :] - 0.5 * z * z, axis=1) - np.log(sigma * np.sqrt(2 * np.pi))


def exact_one_step_epsilon(n, b, sigma, delta, *, rate_of_neighbour, others=1.0):
    """Exact ε at ``delta`` of one Poisson-subsampled Gaussian sum release, 1-D, clip 1: the canary
    has gradient 1 and each of the ``n − 1`` other examples ``others`` (1: aligned with the
    canary, the worst case the review mapped; −1: against it), so the release is
    ``B_c + others·B_o + σ Z``.  ``D`` has ``n`` rows sampled at ``b/n``; its neighbour ``D'`` (the
    canary removed) ``n − 1`` rows sampled at ``rate_of_neighbour`` (``b/n``: the rate fixed in
    advance; ``b/(n−1)``: recomputed).  ε is the smallest with ``max(H_ε(P‖Q), H_ε(Q‖P)) ≤ δ``
    (hockey-stick divergences of the two Gaussian mixtures, trapezoid on a grid of step σ/300
    over the whole support ± 12σ)."""
    q = b / n
    k = np.arange(n)                                      # other examples in the batch
    lw_o = binom.logpmf(k, n - 1, q)
    log_out = np.log1p(-q) if q < 1 else -np.inf
    means_p = np.concatenate([others * k, 1 + others * k])  # canary out / in
    lw_p = np.concatenate([lw_o + log_out, lw_o + np.log(q)])
    means_q = others * k
    lw_q = binom.logpmf(k, n - 1, min(rate_of_neighbour, 1.0))
    lo = min(means_p.min(), 0.0) - 12 * sigma
    hi = max(means_p.max(), 0.0) + 12 * sigma
    y = np.linspace(lo, hi, int((hi - lo) / (sigma / 300)) + 1)
    dy = y[1] - y[0]
    lp, lq = _log_mixture(y, means_p, lw_p, sigma), _log_mixture(y, means_q, lw_q, sigma)

    def gap(eps):
        a = np.clip(np.exp(lp) - np.exp(eps + lq), 0, None).sum() * dy
        c = np.clip(np.exp(lq) - np.exp(eps + lp), 0, None).sum() * dy
        return max(a, c) - delta

    return brentq(gap, 0.0, 80.0, xtol=1e-6)


def test_b_equal_n_minus_1_breaks_the_recomputed_rate_reading_and_is_refused():
    """n = 100, b = 99, σ = 1: claimed 4.365; exact with the neighbour at its own rate 99/99 = 1:
    17.6 (the review's number); with the rate fixed in advance: 4.14 (the claim holds)."""
    n, b, sigma = 100, 99, 1.0
    claimed = accounting.epsilon(sigma, b / n, 1, DELTA)
    assert claimed == pytest.approx(4.365, abs=1e-3)
    recomputed = exact_one_step_epsilon(n, b, sigma, DELTA, rate_of_neighbour=b / (n - 1))
    fixed = exact_one_step_epsilon(n, b, sigma, DELTA, rate_of_neighbour=b / n)
    assert recomputed == pytest.approx(17.65, abs=0.05) and recomputed > 4 * claimed
    assert fixed <= claimed  # what dpsim claims (rate fixed in advance) holds
    # ... so the case is refused wherever a run or a calibration is set up
    with pytest.raises(ValueError, match=r"batch_size=99 = n - 1 \(n=100\)") as exc:
        check_sampling("poisson", n, b)
    assert "\n" not in str(exc.value) and "17.6" in str(exc.value)
    prob = problems.least_squares(n, 2, seed=0)
    with pytest.raises(ValueError, match="n - 1"):
        dpsim.simulate(prob, optimizers.dp_sgd(noise_multiplier=sigma), steps=1, batch_size=b)
    with pytest.raises(ValueError, match="n - 1"):
        dpsim.calibrate("dp_sgd", epsilon=5.0, delta=DELTA, steps=10, batch_size=b, n=n)
    with pytest.raises(ValueError, match="n - 1"):
        epsilon_for(optimizers.dp_sgd(), delta=DELTA, steps=1, batch_size=b, n=n)


def test_b_up_to_n_minus_2_and_b_equal_n_are_covered_and_accepted():
    """b = 98: exact 3.02 under the recomputed reading, below the claim 4.35; b = n: rate 1 under
    either reading, the claim is the plain Gaussian mechanism (PLD within 1e-5 of exact)."""
    n, sigma = 100, 1.0
    claimed = accounting.epsilon(sigma, 98 / n, 1, DELTA)
    exact = exact_one_step_epsilon(n, 98, sigma, DELTA, rate_of_neighbour=98 / (n - 1))
    assert exact == pytest.approx(3.015, abs=0.01) and exact <= claimed
    check_sampling("poisson", n, 98)
    claimed_full = accounting.epsilon(sigma, 1.0, 1, DELTA)
    exact_full = exact_one_step_epsilon(n, n, sigma, DELTA, rate_of_neighbour=1.0)
    assert exact_full <= claimed_full <= exact_full * (1 + 1e-5)
    check_sampling("poisson", n, n)


def test_only_the_rate_fixed_in_advance_is_claimed():
    """Other examples pointing against the canary: the recomputed reading fails at b = n − 2 too
    (and at n = 2, b = 1), while the claim dpsim makes, with the rate fixed in advance, holds;
    at b = 90 both hold.  So ε names the fixed-rate relation, and b = n − 1 is refused."""
    sigma = 1.0
    for n, b, bad in ((100, 98, True), (2, 1, True), (100, 90, False)):
        claimed = accounting.epsilon(sigma, b / n, 1, DELTA)
        recomputed = exact_one_step_epsilon(n, b, sigma, DELTA, rate_of_neighbour=b / (n - 1),
                                            others=-1.0)
        fixed = exact_one_step_epsilon(n, b, sigma, DELTA, rate_of_neighbour=b / n, others=-1.0)
        assert fixed <= claimed, (n, b, fixed, claimed)
        assert (recomputed > claimed) == bad, (n, b, recomputed, claimed)


def test_small_n_and_other_samplers():
    with pytest.raises(ValueError, match="n - 1"):
        check_sampling("poisson", 2, 1)     # n = 2, b = 1: the neighbour's rate is 1 too
    check_sampling("poisson", 1, 1)         # b = n = 1
    check_sampling("fixed", 100, 99)        # replace-one, n public: not concerned
    check_sampling("replacement", 100, 99)


def test_cyclic_groups_whose_rate_reaches_one_are_refused_too():
    """cyclic_poisson:<k> samples its group at k·b/n; with k·b = n − 1 the shorter neighbour's
    group rate is 1 (the same failure)."""
    with pytest.raises(ValueError, match=r"batch_size\*k = 11\*9 = 99 = n - 1"):
        check_sampling("cyclic_poisson:9", 100, 11)
    check_sampling("cyclic_poisson:7", 100, 14)   # k·b = 98
    check_sampling("cyclic_poisson:10", 100, 10)  # k·b = n: group rate 1 either way


def test_the_relation_is_named_with_the_rate_fixed_in_advance():
    for sampling in ("poisson", "cyclic_poisson:4"):
        text = accounting.adjacency(sampling)
        assert "add/remove one example" in text and "fixed in advance" in text
    assert "replace one example" in accounting.adjacency("fixed")
    res = dpsim.simulate(problems.least_squares(40, 2, seed=0), optimizers.dp_sgd(noise_multiplier=1.0),
                         steps=3, batch_size=4, seed=0)
    assert "fixed in advance" in res.privacy["adjacency"]
    rep = res.privacy_report(DELTA)
    assert "fixed in advance" in rep["adjacency"] and "tuning" in rep["scope"]


def test_the_report_says_what_epsilon_covers_and_where_tuning_was_private(tmp_path):
    import json

    from dpsim.experiments import pipeline

    tuned, plain = tmp_path / "tuned", tmp_path / "plain"
    tuned.mkdir()
    plain.mkdir()
    (tuned / "manifest.json").write_text(json.dumps({"notes": {"selection": {"eps1": {}}}}))
    (plain / "manifest.json").write_text(json.dumps({"notes": {}}))

    def entry(folder):
        return {"title": "t", "scale": "tiny", "results_dir": str(folder), "key": "k",
                "numerics_version": "v", "backend": "numpy", "generated": "now",
                "cells": {"total": 1, "reused": 0, "computed": 1},
                "figures": [{"figure": "fig_x", "files": [], "claim": "c", "measured": "m",
                             "verdict": "", "category": "holds", "holds": True}]}

    path = pipeline.write_report(tmp_path, {"a": entry(tuned), "b": entry(plain)}, ["a", "b"])
    text = path.read_text()
    head, sec_a, sec_b = text.split('<a id="')
    assert "What ε covers" in head and "fixed in advance" in head and "tuning" in head
    assert "ε and tuning" in sec_a and "1 tuning choice" in sec_a
    assert "ε and tuning" not in sec_b
