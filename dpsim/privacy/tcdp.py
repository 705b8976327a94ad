"""Truncated concentrated differential privacy (tCDP) and its constrained form ctCDP.

The project's own code (no privacy library implements tCDP or ctCDP).  Source, cited as
[L2P]: Hong, Wang, Wang, Zhou, *Learning Model-Based Privacy Protection under Budget
Constraints* (AAAI 2021), Appendix A (privacy metric) and Algorithm 3 (budget initialization).
The tCDP results it restates are from Bun, Dwork, Rothblum, Steinke, *Composable and Versatile
Privacy via Truncated CDP* (STOC 2018).

Contract
--------
* **Definitions.**  A mechanism is ``(ρ, ω)``-tCDP if ``D_α(M(x) ‖ M(x')) ≤ ρα`` for all
  ``α ∈ (1, ω)`` and all neighbouring ``x, x'`` ([L2P] Def. A.2).  With
  ``a = log(1/δ)/ε`` ([L2P] Def. 3.1 / App. A.2)::

      ω_a = (1 + a) + √(a(a+1)),
      ρ_a = ε √(a(a+1)) / (((1+a) + √(a(a+1))) (a + √(a(a+1)))) = ε / (√a + √(a+1))²,

  and ``(ρ, a)``-ctCDP is ``(ρ, ω_a)``-tCDP (Lemma A.2).  ``ρ_a`` is the largest ρ for which
  ``(ρ, ω_a)``-tCDP implies ``(ε, δ)``-DP (Lemma A.1); it solves ``ε = ρ + 2√(ρ log(1/δ))`` and
  ``ω_a`` is the admissible root ``ω > 1`` of ``log(1/δ) = (ω − 1)² ρ_a``.
* **Neighbouring relation.**  [L2P] (footnote 4) calls datasets adjacent when they differ in
  at most one entry, and the subsampling theorem it uses (Thm A.3 = Bun et al. 2018, fixed-size
  subsets of a fixed-size dataset) is a statement about datasets of equal size that differ in one
  entry: **replace-one** (substitution).  Lemma A.3's proof, however, *removes* an example.  Both
  relations are available where it matters (:func:`norm_sq_sensitivity`); budget-constrained
  training (:mod:`dpsim.optimizers.ctcdp`) uses replace-one throughout, the relation Thm A.3 needs.
* **Vectorization.**  Every function takes scalars or NumPy arrays (broadcast together) and
  returns a float for all-scalar input, else an array of the broadcast shape.  Values outside a
  result's assumptions raise ``ValueError`` naming the value (the first offending element).

Where [L2P] and ``ALGORITHMS.md`` (§2.7, §4.4) differ, or the paper is internally
inconsistent, the paper's proven statement is followed and the choice is documented in the
function concerned (:func:`subsample`, :func:`init_budget`, :func:`ctcdp_to_dp`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "rho_a",
    "omega_a",
    "omega_of_a",
    "tcdp_to_dp",
    "ctcdp_to_dp",
    "gaussian_zcdp",
    "subsample",
    "subsample_conditions",
    "norm_sq_sensitivity",
    "compose",
    "init_budget",
    "check_epsilon_delta",
    "SUBSAMPLE_FACTOR",
    "MAX_RATE",
]

#: The constant of Thm A.3 / Lemma A.6: subsampling at rate q turns ρ-zCDP into (13 q² ρ)-tCDP.
SUBSAMPLE_FACTOR = 13.0
#: Lemma A.6 / Thm A.3 assume ρ, q ∈ (0, 0.1].
MAX_RATE = 0.1


# ---------------------------------------------------------------------------------------------
# helpers


def _arr(name: str, x) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number or an array of reals, got {name}={x!r}") from None
    if np.any(np.isnan(a)):
        raise ValueError(f"{name} must not be NaN, got {name}={x!r}")
    return a


def _first_bad(a: np.ndarray, bad: np.ndarray):
    a = np.broadcast_to(a, bad.shape)
    return a[bad].flat[0]


def _require(cond, msg: str, **values) -> None:
    """Raise ``ValueError(msg)`` formatted with the first element where ``cond`` is False."""
    cond = np.asarray(cond)
    if cond.all():
        return
    bad = ~np.broadcast_to(cond, np.broadcast_shapes(cond.shape, *(np.shape(v) for v in values.values())))
    shown = {k: _nice(float(_first_bad(np.asarray(v, dtype=float), bad))) for k, v in values.items()}
    raise ValueError(msg.format(**shown))


def _nice(v: float):
    return int(v) if v.is_integer() and abs(v) < 1e15 else v


def _ret(x):
    x = np.asarray(x)
    return float(x) if x.ndim == 0 else x


def _log1_over(delta: np.ndarray) -> np.ndarray:
    return -np.log(delta)


def check_epsilon_delta(epsilon, delta):
    """Validate a DP target: ``epsilon`` positive and finite, ``delta`` in (0, 1) (arrays allowed);
    returns them as float arrays.  ``ValueError`` naming the offending value otherwise.

    Parameters
    ----------
    epsilon : float or array
        ε of the target, positive and finite.
    delta : float or array
        δ of the target, in (0, 1).

    Returns
    -------
    tuple of ndarray
        ``(epsilon, delta)`` as float arrays.

    Raises
    ------
    ValueError
        Naming the first offending value.
    """
    eps = _arr("epsilon", epsilon)
    dlt = _arr("delta", delta)
    _require((eps > 0) & np.isfinite(eps), "epsilon must be positive and finite, got epsilon={epsilon}",
             epsilon=eps)
    _require((dlt > 0) & (dlt < 1), "delta must be in (0, 1), got delta={delta}", delta=dlt)
    return eps, dlt


# ---------------------------------------------------------------------------------------------
# ε, δ  <->  (ρ_a, ω_a)


def omega_of_a(a):
    """``ω_a = (1 + a) + √(a(a+1))`` for ``a > 0`` ([L2P] Def. 3.1, App. A.2).

    ``a`` may be ``inf`` (then ``ω_a = inf``).  Raises ``ValueError`` for ``a ≤ 0``.

    Parameters
    ----------
    a : float or array
        ``a = log(1/δ)/ε`` > 0, ``inf`` allowed.

    Returns
    -------
    float or ndarray
        ``ω_a``.
    """
    a = _arr("a", a)
    _require(a > 0, "a must be positive (a = log(1/delta)/epsilon), got a={a}", a=a)
    with np.errstate(invalid="ignore", over="ignore"):
        out = (1.0 + a) + np.sqrt(a * (a + 1.0))
    return _ret(out)


def omega_a(epsilon, delta):
    """Truncation order of the (ε, δ) budget: ``ω_a = (1 + a) + √(a(a+1))``, ``a = log(1/δ)/ε``.

    Source: [L2P] (Hong et al., *Learning Model-Based Privacy Protection under Budget
    Constraints*), Definition 3.1 and App. A.2 (the larger root of ``ω = (ω−1)(ω−(a+1))``, the only
    one with ``ω ≥ a + 1``).  Assumes ``ε > 0`` finite and ``δ ∈ (0, 1)``.

    Parameters
    ----------
    epsilon : float or array
        ε of the budget.
    delta : float or array
        δ of the budget.

    Returns
    -------
    float or ndarray
        The truncation order ``ω_a``.
    """
    eps, dlt = check_epsilon_delta(epsilon, delta)
    return omega_of_a(_log1_over(dlt) / eps)


def rho_a(epsilon, delta):
    """Largest ρ with ``(ρ, ω_a)``-tCDP ⇒ ``(ε, δ)``-DP ([L2P] Eq. (12), Lemma A.1).

    ::

        ρ_a = ε √(a(a+1)) / (((1+a) + √(a(a+1))) (a + √(a(a+1)))),   a = log(1/δ)/ε
            = ε / (√a + √(a+1))²                        (the same number, computed this way)
            = (√(log(1/δ) + ε) − √log(1/δ))²            (the root of ε = ρ + 2√(ρ log(1/δ)))

    Writing ``u = √a``, ``v = √(a+1)``: ``√(a(a+1)) = uv``, ``1+a+uv = v(u+v)``, ``a+uv = u(u+v)``,
    so the paper's fraction is ``ε uv / (uv (u+v)²)``.  Source: [L2P], App. A.2 Eq. (12).
    Assumes ``ε > 0`` finite, ``δ ∈ (0, 1)``.

    Parameters
    ----------
    epsilon : float or array
        ε of the budget.
    delta : float or array
        δ of the budget.

    Returns
    -------
    float or ndarray
        ``ρ_a``, the total ctCDP budget of an (ε, δ) target.

    Examples
    --------
    >>> from dpsim.privacy import tcdp
    >>> round(float(tcdp.rho_a(1.0, 1e-5)), 5), round(float(tcdp.omega_a(1.0, 1e-5)), 3)
    (0.02082, 24.515)
    """
    eps, dlt = check_epsilon_delta(epsilon, delta)
    a = _log1_over(dlt) / eps
    return _ret(eps / (np.sqrt(a) + np.sqrt(a + 1.0)) ** 2)


# ---------------------------------------------------------------------------------------------
# conversions to (ε, δ)-DP


def tcdp_to_dp(rho, omega, delta):
    """ε such that ``(ρ, ω)``-tCDP implies ``(ε, δ)``-DP ([L2P] Theorem A.1).

    ::

        ε = ρ + 2√(ρ log(1/δ))            if log(1/δ) ≤ (ω − 1)² ρ
        ε = ρ ω + log(1/δ) / (ω − 1)      if log(1/δ) ≥ (ω − 1)² ρ

    This is ``min_{1 < α ≤ ω} ρα + log(1/δ)/(α − 1)`` (the standard Rényi-DP → DP conversion,
    Mironov 2017 Prop. 3, minimized over the admissible orders): the unconstrained minimizer
    ``α* = 1 + √(log(1/δ)/ρ)`` gives the first branch when ``α* ≤ ω``, otherwise ``α = ω``
    (admissible: Rényi divergence is non-decreasing and left-continuous in α).  Source: [L2P]
    Thm A.1 (Bun et al. 2018).

    Assumptions: ``ρ ≥ 0``, ``ω > 1`` (``inf`` allowed: ρ-zCDP), ``δ ∈ (0, 1)``.  ``ρ = 0`` returns
    ``ε = 0``: ``D_α = 0`` for some ``α > 1`` means the output distributions are equal (the
    formula, which needs ``ρ > 0``, would give ``log(1/δ)/(ω−1)`` there).

    Parameters
    ----------
    rho : float or array
        ρ ≥ 0 of the tCDP guarantee.
    omega : float or array
        Truncation ω > 1 (``inf``: ρ-zCDP).
    delta : float or array
        The δ to convert at, in (0, 1).

    Returns
    -------
    float or ndarray
        ε.
    """
    rho = _arr("rho", rho)
    om = _arr("omega", omega)
    dlt = _arr("delta", delta)
    _require((rho >= 0) & np.isfinite(rho), "rho must be non-negative and finite, got rho={rho}", rho=rho)
    _require(om > 1, "omega must be > 1, got omega={omega}", omega=om)
    _require((dlt > 0) & (dlt < 1), "delta must be in (0, 1), got delta={delta}", delta=dlt)
    L = _log1_over(dlt)
    rho, om, L = np.broadcast_arrays(rho, om, L)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        first = rho + 2.0 * np.sqrt(rho * L)
        second = rho * om + L / (om - 1.0)
        use_first = np.isinf(om) | (L <= (om - 1.0) ** 2 * rho)
        out = np.where(use_first, first, second)
    out = np.where(rho == 0, 0.0, out)
    return _ret(out)


def ctcdp_to_dp(rho, a):
    """(ε, δ) implied by ``(ρ, a)``-ctCDP ([L2P] Lemma A.7).

    ::

        ε = (ω_a − 1) ω_a / (ω_a − a − 1) · ρ   (= (√a + √(a+1))² ρ),     δ = exp(−a ε)

    Proof sketch (why it holds): ``(ρ, a)``-ctCDP is ``(ρ, ω_a)``-tCDP; Thm A.1 at ``α = ω_a`` gives
    ``ε = ρω_a + log(1/δ)/(ω_a − 1)``, and ``log(1/δ) = aε`` solves to the formula above.  It is the
    point of the (ε, δ) curve of :func:`tcdp_to_dp` at which the truncation is exactly tight
    (``log(1/δ) = (ω_a − 1)² ρ``).  [L2P] states it for ``0 < ρ ≤ ρ_a`` (that range only ensures
    ``ε`` is at most the budget's ε; the implication itself holds for every ``ρ > 0``) and writes
    "(ε, δ)-tCDP" in the conclusion, a typo for (ε, δ)-DP.  Note ``δ`` is *not* the budget's δ
    unless ``ρ = ρ_a``: a smaller ρ gives a smaller ε and a *larger* δ.

    Assumptions: ``ρ ≥ 0`` finite, ``a > 0`` finite.  Returns ``(epsilon, delta)``.

    Parameters
    ----------
    rho : float or array
        ρ ≥ 0 of the ctCDP guarantee.
    a : float or array
        ``a`` > 0 of the ctCDP guarantee.

    Returns
    -------
    tuple
        ``(epsilon, delta)``.
    """
    rho = _arr("rho", rho)
    a = _arr("a", a)
    _require((rho >= 0) & np.isfinite(rho), "rho must be non-negative and finite, got rho={rho}", rho=rho)
    _require((a > 0) & np.isfinite(a), "a must be positive and finite, got a={a}", a=a)
    s = np.sqrt(a * (a + 1.0))
    om = (1.0 + a) + s
    eps = (om - 1.0) * om / s * rho  # ω_a − a − 1 = √(a(a+1)), computed without cancellation
    return _ret(eps), _ret(np.exp(-a * eps))


# ---------------------------------------------------------------------------------------------
# mechanisms, sensitivity, composition


def gaussian_zcdp(sensitivity, sigma):
    """ρ of the Gaussian mechanism ``f(x) + N(0, σ² I)``: ``ρ = Δ² / (2σ²)``-zCDP.

    Source: [L2P] Lemma A.5 (Bun and Steinke 2016, Prop. 1.6); the ℓ2 sensitivity ``Δ`` is
    taken under whichever neighbouring relation the caller uses.  ρ-zCDP is ``(ρ, ∞)``-tCDP.
    Assumptions: ``Δ ≥ 0`` finite, ``σ > 0`` (``σ = inf`` gives 0).

    Parameters
    ----------
    sensitivity : float or array
        ℓ2 sensitivity Δ ≥ 0.
    sigma : float or array
        Noise standard deviation σ > 0.

    Returns
    -------
    float or ndarray
        ``ρ = Δ²/(2σ²)``.

    Examples
    --------
    >>> from dpsim.privacy.tcdp import gaussian_zcdp
    >>> gaussian_zcdp(2.0, 4.0)
    0.125
    """
    d = _arr("sensitivity", sensitivity)
    s = _arr("sigma", sigma)
    _require((d >= 0) & np.isfinite(d), "sensitivity must be non-negative and finite, got "
             "sensitivity={sensitivity}", sensitivity=d)
    _require(s > 0, "sigma must be positive, got sigma={sigma}", sigma=s)
    return _ret(d * d / (2.0 * s * s))


def norm_sq_sensitivity(batch_size, clip, *, adjacency="remove"):
    """ℓ2 sensitivity of ``‖Σ_{i∈D_t} clip(g_i, C)‖²`` (the squared norm of a clipped-gradient sum).

    * ``adjacency="remove"`` ([L2P] Lemma A.3, as proved there by removing the m-th example from
      a batch of size ``|D_t| = b``): ``(2b − 1) C²``.  Indeed
      ``‖S‖² − ‖S − g_m‖² = (2S − g_m)ᵀ g_m = (2R + g_m)ᵀ g_m`` with ``R`` a sum of ``b − 1`` terms.
    * ``adjacency="replace"`` (one example of a size-``b`` batch substituted, the relation of the
      fixed-size subsampling theorem): ``‖R + g'‖² − ‖R + g‖² = 2Rᵀ(g' − g) + ‖g'‖² − ‖g‖²`` is at
      most ``4(b − 1) C²`` for ``b ≥ 2`` (``g' = −g`` along ``R``) and ``C²`` for ``b = 1``, i.e.
      ``max(4(b − 1), 1) C²``.  [L2P] does not state this case; it is derived here.

    Assumptions: ``b`` a positive integer, ``C > 0`` finite.

    Parameters
    ----------
    batch_size : int or array
        The batch size ``b`` ≥ 1.
    clip : float or array
        The clipping norm ``C`` > 0, finite.
    adjacency : {'remove', 'replace'}
        The neighbouring relation.

    Returns
    -------
    float or ndarray
        ``(2b − 1) C²`` (remove) or ``max(4(b − 1), 1) C²`` (replace).
    """
    b = _arr("batch_size", batch_size)
    c = _arr("clip", clip)
    _require((b >= 1) & (b == np.floor(b)) & np.isfinite(b),
             "batch_size must be a positive integer, got batch_size={batch_size}", batch_size=b)
    _require((c > 0) & np.isfinite(c), "clip must be positive and finite, got clip={clip}", clip=c)
    if adjacency == "remove":
        return _ret((2.0 * b - 1.0) * c * c)
    if adjacency == "replace":
        return _ret(np.maximum(4.0 * (b - 1.0), 1.0) * c * c)
    raise ValueError(f"adjacency must be 'remove' or 'replace', got adjacency={adjacency!r}")


def compose(rhos, axis=None):
    """ρ of the adaptive composition of ``(ρ_i, a)``-ctCDP mechanisms: ``Σ_i ρ_i`` (same ``a``).

    Source: [L2P] Lemma A.4 (composition and post-processing; linear in ρ at fixed ω_a, from
    tCDP composition, Bun et al. 2018).  ``rhos`` is an array of non-negative ρ's summed over
    ``axis`` (default: all of them).  Mechanisms with different ``a`` do not compose this way.

    Parameters
    ----------
    rhos : array_like
        Non-negative ρ's.
    axis : int, optional
        The axis summed over (default: all).

    Returns
    -------
    float or numpy.ndarray
        ``Σ ρ_i``.
    """
    r = _arr("rhos", rhos)
    _require((r >= 0) & np.isfinite(r), "each rho must be non-negative and finite, got rho={rho}", rho=r)
    return _ret(np.sum(r, axis=axis))


# ---------------------------------------------------------------------------------------------
# subsampling


def subsample_conditions(rho, q, a, *, rho_tot=None) -> dict:
    """Check the hypotheses of [L2P] Lemma A.6 / Theorem A.3 for inner ρ-zCDP at rate q.

    Returns ``{name: {"ok": bool array, "lhs": ..., "rhs": ..., "text": str}}`` with entries

    * ``"q_range"``:   ``0 < q ≤ 0.1``                     (hypothesis of Lemma A.6 / Thm A.3)
    * ``"rho_range"``: ``0 < ρ ≤ 0.1``                     (hypothesis of Lemma A.6 / Thm A.3)
    * ``"(9)"``:       ``log(1/q) ≥ 3ρ(2 + log₂(1/ρ))``
    * ``"(10a)"``:     ``ρ ≤ log(1/q) / (4 ω_a)``          (first term of (10); gives ω_a ≤ ω'')
    * ``"(10b)"``:     ``13 q² ρ ≤ ρ_tot``                 (second term of (10); only when
      ``rho_tot`` — the ctCDP budget ρ_a — is given)
    * ``"(13)"``:      ``ρ ≤ log(1/q) / 6``                (Thm A.3's ``ω' ≥ log(1/q)/(2ρ) ≥ 3``
      for a zCDP inner mechanism, ``ω' = ∞``; implied by (10a) when ``ω_a ≥ 1.5``)

    Lemma A.6 writes (10) with a strict ``<``; its proof (Thm A.3 plus ``ω_a ≤ ω'' =
    log(1/q)/(4ρ)``) and Eq. (13) only need ``≤``, which is what is checked.  ``ρ = 0`` (nothing
    released) satisfies everything.

    Parameters
    ----------
    rho : float or array
        ρ of the inner zCDP mechanism.
    q : float or array
        The sample rate.
    a : float or array
        ``a`` of the budget.
    rho_tot : float or array, optional
        The ctCDP budget ρ_a.

    Returns
    -------
    dict
        Name → ``{"ok", "lhs", "rhs", "text"}``.
    """
    rho = _arr("rho", rho)
    q = _arr("q", q)
    a = _arr("a", a)
    _require((a > 0) & np.isfinite(a), "a must be positive and finite, got a={a}", a=a)
    _require(np.isfinite(rho) & (rho >= 0), "rho must be non-negative and finite, got rho={rho}", rho=rho)
    _require(np.isfinite(q) & (q > 0) & (q <= 1), "q must be a sampling rate in (0, 1], got q={q}", q=q)
    om = (1.0 + a) + np.sqrt(a * (a + 1.0))
    logq = -np.log(q)
    zero = rho == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        c9 = 3.0 * rho * (2.0 + np.log2(1.0 / rho))
    c9 = np.where(zero, 0.0, c9)
    out = {
        "q_range": {"ok": q <= MAX_RATE, "lhs": q, "rhs": MAX_RATE, "text": "q <= 0.1"},
        "rho_range": {"ok": rho <= MAX_RATE, "lhs": rho, "rhs": MAX_RATE, "text": "rho <= 0.1"},
        "(9)": {"ok": zero | (logq >= c9), "lhs": logq, "rhs": c9,
                "text": "log(1/q) >= 3 rho (2 + log2(1/rho))"},
        "(10a)": {"ok": rho <= logq / (4.0 * om), "lhs": rho, "rhs": logq / (4.0 * om),
                  "text": "rho <= log(1/q) / (4 omega_a)"},
        "(13)": {"ok": rho <= logq / 6.0, "lhs": rho, "rhs": logq / 6.0,
                 "text": "rho <= log(1/q) / 6"},
    }
    if rho_tot is not None:
        rt = _arr("rho_tot", rho_tot)
        _require((rt > 0) & np.isfinite(rt), "rho_tot must be positive and finite, got rho_tot={rho_tot}",
                 rho_tot=rt)
        lhs = SUBSAMPLE_FACTOR * q * q * rho
        out["(10b)"] = {"ok": lhs <= rt, "lhs": lhs, "rhs": rt, "text": "13 q^2 rho <= rho_a"}
    shape = np.broadcast_shapes(rho.shape, q.shape, a.shape,
                                *(() if rho_tot is None else (np.shape(rho_tot),)))
    for v in out.values():
        v["ok"] = np.broadcast_to(np.asarray(v["ok"]), shape)
    return out


def _raise_failed(conds: dict, where: str, **context) -> None:
    for name, c in conds.items():
        ok = np.asarray(c["ok"])
        if not ok.all():
            bad = ~ok
            lhs = float(_first_bad(np.asarray(c["lhs"], dtype=float), bad))
            rhs = float(_first_bad(np.asarray(c["rhs"], dtype=float), bad))
            ctx = ", ".join(f"{k}={float(_first_bad(np.asarray(v, dtype=float), bad)):.6g}"
                            for k, v in context.items())
            raise ValueError(
                f"{where}: condition {name} of [L2P] Lemma A.6 / Thm A.3 fails: {c['text']} "
                f"is false ({lhs:.6g} vs {rhs:.6g}; {ctx})"
            )


def subsample(rho, q, a, *, rho_tot=None):
    """ρ' of a ρ-zCDP mechanism run on a uniformly random fixed-size subset: ``ρ' = 13 q² ρ``.

    [L2P] Lemma A.6 (from Thm A.3, Bun et al. 2018): if ``M`` is ρ-zCDP on datasets of size
    ``b`` and ``M_s(x) = M(x_S)`` for a uniformly random subset ``S ⊆ [n]``, ``|S| = b``,
    ``q = b/n``, then ``M_s`` is ``(13 q² ρ, a)``-ctCDP — provided the conditions listed in
    :func:`subsample_conditions` hold ((9), (10), (13) and ``ρ, q ∈ (0, 0.1]``).  Neighbouring
    datasets differ by **replacing** one entry (both have ``n`` entries), and ρ must be the inner
    mechanism's zCDP under that relation.

    Raises ``ValueError`` naming the failing condition and the values when any does not hold.
    ``rho_tot`` (the ctCDP budget ρ_a) enables the check of (10)'s second term.

    Parameters
    ----------
    rho : float or array
        ρ of the inner zCDP mechanism.
    q : float or array
        The sample rate.
    a : float or array
        ``a`` of the budget.
    rho_tot : float or array, optional
        The ctCDP budget ρ_a.

    Returns
    -------
    float or numpy.ndarray
        ``ρ' = 13 q² ρ``.
    """
    conds = subsample_conditions(rho, q, a, rho_tot=rho_tot)
    ctx = {"rho": rho, "q": q, "a": a}
    if rho_tot is not None:
        ctx["rho_tot"] = rho_tot
    _raise_failed(conds, "subsample", **ctx)
    rho = np.asarray(rho, dtype=float)
    q = np.asarray(q, dtype=float)
    return _ret(np.broadcast_to(SUBSAMPLE_FACTOR * q * q * rho,
                                np.broadcast_shapes(rho.shape, q.shape, np.shape(a))))


# ---------------------------------------------------------------------------------------------
# Algorithm 3: budget initialization


def _q_lower(c: np.ndarray) -> np.ndarray:
    """Smallest q in (0, e^{-1/2}] with ``q² log(1/q) ≥ c`` (``inf`` when none exists).

    ``q² log(1/q) = c`` ⇔ ``u log u = −2c`` with ``u = q²``; its smaller root is
    ``u = exp(W₋₁(−2c))`` (Lambert W, lower branch) — the "smaller solution" of Alg. 3 step 6.
    """
    from scipy.special import lambertw

    x = -2.0 * c
    ok = x >= -1.0 / math.e
    w = np.real(lambertw(np.where(ok, x, -0.1), k=-1))
    return np.where(c <= 0, 0.0, np.where(ok, np.exp(w / 2.0), np.inf))


def init_budget(epsilon, delta, steps, n, sensitivity, *, q=None, noise_norm=False) -> dict:
    """[L2P] Algorithm 3 (private learning initialization) for an (ε, δ)-DP budget.

    Steps (paper numbering), with ``T = steps``, ``Δ = sensitivity`` (ℓ2 sensitivity of the
    released gradient sum under replace-one adjacency, see :mod:`dpsim.optimizers.ctcdp`)::

        1  a = log(1/δ)/ε,  ρ_a, ω_a                      (Def. 3.1 / Lemma A.1)
        2  ρ_tot = ρ_a
        3  ρ'_0 = ρ_tot / T                              (uniform split, Lemma A.4)
        4  q_nominal = (√n + 10)/n                       (or the ``q`` given)
        5  ρ_0 = ρ'_0 / (13 q²)                          (inner zCDP per step, Lemma A.6)
        6  check (9), (10); if they fail re-estimate q   (see below)
        7  ρ_ub = min{log(1/q)/(4ω_a), log(1/q)/6, ρ_a/(13q²), 0.1}
        9  σ_g = Δ / √(2ρ_0)
        10 σ_min = Δ / √(2ρ_ub)
        11 |D_t| = ⌊q n⌋
        12 output ρ_tot, σ_g, σ_min, q, |D_t|

    Choices where the paper is loose (documented deviations):

    * **q is the realised rate.**  The batch is ``b = ⌊q n⌋`` and the subsampled mechanism's
      rate is ``b/n``, so ``q = b/n`` is used in steps 5–10 (the paper uses the un-floored rate,
      which makes each step spend less than ρ'_0 and leaves budget unspent).  ``q_nominal`` is
      the paper's value.
    * **Re-estimation (step 6).**  The feasible rates form an interval ``[q_lo, 0.1]``:
      (10a) and (13) read ``q² log(1/q) ≥ max(4ω_a, 6) ρ'_0/13`` whose boundary is the *smaller*
      root (Lambert W₋₁) of the paper's second step-6 equation; ``ρ_0 ≤ 0.1`` needs
      ``q ≥ √(ρ'_0/1.3)``; (9) then holds automatically (``3ρ(2 + log₂(1/ρ)) ≤ 1.6 < log 10`` for
      ``ρ ≤ 0.1``); (10b) is ``ρ'_0 ≤ ρ_a``, true for ``T ≥ 1``.  The paper's first step-6
      equation has ``ρ_tot/(13q²)`` in front where (9) has ``ρ_0 = ρ'_0/(13q²)``; (9) is used.
      If ``⌊q_nominal n⌋/n`` is outside the interval it is moved to the nearest feasible batch size
      (``⌊0.1 n⌋`` above, ``⌈q_lo n⌉`` below; ``q_adjusted`` says so).  A ``q`` given by the
      caller is checked, not moved.  The paper's rule ``(√n + 10)/n`` exceeds
      Lemma A.6's hypothesis ``q ≤ 0.1`` for ``n < 262`` (e.g. 0.296 for the n = 60 quadratic of
      App. C.1), so there ``b = ⌊0.1 n⌋``.  ``ValueError`` if no batch size is feasible.
    * **ρ_ub** (step 7 cites (10) only) also includes ``log(1/q)/6`` from (13) and Lemma A.6's
      hypothesis ``ρ ≤ 0.1``, so that any step with noise ``σ ≥ σ_min`` meets every condition.
    * ``noise_norm=True`` (a noised ‖gradient-sum‖² is released on every step too, [L2P]
      Thm B.1): ρ'_0 pays for both releases, each at inner cost ``ρ_0/2``, so the uniform schedule
      still makes ``T`` steps: ``σ_g = Δ/√ρ_0`` (the norm release uses noise multiplier
      ``σ_g/Δ`` relative to its own sensitivity) and ``σ_min = Δ/√(2(ρ_ub − ρ_0/2))``.  The paper's
      Algorithm 3 budgets the gradient release only.

    Returns a dict with the paper's outputs ``rho_tot, sigma_g, sigma_min, q, batch_size`` and
    ``epsilon, delta, a, omega_a, steps, n, sensitivity, rho_step (ρ'_0), rho_0, rho_ub,
    q_nominal, q_adjusted, noise_norm, noise_multiplier (σ_g/Δ), conditions`` (:func:`subsample_conditions`
    evaluated at ``(ρ_0, q)``; all true).  Inputs broadcast; array inputs give array outputs.

    Parameters
    ----------
    epsilon : float or array
        The budget's ε.
    delta : float or array
        The budget's δ.
    steps : int
        The planned ``T``.
    n : int
        Number of training examples.
    sensitivity : float or array
        The ℓ2 sensitivity Δ.
    q : float, optional
        Override of the nominal rate.
    noise_norm : bool
        Budget a noised squared norm per step too.

    Returns
    -------
    dict
        The plan: ``rho_tot, sigma_g, sigma_min, q, batch_size`` and the derived values.
    """
    eps, dlt, T, nn, D = _budget_inputs(epsilon, delta, steps, n, sensitivity, noise_norm)

    L = _log1_over(dlt)
    a = L / eps
    om = (1.0 + a) + np.sqrt(a * (a + 1.0))
    rho_tot = eps / (np.sqrt(a) + np.sqrt(a + 1.0)) ** 2
    rho_step = rho_tot / T

    q_nom = _nominal_rate(q, nn)
    b, b_nom = _feasible_batch(q, q_nom, nn, T, eps, dlt, om, rho_step)
    qq = b / nn
    rho_0 = rho_step / (SUBSAMPLE_FACTOR * qq * qq)
    conds = subsample_conditions(rho_0, qq, a, rho_tot=rho_tot)
    _raise_failed(conds, "init_budget", rho_0=rho_0, q=qq, a=a, n=nn, steps=T)

    logq = -np.log(qq)
    rho_ub = np.minimum.reduce([logq / (4.0 * om), logq / 6.0,
                                rho_tot / (SUBSAMPLE_FACTOR * qq * qq), np.full_like(qq, MAX_RATE)])
    if noise_norm:
        sigma_g = D / np.sqrt(rho_0)
        sigma_min = D / np.sqrt(2.0 * (rho_ub - rho_0 / 2.0))
    else:
        sigma_g = D / np.sqrt(2.0 * rho_0)
        sigma_min = D / np.sqrt(2.0 * rho_ub)
    return _budget_plan(rho_tot=rho_tot, sigma_g=sigma_g, sigma_min=sigma_min, qq=qq, b=b, eps=eps,
                        dlt=dlt, a=a, om=om, T=T, nn=nn, D=D, rho_step=rho_step, rho_0=rho_0,
                        rho_ub=rho_ub, q_nom=q_nom, b_nom=b_nom, noise_norm=noise_norm, conds=conds)


def _budget_inputs(epsilon, delta, steps, n, sensitivity, noise_norm):
    """Validate :func:`init_budget`'s inputs (``ValueError`` naming the first bad value) →
    ``(ε, δ, T, n, Δ)`` as float arrays broadcast together."""
    eps, dlt = check_epsilon_delta(epsilon, delta)
    T = _arr("steps", steps)
    nn = _arr("n", n)
    D = _arr("sensitivity", sensitivity)
    _require((T >= 1) & (T == np.floor(T)) & np.isfinite(T),
             "steps must be a positive integer, got steps={steps}", steps=T)
    _require((nn >= 1) & (nn == np.floor(nn)) & np.isfinite(nn),
             "n must be a positive integer, got n={n}", n=nn)
    _require((D > 0) & np.isfinite(D), "sensitivity must be positive and finite, got sensitivity={sensitivity}",
             sensitivity=D)
    if not isinstance(noise_norm, (bool, np.bool_)):
        raise ValueError(f"noise_norm must be True or False, got noise_norm={noise_norm!r}")
    return np.broadcast_arrays(eps, dlt, T, nn, D)


def _nominal_rate(q, nn):
    """Algorithm 3 step 4: ``q_nominal = (√n + 10)/n``, or the caller's ``q`` (checked in (0, 1])."""
    if q is None:
        q_nom = (np.sqrt(nn) + 10.0) / nn
    else:
        q_nom = _arr("q", q)
        _require((q_nom > 0) & (q_nom <= 1), "q must be in (0, 1], got q={q}", q=q_nom)
        q_nom = np.broadcast_to(q_nom, nn.shape)
    return q_nom


def _feasible_batch(q, q_nom, nn, T, eps, dlt, om, rho_step):
    """Algorithm 3 step 6 (see :func:`init_budget`): the batch size ``b`` in the feasible interval
    ``[⌈q_lo n⌉, ⌊0.1 n⌋]`` nearest ``⌊q_nominal n⌋`` (a ``q`` the caller gave is checked, not
    moved), and that nominal batch ``b_nom``.  ``ValueError`` when no batch size is feasible."""
    # feasible interval [q_lo, 0.1] (see docstring)
    c = np.maximum(4.0 * om, 6.0) * rho_step / SUBSAMPLE_FACTOR
    q_lo = np.maximum(_q_lower(c), np.sqrt(rho_step / (SUBSAMPLE_FACTOR * MAX_RATE)))
    b_max = np.floor(MAX_RATE * nn + 1e-9)
    b_min = np.maximum(np.ceil(q_lo * nn * (1.0 + 1e-12)), 1.0)
    _require(b_max >= 1, "n={n} is too small for [L2P] Lemma A.6: the batch floor(0.1 n) is 0 "
             "(q <= 0.1 is required)", n=nn)
    _require(b_min <= b_max,
             "no batch size satisfies [L2P] conditions (10)/(13) and q <= 0.1 for n={n}, "
             "steps={steps}, epsilon={epsilon}, delta={delta}: the rate must be at least {q_lo:.6g} "
             "(per-step budget rho'_0={rho_step:.6g} too large for the data size); use more steps or "
             "a larger dataset", n=nn, steps=T, epsilon=eps, delta=dlt, q_lo=q_lo, rho_step=rho_step)
    b_nom = np.floor(q_nom * nn + 1e-9)
    if q is not None:  # a rate the user chose is checked, never moved
        _require((b_nom >= b_min) & (b_nom <= b_max),
                 "q={q} gives batch floor(q n)={b} for n={n}, outside the feasible range "
                 "[{b_min}, {b_max}] of [L2P] conditions (10)/(13) and q <= 0.1 "
                 "(steps={steps}, epsilon={epsilon}, delta={delta})", q=q_nom, b=b_nom, n=nn,
                 b_min=b_min, b_max=b_max, steps=T, epsilon=eps, delta=dlt)
    return np.clip(b_nom, b_min, b_max), b_nom


def _budget_plan(*, rho_tot, sigma_g, sigma_min, qq, b, eps, dlt, a, om, T, nn, D, rho_step, rho_0,
                 rho_ub, q_nom, b_nom, noise_norm, conds) -> dict:
    """:func:`init_budget`'s output dict from its arrays (floats for 0-d inputs, arrays otherwise)."""
    out: dict[str, Any] = {
        "rho_tot": _ret(rho_tot),
        "sigma_g": _ret(sigma_g),
        "sigma_min": _ret(sigma_min),
        "q": _ret(qq),
        "batch_size": int(b) if b.ndim == 0 else b.astype(np.int64),
        "epsilon": _ret(eps),
        "delta": _ret(dlt),
        "a": _ret(a),
        "omega_a": _ret(om),
        "steps": int(T) if T.ndim == 0 else T.astype(np.int64),
        "n": int(nn) if nn.ndim == 0 else nn.astype(np.int64),
        "sensitivity": _ret(D),
        "rho_step": _ret(rho_step),
        "rho_0": _ret(rho_0),
        "rho_ub": _ret(rho_ub),
        "q_nominal": _ret(q_nom),
        "q_adjusted": bool(np.any(b != b_nom)) if b.ndim else bool(b != b_nom),
        "noise_norm": bool(noise_norm),
        "noise_multiplier": _ret(sigma_g / D),
        "conditions": {k: {kk: (_ret(vv) if kk in ("lhs", "rhs") else
                                (bool(vv) if np.ndim(vv) == 0 else np.asarray(vv)) if kk == "ok" else vv)
                           for kk, vv in v.items()} for k, v in conds.items()},
    }
    return out
