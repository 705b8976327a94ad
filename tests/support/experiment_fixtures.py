"""The end-to-end fixtures shared by the experiment tests: experiments reproduced at the tiny scale
into a temporary folder, plus the check every experiment's figures and report must pass.

    from support.experiment_fixtures import check_figures_and_report, tiny_run
    tiny = tiny_run("adambc")            # a module-scoped pytest fixture -> TinyRun

One reproduction per session.  ``tiny_all`` (a session fixture in ``conftest.py``, used by
``experiments/test_pipeline.py`` and ``paper_figures/test_figures.py``) reproduces every
registered experiment once, into one folder, and keeps every figure object it renders
(:class:`AllRuns`).  When a session collects
a test that uses it, ``tiny_run(name)`` is that run's view of experiment ``name`` (nothing is
simulated or rendered twice); when none is collected (one experiment's test file run alone), it
reproduces ``name`` only, into its own folder.  The two are the same computation: the cells of
``name`` are seeded by the experiment's config and cell index alone (not by which experiments run
beside it), and the report section and figures of ``name`` are rendered from them alone.  Tests
read these folders; a test that writes copies them first (``experiments/test_pipeline.py``) or only
rewrites a cached manifest with every cell reused (``run_experiment`` on a valid cache).

The cache key depends on the declared numerics versions, not on the source files, so editing a
module while the tests run does not invalidate the fixture (keys are tested in
``experiments/test_pipeline.py``).
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dpsim import experiments
from dpsim.experiments import pipeline

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ALL_FIXTURE = "tiny_all"
"""The name of the session fixture (``conftest.py``) reproducing every experiment once."""


def reproduce_tiny(names, tmp: Path, **kw) -> Path:
    """``experiments.reproduce(names)`` at the tiny scale into ``tmp/out`` and ``tmp/results``,
    silently; returns the path of REPORT.md."""
    return experiments.reproduce(list(names), scale="tiny", out_dir=tmp / "out",
                                 results_dir=tmp / "results", progress=False, verbose=False, **kw)


@dataclass(frozen=True)
class TinyRun:
    name: str
    tmp: Path          # the temporary folder: results/ and out/
    report: Path       # out/REPORT.md

    @property
    def root(self) -> Path:
        """The folder of the run's cells (``results/<name>/tiny/<key>``, named by ``LATEST``)."""
        return pipeline.latest_dir(self.tmp / "results" / self.name / "tiny")

    @property
    def manifest(self) -> dict:
        return json.loads((self.root / "manifest.json").read_text())

    @property
    def entry(self) -> dict:
        """The experiment's entry of ``out/report.json``."""
        return json.loads((self.tmp / "out" / "report.json").read_text())[self.name]

    def saved(self) -> pipeline.Saved:
        return pipeline.Saved.from_dir(self.root)


@dataclass
class AllRuns:
    """Every registered experiment reproduced once at the tiny scale (:func:`reproduce_all`):
    ``tmp/results``, ``tmp/out`` (every figure, REPORT.md, report.json) and ``figures``, the
    ``(name, Figure)`` of every figure in the order rendered."""

    tmp: Path
    report: Path
    figures: list = field(default_factory=list)

    def run(self, name: str) -> TinyRun:
        """The view of experiment ``name`` (its cells, figures, report section) in this run."""
        if name not in experiments.names():
            raise KeyError(f"no registered experiment {name!r}")
        return TinyRun(name, self.tmp, self.report)


def reproduce_all(tmp: Path) -> AllRuns:
    """Reproduce every registered experiment at the tiny scale into ``tmp``, keeping each figure
    object handed to ``paper_figures.style.save`` (``test_figures.py`` checks them)."""
    from support.figure_checks import capture_figures

    with capture_figures() as figs:
        report = reproduce_tiny(experiments.names(), tmp)
    return AllRuns(tmp, report, list(figs))


def session_runs_all(session) -> bool:
    """Whether a collected (selected) test of ``session`` uses the all-experiments run."""
    return any(ALL_FIXTURE in getattr(item, "fixturenames", ()) for item in session.items)


def tiny_run(name: str):
    """A module-scoped fixture: experiment ``name`` reproduced at the tiny scale (module
    docstring: a view of the session's all-experiments run when the session has one)."""

    @pytest.fixture(scope="module")
    def fixture(request, tmp_path_factory):
        if session_runs_all(request.session):
            return request.getfixturevalue(ALL_FIXTURE).run(name)
        tmp = tmp_path_factory.mktemp(name)
        return TinyRun(name, tmp, reproduce_tiny([name], tmp))

    return fixture


def check_figures_and_report(run: TinyRun) -> None:
    """Every figure of the experiment is a PNG and a PDF; the report has its section with each
    figure's image, claim and measurement; and the decision recorded in the report is the figure's
    own ``evaluate`` on the saved results (read back from the results folder)."""
    exp = experiments.get(run.name)
    for fig in exp.figures:
        png, pdf = run.tmp / "out" / f"{fig}.png", run.tmp / "out" / f"{fig}.pdf"
        assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 5000, fig
        assert pdf.read_bytes()[:5] == b"%PDF-", fig
    text = run.report.read_text()
    assert f"## {run.name}:" in text and "Scale `tiny`" in text
    entry = run.entry
    assert [f["figure"] for f in entry["figures"]] == list(exp.figures)
    assert entry["cells"]["total"] == len(run.manifest["cells"])
    saved = run.saved()
    for f in entry["figures"]:
        assert f"![{f['figure']}]({f['figure']}.png)" in text
        assert f["claim"] in text and f["measured"] in text
        finding = importlib.import_module(f"dpsim.paper_figures.{f['figure']}").evaluate(saved)
        assert (finding["holds"], finding["measured"]) == (f["holds"], f["measured"]), f["figure"]
