"""Confidence intervals shared by the checks, the experiments' reports and the figures.

One implementation of each interval used across dpsim's applications:

* :func:`mean_ci` — mean and Student-t half-width over independent trials;
* :func:`diff_ci` — Welch interval for a difference of two means;
* :func:`fmt_ci` — ``"mean ± half"`` text;
* :func:`z_two_sided`, :func:`z_one_sided` — normal quantiles (Bonferroni over ``tests``);
* :func:`clopper_pearson`, :func:`clopper_pearson_upper` — exact binomial intervals for a
  proportion ``k/n`` (beta quantiles);
* :func:`quantile_ci` — an empirical quantile with its distribution-free order-statistic interval.

Levels are confidence levels (0.95 = 95 %).  The binomial intervals also accept the miss
probability ``alpha = 1 − level`` directly, so a caller that thinks in miss probabilities does not
pay the rounding of ``1 − (1 − alpha)``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as _st

__all__ = [
    "mean_ci",
    "diff_ci",
    "fmt_ci",
    "z_two_sided",
    "z_one_sided",
    "clopper_pearson",
    "clopper_pearson_upper",
    "quantile_ci",
    "fieller",
]


def mean_ci(x, axis: int = -1, level: float = 0.95):
    """Mean and half-width of the Student-t ``level`` confidence interval of the mean along ``axis``.

    Trials are independent, so the interval is ``mean ± t_{(1+level)/2, R-1} · s / √R``.
    Returns ``(mean, half_width)`` (half-width NaN for fewer than 2 trials).
    """
    x = np.asarray(x, dtype=float)
    r = x.shape[axis]
    m = np.mean(x, axis=axis)
    if r < 2:
        return m, np.full_like(m, np.nan)
    s = np.std(x, axis=axis, ddof=1)
    return m, _st.t.ppf(0.5 + level / 2, r - 1) * s / np.sqrt(r)


def diff_ci(a, b, level: float = 0.95):
    """Welch ``level`` confidence interval for ``mean(a) − mean(b)`` (independent samples).

    Returns ``(difference, low, high)``.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    va, vb = np.var(a, ddof=1) / a.size, np.var(b, ddof=1) / b.size
    diff = float(np.mean(a) - np.mean(b))
    se = float(np.sqrt(va + vb))
    if se == 0.0:
        return diff, diff, diff
    dof = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    h = float(_st.t.ppf(0.5 + level / 2, dof)) * se
    return diff, diff - h, diff + h


def fmt_ci(mean: float, half: float, digits: int = 2) -> str:
    """``"1.23e-02 ± 4.5e-04"``."""
    return f"{mean:.{digits}e} ± {half:.1e}"


def z_two_sided(level: float) -> float:
    """Normal quantile ``Φ⁻¹((1 + level)/2)``: ``mean ± z·se`` covers with probability ``level``."""
    return float(_st.norm.ppf(0.5 + level / 2.0))


def z_one_sided(level: float, tests: int = 1) -> float:
    """Normal quantile ``Φ⁻¹(1 − (1 − level)/tests)``: a one-sided bound at family-wise ``level``
    over ``tests`` comparisons (Bonferroni)."""
    return float(_st.norm.ppf(1.0 - (1.0 - level) / tests))


def _miss(level, alpha):
    return (1.0 - level) if alpha is None else alpha


def clopper_pearson(k: int, n: int, level: float = 0.95, *, alpha=None):
    """Exact (Clopper–Pearson) two-sided interval ``(lo, hi)`` for a binomial proportion ``k/n``.

    ``alpha`` (the miss probability) overrides ``level`` when given.
    """
    a = _miss(level, alpha)
    lo = 0.0 if k == 0 else float(_st.beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(_st.beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


def clopper_pearson_upper(k: int, n: int, level: float = 0.95) -> float:
    """One-sided exact (Clopper–Pearson) upper confidence limit of a proportion ``k/n``."""
    return 1.0 if k == n else float(_st.beta.ppf(level, k + 1, n - k))


def quantile_ci(x, q: float, level: float = 0.95, *, alpha=None):
    """Empirical ``q``-quantile of ``x`` with its distribution-free (order-statistic) interval.

    The interval's ends are the order statistics whose ranks are the binomial ``(n, q)`` quantiles
    at ``a/2`` and ``1 − a/2`` (``a = 1 − level``, or ``alpha`` when given).
    Returns ``(quantile, (lo, hi))``.
    """
    a = _miss(level, alpha)
    x = np.sort(np.asarray(x, dtype=float).ravel())
    n = x.size
    lo = int(_st.binom.ppf(a / 2, n, q))
    hi = int(_st.binom.ppf(1 - a / 2, n, q)) + 1
    return float(np.quantile(x, q)), (float(x[max(lo - 1, 0)]), float(x[min(hi - 1, n - 1)]))


def fieller(a: float, va: float, b: float, vb: float, t: float) -> tuple[float, float]:
    """Fieller's confidence interval for the ratio ``a/b`` of two independent, normally distributed
    estimates with variances ``va``, ``vb`` (Fieller 1954): the ``r`` with
    ``(a − r b)² ≤ t² (va + r² vb)``, i.e. ``(b² − t² vb) r² − 2ab r + a² − t² va ≤ 0``.  Bounded
    when ``b² > t² vb`` (``b`` significantly nonzero at the same level); otherwise the set is
    unbounded and ``(−inf, inf)`` is returned."""
    A = b * b - t * t * vb
    if A <= 0:
        return -math.inf, math.inf
    disc = t * t * (va * b * b + vb * a * a - t * t * va * vb)
    root = math.sqrt(max(disc, 0.0))
    return (a * b - root) / A, (a * b + root) / A
