"""pytest plugin of :mod:`dpsim.testing`: a deterministic hypothesis profile, a ``dpsim_seed``
fixture and a ``--dpsim-trials`` option.

The plugin is opt-in: installing dpsim registers no ``pytest11`` entry point, so it never loads
in another project's test run by itself.  Enable it with ``pytest -p dpsim.testing.plugin`` or
``pytest_plugins = ["dpsim.testing.plugin"]`` in the rootdir's ``conftest.py`` (pytest accepts
``pytest_plugins`` only there; dpsim's own ``tests/conftest.py`` does this).  It adds:

* the hypothesis profiles ``dpsim-ci`` (``derandomize=True``: every run draws the same examples;
  ``max_examples=25``; no deadline, so a slow first call — Numba compilation — is not a flaky
  failure; no example database; ``print_blob`` to reproduce a failure) and ``dpsim-dev`` (random,
  more examples).  ``--dpsim-ci`` loads ``dpsim-ci``; so does the environment variable ``CI``
  (any non-empty value) when hypothesis's own ``--hypothesis-profile`` is not given — enabling the
  plugin is the opt-in to that, and ``--hypothesis-profile=NAME`` overrides it.  Without the
  plugin, ``CI`` leaves hypothesis's settings to hypothesis itself (whose own ``ci`` profile keeps
  ``max_examples=100``).
* ``--dpsim-trials=FACTOR`` (default 1): multiplies every Monte Carlo size requested through
  :func:`dpsim.testing.scaled_trials` (the assertions call it, and the ``dpsim_trials`` fixture
  is it): ``0.1`` for a quick smoke run, ``10`` for a thorough one.
* ``--dpsim-seed=N`` (default 0) and the ``dpsim_seed`` fixture: a fixed seed per test, derived
  from ``N`` and the test's id (so tests draw independent streams, and a run is reproducible); a
  failing test's report shows it.

Examples
--------
The seed of a test, a function of ``--dpsim-seed`` and the test's id:

>>> from dpsim.testing.plugin import test_seed
>>> test_seed(0, "tests/test_x.py::test_a") == test_seed(0, "tests/test_x.py::test_a")
True
>>> test_seed(0, "tests/test_x.py::test_a") != test_seed(1, "tests/test_x.py::test_a")
True
"""

from __future__ import annotations

import os
import zlib

import pytest
from hypothesis import HealthCheck, settings

from .assertions import scaled_trials, set_trials_scale

settings.register_profile("dpsim-ci", derandomize=True, deadline=None, database=None, print_blob=True,
                          max_examples=25, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dpsim-dev", deadline=None, max_examples=100)


def pytest_addoption(parser):
    """Add the ``--dpsim-trials``, ``--dpsim-seed`` and ``--dpsim-ci`` options (pytest hook).

    Parameters
    ----------
    parser : pytest.Parser
        pytest's option parser.
    """
    group = parser.getgroup("dpsim", "dpsim property testing")
    group.addoption("--dpsim-trials", type=float, default=1.0, metavar="FACTOR",
                    help="scale every dpsim Monte Carlo size by FACTOR (default 1)")
    group.addoption("--dpsim-seed", type=int, default=0, metavar="N",
                    help="base seed of the dpsim_seed fixture (default 0)")
    group.addoption("--dpsim-ci", action="store_true", default=False,
                    help="load the deterministic hypothesis profile 'dpsim-ci'")


def pytest_configure(config):
    """Apply ``--dpsim-trials`` and load the hypothesis profile (pytest hook).

    Parameters
    ----------
    config : pytest.Config
        The run's configuration.
    """
    factor = config.getoption("--dpsim-trials")
    if not factor > 0:
        raise pytest.UsageError(f"--dpsim-trials must be positive, got {factor}")
    set_trials_scale(factor)
    explicit = getattr(config.option, "hypothesis_profile", None)
    if config.getoption("--dpsim-ci") or (os.environ.get("CI") and not explicit):
        settings.load_profile("dpsim-ci")


def test_seed(base: int, nodeid: str) -> int:
    """The ``dpsim_seed`` of the test ``nodeid``: ``crc32(nodeid)`` mixed with ``base``.

    Parameters
    ----------
    base : int
        The ``--dpsim-seed`` value.
    nodeid : str
        The test's id.

    Returns
    -------
    int
        The test's seed.
    """
    return (zlib.crc32(nodeid.encode()) ^ (int(base) * 0x9E3779B1)) % (2 ** 31)


test_seed.__test__ = False  # not a test


@pytest.fixture
def dpsim_seed(request) -> int:
    """A fixed seed for this test (``--dpsim-seed`` and the test id); shown in a failure report."""
    seed = test_seed(request.config.getoption("--dpsim-seed"), request.node.nodeid)
    request.node.user_properties.append(("dpsim_seed", seed))
    return seed


@pytest.fixture
def dpsim_trials():
    """:func:`dpsim.testing.scaled_trials`: ``dpsim_trials(1000)`` is 1000 × ``--dpsim-trials``."""
    return scaled_trials


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Show a failing test's ``dpsim_seed`` in its report (pytest hook).

    Parameters
    ----------
    item : pytest.Item
        The test.
    call : pytest.CallInfo
        The phase of the test.

    Yields
    ------
    None
        Control to pytest, which makes the report.
    """
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for k, v in item.user_properties:
            if k == "dpsim_seed":
                rep.sections.append(("dpsim", f"dpsim_seed={v} (rerun with --dpsim-seed="
                                              f"{item.config.getoption('--dpsim-seed')})"))
