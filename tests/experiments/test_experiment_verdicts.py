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


def test_grid_edge_legacy_side_unknown_downgrades_only_decided_verdicts():
    cat, note = v.downgrade_for_edge(v.HOLDS, {"lr": 0.1})
    assert cat == v.INCONCLUSIVE and note.startswith("winner on grid edge: lr=0.1")
    assert "could flip" in note
    assert v.downgrade_for_edge(v.FAILS, {"lr": 1e-4, "gamma_ratio": 1.0})[0] == v.INCONCLUSIVE
    assert v.downgrade_for_edge(v.UNTESTED, {"lr": 0.1})[0] == v.UNTESTED
    assert v.downgrade_for_edge(v.HOLDS, {}) == (v.HOLDS, "")


def test_holds_with_the_claimed_loser_on_an_edge_is_inconclusive():
    # the loser's tuned lr on the top of its grid: a wider grid could lower its loss past the winner
    cat, note = v.downgrade_for_edge(v.HOLDS, loser_edges={"dp_sgd lr": 8.0})
    assert cat == v.INCONCLUSIVE
    assert "claimed loser on grid edge: dp_sgd lr=8" in note and "could flip" in note


def test_holds_with_only_the_claimed_winner_on_an_edge_stands_with_a_note():
    # widening the winner's grid can only make the winner better: the verdict cannot flip
    cat, note = v.downgrade_for_edge(v.HOLDS, winner_edges={"stp eps_scale": 1e-3, "stp clip": 2.0})
    assert cat == v.HOLDS
    assert "claimed winner on grid edge: stp eps_scale=0.001, stp clip=2" in note
    assert "verdict stands" in note and "could flip" not in note


def test_does_not_hold_with_the_claimed_winner_on_an_edge_is_inconclusive():
    cat, note = v.downgrade_for_edge(v.FAILS, winner_edges={"adambc lr": 0.3})
    assert cat == v.INCONCLUSIVE and "claimed winner on grid edge: adambc lr=0.3" in note
    assert "could flip" in note


def test_does_not_hold_with_only_the_claimed_loser_on_an_edge_is_kept():
    # the baseline (claimed loser) already wins; a wider grid could only widen its lead
    cat, note = v.downgrade_for_edge(v.FAILS, loser_edges={"dp_adam lr": 8.0, "dp_adam eps": 10.0})
    assert cat == v.FAILS
    assert "claimed loser on grid edge: dp_adam lr=8, dp_adam eps=10" in note
    assert "verdict stands" in note


def test_both_sides_on_an_edge_downgrade_decided_verdicts():
    both = dict(winner_edges={"a lr": 1.0}, loser_edges={"b lr": 2.0})
    for cat in (v.HOLDS, v.FAILS):
        got, note = v.downgrade_for_edge(cat, **both)
        assert got == v.INCONCLUSIVE
        assert "claimed winner on grid edge: a lr=1" in note
        assert "claimed loser on grid edge: b lr=2" in note
    # legacy edges of unknown side with a winner edge: still downgrades a holds
    assert v.downgrade_for_edge(v.HOLDS, {"x": 1}, winner_edges={"a": 1})[0] == v.INCONCLUSIVE


@pytest.mark.parametrize("cat", [v.INCONCLUSIVE, v.UNTESTED, v.OUT_OF_SCOPE])
def test_undecided_categories_are_kept_whatever_the_edges(cat):
    for kw in ({"winner_edges": {"lr": 1.0}}, {"loser_edges": {"lr": 1.0}},
               {"at_edge": {"lr": 1.0}}):
        got, note = v.downgrade_for_edge(cat, **kw)
        assert got == cat and "lr=1" in note and "flip" not in note


def test_no_edges_give_no_note_and_unknown_categories_raise():
    for cat in v.CATEGORIES:
        assert v.downgrade_for_edge(cat) == (cat, "")
        assert v.downgrade_for_edge(cat, {}, winner_edges={}, loser_edges=None) == (cat, "")
    with pytest.raises(ValueError, match="unknown verdict category"):
        v.downgrade_for_edge("maybe", winner_edges={"lr": 1.0})
