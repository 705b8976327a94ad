"""The benchmarks' JSON record: one file per benchmark per run, with a common header.

    python benchmarks/_record.py --run-name     # prints the run folder's name for this state

Every script of ``make bench`` parses its arguments, makes a :class:`Recorder` (which notes the
start time and load) and, once its numbers are in, calls :meth:`Recorder.finish` with them.  The
record is written when recording is on:

* ``BENCH_RUN``: the run folder's name (``make bench`` sets it once, from ``--run-name``, so every
  benchmark of one ``make bench`` lands in the same folder); empty or ``auto``: computed here;
* ``BENCH_RESULTS``: the folder that holds the run folders (default ``benchmarks/results``);
  setting it alone also turns recording on (a trial run into a scratch folder).

With neither set (a benchmark run by hand) nothing is written unless ``--json OUT`` is given,
which writes the same document to ``OUT``.  The run folder is named
``<UTC date>-<short commit>[-dirty]``; the document (``SCHEMA``)::

    {"schema": "dpsim-bench/1", "bench": "bench_dp_sgd", "run": "2026-11-28-0a7e551",
     "started_utc": "...", "finished_utc": "...", "duration_s": 123.4,
     "git": {"commit": "<40 hex>", "short": "0a7e551", "dirty": false},
     "machine": {"cpu_model": "...", "cpus": 2, "usable_cpus": 2, "memory_gib": 23.6,
                 "arch": "x86_64", "platform": "Linux-..."},
     "software": {"python": "3.11.9", "numpy": "2.4.6", "numba": "0.68.1", "dpsim": "0.1.0"},
     "load": {"start": [1m, 5m, 15m], "end": [1m, 5m, 15m]},
     "threads_env": {"OMP_NUM_THREADS": "1", ...},   # null where unset
     "argv": ["--steps", "500"], "params": {...},      # the parsed arguments
     "results": {...}}                                 # the benchmark's own numbers

Non-finite floats are written as ``null`` (strict JSON).  ``tools/perf_page.py`` renders
``docs/performance.md`` from every run folder.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

SCHEMA = "dpsim-bench/1"
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RESULTS = ROOT / "benchmarks" / "results"
THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
#: paths that do not make the measured state "dirty": what ``make bench`` itself writes
NOT_STATE = ("benchmarks/results", "docs/performance.md")


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_state() -> dict:
    """The checkout's commit and whether tracked files differ from it (the benchmark results and
    the generated page excepted); ``commit`` is None outside a git checkout."""
    commit = _git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "short": None, "dirty": None}
    status = _git("status", "--porcelain", "--untracked-files=no", "--", ".",
                  *(f":(exclude){p}" for p in NOT_STATE))
    return {"commit": commit, "short": commit[:7], "dirty": bool(status) if status is not None else None}


def run_name(now: _dt.datetime | None = None, git: dict | None = None) -> str:
    """``<UTC date>-<short commit>[-dirty]`` (``nogit`` outside a checkout)."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    git = git_state() if git is None else git
    return f"{now:%Y-%m-%d}-{git['short'] or 'nogit'}{'-dirty' if git['dirty'] else ''}"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def machine() -> dict:
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    return {"cpu_model": _cpu_model(), "cpus": os.cpu_count(), "usable_cpus": usable,
            "memory_gib": _memory_gib(), "arch": platform.machine(), "platform": platform.platform()}


def software() -> dict:
    out = {"python": platform.python_version()}
    for mod in ("numpy", "numba", "dpsim"):
        try:
            out[mod] = getattr(__import__(mod), "__version__", None)
        except Exception:  # noqa: BLE001 - a missing package is recorded as such
            out[mod] = None
    return out


def loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _utc(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def clean(x):
    """JSON-safe: NumPy scalars and arrays to Python, tuples to lists, non-finite floats to None."""
    if isinstance(x, dict):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if hasattr(x, "tolist") and not isinstance(x, (str, bytes)):  # NumPy scalar or array
        return clean(x.tolist())
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if x is None or isinstance(x, (bool, int, str)):
        return x
    return str(x)


def results_root() -> Path:
    return Path(os.environ.get("BENCH_RESULTS") or DEFAULT_RESULTS)


def recording() -> bool:
    """Whether the records go into a run folder (``BENCH_RUN`` or ``BENCH_RESULTS`` set)."""
    return "BENCH_RUN" in os.environ or "BENCH_RESULTS" in os.environ


def run_dir(git: dict | None = None) -> Path:
    name = os.environ.get("BENCH_RUN", "")
    if name in ("", "auto"):
        name = run_name(git=git)
    if os.sep in name or name in (".", ".."):
        raise ValueError(f"BENCH_RUN must be a folder name, not {name!r}")
    return results_root() / name


class Recorder:
    """Notes the start (time, load) of one benchmark run; :meth:`finish` writes its record."""

    def __init__(self, bench: str, params=None, argv=None):
        self.bench = bench
        self.params = dict(vars(params) if hasattr(params, "__dict__") else (params or {}))
        self.argv = list(sys.argv[1:] if argv is None else argv)
        self.t0 = time.time()
        self.load_start = loadavg()

    def document(self, results: dict) -> dict:
        t1 = time.time()
        git = git_state()
        return clean({
            "schema": SCHEMA, "bench": self.bench, "run": run_dir(git).name if recording() else None,
            "started_utc": _utc(self.t0), "finished_utc": _utc(t1), "duration_s": round(t1 - self.t0, 1),
            "git": git, "machine": machine(), "software": software(),
            "load": {"start": self.load_start, "end": loadavg()},
            "threads_env": {k: os.environ.get(k) for k in THREAD_ENV},
            "argv": self.argv, "params": self.params, "results": results})

    def finish(self, results: dict, json_path: str | os.PathLike | None = None) -> Path | None:
        """Write the record into the run folder (when recording) and to ``json_path`` (if given);
        returns the run folder's file, or None."""
        doc = self.document(results)
        text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
        if json_path:
            Path(json_path).write_text(text)
        if not recording():
            return None
        folder = results_root() / doc["run"]
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.bench}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(text)
        tmp.replace(path)
        print(f"[recorded {path}]", file=sys.stderr)
        return path


if __name__ == "__main__":
    if sys.argv[1:] == ["--run-name"]:
        print(run_name())
    else:
        print(__doc__)
        sys.exit(2)
