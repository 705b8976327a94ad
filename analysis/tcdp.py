"""Truncated CDP bounds of [L2P] (public API ``analysis.tcdp``).

Source ([L2P]): Hong, Wang, Wang, Zhou, *Learning Model-Based Privacy Protection under Budget
Constraints* (AAAI 2021), Appendix A; the tCDP results it restates are from Bun, Dwork, Rothblum,
Steinke, *Composable and Versatile Privacy via Truncated CDP* (STOC 2018).

The conversions, sensitivity, subsampling and Algorithm 3 live in :mod:`dpsim.privacy.tcdp` (the
simulator's budget-constrained optimizer uses them) and are re-exported here unchanged:
:func:`rho_a`, :func:`omega_a`, :func:`omega_of_a`, :func:`tcdp_to_dp`, :func:`ctcdp_to_dp`,
:func:`gaussian_zcdp`, :func:`subsample`, :func:`subsample_conditions`,
:func:`norm_sq_sensitivity`, :func:`compose`, :func:`init_budget`.  This module adds the
sinh-normal mechanism of Theorem A.2 with a numerical (quadrature) Rényi divergence, the
subsampled-RDP bound of Wang, Balle & Kasiviswanathan used to check Lemma A.6
(:func:`subsampled_rdp_wbk`, :func:`subsample_ratio`) and the ctCDP cost of Theorem B.1
(:func:`theorem_b1_spend`).
"""

from __future__ import annotations

import math

import numpy as np

from dpsim.privacy.tcdp import (  # noqa: F401  (re-exports)
    MAX_RATE,
    SUBSAMPLE_FACTOR,
    compose,
    ctcdp_to_dp,
    gaussian_zcdp,
    init_budget,
    norm_sq_sensitivity,
    omega_a,
    omega_of_a,
    rho_a,
    subsample,
    subsample_conditions,
    tcdp_to_dp,
)

__all__ = [
    "rho_a", "omega_a", "omega_of_a", "tcdp_to_dp", "ctcdp_to_dp", "gaussian_zcdp", "subsample",
    "subsample_conditions", "norm_sq_sensitivity", "compose", "init_budget", "SinhNormal",
    "sinh_normal", "sinh_normal_for_tcdp", "SUBSAMPLE_FACTOR", "MAX_RATE", "subsampled_rdp_wbk",
    "subsample_ratio", "theorem_b1_spend",
]


class SinhNormal:
    """The sinh-normal mechanism ``M(x) = f(x) + A·arsinh(Z/A)``, ``Z ~ N(0, σ²)`` (scalar ``f``).

    [L2P] Theorem A.2 (Bun et al. 2018): if ``f`` has sensitivity ``Δ``, ``ρ = 8Δ²/σ²``,
    ``A = 8Δω`` and ``1/(4ω²) ≤ ρ < 16``, then ``M`` is ``(ρ, ω)``-tCDP, i.e.
    ``D_α(M(x) ‖ M(x')) ≤ ρα`` for ``α ∈ (1, ω)``.  As ``A → ∞`` it becomes the Gaussian mechanism.

    With ``u = (y − f)/A`` the output has density
    ``p(y) = φ_σ(A sinh u) · cosh u`` and distribution function ``Φ(A sinh(u)/σ)`` (change of
    variables ``z = A sinh((y − f)/A)``).

    Methods: :meth:`sample`, :meth:`logpdf`, :meth:`pdf`, :meth:`cdf`, :meth:`renyi_divergence`
    (numerical, ``scipy.integrate.quad``), :meth:`tcdp_parameters`.
    """

    def __init__(self, A, sigma):
        A, sigma = float(A), float(sigma)
        if not (A > 0 and math.isfinite(A)):
            raise ValueError(f"A must be positive and finite, got A={A}")
        if not (sigma > 0 and math.isfinite(sigma)):
            raise ValueError(f"sigma must be positive and finite, got sigma={sigma}")
        self.A = A
        self.sigma = sigma

    def __repr__(self) -> str:
        return f"SinhNormal(A={self.A!r}, sigma={self.sigma!r})"

    # -- distribution ----------------------------------------------------------------------------
    def sample(self, f, size=None, rng=None):
        """Draws of ``f + A·arsinh(Z/A)``, ``Z ~ N(0, σ²)``; ``rng`` a NumPy ``Generator`` or seed."""
        rng = np.random.default_rng(rng)
        z = rng.normal(0.0, self.sigma, size=size)
        return np.asarray(f, dtype=float) + self.A * np.arcsinh(z / self.A)

    def logpdf(self, y, f=0.0):
        """``log p(y) = −(A sinh u)²/(2σ²) − ½ log(2πσ²) + log cosh u``, ``u = (y − f)/A``."""
        u = (np.asarray(y, dtype=float) - np.asarray(f, dtype=float)) / self.A
        with np.errstate(over="ignore"):  # far tails: sinh overflows, the density is 0 there
            z = self.A * np.sinh(u)
            # log cosh u computed stably: |u| + log1p(exp(-2|u|)) - log 2
            logcosh = np.abs(u) + np.log1p(np.exp(-2.0 * np.abs(u))) - math.log(2.0)
            return -0.5 * (z / self.sigma) ** 2 - 0.5 * math.log(2.0 * math.pi * self.sigma ** 2) + logcosh

    def pdf(self, y, f=0.0):
        """Density of ``M`` at ``y`` when the true value is ``f``."""
        return np.exp(self.logpdf(y, f))

    def cdf(self, y, f=0.0):
        """``P(M ≤ y) = Φ(A sinh((y − f)/A) / σ)``."""
        from scipy.special import ndtr

        u = (np.asarray(y, dtype=float) - np.asarray(f, dtype=float)) / self.A
        return ndtr(self.A * np.sinh(u) / self.sigma)

    # -- privacy ----------------------------------------------------------------------------------
    def tcdp_parameters(self, sensitivity):
        """``(ρ, ω) = (8Δ²/σ², A/(8Δ))`` of Theorem A.2 for sensitivity ``Δ``.

        Raises ``ValueError`` when the theorem's condition ``1/(4ω²) ≤ ρ < 16`` fails.
        """
        d = float(sensitivity)
        if not (d > 0 and math.isfinite(d)):
            raise ValueError(f"sensitivity must be positive and finite, got sensitivity={sensitivity}")
        rho = 8.0 * d * d / self.sigma ** 2
        omega = self.A / (8.0 * d)
        if not (1.0 / (4.0 * omega ** 2) <= rho * (1.0 + 1e-12) and rho < 16.0):  # rounding slack
            raise ValueError(
                f"Theorem A.2 needs 1/(4 omega^2) <= rho < 16, got rho={rho:.6g}, omega={omega:.6g} "
                f"(1/(4 omega^2)={1.0 / (4.0 * omega ** 2):.6g})")
        return rho, omega

    def renyi_divergence(self, alpha, shift, *, epsrel=1e-10):
        """``D_α(M(f) ‖ M(f + shift))`` by quadrature (independent of ``f``).

        ``D_α = (1/(α−1)) log ∫ p_0(y)^α p_shift(y)^{1−α} dy``, integrated with
        ``scipy.integrate.quad`` in log space (the integrand is divided by its maximum on a grid),
        over ``|A sinh(y/A)| ≤ 60σ`` widened by ``|shift|`` — beyond that the integrand is below
        ``e^{−1000}`` of its peak for the orders where the divergence is finite
        (``α − 1 < 1/(e^{2|shift|/A} − 1)``; outside that range it returns ``inf``).  ``alpha`` may
        be an array (evaluated elementwise); ``α = 1`` gives the KL divergence.
        """
        from scipy import integrate

        alphas = np.asarray(alpha, dtype=float)
        if np.any(~np.isfinite(alphas)) or np.any(alphas <= 0):
            raise ValueError(f"alpha must be positive and finite, got alpha={alpha!r}")
        shift = float(shift)
        if not math.isfinite(shift):
            raise ValueError(f"shift must be finite, got shift={shift}")
        out = np.empty(alphas.shape)
        for i, a in np.ndenumerate(alphas):
            out[i] = self._renyi_one(float(a), shift, epsrel, integrate)
        return float(out) if out.ndim == 0 else out

    def _renyi_one(self, alpha, shift, epsrel, integrate):
        if shift == 0.0:
            return 0.0
        A, s = self.A, self.sigma
        # finiteness: the left/right tail exponent is ∝ −z²(1 + (α−1)(1 − e^{2|shift|/A}))
        if alpha > 1 and (alpha - 1.0) * math.expm1(2.0 * abs(shift) / A) >= 1.0:
            return math.inf
        Y = A * math.asinh(60.0 * s / A) + abs(shift)
        lo, hi = min(-Y, shift - Y), max(Y, shift + Y)
        if alpha == 1.0:
            def h(y):
                lp = self.logpdf(y, 0.0)
                return np.exp(lp) * (lp - self.logpdf(y, shift))

            val, _ = integrate.quad(h, lo, hi, points=sorted({0.0, shift}), limit=500,
                                    epsabs=0.0, epsrel=epsrel)
            return float(val)

        def logh(y):
            return alpha * self.logpdf(y, 0.0) + (1.0 - alpha) * self.logpdf(y, shift)

        grid = np.linspace(lo, hi, 4001)
        M = float(np.max(logh(grid)))
        val, _ = integrate.quad(lambda y: math.exp(float(logh(y)) - M), lo, hi,
                                points=sorted({0.0, shift, float(grid[np.argmax(logh(grid))])}),
                                limit=500, epsabs=0.0, epsrel=epsrel)
        return (math.log(val) + M) / (alpha - 1.0)


def sinh_normal(A, sigma) -> SinhNormal:
    """The sinh-normal mechanism ``f(x) + A·arsinh(N(0, σ²)/A)`` ([L2P] Theorem A.2).

    Returns a :class:`SinhNormal` with ``sample(f, size, rng)``, ``pdf(y, f)``, ``cdf(y, f)`` and
    ``renyi_divergence(alpha, shift)`` (quadrature).  For ``(ρ, ω)``-tCDP at sensitivity ``Δ`` use
    ``A = 8Δω`` and ``σ = √(8Δ²/ρ)`` (:func:`sinh_normal_for_tcdp`).
    """
    return SinhNormal(A, sigma)


def sinh_normal_for_tcdp(sensitivity, rho, omega) -> SinhNormal:
    """Theorem A.2's parameters: ``A = 8Δω``, ``σ = Δ √(8/ρ)``; checks ``1/(4ω²) ≤ ρ < 16``."""
    d, rho, omega = float(sensitivity), float(rho), float(omega)
    if not (d > 0 and math.isfinite(d)):
        raise ValueError(f"sensitivity must be positive and finite, got sensitivity={sensitivity}")
    if not (omega > 1 and math.isfinite(omega)):
        raise ValueError(f"omega must be > 1 and finite, got omega={omega}")
    if not (1.0 / (4.0 * omega ** 2) <= rho < 16.0):
        raise ValueError(f"Theorem A.2 needs 1/(4 omega^2) <= rho < 16, got rho={rho}, omega={omega} "
                         f"(1/(4 omega^2)={1.0 / (4.0 * omega ** 2):.6g})")
    return SinhNormal(8.0 * d * omega, d * math.sqrt(8.0 / rho))


def subsampled_rdp_wbk(rho, q, alpha):
    """Rényi-DP of a ρ-zCDP mechanism (``ε(j) = ρj`` for every order, unbounded at ∞, like the
    Gaussian mechanism) on a uniformly random subset of rate ``q`` drawn **without replacement**,
    neighbours differing by **replacing** one entry: the bound of Wang, Balle, Kasiviswanathan,
    *Subsampled Rényi Differential Privacy and Analytical Moments Accountant* (AISTATS 2019),
    Theorem 9, at integer orders ``α ≥ 2``:

        ε'(α) ≤ 1/(α−1) · log(1 + q² C(α,2) min{4(e^{2ρ} − 1), 2e^{2ρ}}
                              + Σ_{j=3}^{α} 2 q^j C(α,j) e^{(j−1) jρ})

    (``min{2, (e^{ε(∞)} − 1)^j} = 2`` since ``ε(∞) = ∞``).  It is an independent upper bound
    on what [L2P] Lemma A.6 bounds by ``13 q² ρ α`` (for ``α ≤ ω'``).  Computed in log space
    (``C(α, j)`` by ``lgamma``).  Scalars only; ``alpha`` an integer ``≥ 2``.
    """
    from scipy.special import gammaln, logsumexp

    rho, q = float(rho), float(q)
    if not (rho >= 0 and math.isfinite(rho)):
        raise ValueError(f"rho must be non-negative and finite, got rho={rho!r}")
    if not (0 < q <= 1):
        raise ValueError(f"q must be a sampling rate in (0, 1], got q={q!r}")
    if int(alpha) != alpha or alpha < 2:
        raise ValueError(f"alpha must be an integer >= 2, got alpha={alpha!r}")
    a = int(alpha)
    j = np.arange(2, a + 1, dtype=float)
    log_binom = gammaln(a + 1.0) - gammaln(j + 1.0) - gammaln(a - j + 1.0)
    terms = j * math.log(q) + log_binom + math.log(2.0) + (j - 1.0) * j * rho
    # the j = 2 term: q² C(α,2) min{4(e^{2ρ} − 1), 2e^{2ρ}}
    second = min(math.log(4.0) + math.log(math.expm1(2.0 * rho)) if rho > 0 else -math.inf,
                 math.log(2.0) + 2.0 * rho)
    terms[0] = 2.0 * math.log(q) + log_binom[0] + second
    return float(np.logaddexp(0.0, logsumexp(terms)) / (a - 1.0))


def subsample_ratio(rho, q, alphas):
    """``max_α ε'_WBK(α) / (13 q² ρ α)`` over the integer orders ``alphas``: how much of [L2P]
    Lemma A.6's ``13 q² ρ`` an independent subsampled-RDP bound (:func:`subsampled_rdp_wbk`) uses.
    At most 1 means the two bounds agree that the lemma is valid there; the closer to 1, the less
    room the lemma's constant 13 leaves.  Returns ``(ratio, α at the maximum)``."""
    r = [subsampled_rdp_wbk(rho, q, a) / (SUBSAMPLE_FACTOR * q * q * rho * a) for a in alphas]
    i = int(np.argmax(r))
    return float(r[i]), int(alphas[i])


def theorem_b1_spend(noise_std, sensitivity, sample_rate, a, *, norm_noise_std=None,
                     norm_sensitivity=None):
    """ctCDP cost ``ρ̂ = Σ_t ρ_t`` of a model-based private gradient method stopped at step ``T``
    ([L2P] Theorem B.1): the output ``θ_T`` is ``ρ̂``-ctCDP (with the budget's ``a``).

    Each step ``t`` releases, from one uniformly random fixed-size batch at rate ``q``, the
    clipped-gradient sum with Gaussian noise of std ``σ_t`` (``noise_std[t]``, ℓ2 sensitivity
    ``Δ``) and, optionally, its squared norm with noise of std ``σ'`` (``norm_noise_std``,
    sensitivity ``Δ_ns``).  Lemma A.5 makes the pair ``(Δ²/(2σ_t²) + Δ_ns²/(2σ'²))``-zCDP,
    Lemma A.6 amplifies it to ``ρ_t = 13 q² (Δ²/(2σ_t²) + Δ_ns²/(2σ'²))`` (its conditions are
    checked for each step), and Lemma A.4 composes: ``ρ̂ = Σ_{t≤T} ρ_t`` — the proof's
    ``ρ_t = 13q²(1/(2σ_t²) + 1/(2σ_g²))`` with ``σ`` in units of the sensitivity.  Theorem B.1
    claims ``ρ̂ ≤ ρ_tot`` for the loop that stops once the next step would overspend.

    ``noise_std``: ``(T,)`` positive stds of the steps taken (``T = 0`` gives 0).  Returns a float.
    """
    s = np.asarray(noise_std, dtype=float).reshape(-1)
    if s.size == 0:
        return 0.0
    inner = np.asarray(gaussian_zcdp(sensitivity, s), dtype=float)
    if norm_noise_std is not None:
        if norm_sensitivity is None:
            raise ValueError("norm_noise_std needs norm_sensitivity (the squared norm's sensitivity)")
        inner = inner + float(gaussian_zcdp(norm_sensitivity, norm_noise_std))
    return float(compose(subsample(inner, sample_rate, a)))
