"""``dpsim.explain``: which path :func:`dpsim.simulate` takes for a run, and why not a faster one.

A run takes one of three paths (``Result.config["engine"]`` names the one that ran):

``"block"``
    the small-d block kernel (:mod:`dpsim.fast.block`): every step between two records in one
    compiled call, batches and noise drawn inside it, the update composed from the chain's
    elements — for any chain whose pieces compose (below), whoever built it, and for DP² and
    PAGAN/PASAN (shapes derived from their pieces' parts), on dense GLMs and the quadratics;
``"release"``
    the general step loop, each step one fused pass per trial (clipped sum, noise, recursion,
    update; :mod:`dpsim.fast.release`) — for any chain whose pieces compose (a
    Gaussian privatizer or ``mean_gradient``, then pieces with a per-coordinate element,
    :mod:`dpsim.transforms.elements`), whoever built it, and for the shapes derived from their
    pieces' parts by :func:`dpsim.fast.compose.spec` (DP², AdaDPS, PAGAN/PASAN, IME), whoever
    built them;
``"chain"``
    the general step loop through ``transform.update``, piece by piece (the reference).

All three give the same numbers to the last bit.  :func:`explain` asks the same two functions
the engine asks (:func:`dpsim.engine.block_plan`, :func:`dpsim.engine.release_plan`), so its
answer is the engine's decision, not a second copy of it; nothing is simulated.  Where a chain
does not compose and gives no derived shape, it runs on the chain and the reason names the piece
that stops it (e.g. a piece without an element); no optimizer is recognized by its name.

Examples
--------
>>> import dpsim
>>> prob = dpsim.problems.logistic_regression(200, 5, seed=0)
>>> dpsim.explain(prob, "dp_sgd", steps=3, batch_size=8, trials=2).engine
'block'
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

__all__ = ["explain", "Explanation", "PATHS"]

#: The paths, fastest first.
PATHS = ("block", "release", "chain")


@dataclass(frozen=True)
class Explanation:
    """What :func:`explain` found.

    Attributes
    ----------
    engine : str
        The path the run takes: ``"block"``, ``"release"`` or ``"chain"``.
    optimizer, problem : str
        The optimizer's registry name and the problem's name.
    block, release : str or None
        ``None`` where that path is available to the run, else the reason it is not.
    """

    engine: str
    optimizer: str
    problem: str
    block: str | None
    release: str | None

    def __str__(self) -> str:
        lines = [f"{self.optimizer} on {self.problem}: the {self.engine!r} path"]
        for name, why in (("block", self.block), ("release", self.release)):
            if name == self.engine:
                break
            lines.append(f"  not {name!r}: {why}")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle):  # IPython
        p.text(str(self))


def explain(problem, optimizer, **simulate_kwargs) -> Explanation:
    """Which path ``dpsim.simulate(problem, optimizer, **simulate_kwargs)`` would take, and for
    each faster path the reason it is not taken.

    Parameters
    ----------
    problem : dpsim.problems.Problem
    optimizer : dpsim.optimizers.Optimizer or str
        An optimizer or a registered name (its defaults).
    **simulate_kwargs
        Any keyword of :func:`dpsim.simulate`; those that decide the path are ``trials``,
        ``backend``, ``dtype``, ``fast``, ``checkpoint``, ``steps`` and ``seed`` (which draws
        the public split of optimizers that have one).  An unknown keyword is refused, as
        :func:`dpsim.simulate` refuses it.

    Returns
    -------
    Explanation
        ``str()`` of it reads, e.g.::

            dp_adam_stp on least_squares: the 'release' path
              not 'block': scale_then_privatize has no block kernel ...

    Examples
    --------
    >>> import dpsim
    >>> prob = dpsim.problems.least_squares(200, 5, seed=0)
    >>> dpsim.explain(prob, "dp_sgd").engine
    'block'
    """
    from . import engine
    from .backend import Backend

    allowed = set(inspect.signature(engine._simulate).parameters) - {"problem", "optimizer"}
    unknown = sorted(set(simulate_kwargs) - allowed)
    if unknown:
        raise TypeError(f"explain() got keyword(s) simulate() does not take: {', '.join(unknown)}")
    optimizer = engine.resolve(problem, optimizer)
    kw = simulate_kwargs
    trials = int(kw.get("trials", 1))
    backend, dtype = kw.get("backend", "numpy"), kw.get("dtype", "float64")
    steps = int(kw.get("steps", 1))
    _, noise_ss, public_ss = engine._streams(kw.get("seed", 0))
    be = Backend(backend, noise_ss, dtype)
    prob = problem.on(be)
    public_idx = None
    n_public = engine._n_public(optimizer.public_fraction, problem.n)
    if n_public:
        public_idx = be.asindex(engine._split(public_ss, prob.n, n_public)[0])
    plan, block = engine.block_plan(prob, optimizer, trials=trials, backend=backend, dtype=dtype,
                                    fast=kw.get("fast"), checkpoint=kw.get("checkpoint"))
    release = None
    if plan is None:
        if kw.get("fast"):
            raise ValueError(f"fast=True, but this run has no fused kernel: {block}")
        step, release = engine.release_plan(prob, optimizer.transform, be, public_idx=public_idx,
                                            steps=steps)
    path = "block" if plan is not None else ("release" if release is None else "chain")
    return Explanation(engine=path, optimizer=optimizer.name, problem=problem.name, block=block,
                       release=release)


def _reference_problems():
    """The two problems of the path table: a dense small-d GLM (where the block kernel can run)
    and a sparse GLM (where the fused release can)."""
    from . import problems

    return {"dense (least_squares n=200, d=5)": problems.least_squares(200, 5, seed=0),
            "sparse (logistic n=500, d=50, density 0.1)":
                problems.logistic_regression(500, 50, density=0.1, seed=0)}


def path_table() -> list[dict]:
    """For every registered optimizer (its defaults), the path :func:`simulate` takes on the two
    reference problems, and the reason for a path slower than the fastest one that exists.

    One row per name of :func:`dpsim.optimizers.names`: ``{"optimizer", <problem label>: path,
    ..., "why": reason or ""}``; ``docs/fast-paths.md`` is this table
    (``tools/fast_paths.py`` writes it; ``tests/fast/test_fast_paths.py`` fails when they differ)."""
    from . import optimizers

    probs = _reference_problems()
    rows = []
    for name in optimizers.names():
        row = {"optimizer": name}
        why = []
        for label, prob in probs.items():
            e = explain(prob, name)
            row[label] = e.engine
            if e.engine == "chain":
                why.append(e.release)
        row["why"] = why[0] if why else ""
        rows.append(row)
    return rows


def path_table_markdown() -> str:
    """:func:`path_table` as the Markdown page ``docs/fast-paths.md``."""
    rows = path_table()
    labels = [k for k in rows[0] if k not in ("optimizer", "why")]
    out = ["# Which path each optimizer takes",
           "",
           "Generated by `python tools/fast_paths.py` from the optimizer registry and",
           "`dpsim.explain` (do not edit by hand; `tests/fast/test_fast_paths.py` fails when it is stale).",
           "Paths: `block` (the small-d kernel), `release` (one fused pass per trial per step),",
           "`chain` (the reference, piece by piece); all three give the same numbers to the last bit.",
           "`dpsim.explain(problem, optimizer, **simulate_kwargs)` answers for any other run.",
           "",
           "| optimizer | " + " | ".join(labels) + " | why the chain |",
           "|---|" + "---|" * len(labels) + "---|"]
    for r in rows:
        out.append(f"| `{r['optimizer']}` | " + " | ".join(r[k] for k in labels) + f" | {r['why']} |")
    return "\n".join(out) + "\n"
