"""Uncertainty of measured effects over independent trials (used by figures and the report)."""

from __future__ import annotations

import numpy as np
from scipy import stats as _st

__all__ = ["mean_ci", "diff_ci", "fmt_ci"]


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
