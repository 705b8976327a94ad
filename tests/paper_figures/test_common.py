"""The helpers that several figure scripts share (``paper_figures/style.py`` and the
``<experiment>_common.py`` modules), each against a direct computation of what the figures did
before they shared it.  No reproduction is needed: fake results carry just the fields read.

That the figures themselves are unchanged by the sharing was checked by rendering every figure of
a quick reproduction before and after (PNG pixels and REPORT.md identical); these tests pin the
helpers' own rules.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import matplotlib
import numpy as np
import pytest

from dpsim.analysis import stats
from dpsim.experiments import verdicts
from dpsim.experiments.pipeline import Saved
from dpsim.paper_figures import adambc_common, ctcdp_common, design_common, dp2_common, style

H, F, I, U = verdicts.HOLDS, verdicts.FAILS, verdicts.INCONCLUSIVE, verdicts.UNTESTED


@pytest.mark.parametrize("cats, want", [
    ([H, H, H], H),
    ([H, F, H], F),          # one part that does not hold decides
    ([I, F], F),
    ([H, I], I),
    ([H, U], I),             # "not tested" is not "holds"
    ([], I),                 # nothing measured holds nothing
])
def test_combine(cats, want):
    assert style.combine(cats) == want
    assert style.combine(iter(cats)) == want  # any iterable, read once


@pytest.mark.parametrize("category", [H, F, I, U])
def test_finding_reads_holds_off_the_category(category):
    out = style.finding("the claim", ["a", "b"], category, "why.")
    assert list(out) == ["claim", "measured", "holds", "category", "verdict"]  # REPORT order
    assert out == {"claim": "the claim", "measured": "a\nb", "holds": verdicts.holds_of(category),
                   "category": category, "verdict": "why."}


def test_render_with_draws_under_the_figure_style():
    seen = {}

    def draw(a, b):
        seen["args"] = (a, b)
        seen["rc"] = {k: matplotlib.rcParams[k] for k in style.RC}
        return ["p.png"]

    before = matplotlib.rcParams["font.size"]
    assert style.render_with(draw, 1, "out") == ["p.png"]
    assert seen["args"] == (1, "out")
    assert seen["rc"] == {k: matplotlib.rcParams.validate[k](v) for k, v in style.RC.items()}
    assert matplotlib.rcParams["font.size"] == before  # restored afterwards


def _entry(method, sigma, s=None, private=True):
    return dp2_common.Entry(label=f"{method}-{sigma}-{s}", private=private, sigma=sigma,
                            method=method, s=s, h=False, res=None)


def test_dp2_main_rows_keeps_the_order_and_names_what_is_missing():
    es = [_entry("dp2_rmsprop", 1.0, s=4), _entry("dp_sgd", 1.0), _entry("dp_rmsprop", 1.0),
          _entry("dp_sgd", 2.0), _entry("dp2_rmsprop", 1.0)]
    entries = {e.label: e for e in es}
    sig, rows = dp2_common.main_rows(entries, ("dp_sgd", "dp_rmsprop", "dp2_rmsprop"), "fig")
    assert sig == 1.0
    assert rows == [es[1], es[2], es[4]]  # the σ = 1 runs outside the delay sweep, in order
    # an optional method that did not run is left out; a required one is an error naming it
    sig, rows = dp2_common.main_rows(entries, ("dp_adagrad", "dp_sgd"), "fig", required=("dp_sgd",))
    assert rows == [es[1]]
    with pytest.raises(ValueError, match=r"fig: missing dp_adagrad at σ=1 \(needed: dp_adagrad, dp_sgd\)"):
        dp2_common.main_rows(entries, ("dp_adagrad", "dp_sgd"), "fig")


def test_adambc_selection_edges_reads_the_saved_choices():
    sel = {"eps1-adam": {"point": {"lr": 0.1, "eps": 1e-8}, "at_edge": ["lr"]},
           "eps1-adambc": {"point": {"lr": 0.3, "gamma_prime": 2.0}, "at_edge": []},
           "nonprivate-np-sgd": {"point": {"lr": 4.0}, "at_edge": ["lr"]}}
    saved = Saved({}, {"notes": {"selection": sel}})
    assert adambc_common.selection_edges(saved, ["eps1-adam", "eps1-adambc", "eps9-adam"]) == {
        "eps1-adam.lr": 0.1}  # a label without a saved selection is skipped
    assert adambc_common.selection_edges(saved, {"np-sgd": "nonprivate-np-sgd"}) == {"np-sgd.lr": 4.0}
    assert adambc_common.selection_edges(Saved({}, {}), ["eps1-adam"]) == {}


def test_adambc_paired_finals_is_the_ci_of_the_per_trial_difference():
    rng = np.random.default_rng(3)
    la = rng.normal(1.0, 0.1, size=(5, 12))
    lb = la + rng.normal(-0.05, 0.01, size=(5, 12))  # paired: b tracks a trial by trial
    a, b = SimpleNamespace(excess_loss=la), SimpleNamespace(excess_loss=lb)
    ma, ha, mb, hb, dm, dh = adambc_common.paired_finals(a, b)
    assert (ma, ha) == tuple(stats.mean_ci(la[-1]))
    assert (mb, hb) == tuple(stats.mean_ci(lb[-1]))
    assert (dm, dh) == tuple(map(float, stats.mean_ci(lb[-1] - la[-1])))
    assert dm + dh < 0 and dh < hb  # pairing removes the shared trial-to-trial spread


def test_design_below_is_the_welch_interval_and_its_category():
    rng = np.random.default_rng(5)
    a, b = rng.normal(0.0, 1.0, 40), rng.normal(2.0, 1.0, 40)
    d, lo, hi, cat = design_common.below(a, b)
    assert (d, lo, hi) == tuple(stats.diff_ci(a, b))
    assert cat == verdicts.from_interval(lo, hi, null=0.0, claim="below") == H
    assert design_common.below(b, a)[3] == F


def test_ctcdp_load_names_the_figure_when_there_is_nothing():
    assert ctcdp_common.load({}) == {}
    with pytest.raises(ValueError, match="fig_x: no eps<ε>-<method> results among"):
        ctcdp_common.load({}, name="fig_x")


def test_mean_curve_plots_the_mean_over_a_floored_band():
    rng = np.random.default_rng(7)
    steps = np.arange(0, 50, 10)
    values = np.abs(rng.normal(1.0, 2.0, size=(5, 3)))  # few, spread trials: mean − half < 0
    fig, axes = style.figure()
    ax = axes[0][0]
    mean = style.mean_curve(ax, steps, values, "C1", label="m", zorder=4)
    want, half = stats.mean_ci(values, axis=1)
    assert np.array_equal(mean, want)
    (line,) = ax.lines
    assert np.array_equal(line.get_ydata(), want) and line.get_label() == "m" and line.get_zorder() == 4
    (poly,) = ax.collections
    ys = poly.get_paths()[0].vertices[:, 1]
    low = np.maximum(want - half, want * 1e-3)
    assert (want - half < 0).any()                    # the floor is exercised
    assert np.isclose(ys.min(), low.min()) and np.isclose(ys.max(), (want + half).max())
    fig2, axes2 = style.figure()
    style.mean_curve(axes2[0][0], steps, values, "C1", with_band=False)
    assert not axes2[0][0].collections


def test_fieller_interval():
    # no uncertainty in the denominator: (a ± t·√va)/b
    lo, hi = stats.fieller(2.0, 0.25, 4.0, 0.0, 2.0)
    assert (lo, hi) == pytest.approx(((2.0 - 1.0) / 4.0, (2.0 + 1.0) / 4.0))
    # both exact: the ratio itself
    assert stats.fieller(3.0, 0.0, 2.0, 0.0, 1.96) == pytest.approx((1.5, 1.5))
    # denominator not significantly nonzero: unbounded
    assert stats.fieller(1.0, 0.01, 0.1, 0.01, 1.96) == (-math.inf, math.inf)
    # the ends solve (a − r b)² = t² (va + r² vb)
    a, va, b, vb, t = 0.8, 0.02, 1.1, 0.03, 2.1
    for r in stats.fieller(a, va, b, vb, t):
        assert (a - r * b) ** 2 == pytest.approx(t * t * (va + r * r * vb))
