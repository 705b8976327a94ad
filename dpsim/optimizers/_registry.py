"""The optimizer type and the name registry, below the family modules.

Each optimizer is a public function in a family module (``dpsim.optimizers.dp_adam(lr=0.01, ...)
-> Optimizer``, optax's alias style) decorated with :func:`register`; :func:`get` and
:func:`names` are generated from those functions, so the string registry holds exactly the
documented functions.

Every keyword of a registered function is annotated with its hyperparameter spec
(:mod:`dpsim.optimizers._hyper`: kind and range, e.g. ``beta2: BETA = 0.999`` with
``BETA = Real("[0, 1)")``); the registry validates each call against the specs and
:func:`hyperparameters` returns them, so tools (the strategies of :mod:`dpsim.testing`) can
enumerate every optimizer's valid configurations.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..privacy.events import NonPrivate
from ..transforms.base import GradientTransformation
from ._hyper import Spec

__all__ = ["Optimizer", "optimizer", "register", "get", "names", "hyperparameters"]


@dataclass(frozen=True, repr=False)
class Optimizer:
    """A named optimizer: its transform chain and hyperparameters.

    ``transform.privacy`` holds the privacy events its pieces declare (:mod:`dpsim.privacy.events`);
    an optimizer that declares none is refused here.  ``probes`` maps a record name to
    ``f(state, params, ctx) -> (R,)`` evaluated at record steps (read the state by piece name,
    :func:`dpsim.transforms.lookup`).  ``public_fraction`` > 0: the optimizer uses a public split
    of that fraction of the training data (carved out by the engine, never sampled for private
    batches).  ``per_coordinate``: hyperparameters whose sequences have one value per coordinate,
    not per trial.
    """

    name: str
    hyperparameters: dict
    transform: GradientTransformation
    probes: dict = field(default_factory=dict)
    note: str = ""
    public_fraction: float = 0.0
    per_coordinate: frozenset = frozenset()

    def __post_init__(self):
        if not self.transform.privacy:
            raise ValueError(
                f"optimizer {self.name or '(unnamed)'!r} declares no privacy event: a private "
                "optimizer needs a privatizer that declares its releases, a non-private one "
                "NonPrivate(reason) (mean_gradient declares it)")
        if not (0.0 <= self.public_fraction < 1.0):
            raise ValueError(f"public_fraction must be in [0, 1), got public_fraction={self.public_fraction}")

    def __repr__(self):
        """``dp_sgd(lr=0.1, clip=1.0, ...)``: the call that rebuilds a registered optimizer (short
        enough for a property test's counterexample)."""
        args = ", ".join(f"{k}={v!r}" for k, v in self.hyperparameters.items())
        if self.name in _REGISTRY:
            return f"{self.name}({args})"
        return f"Optimizer(name={self.name!r}, pieces={getattr(self.transform, 'names', None)!r})"

    @property
    def events(self) -> tuple:
        """The declared privacy events (what :mod:`dpsim.accounting` consumes)."""
        return self.transform.privacy

    @property
    def private(self) -> bool:
        """Whether no piece declares :class:`~dpsim.privacy.events.NonPrivate` (derived from the
        events; ε is infinite otherwise)."""
        return not any(isinstance(e, NonPrivate) for e in self.transform.privacy)

    def trial_count(self) -> int | None:
        """Length of per-trial hyperparameters (None when all are scalars); checks consistency."""
        lengths = {k: len(v) for k, v in self.hyperparameters.items()
                   if isinstance(v, (list, tuple)) and k not in self.per_coordinate}
        if not lengths:
            return None
        if len(set(lengths.values())) > 1:
            raise ValueError(f"per-trial hyperparameters have different lengths: {lengths}")
        return next(iter(lengths.values()))


def optimizer(transform: GradientTransformation, **kwargs) -> Optimizer:
    """What an optimizer function returns; :func:`register` fills in its name and hyperparameters."""
    return Optimizer(name="", hyperparameters={}, transform=transform, **kwargs)


_REGISTRY: dict[str, Callable[..., Optimizer]] = {}
_SPECS: dict[str, dict[str, Spec]] = {}


def register(fn=None, *, per_coordinate=()):
    """Decorator: register the optimizer function ``fn`` under its name.

    Every parameter of ``fn`` must have a default and be annotated with a hyperparameter spec
    (:mod:`dpsim.optimizers._hyper`); the decorated function validates its keywords against those
    specs, records them (as plain JSON values) as the optimizer's hyperparameters and sets its
    name.  ``per_coordinate``: hyperparameters whose sequences are per coordinate ``(d,)``, not
    per trial.
    """

    def deco(fn):
        sig = inspect.signature(fn, eval_str=True)
        name = fn.__name__
        specs = {}
        for p in sig.parameters.values():
            if not isinstance(p.annotation, Spec) or p.default is inspect.Parameter.empty:
                raise TypeError(
                    f"optimizer {name!r}: hyperparameter {p.name!r} needs a default and a spec "
                    "annotation from dpsim.optimizers._hyper (e.g. `beta: BETA = 0.9`)")
            p.annotation.validate(p.name, p.default)  # the default must be valid
            specs[p.name] = p.annotation

        @functools.wraps(fn)
        def build(*args, **kwargs) -> Optimizer:
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            for k, v in bound.arguments.items():
                specs[k].validate(k, v)
            opt = fn(**bound.arguments)
            hp = {k: _plain(v) for k, v in bound.arguments.items()}
            return dataclasses.replace(opt, name=name, hyperparameters=hp,
                                       per_coordinate=frozenset(per_coordinate))

        if name in _REGISTRY:
            raise ValueError(f"optimizer {name!r} is registered twice")
        _REGISTRY[name] = build
        _SPECS[name] = specs
        return build

    return deco if fn is None else deco(fn)


def names() -> list[str]:
    """Every optimizer name, sorted."""
    return sorted(_REGISTRY)


def hyperparameters(name: str) -> dict[str, Spec]:
    """The declared spec (kind and range, :mod:`dpsim.optimizers._hyper`) of each hyperparameter of
    the optimizer ``name``, in signature order; the same specs validate :func:`get`."""
    if name not in _SPECS:
        raise KeyError(f"unknown optimizer {name!r}; known: {', '.join(names())}")
    return dict(_SPECS[name])


def get(name: str, **hyperparameters) -> Optimizer:
    """Build the optimizer ``name`` with the given hyperparameters.

    Raises ``KeyError`` for an unknown name and ``ValueError`` for an unknown or invalid
    hyperparameter, naming the value.
    """
    if name not in _REGISTRY:
        raise KeyError(f"unknown optimizer {name!r}; known: {', '.join(names())}")
    build = _REGISTRY[name]
    params = inspect.signature(build).parameters
    unknown = [k for k in hyperparameters if k not in params]
    if unknown:
        raise ValueError(
            f"optimizer {name!r} has no hyperparameter {unknown[0]!r}; "
            f"accepted: {', '.join(params)}"
        )
    return build(**hyperparameters)


def _plain(v):
    if isinstance(v, np.ndarray):
        return [float(x) for x in v.ravel()]
    if isinstance(v, (list, tuple)):
        return [float(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v
