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


# =================================================================================================
# Adaptive and design-space variants (ALGORITHMS §1, §2.1–2.3, §2.5–2.6), one trial at a time.
# Each step: draw the batch, then the (R, d) standard normals of every release *in the order the
# engine draws them*, then loop over trials and examples.


def _batch_grads(problem, w, idx_row, mask_row):
    out = []
    for slot in range(idx_row.shape[0]):
        if mask_row is not None and not mask_row[slot]:
            continue
        out.append(example_grad(problem, w, int(idx_row[slot])))
    return out


def _public_split(seed, n, public_fraction):
    """The engine's public split: a permutation from the third child of the seed."""
    m = int(round(public_fraction * n))
    ss = np.random.SeedSequence(seed)
    child = np.random.SeedSequence(ss.entropy, spawn_key=(2,), pool_size=ss.pool_size)
    perm = np.random.Generator(np.random.PCG64(child)).permutation(n)
    return np.sort(perm[:m]), np.sort(perm[m:])


def naive_adaptive(problem, name, *, steps, batch_size, trials=1, seed=0, sampling="poisson",
                   lr=0.01, clip=1.0, sigma=1.0, beta=0.9, beta1=0.9, beta2=0.999, eps=1e-8,
                   gamma=1e-8, eps_scale=1e-3, base="adam", k=2, public_fraction=0.0):
    """Single-trial reference for the post-processing, bias-corrected, IME, STP, oracle and
    public-data variants.  ``name`` is the dpsim optimizer name."""
    n, d, R, b = problem.n, problem.d, trials, float(batch_size)
    pub = priv = None
    if public_fraction:
        pub, priv = _public_split(seed, n, public_fraction)
        n = priv.size
    sampler, noise_rng = streams(seed, n, batch_size, trials, sampling)
    w = np.zeros((R, d))
    m = np.zeros((R, d))
    v = np.zeros((R, d))
    vs = np.zeros((R, d))  # STP privatizer's copy of v
    phi = (sigma * clip / b) ** 2
    for t in range(1, steps + 1):
        bi = sampler.draw()
        idx = bi.idx if priv is None else priv[bi.idx]
        n_draws = {"dp_adam_ime": 2, "dp_adam_ime_free": 2}.get(name, 1)
        Z = [noise_rng.standard_normal((R, d)) for _ in range(n_draws)] if sigma > 0 else None
        for r in range(R):
            gs = _batch_grads(problem, w[r], idx[r], bi.mask[r] if bi.mask is not None else None)
            if name in ("dp_adam_stp", "dp_adam_stp_noiseless_v"):
                s = 1.0 / (np.sqrt(np.maximum(vs[r], 0.0)) + eps_scale)
                tot = sum((clip_vec(s * g, clip) for g in gs), np.zeros(d))
                g_rel = (tot + (sigma * clip * Z[0][r] if Z else 0.0)) / b / s
                sq = (tot / (b * s)) ** 2 if name.endswith("noiseless_v") else g_rel ** 2
                vs[r] = (vs[r] + sq) if base == "adagrad" else beta2 * vs[r] + (1 - beta2) * sq
            elif name == "adadps":
                gp = np.mean([example_grad(problem, w[r], int(i)) for i in pub], axis=0)
                v[r] = beta * v[r] + (1 - beta) * gp ** 2
                D = np.sqrt(v[r]) + eps
                tot = sum((clip_vec(g / D, clip) for g in gs), np.zeros(d))
                w[r] = w[r] - lr * (tot + sigma * clip * Z[0][r]) / b
                continue
            else:
                tot = sum((clip_vec(g, clip) for g in gs), np.zeros(d))
                clean = tot / b
                if name == "dp_adam_ime":
                    s1 = s2 = math.sqrt(2.0) * sigma
                elif name == "dp_adam_ime_free":
                    s1 = s2 = sigma
                else:
                    s1, s2 = sigma, None
                g_rel = (tot + (s1 * clip * Z[0][r] if Z else 0.0)) / b
                if s2 is not None:
                    if sampling == "fixed":  # exactly b examples: the square of the mean as is
                        sens2 = (2 * b - 1) * clip ** 2 / b ** 2
                        u = clean
                    else:  # the mean projected onto the clip ball first, sensitivity 2C²/b
                        sens2 = 2 * clip ** 2 / b
                        u = clip_vec(clean, clip)
                    sq = u ** 2 + s2 * sens2 * Z[1][r]
                elif name.endswith("noiseless_v"):
                    sq = clean ** 2
                else:
                    sq = g_rel ** 2
            if name == "pdp_sgd":
                P = np.array([example_grad(problem, w[r], int(i)) for i in pub])
                evals, evecs = np.linalg.eigh(P.T @ P / len(pub))
                V = evecs[:, np.argsort(evals)[::-1][:k]]
                w[r] = w[r] - lr * (V @ (V.T @ g_rel))
                continue
            if name in ("dp_adagrad",):
                v[r] = v[r] + sq
                w[r] = w[r] - lr * g_rel / (np.sqrt(v[r]) + eps)
                continue
            if name in ("dp_rmsprop",):
                v[r] = beta * v[r] + (1 - beta) * sq
                w[r] = w[r] - lr * g_rel / (np.sqrt(v[r]) + eps)
                continue
            if name in ("dp_adam_stp", "dp_adam_stp_noiseless_v") and base != "adam":
                v[r] = (v[r] + sq) if base == "adagrad" else beta2 * v[r] + (1 - beta2) * sq
                vv = np.maximum(v[r], 0.0) if name.endswith("noiseless_v") else v[r]
                w[r] = w[r] - lr * g_rel / (np.sqrt(vv) + eps)
                continue
            # Adam family
            m[r] = beta1 * m[r] + (1 - beta1) * g_rel
            v[r] = beta2 * v[r] + (1 - beta2) * sq
            m_hat = m[r] / (1 - beta1 ** t)
            v_hat = v[r] / (1 - beta2 ** t)
            if name == "dp_adam_bc":
                step = m_hat / np.sqrt(np.maximum(v_hat - phi, gamma))
            elif name == "dp_adam_corrected":
                step = m_hat / (np.sqrt(np.maximum(v_hat - phi, 0.0)) + eps)
            elif name in ("dp_adam_ime", "dp_adam_ime_free") or name.endswith("noiseless_v"):
                step = m_hat / (np.sqrt(np.maximum(v_hat, 0.0)) + eps)
            else:  # dp_adam, dp_adam_stp over adam
                step = m_hat / (np.sqrt(v_hat) + eps)
            w[r] = w[r] - lr * step
        if problem.has_domain:
            w = np.asarray(problem.project(w))
    return w


def clip_vec(g, c):
    return clip(g, c)


def naive_dp2(problem, *, variant="dp2", rule="rmsprop", steps, batch_size, trials=1, seed=0,
              sampling="poisson", s1=3, s2=None, lr=0.1, lr2=None, clip=1.0, clip2=None,
              sigma=1.0, beta=0.9, eps=1e-8, unbias=False, private=True):
    """DP² ([DP2] Alg. 1), ablation variant 1 (Alg. 2), variant 2, and the non-private
    delayed preconditioner, one trial at a time, written from the paper's pseudo-code."""
    s2 = s1 if s2 is None else s2
    lr2 = lr if lr2 is None else lr2
    clip2 = clip if clip2 is None else clip2
    n, d, R, b = problem.n, problem.d, trials, float(batch_size)
    sampler, noise_rng = streams(seed, n, batch_size, trials, sampling)
    w = np.zeros((R, d))
    v = np.zeros((R, d))
    G = np.zeros((R, d))

    def v_update(vr, a):
        if rule == "rmsprop":
            return beta * vr + (1 - beta) * a
        if rule == "adagrad":
            return vr + a
        return vr - (1 - beta) * np.sign(vr - a) * a  # yogi

    def avg_sq(Gr):
        a = (Gr / s1) ** 2
        return a - sigma ** 2 * clip ** 2 / (s1 * b ** 2) if unbias else a

    for t in range(1, steps + 1):
        bi = sampler.draw()
        if variant == "extra_query":
            second = (t - 1) % s1 != 0
            Z1 = noise_rng.standard_normal((R, d))
            Z2 = noise_rng.standard_normal((R, d)) if second else None
        else:
            Z1 = noise_rng.standard_normal((R, d)) if private and sigma > 0 else None
        p = (t - 1) % (s1 + s2)
        for r in range(R):
            gs = _batch_grads(problem, w[r], bi.idx[r], bi.mask[r] if bi.mask is not None else None)
            if variant == "extra_query":
                g1 = (sum((clip_vec(g, clip) for g in gs), np.zeros(d)) + sigma * clip * Z1[r]) / b
                G[r] += g1
                if not second:
                    v[r] = v_update(v[r], avg_sq(G[r]))
                    G[r] = 0.0
                    w[r] = w[r] - lr * g1
                else:
                    D = np.sqrt(np.maximum(v[r], 0.0)) + eps  # unbiasing can make v negative
                    g2 = (sum((clip_vec(g / D, clip2) for g in gs), np.zeros(d)) + sigma * clip2 * Z2[r]) / b
                    w[r] = w[r] - lr2 * g2
                continue
            if p < s1:
                if private:
                    gt = sum((clip_vec(g, clip) for g in gs), np.zeros(d))
                    gt = (gt + (sigma * clip * Z1[r] if Z1 is not None else 0.0)) / b
                else:
                    gt = sum(gs, np.zeros(d)) / b
                G[r] += gt
                w[r] = w[r] - lr * gt
                continue
            if p == s1:
                v[r] = v_update(v[r], avg_sq(G[r]))
                G[r] = 0.0
            D = np.sqrt(np.maximum(v[r], 0.0)) + eps
            if not private:
                gt = sum(gs, np.zeros(d)) / b / D
            elif variant == "noise_first":
                gt = (sum((clip_vec(g, clip2) for g in gs), np.zeros(d)) + sigma * clip2 * Z1[r]) / b / D
            else:
                gt = (sum((clip_vec(g / D, clip2) for g in gs), np.zeros(d)) + sigma * clip2 * Z1[r]) / b
            w[r] = w[r] - lr2 * gt
    return w
