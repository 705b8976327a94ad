"""Amplified accounting for banded DP-MF under cyclic Poisson sampling (issue 9, Build 3).

The reduction (derived in :mod:`dpsim.privacy.mf`; Choquette-Choo, McMahan, Rush & Thakurta,
"(Amplified) Banded Matrix Factorization", NeurIPS 2023): under ``sampling="cyclic_poisson:k"``
a strategy of bandwidth ``w ≤ k`` with noise multiplier σ costs what DP-SGD with σ, sampling rate
``q_k = k·b/n`` and ``⌈T/k⌉`` steps costs.  Checked here:

(a) ``banded:1`` and identity noise under ``cyclic_poisson:1`` give exactly DP-SGD's ε under
    ``poisson`` (same σ, q, T), with both accountants;
(b) for larger k, against references that do not go through dpsim's accounting code: a
    ``dp_accounting`` event built here from the reduction (PLD and RDP), and the numbers published
    in jax_privacy's documentation of its DP-SGD event — ``dpsgd_event(noise_multiplier=3,
    iterations=512, sampling_prob=0.1)`` gives ε = 3.77 at δ = 1e-6 with the PLD accountant, and
    σ = 9.66 for ε = 1 — which jax_privacy's ``amplified_bandmf_event(σ, 512·k, num_bands=k,
    sampling_prob=0.1)`` reduces to (``jax_privacy/experimental/accounting.py``);
(c) by simulation, that the cyclic sampler produces the participation the accountant assumes;
(d) that the accountant really checks the band structure: a strategy whose bandwidth exceeds k
    (or a full ``sqrt_toeplitz``) falls back to the unamplified bound, labelled.
"""

import math

import dp_accounting
import numpy as np
import pytest
from scipy import stats

import dpsim
from dpsim import accounting, optimizers, problems
from dpsim.calibrate import epsilon_for
from dpsim.privacy import mf
from dpsim.sampling import Sampler

DELTA = 1e-5
LEVEL = 1e-6  # false-alarm probability of each statistical assertion (fixed seeds anyway)


def _eps(noise, sampling, *, sigma, steps, b, n, delta=DELTA, accountant="pld", name="dp_sgd"):
    opt = optimizers.get(name, noise_multiplier=sigma, noise=noise)
    return epsilon_for(opt, delta=delta, steps=steps, batch_size=b, n=n, sampling=sampling,
                       accountant=accountant)


# ---- (a) k = 1 is DP-SGD ----------------------------------------------------------------------

@pytest.mark.parametrize("accountant", ["pld", "rdp"])
@pytest.mark.parametrize("noise", ["gaussian", "identity", "banded:1"])
def test_band_one_under_cyclic_one_is_dp_sgd(noise, accountant):
    sigma, T, b, n = 1.1, 60, 10, 400
    expect = accounting.epsilon(sigma, b / n, T, DELTA, accountant=accountant)
    for sampling in ("cyclic_poisson:1", "poisson"):
        got = _eps(noise, sampling, sigma=sigma, steps=T, b=b, n=n, accountant=accountant)
        assert got == expect, (noise, sampling)


def test_band_one_simulated_run_is_dp_sgd():
    """Through the engine: the draws of cyclic_poisson:1 are poisson's, banded:1's noise is DP-SGD's,
    and the recorded ε is DP-SGD's, labelled amplified."""
    prob = problems.logistic_regression(300, 4, seed=1)
    kw = dict(steps=25, batch_size=12, trials=3, seed=7)
    sgd = dpsim.simulate(prob, optimizers.get("dp_sgd", noise_multiplier=0.9), **kw)
    mf1 = dpsim.simulate(prob, optimizers.get("dp_sgd", noise_multiplier=0.9, noise="banded:1"),
                         sampling="cyclic_poisson:1", **kw)
    np.testing.assert_array_equal(sgd.params, mf1.params)
    assert mf1.epsilon(DELTA) == sgd.epsilon(DELTA)
    assert mf1.privacy["correlated_accounting"] == "amplified"
    assert mf1.privacy_report(DELTA)["correlated"] == "amplified"


# ---- (b) independent references for larger k --------------------------------------------------

@pytest.mark.parametrize("k,noise", [(4, "banded:3"), (16, "banded:16")])
def test_amplified_epsilon_matches_a_direct_dp_accounting_event(k, noise):
    """The reduction built here with dp_accounting alone: PoissonSampled(q_k, Gaussian(σ))
    composed ⌈T/k⌉ times (T not a multiple of k, so the ceiling matters)."""
    sigma, T, b, n = 1.3, 203, 8, 1000
    q_k = b * k / n
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q_k, dp_accounting.GaussianDpEvent(sigma)), -(-T // k))
    pld = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    ref_pld = pld.compose(event).get_epsilon(DELTA)
    got = _eps(noise, f"cyclic_poisson:{k}", sigma=sigma, steps=T, b=b, n=n)
    # dpsim refines the PLD grid until two successive values agree to 1e-3 (both upper bounds)
    assert got == pytest.approx(ref_pld, rel=2e-3)
    rdp = dp_accounting.rdp.RdpAccountant(list(accounting.RDP_ORDERS))
    ref_rdp = rdp.compose(event).get_epsilon(DELTA)
    got_rdp = _eps(noise, f"cyclic_poisson:{k}", sigma=sigma, steps=T, b=b, n=n, accountant="rdp")
    assert got_rdp == pytest.approx(ref_rdp, rel=1e-12)


def test_amplified_epsilon_matches_jax_privacy_published_number():
    """jax_privacy documents ε = 3.77 (δ = 1e-6, PLD) for DP-SGD with σ = 3, q = 0.1, 512 steps,
    which its ``amplified_bandmf_event`` uses for BandMF with k bands and 512·k iterations at
    per-group rate 0.1.  Here: k = 4, n = 4000, b = 100 (q_k = 4·100/4000 = 0.1), T = 2048."""
    got = _eps("banded:4", "cyclic_poisson:4", sigma=3.0, steps=2048, b=100, n=4000, delta=1e-6)
    assert round(got, 2) == 3.77


def test_amplified_calibration_matches_jax_privacy_published_number():
    """jax_privacy's documented calibration: σ = 9.66 for ε = 1, δ = 1e-6, q = 0.1, 512 steps —
    here ``accounting.noise_multiplier`` with ``cyclic_poisson:4`` at nominal rate 0.025 over 2048
    steps (``dpsim.calibrate`` under cyclic sampling is in tests/core/test_calibrate.py)."""
    sigma = accounting.noise_multiplier(1.0, 1e-6, 0.025, 2048, sampling="cyclic_poisson:4")
    assert round(sigma, 2) == 9.66


def test_accounting_epsilon_takes_cyclic_sampling():
    """``accounting.epsilon``/``noise_multiplier`` with cyclic sampling: ⌈T/k⌉ steps at k·q."""
    assert accounting.epsilon(1.5, 0.01, 100, DELTA, sampling="cyclic_poisson:8") == \
        accounting.epsilon(1.5, 0.08, 13, DELTA)
    with pytest.raises(ValueError, match="group"):
        accounting.epsilon_from_releases([((1.0,), 10)], 0.01, DELTA, sampling="cyclic_poisson:2")


# ---- (c) the sampler's participation is what the accountant assumes ---------------------------

@pytest.mark.parametrize("n,b,k,T", [(97, 3, 4, 30), (64, 2, 16, 40), (60, 4, 12, 25)])
def test_cyclic_participation_matches_the_accountant(n, b, k, T):
    """Over R trials: every example takes part at most ⌈T/k⌉ times, any two of its steps at least
    k apart (in fact a multiple of k); the pooled inclusion rate over its opportunities (the steps
    of its group) is q_k = bk/n inside a two-sided Clopper–Pearson interval; the record states the
    same numbers."""
    R = 400
    s = Sampler(f"cyclic_poisson:{k}", n, b, R, np.random.SeedSequence(11))
    inc = np.zeros((T, R, n), dtype=bool)
    for t in range(T):
        d = s.draw()
        mask = np.ones_like(d.idx, dtype=bool) if d.mask is None else d.mask
        rows = np.repeat(np.arange(R)[:, None], d.idx.shape[1], axis=1)
        inc[t, rows[mask], d.idx[mask]] = True
    counts = inc.sum(axis=0)  # (R, n)
    assert counts.max() <= -(-T // k)
    steps_of = [np.flatnonzero(inc[:, r, i]) for r in range(0, R, 37) for i in range(n)]
    assert all(np.all(np.diff(st) >= k) and np.all(np.diff(st) % k == 0) for st in steps_of)
    group = np.arange(n) % k
    opportunities = R * sum(len(range(g, T, k)) for g in group)  # steps t-1 ≡ g (mod k)
    hits = int(counts.sum())
    q_k = b * k / n
    lo = stats.beta.ppf(LEVEL / 2, hits, opportunities - hits + 1)
    hi = stats.beta.ppf(1 - LEVEL / 2, hits + 1, opportunities - hits)
    assert lo <= q_k <= hi
    rec = accounting.privacy_record(optimizers.get("dp_sgd").events, None, steps=T,
                                    sample_rate=b / n, sampling=f"cyclic_poisson:{k}", trials=1)
    part = rec["participation"]
    assert (part["max_participations"], part["min_separation"]) == (-(-T // k), k)
    assert part["rate"] == pytest.approx(q_k, rel=1e-12)


def test_full_group_rate_participates_exactly_ceil_t_over_k():
    """With b·k = n the rate is 1: each example takes part in every step of its group, so the
    most frequent example takes part exactly ⌈T/k⌉ times (the accountant's count is attained)."""
    n, b, k, T = 40, 5, 8, 21
    s = Sampler(f"cyclic_poisson:{k}", n, b, 2, np.random.SeedSequence(0))
    counts = np.zeros((2, n), dtype=int)
    for _ in range(T):
        d = s.draw()
        assert d.mask is None
        for r in range(2):
            counts[r, d.idx[r]] += 1
    expect = np.array([len(range(i % k, T, k)) for i in range(n)])
    np.testing.assert_array_equal(counts, np.broadcast_to(expect, (2, n)))
    assert counts.max() == -(-T // k)


# ---- (d) the band structure is checked, the fallback is labelled ------------------------------

@pytest.mark.parametrize("bands,k", [(4, 4), (3, 4), (5, 4), (16, 16), (17, 16)])
def test_blocks_of_one_group_are_disjoint_iff_bandwidth_at_most_k(bands, k):
    """The property the reduction needs, read off the dense strategy: columns k apart touch
    disjoint rows exactly when the bandwidth is at most k; the stream agrees."""
    T = 3 * k + 2
    M = mf.strategy(f"banded:{bands}", T)
    support = M != 0
    overlap = any(np.any(support[:, j] & support[:, j + k]) for j in range(T - k))
    st = mf.noise_stream(f"banded:{bands}", T)
    assert st.bandwidth == bands
    assert overlap == (bands > k) == (not st.amplifiable(k))


@pytest.mark.parametrize("noise,k,steps", [("banded:8", 4, 40), ("sqrt_toeplitz", 4, 40),
                                           ("banded:4", 1, 40)])
def test_bandwidth_above_k_falls_back_to_unamplified(noise, k, steps):
    """ε is the unamplified single Gaussian with σ·sens/worst_sens (a direct dp_accounting
    GaussianDpEvent), the record says so, and amplification would have claimed less."""
    sigma, b, n = 2.0, 10, 400
    sampling = "poisson" if k == 1 else f"cyclic_poisson:{k}"
    opt = optimizers.get("dp_sgd", noise_multiplier=sigma, noise=noise)
    rec = accounting.privacy_record(opt.events, None, steps=steps, sample_rate=b / n,
                                    sampling=sampling, trials=1)
    st = mf.noise_stream(noise, steps)
    assert rec["correlated_accounting"] == "unamplified"
    assert rec["events"][0]["accounting"].startswith(f"unamplified (bandwidth {st.bandwidth} > {k}")
    assert "UNAMPLIFIED" in rec["note"]
    s_eff = sigma * st.sens / st.worst_sens
    assert rec["unamplified"] == [[pytest.approx(s_eff, rel=1e-12)]]
    ref = dp_accounting.rdp.RdpAccountant(list(accounting.RDP_ORDERS)).compose(
        dp_accounting.GaussianDpEvent(s_eff)).get_epsilon(DELTA)
    got = accounting.epsilon_of_record(rec, DELTA, accountant="rdp")
    assert got == pytest.approx(ref, rel=1e-12)
    amplified = accounting.epsilon(sigma, b / n, steps, DELTA, sampling=sampling, accountant="rdp")
    assert got > amplified


def test_full_strategy_is_amplified_when_each_example_takes_part_once():
    """sqrt_toeplitz has bandwidth T: amplified only when T ≤ k (one chance per example)."""
    rec = accounting.privacy_record(
        optimizers.get("dp_sgd", noise_multiplier=1.0, noise="sqrt_toeplitz").events, None,
        steps=6, sample_rate=0.01, sampling="cyclic_poisson:6", trials=1)
    assert rec["correlated_accounting"] == "amplified"
    assert accounting.epsilon_of_record(rec, DELTA) == accounting.epsilon(1.0, 0.06, 1, DELTA)


def test_scheduled_correlated_release_is_not_amplified():
    """A correlated release on some steps only: its stream index is not the step index, so the
    block argument does not apply; it is accounted unamplified, with the reason."""
    from dpsim.privacy.events import restrict

    opt = optimizers.get("dp_sgd", noise_multiplier=1.0, noise="banded:2")
    ev = [restrict(e, lambda T: np.arange(T) % 3 == 0) for e in opt.events]
    rec = accounting.privacy_record(ev, None, steps=30, sample_rate=0.01,
                                    sampling="cyclic_poisson:4", trials=1)
    assert rec["correlated_accounting"] == "unamplified"
    assert "restricted to some steps" in rec["events"][0]["accounting"]


@pytest.mark.parametrize("sampling", ["poisson", "cyclic_poisson:4"])
def test_subsampled_releases_beside_an_unamplified_one_lose_amplification(sampling):
    """An i.i.d. release sharing its batches with an unamplified correlated release is not
    amplified either (the unamplified release may reveal who took part): the whole run is one
    Gaussian with (Σ σ_i⁻²)^(-1/2) over σ·sens/worst_sens and σ/√m of the m-step release, checked
    against a direct dp_accounting GaussianDpEvent."""
    from dpsim.privacy.events import CorrelatedRelease, GaussianRelease

    steps, sigma, sigma2 = 24, 1.5, 3.0
    ev = [CorrelatedRelease(noise_multiplier=sigma, strategy="banded:8"),
          GaussianRelease(noise_multiplier=sigma2, schedule=lambda T: np.arange(T) % 2 == 0)]
    rec = accounting.privacy_record(ev, None, steps=steps, sample_rate=0.01, sampling=sampling,
                                    trials=1)
    assert rec["correlated_accounting"] == "unamplified"
    assert rec["events"][1]["accounting"].startswith("unamplified (shares its batches")
    assert rec["step_types"] == [[]]
    st = mf.noise_stream("banded:8", steps)
    parts = [sigma * st.sens / st.worst_sens, sigma2 / math.sqrt(steps // 2)]
    s_eff = math.fsum(s ** -2.0 for s in parts) ** -0.5
    ref = dp_accounting.rdp.RdpAccountant(list(accounting.RDP_ORDERS)).compose(
        dp_accounting.GaussianDpEvent(s_eff)).get_epsilon(DELTA)
    assert accounting.epsilon_of_record(rec, DELTA, accountant="rdp") == pytest.approx(ref, rel=1e-12)


def test_mixed_schedules_take_the_worst_group():
    """A Gaussian release on every third step under cyclic_poisson:3: group 0 sees all of them,
    groups 1 and 2 none; ε is group 0's."""
    from dpsim.privacy.events import GaussianRelease

    ev = [GaussianRelease(noise_multiplier=1.0, schedule=lambda T: np.arange(T) % 3 == 0)]
    rec = accounting.privacy_record(ev, None, steps=31, sample_rate=0.02,
                                    sampling="cyclic_poisson:3", trials=1)
    assert accounting.epsilon_of_record(rec, DELTA) == accounting.epsilon(1.0, 0.06, 11, DELTA)


def test_simulated_cyclic_run_end_to_end():
    """simulate(sampling='cyclic_poisson:4') with banded:4 (amplified) and banded:6 (fallback):
    the engine passes the sampler through; mean batch ≈ b; ε from the record."""
    prob = problems.logistic_regression(400, 3, seed=2)
    kw = dict(steps=24, batch_size=10, trials=4, seed=3, sampling="cyclic_poisson:4")
    a = dpsim.simulate(prob, optimizers.get("dp_sgd", noise_multiplier=1.2, noise="banded:4"), **kw)
    assert a.epsilon(DELTA) == accounting.epsilon(1.2, 10 / 400, 24, DELTA, sampling="cyclic_poisson:4")
    assert a.privacy_report(DELTA)["participation"]["groups"] == 4
    assert abs(a.mean_batch_size.mean() - 10) < 3
    f = dpsim.simulate(prob, optimizers.get("dp_sgd", noise_multiplier=1.2, noise="banded:6"), **kw)
    assert f.privacy_report(DELTA)["correlated"] == "unamplified"
    assert math.isfinite(f.epsilon(DELTA)) and f.epsilon(DELTA) > a.epsilon(DELTA)


def test_ctcdp_refuses_cyclic_sampling():
    from dpsim.optimizers import ctcdp

    prob = problems.logistic_regression(500, 3, seed=0)
    b = ctcdp.plan(epsilon=2.0, delta=DELTA, steps=40, n=500, clip=1.0)["batch_size"]
    with pytest.raises(ValueError, match="cyclic_poisson:2"):
        dpsim.simulate(prob, optimizers.get("dp_sgd_ctcdp", epsilon=2.0, delta=DELTA), steps=40,
                       batch_size=b, sampling="cyclic_poisson:2")
