"""Lower-triangular Toeplitz strategies of DP-MF by their coefficients (the public names are
re-exported by :mod:`dpsim.privacy.mf`, their import path; the definitions are in its docstring).

A lower-triangular Toeplitz ``M`` (T×T) is given by its first column ``m_0, m_1, …`` (trailing
coefficients not given are 0).  Here: the coefficients of ``sqrt_toeplitz`` (``A^{1/2}``) and of its
inverse in closed form, the T×T matrix for small cases, and the O(T)–O(T log T) coefficient versions
of the quantities DP-MF needs — ``M⁻¹``'s coefficients (power-series inverse), the single- and
any-participation sensitivities, the bandwidth, the prefix-sum RMSE and the per-step variance of the
streamed noise — plus the banded Toeplitz optimization behind ``"banded:<k>"`` (R. McKenna, *Scaling
up the Banded Matrix Factorization Mechanism for Differentially Private ML*, arXiv:2405.15913, 2024;
:func:`banded_coefficients`).
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = [
    "toeplitz_matrix",
    "inverse_coefficients",
    "toeplitz_sensitivity",
    "toeplitz_worst_case_sensitivity",
    "toeplitz_bandwidth",
    "toeplitz_prefix_rmse",
    "toeplitz_step_variance",
    "sqrt_toeplitz_coefficients",
    "sqrt_toeplitz_inverse_coefficients",
    "banded_coefficients",
]


def _check_steps(steps) -> int:
    """``steps`` as a positive ``int``; ``ValueError`` naming the value otherwise."""
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got steps={steps!r}")
    return int(steps)


# ----------------------------------------------------------------------------------------------
# Toeplitz coefficients
# ----------------------------------------------------------------------------------------------
def sqrt_toeplitz_coefficients(n: int) -> np.ndarray:
    """First ``n`` coefficients of ``(1−x)^{-1/2}``: ``c_k = C(2k,k)/4^k`` by the stable recurrence
    ``c_0 = 1``, ``c_k = c_{k−1}(2k−1)/(2k)`` (no factorials).  Toeplitz with these is ``A^{1/2}``.

    Parameters
    ----------
    n : int
        Number of coefficients.

    Returns
    -------
    numpy.ndarray
        ``c_0, …, c_{n−1}``.
    """
    n = _check_steps(n)
    k = np.arange(1, n, dtype=float)
    return np.concatenate(([1.0], np.cumprod((2.0 * k - 1.0) / (2.0 * k))))


def sqrt_toeplitz_inverse_coefficients(n: int) -> np.ndarray:
    """First ``n`` coefficients of ``(1−x)^{1/2}`` (those of ``A^{-1/2}``): ``r_0 = 1``,
    ``r_k = r_{k−1}(2k−3)/(2k)`` (``r_1 = −1/2``; all ``r_k < 0`` for ``k ≥ 1``).

    Parameters
    ----------
    n : int
        Number of coefficients.

    Returns
    -------
    numpy.ndarray
        ``r_0, …, r_{n−1}``.
    """
    n = _check_steps(n)
    k = np.arange(1, n, dtype=float)
    return np.concatenate(([1.0], np.cumprod((2.0 * k - 3.0) / (2.0 * k))))


def _pad(coefs, steps: int) -> np.ndarray:
    c = np.asarray(coefs, dtype=float).reshape(-1)
    if c.size == 0:
        raise ValueError("Toeplitz coefficients must be non-empty")
    if c.size >= steps:
        return c[:steps].copy()
    out = np.zeros(steps)
    out[: c.size] = c
    return out


def _trim(coefs, steps: int) -> np.ndarray:
    c = np.asarray(coefs, dtype=float).reshape(-1)
    if c.size == 0:
        raise ValueError("Toeplitz coefficients must be non-empty")
    if not np.all(np.isfinite(c)):
        raise ValueError(f"Toeplitz coefficients must be finite, got {c!r}")
    if c[0] == 0.0:
        raise ValueError("the leading Toeplitz coefficient m_0 must be non-zero (M invertible)")
    return c[:steps]


def toeplitz_matrix(coefs, steps: int) -> np.ndarray:
    """The ``T×T`` lower-triangular Toeplitz matrix with first column ``coefs`` (zero-padded or
    truncated to ``T``).  For building/inspecting small cases only.

    Parameters
    ----------
    coefs : array_like
        The Toeplitz coefficients ``m_0, m_1, …`` of ``M``.
    steps : int
        ``T``.

    Returns
    -------
    numpy.ndarray
        ``M``, (T, T).
    """
    steps = _check_steps(steps)
    c = _pad(coefs, steps)
    idx = np.arange(steps)
    diff = idx[:, None] - idx[None, :]
    return np.where(diff >= 0, c[np.clip(diff, 0, steps - 1)], 0.0)


def _series_inverse_fft(c: np.ndarray, n: int) -> np.ndarray:
    """Power-series inverse of ``c`` mod ``x^n`` by Newton's iteration ``g ← g(2 − c g)``, doubling
    the precision each round with FFT convolutions: O(n log n)."""
    from scipy.signal import fftconvolve

    g = np.array([1.0 / c[0]])
    m = 1
    while m < n:
        m = min(2 * m, n)
        e = fftconvolve(c[:m], g)[:m]  # c g mod x^m = 1 + O(x^{m/2})
        e[0] -= 1.0
        g = np.concatenate((g, np.zeros(m - g.size))) - fftconvolve(g, e)[:m]
    return g


def inverse_coefficients(coefs, steps: int) -> np.ndarray:
    """The ``T`` Toeplitz coefficients of ``M⁻¹`` (lower-triangular Toeplitz too): the power series
    ``1 / m(x)`` mod ``x^T``.  O(T·k) by the IIR recurrence (``scipy.signal.lfilter``) for ``k``
    coefficients when ``T·k`` is moderate, else O(T log T) by Newton's iteration with FFTs.

    Parameters
    ----------
    coefs : array_like
        The Toeplitz coefficients ``m_0, m_1, …`` of ``M``.
    steps : int
        ``T``.

    Returns
    -------
    numpy.ndarray
        The ``T`` coefficients of ``M⁻¹``.
    """
    steps = _check_steps(steps)
    c = _trim(coefs, steps)
    if c.size * steps <= 4_000_000 or c.size <= 64:
        from scipy.signal import lfilter

        e0 = np.zeros(steps)
        e0[0] = 1.0
        return lfilter([1.0], c, e0)
    return _series_inverse_fft(c, steps)


def toeplitz_sensitivity(coefs, steps: int | None = None) -> float:
    """Single-participation sensitivity of a lower-triangular Toeplitz ``M`` (T×T): its first column
    is the longest, so ``sens = sqrt(Σ_{k<T} m_k²)``.

    Parameters
    ----------
    coefs : array_like
        The Toeplitz coefficients of ``M``.
    steps : int, optional
        ``T`` (default: all coefficients).

    Returns
    -------
    float
        The norm of the first column.
    """
    c = np.asarray(coefs, dtype=float).reshape(-1)
    if steps is not None:
        c = c[: _check_steps(steps)]
    return float(math.sqrt(float(c @ c)))


def toeplitz_worst_case_sensitivity(coefs, steps: int) -> float:
    """:func:`worst_case_sensitivity` of the T×T lower-triangular Toeplitz ``M`` in O(T):
    ``sqrt(Σ_t (Σ_{k≤t} m_k)²)`` (= ``||M·1||``) when all ``m_k ≥ 0``, else
    ``Σ_j ||M_{:,j}|| = Σ_{j} sqrt(Σ_{k<T−j} m_k²)``.

    Parameters
    ----------
    coefs : array_like
        The Toeplitz coefficients ``m_0, m_1, …`` of ``M``.
    steps : int
        ``T``.

    Returns
    -------
    float
        The sensitivity under any participation.
    """
    steps = _check_steps(steps)
    c = _pad(coefs, steps)
    if np.all(c >= 0):
        s = np.cumsum(c)
        return float(math.sqrt(float(s @ s)))
    col_norms = np.sqrt(np.cumsum(c * c))  # ||column T-1-j|| at index j
    return float(col_norms.sum())


def toeplitz_bandwidth(coefs, steps: int) -> int:
    """Number of nonzero diagonals of the T×T lower-triangular Toeplitz ``M``: one plus the index
    of its last nonzero coefficient among the first T (column ``j`` is supported on rows
    ``j … j + w − 1``).  The amplified cyclic-Poisson accounting needs ``w ≤ k`` (module
    docstring).

    Parameters
    ----------
    coefs : array_like
        The Toeplitz coefficients ``m_0, m_1, …`` of ``M``.
    steps : int
        ``T``.

    Returns
    -------
    int
        The number of nonzero diagonals.
    """
    steps = _check_steps(steps)
    c = np.asarray(coefs, dtype=float).reshape(-1)[:steps]
    nz = np.flatnonzero(c)
    return int(nz[-1]) + 1 if nz.size else 0


def toeplitz_prefix_rmse(coefs, steps: int, *, inverse=None) -> float:
    """:func:`prefix_rmse` of the T×T lower-triangular Toeplitz ``M`` without forming matrices.

    ``A M⁻¹`` is Toeplitz with coefficients ``s = cumsum(r)`` (``r`` = coefficients of ``M⁻¹``), and
    its diagonal ``k`` has ``T − k`` entries, so ``||A M⁻¹||_F² = Σ_k (T−k) s_k²``.  ``inverse``:
    the coefficients of ``M⁻¹`` when already known (else :func:`inverse_coefficients`).

    Parameters
    ----------
    coefs : array_like
        The Toeplitz coefficients ``m_0, m_1, …`` of ``M``.
    steps : int
        ``T``.
    inverse : array_like, optional
        The coefficients of ``M⁻¹``, when known.

    Returns
    -------
    float
        The prefix-sum RMSE.
    """
    steps = _check_steps(steps)
    r = inverse_coefficients(coefs, steps) if inverse is None else _pad(inverse, steps)
    s = np.cumsum(r)
    w = np.arange(steps, 0, -1, dtype=float)
    fro2 = float(np.dot(w * s, s))
    return toeplitz_sensitivity(coefs, steps) * math.sqrt(fro2 / steps)


def toeplitz_step_variance(coefs, steps: int, *, inverse=None) -> np.ndarray:
    """Per-step variance ``E[u_t²] = sens² Σ_{j≤t} r_j²`` (per coordinate) of the unit-scale streamed
    noise ``u = sens · M⁻¹ Z``: the diagonal of ``sens² M⁻¹ M⁻ᵀ``, shape ``(T,)``.  This is what
    bias corrections with DP-MF need (ALGORITHMS §4.3): the noise variance of step ``t`` is
    ``Φ · step_variance[t−1]`` with ``Φ = (σC/b)²``.

    Parameters
    ----------
    coefs : array_like
        The Toeplitz coefficients ``m_0, m_1, …`` of ``M``.
    steps : int
        ``T``.
    inverse : array_like, optional
        The coefficients of ``M⁻¹``, when known.

    Returns
    -------
    numpy.ndarray
        (T,) variances.
    """
    steps = _check_steps(steps)
    r = inverse_coefficients(coefs, steps) if inverse is None else _pad(inverse, steps)
    return toeplitz_sensitivity(coefs, steps) ** 2 * np.cumsum(r * r)


# ----------------------------------------------------------------------------------------------
# banded Toeplitz optimization
# ----------------------------------------------------------------------------------------------
# Returned for unstable filters (non-finite loss).  Any finite log-loss is below log(1e308) + log S
# ≈ 710 + log S, so this finite constant keeps L-BFGS's line search well defined (it backtracks).
_UNSTABLE = 1e4


def _banded_loss_and_grad(x: np.ndarray, steps: int, w: np.ndarray, e0: np.ndarray):
    """``log(sens² · ||A M⁻¹||_F²)`` and its gradient in ``x = (m_1..m_{k−1})`` with ``m_0 = 1``.

    With ``r = 1/m(x)`` (IIR impulse response), ``∂r/∂m_j = −x^j r(x)²``, so with ``q = r²`` (series,
    the impulse response of ``1/m²``), ``s = cumsum(r)``, ``Q = cumsum(q)`` and
    ``F = Σ_t w_t s_t²`` (``w_t = T − t``): ``∂F/∂m_j = −2 Σ_{t≥j} w_t s_t Q_{t−j}``.  O(T·k)."""
    from scipy.signal import lfilter

    m = np.concatenate(([1.0], x))
    with np.errstate(over="ignore", invalid="ignore"):
        r = lfilter([1.0], m, e0)
        s = np.cumsum(r)
        v = w * s
        F = float(np.dot(v, s))
        if not (np.isfinite(F) and F > 0):
            return _UNSTABLE, np.zeros_like(x)
        q = lfilter([1.0], m, r)
        Q = np.cumsum(q)
        gF = np.array([-2.0 * np.dot(v[j:], Q[: steps - j]) for j in range(1, m.size)])
    S = 1.0 + float(x @ x)
    val = math.log(S) + math.log(F)
    grad = 2.0 * x / S + gF / F
    if not np.all(np.isfinite(grad)):
        return _UNSTABLE, np.zeros_like(x)
    return val, grad


@functools.lru_cache(maxsize=256)
def _banded_cached(bands: int, steps: int) -> tuple:
    from scipy.optimize import minimize

    if bands == 1:
        return (1.0,)
    e0 = np.zeros(steps)
    e0[0] = 1.0
    w = np.arange(steps, 0, -1, dtype=float)
    x0 = sqrt_toeplitz_coefficients(bands)[1:]
    candidates = [x0, np.zeros(bands - 1)]  # truncated sqrt (BSR) and identity
    res = minimize(_banded_loss_and_grad, x0, args=(steps, w, e0), jac=True, method="L-BFGS-B",
                   options={"maxiter": 2000, "maxcor": 30, "ftol": 1e-15, "gtol": 1e-10})
    candidates.append(np.asarray(res.x, dtype=float))
    vals = [_banded_loss_and_grad(c, steps, w, e0)[0] for c in candidates]
    best = candidates[int(np.argmin(vals))]  # never worse than truncated sqrt or identity
    return (1.0,) + tuple(float(v) for v in best)


def banded_coefficients(bands: int, steps: int) -> np.ndarray:
    """Optimized ``k``-banded lower-triangular Toeplitz strategy for prefix sums over ``T`` steps.

    Method: the banded Toeplitz optimization of R. McKenna, *Scaling up the Banded Matrix
    Factorization Mechanism for Differentially Private ML* (arXiv:2405.15913, 2024; also
    ``optimize_banded_toeplitz`` in jax_privacy): minimize the single-participation loss
    ``sens(M)² · ||A M⁻¹||_F²`` (= ``T · prefix_rmse²``) over the ``k`` coefficients.  The loss is
    scale invariant, so we fix ``m_0 = 1`` and run L-BFGS (``scipy.optimize.minimize``) on
    ``log loss`` over ``m_1..m_{k−1}`` with an exact O(T·k) gradient through the IIR recurrence for
    ``M⁻¹``'s coefficients (see ``_banded_loss_and_grad``).  Initialization: the first ``k``
    coefficients of ``sqrt_toeplitz`` (the banded square root, BSR, of Kalinin & Lampert 2024).
    The result is the best of {optimized, truncated sqrt, identity}, so its RMSE is never above
    either.  ``k > T`` is clamped to ``T``.  Cached on ``(k, T)``; returns a fresh copy.

    Parameters
    ----------
    bands : int
        ``k``.
    steps : int
        ``T``.

    Returns
    -------
    numpy.ndarray
        The ``min(k, T)`` coefficients, ``m_0 = 1``.
    """
    if isinstance(bands, bool) or not isinstance(bands, (int, np.integer)) or bands < 1:
        raise ValueError(f"bands must be a positive integer, got bands={bands!r}")
    steps = _check_steps(steps)
    return np.array(_banded_cached(min(int(bands), steps), steps))
