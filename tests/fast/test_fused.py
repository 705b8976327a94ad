"""The small-d block kernel (:mod:`dpsim.fast.block`) against the general chain engine (the reference).

Both draw the same batches (the run's sampler) and the same noise (the backend generator, in the
engine's order), and do the same arithmetic in the same order, with the constants the chain
computes (Adam's ``1 − βᵗ`` included), so every record, the final parameters, the probes and the
privacy record are the same to the last bit: ``_compare`` asserts equality, not closeness.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpsim
from dpsim import optimizers, problems
from dpsim.fast import block, rows
from dpsim.problems import Ball
from dpsim.problems.glm import _GLMProblem


def _ball_least_squares():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((150, 4))
    y = X @ rng.standard_normal(4) + 0.1 * rng.standard_normal(150)
    return _GLMProblem(name="ball_ls", X=X, y=y, link="squared", reg=0.0,
                       config={"name": "ball_ls"}, domain=Ball(0.3))


PROBLEMS = {
    "least_squares": lambda: problems.least_squares(200, 5, seed=1),
    "logistic": lambda: problems.logistic_regression(200, 6, seed=2),
    "absolute_box": lambda: problems.absolute_regression(200, 5, seed=3),
    "random_quadratic": lambda: problems.random_quadratic(30, 3, seed=4),
    "quadratic_2d": lambda: problems.quadratic_2d(1.0, 8.0, n=200, seed=5),
    "ball_least_squares": _ball_least_squares,
}

R = 3
PER_TRIAL = {  # one value per trial: grids folded into the trial axis
    "lr": [0.05, 0.1, 0.02],
    "clip": [0.3, 1.0, 50.0],  # active, active, inactive
    "noise_multiplier": [0.7, 0.0, 1.3],
}

OPTIMIZERS = {
    "sgd": dict(lr=0.05),
    "momentum": dict(lr=0.02, beta=0.8),
    "dp_sgd": dict(PER_TRIAL),
    "dp_sgdm": dict(PER_TRIAL, beta=[0.5, 0.9, 0.0]),
    "adam": dict(lr=0.01),
    "dp_adam": dict(PER_TRIAL, beta1=0.8, beta2=[0.99, 0.9, 0.999], eps=1e-6),
    "dp_adam_bc": dict(PER_TRIAL, gamma_prime=1e-6),
    "dp2_rmsprop": dict(PER_TRIAL, s1=3, s2=2, lr2=[0.01, 0.02, 0.03], clip2=0.5, unbias=True),
    "dp2_adagrad": dict(lr=0.05, s1=2, clip=0.5, noise_multiplier=0.8),
    "dp2_yogi": dict(lr=0.05, s1=4, s2=1, clip=2.0, noise_multiplier=0.5, beta=0.7),
}


def _compare(a, b):
    assert a.config["engine"] in ("chain", "release") and b.config["engine"] == "block"
    for name in ("loss", "excess_loss", "grad_norm_sq", "dist_to_opt"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            np.testing.assert_array_equal(y, x, err_msg=name)
    assert set(a.records) == set(b.records)
    for k in a.records:
        np.testing.assert_array_equal(b.records[k], a.records[k], err_msg=k)
    np.testing.assert_array_equal(b.params, a.params)
    np.testing.assert_array_equal(b.mean_batch_size, a.mean_batch_size)
    np.testing.assert_array_equal(b.steps, a.steps)
    assert a.privacy == b.privacy
    cfg_a = {k: v for k, v in a.config.items() if k != "engine"}
    cfg_b = {k: v for k, v in b.config.items() if k != "engine"}
    assert cfg_a == cfg_b


def _pair(problem, opt, **kw):
    kw = dict(dict(steps=23, batch_size=12, trials=R, seed=7, record_every=5), **kw)
    return (dpsim.simulate(problem, opt, fast=False, **kw),
            dpsim.simulate(problem, opt, fast=True, **kw))


@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
@pytest.mark.parametrize("prob_name", ["least_squares", "quadratic_2d"])
@pytest.mark.parametrize("sampling", ["poisson", "fixed"])
def test_fused_equals_engine(opt_name, prob_name, sampling):
    prob = PROBLEMS[prob_name]()
    _compare(*_pair(prob, optimizers.get(opt_name, **OPTIMIZERS[opt_name]), sampling=sampling))


@pytest.mark.parametrize("prob_name", ["logistic", "absolute_box", "random_quadratic",
                                       "ball_least_squares"])
@pytest.mark.parametrize("opt_name", ["dp_sgdm", "dp_adam_bc", "dp2_rmsprop"])
def test_fused_equals_engine_other_problems(prob_name, opt_name):
    prob = PROBLEMS[prob_name]()
    _compare(*_pair(prob, optimizers.get(opt_name, **OPTIMIZERS[opt_name])))


def test_fused_with_user_probe_init_and_replacement_sampling():
    """User probes read the rebuilt chain state at record steps (and ctx.t is the step)."""
    prob = PROBLEMS["least_squares"]()
    seen = []

    def probe(state, params, ctx):
        seen.append(ctx.t)
        return np.sum(state["preconditioner"].m ** 2, axis=1) + ctx.t

    opt = optimizers.get("dp_adam", **OPTIMIZERS["dp_adam"])
    a, b = _pair(prob, opt, probes={"m2": probe}, init=np.full(5, 0.3), sampling="replacement",
                 record_every=4)
    _compare(a, b)
    assert seen[: len(seen) // 2] == seen[len(seen) // 2:] == [0, 4, 8, 12, 16, 20, 23]


def test_fused_zero_steps_and_one_record():
    prob = PROBLEMS["quadratic_2d"]()
    _compare(*_pair(prob, optimizers.get("dp_sgd"), steps=0))
    _compare(*_pair(prob, optimizers.get("dp_sgd"), steps=9, record_every=100))


def test_fused_long_blocks_split_by_memory(monkeypatch):
    """Blocks shorter than the record interval (memory bound) give the same run."""
    monkeypatch.setattr(block, "BLOCK_ELEMENTS", 200)
    prob = PROBLEMS["least_squares"]()
    _compare(*_pair(prob, optimizers.get("dp_adam", **OPTIMIZERS["dp_adam"]), record_every=11))


def test_epsilon_equal():
    prob = PROBLEMS["least_squares"]()
    a, b = _pair(prob, optimizers.get("dp_sgd", noise_multiplier=1.1))
    assert a.epsilon(1e-5) == b.epsilon(1e-5)


def test_default_dispatch_and_fallbacks():
    prob = PROBLEMS["least_squares"]()
    r = dpsim.simulate(prob, "dp_sgd", steps=3, batch_size=5)
    assert r.config["engine"] == "block"
    # a chain of element pieces takes the block kernel whatever its name
    r = dpsim.simulate(prob, "dp_rmsprop", steps=3, batch_size=5)
    assert r.config["engine"] == "block"
    # unsupported: scale-then-privatize, correlated noise, float32, sparse features
    r = dpsim.simulate(prob, "dp_adam_stp", steps=3, batch_size=5)
    assert r.config["engine"] == "release"
    with pytest.raises(ValueError, match="fast=True.*scale_then_privatize"):
        dpsim.simulate(prob, "dp_adam_stp", steps=3, batch_size=5, fast=True)
    with pytest.raises(ValueError, match="correlated noise"):
        dpsim.simulate(prob, optimizers.get("dp_sgd", noise="banded:2"), steps=3, batch_size=5,
                       fast=True)
    with pytest.raises(ValueError, match="float64"):
        dpsim.simulate(prob, "dp_sgd", steps=3, batch_size=5, fast=True, dtype="float32")
    sparse = problems.logistic_regression(100, 30, density=0.2, seed=0)
    with pytest.raises(ValueError, match="sparse"):
        dpsim.simulate(sparse, "dp_sgd", steps=3, batch_size=5, fast=True)
    with pytest.raises(ValueError, match="fast must be"):
        dpsim.simulate(prob, "dp_sgd", steps=3, batch_size=5, fast="yes")


def _hand_built_chains():
    """Chains no registry entry describes: a user's DP-SGD with momentum under a registered name,
    docs/ARCHITECTURE.md's example chain, and dp_adam's exact chain under another name."""
    from dpsim.privacy.privatizers import gaussian_privatizer
    from dpsim.transforms import named_chain, scale, trace
    from dpsim.transforms.preconditioners import precondition, rmsprop, scale_by_adam

    sgdm = named_chain(("privatizer", gaussian_privatizer(1.0, 1.0)), ("momentum", trace(0.5)),
                       ("lr", scale(-0.1)))
    example = named_chain(("privatizer", gaussian_privatizer(clip=1.0, noise_multiplier=1.2)),
                          ("preconditioner", precondition(rmsprop(beta=0.9, eps=1e-8))),
                          ("momentum", trace(0.5)),
                          ("lr", scale(-0.01)))
    twin = named_chain(("privatizer", gaussian_privatizer([0.3, 1.0, 50.0], [0.7, 0.0, 1.3])),
                       ("preconditioner", scale_by_adam(0.8, [0.99, 0.9, 0.999], 1e-6)),
                       ("lr", scale(-0.01)))
    return {"dp_sgd": (sgdm, {"lr": 0.1}), "dp_rmsprop_momentum": (example, {}),
            "my_adam": (twin, {})}


@pytest.mark.parametrize("name", ["dp_sgd", "dp_rmsprop_momentum", "my_adam"])
def test_hand_built_chains_take_the_block_kernel_bit_for_bit(name):
    """The kernel is composed from the chain's elements, not chosen by name: a hand-built chain
    (under a registered name or not) takes the block path, says so, and is the chain's run."""
    tx, hp = _hand_built_chains()[name]
    opt = optimizers.Optimizer(name=name, hyperparameters=hp, transform=tx)
    assert isinstance(block.plan(PROBLEMS["least_squares"](), opt, trials=R), block.BlockPlan)
    _compare(*_pair(PROBLEMS["least_squares"](), opt))


def test_subclassed_problem_is_not_fused():
    class Mine(type(PROBLEMS["least_squares"]())):
        pass

    p = PROBLEMS["least_squares"]()
    p.__class__ = Mine
    assert isinstance(block.plan(p, optimizers.get("dp_sgd"), trials=1), str)


ELLIPSOID_CASES = {
    "pagan_per_trial": ("pagan", dict(radius=0.5, noise_multiplier=[0.5, 1.0, 0.0], lr=[0.1, 0.05, 0.2])),
    "pasan_per_trial_radius": ("pasan", dict(radius=[0.3, 1.0, 5.0], lr=0.05)),
    "pagan_noiseless_unprojected": ("pagan", dict(noise_multiplier=0.0, radius=float("inf"))),
}


@pytest.mark.parametrize("case", list(ELLIPSOID_CASES))
@pytest.mark.parametrize("prob_name", ["least_squares", "absolute_box", "quadratic_2d", "logistic"])
def test_fused_ellipsoid_equals_engine(case, prob_name):
    """PASAN/PAGAN: step 1 through the engine's transform (it sets up A and the noise scale),
    then the kernel; projected fractions (the optimizer's probe) included."""
    name, kw = ELLIPSOID_CASES[case]
    a, b = _pair(PROBLEMS[prob_name](), optimizers.get(name, **kw), record_every=1)
    _compare(a, b)
    if case != "pagan_noiseless_unprojected":
        assert np.nanmax(b.records["projected_fraction"]) > 0  # the projection is exercised


def test_fused_pagan_optimal_scaling_box():
    prob = PROBLEMS["absolute_box"]()
    _compare(*_pair(prob, optimizers.get("pagan", scaling="optimal", radius=0.5), sampling="fixed"))


@pytest.mark.parametrize("sampling", ["poisson", "fixed", "replacement", "cyclic_poisson:3"])
@pytest.mark.parametrize("prob_name", ["least_squares", "logistic"])
def test_fused_bit_for_bit_dense_glm(sampling, prob_name):
    """The kernel draws batches and noise itself, in the engine's order, from the run's own
    generators; with the dense-GLM arithmetic in the engine's order the run is the same to the
    last bit (not only to rounding), for every sampler: DP-SGD with momentum (clipped sums on
    four-lane vectors), DP²-RMSProp (its preconditioned phase: the scaled sums of two examples
    per vector) and PAGAN (the ℓ2-ball closed form, four margins interleaved)."""
    for opt in (optimizers.get("dp_sgdm", **OPTIMIZERS["dp_sgdm"]),
                optimizers.get("dp2_rmsprop", **OPTIMIZERS["dp2_rmsprop"]),
                optimizers.get("pagan", **ELLIPSOID_CASES["pagan_per_trial"][1])):
        a, b = _pair(PROBLEMS[prob_name](), opt, sampling=sampling)
        _compare(a, b)
        np.testing.assert_array_equal(b.params, a.params)
        np.testing.assert_array_equal(b.loss, a.loss)


@pytest.mark.parametrize("b", [8, 16])
@pytest.mark.parametrize("sampling", ["poisson", "fixed", "replacement"])
def test_fused_bit_for_bit_power_of_two_batches(b, sampling):
    """A power-of-two nominal batch size: the kernel multiplies by the exact ``1/b`` where the
    engine divides by ``b`` (the same number), so the run is still the engine's to the last bit
    (``_compare``): DP-SGD with and without noise, with momentum, DP-Adam, DP²-RMSProp, PASAN
    and PAGAN, whose updates divide too."""
    opts = [optimizers.get("dp_sgd", **OPTIMIZERS["dp_sgd"]),
            optimizers.get("dp_sgd", lr=0.1, clip=0.5, noise_multiplier=0.0),
            optimizers.get("dp_sgdm", **OPTIMIZERS["dp_sgdm"]),
            optimizers.get("dp_adam", **OPTIMIZERS["dp_adam"]),
            optimizers.get("dp2_rmsprop", **OPTIMIZERS["dp2_rmsprop"]),
            optimizers.get("pagan", **ELLIPSOID_CASES["pagan_per_trial"][1]),
            optimizers.get("pasan", **ELLIPSOID_CASES["pasan_per_trial_radius"][1])]
    for prob_name in ("least_squares", "logistic"):
        for opt in opts:
            _compare(*_pair(PROBLEMS[prob_name](), opt, sampling=sampling, batch_size=b, steps=11))


@pytest.mark.parametrize("sampling", ["poisson", "fixed", "replacement", "cyclic_poisson:3"])
def test_adam_family_bit_for_bit_with_the_chain(sampling):
    """Adam, DP-Adam (per-trial β₂: the chain raises an ``(R, 1)`` column to the power t) and
    DP-AdamBC on the block kernel are the chain to the last bit over 60 steps, for both batch
    sizes (a power of two and not).  The kernel reads ``1 − βᵗ`` computed by the chain's own
    expression (:func:`dpsim.transforms.preconditioners.bias_correction`); Numba's ``β ** t``
    differs from Python's and NumPy's ``pow`` in the last bit for about half the (β, t) pairs,
    which made 0 of these 48 runs equal before."""
    opts = {"adam": dict(lr=0.01),
            "dp_adam": OPTIMIZERS["dp_adam"],
            "dp_adam_bc": dict(PER_TRIAL, gamma_prime=1e-6)}
    for prob_name in ("least_squares", "logistic"):
        for b in (8, 12):
            for name, kw in opts.items():
                _compare(*_pair(PROBLEMS[prob_name](), optimizers.get(name, **kw), sampling=sampling,
                                batch_size=b, steps=60, record_every=20))


def test_numba_generator_streams_are_numpys():
    """The fused kernel relies on Numba's compiled ``np.random.Generator`` methods drawing NumPy's
    own streams bit for bit (values and the generator's state afterwards) for the four draws it
    makes: ``binomial`` (inversion and BTPE branches, p on both sides of 1/2), ``random``,
    ``integers`` (bounded, below and above 2³²) and ``standard_normal``."""
    import numba

    @numba.njit
    def draws(rng, n, p, k, hi):
        s = np.empty(k, dtype=np.int64)
        u = np.empty(k)
        m = np.empty(k, dtype=np.int64)
        z = np.empty(k)
        for i in range(k):
            s[i] = rng.binomial(n, p)
        for i in range(k):
            u[i] = rng.random()
        for i in range(k):
            m[i] = rng.integers(0, hi)
        for i in range(k):
            z[i] = rng.standard_normal()
        return s, u, m, z

    for n, p, hi in ((1000, 0.032, 1000), (1000, 0.01, 7), (200, 0.9, 2 ** 33), (5, 0.5, 1)):
        g1 = np.random.Generator(np.random.PCG64(11))
        g2 = np.random.Generator(np.random.PCG64(11))
        s, u, m, z = draws(g1, n, p, 2001, hi)
        np.testing.assert_array_equal(s, g2.binomial(n, p, size=2001))
        np.testing.assert_array_equal(u, g2.random(2001))
        np.testing.assert_array_equal(m, g2.integers(0, hi, size=2001, dtype=np.int64))
        np.testing.assert_array_equal(z, g2.standard_normal(2001))
        assert g1.bit_generator.state == g2.bit_generator.state


@pytest.mark.parametrize("prob_name,d", [("least_squares", 21), ("logistic", 37)])
def test_fused_bit_for_bit_wide_rows(prob_name, d):
    """Rows wider than 16 columns: the scatter's four-vector register blocks, single vectors and
    scalar tail columns (d = 21: 16 + 4 + 1; d = 37: 2·16 + 4 + 1) and the four-example margins,
    against the engine to the last bit (squared link: the vectorized clip coefficients)."""
    make = problems.least_squares if prob_name == "least_squares" else problems.logistic_regression
    prob = make(300, d, seed=8)
    opt = optimizers.get("dp_sgdm", **OPTIMIZERS["dp_sgdm"])
    a, b = _pair(prob, opt, batch_size=15, steps=12)
    _compare(a, b)
    np.testing.assert_array_equal(b.params, a.params)
    np.testing.assert_array_equal(b.loss, a.loss)


@pytest.mark.parametrize("sampling", ["poisson", "replacement"])
def test_inlined_bit_generator_equals_numba_generator_methods(monkeypatch, sampling):
    """The default draws (the inlined PCG64 of :mod:`dpsim._bitgen` on state arrays) and the
    reference draws (Numba's compiled ``Generator`` methods, ``DPSIM_FUSED_RNG=numba``) give the
    same run to the last bit, and leave the run's generators in the same state."""
    prob = PROBLEMS["least_squares"]()
    opt = optimizers.get("dp_adam", **OPTIMIZERS["dp_adam"])
    kw = dict(steps=17, batch_size=12, trials=R, seed=3, record_every=6, sampling=sampling)
    runs = {}
    for mode in ("numba", "inline"):
        monkeypatch.setenv(block.RNG_ENV, mode)
        runs[mode] = dpsim.simulate(prob, opt, fast=True, **kw)
    np.testing.assert_array_equal(runs["inline"].params, runs["numba"].params)
    np.testing.assert_array_equal(runs["inline"].loss, runs["numba"].loss)
    np.testing.assert_array_equal(runs["inline"].mean_batch_size, runs["numba"].mean_batch_size)
    monkeypatch.setenv(block.RNG_ENV, "mersenne")
    with pytest.raises(ValueError, match="DPSIM_FUSED_RNG"):
        dpsim.simulate(prob, opt, fast=True, **kw)



def _ball_case(make, d, seed):
    prob = make(120, d, seed=seed)
    return (np.ascontiguousarray(prob.X, dtype=np.float64), np.asarray(prob.y, dtype=np.float64),
            problems_links().index(prob.link))


def problems_links():
    from dpsim.privacy._ellipsoid import LINKS
    return LINKS


@pytest.mark.parametrize("make", [problems.least_squares, problems.logistic_regression,
                                  problems.absolute_regression])
@pytest.mark.parametrize("d", [1, 5, 20, 37])
@pytest.mark.parametrize("reg", [0.0, 0.3])
def test_ball_kernel_equals_engine_kernel(make, d, reg):
    """The ℓ2-ball kernel of the fused path (examples in vector lanes, rows transposed, padded
    lanes) against the engine's closed form (:func:`dpsim.privacy._ellipsoid._glm_trial`, the
    path the engine runs) on one trial, to the last bit, without and with ρ: every batch size from
    0 to 35 (not multiples of 4 or 8 included, and duplicate rows), α from "nothing projected" to
    "everything projected", weights of several scales, and non-finite weights (with ρ = 0 the
    engine's own loop for ``max_t |c x_t|``; NaN results in the same places); the count of
    projected examples equals the count of λ > 0."""
    from dpsim.privacy import _ellipsoid as E

    X, y, link = _ball_case(make, d, seed=d)
    xmax = rows._row_abs_max(X)
    rng = np.random.default_rng(100 + d)
    cap = 48
    XT = np.empty((d, cap + 8))
    sc = np.zeros((5, cap + 8))
    nomask = np.ones((1, 1), dtype=np.bool_)
    checked = projected = 0
    for alpha in (1e-12, 0.3, 4.0, 1e6):
        Amat = np.full((1, d), alpha)
        SA = np.sqrt(Amat)
        ISA = 1.0 / SA
        const_a = np.array([alpha])
        arow = np.zeros(1, dtype=np.int64)
        for scale in (0.0, 0.05, 1.0, 30.0):
            for kr in range(36):
                W = rng.standard_normal((2, d)) * scale
                if kr % 7 == 3 and scale == 1.0:
                    W[1, rng.integers(d)] = np.inf if kr % 2 else np.nan
                ib = np.zeros(cap + 8, dtype=np.int64)
                ib[:kr] = rng.integers(0, X.shape[0], size=kr)
                ib[kr:] = rng.integers(0, X.shape[0], size=cap + 8 - kr)  # stale entries
                sc[:] = rng.standard_normal(sc.shape)  # stale scratch
                XT[:] = rng.standard_normal(XT.shape)
                out = np.full((2, d), 7.0)
                nproj = rows._ball_dense_trial(link, X, xmax, ib, kr, W, y, alpha, reg, out, XT,
                                                sc, 1)
                ref = np.full((1, d), 5.0)
                lam = np.empty((1, max(kr, 1)))
                E._glm_trial(0, X.reshape(-1), np.arange(d, dtype=np.int64), np.zeros(1, np.int64),
                             d, y, link, reg, W[1:2], ib[:kr].reshape(1, kr).copy(), nomask, False,
                             Amat, SA, ISA, arow, const_a, ref, lam)
                np.testing.assert_array_equal(out[1], ref[0], err_msg=f"alpha={alpha} kr={kr}")
                np.testing.assert_array_equal(out[0], 7.0)  # other trials untouched
                assert nproj == int(np.sum(lam[0, :kr] > 0)), (alpha, kr)
                checked += 1
                projected += nproj
    assert checked == 4 * 4 * 36 and projected > 0


def test_ball_factor_matches_the_engine_expressions():
    """:func:`dpsim.privacy._ellipsoid._ball_factor` (branch-free, shared by the engine and the
    fused kernel) against the engine's former branches, on norms around the ball's edge, zero,
    huge, infinite and NaN, and α including 0 (no constraint)."""
    import math

    from dpsim.privacy._ellipsoid import _ball_factor

    def branches(nrm, sqa, alpha):
        f, lam = 1.0, 0.0
        if not nrm < math.inf:
            f = lam = math.nan
        elif sqa * nrm > 1.0:
            f = 1.0 / (sqa * nrm)
            lam = (sqa * nrm - 1.0) / alpha
        return f, lam

    rng = np.random.default_rng(3)
    norms = np.concatenate([[0.0, 1e-300, 1.0, np.nextafter(1.0, 2), np.nextafter(1.0, 0), 1e300,
                             np.inf, np.nan], 10 ** rng.uniform(-5, 5, 200)])
    for alpha in (0.0, 1e-8, 0.25, 1.0, 3.0, 1e8):
        sqa = math.sqrt(alpha) if alpha > 0 else 0.0
        for nrm in norms:
            got = _ball_factor(float(nrm), sqa, alpha)
            np.testing.assert_array_equal(np.array(got), np.array(branches(float(nrm), sqa, alpha)))


@pytest.mark.parametrize("prob_name,d,sampling", [("least_squares", 21, "poisson"),
                                                  ("absolute_box", 7, "replacement"),
                                                  ("logistic", 37, "fixed")])
def test_fused_pagan_bit_for_bit_wide_and_odd_batches(prob_name, d, sampling):
    """PAGAN on the ℓ2 ball through the whole fused run (batch sizes around 13, never a multiple
    of eight by construction of the fixed/replacement batches; d with tail columns) equals the
    engine to the last bit, records and the projected fraction included."""
    make = {"least_squares": problems.least_squares, "logistic": problems.logistic_regression,
            "absolute_box": problems.absolute_regression}[prob_name]
    prob = make(300, d, seed=9)
    opt = optimizers.get("pagan", **ELLIPSOID_CASES["pagan_per_trial"][1])
    a, b = _pair(prob, opt, batch_size=13, steps=9, sampling=sampling, record_every=3)
    _compare(a, b)
    np.testing.assert_array_equal(b.params, a.params)
    np.testing.assert_array_equal(b.loss, a.loss)
    np.testing.assert_array_equal(b.records["projected_fraction"], a.records["projected_fraction"])
    assert np.nanmax(b.records["projected_fraction"]) > 0


def _scaled_case(make, d, seed):
    prob = make(90, d, seed=seed)
    return np.ascontiguousarray(prob.X), prob.y, problems_links().index(prob.link)


@pytest.mark.parametrize("make", [problems.least_squares, problems.logistic_regression,
                                  problems.absolute_regression])
@pytest.mark.parametrize("d", [1, 2, 5, 20, 37])
@pytest.mark.parametrize("reg", [0.0, 0.3])
def test_scaled_kernel_equals_engine_kernel(make, d, reg):
    """DP²'s preconditioned clipped sum in the fused path (:func:`dpsim.fast.rows._glm_scaled_trial`:
    the scaled sums of four examples on vectors, two examples a vector) against the engine's
    kernel on one trial (:func:`dpsim.problems._glm_kernels._dense_trial` with ``want_scale``, the
    path it replaced), to the last bit: every batch size from 0 to 35 (remainders of the groups of
    four and duplicate rows), odd and even d (the last column's sums), weights of several scales
    and non-finite ones, scales with zeros, clip bounds from "every example clipped" to "none",
    with and without ρ; the other trials' rows untouched."""
    from dpsim.problems import _glm_kernels as K

    X, y, link = _scaled_case(make, d, seed=d)
    rng = np.random.default_rng(200 + d)
    cap = 40
    mm, cf, aa, cc = (np.full(cap, np.nan) for _ in range(4))
    s2 = np.full(d, np.nan)
    nomask = np.ones((1, 1), dtype=np.bool_)
    checked = 0
    for clip in (1e-3, 0.7, np.inf):
        for scale in (0.0, 0.05, 1.0, 30.0):
            for kr in range(36):
                W = rng.standard_normal((3, d)) * scale
                S = rng.uniform(0.0, 3.0, (3, d))
                if kr % 5 == 2:
                    S[1, rng.integers(d)] = 0.0
                if kr % 7 == 3 and scale == 1.0:
                    W[1, rng.integers(d)] = np.inf if kr % 2 else np.nan
                ib = rng.integers(0, X.shape[0], size=cap)
                out = np.full((3, d), 7.0)
                rows._glm_scaled_trial(link, X, ib, kr, W, S, y, reg, clip, out, mm, cf, aa, cc,
                                        s2, 1)
                ref = np.full((1, d), 5.0)
                K._dense_trial(X, ib[:kr].reshape(1, kr).copy(), W[1:2], y, link, reg, S[1:2],
                               True, np.array([clip]), nomask, False, ref, np.empty((1, max(kr, 1))),
                               0)
                np.testing.assert_array_equal(out[1], ref[0], err_msg=f"clip={clip} kr={kr}")
                np.testing.assert_array_equal(out[[0, 2]], 7.0)
                checked += 1
    assert checked == 3 * 4 * 36


def test_scaled_kernel_runs_without_jit(jit_on_off):
    """NUMBA_DISABLE_JIT=1: the scaled clipped sum's pure-Python stand-in of its vector sums gives
    the jitted kernel's bits (odd and even d, a batch with a remainder after the groups of four)."""
    code = (
        "import numpy as np, json, sys\n"
        "from dpsim import problems\n"
        "from dpsim.fast import rows as fused\n"
        "res = []\n"
        "for d in (5, 6):\n"
        "    p = problems.logistic_regression(60, d, seed=3)\n"
        "    rng = np.random.default_rng(1)\n"
        "    W = rng.standard_normal((2, d)); S = rng.uniform(0.1, 2, (2, d))\n"
        "    ib = rng.integers(0, 60, 16); out = np.zeros((2, d)); sc = np.empty(16)\n"
        "    fused._glm_scaled_trial(1, np.ascontiguousarray(p.X), ib, 11, W, S, p.y, 0.1, 0.4,\n"
        "                            out, sc.copy(), sc.copy(), sc.copy(), sc.copy(), np.empty(d), 1)\n"
        "    res.append([float(v).hex() for v in out[1]])\n"
        "json.dump(res, sys.stdout)\n"
    )
    off, on = jit_on_off(code).json()
    assert off == on
