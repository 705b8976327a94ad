"""Sphinx extension: the API reference pages, one per public module, generated from ``__all__``.

For every module of :data:`MODULES` (public import paths only — ``dpsim.accounting``, never the
file that defines a name, so moving code between files changes nothing here) this writes
``api/generated/<module>.rst`` when the builder starts: the module's docstring, an autosummary
table of every name in its ``__all__``, then each function, class and constant documented with
autodoc (numpydoc renders the sections).  ``api/index.md`` gets the table of these pages appended
when it is read.  The ``dpsim`` page documents the namespace's own names (``dpsim.__all__``).

Autosummary's own generator is not used because ``dpsim.audit``, ``dpsim.calibrate`` and
``dpsim.explain`` are functions whose modules share their names: importing the module by name
here (``sys.modules``) documents the module, and the function is documented on the ``dpsim``
page.  Those three module pages use ``automodule :no-index:`` so the function keeps the name.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from pathlib import Path

#: (module, one-line caption): the public modules, in the order of the reference.
MODULES = [
    ("dpsim", "simulate, results, calibration, audits, the namespace"),
    ("dpsim.problems", "objectives: GLMs, quadratics, your own data"),
    ("dpsim.optimizers", "the registered optimizers and the registry"),
    ("dpsim.transforms", "gradient transformations: pieces and chains"),
    ("dpsim.transforms.preconditioners", "moment recursions and preconditioners"),
    ("dpsim.privacy", "privatizers, clipping, projection, DP-MF"),
    ("dpsim.privacy.events", "typed privacy events the optimizers declare"),
    ("dpsim.privacy.mf", "correlated noise (DP-MF) strategies"),
    ("dpsim.accounting", "events to ε: PLD and RDP accountants"),
    ("dpsim.calibrate", "noise multiplier for a target ε"),
    ("dpsim.audit", "empirical lower bounds on ε"),
    ("dpsim.explain", "which compiled path a run takes"),
    ("dpsim.results", "the Result of a run"),
    ("dpsim.sampling", "batch samplers"),
    ("dpsim.checkpoint", "checkpoint and resume"),
    ("dpsim.datasets", "real data sets obtainable by pip"),
    ("dpsim.plot", "figures of comparisons"),
    ("dpsim.testing", "property testing: assertions and strategies"),
    ("dpsim.testing.strategies", "hypothesis strategies from the declared ranges"),
    ("dpsim.analysis.delay", "[DP2] bounds"),
    ("dpsim.analysis.moments", "[PAGAN] bounds"),
    ("dpsim.analysis.bias", "[DESIGN] bounds"),
    ("dpsim.analysis.tcdp", "[L2P] truncated CDP"),
    ("dpsim.analysis.concentration", "[ADAMBC] bounds"),
    ("dpsim.analysis.stats", "confidence intervals"),
    ("dpsim.analysis.verify", "the checks of dpsim verify"),
    ("dpsim.experiments", "reproduced experiments: dpsim reproduce"),
]
#: modules shadowed in their package by a function of the same name (``dpsim.audit`` is a function)
SHADOWED = {"dpsim.audit", "dpsim.calibrate", "dpsim.explain"}
#: names of ``dpsim.__all__`` provided as functions of the namespace
_OUT = "api/generated"


def _module(name: str) -> types.ModuleType:
    importlib.import_module(name)
    return sys.modules[name]


def public_names(modname: str) -> list[str]:
    mod = _module(modname)
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n, v in vars(mod).items() if not n.startswith("_")
                 and getattr(v, "__module__", None) == modname
                 and (inspect.isfunction(v) or inspect.isclass(v))]
    return list(names)


def _kind(modname: str, name: str) -> str:
    mod = _module(modname)
    obj = getattr(mod, name)
    if modname == "dpsim" and name in SHADOWED_FUNCS:
        return "function"
    if isinstance(obj, types.ModuleType):
        return "module"
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if callable(obj) and not isinstance(obj, (int, float, str)):
        return "function"
    return "data"


SHADOWED_FUNCS = {m.rsplit(".", 1)[1] for m in SHADOWED}


def _underline(text: str, ch: str) -> str:
    return f"{text}\n{ch * len(text)}\n"


def module_page(modname: str) -> str:
    known = {m for m, _ in MODULES}
    names = public_names(modname)
    kinds = {n: _kind(modname, n) for n in names}
    out = [_underline(modname, "="), f".. automodule:: {modname}"]
    if modname in SHADOWED:
        out.append("   :no-index:")
    out.append("")
    if modname in SHADOWED:
        out += [f".. currentmodule:: {modname}", ""]
    listed = [n for n in names if kinds[n] != "module"]
    if listed:
        out += [".. autosummary::", "   :nosignatures:", ""] + [f"   {n}" for n in listed] + [""]
    subs = [n for n in names if kinds[n] == "module"]
    if subs:
        out += [_underline("Submodules", "-")]
        for n in subs:
            full = f"{modname}.{n}"
            doc = (inspect.getdoc(_module(full)) or "").split("\n\n")[0].replace("\n", " ")
            ref = f":mod:`{full}`" if full in known else f"``{full}``"
            out.append(f"* {ref} — {_first_sentence(doc)}")
        out.append("")
    sections = [("Functions", "function", "autofunction"), ("Classes", "class", "autoclass"),
                ("Exceptions", "exception", "autoexception"), ("Constants", "data", "autodata")]
    for title, kind, directive in sections:
        group = [n for n in names if kinds[n] == kind]
        if not group:
            continue
        out.append(_underline(title, "-"))
        for n in group:
            out.append(f".. {directive}:: {n}")
            if kind in ("class", "exception"):
                out.append("   :members:")
            if kind == "data":
                out.append("   :no-value:")
            out.append("")
    return "\n".join(out) + "\n"


def _first_sentence(doc: str) -> str:
    doc = doc.strip()
    end = doc.find(". ")
    return (doc[:end + 1] if end >= 0 else doc) or "(no docstring)"


def write_pages(app) -> None:
    out = Path(app.srcdir) / _OUT
    out.mkdir(parents=True, exist_ok=True)
    wanted = set()
    for modname, _ in MODULES:
        path = out / f"{modname}.rst"
        text = module_page(modname)
        wanted.add(path.name)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    for stale in out.glob("*.rst"):
        if stale.name not in wanted:
            stale.unlink()


def index_markdown() -> str:
    out = ["", "## Modules", "", "| module | contents |", "|---|---|"]
    for modname, caption in MODULES:
        out.append(f"| [`{modname}`](generated/{modname}.rst) | {caption} |")
    out += ["", "```{toctree}", ":hidden:", ""] + [f"generated/{m}" for m, _ in MODULES] + ["```", ""]
    return "\n".join(out)


def _source_read(app, docname, source):
    if docname == "api/index":
        source[0] = source[0] + index_markdown()


def setup(app):
    app.connect("builder-inited", write_pages)
    app.connect("source-read", _source_read)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
