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
