"""Every registered optimizer's docstring (issue 35 item 3): a one-line summary, its update rule,
its source, a ``Parameters`` section generated from its hyperparameter specs (so the two cannot
drift), ``Returns`` and a runnable example; ``help()`` shows Python types, not spec names."""

from __future__ import annotations

import inspect
import pydoc
import re
import typing
from collections.abc import Sequence
from pathlib import Path

import pytest

FunctionDoc = pytest.importorskip("numpydoc.docscrape",
                                  reason="numpydoc comes with the docs extra").FunctionDoc

import dpsim.optimizers as optimizers
from dpsim.optimizers import _hyper, _registry
from dpsim.optimizers._hyper import LR, Spec, parameters_section

NAMES = optimizers.names()
_NARROW = _hyper.Real("[0, 2]", typical=(0.1, 1.0))
PAPERS = Path(__file__).resolve().parents[2] / "docs" / "PAPERS.md"


def _keys():
    """The paper keys of docs/PAPERS.md (``## [KEY]``), or the five known ones."""
    if PAPERS.exists():
        keys = re.findall(r"^## \[([A-Z0-9]+)\]", PAPERS.read_text(encoding="utf-8"), re.M)
        if keys:
            return keys
    return ["DP2", "PAGAN", "DESIGN", "L2P", "ADAMBC"]


@pytest.mark.parametrize("name", NAMES)
def test_docstring_sections(name):
    fn = getattr(optimizers, name)
    doc = FunctionDoc(fn)
    assert len(doc["Summary"]) == 1 and doc["Summary"][0].strip(), name
    text = fn.__doc__
    assert "Update rule" in text and "::" in text, f"{name}: no update rule block"
    source = text[text.index("Source:"):].split("\n\n")[0] if "Source:" in text else ""
    key = any(f"[{k}]" in source for k in _keys())
    assert source and (key or re.search(r"\b(19|20)\d{2}\b", source)), f"{name}: no source"
    assert doc["Returns"] and doc["Returns"][0].type == "Optimizer", name
    assert ">>>" in "\n".join(doc["Examples"]), f"{name}: no example"


@pytest.mark.parametrize("name", NAMES)
def test_parameters_generated_from_specs(name):
    fn = getattr(optimizers, name)
    specs = optimizers.hyperparameters(name)
    params = FunctionDoc(fn)["Parameters"]
    assert [p.name for p in params] == list(specs) == list(inspect.signature(fn).parameters)
    defaults = {k: p.default for k, p in inspect.signature(fn).parameters.items()}
    for p in params:
        spec = specs[p.name]
        assert p.type == f"{spec.doc_type()}, default {defaults[p.name]!r}"
        assert " ".join(spec.describe().split()) in " ".join(" ".join(p.desc).split())
    # the section is exactly what the specs write
    doc, per_coordinate = _registry._DOCS[name]
    assert parameters_section(specs, defaults, doc, per_coordinate) in fn.__doc__


def test_meanings_cover_every_keyword():
    for name in NAMES:
        for p in FunctionDoc(getattr(optimizers, name))["Parameters"]:
            desc = " ".join(" ".join(p.desc).split())
            assert desc and _hyper.UNDOCUMENTED not in desc, (name, p.name)


def test_a_new_spec_changes_the_docstring():
    """A user's ``@register``: the section follows the spec; a keyword without a meaning gets
    the generic one; a hand-written section is kept as written."""
    from dpsim.transforms import mean_gradient, named_chain, scale

    try:
        @optimizers.register(doc={"lr": "Step size."})
        def _doc_test_sgd(lr: _NARROW = 0.3) -> _registry.Optimizer:
            """SGD.

            Update rule::

                w_t = w_{t-1} - η g_t
            """
            return _registry.optimizer(named_chain(("gradient", mean_gradient()),
                                                   ("lr", scale(-lr))))

        p = FunctionDoc(_doc_test_sgd)["Parameters"][0]
        assert p.type == "float or sequence of float, default 0.3"
        assert "real in [0, 2]" in " ".join(p.desc)
        assert FunctionDoc(_doc_test_sgd)["Returns"][0].type == "Optimizer"
        @optimizers.register
        def _doc_test_unknown(zeta: _NARROW = 0.3):
            """Unknown."""

        assert _hyper.UNDOCUMENTED in _doc_test_unknown.__doc__

        @optimizers.register
        def _doc_test_hand(lr: LR = 0.1):
            """SGD.

            Parameters
            ----------
            lr : float
                Step size.
            """

        assert FunctionDoc(_doc_test_hand)["Parameters"][0].type == "float"
        assert "Valid:" not in _doc_test_hand.__doc__
        hand = inspect.signature(_doc_test_hand).parameters["lr"]
        assert hand.annotation == float | Sequence[float]
    finally:
        for n in ("_doc_test_sgd", "_doc_test_unknown", "_doc_test_hand"):
            _registry._REGISTRY.pop(n, None)
            _registry._SPECS.pop(n, None)


@pytest.mark.parametrize("name", ["dp_adam", "dp_adam_bc", "pasan", "dp_sgd_ctcdp", "dp_adam_stp"])
def test_help_shows_types_not_spec_names(name):
    fn = getattr(optimizers, name)
    hints = typing.get_type_hints(fn)
    sig = inspect.signature(fn)
    for k, p in sig.parameters.items():
        assert not isinstance(p.annotation, (str, Spec)), (k, p.annotation)
        assert hints[k] == p.annotation
    assert hints["return"] is _registry.Optimizer
    text = pydoc.render_doc(fn, renderer=pydoc.plaintext)
    for spec_name in ("'LR'", "'BETA'", "'CLIP'", "'SIGMA'", "'NOISE'", "Real(", "Choice("):
        assert spec_name not in text, spec_name


def test_annotation_types():
    assert _hyper.LR.annotation() == float | Sequence[float]
    assert _hyper.DELAY.annotation() is int
    assert _hyper.Flag().annotation() is bool
    assert _hyper.OrNone(_hyper.DELAY).annotation() == typing.Optional[int]
    assert typing.get_args(_hyper.Choice(("a", "b")).annotation()) == ("a", "b")
    sig = inspect.signature(optimizers.dp_adam)
    assert sig.parameters["lr"].annotation == float | Sequence[float]
    assert sig.parameters["noise"].annotation is str
    # the signature keeps the defaults the registry validates with
    assert sig.parameters["beta2"].default == 0.999
