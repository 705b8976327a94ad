"""Sphinx configuration of the dpsim documentation site (``make docs``).

Why Sphinx: the scientific Python projects dpsim's users come from — NumPy, SciPy, xarray,
scikit-learn, and in private/ML optimization optax and Opacus — all build their sites with Sphinx,
autodoc and numpydoc-style docstrings, so dpsim's docstrings (numpydoc sections) render the way
those users read them.  The pages themselves are Markdown (MyST, through myst-nb); the tutorials
under ``tutorials/`` are text-based MyST notebooks that myst-nb executes at every build (no cache),
so every output on them is real.  Theme: pydata-sphinx-theme, the one NumPy, SciPy, xarray and
scikit-learn use.

The optimizer catalogue (``api/catalogue.md``) is generated from the optimizer registry at build
time by ``_ext/catalogue.py``; the API reference (``api/index.md``) has one page per public module,
written by ``_ext/apiref.py`` from the module's ``__all__`` (an autosummary table, then autodoc
with numpydoc), each name referenced by its public import path (``dpsim.accounting.epsilon``),
not by the file that defines it.

Build: ``make docs`` (``sphinx-build -W --keep-going -b html docs build/docs``);
``tests/project/test_docs.py`` runs the same build in the test suite.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

# One BLAS thread in the executed tutorials (the Makefile's setting; see its comment).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import dpsim  # noqa: E402

project = "dpsim"
author = "The dpsim developers"
copyright = "The dpsim developers (MIT License)"
release = version = dpsim.__version__

extensions = [
    "myst_nb",                    # MyST Markdown pages and executed MyST notebooks
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinx.ext.mathjax",
    "catalogue",                  # _ext/catalogue.py: the optimizer catalogue from the registry
    "apiref",                     # _ext/apiref.py: one API page per public module, from __all__
    "known_warnings",             # _ext/known_warnings.py: the explicit lists at the end of this file
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb"}
root_doc = "index"
exclude_patterns = ["_build", "**/.ipynb_checkpoints", "_ext"]

# --- MyST ---------------------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist", "attrs_inline"]
# ``[text](page.md#some-heading)`` links resolve against headings down to level 4 (and warn, hence
# fail under -W, when the heading does not exist).
myst_heading_anchors = 4

# --- myst-nb: the tutorials run at every build, in a temporary folder, no cache -----------------
nb_execution_mode = "force"
# Per cell.  Each tutorial takes seconds once Numba's kernels are cached; on a fresh checkout the
# first cell that runs an optimizer compiles its kernels (30-60 s, longer on a loaded machine).
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_in_temp = True
nb_merge_streams = True
nb_render_markdown_format = "gfm"   # Markdown outputs (a report's tables) with GFM tables

# --- autodoc / autosummary / numpydoc -----------------------------------------------------------
autosummary_generate = False        # the pages are written by _ext/apiref.py
autosummary_imported_members = True
autosummary_ignore_module_all = False     # a module's __all__ is its public surface
autodoc_default_options = {"members": False}
autodoc_typehints = "none"                # numpydoc's Parameters sections say the types
autodoc_member_order = "bysource"
add_module_names = False
# Not nitpicky (-n): about 170 cross-references in docstrings point at private modules
# (dpsim.optimizers._hyper, the fused kernels) or at names by a relative path; they render as
# plain text.  Broken links between pages are checked (MyST warns on them under -W).
nitpicky = False

numpydoc_show_class_members = False       # autodoc's :members: documents them; no second table
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set = set()   # validation is the docstring tests' job, not the build's
numpydoc_xref_param_type = False

# --- HTML ---------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"dpsim {version}"
html_theme_options = {
    "github_url": "https://github.com/dpsim/dpsim",
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_show_sourcelink = False

# --- Known warnings (_ext/known_warnings.py) -----------------------------------------------------
# Not ``suppress_warnings``: that silences a whole category everywhere.  These lists tolerate a
# category only where it is listed, and the build prints each tolerated warning at its end.
#
# Docstrings with a reStructuredText markup error, to be fixed in the source (then removed here).
known_docstring_warnings: set = set()
# Pages included but not written for this site: the gallery is generated by
# ``dpsim gallery publish`` (experiments/gallery.py), whose README links the figures/ folder and
# whose REPORT links its sections through HTML anchors (<a id=...>), which MyST does not see.
known_page_warnings = {
    "gallery/README": ("myst.xref_missing",),
    "gallery/REPORT": ("myst.xref_missing",),
}
