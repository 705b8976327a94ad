"""``dtype="float32"`` end to end, and how far it strays from float64 (issue 10, Build 4).

With ``dtype="float32"`` the parameters, every optimizer state, the noise and the problem's data
are float32 (the fused GLM kernels accumulate each clipped sum in float64 and round once).  The
noise of a float32 run comes from NumPy's float32 sampler: a different stream of normals than the
float64 run's, so trajectories are compared with the noise switched off (σ = 0, clipping on); the
noise itself is checked for its dtype and its standard deviation.

Tolerance.  Each step rounds every coordinate a bounded number of times (data, margin, link,
clip factor, the float64 sum rounded to float32, the learning-rate product, the addition), each a
relative error of at most ε32/2 = 2⁻²⁴.  With step sizes below 2/L the float64 step map is
non-expansive, so the rounding errors of successive steps add at most linearly:
``‖w32_T − w64_T‖∞ ≤ T · c · ε32 · max_t ‖w_t‖∞`` with c of order one; the test takes c = 1 (the
measured constant is 0.5–4.3 for T = 50, i.e. within ``T·ε32`` by a factor of 12 or more).
The recorded loss adds the float32 sum over n examples (≤ log2(n) ε32 relative with pairwise
summation), hence a relative tolerance of ``(T + log2 n) · ε32``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpsim
from dpsim import optimizers, problems

EPS32 = float(np.finfo(np.float32).eps)
T, N = 50, 300

CASES = [("dp_sgd", dict(lr=0.5, clip=1.0, noise_multiplier=0.0)),
         ("dp_sgd", dict(lr=0.5, clip=0.5, noise_multiplier=0.0)),
         ("dp_adam", dict(lr=0.02, clip=1.0, noise_multiplier=0.0))]
PROBLEMS = {"lsq": lambda: problems.least_squares(N, 8, seed=0),
            "sparse_logreg": lambda: problems.logistic_regression(N, 8, density=0.5, seed=1)}


@pytest.mark.parametrize("pname", list(PROBLEMS))
@pytest.mark.parametrize("name,kw", CASES, ids=["dp_sgd", "dp_sgd-clipping", "dp_adam"])
def test_float32_trajectory_stays_within_the_rounding_bound(pname, name, kw):
    opt = optimizers.get(name, **kw)
    run = dict(steps=T, batch_size=20, trials=3, seed=2)
    probe = {"is32": lambda state, params, ctx: np.full(3, float(params.dtype == np.float32))}
    r64 = dpsim.simulate(PROBLEMS[pname](), opt, dtype="float64", **run)
    r32 = dpsim.simulate(PROBLEMS[pname](), opt, dtype="float32", probes=probe, **run)
    seen = r32.records["is32"]
    assert np.all(seen == 1.0)  # the parameters stay float32 through every record
    scale = np.abs(r64.params).max()
    err = np.abs(r32.params - r64.params).max()
    assert err <= T * EPS32 * scale, (err, T * EPS32 * scale)
    rel = np.abs(r32.loss - r64.loss).max() / np.abs(r64.loss).max()
    assert rel <= (T + math.log2(N)) * EPS32


def test_float32_noise_has_its_dtype_and_scale():
    """σ C/b is the standard deviation of the float32 noise too: the sample variance of the
    noise part of one step (R·d = 20 000 draws) lies within 5 standard errors of (σC/b)²."""
    from dpsim.backend import Backend
    from dpsim.privacy.noise import NoiseSource, add_noise
    from dpsim.transforms import StepContext

    R, d, b, std = 20, 1000, 4.0, 2.0
    ctx = StepContext(Backend("numpy", 3, "float32"), R, int(b), 1)
    total = np.zeros((R, d), dtype=np.float32)
    out, _ = add_noise(total, std, b, ctx, NoiseSource("gaussian"))
    assert out.dtype == np.float32
    var = float(np.mean(out.astype(np.float64) ** 2))
    target = (std / b) ** 2
    assert abs(var - target) <= 5 * target * math.sqrt(2.0 / out.size)
