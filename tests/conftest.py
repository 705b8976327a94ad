"""Shared test configuration.

The tests mirror the packages: ``tests/<package>/test_*.py`` for the subpackages of dpsim
(``accounting``, ``fast``, ``optimizers``, ``privacy``, ``problems``, ``testing``,
``transforms``) and for ``analysis``, ``experiments``, ``paper_figures``; ``tests/core/`` for the
top-level modules of dpsim (engine, CLI, sampling, backend, ...); ``tests/project/`` for the
checks of the repository itself (docs, README, layering, doctests, the slow-test list).  What the
tests share is the package ``tests/support`` (``from support.naive import ...``).  ``tests/`` and
its folders have no ``__init__.py``: pytest's default ``prepend`` import mode imports each test
module by its basename (so basenames are unique across ``tests/``) and puts ``tests/`` itself on
``sys.path`` when it loads this file, which makes ``support`` importable everywhere.

Hypothesis runs derandomized in CI (``HYPOTHESIS_PROFILE=ci``, set by ``make test``) so every
statistical test is a deterministic function of the code; locally the ``dev`` profile explores more.

dpsim's pytest plugin (``dpsim_seed``, ``dpsim_trials``, ``--dpsim-trials``, ``--dpsim-ci``) is
opt-in — installing dpsim does not load it anywhere — so the suite enables it here (pytest takes
``pytest_plugins`` only from the rootdir's conftest, and this one is loaded at start-up).  With it,
the environment variable ``CI`` loads its ``dpsim-ci`` profile over the ``ci`` profile below.
"""

import os

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["dpsim.testing.plugin"]

settings.register_profile(
    "ci", derandomize=True, deadline=None, max_examples=25, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=50)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def _backends():
    out = ["numpy", "array_api_strict"]
    try:
        from dpsim.backend import cupy_available
        if cupy_available():
            out.append("cupy")
    except Exception:  # pragma: no cover
        pass
    return out


BACKENDS = _backends()


@pytest.fixture(params=BACKENDS)
def backend_name(request):
    """Every available array backend: NumPy, array_api_strict (catches NumPy-only calls), CuPy
    when it imports and sees a GPU."""
    return request.param


@pytest.fixture(scope="session")
def tiny_all(tmp_path_factory):
    """Every registered experiment reproduced once per session at the tiny scale, figure objects
    kept (``support.experiment_fixtures.AllRuns``): ``experiments/test_pipeline.py``,
    ``paper_figures/test_figures.py`` and, when either is collected, every
    ``experiments/test_experiment_<name>.py`` read this one run."""
    from support.experiment_fixtures import reproduce_all

    return reproduce_all(tmp_path_factory.mktemp("tiny-all"))


@pytest.fixture
def jit_on_off():
    """Run a Python snippet in fresh interpreters with Numba's JIT off (``NUMBA_DISABLE_JIT=1``)
    and on (``=0``): ``jit_on_off(code, settings=("off", "on"), cwd=None, env=None)`` returns a
    ``support.jit.JitRuns`` (``.off``, ``.on``: the finished runs; ``.json()``: both stdouts
    parsed).  Every run must exit 0."""
    from support.jit import run_jit_on_off

    return run_jit_on_off


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``make test`` runs ``-n auto --dist loadgroup``) every test that reads
    the session's all-experiments run (``tiny_all``, directly or through the fixture of an
    ``experiments/test_experiment_*`` module) goes to one worker, so that run is made once, not
    once per worker."""
    from support.experiment_fixtures import ALL_FIXTURE

    group = pytest.mark.xdist_group(name=ALL_FIXTURE)
    slow = _slow_tests()
    for item in items:
        if (ALL_FIXTURE in getattr(item, "fixturenames", ())
                or item.path.name.startswith("test_experiment_")):
            item.add_marker(group)
            item.add_marker(pytest.mark.slow)  # they share the all-experiments run (minutes)
        if item.nodeid in slow:
            item.add_marker(pytest.mark.slow)


def _slow_tests() -> set:
    """The node ids listed in ``tests/slow_tests.txt`` (measured: ``tools/slow_tests.py``), marked
    ``slow`` so that ``make test-fast`` (``-m "not slow"``) leaves them out, as it leaves out the
    tests of the all-experiments run."""
    path = os.path.join(os.path.dirname(__file__), "slow_tests.txt")
    with open(path, encoding="utf-8") as f:
        return {line.strip() for line in f if line.strip() and not line.startswith("#")}
