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
"""

__version__ = "0.1.0"

import importlib as _importlib

from .engine import simulate  # noqa: E402
from .results import Result, load  # noqa: E402
# ``dpsim.calibrate`` and ``dpsim.audit`` are the functions (their modules stay importable as
# ``dpsim.calibrate``/``dpsim.audit`` through ``sys.modules``: ``from dpsim.audit import GradientTable``).
from .calibrate import calibrate  # noqa: E402
from .audit import audit  # noqa: E402

_SUBMODULES = ("problems", "optimizers", "privacy", "accounting", "backend", "transforms", "sampling",
               "engine", "results", "cli", "datasets", "plot")
#: Names of this namespace provided by the applications through the entry-point group
#: ``dpsim.api`` (``dpsim.compare`` is :func:`dpsim.experiments.compare.compare`): the core
#: finds them there, as the CLI finds the applications' commands, and never imports them.
_API_GROUP = "dpsim.api"
_APPLICATION_NAMES = ("compare",)

__all__ = ["simulate", "load", "Result", "calibrate", "audit", "compare", "__version__",
           *_SUBMODULES]


def __getattr__(name):
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
