"""The empirical privacy audit (issue 9, Build 5): honest configurations of every private optimizer
are consistent, a mis-declared noise multiplier and the old IME declaration are flagged."""

import math

import numpy as np
import pytest

import dpsim
from dpsim import optimizers
from dpsim.audit import GradientTable, canary_table, clopper_pearson, threshold_lower_bound
from dpsim.privacy.events import GaussianRelease
from dpsim.privacy.noise import NoiseSource, add_noise
from dpsim.privacy.privatizers import gaussian_privatizer
from dpsim.transforms import named_chain, scale
from dpsim.transforms.base import GradientTransformation
from dpsim.transforms.preconditioners import MomentInputs, scale_by_adam

DELTA = 1e-5


def _kw(name):
    if name in ("pasan", "pagan"):
        return dict(radius=1.0)
    if name == "pdp_sgd":
        return dict(k=1, public_fraction=0.2)
    if name in ("adadps", "noisy_adagrad"):
        return dict(public_fraction=0.2)
    return {}


PRIVATE = [n for n in optimizers.names() if optimizers.get(n, **_kw(n)).private]


def test_clopper_pearson_matches_scipy_exact_interval():
    from scipy.stats import binomtest

    for k, m in ((0, 100), (3, 100), (50, 100), (100, 100)):
        ci = binomtest(k, m).proportion_ci(confidence_level=0.9, method="exact")
        lo, hi = clopper_pearson(k, m, 0.95)  # one-sided 95% each = two-sided 90%
        assert lo == pytest.approx(ci.low, abs=1e-12) and hi == pytest.approx(ci.high, abs=1e-12)


def test_threshold_bound_on_known_gaussians():
    """N(0,1) vs N(μ,1) is μ-GDP: the lower bound stays below its exact ε and is informative."""
    from dpsim.accounting import epsilon

    rng = np.random.default_rng(0)
    m = 200_000
    s0, s1 = rng.standard_normal(m), 3.0 + rng.standard_normal(m)
    eps, det = threshold_lower_bound(s0, s1, DELTA)
    exact = epsilon(1 / 3.0, 1.0, 1, DELTA)  # one Gaussian release, sensitivity/σ = 3
    assert 3.0 < eps <= exact, (eps, exact)


@pytest.mark.parametrize("name", PRIVATE)
def test_honest_configuration_is_consistent(name):
    kw = dict(trials=20_000, n=5, batch_size=1, seed=3)
    if name == "dp_sgd_ctcdp":
        from dpsim.optimizers import ctcdp

        n, T = 200, 30  # the smallest plan [L2P]'s conditions admit at ε = 4
        b = ctcdp.plan(epsilon=4.0, delta=DELTA, steps=T, n=n, clip=1.0)["batch_size"]
        kw.update(n=n, steps=T, batch_size=b, sampling="fixed", accountant="rdp", epsilon=4.0,
                  delta=DELTA, trials=10_000)
    rep = dpsim.audit(name, noise_multiplier=0.7, **{**kw, **_kw(name)}) if name != "dp_sgd_ctcdp" \
        else dpsim.audit(name, **kw)
    assert rep.consistent, str(rep)
    assert 0 <= rep.epsilon_lower <= rep.epsilon_claimed


def _misdeclared(sigma_used, sigma_claimed):
    inner = gaussian_privatizer(1.0, sigma_used)
    priv = GradientTransformation(inner.init, inner.update, (GaussianRelease(sigma_claimed),))
    tx = named_chain(("privatizer", priv), ("lr", scale(-1.0)))
    return optimizers.Optimizer(name="misdeclared_dp_sgd", hyperparameters={}, transform=tx)


def test_misdeclared_noise_multiplier_is_flagged():
    honest = dpsim.audit(_misdeclared(0.5, 0.5), trials=50_000, n=10, batch_size=1)
    liar = dpsim.audit(_misdeclared(0.5, 2.0), trials=50_000, n=10, batch_size=1)
    assert honest.consistent, str(honest)
    assert not liar.consistent, str(liar)
    assert liar.epsilon_lower > liar.epsilon_claimed


def _old_ime_privatizer(clip, sigma):
    """The IME privatizer as it was before issue 9 (fault injected): ḡ² released with sensitivity
    (2b−1)C²/b², which assumes a batch of exactly b."""
    s = math.sqrt(2.0) * sigma
    src1, src2 = NoiseSource("gaussian"), NoiseSource("gaussian")

    def init(params):
        return (None, None)

    def update(batch, state, params, ctx):
        b = float(batch.batch_size)
        total = batch.clipped_sum(clip)
        g, n1 = add_noise(total, s * clip, b, ctx, src1, state[0])
        clean = total / b
        z, n2 = src2.draw(state[1], ctx, clean.shape)
        sq = clean * clean + z * (s * clip ** 2 * (2 * b - 1) / (b * b))
        return MomentInputs(g, sq), (n1, n2)

    return GradientTransformation(init, update, (src1.event(s), src2.event(s)))


def _v_probe(state, params, ctx):
    return state["preconditioner"].v[:, 0]


def _v(res):
    return res.records["v"][-1]


def test_audit_catches_the_old_ime_declaration_and_passes_the_fixed_one():
    """n = 4, b = 1, aligned examples (the instance of tests/privacy/test_ime_privacy.py), statistic: the
    second-moment release read through v (β1 = β2 = 0).  100 000 trials per side: the old
    declaration's lower bound is then 3.69 against its claimed 2.71 (4.55 at 200 000), the fixed
    one's 0.010."""
    old = optimizers.Optimizer(name="old_ime", hyperparameters={}, transform=named_chain(
        ("privatizer", _old_ime_privatizer(1.0, 1.0)),
        ("preconditioner", scale_by_adam(0.0, 0.0, 1e-8)), ("lr", scale(-0.01))))
    kw = dict(trials=100_000, n=4, batch_size=1, others="aligned", probes={"v": _v_probe},
              statistic=_v, seed=1)
    rep_old = dpsim.audit(old, **kw)
    assert not rep_old.consistent, str(rep_old)
    assert rep_old.epsilon_claimed == pytest.approx(2.7065, abs=1e-3)
    rep_new = dpsim.audit(optimizers.get("dp_adam_ime", noise_multiplier=1.0, beta1=0.0, beta2=0.0), **kw)
    assert rep_new.consistent, str(rep_new)
    # and the exact one-step ε of the fixed mechanism (tests/privacy/test_ime_privacy.py) is below too
    assert rep_new.epsilon_lower <= 1.17


def test_gradient_table_is_a_problem_and_bad_tables_are_refused():
    prob = GradientTable(canary_table(5, 2, others="aligned"))
    w = np.zeros((3, 2))
    assert prob.per_example_grads(w, np.array([[0, 4]] * 3)).shape == (3, 2, 2)
    assert prob.loss(w).shape == (3,) and prob.grad(w).shape == (3, 2)
    for bad, needle in ((np.zeros(3), "shape"), (np.array([[np.nan]]), "finite")):
        with pytest.raises(ValueError, match=needle):
            GradientTable(bad)
    for kw, needle in ((dict(n=1), "n must"), (dict(n=4, others="x"), "others"),
                       (dict(n=4, canary=0.0), "canary")):
        with pytest.raises(ValueError, match=needle):
            canary_table(**kw)
    with pytest.raises(ValueError, match="trials"):
        dpsim.audit("dp_sgd", trials=2)
    with pytest.raises(ValueError, match="canary row"):
        dpsim.audit("dp_sgd", trials=100, table=np.zeros((4, 1)))
