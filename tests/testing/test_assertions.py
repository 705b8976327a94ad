"""dpsim.testing assertions: the false-alarm rate over many independent seeds with the claim exactly
at the estimand (observed rate checked with a 99.9% Clopper–Pearson interval), the messages, and the
privacy assertion on a correct and a mis-declared mechanism."""

import numpy as np
import pytest
from scipy import stats

from dpsim.testing import (BoundViolation, assert_bound_holds, assert_distribution_matches,
                           assert_privacy_holds, scaled_trials)

SEEDS = 3000
ALPHA = 0.05


def _rate(fails, n=SEEDS, level=0.999):
    """Two-sided Clopper–Pearson interval of a failure rate."""
    lo = stats.beta.ppf((1 - level) / 2, fails, n - fails + 1) if fails else 0.0
    hi = stats.beta.ppf(1 - (1 - level) / 2, fails + 1, n - fails) if fails < n else 1.0
    return lo, hi


def _count(check, n=SEEDS):
    fails = 0
    for seed in range(n):
        try:
            check(np.random.default_rng(seed), seed)
        except BoundViolation:
            fails += 1
    return fails


def test_t_bound_false_alarm_rate_is_alpha_at_the_estimand():
    """Gaussian samples, bound = true mean: Student t is exact, the rate is α (CI contains α)."""
    fails = _count(lambda rng, seed: assert_bound_holds(
        lambda R, s: rng.normal(2.0, 3.0, R), 2.0, trials=30, alpha=ALPHA, seed=seed))
    lo, hi = _rate(fails)
    assert lo <= ALPHA <= hi, (fails, lo, hi)


def test_lower_side_and_bonferroni_keep_the_rate_below_alpha():
    fails = _count(lambda rng, seed: assert_bound_holds(
        rng.normal([0.0, 1.0, -1.0], 1.0, (40, 3)), [0.0, 1.0, -1.0], alpha=ALPHA, side="lower"))
    assert _rate(fails)[0] <= ALPHA and fails > 0


def test_clopper_pearson_and_hoeffding_rates_are_at_most_alpha():
    p = 0.3
    fails = _count(lambda rng, seed: assert_bound_holds(
        rng.random(100) < p, p, alpha=ALPHA, kind="probability"))
    assert _rate(fails)[0] <= ALPHA
    fails = _count(lambda rng, seed: assert_bound_holds(
        rng.random(50), 0.5, alpha=ALPHA, value_range=(0.0, 1.0)))
    assert _rate(fails)[0] <= ALPHA


def test_demonstrate_mode_miss_rate_is_alpha_and_it_needs_a_margin():
    """demonstrate=True at a bound exactly at the estimand: the claim "θ ≤ bound" is then not
    shown, and the assertion passes (a miss) with probability α (Student t, Gaussian samples);
    against a bound eight standard errors above the mean every draw passes."""
    passes = 1000 - _count(lambda rng, seed: assert_bound_holds(
        rng.normal(2.0, 3.0, 30), 2.0, alpha=ALPHA, demonstrate=True), n=1000)
    lo, hi = _rate(passes, n=1000)
    assert lo <= ALPHA <= hi, (passes, lo, hi)
    lower = 1000 - _count(lambda rng, seed: assert_bound_holds(
        rng.normal(2.0, 3.0, 30), 2.0, alpha=ALPHA, demonstrate=True, side="lower"), n=1000)
    assert _rate(lower, n=1000)[0] <= ALPHA <= _rate(lower, n=1000)[1]
    rng = np.random.default_rng(1)
    for _ in range(20):  # N(0, 1), R = 400: one standard error is 0.05
        assert_bound_holds(rng.normal(0.0, 1.0, 400), 0.4, alpha=ALPHA, demonstrate=True)
    with pytest.raises(BoundViolation, match="bound not demonstrated.*miss rate"):
        assert_bound_holds(rng.normal(0.0, 1.0, 400), 0.0, alpha=ALPHA, demonstrate=True)


def test_ks_false_alarm_rate_is_alpha():
    law = stats.norm(0.0, 2.0)
    fails = _count(lambda rng, seed: assert_distribution_matches(rng.normal(0.0, 2.0, 60), law,
                                                                 alpha=ALPHA, seed=seed), n=1000)
    lo, hi = _rate(fails, n=1000)
    assert lo <= ALPHA <= hi, (fails, lo, hi)


def test_a_false_bound_fails_with_the_numbers_and_the_seed():
    rng = np.random.default_rng(0)
    with pytest.raises(BoundViolation) as exc:
        assert_bound_holds(lambda R, s: np.random.default_rng(s).normal(1.0, 0.1, R), 0.9,
                           trials=200, alpha=1e-3, seed=17, what="E[loss]")
    msg = str(exc.value)
    assert "claim E[loss] <= 0.9" in msg and "trials=200, seed=17" in msg
    assert "reproduce with estimate_fn(200, 17)" in msg and "interval [" in msg
    assert exc.value.details["estimate"][0] == pytest.approx(1.0, abs=0.05)
    with pytest.raises(BoundViolation, match="do not follow norm"):
        assert_distribution_matches(rng.normal(0.0, 1.5, 500), stats.norm(0, 1), seed=3)


def test_assertion_arguments_are_validated():
    with pytest.raises(ValueError, match="alpha must be in"):
        assert_bound_holds(np.zeros(5), 1.0, alpha=0.0)
    with pytest.raises(ValueError, match="trials is required"):
        assert_bound_holds(lambda R, s: np.zeros(R), 1.0)
    with pytest.raises(ValueError, match="value_range"):
        assert_bound_holds(np.array([0.0, 2.0]), 1.0, value_range=(0.0, 1.0))
    with pytest.raises(ValueError, match="0/1 indicator"):
        assert_bound_holds(np.array([0.0, 0.5]), 0.1, kind="probability")
    with pytest.raises(ValueError, match="continuous scipy.stats"):
        assert_distribution_matches(np.zeros(4), stats.poisson(1))
    assert scaled_trials(100) == 100


def test_privacy_assertion_passes_a_correct_claim_and_catches_a_misdeclared_one():
    from dpsim.optimizers import Optimizer
    from dpsim.privacy.privatizers import gaussian_privatizer
    from dpsim.transforms import named_chain, scale

    rep = assert_privacy_holds("dp_sgd", trials=4000, alpha=0.05, noise_multiplier=1.0, lr=1.0)
    assert rep.consistent
    # declares σ = 5 but adds the noise of σ = 0.3: the audit rejects the claim
    lie = gaussian_privatizer(1.0, 0.3)
    lie = lie._replace(privacy=gaussian_privatizer(1.0, 5.0).privacy)
    opt = Optimizer(name="lying_dp_sgd", hyperparameters={},
                    transform=named_chain(("privatizer", lie), ("lr", scale(-1.0))))
    with pytest.raises(BoundViolation, match="privacy violated: lying_dp_sgd claims epsilon="):
        assert_privacy_holds(opt, trials=4000, alpha=0.05)
