"""The end-to-end fixture shared by the experiment tests: one experiment reproduced at the tiny
scale into a temporary folder, plus the check every experiment's figures and report must pass.

    from experiment_fixtures import check_figures_and_report, tiny_run
    tiny = tiny_run("adambc")            # a module-scoped pytest fixture -> TinyRun

The cache key depends on the declared numerics versions, not on the source files, so editing a
module while the tests run does not invalidate the fixture (keys are tested in test_experiments.py).
"""

from __future__ import annotations

import importlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from dpsim import experiments
from dpsim.experiments import pipeline

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SHARED_RESULTS = "tiny-results-shared"
"""A folder under the session's pytest base temporary directory into which every tiny run copies
its results, so that a later module (``test_figures.py``) reuses the cells instead of simulating
them again (the cache key makes the reuse exact; run alone, that module computes them)."""


def share_results(tmp_path_factory, results: Path) -> None:
    """Copy the results folder of a tiny run into :data:`SHARED_RESULTS` (merged)."""
    shutil.copytree(results, tmp_path_factory.getbasetemp() / SHARED_RESULTS, dirs_exist_ok=True)


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


def tiny_run(name: str):
    """A module-scoped fixture reproducing experiment ``name`` at the tiny scale."""

    @pytest.fixture(scope="module")
    def fixture(tmp_path_factory):
        tmp = tmp_path_factory.mktemp(name)
        report = experiments.reproduce([name], scale="tiny", out_dir=tmp / "out",
                                       results_dir=tmp / "results", progress=False, verbose=False)
        share_results(tmp_path_factory, tmp / "results")
        return TinyRun(name, tmp, report)

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
