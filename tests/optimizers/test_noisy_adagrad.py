"""Noisy AdaGrad with a privatized, publicly projected preconditioner
(``dpsim.optimizers.noisy_adagrad``, [DP2] App. C.6): a naive per-trial, per-example reference,
the non-private limit (plain AdaGrad), the noise actually drawn against the declared scale, the
declared ε against the accountant, and bad inputs."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
from scipy import stats as sps

import dpsim
from dpsim import problems
from dpsim.backend import Backend
# the module by its full name: once dpsim.optimizers re-exports the optimizer function, the
# attribute dpsim.optimizers.noisy_adagrad is that function, not this module
NA = importlib.import_module("dpsim.optimizers.noisy_adagrad")
from dpsim.transforms.base import Batch, StepContext

from support.naive import _batch_grads, _public_split, clip as clip_vec, example_grad, streams


def naive_noisy_adagrad(problem, *, lr, clip, clip2, sigma, k, eps, rho, public_fraction, steps,
                        batch_size, trials, seed, sampling):
    """Written from the module docstring, one trial and one example at a time:
    g̃ = (Σ clip(g_i, C) + σ_g C z)/b, s̃ = (Σ clip(g_i², C₂) + σ_v C₂ z')/b (σ_g = σ/√(1−ρ),
    σ_v = σ/√ρ; the engine draws z then z', each (R, d)), v += s̃, H = V Vᵀ √max(v, 0) with V the
    top-k right singular vectors of the public per-example gradients at w, w −= η g̃/(max(H,0)+ε)."""
    n, d, R, b = problem.n, problem.d, trials, float(batch_size)
    pub, priv = _public_split(seed, n, public_fraction)
    sampler, rng = streams(seed, priv.size, batch_size, trials, sampling)
    s_g, s_v = sigma / math.sqrt(1.0 - rho), sigma / math.sqrt(rho)
    w = np.zeros((R, d))
    v = np.zeros((R, d))
    for _ in range(steps):
        bi = sampler.draw()
        idx = priv[bi.idx]
        z1 = rng.standard_normal((R, d)) if sigma > 0 else np.zeros((R, d))
        z2 = rng.standard_normal((R, d)) if sigma > 0 else np.zeros((R, d))
        for r in range(R):
            gs = _batch_grads(problem, w[r], idx[r], bi.mask[r] if bi.mask is not None else None)
            tot = sum((clip_vec(g, clip) for g in gs), np.zeros(d))
            tot2 = sum((clip_vec(g * g, clip2) for g in gs), np.zeros(d))
            g_rel = (tot + s_g * clip * z1[r]) / b
            v[r] = v[r] + (tot2 + s_v * clip2 * z2[r]) / b
            P = np.array([example_grad(problem, w[r], int(j)) for j in pub])
            V = np.linalg.svd(P, full_matrices=False)[2][:k]
            H = V.T @ (V @ np.sqrt(np.maximum(v[r], 0.0)))
            w[r] = w[r] - lr * g_rel / (np.maximum(H, 0.0) + eps)
    return w


@pytest.mark.parametrize("d, n, sampling", [(6, 300, "poisson"),   # m = 30 > d: SVD path
                                            (40, 200, "fixed")])   # m = 20 ≤ d: public-Gram path
def test_matches_naive_reference(d, n, sampling):
    prob = problems.logistic_regression(n, d, seed=3)
    hp = dict(lr=0.05, clip=0.5, clip2=0.2, k=3, eps=0.5)
    kw = dict(steps=6, batch_size=10, trials=3, seed=11, sampling=sampling)
    res = dpsim.simulate(prob, NA.noisy_adagrad(noise_multiplier=0.8, precond_share=0.3,
                                                public_fraction=0.1, **hp), **kw)
    ref = naive_noisy_adagrad(prob, sigma=0.8, rho=0.3, public_fraction=0.1, **hp, **kw)
    # the same arithmetic up to summation order and the SVD / Gram-eigenvector route to V
    np.testing.assert_allclose(res.params, ref, rtol=1e-8, atol=1e-10)


def test_per_trial_hyperparameters_match_separate_runs():
    """A grid folded into the trial axis (lr, both clips, ε per trial) runs each trial as its own
    scalar run would (same batches and noise draws per trial index are not shared across runs, so
    compare against the naive reference per trial)."""
    prob = problems.logistic_regression(200, 8, seed=5)
    kw = dict(steps=5, batch_size=8, trials=2, seed=3, sampling="poisson")
    lrs, c1, c2, eps = [0.05, 0.2], [0.3, 1.0], [0.1, 2.0], [0.5, 1.0]
    res = dpsim.simulate(prob, NA.noisy_adagrad(lr=lrs, clip=c1, clip2=c2, eps=eps, k=2,
                                                noise_multiplier=1.0, public_fraction=0.1), **kw)
    for r in range(2):
        ref = naive_noisy_adagrad(prob, lr=lrs[r], clip=c1[r], clip2=c2[r], eps=eps[r], k=2,
                                  sigma=1.0, rho=0.5, public_fraction=0.1, **kw)
        np.testing.assert_allclose(res.params[r], ref[r], rtol=1e-8, atol=1e-10)


def test_without_noise_clipping_or_projection_is_adagrad():
    """σ = 0, C = C₂ = ∞, k = d with at least d public examples (V Vᵀ = I) and b = 1: every step
    is diagonal AdaGrad v ← v + g², w ← w − η g/(√v + ε) on the sampled example (a plain loop over
    the same private examples)."""
    prob = problems.logistic_regression(120, 5, seed=1)
    kw = dict(steps=30, batch_size=1, trials=2, seed=7, sampling="fixed")
    lr, eps = 0.3, 1e-6
    res = dpsim.simulate(prob, NA.noisy_adagrad(lr=lr, clip=math.inf, clip2=math.inf,
                                                noise_multiplier=0.0, k=5, eps=eps,
                                                public_fraction=0.25), **kw)
    pub, priv = _public_split(7, 120, 0.25)
    assert pub.size >= 5
    sampler, _ = streams(7, priv.size, 1, 2, "fixed")
    w, v = np.zeros((2, 5)), np.zeros((2, 5))
    for _ in range(30):
        idx = priv[sampler.draw().idx]
        for r in range(2):
            g = example_grad(prob, w[r], int(idx[r, 0]))
            v[r] += g * g
            w[r] -= lr * g / (np.sqrt(v[r]) + eps)
    np.testing.assert_allclose(res.params, w, rtol=1e-9, atol=1e-12)
    assert res.loss[-1].mean() < res.loss[0].mean()


def _one_step(sigma, rho, *, R=100, d=50, b=12, n=400, m=60, seed=0):
    prob = problems.logistic_regression(n, d, seed=2)
    rng = np.random.default_rng(1)
    w = rng.normal(size=(R, d)) * 0.3
    idx = rng.integers(m, n, size=(R, b))
    ctx = StepContext(Backend("numpy", seed), R, b, 1, n=n - m, sampling="poisson")
    priv = NA.noisy_moment_privatizer(0.5, 0.2, sigma, k=4, precond_share=rho)
    out, _ = priv.update(Batch(prob, w, idx, None, b, public_idx=np.arange(m)), priv.init(w), w, ctx)
    return out, priv


@pytest.mark.parametrize("rho", [0.5, 0.2])
def test_noise_drawn_matches_the_declared_scale(rho):
    """The two releases minus their noiseless values, times b, divided by the declared std
    (σ_g C and σ_v C₂): 5000 i.i.d. N(0, 1) draws each — their variance lies in the two-sided
    99.9% chi-square interval, and the declared noise multipliers are σ/√(1−ρ) and σ/√ρ."""
    sigma, b = 1.3, 12
    noisy, priv = _one_step(sigma, rho)
    clean, _ = _one_step(0.0, rho)
    s_g, s_v = sigma / math.sqrt(1 - rho), sigma / math.sqrt(rho)
    assert [e.noise_multiplier for e in priv.privacy] == pytest.approx([s_g, s_v])
    for got, ref, std in ((noisy.g, clean.g, s_g * 0.5), (noisy.sq, clean.sq, s_v * 0.2)):
        z = ((got - ref) * b / std).ravel()
        nu = z.size
        lo, hi = sps.chi2.ppf([0.0005, 0.9995], nu) / nu
        assert lo < float(np.mean(z ** 2)) < hi
        assert abs(float(np.mean(z))) < 3.3 / math.sqrt(nu)
    # and the two noise vectors are independent draws (correlation within 99.9% of 0)
    z1 = ((noisy.g - clean.g)).ravel()
    z2 = ((noisy.sq - clean.sq)).ravel()
    assert abs(float(np.corrcoef(z1, z2)[0, 1])) < 3.3 / math.sqrt(z1.size)


def test_clipped_squares_have_bounded_norm():
    """Each per-example squared-gradient vector enters the sum with ℓ2 norm ≤ C₂: removing one
    example from the batch moves the clipped sum by at most C₂ (the declared sensitivity)."""
    prob = problems.logistic_regression(300, 20, seed=4)
    rng = np.random.default_rng(0)
    R, b, c2 = 4, 9, 0.05
    w = rng.normal(size=(R, 20))
    idx = rng.integers(0, 300, size=(R, b))
    ctx = StepContext(Backend("numpy", 0), R, b, 1)
    full = NA.clipped_square_sum(Batch(prob, w, idx, None, b), c2, ctx)
    mask = np.ones((R, b), bool)
    mask[:, 3] = False
    less = NA.clipped_square_sum(Batch(prob, w, idx, mask, b), c2, ctx)
    shift = np.linalg.norm(full - less, axis=1)
    assert np.all(shift <= c2 * (1 + 1e-12)) and np.all(shift > 0)
    assert np.all(full >= 0)


def test_declared_epsilon_is_the_composition_of_both_releases():
    """ε of a run = the accountant's ε for two releases per step on the same Poisson batch at
    (σ_g, σ_v) — equal to one release at σ, i.e. DP-SGD's ε at σ, for any split ρ; q = b over the
    private part (the public split is carved out)."""
    prob = problems.logistic_regression(300, 6, seed=3)
    T, b, delta, sigma, rho = 25, 15, 1e-5, 1.1, 0.3
    res = dpsim.simulate(prob, NA.noisy_adagrad(noise_multiplier=sigma, precond_share=rho, k=2,
                                                public_fraction=0.1, eps=1e-2),
                         steps=T, batch_size=b, trials=1, seed=2, sampling="poisson")
    q = b / (300 - 30)
    s_g, s_v = sigma / math.sqrt(1 - rho), sigma / math.sqrt(rho)
    pair = dpsim.accounting.epsilon_from_releases([((s_g, s_v), T)], q, delta)
    assert float(np.max(res.epsilon(delta))) == pytest.approx(pair, rel=1e-9)
    assert pair == pytest.approx(dpsim.accounting.epsilon(sigma, q, T, delta), rel=1e-6)
    # the costlier release alone (σ_g < σ_v here) costs less than the pair: both are counted
    assert pair > dpsim.accounting.epsilon(s_g, q, T, delta) * 1.05
    assert res.privacy["public_examples"] == 30


@pytest.mark.parametrize("kw, match", [
    (dict(noise_multiplier=-0.1), "noise_multiplier"),
    (dict(k=0), "k"),
    (dict(k=-2), "k"),
    (dict(precond_share=1.0), "precond_share"),
    (dict(precond_share=0.0), "precond_share"),
    (dict(clip2=math.inf), "clip2"),
    (dict(clip2=-1.0), "clip2"),
    (dict(eps=0.0), "eps"),
    (dict(lr=-1.0), "lr"),
    (dict(public_fraction=0.0), "public_fraction"),
])
def test_bad_hyperparameters_raise_naming_the_value(kw, match):
    with pytest.raises(ValueError, match=match):
        NA.noisy_adagrad(**kw)


def test_k_above_d_or_public_rank_raises():
    prob = problems.logistic_regression(200, 6, seed=3)
    with pytest.raises(ValueError, match=r"k=7 exceeds the dimension d=6"):
        dpsim.simulate(prob, NA.noisy_adagrad(k=7, public_fraction=0.2), steps=2, batch_size=5,
                       trials=1, seed=0)
    prob = problems.logistic_regression(200, 40, seed=3)  # 4 public examples, k = 5
    with pytest.raises(ValueError, match=r"k=5 exceeds the rank available from 4 public"):
        dpsim.simulate(prob, NA.noisy_adagrad(k=5, public_fraction=0.02), steps=2, batch_size=5,
                       trials=1, seed=0)


def test_registered_by_name():
    opt = dpsim.optimizers.get("noisy_adagrad", lr=0.1, k=2)
    assert opt.name == "noisy_adagrad" and opt.public_fraction == 0.01
    assert set(dpsim.optimizers.hyperparameters("noisy_adagrad")) == {
        "lr", "clip", "clip2", "noise_multiplier", "k", "eps", "precond_share", "public_fraction", "noise"}


@pytest.mark.parametrize("reg", [0.0, 0.3])
def test_sparse_glm_square_sum_matches_the_reference(monkeypatch, reg):
    """The O(nnz) GLM path of the squared-gradient sum (``_glm_square_sum``) against the
    materializing reference, with padded slots, a regularizer (the ``ρ w`` part of every g_i) and
    per-trial clips (one of them ∞, one that clips every example)."""
    prob = problems.logistic_regression(300, 80, density=0.1, zipf=2.0, reg=reg, seed=6)
    rng = np.random.default_rng(2)
    R, b = 4, 11
    w = rng.normal(size=(R, 80))
    idx = rng.integers(0, 300, size=(R, b))
    mask = rng.random((R, b)) < 0.7
    ctx = StepContext(Backend("numpy", 0), R, b, 1)
    c2 = np.array([0.05, math.inf, 1e-4, 0.5])
    batch = Batch(prob, w, idx, mask, b)
    for clip2 in (c2, math.inf, 0.02):
        fast = NA.clipped_square_sum(batch, clip2, ctx)
        assert NA._glm_square_sum(batch, clip2) is not None
        with monkeypatch.context() as mp:
            mp.setattr(NA, "_glm_square_sum", lambda *a: None)
            ref = NA.clipped_square_sum(batch, clip2, ctx)
        np.testing.assert_allclose(fast, ref, rtol=1e-12, atol=1e-15)


def test_correlated_noise_costs_what_one_release_at_sigma_costs():
    """DP-MF noise (both releases, own streams): the pair of CorrelatedRelease events merges into
    one at σ, so ε equals PDP-SGD's (one release at σ, same strategy, same public split)."""
    prob = problems.logistic_regression(600, 10, seed=1)
    kw = dict(steps=12, batch_size=16, trials=2, seed=1)
    # σ = 5: the unamplified whole-run mechanism has a moderate ε (a PLD at ε ≈ 36 takes seconds)
    res = dpsim.simulate(prob, NA.noisy_adagrad(noise="banded:3", k=1, noise_multiplier=5.0), **kw)
    ref = dpsim.simulate(prob, dpsim.optimizers.get("pdp_sgd", noise="banded:3", k=1,
                                                    noise_multiplier=5.0, public_fraction=0.01), **kw)
    assert [e["type"] for e in res.privacy["events"]] == ["CorrelatedRelease"] * 2
    assert np.all(np.isfinite(res.params))
    np.testing.assert_allclose(res.epsilon(1e-5), ref.epsilon(1e-5), rtol=1e-9)
