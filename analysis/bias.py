"""The DP-Adam design space of [DESIGN]: post-processing bias, negative second-moment estimates
under bias correction, and the scale-then-privatize steady state (public API ``analysis.bias``).

Sources
    * [DESIGN]: Ganesh, McMahan, Thakurta, *On Design Principles for Private Adaptive
      Optimizers* (2025), §3.1, §4.3.1, §4.4.1 and Appendices A–C.  **Almost every formula of this
      paper was lost in the text extraction dpsim works from: every formula below that cites
      [DESIGN] is RECONSTRUCTED** (ALGORITHMS.md §4.3) from the surrounding text, re-derived here
      in the docstrings, and checked symbolically (sympy) and against simulation.  None of the
      paper's printed example numbers (the dimensions in "consider setting σ = …, b = …; the
      dimension should be ≲ …", the Fig. 4 percentages) survived extraction, so none can be
      reproduced; this is stated, not hidden.
    * [ADAMBC]: Tang, Shpilevskiy, Lécuyer, *DP-AdamBC: Your DP-Adam Is Actually DP-SGD (Unless
      You Apply Bias Correction)* (AAAI 2024), Eq. 2: ``Φ = (σC/B)²`` and
      ``E[v_t] = E[v_t^c] + (1 − β2^t) Φ``.

Notation (ALGORITHMS §0).  The averaged private release is ``g̃_t = ḡ_t + z_t`` with
``ḡ_t = (1/b) Σ clip(g_i, C)`` and, for i.i.d. noise (DP-SGD), ``z_t ~ N(0, Φ I)``,
``Φ = (σC/b)²``.  Adam's second moment ``v_t = β2 v_{t−1} + (1 − β2) g̃_t²``, ``v_0 = 0``, and its
bias-corrected version

    v̂_t = v_t / (1 − β2^t) = Σ_{j=1..t} w_j g̃_j²,     w_j = (1 − β2) β2^{t−j} / (1 − β2^t),

with EMA weights summing to one.  ``v̂_t^c`` is the same with ``ḡ_j`` in place of ``g̃_j``
("clean", same gradient stream).

Public functions (all broadcast over NumPy arrays and return the broadcast shape; Python floats
for scalar input; ``ValueError`` naming the value outside the assumptions):

* :func:`noise_variance` — ``Φ``.
* :func:`ema_weight_sq_sum` — ``Σ_j w_j²`` (finite ``t`` and ``t → ∞``).
* :func:`postprocessing_bias` — ``E[v̂_t] − v̂_t^c``: ``Φ`` (i.i.d.), or with DP-MF correlated
  noise ``Φ · Σ_j w_j · sens(M)² Σ_k (M⁻¹)_{jk}²`` ([DESIGN] App. A, reconstructed).
* :func:`mf_weighted_variance`, :func:`mf_variance_lower_bound` — the noise variance of a weighted
  sum ``Σ_j w_j x_j`` of a stream released with DP-MF, and the lower bound that holds for every
  strategy ([DESIGN] §4.4.1, "the high-dimensional case with prefix sums", reconstructed);
  :func:`ema_sqrt_strategy` — a strategy for decaying sums that comes close to it.
* :func:`corrected_variance` — ``Var(v̂_t − Φ)`` for a constant clean mean ``g``.
* :func:`negative_probability` — ``P(v̂_t − Φ < 0)`` for one coordinate (exact, saddlepoint,
  gamma, Gaussian).
* :func:`negative_fraction` — expected fraction of negative coordinates, optimistic and
  pessimistic regimes ([DESIGN] §4.4.1, Eqs. 2–3).
* :func:`max_dimension` — the thresholds ``d ≲ b²/(κ'σ²)`` and ``d ≲ b/(κ'σ²)``.
* :func:`stp_fixed_point` — scale-then-privatize steady state of ``v`` ([DESIGN] §4.3.1, App. B).
* :func:`stp_update_noise_coefficients`, :func:`stp_update_noise_variance` — the noise in Adam's
  updates under scale-then-privatize, isotropic and, with DP-MF, the DP-SGD prefix-sum objective
  ([DESIGN] §4.5, reconstructed).

The ``dpsim verify`` checks of these bounds (family ``"[DESIGN] bias"``) are in
:mod:`dpsim.analysis.checks.design`.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from dpsim.analysis._validate import out as _out
from dpsim.analysis._validate import real, steps

__all__ = [
    "noise_variance",
    "ema_weights",
    "ema_weight_sq_sum",
    "postprocessing_bias",
    "mf_step_variance",
    "mf_weighted_variance",
    "mf_variance_lower_bound",
    "ema_sqrt_strategy",
    "corrected_variance",
    "negative_probability",
    "negative_fraction",
    "max_dimension",
    "stp_fixed_point",
    "stp_update_noise_coefficients",
    "stp_update_noise_variance",
    "REGIMES",
    "METHODS",
]

REGIMES = ("optimistic", "pessimistic")
METHODS = ("exact", "saddlepoint", "gamma", "gaussian")

# weights below this fraction of the largest one are dropped from the exact computations: the
# dropped part of Σ w_j is below 1e-16 · (1 + β)/(1 − β)·max w ≤ 1e-13, far below any tolerance.
_W_RTOL = 1e-16

# numerical settings of the quadratures and root searches below (accuracy knobs, not formulas):
#: Imhof's integral is split at U = _IMHOF_SPLIT / sd(Q): adaptive quadrature below, QUADPACK's
#: Fourier rule above, and only when log ρ(U) < _IMHOF_SPLIT (else the tail is below e^-40)
_IMHOF_SPLIT = 40.0
#: the integrand is 0 in double precision once log ρ(u) exceeds −log(smallest subnormal) ≈ 745
_LOG_UNDERFLOW = 745.0
#: QUADPACK options of the Fourier-weighted tail (QAWF's cycle limit)
_QAWF = {"limlst": 200}
#: root brackets: the saddlepoint's starting lower end below the mean (multiplied by _GROWTH until
#: it brackets) and its upper end above the mean as a fraction of the pole 1/(2 max a_j); log λ's
#: bracket in the inversion of the negative fraction (upper end raised by _GROWTH until it brackets)
_SADDLE_LO = -1.0
_SADDLE_HI = 1.0 - 1e-15
_LOG_LAMBDA_BRACKET = (math.log(1e-8), 0.0)
_GROWTH = 2.0
#: Lugannani–Rice switches to its value at the mean when x is within _AT_MEAN standard deviations
#: of the mean, or when w or v falls below _TINY (its 1/w − 1/v cancels there)
_AT_MEAN = 1e-6
_TINY = 1e-7


# ------------------------------------------------------------------------------------------------
# validation helpers
# ------------------------------------------------------------------------------------------------
def _arr(name, x, **kw):
    return real(name, x, nonempty=True, **kw)


def _t_arr(t):
    """``t`` (1-based step) as a float array with ``inf`` for ``None`` (the large-t limit)."""
    return np.asarray(np.inf) if t is None else steps("t", t)


def _regime(regime):
    if regime not in REGIMES:
        raise ValueError(f"regime must be one of {', '.join(REGIMES)}, got regime={regime!r}")
    return regime


def _method(method):
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got method={method!r}")
    return method


# ------------------------------------------------------------------------------------------------
# Φ and the EMA weights
# ------------------------------------------------------------------------------------------------
def noise_variance(noise_multiplier, clip, batch_size):
    """Per-coordinate variance of the privacy noise in the averaged release: ``Φ = (σ C / b)²``.

    Source: [ADAMBC] Eq. 2 (``Φ = (σC/B)²``); ALGORITHMS §0.  The noise ``N(0, σ²C²I)`` is added
    to the clipped *sum* and divided by the nominal batch size ``b`` (also under Poisson sampling).
    Assumptions: ``σ ≥ 0``, ``C > 0`` finite, ``b > 0``.  [ADAMBC] prints ``Φ ≈ 2.441e-8`` for
    ``(B, C, σ) = (256, 0.1, 0.4)`` and ``Φ ≈ 1.5e-5`` for ``(256, 1.0, 1.0)``; both are reproduced
    (tests).
    """
    s = _arr("noise_multiplier", noise_multiplier, nonneg=True)
    c = _arr("clip", clip, positive=True)
    b = _arr("batch_size", batch_size, positive=True)
    s, c, b = np.broadcast_arrays(s, c, b)
    return _out((s * c / b) ** 2, s.shape)


@functools.lru_cache(maxsize=256)
def _weights(beta: float, t: float) -> np.ndarray:
    """Bias-corrected EMA weights ``w_j`` (most recent first); ``t = inf``: the stationary
    weights ``(1−β)β^k`` truncated where they fall below ``_W_RTOL`` of the largest."""
    if beta == 0.0:
        return np.ones(1)
    kmax = int(math.ceil(math.log(_W_RTOL) / math.log(beta))) + 1
    n = kmax if math.isinf(t) else min(int(t), kmax)
    k = np.arange(n, dtype=float)
    w = (1.0 - beta) * beta ** k
    if not math.isinf(t):
        w /= -math.expm1(int(t) * math.log(beta))  # 1 − β^t, accurate for β^t near 1
    w.setflags(write=False)
    return w


def ema_weights(beta2, t):
    """Bias-corrected EMA weights of Adam's ``v̂_t``: ``w_j = (1−β2) β2^{t−j} / (1−β2^t)``,
    ``j = 1..t`` (returned in step order ``j = 1..t``; they sum to one).

    Source: [DESIGN] §3.1 and App. A (reconstructed; standard Adam algebra).  Scalar ``beta2`` in
    ``[0, 1)`` and integer ``t ≥ 1``.
    """
    b = float(_arr("beta2", beta2, lo=0.0, hi=1.0, hi_open=True))
    t = _t_arr(t)
    if t.ndim or math.isinf(float(t)):
        raise ValueError(f"ema_weights needs a scalar finite t, got t={t!r}")
    t = int(t)
    if b == 0.0:
        w = np.zeros(t)
        w[-1] = 1.0
        return w
    k = np.arange(t - 1, -1, -1, dtype=float)
    return (1.0 - b) * b ** k / -math.expm1(t * math.log(b))


def ema_weight_sq_sum(beta2, t=None):
    """``Σ_{j=1..t} w_j² = ((1−β2)/(1+β2)) · (1+β2^t)/(1−β2^t)``; ``t=None``: the limit
    ``(1−β2)/(1+β2)`` (``= 1/n_eff``, the inverse effective number of averaged steps).

    Derivation: ``Σ_j (1−β)² β^{2(t−j)} / (1−β^t)² = (1−β)² (1−β^{2t}) / ((1−β²)(1−β^t)²)`` and
    ``1−β^{2t} = (1−β^t)(1+β^t)``, ``1−β² = (1−β)(1+β)``.  Checked with sympy in the tests.
    """
    b = _arr("beta2", beta2, lo=0.0, hi=1.0, hi_open=True)
    t = _t_arr(t)
    b, t = np.broadcast_arrays(b, t)
    bt = b ** t  # β^∞ = 0 for 0 ≤ β < 1: the t → ∞ limit
    out = (1.0 - b) / (1.0 + b) * (1.0 + bt) / (1.0 - bt)
    return _out(out, b.shape)


# ------------------------------------------------------------------------------------------------
# post-processing bias ([DESIGN] §3.1, App. A; [ADAMBC] Eq. 2)
# ------------------------------------------------------------------------------------------------
def mf_step_variance(strategy, steps):
    """Per-step variance ``E[u_t²] = sens(M)² Σ_k (M⁻¹)_{tk}²`` of the unit-scale DP-MF noise
    ``u = sens(M) · M⁻¹ Z`` (diagonal of ``sens² M⁻¹M⁻ᵀ``), shape ``(T,)``.

    ``strategy``: a name understood by :mod:`dpsim.privacy.mf` (``"identity"``/``"gaussian"``,
    ``"sqrt_toeplitz"``, ``"banded:<k>"``; Toeplitz, computed in O(T) from the coefficients of
    ``M⁻¹``) or a lower-triangular invertible ``T×T`` matrix ``M`` (``sens`` = largest column norm,
    :func:`dpsim.privacy.mf.sensitivity`).  ``steps``: the horizon ``T`` the strategy is built for (banded
    strategies are optimized for it); ignored for a matrix.
    """
    from dpsim.privacy import mf

    if isinstance(strategy, str):
        T = int(_arr("steps", steps, positive=True, integer=True))
        coefs = mf.toeplitz_coefficients(strategy, T)
        return np.asarray(mf.toeplitz_step_variance(coefs, T), dtype=float)
    M = np.asarray(strategy, dtype=float)
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] == 0:
        raise ValueError(f"strategy must be a strategy name or a square matrix, got shape {M.shape}")
    if np.any(np.triu(M, 1) != 0) or np.any(np.diag(M) == 0):
        raise ValueError("strategy matrix must be lower triangular with a non-zero diagonal")
    from scipy.linalg import solve_triangular

    Minv = solve_triangular(M, np.eye(M.shape[0]), lower=True)
    return mf.sensitivity(M) ** 2 * np.sum(Minv * Minv, axis=1)


def _strategy_matrix(strategy, steps):
    from dpsim.privacy import mf

    if isinstance(strategy, str):
        return mf.strategy(strategy, int(_arr("steps", steps, positive=True, integer=True)))
    M = np.asarray(strategy, dtype=float)
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] == 0:
        raise ValueError(f"strategy must be a strategy name or a square matrix, got shape {M.shape}")
    if np.any(np.triu(M, 1) != 0) or np.any(np.diag(M) == 0):
        raise ValueError("strategy matrix must be lower triangular with a non-zero diagonal")
    return M


def _weight_vector(weights):
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)):
        raise ValueError(f"weights must be a non-empty finite vector, got shape {w.shape}")
    return w


def mf_weighted_variance(weights, strategy, steps=None):
    """Variance of the noise in ``Σ_j w_j x̃_j`` when the stream ``x_1..x_T`` is released with DP-MF
    at unit noise scale, ``x̃ = x + u``, ``u = sens(M) · M⁻¹ Z`` (:mod:`dpsim.privacy.mf`):

        Var(Σ_j w_j u_j) = sens(M)² · ||wᵀ M⁻¹||²,        sens(M) = max_j ||M_{:,j}||.

    Multiply by ``(σ C/b)²`` for a privatizer of noise multiplier ``σ``, clip ``C``, batch ``b``.
    ``weights``: ``(T,)`` in step order (e.g. :func:`ema_weights`); ``strategy``: a name of
    :mod:`dpsim.privacy.mf` (built for horizon ``steps``, default ``T``) or a lower-triangular
    invertible ``T×T`` matrix.  Source: the DP-MF noise model of [DESIGN] §2.1 / App. A
    (reconstructed; ALGORITHMS §2.6).
    """
    from scipy.linalg import solve_triangular

    from dpsim.privacy import mf

    w = _weight_vector(weights)
    M = _strategy_matrix(strategy, w.size if steps is None else steps)
    if M.shape[0] != w.size:
        raise ValueError(f"weights have {w.size} steps but the strategy has {M.shape[0]}")
    b = solve_triangular(M, w, trans="T", lower=True)  # Mᵀ b = w, i.e. bᵀ = wᵀ M⁻¹
    return float(mf.sensitivity(M) ** 2 * (b @ b))


def mf_variance_lower_bound(weights):
    """Lower bound on :func:`mf_weighted_variance` over **every** strategy ``M``:

        sens(M)² ||wᵀ M⁻¹||²  ≥  max_j w_j²   (unit noise scale).

    Source: [DESIGN] §4.4.1 ("the high-dimensional case with prefix sums"; formulas lost in
    extraction, **reconstructed** from its words): the paper bounds DP-MF's variance for a decaying
    prefix sum below by "that of just privatizing the highest-weight term".  Why it holds for every
    factorization: with ``bᵀ = wᵀ M⁻¹``, ``w_j = bᵀ M e_j ≤ ||b|| · ||M_{:,j}|| ≤ ||b|| · sens(M)``
    (Cauchy–Schwarz), so ``sens(M)² ||b||² ≥ w_j²`` for every ``j``.  Equality needs ``b`` parallel to
    the column ``M_{:,j}`` of largest weight, which one strategy can arrange for one sum only.  For
    Adam's bias-corrected second moment (:func:`ema_weights`) the largest weight is the newest,
    ``(1−β2)/(1−β2^t)``; i.i.d. noise gives ``Σ_j w_j²`` (:func:`ema_weight_sq_sum`), about
    ``1/((1−β2)(1+β2))`` times the bound for large ``t``.
    """
    w = _weight_vector(weights)
    return float(np.max(w * w))


def ema_sqrt_strategy(beta, steps):
    """Lower-triangular Toeplitz strategy ``M = (I − βS)^{−1/2}`` (``S`` the shift) for the decaying
    sums ``Σ_j β^{t−j} x_j``: coefficients ``c_k = binom(2k, k) β^k / 4^k``, so ``M² = (I − βS)⁻¹``
    and the noise of the EMA is ``(1−β) · sens(M) · M Z``; at ``t = T`` its variance is
    ``(1−β)² (Σ_{k<T} c_k²)²`` against the lower bound ``(1−β)²`` of :func:`mf_variance_lower_bound`
    (ratio ``(Σ c_k²)²`` → ``((2/π) K(β))²`` with ``K`` the complete elliptic integral of the first
    kind, modulus ``β``).  The decaying analogue of the square-root factorization of prefix sums
    (``β = 1``: :func:`dpsim.privacy.mf.sqrt_toeplitz_coefficients`); our construction, used as
    a witness that the lower bound is nearly attained for moderate ``β``.
    """
    b = float(_arr("beta", beta, lo=0.0, hi=1.0, hi_open=True))
    T = int(_arr("steps", steps, positive=True, integer=True))
    k = np.arange(T, dtype=float)
    # binom(2k, k)/4^k = Π_{i=1..k} (2i − 1)/(2i), built as a cumulative product (no overflow)
    c = np.concatenate(([1.0], np.cumprod((2.0 * k[1:] - 1.0) / (2.0 * k[1:])))) * b ** k
    idx = np.arange(T)
    lag = idx[:, None] - idx[None, :]
    return np.where(lag >= 0, c[np.clip(lag, 0, None)], 0.0)


def postprocessing_bias(noise_multiplier, clip, batch_size, *, beta2=None, t=None, strategy=None,
                        steps=None, raw=False):
    """Per-coordinate bias of DP-Adam's second moment under post-processing:
    ``E[v̂_t] − v̂_t^c`` (``raw=False``, bias-corrected ``v̂``) or ``E[v_t] − v_t^c`` (``raw=True``).

    Formulas (``Φ = (σC/b)²``, :func:`noise_variance`; ``w_j`` the EMA weights, :func:`ema_weights`):

    * i.i.d. Gaussian noise (DP-SGD; ``strategy`` ``None``/``"identity"``/``"gaussian"``):
      ``E[v̂_t] − v̂_t^c = Φ`` for every ``t`` and ``β2`` ([DESIGN] §3.1, by induction;
      reconstructed), i.e. ``E[v_t] − v_t^c = (1 − β2^t) Φ`` before Adam's correction ([ADAMBC]
      Eq. 2, printed).  Derivation: ``E[(ḡ_j + z_j)²] = ḡ_j² + Φ`` (the cross term has mean zero
      because ``z_j`` is independent of ``ḡ_j``) and ``Σ_j w_j = 1``.
    * DP-MF correlated noise ([DESIGN] App. A, **reconstructed**): the noise of step ``j`` is
      ``√Φ · u_j``, ``u = sens(M) M⁻¹ Z``, so ``E[z_j²] = Φ · sens(M)² Σ_k (M⁻¹)_{jk}²`` and

          E[v̂_t] − v̂_t^c = Φ · sens(M)² · Σ_{j=1..t} w_j Σ_{k≤j} (M⁻¹)_{jk}²
                         = Φ · tr(W M⁻¹M⁻ᵀ) · sens(M)²,   W = diag(w_1..w_t, 0..0),

      equivalently the recursion ``B_t = β2 B_{t−1} + (1−β2) Φ E[u_t²]``, bias ``B_t/(1−β2^t)``
      (the form of App. A: "if the bias correction is ... in iteration t").  Note: ALGORITHMS.md
      §4.3 abbreviates this as ``Φ·Σ_j w_j (M⁻¹)_{tj}²``; read literally (row ``t`` of ``M⁻¹``)
      that is wrong — for ``M = I`` it would give ``w_t Φ`` instead of ``Φ`` — and the Monte Carlo
      check (``dpsim.simulate`` with ``noise=``) rejects it; the code uses the row-norm form above.

    Parameters: ``noise_multiplier`` σ ≥ 0, ``clip`` C > 0, ``batch_size`` b > 0 (broadcast).
    ``beta2`` in [0, 1) and integer ``t ≥ 1`` (``t=None``: ``t → ∞``; with DP-MF a finite ``t`` is
    required) are needed for DP-MF and for ``raw=True``; ``strategy``: ``None``, a
    :mod:`dpsim.privacy.mf` name or a ``T×T`` strategy matrix; ``steps``: the horizon ``T`` of a named
    strategy (default ``max(t)``; banded strategies depend on it).  The clean stream is any fixed
    sequence of clipped means (the bias does not depend on it).
    """
    phi = np.asarray(noise_variance(noise_multiplier, clip, batch_size), dtype=float)
    if isinstance(strategy, str):
        from dpsim.privacy import mf

        kind, _ = mf.parse_noise(strategy)
        if kind == "identity":
            strategy = None
    needs = raw or strategy is not None
    if not needs:  # Φ, for every t and β2 (validated, broadcast)
        b2 = np.asarray(0.0) if beta2 is None else _arr("beta2", beta2, lo=0.0, hi=1.0, hi_open=True)
        phi, _, _ = np.broadcast_arrays(phi, b2, _t_arr(t))
        return _out(phi, phi.shape)
    if beta2 is None:
        raise ValueError("beta2 is required for raw=True and for DP-MF strategies, got beta2=None")
    b2 = _arr("beta2", beta2, lo=0.0, hi=1.0, hi_open=True)
    tt = _t_arr(t)
    if strategy is not None and (t is None or np.any(np.isinf(tt))):
        raise ValueError("a DP-MF strategy needs a finite step t (its noise is not stationary), got t=None")
    phi, b2, tt = np.broadcast_arrays(phi, b2, tt)
    if strategy is None:
        factor = np.ones(phi.shape)
    else:
        if isinstance(strategy, str):
            T = int(np.max(tt)) if steps is None else int(_arr("steps", steps, positive=True, integer=True))
            sv = mf_step_variance(strategy, T)
        else:
            sv = mf_step_variance(strategy, None)
            T = sv.size
        if np.max(tt) > T:
            raise ValueError(f"t={int(np.max(tt))} exceeds the strategy's horizon steps={T}")
        factor = np.empty(phi.shape)
        pairs = {}
        for idx in np.ndindex(phi.shape):
            key = (float(b2[idx]), int(tt[idx]))
            if key not in pairs:
                w = ema_weights(key[0], key[1])
                pairs[key] = float(np.dot(w, sv[: key[1]]))
            factor[idx] = pairs[key]
    out = phi * factor
    if raw:  # β2^∞ = 0 for 0 ≤ β2 < 1: the factor is 1 in the large-t limit
        out = out * (1.0 - b2 ** tt)
    return _out(out, phi.shape)


# ------------------------------------------------------------------------------------------------
# variance of the bias-corrected estimate ([DESIGN] §4.4.1, App. C)
# ------------------------------------------------------------------------------------------------
def corrected_variance(g, phi, beta2, *, t=None):
    """Variance of the bias-corrected second-moment estimate ``v̂_t − Φ`` in one coordinate whose
    clipped mean is the constant ``g`` in every step (i.i.d. noise ``z_j ~ N(0, Φ)``).

    Source: [DESIGN] §4.4.1 and App. C ("Unrolling the recursion ... the variance of ..."),
    **reconstructed**; ALGORITHMS §4.3.

    Derivation.  ``v̂_t − Φ = Σ_j w_j ((g + z_j)² − Φ) = g² + Σ_j w_j (2 g z_j + z_j² − Φ)``; the
    summands are independent with mean zero, and ``Var(2 g z + z²) = 4g²Φ + 2Φ²`` because
    ``Cov(z, z²) = E z³ = 0`` (z symmetric) and ``Var z² = 2Φ²``.  Hence, exactly for every t,

        Var(v̂_t − Φ) = (2Φ² + 4g²Φ) · Σ_j w_j²
                      = (2Φ² + 4g²Φ) · ((1−β2)/(1+β2)) · (1+β2^t)/(1−β2^t),

    which tends to the paper's ``((1−β2)/(1+β2)) (2Φ² + 4g²Φ)`` as ``t → ∞`` (``t=None``).  The
    mean is ``g²`` (unbiased).  Checked symbolically (sympy) and by simulation.
    """
    g = _arr("g", g)
    p = _arr("phi", phi, nonneg=True)
    s2 = np.asarray(ema_weight_sq_sum(beta2, t))
    g, p, s2 = np.broadcast_arrays(g, p, s2)
    return _out((2.0 * p * p + 4.0 * g * g * p) * s2, g.shape)


# ------------------------------------------------------------------------------------------------
# distribution of v̂ − Φ: P(v̂ − Φ < 0)
# ------------------------------------------------------------------------------------------------
# With λ = g²/Φ and ξ_j i.i.d. N(0, 1):  v̂_t/Φ = Q := Σ_j w_j (ξ_j + √λ)²,  a positive combination
# of non-central χ²₁(λ) variables (a "generalized chi-square"), and v̂ − Φ < 0  ⇔  Q < 1.
# Cumulants: κ_r(Q) = 2^{r−1} (r−1)! Σ_j w_j^r (1 + r λ).


def _imhof_cdf(a: np.ndarray, lam: float, x: float = 1.0) -> float:
    """``P(Σ a_j (ξ_j + √λ)² < x)`` by Imhof's (1961) inversion formula

        P(Q > x) = 1/2 + (1/π) ∫_0^∞ sin θ(u) / (u ρ(u)) du,
        θ(u) = ½ Σ_j [arctan(a_j u) + λ a_j u/(1 + a_j²u²)] − ½ x u,
        ρ(u) = Π_j (1 + a_j²u²)^{1/4} · exp(½ Σ_j λ a_j²u²/(1 + a_j²u²)),

    integrated adaptively on ``[0, U]`` and, for the oscillatory tail, with QUADPACK's Fourier
    rule (QAWF) on ``[U, ∞)`` after writing ``sin θ = sin φ cos(xu/2) − cos φ sin(xu/2)``."""
    from scipy.integrate import quad


    def parts(u):
        au = a * u
        au2 = au * au
        phi = 0.5 * float(np.sum(np.arctan(au) + lam * au / (1.0 + au2)))
        logrho = 0.25 * float(np.sum(np.log1p(au2))) + 0.5 * lam * float(np.sum(au2 / (1.0 + au2)))
        return phi, logrho

    def f(u):  # QUADPACK's Gauss–Kronrod nodes are interior: f is never called at u = 0
        phi, logrho = parts(u)
        if logrho > _LOG_UNDERFLOW:
            return 0.0
        return math.sin(phi - 0.5 * x * u) * math.exp(-logrho) / u

    U = _IMHOF_SPLIT / math.sqrt(_cumulants(a, lam)[1])  # in units of Q's standard deviation
    head, _ = quad(f, 0.0, U, limit=2000, epsabs=1e-13, epsrel=1e-10)
    _, lr = parts(U)
    tail = 0.0
    if lr < _IMHOF_SPLIT:  # the tail can matter (few terms): Fourier-weighted quadrature
        def fs(u):
            phi, logrho = parts(u)
            return math.sin(phi) * math.exp(-logrho) / u

        def fc(u):
            phi, logrho = parts(u)
            return math.cos(phi) * math.exp(-logrho) / u

        t1, _ = quad(fs, U, np.inf, weight="cos", wvar=0.5 * x, **_QAWF)
        t2, _ = quad(fc, U, np.inf, weight="sin", wvar=0.5 * x, **_QAWF)
        tail = t1 - t2
    p_gt = 0.5 + (head + tail) / math.pi
    return min(1.0, max(0.0, 1.0 - p_gt))


def _cumulants(a: np.ndarray, lam: float):
    s1, s2, s3 = float(a.sum()), float(a @ a), float(np.sum(a ** 3))
    return (1.0 + lam) * s1, 2.0 * s2 * (1.0 + 2.0 * lam), 8.0 * s3 * (1.0 + 3.0 * lam)


def _saddlepoint_cdf(a: np.ndarray, lam: float, x: float = 1.0) -> float:
    """Lugannani–Rice saddlepoint approximation of ``P(Q < x)`` (Kuonen 1999, *Biometrika*
    86:929, for quadratic forms in normal variables).  CGF
    ``K(s) = Σ_j [−½ log(1 − 2a_j s) + λ a_j s/(1 − 2a_j s)]``, saddlepoint ``K'(ŝ) = x``,
    ``w = sign(ŝ)√(2(ŝx − K(ŝ)))``, ``v = ŝ√K''(ŝ)``, ``P ≈ Φ(w) + φ(w)(1/w − 1/v)``."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    k1, k2, k3 = _cumulants(a, lam)

    def K(s):
        r = 1.0 - 2.0 * a * s
        return float(np.sum(-0.5 * np.log(r) + lam * a * s / r))

    def K1(s):
        r = 1.0 - 2.0 * a * s
        return float(np.sum(a / r + lam * a / (r * r)))

    def K2(s):
        r = 1.0 - 2.0 * a * s
        return float(np.sum(2.0 * a * a / (r * r) + 4.0 * lam * a * a / r ** 3))

    at_mean = 0.5 + k3 / (6.0 * math.sqrt(2.0 * math.pi) * k2 ** 1.5)  # the removable singularity
    if abs(x - k1) < _AT_MEAN * math.sqrt(k2):
        return at_mean
    smax = 0.5 / float(a.max())
    if x > k1:
        lo, hi = 0.0, smax * _SADDLE_HI
    else:
        lo, hi = _SADDLE_LO, 0.0
        while K1(lo) > x:
            lo *= _GROWTH
    s = brentq(lambda s: K1(s) - x, lo, hi, xtol=1e-300, rtol=1e-15, maxiter=500)
    w2 = 2.0 * (s * x - K(s))
    w = math.copysign(math.sqrt(max(w2, 0.0)), s)
    v = s * math.sqrt(K2(s))
    if abs(w) < _TINY or abs(v) < _TINY:
        return at_mean
    p = float(norm.cdf(w) + norm.pdf(w) * (1.0 / w - 1.0 / v))
    return min(1.0, max(0.0, p))


def _gamma_cdf(a: np.ndarray, lam: float, x: float = 1.0) -> float:
    """Three-cumulant (Pearson type III) approximation: ``Q ≈ μ − kθ + θ G``, ``G ~ Γ(k, 1)``,
    ``k = 4/γ²`` with ``γ = κ3/κ2^{3/2}`` the skewness, ``θ = √(κ2/k)``."""
    from scipy.special import gammainc

    k1, k2, k3 = _cumulants(a, lam)
    gam = k3 / k2 ** 1.5
    k = 4.0 / (gam * gam)
    th = math.sqrt(k2 / k)
    arg = (x - k1 + k * th) / th
    return float(gammainc(k, arg)) if arg > 0 else 0.0


def _gaussian_cdf(a: np.ndarray, lam: float, x: float = 1.0) -> float:
    """Two-moment (normal) approximation ``Φ_N((x − κ1)/√κ2)``: with ``x = 1``,
    ``Φ_N(−λ / √(Σw² (2 + 4λ)))`` = ``Φ_N(−g²/√Var(v̂ − Φ))`` (:func:`corrected_variance`)."""
    from scipy.stats import norm

    k1, k2, _ = _cumulants(a, lam)
    return float(norm.cdf((x - k1) / math.sqrt(k2)))


_CDFS = {"exact": _imhof_cdf, "saddlepoint": _saddlepoint_cdf, "gamma": _gamma_cdf,
         "gaussian": _gaussian_cdf}


@functools.lru_cache(maxsize=4096)
def _neg_prob_scalar(lam: float, beta: float, t: float, method: str) -> float:
    if math.isinf(lam):
        return 0.0
    a = _weights(beta, t)
    if a.size == 1:  # β2 = 0 or t = 1: Q = (ξ + √λ)², an exact non-central χ²₁
        from scipy.stats import ncx2, chi2

        q = 1.0 / float(a[0])
        if method in ("exact",):
            return float(chi2.cdf(q, 1)) if lam == 0.0 else float(ncx2.cdf(q, 1, lam))
    return _CDFS[method](a, lam)


def negative_probability(g, phi, beta2, *, t=None, method="exact"):
    """Probability that the bias-corrected second-moment estimate is negative, ``P(v̂_t − Φ < 0)``,
    in one coordinate whose clipped mean is the constant ``g`` (noise ``z_j ~ N(0, Φ)`` i.i.d.).

    Source: the model of [DESIGN] §4.4.1 / App. C (**reconstructed**); the paper only bounds this
    probability through the standard deviation (Chebyshev-type reasoning); here it is computed.

    Distribution.  With ``λ = g²/Φ`` and ``ξ_j`` i.i.d. standard normal,
    ``v̂_t/Φ = Q = Σ_j w_j (ξ_j + √λ)²`` — a positive combination of non-central ``χ²₁(λ)`` —
    so ``P(v̂_t − Φ < 0) = P(Q < 1)``.  ``method``:

    * ``"exact"`` (default): Imhof's numerical inversion of the characteristic function (to
      ~1e-10 absolute); for a single term (``t = 1`` or ``β2 = 0``) the non-central χ² CDF.
      Cost grows with the number of weights (``≈ 37·(1+β2)/(1−β2)`` for ``t=None``).
    * ``"saddlepoint"``: Lugannani–Rice (Kuonen 1999), fast; relative error below 5e-3 of the exact
      value for ``β2 ≥ 0.9`` down to fractions of 1e-6 (tests), about 1% with only 2–3 weights.
    * ``"gamma"``: 3-cumulant Pearson III moment match.
    * ``"gaussian"``: ``Φ_N(−g² / √Var(v̂ − Φ))`` with the exact finite-t variance
      (:func:`corrected_variance`) — the approximation behind the paper's reasoning; it ignores
      the right skew of ``Q`` and overestimates the fraction when it is small.

    Parameters broadcast: ``g`` real, ``phi`` ≥ 0 (``phi = 0``: no noise, probability 0),
    ``beta2`` in [0, 1), ``t`` integer ≥ 1 or ``None`` (``t → ∞``).
    """
    _method(method)
    g = _arr("g", g)
    p = _arr("phi", phi, nonneg=True)
    b = _arr("beta2", beta2, lo=0.0, hi=1.0, hi_open=True)
    tt = _t_arr(t)
    g, p, b, tt = np.broadcast_arrays(g, p, b, tt)
    out = np.empty(g.shape)
    lam = np.divide(g * g, p, out=np.full(g.shape, np.inf), where=p > 0)
    for idx in np.ndindex(g.shape):
        out[idx] = _neg_prob_scalar(float(lam[idx]), float(b[idx]), float(tt[idx]), method)
    return _out(out, g.shape)


def _regime_lambda(d, batch_size, noise_multiplier, regime):
    """``λ = g_j²/Φ``: optimistic ``g_j² = C²/d`` → ``b²/(σ²d)``; pessimistic ``g_j² = C²/(bd)``
    → ``b/(σ²d)`` (``C`` cancels)."""
    num = batch_size * batch_size if regime == "optimistic" else batch_size
    with np.errstate(divide="ignore"):  # σ = 0: λ = b^k/0 = inf (num ≥ 1)
        return num / (noise_multiplier * noise_multiplier * d)


def negative_fraction(d, batch_size, noise_multiplier, beta2, *, clip=1.0, regime="optimistic", t=None,
                      method="exact"):
    """Predicted fraction of coordinates whose bias-corrected second moment ``v̂_t − Φ`` is negative
    (DP-Adam with bias correction, [DESIGN] Alg. 7 / [ADAMBC]), for a constant clipped mean ``ḡ``
    spread evenly over ``d`` coordinates.

    Source: [DESIGN] §4.4.1 and App. C, Eqs. 2–3 (**reconstructed**; ALGORITHMS §4.3):

    * ``regime="optimistic"`` (Eq. 2): all per-example gradients equal, ``||ḡ|| = C``,
      ``g_j² = C²/d``; ``λ = g_j²/Φ = b²/(σ²d)``.
    * ``regime="pessimistic"`` (Eq. 3): the ``b`` per-example (clipped, norm ``C``) gradients are
      orthogonal, ``||ḡ||² = C²/b``, ``g_j² = C²/(bd)``; ``λ = b/(σ²d)``.  Orthogonality of ``b``
      vectors needs ``d ≥ b``: smaller ``d`` raises ``ValueError``.

    Every coordinate then has the same ``λ`` and independent noise, so the expected fraction equals
    the per-coordinate probability :func:`negative_probability` ``= P(Σ_j w_j(ξ_j + √λ)² < 1)``.
    The clip norm cancels (``clip`` is validated only).  ``t``: the step (``None``: ``t → ∞``);
    ``method``: see :func:`negative_probability`.  ``noise_multiplier = 0`` gives 0.

    Behaviour: the fraction depends on ``(d, b, σ)`` only through ``λ``, increases with ``d`` and
    tends to ``P(Σ_j w_j ξ_j² < 1)`` (≈ 1/2 for large ``n_eff``) as ``d → ∞``.  Coordinates with
    unequal magnitudes ([DESIGN] Fig. 6) are covered by :func:`negative_probability` per
    coordinate.
    """
    _regime(regime)
    d = _arr("d", d, positive=True)
    bs = _arr("batch_size", batch_size, positive=True)
    s = _arr("noise_multiplier", noise_multiplier, nonneg=True)
    _arr("clip", clip, positive=True)
    b = _arr("beta2", beta2, lo=0.0, hi=1.0, hi_open=True)
    tt = _t_arr(t)
    _method(method)
    d, bs, s, b, tt = np.broadcast_arrays(d, bs, s, b, tt)
    if regime == "pessimistic" and np.any(d < bs):
        raise ValueError("the pessimistic regime (b orthogonal per-example gradients) needs d ≥ batch_size; "
                         f"got d={d[d < bs].min()!r} < batch_size={bs[d < bs].max()!r}")
    lam = _regime_lambda(d, bs, s, regime)
    out = np.empty(d.shape)
    for idx in np.ndindex(d.shape):
        out[idx] = _neg_prob_scalar(float(lam[idx]), float(b[idx]), float(tt[idx]), method)
    return _out(out, d.shape)


def max_dimension(batch_size, noise_multiplier, beta2, *, kappa=2.0, regime="optimistic", t=None,
                  fraction=None, method="exact"):
    """Largest dimension for which bias correction rarely produces negative ``v̂ − Φ``.

    Source: [DESIGN] §4.4.1, Eqs. 2 (optimistic) and 3 (pessimistic), **reconstructed**:

        d ≲ b² / (κ' σ²)   (optimistic),        d ≲ b / (κ' σ²)   (pessimistic),

    Derivation (``fraction=None``, the paper's form).  Non-negativity with high probability needs
    ``sd(v̂ − Φ) ≤ g²/κ``.  In the relevant regime ``g² ≪ Φ`` the variance is
    ``≈ 2Φ² Σ_j w_j²`` (:func:`corrected_variance` without its ``4g²Φ`` term), so the condition is
    ``g² ≥ κ Φ √(2 Σ_j w_j²)`` → ``g² ≥ κ Φ √(2(1−β2)/(1+β2))`` for large t.  Substituting
    ``g² = C²/d`` (optimistic) or ``C²/(bd)`` (pessimistic) and ``Φ = σ²C²/b²`` gives the bounds
    with ``κ' = κ √(2 Σ_j w_j²)`` (``= κ √(2(1−β2)/(1+β2))`` for ``t=None``).  ``kappa`` is the
    number of standard deviations: under the Gaussian approximation the predicted fraction at the
    threshold is about ``Φ_N(−κ)`` (slightly more, because of the neglected ``4g²Φ`` term).
    ALGORITHMS.md writes ``g² ≳ κ_A Φ √((1−β2)/(1+β2))``, i.e. ``κ_A = √2 κ``.

    ``fraction=p`` (in (0, 1/2)) instead solves :func:`negative_fraction` ``(d) = p`` for ``d``
    exactly (with ``method``; root in ``λ``, the fraction being decreasing in ``λ``): the largest
    ``d`` with at most a fraction ``p`` of negative coordinates in expectation.

    Parameters broadcast; ``noise_multiplier`` must be positive here.
    """
    _regime(regime)
    bs = _arr("batch_size", batch_size, positive=True)
    s = _arr("noise_multiplier", noise_multiplier, positive=True)
    b = _arr("beta2", beta2, lo=0.0, hi=1.0, hi_open=True)
    tt = _t_arr(t)
    bs, s, b, tt = np.broadcast_arrays(bs, s, b, tt)
    num = bs * bs if regime == "optimistic" else bs * 1.0
    if fraction is None:
        k = _arr("kappa", kappa, positive=True)
        k = np.broadcast_to(k, bs.shape)
        kp = k * np.sqrt(2.0 * _s2_mixed(b, tt))
        return _out(num / (kp * s * s), bs.shape)
    _method(method)
    p = _arr("fraction", fraction)
    if np.any((p <= 0) | (p >= 0.5)):
        raise ValueError(f"fraction must lie in (0, 0.5), got fraction={fraction!r}")
    p = np.broadcast_to(p, bs.shape)
    out = np.empty(bs.shape)
    for idx in np.ndindex(bs.shape):
        lam = _lambda_for_fraction(float(p[idx]), float(b[idx]), float(tt[idx]), method)
        out[idx] = num[idx] / (s[idx] ** 2 * lam)
    return _out(out, bs.shape)


def _s2_mixed(b, tt):
    out = np.empty(b.shape)
    for idx in np.ndindex(b.shape):
        out[idx] = ema_weight_sq_sum(float(b[idx]), None if math.isinf(tt[idx]) else int(tt[idx]))
    return out


def _lambda_for_fraction(p: float, beta: float, t: float, method: str) -> float:
    from scipy.optimize import brentq

    f = lambda loglam: _neg_prob_scalar(math.exp(loglam), beta, t, method) - p  # noqa: E731
    lo, hi = _LOG_LAMBDA_BRACKET
    if f(lo) < 0:
        raise ValueError(f"fraction={p} is above the d → ∞ limit {p + f(lo):.4g} of the negative fraction")
    while f(hi) > 0:
        hi += _GROWTH
    return math.exp(brentq(f, lo, hi, xtol=1e-12, rtol=1e-10))


# ------------------------------------------------------------------------------------------------
# scale-then-privatize steady state ([DESIGN] §4.3.1, App. B)
# ------------------------------------------------------------------------------------------------
def stp_fixed_point(second_moment, noise_multiplier, clip, batch_size, *, eps_scale=0.0, bracket=False):
    """Steady state of the second moment ``v`` under scale-then-privatize ([DESIGN] Alg. 8) with the
    RMSProp/Adam recursion: ``v*`` proportional to the clean second moment.

    Source: [DESIGN] §4.3.1 and App. B (Eqs. 1, 4, 5), **reconstructed**; ALGORITHMS §2.6, §4.3.

    Setting.  One coordinate; ``s_t = 1/(√v_{t−1} + ε_s)`` (raw, uncorrected ``v``); release
    ``g̃_t = (1/b)(Σ_i clip(s_t g_i, C) + N(0, σ²C²))/s_t``; ``v_t = β v_{t−1} + (1−β) g̃_t²``
    (the raw Adam ``v``, or RMSProp with ``β``).  Assume clipping is inactive
    (``||s_t ⊙ g_i|| ≤ C``) so that ``g̃_t = ḡ_t + (σC/b) ξ_t / s_t`` with ``ḡ_t`` the batch mean
    in the original geometry, independent of the noise ``ξ_t ~ N(0, 1)``, with clean second moment
    ``m = E[ḡ_t²]`` (``= mean² + sampling variance``; constant, e.g. frozen parameters).

    Derivation.  Conditioning on the past,
    ``E[g̃_t² | v_{t−1}] = m + Φ (√v_{t−1} + ε_s)²`` with ``Φ = (σC/b)²``, so

        E[v_t | v_{t−1}] = β v_{t−1} + (1−β) (m + Φ (√v_{t−1} + ε_s)²).

    ``v`` does not change in expectation iff ``v = m + Φ(√v + ε_s)²``, a quadratic in ``x = √v``:
    ``(1−Φ)x² − 2Φε_s x − (m + Φε_s²) = 0``, whose non-negative root is

        √v* = (Φ ε_s + √(Φ ε_s² + (1−Φ) m)) / (1 − Φ),     v* = m / (1 − Φ)  when ε_s = 0,

    proportional to the clean second moment ``m`` with the same factor ``1/(1−Φ)`` in every
    coordinate (unlike post-processing, whose ``v → m + Φ``).  A fixed point exists iff ``Φ < 1``
    (else ``E v`` grows without bound); ``β`` drops out.  With ``ε_s = 0`` the recursion for
    ``E v_t`` is linear, ``E v_t = ρ E v_{t−1} + (1−β) m`` with ``ρ = β + (1−β)Φ < 1``: the
    error to ``v*`` shrinks by the factor ``ρ`` per step (App. B's convergence claim), so
    ``E v_t → v*`` exactly.  With ``ε_s > 0``, ``E v + ε_s² ≤ E(√v + ε_s)² ≤ (√(E v) + ε_s)²``
    (Jensen) brackets the limit of ``E v_t`` between ``v_lo = (m + Φε_s²)/(1−Φ)`` and the ``v*``
    above; the bracket is narrow, ``v* − v_lo = 2Φε_s√v*/(1−Φ)`` (from the fixed-point equation).
    ``bracket=True`` returns ``(v_lo, v*)``.

    Parameters broadcast: ``second_moment`` m ≥ 0, ``noise_multiplier`` σ ≥ 0, ``clip`` C > 0,
    ``batch_size`` b > 0 (with ``Φ = (σC/b)² < 1``, else ``ValueError``), ``eps_scale`` ε_s ≥ 0.
    """
    m = _arr("second_moment", second_moment, nonneg=True)
    phi = np.asarray(noise_variance(noise_multiplier, clip, batch_size), dtype=float)
    e = _arr("eps_scale", eps_scale, nonneg=True)
    m, phi, e = np.broadcast_arrays(m, phi, e)
    if np.any(phi >= 1.0):
        raise ValueError("scale-then-privatize has no steady state when Φ = (σC/b)² ≥ 1 (E v grows without "
                         f"bound); got Φ={float(np.max(phi)):.6g}")
    x = (phi * e + np.sqrt(phi * e * e + (1.0 - phi) * m)) / (1.0 - phi)
    hi = x * x
    if not bracket:
        return _out(hi, m.shape)
    lo = (m + phi * e * e) / (1.0 - phi)
    return _out(lo, m.shape), _out(hi, m.shape)


# ------------------------------------------------------------------------------------------------
# scale-then-privatize and correlated noise ([DESIGN] §4.5)
# ------------------------------------------------------------------------------------------------
def stp_update_noise_coefficients(beta2, phi, steps):
    """Per-step multiplier ``c_t`` of the isotropic release noise in Adam's update under
    scale-then-privatize, ``t = 1..steps`` — the same in every coordinate.

    Source: [DESIGN] §4.5 (the formulas were lost in extraction; **reconstructed** from its text:
    under scale-then-privatize the noise "added to each update" is roughly isotropic, its
    per-coordinate coefficient "approaches" a constant as ``t`` grows, so a DP-MF strategy can be
    chosen offline as for DP-SGD).

    Derivation (Adam with ``β1 = 0`` and bias correction, one coordinate, clipping inactive, the
    stability constants negligible).  The release is ``g̃_t = ḡ_t + √Φ u_t (√v_{t−1} + ε_s)``
    with unit noise ``u_t`` (i.i.d. ``N(0, 1)`` or DP-MF's ``sens(M)(M⁻¹Z)_t``), so the noise part
    of the update ``−η g̃_t/√v̂_t`` is ``−η√Φ u_t r_t`` with
    ``r_t = √v_{t−1}/√v̂_t = √((1 − β2^t) v_{t−1}/v_t)``.  Since ``v_t = β2 v_{t−1} + (1−β2) g̃_t²``,
    ``r_t ≤ √((1 − β2^t)/β2)`` whatever the data, and ``v_{t−1}/v_t`` moves by ``O(1 − β2)`` per
    step.  Replacing ``v`` by its mean ``E v_t = v*(1 − ρ^t)``, ``ρ = β2 + (1 − β2)Φ`` (the
    recursion of :func:`stp_fixed_point` with ``ε_s = 0``, from ``v_0 = 0``) gives

        c_t² = (1 − β2^t)(1 − ρ^{t−1})/(1 − ρ^t),

    which depends neither on the coordinate nor on its gradient scale and tends to 1.  (DP-Adam
    via post-processing has the coefficient ``1/√v̂_t ≈ 1/√(m_j + Φ)`` instead: it differs across
    coordinates by their second moments ``m_j``.)  Assumptions: ``0 < β2 < 1``, ``0 ≤ Φ < 1``
    (a steady state exists), ``steps ≥ 1`` integer.  Returns an array of shape ``(steps,)``.
    """
    b = float(_arr("beta2", beta2, lo=0.0, lo_open=True, hi=1.0, hi_open=True))
    p = float(_arr("phi", phi, nonneg=True, hi=1.0, hi_open=True))
    T = int(_arr("steps", steps, positive=True, integer=True))
    t = np.arange(1, T + 1, dtype=float)
    rho = b + (1.0 - b) * p
    return np.sqrt((1.0 - b ** t) * (1.0 - rho ** (t - 1.0)) / (1.0 - rho ** t))


def stp_update_noise_variance(beta2, phi, strategy, steps, *, start=0):
    """Variance, in units of ``η²Φ``, of the privacy noise in ``θ_T − θ_start`` (the sum of Adam's
    updates ``start+1..T``) under scale-then-privatize with DP-MF noise ``strategy``:

        sens(M)² ‖wᵀ M⁻¹‖²,    w_t = c_t for start < t ≤ T, 0 otherwise,

    with ``c_t`` of :func:`stp_update_noise_coefficients` (:func:`mf_weighted_variance`).  The same
    value in every coordinate: for ``c ≡ 1`` it is the objective DP-MF minimizes for DP-SGD's
    prefix sums ([DESIGN] §4.5, reconstructed), which is why scale-then-privatize lets the
    strategy be chosen offline.  ``strategy``: a name of :mod:`dpsim.privacy.mf` (built for
    horizon ``steps``) or a ``T×T`` lower-triangular matrix; ``0 ≤ start < steps``.
    """
    T = int(_arr("steps", steps, positive=True, integer=True))
    s = int(_arr("start", start, nonneg=True, integer=True))
    if s >= T:
        raise ValueError(f"start must be below steps, got start={start!r}, steps={steps!r}")
    w = np.asarray(stp_update_noise_coefficients(beta2, phi, T), dtype=float).copy()
    w[:s] = 0.0
    return mf_weighted_variance(w, strategy, steps=T)
