"""Typed privacy events: mandatory, resolved by the accountant, NonPrivate gives ε = ∞."""

import dataclasses
import math

import numpy as np
import pytest

import dpsim
from dpsim import accounting, optimizers, problems
from dpsim.optimizers.dp2 import extra_query_steps
from dpsim.privacy.events import CorrelatedRelease, GaussianRelease, NonPrivate, TcdpBudget, schedule_mask
from dpsim.privacy.privatizers import gaussian_privatizer
from dpsim.transforms import GradientTransformation, chain, named_chain, scale


@pytest.fixture(scope="module")
def prob():
    return problems.logistic_regression(300, 5, seed=0)


def _silent_privatizer():
    """Adds noise like a privatizer but declares nothing."""
    inner = gaussian_privatizer(1.0, 1.0)
    return GradientTransformation(inner.init, inner.update)


def test_an_optimizer_that_declares_no_event_is_rejected():
    tx = named_chain(("privatizer", _silent_privatizer()), ("lr", scale(-0.1)))
    assert tx.privacy == ()
    with pytest.raises(ValueError, match="declares no privacy event"):
        optimizers.Optimizer(name="silent", hyperparameters={}, transform=tx)
    with pytest.raises(ValueError, match="no privacy event declared"):
        accounting.privacy_record((), None, steps=3, sample_rate=0.1, sampling="poisson", trials=1)


@pytest.mark.parametrize("name", ["dp_adam_noiseless_v", "dp_adam_stp_noiseless_v", "sgd", "adam",
                                  "delayed_rmsprop"])
def test_epsilon_is_infinite_because_of_a_non_private_event(prob, name):
    opt = optimizers.get(name)
    assert any(isinstance(e, NonPrivate) for e in opt.events)
    assert not opt.private
    res = dpsim.simulate(prob, opt, steps=4, batch_size=20, seed=0)
    assert res.epsilon(1e-5) == math.inf
    assert res.privacy["private"] is False and res.privacy["events"][0]["type"] == "NonPrivate"
    with pytest.raises(TypeError):  # there is no flag to flip
        dataclasses.replace(opt, private=True)


def test_the_oracle_would_be_accounted_if_it_declared_its_noisy_release(prob):
    """The oracle's noisy release alone is accounted like DP-Adam's: ε = ∞ comes from NonPrivate."""
    opt = optimizers.get("dp_adam_noiseless_v", noise_multiplier=1.0)
    events = tuple(e for e in opt.events if not isinstance(e, NonPrivate)) + (
        GaussianRelease(1.0, path=("privatizer",)),)
    rec = accounting.privacy_record(events, None, steps=10, sample_rate=0.1, sampling="poisson", trials=1)
    assert accounting.epsilon_of_record(rec, 1e-5) == accounting.epsilon(1.0, 0.1, 10, 1e-5)


def test_chains_locate_events_in_the_state():
    p = gaussian_privatizer(1.0, 2.0)
    assert chain(p, scale(-1.0)).privacy[0].path == (0,)
    assert named_chain(("privatizer", p), ("lr", scale(-1.0))).privacy[0].path == ("privatizer",)


def test_correlated_noise_declares_a_correlated_release():
    (ev,) = gaussian_privatizer(1.0, 0.7, noise="banded:3").privacy
    assert isinstance(ev, CorrelatedRelease) and ev.strategy == "banded:3" and ev.noise_multiplier == 0.7


def test_dp2_shares_one_release_between_its_phases():
    """DP²'s privatizer is one piece in both phases: one release on every step (as DP-SGD)."""
    (ev,) = optimizers.get("dp2_rmsprop", s1=3, s2=5, noise_multiplier=0.8).events
    assert isinstance(ev, GaussianRelease) and schedule_mask(ev, 17).all()


def test_dp2_extra_query_declares_its_second_release_on_its_steps():
    first, extra = optimizers.get("dp2_extra_query", s1=4, noise_multiplier=0.8).events
    assert first.path == ("privatizer",) and schedule_mask(first, 13).all()
    assert extra.path == ("extra_privatizer",)
    np.testing.assert_array_equal(schedule_mask(extra, 13), extra_query_steps(4, 13))


def test_a_budget_is_read_from_the_final_state_of_its_piece():
    ev = TcdpBudget(spend=lambda st: {"rho_spent": list(st), "steps_taken": [3, 5]},
                    budget={"kind": "ctcdp", "omega_a": 4.0, "planned_steps": None})
    tx = named_chain(("privatizer", GradientTransformation(lambda p: None, None, (ev,))),
                     ("lr", scale(-1.0)))
    (located,) = tx.privacy
    state = {"privatizer": (0.01, 0.02), "lr": ()}
    rec = accounting.privacy_record(tx.privacy, state, steps=5, sample_rate=0.1, sampling="fixed",
                                    trials=2)
    assert located.path == ("privatizer",)
    assert rec["rho_spent"] == [0.01, 0.02] and rec["planned_steps"] == 5 and rec["private"]
    eps = accounting.epsilon_of_record(rec, 1e-5)
    assert eps.shape == (2,) and 0 < eps[0] < eps[1]


def test_ctcdp_run_record_matches_its_probes(prob):
    from dpsim.optimizers import ctcdp

    plan = ctcdp.plan(epsilon=1.0, delta=1e-5, steps=20, n=prob.n, clip=1.0)
    res = dpsim.simulate(prob, optimizers.get("dp_sgd_ctcdp"), steps=20, batch_size=plan["batch_size"],
                         sampling="fixed", trials=2, seed=0, record_every=20)
    assert res.privacy["rho_spent"] == res.records["rho_spent"][-1].tolist()
    assert res.privacy["events"][0]["type"] == "TcdpBudget"
