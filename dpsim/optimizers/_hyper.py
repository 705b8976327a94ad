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

``typical`` is the *generation window*: a sub-range of the valid interval in which every value
gives a well-posed run on every problem of :mod:`dpsim.problems` (e.g. ``lr`` ∈ [0, ∞) is valid,
but property tests draw it from ``[1e-4, 0.5]``; ``clip = inf`` is valid only with σ = 0, so the
window is finite).  It never widens the valid range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validate import _parse, choice, hyper, positive_int
from ..privacy.mf import parse_noise

__all__ = ["Spec", "Real", "RealOrAuto", "PositiveInt", "Choice", "Noise", "Flag", "OrNone", "Opaque",
           "LR", "BETA", "EPS", "EPS_POSITIVE", "CLIP", "SIGMA", "NOISE", "DELAY", "FRACTION"]


class Spec:
    """Base of the hyperparameter specs (``kind``: ``"real"``, ``"int"``, ``"choice"``,
    ``"noise"``, ``"flag"``, ``"optional"``, ``"opaque"``)."""

    kind = ""

    def validate(self, name: str, value) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError


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


@dataclass(frozen=True)
class PositiveInt(Spec):
    """A positive integer shared by all trials; ``typical``: closed generation window."""

    typical: tuple = (1, 8)
    kind = "int"

    def validate(self, name, value):
        positive_int(name, value)

    def describe(self):
        return "positive integer"


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


@dataclass(frozen=True)
class Flag(Spec):
    """``True`` or ``False`` (a NumPy bool too)."""

    kind = "flag"

    def validate(self, name, value):
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False, got {name}={value!r}")

    def describe(self):
        return "True or False"


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


@dataclass(frozen=True)
class Opaque(Spec):
    """A value the registry does not check (the piece that uses it does: arrays whose shape
    depends on the problem, e.g. per-coordinate scalings).  Generation draws from ``examples``
    only (empty: the default is kept)."""

    description: str
    examples: tuple = ()
    kind = "opaque"

    def validate(self, name, value):
        return None

    def describe(self):
        return self.description


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
