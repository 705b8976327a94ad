"""dpsim.testing.strategies: 1 000 draws per public strategy with every hypothesis health check on,
and the draws run through the library's own validation (simulate, the accountant).

Cost control: generating 1 000 examples of each strategy takes ~30 s in all; simulating all 1 000
drawn simulations would take ~20 s more, so every 10th drawn simulation (100, a derandomized and
therefore fixed subset) is run, plus one run of every registered optimizer and problem kind, and the
accountant is run on 6 of the 1 000 privacy parameter draws (each PLD call takes ~1 s).  A
validation error (ValueError) in any of them is a strategy defect and fails the test.
"""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings

import dpsim
from dpsim import optimizers, problems
from dpsim.optimizers import _hyper
from dpsim.testing import strategies as S

STRICT = settings(max_examples=1000, derandomize=True, deadline=None, database=None,
                  suppress_health_check=[])  # every health check on


def _draw_all(strategy, n=1000):
    out = []

    @settings(STRICT, max_examples=n)
    @given(strategy)
    def collect(x):
        out.append(x)

    collect()
    assert len(out) == n
    return out


def _run(sim):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a diverging run (large lr) is still a run
        return sim.run(record_every=max(sim.steps, 1))


def test_problems_1000_draws_build_valid_problems_of_every_kind():
    drawn = _draw_all(S.problems(max_d=6, max_n=80))
    kinds = {p.name for p in drawn}
    assert kinds == set(problems.names())
    assert all(p.d <= 6 or p.name == "quadratic_2d" for p in drawn)
    for p in drawn[::50]:
        assert np.all(np.isfinite(p.loss(np.zeros((1, p.d)))))
    assert problems.get(**drawn[7].config).config == drawn[7].config  # rebuildable


def test_every_problem_factory_has_a_strategy():
    assert set(S.PROBLEM_KINDS) == set(problems.FACTORIES)
    with pytest.raises(ValueError, match="unknown problem kind 'nope'"):
        S.problems("nope")


def test_optimizers_1000_draws_are_valid_and_cover_every_name():
    drawn = _draw_all(S.optimizers())
    assert {o.name for o in drawn} == set(optimizers.names())
    for o in drawn[::10]:  # what the registry built is what it validates: rebuild from the record
        assert optimizers.get(o.name, **o.hyperparameters).hyperparameters == o.hyperparameters


@pytest.mark.parametrize("private", [True, False])
def test_optimizers_private_filter(private):
    drawn = _draw_all(S.optimizers(private=private), n=200)
    assert all(o.private == private for o in drawn)
    assert len({o.name for o in drawn}) >= (15 if private else 5)


def test_privacy_params_1000_draws_are_accounted():
    drawn = _draw_all(S.privacy_params())
    assert all(0.5 <= p.noise_multiplier <= 10 and 1e-3 <= p.sample_rate <= 0.5 and 1 <= p.steps <= 200
               and 1e-8 <= p.delta <= 1e-3 for p in drawn)
    for p in drawn[::200]:
        eps = p.epsilon()
        assert math.isfinite(eps) and eps >= 0


def test_gradient_tables_1000_draws_simulate():
    drawn = _draw_all(S.gradient_tables())
    for table in drawn[::100]:
        res = dpsim.simulate(table, optimizers.dp_sgd(clip=1.0, noise_multiplier=1.0), steps=2,
                             batch_size=1 if table.n != 2 else 2, trials=2, seed=0)
        assert res.params.shape == (2, table.d)
    assert "GradientTable([[" in repr(drawn[0])


def test_simulations_1000_draws_run():
    drawn = _draw_all(S.simulations())
    names = {s.optimizer.name for s in drawn}
    assert names == set(optimizers.names())
    for sim in drawn[::10]:
        res = _run(sim)
        assert res.params.shape == (sim.trials, sim.problem.d)


@pytest.mark.parametrize("name", optimizers.names())
def test_every_optimizer_runs_on_every_problem_kind(name):
    """One derandomized simulation per (optimizer, problem kind): a new optimizer is covered here
    without new code, from its declared ranges."""
    seen = set()

    @settings(max_examples=80, derandomize=True, deadline=None, database=None)
    @given(S.simulations(optimizers=S.optimizers(names=[name]), problems=S.problems(max_d=3, max_n=40)))
    def run(sim):
        if sim.problem.name in seen:
            return
        seen.add(sim.problem.name)
        _run(sim)

    run()
    assert len(seen) >= 5


# ------------------------------------------------------------------------------------------------
# the declarations the strategies read


@pytest.mark.parametrize("name", optimizers.names())
def test_declared_ranges_match_the_validation(name):
    """For every real hyperparameter: the declared interval's finite closed ends are accepted and
    values just outside are rejected with the value named, by get() itself."""
    for k, spec in optimizers.hyperparameters(name).items():
        spec = spec.inner if isinstance(spec, _hyper.OrNone) else spec
        if not isinstance(spec, _hyper.Real):
            continue
        lo, lo_closed, hi, hi_closed = spec.bounds
        for v, ok in [(lo, lo_closed), (hi, hi_closed), (lo - 1e-9 * max(1, abs(lo)), False),
                      (hi + 1e-9 * max(1, abs(hi)), False), (float("nan"), False)]:
            if not math.isfinite(v) and not math.isnan(v):
                continue
            if ok:
                optimizers.get(name, **{k: v, **_companions(name, k, v)})
            else:
                with pytest.raises(ValueError, match=k):
                    optimizers.get(name, **{k: v})


def _companions(name, k, v):
    """Values another hyperparameter needs for ``k = v`` to be valid (clip = ∞ needs σ = 0)."""
    return {"noise_multiplier": 0.0} if k in ("clip", "clip2", "radius") and math.isinf(v) else {}


def test_registering_without_a_spec_is_refused():
    with pytest.raises(TypeError, match="'lr' needs a default and a spec annotation"):
        @optimizers.register
        def no_spec_optimizer(lr=0.1):  # pragma: no cover - never built
            return None
    assert "no_spec_optimizer" not in optimizers.names()


def test_a_new_optimizer_is_covered_by_the_strategies():
    """A function registered with specs appears in optimizers() and its draws run."""
    from dpsim.optimizers._registry import _REGISTRY, _SPECS
    from dpsim.optimizers.baselines import learning_rate
    from dpsim.privacy.privatizers import gaussian_privatizer
    from dpsim.transforms import named_chain, trace

    @optimizers.register
    def dp_sgd_trace_test(lr: _hyper.LR = 0.1, beta: _hyper.BETA = 0.5, clip: _hyper.CLIP = 1.0,
                          noise_multiplier: _hyper.SIGMA = 1.0):
        return optimizers.optimizer(named_chain(("privatizer", gaussian_privatizer(clip, noise_multiplier)),
                                                ("momentum", trace(beta)), learning_rate(lr)))

    try:
        got = []

        @settings(max_examples=10, derandomize=True, deadline=None, database=None)
        @given(S.simulations(optimizers=S.optimizers(names=["dp_sgd_trace_test"])))
        def run(sim):
            got.append(sim.optimizer.hyperparameters["beta"])
            _run(sim)

        run()
        assert len(set(got)) > 1 and all(0 <= b < 1 for b in got)
    finally:
        _REGISTRY.pop("dp_sgd_trace_test")
        _SPECS.pop("dp_sgd_trace_test")


def test_strategies_shrink_to_readable_counterexamples():
    """A property that fails for every clip above 1 shrinks to a short, exact call."""
    from hypothesis import find

    opt = find(S.optimizers(names=["dp_sgd"]), lambda o: o.hyperparameters["clip"] > 1.0,
               settings=settings(derandomize=True, database=None, max_examples=50))
    assert repr(opt).startswith("dp_sgd(lr=0.0001, clip=")
    sim = find(S.simulations(problems=S.problems("least_squares", max_n=30), optimizers=S.optimizers(names=["sgd"])),
               lambda s: s.trials > 1, settings=settings(derandomize=True, database=None, max_examples=50))
    assert sim.steps == 1 and sim.trials == 2 and sim.problem.n == 20 and sim.problem.d == 1
    assert repr(sim).startswith("simulate(<Problem least_squares(n=20, d=1")


def test_strategy_arguments_are_validated():
    with pytest.raises(ValueError, match="unknown optimizer 'nope'"):
        S.optimizers(names=["nope"])
    with pytest.raises(ValueError, match="max_d must be a positive integer"):
        S.problems(max_d=0)
    with pytest.raises(ValueError, match="min_noise"):
        S.privacy_params(min_noise=0.0)
    with pytest.raises(ValueError, match="max_abs"):
        S.gradient_tables(max_abs=float("inf"))
    assert S.hyperparameter(_hyper.Opaque("x")) is None  # opaque without examples: keep the default


# ------------------------------------------------------------------------------------------------
# strategies for the papers' bounds (bound_params, dp2_phases, dp_budgets, tcdp_params, seeds)
#
# One 1 000-example run draws all of them side by side (every health check on, as above): each
# strategy gets its 1 000 draws, and hypothesis's per-example overhead is paid once, not five times.


@pytest.fixture(scope="module")
def bound_draws():
    import hypothesis.strategies as hst
    drawn = _draw_all(hst.fixed_dictionaries({
        "bound": S.bound_params(), "narrow": S.bound_params(
            clip=(0.05, 0.95), noise_multiplier=[0.0, 1.0], batch_size=(2, 3), beta=0.9, s=(1, 5), steps=[7]),
        "logclip": S.bound_params(clip=(1e-3, 1.0, "log")),
        "phases": S.dp2_phases(), "free": S.dp2_phases(min_steps=4, max_steps=30, equal=False),
        "budget": S.dp_budgets(), "wide": S.dp_budgets(epsilon=(0.01, 20.0), delta=(1e-15, 0.1)),
        "tcdp": S.tcdp_params(infinite_omega=True), "seed": S.seeds(), "small_seed": S.seeds(1000)}))
    return {k: [d[k] for d in drawn] for k in drawn[0]}


def test_bound_params_1000_draws_build_valid_optimizers_and_simulate(bound_draws):
    """Every draw is accepted by the optimizer the bounds are about (dp2_rmsprop validates C, σ,
    β, s with the declared specs); every 250th draw runs through simulate with its b and T."""
    drawn = bound_draws["bound"]
    assert all(0.05 <= p.clip <= 10 and 0 <= p.noise_multiplier <= 5 and 1 <= p.batch_size <= 64
               and 0 <= p.beta <= 0.999 and 1 <= p.s <= 8 and 1 <= p.steps <= 100 for p in drawn)
    assert min(p.noise_multiplier for p in drawn) == 0.0  # σ = 0 (no noise) is drawn
    opts = [optimizers.dp2_rmsprop(s1=p.s, clip=p.clip, noise_multiplier=p.noise_multiplier, beta=p.beta)
            for p in drawn]
    lsq = problems.least_squares(64, 2, seed=0)
    for p, opt in list(zip(drawn, opts))[::250]:
        res = _run(S.Simulation(lsq, opt, min(p.steps, 20), p.batch_size, 2, 0, "fixed"))
        assert res.params.shape == (2, 2)


def test_bound_params_windows_are_validated_against_the_declared_ranges(bound_draws):
    narrow = bound_draws["narrow"]
    assert all(0.05 <= p.clip <= 0.95 and p.noise_multiplier in (0.0, 1.0) and p.batch_size in (2, 3)
               and p.beta == 0.9 and 1 <= p.s <= 5 and p.steps == 7 for p in narrow)
    logs = bound_draws["logclip"]
    assert sum(p.clip < 0.01 for p in logs) > 200  # log scale: about a third of the draws below 0.01
    for bad, needle in [(dict(clip=(0.0, 1.0)), "clip must be in"), (dict(beta=(0.5, 1.0)), "beta must be in"),
                        (dict(noise_multiplier=[-1.0]), "noise_multiplier"), (dict(s=(0, 3)), "s must be"),
                        (dict(clip=(1.0, math.inf)), "finite"), (dict(clip=(2.0, 1.0)), "lo <= hi"),
                        (dict(batch_size=(1, 2, 3)), "batch_size")]:
        with pytest.raises(ValueError, match=needle):
            S.bound_params(**bad)


def test_dp2_phases_1000_draws_build_and_simulate(bound_draws):
    drawn, free = bound_draws["phases"], bound_draws["free"]
    assert all(1 <= p.s1 <= p.steps <= 120 and p.s2 == p.s1 for p in drawn)
    assert any(p.s1 == p.steps > 1 for p in drawn) and any(p.s1 == 1 for p in drawn)
    assert all(4 <= p.steps <= 30 and 1 <= p.s1 <= p.steps and 1 <= p.s2 <= p.steps for p in free)
    assert any(p.s1 != p.s2 for p in free)
    lsq = problems.least_squares(40, 2, seed=0)
    for p in drawn + free:
        opt = optimizers.dp2_rmsprop(**p.hyperparameters())
        assert opt.hyperparameters["s1"] == p.s1 and opt.hyperparameters["s2"] == p.s2
    for p in (drawn + free)[::250]:
        _run(S.Simulation(lsq, optimizers.dp2_rmsprop(**p.hyperparameters()), p.steps, 4, 2, 0, "fixed"))
    with pytest.raises(ValueError, match="min_steps"):
        S.dp2_phases(min_steps=0)


def test_dp_budgets_1000_draws_are_valid_ctcdp_targets(bound_draws):
    """Every (ε, δ) builds dp_sgd_ctcdp and converts to a (ρ, a) budget; every 250th is planned
    ([L2P] Alg. 3) and run, and its ε is within the target."""
    from dpsim.privacy import tcdp
    drawn = bound_draws["budget"]
    assert all(0.5 <= b.epsilon <= 10 and 1e-8 <= b.delta <= 1e-3 for b in drawn)
    for b in drawn:
        optimizers.dp_sgd_ctcdp(epsilon=b.epsilon, delta=b.delta)
        assert tcdp.rho_a(b.epsilon, b.delta) > 0
    quad = problems.quadratic_2d(1.0, 1.0, n=2000, seed=0)
    for b in drawn[::250]:  # planned as simulations() does: the horizon doubled until feasible
        opt, batch = S._ctcdp_setup(quad, optimizers.dp_sgd_ctcdp(epsilon=b.epsilon, delta=b.delta), 10)
        res = _run(S.Simulation(quad, opt, 10, batch, 2, 0, "fixed"))
        assert np.all(np.asarray(res.epsilon(b.delta)) <= b.epsilon * (1 + 1e-9))
    wide = bound_draws["wide"]
    assert all(0.01 <= b.epsilon <= 20 and 1e-15 <= b.delta <= 0.1 for b in wide)
    for b in wide:
        assert tcdp.rho_a(b.epsilon, b.delta) > 0
    with pytest.raises(ValueError, match="delta must be in"):
        S.dp_budgets(delta=(1e-5, 1.0))


def test_tcdp_params_1000_draws_convert(bound_draws):
    from dpsim.privacy import tcdp
    drawn = bound_draws["tcdp"]
    assert all(1e-6 <= p.rho <= 10 and (1.5 <= p.omega <= 1e4 or p.omega == math.inf) for p in drawn)
    assert any(p.omega == math.inf for p in drawn)
    for p in drawn:
        eps = tcdp.tcdp_to_dp(p.rho, p.omega, 1e-5)
        assert math.isfinite(eps) and eps > 0
    with pytest.raises(ValueError, match="omega must be in"):
        S.tcdp_params(omega=(1.0, 2.0))


def test_seeds_1000_draws(bound_draws):
    drawn = bound_draws["seed"]
    assert all(0 <= s <= 2 ** 16 for s in drawn) and len(set(drawn)) > 100 and max(drawn) > 2 ** 15
    assert all(0 <= s <= 1000 for s in bound_draws["small_seed"])
    with pytest.raises(ValueError, match="max_seed"):
        S.seeds(-1)
