"""Gaussian privatizers: clip per-example gradients, add noise, declare the release.

A privatizer is the first piece of a private optimizer: it consumes the step's per-example
gradient oracle (:class:`dpsim.transforms.Batch`, possibly scaled by a preconditioner) and emits the
privatized average

    g̃ = (1/b) (Σ_{i∈B} clip(g_i, C) + z),   z ~ N(0, σ² C² I_d)            (ALGORITHMS §0)

dividing by the nominal batch size ``b`` also under Poisson sampling (so the clipped sum has
ℓ2 sensitivity ``C`` under add/remove adjacency and the release is the subsampled Gaussian
mechanism that :mod:`dpsim.accounting` accounts for).  Each privatizer *declares* its release as a
typed event (:mod:`dpsim.privacy.events`, built by :meth:`NoiseSource.event`): the declared noise
multiplier is the very value used to scale the noise.  The non-private oracle
:func:`noiseless_v_privatizer` declares :class:`~dpsim.privacy.events.NonPrivate`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._validate import any_inf, any_positive, hyper, is_zero, positive_int, product
from ..transforms.base import GradientTransformation
from ..transforms.elements import Moments, Release
from ..transforms.preconditioners import MomentInputs
from .events import NonPrivate
from .noise import NoiseSource, add_noise

__all__ = ["PrivatizerState", "ImeState", "check_clip_sigma", "gaussian_privatizer", "ime_privatizer", "ime_constants",
           "noiseless_v_privatizer", "public_subspace_privatizer"]


class PrivatizerState(NamedTuple):
    noise: Any = None  # state of the noise stream (correlated noise); None for i.i.d. Gaussian


def check_clip_sigma(clip, noise_multiplier, name="noise_multiplier"):
    """Validate ``clip`` ∈ (0, ∞] and ``noise_multiplier`` ∈ [0, ∞); ``clip = ∞`` only with σ = 0.

    Parameters
    ----------
    clip : float or sequence of float
        The clipping norm.
    noise_multiplier : float or sequence of float
        The noise multiplier.
    name : str
        The noise multiplier's name in errors.

    Returns
    -------
    tuple
        The validated ``(clip, noise_multiplier)``.

    Raises
    ------
    ValueError
        Naming the bad value.

    Examples
    --------
    >>> from dpsim.privacy.privatizers import check_clip_sigma
    >>> check_clip_sigma(1.0, 2.0)
    (1.0, 2.0)
    >>> check_clip_sigma(float("inf"), 1.0)
    Traceback (most recent call last):
    ...
    ValueError: ...
    """
    clip = hyper("clip", clip, "(0, inf]")
    sigma = hyper(name, noise_multiplier, "[0, inf)")
    if any_inf(clip) and any_positive(sigma):
        raise ValueError(
            f"clip=inf with {name}={noise_multiplier!r} > 0 has unbounded noise; "
            "use a finite clip or noise_multiplier=0"
        )
    return clip, sigma


def _clip_arg(clip, ctx):
    return clip if isinstance(clip, float) else ctx.hp_vec(clip)


def _noise_std(clip, sigma):
    return None if any_inf(clip) else product(sigma, clip)  # σ·C per trial


def gaussian_privatizer(clip, noise_multiplier, *, noise="gaussian") -> GradientTransformation:
    """Clip per-example gradients to ``C`` and add ``N(0, σ²C²I)``; emit the average over ``b``.

    ``clip`` C ∈ (0, ∞] (``inf`` only with σ = 0, the non-private limit); ``noise_multiplier``
    σ ∈ [0, ∞).  Either may be per-trial.  Declares one release per step with noise multiplier σ
    (sensitivity C, noise std σC).  ``noise``: ``"gaussian"`` or correlated noise
    (:class:`~dpsim.privacy.noise.NoiseSource`).  Its element is the
    :class:`~dpsim.transforms.elements.Release` ``(C, σC, source)`` that its update computes
    (the source only for correlated noise), which the fused release reads.

    Parameters
    ----------
    clip : float or sequence of float
        The clipping norm ``C``.
    noise_multiplier : float or sequence of float
        The noise multiplier σ.
    noise : str
        ``"gaussian"`` or a DP-MF strategy name.

    Returns
    -------
    GradientTransformation
        The privatizer piece, declaring its release.

    Examples
    --------
    >>> from dpsim.privacy.privatizers import gaussian_privatizer
    >>> gaussian_privatizer(1.0, 2.0).privacy[0].noise_multiplier
    2.0
    """
    clip, sigma = check_clip_sigma(clip, noise_multiplier)
    std = _noise_std(clip, sigma)
    src = NoiseSource(noise)

    def init(params):
        return PrivatizerState()

    def update(batch, state, params, ctx):
        total = batch.clipped_sum(_clip_arg(clip, ctx))
        out, ns = add_noise(total, std, float(batch.batch_size), ctx, src, state.noise)
        return out, PrivatizerState(noise=ns)

    return GradientTransformation(init, update, (src.event(sigma),),
                                  element=Release(clip=clip, std=std,
                                                  source=src if src.correlated else None))


class ImeState(NamedTuple):
    noise1: Any = None  # noise-stream state of the first-moment release
    noise2: Any = None  # noise-stream state of the second-moment release


def ime_privatizer(clip, noise_multiplier, *, split=None, noise="gaussian") -> GradientTransformation:
    """Independent moment estimation (Kalinin et al. 2025; [DESIGN] §3, reconstructed).

    Releases, on the same batch, the clipped mean ``ḡ = (1/b)Σ clip(g_i, C)`` with noise
    multiplier σ1 (sensitivity C, noise std ``σ1 C/b``) and a coordinate-wise square with noise
    multiplier σ2.  ``split=None``: ``σ1 = σ2 = √2 σ`` so that ``σ1⁻² + σ2⁻² = σ⁻²`` and the pair
    costs one DP-SGD step; ``split=(σ1, σ2)`` sets them directly (``(σ, σ)`` is the "IME for free"
    comparator, which releases twice at σ and is accounted as such).  Emits
    ``MomentInputs(g̃, sq̃)``; declares two releases per step.  Its element is the
    :class:`~dpsim.transforms.elements.Moments` ``(release 1, C, σ2)`` of those releases, which
    the fused release reads (:class:`dpsim.transforms.elements.Ime`).

    **Sensitivity of the second release, per sampler.**  ``b`` is the nominal batch size, ``S`` the
    clipped sum, ``x`` (``‖x‖ ≤ C``) the differing example.

    * ``sampling="fixed"`` (replace-one, exactly ``b`` examples): ``‖S/b‖ ≤ C`` always, the square
      ``ḡ²`` is released as is, with declared sensitivity ``Δ₂ = (2b−1)C²/b²``.  The accountant
      doubles every sensitivity under replace-one, and the true replace-one sensitivity of ``ḡ²``
      is at most ``4(b−1)C²/b² ≤ 2Δ₂`` (the maximum of ``‖(S−x+x')² − S²‖/b²``).
    * ``sampling="poisson"`` or ``"cyclic_poisson:<k>"`` (add/remove; the cyclic sampler also
      draws a Poisson batch of varying size, from one group; also ``"replacement"``, which no
      accountant accepts):
      the batch may hold more than ``b`` examples, and the add/remove sensitivity of ``ḡ²`` grows
      with the batch (``(2k+1)C²/b²`` for ``k`` other examples aligned with ``x``; the old
      declaration ``(2b−1)C²/b²`` under-declared it — an exact one-step computation on
      ``n = 4, b = 1`` gives ε ≈ 24 where 2.7 was reported, ``tests/privacy/test_ime_privacy.py``).  So
      the mean is first projected onto the ball of radius C, ``u = Π_C(S/b)`` (a no-op whenever
      the batch holds at most ``b`` examples), and ``u²`` is released with
      ``Δ₂ = 2C²/b``: the projection is 1-Lipschitz, so ``‖u' − u‖₂ ≤ ‖x‖/b ≤ C/b``, and
      ``‖u'² − u²‖₂ = ‖(u' − u) ⊙ (u' + u)‖₂ ≤ ‖u' − u‖₂ ‖u' + u‖_∞ ≤ (C/b)(2C)`` for *every*
      batch (any size), which is what the Poisson dominating-pair argument needs.  The bound is
      attained as d → ∞ (in one dimension the maximum is ``(2b−1)C²/b²``).

    In both cases the whitened shift of the pair ``(g̃, sq̃)`` has norm² ≤ ``σ1⁻² + σ2⁻²``, so the
    two releases on one batch cost one Gaussian release with ``σ_eff = (σ1⁻² + σ2⁻²)^{-1/2}``
    (:mod:`dpsim.accounting`).  ``C`` is a hyperparameter (no data-dependent constant).

    Parameters
    ----------
    clip : float or sequence of float
        The (finite) clipping norm C.
    noise_multiplier : float or sequence of float
        σ.
    split : tuple, optional
        ``(σ1, σ2)`` (default ``√2 σ`` each).
    noise : str
        The noise name.

    Returns
    -------
    GradientTransformation
        The privatizer, declaring its two releases (element: their
        :class:`~dpsim.transforms.elements.Moments`).
    """
    clip, s1, s2, std1 = ime_constants(clip, noise_multiplier, split)
    src1, src2 = NoiseSource(noise), NoiseSource(noise)

    def init(params):
        return ImeState()

    def update(batch, state, params, ctx):
        b = float(batch.batch_size)
        total = batch.clipped_sum(_clip_arg(clip, ctx))
        g_clean = total / b
        g, n1 = add_noise(total, std1, b, ctx, src1, state.noise1)
        c = ctx.hp(clip)
        if ctx.sampling == "fixed":  # exactly b examples: ‖ḡ‖ ≤ C, ḡ² as is (every other sampler,
            # cyclic Poisson included, has a varying batch size: the projected branch below)
            sens2 = c ** 2 * (2.0 * b - 1.0) / (b * b)
            u = g_clean
        else:  # any batch size: project ḡ onto the C-ball first (docstring)
            sens2 = c ** 2 * (2.0 / b)
            u = _project_ball(ctx.xp, g_clean, c)
        sq = u * u
        n2 = state.noise2
        if not is_zero(s2):
            z, n2 = src2.draw(n2, ctx, sq.shape)
            sq = sq + z * (ctx.hp(s2) * sens2)
        return MomentInputs(g, sq), ImeState(n1, n2)

    events = (src1.event(s1), src2.event(
        s2, sensitivity="2C^2/b (square of the clipped mean projected onto the C-ball; "
                        "(2b-1)C^2/b^2 with fixed-size batches)"))
    return GradientTransformation(init, update, events, element=Moments(
        Release(clip=clip, std=std1, source=src1 if src1.correlated else None), clip, s2))


def ime_constants(clip, noise_multiplier, split=None):
    """The validated constants of :func:`ime_privatizer`: ``(C, σ1, σ2, σ1·C)`` (``split=None``:
    ``σ1 = σ2 = √2 σ``).  Raises ``ValueError`` for an infinite clip.

    Parameters
    ----------
    clip : float or sequence of float
        The (finite) clipping norm.
    noise_multiplier : float or sequence of float
        σ.
    split : tuple, optional
        ``(σ1, σ2)``.

    Returns
    -------
    tuple
        ``(C, σ1, σ2, σ1·C)``.
    """
    clip, sigma = check_clip_sigma(clip, noise_multiplier)
    if any_inf(clip):
        raise ValueError("independent moment estimation needs a finite clip")
    if split is None:
        s1 = s2 = product(sigma, 2.0 ** 0.5)
    else:
        s1 = hyper("noise_multiplier_1", split[0], "[0, inf)")
        s2 = hyper("noise_multiplier_2", split[1], "[0, inf)")
    return clip, s1, s2, product(s1, clip)


def _project_ball(xp, u, radius):
    """Rows of ``u`` (R, d) projected onto the ℓ2 ball of ``radius`` (scalar or (R, 1))."""
    norm = xp.sqrt(xp.sum(u * u, axis=1, keepdims=True))
    factor = xp.where(norm > radius, radius / xp.where(norm > 0, norm, 1.0), 1.0)
    return u * factor


def noiseless_v_privatizer(clip, noise_multiplier, *, noise="gaussian") -> GradientTransformation:
    """Non-private oracle ([DESIGN] Alg. 9): ``m`` is fed the noisy ``g̃``, ``v`` the clipped but
    noiseless ``ḡ²``.  Releases ``ḡ`` without noise, so it declares
    :class:`~dpsim.privacy.events.NonPrivate`.  Its element is the
    :class:`~dpsim.transforms.elements.Moments` ``(release of ḡ, C, 0, noiseless=True)``, which
    the fused release reads.

    Parameters
    ----------
    clip : float or sequence of float
        The clipping norm C.
    noise_multiplier : float or sequence of float
        σ of the release fed to ``m``.
    noise : str
        The noise name.

    Returns
    -------
    GradientTransformation
        The oracle's privatizer (declares :class:`~dpsim.privacy.events.NonPrivate`).
    """
    clip, sigma = check_clip_sigma(clip, noise_multiplier)
    std = _noise_std(clip, sigma)
    src = NoiseSource(noise)

    def init(params):
        return PrivatizerState()

    def update(batch, state, params, ctx):
        b = float(batch.batch_size)
        total = batch.clipped_sum(_clip_arg(clip, ctx))
        clean = total / b
        g, ns = add_noise(total, std, b, ctx, src, state.noise)
        return MomentInputs(g, clean * clean), PrivatizerState(noise=ns)

    reason = ("non-private oracle: the second moment is fed the noiseless clipped gradient, which is "
              "released without noise")
    return GradientTransformation(init, update, (NonPrivate(reason),), element=Moments(
        Release(clip=clip, std=std, source=src if src.correlated else None), clip, 0.0,
        noiseless=True))


def public_subspace_privatizer(clip, noise_multiplier, *, k, noise="gaussian") -> GradientTransformation:
    """PDP-SGD (Zhou et al. 2021, baseline of [PAGAN] §6): the Gaussian release ``g̃`` projected
    onto the top-``k`` right singular vectors of the public per-example gradients at the current
    iterate (the top eigenvectors of ``(1/m) Σ g_j g_jᵀ``).  Needs public data.

    Parameters
    ----------
    clip : float or sequence of float
        The clipping norm C.
    noise_multiplier : float or sequence of float
        σ.
    k : int
        Dimension of the public subspace.
    noise : str
        The noise name.

    Returns
    -------
    GradientTransformation
        The privatizer.
    """
    k = positive_int("k", k)
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

    return GradientTransformation(inner.init, update, inner.privacy)
