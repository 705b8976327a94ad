"""Privacy: typed events (:mod:`.events`), noise sources (:mod:`.noise`), the privatizers
(:mod:`.privatizers`, :mod:`.ellipsoid`), tCDP conversions (:mod:`.tcdp`) and DP-MF correlated noise
(:mod:`.mf`).  Accounting (events → ε) is :mod:`dpsim.accounting`.

Primitives exposed here: :func:`clip_l2`, :func:`project_ellipsoid`, and the DP-MF helpers
:func:`strategy`, :func:`sensitivity`, :func:`prefix_rmse`.

Examples
--------
The DP-MF strategies: the square-root Toeplitz factorization has a smaller prefix-sum error
than independent noise (the identity) at the same sensitivity:

>>> from dpsim.privacy import prefix_rmse, sensitivity, strategy
>>> M = strategy("sqrt_toeplitz", 4)
>>> round(prefix_rmse(strategy("identity", 4)), 4), round(prefix_rmse(M), 4)
(1.5811, 1.3814)
>>> round(sensitivity(M), 4)
1.22
"""

import importlib as _importlib

from ._ellipsoid import project_ellipsoid
from .clipping import clip_l2
from .mf import prefix_rmse, sensitivity, strategy

__all__ = ["clip_l2", "project_ellipsoid", "strategy", "sensitivity", "prefix_rmse", "events", "noise",
           "privatizers", "ellipsoid", "tcdp", "mf"]

_SUBMODULES = {"events", "noise", "privatizers", "ellipsoid", "tcdp", "mf", "clipping"}


def __getattr__(name):
    if name in _SUBMODULES:
        return _importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'dpsim.privacy' has no attribute {name!r}")
