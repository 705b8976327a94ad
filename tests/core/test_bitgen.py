"""The inlined PCG64 bit generator and distributions (:mod:`dpsim._bitgen`) against NumPy itself.

Every check is exact (``assert_array_equal`` on the values, ``==`` on the ``bit_generator.state``
dicts afterwards): the fused kernel's runs are the engine's runs only if each draw, and the
position of the stream after it, is NumPy's.  NumPy's reference draws are made both one at a time
and vectorized (``size=``), the two ways the engine and the kernel consume the streams.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

from dpsim import _bitgen as B

SEEDS = [0, 1, 7, 11, 12345, 2**63 + 5, 987654321987654321]


def _pair(seed, advance32=0):
    """Two identical ``Generator(PCG64)``, after ``advance32`` buffered 32-bit draws (an odd count
    leaves a half word in the buffer: ``has_uint32 = 1``)."""
    g = [np.random.Generator(np.random.PCG64(seed)) for _ in range(2)]
    for x in g:
        if advance32:
            x.integers(0, 1000, size=advance32, dtype=np.uint32)
    return g


@numba.njit(cache=True)
def _fill(st, what, k, a, b):
    """``k`` draws of one kind on the state array ``st`` (through the ``draw_*`` dispatch)."""
    out = np.empty(k)
    if what == 0:
        for i in range(k):
            out[i] = B.draw_double(st)
    elif what == 1:
        for i in range(k):
            out[i] = B.draw_normal(st)
    elif what == 2:
        bp = B.binomial_setup(np.int64(a), b)
        tab = B.binomial_table(bp)
        for i in range(k):
            out[i] = B.draw_binomial(st, bp, tab)
    elif what == 3:  # without the table of BTPE's explicit ratios
        bp = B.binomial_setup(np.int64(a), b)
        for i in range(k):
            out[i] = B.binomial(st, bp, np.zeros(0))
    return out


@numba.njit(cache=True)
def _fill_int(st, k, low, high):
    out = np.empty(k, dtype=np.int64)
    for i in range(k):
        out[i] = B.draw_integers(st, low, high)
    return out


@numba.njit(cache=True)
def _fill_gen(rng, what, k, a, b):
    """The same loop on a NumPy ``Generator`` (Numba's compiled methods, through the dispatch)."""
    out = np.empty(k)
    if what == 0:
        for i in range(k):
            out[i] = B.draw_double(rng)
    elif what == 1:
        for i in range(k):
            out[i] = B.draw_normal(rng)
    elif what == 2:
        bp = B.binomial_setup(np.int64(a), b)
        tab = B.binomial_table(bp)
        for i in range(k):
            out[i] = B.draw_binomial(rng, bp, tab)
    return out


@numba.njit(cache=True)
def _words(st, k):
    """``k`` raw 64-bit words, then ``k`` 32-bit draws."""
    a = np.empty(k, dtype=np.uint64)
    b = np.empty(k, dtype=np.uint32)
    for i in range(k):
        a[i] = B.next_uint64(st)
    for i in range(k):
        b[i] = B.next_uint32(st)
    return a, b


def _run(g, fn, *args):
    st = B.state_of(g)
    out = fn(st, *args)
    B.store_state(g, st)
    return out


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("advance32", [0, 1])
def test_doubles_and_normals(seed, advance32):
    g, ref = _pair(seed, advance32)
    for k in (1, 2, 17, 4000):
        np.testing.assert_array_equal(_run(g, _fill, 0, k, 0, 0.0), ref.random(k))
        assert g.bit_generator.state == ref.bit_generator.state
        np.testing.assert_array_equal(_run(g, _fill, 1, k, 0, 0.0), ref.standard_normal(k))
        assert g.bit_generator.state == ref.bit_generator.state


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_fill_normals_is_numpys_fill(seed):
    """``fill_normals`` (the blocked noise layout's block fill) = ``standard_normal(out=...)``:
    values and final state, after buffered half words; float32 and other generators fall back to
    NumPy's own fill."""
    g, ref = _pair(seed, 1)
    for k in (1, 5, 65536):
        out = np.empty(k)
        B.fill_normals(g, out)
        want = np.empty(k)
        ref.standard_normal(out=want)
        np.testing.assert_array_equal(out, want)
        assert g.bit_generator.state == ref.bit_generator.state
    out32, want32 = np.empty(7, dtype=np.float32), np.empty(7, dtype=np.float32)
    B.fill_normals(g, out32)
    ref.standard_normal(out=want32, dtype=np.float32)
    np.testing.assert_array_equal(out32, want32)
    assert g.bit_generator.state == ref.bit_generator.state
    m1, m2 = (np.random.Generator(np.random.MT19937(seed)) for _ in range(2))
    a, b = np.empty(9), np.empty(9)
    B.fill_normals(m1, a)
    m2.standard_normal(out=b)
    np.testing.assert_array_equal(a, b)


def test_normal_rare_branches_are_exercised():
    """2·10^5 normals hit the wedge tests of the ziggurat and its tail (layer 0) many times."""
    g, ref = _pair(3)
    k = 200_000
    z = _run(g, _fill, 1, k, 0, 0.0)
    np.testing.assert_array_equal(z, ref.standard_normal(k))
    assert g.bit_generator.state == ref.bit_generator.state
    assert np.sum(np.abs(z) > B._ZIG_R) >= 10  # tail draws (beyond the base layer's edge)


BINOMIALS = [(1000, 0.032), (1000, 0.01), (1000, 0.03), (1000, 0.031), (200, 0.9), (5, 0.5),
             (1, 0.3), (0, 0.4), (50, 0.0), (40, 1.0), (10**6, 0.4), (10**6, 0.999), (333, 0.09),
             (100_000, 3e-4), (2**40, 1e-9)]


@pytest.mark.parametrize("n,p", BINOMIALS)
def test_binomial_every_branch(n, p):
    """Inversion (``n·min(p,1−p) ≤ 30``) and BTPE (with and without the table of its explicit
    ratios), ``p`` on both sides of 1/2, ``n = 0``, ``p ∈ {0, 1}``; against NumPy's scalar and
    vectorized draws."""
    for seed in SEEDS[:4]:
        g, ref = _pair(seed)
        k = 3000
        x = _run(g, _fill, 2, k, n, p)
        np.testing.assert_array_equal(x, ref.binomial(n, p, size=k))
        assert g.bit_generator.state == ref.bit_generator.state
        x = _run(g, _fill, 2, 5, n, p)
        np.testing.assert_array_equal(x, [ref.binomial(n, p) for _ in range(5)])
        assert g.bit_generator.state == ref.bit_generator.state
        x = _run(g, _fill, 3, k, n, p)  # the loop instead of the table: the same draws
        np.testing.assert_array_equal(x, ref.binomial(n, p, size=k))
        assert g.bit_generator.state == ref.bit_generator.state


def test_binomial_btpe_rare_branches_are_exercised():
    """Large ``n·p``: the squeeze and Stirling tests (``|y − m| > 20``) are reached."""
    g, ref = _pair(5)
    n, p = 10**7, 0.3
    k = 20000
    x = _run(g, _fill, 2, k, n, p)
    np.testing.assert_array_equal(x, ref.binomial(n, p, size=k))
    assert g.bit_generator.state == ref.bit_generator.state
    assert np.sum(np.abs(x - n * p) > 20) > k // 2


def test_binomial_table_is_the_loop():
    """Every entry of :func:`binomial_table` equals BTPE's explicit loop for that ``y``, bit for
    bit (and NaN outside ``[0, n]``)."""
    for n, p in ((1000, 0.032), (500, 0.9), (100, 0.5), (10**6, 0.4), (70, 0.5)):
        bp = B.binomial_setup(n, p)
        assert bp[0] == 2  # BTPE
        tab = B.binomial_table(bp)
        n_, r, q, m = bp[2], bp[3], bp[4], int(bp[6])
        s = r / q
        a = s * (n_ + 1)
        for k in range(-B.TABLE_HALF, B.TABLE_HALF + 1):
            y = m + k
            F = 1.0
            if m < y:
                for i in range(m + 1, y + 1):
                    F = F * (a / i - s)
            elif m > y:
                for i in range(y + 1, m + 1):
                    F = F / (a / i - s)
            if 0 <= y <= n_:
                assert tab[k + B.TABLE_HALF] == F
            else:
                assert np.isnan(tab[k + B.TABLE_HALF])


INTEGER_RANGES = [(0, 1), (0, 2), (0, 7), (0, 1000), (3, 1003), (-50, 50), (0, 2**31 + 3),
                  (0, 2**32 - 1), (0, 2**32), (0, 2**32 + 1), (5, 2**33), (0, 2**62 + 12345),
                  (-2**63, 2**63 - 1)]


@pytest.mark.parametrize("low,high", INTEGER_RANGES)
@pytest.mark.parametrize("advance32", [0, 1])
def test_integers_every_range(low, high, advance32):
    """``integers(low, high)`` (int64): no draw for one value, Lemire on buffered 32-bit draws
    below 2³² − 1, one 32-bit draw at exactly 2³² − 1, Lemire on 64-bit words above."""
    for seed in SEEDS[:4]:
        g, ref = _pair(seed, advance32)
        for k in (1, 3, 2001):
            x = _run(g, _fill_int, k, low, high)
            np.testing.assert_array_equal(x, ref.integers(low, high, size=k, dtype=np.int64))
            assert g.bit_generator.state == ref.bit_generator.state


@pytest.mark.parametrize("seed", SEEDS)
def test_interleaved_draws(seed):
    """A random program of the four draws (in runs of random length), on the state array and on
    NumPy one call at a time: the same values and the same final state (the 32-bit buffer is
    carried across doubles, normals and binomials, which do not use it)."""
    plan = np.random.default_rng(seed % 1000)
    g, ref = _pair(seed, advance32=int(plan.integers(0, 2)))
    for _ in range(60):
        what = int(plan.integers(0, 4))
        k = int(plan.integers(1, 6))
        if what == 3:
            lo, hi = [(0, 1000), (0, 13), (0, 2**32), (0, 2**40), (0, 1)][int(plan.integers(0, 5))]
            np.testing.assert_array_equal(_run(g, _fill_int, k, lo, hi),
                                          [ref.integers(lo, hi) for _ in range(k)])
        elif what == 2:
            n, p = BINOMIALS[int(plan.integers(0, len(BINOMIALS)))]
            np.testing.assert_array_equal(_run(g, _fill, 2, k, n, p),
                                          [ref.binomial(n, p) for _ in range(k)])
        elif what == 1:
            np.testing.assert_array_equal(_run(g, _fill, 1, k, 0, 0.0),
                                          [ref.standard_normal() for _ in range(k)])
        else:
            np.testing.assert_array_equal(_run(g, _fill, 0, k, 0, 0.0),
                                          [ref.random() for _ in range(k)])
        assert g.bit_generator.state == ref.bit_generator.state


def test_dispatch_generator_path_is_the_same_stream():
    """The ``draw_*`` dispatch on a NumPy ``Generator`` (Numba's compiled methods, the reference
    path of the kernel) and on the state array give the same values and states."""
    for what, a, b in ((0, 0, 0.0), (1, 0, 0.0), (2, 1000, 0.032), (2, 1000, 0.01), (2, 30, 0.8)):
        g1, g2 = _pair(21, advance32=1)
        np.testing.assert_array_equal(_fill_gen(g1, what, 999, a, b), _run(g2, _fill, what, 999, a, b))
        assert g1.bit_generator.state == g2.bit_generator.state


def test_raw_words_and_python_reference():
    """``next_uint64``/``next_uint32``/``next_double`` against the bit generator's own raw
    outputs, and the pure-Python statement of the 128-bit step (the NUMBA_DISABLE_JIT stand-in)."""

    for seed in SEEDS:
        bg = np.random.PCG64(seed)
        st = B.state_of(np.random.Generator(bg))
        st2 = st.copy()
        a, b = _words(st, 101)
        np.testing.assert_array_equal(a, bg.random_raw(101))
        # 101 32-bit draws = 51 words: lows and highs alternate, the last high half buffered
        w = bg.random_raw(51)
        halves = np.stack([w & 0xFFFFFFFF, w >> np.uint64(32)], axis=1).reshape(-1)[:101]
        np.testing.assert_array_equal(b, halves.astype(np.uint32))
        assert st[4] == 1 and st[5] == w[-1] >> np.uint64(32)
        np.testing.assert_array_equal([B._py_next_uint64(st2) for _ in range(101)], a)


def test_state_round_trip_and_refusals():
    g = np.random.Generator(np.random.PCG64(99))
    g.integers(0, 10, dtype=np.uint32)  # a buffered half word
    before = g.bit_generator.state
    st = B.state_of(g)
    assert st.dtype == np.uint64 and st.shape == (B.WORDS,) and st[4] == 1
    B.store_state(g, st)
    assert g.bit_generator.state == before
    assert not B.supports(np.random.Generator(np.random.Philox(1)))
    assert not B.supports(np.random.RandomState(1))
    with pytest.raises(TypeError, match="Philox"):
        B.state_of(np.random.Generator(np.random.Philox(1)))
    with pytest.raises(TypeError, match="PCG64DXSM"):
        B.state_of(np.random.Generator(np.random.PCG64DXSM(1)))
