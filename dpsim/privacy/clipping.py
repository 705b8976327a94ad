"""Per-example ℓ2 clipping."""

from __future__ import annotations

import math

from ..backend import array_namespace

__all__ = ["clip_l2"]


def clip_l2(g, clip):
    """Per-row ℓ2 clipping ``g · min(1, C / ||g||₂)`` over the last axis.

    ``g`` has shape ``(..., d)``; ``clip`` is a positive scalar (``inf`` = no clipping) or an array
    broadcastable to ``g.shape[:-1]``.  Zero rows stay zero.  Does not modify ``g``.

    Parameters
    ----------
    g : array
        Rows to clip, shape ``(..., d)``, on any backend.
    clip : float or array
        The norm ``C`` > 0 (``inf``: no clipping), or an array broadcastable to ``g.shape[:-1]``.

    Returns
    -------
    array
        ``g · min(1, C / ||g||₂)`` row by row, shaped as ``g``.

    Raises
    ------
    ValueError
        If a scalar ``clip`` is not positive.

    Examples
    --------
    >>> import numpy as np
    >>> from dpsim.privacy import clip_l2
    >>> clip_l2(np.array([[3.0, 4.0], [0.3, 0.4]]), 1.0)
    array([[0.6, 0.8],
           [0.3, 0.4]])
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
