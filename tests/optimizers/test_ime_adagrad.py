"""AdaGrad with independent moment estimation (``dpsim.optimizers.ime``): a naive
per-trial, per-example reference, the no-noise/no-clip limit, and the declared privacy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpsim
from dpsim import problems
from dpsim.optimizers import ime

from support.naive import _batch_grads, clip as clip_vec, streams


@pytest.fixture(scope="module")
def logreg():
    return problems.logistic_regression(300, 6, seed=3)


def naive_ime_adagrad(problem, *, lr, eps, clip, sigma, steps, batch_size, trials, seed, sampling,
                      free=False):
    """IME-AdaGrad trial by trial, example by example (ALGORITHMS.md §2.6 with AdaGrad's
    accumulator): g̃ = (Σ clip(g_i) + σ1 C z1)/b; s̃ = u² + σ2 Δ₂ z2 with u = ḡ, Δ₂ = (2b−1)C²/b²
    for fixed-size batches, else u = Π_C(ḡ), Δ₂ = 2C²/b; v += s̃; w −= η g̃/(√max(v, 0) + ε).
    σ1 = σ2 = √2σ (σ for the "free" comparator); the engine draws z1 then z2, each (R, d)."""
    n, d, R, b = problem.n, problem.d, trials, float(batch_size)
    sampler, rng = streams(seed, n, batch_size, trials, sampling)
    s1 = s2 = sigma if free else math.sqrt(2.0) * sigma
    w = np.zeros((R, d))
    v = np.zeros((R, d))
    for _ in range(steps):
        bi = sampler.draw()
        z1 = rng.standard_normal((R, d))
        z2 = rng.standard_normal((R, d))
        for r in range(R):
            gs = _batch_grads(problem, w[r], bi.idx[r], bi.mask[r] if bi.mask is not None else None)
            tot = sum((clip_vec(g, clip) for g in gs), np.zeros(d))
            g_rel = (tot + s1 * clip * z1[r]) / b
            if sampling == "fixed":
                u, sens2 = tot / b, (2 * b - 1) * clip ** 2 / b ** 2
            else:
                u, sens2 = clip_vec(tot / b, clip), 2 * clip ** 2 / b
            v[r] = v[r] + u ** 2 + s2 * sens2 * z2[r]
            w[r] = w[r] - lr * g_rel / (np.sqrt(np.maximum(v[r], 0.0)) + eps)
    return w


@pytest.mark.parametrize("sampling", ["poisson", "fixed"])
@pytest.mark.parametrize("free", [False, True])
def test_ime_adagrad_matches_naive_reference(logreg, sampling, free):
    kw = dict(steps=9, batch_size=10, trials=3, seed=11, sampling=sampling)
    hp = dict(lr=0.2, eps=1e-3, clip=0.5)
    fn = ime.ime_adagrad_free if free else ime.ime_adagrad
    res = dpsim.simulate(logreg, fn(noise_multiplier=0.8, **hp), **kw)
    ref = naive_ime_adagrad(logreg, sigma=0.8, free=free, **hp, **kw)
    # same arithmetic up to summation order; the division by √v can amplify 1-ulp differences
    np.testing.assert_allclose(res.params, ref, rtol=1e-9, atol=1e-10)


def test_ime_adagrad_without_noise_or_clipping_is_adagrad(logreg):
    """σ = 0 and a clip no gradient reaches (logistic per-example gradients have norm ≤ ‖x‖, far
    below 1e6): both releases are the clean mean and its square, so the run is AdaGrad's, step for
    step (fixed-size batches: the same b examples feed both)."""
    kw = dict(steps=25, batch_size=8, trials=2, seed=4, sampling="fixed")
    a = dpsim.simulate(logreg, ime.ime_adagrad(lr=0.3, eps=1e-6, clip=1e6, noise_multiplier=0.0), **kw)
    b = dpsim.simulate(logreg, dpsim.optimizers.get("adagrad", lr=0.3, eps=1e-6), **kw)
    np.testing.assert_allclose(a.params, b.params, rtol=1e-12, atol=1e-14)
    assert a.loss[-1].mean() < a.loss[0].mean()


def test_ime_adagrad_costs_one_dp_sgd_step_per_step(logreg):
    """The default split (√2σ, √2σ) costs one Gaussian release at σ per step: ε equals DP-SGD's;
    the "free" comparator (σ, σ) equals one release at σ/√2 per step."""
    kw = dict(steps=20, batch_size=15, trials=1, seed=2, sampling="poisson")
    q, delta, sigma = 15 / 300, 1e-5, 1.1
    e = dpsim.simulate(logreg, ime.ime_adagrad(noise_multiplier=sigma), **kw).epsilon(delta)
    e_free = dpsim.simulate(logreg, ime.ime_adagrad_free(noise_multiplier=sigma), **kw).epsilon(delta)
    ref = dpsim.accounting.epsilon(sigma, q, 20, delta)
    ref_free = dpsim.accounting.epsilon(sigma / math.sqrt(2.0), q, 20, delta)
    assert float(np.max(e)) == pytest.approx(ref, rel=1e-6)
    assert float(np.max(e_free)) == pytest.approx(ref_free, rel=1e-6)
    assert ref_free > ref


def test_ime_adagrad_correlated_noise_single_epoch_is_one_gaussian(logreg):
    """DP-MF noise on a single pass (cyclic Poisson with one example per group, b = 1): each
    example takes part once, so the whole run is one Gaussian mechanism at σ (both releases
    together), amplified accounting as for DP-AdaGrad with the same strategy."""
    prob = problems.sparse_logistic_1d(50, zero_fraction=0.5, w_star=1.0, seed=0)
    kw = dict(steps=50, batch_size=1, trials=2, seed=3, sampling="cyclic_poisson:50")
    r1 = dpsim.simulate(prob, ime.ime_adagrad(lr=0.1, eps=0.1, noise="banded:50"), **kw)
    r2 = dpsim.simulate(prob, dpsim.optimizers.get("dp_adagrad", lr=0.1, eps=0.1, noise="banded:50"),
                        **kw)
    e1, e2 = float(np.max(r1.epsilon(1e-5))), float(np.max(r2.epsilon(1e-5)))
    assert e1 == pytest.approx(e2, rel=1e-6)
    assert e1 == pytest.approx(dpsim.accounting.epsilon(1.0, 1.0, 1, 1e-5), rel=1e-3)
    assert np.all(np.isfinite(r1.params))


def test_ime_adagrad_refuses_infinite_clip():
    with pytest.raises(ValueError, match="clip"):
        ime.ime_adagrad(clip=math.inf, noise_multiplier=0.0)
