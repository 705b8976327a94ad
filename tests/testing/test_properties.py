"""Dogfooding dpsim.testing: a privacy property (the released noise has the declared scale σC/b)
and an analysis bound ([DP2] Lemma 1 on arbitrary gradient tables), both over the public strategies."""

import numpy as np
from hypothesis import given, settings
from scipy import stats

import dpsim
from dpsim.analysis.delay import lemma1_bound
from dpsim.testing import assert_bound_holds, assert_distribution_matches
from dpsim.testing.strategies import gradient_tables, optimizers
from dpsim.transforms import lookup


@settings(max_examples=10, deadline=None)
@given(table=gradient_tables(max_n=8, max_d=3), opt=optimizers(names=["dp_sgd"]))
def test_dp_sgd_release_noise_has_the_declared_scale(table, opt):
    """With lr = 1 from w = 0, w_1 = −(Σ clip(g_i, C) + σC·z)/b: subtracting the clean part leaves
    the noise, which must be N(0, (σC/b)²) in every coordinate (KS at α = 1e-3 per example)."""
    hp = dict(opt.hyperparameters, lr=1.0, noise="gaussian")
    C, sigma = hp["clip"], hp["noise_multiplier"]
    b, R = table.n, 400
    res = dpsim.simulate(table, dpsim.optimizers.get("dp_sgd", **hp), steps=1, batch_size=b, trials=R,
                         seed=3, sampling="fixed", metrics=())
    g = table.G
    clean = (g * np.minimum(1.0, C / np.maximum(np.linalg.norm(g, axis=1), 1e-300))[:, None]).sum(0) / b
    noise = -res.params - clean
    if sigma < 1e-6:  # noise below the rounding of the clean part (the strategy draws σ ≈ 1e-35 too)
        np.testing.assert_allclose(noise, 0.0, atol=1e-10)
        return
    assert_distribution_matches(noise, stats.norm(0.0, sigma * C / b), alpha=1e-3, seed=3,
                                what="dp_sgd release noise")


PROBE = {"v": lambda state, params, ctx: lookup(state, "preconditioner").v[:, 0]}


@settings(max_examples=8, deadline=None)
@given(table=gradient_tables(max_n=6, max_d=2), opt=optimizers(names=["dp2_rmsprop"]))
def test_dp2_lemma1_on_arbitrary_gradient_tables(table, opt):
    """[DP2] Lemma 1 holds for any gradients (linear losses: the clean means do not depend on the
    noise, so the proof's dropped cross term is zero): E[v_1] ≤ C² + σ²C²/(s b²),
    one-sided at α = 1e-3."""
    hp = opt.hyperparameters
    s, C, sigma = hp["s1"], hp["clip"], hp["noise_multiplier"]
    o = dpsim.optimizers.dp2_rmsprop(s1=s, clip=C, noise_multiplier=sigma, beta=hp["beta"], lr=hp["lr"])
    b = table.n

    def estimate(trials, seed):
        res = dpsim.simulate(table, o, steps=2 * s + 1, batch_size=b, trials=trials, seed=seed,
                             sampling="fixed", probes=PROBE, metrics=())
        return res.records["v"][-1]

    assert_bound_holds(estimate, lemma1_bound(C, sigma, s, b), trials=200, alpha=1e-3, seed=1,
                       what="E[v_1]")
