"""Step types -> ``dp_accounting`` events: merging the releases that share a batch into one
Gaussian (:func:`effective_noise_multiplier`) and the event of a run (:func:`make_event`)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # pragma: no cover - annotations only; the library is imported on first use
    import dp_accounting

from ..sampling import CYCLIC
from .options import _check_count, _check_noise, _check_options, _check_rate, _is_real, _lib, _sampling



def effective_noise_multiplier(noise_multipliers) -> float:
    """Noise multiplier of one Gaussian equivalent to several Gaussians on the same batch.

    ``σ_eff = (Σ_i σ_i^{-2})^{-1/2}``; ``σ/√r`` exactly (in floating point) when all r are equal.
    ``σ_i = ∞`` contributes nothing; any ``σ_i = 0`` gives 0; no finite ``σ_i`` gives ``∞``.
    See the module docstring for why this is exact for releases sharing a batch (and a valid
    bound when the queries are chosen adaptively).
    """
    if _is_real(noise_multipliers):
        noise_multipliers = (noise_multipliers,)
    sig = [_check_noise(s) for s in noise_multipliers]
    if not sig:
        raise ValueError("noise_multipliers must name at least one release, got ()")
    if any(s == 0.0 for s in sig):
        return 0.0
    finite = [s for s in sig if math.isfinite(s)]
    if not finite:
        return math.inf
    if all(s == finite[0] for s in finite):
        return finite[0] / math.sqrt(len(finite))
    return math.fsum(s ** -2.0 for s in finite) ** -0.5


def _normalize(releases) -> tuple[tuple[float, int], ...]:
    """Validate step types and merge them into sorted ``((σ_eff, count), ...)``, dropping free ones."""
    if isinstance(releases, (str, bytes)) or not isinstance(releases, Iterable):
        raise ValueError(f"releases must be a sequence of (noise_multipliers, count) pairs, "
                         f"got releases={releases!r}")
    merged: dict[float, int] = {}
    for item in releases:
        try:
            sig, count = item
        except (TypeError, ValueError):
            raise ValueError(f"each release must be a (noise_multipliers, count) pair, "
                             f"got {item!r}") from None
        count = _check_count(count, "count")
        s = effective_noise_multiplier(sig)
        if count == 0 or math.isinf(s):
            continue
        merged[s] = merged.get(s, 0) + count
    return tuple(sorted(merged.items()))


def _wor_fraction(q: float) -> tuple[int, int]:
    """(sample_size, dataset_size) with ratio q, for ``SampledWithoutReplacementDpEvent``."""
    f = Fraction(q).limit_denominator(10 ** 12)
    return f.numerator, f.denominator


def _event(key, q: float, sampling: str, unamplified: float = math.inf) -> dp_accounting.DpEvent:
    events = []
    if math.isfinite(unamplified):  # a whole-run Gaussian mechanism (correlated noise, DP-MF)
        s = unamplified if sampling == "poisson" else unamplified / 2.0
        events.append(_lib.ev.GaussianDpEvent(s))
    for s, count in key:
        if sampling == "poisson":
            ev = _lib.ev.PoissonSampledDpEvent(q, _lib.ev.GaussianDpEvent(s))
        else:  # "fixed": replace-one sensitivity is 2C, so the library's multiplier is σ/2
            b, n = _wor_fraction(q)
            ev = _lib.ev.SampledWithoutReplacementDpEvent(n, b, _lib.ev.GaussianDpEvent(s / 2.0))
        events.append(_lib.ev.SelfComposedDpEvent(ev, count))
    if not events:
        return _lib.ev.NoOpDpEvent()
    return events[0] if len(events) == 1 else _lib.ev.ComposedDpEvent(events)


def make_event(releases, sample_rate, *, sampling="poisson") -> dp_accounting.DpEvent:
    """The ``dp_accounting`` event for ``releases`` (see :func:`epsilon_from_releases`).

    Poisson: ``SelfComposed(PoissonSampled(q, Gaussian(σ_eff)), count)`` per step type, for
    add/remove accountants.  Fixed: ``SelfComposed(SampledWithoutReplacement(n, b,
    Gaussian(σ_eff/2)), count)`` for a REPLACE_ONE RDP accountant (sensitivity 2C under
    replace-one).  Releases costing nothing give ``NoOpDpEvent``.
    """
    q = _check_rate(sample_rate)
    _no_cyclic(sampling, "make_event")
    if sampling == "replacement":
        _check_options("rdp", sampling)
    return _event(_normalize(releases), q, sampling)


def _no_cyclic(sampling, what: str) -> None:
    """Refuse cyclic sampling where whole-run step counts cannot be mapped to groups."""
    kind, k = _sampling(sampling)
    if kind == CYCLIC:
        raise ValueError(
            f"{what} takes whole-run step counts, which do not say which group's steps they are; "
            f"for sampling={sampling!r} pass the step types one example's group sees, with "
            f"sampling='poisson' and sample_rate=q_k=min(1, {k}*b/n) (dpsim.sampling.cyclic_rate), "
            f"or use accounting.epsilon / privacy_record")
