"""The exact one-step privacy of ``dp_adam_ime`` on a tiny aligned instance, independent of the
accountant (issue 9, Build 1).

Instance (Poisson sampling, add/remove): n = 4, b = 1 (q = 1/4), d = 1, C = 1, σ = 1; three
examples with clipped gradient +1 and a canary that is +1 in D' and absent (zero gradient) in D.
One step of the IME privatizer releases ``(g̃, sq̃) = (S + s1·z1, f(S) + s2·Δ₂·z2)`` (b = 1) with
``S`` the batch sum, ``s1 = s2 = √2``: a mixture of 2-D Gaussians over ``S``.  Its exact ε at
δ = 1e-5 is found from the hockey-stick divergence of the two mixtures, integrated on a grid (both
directions).  The fixed declaration (``f(S) = min(S, 1)²``, ``Δ₂ = 2C²/b``) must give exact ε ≤
dpsim's reported ε; the old declaration (``f(S) = S²``, ``Δ₂ = (2b−1)C²/b²``, re-injected here)
violated it (exact ≈ 24 vs 2.71 reported).  A second test checks that the privatizer really
releases the modelled mechanism (the mixture means and noise scale), so the quadrature is about
dpsim's code and not about a paraphrase of it.
"""

import math

import numpy as np
import pytest
from scipy import stats

import dpsim
from dpsim import accounting
from dpsim.backend import Backend
from dpsim.privacy.privatizers import ime_privatizer
from dpsim.transforms.base import Batch, StepContext

N_OTHERS, Q, SIGMA, DELTA = 3, 0.25, 1.0, 1e-5
S12 = math.sqrt(2.0) * SIGMA


def _mixtures(f, sens2):
    """Weights and 2-D means of the outputs under D (canary absent) and D' (canary present)."""
    k = np.arange(N_OTHERS + 1)
    w = stats.binom.pmf(k, N_OTHERS, Q)
    d0 = [(wk, float(kk), f(kk)) for wk, kk in zip(w, k)]
    d1 = [(wk * (1 - Q), float(kk), f(kk)) for wk, kk in zip(w, k)]
    d1 += [(wk * Q, float(kk + 1), f(kk + 1)) for wk, kk in zip(w, k)]
    return d0, d1, (S12, S12 * sens2)


def _densities(mix, sd, x1, x2):
    p = np.zeros((x1.size, x2.size))
    for wk, m1, m2 in mix:
        p += wk * np.outer(stats.norm.pdf(x1, m1, sd[0]), stats.norm.pdf(x2, m2, sd[1]))
    return p


def exact_epsilon(f, sens2, delta=DELTA):
    """Smallest ε with max(E_{e^ε}(P‖Q), E_{e^ε}(Q‖P)) ≤ δ, by midpoint quadrature on a grid wide
    enough (±13 standard deviations) that the truncated mass is below 1e-30."""
    d0, d1, sd = _mixtures(f, sens2)
    m1 = [m for _, m, _ in d1]
    m2 = [m for _, _, m in d1]
    h1, h2 = sd[0] / 40, sd[1] / 40
    x1 = np.arange(min(m1) - 13 * sd[0], max(m1) + 13 * sd[0], h1)
    x2 = np.arange(min(m2) - 13 * sd[1], max(m2) + 13 * sd[1], h2)
    p0 = _densities(d0, sd, x1, x2).ravel() * h1 * h2
    p1 = _densities(d1, sd, x1, x2).ravel() * h1 * h2
    assert abs(p0.sum() - 1) < 1e-6 and abs(p1.sum() - 1) < 1e-6

    def hockey(eps):
        a = math.exp(eps)
        return max(np.maximum(p1 - a * p0, 0).sum(), np.maximum(p0 - a * p1, 0).sum())

    lo, hi = 0.0, 60.0
    assert hockey(hi) <= delta
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if hockey(mid) > delta else (lo, mid)
    return hi


def _fixed(k):
    return min(k, 1.0) ** 2  # Π_C(S/b)² with b = C = 1


def _old(k):
    return float(k) ** 2  # the old release: ḡ² unbounded


def test_exact_one_step_epsilon_of_ime_is_below_the_reported_one():
    reported = accounting.epsilon_from_releases([((S12, S12), 1)], Q, DELTA)
    assert reported == pytest.approx(2.707, abs=0.01)  # σ_eff = 1: the DP-SGD step
    exact_new = exact_epsilon(_fixed, 2.0)  # Δ₂ = 2C²/b
    exact_old = exact_epsilon(_old, 1.0)  # Δ₂ = (2b−1)C²/b², the old declaration (fault injected)
    assert exact_new <= reported, (exact_new, reported)
    assert exact_old > 3 * reported, (exact_old, reported)  # ≈ 24 vs 2.71
    # and the run's own ε (the engine's record) is the same number
    res = dpsim.simulate(_aligned(), dpsim.optimizers.get("dp_adam_ime", noise_multiplier=SIGMA),
                         steps=1, batch_size=1, trials=1, seed=0)
    assert res.epsilon(DELTA) == reported


def _aligned():
    from dpsim.audit import GradientTable

    return GradientTable(np.array([[1.0], [1.0], [1.0], [1.0]]))


def test_privatizer_releases_the_modelled_mixture():
    """Feed the privatizer batches with k = 0..4 aligned examples (padded Poisson-style): the
    second release has mean min(k, 1)² and standard deviation √2·σ·2 (Δ₂ = 2C²/b)."""
    prob = _aligned()
    per_k, kmax = 4000, 4
    R = per_k * (kmax + 1)
    ks = np.repeat(np.arange(kmax + 1), per_k)
    idx = np.tile(np.arange(kmax), (R, 1))
    mask = np.arange(kmax)[None, :] < ks[:, None]
    ctx = StepContext(Backend("numpy", seed=3), R, 1, 1, n=4, sampling="poisson")
    ctx.t = 1
    priv = ime_privatizer(1.0, SIGMA)
    w = np.zeros((R, 1))
    out, _ = priv.update(Batch(prob, w, idx, mask, 1), priv.init(w), w, ctx)
    g, sq = np.asarray(out.g)[:, 0], np.asarray(out.sq)[:, 0]
    for k in range(kmax + 1):
        sel = ks == k
        for x, mean, sd in ((g[sel], k, S12), (sq[sel], _fixed(k), 2 * S12)):
            se = sd / math.sqrt(per_k)
            assert abs(x.mean() - mean) < 4.5 * se, (k, x.mean(), mean)
            # sample sd: relative standard error 1/√(2(N−1))
            assert abs(x.std(ddof=1) / sd - 1) < 4.5 / math.sqrt(2 * (per_k - 1)), (k, x.std(), sd)
