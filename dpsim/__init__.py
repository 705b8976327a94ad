"""dpsim — simulate differentially private (adaptive) optimizers, thousands of trials at once.

    import dpsim
    prob = dpsim.problems.logistic_regression(2000, 50, seed=0)
    opt = dpsim.optimizers.dp_sgd(lr=0.5, clip=1.0, noise_multiplier=1.0)
    res = dpsim.simulate(prob, opt, steps=500, batch_size=64, trials=100, seed=0)
    res.loss            # (K, R) full objective per record and trial
    res.epsilon(1e-5)   # privacy spent, from the optimizer's declared privacy events
    opt = dpsim.calibrate("dp_adam", epsilon=1.0, delta=1e-5, steps=500, batch_size=64, n=2000)
    dpsim.audit("dp_sgd", noise_multiplier=1.0)   # empirical lower bound on ε vs the claim

Layers (each imports only those below it): ``backend``, ``sampling``, ``_validate`` →
``problems`` → ``privacy.events`` → ``transforms`` → ``privacy`` (privatizers, noise, tCDP, DP-MF)
→ ``accounting`` → ``optimizers`` → ``engine``/``results`` → ``cli``.  See docs/ARCHITECTURE.md.

A small run, as a doctest (``tests/project/test_doctests.py`` runs it):

>>> import dpsim
>>> prob = dpsim.problems.logistic_regression(200, 5, seed=0)
>>> res = dpsim.simulate(prob, "dp_sgd", steps=3, batch_size=8, trials=2, seed=0)
>>> res.loss.shape, res.trials
((4, 2), 2)
"""

__version__ = "0.1.0"

import copyreg as _copyreg
import importlib as _importlib
import sys as _sys
import types as _types

from .engine import simulate  # noqa: E402
from .results import Result, load  # noqa: E402

# Everything else is imported on first use (PEP 562 ``__getattr__`` below), so that ``import
# dpsim`` loads only the engine and Numba: the optimizers, problems, accounting (dp_accounting,
# SciPy's stats/signal/optimize), xarray and tqdm come with the first call that needs them
# (issue 32; ``tests/core/test_overhead.py``).
#
# ``dpsim.calibrate`` and ``dpsim.audit`` are the functions; their modules stay importable as
# ``dpsim.calibrate``/``dpsim.audit`` through ``sys.modules`` (``from dpsim.audit import
# GradientTable``).  Importing a submodule makes the import system set it as an attribute of
# the package, which would replace the function by its module: :class:`_Package` keeps the
# function.
_FUNCTION_MODULES = ("calibrate", "audit", "explain")


class _Package(_types.ModuleType):
    """The ``dpsim`` module's type: a submodule named like one of the package's functions
    (:data:`_FUNCTION_MODULES`) is not set over that function when it is imported."""

    def __setattr__(self, name, value):
        if name in _FUNCTION_MODULES and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


def _import_package(name):
    return _importlib.import_module(name)


def _reduce_package(module):
    """Pickle the package by reference, as pickle-by-reference libraries do a plain module
    (cloudpickle looks modules up by their exact type, so it needs this for :class:`_Package`)."""
    return _import_package, (module.__name__,)


_copyreg.pickle(_Package, _reduce_package)
_sys.modules[__name__].__class__ = _Package

_SUBMODULES = ("problems", "optimizers", "privacy", "accounting", "backend", "transforms", "sampling",
               "engine", "results", "cli", "datasets", "plot")
#: Names of this namespace provided by the applications through the entry-point group
#: ``dpsim.api`` (``dpsim.compare`` is :func:`dpsim.experiments.compare.compare`): the core
#: finds them there, as the CLI finds the applications' commands, and never imports them.
_API_GROUP = "dpsim.api"
_APPLICATION_NAMES = ("compare",)

__all__ = ["simulate", "load", "Result", "calibrate", "audit", "explain", "compare", "__version__",
           *_SUBMODULES]


def __dir__():
    return sorted(set(globals()) | set(__all__))


def __getattr__(name):
    if name in _FUNCTION_MODULES:
        obj = getattr(_importlib.import_module(f".{name}", __name__), name)
        globals()[name] = obj
        return obj
    if name in _SUBMODULES:
        mod = _importlib.import_module(f".{name}", __name__)
        globals()[name] = mod
        return mod
    if name in _APPLICATION_NAMES:
        from importlib.metadata import entry_points

        found = entry_points(group=_API_GROUP, name=name)
        if not found:
            raise AttributeError(f"dpsim.{name} is provided by the installed package's entry point "
                                 f"{_API_GROUP}:{name}, which is missing: reinstall dpsim "
                                 "(pip install -e .)")
        obj = next(iter(found)).load()
        globals()[name] = obj
        return obj
    raise AttributeError(f"module 'dpsim' has no attribute {name!r}")
