"""The O(R·b) subset kernel of :mod:`dpsim._sampling_kernels` (stream ``floyd-v1``): validity,
determinism, and statistical equivalence with uniform sampling without replacement and with
Poisson sampling (fixed seeds; thresholds are tail probabilities of the exact null
distributions, so a correct sampler fails a check with probability about 1e-4 per seed, and the
seeds are fixed)."""

from __future__ import annotations

import itertools
import numpy as np
import pytest
from scipy import stats

from dpsim._sampling_kernels import floyd_fill, uniform_subsets

P_MIN = 1e-4  # a check fails only below this p-value


def _rows_valid(out, sizes, n):
    for r, k in enumerate(sizes):
        row = out[r, :k]
        assert row.size == len(set(row.tolist())) == k
        assert (row >= 0).all() and (row < n).all()
        assert (out[r, k:] == 0).all()


def test_valid_rows_edge_sizes():
    rng = np.random.default_rng(0)
    n = 37
    sizes = np.array([0, 1, 5, 36, 37, 2, 0, 37], dtype=np.int64)
    out = uniform_subsets(rng, n, sizes)
    assert out.shape == (8, 37)
    _rows_valid(out, sizes, n)
    assert sorted(out[4].tolist()) == list(range(n))  # k = n: everything


def test_all_empty_and_no_trials():
    rng = np.random.default_rng(0)
    assert uniform_subsets(rng, 10, np.zeros(3, dtype=np.int64)).shape == (3, 0)
    assert uniform_subsets(rng, 10, np.zeros(0, dtype=np.int64)).shape == (0, 0)


def test_bad_sizes_named():
    with pytest.raises(ValueError, match="batch sizes"):
        uniform_subsets(np.random.default_rng(0), 5, np.array([6]))


def test_consumes_exactly_sum_of_sizes_uniforms():
    """The stream contract: one uniform per drawn index, from the caller's generator."""
    sizes = np.array([3, 0, 7, 2], dtype=np.int64)
    a = np.random.default_rng(5)
    uniform_subsets(a, 50, sizes)
    b = np.random.default_rng(5)
    b.random(12)
    assert a.random() == b.random()


def test_deterministic_and_matches_reference_floyd():
    """Same seed → same batches; the kernel equals a plain-Python Floyd on the same uniforms."""
    n = 20
    sizes = np.array([4, 9, 1, 20], dtype=np.int64)
    out1 = uniform_subsets(np.random.default_rng(3), n, sizes)
    out2 = uniform_subsets(np.random.default_rng(3), n, sizes)
    np.testing.assert_array_equal(out1, out2)
    u = np.random.default_rng(3).random(int(sizes.sum()))
    pos = 0
    for r, k in enumerate(sizes):
        chosen = []
        for i in range(k):
            j = n - k + i
            t = min(int(u[pos + i] * (j + 1)), j)
            chosen.append(j if t in chosen else t)
        pos += k
        assert out1[r, :k].tolist() == chosen


def test_fill_returns_count():
    out = np.empty((2, 3), dtype=np.int64)
    assert floyd_fill(10, np.array([3, 2], dtype=np.int64), np.full(5, 0.5), out) == 5


def test_fixed_size_inclusion_frequencies():
    """Every index is included with probability k/n.  For R independent uniform k-subsets the
    counts c_i have covariance R p(1−p) n/(n−1) (I − 11ᵀ/n) (p = k/n), so
    Σ (c_i − Rp)² / (Rp) · (n−1)/(n(1−p)) is χ²(n−1) in the large-R limit."""
    n, k, R = 60, 12, 20_000
    out = uniform_subsets(np.random.default_rng(11), n, np.full(R, k, dtype=np.int64))
    counts = np.bincount(out.ravel(), minlength=n)
    p = k / n
    E = R * p
    X = np.sum((counts - E) ** 2) / E * (n - 1) / (n * (1 - p))
    assert stats.chi2.sf(X, n - 1) > P_MIN
    assert stats.chi2.cdf(X, n - 1) > P_MIN  # not suspiciously uniform either


def test_subsets_uniform():
    """All C(6, 3) = 20 subsets are equally likely: multinomial χ²(19) on their counts."""
    n, k, R = 6, 3, 40_000
    out = uniform_subsets(np.random.default_rng(12), n, np.full(R, k, dtype=np.int64))
    keys = {s: i for i, s in enumerate(itertools.combinations(range(n), k))}
    counts = np.zeros(len(keys))
    for row in np.sort(out, axis=1):
        counts[keys[tuple(row.tolist())]] += 1
    res = stats.chisquare(counts)
    assert res.pvalue > P_MIN


def test_poisson_inclusion_independent_bernoulli():
    """Binomial(n, q) sizes + a uniform subset = Poisson sampling: each index included
    independently with probability q.  Counts over R trials are independent Binomial(R, q):
    Σ (c_i − Rq)² / (Rq(1−q)) ~ χ²(n); a pair's joint inclusion has probability q²
    (two-sided binomial test)."""
    n, q, R = 40, 0.2, 20_000
    rng = np.random.default_rng(13)
    sizes = rng.binomial(n, q, size=R).astype(np.int64)
    out = uniform_subsets(rng, n, sizes)
    mask = np.arange(out.shape[1])[None, :] < sizes[:, None]
    incl = np.zeros((R, n), dtype=bool)
    rows = np.repeat(np.arange(R), mask.sum(axis=1))
    incl[rows, out[mask]] = True
    c = incl.sum(axis=0)
    X = np.sum((c - R * q) ** 2) / (R * q * (1 - q))
    assert stats.chi2.sf(X, n) > P_MIN
    both = int(np.sum(incl[:, 0] & incl[:, n - 1]))
    assert stats.binomtest(both, R, q * q).pvalue > P_MIN
    # the last index (chosen by Floyd's "t in S → j" branch most often) is not favoured
    assert stats.binomtest(int(c[n - 1]), R, q).pvalue > P_MIN


def test_large_n_bitmap_words():
    """n not a multiple of 64 and many words: no index out of range, no stale bits across
    trials (a stale bit would duplicate or skip values)."""
    rng = np.random.default_rng(14)
    n = 64 * 5 + 3
    sizes = rng.integers(0, n + 1, size=300).astype(np.int64)
    sizes[::50] = n
    out = uniform_subsets(rng, n, sizes)
    _rows_valid(out, sizes, n)
    assert (np.sort(out[sizes == n], axis=1) == np.arange(n)).all()


def test_subsets_and_mask_is_the_same_stream():
    """The samplers' one-call path draws the same indices as :func:`uniform_subsets`; the mask
    marks the real slots and is None when every row is full."""
    from dpsim._sampling_kernels import subsets_and_mask

    sizes = np.array([3, 0, 5, 5], dtype=np.int64)
    idx, mask = subsets_and_mask(np.random.default_rng(2), 30, sizes)
    np.testing.assert_array_equal(idx, uniform_subsets(np.random.default_rng(2), 30, sizes))
    np.testing.assert_array_equal(mask, np.arange(5)[None, :] < sizes[:, None])
    idx, mask = subsets_and_mask(np.random.default_rng(2), 30, np.full(4, 5, dtype=np.int64))
    assert mask is None and idx.shape == (4, 5)
