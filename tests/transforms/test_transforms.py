"""named_chain / lookup, the combinators (same pieces, another order) and range validation."""

import numpy as np
import pytest

import dpsim
from dpsim import optimizers, problems
from dpsim._validate import hyper
from dpsim.privacy.privatizers import gaussian_privatizer
from dpsim.transforms import (alternate, lookup, mean_gradient, named_chain, scale,
                              scale_then_privatize, trace)
from dpsim.transforms.preconditioners import AdamState, adam_v_hat, precondition, rmsprop, scale_by_adam


@pytest.fixture(scope="module")
def prob():
    return problems.logistic_regression(400, 6, seed=3)


def _run(prob, tx, **kw):
    opt = optimizers.Optimizer(name="t", hyperparameters={}, transform=tx)
    kw = dict(dict(steps=25, batch_size=20, trials=2, seed=4), **kw)
    return dpsim.simulate(prob, opt, **kw)


# ---------------------------------------------------------------------------------------------
# named_chain and lookup


def test_named_chain_state_is_keyed_by_name():
    tx = named_chain(("gradient", mean_gradient()), ("momentum", trace(0.9)), ("lr", scale(-0.1)))
    assert tx.names == ("gradient", "momentum", "lr")
    state = tx.init(np.zeros((2, 3)))
    assert list(state) == ["gradient", "momentum", "lr"] and state["momentum"].trace.shape == (2, 3)


def test_named_chain_refuses_duplicates_and_unnamed_pieces():
    with pytest.raises(ValueError, match="duplicate piece names"):
        named_chain(("lr", scale(1.0)), ("lr", scale(2.0)))
    with pytest.raises(ValueError, match="give this piece a name"):
        named_chain(scale(1.0))


def test_lookup_finds_pieces_inside_combinators():
    stp = scale_then_privatize(gaussian_privatizer(1.0, 0.5), scale_by_adam(), eps_scale=1e-3)
    tx = named_chain(stp, ("lr", scale(-0.1)))  # the combinator's names are spliced in
    assert tx.names == ("privatizer", "preconditioner", "lr")
    state = (tx.init(np.zeros((2, 3))), {"other": tx.init(np.zeros((2, 3)))})
    assert isinstance(lookup(state, "preconditioner"), AdamState)
    with pytest.raises(KeyError, match="'adam'.*privatizer, preconditioner, lr"):
        lookup(state, "adam")


def test_adam_v_hat_is_the_bias_corrected_second_moment():
    st = AdamState(m=None, v=np.array([[0.5, 2.0]]), count=3)
    np.testing.assert_allclose(adam_v_hat(st, 0.9), st.v / (1 - 0.9 ** 3), rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# Combinators: the same pieces in another order


@pytest.mark.parametrize("pre", ["adam", "rmsprop"])
def test_scale_then_privatize_equals_post_processing_without_noise_or_clipping(prob, pre):
    """σ = 0, C = ∞: scaling by s, releasing and unscaling by 1/s is the identity up to rounding."""
    def piece():
        return scale_by_adam(0.9, 0.99, 1e-8) if pre == "adam" else precondition(rmsprop(0.9, 1e-8))

    post = named_chain(("privatizer", gaussian_privatizer(np.inf, 0.0)), ("preconditioner", piece()),
                       ("lr", scale(-0.01)))
    stp = named_chain(scale_then_privatize(gaussian_privatizer(np.inf, 0.0), piece(), eps_scale=1e-3),
                      ("lr", scale(-0.01)))
    a, b = _run(prob, post), _run(prob, stp)
    np.testing.assert_allclose(b.params, a.params, rtol=1e-10, atol=1e-12)
    assert not np.array_equal(a.params, np.zeros_like(a.params))


def test_scale_then_privatize_differs_once_clipping_acts(prob):
    post = named_chain(("privatizer", gaussian_privatizer(0.05, 0.0)),
                       ("preconditioner", scale_by_adam()), ("lr", scale(-0.01)))
    stp = named_chain(scale_then_privatize(gaussian_privatizer(0.05, 0.0), scale_by_adam(), eps_scale=1e-3),
                      ("lr", scale(-0.01)))
    assert np.max(np.abs(_run(prob, post).params - _run(prob, stp).params)) > 1e-6


def test_dp2_orders_agree_without_noise_or_clipping(prob):
    """dp2 (precondition, then privatize) and noise_first (privatize, then precondition) are the
    same pieces in two orders: equal up to rounding at σ = 0, C = ∞, different with clipping."""
    kw = dict(s1=3, s2=4, lr=0.2, lr2=0.02, noise_multiplier=0.0)
    a = dpsim.simulate(prob, optimizers.get("dp2_rmsprop", clip=np.inf, **kw), steps=30, batch_size=20,
                       trials=2, seed=1)
    b = dpsim.simulate(prob, optimizers.get("dp2_noise_first", clip=np.inf, **kw), steps=30,
                       batch_size=20, trials=2, seed=1)
    np.testing.assert_allclose(a.params, b.params, rtol=1e-10, atol=1e-12)
    c = dpsim.simulate(prob, optimizers.get("dp2_rmsprop", clip=0.05, **kw), steps=30, batch_size=20,
                       trials=2, seed=1)
    d = dpsim.simulate(prob, optimizers.get("dp2_noise_first", clip=0.05, **kw), steps=30, batch_size=20,
                       trials=2, seed=1)
    assert np.max(np.abs(c.params - d.params)) > 1e-6


def test_alternate_runs_phases_and_switch_hook(prob):
    calls = []

    def on_switch(state, ctx):
        calls.append(ctx.t)
        return state

    first = named_chain(("gradient", mean_gradient()), ("lr", scale(0.0)))
    second = named_chain(("gradient", mean_gradient()), ("lr", scale(-0.1)))
    tx = alternate((2, first), (3, second), on_switch=("lr", on_switch))
    assert tx.names == ("gradient", "lr") and len(tx.privacy) == 1  # one shared piece, one event
    res = _run(prob, tx, steps=11, record_every=1, trials=1)
    assert calls == [3, 8]
    moved = np.abs(np.diff(res.loss[:, 0])) > 0  # steps 1-2 and 6-7 do not move (lr 0)
    assert moved.tolist() == [False, False, True, True, True, False, False, True, True, True, False]


# ---------------------------------------------------------------------------------------------
# Hyperparameter ranges


@pytest.mark.parametrize("name, kw, needle", [
    ("dp_adam", dict(beta2=1.5), "beta2 must be in [0, 1), got beta2=1.5"),
    ("dp_adam", dict(beta1=-0.1), "beta1 must be in [0, 1), got beta1=-0.1"),
    ("adam", dict(beta2=1.0), "beta2 must be in [0, 1), got beta2=1.0"),
    ("dp_rmsprop", dict(beta=1.2), "beta must be in [0, 1), got beta=1.2"),
    ("momentum", dict(beta=1.0), "beta must be in [0, 1), got beta=1.0"),
    ("dp2_rmsprop", dict(beta=2.0), "beta must be in [0, 1), got beta=2.0"),
    ("dp_adam_stp", dict(base="rmsprop", beta2=1.0), "beta2 must be in [0, 1), got beta2=1.0"),
    ("adadps", dict(beta=-1.0), "beta must be in [0, 1), got beta=-1.0"),
    ("dp_adam", dict(beta2=[0.9, 1.0]), "beta2=1.0"),
    ("sgd", dict(lr=-1.0), "lr must be in [0, inf), got lr=-1.0"),
    ("dp_sgd", dict(noise_multiplier=float("nan")), "noise_multiplier must be in [0, inf)"),
    ("dp_sgd", dict(clip=0.0), "clip must be in (0, inf], got clip=0.0"),
    ("dp_adam_bc", dict(gamma_prime=0.0), "gamma_prime must be in (0, inf), got gamma_prime=0.0"),
])
def test_hyperparameter_out_of_range_names_the_value(name, kw, needle):
    with pytest.raises(ValueError) as exc:
        optimizers.get(name, **kw)
    assert needle in str(exc.value)


def test_hyper_returns_float_or_read_only_array():
    assert hyper("beta", 0.5, "[0, 1)") == 0.5 and isinstance(hyper("beta", 0, "[0, 1)"), float)
    arr = hyper("beta", [0.1, 0.2], "[0, 1)")
    assert arr.dtype == float and not arr.flags.writeable
    assert hyper("clip", float("inf"), "(0, inf]") == float("inf")
    with pytest.raises(ValueError, match=r"clip must be in \(0, inf\)"):
        hyper("clip", float("inf"), "(0, inf)")
    with pytest.raises(ValueError, match="scalar or a 1-D"):
        hyper("beta", [[0.1]], "[0, 1)")


# ---------------------------------------------------------------------------------------------
# the fused NumPy Adam step and buffer donation (issue 10, memory)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kw", [{}, {"phi": 1e-3, "floor": 1e-4, "eps": 0.0}, {"phi": 0.02},
                                {"beta1": [0.5, 0.9, 0.99], "eps": [1e-8, 1e-3, 0.0]}],
                         ids=["adam", "adambc", "corrected", "per-trial"])
def test_fused_adam_is_bit_identical_to_the_array_expressions(monkeypatch, dtype, kw):
    """The one-pass kernel performs the array expressions' operations in their order: equal bits,
    for both dtypes, scalar and per-trial hyperparameters, the bias-corrected variants."""
    from dpsim.backend import Backend
    from dpsim.transforms import StepContext
    from dpsim.transforms import preconditioners as P

    kw = {k: (np.array(v) if isinstance(v, list) else v) for k, v in kw.items()}
    tx = scale_by_adam(**kw)
    ctx = StepContext(Backend("numpy", 0, dtype), 3, 8, 10)
    rng = np.random.default_rng(5)
    p = np.zeros((3, 40), dtype=dtype)
    fused = ref = tx.init(p)
    for t in range(1, 6):
        ctx.t = t
        g = (0.1 * rng.standard_normal((3, 40))).astype(dtype)
        o1, fused = tx.update(g, fused, p, ctx)
        with monkeypatch.context() as mp:
            mp.setattr(P, "_fusable", lambda *a: False)
            o2, ref = tx.update(g, ref, p, ctx)
        assert o1.dtype == o2.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(o1, o2)
        np.testing.assert_array_equal(fused.m, ref.m)
        np.testing.assert_array_equal(fused.v, ref.v)


def test_adam_donation_updates_in_place_only_when_donated():
    from dpsim.backend import Backend
    from dpsim.transforms import StepContext

    tx = scale_by_adam()
    ctx = StepContext(Backend("numpy", 0), 2, 8, 10)
    p = np.zeros((2, 5))
    s0 = tx.init(p)
    g = np.ones((2, 5))
    _, s1 = tx.update(g, s0, p, ctx)
    assert s1.m is not s0.m and not s0.m.any()  # pure: the old state is untouched
    ctx.donate_state = True
    _, s2 = tx.update(g, s1, p, ctx)
    assert s2.m is s1.m and s2.v is s1.v  # donated: overwritten in place
    _, s3 = tx.update(g, tx.init(p), p, StepContext(Backend("numpy", 0), 2, 8, 10))
    _, s4 = tx.update(g, s3, p, StepContext(Backend("numpy", 0), 2, 8, 10))
    np.testing.assert_array_equal(s2.m, s4.m)


# ---------------------------------------------------------------------------------------------
# elements: each per-coordinate rule written once, evaluated on arrays and on one coordinate


def _element_pieces():
    from dpsim.optimizers.adaptive import noise_variance
    from dpsim.transforms import trace
    from dpsim.transforms.preconditioners import adagrad, yogi

    per = np.array([0.5, 0.9, 0.99])
    return {"scale": scale(-0.1), "scale-per-trial": scale(np.array([-0.1, 2.0, -3.0])),
            "trace": trace(0.9), "trace-per-trial": trace(per),
            "rmsprop": precondition(rmsprop(0.9, 1e-8)), "rmsprop-eps0": precondition(rmsprop(per, 0.0)),
            "adagrad": precondition(adagrad(1e-3)), "adagrad-max": precondition(adagrad(1e-3, guard="max")),
            "yogi": precondition(yogi(per, 1e-8)), "adam": scale_by_adam(0.9, 0.999, 1e-8),
            "adam-per-trial": scale_by_adam(per, per, np.array([1e-8, 0.0, 1e-3])),
            "adambc": scale_by_adam(0.9, 0.999, 0.0, phi=1e-3, floor=1e-4),
            "corrected": scale_by_adam(0.9, 0.999, 1e-8, phi=noise_variance(1.0, 1.0), floor=0.0)}


def _coordinate_kernel(key):
    """A loop over (R, d) applying the composed body of the structure ``key`` coordinate by
    coordinate (dpsim.fast.compose.body), as the fused release does."""
    import numba
    from numba.np.unsafe.ndarray import to_fixed_tuple

    from dpsim.fast import compose as _compose

    body, _, nk = _compose.body(key)

    @numba.njit(error_model="numpy")
    def run(G, slots, K, out):
        for r in range(G.shape[0]):
            k = to_fixed_tuple(K[r if K.shape[0] > 1 else 0], nk)
            for j in range(G.shape[1]):
                out[r, j] = body(G[r, j], slots, k, r, j)

    return run


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint64 if a.dtype == np.float64 else np.uint32)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("which", list(_element_pieces()))
def test_element_on_one_coordinate_is_the_array_rule_bit_for_bit(monkeypatch, which, dtype):
    """Each element's rule, compiled for one coordinate and composed as the fused release composes
    it, gives the bits of the piece's own array update — output and state — over values that
    exercise every branch: zeros of both signs, subnormals, ±inf, NaN, negative second moments;
    for both dtypes, scalar and per-trial constants, three steps (Adam's 1 − βᵗ changes)."""
    from dpsim.backend import Backend
    from dpsim.transforms import StepContext
    from dpsim.transforms import preconditioners as P
    from dpsim.transforms.elements import table

    monkeypatch.setattr(P, "_fusable", lambda *a: False)  # Adam's array form, not its kernel
    tx = _element_pieces()[which]
    el = tx.element
    ctx = StepContext(Backend("numpy", 0, dtype), 3, 8, 10)
    rng = np.random.default_rng(7)
    special = np.array([0.0, -0.0, 1e-310, -1e-310, np.inf, -np.inf, np.nan, 1.0, -1.0, 3e38])
    p = np.zeros((3, 64), dtype=dtype)
    state = tx.init(p)
    if el.slots:
        fill = {f: (rng.standard_normal((3, 64)) * 0.01) for f in el.slots}
        for f in fill:
            fill[f][0, :10] = special
            fill[f][1, :10] = np.abs(special)
        state = state._replace(**{f: v.astype(dtype) for f, v in fill.items()})
    run = _coordinate_kernel(el.key)
    for t in range(1, 4):
        ctx.t = t
        g = rng.standard_normal((3, 64)) * 10.0 ** rng.integers(-3, 3, size=(3, 64))
        g[2, :10] = special
        g = g.astype(dtype)
        slots = tuple(np.array(getattr(state, f), dtype=dtype, order="C") for f in el.slots)
        K = table(el.consts(state, ctx), np.dtype(dtype))
        out = np.empty_like(g)
        run(g, slots, K, out)
        ref, new_state = tx.update(g, state, p, ctx)
        assert ref.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(_bits(out), _bits(ref))
        for f, a in zip(el.slots, slots):
            np.testing.assert_array_equal(_bits(a), _bits(getattr(new_state, f)))
        assert el.advance(state, slots)._replace(**{f: None for f in el.slots}) == \
            new_state._replace(**{f: None for f in el.slots})
        state = new_state


def test_a_composed_kernel_is_keyed_by_its_rules_sources():
    """The composed kernel's cache key carries a digest of the files defining its rules, so an
    edited rule is recompiled rather than served stale from Numba's disk cache."""
    from dpsim.fast import compose as _compose
    from dpsim.transforms import base
    from dpsim.transforms import preconditioners as P

    fp = _compose.fingerprint("precondition:rmsprop|trace|scale")
    for mod in (P, base, _compose):
        assert _compose._file_digest(mod.__file__) in fp
    assert fp == _compose.fingerprint("trace|precondition:rmsprop|scale")  # same files
