"""AdaGrad with independent moment estimation (IME), the winning row of [DESIGN]'s 1-D table.

[DESIGN] §5.1 (Ganesh, McMahan, Thakurta 2025) compares, on 1-D sparse logistic regression with
batch 1 and one epoch, AdaGrad via post-processing with "AdaGrad via independent moment
estimation": the gradient and its square are noised *separately*, and the noisy square updates
AdaGrad's accumulator.  The paper's formulas were lost in the text extraction dpsim works from;
the rule below is the reconstruction of ALGORITHMS.md §2.6 applied to AdaGrad (Alg. 3 of the
paper) instead of Adam (Alg. 6):

    ḡ_t  = (1/b) Σ_{i∈B_t} clip(g_i, C)                       (clipped mean)
    g̃_t  = ḡ_t + (σ1 C / b) · u_t                             (release 1: the gradient)
    s̃_t  = ū_t² + σ2 Δ₂ · u'_t,  ū_t = ḡ_t or Π_C(ḡ_t)          (release 2: its square)
    v_t  = v_{t−1} + s̃_t                                      (AdaGrad accumulator, may be < 0)
    w_t  = w_{t−1} − η g̃_t / (√max(v_t, 0) + ε)

with ``u_t, u'_t`` the step noise of the chosen noise source (i.i.d. ``N(0, I)``, or DP-MF
correlated noise ``noise="banded:<k>"``/``"sqrt_toeplitz"``: both releases then use the same
strategy, each with its own stream).  The paper guards the possibly negative ``v_t`` by a modified
per-round learning rate whose formula was lost; dpsim takes the positive part and a stability
constant ε (ALGORITHMS.md §2.6: "use max(v, 0) before √"), which the experiments tune.

**Privacy declaration and sensitivity.**  The two releases are the ones of
:func:`dpsim.privacy.privatizers.ime_privatizer`, which declares them (two events, one per
release) and documents the sensitivities; this module adds no release of its own:

* release 1 has ℓ2 sensitivity ``C`` (the clipped sum; add/remove or, doubled by the accountant,
  replace-one);
* release 2 has sensitivity ``Δ₂ = (2b−1)C²/b²`` with fixed-size batches (``‖ḡ‖ ≤ C`` always) and
  ``Δ₂ = 2C²/b`` otherwise (the mean projected onto the C-ball first: ``‖u'² − u²‖ ≤
  ‖u' − u‖·‖u' + u‖_∞ ≤ (C/b)(2C)``), each noised at ``σ2 Δ₂``;
* the whitened shift of the pair has squared norm at most ``σ1⁻² + σ2⁻²``, so with the default
  split ``σ1 = σ2 = √2 σ`` one step of IME costs exactly one Gaussian release at σ: **IME-AdaGrad
  is accounted as DP-AdaGrad with noise multiplier σ** (same ε, same sampler rules, DP-MF
  amplification included).  ``ime_adagrad_free`` (σ1 = σ2 = σ, the paper's "for free" row) pays
  for two releases at σ: its ε is larger and is reported as such, never as DP-AdaGrad's.

Everything after the releases (the accumulator, the positive part, the division, the step) is
post-processing.  ``C`` is a hyperparameter (no data-dependent constant).

Ranges: ``lr`` ∈ [0, ∞); ``eps`` ∈ [0, ∞); ``clip`` ∈ (0, ∞) (the square's sensitivity needs a
finite clip); ``noise_multiplier`` ∈ [0, ∞); ``noise``: a noise name of
:class:`~dpsim.privacy.noise.NoiseSource`.  Pieces: ``"privatizer"``, ``"preconditioner"``
(``PreconditionState(v)``), ``"lr"``.

Registration: the module registers ``ime_adagrad`` and ``ime_adagrad_free`` when imported
(:func:`dpsim.optimizers.get` finds them once :mod:`dpsim.optimizers` imports this module).
"""

from __future__ import annotations

from .._validate import hyper
from ..privacy.privatizers import ime_privatizer
from ..transforms.base import named_chain
from ..transforms.preconditioners import adagrad as adagrad_rule
from ..transforms.preconditioners import precondition
from ._hyper import EPS, LR, NOISE, SIGMA, Real
from ._registry import Optimizer, optimizer, register
from .baselines import learning_rate

__all__ = ["ime_adagrad", "ime_adagrad_free"]

#: IME releases the square of the clipped mean, whose sensitivity needs a finite clip.
CLIP_FINITE = Real("(0, inf)", typical=(0.05, 10.0), log=True)
_DOC = {"clip": "Per-example clipping norm C (finite: the square's sensitivity needs it)."}


@register(doc=_DOC)
def ime_adagrad(lr: LR = 0.1, eps: EPS = 1e-8, clip: CLIP_FINITE = 1.0,
                noise_multiplier: SIGMA = 1.0, noise: NOISE = "gaussian") -> Optimizer:
    """AdaGrad with independent moment estimation: ``v`` is fed a separate release of ``ḡ²``.

    Update rule (``ḡ_t = (1/b) Σ_{i∈B_t} clip(g_i, C)``; ``σ₁ = σ₂ = √2 σ``; ``ū_t = ḡ_t`` with
    fixed-size batches, else ``ḡ_t`` projected onto the C-ball; ``Δ₂`` as in the module docstring)::

        g̃_t = ḡ_t + (σ₁C/b) ξ_t                         (release 1)
        s̃_t = ū_t² + σ₂Δ₂ ξ'_t                          (release 2)
        v_t = v_{t-1} + s̃_t
        w_t = w_{t-1} - η g̃_t / (√max(v_t, 0) + ε)

    Source: [DESIGN] §5.1's 1-D table, Alg. 3 with Kalinin et al. 2025's IME (ALGORITHMS §2.6;
    **reconstructed**).  The pair of releases costs one DP-SGD step at σ: accounted as DP-AdaGrad.

    Scale: ``eps`` (1e-8) is absolute, but ``v`` sums noisy squares: set it relative to that noise
    (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> opt = dpsim.optimizers.ime_adagrad(clip=0.5)
    >>> opt.private, len(opt.events)
    (True, 2)
    """
    tx = named_chain(("privatizer", ime_privatizer(clip, noise_multiplier, noise=noise)),
                     ("preconditioner", precondition(adagrad_rule(eps))), learning_rate(lr))
    return optimizer(tx)


@register(doc=_DOC)
def ime_adagrad_free(lr: LR = 0.1, eps: EPS = 1e-8, clip: CLIP_FINITE = 1.0,
                     noise_multiplier: SIGMA = 1.0, noise: NOISE = "gaussian") -> Optimizer:
    """The "IME for free" comparator: :func:`ime_adagrad` with both releases at σ.

    Update rule: that of :func:`ime_adagrad` with ``σ₁ = σ₂ = σ``::

        g̃_t = ḡ_t + (σC/b) ξ_t,   s̃_t = ū_t² + σΔ₂ ξ'_t
        v_t = v_{t-1} + s̃_t
        w_t = w_{t-1} - η g̃_t / (√max(v_t, 0) + ε)

    Source: [DESIGN] §5.1's table (ALGORITHMS §2.6).  Two releases per step at σ, accounted as
    such: its ε is larger than DP-AdaGrad's at the same σ.

    Scale: ``eps`` as in ``ime_adagrad`` (docs/defaults.md).

    Examples
    --------
    >>> import dpsim
    >>> "for free" in dpsim.optimizers.ime_adagrad_free().note
    True
    """
    sigma = hyper("noise_multiplier", noise_multiplier, "[0, inf)")
    tx = named_chain(("privatizer", ime_privatizer(clip, sigma, split=(sigma, sigma), noise=noise)),
                     ("preconditioner", precondition(adagrad_rule(eps))), learning_rate(lr))
    return optimizer(
        tx,
        note="IME 'for free' comparator: both moments released at σ; its ε (two releases per step) "
             "is larger than DP-AdaGrad's and must not be reported as DP-AdaGrad's")
