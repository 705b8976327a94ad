"""DP² — private adaptive optimization with delayed preconditioners ([DP2] Alg. 1, App. D).

Phases alternate (:func:`~dpsim.transforms.alternate`): ``s1`` private-SGD steps, then ``s2``
private-adaptive steps.  With ``p = (t − 1) mod (s1 + s2)`` for the 1-based step ``t``:

* SGD phase (``p < s1``): ``g̃ = (1/b)(Σ clip(g_i, C1) + N(0, σ²C1²I))``; ``G ← G + g̃``;
  ``w ← w − η1 g̃``.
* At the switch (``p = s1``, before this step's update): the delayed preconditioner is refreshed
  with the average of the accumulated releases, ``v ← β v + (1−β)(G/s1)²`` (RMSProp),
  ``v ← v + (G/s1)²`` (AdaGrad) or the Yogi rule; optionally unbiased by subtracting
  ``σ²C1²/(s1 b²)`` ([DP2] §3.2); ``G ← 0``.
* Adaptive phase (``p ≥ s1``): precondition **before** privatizing
  (:func:`~dpsim.transforms.scale_then_privatize` without unscaling),
  ``g̃ = (1/b)(Σ clip(g_i / D, C2) + N(0, σ²C2²I))`` with ``D = √v + ε_a``; ``w ← w − η2 g̃``.
  These releases are not accumulated into ``G`` (official code).

Pieces: ``"privatizer"`` (one privatizer piece in both phases — one noise stream, one release per
step), ``"preconditioner"`` (:class:`~dpsim.transforms.preconditioners.DelayedState` ``(v, G)``),
``"lr"``.  Privacy: one Gaussian release of noise multiplier σ per step, as DP-SGD ([DP2] Thm 1).

Ablations ([DP2] App. D), the same pieces in another arrangement:

* ``dp2_noise_first`` ("variant 2"): the adaptive phase privatizes the raw gradient with ``C2`` and
  then divides by ``D`` (post-processing order).
* ``dp2_extra_query`` (Alg. 2, "variant 1"), delay ``s = s1``: every step releases the raw
  clipped gradient with ``C1`` into ``G``.  On steps with ``(t−1) mod s = 0`` the preconditioner is
  refreshed with ``(G/s)²`` (this step's release included), ``G`` reset, and the step uses that
  release (``η1``); on the other steps a second, preconditioned release with ``C2`` (piece
  ``"extra_privatizer"``, :func:`~dpsim.transforms.alongside`) is the step (``η2``) — two
  releases on those steps, both declared.

Non-private DP² (``delayed_rmsprop``, [DP2] §3.1): the same schedule with the mean gradient
(piece ``"gradient"``) instead of a privatizer.  ``s1``, ``s2`` are integers shared by all trials;
other hyperparameters may be per trial.

Ranges: ``s1``, ``s2`` positive integers (``s2`` defaults to ``s1``); ``lr``, ``lr2`` ∈ [0, ∞)
(``lr2`` defaults to ``lr``); ``clip``, ``clip2`` ∈ (0, ∞] (``clip2`` defaults to ``clip``);
``noise_multiplier`` ∈ [0, ∞); ``beta`` ∈ [0, 1); ``eps`` ∈ [0, ∞); ``unbias`` bool.
"""

from __future__ import annotations

import numpy as np

from .._validate import any_inf, hyper, positive_int, product
from ..privacy.privatizers import check_clip_sigma, gaussian_privatizer
from ..transforms.base import GradientTransformation, mean_gradient, named_chain
from ..transforms.combinators import alongside, alternate, scale_then_privatize
from ..transforms.preconditioners import accumulate, apply_delayed, by_rule, refresh
from ._hyper import BETA, CLIP, DELAY, EPS, LR, NOISE, SIGMA, Flag, OrNone
from ._registry import Optimizer, optimizer, register
from .baselines import learning_rate

__all__ = ["dp2_rmsprop", "dp2_adagrad", "dp2_yogi", "dp2_extra_query", "dp2_noise_first",
           "delayed_rmsprop", "extra_query_steps"]


def extra_query_steps(s: int, steps: int) -> np.ndarray:
    """Steps of ablation variant 1 that make a second release: ``(t−1) mod s ≠ 0``.

    Parameters
    ----------
    s : int
        The delay.
    steps : int
        Number of steps.

    Returns
    -------
    numpy.ndarray
        Boolean ``(steps,)`` mask.
    """
    return (np.arange(steps) % s) != 0


def _dp2(rule, order, *, s1, s2, lr, lr2, clip, clip2, noise_multiplier, beta, eps, unbias, noise):
    """DP² and its ablations (``order``: ``"dp2"``, ``"noise_first"``, ``"extra_query"``)."""
    s1 = positive_int("s1", s1)
    s2 = s1 if s2 is None else positive_int("s2", s2)
    lr2 = lr if lr2 is None else lr2
    P = by_rule(rule, beta, eps)
    eps = hyper("eps", eps, "[0, inf)")
    c1, sigma = check_clip_sigma(clip, noise_multiplier)
    bias = None
    if unbias:
        if any_inf(c1):
            raise ValueError("unbias=True needs a finite clip")
        bias = product(product(sigma, sigma), product(c1, c1))  # σ²C1², divided by s1 b² at refresh
    priv1 = ("privatizer", gaussian_privatizer(c1, sigma, noise=noise))
    priv2 = gaussian_privatizer(clip if clip2 is None else clip2, sigma, noise=noise)
    rf = refresh(P, s1, bias)

    def preconditioned(name):  # release of g / D with the delayed D
        return _delayed_scale_release(priv2, P, eps, name)

    if order == "extra_query":
        first = named_chain(priv1, ("preconditioner", accumulate(then_refresh=rf)),
                            learning_rate(lr))
        second = alongside(named_chain(priv1, ("preconditioner", accumulate())),
                           named_chain(preconditioned("extra_privatizer"), learning_rate(lr2, "lr2")))
        return alternate((1, first), (s1 - 1, second)) if s1 > 1 else first
    sgd = named_chain(priv1, ("preconditioner", accumulate()), learning_rate(lr))
    if order == "noise_first":
        adaptive = named_chain(("privatizer", priv2), ("preconditioner", apply_delayed(P)),
                               learning_rate(lr2, "lr2"))
    else:
        adaptive = named_chain(preconditioned("privatizer"), learning_rate(lr2, "lr2"))
    return alternate((s1, sgd), (s2, adaptive), on_switch=("preconditioner", rf))


def _delayed_scale_release(privatizer, P, eps, name):
    """The release of ``g / D`` with the delayed ``D``:
    ``scale_then_privatize(privatizer, apply_delayed(P), eps_scale=ε, unscale=False)`` (the
    reference: same named state, same declared release, same parts —
    :class:`~dpsim.transforms.elements.Scaled`), with the scale
    ``s = 1/(√max(v, 0) + ε)`` computed once per refresh instead of every step.

    Exact: ``s`` is a function of the delayed ``v`` alone, and ``v`` changes only at a refresh,
    which replaces the array (:func:`~dpsim.transforms.preconditioners.refresh` returns a new
    ``DelayedState``; no piece writes into ``v``).  So ``s`` is reused while the state holds the
    same ``v`` object, and recomputed by the reference's expression when it does not.  The cache
    lives in the run's :class:`~dpsim.transforms.StepContext` (one run, one cache), and only on
    host NumPy; other backends run the reference every step."""
    ref = scale_then_privatize(privatizer, apply_delayed(P), eps_scale=eps, unscale=False,
                               names=(name, "preconditioner"))
    key = ("dp2_delayed_scale", object())  # this piece's entry in the run's cache

    def update(batch, state, params, ctx):
        q = state["preconditioner"]
        cache = getattr(ctx, "_cache", None)
        if not (isinstance(cache, dict) and isinstance(q.v, np.ndarray)):
            return ref.update(batch, state, params, ctx)
        hit = cache.get(key)
        if hit is not None and hit[0] is q.v:
            s = hit[1]
        else:
            s = 1.0 / (np.sqrt(np.maximum(q.v, 0.0)) + ctx.hp(eps))
            cache[key] = (q.v, s)
        g, p = privatizer.update(batch.scaled(s), state[name], params, ctx)
        return g, {name: p, "preconditioner": q}

    return GradientTransformation(ref.init, update, ref.privacy, ref.names, element=ref.element)


#: Meanings of the DP² keywords (the Parameters sections :func:`register` writes).
_DOC = {
    "s1": "Delay: steps of the SGD phase, whose releases feed the preconditioner (shared by all "
          "trials).",
    "s2": "Steps of the adaptive phase (``None``: ``s1``; shared by all trials).",
    "lr": "Step size η1 of the SGD phase.",
    "lr2": "Step size η2 of the adaptive phase (``None``: ``lr``).",
    "clip": "Clipping norm C1 of the SGD-phase releases.",
    "clip2": "Clipping norm C2 of the adaptive-phase releases (``None``: ``clip``).",
    "beta": "Decay β of the delayed second moment (RMSProp and Yogi).",
    "eps": "Additive constant ε of ``D = √max(v, 0) + ε`` (unrelated to the privacy ε).",
    "unbias": "Subtract the noise term ``σ²C1²/(s1 b²)`` from ``(G/s1)²`` at each refresh "
              "([DP2] §3.2).",
}


@register(doc=_DOC)
def dp2_rmsprop(s1: DELAY = 10, s2: OrNone(DELAY) = None, lr: LR = 0.1, lr2: OrNone(LR) = None,
                clip: CLIP = 1.0, clip2: OrNone(CLIP) = None, noise_multiplier: SIGMA = 1.0,
                beta: BETA = 0.9, eps: EPS = 1e-8, unbias: Flag() = False, noise: NOISE = "gaussian") -> Optimizer:
    """DP² with a delayed RMSProp preconditioner: alternating private SGD and adaptive phases.

    Update rule. With ``p = (t-1) mod (s1+s2)`` for the 1-based step ``t``, ``ξ_t ~ N(0, I_d)``::

        p < s1 (SGD phase):   g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i, C1) + σC1 ξ_t)
                              G ← G + g̃_t;   w_t = w_{t-1} - η1 g̃_t
        p = s1 (switch):      v ← β v + (1-β) (G/s1)²;   G ← 0
        p ≥ s1 (adaptive):    D = √max(v, 0) + ε
                              g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i / D, C2) + σC2 ξ_t)
                              w_t = w_{t-1} - η2 g̃_t

    With ``unbias`` the noise term ``σ²C1²/(s1 b²)`` is subtracted from ``(G/s1)²`` first
    ([DP2] §3.2).
    Adaptive-phase releases are not added to ``G`` (the authors' code).

    Source: [DP2] Alg. 1, Thm 1 (ALGORITHMS §2.3).  One Gaussian release of multiplier σ per step:
    accounted as DP-SGD.

    Scale: ``s1`` (10 steps) and ``eps`` (1e-8) are absolute; [DP2] App. C.2 sets the delay in
    epochs (about 0.5–2 of ``n/b`` steps) and tunes ``eps`` on {1e-2 … 1e-7} (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> opt = dpsim.optimizers.dp2_rmsprop(s1=5, eps=1e-3)
    >>> opt.private, opt.hyperparameters["s2"]
    (True, None)
    """
    return optimizer(_dp2("rmsprop", "dp2", s1=s1, s2=s2, lr=lr, lr2=lr2, clip=clip, clip2=clip2,
                          noise_multiplier=noise_multiplier, beta=beta, eps=eps, unbias=unbias,
                          noise=noise))


@register(doc=_DOC)
def dp2_adagrad(s1: DELAY = 10, s2: OrNone(DELAY) = None, lr: LR = 0.1, lr2: OrNone(LR) = None,
                clip: CLIP = 1.0, clip2: OrNone(CLIP) = None, noise_multiplier: SIGMA = 1.0,
                beta: BETA = 0.9, eps: EPS = 1e-8, unbias: Flag() = False, noise: NOISE = "gaussian") -> Optimizer:
    """DP² with a delayed AdaGrad preconditioner (``beta`` unused).

    Update rule. With ``p = (t-1) mod (s1+s2)`` for the 1-based step ``t``, ``ξ_t ~ N(0, I_d)``::

        p < s1 (SGD phase):   g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i, C1) + σC1 ξ_t)
                              G ← G + g̃_t;   w_t = w_{t-1} - η1 g̃_t
        p = s1 (switch):      v ← v + (G/s1)²;   G ← 0
        p ≥ s1 (adaptive):    D = √max(v, 0) + ε
                              g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i / D, C2) + σC2 ξ_t)
                              w_t = w_{t-1} - η2 g̃_t

    Source: [DP2] Alg. 1 with AdaGrad, App. D (ALGORITHMS §2.3).  One Gaussian release per step:
    accounted as DP-SGD.

    Scale: ``s1``, ``eps`` as in ``dp2_rmsprop`` (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> dpsim.optimizers.dp2_adagrad(s1=3).private
    True
    """
    return optimizer(_dp2("adagrad", "dp2", s1=s1, s2=s2, lr=lr, lr2=lr2, clip=clip, clip2=clip2,
                          noise_multiplier=noise_multiplier, beta=beta, eps=eps, unbias=unbias,
                          noise=noise))


@register(doc=_DOC)
def dp2_yogi(s1: DELAY = 10, s2: OrNone(DELAY) = None, lr: LR = 0.1, lr2: OrNone(LR) = None,
             clip: CLIP = 1.0, clip2: OrNone(CLIP) = None, noise_multiplier: SIGMA = 1.0,
             beta: BETA = 0.9, eps: EPS = 1e-8, unbias: Flag() = False, noise: NOISE = "gaussian") -> Optimizer:
    """DP² with a delayed Yogi preconditioner.

    Update rule. With ``p = (t-1) mod (s1+s2)`` for the 1-based step ``t``, ``ξ_t ~ N(0, I_d)``::

        p < s1 (SGD phase):   g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i, C1) + σC1 ξ_t)
                              G ← G + g̃_t;   w_t = w_{t-1} - η1 g̃_t
        p = s1 (switch):      v ← v - (1-β) sign(v - (G/s1)²) (G/s1)²;   G ← 0
        p ≥ s1 (adaptive):    D = √max(v, 0) + ε
                              g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i / D, C2) + σC2 ξ_t)
                              w_t = w_{t-1} - η2 g̃_t

    Source: [DP2] App. D, with the standard Yogi rule of Zaheer et al. 2018 (ALGORITHMS §1, §2.3).
    One Gaussian release per step: accounted as DP-SGD.

    Scale: ``s1``, ``eps`` as in ``dp2_rmsprop`` (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> dpsim.optimizers.dp2_yogi(s1=3, s2=2).hyperparameters["s2"]
    2
    """
    return optimizer(_dp2("yogi", "dp2", s1=s1, s2=s2, lr=lr, lr2=lr2, clip=clip, clip2=clip2,
                          noise_multiplier=noise_multiplier, beta=beta, eps=eps, unbias=unbias,
                          noise=noise))


@register(doc=_DOC)
def dp2_extra_query(s1: DELAY = 10, s2: OrNone(DELAY) = None, lr: LR = 0.1, lr2: OrNone(LR) = None,
                    clip: CLIP = 1.0, clip2: OrNone(CLIP) = None, noise_multiplier: SIGMA = 1.0,
                    beta: BETA = 0.9, eps: EPS = 1e-8, unbias: Flag() = False, noise: NOISE = "gaussian") -> Optimizer:
    """DP² ablation 1 ("extra query"): a raw release into ``G`` every step, and a second one.

    Update rule (delay ``s = s1``; ``s2`` unused; ``D = √max(v, 0) + ε``)::

        every step:          r_t = (1/b) (Σ_{i∈B_t} clip(g_i, C1) + σC1 ξ_t);   G ← G + r_t
        (t-1) mod s = 0:     v ← β v + (1-β) (G/s)²;   G ← 0;   w_t = w_{t-1} - η1 r_t
        otherwise:           g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i / D, C2) + σC2 ξ'_t)
                             w_t = w_{t-1} - η2 g̃_t

    Source: [DP2] App. D, Alg. 2 (ALGORITHMS §2.3).  Two releases on the steps that make the second
    one, both declared: its ε exceeds DP²'s at equal σ.

    Scale: ``s1``, ``eps`` as in ``dp2_rmsprop`` (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> dpsim.optimizers.dp2_extra_query(s1=4).transform.names
    ('privatizer', 'preconditioner', 'lr', 'extra_privatizer')
    """
    return optimizer(_dp2("rmsprop", "extra_query", s1=s1, s2=s2, lr=lr, lr2=lr2, clip=clip,
                          clip2=clip2, noise_multiplier=noise_multiplier, beta=beta, eps=eps,
                          unbias=unbias, noise=noise))


@register(doc=_DOC)
def dp2_noise_first(s1: DELAY = 10, s2: OrNone(DELAY) = None, lr: LR = 0.1, lr2: OrNone(LR) = None,
                    clip: CLIP = 1.0, clip2: OrNone(CLIP) = None, noise_multiplier: SIGMA = 1.0,
                    beta: BETA = 0.9, eps: EPS = 1e-8, unbias: Flag() = False, noise: NOISE = "gaussian") -> Optimizer:
    """DP² ablation 2 ("noise first"): the adaptive phase privatizes, then divides by ``D``.

    Update rule. As :func:`dp2_rmsprop` except the adaptive phase::

        p ≥ s1:   g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i, C2) + σC2 ξ_t) / D
                  w_t = w_{t-1} - η2 g̃_t

    Source: [DP2] App. D (ALGORITHMS §2.3).  One Gaussian release per step: accounted as DP-SGD.

    Scale: ``s1``, ``eps`` as in ``dp2_rmsprop`` (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> dpsim.optimizers.dp2_noise_first(s1=2).private
    True
    """
    return optimizer(_dp2("rmsprop", "noise_first", s1=s1, s2=s2, lr=lr, lr2=lr2, clip=clip,
                          clip2=clip2, noise_multiplier=noise_multiplier, beta=beta, eps=eps,
                          unbias=unbias, noise=noise))


@register(doc=_DOC)
def delayed_rmsprop(s1: DELAY = 10, s2: OrNone(DELAY) = None, lr: LR = 0.1, lr2: OrNone(LR) = None,
                    beta: BETA = 0.9, eps: EPS = 1e-8) -> Optimizer:
    """Non-private DP²: the delayed-preconditioner schedule without clipping or noise.  Not private.

    Update rule (``p = (t-1) mod (s1+s2)``, ``g_t`` the minibatch mean gradient)::

        p < s1:   G ← G + g_t;   w_t = w_{t-1} - η g_t
        p = s1:   v ← β v + (1-β) (G/s1)²;   G ← 0
        p ≥ s1:   w_t = w_{t-1} - η2 g_t / (√v + ε)

    Source: [DP2] §3.1 (ALGORITHMS §2.3).

    Scale: ``s1``, ``eps`` as in ``dp2_rmsprop`` (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> dpsim.optimizers.delayed_rmsprop(s1=2).private
    False
    """
    s1 = positive_int("s1", s1)
    s2 = s1 if s2 is None else positive_int("s2", s2)
    P = by_rule("rmsprop", beta, eps)
    grad = ("gradient", mean_gradient())
    rf = refresh(P, s1)
    sgd = named_chain(grad, ("preconditioner", accumulate()), learning_rate(lr))
    adaptive = named_chain(grad, ("preconditioner", apply_delayed(P)),
                           learning_rate(lr, "lr") if lr2 is None else learning_rate(lr2, "lr2"))
    return optimizer(alternate((s1, sgd), (s2, adaptive), on_switch=("preconditioner", rf)))
