"""Samplers: exact Poisson batch sizes, uniform subsets, fixed size, with replacement."""

import numpy as np
import pytest
from scipy import stats

from dpsim.sampling import Sampler, _uniform_subsets

LEVEL = 1e-6  # false-alarm probability of each statistical assertion (fixed seeds anyway)


def _draws(sampling, n, b, R, steps, seed=0):
    s = Sampler(sampling, n, b, R, np.random.SeedSequence(seed))
    return [s.draw() for _ in range(steps)]


@pytest.mark.parametrize("n,b", [(1000, 20), (50, 30), (10, 10)])
def test_poisson_batch_sizes_are_binomial(n, b):
    """Batch sizes follow Binomial(n, b/n): chi-square goodness of fit, not rounded to b."""
    draws = _draws("poisson", n, b, 200, 50)
    sizes = np.concatenate([d.sizes for d in draws])
    q = b / n
    if q == 1.0:
        assert np.all(sizes == n)
        return
    assert len(np.unique(sizes)) > 3  # they vary
    dist = stats.binom(n, q)
    lo, hi = int(dist.ppf(1e-4)), int(dist.ppf(1 - 1e-4))
    edges = np.arange(lo, hi + 2)
    obs = np.array([np.sum(sizes < lo)] + [np.sum(sizes == k) for k in edges[:-1]] + [np.sum(sizes > hi)])
    exp = np.concatenate([[dist.cdf(lo - 1)], dist.pmf(edges[:-1]), [dist.sf(hi)]]) * sizes.size
    keep = exp > 5
    obs_k = np.append(obs[keep], obs[~keep].sum())
    exp_k = np.append(exp[keep], exp[~keep].sum())
    stat = np.sum((obs_k - exp_k) ** 2 / np.maximum(exp_k, 1e-300))
    assert stat < stats.chi2.ppf(1 - LEVEL, obs_k.size - 1)


@pytest.mark.parametrize("sampling", ["poisson", "fixed"])
@pytest.mark.parametrize("n,b", [(500, 16), (40, 25)])
def test_batches_are_distinct_and_uniform(sampling, n, b):
    draws = _draws(sampling, n, b, 100, 40, seed=3)
    counts = np.zeros(n)
    for d in draws:
        mask = np.ones_like(d.idx, dtype=bool) if d.mask is None else d.mask
        np.testing.assert_array_equal(mask.sum(axis=1), d.sizes)
        for r in range(d.idx.shape[0]):
            row = d.idx[r][mask[r]]
            assert row.size == np.unique(row).size  # without replacement
            assert row.min() >= 0 and row.max() < n
            counts[row] += 1
        if sampling == "fixed":
            assert np.all(d.sizes == b) and d.mask is None
    # every example equally likely: chi-square on inclusion counts
    exp = counts.sum() / n
    stat = np.sum((counts - exp) ** 2 / exp)
    assert stat < stats.chi2.ppf(1 - LEVEL, n - 1)


def test_uniform_subsets_pairs_are_uniform():
    """All 2-subsets of {0..4} equally likely (tests joint uniformity, not only marginals)."""
    rng = np.random.default_rng(0)
    sub = _uniform_subsets(rng, 5, np.full(20000, 2))
    pairs = np.sort(sub, axis=1)
    code = pairs[:, 0] * 5 + pairs[:, 1]
    _, cnt = np.unique(code, return_counts=True)
    assert cnt.size == 10
    exp = 20000 / 10
    assert np.sum((cnt - exp) ** 2 / exp) < stats.chi2.ppf(1 - LEVEL, 9)


def test_small_batches_of_large_n_are_jointly_uniform():
    """Batches much smaller than n are jointly uniform too: all C(12, 3) = 220 unordered
    3-subsets equally likely (the order within a row is Floyd's insertion order, not a uniform
    permutation; every consumer sums over the batch)."""
    rng = np.random.default_rng(1)
    sub = np.sort(_uniform_subsets(rng, 12, np.full(30000, 3)), axis=1)
    assert np.all(sub[:, 0] != sub[:, 1]) and np.all(sub[:, 1] != sub[:, 2])
    code = (sub[:, 0] * 12 + sub[:, 1]) * 12 + sub[:, 2]
    _, cnt = np.unique(code, return_counts=True)
    assert cnt.size == 220
    exp = 30000 / 220
    assert np.sum((cnt - exp) ** 2 / exp) < stats.chi2.ppf(1 - LEVEL, 219)


def test_replacement_sampling():
    d = _draws("replacement", 30, 20, 500, 1)[0]
    assert d.idx.shape == (500, 20) and d.mask is None
    # with replacement: repeats happen (P(no repeat) ≈ 0 for 20 of 30)
    assert np.any([np.unique(r).size < 20 for r in d.idx])


def test_sampler_is_deterministic_in_seed():
    a = _draws("poisson", 100, 10, 4, 3, seed=5)
    b = _draws("poisson", 100, 10, 4, 3, seed=5)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.idx, y.idx)


@pytest.mark.parametrize("b", [0, -3, 101, 2.5])
def test_bad_batch_size(b):
    with pytest.raises(ValueError, match="batch_size"):
        Sampler("poisson", 100, b, 2, 0)


# ---- the existing streams are unchanged; cyclic Poisson sampling --------------------------------

def _digest(sampling, n, b, R, steps, seed):
    import hashlib

    h = hashlib.sha256()
    for d in _draws(sampling, n, b, R, steps, seed):
        h.update(np.ascontiguousarray(d.idx, dtype=np.int64).tobytes())
        h.update(np.ascontiguousarray(d.sizes, dtype=np.int64).tobytes())
        h.update(b"none" if d.mask is None else np.ascontiguousarray(d.mask).tobytes())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("args,expected", [
    (("poisson", 1000, 20, 7, 30, 11), "a0dbdfbeaca5c146"),
    (("poisson", 50, 30, 5, 20, 12), "3eff17a16810dfe0"),
    (("fixed", 500, 16, 6, 25, 13), "05719276f9831ef7"),
    (("fixed", 40, 25, 4, 10, 14), "b20df8c14816a864"),
    (("replacement", 300, 9, 5, 20, 15), "aaec81e1a2d53855"),
])
def test_existing_streams_are_bit_identical(args, expected):
    """Pinned streams: ``replacement`` as before cyclic Poisson sampling was added (commit
    78b317e); ``poisson`` and ``fixed`` since their indices come from the O(R·b) Floyd kernel
    (stream ``floyd-v1``; the batch sizes are drawn as before; statistical equivalence in this
    file and ``tests/core/test_sampling_kernels.py``).  A change of any digest is a changed stream."""
    assert _digest(*args) == expected


def test_cyclic_poisson_1_is_poisson():
    a = _draws("poisson", 200, 12, 6, 15, seed=9)
    b = _draws("cyclic_poisson:1", 200, 12, 6, 15, seed=9)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.idx, y.idx)
        np.testing.assert_array_equal(x.sizes, y.sizes)
        assert (x.mask is None) == (y.mask is None)
        if x.mask is not None:
            np.testing.assert_array_equal(x.mask, y.mask)


@pytest.mark.parametrize("n,b,k", [(103, 5, 4), (64, 4, 16), (30, 3, 10)])
def test_cyclic_poisson_samples_one_group_per_step(n, b, k):
    """Step t draws distinct members of group (t-1) mod k only; padded slots hold 0."""
    draws = _draws(f"cyclic_poisson:{k}", n, b, 50, 2 * k + 3, seed=4)
    for t, d in enumerate(draws, start=1):
        g = (t - 1) % k
        mask = np.ones_like(d.idx, dtype=bool) if d.mask is None else d.mask
        np.testing.assert_array_equal(mask.sum(axis=1), d.sizes)
        assert np.all(d.idx[~mask] == 0)
        for r in range(d.idx.shape[0]):
            row = d.idx[r][mask[r]]
            assert np.all(row % k == g) and np.all((row >= 0) & (row < n))
            assert row.size == np.unique(row).size


def test_cyclic_poisson_group_sizes_are_binomial():
    """Group g's batch size is Binomial(n_g, q_k) with n_g = ceil((n-g)/k), q_k = b k / n: the
    mean over 4000 draws per group inside a 1e-6 normal interval (fixed seed)."""
    n, b, k, R = 103, 5, 4, 1000
    draws = _draws(f"cyclic_poisson:{k}", n, b, R, 4 * k, seed=6)
    q = b * k / n
    for g in range(k):
        sizes = np.concatenate([d.sizes for t, d in enumerate(draws) if t % k == g])
        n_g = len(range(g, n, k))
        mean, sd = n_g * q, np.sqrt(n_g * q * (1 - q) / sizes.size)
        assert abs(sizes.mean() - mean) < stats.norm.ppf(1 - LEVEL / 2) * sd


@pytest.mark.parametrize("sampling,n,b,match", [
    ("cyclic_poisson:0", 100, 5, "k >= 1"),
    ("cyclic_poisson:-2", 100, 5, "k >= 1"),
    ("cyclic_poisson:x", 100, 5, "cyclic_poisson:x"),
    ("cyclic_poisson", 100, 5, "'cyclic_poisson'"),
    ("cyclic_poisson:2.5", 100, 5, "cyclic_poisson:2.5"),
    ("cyclic_poisson:101", 100, 1, "k=101 groups"),
    ("cyclic_poisson:30", 100, 5, "batch_size\\*k = 150 <= n = 100"),
    ("cyclic", 100, 5, "unknown sampling 'cyclic'"),
    (4, 100, 5, "sampling=4"),
])
def test_bad_cyclic_sampling(sampling, n, b, match):
    with pytest.raises(ValueError, match=match):
        Sampler(sampling, n, b, 2, 0)
