"""Per-example ℓ2 clipping."""

from __future__ import annotations

import math

from ..backend import array_namespace

__all__ = ["clip_l2"]


def clip_l2(g, clip):
    """Per-row ℓ2 clipping ``g · min(1, C / ||g||₂)`` over the last axis.

    ``g`` has shape ``(..., d)``; ``clip`` is a positive scalar (``inf`` = no clipping) or an array
    broadcastable to ``g.shape[:-1]``.  Zero rows stay zero.  Does not modify ``g``.
    """
    xp = array_namespace(g)
    norms = xp.sqrt(xp.sum(g * g, axis=-1))  # core standard (no linalg extension needed)
    if isinstance(clip, (int, float)):
        if clip <= 0 or math.isnan(clip):
            raise ValueError(f"clip must be positive, got clip={clip}")
        if math.isinf(clip):
            return g * 1.0
    safe = xp.where(norms > 0, norms, xp.ones_like(norms))
    factor = xp.minimum(xp.ones_like(norms), clip / safe)
    return g * factor[..., None]
