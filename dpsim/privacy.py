"""Privacy primitives: clipping and Gaussian privatizers.

A privatizer is the first transform of a private optimizer: it consumes the step's per-example
gradient oracle (:class:`dpsim.transforms.Batch`) and emits the privatized average

    g̃ = (1/b) (Σ_{i∈B} clip(g_i, C) + z),   z ~ N(0, σ² C² I_d)            (ALGORITHMS §0)

dividing by the nominal batch size ``b`` also under Poisson sampling (so the clipped sum has
ℓ2 sensitivity ``C`` under add/remove adjacency and the release is the subsampled Gaussian
mechanism that :mod:`dpsim.accounting` accounts for).  Each privatizer *declares* what it releases
(:class:`dpsim.transforms.Release`): the declared noise multiplier is the very value used to scale
the noise, so the accountant sees exactly what is released.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from .backend import array_namespace
from .transforms import GradientTransformation, Release, as_hyper

__all__ = ["clip_l2", "gaussian_privatizer", "PrivatizerState"]


def clip_l2(g, clip):
    """Per-row ℓ2 clipping ``g · min(1, C / ||g||₂)`` over the last axis.

    ``g`` has shape ``(..., d)``; ``clip`` is a positive scalar (``inf`` = no clipping) or an array
    broadcastable to ``g.shape[:-1]``.  Zero rows stay zero.  Does not modify ``g``.
    """
    xp = array_namespace(g)
    norms = xp.linalg.vector_norm(g, axis=-1)
    if isinstance(clip, (int, float)):
        if clip <= 0 or math.isnan(clip):
            raise ValueError(f"clip must be positive, got clip={clip}")
        if math.isinf(clip):
            return g * 1.0
    safe = xp.where(norms > 0, norms, xp.ones_like(norms))
    factor = xp.minimum(xp.ones_like(norms), clip / safe)
    return g * factor[..., None]


class PrivatizerState(NamedTuple):
    pass


def gaussian_privatizer(clip, noise_multiplier) -> GradientTransformation:
    """Clip per-example gradients to ``C`` and add ``N(0, σ²C²I)``; emit the average over ``b``.

    ``clip`` C > 0 (``inf`` allowed only with σ = 0, the non-private limit); ``noise_multiplier``
    σ ≥ 0.  Either may be per-trial.  Declares one Gaussian release with noise multiplier σ per
    step (sensitivity C, noise std σC).
    """
    clip = as_hyper("clip", clip, positive=True, allow_inf=True)
    sigma = as_hyper("noise_multiplier", noise_multiplier, nonneg=True)
    clip_inf = _any_inf(clip)
    if clip_inf and _any_pos(sigma):
        raise ValueError(
            f"clip=inf with noise_multiplier={noise_multiplier!r} > 0 has unbounded noise; "
            "use a finite clip or noise_multiplier=0"
        )
    std = None if clip_inf else _times(sigma, clip)  # σ·C per trial

    def init(params):
        return PrivatizerState()

    def update(batch, state, params, ctx):
        total = batch.clipped_sum(ctx.hp_vec(clip) if not isinstance(clip, float) else clip)
        b = float(batch.batch_size)
        if std is None or (isinstance(std, float) and std == 0.0):
            return total / b, state
        z = ctx.backend.normal(total.shape)
        z *= ctx.hp(std)
        z += total
        z /= b
        return z, state

    releases = (Release(noise_multiplier=_as_decl(sigma)),)
    return GradientTransformation(init, update, releases)


def _any_inf(x) -> bool:
    if isinstance(x, float):
        return math.isinf(x)
    return bool((x == math.inf).any())


def _any_pos(x) -> bool:
    if isinstance(x, float):
        return x > 0
    return bool((x > 0).any())


def _times(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return a * b
    import numpy as np

    out = np.asarray(a, dtype=float) * np.asarray(b, dtype=float)
    out = np.broadcast_to(out, np.broadcast(np.asarray(a), np.asarray(b)).shape).copy()
    out.setflags(write=False)
    return out


def _as_decl(sigma):
    return sigma if isinstance(sigma, float) else tuple(float(s) for s in sigma)
