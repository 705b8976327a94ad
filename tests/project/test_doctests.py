"""The ``>>>`` examples of dpsim's public modules run, and every public module has one; every
public function and public method of those modules has numpydoc ``Parameters``/``Returns``
sections where it has parameters / returns something (issue 35).

The modules are listed explicitly (no directory walk, no pytest.ini change): a new public module
is added here with its example.  Left out: ``dpsim.cli`` (exempt: a command line, documented by
``--help``), and the fast paths (``dpsim.fast``: compiled internals; ``dpsim.explain``'s
example shows which path runs) and ``dpsim.transforms.elements`` (the rules' internals).

A registered optimizer is found through the registry (its builder's globals are those of
:mod:`dpsim.optimizers._registry`, so :class:`doctest.DocTestFinder` does not see it as a member
of its family module).
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import time

import pytest

MODULES = [
    "dpsim",
    "dpsim.accounting",
    "dpsim.engine",
    "dpsim.explain",
    "dpsim.extras",
    "dpsim.audit",
    "dpsim.backend",
    "dpsim.calibrate",
    "dpsim.checkpoint",
    "dpsim.datasets",
    "dpsim.memory",
    "dpsim.plot",
    "dpsim.results",
    "dpsim.sampling",
    "dpsim.problems",
    "dpsim.problems.base",
    "dpsim.problems.data",
    "dpsim.problems.glm",
    "dpsim.problems.quadratic",
    "dpsim.privacy",
    "dpsim.privacy.clipping",
    "dpsim.privacy.ellipsoid",
    "dpsim.privacy.events",
    "dpsim.privacy.mf",
    "dpsim.privacy.noise",
    "dpsim.privacy.privatizers",
    "dpsim.privacy.tcdp",
    "dpsim.transforms",
    "dpsim.transforms.base",
    "dpsim.transforms.combinators",
    "dpsim.transforms.preconditioners",
    "dpsim.testing",
    "dpsim.testing.assertions",
    "dpsim.testing.plugin",
    "dpsim.testing.strategies",
    "dpsim.optimizers",
    "dpsim.optimizers.adaptive",
    "dpsim.optimizers.baselines",
    "dpsim.optimizers.ctcdp",
    "dpsim.optimizers.design_space",
    "dpsim.optimizers.dp2",
    "dpsim.optimizers.ime",
    "dpsim.optimizers.noisy_adagrad",
    "dpsim.optimizers.pasan_pagan",
    "dpsim.optimizers.public",
]
#: Private modules whose examples document a public mechanism (run, not counted).
EXTRA = ["dpsim.optimizers._hyper", "dpsim.optimizers._registry"]

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

#: Seconds all examples together may take (their kernels compiled).
BUDGET_S = 30.0


def _module(name):
    # ``dpsim.audit`` and ``dpsim.calibrate`` are functions of the package; the modules are in
    # sys.modules once imported
    importlib.import_module(name)
    import sys

    return sys.modules[name]


def _tests(name):
    """The doctests of module ``name``: its own (module docstring, functions, classes) and those
    of the optimizers it registers."""
    mod = _module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = list(finder.find(mod, name))
    if name.startswith("dpsim.optimizers."):
        from dpsim.optimizers import _registry

        for opt, fn in sorted(_registry._REGISTRY.items()):
            if fn.__module__ == name:
                tests += finder.find(fn, f"{name}.{opt}", module=False,
                                     globs=dict(vars(mod)))
    return [t for t in tests if t.examples]


@pytest.mark.parametrize("name", MODULES)
def test_public_module_has_an_example(name):
    assert sum(len(t.examples) for t in _tests(name)) >= 1, (
        f"{name} has no >>> example: add one to its docstring or a public function's")


@pytest.mark.parametrize("name", MODULES + EXTRA)
def test_examples_run(name):
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report = []
    for test in _tests(name):
        runner.run(test, out=report.append)
    assert runner.summarize(verbose=False).failed == 0, "\n".join(report)


def test_examples_are_quick():
    """All examples together stay small: timed on a second pass, so that the Numba kernels of the
    few examples that simulate are compiled (the first simulation of a fresh checkout compiles
    them, as any first run does)."""
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    tests = [t for name in MODULES + EXTRA for t in _tests(name)]
    for test in tests:  # compile
        if "simulate" in "".join(ex.source for ex in test.examples):
            runner.run(test, out=lambda text: None)
    start = time.perf_counter()
    for test in tests:
        runner.run(test, out=lambda text: None)
    elapsed = time.perf_counter() - start
    assert elapsed < BUDGET_S, f"the examples took {elapsed:.1f} s"


#: numpydoc validation codes this suite holds the listed modules to: a docstring (GL08), every
#: parameter documented (PR01), a Returns section (RT01; numpydoc skips functions that return
#: nothing).
SECTION_CODES = {"GL08", "PR01", "RT01"}


def _public_callables(name):
    """``(qualified name, object)`` of the public functions and classes defined in module
    ``name`` (or in a private module beside it whose names it re-exports, e.g.
    ``dpsim.privacy._toeplitz`` behind ``dpsim.privacy.mf``) and the public methods of those
    classes."""
    mod = _module(name)
    names = getattr(mod, "__all__", None) or [k for k in vars(mod) if not k.startswith("_")]
    private_sibling = name.rsplit(".", 1)[0] + "._"
    for k in names:
        obj = getattr(mod, k, None)
        where = getattr(obj, "__module__", None) or ""
        if where != name and not where.startswith(private_sibling):
            continue
        if inspect.isfunction(obj):
            yield f"{name}.{k}", obj
        elif inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if not attr.startswith("_") and inspect.isfunction(member):
                    yield f"{name}.{k}.{attr}", member


@pytest.mark.parametrize("name", MODULES)
def test_numpydoc_sections(name):
    validate = pytest.importorskip("numpydoc.validate", reason="numpydoc comes with the docs extra")
    missing = []
    for qualname, _ in _public_callables(name):
        codes = {code for code, _ in validate.validate(qualname)["errors"]} & SECTION_CODES
        if codes:
            missing.append(f"{qualname}: {sorted(codes)}")
    assert not missing, "numpydoc sections missing:\n" + "\n".join(missing)
