"""Hypothesis strategies for dpsim: problems, optimizers, privacy parameters, gradient tables and
whole simulations.

Every strategy draws *valid* configurations only: a value the library's own validation rejects is
a defect of the strategy (the test suite runs thousands of draws through :func:`dpsim.simulate`
and the accountant to show there is none).  Sizes are small so a property runs in milliseconds,
and every draw shrinks toward the smallest, most default-like case (``n`` and ``d`` toward their
minimum, reals toward the low end of their window, choices toward the first option), so a failing
property prints a readable counterexample such as ``dp_sgd(lr=0.0001, clip=0.05, ...)``.

Optimizer hyperparameters come from the declarations of :mod:`dpsim.optimizers`
(:func:`dpsim.optimizers.hyperparameters`): each keyword's spec gives its kind, its valid range and
a *generation window* inside that range, so a newly registered optimizer is covered without any
change here.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from .. import accounting, optimizers as _optimizers, problems as _problems
from ..engine import simulate
from ..optimizers import _hyper
from ..optimizers import ctcdp as _ctcdp
from ..optimizers._registry import _REGISTRY
from ..audit import GradientTable as _AuditTable
from ..privacy.events import TcdpBudget

__all__ = ["problems", "optimizers", "hyperparameter", "privacy_params", "PrivacyParams",
           "bound_params", "BoundParams", "dp2_phases", "DP2Phases", "dp_budgets", "DPBudget",
           "tcdp_params", "TcdpParams", "seeds", "gradient_tables", "GradientTable", "simulations",
           "Simulation", "PROBLEM_KINDS", "BATCH_SIZE", "STEPS", "RHO", "OMEGA"]

_SEEDS = st.integers(0, 2 ** 16)


def seeds(max_seed: int = 2 ** 16):
    """Seeds for a simulation or a random generator: integers in ``[0, max_seed]``, shrinking to 0.

    Parameters
    ----------
    max_seed : int
        The largest seed.

    Returns
    -------
    hypothesis.strategies.SearchStrategy
        Of ints.

    Examples
    --------
    >>> from hypothesis import find
    >>> from dpsim.testing.strategies import seeds
    >>> find(seeds(), lambda seed: seed >= 3)
    3
    """
    if isinstance(max_seed, bool) or not isinstance(max_seed, int) or max_seed < 0:
        raise ValueError(f"max_seed must be a non-negative integer, got max_seed={max_seed!r}")
    return _SEEDS if max_seed == 2 ** 16 else st.integers(0, max_seed)


def _real(lo, hi, *, log=False):
    """Floats in the closed window ``[lo, hi]`` (log scale: ``exp`` of a uniform exponent)."""
    if lo == hi:
        return st.just(float(lo))
    if log:  # lo·(hi/lo)^u: shrinks (u → 0) to the low end, which it hits exactly
        return st.floats(0.0, 1.0).map(lambda u: lo if u == 0 else float(min(max(lo * (hi / lo) ** u, lo), hi)))
    return st.floats(float(lo), float(hi), allow_nan=False, allow_infinity=False, allow_subnormal=False)


# ------------------------------------------------------------------------------------------------
# problems


def _n(min_n, max_n):
    return st.integers(min_n, max_n)


def _problem_args(kind, min_n, max_n, max_d):
    d = st.integers(1, max_d)
    n = _n(min_n, max_n)
    if kind == "least_squares":
        return st.fixed_dictionaries({"n": n, "d": d,
            "condition": _real(1.0, 100.0, log=True), "noise": _real(0.0, 1.0),
            "rotate": st.booleans()})
    if kind == "logistic_regression":
        return st.fixed_dictionaries({"n": n, "d": d,
            "density": st.one_of(st.just(1.0), _real(0.2, 1.0)), "reg": _real(0.0, 1e-2),
            "signal": _real(0.0, 3.0)})
    if kind == "absolute_regression":
        return st.fixed_dictionaries({"n": n, "d": d,
            "scales": st.sampled_from(["power", "ones"]), "tau": _real(0.0, 0.1),
            "domain": st.sampled_from(["box", None])})
    if kind == "linear_box":
        return st.fixed_dictionaries({"n": n, "d": d,
            "scales": st.sampled_from(["power", "ones"]), "bias": _real(0.0, 1.0)})
    if kind == "random_quadratic":
        return st.fixed_dictionaries({"m": n, "d": d, "reg": _real(0.0, 0.1)})
    if kind == "sparse_logistic_1d":
        # ≥ 50 non-zero examples and |w*| ≤ 2: a separable draw (no finite optimum) has
        # probability below 1e-9
        return st.fixed_dictionaries({"n": _n(max(min_n, 100), max(max_n, 100)),
            "zero_fraction": _real(0.0, 0.5), "w_star": _real(-2.0, 2.0)})
    if kind == "quadratic_2d":
        return st.fixed_dictionaries({"a": _real(0.01, 10.0, log=True), "b": _real(0.01, 10.0, log=True),
                                      "noise": _real(0.0, 2.0), "n": n,
                                      "noise_shape": st.sampled_from(["hessian", "isotropic"])})
    raise ValueError(f"unknown problem kind {kind!r}; expected one of {', '.join(PROBLEM_KINDS)}")


PROBLEM_KINDS = tuple(_problems.names())


def problems(kind=None, *, max_d: int = 8, min_n: int = 20, max_n: int = 200):
    """Problems of :mod:`dpsim.problems` with valid factory arguments.

    ``kind``: a factory name, a sequence of names, or ``None`` (every factory of
    ``dpsim.problems.FACTORIES`` — a new factory must be added to this module's table, which the
    test suite checks).  ``max_d`` bounds the dimension (``quadratic_2d`` is always 2-D and
    ``sparse_logistic_1d`` 1-D), ``min_n``/``max_n`` the number of examples (``sparse_logistic_1d``
    uses at least 100 so that its data are not separable).  Draws a built
    :class:`~dpsim.problems.Problem`; its repr shows the factory call.

    Parameters
    ----------
    kind : str or sequence of str, optional
        Factory names (default: all).
    max_d : int
        The largest dimension.
    min_n : int
        The fewest examples.
    max_n : int
        The most examples.

    Returns
    -------
    hypothesis.strategies.SearchStrategy
        Of built problems.
    """
    kinds = PROBLEM_KINDS if kind is None else ((kind,) if isinstance(kind, str) else tuple(kind))
    if not kinds:
        raise ValueError("kind must name at least one problem factory")
    for k in kinds:
        if k not in PROBLEM_KINDS:
            raise ValueError(f"unknown problem kind {k!r}; expected one of {', '.join(PROBLEM_KINDS)}")
    if not (isinstance(max_d, int) and max_d >= 1):
        raise ValueError(f"max_d must be a positive integer, got max_d={max_d!r}")
    if not (isinstance(min_n, int) and isinstance(max_n, int) and 1 <= min_n <= max_n):
        raise ValueError(f"need 1 <= min_n <= max_n, got min_n={min_n!r}, max_n={max_n!r}")

    def build(kind):
        return st.builds(lambda args, seed: _problems.get(kind, seed=seed, **args),
                         _problem_args(kind, min_n, max_n, max_d), _SEEDS)

    return st.one_of(*[build(k) for k in kinds])


# ------------------------------------------------------------------------------------------------
# optimizers


def hyperparameter(spec, window=None, *, name: str = "value"):
    """A strategy for one hyperparameter from its declared spec (:mod:`dpsim.optimizers._hyper`):
    reals from the generation window, integers from theirs, choices and noises from their typical
    values, ``None`` or the inner value for optional ones.  ``None`` for an opaque spec without
    examples (keep the default).

    ``window`` narrows the draw for a property that needs part of the range (a bound stated for
    ``C < 1``, a Monte Carlo that must stay fast), and is checked against the *valid* interval of
    the spec, so a property can never draw a value the library rejects:

    * ``(lo, hi)`` — the closed window ``[lo, hi]`` (integers for an integer spec); reals are
      drawn on a log scale when the spec is (and ``lo > 0``), or with ``(lo, hi, "log")``;
    * a list of values — one of them (``st.sampled_from``, shrinking to the first);
    * a single number (or string) — exactly that value.

    Every end / listed value is validated by the spec (``spec.validate``), so an invalid window is
    a ``ValueError`` naming ``name`` and the value, raised when the strategy is built.

    Parameters
    ----------
    spec : Spec
        The declared spec.
    window : tuple, list, float or str, optional
        A narrower window, checked against the spec.
    name : str
        The hyperparameter's name in errors.

    Returns
    -------
    hypothesis.strategies.SearchStrategy or None
        ``None`` for an opaque spec without examples.

    Raises
    ------
    ValueError
        For a window outside the valid range.

    Examples
    --------
    >>> from hypothesis import find
    >>> from dpsim.optimizers._hyper import BETA
    >>> from dpsim.testing.strategies import hyperparameter
    >>> find(hyperparameter(BETA, (0.5, 0.9)), lambda beta: True)
    0.5
    """
    if window is not None:
        return _windowed(spec, window, name)
    if isinstance(spec, _hyper.Real):
        lo, hi = spec.typical
        draws = _real(lo, hi, log=spec.log)
        # a window from 0 draws values down to 1e-308; below 1e-100 they are read as 0 (the
        # accountants refuse a noise multiplier in (0, 1e-100): dpsim.accounting.check_release_noise)
        return draws.map(_flush_tiny) if lo == 0 and not spec.log else draws
    if isinstance(spec, _hyper.PositiveInt):
        return st.integers(*spec.typical)
    if isinstance(spec, (_hyper.Choice, _hyper.Noise)):
        return st.sampled_from(tuple(spec.typical))
    if isinstance(spec, _hyper.Flag):
        return st.booleans()
    if isinstance(spec, _hyper.OrNone):
        inner = hyperparameter(spec.inner) if spec.draw_value else None
        if inner is None:
            return st.none() if spec.draw_none else None
        return st.one_of(st.none(), inner) if spec.draw_none else inner
    if isinstance(spec, _hyper.Opaque):
        return st.sampled_from(spec.examples) if spec.examples else None
    raise TypeError(f"no strategy for hyperparameter spec {spec!r}")


def _flush_tiny(x: float) -> float:
    """``x``, or ``0.0`` when ``0 < |x| < 1e-100``."""
    return 0.0 if 0.0 < abs(x) < 1e-100 else x


def _windowed(spec, window, name):
    inner = spec.inner if isinstance(spec, _hyper.OrNone) else spec
    if isinstance(window, list):
        if not window:
            raise ValueError(f"the window of {name} lists no value")
        for v in window:
            spec.validate(name, v)
        return st.sampled_from(window)
    if isinstance(window, tuple):
        log = len(window) == 3 and window[2] == "log"
        if len(window) not in (2, 3) or (len(window) == 3 and not log):
            raise ValueError(f"the window of {name} must be (lo, hi) or (lo, hi, 'log'), got {window!r}")
        lo, hi = window[:2]
        for v in (lo, hi):
            inner.validate(name, v)
        if isinstance(inner, _hyper.PositiveInt):
            if not lo <= hi:
                raise ValueError(f"the window of {name} needs lo <= hi, got {window!r}")
            return st.integers(int(lo), int(hi))
        if not isinstance(inner, _hyper.Real):
            raise ValueError(f"a (lo, hi) window needs a real or integer spec, {name} is {inner.describe()}")
        lo, hi = float(lo), float(hi)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
            raise ValueError(f"the window of {name} must be finite with lo <= hi, got {window!r}")
        log = log or (inner.log and lo > 0)
        if log and lo <= 0:
            raise ValueError(f"a log-scale window of {name} needs lo > 0, got {window!r}")
        draws = _real(lo, hi, log=log)
        return draws.map(_flush_tiny) if lo == 0 and not log else draws
    spec.validate(name, window)
    return st.just(window)


def _minimal(spec, default):
    """The value a draw of ``spec`` shrinks to (``default`` for an opaque spec)."""
    if isinstance(spec, (_hyper.Real, _hyper.PositiveInt, _hyper.Choice, _hyper.Noise)):
        return spec.typical[0]
    if isinstance(spec, _hyper.Flag):
        return False
    if isinstance(spec, _hyper.OrNone):
        return None if (spec.draw_none or not spec.draw_value) else _minimal(spec.inner, default)
    return default


def _is_private(name):
    """Whether ``name`` built from drawn values is private (privacy may depend on a value, e.g.
    PASAN's data-dependent ``radius=None``; judged at the minimal draw, and re-checked per draw)."""
    params = inspect.signature(_REGISTRY[name]).parameters
    hp = {k: _minimal(spec, params[k].default) for k, spec in _optimizers.hyperparameters(name).items()}
    return _optimizers.get(name, **hp).private


def optimizers(private: bool | None = None, names=None):
    """Optimizers of :mod:`dpsim.optimizers` with hyperparameters drawn from their declared ranges.

    ``private``: ``True`` only optimizers whose events are all private, ``False`` only those that
    declare :class:`~dpsim.privacy.events.NonPrivate` (non-private rules and oracles), ``None``
    both.  ``names``: restrict to these registry names (default: every registered name, so a new
    ``@register`` function is covered automatically).  Every hyperparameter with a generation rule
    is drawn (defaults are tuned for the papers' data sizes and need not suit a tiny problem, e.g.
    ``public_fraction=0.01`` of 20 examples); opaque ones keep their default.  Shrinking goes to the
    first optimizer name and the low end of each window.  Draws an
    :class:`~dpsim.optimizers.Optimizer` whose repr is its call.

    Parameters
    ----------
    private : bool, optional
        Only private (True) or only non-private (False) optimizers; None: both.
    names : sequence of str, optional
        Registry names to draw from (default: all).

    Returns
    -------
    hypothesis.strategies.SearchStrategy
        Of :class:`~dpsim.optimizers.Optimizer`.
    """
    pool = list(_optimizers.names()) if names is None else (
        [names] if isinstance(names, str) else list(names))
    for n in pool:
        if n not in _optimizers.names():
            raise ValueError(f"unknown optimizer {n!r}; known: {', '.join(_optimizers.names())}")
    if private is not None:
        pool = [n for n in pool if _is_private(n) == bool(private)]
    if not pool:
        raise ValueError(f"no optimizer matches private={private!r}, names={names!r}")

    def one(name):
        optional = {}
        for k, spec in _optimizers.hyperparameters(name).items():
            s = hyperparameter(spec)
            if s is not None:
                optional[k] = s
        return st.fixed_dictionaries(optional).map(
            lambda hp: _optimizers.get(name, **hp))

    drawn = st.sampled_from(pool).flatmap(one)
    return drawn if private is None else drawn.filter(lambda o: o.private == bool(private))


# ------------------------------------------------------------------------------------------------
# privacy parameters


class PrivacyParams(NamedTuple):
    """``(σ, q, T, δ)`` of a subsampled Gaussian mechanism run ``T`` times."""

    noise_multiplier: float
    sample_rate: float
    steps: int
    delta: float

    def epsilon(self, accountant: str = "pld") -> float:
        """``dpsim.accounting.epsilon`` of these parameters.

        Parameters
        ----------
        accountant : {'pld', 'rdp'}
            The accountant.

        Returns
        -------
        float
            ε at these parameters' δ.
        """
        return accounting.epsilon(self.noise_multiplier, self.sample_rate, self.steps, self.delta,
                                  accountant=accountant)


def privacy_params(*, min_noise: float = 0.5, max_noise: float = 10.0, max_steps: int = 200,
                   min_sample_rate: float = 1e-3, max_sample_rate: float = 0.5, min_steps: int = 1,
                   min_delta: float = 1e-8, max_delta: float = 1e-3):
    """:class:`PrivacyParams` in ranges where the accountants are accurate and take about a second
    or less per call: ``σ ∈ [min_noise, max_noise]``, ``q ∈ [min_sample_rate, max_sample_rate]``
    (log scale), ``T ∈ [min_steps, max_steps]``, ``δ ∈ [min_delta, max_delta]`` (log scale;
    default ``[1e-8, 1e-3]``).  Shrinks toward the smallest σ, q, T and δ.

    Parameters
    ----------
    min_noise : float
        Smallest σ.
    max_noise : float
        Largest σ.
    max_steps : int
        Largest T.
    min_sample_rate : float
        Smallest q.
    max_sample_rate : float
        Largest q.
    min_steps : int
        Smallest T.
    min_delta : float
        Smallest δ.
    max_delta : float
        Largest δ.

    Returns
    -------
    hypothesis.strategies.SearchStrategy
        Of :class:`PrivacyParams`.
    """
    if not (0 < min_noise <= max_noise < math.inf):
        raise ValueError(f"need 0 < min_noise <= max_noise < inf, got {min_noise!r}, {max_noise!r}")
    if not (0 < min_sample_rate <= max_sample_rate <= 1):
        raise ValueError(f"need 0 < min_sample_rate <= max_sample_rate <= 1, got "
                         f"{min_sample_rate!r}, {max_sample_rate!r}")
    if not (isinstance(max_steps, int) and isinstance(min_steps, int) and 1 <= min_steps <= max_steps):
        raise ValueError(f"need positive integers min_steps <= max_steps, got min_steps={min_steps!r}, "
                         f"max_steps={max_steps!r}")
    if not (0 < min_delta <= max_delta < 1):
        raise ValueError(f"need 0 < min_delta <= max_delta < 1, got {min_delta!r}, {max_delta!r}")
    return st.builds(PrivacyParams, _real(min_noise, max_noise),
                     _real(min_sample_rate, max_sample_rate, log=True),
                     st.integers(min_steps, max_steps), _real(min_delta, max_delta, log=True))


class DPBudget(NamedTuple):
    """An ``(ε, δ)`` target: a ctCDP budget, a calibration target, a conversion's δ."""

    epsilon: float
    delta: float


#: ``ε`` and ``δ`` of an (ε, δ) target: the declarations of ``dp_sgd_ctcdp`` (ε ∈ (0, ∞),
#: generation window [0.5, 10] log; δ ∈ (0, 1), window [1e-8, 1e-3] log).
EPSILON = _ctcdp.EPSILON
DELTA = _ctcdp.DELTA


def dp_budgets(*, epsilon=None, delta=None):
    """:class:`DPBudget` ``(ε, δ)`` drawn from the declared ranges of an (ε, δ) target (those of
    ``dp_sgd_ctcdp``: ε ∈ (0, ∞), δ ∈ (0, 1)); both on a log scale, shrinking toward the smallest.

    ``epsilon``/``delta``: a window as in :func:`hyperparameter` — ``(lo, hi)``, a list of values,
    or one value — checked against the valid interval (default: the generation windows
    ε ∈ [0.5, 10], δ ∈ [1e-8, 1e-3]).

    Parameters
    ----------
    epsilon : tuple, list or float, optional
        A window of ε.
    delta : tuple, list or float, optional
        A window of δ.

    Returns
    -------
    hypothesis.strategies.SearchStrategy
        Of :class:`DPBudget`.
    """
    return st.builds(DPBudget, hyperparameter(EPSILON, epsilon, name="epsilon"),
                     hyperparameter(DELTA, delta, name="delta"))


class TcdpParams(NamedTuple):
    """``(ρ, ω)`` of ω-truncated concentrated DP ([L2P] Def. A.3 / Bun et al. 2018):
    ``D_α(M(x) ‖ M(x')) ≤ ρα`` for every order ``α ∈ (1, ω)``; ``ω = inf`` is zCDP."""

    rho: float
    omega: float


#: ρ ∈ [0, ∞) (window [1e-6, 10], log); ω ∈ (1, ∞] (window [1.5, 1e4], log).
RHO = _hyper.Real("[0, inf)", typical=(1e-6, 10.0), log=True)
OMEGA = _hyper.Real("(1, inf]", typical=(1.5, 1e4), log=True)


def tcdp_params(*, rho=None, omega=None, infinite_omega: bool = False):
    """:class:`TcdpParams` ``(ρ, ω)``: ``ρ`` from :data:`RHO`'s range, ``ω`` from :data:`OMEGA`'s
    (both log scale; windows as in :func:`hyperparameter`).  ``infinite_omega=True`` also draws
    ``ω = inf`` (zCDP, the untruncated limit), which a test of a formula's ``ω → ∞`` branch needs.

    Parameters
    ----------
    rho : tuple, list or float, optional
        A window as in :func:`hyperparameter` for ρ.
    omega : tuple, list or float, optional
        A window as in :func:`hyperparameter` for ω.
    infinite_omega : bool
        Also draw ``ω = inf``.

    Returns
    -------
    hypothesis.strategies.SearchStrategy
        Of :class:`TcdpParams`.
    """
    om = hyperparameter(OMEGA, omega, name="omega")
    if infinite_omega:
        om = st.one_of(om, st.just(math.inf))
    return st.builds(TcdpParams, hyperparameter(RHO, rho, name="rho"), om)


# ------------------------------------------------------------------------------------------------
# parameters of the papers' bounds


class BoundParams(NamedTuple):
    """The hyperparameters the papers' bounds are stated in: clip ``C``, noise multiplier ``σ``,
    batch size ``b``, moment decay ``β``, delay (DP² phase length) ``s`` and step count ``T``
    (``t`` of a bound at step ``t``)."""

    clip: float
    noise_multiplier: float
    batch_size: int
    beta: float
    s: int
    steps: int


#: Batch size ``b``: a positive integer (window [1, 64]); step count ``T``: (window [1, 100]).
BATCH_SIZE = _hyper.PositiveInt(typical=(1, 64))
STEPS = _hyper.PositiveInt(typical=(1, 100))


def bound_params(*, clip=None, noise_multiplier=None, batch_size=None, beta=None, s=None, steps=None):
    """:class:`BoundParams` ``(C, σ, b, β, s, T)`` for a property of an analysis bound, each drawn
    from the range the optimizers declare for it (:mod:`dpsim.optimizers._hyper`: ``C`` from
    ``CLIP`` — finite, window [0.05, 10] log —, ``σ`` from ``SIGMA`` [0, 5], ``β`` from ``BETA``
    [0, 0.999], ``s`` from ``DELAY`` [1, 8]; ``b`` from :data:`BATCH_SIZE`, ``T`` from
    :data:`STEPS`).

    Every keyword takes a window as in :func:`hyperparameter` — ``(lo, hi)``, ``(lo, hi, "log")``,
    a list of values, or one value — validated against the declared interval, so a bound is only
    ever exercised at valid hyperparameters (``clip=(0, 1)`` is refused: ``C`` must be positive).
    The fields are drawn independently (a property that needs ``s ≤ T`` uses :func:`dp2_phases`).
    Shrinks toward the low end of every window (for ``σ``: no noise).

    Parameters
    ----------
    clip : tuple, list or float, optional
        A window as in :func:`hyperparameter` for C.
    noise_multiplier : tuple, list or float, optional
        A window as in :func:`hyperparameter` for σ.
    batch_size : tuple, list or int, optional
        A window as in :func:`hyperparameter` for b.
    beta : tuple, list or float, optional
        A window as in :func:`hyperparameter` for β.
    s : tuple, list or int, optional
        A window as in :func:`hyperparameter` for the delay.
    steps : tuple, list or int, optional
        A window as in :func:`hyperparameter` for T.

    Returns
    -------
    hypothesis.strategies.SearchStrategy
        Of :class:`BoundParams`.
    """
    return st.builds(BoundParams,
                     hyperparameter(_hyper.CLIP, clip, name="clip"),
                     hyperparameter(_hyper.SIGMA, noise_multiplier, name="noise_multiplier"),
                     hyperparameter(BATCH_SIZE, batch_size, name="batch_size"),
                     hyperparameter(_hyper.BETA, beta, name="beta"),
                     hyperparameter(_hyper.DELAY, s, name="s"),
                     hyperparameter(STEPS, steps, name="steps"))


class DP2Phases(NamedTuple):
    """A DP² run's length ``steps`` and phase lengths ``s1`` (private SGD) and ``s2`` (private
    adaptive), ``1 ≤ s1, s2 ≤ steps``; :meth:`hyperparameters` gives ``dict(s1=..., s2=...)``."""

    steps: int
    s1: int
    s2: int

    def hyperparameters(self) -> dict:
        """The ``s1``/``s2`` keywords of ``dpsim.optimizers.dp2_*``.

        Returns
        -------
        dict
            ``{"s1": ..., "s2": ...}``.
        """
        return {"s1": self.s1, "s2": self.s2}


def dp2_phases(*, min_steps: int = 1, max_steps: int = 120, equal: bool = True):
    """:class:`DP2Phases`: ``T ∈ [min_steps, max_steps]`` and delays ``1 ≤ s1 ≤ T`` ([DP2] Alg. 1:
    ``s1`` SGD steps, then ``s2`` adaptive steps, alternating), so that every phase length from one
    step to the whole run — no refresh at all — is reachable.  ``equal=True`` (the papers' setting
    and the optimizers' default ``s2 = s1``) draws ``s2 = s1``; ``False`` draws ``s2 ∈ [1, T]``
    independently.  Shrinks toward ``T = min_steps`` and ``s1 = s2 = 1``.

    Parameters
    ----------
    min_steps : int
        Smallest T.
    max_steps : int
        Largest T.
    equal : bool
        Draw ``s2 = s1``.

    Returns
    -------
    hypothesis.strategies.SearchStrategy
        Of :class:`DP2Phases`.
    """
    if not (isinstance(min_steps, int) and isinstance(max_steps, int) and 1 <= min_steps <= max_steps):
        raise ValueError(f"need positive integers min_steps <= max_steps, got min_steps={min_steps!r}, "
                         f"max_steps={max_steps!r}")

    @st.composite
    def draw(draw):
        T = draw(st.integers(min_steps, max_steps))
        s1 = draw(st.integers(1, T))
        s2 = s1 if equal else draw(st.integers(1, T))
        return DP2Phases(T, s1, s2)

    return draw()


# ------------------------------------------------------------------------------------------------
# gradient tables


class GradientTable(_AuditTable):
    """:class:`dpsim.audit.GradientTable` (``f_i(w) = ⟨G_i, w⟩``: example ``i``'s gradient is row
    ``G_i`` at every ``w``) whose repr shows the table, so a counterexample is readable."""

    def __repr__(self):
        rows = np.array2string(self.G, precision=4, separator=", ", threshold=200, suppress_small=True).replace("\n", "")
        return f"GradientTable({rows})"


def gradient_tables(*, max_n: int = 32, max_d: int = 4, max_abs: float = 4.0):
    """User-defined problems given by a table of per-example gradients (:class:`GradientTable`,
    built on the public ``Problem`` API): ``n ≤ max_n`` rows in ``R^d``, ``d ≤ max_d``, entries in
    ``[−max_abs, max_abs]`` (zero rows, repeated rows and norms far above any clip included).
    Every example's gradient is its row at every ``w``, so clipping, noise and moment properties
    can be tested on any gradient configuration.  Shrinks toward a one-row table of zeros.

    Parameters
    ----------
    max_n : int
        Most rows.
    max_d : int
        Largest dimension.
    max_abs : float
        Largest absolute entry.

    Returns
    -------
    hypothesis.strategies.SearchStrategy
        Of :class:`GradientTable`.
    """
    if not (isinstance(max_n, int) and max_n >= 1 and isinstance(max_d, int) and max_d >= 1):
        raise ValueError(f"max_n and max_d must be positive integers, got max_n={max_n!r}, max_d={max_d!r}")
    if not (0 < max_abs < math.inf):
        raise ValueError(f"max_abs must be positive and finite, got max_abs={max_abs!r}")
    elements = st.floats(-max_abs, max_abs, allow_nan=False, allow_infinity=False, allow_subnormal=False)
    shapes = st.tuples(st.integers(1, max_n), st.integers(1, max_d))
    return shapes.flatmap(lambda s: hnp.arrays(np.float64, s, elements=elements)).map(GradientTable)


# ------------------------------------------------------------------------------------------------
# simulations


@dataclass(frozen=True)
class Simulation:
    """One small :func:`dpsim.simulate` call; :meth:`run` performs it.  The repr is the call."""

    problem: Any
    optimizer: Any
    steps: int
    batch_size: int
    trials: int
    seed: int
    sampling: str = "poisson"
    kwargs: dict = field(default_factory=dict)

    def run(self, **overrides):
        """Run this simulation.

        Parameters
        ----------
        **overrides
            Keywords of :func:`dpsim.simulate` that replace the drawn ones.

        Returns
        -------
        Result
            The run's result.
        """
        kw = dict(steps=self.steps, batch_size=self.batch_size, trials=self.trials, seed=self.seed,
                  sampling=self.sampling, **self.kwargs)
        kw.update(overrides)
        return simulate(self.problem, self.optimizer, **kw)

    def __repr__(self):
        extra = "".join(f", {k}={v!r}" for k, v in self.kwargs.items())
        return (f"simulate({self.problem!r}, {self.optimizer!r}, steps={self.steps}, "
                f"batch_size={self.batch_size}, trials={self.trials}, seed={self.seed}, "
                f"sampling={self.sampling!r}{extra})")


def _ctcdp_setup(problem, opt, steps):
    """``(optimizer, batch size)`` for a ctCDP budget: [L2P] Algorithm 3 plans a fixed batch for
    ``planned_steps`` (default: the run's steps) and is feasible only when the per-step budget is
    small enough for ``n``; the planned horizon is doubled until it is (the run may stop before
    the horizon).  ``None`` when no horizon up to 2^24 steps is feasible."""
    hp = dict(opt.hyperparameters)
    T = hp.get("planned_steps") or steps
    for _ in range(25):
        try:
            info = _ctcdp.plan(hp["epsilon"], hp["delta"], T, problem.n, hp["clip"],
                               noise_norm=hp["noise_norm"], sample_rate=hp["sample_rate"])
        except ValueError:
            T *= 2
            continue
        if T != (hp.get("planned_steps") or steps):
            opt = _optimizers.get(opt.name, **dict(hp, planned_steps=T))
        return opt, int(np.asarray(info["batch_size"]).reshape(-1)[0])
    return None


def simulations(problems=None, optimizers=None, *, max_steps: int = 8, max_trials: int = 3,
                max_batch: int = 16):
    """Small, fast simulations: a problem, an optimizer, steps, batch size, trials, seed and
    sampling scheme that :func:`dpsim.simulate` accepts.

    ``problems``/``optimizers``: strategies (default :func:`problems` with ``max_d=4, max_n=64``,
    and :func:`optimizers` over every name).  The batch size respects the optimizer's needs: at most
    the private part of the data when it uses a public split, and the planned fixed batch of
    [L2P] Algorithm 3 for a ctCDP budget (:class:`~dpsim.privacy.events.TcdpBudget`; its planned
    horizon ``planned_steps`` is doubled until the plan is feasible for the drawn ``n``, since a
    small data set needs a small per-step budget).

    Parameters
    ----------
    problems : hypothesis.strategies.SearchStrategy, optional
        Of problems (default: :func:`problems` with small sizes).
    optimizers : hypothesis.strategies.SearchStrategy, optional
        Of optimizers (default: :func:`optimizers`).
    max_steps : int
        Most steps.
    max_trials : int
        Most trials.
    max_batch : int
        Largest batch.

    Returns
    -------
    hypothesis.strategies.SearchStrategy
        Of :class:`Simulation`.
    """
    probs = globals()["problems"](max_d=4, max_n=64) if problems is None else problems
    opts = globals()["optimizers"]() if optimizers is None else optimizers

    @st.composite
    def draw(draw):
        problem = draw(probs)
        opt = draw(opts)
        steps = draw(st.integers(1, max_steps))
        trials = draw(st.integers(1, max_trials))
        seed = draw(_SEEDS)
        if any(isinstance(e, TcdpBudget) for e in opt.events):
            setup = _ctcdp_setup(problem, opt, steps)
            if setup is None:
                raise ValueError(f"no feasible ctCDP plan for {opt!r} on {problem!r}")
            return Simulation(problem, setup[0], steps, setup[1], trials, seed, "fixed")
        n_private = problem.n - (int(round(opt.public_fraction * problem.n)) if opt.public_fraction else 0)
        b = draw(st.integers(1, max(1, min(max_batch, n_private))))
        sampling = draw(st.sampled_from(["poisson", "fixed", "replacement"]))
        if sampling == "poisson" and n_private > 1 and b == n_private - 1:
            b = n_private  # Poisson at b = n - 1 is refused (dpsim.sampling.check_sampling)
        return Simulation(problem, opt, steps, b, trials, seed, sampling)

    return draw()
