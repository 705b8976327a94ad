"""A Python snippet run in fresh interpreters with Numba's JIT off and on: the harness behind the
``jit_on_off`` fixture of ``tests/conftest.py``.

A Numba kernel of dpsim must give the same numbers as plain Python (``NUMBA_DISABLE_JIT=1``) and
jitted (``NUMBA_DISABLE_JIT=0``).  The setting is read when Numba is imported, so each run is its
own interpreter::

    def test_kernel_without_jit(jit_on_off):
        runs = jit_on_off("import json, sys; ...; json.dump(out, sys.stdout)")
        off, on = runs.json()          # stdout of each run, parsed
        assert off == on

Each run has the repository first on ``PYTHONPATH`` (it imports this checkout's ``dpsim``) and
must exit 0 (else the test fails with the run's stderr).  Without the JIT runs first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: the value of NUMBA_DISABLE_JIT for each setting
SETTINGS = {"off": "1", "on": "0"}


@dataclass(frozen=True)
class JitRuns:
    """The finished runs (``subprocess.CompletedProcess``, text mode) of one snippet; ``None`` for a
    setting that was not asked for."""

    off: subprocess.CompletedProcess | None  # NUMBA_DISABLE_JIT=1: every kernel as plain Python
    on: subprocess.CompletedProcess | None   # NUMBA_DISABLE_JIT=0: the jitted kernels

    def json(self) -> tuple:
        """``(off, on)``: each run's stdout read as JSON."""
        return json.loads(self.off.stdout), json.loads(self.on.stdout)


def run_jit_on_off(code: str, *, settings=("off", "on"), cwd=None, env=None,
                   timeout: float = 300) -> JitRuns:
    """Run ``code`` (``python -c``) once per setting in ``settings`` ("off", "on"; off first).

    ``cwd`` defaults to the repository root; ``env`` updates the inherited environment (a value of
    ``None`` removes the variable)."""
    unknown = set(settings) - set(SETTINGS)
    if unknown or not settings:
        raise ValueError(f"settings must be a non-empty subset of {sorted(SETTINGS)}, got {settings!r}")
    base = dict(os.environ)
    base["PYTHONPATH"] = str(ROOT) + os.pathsep + base.get("PYTHONPATH", "")
    for key, value in (env or {}).items():
        if value is None:
            base.pop(key, None)
        else:
            base[key] = value
    runs = dict.fromkeys(SETTINGS)
    for name, flag in SETTINGS.items():
        if name not in settings:
            continue
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**base, "NUMBA_DISABLE_JIT": flag}, cwd=ROOT if cwd is None else cwd,
                           timeout=timeout)
        assert r.returncode == 0, f"NUMBA_DISABLE_JIT={flag}:\n{r.stderr}"
        runs[name] = r
    return JitRuns(**runs)
