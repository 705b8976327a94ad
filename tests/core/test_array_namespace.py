"""The engine on a namespace with nothing beyond the core array API standard (issue 10, Build 6).

CuPy's own namespace lacks parts of what NumPy offers (``linalg.vector_norm`` in CuPy 14 was the
bug that motivated this file), and ``array_api_strict`` has the standard's *extensions*
(``linalg``, ``fft``), so a run on it would not catch a call to them.  The stand-in below wraps
``array_api_strict`` and removes the extensions: any backend-generic code that reaches for
``xp.linalg.*`` or ``xp.fft.*`` fails here with an AttributeError naming the function.  dpsim's
backend module resolves the namespace of array_api_strict arrays through
``dpsim.backend.STRICT_NAMESPACE``, so both ``Backend.xp`` and ``array_namespace(arrays)`` hand out
the stand-in.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

import dpsim
from dpsim import backend as B
from dpsim import optimizers, problems

strict = pytest.importorskip("array_api_strict")

REMOVED = ("linalg", "fft")  # the standard's extensions; everything else is the core standard


class CoreOnly(types.ModuleType):
    """``array_api_strict`` without its extensions (attribute access forwarded, denials named)."""

    def __init__(self):
        super().__init__("core_only_array_api")

    def __getattr__(self, name):
        if name in REMOVED:
            raise AttributeError(f"the core-only stand-in namespace has no {name!r} "
                                 "(an array API extension that CuPy-like backends may lack)")
        return getattr(strict, name)


@pytest.fixture
def core_only(monkeypatch):
    ns = CoreOnly()
    monkeypatch.setattr(B, "STRICT_NAMESPACE", ns)
    return ns


def test_stand_in_lacks_the_extensions(core_only):
    assert B.get_namespace("array_api_strict") is core_only
    assert B.array_namespace(strict.asarray([1.0])) is core_only
    with pytest.raises(AttributeError, match="linalg"):
        core_only.linalg.vector_norm  # noqa: B018
    assert core_only.sum is strict.sum


def test_clip_l2_uses_only_the_core(core_only):
    from dpsim.privacy import clip_l2

    g = strict.asarray(np.array([[3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(B.to_numpy(clip_l2(g, 1.0)), [[0.6, 0.8], [0.0, 0.0]])


CASES = [("dp_sgd", {}), ("dp_adam", {}), ("dp2_rmsprop", {"s1": 2, "s2": 3}),
         ("dp_sgd", {"noise": "banded:3"}), ("dp_adam_bc", {})]


@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}{'-' + str(k.get('noise')) if 'noise' in k else ''}"
                                                 for n, k in CASES])
def test_simulate_end_to_end_on_the_core_only_namespace(core_only, name, kw):
    """The whole loop (sampler indices, clipped sums, noise, the chain, records) on the stand-in,
    and the same trajectory as NumPy (same seed: the noise comes from the same NumPy stream)."""
    prob = problems.logistic_regression(120, 5, seed=1)
    opt = optimizers.get(name, **kw)
    run = dict(steps=6, batch_size=10, trials=2, seed=3, record_every=3)
    res = dpsim.simulate(prob, opt, backend="array_api_strict", **run)
    ref = dpsim.simulate(problems.logistic_regression(120, 5, seed=1), opt, backend="numpy", **run)
    assert np.all(np.isfinite(res.loss))
    np.testing.assert_allclose(res.params, ref.params, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(res.loss, ref.loss, rtol=1e-12)


def test_boxed_problem_on_the_core_only_namespace(core_only):
    """Projection onto a box domain (``xp.clip``) and the absolute link on the stand-in."""
    prob = problems.absolute_regression(100, 4, seed=0)
    res = dpsim.simulate(prob, optimizers.get("dp_sgd", lr=0.5), steps=4, batch_size=10, trials=2,
                         seed=0, backend="array_api_strict")
    assert np.all(np.abs(res.params) <= 1.0)
