"""Optimizers by name: one-line chains of transforms.

``dpsim.optimizers.get(name, **hyperparameters)`` returns an :class:`Optimizer`;
``dpsim.optimizers.names()`` lists every registered name.  Any hyperparameter may be a scalar or a
sequence with one value per trial (a grid folded into the trial axis).

Update rules (ALGORITHMS §1–2.1):

* ``sgd``:       ``w ← w − η g``
* ``momentum``:  ``b_t = β b_{t−1} + g``, ``w ← w − η b_t``  (heavy ball, seed 004 §3)
* ``dp_sgd``:    SGD on ``g̃ = (1/b)(Σ clip(g_i, C) + N(0, σ²C²I))`` (Abadi et al. 2016)
* ``dp_sgdm``:   momentum on ``g̃``
* ``adagrad``, ``rmsprop``, ``yogi``, ``adam`` and their post-processing private versions
  ``dp_adagrad``, ``dp_rmsprop``, ``dp_adam`` (the base rule fed ``g̃``; seed 000 §2, seed 002 §3.1)
* ``dp_adam_bc`` (seed 004 Alg. 1): ``m̂ / √max(v̂ − Φ, γ')`` with ``Φ = (σC/b)²``
* the DP-Adam design space of seed 002 (reconstructed): ``dp_adam_ime``, ``dp_adam_ime_free``,
  ``dp_adam_corrected``, ``dp_adam_stp`` (``base=adam|rmsprop|adagrad``), and the non-private
  oracles ``dp_adam_noiseless_v``, ``dp_adam_stp_noiseless_v``

See :mod:`dpsim.adaptive` and :mod:`dpsim.privacy` for the pieces; each optimizer is a chain.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import transforms as T
from . import adaptive as A
from .privacy import (gaussian_privatizer, ime_privatizer, noiseless_v_privatizer,
                      public_preconditioned_privatizer, public_subspace_privatizer, stp_privatizer)

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
        lengths = {k: len(v) for k, v in self.hyperparameters.items()
                   if isinstance(v, (list, tuple)) and k not in PER_COORDINATE}
        if not lengths:
            return None
        if len(set(lengths.values())) > 1:
            raise ValueError(f"per-trial hyperparameters have different lengths: {lengths}")
        return next(iter(lengths.values()))


_REGISTRY: dict[str, Callable[..., Optimizer]] = {}

# Hyperparameters whose sequences are one value per coordinate (d,), not per trial.
PER_COORDINATE = frozenset({"scaling", "sigma_hat"})


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
def _dp_sgd(lr=0.1, clip=1.0, noise_multiplier=1.0, noise="gaussian"):
    lr = T.as_hyper("lr", lr, nonneg=True)
    return {
        "transform": T.chain(gaussian_privatizer(clip, noise_multiplier, noise=noise),
                             T.scale(_neg(lr))),
        "private": True,
    }


@register("dp_sgdm")
def _dp_sgdm(lr=0.1, beta=0.9, clip=1.0, noise_multiplier=1.0, noise="gaussian"):
    lr = T.as_hyper("lr", lr, nonneg=True)
    beta = T.as_hyper("beta", beta, nonneg=True)
    return {
        "transform": T.chain(
            gaussian_privatizer(clip, noise_multiplier, noise=noise), T.trace(beta),
            T.scale(_neg(lr))
        ),
        "private": True,
    }


def _neg(x):
    if isinstance(x, float):
        return -x
    out = -np.asarray(x)
    out.setflags(write=False)
    return out


# ------------------------------------------------------------------------------------------------
# Adaptive base rules and their post-processing private versions

_BASE_DEFAULTS = {"adagrad": 0.1, "rmsprop": 0.01, "yogi": 0.01, "adam": 0.01}


def _precond(rule, beta, eps):
    beta = T.as_hyper("beta", beta, nonneg=True)
    eps = T.as_hyper("eps", eps, nonneg=True)
    return A.scale_by_precondition(rule, beta, eps)


def _adam(beta1, beta2, eps, **kw):
    return A.scale_by_adam(T.as_hyper("beta1", beta1, nonneg=True),
                           T.as_hyper("beta2", beta2, nonneg=True),
                           T.as_hyper("eps", eps, nonneg=True), **kw)


def _lr(lr):
    return T.scale(_neg(T.as_hyper("lr", lr, nonneg=True)))


@register("adagrad")
def _adagrad(lr=0.1, eps=1e-8):
    return {"transform": T.chain(T.mean_gradient(), _precond("adagrad", 0.0, eps), _lr(lr))}


@register("rmsprop")
def _rmsprop(lr=0.01, beta=0.9, eps=1e-8):
    return {"transform": T.chain(T.mean_gradient(), _precond("rmsprop", beta, eps), _lr(lr))}


@register("yogi")
def _yogi(lr=0.01, beta=0.9, eps=1e-8):
    return {"transform": T.chain(T.mean_gradient(), _precond("yogi", beta, eps), _lr(lr))}


@register("adam")
def _adam_opt(lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8):
    return {"transform": T.chain(T.mean_gradient(), _adam(beta1, beta2, eps), _lr(lr))}


@register("dp_adagrad")
def _dp_adagrad(lr=0.1, eps=1e-8, clip=1.0, noise_multiplier=1.0, noise="gaussian"):
    return {"transform": T.chain(gaussian_privatizer(clip, noise_multiplier, noise=noise),
                                 _precond("adagrad", 0.0, eps), _lr(lr)), "private": True}


@register("dp_rmsprop")
def _dp_rmsprop(lr=0.01, beta=0.9, eps=1e-8, clip=1.0, noise_multiplier=1.0, noise="gaussian"):
    return {"transform": T.chain(gaussian_privatizer(clip, noise_multiplier, noise=noise),
                                 _precond("rmsprop", beta, eps), _lr(lr)), "private": True}


@register("dp_adam")
def _dp_adam(lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8, clip=1.0, noise_multiplier=1.0,
             noise="gaussian"):
    return {"transform": T.chain(gaussian_privatizer(clip, noise_multiplier, noise=noise),
                                 _adam(beta1, beta2, eps), _lr(lr)), "private": True}


def _phi_fn(clip, noise_multiplier):
    """``Φ = (σC/b)²`` (seed 004 Eq. 2) as a function of the step context (b is the batch size)."""
    c = T.as_hyper("clip", clip, positive=True, allow_inf=True)
    s = T.as_hyper("noise_multiplier", noise_multiplier, nonneg=True)
    if np.any(np.isinf(c)):  # only valid with σ = 0 (checked by the privatizer): no noise, Φ = 0
        return lambda ctx: 0.0

    def phi(ctx):
        return (ctx.hp(s) * ctx.hp(c) / float(ctx.batch_size)) ** 2

    return phi


def _above_floor_probe(phi, gamma, beta2):
    """Fraction of coordinates with ``v̂ − Φ > γ'`` (DP-AdamBC diagnostic, seed 004 §4)."""

    def probe(state, params, ctx):
        xp = ctx.xp
        adam_state = state[1]
        if adam_state.count == 0:
            return xp.zeros(params.shape[0], dtype=params.dtype)
        v_hat = adam_state.v / (1.0 - ctx.hp(beta2) ** adam_state.count)
        above = (v_hat - phi(ctx)) > ctx.hp(gamma)
        return xp.mean(xp.astype(above, params.dtype), axis=1)

    return probe


@register("dp_adam_bc")
def _dp_adam_bc(lr=0.01, beta1=0.9, beta2=0.999, gamma_prime=1e-8, clip=1.0, noise_multiplier=1.0,
                noise="gaussian"):
    phi = _phi_fn(clip, noise_multiplier)
    gamma = T.as_hyper("gamma_prime", gamma_prime, positive=True)
    b2 = T.as_hyper("beta2", beta2, nonneg=True)
    return {"transform": T.chain(gaussian_privatizer(clip, noise_multiplier, noise=noise),
                                 _adam(beta1, b2, 0.0, phi=phi, floor=gamma), _lr(lr)),
            "private": True,
            "probes": {"frac_above_floor": _above_floor_probe(phi, gamma, b2)}}


@register("dp_adam_corrected")
def _dp_adam_corrected(lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8, clip=1.0, noise_multiplier=1.0,
                       noise="gaussian"):
    phi = _phi_fn(clip, noise_multiplier)
    return {"transform": T.chain(gaussian_privatizer(clip, noise_multiplier, noise=noise),
                                 _adam(beta1, beta2, eps, phi=phi, floor=0.0), _lr(lr)),
            "private": True}


@register("dp_adam_ime")
def _dp_adam_ime(lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8, clip=1.0, noise_multiplier=1.0,
                 noise="gaussian"):
    return {"transform": T.chain(ime_privatizer(clip, noise_multiplier, noise=noise),
                                 _adam(beta1, beta2, eps), _lr(lr)), "private": True}


@register("dp_adam_ime_free")
def _dp_adam_ime_free(lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8, clip=1.0, noise_multiplier=1.0,
                      noise="gaussian"):
    sigma = T.as_hyper("noise_multiplier", noise_multiplier, nonneg=True)
    return {"transform": T.chain(ime_privatizer(clip, sigma, split=(sigma, sigma), noise=noise),
                                 _adam(beta1, beta2, eps), _lr(lr)),
            "private": True,
            "note": "IME 'for free' comparator: both moments released at σ; its ε (two releases "
                    "per step) is larger than DP-Adam's and must not be reported as DP-Adam's"}


_STP_RULES = {"adam": "rmsprop", "rmsprop": "rmsprop", "adagrad": "adagrad"}


def _stp_chain(base, clip, noise_multiplier, lr, beta1, beta2, eps, eps_scale, noiseless_v,
               noise="gaussian"):
    if base not in _STP_RULES:
        raise ValueError(f"base must be one of adam, rmsprop, adagrad, got base={base!r}")
    beta = T.as_hyper("beta2", beta2, nonneg=True) if base != "adagrad" else 0.0
    priv = stp_privatizer(clip, noise_multiplier, rule=_STP_RULES[base], beta=beta,
                          eps_scale=eps_scale, noiseless_v=noiseless_v, noise=noise)
    if base == "adam":
        tail = _adam(beta1, beta, eps)
    else:
        tail = _precond(base, beta, eps)
    return T.chain(priv, tail, _lr(lr))


@register("dp_adam_stp")
def _dp_adam_stp(lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8, eps_scale=1e-3, clip=1.0,
                 noise_multiplier=1.0, base="adam", noise="gaussian"):
    """Scale-then-privatize over ``base`` (for rmsprop, ``beta2`` is RMSProp's β)."""
    return {"transform": _stp_chain(base, clip, noise_multiplier, lr, beta1, beta2, eps, eps_scale,
                                    False, noise), "private": True}


_ORACLE_NOTE = ("non-private oracle: the second moment is fed the noiseless clipped gradient, "
                "which is released without noise, so epsilon is infinite")


@register("dp_adam_noiseless_v")
def _dp_adam_noiseless_v(lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8, clip=1.0, noise_multiplier=1.0,
                         noise="gaussian"):
    return {"transform": T.chain(noiseless_v_privatizer(clip, noise_multiplier, noise=noise),
                                 _adam(beta1, beta2, eps), _lr(lr)),
            "private": False, "note": _ORACLE_NOTE}


@register("dp_adam_stp_noiseless_v")
def _dp_adam_stp_noiseless_v(lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8, eps_scale=1e-3, clip=1.0,
                             noise_multiplier=1.0, base="adam", noise="gaussian"):
    return {"transform": _stp_chain(base, clip, noise_multiplier, lr, beta1, beta2, eps, eps_scale,
                                    True, noise), "private": False, "note": _ORACLE_NOTE}


# ------------------------------------------------------------------------------------------------
# DP² (seed 000): delayed preconditioners, non-private version and ablations

def _dp2_factory(rule, variant="dp2", private=True):
    def factory(s1=10, s2=None, lr=0.1, lr2=None, clip=1.0, clip2=None, noise_multiplier=1.0,
                beta=0.9, eps=1e-8, unbias=False, noise="gaussian"):
        from .dp2 import dp2

        return {"transform": dp2(s1=s1, s2=s2, lr=lr, lr2=lr2, clip=clip, clip2=clip2,
                                 noise_multiplier=noise_multiplier, beta=beta, eps=eps, rule=rule,
                                 unbias=unbias, private=private, variant=variant, noise=noise),
                "private": private}

    return factory


register("dp2_rmsprop")(_dp2_factory("rmsprop"))
register("dp2_adagrad")(_dp2_factory("adagrad"))
register("dp2_yogi")(_dp2_factory("yogi"))
register("dp2_extra_query")(_dp2_factory("rmsprop", "extra_query"))
register("dp2_noise_first")(_dp2_factory("rmsprop", "noise_first"))


@register("delayed_rmsprop")
def _delayed_rmsprop(s1=10, s2=None, lr=0.1, lr2=None, beta=0.9, eps=1e-8):
    from .dp2 import dp2

    return {"transform": dp2(s1=s1, s2=s2, lr=lr, lr2=lr2, beta=beta, eps=eps, rule="rmsprop",
                             private=False)}


# ------------------------------------------------------------------------------------------------
# Baselines that need public data (the public split is carved out of the training data)

_PUBLIC_NOTE = ("needs public data: a public_fraction of the training set is carved out, used "
                "without privacy, and excluded from the private part; ε covers the private part")


def _public_fraction(x):
    x = float(x)
    if not (0.0 < x < 1.0):
        raise ValueError(f"public_fraction must be in (0, 1), got public_fraction={x}")
    return x


@register("pdp_sgd")
def _pdp_sgd(lr=0.1, clip=1.0, noise_multiplier=1.0, k=10, public_fraction=0.01, noise="gaussian"):
    """PDP-SGD (Zhou et al. 2021): DP-SGD with the release projected onto the top-k public
    gradient subspace.  Needs public data."""
    _public_fraction(public_fraction)
    return {"transform": T.chain(public_subspace_privatizer(clip, noise_multiplier, k=k, noise=noise), _lr(lr)),
            "private": True, "note": _PUBLIC_NOTE}


@register("adadps")
def _adadps(lr=0.1, clip=1.0, noise_multiplier=1.0, beta=0.9, eps=1e-8, public_fraction=0.01,
            noise="gaussian"):
    """AdaDPS-RMSProp (Li et al. 2022): preconditioner from public gradients, preconditioned
    per-example clipping.  Needs public data."""
    _public_fraction(public_fraction)
    return {"transform": T.chain(public_preconditioned_privatizer(clip, noise_multiplier, beta=beta,
                                                                  eps=eps, noise=noise), _lr(lr)),
            "private": True, "note": _PUBLIC_NOTE}


# ------------------------------------------------------------------------------------------------
# Optimizers defined in their own modules register themselves on import.
from . import ctcdp as _ctcdp  # noqa: E402,F401  (dp_sgd_ctcdp: budget-constrained ctCDP training)
from . import pagan as _pagan  # noqa: E402,F401  (pasan, pagan: ellipsoid projections, seed 001)
