"""Tests written against the surviving mutants of ``make mutation`` (tools/mutation.py): each
checks a property of the bound or a value worked out independently (by hand, or by another
method), never the mutated constant itself.  The mutant each test was written for is named in
its docstring."""

import math

import numpy as np
import pytest

from dpsim.analysis import concentration as K


def test_prop6_printed_bound_at_a_hand_worked_point():
    """[ADAMBC] Prop. 6 (DP-Adam, printed) where the numbers are round: C² + Φ = 1 (C ≠ 1),
    1 − β2 = 1/4, ε = 4, so the bracket is ln(1 + 1/(¼·4))/T − ln(3/4) and the coefficient is
    4d·1/½ + ηdL·1/¼; with f_gap = 0 the δ term vanishes.  Then the δ term is linear in the gap
    with slope 2δ/(ηT).  (Mutant: ``C * C`` → ``C / C`` in the coefficient.)"""
    T, eta, d, L, C, phi, b2, eps, a = 2, 0.5, 2, 3.0, math.sqrt(0.75), 0.25, 0.75, 4.0, 0.1
    coef = 4 * d / 0.5 + eta * d * L / 0.25  # 16 + 12
    bracket = math.log(2.0) / T + math.log(4.0 / 3.0)
    assert K.prop6_bound(T, eta, d, L, C, phi, b2, eps, 0.0, a) == pytest.approx(coef * bracket, rel=1e-12)
    delta = float(K.corollary1_bound(a, T, C, phi, b2))
    gap = 3.0
    assert (K.prop6_bound(T, eta, d, L, C, phi, b2, eps, gap, a)
            - K.prop6_bound(T, eta, d, L, C, phi, b2, eps, 0.0, a)) == pytest.approx(
        2 * delta * gap / (eta * T), rel=1e-12)


def test_geometry_diameters_from_extreme_points():
    """``moments.geometry`` against diameters measured on explicit extreme points, for a radius
    r ≠ 1 (every test used r = 1, where r and 1/r agree).  Box [−r, r]^d: opposite corners ±r·1;
    ball of radius r: ±r e_j, the ℓ2 and ℓ∞ diameters are 2r and the C⁻¹-norm diameter is reached
    along the axis of the smallest C_jj.  (Mutant: ``2 * r`` → ``2 / r`` in the ball branch.)"""
    from dpsim.analysis import moments as Mo

    Cd = np.array([0.5, 2.0, 4.0])
    for r in (0.3, 2.5):
        box = Mo.geometry(Cd, domain="box", domain_radius=r)
        hi, lo = np.full(3, r), np.full(3, -r)
        assert box["diam2"] == pytest.approx(np.linalg.norm(hi - lo))
        assert box["diam_inf"] == pytest.approx(np.max(np.abs(hi - lo)))
        assert box["diam_Cinv"] == pytest.approx(math.sqrt(np.sum((hi - lo) ** 2 / Cd)))
        ball = Mo.geometry(Cd, domain="ball", domain_radius=r)
        j = int(np.argmin(Cd))
        e = np.zeros(3)
        e[j] = r
        assert ball["diam2"] == pytest.approx(np.linalg.norm(e - (-e)))
        assert ball["diam_inf"] == pytest.approx(np.max(np.abs(e - (-e))))
        assert ball["diam_Cinv"] == pytest.approx(math.sqrt(np.sum((e - (-e)) ** 2 / Cd)))
        assert ball["trace_Cinv"] == pytest.approx(np.sum(1 / Cd))
        assert ball["trace_Cinv_half"] == pytest.approx(np.sum(Cd ** -0.5))
