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
"""

from . import adaptive, baselines, ctcdp, design_space, dp2, ime, noisy_adagrad, pasan_pagan, public
from . import _hyper
from ._registry import Optimizer, get, hyperparameters, names, optimizer, register
from .adaptive import adagrad, adam, dp_adagrad, dp_adam, dp_adam_bc, dp_rmsprop, rmsprop, yogi
from .baselines import dp_sgd, dp_sgdm, momentum, sgd
from .ctcdp import dp_sgd_ctcdp
from .design_space import (dp_adam_corrected, dp_adam_ime, dp_adam_ime_free, dp_adam_noiseless_v,
                           dp_adam_stp, dp_adam_stp_noiseless_v)
from .ime import ime_adagrad, ime_adagrad_free
from .dp2 import delayed_rmsprop, dp2_adagrad, dp2_extra_query, dp2_noise_first, dp2_rmsprop, dp2_yogi
from .noisy_adagrad import noisy_adagrad
from .pasan_pagan import pagan, pasan
from .public import adadps, pdp_sgd

__all__ = ["Optimizer", "get", "hyperparameters", "names", "optimizer", "register", "adaptive", "baselines", "ctcdp",
           "design_space", "dp2", "ime", "pasan_pagan", "public"] + names()
