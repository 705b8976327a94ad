"""Machine-readable hyperparameter declarations: each optimizer function annotates every keyword
with one of these specs, and :func:`~dpsim.optimizers.register` validates the call against them.

The spec is the single declaration of a hyperparameter's kind and range: the registry checks a
value with it (:meth:`validate`, through :func:`dpsim._validate.hyper` for reals, so the error is
the same ``"beta2 must be in [0, 1), got beta2=1.5"``), :func:`dpsim.optimizers.hyperparameters`
returns it, and :mod:`dpsim.testing.strategies` generates values from it, so a newly registered
optimizer is covered by the property tests without further code.  For example::

    @register
    def dp_sgd(lr: LR = 0.1, clip: CLIP = 1.0, noise_multiplier: SIGMA = 1.0,
               noise: NOISE = "gaussian") -> Optimizer: ...

    hyperparameters("dp_sgd")["clip"]      # Real('(0, inf]', typical=(0.05, 10.0), log=True)

The specs also write each optimizer's numpydoc ``Parameters`` section (:func:`parameters_section`:
type from :meth:`Spec.doc_type`, range from :meth:`Spec.describe`, meaning from :data:`MEANINGS`
or the optimizer's own ``register(doc=...)``) and the annotations ``help()`` shows
(:meth:`Spec.annotation`), so the documentation cannot drift from the declaration.

``typical`` is the *generation window*: a sub-range of the valid interval in which every value
gives a well-posed run on every problem of :mod:`dpsim.problems` (e.g. ``lr`` ∈ [0, ∞) is valid,
but property tests draw it from ``[1e-4, 0.5]``; ``clip = inf`` is valid only with σ = 0, so the
window is finite).  It never widens the valid range.

>>> from dpsim.optimizers._hyper import BETA
>>> BETA.describe(), BETA.doc_type()
('real in [0, 1)', 'float or sequence of float')
>>> BETA.validate("beta2", 1.5)
Traceback (most recent call last):
...
ValueError: beta2 must be in [0, 1), got beta2=1.5
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Optional

import numpy as np

from .._validate import _parse, choice, hyper, positive_int
from ..privacy.mf import parse_noise

__all__ = ["Spec", "Real", "RealOrAuto", "PositiveInt", "Choice", "Noise", "Flag", "OrNone", "Opaque",
           "LR", "BETA", "EPS", "EPS_POSITIVE", "CLIP", "SIGMA", "NOISE", "DELAY", "FRACTION",
           "MEANINGS"]


class Spec:
    """Base of the hyperparameter specs (``kind``: ``"real"``, ``"int"``, ``"choice"``,
    ``"noise"``, ``"flag"``, ``"optional"``, ``"opaque"``)."""

    kind = ""

    def validate(self, name: str, value) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def annotation(self):
        """The Python type a value of this spec has (what ``help()`` and
        :func:`typing.get_type_hints` show for a registered optimizer's keyword)."""
        return Any

    def doc_type(self) -> str:
        """The numpydoc type of a value of this spec (the ``Parameters`` section that
        :func:`~dpsim.optimizers.register` writes)."""
        return "object"


@dataclass(frozen=True)
class Real(Spec):
    """A real hyperparameter in ``interval`` (e.g. ``"[0, 1)"``), scalar or one value per trial.

    ``typical``: the closed generation window ``(lo, hi)`` inside the interval (an open end of the
    interval is never drawn: ``(0, 1)`` with ``typical=(0.1, 0.5)``); ``log``: draw on a log scale.
    """

    interval: str
    typical: tuple = None
    log: bool = False
    kind = "real"

    def __post_init__(self):
        lo, lo_closed, hi, hi_closed = _parse(self.interval)
        if self.typical is None:
            t_lo = lo if math.isfinite(lo) else -1.0
            t_hi = hi if math.isfinite(hi) else t_lo + 1.0
            object.__setattr__(self, "typical", (float(t_lo), float(t_hi)))
        a, b = map(float, self.typical)
        for v in (a, b):
            inside = (v > lo or (lo_closed and v == lo)) and (v < hi or (hi_closed and v == hi))
            if not (inside and math.isfinite(v)):
                raise ValueError(f"typical window {self.typical} is not a finite part of {self.interval}")
        if not a <= b or (self.log and a <= 0):
            raise ValueError(f"bad typical window {self.typical} (log={self.log})")
        object.__setattr__(self, "typical", (a, b))

    @property
    def bounds(self) -> tuple:
        """``(lo, lo_closed, hi, hi_closed)`` of the valid interval."""
        return _parse(self.interval)

    def validate(self, name, value):
        hyper(name, value, self.interval)

    def describe(self):
        return f"real in {self.interval}"

    def annotation(self):
        return float | Sequence[float]

    def doc_type(self):
        return "float or sequence of float"


@dataclass(frozen=True)
class RealOrAuto(Real):
    """A :class:`Real` that also accepts the string ``"auto"``: a documented rule that the
    optimizer resolves at run time from what only the run knows (e.g. [ADAMBC]'s floor
    ``γ' = 0.01·Φ`` needs ``Φ = (σC/b)²``, hence the batch size ``b``).  ``rule``: the rule in one
    line, shown by :meth:`describe` and the repr.

    A number keeps its meaning (an absolute value, scalar or one per trial, validated against
    ``interval`` as a :class:`Real` is).  Generation (:mod:`dpsim.testing.strategies`) treats the
    spec as the :class:`Real` it extends and draws numbers from ``typical``; a property that wants
    ``"auto"`` asks for it with a window (``["auto", 1e-8]`` or ``"auto"``).
    """

    rule: str = ""
    kind = "real"
    AUTO = "auto"

    def validate(self, name, value):
        if isinstance(value, str):
            if value != self.AUTO:
                raise ValueError(f"{name} must be 'auto' or a number in {self.interval}, "
                                 f"got {name}={value!r}")
            return
        super().validate(name, value)

    def describe(self):
        return f"'auto' ({self.rule}) or real in {self.interval}"

    def annotation(self):
        return Literal["auto"] | float | Sequence[float]

    def doc_type(self):
        return "'auto', float or sequence of float"


@dataclass(frozen=True)
class PositiveInt(Spec):
    """A positive integer shared by all trials; ``typical``: closed generation window."""

    typical: tuple = (1, 8)
    kind = "int"

    def validate(self, name, value):
        positive_int(name, value)

    def describe(self):
        return "positive integer"

    def annotation(self):
        return int

    def doc_type(self):
        return "int"


@dataclass(frozen=True)
class Choice(Spec):
    """One of ``options`` (strings); ``typical``: the options drawn (default: all).  ``message``:
    the error's wording, a format string with ``{name}``, ``{value}`` and ``{options}`` (default:
    :func:`dpsim._validate.choice`'s ``"<name> must be one of ..., got <name>=<value>"``)."""

    options: tuple
    typical: tuple = None
    message: str = None
    kind = "choice"

    def __post_init__(self):
        if self.typical is None:
            object.__setattr__(self, "typical", tuple(self.options))
        if not set(self.typical) <= set(self.options):
            raise ValueError(f"typical {self.typical} not among {self.options}")

    def validate(self, name, value):
        if self.message is None:
            choice(name, value, self.options)
        elif not isinstance(value, str) or value not in self.options:
            raise ValueError(self.message.format(name=name, value=repr(value),
                                                 options=", ".join(self.options)))

    def describe(self):
        return "one of " + ", ".join(map(repr, self.options))

    def annotation(self):
        return Literal[tuple(self.options)]

    def doc_type(self):
        return "{" + ", ".join(map(repr, self.options)) + "}"


@dataclass(frozen=True)
class Noise(Spec):
    """The noise of a privatizer: ``"gaussian"`` (i.i.d.), ``"sqrt_toeplitz"`` or ``"banded:<k>"``
    (correlated noise, DP-MF; :func:`dpsim.privacy.mf.parse_noise`)."""

    typical: tuple = ("gaussian", "sqrt_toeplitz", "banded:2")
    kind = "noise"

    def validate(self, name, value):
        parse_noise(value)

    def describe(self):
        return "'gaussian', 'sqrt_toeplitz' or 'banded:<k>'"

    def annotation(self):
        return str

    def doc_type(self):
        return "str"


@dataclass(frozen=True)
class Flag(Spec):
    """``True`` or ``False`` (a NumPy bool too)."""

    kind = "flag"

    def validate(self, name, value):
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False, got {name}={value!r}")

    def describe(self):
        return "True or False"

    def annotation(self):
        return bool

    def doc_type(self):
        return "bool"


@dataclass(frozen=True)
class OrNone(Spec):
    """``None`` (the optimizer's documented fallback) or a value of ``inner``.  ``draw_none``:
    whether generation draws ``None`` (False when the fallback depends on the problem, e.g.
    PASAN's ``radius=None`` needs a box domain and known Lipschitz rows); ``draw_value``: whether
    it draws a value (False when which values work depends on the run, e.g. a ctCDP sample rate
    must lie in the feasible range of [L2P] Algorithm 3)."""

    inner: Spec
    draw_none: bool = True
    draw_value: bool = True
    kind = "optional"

    def validate(self, name, value):
        if value is not None:
            self.inner.validate(name, value)

    def describe(self):
        return f"None or {self.inner.describe()}"

    def annotation(self):
        return Optional[self.inner.annotation()]

    def doc_type(self):
        return f"{self.inner.doc_type()} or None"


@dataclass(frozen=True)
class Opaque(Spec):
    """A value the registry does not check (the piece that uses it does: arrays whose shape
    depends on the problem, e.g. per-coordinate scalings).  Generation draws from ``examples``
    only (empty: the default is kept)."""

    description: str
    examples: tuple = ()
    type: str = "object"
    kind = "opaque"

    def validate(self, name, value):
        return None

    def describe(self):
        return self.description

    def doc_type(self):
        return self.type


# Shared declarations (the ranges of docs/ALGORITHMS.md)
LR = Real("[0, inf)", typical=(1e-4, 0.5), log=True)
BETA = Real("[0, 1)", typical=(0.0, 0.999))
EPS = Real("[0, inf)", typical=(1e-8, 1e-2), log=True)
EPS_POSITIVE = Real("(0, inf)", typical=(1e-8, 1e-2), log=True)
CLIP = Real("(0, inf]", typical=(0.05, 10.0), log=True)   # inf only with σ = 0
SIGMA = Real("[0, inf)", typical=(0.0, 5.0))
NOISE = Noise()
DELAY = PositiveInt(typical=(1, 8))
FRACTION = Real("(0, 1)", typical=(0.05, 0.5))

#: The meaning of the hyperparameters most optimizers share (one line each, in the words of
#: docs/ALGORITHMS.md §0); an optimizer whose keyword means something else, or a keyword not
#: listed here, gives its meaning with ``register(doc={...})``.
MEANINGS = {
    "lr": "Step size η of the update ``w ← w − η·(…)``.",
    "beta": "Decay β of the rule's moving average (the update rule above says which).",
    "beta1": "Decay β₁ of the first moment ``m``.",
    "beta2": "Decay β₂ of the second moment ``v``.",
    "eps": "Additive constant ε of the denominator (unrelated to the privacy ε).",
    "clip": "Per-example clipping norm C: ``clip(g, C) = g·min(1, C/‖g‖₂)``.",
    "noise_multiplier": "Noise multiplier σ: the Gaussian noise of the clipped sum has std σC.",
    "noise": "Noise of the release: i.i.d. ``'gaussian'``, or DP-MF correlated noise "
             "``'sqrt_toeplitz'``/``'banded:<k>'`` (:func:`dpsim.privacy.mf.parse_noise`).",
    "public_fraction": "Fraction of the training set carved out as public data (never sampled for "
                       "private batches); one number shared by all trials.",
}


#: The meaning written for a keyword that neither ``register(doc=...)`` nor :data:`MEANINGS`
#: describes (a user's optimizer; the built-in ones have none, ``tests/optimizers/test_docstrings.py``).
UNDOCUMENTED = "Hyperparameter of this optimizer (see its description)."


def _per_trial(spec) -> str:
    inner = spec.inner if isinstance(spec, OrNone) else spec
    return " A scalar, or one value per trial." if isinstance(inner, Real) else ""


def parameters_section(specs: dict, defaults: dict, doc: dict | None = None,
                       per_coordinate=()) -> str:
    """The numpydoc ``Parameters`` section of an optimizer, generated from its specs.

    Parameters
    ----------
    specs : dict
        Name → :class:`Spec`, in signature order.
    defaults : dict
        Name → default value.
    doc : dict, optional
        Name → meaning, overriding :data:`MEANINGS`.
    per_coordinate : iterable of str
        Names whose sequences have one value per coordinate, not per trial.

    Returns
    -------
    str
        The section, header included, without leading indentation.

    Examples
    --------
    >>> print(parameters_section({"lr": LR}, {"lr": 0.1}))
    Parameters
    ----------
    lr : float or sequence of float, default 0.1
        Step size η of the update ``w ← w − η·(…)``.  Valid: real in [0, inf).  A scalar, or one
        value per trial.
    """
    doc = doc or {}
    lines = ["Parameters", "----------"]
    for name, spec in specs.items():
        meaning = doc.get(name, MEANINGS.get(name)) or UNDOCUMENTED
        note = " One value per coordinate ``(d,)`` or ``(R, d)``." if name in per_coordinate \
            else _per_trial(spec)
        lines.append(f"{name} : {spec.doc_type()}, default {defaults[name]!r}")
        lines.append(textwrap.fill(f"{meaning}  Valid: {spec.describe()}.{note}", width=96,
                                   initial_indent="    ", subsequent_indent="    ",
                                   break_on_hyphens=False))
    return "\n".join(lines)
