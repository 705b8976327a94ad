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
import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..privacy.events import NonPrivate
from ..transforms.base import GradientTransformation
from ._hyper import Spec, parameters_section

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
        """Length of per-trial hyperparameters (None when all are scalars); checks consistency.

        Returns
        -------
        int or None
            The number of per-trial values.

        Raises
        ------
        ValueError
            When per-trial hyperparameters have different lengths.
        """
        lengths = {k: len(v) for k, v in self.hyperparameters.items()
                   if isinstance(v, (list, tuple)) and k not in self.per_coordinate}
        if not lengths:
            return None
        if len(set(lengths.values())) > 1:
            raise ValueError(f"per-trial hyperparameters have different lengths: {lengths}")
        return next(iter(lengths.values()))


def optimizer(transform: GradientTransformation, **kwargs) -> Optimizer:
    """What an optimizer function returns; :func:`register` fills in its name and hyperparameters.

    Parameters
    ----------
    transform : GradientTransformation
        The optimizer's named chain.
    **kwargs
        Further :class:`Optimizer` fields (``probes``, ``note``, ``public_fraction``).

    Returns
    -------
    Optimizer
        Unnamed, without hyperparameters (:func:`register` sets them).
    """
    return Optimizer(name="", hyperparameters={}, transform=transform, **kwargs)


_REGISTRY: dict[str, Callable[..., Optimizer]] = {}
_SPECS: dict[str, dict[str, Spec]] = {}
#: name → (``register(doc=...)`` meanings, per-coordinate names): what :func:`document` wrote from.
_DOCS: dict[str, tuple] = {}


def register(fn=None, *, per_coordinate=(), doc=None):
    """Decorator: register the optimizer function ``fn`` under its name.

    Every parameter of ``fn`` must have a default and be annotated with a hyperparameter spec
    (:mod:`dpsim.optimizers._hyper`); the decorated function validates its keywords against those
    specs, records them (as plain JSON values) as the optimizer's hyperparameters and sets its
    name.

    The specs also document the function (:func:`document`): its numpydoc ``Parameters`` section
    is generated from them (type, default, meaning, valid range), a default ``Returns`` section is
    added when the docstring has none, and its signature shows Python types (``help()``,
    :func:`typing.get_type_hints`) instead of the spec names.  A docstring that already has a
    ``Parameters`` section is kept as written (the built-in optimizers have none:
    ``tests/optimizers/test_docstrings.py``).

    Parameters
    ----------
    fn : callable, optional
        The optimizer function (``@register``); omitted for ``@register(per_coordinate=...)``.
    per_coordinate : tuple of str
        Hyperparameters whose sequences are per coordinate ``(d,)``, not per trial.
    doc : dict, optional
        Name → one-line meaning of hyperparameters that :data:`~dpsim.optimizers._hyper.MEANINGS`
        does not cover, or that mean something else for this optimizer.

    Returns
    -------
    callable
        The registered builder (or, without ``fn``, the decorator that makes it).

    Examples
    --------
    The ``Parameters`` section of :func:`~dpsim.optimizers.sgd`, written from ``lr: LR = 0.1``:

    >>> import dpsim
    >>> doc = dpsim.optimizers.sgd.__doc__
    >>> print(doc[doc.index("Parameters"):doc.index("Returns")].strip())
    Parameters
    ----------
    lr : float or sequence of float, default 0.1
        Step size η of the update ``w ← w − η·(…)``.  Valid: real in [0, inf). A scalar, or one
        value per trial.
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
        document(build, sig, specs, doc=doc, per_coordinate=per_coordinate)
        _REGISTRY[name] = build
        _SPECS[name] = specs
        _DOCS[name] = (dict(doc or {}), tuple(per_coordinate))
        return build

    return deco if fn is None else deco(fn)


_SECTION = re.compile(r"^(Returns|Yields|Receives|Raises|Warns|Warnings|See Also|Notes|References|"
                      r"Examples)\n-+$", re.M)


def document(build, sig, specs, doc=None, per_coordinate=()):
    """Write the docstring and signature of the registered builder ``build`` from its specs.

    The ``Parameters`` section (:func:`dpsim.optimizers._hyper.parameters_section`) goes after
    the summary and extended summary, before any later numpydoc section; a ``Returns`` section
    naming :class:`Optimizer` is added when there is none.  A docstring with its own
    ``Parameters`` section is left as it is.  ``build.__signature__`` and
    ``build.__annotations__`` carry each spec's Python type (:meth:`Spec.annotation`), so
    ``help(dpsim.optimizers.dp_adam)`` reads ``lr: float | collections.abc.Sequence[float] = 0.01``
    rather than the spec's name (``'LR'``: with ``from __future__ import annotations`` the
    annotations are strings, which :func:`functools.wraps` copied and ``help()`` showed as is).

    Parameters
    ----------
    build : callable
        The builder :func:`register` made (its ``__doc__`` is the optimizer function's).
    sig : inspect.Signature
        The optimizer function's signature, annotations evaluated (the specs).
    specs : dict
        Name → spec, in signature order.
    doc : dict, optional
        Name → meaning (``register(doc=...)``).
    per_coordinate : tuple of str
        Hyperparameters with one value per coordinate.
    """
    typed = [p.replace(annotation=specs[p.name].annotation()) for p in sig.parameters.values()]
    build.__signature__ = sig.replace(parameters=typed, return_annotation=Optimizer)
    build.__annotations__ = {**{p.name: p.annotation for p in typed}, "return": Optimizer}
    text = inspect.cleandoc(build.__doc__ or "")
    if re.search(r"^Parameters\n-+$", text, re.M):
        return
    defaults = {k: p.default for k, p in sig.parameters.items()}
    params = parameters_section(specs, defaults, doc, per_coordinate)
    m = _SECTION.search(text)
    head, tail = (text[:m.start()].rstrip(), text[m.start():]) if m else (text.rstrip(), "")
    if not re.search(r"^Returns\n-+$", tail, re.M):
        returns = ("Returns\n-------\nOptimizer\n    The named chain (``transform``) with these "
                   "hyperparameters and its declared\n    privacy events (``events``); run it with "
                   ":func:`dpsim.simulate`.")
        tail = returns + ("\n\n" + tail if tail else "")
    build.__doc__ = "\n\n".join(part for part in (head, params, tail) if part) + "\n"


def names() -> list[str]:
    """Every optimizer name, sorted.

    Returns
    -------
    list of str
        The registered names.
    """
    return sorted(_REGISTRY)


def hyperparameters(name: str) -> dict[str, Spec]:
    """The declared spec (kind and range, :mod:`dpsim.optimizers._hyper`) of each hyperparameter of
    the optimizer ``name``, in signature order; the same specs validate :func:`get`.

    Parameters
    ----------
    name : str
        A registered optimizer.

    Returns
    -------
    dict
        Name → :class:`~dpsim.optimizers._hyper.Spec`.

    Raises
    ------
    KeyError
        For an unknown name.

    Examples
    --------
    >>> from dpsim.optimizers import hyperparameters
    >>> list(hyperparameters("dp_sgd"))
    ['lr', 'clip', 'noise_multiplier', 'noise']
    """
    if name not in _SPECS:
        raise KeyError(f"unknown optimizer {name!r}; known: {', '.join(names())}")
    return dict(_SPECS[name])


def get(name: str, **hyperparameters) -> Optimizer:
    """Build the optimizer ``name`` with the given hyperparameters.

    Raises ``KeyError`` for an unknown name and ``ValueError`` for an unknown or invalid
    hyperparameter, naming the value.

    Parameters
    ----------
    name : str
        A registered optimizer.
    **hyperparameters
        Its keywords.

    Returns
    -------
    Optimizer
        The optimizer built with them.

    Raises
    ------
    KeyError
        For an unknown name.
    ValueError
        For an unknown or invalid hyperparameter.

    Examples
    --------
    >>> from dpsim.optimizers import get
    >>> get("dp_sgd", noise_multiplier=2.0)
    dp_sgd(lr=0.1, clip=1.0, noise_multiplier=2.0, noise='gaussian')
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
