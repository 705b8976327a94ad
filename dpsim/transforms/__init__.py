"""Gradient transformations (optax style): the base protocol and chains (:mod:`.base`), the
preconditioner pieces with each moment recursion written once (:mod:`.preconditioners`), and the
combinators that put the same pieces in another order (:mod:`.combinators`).

Examples
--------
SGD as a named chain of two pieces:

>>> from dpsim.transforms import mean_gradient, named_chain, scale
>>> tx = named_chain(("gradient", mean_gradient()), ("lr", scale(-0.1)))
>>> tx.names
('gradient', 'lr')
"""

from . import preconditioners
from .base import (Batch, EmptyState, GradientTransformation, StepContext, TraceState, chain,
                   lookup, mean_gradient, named_chain, replace_piece, scale, trace)
from .combinators import alongside, alternate, scale_then_privatize
from .preconditioners import adam_v_hat

__all__ = ["GradientTransformation", "StepContext", "Batch", "chain", "named_chain", "lookup",
           "replace_piece", "mean_gradient", "scale", "trace", "EmptyState", "TraceState",
           "scale_then_privatize", "alternate", "alongside", "adam_v_hat", "preconditioners"]
