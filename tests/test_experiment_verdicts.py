"""The verdict categories of REPORT.md (``experiments.verdicts``): the interval rule, the legacy
``holds`` mapping and the grid-edge downgrade."""

from __future__ import annotations

import pytest

from dpsim.experiments import verdicts as v


def test_interval_rule_difference_claimed_below_zero():
    assert v.from_interval(-0.3, -0.1) == v.HOLDS
    assert v.from_interval(0.1, 0.4) == v.FAILS          # the interval excludes the claim
    assert v.from_interval(-0.2, 0.3) == v.INCONCLUSIVE  # contains 0
    assert v.from_interval(-0.2, 0.0) == v.INCONCLUSIVE  # touching 0 is not significant
    assert v.from_interval(0.0, 0.0) == v.INCONCLUSIVE


def test_interval_rule_ratio_claimed_above_one():
    assert v.from_interval(1.2, 1.9, null=1.0, claim="above") == v.HOLDS
    assert v.from_interval(0.5, 0.9, null=1.0, claim="above") == v.FAILS
    assert v.from_interval(0.8, 1.3, null=1.0, claim="above") == v.INCONCLUSIVE


def test_interval_rule_rejects_bad_input():
    with pytest.raises(ValueError, match="claim"):
        v.from_interval(0, 1, claim="lower")
    with pytest.raises(ValueError, match="not a confidence interval"):
        v.from_interval(1.0, 0.0)
    with pytest.raises(ValueError, match="not a confidence interval"):
        v.from_interval(float("nan"), 1.0)


def test_category_of_and_holds_of_round_trip():
    assert v.category_of({"holds": True}) == v.HOLDS
    assert v.category_of({"holds": False}) == v.FAILS
    assert v.category_of({"holds": None}) == v.INCONCLUSIVE
    assert v.category_of({"holds": None, "category": v.UNTESTED}) == v.UNTESTED
    with pytest.raises(ValueError, match="unknown verdict category"):
        v.category_of({"category": "maybe"})
    for cat in v.CATEGORIES:
        h = v.holds_of(cat)
        assert h is {v.HOLDS: True, v.FAILS: False}.get(cat)
        if h is not None:
            assert v.category_of({"holds": h}) == cat


def test_grid_edge_downgrades_only_decided_verdicts():
    cat, note = v.downgrade_for_edge(v.HOLDS, {"lr": 0.1})
    assert cat == v.INCONCLUSIVE and note == "winner on grid edge: lr=0.1"
    assert v.downgrade_for_edge(v.FAILS, {"lr": 1e-4, "gamma_ratio": 1.0})[0] == v.INCONCLUSIVE
    assert v.downgrade_for_edge(v.UNTESTED, {"lr": 0.1})[0] == v.UNTESTED
    assert v.downgrade_for_edge(v.HOLDS, {}) == (v.HOLDS, "")
