"""Backend selection, randomness ownership, conversions."""

import numpy as np
import pytest

from dpsim import backend as B
from dpsim.privacy import clip_l2


def test_numpy_backend_draws_are_seeded():
    a = B.Backend("numpy", seed=3).normal((4, 5))
    b = B.Backend("numpy", seed=3).normal((4, 5))
    c = B.Backend("numpy", seed=4).normal((4, 5))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_backend_draws_agree_with_seed_sequence_generator():
    ss = np.random.SeedSequence(9)
    z = B.Backend("numpy", seed=ss).normal((3, 2))
    ref = np.random.Generator(np.random.PCG64(np.random.SeedSequence(9))).standard_normal((3, 2))
    np.testing.assert_array_equal(z, ref)


def test_every_backend_produces_its_own_arrays(backend_name):
    be = B.Backend(backend_name, seed=0)
    z = be.normal((8, 3), scale=2.0)
    assert B.array_namespace(z) is be.xp
    assert B.to_numpy(z).shape == (8, 3)
    u = B.to_numpy(be.uniform((1000,)))
    assert 0 <= u.min() and u.max() < 1


def test_float32_backend():
    be = B.Backend("numpy", seed=0, dtype="float32")
    assert be.normal((2, 2)).dtype == np.float32
    with pytest.raises(ValueError, match="float16"):
        B.Backend("numpy", dtype="float16")


def test_unknown_backend_names_the_value():
    with pytest.raises(ValueError, match="'tensorflow'"):
        B.get_namespace("tensorflow")


def test_cupy_absent_is_a_clear_error():
    if B.cupy_available():
        pytest.skip("CuPy and a GPU are present; nothing to provoke")
    with pytest.raises(ValueError, match="cupy"):
        B.Backend("cupy")


def test_clip_l2_on_every_backend(backend_name):
    be = B.Backend(backend_name)
    g = np.array([[3.0, 4.0], [0.0, 0.0], [0.3, 0.4]])
    out = B.to_numpy(clip_l2(be.asarray(g), 1.0))
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0], [0.3, 0.4]])
    assert B.to_numpy(clip_l2(be.asarray(g), float("inf"))).tolist() == g.tolist()
    with pytest.raises(ValueError, match="clip=-1"):
        clip_l2(be.asarray(g), -1.0)


# ---------------------------------------------------------------------------------------------
# the blocked noise layout (threads, deterministic whatever their number)


def _draws(threads, shapes, seed=5):
    be = B.Backend("numpy:blocked", seed=seed, threads=threads)
    try:
        return [be.normal(s) if kind == "n" else be.uniform(s) for kind, s in shapes]
    finally:
        be.close()


# the same shape repeatedly (draws made ahead are used), then shape changes (a draw made ahead
# with the wrong shape must be rewound), a uniform in between, a shape smaller than one block
SEQUENCE = [("n", (3, 50_000))] * 3 + [("n", (2, 70_000)), ("u", (40_000,)), ("n", (3, 50_000)),
                                       ("n", (7,)), ("n", (3, 50_000))]


def test_blocked_layout_is_independent_of_the_thread_count():
    ref = _draws(1, SEQUENCE)
    for threads in (2, 3):
        for a, b in zip(ref, _draws(threads, SEQUENCE)):
            np.testing.assert_array_equal(a, b)


def test_blocked_layout_block_j_is_its_own_stream():
    """Block j of the k-th draw continues stream j: rebuild two draws from the block streams."""
    ss = np.random.SeedSequence(5)
    n = 2 * B.NOISE_BLOCK + 100
    z1, z2 = _draws(2, [("n", (n,)), ("n", (n,))])
    for j in range(3):
        g = np.random.Generator(np.random.PCG64(np.random.SeedSequence(ss.entropy, spawn_key=(j,))))
        size = min(n, (j + 1) * B.NOISE_BLOCK) - j * B.NOISE_BLOCK
        blk = slice(j * B.NOISE_BLOCK, j * B.NOISE_BLOCK + size)
        np.testing.assert_array_equal(z1[blk], g.standard_normal(size))
        np.testing.assert_array_equal(z2[blk], g.standard_normal(size))


def test_blocked_layout_in_simulate_and_float32(monkeypatch):
    import dpsim
    from dpsim import optimizers, problems

    prob = problems.least_squares(100, 1000, seed=0)  # R·d = 70 000: two noise blocks
    opt = optimizers.get("dp_sgd")
    out = []
    kw = dict(steps=4, batch_size=10, trials=70, seed=1, record_every=4, metrics=("loss",))
    for threads in ("1", "2"):
        monkeypatch.setenv("DPSIM_NOISE_THREADS", threads)
        out.append(dpsim.simulate(prob, opt, backend="numpy:blocked", **kw))
    np.testing.assert_array_equal(out[0].params, out[1].params)
    assert out[0].config["backend"] == "numpy:blocked"
    plain = dpsim.simulate(prob, opt, **kw)
    assert not np.array_equal(plain.params, out[0].params)  # another stream, by design
    z = B.Backend("numpy:blocked", seed=0, dtype="float32", threads=2).normal((4, 3))
    assert z.dtype == np.float32


def test_backend_spec_errors_name_the_value():
    with pytest.raises(ValueError, match="'numpy:striped'"):
        B.Backend("numpy:striped")
    with pytest.raises(ValueError, match="cupy:blocked"):
        B.parse_backend("cupy:blocked")
    with pytest.raises(ValueError, match="threads=0"):
        B.Backend("numpy:blocked", threads=0)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("per_trial", [False, True])
def test_fused_noisy_mean_is_bit_identical_to_three_passes(dtype, per_trial):
    """add_noise's one-pass kernel equals ``u *= std; u += total; u /= b`` bit for bit."""
    from dpsim.privacy.noise import NoiseSource, add_noise
    from dpsim.transforms import StepContext

    R, d = 5, 301
    std = np.array([0.5, 1.0, 1.5, 2.0, 3.0]) if per_trial else 1.7
    total = np.random.default_rng(1).standard_normal((R, d)).astype(dtype)
    ctx = StepContext(B.Backend("numpy", 9, dtype), R, 64, 1)
    out, _ = add_noise(total, std, 64.0, ctx, NoiseSource("gaussian"))
    ctx2 = StepContext(B.Backend("numpy", 9, dtype), R, 64, 1)
    u = ctx2.backend.normal((R, d))
    u *= ctx2.hp(std)
    u += total
    u /= 64.0
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, u)
