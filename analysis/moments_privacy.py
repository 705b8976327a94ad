"""The privacy side of [PAGAN]: Lemma 3.1's accounting, exact Gaussian mechanisms, §5's lower bounds.

Split from :mod:`dpsim.analysis.moments`, which re-exports every name defined here (public and
private alike), so ``from dpsim.analysis.moments import lemma31_steps`` and
``moments._mean_cosine`` keep working; the source, the conventions and the list of disagreements
are in that module's docstring.  This module imports nothing from :mod:`~dpsim.analysis.moments`
(which imports from here), so the split has no import cycle.

Contents
--------
Validation helpers shared with :mod:`~dpsim.analysis.moments`:
    ``_arr``, ``_positive_vec``, ``_pos`` and ``_sigma_sums`` (``Σσ_j^{2/3}`` and ``Σσ_j``).
Privacy of PASAN / PAGAN (§3, Lemma 3.1):
    :func:`lemma31_steps`, :func:`lemma31_constant` (the largest ``c`` in ``T = c n²/b²``),
    :func:`lemma31_epsilon` (accounted ε at a given ``c``).
Gaussian mechanism helpers:
    :func:`gaussian_epsilon`, :func:`gaussian_mu` (exact (ε, δ) of a μ-GDP Gaussian mechanism,
    Balle & Wang 2018 / Dong, Roth & Su 2022); :func:`dpsim.analysis.moments.algorithm3_epsilon`
    is built on them.
Lower bounds (§5):
    :func:`lower_bound_box` (Prop. 1 = Thm 4), :func:`lower_bound_ball` (Thm 5),
    :func:`prop2_bound` (Prop. 2); the worst-case risks of concrete private mechanisms that bound
    the same minimax quantities from above: :func:`sign_mechanism_risk` (Prop. 1, Thm 4),
    :func:`ball_mechanism_risk` (Thm 5, Prop. 2).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from dpsim.privacy.tcdp import check_epsilon_delta
from dpsim.analysis._validate import out as _ret
from dpsim.analysis._validate import real, require as _require

__all__ = [
    "lemma31_steps",
    "lemma31_constant",
    "lemma31_epsilon",
    "gaussian_epsilon",
    "gaussian_mu",
    "lower_bound_box",
    "lower_bound_ball",
    "prop2_bound",
    "sign_mechanism_risk",
    "ball_mechanism_risk",
]


# ------------------------------------------------------------------------------------------------
# validation helpers (built on dpsim.analysis._validate; shared with dpsim.analysis.moments)




def _arr(name: str, x) -> np.ndarray:
    return real(name, x, finite=False)


def _positive_vec(name: str, x) -> np.ndarray:
    a = _arr(name, x)
    if a.ndim == 0 or a.shape[-1] == 0:
        raise ValueError(f"{name} must have a last axis of d >= 1 coordinates, got shape {a.shape}")
    if np.any(~np.isfinite(a) | (a <= 0)):
        pos = tuple(int(i) for i in np.argwhere(~np.isfinite(a) | (a <= 0))[0])
        raise ValueError(f"{name} must be positive and finite, got {name}{list(pos)}={float(a[pos])!r}")
    return a


def _pos(name, x, *, integer=False, allow_zero=False):
    a = _arr(name, x)
    ok = np.isfinite(a) & ((a >= 0) if allow_zero else (a > 0))
    if integer:
        ok &= a == np.floor(a)
    kind = "a positive integer" if integer else ("non-negative and finite" if allow_zero
                                                 else "positive and finite")
    _require(ok, name + " must be " + kind + ", got " + name + "={v}", v=a)
    return a


def _sigma_sums(sigma):
    s = _positive_vec("sigma", sigma)
    return s, s.shape[-1], np.sum(s ** (2.0 / 3.0), axis=-1) ** 1.5, np.sum(s, axis=-1)


# ------------------------------------------------------------------------------------------------
# Lemma 3.1 (privacy of PASAN / PAGAN with T = c n²/b²)


def _lemma31_curve(epsilon, delta, n, batch_size):
    """``(orders, ε_step(α), g(α))`` for Lemma 3.1's noise ``σ = √log(1/δ)/ε`` at ``q = b/n``:
    the Rényi curve of one Poisson-subsampled Gaussian step (add/remove;
    :func:`dpsim.accounting.rdp_curve`) and the conversion offset of :func:`_rdp_offset`."""
    eps, dlt = check_epsilon_delta(epsilon, delta)
    nn = int(_pos("n", n, integer=True))
    b = int(_pos("batch_size", batch_size, integer=True))
    _require(b <= nn, "batch_size must not exceed n, got batch_size={b} > n={n}", b=b, n=nn)
    orders, rdp = _step_rdp(math.sqrt(math.log(1.0 / float(dlt))) / float(eps), b / nn)
    return orders, rdp, _rdp_offset(orders, float(dlt))


@functools.lru_cache(maxsize=256)
def _step_rdp(sigma: float, q: float):
    """RDP orders and one step's Rényi divergence bounds (read-only arrays; cached, since the
    Lemma 3.1 row asks for each curve twice)."""
    from dpsim.accounting import rdp_curve

    orders, rdp = rdp_curve([(sigma, 1)], q)
    orders = np.array(orders, dtype=float)
    rdp = np.array(rdp, dtype=float)
    orders.flags.writeable = False
    rdp.flags.writeable = False
    return orders, rdp


def _rdp_offset(orders, delta):
    """``g(α) = log((α−1)/α) − (log δ + log α)/(α − 1)``: a mechanism with Rényi divergence ``ε_α``
    at order ``α > 1`` is ``(ε_α + g(α), δ)``-DP (Canonne, Kamath & Steinke 2020, Prop. 12; the
    conversion of ``dpsim.accounting``'s ``"rdp"`` accountant)."""
    a = np.asarray(orders, dtype=float)
    return np.log((a - 1.0) / a) - (math.log(delta) + np.log(a)) / (a - 1.0)


def lemma31_steps(epsilon, delta, n, batch_size) -> int:
    """Largest step count ``T`` at which Lemma 3.1's noise keeps PASAN/PAGAN ``(ε, δ)``-DP.

    [PAGAN] Lemma 3.1: there are constants ``ε̄`` and ``c`` such that for every ``ε ≤ ε̄``,
    Algorithms 1–2 with noise ``√log(1/δ)/(bε)`` on the mean of ``b`` clipped gradients (dpsim's
    noise multiplier ``σ = √log(1/δ)/ε``) and ``T = c n²/b²`` steps are ``(ε, δ)``-DP.  The paper
    gives neither constant (its proof, Appendix B.1, is not in the provided text).  This function
    computes the largest admissible ``T`` with an RDP accountant (Mironov, Talwar & Zhang 2019):
    ``T`` steps at rate ``q = b/n`` are ``(T ε_step(α) + g(α), δ)``-DP at every order ``α``
    (:func:`_rdp_offset`), so the largest ``T`` is

        T_max = ⌊ max_α (ε − g(α)) / ε_step(α) ⌋,

    the maximum over dpsim's RDP orders with ``ε_step(α) > 0``.  Accounting: Poisson sampling at
    rate ``b/n`` with add/remove neighbours stands in for the algorithms' uniform batches (no
    accountant covers batches drawn with replacement, ``dpsim.accounting``); RDP is accurate at
    any ``T`` (a PLD with a coarse grid is not at ``T ≈ 10⁵``).  Scalars only.
    """
    orders, rdp, g = _lemma31_curve(epsilon, delta, n, batch_size)
    eps = float(epsilon)
    ok = (orders > 1.0) & np.isfinite(rdp) & (rdp > 0) & (g < eps)
    if not ok.any():
        return 0
    return int(math.floor(float(np.max((eps - g[ok]) / rdp[ok]))))


def lemma31_constant(epsilon, delta, n, batch_size) -> float:
    """Lemma 3.1's ``c`` at one ``(ε, δ, n, b)``: ``c = T_max b²/n²`` with ``T_max`` from
    :func:`lemma31_steps`.  The lemma holds (for ``ε ≤ ε̄``) iff ``inf_n c(ε, δ, n, b) > 0``."""
    T = lemma31_steps(epsilon, delta, n, batch_size)
    return T * float(batch_size) ** 2 / float(n) ** 2


def lemma31_epsilon(c, epsilon, delta, n, batch_size) -> float:
    """Accounted ε of PASAN/PAGAN run with Lemma 3.1's noise (``σ = √log(1/δ)/ε``) for
    ``T = ⌊c n²/b²⌋`` steps: ``min_α T ε_step(α) + g(α)`` (clipped at 0), the RDP accountant of
    :func:`lemma31_steps`.  Lemma 3.1 claims this is ``≤ ε`` for one ``c`` and every ``n``."""
    cc = float(_pos("c", c))
    orders, rdp, g = _lemma31_curve(epsilon, delta, n, batch_size)
    # ⌊c n²/b²⌋, with a relative guard so that c = T b²/n² gives back T despite rounding
    T = math.floor(cc * float(n) ** 2 / float(batch_size) ** 2 * (1.0 + 1e-12))
    ok = (orders > 1.0) & np.isfinite(rdp)
    if T < 1:
        return 0.0
    return max(0.0, float(np.min(T * rdp[ok] + g[ok])))


# ------------------------------------------------------------------------------------------------
# Exact (ε, δ) of a μ-GDP Gaussian mechanism


def _gaussian_delta(e, mu):
    """``δ(ε)`` of a ``μ``-GDP Gaussian mechanism: ``Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)``."""
    from scipy.special import log_ndtr, ndtr

    return float(ndtr(-e / mu + mu / 2) - math.exp(e + log_ndtr(-e / mu - mu / 2)))


def gaussian_epsilon(mu, delta):
    """Exact ε of a ``μ``-GDP Gaussian mechanism at δ (Balle & Wang 2018, Dong–Roth–Su 2022)::

        δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)

    solved for ``ε ≥ 0`` (``0`` when ``δ(0) ≤ δ``).  Vectorized.
    """
    from scipy.optimize import brentq

    m = _pos("mu", mu)
    dl = _arr("delta", delta)
    _require((dl > 0) & (dl < 1), "delta must be in (0, 1), got delta={delta}", delta=dl)
    m, dl = np.broadcast_arrays(m, dl)
    out = np.empty(m.shape)
    for idx in np.ndindex(*m.shape):
        mu_, d_ = float(m[idx]), float(dl[idx])

        def f(e, mu_=mu_, d_=d_):
            return _gaussian_delta(e, mu_) - d_

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

    eps, dlt = check_epsilon_delta(epsilon, delta)
    eps, dlt = np.broadcast_arrays(eps, dlt)
    out = np.empty(eps.shape)
    for idx in np.ndindex(*eps.shape):
        e, d_ = float(eps[idx]), float(dlt[idx])

        def f(mu_, e=e, d_=d_):
            return _gaussian_delta(e, mu_) - d_

        hi = 1.0
        while f(hi) < 0:
            hi *= 2.0
        out[idx] = brentq(f, 1e-8, hi, xtol=1e-14, rtol=1e-13)
    return _ret(out)


# ------------------------------------------------------------------------------------------------
# Lower bounds (§5)


def lower_bound_box(sigma, n, epsilon):
    """Proposition 1 / Theorem 4 (ℓ∞ box, linear losses): for every (ε, δ)-DP ``M``::

        sup_{S ∈ Z^n} E[f(M(S); S) − f(x*_S; S)]  ≥  (Σ_j σ_j^{2/3})^{3/2} / (nε log^{5/2} d)

    Source: [PAGAN] Prop. 1 (sign estimation; the same quantity bounds
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

    Source: [PAGAN] Thm 5 (``f(x; S) = −xᵀz̄`` on the unit ℓ2 ball, ``Z = {|z_j| ≤ σ_j}``).
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

    Source: [PAGAN] Prop. 2 (the extracted text reads "min σ√d, √dσ/(nε)" with the ``√`` of the
    second entry displaced; ``dσ/(nε)`` is the rescaling of Bassily et al.'s
    ``Ω(min{1, √d/(nε)})`` by the ℓ2 radius ``σ√d`` of ``Z`` **(reconstructed)**).  Printed
    without an explicit constant.  Vectorized over all arguments.
    """
    s = _pos("sigma", sigma)
    dd = _pos("d", d, integer=True)
    nn = _pos("n", n)
    eps = _pos("epsilon", epsilon)
    return _ret(np.minimum(s * np.sqrt(dd), dd * s / (nn * eps)))


# ------------------------------------------------------------------------------------------------
# Worst-case risks of concrete private mechanisms (upper bounds on the minimax risks of §5)


def _sign_error_peak() -> tuple[float, float]:
    """``(u*, h(u*))``: the maximizer and maximum of ``h(u) = u Φ(−u)`` on ``u ≥ 0`` (the root of
    ``Φ(−u) = u φ(u)``, ``u* ≈ 0.7518``)."""
    from scipy.optimize import brentq
    from scipy.special import ndtr

    def dh(u):
        return float(ndtr(-u)) - u * math.exp(-0.5 * u * u) / math.sqrt(2.0 * math.pi)

    u = brentq(dh, 0.1, 3.0, xtol=1e-15, rtol=1e-15)
    return u, u * float(ndtr(-u))


def sign_mechanism_risk(sigma, n, epsilon, delta):
    """Worst case over the data sets of Proposition 1 of the sign error of a Gaussian mechanism.

    Mechanism: ``M = z̄ + N(0, diag s²)`` with ``s_j = λ σ_j^{2/3}`` and
    ``λ = 2 √(Σ_j σ_j^{2/3}) / (n μ)``, ``μ`` = :func:`gaussian_mu` ``(ε, δ)``.  Replacing one
    ``z_i ∈ Z = {|z_j| ≤ σ_j}`` moves ``z̄_j`` by at most ``2σ_j/n``, so ``M`` is ``μ``-GDP, hence
    ``(ε, δ)``-DP (replace-one, the paper's relation).  For ``z̄_j = a_j`` (any ``|a_j| ≤ σ_j`` is
    the mean of a data set in ``Z^n``) ``E |z̄_j| 1{sign M_j ≠ sign z̄_j} = |a_j| Φ(−|a_j|/s_j)``,
    so the supremum over data sets of the left side of [PAGAN] Prop. 1 is, coordinate by
    coordinate,

        U = Σ_j s_j h(min(σ_j/s_j, u*)),   h(u) = u Φ(−u),   u* = argmax h ≈ 0.7518.

    ``U`` bounds the minimax quantity of Prop. 1 from above (this mechanism is one of the ``M``
    the supremum ranges over); the allocation ``s_j ∝ σ_j^{2/3}`` minimizes ``Σ_j s_j`` at fixed
    ``μ``, which gives Prop. 1's ``(Σ_j σ_j^{2/3})^{3/2}``.  ``sigma``: ``(d,)``; scalars otherwise.
    """
    s = _positive_vec("sigma", sigma)
    if s.ndim != 1:
        raise ValueError(f"sigma must have shape (d,), got shape {s.shape}")
    nn = float(_pos("n", n))
    mu = float(gaussian_mu(epsilon, delta))
    s23 = s ** (2.0 / 3.0)
    noise = 2.0 * math.sqrt(float(np.sum(s23))) / (nn * mu) * s23
    from scipy.special import ndtr

    ustar, _ = _sign_error_peak()
    u = np.minimum(s / noise, ustar)
    return float(np.sum(noise * u * ndtr(-u)))


def _mean_cosine(kappa, d):
    """``E cos∠(ẑ, z̄)`` for ``ẑ ~ N(z̄, s² I_d)`` with ``κ = ||z̄||/s`` (the mean resultant length
    of the projected normal)::

        m(κ, d) = (κ/√2) Γ((d+1)/2)/Γ(d/2 + 1) · ₁F₁(1/2; d/2 + 1; −κ²/2)

    (``d = 1``: ``erf(κ/√2)``; ``d = 2``: ``√(π/2) (κ/2) e^{−κ²/4} (I₀(κ²/4) + I₁(κ²/4))``;
    ``m → 1`` as ``κ → ∞``).  Vectorized over ``kappa``."""
    from scipy.special import gammaln, hyp1f1

    k = np.asarray(kappa, dtype=float)
    c = math.exp(gammaln((d + 1) / 2.0) - gammaln(d / 2.0 + 1.0)) / math.sqrt(2.0)
    return c * k * hyp1f1(0.5, d / 2.0 + 1.0, -0.5 * k * k)


def ball_mechanism_risk(sigma, n, epsilon, delta):
    """Worst case over the data sets of Theorem 5 of the excess loss of a Gaussian mechanism on
    the unit ℓ2 ball.

    Problem ([PAGAN] §5.2): ``f(x; S) = −xᵀz̄`` on ``X₂ = {||x||₂ ≤ 1}``, ``z_i ∈ Z =
    {|z_j| ≤ σ_j}``, ``f(x; S) − f(x*_S; S) = ||z̄|| − xᵀz̄``.  Mechanism: ``ẑ = z̄ + N(0, s² I)``
    with ``s = 2||σ||₂/(n μ)`` (replace-one ℓ2 sensitivity ``2||σ||₂/n``; ``μ`` =
    :func:`gaussian_mu` ``(ε, δ)``), then ``x = ẑ/||ẑ||``.  The risk depends on ``z̄`` only through
    ``r = ||z̄|| ∈ [0, ||σ||₂]`` (rotation invariance), and equals ``r (1 − m(r/s, d))`` with ``m``
    of :func:`_mean_cosine`, so the supremum over data sets is

        U = s · max_{0 ≤ κ ≤ ||σ||₂/s} κ (1 − m(κ, d)),

    found on a geometric grid of 4001 points in ``(0, ||σ||₂/s]`` refined by bounded Brent.
    ``U`` bounds the minimax risk of Thm 5 (and, with ``σ_j ≡ σ``, of Prop. 2) from above.
    ``sigma``: ``(d,)``.
    """
    from scipy.optimize import minimize_scalar

    s = _positive_vec("sigma", sigma)
    if s.ndim != 1:
        raise ValueError(f"sigma must have shape (d,), got shape {s.shape}")
    d = s.size
    nn = float(_pos("n", n))
    mu = float(gaussian_mu(epsilon, delta))
    norm = float(np.sqrt(np.sum(s * s)))
    noise = 2.0 * norm / (nn * mu)
    top = norm / noise

    def risk(k):
        return k * (1.0 - _mean_cosine(k, d))

    grid = np.concatenate(([0.0], np.geomspace(min(1e-4, top), top, 4001)))
    vals = risk(grid)
    i = int(np.argmax(vals))
    best = float(vals[i])
    lo, hi = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, grid.size - 1)])
    if hi > lo:
        res = minimize_scalar(lambda k: -float(risk(k)), bounds=(lo, hi), method="bounded",
                              options={"xatol": 1e-12 * max(1.0, hi)})
        best = max(best, -float(res.fun))
    return noise * best
