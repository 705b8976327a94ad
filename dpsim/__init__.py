"""dpsim — simulate differentially private (adaptive) optimizers, thousands of trials at once.

    import dpsim
    prob = dpsim.problems.logistic_regression(2000, 50, seed=0)
    opt = dpsim.optimizers.get("dp_sgd", lr=0.5, clip=1.0, noise_multiplier=1.0)
    res = dpsim.simulate(prob, opt, steps=500, batch_size=64, trials=100, seed=0)
    res.loss            # (K, R) full objective per record and trial
    res.epsilon(1e-5)   # privacy spent, from the optimizer's declared releases

See README.md and the API contract for the full surface.
"""

__version__ = "0.1.0"

import importlib as _importlib

from .engine import Result, load, simulate  # noqa: E402

__all__ = ["simulate", "load", "Result", "problems", "optimizers", "privacy", "accounting",
           "backend", "transforms", "sampling", "__version__"]

_LAZY = {"problems", "optimizers", "privacy", "accounting", "backend", "transforms", "sampling"}


def __getattr__(name):
    if name in _LAZY:
        mod = _importlib.import_module(f".{name}", __name__)
        globals()[name] = mod
        return mod
    raise AttributeError(f"module 'dpsim' has no attribute {name!r}")
