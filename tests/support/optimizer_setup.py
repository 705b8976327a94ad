"""Per-name settings that let every registered optimizer run on a small test problem (everything
else runs with the optimizer's defaults); shared by the tests that loop over ``optimizers.names()``."""


def table_setup(name, prob, steps=60):
    """``(optimizer keywords, simulate keywords)`` for ``name`` on ``prob``: the public split of
    PDP-SGD and AdaDPS, a radius for PASAN/PAGAN (else data-dependent), and the ctCDP plan's
    fixed-size batch for ``steps`` steps."""
    opt_kw, sim_kw = {}, {}
    if name == "pdp_sgd":
        opt_kw = dict(k=2, public_fraction=0.05)
    if name == "adadps":
        opt_kw = dict(public_fraction=0.05)
    if name in ("pasan", "pagan"):
        opt_kw = dict(radius=1e3)
    if name == "dp_sgd_ctcdp":
        from dpsim.optimizers import ctcdp

        plan = ctcdp.plan(epsilon=1.0, delta=1e-5, steps=steps, n=prob.n, clip=1.0)
        sim_kw = dict(sampling="fixed", batch_size=plan["batch_size"])
    return opt_kw, sim_kw
