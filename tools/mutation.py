#!/usr/bin/env python
"""Mutation testing of dpsim's bounds modules (``analysis/*.py``): does the test suite notice when
a formula is changed?

Why a small mutator of our own rather than mutmut or cosmic-ray: the bounds modules are installed
under another name (``analysis/`` → ``dpsim.analysis``, see pyproject's ``package-dir``), which
mutmut 3 cannot follow, and the operators that matter for closed-form bounds (a constant doubled
or halved, ``+``/``−``, ``*``/``/``, an exponent, ``<``/``<=``, ``min``/``max``, ``sqrt``/``log``
dropped) are a short list.  Each mutant is one text substitution at the AST node's exact position,
applied to a private copy of the repository (never the working tree), and judged by running
tests with ``pytest -x``: killed (a test failed or timed out) or survived.

Which tests a mutant runs: before any mutant, every test file of ``TESTS`` runs once in the copy
under a profiling hook (:data:`_PLUGIN`) that records, per test, which functions of the bounds
modules it called (setup of module- or class-wide fixtures is charged to every test of the file).
A mutant inside function ``f`` then runs only the tests that called ``f``, fastest first, with
``-x`` and a time limit of ``--timeout`` or five times those tests' unmutated time plus the start-up,
whichever is larger; a mutant in a function that no test calls survives without running anything
("uncovered").  ``--no-select`` runs the module's whole test files instead.

Scope: the bodies of functions of the module; docstrings, strings, f-strings, ``raise`` statements
and argument validation (``_arr``, ``_require``, ``hyper``, ``_check_*`` calls) are skipped, and so
are keyword arguments that only tune numerics (``axis``, ``limit``, ``epsrel``, ...).

Usage::

    python tools/mutation.py                       # every bounds module, a fixed-seed sample
    python tools/mutation.py --module analysis/delay.py --sample 0   # every mutant of one module
    python tools/mutation.py --json out.json --list-survivors

Exit status 0; the score is printed (killed / tried), with the surviving mutants.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: the tests written against the bounds modules; with --no-select a mutant of a module runs the
#: files listed for it (with -x, in this order)
_SHARED = ["tests/analysis/test_mutants.py", "tests/analysis/test_rows.py"]
TARGETS = {
    "analysis/delay.py": ["tests/analysis/test_delay.py", "tests/analysis/test_dp2_wave3.py", *_SHARED],
    "analysis/concentration.py": ["tests/analysis/test_concentration.py",
                                  "tests/analysis/test_adambc_design_wave3.py", *_SHARED],
    "analysis/moments.py": ["tests/analysis/test_moments.py", "tests/analysis/test_pagan_l2p_wave3.py",
                            *_SHARED],
    "analysis/moments_privacy.py": ["tests/analysis/test_moments.py",
                                    "tests/analysis/test_pagan_l2p_wave3.py", *_SHARED],
    "analysis/bias.py": ["tests/analysis/test_bias.py", "tests/analysis/test_adambc_design_wave3.py",
                         *_SHARED],
    "analysis/tcdp.py": ["tests/analysis/test_tcdp_checks.py", "tests/privacy/test_tcdp.py",
                         "tests/analysis/test_pagan_l2p_wave3.py", *_SHARED],
}
#: every file profiled for the per-test selection (each bounds module's own files and the shared ones)
TESTS = list(dict.fromkeys(f for fs in TARGETS.values() for f in fs))

#: the pytest plugin that records which functions of the bounds modules each test calls
_PLUGIN = r"""
import json, os, sys, threading, time
import pytest

_MODULES = set(json.loads(os.environ["DPSIM_MUTCOV_MODULES"]))
_OUT = os.environ["DPSIM_MUTCOV_OUT"]
_files = {}
_hit = set()
_records = {}
_phase = {"setup": set()}


def _module_of(filename):
    m = _files.get(filename)
    if m is None:
        parts = os.path.realpath(filename).replace(os.sep, "/").split("/")
        m = "/".join(parts[-2:]) if "/".join(parts[-2:]) in _MODULES else ""
        _files[filename] = m
    return m


def _profile(frame, event, arg):
    if event == "call":
        m = _module_of(frame.f_code.co_filename)
        if m:
            _hit.add((m, frame.f_code.co_name))


def _start():
    _hit.clear()
    sys.setprofile(_profile)
    threading.setprofile(_profile)


def _stop():
    sys.setprofile(None)
    threading.setprofile(None)
    return set(_hit)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    _start()
    yield
    rec = _records.setdefault(item.nodeid, {"funcs": set(), "setup": set(), "seconds": 0.0, "ok": True})
    rec["setup"] |= _stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _start()
    t0 = time.perf_counter()
    yield
    rec = _records.setdefault(item.nodeid, {"funcs": set(), "setup": set(), "seconds": 0.0, "ok": True})
    rec["funcs"] |= _stop()
    rec["seconds"] += time.perf_counter() - t0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    _start()
    yield
    rec = _records.setdefault(item.nodeid, {"funcs": set(), "setup": set(), "seconds": 0.0, "ok": True})
    rec["setup"] |= _stop()


def pytest_runtest_logreport(report):
    rec = _records.setdefault(report.nodeid, {"funcs": set(), "setup": set(), "seconds": 0.0, "ok": True})
    rec["seconds"] += report.duration if report.when != "call" else 0.0
    if report.failed:
        rec["ok"] = False


def pytest_sessionfinish(session):
    out = {k: {"funcs": sorted(map(list, v["funcs"])), "setup": sorted(map(list, v["setup"])),
               "seconds": v["seconds"], "ok": v["ok"]} for k, v in _records.items()}
    with open(_OUT, "w") as f:
        json.dump(out, f)
"""

_SKIP_CALLS = {"_arr", "_require", "hyper", "_check_eps_delta", "_alpha", "_beta", "_steps", "_out",
               "_bc", "_raise_failed", "check_epsilon_delta", "real", "integer", "warn", "ValueError",
               "TypeError", "KeyError", "RuntimeError", "print", "format"}
_SKIP_KW = {"axis", "limit", "epsrel", "epsabs", "dtype", "maxiter", "xtol", "rtol", "atol", "points",
            "ddof", "keepdims", "full_output", "n_boot", "seed", "method"}
_FUNCS_IDENTITY = {"sqrt", "log", "log1p", "log2", "exp", "expm1"}
_SWAP_CALLS = {"min": "max", "max": "min", "minimum": "maximum", "maximum": "minimum",
               "floor": "ceil", "ceil": "floor"}
_BINOP_SWAP = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "/"), ast.Div: ("/", "*"),
               ast.Pow: ("**", "*"), ast.FloorDiv: ("//", "/")}
_CMP_SWAP = {ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="), ast.GtE: (">=", ">"),
             ast.Eq: ("==", "!="), ast.NotEq: ("!=", "==")}


@dataclass
class Mutant:
    module: str
    line: int
    start: int  # character offsets in the file
    end: int
    old: str
    new: str
    operator: str
    function: str
    status: str = ""
    seconds: float = 0.0
    first_failure: str = ""

    def label(self) -> str:
        return f"{self.module}:{self.line} [{self.function}] {self.operator}: {self.old!r} -> {self.new!r}"


def _offsets(text: str) -> list[int]:
    out, pos = [0], 0
    for line in text.splitlines(keepends=True):
        pos += len(line)
        out.append(pos)
    return out


def _name_of(func) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, text: str):
        self.module, self.text = module, text
        self.off = _offsets(text)
        self.mutants: list[Mutant] = []
        self.func: list[str] = []
        self.skip_depth = 0

    def _pos(self, node):
        return self.off[node.lineno - 1] + node.col_offset, self.off[node.end_lineno - 1] + node.end_col_offset

    def _add(self, node, start, end, new, op):
        if self.skip_depth or not self.func:
            return
        old = self.text[start:end]
        if old == new:
            return
        self.mutants.append(Mutant(self.module, node.lineno, start, end, old, new, op, self.func[-1]))

    # scopes --------------------------------------------------------------------------------------
    def visit_FunctionDef(self, node):
        self.func.append(node.name)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]  # docstring
        for stmt in body:
            self.visit(stmt)
        self.func.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        for stmt in node.body:
            self.visit(stmt)

    def _skipping(self, node):
        self.skip_depth += 1
        self.generic_visit(node)
        self.skip_depth -= 1

    def visit_Raise(self, node):
        self._skipping(node)

    def visit_JoinedStr(self, node):
        self._skipping(node)

    def visit_If(self, node):
        # `if <cond>: raise ...` is validation: skip the condition and the raise
        if len(node.body) == 1 and isinstance(node.body[0], ast.Raise) and not node.orelse:
            return
        self.generic_visit(node)

    def visit_Assert(self, node):
        self._skipping(node)

    def visit_keyword(self, node):
        if node.arg in _SKIP_KW:
            return
        self.generic_visit(node)

    # operators -----------------------------------------------------------------------------------
    def visit_Constant(self, node):
        v = node.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return
        start, end = self._pos(node)
        if isinstance(v, float):
            for new, op in ((repr(v * 2), "const*2"), (repr(v / 2), "const/2"), (repr(v + 1), "const+1")):
                self._add(node, start, end, new, op)
        else:
            for new, op in ((str(v * 2), "const*2"), (str(v + 1), "const+1")):
                self._add(node, start, end, new, op)

    def visit_BinOp(self, node):
        t = type(node.op)
        if t in _BINOP_SWAP:
            old, new = _BINOP_SWAP[t]
            ls, le = self._pos(node.left)
            rs, _ = self._pos(node.right)
            seg = self.text[le:rs]
            i = seg.find(old)
            # `*` inside `**` must not match: the segment between the operands holds only the operator
            if i >= 0 and seg.count(old[0]) == len(old):
                self._add(node, le + i, le + i + len(old), new, f"{old}->{new}")
        self.generic_visit(node)

    def visit_Compare(self, node):
        prev = node.left
        for op, comp in zip(node.ops, node.comparators):
            t = type(op)
            if t in _CMP_SWAP:
                old, new = _CMP_SWAP[t]
                _, pe = self._pos(prev)
                cs, _ = self._pos(comp)
                seg = self.text[pe:cs]
                i = seg.find(old)
                if i >= 0 and seg.strip() == old:
                    self._add(node, pe + i, pe + i + len(old), new, f"{old}->{new}")
            prev = comp
        self.generic_visit(node)

    def visit_Call(self, node):
        name = _name_of(node.func)
        if name in _SKIP_CALLS or name.startswith("_check") or name.startswith("_validate"):
            return
        fs, fe = self._pos(node.func)
        if name in _SWAP_CALLS:
            new_name = _SWAP_CALLS[name]
            func_text = self.text[fs:fe]
            self._add(node, fe - len(name), fe, new_name, f"{name}->{new_name}")
            del func_text
        if name in _FUNCS_IDENTITY and len(node.args) == 1 and not node.keywords:
            s, e = self._pos(node)
            a_s, a_e = self._pos(node.args[0])
            self._add(node, s, e, "(" + self.text[a_s:a_e] + ")", f"{name}->identity")
        self.generic_visit(node)

    def visit_UnaryOp(self, node):
        if isinstance(node.op, ast.USub):
            s, e = self._pos(node)
            os_, oe = self._pos(node.operand)
            self._add(node, s, e, "(" + self.text[os_:oe] + ")", "drop-unary-minus")
        self.generic_visit(node)


def _key(text: str, mu: Mutant) -> tuple:
    """What identifies a mutant across edits elsewhere in its file: module, function, operator,
    old and new text, the text of its line and its column there."""
    ls = text.rfind("\n", 0, mu.start) + 1
    le = text.find("\n", mu.end)
    return (mu.module, mu.function, mu.operator, mu.old, mu.new, text[ls:le if le >= 0 else len(text)],
            mu.start - ls)


def rerun_plan(previous: str, base: Path) -> tuple[list[Mutant], list[dict], list[dict]]:
    """Mutants of a previous ``--json`` run to test again: its survivors, found in the current
    files by :func:`_key` (``base`` holds the files that run mutated, e.g. its ``--workdir``).
    Returns ``(to_test, kept, gone)``: ``kept`` are the previous non-survivors (their status
    stands), ``gone`` the survivors whose line no longer exists."""
    old = json.loads(Path(previous).read_text())
    current: dict[tuple, Mutant] = {}
    for m in {e["module"] for e in old}:
        text = (ROOT / m).read_text()
        for mu in collect(m):
            current.setdefault(_key(text, mu), mu)
    texts = {m: (base / m).read_text() for m in {e["module"] for e in old}}
    to_test, kept, gone = [], [], []
    for e in old:
        if e["status"] != "survived":
            kept.append(e)
            continue
        mu = current.get(_key(texts[e["module"]], Mutant(**{k: e[k] for k in (
            "module", "line", "start", "end", "old", "new", "operator", "function")})))
        (to_test.append(mu) if mu is not None else gone.append(e))
    return to_test, kept, gone


def collect(module: str, root: Path = ROOT) -> list[Mutant]:
    text = (root / module).read_text()
    c = _Collector(module, text)
    c.visit(ast.parse(text))
    # module-level constants (e.g. thresholds) are mutated too: collect them outside functions
    return c.mutants


def _prepare_copy(dest: Path) -> Path:
    """A private copy of the repository (tracked and untracked-but-not-ignored files) in which the
    ``dpsim`` package resolves to the copy's own ``analysis/``, ``experiments/``, ``paper_figures/``."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    for f in files:
        src = ROOT / f
        if not src.is_file():
            continue
        d = dest / f
        d.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, d)
    for sub in ("analysis", "experiments", "paper_figures"):
        link = dest / "dpsim" / sub
        if not link.exists():
            link.symlink_to(Path("..") / sub)
    check = subprocess.run([sys.executable, "-c", "import dpsim.analysis as a; print(a.__file__)"],
                           cwd=dest, capture_output=True, text=True, env=_env(dest))
    where = check.stdout.strip()
    if not where.startswith(str(dest)):
        raise RuntimeError(f"dpsim.analysis resolves to {where!r}, not to the copy in {dest}: "
                           f"{check.stderr[-500:]}")
    return dest


def _env(dest: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(dest) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("HYPOTHESIS_PROFILE", "ci")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _existing(dest: Path, tests: list[str]) -> list[str]:
    return [t for t in tests if (dest / t).exists()]


def run_tests(dest: Path, tests: list[str], timeout: float, extra: list[str]) -> tuple[str, str]:
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--no-header",
           "-o", "addopts=", *extra, *tests]
    try:
        p = subprocess.run(cmd, cwd=dest, capture_output=True, text=True, timeout=timeout,
                           env=_env(dest))
    except subprocess.TimeoutExpired:
        return "timeout", ""
    if p.returncode == 0:
        return "survived", ""
    if p.returncode in (1,):
        first = next((ln for ln in p.stdout.splitlines() if ln.startswith("FAILED")), "")
        return "killed", first[:200]
    return "error", (p.stdout + p.stderr)[-300:]


#: a fork server: imports pytest, NumPy, SciPy, Hypothesis and the simulator once (never
#: ``dpsim.analysis``, which each mutant changes), then runs every pytest session in a forked child,
#: so a mutant pays for its tests and not for the imports
_SERVER = r"""
import json, os, signal, sys, time
import numpy, scipy.stats, scipy.special, scipy.integrate, scipy.optimize, scipy.linalg
import hypothesis, pytest
import dpsim, dpsim.testing
pre = [m for m in sys.modules if m.startswith(("dpsim.analysis", "dpsim.experiments", "dpsim.paper_figures"))]
if pre:
    raise SystemExit(f"the fork server must not import {pre}")
print("ready", flush=True)
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        try:
            code = int(pytest.main(req["args"]))
        except BaseException:
            code = 3
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    t_end = time.monotonic() + req["timeout"]
    status = None
    while status is None:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(st)
        elif time.monotonic() > t_end:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            status = "timeout"
        else:
            time.sleep(0.02)
    print(json.dumps({"status": status}), flush=True)
"""


class ForkServer:
    """Runs pytest sessions in children forked from one warm process (see :data:`_SERVER`)."""

    def __init__(self, dest: Path):
        self.dest = dest
        (dest / "_dpsim_mutserver.py").write_text(_SERVER)
        self.proc = subprocess.Popen([sys.executable, str(dest / "_dpsim_mutserver.py")], cwd=dest,
                                     env=_env(dest), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        ready = self.proc.stdout.readline().strip()
        if ready != "ready":
            raise RuntimeError(f"the fork server did not start: {ready!r}")

    def run(self, tests: list[str], timeout: float, extra: list[str]) -> tuple[str, str]:
        log = self.dest / "_dpsim_mutant.log"
        args = ["-x", "-q", "-p", "no:cacheprovider", "--no-header", "-o", "addopts=", *extra, *tests]
        self.proc.stdin.write(json.dumps({"args": args, "timeout": timeout, "log": str(log)}) + "\n")
        self.proc.stdin.flush()
        status = json.loads(self.proc.stdout.readline())["status"]
        out = log.read_text(errors="replace") if log.exists() else ""
        if status == "timeout":
            return "timeout", ""
        if status == 0:
            return "survived", ""
        if status == 1:
            first = next((ln for ln in out.splitlines() if ln.startswith("FAILED")), "")
            return "killed", first[:200]
        return "error", out[-300:]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _fingerprint(dest: Path, tests: list[str]) -> str:
    """A hash of the test files, the tests' conftest and the (unmutated) bounds modules: a saved
    coverage map is reused only while none of them changed."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted({*tests, "tests/conftest.py", *TARGETS}):
        p = dest / f
        h.update(f.encode() + b"\0" + (p.read_bytes() if p.exists() else b"<missing>") + b"\0")
    return h.hexdigest()


def coverage_map(dest: Path, tests: list[str], timeout: float, cache: str | None = None) -> dict:
    """Run ``tests`` once, unmutated, under :data:`_PLUGIN`; return ``{nodeid: record}`` with the
    functions each test called (``funcs``; ``setup`` for its fixtures), its time and whether it
    passed.  Calls made while setting up or tearing down a fixture shared by several tests are
    charged to every test of that file, since a subset run sets the fixture up again."""
    fp = _fingerprint(dest, tests)
    if cache and Path(cache).exists():
        saved = json.loads(Path(cache).read_text())
        if saved.get("fingerprint") == fp:
            return _charge_shared(saved["records"])
    (dest / "_dpsim_mutcov.py").write_text(_PLUGIN)
    out = dest / "_dpsim_mutcov.json"
    env = _env(dest)
    env["DPSIM_MUTCOV_MODULES"] = json.dumps(list(TARGETS))
    env["DPSIM_MUTCOV_OUT"] = str(out)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--no-header", "-o", "addopts=",
           "-p", "_dpsim_mutcov", *[t for t in tests if (dest / t).exists()]]
    p = subprocess.run(cmd, cwd=dest, capture_output=True, text=True, timeout=timeout, env=env)
    if not out.exists():
        raise RuntimeError(f"the coverage run wrote nothing: {(p.stdout + p.stderr)[-1000:]}")
    recs = json.loads(out.read_text())
    if cache:
        Path(cache).write_text(json.dumps({"fingerprint": fp, "records": recs}))
    return _charge_shared(recs)


def _collect_ids(dest: Path, tests: list[str]) -> set:
    """The node ids pytest collects from ``tests`` in the copy."""
    p = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                        "-o", "addopts=", *_existing(dest, tests)], cwd=dest, capture_output=True,
                       text=True, env=_env(dest))
    return {ln.strip() for ln in p.stdout.splitlines() if "::" in ln}


def _charge_shared(recs: dict) -> dict:
    shared: dict[str, set] = {}
    for nodeid, r in recs.items():
        shared.setdefault(nodeid.split("::")[0], set()).update(map(tuple, r["setup"]))
    for nodeid, r in recs.items():
        r["covers"] = set(map(tuple, r["funcs"])) | set(map(tuple, r["setup"])) | shared[nodeid.split("::")[0]]
    return recs


def select(recs: dict, mu: Mutant) -> list[str]:
    """The passing tests that called the mutant's function, fastest first."""
    key = (mu.module, mu.function)
    hit = [(r["seconds"], nodeid) for nodeid, r in recs.items() if r["ok"] and key in r["covers"]]
    return [nodeid for _, nodeid in sorted(hit)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", action="append", help="bounds module(s), default: all of TARGETS")
    ap.add_argument("--sample", type=int, default=40, help="mutants per module (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant")
    ap.add_argument("--json", help="write every mutant's result here")
    ap.add_argument("--workdir", help="where to put the private copy (default: a temporary folder)")
    ap.add_argument("-k", default=None, help="pytest -k expression for the mutant runs")
    ap.add_argument("--list-only", action="store_true", help="list the mutants and exit")
    ap.add_argument("--rerun", help="a previous --json result: test its survivors again (its other "
                    "results stand) and print the combined score")
    ap.add_argument("--rerun-base", help="folder holding the files the --rerun run mutated (its "
                    "--workdir), to find its survivors in the current files; default: the repository")
    ap.add_argument("--coverage-cache", help="save the per-test coverage map here and reuse it while "
                    "the tests and the bounds modules are unchanged")
    ap.add_argument("--no-fork", action="store_true",
                    help="start a fresh Python for every mutant instead of forking a warm one")
    ap.add_argument("--no-select", action="store_true",
                    help="run each module's whole test files for every mutant (no per-test selection)")
    ap.add_argument("--startup", type=float, default=30.0,
                    help="seconds allowed for pytest's start-up on top of the selected tests' time")
    args = ap.parse_args(argv)

    modules = args.module or list(TARGETS)
    per_module: list[list[Mutant]] = []
    rng = random.Random(args.seed)
    kept: list[dict] = []
    if args.rerun:
        to_test, kept, gone = rerun_plan(args.rerun, Path(args.rerun_base) if args.rerun_base else ROOT)
        print(f"re-run of {args.rerun}: {len(kept)} results kept, {len(to_test)} survivors to test again"
              + (f", {len(gone)} survivors whose line changed (not counted): "
                 + "; ".join(f"{g['module']}:{g['line']} {g['old']!r}->{g['new']!r}" for g in gone)
                 if gone else ""), flush=True)
        modules = sorted({m.module for m in to_test} | {e["module"] for e in kept})
        per_module = [to_test]
    for m in ([] if args.rerun else modules):
        if m not in TARGETS:
            raise SystemExit(f"unknown module {m!r}; known: {', '.join(TARGETS)}")
        ms = collect(m)
        if args.sample and len(ms) > args.sample:
            ms = rng.sample(ms, args.sample)
        per_module.append(ms)
        print(f"{m}: {len(collect(m))} candidate mutants, trying {len(ms)}", flush=True)
    # round-robin over the modules, so that a run cut short still samples every module
    mutants: list[Mutant] = []
    for i in range(max(map(len, per_module), default=0)):
        mutants += [ms[i] for ms in per_module if i < len(ms)]
    if args.list_only:
        for mu in mutants:
            print(mu.label())
        return 0

    tmp = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="dpsim-mutation-"))
    dest = _prepare_copy(tmp)
    extra = ["-k", args.k] if args.k else []
    recs = None
    if args.no_select:
        for m in modules:  # the unmutated tests must pass in the copy
            status, why = run_tests(dest, _existing(dest, TARGETS[m]), args.timeout * 3, extra)
            if status != "survived":
                raise SystemExit(f"the tests of {m} do not pass unmutated in {dest}: {status} {why}")
    elif args.rerun and args.coverage_cache and Path(args.coverage_cache).exists():
        # a re-run reuses the earlier coverage map even if files changed since (tests that no
        # longer exist are dropped) and profiles the shared test files afresh
        recs = _charge_shared(json.loads(Path(args.coverage_cache).read_text())["records"])
        alive = _collect_ids(dest, TESTS)
        recs = {k: r for k, r in recs.items() if k in alive}
        fresh = coverage_map(dest, _SHARED, args.timeout * 30)  # the shared files, profiled now
        recs.update(fresh)
        print(f"re-run: coverage map {args.coverage_cache} ({len(recs) - len(fresh)} tests still "
              f"present) plus {len(fresh)} tests of {_SHARED} profiled now", flush=True)
    else:
        t0 = time.perf_counter()
        recs = coverage_map(dest, TESTS, args.timeout * 30, args.coverage_cache)
        bad = sorted(k for k, r in recs.items() if not r["ok"])
        print(f"coverage run: {len(recs)} tests in {time.perf_counter() - t0:.0f}s"
              + (f"; {len(bad)} fail unmutated and are never used: {bad[:5]}" if bad else ""), flush=True)
    server = None if args.no_fork else ForkServer(dest)
    for i, mu in enumerate(mutants, 1):
        path = dest / mu.module
        original = path.read_text()
        mutated = original[:mu.start] + mu.new + original[mu.end:]
        try:
            compile(mutated, str(path), "exec")
        except SyntaxError:
            mu.status = "invalid"
            continue
        t0 = time.perf_counter()
        if recs is None:
            tests, limit = _existing(dest, TARGETS[mu.module]), args.timeout
        else:
            tests = select(recs, mu)
            limit = max(args.timeout, 5 * sum(recs[t]["seconds"] for t in tests) + args.startup)
            if not tests:
                mu.status, mu.seconds = "survived", 0.0
                mu.first_failure = "uncovered: no test calls this function"
                print(f"[{i}/{len(mutants)}] {'uncovered':8s} {mu.label()}", flush=True)
                continue
        try:
            path.write_text(mutated)
            if server is None:
                mu.status, mu.first_failure = run_tests(dest, tests, limit, extra)
            else:
                mu.status, mu.first_failure = server.run(tests, limit, extra)
        finally:
            path.write_text(original)
        mu.seconds = time.perf_counter() - t0
        print(f"[{i}/{len(mutants)}] {mu.status:8s} {mu.seconds:5.1f}s {mu.label()}", flush=True)

    if server is not None:
        server.close()
    prior = [Mutant(**{k: e[k] for k in Mutant.__dataclass_fields__ if k in e}) for e in kept]
    tried = [m for m in prior + mutants if m.status in ("killed", "survived", "timeout", "error")]
    killed = [m for m in tried if m.status in ("killed", "timeout", "error")]
    print("\n== mutation score ==")
    for m in modules:
        t = [x for x in tried if x.module == m]
        k = [x for x in t if x.status != "survived"]
        if t:
            print(f"{m}: {len(k)}/{len(t)} killed = {100 * len(k) / len(t):.1f}%")
    if tried:
        print(f"total: {len(killed)}/{len(tried)} killed = {100 * len(killed) / len(tried):.1f}%")
    surv = [m for m in tried if m.status == "survived"]
    if surv:
        print("\nsurvivors:")
        for m in surv:
            print("  " + m.label())
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(m) for m in prior + mutants], indent=1))
    if not args.workdir:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
