#!/usr/bin/env python
"""Mutation testing of dpsim's bounds modules (``analysis/*.py``): does the test suite notice when
a formula is changed?

Why a small mutator of our own rather than mutmut or cosmic-ray: the bounds modules are installed
under another name (``analysis/`` → ``dpsim.analysis``, see pyproject's ``package-dir``), which
mutmut 3 cannot follow, and the operators that matter for closed-form bounds (a constant doubled
or halved, ``+``/``−``, ``*``/``/``, an exponent, ``<``/``<=``, ``min``/``max``, ``sqrt``/``log``
dropped) are a short list.  Each mutant is one text substitution at the AST node's exact position,
applied to a private copy of the repository (never the working tree), and judged by running the
module's own test files with ``pytest -x``: killed (a test failed or timed out) or survived.

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

#: bounds module -> the test files that exercise it (run with -x, in this order)
TARGETS = {
    "analysis/delay.py": ["tests/test_analysis_delay.py"],
    "analysis/concentration.py": ["tests/test_analysis_concentration.py"],
    "analysis/moments.py": ["tests/test_analysis_moments.py"],
    "analysis/bias.py": ["tests/test_analysis_bias.py"],
    "analysis/tcdp.py": ["tests/test_analysis_tcdp_checks.py", "tests/test_tcdp.py"],
}

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
    args = ap.parse_args(argv)

    modules = args.module or list(TARGETS)
    per_module: list[list[Mutant]] = []
    rng = random.Random(args.seed)
    for m in modules:
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
    for m in modules:  # the unmutated tests must pass in the copy
        status, why = run_tests(dest, TARGETS[m], args.timeout * 3, extra)
        if status != "survived":
            raise SystemExit(f"the tests of {m} do not pass unmutated in {dest}: {status} {why}")
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
        try:
            path.write_text(mutated)
            mu.status, mu.first_failure = run_tests(dest, TARGETS[mu.module], args.timeout, extra)
        finally:
            path.write_text(original)
        mu.seconds = time.perf_counter() - t0
        print(f"[{i}/{len(mutants)}] {mu.status:8s} {mu.seconds:5.1f}s {mu.label()}", flush=True)

    tried = [m for m in mutants if m.status in ("killed", "survived", "timeout", "error")]
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
        Path(args.json).write_text(json.dumps([asdict(m) for m in mutants], indent=1))
    if not args.workdir:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
