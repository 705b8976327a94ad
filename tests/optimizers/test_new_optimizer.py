"""A newcomer's path: a new private optimizer is a new chain of existing pieces.

The example below is the one docs/ARCHITECTURE.md shows: DP-RMSProp followed by heavy-ball
momentum, built from pieces in a few lines; its ε comes from the event its privatizer declares.
"""

import numpy as np

import dpsim


def test_a_new_private_optimizer_in_a_few_lines():
    from dpsim import accounting, optimizers, problems
    from dpsim.privacy.privatizers import gaussian_privatizer
    from dpsim.transforms import named_chain, scale, trace
    from dpsim.transforms.preconditioners import precondition, rmsprop

    tx = named_chain(("privatizer", gaussian_privatizer(clip=1.0, noise_multiplier=1.2)),
                     ("preconditioner", precondition(rmsprop(beta=0.9, eps=1e-8))),
                     ("momentum", trace(0.5)),
                     ("lr", scale(-0.01)))
    opt = optimizers.Optimizer(name="dp_rmsprop_momentum", hyperparameters={}, transform=tx)
    prob = problems.logistic_regression(500, 8, seed=0)
    res = dpsim.simulate(prob, opt, steps=40, batch_size=25, trials=3, seed=1)

    assert res.epsilon(1e-5) == accounting.epsilon(1.2, 25 / 500, 40, 1e-5)  # one release per step
    assert np.all(res.loss[-1] < res.loss[0])
    # its pieces carry elements: the small-d block kernel composes them (no registration)
    assert res.config["engine"] == "block"


def test_the_new_optimizer_state_is_read_by_name():
    from dpsim import problems
    from dpsim.privacy.privatizers import gaussian_privatizer
    from dpsim.transforms import lookup, named_chain, scale, trace
    from dpsim.transforms.preconditioners import precondition, rmsprop

    tx = named_chain(("privatizer", gaussian_privatizer(1.0, 0.0)),
                     ("preconditioner", precondition(rmsprop(0.9, 1e-8))),
                     ("momentum", trace(0.5)), ("lr", scale(-0.01)))
    probe = {"v_max": lambda state, params, ctx: ctx.xp.max(lookup(state, "preconditioner").v, axis=1)}
    opt = dpsim.optimizers.Optimizer(name="x", hyperparameters={}, transform=tx)
    res = dpsim.simulate(problems.least_squares(200, 4, seed=0), opt, steps=5, batch_size=20,
                         trials=2, seed=0, probes=probe, record_every=1)
    assert res.records["v_max"][0].tolist() == [0.0, 0.0] and np.all(res.records["v_max"][1:] > 0)
