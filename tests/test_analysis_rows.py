"""Rows of ``dpsim verify`` added for issue 12's Build 2 (tight instances), checked for what
they claim: the instance is the equality case the row says, and the row fails against the
half-strength bound."""

import math

import numpy as np
import pytest

from dpsim.analysis.checks import dp2
from dpsim.analysis.delay import lemma1_bound, theorem3_rhs


@pytest.fixture(scope="module")
def thm3_tight():
    return dp2._theorem3_tight(True, 0)


def test_theorem3_tight_row_is_a_pass_that_fails_at_half_strength(thm3_tight):
    r = thm3_tight
    assert r.verdict == "pass"
    assert r.strengthened() == "fail"
    assert 1.0 <= r.margin < 1.25


def test_theorem3_tight_row_matches_the_descent_lemma_equality(thm3_tight):
    """With alpha = 1/L and unit curvature, an SGD step lands on -xi/L, so the average of
    ||grad F(w^t)||^2 is (2L F1 + (T-1) E||xi||^2)/T, computed here from the row's own numbers
    (tau, F1, C) without the simulation.  The adaptive steps divide the clean part by
    D = sqrt(v) + 1 = 1 + O(C), so the simulation may sit a few percent below."""
    import dpsim

    r = thm3_tight
    p = dpsim.problems.quadratic_2d(1.0, 1.0, noise=0.004, n=1000, seed=0)
    xi = np.asarray(p.xi)
    U = float(np.max(np.linalg.norm(xi, axis=1)))
    n, d, T, b, s, sig = 1000, 2, 60, 4, 10, 0.2
    tau2 = float(np.mean(np.sum(xi * xi, axis=1)))
    w1 = np.full(d, 2.0 * U / math.sqrt(d))
    C = 2.0 * U + float(np.linalg.norm(w1))
    F1 = 0.5 * float(w1 @ w1)
    per_step = tau2 * (n - b) / (b * (n - 1)) + d * sig * sig * C * C / (b * b)
    predicted = (2.0 * F1 + (T - 1) * per_step) / T
    assert r.estimate == pytest.approx(predicted, rel=0.06)
    # the theorem's value is the same expression with tau^2/b, times sqrt(M) + 1
    k = 1.0 + math.sqrt(lemma1_bound(C, sig, s, b))
    assert r.bound == pytest.approx(float(theorem3_rhs(F1, 1.0, T, 1.0, C, sig, b, s, d, math.sqrt(tau2), 1.0)))
    assert r.bound == pytest.approx(k * (2.0 * F1 / T + tau2 / b + d * sig * sig * C * C / b ** 2))
