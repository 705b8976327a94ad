"""Sphinx extension: the optimizer catalogue, generated from the optimizer registry at build time.

The page ``api/catalogue.md`` holds only its introduction; when Sphinx reads it (the
``source-read`` event) this extension appends one section per registered optimizer
(:func:`dpsim.optimizers.names`):

* its update rule and source — the optimizer function's docstring up to its first numpydoc
  section (summary, ``Update rule::`` block, ``Source:`` line), rendered as reStructuredText;
* the paper keys it cites (``[DP2]``, ... as defined in ``PAPERS.md``) and whether it is private
  (from its declared privacy events);
* a table of its hyperparameters: name, kind and valid range (:meth:`Spec.describe`), default
  and the generation window of the property tests (:func:`dpsim.optimizers.hyperparameters`);
* its fast path on the two reference problems of ``docs/fast-paths.md``
  (:func:`dpsim.explain.path_table`, the function that generates that page: the engine's own
  plan, nothing simulated).

Nothing is written to the source tree, and the page is re-read at every build (``env-get-outdated``),
so a newly registered optimizer appears without any hand-kept list; ``tests/project/test_docs.py``
checks that every registered name is on the built page.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

DOCNAME = "api/catalogue"
#: paper keys: the ``## [KEY]`` headings of PAPERS.md
_PAPERS = Path(__file__).resolve().parents[1] / "PAPERS.md"
_SECTION = re.compile(r"^[A-Z][A-Za-z ]+\n-{3,}\s*$", re.M)


def paper_keys() -> list[str]:
    return re.findall(r"^## \[([A-Z0-9]+)\]", _PAPERS.read_text(encoding="utf-8"), re.M)


def rule_text(fn) -> str:
    """The docstring of ``fn`` up to its first numpydoc section (``Parameters``, ``Examples``, ...)."""
    doc = inspect.getdoc(fn) or ""
    m = _SECTION.search(doc)
    return (doc[:m.start()] if m else doc).strip()


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _code(text) -> str:
    """``text`` as inline code in a table cell (quotes and ``<k>`` kept as written)."""
    return f"`{_cell(text)}`" if text not in ("", None) else ""


def _fmt(value) -> str:
    return _code(repr(value))


def _window(spec) -> str:
    typical = getattr(spec, "typical", None)
    if typical is None:
        inner = getattr(spec, "inner", None)
        return _window(inner) if inner is not None else ""
    if getattr(spec, "kind", "") in ("real", "int") and len(typical) == 2:
        lo, hi = typical
        return f"`[{lo:g}, {hi:g}]`" + (" (log scale)" if getattr(spec, "log", False) else "")
    return ", ".join(_code(repr(t)) for t in typical)


def catalogue_rows():
    """One dict per registered optimizer: name, private, papers, rule, hyperparameters, paths."""
    from dpsim import optimizers
    from dpsim.explain import path_table

    keys = paper_keys()
    paths = {row["optimizer"]: row for row in path_table()}
    rows = []
    for name in optimizers.names():
        fn = getattr(optimizers, name)
        rule = rule_text(fn)
        sig = inspect.signature(fn)
        hps = []
        for hp, spec in optimizers.hyperparameters(name).items():
            default = sig.parameters[hp].default if hp in sig.parameters else inspect.Parameter.empty
            hps.append({"name": hp, "range": spec.describe(),
                        "default": None if default is inspect.Parameter.empty else default,
                        "window": _window(spec)})
        path = paths.get(name, {})
        rows.append({
            "name": name,
            "private": optimizers.get(name).private,
            "papers": [k for k in keys if f"[{k}]" in rule],
            "rule": rule,
            "hyperparameters": hps,
            "paths": {k: v for k, v in path.items() if k not in ("optimizer", "why")},
            "why": path.get("why", ""),
        })
    return rows


def catalogue_markdown() -> str:
    rows = catalogue_rows()
    labels = list(rows[0]["paths"]) if rows else []
    short = [lab.split(" (")[0] for lab in labels]
    out = ["", "## Overview", "",
           "| optimizer | private (defaults) | papers | " + " | ".join(f"path: {s}" for s in short) + " |",
           "|---|---|---|" + "---|" * len(labels)]
    for r in rows:
        papers = ", ".join(f"[{k}](../PAPERS.md#{k.lower()})" for k in r["papers"]) or "—"
        out.append(f"| [`{r['name']}`](#{_anchor(r['name'])}) | {'yes' if r['private'] else 'no'} | "
                   f"{papers} | " + " | ".join(f"`{r['paths'][lab]}`" for lab in labels) + " |")
    out += ["", "Paths on the reference problems " + "; ".join(f"*{s}*: {lab}" for s, lab in zip(short, labels))
            + " (see [fast-paths.md](../fast-paths.md)).", ""]
    for r in rows:
        out += [f"## `{r['name']}`", "",
                f"{{py:func}}`dpsim.optimizers.{r['name']}` · "
                f"{'private' if r['private'] else 'not private with its defaults (ε = ∞)'} · papers: "
                + (", ".join(f"[{k}](../PAPERS.md#{k.lower()})" for k in r["papers"]) or "—"), ""]
        if r["rule"]:
            out += ["```{eval-rst}", r["rule"], "```", ""]
        out += ["| hyperparameter | kind and range | default | property-test window |",
                "|---|---|---|---|"]
        for h in r["hyperparameters"]:
            out.append(f"| `{h['name']}` | {_code(h['range'])} | {_fmt(h['default'])} | "
                       f"{h['window']} |")
        paths = "; ".join(f"{s}: `{r['paths'][lab]}`" for s, lab in zip(short, labels))
        out += ["", f"Fast path (with its defaults): {paths}."
                + (f"  Why the chain: {_cell(r['why'])}" if r["why"] else ""), ""]
    return "\n".join(out) + "\n"


def _anchor(name: str) -> str:
    """The heading anchor MyST gives ``## `name` `` (GitHub's slug: lower case, ``_`` kept)."""
    return name.lower()


def _source_read(app, docname, source):
    if docname == DOCNAME:
        source[0] = source[0] + catalogue_markdown()


def _outdated(app, env, added, changed, removed):
    return [DOCNAME] if DOCNAME in env.found_docs else []


def setup(app):
    app.connect("source-read", _source_read)
    app.connect("env-get-outdated", _outdated)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
