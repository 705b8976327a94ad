"""The documentation site builds with warnings as errors (``make docs``), its tutorials execute, the
optimizer catalogue lists every registered optimizer and the API reference every public name.

The build is the one ``make docs`` runs (``sphinx-build -W --keep-going -b html docs <out>``), in a
subprocess, into a temporary folder; it executes the four tutorials (myst-nb, no cache) and takes
about a minute of CPU.  Sphinx comes with the ``docs`` extra, which the ``test`` extra installs.
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("docs")]  # one build per session


def _text(path: Path) -> str:
    """The visible text of a built page (tags stripped, entities decoded)."""
    raw = path.read_text(encoding="utf-8")
    return html.unescape(re.sub(r"<[^>]+>", " ", raw))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("sphinx", reason="Sphinx is not installed: pip install -e '.[docs]'")
    pytest.importorskip("myst_nb", reason="myst-nb is not installed: pip install -e '.[docs]'")
    pytest.importorskip("numpydoc", reason="numpydoc is not installed: pip install -e '.[docs]'")
    pytest.importorskip("pydata_sphinx_theme",
                        reason="pydata-sphinx-theme is not installed: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("docs")
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html",
           "-d", str(out / "doctrees"), str(DOCS), str(out / "html")]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, (
        f"sphinx-build failed (exit {proc.returncode}):\n{proc.stderr[-6000:]}\n{proc.stdout[-3000:]}")
    return out / "html"


def test_catalogue_lists_every_registered_optimizer(site):
    from dpsim import optimizers

    page = site / "api" / "catalogue.html"
    raw = page.read_text(encoding="utf-8")
    text = _text(page)
    for name in optimizers.names():
        # one section per optimizer (its heading's id), with the hyperparameter table
        assert f'id="{name.replace("_", "-")}"' in raw, f"catalogue has no section for {name}"
        assert name in text
    for hp in optimizers.hyperparameters("dp_adam"):
        assert hp in text


def test_api_reference_lists_every_public_name(site):
    """Every name of every documented module's ``__all__`` has an entry (an anchor) on its page."""
    import dpsim

    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        import apiref
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    assert "dpsim.optimizers" in dict(apiref.MODULES)
    for mod, _ in apiref.MODULES:
        raw = (site / "api" / "generated" / f"{mod}.html").read_text(encoding="utf-8")
        for name in apiref.public_names(mod):
            if apiref._kind(mod, name) == "module":   # listed as a submodule, by full name
                assert f"{mod}.{name}" in raw, f"submodule {mod}.{name} is missing from {mod}'s page"
            else:
                assert f'id="{mod}.{name}"' in raw, f"{mod}.{name} has no entry in the API reference"
    optim = (site / "api" / "generated" / "dpsim.optimizers.html").read_text(encoding="utf-8")
    for name in dpsim.optimizers.names():
        assert f'id="dpsim.optimizers.{name}"' in optim, f"no API entry for dpsim.optimizers.{name}"


@pytest.mark.parametrize("tutorial", ["own-study", "property-testing", "reproduce-a-paper",
                                      "add-an-optimizer"])
def test_tutorials_executed(site, tutorial):
    raw = (site / "tutorials" / f"{tutorial}.html").read_text(encoding="utf-8")
    assert "cell_output" in raw, f"tutorial {tutorial} shows no executed output"
    assert "Traceback" not in _text(site / "tutorials" / f"{tutorial}.html")
