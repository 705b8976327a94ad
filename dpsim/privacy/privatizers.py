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
from typing import Any, NamedTuple

import numpy as np

from ._ellipsoid import project_ellipsoid  # noqa: F401  (public: dpsim.privacy.project_ellipsoid)
from .backend import array_namespace
from .transforms import GradientTransformation, Release, as_hyper

__all__ = ["NoiseSource", "clip_l2", "project_ellipsoid", "gaussian_privatizer", "ime_privatizer", "noiseless_v_privatizer",
           "stp_privatizer", "PrivatizerState"]


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
    noise: Any = None  # state of the noise stream (correlated noise); None for i.i.d. Gaussian


def _check_clip_sigma(clip, noise_multiplier, name="noise_multiplier"):
    clip = as_hyper("clip", clip, positive=True, allow_inf=True)
    sigma = as_hyper(name, noise_multiplier, nonneg=True)
    if _any_inf(clip) and _any_pos(sigma):
        raise ValueError(
            f"clip=inf with {name}={noise_multiplier!r} > 0 has unbounded noise; "
            "use a finite clip or noise_multiplier=0"
        )
    return clip, sigma


def _clip_arg(clip, ctx):
    return clip if isinstance(clip, float) else ctx.hp_vec(clip)


def _is_zero(x) -> bool:
    return isinstance(x, float) and x == 0.0


class NoiseSource:
    """Where a privatizer's unit noise comes from: ``"gaussian"`` (i.i.d. ``N(0, I)`` per step,
    DP-SGD) or correlated noise (DP-MF, seed 002 §2.1): ``"sqrt_toeplitz"`` or ``"banded:<k>"``,
    streamed by :func:`dpsim.mf.noise_stream` as ``u_t = sens(M)·(M⁻¹Z)_t``.

    Privacy of correlated noise: with unrestricted participation (Poisson, fixed-size batches) the
    run is one Gaussian mechanism with noise multiplier ``σ·sens(M)/worst_sens(M)``, composed
    *without* amplification by sampling (MMCC-style amplification is not implemented); this is
    what the privatizer declares (:class:`dpsim.transforms.Release` with ``mf=name``).
    """

    def __init__(self, noise: str = "gaussian"):
        from . import mf

        kind, _ = mf.parse_noise(noise)  # ValueError naming a bad value
        self.noise = noise
        self.correlated = kind != "identity"
        self._streams: dict[int, object] = {}

    def stream(self, steps: int):
        from . import mf

        if steps not in self._streams:
            self._streams[steps] = mf.noise_stream(self.noise, steps)
        return self._streams[steps]

    def draw(self, nstate, ctx, shape):
        """``(u, nstate)``: one step of unit noise of ``shape`` (``nstate`` None before step 1)."""
        if not self.correlated:
            return ctx.backend.normal(shape), None
        st = self.stream(ctx.num_steps)
        if nstate is None:
            nstate = st.init(shape, ctx.backend)
        return st.next(nstate, ctx.backend)

    def release(self, sigma, when=None) -> Release:
        return Release(noise_multiplier=_as_decl(sigma), when=when,
                       mf=self.noise if self.correlated else None)


def _add_noise(total, std, b: float, ctx, src: NoiseSource | None = None, nstate=None):
    """``((total + std · u) / b, nstate)`` with unit noise ``u`` from ``src`` (i.i.d. Gaussian by
    default), in place on the fresh noise array."""
    if std is None or _is_zero(std):
        return total / b, nstate
    if src is None:
        z = ctx.backend.normal(total.shape)
    else:
        z, nstate = src.draw(nstate, ctx, total.shape)
    z *= ctx.hp(std)
    z += total
    z /= b
    return z, nstate


def gaussian_privatizer(clip, noise_multiplier, *, noise="gaussian") -> GradientTransformation:
    """Clip per-example gradients to ``C`` and add ``N(0, σ²C²I)``; emit the average over ``b``.

    ``clip`` C > 0 (``inf`` allowed only with σ = 0, the non-private limit); ``noise_multiplier``
    σ ≥ 0.  Either may be per-trial.  Declares one Gaussian release with noise multiplier σ per
    step (sensitivity C, noise std σC).

    ``noise``: ``"gaussian"`` or correlated noise (:class:`NoiseSource`).
    """
    clip, sigma = _check_clip_sigma(clip, noise_multiplier)
    std = None if _any_inf(clip) else _times(sigma, clip)  # σ·C per trial
    src = NoiseSource(noise)

    def init(params):
        return PrivatizerState()

    def update(batch, state, params, ctx):
        total = batch.clipped_sum(_clip_arg(clip, ctx))
        out, ns = _add_noise(total, std, float(batch.batch_size), ctx, src, state.noise)
        return out, PrivatizerState(noise=ns)

    return GradientTransformation(init, update, (src.release(sigma),))


class ImeState(NamedTuple):
    noise1: Any = None  # noise-stream state of the first-moment release
    noise2: Any = None  # noise-stream state of the second-moment release


def ime_privatizer(clip, noise_multiplier, *, split=None, noise="gaussian") -> GradientTransformation:
    """Independent moment estimation (Kalinin et al. 2025; seed 002 §3, reconstructed).

    Releases, on the same batch, the clipped mean ``ḡ = (1/b)Σ clip(g_i, C)`` with noise
    multiplier σ1 (sensitivity C/b) and its coordinate-wise square ``ḡ²`` with noise multiplier σ2
    (ℓ2 sensitivity ``(2b−1)C²/b²`` under zero-out adjacency).  ``split=None``:
    ``σ1 = σ2 = √2 σ`` so that ``σ1⁻² + σ2⁻² = σ⁻²`` and the pair costs one DP-SGD step;
    ``split=(σ1, σ2)`` sets them directly (``(σ, σ)`` is the "IME for free" comparator, which
    releases twice at σ and is accounted as such).  Emits ``MomentInputs(g̃, sq̃)``.
    """
    clip, sigma = _check_clip_sigma(clip, noise_multiplier)
    if _any_inf(clip):
        raise ValueError("independent moment estimation needs a finite clip")
    if split is None:
        s1 = s2 = _times(sigma, 2.0 ** 0.5)
    else:
        s1 = as_hyper("noise_multiplier_1", split[0], nonneg=True)
        s2 = as_hyper("noise_multiplier_2", split[1], nonneg=True)

    src1, src2 = NoiseSource(noise), NoiseSource(noise)

    def init(params):
        return ImeState()

    def update(batch, state, params, ctx):
        from .adaptive import MomentInputs

        b = float(batch.batch_size)
        c = _clip_arg(clip, ctx)
        total = batch.clipped_sum(c)
        g_clean = total / b
        g, n1 = _add_noise(total, _times(s1, clip), b, ctx, src1, state.noise1)
        sens2 = ctx.hp(clip) ** 2 * (2.0 * b - 1.0) / (b * b)  # ℓ2 sensitivity of ḡ²
        sq = g_clean * g_clean
        n2 = state.noise2
        if not _is_zero(s2):
            z, n2 = src2.draw(n2, ctx, sq.shape)
            sq = sq + z * (ctx.hp(s2) * sens2)
        return MomentInputs(g, sq), ImeState(n1, n2)

    return GradientTransformation(init, update, (src1.release(s1), src2.release(s2)))


def noiseless_v_privatizer(clip, noise_multiplier, *, noise="gaussian") -> GradientTransformation:
    """Non-private oracle (seed 002 Alg. 9): ``m`` is fed the noisy ``g̃``, ``v`` the clipped but
    noiseless ``ḡ²``.  Releases ``ḡ`` without noise, so it is NOT private."""
    clip, sigma = _check_clip_sigma(clip, noise_multiplier)
    std = None if _any_inf(clip) else _times(sigma, clip)
    src = NoiseSource(noise)

    def init(params):
        return PrivatizerState()

    def update(batch, state, params, ctx):
        from .adaptive import MomentInputs

        b = float(batch.batch_size)
        total = batch.clipped_sum(_clip_arg(clip, ctx))
        clean = total / b
        g, ns = _add_noise(total, std, b, ctx, src, state.noise)
        return MomentInputs(g, clean * clean), PrivatizerState(noise=ns)

    return GradientTransformation(init, update, ())


class ScaledPrivatizerState(NamedTuple):
    v: Any  # (R, d) copy of the downstream optimizer's raw second moment v_{t-1}
    count: int
    noise: Any = None  # noise-stream state


def stp_privatizer(clip, noise_multiplier, *, rule: str, beta, eps_scale,
                   noiseless_v: bool = False, noise="gaussian") -> GradientTransformation:
    """Scale-then-privatize (seed 002 Alg. 8, reconstructed).

    ``s_t = 1/(√v_{t−1} + ε_s)`` from the raw second moment of the downstream rule, release
    ``g̃ = (1/b)(Σ clip(s_t ⊙ g_i, C) + N(0, σ²C²I)) / s_t``.  The privatizer keeps its own copy
    of ``v`` by applying the downstream recursion (``rule`` with ``beta``) to the value it emits,
    which is the same number the downstream optimizer computes.  At ``t = 1``, ``v = 0`` so
    ``s = 1/ε_s``.  ``noiseless_v=True`` (non-private oracle, Alg. 9 with STP) feeds the second
    moment the noiseless ``(Σ clip(s ⊙ g_i, C)/(b s))²``.
    """
    from .adaptive import MomentInputs, second_moment_update

    clip, sigma = _check_clip_sigma(clip, noise_multiplier)
    eps_scale = as_hyper("eps_scale", eps_scale, positive=True)
    std = None if _any_inf(clip) else _times(sigma, clip)
    src = NoiseSource(noise)

    def init(params):
        return ScaledPrivatizerState(v=params * 0.0, count=0)

    def update(batch, state, params, ctx):
        xp = ctx.xp
        b = float(batch.batch_size)
        s = 1.0 / (xp.sqrt(xp.maximum(state.v, 0.0)) + ctx.hp(eps_scale))
        total = batch.clipped_sum(_clip_arg(clip, ctx), scale=s)
        g, ns = _add_noise(total, std, b, ctx, src, state.noise)
        g = g / s
        if noiseless_v:
            clean = total / (b * s)
            sq = clean * clean
            out = MomentInputs(g, sq)
        else:
            sq = g * g
            out = g
        v = second_moment_update(rule, state.v, sq, ctx.hp(beta), xp)
        return out, ScaledPrivatizerState(v=v, count=state.count + 1, noise=ns)

    releases = () if noiseless_v else (src.release(sigma),)
    return GradientTransformation(init, update, releases)


def public_subspace_privatizer(clip, noise_multiplier, *, k, noise="gaussian") -> GradientTransformation:
    """PDP-SGD (Zhou et al. 2021, baseline of seed 001 §6): the Gaussian release ``g̃`` projected
    onto the top-``k`` eigenvectors of the second-moment matrix ``(1/m) Σ g_j g_jᵀ`` of the public
    per-example gradients at the current iterate.  Needs public data (``public_fraction``)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got k={k!r}")
    k = int(k)
    inner = gaussian_privatizer(clip, noise_multiplier, noise=noise)

    def update(batch, state, params, ctx):
        xp = ctx.xp
        g, state = inner.update(batch, state, params, ctx)
        P = batch.public_per_example()  # (R, m, d)
        if k > min(P.shape[1], P.shape[2]):
            raise ValueError(f"k={k} exceeds the rank available from {P.shape[1]} public examples "
                             f"in d={P.shape[2]}")
        _, _, vh = xp.linalg.svd(P, full_matrices=False)  # right singular vectors, (R, r, d)
        V = vh[:, :k, :]
        coef = xp.sum(V * g[:, None, :], axis=2)  # (R, k)
        return xp.sum(V * coef[:, :, None], axis=1), state

    return GradientTransformation(inner.init, update, inner.releases)


class PublicPreconditionState(NamedTuple):
    v: Any  # (R, d) RMSProp second moment of the public gradient
    noise: Any = None  # noise-stream state


def public_preconditioned_privatizer(clip, noise_multiplier, *, beta, eps,
                                     noise="gaussian") -> GradientTransformation:
    """AdaDPS-RMSProp (Li et al. 2022; seed 000 §5.2): ``v ← β v + (1−β) ḡ_pub²`` from the mean
    gradient of the public split, ``D = √v + ε_a``, release
    ``g̃ = (1/b)(Σ clip(g_i / D, C) + N(0, σ²C²I))`` and step with it.  Private only with respect
    to the private split; needs public data (``public_fraction``)."""
    clip, sigma = _check_clip_sigma(clip, noise_multiplier)
    beta = as_hyper("beta", beta, nonneg=True)
    eps = as_hyper("eps", eps, positive=True)
    std = None if _any_inf(clip) else _times(sigma, clip)
    src = NoiseSource(noise)

    def init(params):
        return PublicPreconditionState(v=params * 0.0)

    def update(batch, state, params, ctx):
        xp = ctx.xp
        gp = xp.mean(batch.public_per_example(), axis=1)
        v = state.v * ctx.hp(beta) + gp * gp * (1.0 - ctx.hp(beta))
        D = xp.sqrt(v) + ctx.hp(eps)
        total = batch.clipped_sum(_clip_arg(clip, ctx), scale=1.0 / D)
        out, ns = _add_noise(total, std, float(batch.batch_size), ctx, src, state.noise)
        return out, PublicPreconditionState(v=v, noise=ns)

    return GradientTransformation(init, update, (src.release(sigma),))


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
