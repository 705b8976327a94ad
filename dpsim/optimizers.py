"""Optimizers by name: one-line chains of transforms.

``dpsim.optimizers.get(name, **hyperparameters)`` returns an :class:`Optimizer`;
``dpsim.optimizers.names()`` lists every registered name.  Any hyperparameter may be a scalar or a
sequence with one value per trial (a grid folded into the trial axis).

Update rules (ALGORITHMS §1–2.1):

* ``sgd``:       ``w ← w − η g``
* ``momentum``:  ``b_t = β b_{t−1} + g``, ``w ← w − η b_t``  (heavy ball, seed 004 §3)
* ``dp_sgd``:    SGD on ``g̃ = (1/b)(Σ clip(g_i, C) + N(0, σ²C²I))`` (Abadi et al. 2016)
* ``dp_sgdm``:   momentum on ``g̃``
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import transforms as T
from .privacy import gaussian_privatizer

__all__ = ["Optimizer", "get", "names", "register"]


@dataclass(frozen=True)
class Optimizer:
    """A named optimizer: its transform chain, hyperparameters and privacy declaration.

    ``private`` is False for non-private rules and for non-private *oracles* (their ``epsilon`` is
    infinite).  ``releases`` is the privatizers' declaration the accountant uses.
    ``probes`` maps a record name to ``f(state, params, ctx) -> (R,)`` evaluated at record steps.
    ``ledger``, when set, replaces the release-based declaration: it is called after the run as
    ``ledger(final_state, steps=T, sample_rate=q, sampling=..., trials=R) -> dict`` and must return
    a privacy record with a ``"kind"`` that :meth:`dpsim.engine.Result.epsilon` understands
    (used by budget-constrained training, whose spend depends on the run).
    """

    name: str
    hyperparameters: dict
    transform: T.GradientTransformation
    private: bool
    probes: dict = field(default_factory=dict)
    note: str = ""
    ledger: Any = None

    @property
    def releases(self) -> tuple:
        return self.transform.releases if self.private else ()

    def trial_count(self) -> int | None:
        """Length of per-trial hyperparameters (None when all are scalars); checks consistency."""
        lengths = {k: len(v) for k, v in self.hyperparameters.items() if isinstance(v, (list, tuple))}
        if not lengths:
            return None
        if len(set(lengths.values())) > 1:
            raise ValueError(f"per-trial hyperparameters have different lengths: {lengths}")
        return next(iter(lengths.values()))


_REGISTRY: dict[str, Callable[..., Optimizer]] = {}


def register(name: str):
    def deco(fn):
        _REGISTRY[name] = fn
        return fn

    return deco


def names() -> list[str]:
    """Every optimizer name, sorted."""
    return sorted(_REGISTRY)


def get(name: str, **hyperparameters) -> Optimizer:
    """Build the optimizer ``name`` with the given hyperparameters.

    Raises ``KeyError`` for an unknown name and ``ValueError`` for an unknown or invalid
    hyperparameter, naming the value.
    """
    if name not in _REGISTRY:
        raise KeyError(f"unknown optimizer {name!r}; known: {', '.join(names())}")
    factory = _REGISTRY[name]
    sig = inspect.signature(factory)
    unknown = [k for k in hyperparameters if k not in sig.parameters]
    if unknown:
        raise ValueError(
            f"optimizer {name!r} has no hyperparameter {unknown[0]!r}; "
            f"accepted: {', '.join(sig.parameters)}"
        )
    bound = sig.bind(**hyperparameters)
    bound.apply_defaults()
    opt = factory(**bound.arguments)
    hp = {k: _plain(v) for k, v in bound.arguments.items()}
    return Optimizer(
        name=name,
        hyperparameters=hp,
        transform=opt["transform"],
        private=opt.get("private", False),
        probes=opt.get("probes", {}),
        note=opt.get("note", ""),
        ledger=opt.get("ledger"),
    )


def _plain(v: Any):
    if isinstance(v, np.ndarray):
        return [float(x) for x in v.ravel()]
    if isinstance(v, (list, tuple)):
        return [float(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


# ------------------------------------------------------------------------------------------------
# Non-private base rules


@register("sgd")
def _sgd(lr=0.1):
    lr = T.as_hyper("lr", lr, nonneg=True)
    return {"transform": T.chain(T.mean_gradient(), T.scale(_neg(lr)))}


@register("momentum")
def _momentum(lr=0.1, beta=0.9):
    lr = T.as_hyper("lr", lr, nonneg=True)
    beta = T.as_hyper("beta", beta, nonneg=True)
    return {"transform": T.chain(T.mean_gradient(), T.trace(beta), T.scale(_neg(lr)))}


# ------------------------------------------------------------------------------------------------
# Private post-processing baselines


@register("dp_sgd")
def _dp_sgd(lr=0.1, clip=1.0, noise_multiplier=1.0):
    lr = T.as_hyper("lr", lr, nonneg=True)
    return {
        "transform": T.chain(gaussian_privatizer(clip, noise_multiplier), T.scale(_neg(lr))),
        "private": True,
    }


@register("dp_sgdm")
def _dp_sgdm(lr=0.1, beta=0.9, clip=1.0, noise_multiplier=1.0):
    lr = T.as_hyper("lr", lr, nonneg=True)
    beta = T.as_hyper("beta", beta, nonneg=True)
    return {
        "transform": T.chain(
            gaussian_privatizer(clip, noise_multiplier), T.trace(beta), T.scale(_neg(lr))
        ),
        "private": True,
    }


def _neg(x):
    if isinstance(x, float):
        return -x
    out = -np.asarray(x)
    out.setflags(write=False)
    return out
