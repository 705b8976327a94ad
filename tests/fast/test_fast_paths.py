"""The paths of the engine, gated: every registered optimizer takes the path docs/fast-paths.md
says (the page is generated from the registry by ``tools/fast_paths.py``), ``dpsim.explain``
agrees with what ``simulate`` runs, and the registry is the package's attribute list."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dpsim
from dpsim import optimizers, problems
from dpsim.explain import _reference_problems, path_table_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "fast-paths.md"


def test_every_registered_optimizer_is_on_its_documented_path():
    assert DOC.read_text() == path_table_markdown(), (
        "docs/fast-paths.md is stale: an optimizer changed path or was added; run "
        "`python tools/fast_paths.py` and review the difference")
    for name in optimizers.names():
        assert f"| `{name}` |" in DOC.read_text()


@pytest.mark.parametrize("name,hp", [("dp_sgd", {}), ("dp_adam", {}), ("dp_rmsprop", {}), ("yogi", {}),
                                     ("pasan", {"radius": 1.0}), ("dp2_rmsprop", {})])
def test_explain_names_the_path_simulate_runs(name, hp):
    opt = optimizers.get(name, **hp)
    for prob in _reference_problems().values():
        e = dpsim.explain(prob, opt, trials=2)
        res = dpsim.simulate(prob, opt, steps=3, batch_size=8, trials=2, seed=0)
        assert res.config["engine"] == e.engine, (name, prob.name, str(e))
        if e.engine != "block":
            assert e.block  # a reason, in words
        if e.engine == "chain":
            assert e.release


def test_explain_follows_the_run_arguments():
    prob = problems.least_squares(200, 5, seed=0)
    assert dpsim.explain(prob, "dp_sgd").engine == "block"
    e = dpsim.explain(prob, "dp_sgd", fast=False)
    assert e.engine == "release" and "fast=False" in e.block
    e = dpsim.explain(prob, "dp_sgd", checkpoint="unused.ckpt")
    assert e.engine == "release" and "checkpoint" in e.block
    assert dpsim.explain(prob, "dp_sgd", steps=0, fast=False).engine == "chain"
    assert "not 'block'" in str(e)
    with pytest.raises(TypeError, match="stpes"):
        dpsim.explain(prob, "dp_sgd", stpes=3)
    with pytest.raises(ValueError, match="fast=True.*scale_then_privatize"):
        dpsim.explain(prob, "dp_adam_stp", fast=True)


def test_a_hand_built_chain_is_explained():
    """docs/ARCHITECTURE.md's example chain, built by hand, takes the block kernel on a dense
    small-d problem and the fused release on a sparse one: its pieces compose (each carries its
    element), nothing is registered for it.  A piece without an element sends the chain to the
    reference path, and explain names that piece."""
    from dpsim.privacy.privatizers import gaussian_privatizer
    from dpsim.transforms import GradientTransformation, named_chain, scale, trace
    from dpsim.transforms.preconditioners import precondition, rmsprop

    def chain(momentum):
        return named_chain(("privatizer", gaussian_privatizer(clip=1.0, noise_multiplier=1.2)),
                           ("preconditioner", precondition(rmsprop(beta=0.9, eps=1e-8))),
                           ("momentum", momentum),
                           ("lr", scale(-0.01)))

    prob = problems.logistic_regression(500, 8, seed=0)
    opt = optimizers.Optimizer(name="dp_rmsprop_momentum", hyperparameters={}, transform=chain(trace(0.5)))
    e = dpsim.explain(prob, opt)
    assert e.engine == "block" and e.block is None
    res = dpsim.simulate(prob, opt, steps=4, batch_size=25, trials=2, seed=1)
    assert res.config["engine"] == "block"
    sparse = problems.logistic_regression(500, 30, density=0.2, seed=0)
    e = dpsim.explain(sparse, opt)
    assert e.engine == "release" and e.release is None and "sparse" in e.block
    assert dpsim.simulate(sparse, opt, steps=4, batch_size=25, trials=2, seed=1).config["engine"] == "release"
    plain = trace(0.5)  # the same update, without its element: the chain runs, and says why
    odd = optimizers.Optimizer(name="odd", hyperparameters={},
                               transform=chain(GradientTransformation(plain.init, plain.update)))
    e = dpsim.explain(prob, odd)
    assert e.engine == "chain" and "'momentum' has no element" in e.release
    ref = dpsim.simulate(prob, odd, steps=4, batch_size=25, trials=2, seed=1)
    assert ref.config["engine"] == "chain"
    np.testing.assert_array_equal(ref.params, res.params)


def test_registered_names_are_attributes_and_star_importable():
    ns: dict = {}
    exec("from dpsim.optimizers import *", ns)
    for name in optimizers.names():
        assert ns[name] is getattr(optimizers, name)
        assert callable(ns[name])
    assert optimizers.noisy_adagrad(lr=0.1).name == "noisy_adagrad"  # the function, not the module
    np.testing.assert_equal(sorted(set(optimizers.names()) - set(optimizers.__all__)), [])


def test_kernel_views_are_what_the_block_kernel_reads():
    from dpsim.problems.base import GLMView, NoisyQuadraticView, QuadraticView
    from dpsim.problems.glm import _LeastSquares

    ls = problems.least_squares(50, 4, seed=0)
    v = ls.kernel_view()
    assert isinstance(v, GLMView) and not v.sparse and v.X is ls.X and v.link == 0
    np.testing.assert_array_equal(v.row_sq_norms, np.einsum("ij,ij->i", ls.X, ls.X))
    sp = problems.logistic_regression(60, 30, density=0.2, seed=0).kernel_view()
    assert sp.sparse and sp.link == 1 and sp.indptr.shape == (61,)
    assert isinstance(problems.random_quadratic(20, 3, seed=0).kernel_view(), QuadraticView)
    assert isinstance(problems.quadratic_2d(1.0, 4.0, n=30).kernel_view(), NoisyQuadraticView)

    class Mine(_LeastSquares):  # may override its gradients: no view, no block kernel
        pass

    mine = Mine.__new__(Mine)
    mine.__dict__.update(ls.__dict__)
    mine._host = mine
    assert mine.kernel_view() is None
    e = dpsim.explain(mine, "dp_sgd")
    assert e.engine != "block" and "kernel view" in e.block
