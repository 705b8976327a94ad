"""The cell table of the ``adambc`` experiment (:mod:`experiments.adambc`): every cell it runs,
described as data, and :class:`Plan`, which turns the table into :class:`~.pipeline.Cell` s.

Reading the table
-----------------
One table per problem (:data:`PLANS`: ``main``, ``regime``, ``real``, ``realraw``,
``movielens``); each row (:class:`Spec`) is a *slot*, run as one cell per target ε of its problem
(``at=EACH``), at ``Config.sweep_epsilon`` only (``at=SWEEP``), or once without privacy
(``at=NONPRIVATE``).  Its columns:

* ``stage``: the batch the cell runs in, one ``cache.run`` call each, in this order:
  :data:`TUNE` (tuning cells), :data:`SWEEP_TUNE` (the sweeps' tuning cells, which use choices of
  the first batch), :data:`EVAL` (fresh evaluation cells at the chosen settings) and
  :data:`FROZEN` (the frozen moment runs, which start from evaluation cells' final parameters).
* ``method``: the optimizer, a key of :data:`OPTIMIZERS` (each builds it from the cell's σ, Φ and
  hyperparameters).
* ``grid``: a tuning cell's grid, ``((axis, config field), ...)``: the points are folded into the
  trial axis, ``tune_trials`` trials per point (:func:`experiments.tuning.fold`), and the rule of
  :mod:`experiments.tuning` selects one after the batch.
* ``hp``: where an evaluation cell's hyperparameters come from: :class:`Chosen` (the point
  selected on a tuning slot of the same problem and ε), :class:`BestPer` (per value of one axis,
  the best learning rate of a tuning slot, ``sweep_trials`` fresh trials each) or
  :class:`BestDelay` (DP²: the best point of the delay with the lowest tuned score).
* ``fixed``: further hyperparameters, ``((name, rule), ...)``: ``Chosen(slot, axis)`` (one value
  chosen on another tuning slot) or ``Delay(i)`` (the ``i``-th DP² delay).
* ``trials``: the config field with the cell's trial count (unless its hyperparameters are
  per-trial lists: then one trial per entry).
* ``seed``: the slot of the same problem and ε whose seed the cell reuses (common random numbers:
  the same batches and noise draws per trial); ``None``: its own seed.
* ``init``: frozen cells: the evaluation slot whose final parameters they start from.
* ``meta``: extra metadata saved with the cell, ``((key, source), ...)``: a config field (saved
  as a list) or one of the ``@`` sources of :meth:`Plan._meta`.

A slot's position in its table (private slots, then non-private slots) fixes its cell's index,
hence its seed (:func:`experiments.pipeline.cell_seed`): cell ``offset + len(private)·k +
position`` for ε number ``k``, then the non-private cells at ``offset + len(private)·K +
position``, problem after problem (:data:`PLANS` order, each problem's ``offset`` counting the
cells of those above it, whether they run or not).  Adding, removing or moving a row therefore
moves seeds: such a change needs a bump of the experiment's ``numerics``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import dpsim
from dpsim.analysis.concentration import dp_bias, sgdm_equivalent_lr

from . import tuning
from .adambc_config import MAX_DP2_DELAYS, Config, beta2_of
from .adambc_problems import (cached_problem, clean_adam_plus, moment_probes, movielens_coords,
                              problem, regime_coords)
from .pipeline import Cell, cell_seed

__all__ = ["Spec", "Chosen", "BestPer", "BestDelay", "Delay", "TUNE", "SWEEP_TUNE", "EVAL",
           "FROZEN", "STAGES", "EACH", "SWEEP", "NONPRIVATE", "MAIN", "REGIME", "REAL", "REALRAW",
           "MOVIELENS", "PLANS", "OPTIMIZERS", "Plan", "knob_settings", "label", "labels", "SLOTS",
           "SWEEP_SLOTS", "NONPRIVATE_SLOTS", "DP2_TUNE_SLOTS", "PROBLEMS", "REGIME_SLOTS",
           "REGIME_NONPRIVATE_SLOTS", "REAL_SLOTS", "REAL_NONPRIVATE_SLOTS", "MOVIELENS_SLOTS",
           "MOVIELENS_NONPRIVATE_SLOTS"]

# -- the vocabulary of the table ---------------------------------------------------------------

TUNE, SWEEP_TUNE, EVAL, FROZEN = "tune", "tune sweeps", "evaluate", "frozen moments"
STAGES = (TUNE, SWEEP_TUNE, EVAL, FROZEN)
"""The batches, in the order they run (``"adambc: <stage>"`` is the progress text)."""
EACH, SWEEP, NONPRIVATE = "each ε", "sweep ε", "non-private"


@dataclass(frozen=True)
class Chosen:
    """The point selected on tuning slot ``slot`` (same problem and ε); with ``axis``, only that
    axis' value."""

    slot: str
    axis: str | None = None


@dataclass(frozen=True)
class BestPer:
    """Per value ``v`` of ``axis`` of tuning slot ``slot``: the best point with ``axis = v``
    (its learning rate), ``sweep_trials`` fresh trials each (per-trial lists)."""

    slot: str
    axis: str


@dataclass(frozen=True)
class BestDelay:
    """DP²: the best grid point per delay (slots ``tune-dp2-i``), then the delay with the lowest
    tuned score (the first on a tie); ``{"s": delay, **point}``."""


@dataclass(frozen=True)
class Delay:
    """The ``i``-th DP² delay ``Config.dp2_delays[i]`` (the slot runs only when it exists)."""

    i: int


@dataclass(frozen=True)
class Spec:
    """One row of a cell table (the module docstring says what each column means)."""

    slot: str
    stage: str
    method: str
    grid: tuple = ()
    hp: Chosen | BestPer | BestDelay | None = None
    fixed: tuple = ()
    trials: str = "trials"
    seed: str | None = None
    init: str | None = None
    meta: tuple = ()
    at: str = EACH


REPS = "@reps"          # trials per grid point or setting: tune_trials (tuning), sweep_trials
LR = "lr"

# -- the tables --------------------------------------------------------------------------------

_BC_GRID = ((LR, "lr_grid_bc"), ("gamma_ratio", "gamma_ratios"))
_CLEAN_META = (("trials_per_ratio", REPS), ("phi_ratios", "clean_phi_ratios"),
               ("phi_ref", "@phi_ref"), ("phi_ref_epsilon", "@phi_ref_epsilon"),
               ("phi_of_epsilon", "@phi_of_epsilon"))

NONPRIVATE_PAIR = (
    # slot            stage  method     grid / hyperparameters from
    Spec("tune-np-sgd",  TUNE, "sgd",   grid=((LR, "lr_grid_np_sgd"),), at=NONPRIVATE),
    Spec("tune-np-adam", TUNE, "adam",  grid=((LR, "lr_grid_np_adam"),), at=NONPRIVATE),
    Spec("np-sgd",       EVAL, "sgd",   hp=Chosen("tune-np-sgd"), at=NONPRIVATE),
    Spec("np-adam",      EVAL, "adam",  hp=Chosen("tune-np-adam"), at=NONPRIVATE),
)
"""Non-private SGD and Adam, tuned on the training loss and evaluated: every problem's premise."""

MAIN = (
    # slot             stage       method           grid (tuning) / hyperparameters (evaluation)
    # per ε: DP-Adam, DP-AdamBC (η × γ'/Φ) and DP-SGD tuned, then evaluated on paired seeds
    Spec("tune-adam",   TUNE, "dp-adam",   grid=((LR, "lr_grid_adam"),)),
    Spec("tune-adambc", TUNE, "dp-adambc", grid=_BC_GRID),
    Spec("tune-dpsgd",  TUNE, "dp-sgd",    grid=((LR, "lr_grid_dpsgd"),)),
    Spec("adam",        EVAL, "dp-adam",   hp=Chosen("tune-adam")),
    Spec("adambc",      EVAL, "dp-adambc", hp=Chosen("tune-adambc"), seed="adam"),
    Spec("sgdm-eq3",    EVAL, "sgdm-eq3",  hp=Chosen("tune-adam"), seed="adam"),
    Spec("dpsgd",       EVAL, "dp-sgd",    hp=Chosen("tune-dpsgd"), seed="adam"),
    # Fig. 5 upper right: the γ' sweep, each γ' at its own best η of tune-adambc
    Spec("gamma",       EVAL, "dp-adambc", hp=BestPer("tune-adambc", "gamma_ratio"),
         meta=(("gamma_ratios", "gamma_ratios"), ("trials_per_ratio", REPS))),
    # at sweep_epsilon: the wrong-Φ' sweep at the chosen γ'/Φ, η tuned per Φ'/Φ
    Spec("tune-phi",    SWEEP_TUNE, "dp-adambc-phi", grid=(("phi_ratio", "phi_ratios"),
                                                           (LR, "lr_grid_bc")),
         fixed=(("gamma_ratio", Chosen("tune-adambc", "gamma_ratio")),),
         meta=(("phi_ratios", "phi_ratios"), ("trials_per_ratio", REPS)), at=SWEEP),
    Spec("phi",         EVAL, "dp-adambc-phi", hp=BestPer("tune-phi", "phi_ratio"),
         fixed=(("gamma_ratio", Chosen("tune-adambc", "gamma_ratio")),),
         meta=(("phi_ratios", "phi_ratios"), ("trials_per_ratio", REPS)), at=SWEEP),
    # at sweep_epsilon: DP-Adam's γ and β knobs (knob_settings), η tuned per setting
    Spec("tune-knobs",  SWEEP_TUNE, "dp-adam-knobs", grid=(("setting", "@knobs"),
                                                           (LR, "lr_grid_adam")),
         meta=(("settings", "@knobs"), ("trials_per_setting", REPS)), at=SWEEP),
    Spec("knobs",       EVAL, "dp-adam-knobs", hp=BestPer("tune-knobs", "setting"),
         meta=(("settings", "@knobs"), ("trials_per_setting", REPS)), at=SWEEP),
    # frozen (lr = 0) runs from DP-Adam's trained parameters: private, then clean on its seed
    Spec("frozen-private", FROZEN, "frozen-private", init="adam"),
    Spec("frozen-clean",   FROZEN, "frozen-clean", init="adam", seed="frozen-private"),
    # at sweep_epsilon: DP²-RMSProp, one tuning cell per delay s, the best delay evaluated
    *(Spec(f"tune-dp2-{i}", SWEEP_TUNE, "dp2",
           grid=((LR, "dp2_lr_grid"), ("lr2", "dp2_lr2_grid"), ("clip2", "dp2_clip2_grid")),
           fixed=(("s", Delay(i)),), meta=(("delay", "@delay"),), at=SWEEP)
      for i in range(MAX_DP2_DELAYS)),
    Spec("dp2",         EVAL, "dp2",       hp=BestDelay(), seed="adam",
         meta=(("delay", "@delay"), ("delays", "dp2_delays")), at=SWEEP),
    # non-private: the premise, then clean (clipped, noiseless) Adam + Φ' and clean SGDM
    *NONPRIVATE_PAIR,
    Spec("tune-clean-phi",  TUNE, "clean-adam+phi", grid=(("phi_ratio", "clean_phi_ratios"),
                                                          (LR, "clean_lr_grid")),
         meta=_CLEAN_META, at=NONPRIVATE),
    Spec("tune-clean-sgdm", TUNE, "clean-sgdm", grid=((LR, "clean_sgdm_lr_grid"),),
         at=NONPRIVATE),
    Spec("clean-phi",       EVAL, "clean-adam+phi", hp=BestPer("tune-clean-phi", "phi_ratio"),
         meta=_CLEAN_META, at=NONPRIVATE),
    Spec("clean-sgdm",      EVAL, "clean-sgdm", hp=Chosen("tune-clean-sgdm"),
         trials="sweep_trials", at=NONPRIVATE),
)
"""The main problem (:func:`~.adambc_problems.problem`)."""

_FROZEN_SAMPLED = (
    Spec("frozen-private", FROZEN, "frozen-private", init="adam", meta=(("coords", "@coords"),)),
    Spec("frozen-clean",   FROZEN, "frozen-clean", init="adam", seed="frozen-private",
         meta=(("coords", "@coords"),)),
)

REGIME = (
    Spec("tune-adam",   TUNE, "dp-adam",   grid=((LR, "lr_grid_adam"),)),
    Spec("tune-adambc", TUNE, "dp-adambc", grid=_BC_GRID),
    Spec("adam",        EVAL, "dp-adam",   hp=Chosen("tune-adam")),
    Spec("adambc",      EVAL, "dp-adambc", hp=Chosen("tune-adambc"), seed="adam"),
    Spec("sgdm-eq3",    EVAL, "sgdm-eq3",  hp=Chosen("tune-adam"), seed="adam"),
    *_FROZEN_SAMPLED,
    *NONPRIVATE_PAIR,
)
"""The in-regime sparse problem (:func:`~.adambc_problems.regime_problem`)."""

_TUNED_AND_EVALUATED = (
    Spec("tune-adam",   TUNE, "dp-adam",   grid=((LR, "lr_grid_adam"),)),
    Spec("tune-adambc", TUNE, "dp-adambc", grid=_BC_GRID),
    Spec("tune-dpsgd",  TUNE, "dp-sgd",    grid=((LR, "lr_grid_dpsgd"),)),
    Spec("adam",        EVAL, "dp-adam",   hp=Chosen("tune-adam")),
    Spec("adambc",      EVAL, "dp-adambc", hp=Chosen("tune-adambc"), seed="adam"),
    Spec("dpsgd",       EVAL, "dp-sgd",    hp=Chosen("tune-dpsgd"), seed="adam"),
)

REAL = (*_TUNED_AND_EVALUATED, *NONPRIVATE_PAIR)
"""breast_cancer (:func:`~.adambc_problems.real_problems`)."""

REALRAW = NONPRIVATE_PAIR
"""breast_cancer in the columns' original units: the premise only."""

MOVIELENS = (*_TUNED_AND_EVALUATED, *_FROZEN_SAMPLED, *NONPRIVATE_PAIR)
"""MovieLens-small (:func:`~.adambc_problems.movielens_problem`): as breast_cancer, plus the
frozen runs of the Φ/v̂^c premise."""


@dataclass(frozen=True)
class ProblemPlan:
    """A problem of the experiment and how its cells run.

    config : the :class:`Config` field holding the problem's config (``None``: ``Config``
        itself); the problem runs when it is not ``None``.
    cells : its cell table.
    epsilons : the ``Config`` method listing its ε (``None``: every ``Config.epsilons``).
    eval_metrics : what its evaluation cells record.
    eval_every : its config field with the evaluation cells' record interval (``None``: a 20th
        of the steps).
    freeze_every : its config field with the frozen cells' record interval.
    """

    name: str
    config: str | None
    cells: tuple
    epsilons: str | None
    eval_metrics: tuple
    eval_every: str | None = None
    freeze_every: str = "freeze_steps"


_HELD_OUT = ("loss", "test_loss")
_CLASSIFIED = ("loss", "test_loss", "test_accuracy")
PLANS = (
    #           problem      config       table      its ε                 evaluation records
    ProblemPlan("main",      None,        MAIN,      None,                 ("loss",),
                eval_every="record_every", freeze_every="freeze_record_every"),
    ProblemPlan("regime",    "regime",    REGIME,    "regime_epsilons",    _HELD_OUT),
    ProblemPlan("real",      "real",      REAL,      None,                 _CLASSIFIED),
    ProblemPlan("realraw",   "real",      REALRAW,   None,                 _CLASSIFIED),
    ProblemPlan("movielens", "movielens", MOVIELENS, "movielens_epsilons", _HELD_OUT),
)
"""Every problem, in index order (all cells of a problem come after those of the ones above)."""


# -- slots and labels --------------------------------------------------------------------------


def _private(table) -> tuple:
    return tuple(s.slot for s in table if s.at != NONPRIVATE)


def _nonprivate(table) -> tuple:
    return tuple(s.slot for s in table if s.at == NONPRIVATE)


DP2_TUNE_SLOTS = tuple(f"tune-dp2-{i}" for i in range(MAX_DP2_DELAYS))
SLOTS = _private(MAIN)
"""Per-ε cell slots (index ``len(SLOTS)·k + position``)."""
SWEEP_SLOTS = tuple(s.slot for s in MAIN if s.at == SWEEP)
"""The slots run only at ``Config.sweep_epsilon`` (``tune-dp2-i`` only for ``i < len(dp2_delays)``)."""
NONPRIVATE_SLOTS = _nonprivate(MAIN)
"""The ε-independent non-private cells (index ``len(SLOTS)·K + position``)."""
PROBLEMS = tuple(p.name for p in PLANS)
"""The experiment's problems, the ``"problem"`` of every cell's metadata: ``main`` (the diagonal
least squares of :func:`~.adambc_problems.problem`), ``regime`` (the in-regime sparse problem of
:func:`~.adambc_problems.regime_problem`), ``real`` and ``realraw`` (breast_cancer,
:func:`~.adambc_problems.real_problems`) and ``movielens`` (MovieLens-small ridge,
:func:`~.adambc_problems.movielens_problem`)."""
REGIME_SLOTS = _private(REGIME)
"""Per-ε cell slots of the in-regime problem."""
REGIME_NONPRIVATE_SLOTS = _nonprivate(REGIME)
"""Non-private cells of the in-regime problem (its premise: Adam ≫ SGD without privacy)."""
REAL_SLOTS = _private(REAL)
"""Per-ε cell slots of the real data set (``real`` only)."""
REAL_NONPRIVATE_SLOTS = _nonprivate(REAL)
"""Non-private cells of the real data set, for both of its variants (``real``, ``realraw``)."""
MOVIELENS_SLOTS = _private(MOVIELENS)
"""Per-ε cell slots of MovieLens-small (the frozen runs measure its Φ/v̂^c premise)."""
MOVIELENS_NONPRIVATE_SLOTS = _nonprivate(MOVIELENS)
"""Non-private cells of MovieLens-small (its premise: Adam ≫ SGD without privacy, or not)."""
_PREFIX = {"regime": "regime-", "real": "real-", "realraw": "realraw-", "movielens": "movielens-"}


def label(epsilon: float | None, slot: str, problem: str = "main") -> str:
    """Cell label ``"eps<ε>-<slot>"`` (e.g. ``"eps1-adam"``); ``"nonprivate-<slot>"`` for the
    non-private slots (``epsilon`` is then ignored and may be ``None``).  Cells of the other
    problems (:data:`PROBLEMS`) carry the problem as a prefix: ``"regime-eps1-adam"``,
    ``"real-nonprivate-np-sgd"``, ``"realraw-nonprivate-np-adam"``, ``"movielens-eps1-adambc"``."""
    if problem == "main":
        if slot in NONPRIVATE_SLOTS:
            return f"nonprivate-{slot}"
        if slot not in SLOTS:
            raise ValueError(f"unknown slot {slot!r}; known: {', '.join(SLOTS + NONPRIVATE_SLOTS)}")
        return f"eps{epsilon:g}-{slot}"
    if problem not in _PREFIX:
        raise ValueError(f"unknown problem {problem!r}; known: {', '.join(PROBLEMS)}")
    per_eps, nonpriv = _problem_slots(problem)
    if slot in nonpriv:
        return f"{_PREFIX[problem]}nonprivate-{slot}"
    if slot not in per_eps:
        raise ValueError(f"unknown slot {slot!r} of problem {problem!r}; known: "
                         f"{', '.join(per_eps + nonpriv)}")
    return f"{_PREFIX[problem]}eps{epsilon:g}-{slot}"


def _problem_slots(problem: str) -> tuple[tuple, tuple]:
    """``(per-ε slots, non-private slots)`` of a problem (its table's rows)."""
    table = next(p.cells for p in PLANS if p.name == problem)
    return _private(table), _nonprivate(table)


def labels(config: Config) -> list[str]:
    """Every label :func:`experiments.adambc.run` returns for ``config``, in its order."""
    skip = set(DP2_TUNE_SLOTS[len(config.dp2_delays):])
    out = [label(e, s) for e in config.epsilons for s in SLOTS
           if (s not in SWEEP_SLOTS or e == config.sweep_epsilon) and s not in skip]
    out += [label(None, s) for s in NONPRIVATE_SLOTS]
    for prob, on in (("regime", config.regime), ("real", config.real), ("realraw", config.real),
                     ("movielens", config.movielens)):
        if on is None:
            continue
        per_eps, nonpriv = _problem_slots(prob)
        eps_run = {"regime": config.regime_epsilons(),
                   "movielens": config.movielens_epsilons()}.get(prob, config.epsilons)
        out += [label(e, s, prob) for e in eps_run for s in per_eps]
        out += [label(None, s, prob) for s in nonpriv]
    return out


def knob_settings(config: Config) -> list[dict]:
    """The DP-Adam settings of the knob sweep (γ sweep, then β sweep), each
    ``{"kind", "value", "beta1", "beta2", "gamma_ratio"}``; ``gamma_ratio`` is ``γ/√Φ`` (``None``:
    the default ``γ = adam_eps``)."""
    out = [dict(kind="gamma", value=r, beta1=config.beta1, beta2=config.beta2, gamma_ratio=r)
           for r in config.adam_gamma_ratios]
    out += [dict(kind="beta", value=b, beta1=b, beta2=beta2_of(b), gamma_ratio=None)
            for b in config.betas1]
    return out


# -- the optimizers ----------------------------------------------------------------------------
# Each gets ``env`` (``cfg``: the Config; ``sigma``, ``phi``: the cell's noise multiplier and DP
# bias Φ = (σC/B)², None without privacy; ``phi_ref``: Φ at sweep_epsilon; ``knobs``) and the
# cell's hyperparameters ``hp`` (scalars, or per-trial lists).


def _adam_hp(c: Config) -> dict:
    return dict(beta1=c.beta1, beta2=c.beta2, clip=c.clip)


def _dp_adam(env, hp):
    c = env["cfg"]
    return dpsim.optimizers.get("dp_adam", lr=hp["lr"], eps=c.adam_eps,
                                noise_multiplier=env["sigma"], **_adam_hp(c))


def _dp_adambc(env, hp):
    g, ph = hp["gamma_ratio"], env["phi"]
    return dpsim.optimizers.get("dp_adam_bc", lr=hp["lr"],
                                gamma_prime=[r * ph for r in g] if isinstance(g, list) else g * ph,
                                noise_multiplier=env["sigma"], **_adam_hp(env["cfg"]))


def _dp_adambc_phi(env, hp):
    ph = env["phi"]
    return dpsim.optimizers.get("dp_adam_bc", lr=hp["lr"],
                                phi_prime=[r * ph for r in hp["phi_ratio"]],
                                gamma_prime=hp["gamma_ratio"] * ph, noise_multiplier=env["sigma"],
                                **_adam_hp(env["cfg"]))


def _dp_adam_knobs(env, hp):
    c, root = env["cfg"], math.sqrt(env["phi"])
    st = [env["knobs"][i] for i in hp["setting"]]
    gam = [c.adam_eps if s["gamma_ratio"] is None else s["gamma_ratio"] * root for s in st]
    return dpsim.optimizers.get("dp_adam", lr=hp["lr"], eps=gam, beta1=[s["beta1"] for s in st],
                                beta2=[s["beta2"] for s in st], clip=c.clip,
                                noise_multiplier=env["sigma"])


def _dp_sgd(env, hp):
    return dpsim.optimizers.get("dp_sgd", lr=hp["lr"], clip=env["cfg"].clip,
                                noise_multiplier=env["sigma"])


def _sgdm_eq3(env, hp):
    c = env["cfg"]
    lr = float(sgdm_equivalent_lr(hp["lr"], c.beta1, np.inf, env["phi"]))
    return dpsim.optimizers.get("dp_sgdm", lr=lr, beta=c.beta1, clip=c.clip,
                                noise_multiplier=env["sigma"])


def _dp2(env, hp):
    return dpsim.optimizers.get("dp2_rmsprop", s1=hp["s"], lr=hp["lr"], lr2=hp["lr2"],
                                clip=env["cfg"].clip, clip2=hp["clip2"],
                                noise_multiplier=env["sigma"])


def _sgd(env, hp):
    return dpsim.optimizers.get("sgd", lr=hp["lr"])


def _adam(env, hp):
    c = env["cfg"]
    return dpsim.optimizers.get("adam", lr=hp["lr"], beta1=c.beta1, beta2=c.beta2, eps=c.adam_eps)


def _clean_adam_phi(env, hp):
    return clean_adam_plus(hp["lr"], [r * env["phi_ref"] for r in hp["phi_ratio"]],
                           **_adam_hp(env["cfg"]))


def _clean_sgdm(env, hp):
    c = env["cfg"]
    return dpsim.optimizers.get("dp_sgdm", lr=hp["lr"], beta=c.beta1, clip=c.clip,
                                noise_multiplier=0.0)


def _frozen(private: bool):
    def build(env, hp):
        c = env["cfg"]
        return dpsim.optimizers.get("dp_adam", lr=0.0, eps=c.adam_eps,
                                    noise_multiplier=env["sigma"] if private else 0.0,
                                    **_adam_hp(c))
    return build


OPTIMIZERS: dict[str, Callable] = {
    "dp-adam": _dp_adam,                # DP-Adam, γ = adam_eps
    "dp-adambc": _dp_adambc,            # DP-AdamBC, γ' = gamma_ratio · Φ, Φ' = Φ
    "dp-adambc-phi": _dp_adambc_phi,    # DP-AdamBC subtracting Φ' = phi_ratio · Φ
    "dp-adam-knobs": _dp_adam_knobs,    # DP-Adam at a knob setting (γ = r·√Φ, or β1 and β2)
    "dp-sgd": _dp_sgd,
    "sgdm-eq3": _sgdm_eq3,              # DP-SGDM at the Eq. 3 rate of DP-Adam's η
    "dp2": _dp2,                        # DP²-RMSProp with s1 = s2 = s
    "sgd": _sgd,                        # non-private
    "adam": _adam,                      # non-private
    "clean-adam+phi": _clean_adam_phi,  # clipped noiseless Adam + Φ' = phi_ratio · Φ(sweep ε)
    "clean-sgdm": _clean_sgdm,          # clipped noiseless SGDM (σ = 0), β = β1
    "frozen-private": _frozen(True),    # DP-Adam at lr = 0 (moments probed)
    "frozen-clean": _frozen(False),     # the same at σ = 0 (clipped, noiseless)
}
"""The optimizer of each ``method`` of the tables."""


def _compute(problem_of, build, env, hp, trials, sim, pair):
    """A cell's ``compute(seed)``: ``dpsim.simulate`` of ``build(env, hp)`` on ``problem_of()``
    (the optimizer and, for the data-set problems, the problem are built where the cell runs);
    ``pair``: ``(seed, index)`` of the cell whose seed it reuses, or ``None``."""
    def compute(seed):
        if pair is not None:
            seed = cell_seed(*pair)
        return dpsim.simulate(problem_of(), build(env, hp), trials=trials, seed=seed, **sim)

    return compute


# -- the table bound to a config ---------------------------------------------------------------


@dataclass
class _Setup:
    """A problem that runs under a config: its plan, config, data and calibrated σ per ε."""

    plan: ProblemPlan
    conf: object
    problem_of: Callable
    data: object
    ks: list
    offset: int
    sigma: dict = field(default_factory=dict)   # ε number k -> σ
    coords: list | None = None                  # the probed coordinates (None: all)


class Plan:
    """The cell tables bound to a config: the cells of each stage (:meth:`cells`), the tuning
    selections (:meth:`selection`, :meth:`select`) and the settings they lead to.

    Builds every problem that runs (the main one here, the others through
    :func:`~.adambc_problems.cached_problem`) and calibrates σ of every (problem, ε) at once
    (not once per worker).  ``results`` collects every finished cell (the driver adds each
    batch's)."""

    def __init__(self, config: Config, simulate_options: dict):
        cfg = self.cfg = config
        self.sim = dict(simulate_options)
        self.K = len(cfg.epsilons)
        self.k_sweep = cfg.epsilons.index(cfg.sweep_epsilon)
        self.knobs = knob_settings(cfg)
        self.results: dict = {}
        self.saved: dict = {}           # the selections saved in the notes, in their order
        self._sel: dict = {}
        self.setups: dict[str, _Setup] = {}
        offset = 0
        for plan in PLANS:
            n_private = sum(s.at != NONPRIVATE for s in plan.cells)
            here = offset
            offset += n_private * self.K + (len(plan.cells) - n_private)
            conf = cfg if plan.config is None else getattr(cfg, plan.config)
            if conf is None:
                continue
            if plan.config is None:
                data = problem(cfg)  # built once; every cell's closure shares it
                problem_of = _given(data)
            else:
                data = cached_problem(plan.name, conf)
                problem_of = _ProblemOf(plan.name, conf)
            want = cfg.epsilons if plan.epsilons is None else getattr(cfg, plan.epsilons)()
            ks = [k for k, e in enumerate(cfg.epsilons) if e in want]
            self.setups[plan.name] = _Setup(plan, conf, problem_of, data, ks, here)
        for st in self.setups.values():
            if not any(s.at != NONPRIVATE for s in st.plan.cells):
                continue
            rate = cfg.sample_rate if st.plan.config is None else st.conf.batch_size / st.data.n
            for k in st.ks:
                st.sigma[k] = float(dpsim.accounting.noise_multiplier(
                    cfg.epsilons[k], cfg.delta, rate, st.conf.steps))
        self.phi_ref = self.phi("main", self.k_sweep)  # Φ at sweep_epsilon (clean Adam + Φ')
        if "regime" in self.setups:
            self.setups["regime"].coords = regime_coords(cfg.regime)
        if "movielens" in self.setups:
            ml = self.setups["movielens"]
            ml.coords = movielens_coords(cfg.movielens, ml.data.d)

    # -- reading the tables ------------------------------------------------------------------

    def phi(self, name: str, k: int) -> float:
        """Φ = (σC/B)² of problem ``name`` at ε number ``k``."""
        st = self.setups[name]
        return float(dp_bias(st.sigma[k], self.cfg.clip, st.conf.batch_size))

    def spec(self, name: str, slot: str) -> Spec:
        """The row of slot ``slot`` in the table of problem ``name``."""
        return next(s for s in self.setups[name].plan.cells if s.slot == slot)

    def _runs(self, spec: Spec) -> bool:
        """Whether a row runs under the config (``tune-dp2-i`` only for an existing delay)."""
        return all(rule.i < len(self.cfg.dp2_delays) for _, rule in spec.fixed
                   if isinstance(rule, Delay))

    def order(self, stage: str) -> list[tuple]:
        """``(problem, k, spec)`` of every cell of ``stage``, in the order of its batch: per
        problem, ε by ε, then the sweep slots, then the non-private ones; the evaluation batch
        lists the other problems' non-private cells after all their private ones."""
        out, private, nonprivate = [], [], []
        for name, st in self.setups.items():
            rows = [s for s in st.plan.cells if s.stage == stage and self._runs(s)]
            mine = ([(name, k, s) for k in st.ks for s in rows if s.at == EACH]
                    + [(name, self.k_sweep, s) for s in rows if s.at == SWEEP])
            np_ = [(name, None, s) for s in rows if s.at == NONPRIVATE]
            if name == "main" or stage != EVAL:
                out += mine + np_
            else:
                private += mine
                nonprivate += np_
        return out + private + nonprivate

    def index(self, name: str, k: int | None, slot: str) -> int:
        """The cell's index (its seed): see the module docstring."""
        st = self.setups[name]
        private = [s.slot for s in st.plan.cells if s.at != NONPRIVATE]
        if k is None:
            nonpriv = [s.slot for s in st.plan.cells if s.at == NONPRIVATE]
            return st.offset + len(private) * self.K + nonpriv.index(slot)
        return st.offset + len(private) * k + private.index(slot)

    def label(self, name: str, k: int | None, slot: str) -> str:
        """The label of slot ``slot`` of problem ``name`` at ε number ``k`` (:func:`label`)."""
        return label(None if k is None else self.cfg.epsilons[k], slot, name)

    # -- selections --------------------------------------------------------------------------

    def grid(self, name: str, slot: str) -> dict:
        """The tuning grid ``{axis: values}`` of a tuning slot."""
        conf = self.setups[name].conf
        return {axis: tuple(range(len(self.knobs))) if src == "@knobs" else getattr(conf, src)
                for axis, src in self.spec(name, slot).grid}

    def selection(self, name: str, k: int | None, slot: str) -> tuning.Selection:
        """The rule of :mod:`experiments.tuning` applied to tuning cell ``slot`` (memoized)."""
        key = (name, k, slot)
        if key not in self._sel:
            self._sel[key] = tuning.select(self.results[self.label(name, k, slot)],
                                           self.grid(name, slot),
                                           self.setups[name].conf.tune_trials)
        return self._sel[key]

    def select(self, stage: str) -> None:
        """After the batch of tuning stage ``stage``: save the selections its cells lead to, in
        the order of the evaluation cells that use them, each under the label of its own
        evaluation cell (``tune-adam`` under ``eps1-adam``), DP²'s per delay."""
        for name, k, spec in self.order(EVAL):
            if isinstance(spec.hp, Chosen) and spec.hp.slot == "tune-" + spec.slot \
                    and self.spec(name, spec.hp.slot).stage == stage:
                self.saved[self.label(name, k, spec.slot)] = self.selection(name, k, spec.hp.slot)
            elif isinstance(spec.hp, BestDelay) and stage == SWEEP_TUNE:
                for i, s in enumerate(self.cfg.dp2_delays):
                    self.saved[f"eps{self.cfg.epsilons[k]:g}-dp2-s{s}"] = \
                        self.selection(name, k, f"tune-dp2-{i}")

    def best_delay(self, k: int) -> dict:
        """DP²'s choice at ε number ``k``: ``{"s": delay, **point}``."""
        sd = [self.selection("main", k, f"tune-dp2-{i}") for i in range(len(self.cfg.dp2_delays))]
        best = min(range(len(sd)), key=lambda i: (sd[i].score, i))
        return {"s": self.cfg.dp2_delays[best], **sd[best].point}

    def best_per(self, name: str, k: int | None, rule: BestPer) -> tuple[tuple, list]:
        """``(values of rule.axis, the best learning rate of each)``."""
        sel = self.selection(name, k, rule.slot)
        values = sel.grid[rule.axis]
        return values, [sel.best(**{rule.axis: v})["lr"] for v in values]

    def _rule(self, name, k, rule):
        """The value of a :class:`Chosen` or :class:`Delay` rule at ε number ``k``."""
        if isinstance(rule, Delay):
            return self.cfg.dp2_delays[rule.i]
        point = self.selection(name, k, rule.slot).point
        return dict(point) if rule.axis is None else point[rule.axis]

    def hyperparameters(self, name: str, k: int | None, spec: Spec) -> dict:
        """The cell's hyperparameters: its folded grid (tuning cells) or its ``hp`` rule, plus
        its ``fixed`` ones."""
        reps = self.setups[name].conf.tune_trials
        if spec.grid:
            hp = tuning.fold(self.grid(name, spec.slot), reps)
        elif isinstance(spec.hp, Chosen):
            hp = self._rule(name, k, spec.hp)
        elif isinstance(spec.hp, BestPer):
            values, lrs = self.best_per(name, k, spec.hp)
            n = self.cfg.sweep_trials
            hp = {spec.hp.axis: [v for v in values for _ in range(n)],
                  "lr": [lr for lr in lrs for _ in range(n)]}
        elif isinstance(spec.hp, BestDelay):
            hp = self.best_delay(k)
        else:
            hp = {}
        hp.update({key: self._rule(name, k, rule) for key, rule in spec.fixed})
        return hp

    # -- cells -------------------------------------------------------------------------------

    def _meta(self, name, k, spec, hp) -> dict:
        """``{"epsilon", "slot"[, "problem"], **spec.meta}`` of a cell."""
        cfg, st = self.cfg, self.setups[name]
        eps = None if k is None else float(cfg.epsilons[k])
        meta = {"epsilon": eps, "slot": spec.slot, **({} if name == "main" else {"problem": name})}
        special = {
            "@reps": lambda: st.conf.tune_trials if spec.stage in (TUNE, SWEEP_TUNE)
            else cfg.sweep_trials,
            "@knobs": lambda: self.knobs,
            "@delay": lambda: hp["s"],
            "@coords": lambda: len(st.coords),
            "@phi_ref": lambda: self.phi_ref,
            "@phi_ref_epsilon": lambda: float(cfg.sweep_epsilon),
            "@phi_of_epsilon": lambda: {f"{e:g}": self.phi("main", i)
                                        for i, e in enumerate(cfg.epsilons)},
        }
        for key, src in spec.meta:
            meta[key] = special[src]() if src in special else list(getattr(st.conf, src))
        return meta

    def _simulate_options(self, name, k, spec) -> dict:
        """The ``dpsim.simulate`` options of a cell (besides trials and seed)."""
        st, cfg = self.setups[name], self.cfg
        c, plan = st.conf, st.plan
        run = dict(steps=c.steps, batch_size=c.batch_size, sampling=cfg.sampling)
        if spec.stage == FROZEN:
            d = st.data.d
            return dict(run, steps=c.freeze_steps, metrics=(),
                        init=self.results[self.label(name, k, spec.init)].params,
                        record_every=getattr(c, plan.freeze_every),
                        probes=moment_probes(d, st.coords), **self.sim)
        if spec.stage == EVAL:
            every = (max(1, c.steps // 20) if plan.eval_every is None
                     else getattr(c, plan.eval_every))
            return dict(run, record_every=every, metrics=plan.eval_metrics, **self.sim)
        return dict(run, record_every=c.steps, metrics=("loss",), **self.sim)

    def cell(self, name: str, k: int | None, spec: Spec) -> Cell:
        """The :class:`~.pipeline.Cell` of one row of a table at ε number ``k``."""
        st, cfg = self.setups[name], self.cfg
        hp = self.hyperparameters(name, k, spec)
        lr = hp.get("lr")
        trials = len(lr) if isinstance(lr, list) else getattr(st.conf, spec.trials)
        env = dict(cfg=cfg, sigma=None if k is None else st.sigma[k],
                   phi=None if k is None else self.phi(name, k), knobs=self.knobs,
                   phi_ref=self.phi_ref)
        pair = None if spec.seed is None else (cfg.seed, self.index(name, k, spec.seed))
        compute = _compute(st.problem_of, OPTIMIZERS[spec.method], env, hp, trials,
                           self._simulate_options(name, k, spec), pair)
        return Cell(self.label(name, k, spec.slot), self.index(name, k, spec.slot), compute,
                    self._meta(name, k, spec, hp))

    def cells(self, stage: str) -> list[Cell]:
        """Every cell of ``stage``, in its batch order (:meth:`order`)."""
        return [self.cell(name, k, spec) for name, k, spec in self.order(stage)]


def _given(prob):
    """``() -> prob``: the main problem, built once by :class:`Plan` and shared by its cells."""
    return lambda: prob


@dataclass(frozen=True)
class _ProblemOf:
    """``() -> Problem`` of a data-set problem, built in the process that runs the cell (the
    cell carries the frozen config, not the data)."""

    name: str
    conf: object

    def __call__(self):
        return cached_problem(self.name, self.conf)
