"""Gradient moments, PASAN/PAGAN bounds, private second-moment estimation and lower bounds of seed 001.

Source ("seed 001"): Asi, Duchi, Fallah, Javidbakht, Talwar, *Private Adaptive Gradient Methods
for Convex Optimization* (ICML 2021): §3 (moments ``G_p``, Example 1, Lemma 3.2, Theorems 1–2,
Eqs. (8)–(9)), §4.1 (Definition 4.1, Algorithm 3, Theorem 3) and §5 (Proposition 1, Theorem 4,
Proposition 2, Theorem 5).  The provided text is the main paper only (no appendix), and its
formulas were partly garbled by text extraction; every reading that had to be reconstructed is
marked **(reconstructed)** below, and every place where the printed statement and its own
formulas disagree is listed under "Disagreements".

Contents
--------
Moments (§3, Eq. (2), (4)):
    :func:`G_p` (population, Gaussian vectors, exact quadrature), :func:`G_hat_p` (empirical),
    :func:`example1_bound` (Example 1, explicit constant), :func:`lemma32_bound` (Lemma 3.2).
PASAN / PAGAN upper bounds (§3.1–3.2):
    :func:`geometry` (diameters and traces), :func:`projection_bias`,
    :func:`pasan_bound`, :func:`pagan_bound` (finite-``T`` bounds with explicit constants for any
    radius ``B``, step count ``T``, batch ``b`` and noise multiplier σ),
    :func:`theorem1_bound`, :func:`theorem2_bound` (the theorems' stated form at their ``B`` and
    ``T = n²/b²``), :func:`pasan_rate`, :func:`pagan_rate` (Eqs. (9), (8)),
    :func:`geometry_comparison` (``(Σσ_j^{2/3})^{3/2}`` vs ``Σσ_j``, Hölder).
Unknown moments (§4.1):
    :func:`private_second_moment` (Algorithm 3), :func:`theorem3_guarantee` (condition (10)),
    :func:`theorem3_sample_size`, :func:`theorem3_scaling`, :func:`theorem3_bound`,
    :func:`algorithm3_epsilon` (exact privacy of Algorithm 3's noise), :func:`gaussian_moment_ratio`.
Lower bounds (§5):
    :func:`lower_bound_box` (Prop. 1 = Thm 4), :func:`lower_bound_ball` (Thm 5),
    :func:`prop2_bound` (Prop. 2).
Gaussian mechanism helpers: :func:`gaussian_epsilon`, :func:`gaussian_mu` (exact (ε, δ) of a
μ-GDP Gaussian mechanism, Balle & Wang 2018 / Dong, Roth & Su 2022).

``dpsim verify`` rows (family "seed 001 moments", registered at import)
    ``seed001_theorem1_pasan`` / ``seed001_theorem2_pagan`` (simulated average-iterate excess
    loss of PASAN/PAGAN with replacement sampling, ε ∈ {1, 4}, against Theorems 1/2),
    ``seed001_alg3_theorem3`` (Algorithm 3 meets condition (10) at Theorem 3's ``n``: binomial
    Clopper–Pearson bound on the failure frequency ≤ β), ``seed001_alg3_readings`` and
    ``seed001_alg3_privacy`` (disagreements 1–4, "reported"), ``seed001_theorem3_pagan``
    (Algorithm 3's σ̂ fed to PAGAN), ``seed001_example1_lemma32`` (Example 1 with exact Gaussian
    moments, Lemma 3.2 by Monte Carlo, the Hölder comparison), ``seed001_lower_bounds``
    (Prop. 1/Thm 4 below the best simulated private method on ``linear_box``; Thm 5 and Prop. 2
    below the Gaussian mechanism on the ℓ2 ball), ``seed001_corollaries`` (disagreement 5).

Conventions
-----------
* **O(1) constants.**  Theorems 1–3 are stated with ``O(·)``.  The paper's proofs are in an
  appendix we do not have, so :func:`pasan_bound` / :func:`pagan_bound` carry constants from our
  own derivation (the standard adaptive-step-size / AdaGrad regret bound, online-to-batch
  conversion and a bias bound for the projection; sketched in their docstrings), and
  :func:`theorem1_bound` / :func:`theorem2_bound` are those bounds evaluated at the theorems'
  choices, which reproduce the theorems' expressions exactly with the explicit constants
  ``3/2`` (non-private term) and ``3 + 2^{1−p}`` (privacy term).  The corollary forms (Eqs. (8),
  (9), Theorem 3) and the lower bounds are printed without constants; they are evaluated with
  constant 1, as printed.
* **Privacy parametrization.**  The paper's noise scale is ``√log(1/δ)/(bε)`` (Algorithms 1–2,
  line 6; Lemma 3.1 with ``T = c n²/b²``); dpsim's is ``σ/b`` with σ the noise multiplier.  As in
  :func:`dpsim.pagan.ellipsoid_radius`, ``nε/√log(1/δ)`` is replaced by ``n/σ`` when
  ``noise_multiplier`` is given (i.e. ``σ = √log(1/δ)/ε``, and ``c = 1``).
* **Vectorization.**  Functions of a coordinate vector take its last axis as ``d`` and broadcast
  the leading axes with the scalar arguments; scalar-only inputs return a float.  Values outside
  a result's assumptions raise ``ValueError`` naming the value.

Disagreements (reported, with what the code follows)
----------------------------------------------------
1. **Algorithm 3, line 6.**  The printed test is ``σ̂_{t,j} ≥ 2^{−t−1}`` while line 5 defines
   ``σ̂²_{t,j}``; we read ``σ̂_{t,j} = √σ̂²_{t,j}`` (the code's ``rule="paper"``, default).
   ``ALGORITHMS.md`` §2.4 spells it ``σ̂²_{t,j} ≥ 2^{−t−1}`` (``rule="squared"``), which compares a
   second moment with a first-moment scale and violates Theorem 3 (for ``σ_j = j^{−3/2}``:
   ``σ_2 = 0.35`` is frozen at ``2^{−3} < σ_2/2``, and ``σ_j ≤ 0.19`` are never frozen because
   ``ρ_t² ∝ 4^{−t}`` falls below the threshold ``2^{−t−1}``, leaving ``2^{−T}``); verify row
   ``seed001_alg3_readings``.
2. **Algorithm 3, ``ρ_t = 4 r Δ log r``** vanishes as ``r → 1``: for ``1 < r < 1.0589``
   (``4 r log r < 1/4``) no coordinate can ever be frozen (``√(mean min(z², ρ_t²)) ≤ ρ_t <
   2^{−t−1}``), so every output is ``2^{−T}``, although Gaussian data satisfy Definition 4.1 with
   ``r = √(2/π) ≈ 0.80`` (hence with any ``r ≥ 0.80``).  The code follows the printed formula and
   requires ``r > 1``.
3. **Theorem 3, condition (10)** ``½ max{σ_j, d^{−3/2}} ≤ σ̂_j ≤ 2σ_j`` cannot hold for
   ``σ_j < d^{−3/2}/4``: with ``T = 32 log d`` such a coordinate is frozen near its own scale (or
   left at ``2^{−T} ≪ d^{−3/2}``), below the lower side.  (``T = (3/2) log₂ d``, a possible
   reading of the extracted "32 log d", would make the leftover value ``d^{−3/2}`` and break the
   upper side instead.)  The code follows the printed ``T = ⌈32 ln d⌉``; checks use
   ``σ_j ≥ d^{−3/2}``.
4. **Algorithm 3's privacy.**  Its noise ``N(0, ρ_t⁴ T d log(T/δ)/(n²ε²))`` is, under
   replace-one adjacency, a composition of Gaussian mechanisms with total
   ``μ = ε/√log(T/δ)``; the exact ``ε(δ)`` of that mechanism (:func:`algorithm3_epsilon`) exceeds
   the claimed ε for moderate ε and small δ (e.g. 1.07 at ε = 1, δ = 1e-8, d = 10): the
   (unstated) constant in the noise is slightly too small there.  Verify row
   ``seed001_alg3_privacy``.
5. **Eqs. (8)–(9) vs Theorems 1–2.**  With ``p = log d`` the theorems' privacy term is
   ``(1/(nε))·(nε D_{C⁻¹}/(D √log(1/δ) tr))^{1/p}·…``; the corollaries drop the factor
   ``(nε…)^{1/log d}``, which is ``O(1)`` only while ``nε ≤ poly(d)`` (2.6 at the paper's
   ``n = 5000, d = 100``, 37 at ``n = 10⁹``).  :func:`theorem1_bound` / :func:`theorem2_bound`
   follow the theorems, :func:`pasan_rate` / :func:`pagan_rate` the printed corollaries.  Verify
   row ``seed001_corollaries``.
6. **Extraction readings (reconstructed).**  Theorem 3's sample-size condition
   (:func:`theorem3_sample_size`) and Proposition 2's second term (:func:`prop2_bound`) are read
   from garbled text; the conditions ``√d log d ≤ nε`` (Prop. 1, Thm 4) and ``√d ≤ nε`` (Thm 5)
   have their ``√`` displaced by the extraction and are read as written here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "G_p",
    "G_hat_p",
    "example1_bound",
    "lemma32_bound",
    "geometry",
    "projection_bias",
    "pasan_bound",
    "pagan_bound",
    "theorem1_bound",
    "theorem2_bound",
    "pasan_rate",
    "pagan_rate",
    "geometry_comparison",
    "private_second_moment",
    "algorithm3_rounds",
    "theorem3_guarantee",
    "theorem3_sample_size",
    "theorem3_scaling",
    "theorem3_bound",
    "algorithm3_epsilon",
    "gaussian_moment_ratio",
    "lower_bound_box",
    "lower_bound_ball",
    "prop2_bound",
    "gaussian_epsilon",
    "gaussian_mu",
]


# ------------------------------------------------------------------------------------------------
# validation helpers


def _arr(name: str, x) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number or an array of reals, got {name}={x!r}") from None
    if np.any(np.isnan(a)):
        raise ValueError(f"{name} must not be NaN, got {name}={x!r}")
    return a


def _require(cond, msg: str, **values) -> None:
    """Raise ``ValueError(msg)`` formatted with the first element where ``cond`` is False."""
    cond = np.asarray(cond)
    if cond.all():
        return
    shape = np.broadcast_shapes(cond.shape, *(np.shape(v) for v in values.values()))
    bad = ~np.broadcast_to(cond, shape)
    shown = {}
    for k, v in values.items():
        vv = float(np.broadcast_to(np.asarray(v, dtype=float), shape)[bad].flat[0])
        shown[k] = int(vv) if vv.is_integer() and abs(vv) < 1e15 else vv
    raise ValueError(msg.format(**shown))


def _ret(x):
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x


def _positive_vec(name: str, x) -> np.ndarray:
    a = _arr(name, x)
    if a.ndim == 0 or a.shape[-1] == 0:
        raise ValueError(f"{name} must have a last axis of d >= 1 coordinates, got shape {a.shape}")
    if np.any(~np.isfinite(a) | (a <= 0)):
        pos = tuple(int(i) for i in np.argwhere(~np.isfinite(a) | (a <= 0))[0])
        raise ValueError(f"{name} must be positive and finite, got {name}{list(pos)}={float(a[pos])!r}")
    return a


def _eps_delta(epsilon, delta):
    eps = _arr("epsilon", epsilon)
    dlt = _arr("delta", delta)
    _require((eps > 0) & np.isfinite(eps), "epsilon must be positive and finite, got epsilon={epsilon}",
             epsilon=eps)
    _require((dlt > 0) & (dlt < 1), "delta must be in (0, 1), got delta={delta}", delta=dlt)
    return eps, dlt


def _pos(name, x, *, integer=False, allow_zero=False):
    a = _arr(name, x)
    ok = np.isfinite(a) & ((a >= 0) if allow_zero else (a > 0))
    if integer:
        ok &= a == np.floor(a)
    kind = "a positive integer" if integer else ("non-negative and finite" if allow_zero
                                                 else "positive and finite")
    _require(ok, name + " must be " + kind + ", got " + name + "={v}", v=a)
    return a


# ------------------------------------------------------------------------------------------------
# Moments G_p (Eq. (2)) and Ĝ_p (Eq. (4))


def _integer_moments(w: np.ndarray, k: int) -> float:
    """``E Q^k`` for ``Q = Σ_j w_j X_j²``, ``X_j`` iid N(0, 1), from the cumulants
    ``κ_m = 2^{m−1} (m−1)! Σ_j w_j^m`` and ``μ_k = Σ_{i<k} C(k−1, i) κ_{i+1} μ_{k−1−i}``."""
    kap = [0.0] + [2.0 ** (m - 1) * math.factorial(m - 1) * float(np.sum(w ** m)) for m in range(1, k + 1)]
    mu = [1.0]
    for j in range(1, k + 1):
        mu.append(sum(math.comb(j - 1, i) * kap[i + 1] * mu[j - 1 - i] for i in range(j)))
    return mu[k]


def _gaussian_norm_moment(w: np.ndarray, s: float) -> float:
    """``E Q^s``, ``Q = Σ_j w_j X_j²`` (``w`` normalized to ``Σ w = 1``), ``s > 0``.

    Integer ``s``: cumulant recursion.  Otherwise, with ``k = ⌈s⌉`` and ``a = k − s ∈ (0, 1)``,
    ``Q^{s} = Q^k Q^{−a} = Q^k Γ(a)^{−1} ∫_0^∞ t^{a−1} e^{−tQ} dt`` and, tilting each ``X_j`` by
    ``e^{−t w_j X_j²}``, ``E[Q^k e^{−tQ}] = L(t) · E[(Σ_j w_j Y_j²/(1 + 2 w_j t))^k]`` with
    ``L(t) = Π_j (1 + 2 w_j t)^{−1/2}`` and ``Y_j`` iid N(0, 1).  The t-integral is done by
    ``scipy.integrate.quad`` (algebraic weight on [0, 1]).
    """
    from scipy import integrate

    if float(s).is_integer():
        return _integer_moments(w, int(s))
    k = math.ceil(s)
    a = k - s

    def h(t):
        u = 1.0 + 2.0 * w * t
        return math.exp(-0.5 * float(np.sum(np.log(u)))) * _integer_moments(w / u, k)

    lo, _ = integrate.quad(h, 0.0, 1.0, weight="alg", wvar=(a - 1.0, 0.0), epsabs=0.0,
                           epsrel=1e-11, limit=200)
    hi, _ = integrate.quad(lambda t: t ** (a - 1.0) * h(t), 1.0, math.inf, epsabs=0.0,
                           epsrel=1e-11, limit=200)
    return (lo + hi) / math.gamma(a)


def G_p(C_diag, sigma, p):
    """Population moment ``G_p(C) = (E ||z||_C^p)^{1/p}`` for ``z ~ N(0, diag(σ²))`` (exact).

    Source: seed 001 Eq. (2), ``G_p(C) := (E_{z∼P}[G(z; C)^p])^{1/p}``, with the Lipschitz
    function of Assumption 1 ``G(z; C) = ||z||_C = √(Σ_j C_jj z_j²)`` — exact for the linear loss
    ``F(x; z) = ⟨x, z⟩`` of Example 1 (with ``g = 0``) and for generalized linear models
    ``F(x; z) = ℓ(zᵀx)`` with a 1-Lipschitz ``ℓ`` whose ``|ℓ'| = 1`` (absolute loss, §4.1, §6.1),
    an upper bound for other 1-Lipschitz links.

    ``||z||_C² = Σ_j w_j X_j²`` with ``w_j = C_jj σ_j²``: ``E||z||_C^p`` is an exact moment of a
    weighted χ² (cumulants for even ``p``, a one-dimensional Laplace-transform integral otherwise;
    see :func:`_gaussian_norm_moment`).  Check: equal weights give
    ``G_p = √(2w) (Γ(d/2 + p/2)/Γ(d/2))^{1/p}``; ``G_2 = √(Σ_j C_jj σ_j²)``.

    ``C_diag``, ``sigma``: positive, broadcast along the last axis ``d``; ``p ≥ 1`` (``p > 0`` is
    accepted) broadcast with the leading axes.  Returns a float or an array.
    """
    C = _positive_vec("C_diag", C_diag)
    s = _positive_vec("sigma", sigma)
    pp = _arr("p", p)
    _require(np.isfinite(pp) & (pp > 0), "p must be positive and finite, got p={p}", p=pp)
    W = C * s * s  # (..., d)
    lead = np.broadcast_shapes(W.shape[:-1], pp.shape)
    W = np.broadcast_to(W, lead + W.shape[-1:])
    pp = np.broadcast_to(pp, lead)
    out = np.empty(lead)
    for idx in np.ndindex(*lead):
        w = np.asarray(W[idx], dtype=float)
        tot = float(np.sum(w))
        m = _gaussian_norm_moment(w / tot, float(pp[idx]) / 2.0)
        out[idx] = math.sqrt(tot) * m ** (1.0 / float(pp[idx]))
    return _ret(out)


def G_hat_p(S, C_diag, p):
    """Empirical moment ``Ĝ_p(S; C) = ((1/n) Σ_i G(z_i; C)^p)^{1/p}`` (seed 001 Eq. (4)).

    ``S``: ``(n, d)`` array (dense or ``scipy.sparse``) of per-example gradients, or of vectors
    whose ``C``-norms are the Lipschitz constants ``G(z_i; C)`` of Assumption 1 (for a GLM with a
    1-Lipschitz link, the feature rows); ``G(z_i; C) = ||S_i||_C``.  ``C_diag``: ``(d,)`` or
    ``(M, d)``; ``p ≥ 1``: scalar or array.  Output shape: ``broadcast((M,), p.shape)``; a float for
    ``(d,)`` and scalar ``p``.  Computed by :func:`dpsim.pagan.empirical_moment` (overflow-safe).
    """
    from dpsim.pagan import empirical_moment

    C = _positive_vec("C_diag", C_diag)
    if C.ndim > 2:
        raise ValueError(f"C_diag must have shape (d,) or (M, d), got shape {C.shape}")
    pp = _arr("p", p)
    _require(np.isfinite(pp) & (pp >= 1), "p must be a finite number >= 1, got p={p}", p=pp)
    if C.ndim == 1 and pp.ndim == 0:
        return float(empirical_moment(C, S, float(pp)))
    lead = np.broadcast_shapes(C.shape[:-1], pp.shape)
    uniq = {float(v) for v in pp.ravel()}
    vals = {v: np.atleast_1d(np.asarray(empirical_moment(np.atleast_2d(C), S, v), dtype=float))
            for v in uniq}
    Cb = np.broadcast_to(np.arange(np.atleast_2d(C).shape[0]).reshape(C.shape[:-1] or (1,)), lead) \
        if C.ndim == 2 else np.zeros(lead, dtype=int)
    pb = np.broadcast_to(pp, lead)
    out = np.empty(lead)
    for idx in np.ndindex(*lead):
        out[idx] = vals[float(pb[idx])][int(Cb[idx])]
    return _ret(out)


def example1_bound(C_diag, sigma, p, mu=0.0):
    """Example 1's moment bound with an explicit constant: ``G_p(C) ≤ μ + c_p √(Σ_j C_jj σ_j²)``.

    Source: seed 001, Example 1 (Eq. (3)): ``F(x; Z) = g(x) + ⟨x, Z⟩`` with independent
    ``σ_j²``-sub-Gaussian ``Z_j``, ``C ≻ 0`` diagonal and ``||∇g(x)||_C ≤ μ``; the paper states
    ``G_p(C) ≤ μ + O(1) √p √(Σ_j C_jj σ_j²)``.  Explicit constant (our derivation):

    * ``p ≤ 2``: ``c_p = 1``.  Minkowski, ``G_p ≤ G_2`` and ``E Z_j² ≤ σ_j²``.  Tight for Gaussian
      ``Z`` at ``p = 2``.
    * ``p > 2``: ``c_p = √(2 (p Γ(p/2))^{2/p})`` (``≈ √(p/e)`` for large ``p``, so
      ``c_p ≤ √3 √p`` for every ``p > 2``).  With ``W_j = √C_jj Z_j``, Minkowski in ``L_{p/2}``
      gives ``||Σ_j W_j²||_{p/2} ≤ Σ_j (E|W_j|^p)^{2/p}``, and the sub-Gaussian tail
      ``P(|W_j| > t) ≤ 2 e^{−t²/(2v_j)}`` gives ``E|W_j|^p ≤ p (2v_j)^{p/2} Γ(p/2)``,
      ``v_j = C_jj σ_j²``.

    Broadcasting as in :func:`G_p`; ``μ ≥ 0``.
    """
    C = _positive_vec("C_diag", C_diag)
    s = _positive_vec("sigma", sigma)
    pp = _arr("p", p)
    _require(np.isfinite(pp) & (pp > 0), "p must be positive and finite, got p={p}", p=pp)
    m = _pos("mu", mu, allow_zero=True)
    from scipy.special import gammaln

    root = np.sqrt(np.sum(C * s * s, axis=-1))
    with np.errstate(invalid="ignore"):
        big = np.sqrt(2.0 * np.exp((2.0 / pp) * (np.log(pp) + gammaln(pp / 2.0))))
    c = np.where(pp <= 2.0, 1.0, big)
    return _ret(m + c * root)


def lemma32_bound(G_p_value, G_2p_value):
    """Lemma 3.2: with probability at least ``1 − 1/n``, ``Ĝ_p(S; C) ≤ G_p(C) + G_2p(C) ≤ 2 G_2p(C)``.

    Source: seed 001 Lemma 3.2 (``S`` of ``n`` iid points).  Proof: Chebyshev on the mean of
    ``X_i = G(z_i; C)^p`` (mean ``G_p^p``, variance ``≤ G_2p^{2p}``) at deviation ``G_2p^p`` gives
    ``Ĝ_p^p ≤ G_p^p + G_2p^p`` w.p. ``≥ 1 − 1/n``, and ``(a^p + b^p)^{1/p} ≤ a + b``.  Returns
    ``G_p + G_2p``; requires ``0 < G_p ≤ G_2p`` (moments of one distribution are non-decreasing
    in ``p``).
    """
    a = _pos("G_p", G_p_value)
    b = _pos("G_2p", G_2p_value)
    _require(a <= b * (1 + 1e-12), "G_p must not exceed G_2p (moments increase with p), got "
             "G_p={a}, G_2p={b}", a=a, b=b)
    return _ret(a + b)


# ------------------------------------------------------------------------------------------------
# PASAN / PAGAN (Theorems 1, 2)


_DOMAINS = ("box", "ball")


def geometry(C_diag, *, domain="box", domain_radius=1.0) -> dict:
    """Diameters and traces the bounds of Theorems 1–2 use, for ``X = [−r, r]^d`` or the ℓ2 ball.

    Returns ``{"d", "diam2", "diam_inf", "diam_Cinv", "trace_Cinv", "trace_Cinv_half"}`` with
    ``diam2 = diam_2(X)``, ``diam_inf = diam_∞(X)``, ``diam_Cinv = diam_{||·||_{C⁻¹}}(X)`` and
    ``trace_Cinv = tr(C⁻¹)``, ``trace_Cinv_half = tr(C^{−1/2})``.  Box ``[−r, r]^d``:
    ``2r√d, 2r, 2r√tr(C⁻¹)``; ball of radius ``r``: ``2r, 2r, 2r/√min_j C_jj`` — the conventions of
    :func:`dpsim.pagan.ellipsoid_radius`.  ``C_diag``: ``(..., d)``; entries have shape ``(...)``.
    """
    if domain not in _DOMAINS:
        raise ValueError(f"domain must be 'box' or 'ball', got domain={domain!r}")
    C = _positive_vec("C_diag", C_diag)
    r = float(_pos("domain_radius", domain_radius))
    d = C.shape[-1]
    trC = np.sum(1.0 / C, axis=-1)
    trCh = np.sum(C ** -0.5, axis=-1)
    if domain == "box":
        D2, Dinf, DC = 2 * r * math.sqrt(d), 2 * r, 2 * r * np.sqrt(trC)
    else:
        D2, Dinf, DC = 2 * r, 2 * r, 2 * r / np.sqrt(np.min(C, axis=-1))
    shape = trC.shape
    return {"d": d, "diam2": _ret(np.broadcast_to(D2, shape)), "diam_inf": _ret(np.broadcast_to(Dinf, shape)),
            "diam_Cinv": _ret(DC), "trace_Cinv": _ret(trC), "trace_Cinv_half": _ret(trCh)}


def _grads_2d(grads):
    g = np.asarray(grads, dtype=float)
    if g.ndim != 2 or g.shape[0] < 1:
        raise ValueError(f"grads must have shape (n, d), got shape {g.shape}")
    if not np.all(np.isfinite(g)):
        raise ValueError("grads must be finite")
    return g


def projection_bias(C_diag, grads, radius):
    """Mean projection error ``(1/n) Σ_i ||g_i||_C 1{||g_i||_C > B}`` (bias term of Thms 1–2).

    For the Euclidean projection ``π_A`` onto ``E_A``, ``A = C/B²``:
    ``(g − π_A(g))_j = g_j λ a_j/(1 + λ a_j)``, so ``||g − π_A(g)||_C ≤ ||g||_C`` and it is 0 when
    ``||g||_C ≤ B``; hence ``||g − π_A(g)||_C ≤ ||g||_C 1{||g||_C > B} ≤ ||g||_C^p / B^{p−1}``
    for every ``p ≥ 1`` (summing gives ``Ĝ_p(S; C)^p / B^{p−1}``, the paper's form).  The bias is
    monotone in ``||g||_C``, so ``grads`` may be dominating Lipschitz vectors (feature rows of a
    GLM with ``|ℓ'| ≤ 1``).  ``C_diag`` ``(d,)`` or ``(M, d)``, ``radius`` scalar or ``(M,)``.
    """
    g = _grads_2d(grads)
    C = _positive_vec("C_diag", C_diag)
    B = _pos("radius", radius)
    if C.ndim > 2 or np.ndim(B) > 1:
        raise ValueError(f"C_diag must be (d,) or (M, d) and radius scalar or (M,), got shapes "
                         f"{C.shape} and {np.shape(B)}")
    norms = np.sqrt((g * g) @ np.atleast_2d(C).T)  # (n, M_C)
    out = np.mean(np.where(norms > np.atleast_1d(B), norms, 0.0), axis=0)  # (max(M_C, M_B),)
    return float(out[0]) if C.ndim == 1 and np.ndim(B) == 0 else out


def _regret_factor(diam, lr):
    """``D²/(2α) + α`` of the adaptive regret bounds (``3D/2`` at the paper's ``α = D``)."""
    a = diam if lr is None else _pos("lr", lr)
    return diam * diam / (2.0 * a) + a


def pasan_bound(C_diag, grads, *, radius, noise_multiplier, steps, batch_size, lr=None,
                domain="box", domain_radius=1.0, bias=None):
    """Finite-``T`` bound on PASAN's average-iterate excess loss, explicit constants (any ``B, T, b, σ``).

    For PASAN (seed 001 Alg. 1) with ``A = C/B²``, step ``α_k = α/√(Σ_{i≤k} ||ĝ^i||²)``, batches
    of size ``b`` drawn **with replacement**, noise ``(σ/b) ξ``, ``ξ ~ N(0, A⁻¹)``::

        E[f(x̄_T) − f(x*)] ≤ (D_2²/(2α) + α) √(Ḡ² + (σB/b)² tr(C⁻¹)) / √T  +  D_{C⁻¹} · bias

    with ``x̄_T = (1/T) Σ_{k=0}^{T−1} x^k`` (the points where gradients are taken), ``Ḡ² =
    (1/n) Σ_i ||g_i||²`` and ``bias`` = :func:`projection_bias` ``(C, grads, B)``.

    Derivation (ours; the paper's appendix is not available): (i) the adaptive-step-size regret
    bound ``Σ_k ⟨ĝ^k, x^k − x*⟩ ≤ (D²/(2α) + α) √(Σ_k ||ĝ^k||²)`` holds pathwise (projection is
    non-expansive, ``1/α_k`` is non-decreasing, ``Σ_k a_k/√(Σ_{i≤k} a_i) ≤ 2√(Σ a)``); (ii)
    convexity, ``f(x̄) − f* ≤ (1/T) Σ ⟨∇f(x^k), x^k − x*⟩``; (iii) ``E_k ĝ^k = (1/n) Σ_i π_A(g_i)``
    (uniform with-replacement draws), so ``⟨∇f − E_k ĝ, x − x*⟩ ≤ D_{C⁻¹} (1/n) Σ_i ||g_i −
    π_A(g_i)||_C ≤ D_{C⁻¹}·bias``; (iv) Jensen, ``E||ĝ^k||² ≤ Ḡ² + (σB/b)² tr(C⁻¹)``.

    ``grads``: ``(n, d)`` per-example Lipschitz vectors with ``||∇F(x; z_i)|| ≤ ||g_i||`` in the
    ℓ2 and ``C`` norms for all ``x`` (e.g. GLM feature rows).  ``lr`` is ``α`` (default
    ``D_2 = diam_2(X)``, the paper's choice).  ``bias`` overrides the projection term (a number
    or array).  ``C_diag`` ``(d,)`` or ``(M, d)``; ``radius``, ``noise_multiplier``, ``lr`` scalars
    or ``(M,)``.
    """
    g = _grads_2d(grads)
    geo = geometry(C_diag, domain=domain, domain_radius=domain_radius)
    B = _pos("radius", radius)
    sig = _pos("noise_multiplier", noise_multiplier, allow_zero=True)
    T = _pos("steps", steps, integer=True)
    b = _pos("batch_size", batch_size, integer=True)
    Gbar2 = float(np.mean(np.sum(g * g, axis=1)))
    noise2 = (sig * B / b) ** 2 * geo["trace_Cinv"]
    reg = _regret_factor(geo["diam2"], lr) * np.sqrt(Gbar2 + noise2) / np.sqrt(T)
    bias_v = projection_bias(C_diag, g, B) if bias is None else _pos("bias", bias, allow_zero=True)
    return _ret(reg + geo["diam_Cinv"] * bias_v)


def pagan_bound(C_diag, grads, *, radius, noise_multiplier, steps, batch_size, lr=None,
                domain_radius=1.0, bias=None):
    """Finite-``T`` bound on PAGAN's average-iterate excess loss, explicit constants (box domain).

    For PAGAN (seed 001 Alg. 2: ``H_k = diag(Σ_{i≤k} ĝ^i ĝ^{iᵀ})^{1/2}/α``, ``H_k``-norm projection
    onto the box ``[−r, r]^d``) with the privatizer of :func:`pasan_bound`::

        E[f(x̄_T) − f(x*)] ≤ (D_∞²/(2α) + α) Σ_j √(Ḡ_j² + (σB/b)²/C_jj) / √T  +  D_{C⁻¹} · bias

    with ``Ḡ_j² = (1/n) Σ_i g_ij²``.  Derivation as in :func:`pasan_bound`, with the diagonal
    AdaGrad regret bound ``Σ_k ⟨ĝ^k, x^k − x*⟩ ≤ (D_∞²/(2α) + α) Σ_j √(Σ_k (ĝ_j^k)²)`` (Duchi,
    Hazan & Singer 2011; pathwise, ``max_k ||x^k − x*||_∞ ≤ D_∞``) and
    ``E(ĝ_j^k)² ≤ Ḡ_j² + (σB/b)²/C_jj`` (``|π_A(g)_j| ≤ |g_j|``).  ``lr`` = ``α`` (default
    ``D_∞ = 2r``, the paper's choice).  ``grads`` must dominate the per-example gradients
    coordinate-wise (``|∇_j F(x; z_i)| ≤ |g_ij|``; GLM feature rows).
    """
    g = _grads_2d(grads)
    C = _positive_vec("C_diag", C_diag)
    geo = geometry(C, domain="box", domain_radius=domain_radius)
    B = _pos("radius", radius)
    sig = _pos("noise_multiplier", noise_multiplier, allow_zero=True)
    T = _pos("steps", steps, integer=True)
    b = _pos("batch_size", batch_size, integer=True)
    Gj2 = np.mean(g * g, axis=0)
    s = np.asarray(sig * B / b, dtype=float)
    per = np.sqrt(Gj2 + (s[..., None] ** 2) / C) if s.ndim else np.sqrt(Gj2 + s ** 2 / C)
    reg = _regret_factor(geo["diam_inf"], lr) * np.sum(per, axis=-1) / np.sqrt(T)
    bias_v = projection_bias(C, g, B) if bias is None else _pos("bias", bias, allow_zero=True)
    return _ret(reg + geo["diam_Cinv"] * bias_v)


def _theorem_common(C_diag, grads, n, noise_multiplier, epsilon, delta, p, domain, domain_radius,
                    batch_size, r_term, algorithm):
    C = _positive_vec("C_diag", C_diag)
    if C.ndim > 2:
        raise ValueError(f"C_diag must have shape (d,) or (M, d), got shape {C.shape}")
    nn = _pos("n", n, integer=True)
    geo = geometry(C, domain=domain, domain_radius=domain_radius)
    d = geo["d"]
    pp = _arr("p", max(1.0, math.log(d)) if p is None else p)
    _require(np.isfinite(pp) & (pp >= 1), "p must be a finite number >= 1, got p={p}", p=pp)
    if (noise_multiplier is None) == (epsilon is None and delta is None):
        raise ValueError("give either noise_multiplier or (epsilon, delta), not both / neither")
    if noise_multiplier is not None:
        sig = _pos("noise_multiplier", noise_multiplier)
        root_log = sig  # √log(1/δ)/ε  ↦  σ
    else:
        if epsilon is None or delta is None:
            raise ValueError("epsilon and delta must be given together")
        eps, dlt = _eps_delta(epsilon, delta)
        root_log = np.sqrt(np.log(1.0 / dlt)) / eps
    b = _pos("batch_size", batch_size, integer=True)
    if np.ndim(grads) <= 1:
        G = _pos("G_2p", grads)
        if r_term is None:
            raise ValueError("grads is the moment G_2p itself: give r_std / r_ada (the non-private "
                             "term) explicitly")
    else:
        g = _grads_2d(grads)
        if g.shape[1] != d:
            raise ValueError(f"grads have d={g.shape[1]} but C_diag has d={d}")
        G = G_hat_p(g, C, 2.0 * pp)
        if r_term is None:
            T = (nn / b) ** 2  # T = c n²/b², c = 1
            if algorithm == "pasan":
                r_term = geo["diam2"] * math.sqrt(float(np.mean(np.sum(g * g, axis=1)))) / np.sqrt(T)
            else:
                r_term = geo["diam_inf"] * float(np.sum(np.sqrt(np.mean(g * g, axis=0)))) / np.sqrt(T)
    r_term = _pos("r_std" if algorithm == "pasan" else "r_ada", r_term, allow_zero=True)
    return geo, nn, pp, root_log, G, r_term


def theorem1_bound(C_diag, grads, *, n, noise_multiplier=None, epsilon=None, delta=None, p=None,
                   batch_size=1, domain="box", domain_radius=1.0, r_std=None):
    """Theorem 1 (PASAN) upper bound, general-``p`` form, explicit constants::

        E[f(x̄_T) − min_X f] ≤ (3/2) R_std(T)
            + (3 + 2^{1−p}) D_2 G_2p(C) (√(tr(C⁻¹) log(1/δ)) / (nε))^{(p−1)/p} (D_{C⁻¹}/D_2)^{1/p}

    Source: seed 001 Theorem 1 (``O(·)`` there), run with ``α = D_2 = diam_2(X)``,
    ``T = c n²/b²`` (here ``c = 1``), ``A_k = C/B²`` and
    ``B = 2 G_2p(C) (D_{C⁻¹} nε / (D_2 √(tr(C⁻¹) log(1/δ))))^{1/p}``
    (:func:`dpsim.pagan.ellipsoid_radius`), assuming ``Ĝ_p(S; C) ≤ G_2p(C)``.  The constants come
    from :func:`pasan_bound` at that ``B`` and ``T``: the privacy part
    ``(3/2) D_2 B P + D_{C⁻¹} G^p/B^{p−1}`` with ``P = √(tr(C⁻¹) log(1/δ))/(nε)`` equals
    ``(3 + 2^{1−p}) D_2 G P^{(p−1)/p} (D_{C⁻¹}/D_2)^{1/p}`` (checked symbolically in the tests),
    and ``√(a² + c²) ≤ a + c`` splits off ``R_std(T) = (D_2/T) √(Σ_k E||g^k||²) ≤ D_2 Ḡ/√T``.

    ``grads``: ``(n_s, d)`` Lipschitz vectors (then ``G_2p = Ĝ_2p(S; C)`` — which satisfies the
    assumption — and ``R_std`` is bounded by ``D_2 Ḡ/√T``, ``Ḡ² = mean_i ||g_i||²``), or the moment
    ``G_2p`` itself (scalar or ``(M,)``; then ``r_std`` is required).  ``noise_multiplier`` σ
    replaces ``√log(1/δ)/ε`` (dpsim's parametrization).  ``p`` defaults to ``max(1, ln d)``.
    Returns a float or ``(M,)``.
    """
    geo, nn, pp, rl, G, r_std = _theorem_common(C_diag, grads, n, noise_multiplier, epsilon, delta,
                                                 p, domain, domain_radius, batch_size, r_std, "pasan")
    P = np.sqrt(geo["trace_Cinv"]) * rl / nn
    D2, DC = geo["diam2"], geo["diam_Cinv"]
    priv = (3.0 + 2.0 ** (1.0 - pp)) * D2 * G * P ** ((pp - 1.0) / pp) * (DC / D2) ** (1.0 / pp)
    return _ret(1.5 * r_std + priv)


def theorem2_bound(C_diag, grads, *, n, noise_multiplier=None, epsilon=None, delta=None, p=None,
                   batch_size=1, domain_radius=1.0, r_ada=None):
    """Theorem 2 (PAGAN) upper bound, general-``p`` form, explicit constants::

        E[f(x̄_T) − min_X f] ≤ (3/2) R_ada(T)
            + (3 + 2^{1−p}) D_∞ G_2p(C) (√log(1/δ) tr(C^{−1/2}) / (nε))^{(p−1)/p} (D_{C⁻¹}/D_∞)^{1/p}

    Source: seed 001 Theorem 2 (``O(·)`` there), with ``α = D_∞ = diam_∞(X)`` (box domain, where
    the ``H_k``-norm projection is coordinate clipping), ``T = n²/b²``, ``A_k = C/B²``,
    ``B = 2 G_2p(C) (D_{C⁻¹} nε / (D_∞ √log(1/δ) tr(C^{−1/2})))^{1/p}``, assuming
    ``Ĝ_p(S; C) ≤ G_2p(C)``.  Constants from :func:`pagan_bound` (as in :func:`theorem1_bound`);
    ``R_ada(T) = (D_∞/T) Σ_j E√(Σ_k (g_j^k)²) ≤ D_∞ Σ_j Ḡ_j/√T``.  Arguments as in
    :func:`theorem1_bound` (``r_ada`` for ``R_ada``).
    """
    geo, nn, pp, rl, G, r_ada = _theorem_common(C_diag, grads, n, noise_multiplier, epsilon, delta,
                                                 p, "box", domain_radius, batch_size, r_ada, "pagan")
    P = geo["trace_Cinv_half"] * rl / nn
    Dinf, DC = geo["diam_inf"], geo["diam_Cinv"]
    priv = (3.0 + 2.0 ** (1.0 - pp)) * Dinf * G * P ** ((pp - 1.0) / pp) * (DC / Dinf) ** (1.0 / pp)
    return _ret(1.5 * r_ada + priv)


def _sigma_sums(sigma):
    s = _positive_vec("sigma", sigma)
    return s, s.shape[-1], np.sum(s ** (2.0 / 3.0), axis=-1) ** 1.5, np.sum(s, axis=-1)


def pagan_rate(sigma, n, epsilon, delta, *, diam_inf=2.0, r_ada=0.0):
    """Eq. (8): PAGAN with ``p = log d``, ``C_jj = σ_j^{−4/3}``, ``b = 1`` (constant 1, as printed)::

        R_ada(T) + D_∞ (Σ_j σ_j^{2/3})^{3/2} log(d/δ) / (nε)

    Source: seed 001 §3.2, Eq. (8) (``O(1)·diam_∞(X)(R_ada(T) + …)``; here the ``O(1)`` is 1 and
    ``R_ada`` is passed already multiplied).  ``sigma``: ``(..., d)`` sub-Gaussian scales.
    """
    _, d, s23, _ = _sigma_sums(sigma)
    nn = _pos("n", n)
    eps, dlt = _eps_delta(epsilon, delta)
    D = _pos("diam_inf", diam_inf)
    return _ret(_pos("r_ada", r_ada, allow_zero=True) + D * s23 * np.log(d / dlt) / (nn * eps))


def pasan_rate(sigma, n, epsilon, delta, *, diam2=None, r_std=0.0):
    """Eq. (9): PASAN with ``p = log d``, ``C_jj = σ_j^{−1}``, ``b = 1`` (constant 1, as printed)::

        R_std(T) + D_2 (Σ_j σ_j) log(d/δ) / (nε)

    Source: seed 001 §3.2, Eq. (9).  ``diam2`` defaults to ``2√d`` (the box ``[−1, 1]^d``).
    """
    _, d, _, s1 = _sigma_sums(sigma)
    nn = _pos("n", n)
    eps, dlt = _eps_delta(epsilon, delta)
    D = 2.0 * math.sqrt(d) if diam2 is None else _pos("diam2", diam2)
    return _ret(_pos("r_std", r_std, allow_zero=True) + D * s1 * np.log(d / dlt) / (nn * eps))


def geometry_comparison(sigma) -> dict:
    """The geometric factors of Eqs. (8)–(9) and Hölder's sandwich (seed 001 §3.2)::

        Σ_j σ_j  ≤  (Σ_j σ_j^{2/3})^{3/2}  ≤  √d Σ_j σ_j

    Returns ``{"pagan": (Σσ^{2/3})^{3/2}, "pasan": Σσ, "sqrt_d_pasan": √d Σσ, "d": d}``.  PAGAN's
    bound carries ``diam_∞ (Σσ^{2/3})^{3/2}``, PASAN's ``diam_2 Σσ``; on the box ``diam_2 =
    √d diam_∞`` so PAGAN is never worse by more than the constant.  For ``σ_j = j^{−3/2}``:
    ``(Σσ^{2/3})^{3/2} = H_d^{3/2}`` (harmonic number; ``poly(log d)``) while
    ``√d Σσ_j → √d ζ(3/2)`` — the paper's "poly(log d)/(nε) vs √d/(nε)".
    """
    _, d, s23, s1 = _sigma_sums(sigma)
    return {"pagan": _ret(s23), "pasan": _ret(s1), "sqrt_d_pasan": _ret(math.sqrt(d) * s1), "d": d}


# ------------------------------------------------------------------------------------------------
# Algorithm 3 and Theorem 3 (§4.1)


def algorithm3_rounds(d) -> int:
    """``T = ⌈32 log d⌉`` rounds of Algorithm 3 (seed 001 Theorem 3; natural log; ``d ≥ 2``)."""
    if isinstance(d, bool) or not float(d).is_integer() or d < 2:
        raise ValueError(f"Algorithm 3 needs d >= 2 coordinates (T = 32 log d), got d={d!r}")
    return int(math.ceil(32.0 * math.log(int(d))))


_RULES = ("paper", "squared")


def private_second_moment(z, r, epsilon, delta, *, seed=None, rounds=None, rule="paper",
                          full_output=False):
    """Algorithm 3 of seed 001 (private second-moment estimation), as printed.

    ::

        Δ = 1, S = [d], T = ⌈32 log d⌉
        for t = 1..T:
            ρ_t = 4 r Δ log r
            for j ∈ S:
                σ̂²_{t,j} = (1/n) Σ_i min(z_ij², ρ_t²) + ξ_{t,j},  ξ_{t,j} ~ N(0, ρ_t⁴ T d log(T/δ)/(n²ε²))
                if σ̂_{t,j} ≥ 2^{−t−1}:  σ̂_j = 2^{−t},  S = S \\ {j}
            Δ = Δ/2
        σ̂_j = 2^{−T} for j ∈ S;   return (σ̂_1, …, σ̂_d)

    Source: seed 001 §4.1, Algorithm 3 and Theorem 3 (which claims (ε, δ)-DP and, for ``z`` with
    moment ratio ``r`` (Def. 4.1), ``max_j σ_j = 1`` and ``n`` large enough,
    ``½ max{σ_j, d^{−3/2}} ≤ σ̂_j ≤ 2σ_j`` w.p. ``1 − β``).

    Line 6 (``rule``): the paper prints ``σ̂_{t,j} ≥ 2^{−t−1}`` where only ``σ̂²_{t,j}`` is defined;
    ``rule="paper"`` (default) reads ``σ̂_{t,j} = √σ̂²_{t,j}`` (a negative noisy ``σ̂²`` is not
    frozen), consistent with Theorem 3.  ``rule="squared"`` is ALGORITHMS.md §2.4's reading
    ``σ̂²_{t,j} ≥ 2^{−t−1}``; it contradicts Theorem 3 (module docstring, disagreement 1) and is
    kept only to demonstrate that.

    Parameters
    ----------
    z : ``(n, d)`` data (e.g. GLM feature vectors).  Not modified.
    r : moment ratio ``r > 1`` (``ρ_t = 4 r Δ log r`` is ``≤ 0`` for ``r ≤ 1``; see disagreement 2).
    epsilon, delta : privacy parameters in the noise variance.
    seed : int, ``SeedSequence`` or ``Generator`` for the noise (one standard normal per active
        coordinate per round, in coordinate order).
    rounds : ``T`` (default :func:`algorithm3_rounds` ``(d)``).
    full_output : also return ``{"rounds", "frozen_round" (d,) (T+1 = leftover), "noise_std" (T,)}``.

    Returns ``σ̂`` ``(d,)`` (and the dict).  The truncated means are computed only for the active
    coordinates, so the cost is ``O(n Σ_j rounds_j)``.
    """
    Z = np.asarray(z, dtype=float)
    if Z.ndim != 2 or Z.shape[0] < 1 or Z.shape[1] < 1:
        raise ValueError(f"z must have shape (n, d), got shape {Z.shape}")
    if not np.all(np.isfinite(Z)):
        raise ValueError("z must be finite")
    n, d = Z.shape
    r = float(_arr("r", r))
    if not (r > 1.0 and math.isfinite(r)):
        raise ValueError(f"r must be finite and > 1 (rho_t = 4 r Delta log r must be positive), got r={r}")
    eps, dlt = _eps_delta(epsilon, delta)
    eps, dlt = float(eps), float(dlt)
    if rule not in _RULES:
        raise ValueError(f"rule must be one of {_RULES}, got rule={rule!r}")
    T = algorithm3_rounds(d) if rounds is None else rounds
    if isinstance(T, bool) or not float(T).is_integer() or T < 1:
        raise ValueError(f"rounds must be a positive integer, got rounds={rounds!r}")
    T = int(T)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    sig_hat = np.full(d, 2.0 ** (-T))
    frozen = np.full(d, T + 1, dtype=int)
    active = np.arange(d)
    delta_t = 1.0
    logr = math.log(r)
    c_noise = math.sqrt(T * d * math.log(T / dlt)) / (n * eps)
    stds = np.zeros(T)
    for t in range(1, T + 1):
        rho = 4.0 * r * delta_t * logr
        stds[t - 1] = rho * rho * c_noise
        if active.size:
            sub = Z[:, active]
            m = np.mean(np.minimum(sub * sub, rho * rho), axis=0)
            est2 = m + stds[t - 1] * rng.standard_normal(active.size)
            if rule == "paper":
                freeze = (est2 >= 0) & (np.sqrt(np.maximum(est2, 0.0)) >= 2.0 ** (-t - 1))
            else:
                freeze = est2 >= 2.0 ** (-t - 1)
            sig_hat[active[freeze]] = 2.0 ** (-t)
            frozen[active[freeze]] = t
            active = active[~freeze]
        delta_t /= 2.0
    if full_output:
        return sig_hat, {"rounds": T, "frozen_round": frozen, "noise_std": stds}
    return sig_hat


def theorem3_guarantee(sigma_hat, sigma):
    """Condition (10) of Theorem 3, per coordinate: ``½ max{σ_j, d^{−3/2}} ≤ σ̂_j ≤ 2σ_j``.

    Source: seed 001 Theorem 3 (Eq. (10)).  ``sigma_hat``, ``sigma``: ``(..., d)``; returns a
    boolean array of the broadcast shape (``.all(-1)`` is the event of the theorem).  As printed
    it cannot hold for ``σ_j < d^{−3/2}/4`` (module docstring, disagreement 3).
    """
    sh = _positive_vec("sigma_hat", sigma_hat)
    s = _positive_vec("sigma", sigma)
    d = np.broadcast_shapes(sh.shape, s.shape)[-1]
    lo = 0.5 * np.maximum(s, d ** -1.5)
    return (sh >= lo * (1 - 1e-12)) & (sh <= 2.0 * s * (1 + 1e-12))


def theorem3_sample_size(d, r, epsilon, delta, beta, *, rounds=None):
    """Theorem 3's sample-size condition **(reconstructed)** from the garbled extraction::

        n ≥ 1000 r² log(8d/β) · max{ log²(r) √(T d log(T/δ)) / ε,  r² },     T = ⌈32 log d⌉

    The extracted text reads "n ≥ 1000r2 log [8d/β] max{ √ 2 T d log r log T/δ … / ε, r2 }"; the
    first entry's layout is ambiguous, and this reading matches the scale at which Algorithm 3's
    noise std ``ρ_t² √(T d log(T/δ))/(nε) = 16 r² log²(r) Δ² √(…)/(nε)`` becomes small relative to
    the freeze threshold ``Δ²/16``.  Vectorized over all arguments; returns ``ceil`` of the bound.
    """
    dd = _pos("d", d, integer=True)
    _require(dd >= 2, "Theorem 3 needs d >= 2, got d={d}", d=dd)
    rr = _arr("r", r)
    _require((rr > 1) & np.isfinite(rr), "r must be finite and > 1, got r={r}", r=rr)
    eps, dlt = _eps_delta(epsilon, delta)
    bb = _arr("beta", beta)
    _require((bb > 0) & (bb < 1), "beta must be in (0, 1), got beta={beta}", beta=bb)
    T = np.ceil(32.0 * np.log(dd)) if rounds is None else _pos("rounds", rounds, integer=True)
    first = np.log(rr) ** 2 * np.sqrt(T * dd * np.log(T / dlt)) / eps
    return _ret(np.ceil(1000.0 * rr * rr * np.log(8.0 * dd / bb) * np.maximum(first, rr * rr)))


def theorem3_scaling(sigma_hat, r):
    """Theorem 3's PAGAN scaling ``Ĉ_j = (r σ̂_j)^{−4/3} / 4`` (seed 001 Theorem 3)."""
    sh = _positive_vec("sigma_hat", sigma_hat)
    rr = _pos("r", r)
    scaled = np.asarray(rr)[..., None] * sh if np.ndim(rr) else rr * sh
    return scaled ** (-4.0 / 3.0) / 4.0


def theorem3_bound(sigma, r, n, epsilon, delta, *, diam_inf=2.0, r_ada=0.0):
    """Theorem 3 (Algorithm 3 + PAGAN, ``p = log d``, ``b = 1``), as printed with ``O(1) = 1``::

        R_ada(T) + D_∞ r (Σ_j σ_j^{2/3})^{3/2} log(d/δ) / (nε)

    Source: seed 001 Theorem 3 (second part; holds when condition (10) does, with
    ``Ĉ_j = (r σ̂_j)^{−4/3}/4``).  ``sigma``: ``(..., d)`` true scales ``σ_j² = E z_j²``.
    """
    _, d, s23, _ = _sigma_sums(sigma)
    rr = _pos("r", r)
    nn = _pos("n", n)
    eps, dlt = _eps_delta(epsilon, delta)
    D = _pos("diam_inf", diam_inf)
    return _ret(_pos("r_ada", r_ada, allow_zero=True) + D * rr * s23 * np.log(d / dlt) / (nn * eps))


def gaussian_moment_ratio(d):
    """Smallest moment ratio ``r`` (Def. 4.1) of a Gaussian coordinate, over ``1 ≤ p ≤ 2 log d``.

    ``r² = max_p (E|Z|^p)^{2/p}/(p E Z²)`` with ``E|Z|^p = 2^{p/2} Γ((p+1)/2)/√π``; the maximum is
    at ``p = 1``: ``r = √(2/π) ≈ 0.798`` for every ``d ≥ 2``.  (Any larger ``r`` is also valid.)
    """
    from scipy.special import gammaln

    dd = _pos("d", d, integer=True)
    _require(dd >= 2, "need d >= 2, got d={d}", d=dd)
    out = []
    for dv in np.atleast_1d(dd).ravel():
        ps = np.linspace(1.0, max(1.0, 2.0 * math.log(dv)), 2001)
        lm = (ps / 2) * math.log(2.0) + gammaln((ps + 1) / 2) - 0.5 * math.log(math.pi)
        out.append(math.sqrt(float(np.max(np.exp(2.0 * lm / ps) / ps))))
    return _ret(np.reshape(out, np.shape(dd)))


def gaussian_epsilon(mu, delta):
    """Exact ε of a ``μ``-GDP Gaussian mechanism at δ (Balle & Wang 2018, Dong–Roth–Su 2022)::

        δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)

    solved for ``ε ≥ 0`` (``0`` when ``δ(0) ≤ δ``).  Vectorized.
    """
    from scipy.optimize import brentq
    from scipy.special import log_ndtr, ndtr

    m = _pos("mu", mu)
    dl = _arr("delta", delta)
    _require((dl > 0) & (dl < 1), "delta must be in (0, 1), got delta={delta}", delta=dl)
    m, dl = np.broadcast_arrays(m, dl)
    out = np.empty(m.shape)
    for idx in np.ndindex(*m.shape):
        mu_, d_ = float(m[idx]), float(dl[idx])

        def f(e, mu_=mu_, d_=d_):
            return float(ndtr(-e / mu_ + mu_ / 2) - math.exp(e + log_ndtr(-e / mu_ - mu_ / 2))) - d_

        if f(0.0) <= 0:
            out[idx] = 0.0
            continue
        hi = 1.0
        while f(hi) > 0:
            hi *= 2.0
        out[idx] = brentq(f, 0.0, hi, xtol=1e-14, rtol=1e-13)
    return _ret(out)


def gaussian_mu(epsilon, delta):
    """Largest ``μ`` with a ``μ``-GDP mechanism ``(ε, δ)``-DP (inverse of :func:`gaussian_epsilon`).

    A Gaussian mechanism with ℓ2 sensitivity ``Δ`` and noise ``N(0, s² I)`` is ``Δ/s``-GDP; for
    ``(ε, δ)`` take ``s = Δ / gaussian_mu(ε, δ)``.
    """
    from scipy.optimize import brentq
    from scipy.special import log_ndtr, ndtr

    eps, dlt = _eps_delta(epsilon, delta)
    eps, dlt = np.broadcast_arrays(eps, dlt)
    out = np.empty(eps.shape)
    for idx in np.ndindex(*eps.shape):
        e, d_ = float(eps[idx]), float(dlt[idx])

        def f(mu_, e=e, d_=d_):
            return float(ndtr(-e / mu_ + mu_ / 2) - math.exp(e + log_ndtr(-e / mu_ - mu_ / 2))) - d_

        hi = 1.0
        while f(hi) < 0:
            hi *= 2.0
        out[idx] = brentq(f, 1e-8, hi, xtol=1e-14, rtol=1e-13)
    return _ret(out)


def algorithm3_epsilon(epsilon, delta, d, *, rounds=None):
    """Exact ``ε'(δ)`` of Algorithm 3's printed noise, under replace-one adjacency.

    In round ``t`` each active coordinate releases ``(1/n) Σ_i min(z_ij², ρ_t²)`` (replace-one
    sensitivity ``ρ_t²/n``) plus ``N(0, ρ_t⁴ T d log(T/δ)/(n²ε²))``: with ``|S_t| ≤ d`` active
    coordinates a round is a Gaussian mechanism of ``μ_t² ≤ d ε²/(T d log(T/δ))``, and the adaptive
    composition of the ``T`` rounds is ``μ``-GDP with ``μ = ε/√log(T/δ)`` (Dong, Roth & Su 2022).
    Returns :func:`gaussian_epsilon` ``(μ, δ)`` — the privacy the printed noise actually buys;
    Theorem 3 claims ``ε`` (module docstring, disagreement 4).  Vectorized over ``epsilon, delta``.
    """
    eps, dlt = _eps_delta(epsilon, delta)
    T = algorithm3_rounds(d) if rounds is None else int(_pos("rounds", rounds, integer=True))
    return gaussian_epsilon(eps / np.sqrt(np.log(T / dlt)), dlt)


# ------------------------------------------------------------------------------------------------
# Lower bounds (§5)


def lower_bound_box(sigma, n, epsilon):
    """Proposition 1 / Theorem 4 (ℓ∞ box, linear losses): for every (ε, δ)-DP ``M``::

        sup_{S ∈ Z^n} E[f(M(S); S) − f(x*_S; S)]  ≥  (Σ_j σ_j^{2/3})^{3/2} / (nε log^{5/2} d)

    Source: seed 001 Prop. 1 (sign estimation; the same quantity bounds
    ``E Σ_j |z̄_j| 1{sign(M_j) ≠ sign(z̄_j)}``) and Thm 4 (``f(x; S) = −xᵀz̄`` on ``X_∞ = [−1, 1]^d``,
    ``Z = {|z_j| ≤ σ_j}``).  Assumption: ``√d log d ≤ nε`` (``ValueError`` otherwise) and ``d ≥ 2``.
    Printed without an explicit constant (evaluated with constant 1).  ``sigma``: ``(..., d)``.
    """
    _, d, s23, _ = _sigma_sums(sigma)
    nn = _pos("n", n)
    eps = _pos("epsilon", epsilon)
    if d < 2:
        raise ValueError(f"Theorem 4 needs d >= 2 (log d > 0), got d={d}")
    cond = math.sqrt(d) * math.log(d)
    _require(cond <= nn * eps, "Theorem 4 / Prop. 1 need sqrt(d) log d <= n epsilon, got "
             "sqrt(d) log d={c:.6g} > n epsilon={ne:.6g} (n={n}, epsilon={epsilon})",
             c=np.full(np.shape(nn * eps), cond), ne=nn * eps, n=nn, epsilon=eps)
    return _ret(s23 / (nn * eps * math.log(d) ** 2.5))


def lower_bound_ball(sigma, n, epsilon):
    """Theorem 5 (ℓ2 ball, linear losses): for every (ε, δ)-DP ``M``::

        sup_{S ∈ Z^n} E[f(M(S); S) − f(x*_S; S)]  ≥  Σ_j σ_j / (nε log d)

    Source: seed 001 Thm 5 (``f(x; S) = −xᵀz̄`` on the unit ℓ2 ball, ``Z = {|z_j| ≤ σ_j}``).
    Assumption: ``√d ≤ nε`` and ``d ≥ 2``.  Printed without an explicit constant.
    """
    _, d, _, s1 = _sigma_sums(sigma)
    nn = _pos("n", n)
    eps = _pos("epsilon", epsilon)
    if d < 2:
        raise ValueError(f"Theorem 5 needs d >= 2 (log d > 0), got d={d}")
    _require(math.sqrt(d) <= nn * eps, "Theorem 5 needs sqrt(d) <= n epsilon, got sqrt(d)={c:.6g} > "
             "n epsilon={ne:.6g}", c=np.full(np.shape(nn * eps), math.sqrt(d)), ne=nn * eps)
    return _ret(s1 / (nn * eps * math.log(d)))


def prop2_bound(sigma, d, n, epsilon):
    """Proposition 2 (ℓ2 ball, ``Z = {||z||_∞ ≤ σ}``; Bassily, Smith & Thakurta 2014, Thm 5.3)::

        sup_S E[f(M(S); S) − f(x*_S; S)]  ≥  min{ σ√d,  dσ/(nε) }

    Source: seed 001 Prop. 2 (the extracted text reads "min σ√d, √dσ/(nε)" with the ``√`` of the
    second entry displaced; ``dσ/(nε)`` is the rescaling of Bassily et al.'s
    ``Ω(min{1, √d/(nε)})`` by the ℓ2 radius ``σ√d`` of ``Z`` **(reconstructed)**).  Printed
    without an explicit constant.  Vectorized over all arguments.
    """
    s = _pos("sigma", sigma)
    dd = _pos("d", d, integer=True)
    nn = _pos("n", n)
    eps = _pos("epsilon", epsilon)
    return _ret(np.minimum(s * np.sqrt(dd), dd * s / (nn * eps)))


# ================================================================================================
# dpsim verify rows (family "seed 001 moments")
# ================================================================================================

from dpsim.analysis.verify import CheckResult, check  # noqa: E402

FAMILY = "seed 001 moments"


def _cp_interval(k: int, m: int, level: float = 0.95):
    """Clopper–Pearson two-sided interval for a binomial proportion ``k/m``."""
    from scipy.stats import beta

    a = 1.0 - level
    lo = 0.0 if k == 0 else float(beta.ppf(a / 2, k, m - k + 1))
    hi = 1.0 if k == m else float(beta.ppf(1 - a / 2, k + 1, m - k))
    return lo, hi


def _cp_upper(k: int, m: int, level: float = 0.95) -> float:
    """One-sided Clopper–Pearson upper confidence limit."""
    from scipy.stats import beta

    return 1.0 if k == m else float(beta.ppf(level, k + 1, m - k))


def _mean_ci(x, level=0.95):
    from scipy.stats import t as student

    x = np.asarray(x, dtype=float)
    m = float(np.mean(x))
    if x.size < 2:
        return m, float("inf")
    return m, float(student.ppf(0.5 + level / 2, x.size - 1) * np.std(x, ddof=1) / math.sqrt(x.size))


def _lipschitz_rows(problem):
    """Per-example gradient magnitudes ``|a_i|`` of a GLM with ``|ℓ'| ∈ {0, 1}`` via the public API:
    ``per_example_grads`` at ``w = 0`` (absolute loss: ``sign(−b_i) a_i``; linear: ``−z_i``)."""
    n, d = problem.n, problem.d
    g = np.asarray(problem.per_example_grads(np.zeros((1, d)), np.arange(n)[None, :]))[0]
    return np.abs(g)


def _simulate_average(problem, optimizer, *, steps, batch_size, trials, seed, sampling):
    """Run ``dpsim.simulate`` recording every iterate through a probe; return the averages
    ``x̄ = (1/T) Σ_{k=0}^{T−1} x^k`` (the proof's) and ``(1/T) Σ_{k=1}^{T} x^k`` (Alg. 1–2, line 10)."""
    import dpsim

    acc: dict[str, Any] = {}

    def probe(state, params, ctx):
        p = np.array(params, dtype=float)
        if "sum" not in acc:
            acc["sum"] = np.zeros_like(p)
            acc["first"] = p.copy()
        acc["sum"] += p
        acc["last"] = p
        return np.zeros(p.shape[0])

    res = dpsim.simulate(problem, optimizer, steps=steps, batch_size=batch_size, trials=trials,
                         seed=seed, sampling=sampling, record_every=1, metrics=(),
                         probes={"iterate_sum": probe})
    avg_proof = (acc["sum"] - acc["last"]) / steps
    avg_paper = (acc["sum"] - acc["first"]) / steps
    return res, avg_proof, avg_paper


_SIM = {"quick": dict(n=2000, d=50, b=40, trials=24), "full": dict(n=5000, d=100, b=70, trials=64)}


def _theorem12_rows(scale, seed, algorithm):
    """One with-replacement simulation, trials split between ε = 1 and ε = 4 (per-trial σ and B)."""
    import dpsim
    from dpsim.pagan import ellipsoid_radius, scaling_diagonal

    cfg = _SIM[scale]
    n, d, b, R = cfg["n"], cfg["d"], cfg["b"], cfg["trials"]
    delta, epss = 1e-5, (1.0, 4.0)
    # the theorem's noise scale √log(1/δ)/(bε) is dpsim's σ/b with σ = √log(1/δ)/ε
    sigs = [math.sqrt(math.log(1.0 / delta)) / e for e in epss]
    T = (n // b) ** 2  # T = c n²/b², c = 1
    prob = dpsim.problems.absolute_regression(n, d, seed=seed + 11)
    f_star = float(prob.optimum[1])
    X = _lipschitz_rows(prob)
    C = scaling_diagonal(prob.scales, algorithm)
    Bs = [ellipsoid_radius(C, X, n=n, noise_multiplier=s, algorithm=algorithm) for s in sigs]
    lr = 2.0 * math.sqrt(d) if algorithm == "pasan" else 2.0
    per = R // len(epss)
    opt = dpsim.optimizers.get(algorithm, lr=lr, noise_multiplier=list(np.repeat(sigs, per)),
                               radius=list(np.repeat(Bs, per)), scaling=C)
    _, avg, avg_paper = _simulate_average(prob, opt, steps=T, batch_size=b, trials=per * len(epss),
                                          seed=seed + 12, sampling="replacement")
    ex = (np.asarray(prob.loss(avg)) - f_star).reshape(len(epss), per)
    ex_paper = (np.asarray(prob.loss(avg_paper)) - f_star).reshape(len(epss), per)
    f0 = float(np.asarray(prob.loss(np.zeros((1, d))))[0]) - f_star
    rows = []
    for i, (eps, sig, B) in enumerate(zip(epss, sigs, Bs)):
        m, hw = _mean_ci(ex[i])
        if algorithm == "pasan":
            bound = theorem1_bound(C, X, n=n, noise_multiplier=sig, batch_size=b)
            explicit = pasan_bound(C, X, radius=B, noise_multiplier=sig, steps=T, batch_size=b, lr=lr)
            src, name = "seed 001 Thm 1", "PASAN"
        else:
            bound = theorem2_bound(C, X, n=n, noise_multiplier=sig, batch_size=b)
            explicit = pagan_bound(C, X, radius=B, noise_multiplier=sig, steps=T, batch_size=b, lr=lr)
            src, name = "seed 001 Thm 2", "PAGAN"
        ok = m + hw <= bound
        rows.append(CheckResult(
            check=f"seed001_theorem{'1_pasan' if algorithm == 'pasan' else '2_pagan'}", source=src,
            family=FAMILY, bound=float(bound), estimate=m, ci=hw, relation="estimate + ci <= bound",
            verdict="pass" if ok else "fail",
            detail=(f"ε={eps}: {name} (optimal C, B={B:.4g} from the theorem, α = diam) on "
                    f"absolute_regression(n={n}, d={d}), b={b}, T=n²/b²={T}, with-replacement "
                    f"batches, σ=√log(1/δ)/ε={sig:.4g} (δ={delta}; the theorem's noise — Lemma 3.1's "
                    f"privacy constants are unstated, and Result.epsilon refuses replacement "
                    f"sampling); {per} trials, 95% t-interval. Estimate: excess loss of the average "
                    f"iterate (1/T)Σ_{{k<T}} x^k accumulated by a probe (paper's (1/T)Σ_{{k=1..T}} "
                    f"x^k: {float(np.mean(ex_paper[i])):.4g}). Bound: the theorem's form with our "
                    f"explicit constants (3/2, 3+2^(1-p)), p=ln d; the finite-T bound it dominates "
                    f"is {float(explicit):.4g} (ratio to the estimate {float(explicit) / m:.2g}); "
                    f"excess loss at x=0 is {f0:.4g}.")))
    return rows


@check("seed001_theorem1_pasan", family=FAMILY)
def _check_theorem1(scale, seed):
    return _theorem12_rows(scale, seed, "pasan")


@check("seed001_theorem2_pagan", family=FAMILY)
def _check_theorem2(scale, seed):
    return _theorem12_rows(scale, seed, "pagan")


_ALG3 = {"quick": dict(d=10, trials=30), "full": dict(d=10, trials=300)}


def _gaussian_data(rng, n, sigma):
    """``(n, d)`` rows ``z_i ~ N(0, diag σ²)``, stored column-major (the columns Algorithm 3 reads)."""
    z = rng.standard_normal((sigma.size, n))
    z *= np.asarray(sigma, dtype=float)[:, None]
    return z.T


@check("seed001_alg3_theorem3", family=FAMILY)
def _check_alg3(scale, seed):
    cfg = _ALG3[scale]
    d, R = cfg["d"], cfg["trials"]
    r, eps, delta, beta = 1.5, 1.0, 1e-5, 0.1
    sigma = np.arange(1, d + 1, dtype=float) ** -1.5  # max σ_j = 1, min σ_j = d^{-3/2}
    n = int(theorem3_sample_size(d, r, eps, delta, beta))
    ss = np.random.SeedSequence([seed, 3001])
    fails = 0
    worst = 0.0
    for child in ss.spawn(R):
        rng = np.random.default_rng(child)
        z = _gaussian_data(rng, n, sigma)
        sh = private_second_moment(z, r, eps, delta, seed=rng)
        ok = theorem3_guarantee(sh, sigma)
        fails += int(not ok.all())
        worst = max(worst, float(np.max(sh / (2 * sigma))),
                    float(np.max(0.5 * np.maximum(sigma, d ** -1.5) / sh)))
    up = _cp_upper(fails, R)
    return CheckResult(
        check="seed001_alg3_theorem3", source="seed 001 Thm 3 / Alg. 3", family=FAMILY, bound=beta,
        estimate=fails / R, ci=(0.0, up), relation="P(fail) <= beta: one-sided 95% CP upper <= beta",
        verdict="pass" if up <= beta else "fail",
        detail=(f"Algorithm 3 (line 6 read as sqrt(σ̂²) >= 2^(-t-1)) on z ~ N(0, diag(j^-3/2)²), "
                f"d={d}, r={r} (Gaussian moment ratio is {gaussian_moment_ratio(d):.3f} <= r), "
                f"ε={eps}, δ={delta}, β={beta}, T={algorithm3_rounds(d)}; n={n} from Theorem 3's "
                f"condition (reconstructed reading); {R} independent data sets and noise draws; "
                f"one-sided 95% Clopper–Pearson upper limit {up:.3g}. Largest violation ratio "
                f"max(σ̂/2σ, ½max(σ,d^-3/2)/σ̂) = {worst:.3g} (<= 1 means inside (10))."))


@check("seed001_alg3_readings", family=FAMILY)
def _check_alg3_readings(scale, seed):
    """Disagreements 1–3 of the module docstring, each shown on data meeting Theorem 3's hypotheses."""
    d, eps, delta, beta = 10, 1.0, 1e-5, 0.1
    sigma = np.arange(1, d + 1, dtype=float) ** -1.5
    rows = []
    R = 3 if scale == "quick" else 20
    # 1. ALGORITHMS.md's squared threshold
    r = 1.5
    n = int(theorem3_sample_size(d, r, eps, delta, beta))
    fails = 0
    for child in np.random.SeedSequence([seed, 3002]).spawn(R):
        rng = np.random.default_rng(child)
        sh = private_second_moment(_gaussian_data(rng, n, sigma), r, eps, delta, seed=rng, rule="squared")
        fails += int(not theorem3_guarantee(sh, sigma).all())
    rows.append(CheckResult(
        check="seed001_alg3_readings", source="seed 001 Alg. 3 line 6 vs ALGORITHMS.md §2.4", family=FAMILY,
        bound=beta, estimate=fails / R, ci=_cp_interval(fails, R), relation="P(fail) <= beta",
        verdict="reported",
        detail=(f"ALGORITHMS.md reads line 6 as σ̂² >= 2^(-t-1) (second moment vs a first-moment "
                f"scale); on the data of seed001_alg3_theorem3 (n={n}) condition (10) fails in "
                f"{fails}/{R} runs (σ_2=0.35 is frozen at 2^-3 < σ_2/2; σ_j <= 0.19 are never frozen, "
                f"since ρ_t² ∝ 4^-t drops below 2^(-t-1), and get 2^-T). The paper prints σ̂ >= "
                f"2^(-t-1); the code follows the paper (rule='paper'); rule='squared' exists only "
                f"to show this.")))
    # 2. ρ_t = 4 r Δ log r with r close to 1
    r2 = 1.05
    n2 = int(theorem3_sample_size(d, r2, eps, delta, beta))
    fails2 = 0
    R2 = R
    for child in np.random.SeedSequence([seed, 3003]).spawn(R2):
        rng = np.random.default_rng(child)
        sh = private_second_moment(_gaussian_data(rng, n2, sigma), r2, eps, delta, seed=rng)
        fails2 += int(not theorem3_guarantee(sh, sigma).all())
    rows.append(CheckResult(
        check="seed001_alg3_readings", source="seed 001 Alg. 3 line 4 / Thm 3", family=FAMILY,
        bound=beta, estimate=fails2 / R2, ci=_cp_interval(fails2, R2), relation="P(fail) <= beta",
        verdict="reported",
        detail=(f"r={r2} is a valid moment ratio for Gaussian data (theirs is "
                f"{gaussian_moment_ratio(d):.3f}); Theorem 3's n is then {n2}, but the printed "
                f"ρ_t = 4rΔ log r = {4 * r2 * math.log(r2):.3f}Δ < Δ/4 makes √(truncated mean) < "
                f"2^(-t-1): nothing is ever frozen and every σ̂_j = 2^-T; (10) fails in "
                f"{fails2}/{R2} runs. The code follows the printed formula (r > 1 required).")))
    # 3. the d^{-3/2} floor of condition (10)
    r = 1.5
    sig3 = sigma.copy()
    sig3[-1] = d ** -1.5 / 10.0
    fails3 = 0
    for child in np.random.SeedSequence([seed, 3004]).spawn(R2):
        rng = np.random.default_rng(child)
        sh = private_second_moment(_gaussian_data(rng, n, sig3), r, eps, delta, seed=rng)
        fails3 += int(not theorem3_guarantee(sh, sig3).all())
    rows.append(CheckResult(
        check="seed001_alg3_readings", source="seed 001 Thm 3, Eq. (10)", family=FAMILY,
        bound=beta, estimate=fails3 / R2, ci=_cp_interval(fails3, R2), relation="P(fail) <= beta",
        verdict="reported",
        detail=(f"σ_d = d^(-3/2)/10: with T = 32 log d the coordinate is frozen near its own scale, "
                f"below ½d^(-3/2); (10) as printed fails in {fails3}/{R2} runs. It cannot hold "
                f"for σ_j < d^(-3/2)/4 with any T (upper side 2σ_j vs a floor of d^(-3/2)); the "
                f"code follows the printed T and checks use σ_j >= d^(-3/2).")))
    return rows


@check("seed001_alg3_privacy", family=FAMILY)
def _check_alg3_privacy(scale, seed):
    rows = []
    d = 10
    T = algorithm3_rounds(d)
    for eps, delta in [(0.1, 1e-5), (1.0, 1e-5), (1.0, 1e-8), (4.0, 1e-5)]:
        e_exact = float(algorithm3_epsilon(eps, delta, d))
        mu = eps / math.sqrt(math.log(T / delta))
        ok = e_exact <= eps
        rows.append(CheckResult(
            check="seed001_alg3_privacy", source="seed 001 Thm 3 (privacy) / Alg. 3 line 5",
            family=FAMILY, bound=eps, estimate=e_exact, ci=None, relation="exact epsilon <= claimed epsilon",
            verdict="pass" if ok else "reported",
            detail=(f"d={d}, T={algorithm3_rounds(d)}, δ={delta}: the printed noise makes the T "
                    f"rounds a μ-GDP mechanism, μ = ε/√log(T/δ) = {mu:.4g} "
                    f"(replace-one); exact ε(δ) (Balle–Wang) = {e_exact:.4g}"
                    + ("" if ok else f" exceeds the claimed ε={eps}: the noise constant is "
                       f"{e_exact / eps:.3f}x too small for (ε, δ)-DP here (code follows the printed "
                       f"noise)."))))
    return rows


@check("seed001_theorem3_pagan", family=FAMILY)
def _check_theorem3_pagan(scale, seed):
    import dpsim
    from dpsim.pagan import ellipsoid_radius

    n, d, b = (2000, 20, 40) if scale == "quick" else (5000, 20, 70)
    R = 16 if scale == "quick" else 32
    r, eps, delta, beta = 1.5, 1.0, 1e-5, 0.1
    prob = dpsim.problems.absolute_regression(n, d, seed=seed + 21)
    sigma = prob.scales
    # Algorithm 3 needs Theorem 3's n; the optimization data set is smaller, so it runs on an
    # independent sample of that size from the same feature law N(0, diag σ²).
    n3 = int(theorem3_sample_size(d, r, eps, delta, beta))
    rng = np.random.default_rng(np.random.SeedSequence([seed, 3005]))
    sh = private_second_moment(_gaussian_data(rng, n3, sigma), r, eps, delta, seed=rng)
    cond10 = bool(theorem3_guarantee(sh, sigma).all())
    C = theorem3_scaling(sh, r)
    sig = math.sqrt(math.log(1.0 / delta)) / eps
    T = (n // b) ** 2
    X = _lipschitz_rows(prob)
    B = ellipsoid_radius(C, X, n=n, noise_multiplier=sig, algorithm="pagan")
    opt = dpsim.optimizers.get("pagan", lr=2.0, noise_multiplier=sig, radius=B, scaling=C)
    _, avg, _ = _simulate_average(prob, opt, steps=T, batch_size=b, trials=R, seed=seed + 22,
                                  sampling="replacement")
    f_star = float(prob.optimum[1])
    m, hw = _mean_ci(np.asarray(prob.loss(avg)) - f_star)
    bound2 = float(theorem2_bound(C, X, n=n, noise_multiplier=sig, batch_size=b))
    r_ada = 2.0 * float(np.sum(np.sqrt(np.mean(X * X, axis=0)))) / math.sqrt(T)
    printed = float(theorem3_bound(sigma, r, n, eps, delta, r_ada=r_ada))
    ok = cond10 and m + hw <= bound2
    return CheckResult(
        check="seed001_theorem3_pagan", source="seed 001 Thm 3 (Alg. 3 + PAGAN)", family=FAMILY,
        bound=bound2, estimate=m, ci=hw, relation="estimate + ci <= bound (given (10))",
        verdict="pass" if ok else "fail",
        detail=(f"σ̂ from Algorithm 3 (r={r}, ε={eps}, δ={delta}) on an independent sample of "
                f"Theorem 3's size n={n3} (condition (10) holds: {cond10}); PAGAN with "
                f"Ĉ_j=(rσ̂_j)^(-4/3)/4, theorem radius, σ=√log(1/δ)/ε on absolute_regression(n={n}, "
                f"d={d}), b={b}, T={T}, with replacement, {R} trials. Bound: Theorem 2 at Ĉ with "
                f"our constants; Theorem 3's printed form with O(1)=1 is {printed:.4g} "
                f"({'above' if printed >= m + hw else 'below'} the estimate). Privacy: Alg. 3 and "
                f"PAGAN each spend the (ε, δ) budget (2ε in total)."))


@check("seed001_example1_lemma32", family=FAMILY)
def _check_example1_lemma32(scale, seed):
    rows = []
    # Example 1: exact Gaussian moments vs the explicit bound, over a grid of p and C
    d = 20
    sigma = np.arange(1, d + 1, dtype=float) ** -1.5
    ps = np.array([1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 2 * math.log(d), 6.0, 10.0])
    worst, arg = 0.0, None
    for kappa in (0.0, 1.0, 4.0 / 3.0):
        C = sigma ** -kappa
        ratio = G_p(C, sigma, ps) / example1_bound(C, sigma, ps)
        i = int(np.argmax(ratio))
        if ratio[i] > worst:
            worst, arg = float(ratio[i]), (kappa, float(ps[i]))
    rows.append(CheckResult(
        check="seed001_example1_lemma32", source="seed 001 Example 1 (Eq. (3))", family=FAMILY,
        bound=1.0, estimate=worst, ci=None, relation="max G_p(C) / bound <= 1",
        verdict="pass" if worst <= 1 + 1e-9 else "fail",
        detail=(f"Exact G_p(C) of z ~ N(0, diag σ²) (σ_j=j^-3/2, d={d}; C = σ^-κ, κ ∈ {{0, 1, 4/3}}; "
                f"p ∈ {{1, …, 10}}) over the explicit bound μ + c_p√(Σ C_jj σ_j²), μ=0; worst at "
                f"(κ, p) = {arg}. Equality at p = 2 (c_2 = 1 is exact for Gaussians).")))
    # Lemma 3.2: P(Ĝ_p(S; C) > G_p + G_2p) <= 1/n over fresh data sets S of n points
    n, p = 20, 2.0
    M = 2000 if scale == "quick" else 20000
    C = np.ones(d)
    Gp, G2p = G_p(C, sigma, p), G_p(C, sigma, 2 * p)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 3006]))
    z = rng.standard_normal((M, n, d)) * sigma
    Ghat = np.mean(np.sum(z * z, axis=-1) ** (p / 2), axis=1) ** (1 / p)
    k = int(np.sum(Ghat > lemma32_bound(Gp, G2p)))
    up = _cp_upper(k, M)
    rows.append(CheckResult(
        check="seed001_example1_lemma32", source="seed 001 Lemma 3.2", family=FAMILY, bound=1.0 / n,
        estimate=k / M, ci=(0.0, up), relation="P(Ĝ_p > G_p + G_2p) <= 1/n: one-sided 95% CP upper <= 1/n",
        verdict="pass" if up <= 1.0 / n else "fail",
        detail=(f"{M} data sets of n={n} Gaussian points (σ_j=j^-3/2, d={d}, C=I, p={p}); "
                f"G_p={Gp:.4g}, G_2p={G2p:.4g} exact; max Ĝ_p seen {float(Ghat.max()):.4g}. "
                f"Chebyshev makes the lemma loose: violations are far rarer than 1/n.")))
    # the σ_j = j^{-3/2} comparison of §3.2
    ds = np.array([10, 100, 1000, 10000])
    vals = [geometry_comparison(np.arange(1, dd + 1, dtype=float) ** -1.5) for dd in ds]
    okh = all(v["pasan"] <= v["pagan"] <= v["sqrt_d_pasan"] for v in vals)
    H = [float(np.sum(1.0 / np.arange(1, dd + 1))) ** 1.5 for dd in ds]
    errH = max(abs(v["pagan"] - h) / h for v, h in zip(vals, H))
    rows.append(CheckResult(
        check="seed001_example1_lemma32", source="seed 001 §3.2 (Hölder, σ_j = j^-3/2)", family=FAMILY,
        bound=0.0, estimate=errH, ci=None,
        relation="Σσ <= (Σσ^{2/3})^{3/2} <= √d Σσ and (Σσ^{2/3})^{3/2} = H_d^{3/2}",
        verdict="pass" if okh and errH < 1e-12 else "fail",
        detail="; ".join(f"d={dd}: (Σσ^(2/3))^(3/2)={v['pagan']:.4g}, Σσ={v['pasan']:.4g}, "
                         f"√dΣσ={v['sqrt_d_pasan']:.4g}" for dd, v in zip(ds, vals))
        + " — PAGAN's factor grows like (log d)^(3/2), PASAN's √d Σσ like √d ζ(3/2)."))
    return rows


@check("seed001_lower_bounds", family=FAMILY)
def _check_lower_bounds(scale, seed):
    import dpsim

    rows = []
    n, d, b, T = (2000, 20, 40, 300) if scale == "quick" else (5000, 50, 50, 1000)
    reps = 6 if scale == "quick" else 16
    delta, sig = 1e-5, 2.0
    eps_ar = float(dpsim.accounting.epsilon(sig, b / n, T, delta))  # Poisson, add/remove (PLD)
    eps_ro = 2.0 * eps_ar  # replace-one (the paper's neighbouring relation): group privacy of 2
    prob = dpsim.problems.linear_box(n, d, seed=seed + 31)
    sigma = prob.scales
    lb = float(lower_bound_box(sigma, n, eps_ro))
    lrs = [0.1, 0.3, 1.0]
    lr = np.repeat(lrs, reps)
    best, best_name, best_hw = math.inf, "", 0.0
    Z = _lipschitz_rows(prob)
    clip = float(np.max(np.sqrt(np.sum(Z * Z, axis=1))))
    methods = [("pagan", dict(scaling="optimal"), 1.0), ("pasan", dict(scaling="identity"), 1.0),
               ("dp_sgd", dict(clip=clip), 0.1)]
    for name, hp, scale_lr in methods:
        opt = dpsim.optimizers.get(name, lr=list(lr * scale_lr), noise_multiplier=sig, **hp)
        res = dpsim.simulate(prob, opt, steps=T, batch_size=b, trials=lr.size, seed=seed + 32,
                             sampling="poisson", record_every=T, metrics=("loss",))
        ex = res.excess_loss[-1].reshape(len(lrs), reps)
        for i, lr_i in enumerate(lrs):
            m, hw = _mean_ci(ex[i])
            if m < best:
                best, best_name, best_hw = m, f"{name}(lr={lr_i * scale_lr:g})", hw
    rows.append(CheckResult(
        check="seed001_lower_bounds", source="seed 001 Prop. 1 / Thm 4", family=FAMILY, bound=lb,
        estimate=best, ci=best_hw, relation="bound <= estimate - ci",
        verdict="pass" if lb <= best - best_hw else "fail",
        detail=(f"linear_box(n={n}, d={d}, σ_j=j^-3/2): best of PAGAN (optimal C), PASAN, DP-SGD "
                f"over lr ∈ {lrs} (last iterate, {reps} trials each, 95% t-interval) is "
                f"{best_name}; Poisson b={b}, T={T}, σ={sig}: ε={eps_ar:.3g} add/remove (PLD), "
                f"so ε={eps_ro:.3g} replace-one (the paper's relation) is used in the bound. A "
                f"minimax lower bound only constrains the worst data set; this instance is a "
                f"sanity check (the bound is far below any achievable loss here).")))
    # Theorem 5 / Prop. 2 (ℓ2 ball): dpsim has no ball-domain linear problem, so the private method
    # is the Gaussian mechanism on z̄ followed by the ball's best response x = ẑ/||ẑ||.
    eps = 1.0
    mu = float(gaussian_mu(eps, delta))
    rng = np.random.default_rng(np.random.SeedSequence([seed, 3007]))
    draws = 4000 if scale == "quick" else 40000
    for which, scales in (("Thm 5", "power"), ("Prop. 2", "ones")):
        worst, worst_hw, worst_bias = -math.inf, 0.0, None
        for bias in (0.0, 0.02, 0.05, 0.1, 0.3):
            p2 = dpsim.problems.linear_box(n, d, scales=scales, bias=bias, seed=seed + 33)
            Zs = -np.asarray(p2.per_example_grads(np.zeros((1, d)), np.arange(n)[None, :]))[0]
            zbar = Zs.mean(axis=0)
            s = 2.0 * float(np.sqrt(np.sum(p2.scales ** 2))) / n / mu  # replace-one ℓ2 sensitivity / μ
            zh = zbar + s * rng.standard_normal((draws, d))
            x = zh / np.linalg.norm(zh, axis=1, keepdims=True)
            risk = float(np.linalg.norm(zbar)) - x @ zbar
            m, hw = _mean_ci(risk)
            if m > worst:
                worst, worst_hw, worst_bias = m, hw, bias
        if which == "Thm 5":
            lbb = float(lower_bound_ball(p2.scales, n, eps))
        else:
            lbb = float(prop2_bound(1.0, d, n, eps))
        rows.append(CheckResult(
            check="seed001_lower_bounds", source=f"seed 001 {which}", family=FAMILY, bound=lbb,
            estimate=worst, ci=worst_hw, relation="bound <= estimate - ci (hardest of 5 data sets)",
            verdict="pass" if lbb <= worst - worst_hw else "fail",
            detail=(f"Unit ℓ2 ball, f(x)=-xᵀz̄, z from linear_box(n={n}, d={d}, scales={scales!r}) "
                    f"with bias ∈ {{0, .02, .05, .1, .3}} (hardest: {worst_bias}); method: "
                    f"Gaussian mechanism on z̄ (replace-one sensitivity 2||σ||/n, exact μ={mu:.4g} "
                    f"for ε={eps}, δ={delta}) then x=ẑ/||ẑ||; {draws} draws, 95% t-interval. "
                    f"Printed bounds have no constant (constant 1 used).")))
    return rows


@check("seed001_corollaries", family=FAMILY)
def _check_corollaries(scale, seed):
    """Eqs. (8)–(9) drop the factor ``(nε D_{C⁻¹}/(D √log(1/δ) tr))^{1/p}`` of Theorems 1–2."""
    d, eps, delta = 100, 1.0, 1e-5
    sigma = np.arange(1, d + 1, dtype=float) ** -1.5
    p = math.log(d)
    ns = (5000, 10 ** 6, 10 ** 9)
    rows = []
    for alg, kappa in (("pagan", 4.0 / 3.0), ("pasan", 1.0)):
        C = sigma ** -kappa
        G = G_p(C, sigma, 2 * p)  # exact population moment, Gaussian features
        if alg == "pagan":
            thm = [float(theorem2_bound(C, G, n=n, epsilon=eps, delta=delta, p=p, r_ada=0.0)) for n in ns]
            rate = [float(pagan_rate(sigma, n, eps, delta)) for n in ns]
            src = "seed 001 Eq. (8) vs Thm 2"
        else:
            thm = [float(theorem1_bound(C, G, n=n, epsilon=eps, delta=delta, p=p, r_std=0.0)) for n in ns]
            rate = [float(pasan_rate(sigma, n, eps, delta)) for n in ns]
            src = "seed 001 Eq. (9) vs Thm 1"
        ratio = [a / b for a, b in zip(thm, rate)]
        rows.append(CheckResult(
            check="seed001_corollaries", source=src, family=FAMILY, bound=rate[0], estimate=thm[0],
            ci=None, relation="Theorem's privacy term = O(1) x corollary, uniformly in n",
            verdict="reported",
            detail=(f"σ_j=j^-3/2, d={d}, p=ln d, ε={eps}, δ={delta}, C=σ^-{kappa:.3g}, G_2p exact "
                    f"(Gaussian): Theorem privacy term / printed corollary (O(1)=1) = "
                    + ", ".join(f"{r:.3g} at n={n:.0e}" for r, n in zip(ratio, ns))
                    + f". The ratio grows like n^(1/p) = n^(1/ln d): setting p = log d turns "
                    f"(…/(nε))^((p-1)/p) into (1/(nε))·(nε·…)^(1/ln d), which is O(1) only while nε "
                    f"<= poly(d). The corollary's 1/(nε) rate is therefore not implied for nε >> "
                    f"poly(d); the code's theorem1/2_bound follow the theorems, pasan/pagan_rate "
                    f"the printed corollaries.")))
    return rows
