"""DP-AdamBC bounds of [ADAMBC] (public API ``analysis.concentration``).

Source ([ADAMBC]): Tang, Shpilevskiy, Lécuyer, *DP-AdamBC: Your DP-Adam Is Actually DP-SGD
(Unless You Apply Bias Correction)*, AAAI 2024 — §3 (Eqs. 2–3), §4 (Props. 2–4), App. B
(proof of Prop. 2), App. C (Lemma 1, proofs of Props. 3–4, Tables 3–4), App. F (Lemma 3,
Corollary 1).  The sub-exponential tail bound used throughout is Wainwright, *High-Dimensional
Statistics* (2019), Prop. 2.9: if ``X`` is sub-exponential with parameters ``(ν, b)``, i.e.
``E exp(λ(X − EX)) ≤ exp(λ²ν²/2)`` for ``|λ| < 1/b``, then::

    P(|X − EX| ≥ δ) ≤ 2 exp(−δ²/(2ν²))  for 0 ≤ δ ≤ ν²/b,     2 exp(−δ/(2b))  for δ > ν²/b.

:func:`bernstein_deviation` inverts it: the smallest ``δ`` with right-hand side ``≤ α`` is
``ν √(2L)`` when that is ``≤ ν²/b`` (the *sub-Gaussian branch*) and ``2bL`` otherwise (the
*sub-exponential branch*), ``L = ln(2/α)``.

Setting (§3, Alg. 1): the private gradient is ``g̃_t = ḡ_t + z_t/B``, ``z_t ~ N(0, σ²C²I)``, with
``ḡ_t`` the mean of per-example gradients clipped to ``C`` (so ``|ḡ_{t,i}| ≤ C`` in every
coordinate); the per-coordinate noise variance of the release is ``Φ = (σC/B)²``.  Adam's
bias-corrected second moment is ``v̂_t = ((1−β2)/(1−β2^t)) Σ_τ β2^{t−τ} g̃_τ²``, the clean one
``v̂^c_t`` is the same sum over ``ḡ_τ``, and DP-AdamBC's is ``v̂^corr_t = v̂_t − Φ``.

What the paper prints and what this module does about it (every item is also a row of
``dpsim verify``, family ``"[ADAMBC] concentration"``, in :mod:`dpsim.analysis.checks.adambc`):

* **Prop. 3, ν.**  The statement (§4 and App. C) has ``ν = (4σ²C²/B²)√((1−β2^{2t})/(1−β2²))``;
  the proof derives ``ν* = (2σ²C²/B²)√(…)`` from Lemma 1 (``ν_τ = 2a_τ`` summed in quadrature),
  which is right.  Tables 3 and the §4 text ("5.933e-09") use the statement's ``4``.
  :func:`prop3_bound` takes ``nu="proof"`` (default, the derivation) or ``nu="statement"``
  (reproduces the tables); in the sub-Gaussian branch the two differ by exactly 2.
* **Prop. 3, branch.**  Table 3's cells at ``t = 10, α = 0.01`` apply the sub-Gaussian formula
  outside its range (``δ > ν²/b`` there); the correct inversion gives 1.039e-07, not 1.005e-07.
  ``branch="subgaussian"`` reproduces the printed cells.
* **Table 3 typo.**  ``C = 1.0, t = 10, α = 0.01`` prints 1.005e-06; the formula (and the rest of
  the row, which is 100× the ``C = 0.1`` row) gives 1.005e-05.
* **Prop. 3, scope.**  The proof bounds only the noise part ``c Σ β2^{t−τ}(z_τ²/B² − Φ)`` and
  drops the cross term ``2c Σ β2^{t−τ} ḡ_τ z_τ/B`` of ``v̂^corr − v̂^c``; so Prop. 3 holds for
  ``ḡ = 0`` (or ``|ḡ| ≪ √Φ``) and fails, e.g., for ``ḡ = C`` (simulation row).  For a fixed
  sequence with ``|ḡ_τ| ≤ C`` the deviation ``|v̂^corr − v̂^c|`` is bounded by :func:`prop4_bound`.
* **Prop. 4, b.**  The proof adds ``ν_{1k} + ν_{2k}`` of two dependent pieces of the same ``z_k``
  and keeps ``b = 4a``; the resulting ``(ν, b)`` pair violates the sub-exponential MGF condition
  for ``λ`` close to ``1/b`` when ``C ≫ √Φ``.  With the same ``ν`` the condition holds for
  ``0 ≤ λ a ≤ (4μ+1)/(4(1+μ)²)``, ``μ = C/√Φ = B/σ`` (the non-central χ² MGF, see
  :func:`prop4_parameters`), i.e. ``b = 4Φ(1+μ)²/(1+4μ)`` (taken ``≥ 4Φ``).
  ``convention="corrected"`` (default) uses it, ``"paper"`` uses ``4Φ``; every Table 4 cell is in
  the sub-Gaussian branch under both, so both reproduce Table 4.
* **Prop. 4, what is bounded.**  The proof's martingale differences drop the dependence of future
  ``ḡ_τ`` on ``z_k``; what the argument does prove (Azuma–Bernstein with conditional MGF bounds
  that hold for any ``|ḡ_k| ≤ C`` measurable w.r.t. the past) is the bound on
  ``|v̂^p − v̂^c − Φ| = |v̂^corr − v̂^c|`` along the realized trajectory, which equals
  ``|v̂^p − E v̂^p|`` for a fixed sequence.  The docstring of :func:`prop4_bound` says so; a verify
  row runs a trajectory that forks on early noise (``|ḡ| = C`` on one branch, ``κC`` on the
  other), where the corrected reading holds and the printed one fails at every quantile.
* **Lemma 3 (App. F).**  The proof applies Lemma 1 to ``β2^j(C + z_j)²`` and ignores its linear
  part ``2Cz_j`` (variance ``4C²Φ``), and the sum of ``ν_j²`` is mis-summed (``2β2²Φ√((β2^t−1)/
  (β2²−1))`` instead of ``2β2Φ√((1−β2^{2t})/(1−β2²))``).  The printed lemma fails by simulation for
  small ``t`` when ``ḡ = C`` (about 21 % exceedance at ``t = 1`` for ``α = 0.05``), and so does
  Corollary 1 as printed (about 75 % for ``sup_{t ≤ 400}`` with ``β2 = 0.8``).
  :func:`lemma3_bound` takes ``variant="corrected"`` (default; martingale Bernstein with the
  Prop. 4 constants and the mean ``Σ β2^j (C² + Φ)``) or ``variant="paper"``.
* **Lemma 1.**  The text says the MGF bound holds "for any ``ν ≥ √2 a``" from a Taylor expansion;
  at ``ν = √2 a`` it fails for every ``λ > 0``.  The chosen ``(ν, b) = (2a, 4a)`` is right
  (:func:`lemma1_symbolic` proves it).
* **Props. 6–7 (App. F).**  The DP-AdamBC forms take the logarithm of a negative number
  (:func:`prop6_log_argument`, :func:`prop7_log_argument`); :func:`prop6_bound` and
  :func:`prop7_bound` evaluate them as printed and return ``nan``.  Prop. 6's DP-Adam form puts
  Corollary 1's ``δ`` (a bound on ``v^p``, a squared scale) where Défossez et al.'s Theorem 2 has
  a bound on the gradient; under ``F → sF`` its first term scales as ``s³`` and ``E‖∇F‖²`` as
  ``s²``, and a verify row exhibits an instance where the printed bound is below ``E‖∇F‖²``.
  Prop. 7's bracket lacks Prop. 6's ``1/T``.
* **Eq. 3.**  ``≈ 0.645`` is ``Φ = 2.4e-8`` rounded; the exact ``Φ = 2.441e-8`` of ``B = 256,
  C = 0.1, σ = 0.4`` gives 0.640.  §3 says DP-SGDM "follows Eq. 3, converging to ≈ 6.4" with
  ``η = 0.001``; that needs ``η = 0.01`` (App. D's value): with 0.001 Eq. 3 gives 0.640.
* **App. B (Prop. 2).**  The printed variances have ``Σ β^{t−τ}`` for ``Σ β^{2(t−τ)}``,
  ``2(σC/B)²`` for ``2Φ²`` and ``4V[ḡ]Φ`` for ``4E[ḡ²]Φ``;
  :func:`prop2_moment_variances` gives the exact ones (checked by simulation).

Every function broadcasts over NumPy arrays and raises ``ValueError`` naming the offending value
outside its assumptions.
"""

from __future__ import annotations

import math

import numpy as np

from dpsim.analysis._validate import out as _out
from dpsim.analysis._validate import real, steps

__all__ = [
    "dp_bias", "second_moment_bias", "sgdm_equivalent_lr", "sgdm_equivalence_symbolic",
    "lemma1_subexp", "lemma1_symbolic", "bernstein_deviation",
    "prop3_parameters", "prop3_bound", "prop4_parameters", "prop4_bound",
    "lemma3_parameters", "lemma3_bound", "corollary1_bound",
    "prop2_limit", "dp_adam_limit", "prop2_moment_variances", "prop2_error_bound",
    "sample_mean_moments", "TABLE3", "TABLE4", "EQ3_NUMBERS",
    "prop6_log_argument", "prop7_log_argument", "prop6_bound", "prop7_bound",
    "adam_travel_bound",
]


# ------------------------------------------------------------------------------------------------
# Printed numbers ([ADAMBC], App. C).  Keys: (C, alpha, t); B = 256, σ = 0.4, β2 = 0.999.

_T_COLS = (10, 100, 1000, 10000)
_ALPHAS = (0.01, 0.05, 0.10)

#: Table 3 (Prop. 3 bound), as printed.
TABLE3 = {
    (0.1, 0.01): (1.005e-07, 3.180e-08, 1.046e-08, 7.110e-09),
    (0.1, 0.05): (8.388e-08, 2.654e-08, 8.725e-09, 5.933e-09),
    (0.1, 0.10): (7.559e-08, 2.391e-08, 7.863e-09, 5.347e-09),
    (1.0, 0.01): (1.005e-06, 3.180e-06, 1.046e-06, 7.110e-07),
    (1.0, 0.05): (8.388e-06, 2.654e-06, 8.725e-07, 5.933e-07),
    (1.0, 0.10): (7.559e-06, 2.391e-06, 7.863e-07, 5.347e-07),
}
TABLE3 = {(C, a, t): row[i] for (C, a), row in TABLE3.items() for i, t in enumerate(_T_COLS)}

#: Table 4 (Prop. 4 bound), as printed.
TABLE4 = {
    (0.1, 0.01): (3.222e-05, 1.019e-05, 3.351e-06, 2.279e-06),
    (0.1, 0.05): (2.688e-05, 8.505e-06, 2.797e-06, 1.902e-06),
    (0.1, 0.10): (2.423e-05, 7.664e-06, 2.520e-06, 1.714e-06),
    (1.0, 0.01): (3.222e-03, 1.019e-03, 3.351e-04, 2.279e-04),
    (1.0, 0.05): (2.688e-03, 8.505e-04, 2.797e-04, 1.902e-04),
    (1.0, 0.10): (2.423e-03, 7.664e-04, 2.520e-04, 1.714e-04),
}
TABLE4 = {(C, a, t): row[i] for (C, a), row in TABLE4.items() for i, t in enumerate(_T_COLS)}

#: Eq. 3 asymptotes ``η_SGDM(t → ∞) = η (1−β)/√Φ`` printed in §3 and App. D:
#: (label, lr, beta, phi or (σ, C, B), printed value as printed (a string: its digits are its
#: precision), source).
EQ3_NUMBERS = (
    ("small Φ ≈ 2.4e-8", 1e-3, 0.9, 2.4e-8, "0.645", "§3, Fig. 2 (left)"),
    ("large Φ ≈ 1.5e-5", 1e-3, 0.9, 1.5e-5, "0.026", "§3, Fig. 2 (left)"),
    ("SNLI, η = 0.01", 1e-2, 0.9, (0.4, 0.1, 256), "6.4", "App. D, Fig. 7 (top)"),
    ("CIFAR10 small Φ", 1e-3, 0.9, (1.0, 1.0, 2048), "0.2048", "App. D, Fig. 7 (middle)"),
    ("CIFAR10 large Φ", 1e-3, 0.9, (1.0, 1.0, 256), "0.0256", "App. D, Fig. 7 (bottom)"),
)

#: Printed numbers the code documents as disagreeing with the paper's own formulas, with the
#: value the code computes instead (the verify rows are "reported" while the disagreement
#: reproduces and fail if it stops reproducing):
#: Table 3 cells (C, α, t) whose printed value is not the statement's-ν bound.
TABLE3_DISAGREE = {
    (0.1, 0.01, 10): "the sub-Gaussian formula used outside its range (δ > ν²/b)",
    (1.0, 0.01, 10): "1/10 of the out-of-range sub-Gaussian value (an exponent typo)",
}
#: §3's "converging to ≈ 6.4" for DP-SGDM with η = 0.001 (Eq. 3 gives 0.640; 6.4 needs η = 0.01).
EQ3_TEXT = ("6.4", 1e-3, 0.9, (0.4, 0.1, 256))
#: Phi as printed in Table 2 and Fig. 1, for (σ, C, B) = (0.4, 0.1, 256).
PHI_PRINTED = "2.441e-08"
#: The §4 text's ξ at α = 0.05, t = 10000, C = 0.1 (it uses the statement's ν).
PROP3_TEXT_XI = "5.933e-09"


# ------------------------------------------------------------------------------------------------
# validation helpers


def _alpha(alpha):
    return real("alpha", alpha, lo=0.0, lo_open=True, hi=1.0, hi_open=True)


def _beta(name, beta, *, lo_open=False):
    return real(name, beta, lo=0.0, lo_open=lo_open, hi=1.0, hi_open=True)


def _bc(x, *like):
    """``x`` broadcast to the common shape of ``x`` and ``like`` (a copy)."""
    shape = np.broadcast_shapes(np.shape(x), *(np.shape(y) for y in like))
    return np.array(np.broadcast_to(x, shape), dtype=float)


def _geom2(beta, t):
    """``Σ_{τ=1}^t β^{2(t−τ)} = (1 − β^{2t})/(1 − β²)`` (``t = inf`` allowed; β = 0 gives 1)."""
    return (1.0 - beta ** (2.0 * t)) / (1.0 - beta * beta)


def _ema_scale(beta, t):
    """``(1−β)/(1−β^t)``, the weight normalization of a bias-corrected EMA."""
    return (1.0 - beta) / (1.0 - beta ** t)


# ------------------------------------------------------------------------------------------------
# Φ, Eq. 2, Eq. 3


def dp_bias(noise_multiplier, clip, batch_size):
    """DP noise variance per coordinate of the averaged release, ``Φ = (σC/B)²``.

    Source: [ADAMBC], Eq. 2 (the bias of DP-Adam's second moment).  Assumptions: ``σ ≥ 0``,
    ``C > 0``, ``B > 0`` (the nominal batch size the noisy sum is divided by).
    Example: ``dp_bias(0.4, 0.1, 256) = 2.441e-8`` (Table 2, Fig. 1).
    """
    s = real("noise_multiplier", noise_multiplier, lo=0.0)
    c = real("clip", clip, lo=0.0, lo_open=True)
    b = real("batch_size", batch_size, lo=0.0, lo_open=True)
    return _out((s * c / b) ** 2)


def second_moment_bias(phi, beta2, t):
    """``E[v_t] − E[v^c_t] = (1 − β2^t) Φ`` for Adam's raw (not bias-corrected) second moment.

    Source: [ADAMBC], Eq. 2: ``E[v_t^p] = (1−β2) Σ_τ β2^{t−τ} E[ḡ_τ²] + (1 − β2^t) Φ`` (DP noise
    independent of ``ḡ_τ``, mean zero).  After Adam's ``1/(1−β2^t)`` correction the bias of
    ``v̂_t`` is ``Φ`` at every ``t``.  Assumptions: ``Φ ≥ 0``, ``0 ≤ β2 < 1``, ``t ≥ 1`` integer
    (``inf`` allowed).
    """
    ph = real("phi", phi, lo=0.0)
    b2 = _beta("beta2", beta2)
    tt = steps("t", t)
    return _out((1.0 - b2 ** tt) * ph)


def sgdm_equivalent_lr(lr, beta, t, phi):
    """Learning rate of DP-SGDM equivalent to DP-Adam when ``Φ`` dominates ``v̂``.

    Source: [ADAMBC], Eq. 3: ``η_SGDM = η_Adam (1 − β)/((1 − β^t) √Φ)``, with DP-SGDM
    ``b_t = β b_{t−1} + g̃_t`` and ``β = β1`` (then ``b_t = ((1−β^t)/(1−β)) m̂_t``); as ``t → ∞``
    it tends to ``η (1−β)/√Φ`` (pass ``t=np.inf``).  Assumptions: ``η ≥ 0``, ``0 ≤ β < 1``,
    ``t ≥ 1`` integer or inf, ``Φ > 0``.  The approximation itself needs ``Φ ≫ E[v̂^c]``.
    """
    eta = real("lr", lr, lo=0.0)
    b = _beta("beta", beta)
    tt = steps("t", t)
    ph = real("phi", phi, lo=0.0, lo_open=True)
    return _out(eta * (1.0 - b) / ((1.0 - b ** tt) * np.sqrt(ph)))


def sgdm_equivalence_symbolic(t_max: int = 5, scale=1) -> dict:
    """Sympy check of the DP-Adam → DP-SGDM algebra behind Eq. 3 ([ADAMBC] §3).

    For symbolic gradients ``g_1..g_T`` and every ``t ≤ t_max`` it runs Adam's first moment
    ``m_t = β m_{t−1} + (1−β) g_t``, ``m̂_t = m_t/(1−β^t)`` and the momentum buffer
    ``b_t = β b_{t−1} + g_t``, and simplifies ``η m̂_t/√Φ − η_SGDM(t) b_t`` with Eq. 3's
    ``η_SGDM``.  Returns ``{"residuals": [...], "ok": bool}`` (all residuals must be 0).
    ``scale`` multiplies Eq. 3's ``η_SGDM`` (a rational; 1 is the paper's formula; any other
    value leaves a non-zero residual, which is how ``dpsim verify`` shows the row can fail).
    """
    import sympy as sp

    if not (isinstance(t_max, int) and t_max >= 1):
        raise ValueError(f"t_max must be a positive integer, got t_max={t_max!r}")
    beta, eta, phi = sp.symbols("beta eta Phi", positive=True)
    g = sp.symbols(f"g1:{t_max + 1}")
    m, b = sp.Integer(0), sp.Integer(0)
    res = []
    for t in range(1, t_max + 1):
        m = beta * m + (1 - beta) * g[t - 1]
        b = beta * b + g[t - 1]
        m_hat = m / (1 - beta ** t)
        eta_sgdm = sp.nsimplify(scale) * eta * (1 - beta) / ((1 - beta ** t) * sp.sqrt(phi))
        res.append(sp.simplify(eta * m_hat / sp.sqrt(phi) - eta_sgdm * b))
    return {"residuals": res, "ok": all(r == 0 for r in res)}


# ------------------------------------------------------------------------------------------------
# Lemma 1 and the Bernstein inversion


def lemma1_subexp(noise_multiplier, clip, batch_size, beta=1.0):
    """Sub-exponential parameters of ``βZ²``, ``Z ~ N(0, σ²C²/B²)``: ``(ν, b) = (2a, 4a)``.

    Source: [ADAMBC], App. C, Lemma 1, with ``a = β σ²C²/B² = βΦ``: for ``|λ| < 1/(4a)``,
    ``E exp(λ(βZ² − βΦ)) = e^{−λa}/√(1 − 2λa) ≤ exp(λ²ν²/2)``.  (:func:`lemma1_symbolic` proves
    it; the paper's "any ν ≥ √2 a" is not enough.)  Assumptions: ``σ ≥ 0``, ``C, B > 0``,
    ``0 ≤ β ≤ 1``.  Returns ``(nu, b)`` arrays (floats for scalar input).
    """
    be = real("beta", beta, lo=0.0, hi=1.0)
    a = be * np.asarray(dp_bias(noise_multiplier, clip, batch_size))
    return _out(2.0 * a), _out(4.0 * a)


def lemma1_symbolic() -> dict:
    """Sympy derivation behind Lemma 1 ([ADAMBC] App. C).

    With ``X ~ N(0, 1)`` and ``u = λa``:

    * ``mgf``: ``E exp(λa(X² − 1))`` integrated symbolically ``= e^{−u}/√(1 − 2u)`` (``u < 1/2``);
    * ``taylor``: its expansion ``1 + u² + O(u³)`` (the paper's "``1 + a²λ²``"): the coefficient
      ``taylor_coefficient = 1`` of ``u²`` against ``ν²/(2a²)`` gives the necessary
      ``ν ≥ √2 a``;
    * ``h_prime``: with ``h(u) = 2u² + u + ½ log(1 − 2u)`` (``log`` of the claimed bound
      ``e^{2u²}`` minus the log-MGF, for ``ν = 2a``), ``h'(u) = 2u(1 − 4u)/(1 − 2u)``: ``h ≥ 0`` on
      ``[−1/4, 1/4]`` since ``h(0) = 0`` and ``h'`` has the sign of ``u`` there — so
      ``(ν, b) = (2a, 4a)`` is valid (``ok_2a``);
    * ``h_sqrt2_prime``: the same for ``ν = √2 a``, ``h'(u) = −4u²/(1 − 2u) < 0`` for ``u > 0``,
      so ``h < 0`` for every ``λ > 0``: ``ν = √2 a`` is **not** sufficient (``sqrt2_fails``).
    """
    import sympy as sp

    x = sp.symbols("x", real=True)
    u = sp.symbols("u", real=True)
    up = sp.symbols("u_p", positive=True)
    # ∫ exp(u(x² − 1)) φ(x) dx for 0 < u < 1/2, by substitution c = 1 − 2u > 0
    c = sp.symbols("c", positive=True)
    integral = sp.integrate(sp.exp(-c * x ** 2 / 2), (x, -sp.oo, sp.oo)) / sp.sqrt(2 * sp.pi)
    mgf = sp.simplify(sp.exp(-u) * integral.subs(c, 1 - 2 * u))
    taylor = sp.series(sp.exp(-u) / sp.sqrt(1 - 2 * u), u, 0, 3).removeO()
    coef = sp.simplify(taylor.coeff(u, 2))
    h = 2 * u ** 2 + u + sp.log(1 - 2 * u) / 2
    hp = sp.factor(sp.simplify(sp.diff(h, u)))
    ok_2a = (sp.simplify(hp - 2 * u * (1 - 4 * u) / (1 - 2 * u)) == 0 and h.subs(u, 0) == 0)
    h2 = u ** 2 + u + sp.log(1 - 2 * u) / 2
    h2p = sp.factor(sp.simplify(sp.diff(h2, u)))
    sqrt2_fails = (sp.simplify(h2p + 4 * u ** 2 / (1 - 2 * u)) == 0
                   and bool(sp.simplify(h2.subs(u, up)) != 0)
                   and float(h2.subs(u, sp.Rational(1, 8))) < 0)
    return {"mgf": mgf, "taylor": taylor, "taylor_coefficient": coef, "h_prime": hp,
            "ok_2a": bool(ok_2a), "h_sqrt2_prime": h2p, "sqrt2_fails": bool(sqrt2_fails)}


_BRANCHES = ("auto", "subgaussian", "subexponential")


def bernstein_deviation(alpha, nu, b, *, branch="auto", sides=2):
    """Smallest ``δ`` with the sub-exponential tail bound ``≤ α`` (Wainwright Prop. 2.9).

    ``sides=2``: ``P(|X − EX| ≥ δ) ≤ 2 exp(−δ²/(2ν²))`` (``δ ≤ ν²/b``), ``2 exp(−δ/(2b))``
    (``δ > ν²/b``), so with ``L = ln(2/α)``: ``δ = ν√(2L)`` if ``ν√(2L) ≤ ν²/b`` else ``2bL``
    (``sides=1``: ``L = ln(1/α)``, one tail).  ``branch="auto"`` is that correct inversion;
    ``"subgaussian"`` / ``"subexponential"`` force one formula (only to reproduce printed numbers:
    a forced branch outside its range is not a valid bound).  ``ν = b = 0`` gives 0.
    Assumptions: ``0 < α < 1``, ``ν, b ≥ 0``.
    """
    a = _alpha(alpha)
    nu = real("nu", nu, lo=0.0)
    bb = real("b", b, lo=0.0)
    if branch not in _BRANCHES:
        raise ValueError(f"branch must be one of {', '.join(_BRANCHES)}, got branch={branch!r}")
    if sides not in (1, 2):
        raise ValueError(f"sides must be 1 or 2, got sides={sides!r}")
    L = np.log(sides / a)
    d1 = nu * np.sqrt(2.0 * L)
    d2 = 2.0 * bb * L
    if branch == "subgaussian":
        return _out(d1)
    if branch == "subexponential":
        return _out(d2)
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = d1 * bb <= nu * nu  # ν√(2L) ≤ ν²/b, written without dividing by b
    return _out(np.where(ok, d1, d2))


# ------------------------------------------------------------------------------------------------
# Propositions 3 and 4


_NU_CONV = ("proof", "statement")


def prop3_parameters(t, noise_multiplier, clip, batch_size, beta2, *, nu="proof"):
    """``(ν*, b*, c)`` of Proposition 3: ``Σ_τ β2^{t−τ}(Z_τ² − Φ)`` is sub-exponential.

    ``nu="proof"`` (default): ``ν* = 2Φ √((1−β2^{2t})/(1−β2²))`` (App. C proof: Lemma 1's
    ``ν_τ = 2β2^{t−τ}Φ`` summed in quadrature); ``nu="statement"``: ``4Φ √(…)`` as printed in the
    statement and used by Table 3.  ``b* = 4Φ``; ``c = (1−β2)/(1−β2^t)`` maps the sum to ``v̂``.
    """
    if nu not in _NU_CONV:
        raise ValueError(f"nu must be 'proof' or 'statement', got nu={nu!r}")
    tt = steps("t", t)
    b2 = _beta("beta2", beta2)
    ph = np.asarray(dp_bias(noise_multiplier, clip, batch_size), dtype=float)
    k = 2.0 if nu == "proof" else 4.0
    nu_ = k * ph * np.sqrt(_geom2(b2, tt))
    return _out(nu_), _out(_bc(4.0 * ph, nu_)), _out(_bc(_ema_scale(b2, tt), nu_))


def prop3_bound(alpha, t, noise_multiplier, clip, batch_size, beta2, *, nu="proof", branch="auto"):
    """Proposition 3: ``P(|v̂^corr_t − v̂^c_t|_i ≥ ξ) ≤ α`` for a fixed sequence with ``ḡ = 0``.

    Source: [ADAMBC] §4 and App. C (Proposition 3, its proof; Table 3):

        ξ(α, t) = ((1−β2)/(1−β2^t)) · δ,  δ = ν√(2 ln(2/α))  if ν√(2 ln(2/α)) ≤ ν²/b
                                          δ = 2b ln(2/α)        otherwise,

    with ``b = 4σ²C²/B²`` and ``ν = 2(σ²C²/B²)√((1−β2^{2t})/(1−β2²))`` (``nu="proof"``, default)
    or ``4(σ²C²/B²)√(…)`` (``nu="statement"``, what Table 3 uses; a valid but twice looser ``ν``).

    Assumptions: noise ``z_τ ~ N(0, σ²C²)`` i.i.d., a sequence of parameters and batches fixed in
    advance, one coordinate.  **Scope:** the proof bounds the noise-only part
    ``c Σ β2^{t−τ}(z_τ²/B² − Φ)``; ``v̂^corr − v̂^c`` also contains ``2c Σ β2^{t−τ} ḡ_τ z_τ/B``,
    which the proof drops, so the bound is for ``ḡ_τ = 0`` (use :func:`prop4_bound` for
    ``|ḡ_τ| ≤ C``).  ``branch`` (``"auto"`` | ``"subgaussian"`` | ``"subexponential"``) as in
    :func:`bernstein_deviation`; forcing ``"subgaussian"`` reproduces the two Table 3 cells that
    used that formula outside its range.  Assumptions on the inputs: ``0 < α < 1``, ``t ≥ 1``
    integer (``inf`` allowed), ``σ ≥ 0``, ``C, B > 0``, ``0 ≤ β2 < 1``.
    """
    nu_, b_, c = prop3_parameters(t, noise_multiplier, clip, batch_size, beta2, nu=nu)
    return _out(np.asarray(c) * np.asarray(bernstein_deviation(alpha, nu_, b_, branch=branch)))


_P4_CONV = ("corrected", "paper")


def _noncentral_b_factor(mu):
    """``(1+μ)²/(1+4μ)``: ``b = 4a(1+μ)²/(1+4μ)`` makes ``(2a(1+μ), b)`` a valid sub-exponential
    pair for ``a((X+μ')² − 1 − μ'²)``, ``|μ'| ≤ μ`` (see :func:`prop4_parameters`)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(np.isinf(mu), np.inf, np.maximum(1.0, (1.0 + mu) ** 2 / (1.0 + 4.0 * mu)))


def prop4_parameters(t, noise_multiplier, clip, batch_size, beta2, *, convention="corrected"):
    """``(ν*, b*, c)`` of Proposition 4 ([ADAMBC], App. C).

    ``ν* = 2√((1−β2^{2t})/(1−β2²)) (σ²C²/B² + σC²/B) = 2√(…)(Φ + C√Φ)`` (as printed) and
    ``c = (1−β2)/(1−β2^t)``.  ``b*``:

    * ``convention="paper"``: ``4Φ`` as printed.
    * ``convention="corrected"`` (default): ``4Φ max(1, (1+μ)²/(1+4μ))``, ``μ = C/√Φ = B/σ``.  Reason:
      one term is ``a((X+μ_k)² − 1 − μ_k²)`` with ``a = β2^{t−k}Φ``, ``X ~ N(0,1)``,
      ``|μ_k| = |ḡ_k|/√Φ ≤ μ``; its log-MGF is ``2u²μ_k²/(1−2u) − u − ½log(1−2u) ≤
      u²(2μ_k²+1)/(1−2u)`` (``u = λa ≥ 0``), which is ``≤ λ²ν_k²/2 = 2u²(1+μ)²`` exactly when
      ``u ≤ (4μ+1)/(4(1+μ)²)``.  The paper's ``b = 4a`` (``u ≤ 1/4``) fails that when ``μ`` is
      large (the proof adds ``ν`` of two dependent pieces without shrinking the range of λ).
      For ``λ < 0`` the paper's pair is valid.  The code takes ``max(1, (1+μ)²/(1+4μ))`` so the
      corrected ``b`` is never below the paper's (the two agree for ``μ ≤ 2``); the sub-Gaussian
      branch (all of Table 4) does not depend on ``b`` at all.
    """
    if convention not in _P4_CONV:
        raise ValueError(f"convention must be 'corrected' or 'paper', got convention={convention!r}")
    tt = steps("t", t)
    b2 = _beta("beta2", beta2)
    s = real("noise_multiplier", noise_multiplier, lo=0.0)
    C = real("clip", clip, lo=0.0, lo_open=True)
    B = real("batch_size", batch_size, lo=0.0, lo_open=True)
    ph = (s * C / B) ** 2
    nu = 2.0 * np.sqrt(_geom2(b2, tt)) * (ph + s * C * C / B)
    if convention == "paper":
        b = 4.0 * ph
    else:
        with np.errstate(divide="ignore"):
            mu = np.where(s > 0, B / np.where(s > 0, s, 1.0), np.inf)
        f = _noncentral_b_factor(mu)
        b = np.where(ph > 0, 4.0 * ph * np.where(np.isinf(f), 0.0, f), 0.0)
    return _out(nu), _out(_bc(b, nu)), _out(_bc(_ema_scale(b2, tt), nu))


def prop4_bound(alpha, t, noise_multiplier, clip, batch_size, beta2, *, convention="corrected",
                branch="auto"):
    """Proposition 4: ``P(|v̂^p_t − E v̂^p_t|_i ≥ ξ) ≤ α`` ([ADAMBC] §4, App. C, Table 4).

        ξ(α, t) = ((1−β2)/(1−β2^t)) · δ,   δ from :func:`bernstein_deviation` with
        ν = 2√((1−β2^{2t})/(1−β2²)) (σ²C²/B² + σC²/B),   b = see :func:`prop4_parameters`.

    What it bounds (assumptions): one coordinate, noise ``z_τ ~ N(0, σ²C²)`` i.i.d., clipped
    means with ``|ḡ_τ| ≤ C``.  For a sequence of parameters and batches fixed in advance,
    ``v̂^p − E v̂^p = v̂^corr − v̂^c`` and this is the bound (it is the correct version of Prop. 3
    for ``ḡ ≠ 0``).  When ``θ_τ`` depends on past noise, the proof's martingale argument bounds
    ``|v̂^p − v̂^c − Φ| = |v̂^corr − v̂^c|`` along the realized trajectory (``ḡ_k`` predictable),
    not ``|v̂^p − E v̂^p|`` (the proof drops the dependence of later ``ḡ_τ`` on ``z_k``; if the
    trajectory branches on early noise, ``v̂^c`` itself can spread by ``O(C²)``).
    ``convention="corrected"`` (default) or ``"paper"`` chooses ``b``; ``branch`` as in
    :func:`bernstein_deviation`.  Input assumptions as :func:`prop3_bound`.
    """
    nu, b, c = prop4_parameters(t, noise_multiplier, clip, batch_size, beta2, convention=convention)
    return _out(np.asarray(c) * np.asarray(bernstein_deviation(alpha, nu, b, branch=branch)))


# ------------------------------------------------------------------------------------------------
# Lemma 3 and Corollary 1 (App. F)

_L3_VARIANTS = ("corrected", "paper")


def lemma3_parameters(t, clip, phi, beta2, *, variant="corrected"):
    """``(μ*, ν*, b*)`` of Lemma 3 for ``v_t^p = Σ_{j=1}^t β2^j g̃²_{t+1−j}``.

    ``variant="paper"`` (as printed): ``μ* = (β2(β2^t−1)/(β2−1))((Φ − 2Φ/π) + (C + √(2Φ/π))²)``,
    ``ν* = 2β2²Φ√((β2^t−1)/(β2²−1))``, ``b* = 4β2Φ``.

    ``variant="corrected"``: with ``X_j = β2^j((ḡ+z)² − ḡ² − Φ)`` (a martingale difference
    sequence, ``|ḡ| ≤ C`` predictable) and the per-term constants of :func:`prop4_parameters`:
    ``μ* = β2(1−β2^t)/(1−β2) (C² + Φ)`` (``≥ Σ_j β2^j E[ḡ² + Φ | past]``),
    ``ν* = 2β2(Φ + C√Φ)√((1−β2^{2t})/(1−β2²))``, ``b* = 4β2Φ max(1, (1+μ)²/(1+4μ))``,
    ``μ = C/√Φ``.
    """
    if variant not in _L3_VARIANTS:
        raise ValueError(f"variant must be 'corrected' or 'paper', got variant={variant!r}")
    tt = steps("t", t)
    C = real("clip", clip, lo=0.0, lo_open=True)
    ph = real("phi", phi, lo=0.0)
    b2 = _beta("beta2", beta2, lo_open=True)
    geom = b2 * (1.0 - b2 ** tt) / (1.0 - b2)  # Σ_{j=1}^t β2^j
    if variant == "paper":
        mu_star = geom * ((ph - 2.0 * ph / np.pi) + (C + np.sqrt(2.0 * ph / np.pi)) ** 2)
        nu_star = 2.0 * b2 ** 2 * ph * np.sqrt((b2 ** tt - 1.0) / (b2 ** 2 - 1.0))
        b_star = 4.0 * b2 * ph
    else:
        mu_star = geom * (C * C + ph)
        nu_star = 2.0 * b2 * (ph + C * np.sqrt(ph)) * np.sqrt(_geom2(b2, tt))
        with np.errstate(divide="ignore"):
            mu = np.where(ph > 0, C / np.sqrt(np.where(ph > 0, ph, 1.0)), np.inf)
        f = _noncentral_b_factor(mu)
        b_star = np.where(ph > 0, 4.0 * b2 * ph * np.where(np.isinf(f), 0.0, f), 0.0)
    return (_out(_bc(mu_star, nu_star, b_star)), _out(_bc(nu_star, mu_star, b_star)),
            _out(_bc(b_star, mu_star, nu_star)))


def lemma3_bound(alpha, t, clip, phi, beta2, *, variant="corrected"):
    """Lemma 3 ([ADAMBC] App. F): ``P(v_t^p ≥ δ) ≤ α`` with ``δ = μ* + dev``.

        δ = μ* + ν*√(2 ln(2/α))   if ν*√(2 ln(2/α)) ≤ ν*²/b*,   else   μ* + 2b* ln(2/α),

    for ``v_t^p = Σ_{j=1}^t β2^j g̃²_{t+1−j}`` (Défossez et al.'s unnormalized second moment;
    equals ``β2 v_t/(1−β2)`` for Adam's raw EMA ``v_t``), ``g̃ = ∇f_t + z``, ``z ~ N(0, Φ)``,
    ``|∇_i f_t| ≤ C`` (Assumption 3).  The branch test uses the deviation ``δ − μ*`` (the paper
    writes ``δ`` itself, which would always select the second branch).  ``variant`` selects the
    constants (:func:`lemma3_parameters`): ``"corrected"`` (default) is valid also when ``∇f_t``
    depends on past noise; ``"paper"`` is the printed lemma, which fails for small ``t`` when
    ``|∇f| = C`` (its ``ν*`` omits the ``2Cz`` term).  Assumptions: ``0 < α < 1``, ``t ≥ 1``,
    ``C > 0``, ``Φ ≥ 0``, ``0 < β2 < 1``.
    """
    mu, nu, b = lemma3_parameters(t, clip, phi, beta2, variant=variant)
    return _out(np.asarray(mu) + np.asarray(bernstein_deviation(alpha, nu, b)))


def corollary1_bound(alpha, T, clip, phi, beta2, *, variant="corrected"):
    """Corollary 1 ([ADAMBC] App. F): ``P(sup_{t ≤ T} v_t^p ≥ δ) ≤ α`` by a union bound.

        δ = μ*(T) + ν*(T)√(2 ln(2T/α))   (sub-Gaussian branch),  μ*(T) + 2b* ln(2T/α)  otherwise,

    i.e. Lemma 3 at ``t = T`` and level ``α/T`` (``μ*`` and ``ν*`` increase with ``t``, so
    ``δ(T)`` bounds every ``t ≤ T``).  ``variant`` as :func:`lemma3_bound`.
    """
    a = _alpha(alpha)
    TT = real("T", T, lo=1.0)
    if np.any(TT != np.round(TT)):
        raise ValueError(f"T must be a positive integer, got T={T!r}")
    return lemma3_bound(a / TT, TT, clip, phi, beta2, variant=variant)


# ------------------------------------------------------------------------------------------------
# Proposition 2 (consistency)


def prop2_limit(mean_g, mean_g2):
    """The limit of the DP-AdamBC update: ``E[ḡ]/√E[ḡ²]`` ([ADAMBC] §4, Proposition 2, App. B).

    Under Assumption 1 (stationarity: i.i.d. clipped minibatch means ``ḡ_t``),
    ``m̂_t/√max(v̂^corr_t, 0) → E[ḡ]/√E[ḡ²]`` in probability as ``β1, β2 → 1`` and ``t → ∞``
    (:func:`prop2_error_bound` quantifies it).  Assumptions: ``E[ḡ²] > 0``,
    ``E[ḡ]² ≤ E[ḡ²]``.
    """
    m = real("mean_g", mean_g)
    m2 = real("mean_g2", mean_g2, lo=0.0, lo_open=True)
    if np.any(m * m > m2 * (1.0 + 1e-12)):
        raise ValueError(f"need mean_g**2 <= mean_g2, got mean_g={mean_g!r}, mean_g2={mean_g2!r}")
    return _out(m / np.sqrt(m2))


def dp_adam_limit(mean_g, mean_g2, phi):
    """The limit of the uncorrected DP-Adam update: ``E[ḡ]/√(E[ḡ²] + Φ)`` ([ADAMBC] §4).

    Not consistent for ``E[ḡ]/√E[ḡ²]`` when ``Φ > 0`` (the point of DP-AdamBC).
    """
    ph = real("phi", phi, lo=0.0)
    m = real("mean_g", mean_g)
    m2 = real("mean_g2", mean_g2, lo=0.0)
    if np.any(m * m > m2 * (1.0 + 1e-12)) or np.any(m2 + ph <= 0):
        raise ValueError(f"need mean_g**2 <= mean_g2 and mean_g2 + phi > 0, got mean_g={mean_g!r}, "
                         f"mean_g2={mean_g2!r}, phi={phi!r}")
    return _out(m / np.sqrt(m2 + ph))


def prop2_moment_variances(beta1, beta2, t, var_g, var_g2, mean_g2, phi):
    """Exact variances of ``m̂_t`` and ``v̂_t`` (= of ``v̂^corr_t``) under Assumption 1.

    Source: the Chebyshev step of the proof of Proposition 2 ([ADAMBC] App. B), corrected: with
    i.i.d. ``ḡ_τ`` and ``g̃_τ = ḡ_τ + N(0, Φ)``,

        Var m̂_t = ((1−β1)/(1−β1^t))² ((1−β1^{2t})/(1−β1²)) (V[ḡ] + Φ),
        Var v̂_t = ((1−β2)/(1−β2^t))² ((1−β2^{2t})/(1−β2²)) (V[ḡ²] + 4E[ḡ²]Φ + 2Φ²),

    (``Var g̃² = V[ḡ²] + 4E[ḡ²]Φ + 2Φ²``; App. B prints ``Σ β^{t−τ}``, ``4V[ḡ]Φ`` and ``2Φ``).
    Both tend to 0 as ``β → 1`` after ``t → ∞`` (``≈ (1−β)/2 ·(…)``), and ``E m̂_t = E ḡ``,
    ``E v̂^corr_t = E ḡ²`` exactly.  Returns ``(var_m_hat, var_v_hat)``.
    """
    b1 = _beta("beta1", beta1)
    b2 = _beta("beta2", beta2)
    tt = steps("t", t)
    vg = real("var_g", var_g, lo=0.0)
    vg2 = real("var_g2", var_g2, lo=0.0)
    mg2 = real("mean_g2", mean_g2, lo=0.0)
    ph = real("phi", phi, lo=0.0)
    vm = _ema_scale(b1, tt) ** 2 * _geom2(b1, tt) * (vg + ph)
    vv = _ema_scale(b2, tt) ** 2 * _geom2(b2, tt) * (vg2 + 4.0 * mg2 * ph + 2.0 * ph * ph)
    return _out(vm), _out(vv)


def prop2_error_bound(alpha, beta1, beta2, t, mean_g, var_g, mean_g2, var_g2, phi):
    """Finite-``(β1, β2, t)`` version of Proposition 2: ``P(|u_t − E ḡ/√E ḡ²| ≥ ε) ≤ α``.

    ``u_t = m̂_t/√max(v̂^corr_t, 0)`` (DP-AdamBC without ``γ'``).  Following App. B: Chebyshev
    with the exact variances of :func:`prop2_moment_variances` at level ``α/2`` each gives
    ``|m̂ − M| ≤ a = √(2 Var m̂/α)`` and ``|v̂^corr − V| ≤ r = √(2 Var v̂/α)``; on that event
    (if ``r < V``)::

        |u − M/√V| ≤ a/√(V − r) + |M| (1/√(V − r) − 1/√V) =: ε,

    with ``M = E ḡ``, ``V = E ḡ²``; ``ε = inf`` when ``r ≥ V``.  ``ε → 0`` as the variances do
    (``β1, β2 → 1``, ``t → ∞``), which is Prop. 2's consistency.
    """
    a_ = _alpha(alpha)
    M = real("mean_g", mean_g)
    V = real("mean_g2", mean_g2, lo=0.0, lo_open=True)
    if np.any(M * M > V * (1.0 + 1e-12)):
        raise ValueError(f"need mean_g**2 <= mean_g2, got mean_g={mean_g!r}, mean_g2={mean_g2!r}")
    vm, vv = prop2_moment_variances(beta1, beta2, t, var_g, var_g2, mean_g2, phi)
    a = np.sqrt(2.0 * np.asarray(vm) / a_)
    r = np.sqrt(2.0 * np.asarray(vv) / a_)
    with np.errstate(divide="ignore", invalid="ignore"):
        low = np.sqrt(np.where(r < V, V - r, 1.0))
        eps = a / low + np.abs(M) * (1.0 / low - 1.0 / np.sqrt(V))
    return _out(np.where(r < V, eps, np.inf))


def sample_mean_moments(values, batch_size):
    """Moments of the mean ``X̄`` of ``b`` i.i.d. draws (with replacement) from ``values``.

    ``values`` has shape ``(n, ...)`` (a finite population along axis 0, e.g. clipped
    per-example gradients).  With population mean ``μ`` and central moments ``m2, m3, m4``:
    ``E X̄ = μ``, ``V X̄ = m2/b``, ``E X̄² = μ² + m2/b`` and
    ``V X̄² = 4μ²m2/b + 4μ m3/b² + (m4 + 3(b−1)m2²)/b³ − m2²/b²``.
    Returns ``(mean, var, mean_sq, var_sq)``, each of shape ``values.shape[1:]``.
    """
    x = np.asarray(values, dtype=float)
    if x.ndim < 1 or x.shape[0] < 1 or not np.all(np.isfinite(x)):
        raise ValueError(f"values must be a finite array with at least one row, got shape {x.shape}")
    b = int(batch_size)
    if b < 1 or b != batch_size:
        raise ValueError(f"batch_size must be a positive integer, got batch_size={batch_size!r}")
    mu = x.mean(axis=0)
    dev = x - mu
    m2, m3, m4 = (dev ** 2).mean(axis=0), (dev ** 3).mean(axis=0), (dev ** 4).mean(axis=0)
    var = m2 / b
    mean_sq = mu * mu + var
    ed4 = (m4 + 3.0 * (b - 1) * m2 * m2) / b ** 3
    var_sq = 4.0 * mu * mu * m2 / b + 4.0 * mu * m3 / b ** 2 + ed4 - var * var
    return _out(mu), _out(var), _out(mean_sq), _out(np.maximum(var_sq, 0.0))


# ------------------------------------------------------------------------------------------------
# Propositions 6 and 7 (App. F): convergence of DP-Adam / DP-AdamBC, as printed


def prop6_log_argument(clip, phi, beta2):
    """Argument of the logarithm in the printed DP-AdamBC bound of Prop. 6 ([ADAMBC] App. F):

        1 − (C² + Φ)/((1 − β2) Φ).

    It is **negative for every** ``C ≥ 0``, ``Φ > 0``, ``0 < β2 < 1``: ``(C² + Φ)/Φ ≥ 1 > 1 − β2``.
    The proof reaches it from ``Σ_t ln((b_t − Φ)/(b_{t−1} − Φ))`` with ``b_0 = 0``, whose first
    term is the logarithm of a negative ratio; the printed bound is therefore undefined as
    stated (a disagreement reported by ``dpsim verify``).  Vectorized."""
    C = real("clip", clip, nonneg=True)
    ph = real("phi", phi, positive=True)
    b2 = _beta("beta2", beta2, lo_open=True)
    C, ph, b2 = np.broadcast_arrays(C, ph, b2)
    return _out(1.0 - (C * C + ph) / ((1.0 - b2) * ph))


def prop7_log_argument(delta, phi, beta2):
    """Argument of the logarithm in the printed DP-AdamBC bound of Prop. 7 ([ADAMBC] App. F):

        1 − δ²/(Φ (1 − β2)).

    The same bound writes ``√(δ² − Φ)``, which is real only for ``δ² ≥ Φ``; then
    ``δ²/(Φ(1 − β2)) ≥ 1/(1 − β2) > 1`` and the argument is negative: wherever the rest of the
    bound is defined, its logarithm is not.  Assumptions: ``δ ≥ 0``, ``Φ > 0``, ``0 < β2 < 1``.
    Vectorized."""
    dl = real("delta", delta, nonneg=True)
    ph = real("phi", phi, positive=True)
    b2 = _beta("beta2", beta2, lo_open=True)
    dl, ph, b2 = np.broadcast_arrays(dl, ph, b2)
    return _out(1.0 - dl * dl / (ph * (1.0 - b2)))


def _log_bracket(argument, T, beta2):
    """``ln(argument)/T − ln β2``: the bracket of Prop. 6 (``T`` the horizon); Prop. 7's bracket
    ``ln(argument) − T ln β2`` is ``T`` times it.  A negative argument gives ``nan`` (the
    logarithm is undefined there), computed rather than assumed."""
    with np.errstate(invalid="ignore"):
        return float(np.log(argument)) / T - math.log(beta2)


def adam_travel_bound(lr, beta2, T):
    """Largest distance one coordinate of Adam without momentum can move in ``T`` steps, whatever
    the gradients: ``Σ_{t=1}^T lr √((1 − β2^t)/(1 − β2))``.

    Derivation: with ``β1 = 0`` the step is ``lr g_t/(√v̂_t + ε)``, ``ε ≥ 0``, and
    ``v̂_t = ((1−β2)/(1−β2^t)) Σ_τ β2^{t−τ} g_τ² ≥ ((1−β2)/(1−β2^t)) g_t²``, so one step moves at most
    ``lr √((1−β2^t)/(1−β2))`` (equality when the earlier gradients are 0).  The same holds for
    App. F's update ``η_t g_t/√(v_t^p + ε)`` with ``η = lr√β2``: ``v^p_t ≥ β2 g_t²`` and
    ``η_t = η √((1−β2^t)/(1−β2))``.  Used to build instances on which ``‖∇F(θ_t)‖`` is known at
    every step (:mod:`dpsim.analysis.checks.adambc`).  Assumptions: ``lr ≥ 0``, ``0 ≤ β2 < 1``,
    ``T ≥ 1`` integer.  Vectorized over ``lr`` and ``beta2``.
    """
    eta = real("lr", lr, lo=0.0)
    b2 = _beta("beta2", beta2)
    TT = int(real("T", T, lo=1, integer=True))
    t = np.arange(1, TT + 1, dtype=float)
    eta, b2 = np.broadcast_arrays(eta, b2)
    out = eta * np.sum(np.sqrt((1.0 - b2[..., None] ** t) / (1.0 - b2[..., None])), axis=-1)
    return _out(out)


def prop6_bound(T, lr, d, L, clip, phi, beta2, eps, f_gap, alpha, *, variant="dp_adam",
                delta_variant="corrected", terms=False):
    """Right-hand side of [ADAMBC] Prop. 6 (App. F; β1 = 0, ``η_t = η√((1−β2^t)/(1−β2))``),
    as printed, for a bound on ``E‖∇F(θ_t)‖²``:

    ``variant="dp_adam"``::

        2δ(F(θ_0) − F*)/(ηT) + (4d(C²+Φ)/√(1−β2) + ηdL√(C²+Φ)/(1−β2))
                              · ((1/T) ln(1 + (C²+Φ)/((1−β2)ε)) − ln β2)

    ``variant="dp_adambc"``::

        2√(δ² − Φ)(F(θ_0) − F*)/(ηT) + (4dC²/√(1−β2) + ηdLC/(1−β2))
                              · ((1/T) ln(1 − (C²+Φ)/((1−β2)Φ)) − ln β2)

    with ``δ`` of Corollary 1 (:func:`corollary1_bound` at level α, horizon T; ``delta_variant``
    picks its constants).  Both forms are evaluated as printed; the DP-AdamBC one takes the
    logarithm of :func:`prop6_log_argument`, which is negative for every input, so it comes out
    ``nan``.  ``terms=True`` returns ``(first, coefficient, bracket)`` with
    ``bound = first + coefficient · bracket``.

    Units.  ``δ`` bounds ``v^p_t = Σ_j β2^j g̃²`` (a squared gradient over ``1−β2``), while the
    first term of Défossez et al.'s Theorem 2, which the proof adapts, has ``R``, a bound on the
    gradient itself.  Under ``F → sF`` (``C, √Φ, L`` scaled by ``s``, ``ε`` by ``s²``; Adam's
    trajectory unchanged) the first term scales as ``s³`` and everything else, and
    ``E‖∇F‖²``, as ``s²``: for small ``s`` the printed DP-Adam bound falls below
    ``E‖∇F‖²`` on instances where ``‖∇F(θ_t)‖ = C`` at every step (a row of ``dpsim verify``).

    Assumptions (Assumptions 2–4 of App. F): ``F ≥ F*`` (``f_gap = F(θ_0) − F* ≥ 0``),
    ``‖∇f_t‖ ≤ C`` (no clipping), ``∇F`` L-Lipschitz; ``T ≥ 1``, ``η, ε > 0``, ``0 < β2 < 1``,
    ``0 < α < 1``.  Scalars.
    """
    if variant not in ("dp_adam", "dp_adambc"):
        raise ValueError(f"variant must be 'dp_adam' or 'dp_adambc', got variant={variant!r}")
    T = int(real("T", T, lo=1, integer=True))
    lr, d, L, C = (float(real(n, v, positive=True)) for n, v in
                   (("lr", lr), ("d", d), ("L", L), ("clip", clip)))
    ph = float(real("phi", phi, positive=True))
    b2 = float(_beta("beta2", beta2, lo_open=True))
    e = float(real("eps", eps, positive=True))
    gap = float(real("f_gap", f_gap, nonneg=True))
    delta = float(corollary1_bound(alpha, T, C, ph, b2, variant=delta_variant))
    if variant == "dp_adam":
        first = 2.0 * delta * gap / (lr * T)
        g = math.sqrt(C * C + ph)
        coef = 4.0 * d * g * g / math.sqrt(1.0 - b2) + lr * d * L * g / (1.0 - b2)
        bracket = _log_bracket(1.0 + g * g / ((1.0 - b2) * e), T, b2)
    else:
        with np.errstate(invalid="ignore"):
            first = 2.0 * float(np.sqrt(delta * delta - ph)) * gap / (lr * T)
        coef = 4.0 * d * C * C / math.sqrt(1.0 - b2) + lr * d * L * C / (1.0 - b2)
        bracket = _log_bracket(float(prop6_log_argument(C, ph, b2)), T, b2)
    if terms:
        return first, coef, bracket
    return first + coef * bracket


def prop7_bound(T, lr, d, L, beta1, beta2, eps, phi, f_gap, delta, *, variant="dp_adam", terms=False):
    """Right-hand side of [ADAMBC] Prop. 7 (App. F; Adam with momentum ``β1``,
    ``η_t = η(1−β1)√((1−β2^t)/(1−β2))``), as printed, with ``T̃ = T − β1/(1−β1)``, ``K = 1 − β1/β2``:

    ``variant="dp_adam"``::

        2δ(F_0 − F*)/(η T̃) + E · (ln(1 + δ²/(ε(1−β2))) − T ln β2),
        E = ηdL(1−β1)δ/(K(1−β2)) + 2η²dL²β1/(K(1−β2)^{3/2}) + 12dδ²√(1−β1)/(K^{3/2}√(1−β2))

    ``variant="dp_adambc"``: ``δ`` → ``√(δ² − Φ)`` in the first term and in E's first, ``δ²`` →
    ``δ² − Φ`` in E's last, and the log term ``ln(1 − δ²/(Φ(1−β2)))``
    (:func:`prop7_log_argument`), whose argument is negative whenever ``δ² ≥ Φ`` (which
    ``√(δ² − Φ)`` needs): evaluated as printed it is ``nan`` (the same defect as
    :func:`prop6_bound`).  ``terms=True`` returns ``(first, E, bracket)`` with
    ``bound = first + E · bracket``.

    ``δ``: the bound on the preconditioner of the statement's last display (Corollary 1's, with
    ``ν* = 2β2²Φ√((β2^t−1)/(β2²−1))``, ``b* = 4β2Φ`` for momentum) — passed in, since the printed
    case split is on ``δ`` itself and ``μ*`` is not defined in Prop. 7.  A feature of the printed
    bound that a verify row reports: the log bracket is not divided by ``T`` (Prop. 6 has
    ``(1/T) ln(·) − ln β2``), so the bound grows linearly in ``T`` and at ``β1 = 0`` with
    ``δ² = C² + Φ`` it does not reduce to Prop. 6 (also ``12`` instead of ``4`` in the last term
    of ``E``, a looser constant).  Requires ``T > β1/(1−β1)``, ``0 ≤ β1 < β2 < 1``,
    ``η, ε, Φ > 0``, ``f_gap ≥ 0``, ``δ > 0``.  Scalars.
    """
    if variant not in ("dp_adam", "dp_adambc"):
        raise ValueError(f"variant must be 'dp_adam' or 'dp_adambc', got variant={variant!r}")
    T = int(real("T", T, lo=1, integer=True))
    lr, d, L = (float(real(n, v, positive=True)) for n, v in (("lr", lr), ("d", d), ("L", L)))
    b1 = float(real("beta1", beta1, lo=0.0))
    b2 = float(_beta("beta2", beta2, lo_open=True))
    if not b1 < b2:
        raise ValueError(f"Prop. 7 needs 0 <= beta1 < beta2, got beta1={beta1!r}, beta2={beta2!r}")
    e = float(real("eps", eps, positive=True))
    ph = float(real("phi", phi, positive=True))
    gap = float(real("f_gap", f_gap, nonneg=True))
    dl = float(real("delta", delta, positive=True))
    Tt = T - b1 / (1.0 - b1)
    if Tt <= 0:
        raise ValueError(f"Prop. 7 needs T > beta1/(1-beta1), got T={T}, beta1={beta1!r}")
    K = 1.0 - b1 / b2
    if variant == "dp_adam":
        r, r2, arg = dl, dl * dl, 1.0 + dl * dl / (e * (1.0 - b2))
    else:
        with np.errstate(invalid="ignore"):
            r = float(np.sqrt(dl * dl - ph))
        r2, arg = dl * dl - ph, float(prop7_log_argument(dl, ph, b2))
    E = (lr * d * L * (1.0 - b1) * r / (K * (1.0 - b2))
         + 2.0 * lr * lr * d * L * L * b1 / (K * (1.0 - b2) ** 1.5)
         + 12.0 * d * r2 * math.sqrt(1.0 - b1) / (K ** 1.5 * math.sqrt(1.0 - b2)))
    first = 2.0 * r * gap / (lr * Tt)
    bracket = T * _log_bracket(arg, T, b2)  # ln(arg) − T ln β2
    if terms:
        return first, E, bracket
    return first + E * bracket
