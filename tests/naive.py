"""Naive single-trial reference implementations — the oracles of the engine tests.

Written directly from ALGORITHMS.md §0–1: one trial at a time, one example at a time, plain NumPy,
no fused paths.  They reproduce the engine's random streams (``SeedSequence(seed).spawn(2)``: the
sampler's batches and the backend's ``(R, d)`` standard-normal draws) so a comparison is step for
step with the same noise injected.  Deliberately slow; the benchmark quotes the engine's speed-up
over :func:`naive_dp_sgd`.
"""

from __future__ import annotations

import math

import numpy as np

from dpsim.sampling import Sampler


def example_grad(problem, w: np.ndarray, i: int) -> np.ndarray:
    """∇f(x_i; w) for one example, through the problem's per-example oracle on a (1, 1) batch."""
    return np.asarray(problem.per_example_grads(w[None, :], np.array([[i]], dtype=np.int64))[0, 0])


def clip(g: np.ndarray, c: float) -> np.ndarray:
    """clip(g, C) = g · min(1, C/||g||)."""
    nrm = math.sqrt(float(g @ g))
    if math.isinf(c) or nrm <= c:
        return g
    return g * (c / nrm)


def streams(seed, n, batch_size, trials, sampling):
    """The engine's two random streams: (batch sampler, noise generator)."""
    sampler_ss, noise_ss = np.random.SeedSequence(seed).spawn(2)
    return (Sampler(sampling, n, batch_size, trials, sampler_ss),
            np.random.Generator(np.random.PCG64(noise_ss)))


def naive_dp_sgd(problem, *, lr, clip_norm, sigma, steps, batch_size, trials=1, seed=0,
                 sampling="poisson", beta=None, private=True):
    """DP-SGD (or DP-SGDM when ``beta`` is given) trial by trial, example by example.

    g̃ = (1/b)(Σ_{i∈B} clip(g_i, C) + σ C ξ), ξ ~ N(0, I);  b_t = β b_{t−1} + g̃;  w ← w − η b_t.
    With ``private=False`` the release is the plain minibatch mean (1/b) Σ g_i (no noise drawn).
    Returns the final parameters, shape (R, d).
    """
    n, d = problem.n, problem.d
    sampler, noise_rng = streams(seed, n, batch_size, trials, sampling)
    w = np.zeros((trials, d))
    buf = np.zeros((trials, d))
    for _ in range(steps):
        bi = sampler.draw()
        z = noise_rng.standard_normal((trials, d)) if private and sigma > 0 else None
        for r in range(trials):
            total = np.zeros(d)
            for slot in range(bi.idx.shape[1]):
                if bi.mask is not None and not bi.mask[r, slot]:
                    continue
                g = example_grad(problem, w[r], int(bi.idx[r, slot]))
                total += clip(g, clip_norm) if private else g
            if z is not None:
                total = total + sigma * clip_norm * z[r]
            g_tilde = total / batch_size
            if beta is not None:
                buf[r] = beta * buf[r] + g_tilde
                step = buf[r]
            else:
                step = g_tilde
            w[r] = w[r] - lr * step
        if problem.has_domain:
            w = np.asarray(problem.project(w))
    return w
