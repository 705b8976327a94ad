"""The fused release of the engine (dpsim.fast.release) is the chain, bit for bit.

Every optimizer on that path — a chain composed from its pieces' elements, whoever built it, or
a shape derived from its pieces' parts — runs twice with the same seed: through ``transform.update``
(the reference, ``dpsim.engine.FUSED_RELEASE = False``) and through the fused release;
parameters, every record, every probe and the privacy record must be *equal*
(``assert_array_equal``), on the three clipped-sum sources (sparse GLM rows, dense GLM rows, a
problem's own clipped sum), every sampler, float64 and float32, scalar and per-trial
hyperparameters.
"""

import itertools

import numpy as np
import pytest

import dpsim
from dpsim import engine, optimizers, problems
from dpsim.fast import compose as _compose
from dpsim.fast import release as fr
from dpsim.fast import release_kernels as frk
from dpsim.transforms import lookup

R = 3


def _pt(*v):
    return [float(x) for x in np.resize(np.array(v, dtype=float), R)]


@pytest.fixture(scope="module")
def probs():
    return {"sparse": problems.logistic_regression(300, 40, density=0.1, seed=1),
            "dense": problems.least_squares(120, 6, seed=2),
            "quadratic": problems.random_quadratic(30, 5, seed=0)}


def _v_probe(state, params, ctx):
    """Row sums of the preconditioner's v (or the momentum buffer): the state is the chain's."""
    for name, field in (("preconditioner", "v"), ("momentum", "trace")):
        try:
            return np.asarray(getattr(lookup(state, name), field)).sum(axis=1)
        except KeyError:
            continue
    return np.zeros(params.shape[0])


def _both(prob, opt, **kw):
    out = []
    old = engine.FUSED_RELEASE
    try:
        for flag in (False, True):
            engine.FUSED_RELEASE = flag
            out.append(dpsim.simulate(prob, opt, probes={"v": _v_probe}, **kw))
    finally:
        engine.FUSED_RELEASE = old
    a, b = out
    np.testing.assert_array_equal(a.params, b.params)
    for k in ("loss", "grad_norm_sq", "dist_to_opt", "mean_batch_size"):
        x, y = getattr(a, k), getattr(b, k)
        assert (x is None) == (y is None)
        if x is not None:
            np.testing.assert_array_equal(x, y)
    assert set(a.records) == set(b.records)
    for k in a.records:
        np.testing.assert_array_equal(a.records[k], b.records[k])
    assert a.privacy == b.privacy
    assert a.config["engine"] == "chain" and b.config["engine"] == "release"
    return a, b


CASES = [
    ("dp_sgd", {}),
    ("dp_sgd", {"lr": _pt(0.1, 0.5), "clip": _pt(0.3, 2.0), "noise_multiplier": _pt(0.0, 1.5)}),
    ("dp_sgd", {"clip": float("inf"), "noise_multiplier": 0.0}),
    ("dp_sgdm", {"beta": _pt(0.5, 0.9)}),
    ("dp_rmsprop", {"beta": _pt(0.5, 0.99), "eps": _pt(1e-3, 0.0), "lr": _pt(0.01, 0.1)}),
    ("dp_adagrad", {"eps": _pt(1e-3, 1e-8), "clip": _pt(1.0, 3.0)}),
    ("dp_adam", {"beta1": _pt(0.5, 0.9), "beta2": _pt(0.9, 0.999)}),
    ("dp_adam_bc", {"gamma_prime": _pt(1e-8, 1e-6)}),
    ("dp2_rmsprop", {"s1": 2, "s2": 3, "lr2": _pt(0.01, 0.1), "clip2": _pt(2.0, 10.0),
                     "eps": _pt(1e-3, 1e-7)}),
    ("dp2_rmsprop", {"s1": 2, "unbias": True, "noise_multiplier": _pt(0.5, 2.0)}),
    ("dp2_adagrad", {"s1": 2, "lr2": _pt(0.3, 1.0)}),
    ("dp2_yogi", {"s1": 3}),
    ("dp2_extra_query", {"s1": 3, "clip2": _pt(5.0, 50.0)}),
    ("dp2_extra_query", {"s1": 1}),
    ("dp2_noise_first", {"s1": 2, "eps": _pt(1e-3, 1e-7)}),
    ("dp_adam_stp", {"eps_scale": _pt(1e-3, 1e-1), "beta2": _pt(0.9, 0.999)}),
    ("dp_adam_stp", {"base": "rmsprop", "eps": _pt(1e-3, 0.0)}),
    ("dp_adam_stp", {"base": "adagrad", "noise_multiplier": 0.0}),
    ("sgd", {}), ("momentum", {}), ("rmsprop", {}), ("adagrad", {}), ("adam", {}),
    ("delayed_rmsprop", {"s1": 2, "lr2": _pt(0.01, 0.1)}),
    ("dp_adam_corrected", {"eps": _pt(1e-8, 1e-3), "noise_multiplier": _pt(0.5, 2.0)}),
    ("dp_adam_corrected", {"beta1": 0.5, "clip": float("inf"), "noise_multiplier": 0.0}),
    ("yogi", {"beta": _pt(0.5, 0.99), "eps": _pt(1e-3, 0.0)}),
]


@pytest.mark.parametrize("name,hp", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_fused_release_is_the_chain_bit_for_bit_on_sparse_glm(probs, name, hp):
    opt = optimizers.get(name, **hp)
    assert fr.spec_of(opt.transform) is not None
    # b = 8 (a power of two: the kernel multiplies by the exact 1/b) and b = 12 (it divides)
    for dtype, seed, sampling, b in (("float64", 0, "poisson", 8), ("float32", 1, "fixed", 8),
                                     ("float64", 2, "replacement", 12), ("float32", 3, "poisson", 12)):
        init = np.linspace(-0.2, 0.3, probs["sparse"].d) if seed == 1 else None
        _both(probs["sparse"], opt, steps=9, batch_size=b, trials=R, seed=seed, dtype=dtype,
              sampling=sampling, record_every=3, init=init)


def _hand_built():
    """Chains built by hand from element pieces (none registered anywhere): docs/ARCHITECTURE.md's
    example, ``dp_adam``'s chain under another name (per-trial hyperparameters), momentum before
    AdaGrad, the non-private Yogi with momentum, and DP-AdamBC's rule behind a correlated-noise
    privatizer."""
    from dpsim.optimizers.adaptive import noise_variance
    from dpsim.privacy.privatizers import gaussian_privatizer
    from dpsim.transforms import mean_gradient, named_chain, scale, trace
    from dpsim.transforms.preconditioners import adagrad, precondition, rmsprop, scale_by_adam, yogi

    def opt(name, *pieces):
        return optimizers.Optimizer(name=name, hyperparameters={}, transform=named_chain(*pieces))

    return {
        "architecture": opt("dp_rmsprop_momentum",
                            ("privatizer", gaussian_privatizer(clip=1.0, noise_multiplier=1.2)),
                            ("preconditioner", precondition(rmsprop(beta=0.9, eps=1e-8))),
                            ("momentum", trace(0.5)), ("lr", scale(-0.01))),
        "adam_twin": opt("dp_adam_twin",
                         ("privatizer", gaussian_privatizer(_pt(0.5, 2.0), _pt(1.0, 0.0))),
                         ("preconditioner", scale_by_adam(_pt(0.5, 0.9), _pt(0.9, 0.999), 1e-8)),
                         ("lr", scale(-0.01))),
        "momentum_adagrad": opt("momentum_adagrad",
                                ("privatizer", gaussian_privatizer(2.0, 0.5)),
                                ("momentum", trace(np.array(_pt(0.3, 0.9)))),
                                ("preconditioner", precondition(adagrad(_pt(1e-3, 0.0)))),
                                ("lr", scale(-0.1))),
        "yogi_momentum": opt("yogi_momentum", ("gradient", mean_gradient()),
                             ("preconditioner", precondition(yogi(0.9, 1e-3))),
                             ("momentum", trace(0.5)), ("lr", scale(-0.05))),
        "adambc_banded": opt("adambc_banded",
                             ("privatizer", gaussian_privatizer(1.0, 1.5, noise="banded:3")),
                             ("preconditioner", scale_by_adam(0.9, 0.999, 0.0,
                                                              phi=noise_variance(1.0, 1.5),
                                                              floor=1e-6)),
                             ("lr", scale(-0.01))),
    }


@pytest.mark.parametrize("which", ["architecture", "adam_twin", "momentum_adagrad", "yogi_momentum",
                                   "adambc_banded"])
def test_hand_built_chains_take_the_fused_release_bit_for_bit(probs, which):
    """A chain of element pieces built by hand takes the fused release (composed from its
    pieces, nothing registered) and equals its chain bit for bit: samplers, both dtypes, both
    noise layouts, b a power of two or not, per-trial hyperparameters, correlated noise."""
    opt = _hand_built()[which]
    assert isinstance(fr.spec_of(opt.transform), _compose.Composition)
    assert dpsim.explain(probs["sparse"], opt).engine == "release"
    for dtype, seed, sampling, b, backend in (
            ("float64", 0, "poisson", 8, "numpy"), ("float32", 1, "fixed", 12, "numpy"),
            ("float64", 2, "replacement", 12, "numpy:blocked"), ("float32", 3, "poisson", 8, "numpy")):
        _both(probs["sparse"], opt, steps=9, batch_size=b, trials=R, seed=seed, dtype=dtype,
              sampling=sampling, record_every=3, backend=backend)


def test_hand_built_dp_adam_is_dp_adam(probs):
    """``dp_adam``'s chain rebuilt by hand under another name is ``dp_adam``: the same path and
    the same numbers."""
    from dpsim.privacy.privatizers import gaussian_privatizer
    from dpsim.transforms import named_chain, scale
    from dpsim.transforms.preconditioners import scale_by_adam

    twin = optimizers.Optimizer(name="dp_adam_twin", hyperparameters={}, transform=named_chain(
        ("privatizer", gaussian_privatizer(1.0, 1.0)),
        ("preconditioner", scale_by_adam(0.9, 0.999, 1e-8)), ("lr", scale(-0.01))))
    kw = dict(steps=9, batch_size=8, trials=R, seed=5, record_every=3)
    a = dpsim.simulate(probs["sparse"], "dp_adam", **kw)
    b = dpsim.simulate(probs["sparse"], twin, **kw)
    assert a.config["engine"] == b.config["engine"] == "release"
    np.testing.assert_array_equal(a.params, b.params)
    np.testing.assert_array_equal(a.loss, b.loss)


@pytest.mark.parametrize("name,hp", [CASES[i] for i in (1, 4, 6, 8, 12, 14, 15)])
@pytest.mark.parametrize("which", ["dense", "quadratic"])
def test_fused_release_is_the_chain_on_dense_rows_and_other_problems(probs, which, name, hp):
    opt = optimizers.get(name, **hp)
    for dtype, seed, sampling in (("float64", 0, "poisson"), ("float32", 1, "fixed")):
        # fast=False keeps the small-d kernel of dpsim.fast.block out (it takes dense float64 runs)
        _both(probs[which], opt, steps=7, batch_size=6, trials=R, seed=seed, dtype=dtype,
              sampling=sampling, record_every=3, fast=False)


def test_fused_release_with_a_domain_and_cyclic_poisson():
    prob = problems.absolute_regression(200, 6, seed=3)  # Box domain: projection after each step
    for name in ("dp_sgd", "dp_rmsprop", "dp2_rmsprop"):
        _both(prob, optimizers.get(name), steps=8, batch_size=10, trials=R, seed=4, fast=False,
              record_every=2)
    _both(problems.logistic_regression(300, 40, density=0.1, seed=1), optimizers.get("dp_sgd"),
          steps=8, batch_size=10, trials=R, seed=5, sampling="cyclic_poisson:4", record_every=4)


@pytest.mark.parametrize("dtype,source", [(np.float64, "generator"), (np.float32, "generator"),
                                          (np.float64, "state")])  # the inlined one is float64's
def test_compiled_draws_are_the_generators_stream(dtype, source):
    """The kernel's normals continue the run's generator exactly — through Numba's
    ``Generator.standard_normal``, or (float64) inlined on its state array: the values of
    ``gen.standard_normal((R, d))`` in C order, and the same state afterwards."""
    import numba

    from dpsim import _bitgen

    @numba.njit
    def fill(gen, out):
        zb = np.empty(out.shape[1], dtype=np.float64)
        for r in range(out.shape[0]):
            z = fr._trial_source(gen, r, zb, True)
            for j in range(out.shape[1]):
                out[r, j] = fr._normal_at(z, out, j)

    for seed in (0, 1, 2):
        g1 = np.random.Generator(np.random.PCG64(seed))
        g2 = np.random.Generator(np.random.PCG64(seed))
        g1.standard_normal(5, dtype=dtype)  # both start mid-stream
        g2.standard_normal(5, dtype=dtype)
        ref = g1.standard_normal((4, 257), dtype=dtype)
        got = np.empty((4, 257), dtype=dtype)
        if source == "state":
            st = _bitgen.state_of(g2)
            fill(st, got)
            _bitgen.store_state(g2, st)
        else:
            fill(g2, got)
        np.testing.assert_array_equal(ref, got)
        assert g1.bit_generator.state == g2.bit_generator.state


@pytest.mark.parametrize("name,hp", [CASES[i] for i in (0, 1, 3, 4, 5, 6, 8, 12, 14, 15, 16, 24)])
def test_fused_release_with_inlined_normals_is_the_chain(probs, monkeypatch, name, hp):
    """Every float64 release drawing its normals inline (threshold 0) is still the chain, bit for
    bit, and leaves the Generator where the chain's draws leave it (the runs continue from it);
    float32 keeps Numba's Generator.  Also at a size past the default threshold."""
    monkeypatch.setattr(fr, "INLINE_NORMALS_MIN", 0)
    opt = optimizers.get(name, **hp)
    for dtype, seed, sampling, b in (("float64", 0, "poisson", 8), ("float64", 2, "replacement", 12),
                                     ("float32", 1, "fixed", 8)):
        _both(probs["sparse"], opt, steps=7, batch_size=b, trials=R, seed=seed, dtype=dtype,
              sampling=sampling, record_every=3)
    monkeypatch.setattr(fr, "INLINE_NORMALS_MIN", 4096)
    big = problems.logistic_regression(200, 3 * 10 ** 4, density=0.002, seed=7)
    _both(big, opt, steps=4, batch_size=8, trials=R, seed=3, record_every=2)


def test_composed_and_derived_chains_take_the_fused_release():
    """A chain whose pieces compose takes the fused release whoever built it; a piece without an
    element, correlated noise outside the composed and IME shapes, a public split or another
    namespace run through ``transform.update``, and ``why_not`` names the reason."""
    from dpsim.privacy.privatizers import gaussian_privatizer, noiseless_v_privatizer
    from dpsim.transforms import GradientTransformation, named_chain, scale, trace

    numpy = dpsim.backend.Backend("numpy", seed=0)
    prob = problems.logistic_regression(100, 10, density=0.2, seed=0)
    tx = named_chain(("privatizer", gaussian_privatizer(1.0, 1.0)), ("lr", scale(-0.1)))
    assert isinstance(fr.spec_of(tx), _compose.Composition) and fr.spec_of(tx).key == "scale"
    assert isinstance(fr.plan(prob, tx, numpy), fr.FusedStep)
    # a piece without an element (here one that wraps trace's update) stops the composition
    wrapped = trace(0.5)
    odd = named_chain(("privatizer", gaussian_privatizer(1.0, 1.0)),
                      ("momentum", GradientTransformation(wrapped.init, wrapped.update)),
                      ("lr", scale(-0.1)))
    assert fr.spec_of(odd) is None and "'momentum' has no element" in fr.why_not(odd, numpy)
    oracle = named_chain(("privatizer", noiseless_v_privatizer(1.0, 1.0)), ("lr", scale(-0.1)))
    assert "first piece 'privatizer'" in fr.why_not(oracle, numpy)
    # correlated noise: a composed chain carries the privatizer's noise source (drawn on its
    # stream state); the DP² forms, derived for i.i.d. releases only, run the chain
    banded = optimizers.get("dp_sgd", noise="banded:2").transform
    assert fr.spec_of(banded).release.source is not None
    assert isinstance(fr.plan(prob, banded, numpy), fr.FusedStep)
    assert fr.spec_of(optimizers.get("dp2_rmsprop", noise="sqrt_toeplitz").transform) is None
    assert fr.spec_of(optimizers.get("dp_adam_stp", noise="banded:3").transform).release.source is not None
    assert fr.spec_of(optimizers.get("dp_adam_ime", noise="banded:3").transform).release.source is not None
    assert fr.spec_of(optimizers.get("dp2_extra_query", noise="banded:3").transform) is None
    opt = optimizers.get("dp_sgd")
    be = dpsim.backend.Backend("array_api_strict:blocked", seed=0, threads=1)
    try:
        assert fr.plan(prob, opt.transform, be) is None
    finally:
        be.close()
    assert fr.plan(prob, opt.transform, numpy, public_idx=np.arange(5)) is None
    ada = optimizers.get("adadps").transform  # reads a public split: fused only with one
    assert fr.plan(prob, ada, dpsim.backend.Backend("numpy", seed=0)) is None
    assert isinstance(fr.plan(prob, ada, dpsim.backend.Backend("numpy", seed=0),
                              public_idx=np.arange(5)), fr.FusedStep)
    assert fr.spec_of(optimizers.get("adadps", noise="banded:2").transform) is None
    assert isinstance(fr.plan(prob, opt.transform, dpsim.backend.Backend("numpy", seed=0)), fr.FusedStep)


CORRELATED = [("dp_sgd", {}), ("dp_sgdm", {"beta": _pt(0.5, 0.9)}),
              ("dp_rmsprop", {"eps": _pt(1e-3, 0.0)}), ("dp_adagrad", {}),
              ("dp_adam", {"beta1": _pt(0.5, 0.9)}), ("dp_adam_bc", {}),
              ("dp_adam_corrected", {"noise_multiplier": _pt(0.5, 2.0)}),
              ("dp_sgd", {"noise_multiplier": _pt(0.0, 1.5), "clip": _pt(0.3, 2.0)}),
              ("dp_sgd", {"clip": float("inf"), "noise_multiplier": 0.0}),
              ("dp_adam_stp", {"eps_scale": _pt(1e-3, 1e-1)}), ("dp_adam_stp", {"base": "rmsprop"}),
              ("dp_adam_stp", {"base": "adagrad", "noise_multiplier": 0.0})]


@pytest.mark.parametrize("noise", ["banded:3", "sqrt_toeplitz"])
@pytest.mark.parametrize("name,hp", CORRELATED, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CORRELATED)])
def test_fused_release_with_correlated_noise_is_the_chain(probs, monkeypatch, noise, name, hp):
    """Correlated noise (DP-MF) on a post-processing chain or scale-then-privatize (the privatizer
    releases the scaled batch): the fused step draws each
    step's unit noise through the privatizer's noise source on the privatizer's stream state,
    as its ``add_noise`` does, and the kernel reads it as an array — so parameters, records,
    probes and the privacy record equal the chain's (samplers, both dtypes, both noise layouts,
    per-trial hyperparameters, σ = 0 and C = ∞, which draw nothing).  Every step ran the kernel."""
    opt = optimizers.get(name, noise=noise, **hp)
    assert fr.spec_of(opt.transform).release.source is not None
    calls = _count_kernel_calls(monkeypatch, "_composed_apply")
    for dtype, seed, sampling, b, backend in (
            ("float64", 0, "poisson", 8, "numpy"), ("float32", 1, "fixed", 12, "numpy"),
            ("float64", 2, "cyclic_poisson:3", 8, "numpy:blocked")):
        calls.clear()
        _both(probs["sparse"], opt, steps=9, batch_size=b, trials=R, seed=seed, dtype=dtype,
              sampling=sampling, record_every=3, backend=backend)
        assert len(calls) == 9  # the fused run's steps (the chain's run calls no kernel)


CORRELATED_IME = [("ime_adagrad", {}), ("ime_adagrad_free", {"clip": _pt(0.5, 2.0)}),
                  ("dp_adam_ime", {"beta1": _pt(0.5, 0.9)}), ("dp_adam_ime_free", {}),
                  ("dp_adam_noiseless_v", {}), ("dp_adam_stp_noiseless_v", {"base": "adagrad"}),
                  ("ime_adagrad", {"noise_multiplier": 0.0})]


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning",
                            "ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("noise", ["banded:3", "sqrt_toeplitz"])
@pytest.mark.parametrize("name,hp", CORRELATED_IME,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(CORRELATED_IME)])
def test_ime_fused_release_with_correlated_noise_is_the_chain(probs, monkeypatch, noise, name, hp):
    """IME and the noiseless-v oracles with correlated noise: the fused step draws the first
    release's unit noise (on the privatizer's ``noise1``, the oracle's ``noise``) and then the
    second's (``noise2``; none for the oracles or σ = 0), as the privatizer does, and the one pass
    per trial reads both arrays — equal to the chain (both samplers' branches of the second
    release's sensitivity, both layouts, float32 through the chain).  Every float64 step ran the
    kernel."""
    opt = optimizers.get(name, noise=noise, **hp)
    assert fr.spec_of(opt.transform).release.source is not None
    calls = _count_kernel_calls(monkeypatch, "_ime_fused")
    for dtype, seed, sampling, backend, kernel_steps in (
            ("float64", 0, "poisson", "numpy", 9), ("float64", 1, "fixed", "numpy:blocked", 9),
            ("float32", 2, "poisson", "numpy", 0)):
        calls.clear()
        _both(probs["sparse"], opt, steps=9, batch_size=8, trials=R, seed=seed, dtype=dtype,
              sampling=sampling, record_every=3, backend=backend)
        assert len(calls) == kernel_steps


def test_fused_release_leaves_the_callers_init_alone():
    prob = problems.logistic_regression(300, 40, density=0.1, seed=1)
    w0 = np.full((R, prob.d), 0.05)
    keep = w0.copy()
    dpsim.simulate(prob, optimizers.get("dp_sgd"), steps=4, batch_size=8, trials=R, init=w0)
    np.testing.assert_array_equal(w0, keep)


def _count_calls(monkeypatch, method):
    """A list that grows by one at each call of ``FusedStep.<method>`` (which still runs)."""
    calls = []
    real = getattr(fr.FusedStep, method)

    def spy(self, *a, **k):
        calls.append(1)
        return real(self, *a, **k)

    monkeypatch.setattr(fr.FusedStep, method, spy)
    return calls


def _count_kernel_calls(monkeypatch, *names):
    """A list that grows by one at each call of any of the kernels ``fr.<name>`` (which still
    run)."""
    calls = []
    for name in names:
        real = getattr(fr, name)

        def spy(*a, _real=real):
            calls.append(1)
            return _real(*a)

        monkeypatch.setattr(fr, name, spy)
    return calls


def _first_release_sources(monkeypatch):
    """A list that grows at each ``fr._ime_fused`` call (which still runs) by whether the first
    release's normals came as an ``(R, d)`` array drawn before the pass (else the Generator or
    its state array, drawn inside it)."""
    calls = []
    real = fr._ime_fused

    def spy(*a):
        gen = a[18]  # _release_args' noise source
        calls.append(isinstance(gen, np.ndarray) and gen.ndim == 2 and gen.dtype == np.float64)
        return real(*a)

    monkeypatch.setattr(fr, "_ime_fused", spy)
    return calls


@pytest.mark.parametrize("threads", ["1", "2"])
def test_fused_release_is_the_chain_on_the_blocked_noise_layout(probs, monkeypatch, threads):
    """``backend="numpy:blocked"``: the fused release reads the step's noise array, drawn up front
    by the backend (blocks on a thread pool, the next step's ahead) exactly as the chain draws it;
    every recursion is still the chain's, bit for bit, for one and for two noise threads — also
    when a step's noise spans several blocks, so the pool and the look-ahead are in play."""
    monkeypatch.setenv("DPSIM_NOISE_THREADS", threads)
    calls = _count_calls(monkeypatch, "step")
    for i in (0, 1, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15, 16, 18, 24):
        name, hp = CASES[i]
        opt = optimizers.get(name, **hp)
        for dtype, seed, sampling, b in (("float64", 0, "poisson", 8), ("float32", 1, "fixed", 12)):
            calls.clear()
            _both(probs["sparse"], opt, steps=7, batch_size=b, trials=R, seed=seed, dtype=dtype,
                  sampling=sampling, record_every=3, backend="numpy:blocked")
            assert len(calls) == 7  # the fused run took the fused release at every step
    big = problems.logistic_regression(200, 3 * 10 ** 4, density=0.002, seed=7)
    assert R * big.d > 65536  # = dpsim.backend.NOISE_BLOCK: two blocks per draw
    for name, hp in (CASES[1], CASES[6], CASES[12]):
        _both(big, optimizers.get(name, **hp), steps=5, batch_size=8, trials=R, seed=3,
              record_every=2, backend="numpy:blocked")
    _both(probs["dense"], optimizers.get("dp_adam"), steps=6, batch_size=6, trials=R, seed=2,
          backend="numpy:blocked", fast=False)
    _both(probs["quadratic"], optimizers.get("dp2_rmsprop", s1=2), steps=6, batch_size=6,
          trials=R, seed=2, backend="numpy:blocked", fast=False)


def test_adadps_fused_release_is_the_chain(probs, monkeypatch):
    """AdaDPS (:class:`fr.Prepared`): its public RMSProp part, then the release of the scaled batch,
    the learning rate and the update in one kernel pass — bit for bit the chain, with scalar and
    per-trial hyperparameters, both noise layouts and every sampler; off its fast form (float32,
    dense features) every step runs the chain inside the fused step, still equal."""
    fused = _count_calls(monkeypatch, "_release_composed")
    cases = [{}, {"lr": _pt(0.05, 0.5), "clip": _pt(0.5, 2.0), "noise_multiplier": _pt(0.0, 1.5),
                  "beta": _pt(0.5, 0.99), "eps": _pt(1e-3, 1e-8)},
             {"noise_multiplier": 0.0, "public_fraction": 0.2}]
    runs = [("float64", 0, "poisson", 8, "numpy"), ("float64", 1, "fixed", 12, "numpy:blocked"),
            ("float64", 2, "replacement", 8, "numpy")]
    for hp in cases:
        opt = optimizers.get("adadps", **hp)
        for dtype, seed, sampling, b, backend in runs:
            fused.clear()
            _both(probs["sparse"], opt, steps=6, batch_size=b, trials=R, seed=seed, dtype=dtype,
                  sampling=sampling, record_every=3, backend=backend)
            assert len(fused) == 6
    opt = optimizers.get("adadps", public_fraction=0.1)
    fused.clear()
    _both(probs["sparse"], opt, steps=5, batch_size=8, trials=R, seed=4, dtype="float32")
    _both(problems.logistic_regression(200, 6, seed=5), opt, steps=5, batch_size=8, trials=R, seed=4,
          fast=False)
    assert fused == []  # neither has the fast public part: the chain ran inside the fused step


def test_pagan_fused_release_is_the_chain(probs, monkeypatch):
    """PAGAN (:class:`fr.Ellipsoid`): per trial the privatizer's projected sum (its own GLM kernel),
    the noise ``z·s/√a``, AdaGrad with ``D = max(√v, ε)``, the learning rate and the update in one
    kernel pass — bit for bit the chain (parameters, records, the ``projected_fraction`` probe, the
    privacy record) for the three cases of the projection (constant ``A`` row: closed form;
    varying ``A`` with ρ = 0: the root-find over a row's nonzeros; with ρ ≠ 0: over a dense
    scratch row), active and inactive projections, per-trial σ / η / radius, σ = 0, every
    sampler, b a power of two or not, both noise layouts and the inlined normals; off its GLM form
    (float32, a non-GLM problem) every step runs the chain inside the fused step, still equal."""
    applied = _count_kernel_calls(monkeypatch, "_ellipsoid_apply")
    sparse = probs["sparse"]
    d = sparse.d
    sig = list(np.linspace(0.2, 2.0, d))
    unreg = problems.logistic_regression(300, d, density=0.1, reg=0.0, seed=6)
    cases = [(sparse, {"radius": 1.0}),  # projection inactive
             (sparse, {"radius": 0.05, "noise_multiplier": _pt(0.0, 1.0, 2.0), "lr": _pt(0.1, 0.5, 1.0),
                       "eps": _pt(1e-12, 1e-3)}),
             (sparse, {"radius": _pt(0.02, 0.3, 5.0), "scaling": "optimal", "sigma_hat": sig}),
             (unreg, {"radius": 0.1, "scaling": "optimal", "sigma_hat": sig}),
             (unreg, {"radius": 0.1, "noise_multiplier": 0.0}),
             (sparse, {"radius": float("inf"), "noise_multiplier": 0.0})]
    runs = [("poisson", 8, "numpy"), ("fixed", 12, "numpy:blocked"), ("replacement", 8, "numpy")]
    for (prob, hp), name in itertools.product(cases, ("pagan", "pasan")):
        opt = optimizers.get(name, **hp)
        assert fr.spec_of(opt.transform).per_norm == (name == "pasan")
        for seed, (sampling, b, backend) in enumerate(runs):
            applied.clear()
            a, _ = _both(prob, opt, steps=6, batch_size=b, trials=R, seed=seed, sampling=sampling,
                         record_every=2, backend=backend)  # records include projected_fraction
            assert len(applied) == 6
        if hp.get("radius") == 0.05:
            assert np.max(a.records["projected_fraction"]) > 0  # the projection was active
    big = problems.logistic_regression(200, 3 * 10 ** 4, density=0.002, seed=7)
    box = problems.absolute_regression(200, 6, seed=3)  # dense rows, a Box domain
    for name in ("pagan", "pasan"):
        opt = optimizers.get(name, radius=0.05)
        monkeypatch.setattr(fr, "INLINE_NORMALS_MIN", 0)
        _both(sparse, opt, steps=5, batch_size=8, trials=R, seed=7, record_every=5)
        monkeypatch.setattr(fr, "INLINE_NORMALS_MIN", 4096)
        _both(big, opt, steps=4, batch_size=8, trials=R, seed=3, record_every=2)
        _both(box, optimizers.get(name, radius=0.5), steps=8, batch_size=10, trials=R, seed=4,
              fast=False, record_every=2)
        applied.clear()
        _both(sparse, opt, steps=5, batch_size=8, trials=R, seed=4, dtype="float32")
        _both(probs["quadratic"], opt, steps=5, batch_size=6, trials=R, seed=4, fast=False)
        assert applied == []  # no GLM form: the chain ran inside the fused step
        assert fr.spec_of(optimizers.get(name, radius=1.0, noise="banded:2").transform) is None


def test_row_sum_is_numpys_row_sum():
    """PASAN's fused ``||ĝ||²`` is NumPy's ``np.sum(g * g, axis=1)`` bit for bit (its pairwise
    summation, replicated by ``frk._row_sum``) over lengths on both sides of every block size;
    a NumPy that sums otherwise fails here."""
    import numba

    @numba.njit
    def rows(x):
        out = np.empty(x.shape[0])
        for r in range(x.shape[0]):
            out[r] = frk._row_sum(x[r])
        return out

    shapes = ([(3, n) for n in (*range(1, 140), 255, 256, 257, 1000, 8191, 8192, 8193, 10 ** 4,
                                30001)] + [(4096, 3), (4096, 20), (300, 129), (2, 10 ** 5)])
    rng = np.random.default_rng(0)
    for shape in shapes:
        x = rng.standard_normal(shape) * rng.choice([1e-3, 1.0, 1e5], size=shape)
        for a in (x * x, x):
            np.testing.assert_array_equal(rows(a), np.sum(a, axis=1, keepdims=True)[:, 0],
                                          err_msg=str(shape))


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning",
                            "ignore:invalid value:RuntimeWarning")  # ε = 0 where v = 0, both paths
def test_ime_fused_release_is_the_chain(probs, monkeypatch):
    """IME (:class:`fr.Ime`: ``ime_adagrad(_free)``, ``dp_adam_ime(_free)``) in one kernel pass
    (:func:`fr._ime_fused`) — per trial the first release into ``g̃``, the square's release of
    ``Π_C(ḡ)²`` (NumPy's row sum for ``‖ḡ‖``), the moment recursion and the update, the first
    release's normals drawn before the pass (on the stream layout from the Generator, unless
    σ = 0 leaves the second release nothing to draw) — bit for bit the chain: both sensitivity
    branches (fixed-size batches: ``ḡ²`` as is; others: the projection, active with a small
    clip), per-trial hyperparameters, σ = 0, b a power of two or not, both noise layouts, the
    inlined normals, dense rows and a problem's own clipped sum; in float32 the chain runs
    inside the fused step."""
    passes = _first_release_sources(monkeypatch)
    sparse = probs["sparse"]
    cases = [("ime_adagrad", {}),
             ("ime_adagrad", {"clip": _pt(0.05, 0.5, 3.0), "noise_multiplier": _pt(0.0, 1.0, 2.0),
                              "lr": _pt(0.05, 0.5), "eps": _pt(1e-8, 0.0, 1e-3)}),
             ("ime_adagrad_free", {"clip": 0.05}),
             ("ime_adagrad", {"noise_multiplier": 0.0, "clip": 0.1}),
             ("dp_adam_ime", {"beta1": _pt(0.5, 0.9), "beta2": _pt(0.9, 0.999), "clip": _pt(0.05, 2.0)}),
             ("dp_adam_ime", {"eps": 0.0, "noise_multiplier": _pt(0.0, 1.0)}),
             ("dp_adam_ime_free", {"clip": 0.05})]
    runs = [("poisson", 8, "numpy"), ("fixed", 12, "numpy:blocked"), ("replacement", 8, "numpy"),
            ("fixed", 8, "numpy")]
    for name, hp in cases:
        opt = optimizers.get(name, **hp)
        assert isinstance(fr.spec_of(opt.transform), fr.Ime)
        for seed, (sampling, b, backend) in enumerate(runs):
            passes.clear()
            _both(sparse, opt, steps=6, batch_size=b, trials=R, seed=seed, sampling=sampling,
                  record_every=2, backend=backend)
            # one pass a step; on the stream layout the first release's normals drawn before it
            # unless the second release draws nothing (σ = 0)
            up_front = backend == "numpy:blocked" or hp.get("noise_multiplier") != 0.0
            assert passes == [up_front] * 6
    big = problems.logistic_regression(200, 3 * 10 ** 4, density=0.002, seed=7)
    for name in ("ime_adagrad", "dp_adam_ime"):
        opt = optimizers.get(name, clip=0.1)
        monkeypatch.setattr(fr, "INLINE_NORMALS_MIN", 0)
        _both(sparse, opt, steps=5, batch_size=8, trials=R, seed=7, record_every=5)
        monkeypatch.setattr(fr, "INLINE_NORMALS_MIN", 4096)
        _both(big, opt, steps=4, batch_size=8, trials=R, seed=3, record_every=2)
        for which in ("dense", "quadratic"):
            _both(probs[which], opt, steps=6, batch_size=6, trials=R, seed=2, fast=False,
                  record_every=3)
        passes.clear()
        _both(sparse, opt, steps=5, batch_size=8, trials=R, seed=4, dtype="float32")
        assert passes == []  # float32: the chain ran inside the fused step
    # correlated noise: derived too (test_ime_fused_release_with_correlated_noise_is_the_chain)
    assert fr.spec_of(optimizers.get("ime_adagrad", noise="banded:2").transform).release.source is not None


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning",
                            "ignore:invalid value:RuntimeWarning")  # ε = 0 where v = 0, both paths
def test_noiseless_v_oracle_fused_release_is_the_chain(probs, monkeypatch):
    """``dp_adam_noiseless_v`` ([DESIGN] Alg. 9's oracle: ``m`` fed ``g̃``, ``v`` the noiseless
    ``ḡ²``) runs as :class:`fr.Ime` with ``noiseless``: the second pass squares the clipped mean
    as is — no projection under any sampler (fixed-size batches included), nothing drawn — and
    is the chain bit for bit: parameters, records, the ``v`` probe and the (non-private) privacy
    record; per-trial hyperparameters, σ = 0, an infinite clip, ε = 0, both noise layouts, the
    inlined normals; float32 runs the chain."""
    passes = _first_release_sources(monkeypatch)
    sparse = probs["sparse"]
    cases = [{},
             {"beta1": _pt(0.5, 0.9), "beta2": _pt(0.9, 0.999), "clip": _pt(0.05, 2.0),
              "lr": _pt(0.05, 0.5)},
             {"eps": 0.0, "noise_multiplier": _pt(0.0, 1.0)},
             {"clip": float("inf"), "noise_multiplier": 0.0},
             {"clip": 0.05, "noise_multiplier": 3.0}]
    runs = [("poisson", 8, "numpy"), ("fixed", 12, "numpy:blocked"), ("replacement", 8, "numpy"),
            ("fixed", 8, "numpy")]
    for hp in cases:
        opt = optimizers.get("dp_adam_noiseless_v", **hp)
        spec = fr.spec_of(opt.transform)
        assert isinstance(spec, fr.Ime) and spec.noiseless
        for seed, (sampling, b, backend) in enumerate(runs):
            passes.clear()
            a, _ = _both(sparse, opt, steps=6, batch_size=b, trials=R, seed=seed, sampling=sampling,
                         record_every=2, backend=backend)
            assert passes == [backend == "numpy:blocked"] * 6  # σ2 = 0: drawn in the pass
            assert a.epsilon(1e-5) == float("inf")  # an oracle: declared non-private
    opt = optimizers.get("dp_adam_noiseless_v", clip=0.1)
    monkeypatch.setattr(fr, "INLINE_NORMALS_MIN", 0)
    _both(sparse, opt, steps=5, batch_size=8, trials=R, seed=7, record_every=5)
    monkeypatch.setattr(fr, "INLINE_NORMALS_MIN", 4096)
    _both(problems.logistic_regression(200, 3 * 10 ** 4, density=0.002, seed=7), opt, steps=4,
          batch_size=8, trials=R, seed=3, record_every=2)
    _both(probs["dense"], opt, steps=6, batch_size=6, trials=R, seed=2, fast=False, record_every=3)
    passes.clear()
    _both(sparse, opt, steps=5, batch_size=8, trials=R, seed=4, dtype="float32")
    assert passes == []  # float32: the chain ran inside the fused step
    # correlated noise: derived too (test_ime_fused_release_with_correlated_noise_is_the_chain)
    assert fr.spec_of(optimizers.get("dp_adam_noiseless_v", noise="banded:2").transform).release.source is not None


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning",
                            "ignore:invalid value:RuntimeWarning")
def test_stp_noiseless_v_oracle_fused_release_is_the_chain(probs, monkeypatch):
    """``dp_adam_stp_noiseless_v`` (the oracle over scale-then-privatize) on an Adam or AdaGrad
    base runs as :class:`fr.Ime` with ``noiseless`` and ``stp_eps``: the release of the batch
    scaled by ``s`` (from ``v`` before the step), ``g̃/s`` and ``(S/b)²/(s·s)`` into the rule — bit
    for bit the chain, per-trial hyperparameters, σ = 0, both noise layouts, every sampler; an
    RMSProp base derives no shape (the chain runs)."""
    passes = _first_release_sources(monkeypatch)
    sparse = probs["sparse"]
    cases = [{},
             {"base": "adagrad", "eps": 1e-3},
             {"beta1": _pt(0.5, 0.9), "beta2": _pt(0.9, 0.999), "clip": _pt(0.05, 2.0),
              "eps_scale": _pt(1e-3, 0.1), "lr": _pt(0.05, 0.5)},
             {"base": "adagrad", "noise_multiplier": _pt(0.0, 1.0), "clip": 0.1}]
    runs = [("poisson", 8, "numpy"), ("fixed", 12, "numpy:blocked"), ("replacement", 8, "numpy")]
    for hp in cases:
        opt = optimizers.get("dp_adam_stp_noiseless_v", **hp)
        spec = fr.spec_of(opt.transform)
        assert isinstance(spec, fr.Ime) and spec.noiseless and spec.stp_eps is not None
        for seed, (sampling, b, backend) in enumerate(runs):
            passes.clear()
            _both(sparse, opt, steps=6, batch_size=b, trials=R, seed=seed, sampling=sampling,
                  record_every=2, backend=backend)
            assert passes == [backend == "numpy:blocked"] * 6  # σ2 = 0: drawn in the pass
    opt = optimizers.get("dp_adam_stp_noiseless_v", clip=0.1)
    _both(problems.logistic_regression(200, 3 * 10 ** 4, density=0.002, seed=7), opt, steps=4,
          batch_size=8, trials=R, seed=3, record_every=2)
    _both(probs["dense"], opt, steps=6, batch_size=6, trials=R, seed=2, fast=False, record_every=3)
    assert fr.spec_of(optimizers.get("dp_adam_stp_noiseless_v", base="rmsprop").transform) is None
