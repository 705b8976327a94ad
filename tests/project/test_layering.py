"""The layering contract of dpsim (docs/ARCHITECTURE.md), checked on the source.

Every module of the repository is put in one layer; a module may import from its own layer and
from the layers below, never from a layer above, and the import graph has no cycles.  Function-local
imports count like module-level ones: they are dependencies too (a local import used to dodge a
cycle is still a cycle of the design).

The layers, lowest first (a prefix names a module and everything below it):

====  ======================================================================================
  0   foundation: backend, _validate, sampling, privacy.events, privacy.mf, privacy.tcdp,
      the ellipsoid kernel
  1   problems
  2   accounting (events -> ε) and transforms (pieces, chains, combinators)
  3   privacy (noise sources and privatizers)
  4   optimizers (registry below the family modules)
  5   engine and results (and calibration, which the engine may call)
  6   the package itself (dpsim/__init__, the CLI), the privacy audit, the testing toolkit
  7   dpsim.analysis (bounds; their checks)
  8   dpsim.experiments
  9   dpsim.paper_figures
====  ======================================================================================

The simulator core (layers 0-6) therefore never imports the applications (7-9); the CLI finds the
applications' commands through entry points (``dpsim.commands``).
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# repository folder -> installed package name
PACKAGE_DIRS = {"dpsim": "dpsim", "analysis": "dpsim.analysis", "experiments": "dpsim.experiments",
                "paper_figures": "dpsim.paper_figures"}

LAYERS: list[tuple[str, ...]] = [
    ("dpsim.backend", "dpsim._validate", "dpsim.sampling", "dpsim.privacy.events",
     "dpsim.privacy.mf", "dpsim.privacy.tcdp", "dpsim.privacy._ellipsoid", "dpsim.privacy._toeplitz", "dpsim._sampling_kernels",
     "dpsim._bitgen", "dpsim._jit_notice", "dpsim.extras"),
    ("dpsim.problems",),
    ("dpsim.accounting", "dpsim.transforms"),
    ("dpsim.privacy",),
    ("dpsim.optimizers",),
    ("dpsim.engine", "dpsim.results", "dpsim.calibrate", "dpsim.fast", "dpsim.memory",
     "dpsim.checkpoint"),
    ("dpsim", "dpsim.cli", "dpsim.__main__", "dpsim.audit", "dpsim.testing",
     "dpsim.datasets", "dpsim.plot"),
    ("dpsim.analysis",),
    ("dpsim.experiments",),
    ("dpsim.paper_figures",),
]


def layer_of(module: str) -> int:
    """Index of the layer whose longest prefix matches ``module``."""
    best, best_len = None, -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    if best is None:
        raise KeyError(f"module {module!r} is in no layer: add it to LAYERS in tests/project/test_layering.py")
    return best


def source_modules() -> dict[str, Path]:
    """Installed module name -> source file, for every .py of the four package folders."""
    out = {}
    for folder, pkg in PACKAGE_DIRS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([pkg, *parts])] = path
    return out


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Edges ``module -> imported module`` restricted to modules of this repository.

    ``from X import y`` counts as an import of ``X.y`` when that is a module, else of ``X``."""
    known = set(modules)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                src = node.module if node.level == 0 else _resolve(mod, is_pkg, node.level, node.module)
                for a in node.names:
                    sub = f"{src}.{a.name}"
                    targets.append(sub if sub in known else src)
            for t in targets:
                while t and t not in known:  # import a.b.c where only a.b is ours
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    graph[mod].add(t)
    return graph


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)})"
                  for a, deps in graph.items() for b in deps if layer_of(b) > layer_of(a))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


@pytest.fixture(scope="module")
def graph():
    return import_graph(source_modules())


def test_every_module_has_a_layer(graph):
    unplaced = []
    for m in graph:
        try:
            layer_of(m)
        except KeyError:
            unplaced.append(m)
    assert not unplaced, unplaced


def test_no_upward_imports(graph):
    assert not upward_imports(graph)


def test_no_import_cycles(graph):
    assert not cycles(graph)


def test_core_never_imports_the_applications(graph):
    apps = ("dpsim.analysis", "dpsim.experiments", "dpsim.paper_figures")
    core = [m for m in graph if not m.startswith(apps)]
    bad = [(m, d) for m in core for d in graph[m] if d.startswith(apps)]
    assert not bad


def test_the_contract_catches_an_upward_import_and_a_cycle(graph):
    """The checks can fail: add an upward import (the engine importing an experiment) and a cycle
    to a copy of the real graph."""
    g = {k: set(v) for k, v in graph.items()}
    g["dpsim.engine"].add("dpsim.experiments")
    assert any("dpsim.engine" in line and "dpsim.experiments" in line for line in upward_imports(g))
    g = {k: set(v) for k, v in graph.items()}
    g["dpsim.backend"].add("dpsim.sampling")
    g["dpsim.sampling"].add("dpsim.backend")
    assert ["dpsim.backend", "dpsim.sampling"] in cycles(g)


def test_the_contract_sees_a_real_upward_import(tmp_path, monkeypatch):
    """End to end on files: a module of layer 0 that imports the optimizers is reported."""
    (tmp_path / "dpsim").mkdir()
    (tmp_path / "dpsim" / "__init__.py").write_text("")
    (tmp_path / "dpsim" / "backend.py").write_text("def f():\n    from .optimizers import get\n")
    (tmp_path / "dpsim" / "optimizers.py").write_text("from . import backend\n")
    mods = {"dpsim": tmp_path / "dpsim" / "__init__.py", "dpsim.backend": tmp_path / "dpsim" / "backend.py",
            "dpsim.optimizers": tmp_path / "dpsim" / "optimizers.py"}
    g = import_graph(mods)
    assert upward_imports(g) == ["dpsim.backend (layer 0) imports dpsim.optimizers (layer 4)"]
    assert cycles(g) == [["dpsim.backend", "dpsim.optimizers"]]


def test_pyproject_lists_every_package():
    """pyproject.toml maps the app folders into the dpsim namespace with an explicit package list;
    a new sub-package must be added there or a non-editable install would miss it."""
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(conf["tool"]["setuptools"]["packages"])
    found = {m for m, p in source_modules().items() if p.name == "__init__.py"}
    assert found == listed, {"missing": sorted(found - listed), "stale": sorted(listed - found)}
