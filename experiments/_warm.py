"""Preloaded by the fork server that starts the worker processes of a local Dask cluster
(:class:`dpsim.experiments.pipeline.DaskRunner`): import what a cell runs and load every Numba
kernel of ``dpsim`` that this machine's cache holds, once, so that each worker forked from that
server starts with them instead of importing dpsim (about 2.5 s of CPU) and loading each kernel
on its first cell (about 1.5 s in all) itself.

Importing this module has that effect and nothing else: it computes nothing and draws no random
number, so no result depends on it (the kernels are the ones a cell would load).
"""

from __future__ import annotations

import importlib

from . import pipeline, registered_modules

for _name in registered_modules():
    importlib.import_module(_name)

LOADED = pipeline.load_cached_kernels()
