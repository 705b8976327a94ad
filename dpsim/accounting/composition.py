"""ε of a run: step types composed over the steps (:func:`epsilon_from_releases`), the
single-type shortcut :func:`epsilon`, what one example sees under cyclic sampling, and the
composed RDP curve (:func:`rdp_curve`)."""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..sampling import CYCLIC, cyclic_rate
from .accountants import _compose, _epsilon_key, _quiet_absl, _rdp_accountant
from .options import (_check_count, _check_delta, _check_noise, _check_options, _check_rate,
                      _sampling)
from .releases import _event, _no_cyclic, _normalize, effective_noise_multiplier



def epsilon_from_releases(releases, sample_rate, delta, *, accountant="pld",
                          sampling="poisson", unamplified=()) -> float:
    """ε at ``delta`` for a run made of several step types.

    ``releases`` is a sequence of ``(noise_multipliers, count)``: ``count`` steps, each drawing a
    batch with ``sampling`` at rate ``sample_rate`` and making one Gaussian release per entry of
    ``noise_multipliers`` (a float, or a tuple for several releases on the *same* batch; each
    release has ℓ2 sensitivity 1 in units of the clip norm).  A step type costs as one release
    with ``σ_eff = (Σ σ_i^{-2})^{-1/2}``; step types compose.  Example: a variant that makes a
    second release on every k-th step's batch is ``[((σ,), T - T_k), ((σ, σ2), T_k)]``.

    Returns ``inf`` if any counted step has σ_eff = 0, and 0 for no (costly) steps.  Which
    accountant and neighbouring relation apply is in the module docstring.

    ``unamplified``: noise multipliers of whole-run Gaussian mechanisms composed with the rest
    *without* amplification by sampling (correlated noise: a DP-MF run with unrestricted
    participation is one Gaussian mechanism of noise multiplier ``σ·sens(M)/worst_sens(M)``, see
    :mod:`dpsim.privacy.mf`); they combine as ``(Σ σ_i^{-2})^{-1/2}``.
    """
    q = _check_rate(sample_rate)
    d = _check_delta(delta)
    _check_options(accountant, sampling)
    _no_cyclic(sampling, "epsilon_from_releases")
    un = effective_noise_multiplier(tuple(unamplified)) if len(unamplified) else math.inf
    return _epsilon_key(_normalize(releases), q, d, accountant, sampling, un)


def epsilon(noise_multiplier, sample_rate, steps, delta, *, accountant="pld",
            releases_per_step=1, sampling="poisson") -> float:
    """ε at ``delta`` after ``steps`` steps of the subsampled Gaussian mechanism.

    Each step draws a batch at rate ``sample_rate`` and makes ``releases_per_step`` Gaussian
    releases with noise multiplier σ from that same batch — exactly one release with σ/√r (see
    module docstring).  ``accountant``: ``"pld"`` (default, tight) or ``"rdp"``; ``sampling``:
    ``"poisson"`` (add/remove), ``"fixed"`` (RDP only, replace-one), ``"replacement"`` (error),
    ``"cyclic_poisson:<k>"`` (add/remove: each example sees ``⌈steps/k⌉`` steps at rate
    ``min(1, k·sample_rate)``; also the amplified ε of banded DP-MF with bandwidth ≤ k).
    """
    sigma = _check_noise(noise_multiplier)
    q = _check_rate(sample_rate)
    steps = _check_count(steps, "steps")
    d = _check_delta(delta)
    r = _check_releases_per_step(releases_per_step)
    _check_options(accountant, sampling)
    q, steps, sampling = _per_example(q, steps, sampling)
    # r equal releases on one batch are one release with σ/√r (effective_noise_multiplier's own
    # expression, so the same float and cache key as epsilon_from_releases), without an r-tuple
    key = _normalize([(_equal_releases(sigma, r), steps)])
    return _epsilon_key(key, q, d, accountant, sampling, math.inf)  # same cache key as epsilon_from_releases


def _equal_releases(sigma: float, r: int) -> tuple:
    """``(σ_eff,)`` of ``r`` equal releases with σ: ``σ/√r`` (0 and ∞ stay as they are)."""
    if r == 1 or sigma == 0.0 or math.isinf(sigma):
        return (sigma,)
    return (sigma / math.sqrt(r),)


def _per_example(q: float, steps: int, sampling):
    """What one example sees: cyclic Poisson sampling with ``k`` groups is ``⌈steps/k⌉`` Poisson
    steps at rate ``k·q`` (at most 1); the other samplers are unchanged."""
    kind, k = _sampling(sampling)
    if kind != CYCLIC:
        return q, steps, sampling
    check_cyclic_rate(q, k)
    return cyclic_rate(q, k), -(-steps // k), "poisson"


def check_cyclic_rate(q: float, k: int) -> None:
    """Refuse cyclic Poisson sampling whose groups cannot supply the nominal batch: ``k·q > 1``
    (the sampler needs ``b·k ≤ n``; :func:`dpsim.sampling.check_sampling`)."""
    if k * q > 1.0 + 1e-12:
        raise ValueError(f"sampling='cyclic_poisson:{k}' at sample_rate={q:g} is impossible: "
                         f"each of the {k} groups would need a rate k*sample_rate = {k * q:g} > 1 "
                         f"(batch_size*k must be <= n); use k <= {max(1, int(1.0 / q + 1e-9))}")


def _check_releases_per_step(r) -> int:
    ok = (isinstance(r, numbers.Integral) and not isinstance(r, bool)) or (
        isinstance(r, float) and r.is_integer())
    if not ok or int(r) < 1:
        raise ValueError(f"releases_per_step must be an integer >= 1, "
                         f"got releases_per_step={r!r}")
    return int(r)


def rdp_curve(releases, sample_rate, *, sampling="poisson") -> tuple[np.ndarray, np.ndarray]:
    """``(orders, rdp)``: the composed RDP curve of ``releases`` as the ``"rdp"`` accountant sees it.

    ``orders`` is :data:`RDP_ORDERS` (Poisson, add/remove) or :data:`RDP_ORDERS_FIXED` (fixed,
    replace-one); ``rdp[i]`` is the Rényi divergence bound at ``orders[i]`` (``inf`` where the
    library excludes an order).  Useful for converting with another rule or to zCDP.
    """
    q = _check_rate(sample_rate)
    _check_options("rdp", sampling)
    _no_cyclic(sampling, "rdp_curve")
    key = _normalize(releases)
    acc = _rdp_accountant(sampling)
    if any(s == 0.0 for s, _ in key):
        return acc.orders, np.full(len(acc.orders), np.inf)
    with _quiet_absl():
        _compose(acc, _event(key, q, sampling))
    return acc.orders, acc.rdp
