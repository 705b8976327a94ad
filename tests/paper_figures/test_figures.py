"""Every figure of every experiment, rendered from a tiny reproduction, is readable: tick labels on
both axes of every data axes, no overlapping tick labels, no text running into a title, and no
legend showing a non-finite ε or an ε above 100 for a run matched to a budget (the rules are in
``support/figure_checks.py``).

Cost: nothing of its own when the suite runs whole — the figures checked are those the session's
one tiny reproduction of every experiment rendered (the ``tiny_all`` fixture of ``conftest.py``,
shared with ``experiments/test_pipeline.py`` and the ``experiments/test_experiment_<name>.py``
files).  Run alone, this module first makes that reproduction (about 90 CPU seconds).
"""

from __future__ import annotations

import numpy as np
import pytest
from support.figure_checks import figure_problems, legend_problems

from dpsim import experiments
from dpsim.paper_figures import style

ALL_FIGURES = [f for name in experiments.names() for f in experiments.get(name).figures]


@pytest.fixture(scope="module")
def rendered(tiny_all):
    """``{figure name: Figure}`` of the session's tiny reproduction of every experiment."""
    return dict(tiny_all.figures)


def test_every_figure_is_rendered(rendered):
    assert sorted(rendered) == sorted(ALL_FIGURES)


@pytest.mark.parametrize("name", ALL_FIGURES)
def test_figure_is_readable(rendered, name):
    assert figure_problems(rendered[name]) == []


# ------------------------------------------------------------------------------------------------
# The checker itself: each rule catches the defect it is for.


def _fig(ncols=1):
    fig, axes = style.figure(1, ncols)
    return fig, axes[0]


def test_log_axis_inside_one_decade_has_no_label_until_made_readable():
    fig, (ax,) = _fig()
    ax.plot([0, 1, 2], [0.012, 0.015, 0.018])
    ax.set_yscale("log")
    from matplotlib.ticker import NullFormatter

    ax.yaxis.set_minor_formatter(NullFormatter())  # what the figures used to do
    assert any("no y tick labels" in p for p in figure_problems(fig))
    style.readable_log_axes(fig)
    assert figure_problems(fig) == []
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert len(labels) >= 2 and len(set(labels)) == len(labels)


def test_readable_log_axes_keeps_a_wide_axis_as_it_was():
    fig, (ax,) = _fig()
    ax.plot([0, 1, 2], [1e-4, 1e-1, 1e2])
    ax.set_yscale("log")
    before = list(ax.yaxis.get_major_locator().tick_values(1e-4, 1e2))
    style.readable_log_axes(fig)
    assert list(ax.yaxis.get_major_locator().tick_values(1e-4, 1e2)) == before
    assert figure_problems(fig) == []


def test_hidden_shared_tick_labels_are_flagged():
    fig, axes = style.figure(1, 2, sharey=True)
    for ax in axes[0]:
        ax.plot([0, 1], [0, 1])
    assert any("axes 1" in p and "no y tick labels" in p for p in figure_problems(fig))


def test_overlapping_tick_labels_are_flagged():
    fig, (ax,) = _fig()
    x = np.linspace(-0.01, 0.01, 5)
    ax.plot(x, x)
    ax.set_xticks(np.linspace(-0.01, 0.01, 21))
    ax.xaxis.set_major_formatter(lambda v, _: f"{v:+.5f}")
    assert any("x tick labels" in p and "overlap" in p for p in figure_problems(fig))


def test_text_running_into_a_title_is_flagged():
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2))  # no layout engine: nothing moves the texts apart
    ax = fig.add_axes((0.2, 0.2, 0.7, 0.6))
    ax.plot([0, 1], [0, 1])
    ax.set_title("a title")
    fig.suptitle("figure title", y=0.85)  # drawn on top of the axes title
    assert any("overlaps" in p for p in figure_problems(fig))


def test_legend_rules():
    assert legend_problems(["DP-SGD: ε=2", "Adam (non-private)", "DP-SGDM (Eq. 3, t→∞)",
                            "DP-BandMF, same σ, not matched in ε: ε=765"]) == []
    assert len(legend_problems(["i.i.d. Gaussian: ε=∞"])) == 1
    assert len(legend_problems(["adam: ε = inf, η=0.1"])) == 1
    assert len(legend_problems(["x: loss = nan"])) == 1
    assert len(legend_problems(["simulated (dp_adam_corrected, ε=1.01e+03)"])) == 1
    assert legend_problems(["ε=100"]) == [] and len(legend_problems(["ε = 100.5"])) == 1
