"""Optimizers: public documented functions (optax alias style) and a name registry.

``dpsim.optimizers.dp_adam(lr=0.01, ...)`` returns an :class:`Optimizer`;
``dpsim.optimizers.get("dp_adam", lr=0.01)`` does the same by name, and ``names()`` lists every
name.  Any hyperparameter may be a scalar or a sequence with one value per trial (a grid folded
into the trial axis).  Each optimizer is a named chain of pieces (``"privatizer"``/``"gradient"``,
``"momentum"``, ``"preconditioner"``, ``"lr"``); read its state by name
(:func:`dpsim.transforms.lookup`).

Families: :mod:`.baselines` (SGD, momentum, DP-SGD, DP-SGDM), :mod:`.adaptive` (AdaGrad, RMSProp,
Yogi, Adam, their DP versions, DP-AdamBC), :mod:`.design_space` ([DESIGN]'s DP-Adam variants and
oracles), :mod:`.ime` (AdaGrad with independent moment estimation, [DESIGN]'s 1-D winner),
:mod:`.dp2` ([DP2]), :mod:`.pasan_pagan` ([PAGAN]; the module is not called ``pagan`` because
``dpsim.optimizers.pagan`` is the optimizer function), :mod:`.ctcdp` ([L2P]), :mod:`.public`
(public-data baselines), :mod:`.noisy_adagrad` ([DP2] App. C.6's noisy AdaGrad with a public
subspace; the attribute ``dpsim.optimizers.noisy_adagrad`` is the optimizer function, so import
the module as ``importlib.import_module("dpsim.optimizers.noisy_adagrad")``).

``hyperparameters(name)`` gives each hyperparameter's declared kind and range (the specs of
:mod:`._hyper` that annotate the optimizer functions and validate every call).

Examples
--------
>>> import dpsim.optimizers as optimizers
>>> "dp_adam" in optimizers.names()
True
>>> repr(optimizers.get("dp_adam", lr=0.05)) == repr(optimizers.dp_adam(lr=0.05))
True
>>> optimizers.hyperparameters("dp_adam")["beta2"].describe()
'real in [0, 1)'
"""

from . import adaptive, baselines, ctcdp, design_space, dp2, ime, noisy_adagrad, pasan_pagan, public
from . import _hyper, _registry
from ._registry import Optimizer, get, hyperparameters, names, optimizer, register

# Every registered optimizer function is an attribute of this package, read from the registry (no
# hand-kept list): the families above registered theirs when imported.  A function named like its
# module (``noisy_adagrad``) replaces the module attribute, as documented above.
globals().update({_name: _registry._REGISTRY[_name] for _name in names()})

_MODULES = ["adaptive", "baselines", "ctcdp", "design_space", "dp2", "ime", "pasan_pagan", "public"]
__all__ = ["Optimizer", "get", "hyperparameters", "names", "optimizer", "register", *_MODULES,
           *names()]


def __getattr__(name):
    """An optimizer registered after this package was imported (a user's ``@register``)."""
    if name in _registry._REGISTRY:
        return _registry._REGISTRY[name]
    raise AttributeError(f"module 'dpsim.optimizers' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(names()))
