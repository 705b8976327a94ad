"""The DP-Adam design space of [DESIGN] (Ganesh, McMahan, Thakurta, *On Design Principles for
Private Adaptive Optimizers*, 2025) on synthetic convex tasks.

**Almost every formula and most experimental settings of [DESIGN] were lost in the text
extraction dpsim works from; the settings below are RECONSTRUCTED (ALGORITHMS.md §4.3, §5 item 4)
and so are the claims' quantitative forms.**  Four parts (one figure each):

(a) ``ada-*`` — the 1-D sparse logistic regression AdaGrad table ([DESIGN] §5.1, its Fig. 2
    table): :func:`dpsim.problems.sparse_logistic_1d` (``n`` samples, a fraction ``zero_fraction``
    of inputs zeroed, ``w* = 1``), batch 1, ``steps = n`` (one epoch *in expectation*: the
    ``"fixed"`` sampler draws one uniformly random example per step, independently across steps,
    so this is not a single pass without repetition; ε is accounted with the RDP accountant valid
    for fixed-size sampling under replace-one adjacency).  Methods: non-private ``adagrad``,
    post-processing ``dp_adagrad``, scale-then-privatize ``dp_adam_stp(base="adagrad")`` and the
    noiseless-preconditioner oracle ``dp_adam_stp_noiseless_v(base="adagrad")``.  Independent
    moment estimation (the paper's winner in 1-D) has no AdaGrad form in dpsim
    (``dp_adam_ime`` is Adam only), so it is not in the table.  Metric: population test loss
    ``problem.test_loss(w_T)`` (a probe).
(b) ``neg-d<d>`` — fraction of coordinates with a negative bias-corrected second moment
    ``v̂_t − Φ < 0`` for ``dp_adam_corrected`` as the dimension ``d`` grows ([DESIGN] §4.4.1 and
    Fig. 4 analogue), on :func:`dpsim.problems.linear_box` with ``scales="ones", bias=1``: every
    per-example gradient is the same ±1 vector, clipped to norm ``C``, so ``ḡ_j² = C²/d`` — exactly
    the *optimistic* regime of :func:`analysis.bias.negative_fraction`, whose prediction the figure
    overlays.  The probe reads ``AdamState(m, v, count)`` and returns the fraction of coordinates
    with ``v − (1 − β2^t) Φ < 0`` (same sign as ``v̂ − Φ``).
(c) ``var-<noise>-<method>`` — every DP-Adam variant (post-processing, bias correction two ways,
    IME, scale-then-privatize), DP-SGD and the noiseless-preconditioner oracles with i.i.d.
    Gaussian noise and DP-BandMF noise (``noise="banded:<k>"``) at the same σ, on sparse
    high-dimensional logistic regression; non-private Adam as reference.  σ is calibrated with
    :func:`dpsim.accounting.noise_multiplier` to ``target_epsilon`` for the Gaussian runs
    (Poisson sampling); the banded runs use the same σ and are accounted without amplification
    (dpsim's rule), so their ε is much larger — reported per run, not hidden.
(d) ``quad-<method>`` — the 2-D quadratic of [DESIGN] §4.1, :func:`dpsim.problems.quadratic_2d`,
    trajectories (probes ``w1``, ``w2``) of non-private Adam, post-processing DP-Adam,
    scale-then-privatize and the noiseless-preconditioner oracles.

Tuning rule (all parts but (b)): the hyperparameter grid (``lr``, and ``eps_scale`` for
scale-then-privatize) is folded into the trial axis of ONE cell per setting (``tune_trials``
trials per grid point); the setting with the lowest mean final *training* loss is chosen
(:mod:`experiments.tuning`) and its trials are reported (selection and report on the same trials:
a small winner's-curse bias, documented).  The selection of every cell (chosen values and the
range of its trials) is saved in the manifest's notes under the cell's label, and each cell's part,
method and setting in its ``meta``; the figures read both.

Cells are enumerated in a fixed order (index = position); cell ``i`` runs with
``SeedSequence(config.seed, spawn_key=(i,))``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpsim.transforms import lookup
import dpsim

from . import tuning
from .pipeline import Cell, Experiment

__all__ = ["Config", "PRESETS", "EXPERIMENT", "run", "ADA_METHODS", "VARIANTS", "QUAD_METHODS"]

# (label, optimizer name, fixed hyperparameters, tunes eps_scale)
ADA_METHODS = (
    ("adagrad", "adagrad", {}, False),
    ("dp_adagrad", "dp_adagrad", {}, False),
    ("stp", "dp_adam_stp", {"base": "adagrad"}, True),
    ("stp_noiseless_v", "dp_adam_stp_noiseless_v", {"base": "adagrad"}, True),
)
VARIANTS = (
    ("dp_sgd", "dp_sgd", {}, False),
    ("dp_adam", "dp_adam", {}, False),
    ("dp_adam_corrected", "dp_adam_corrected", {}, False),
    ("dp_adam_bc", "dp_adam_bc", {}, False),
    ("dp_adam_ime", "dp_adam_ime", {}, False),
    ("dp_adam_stp", "dp_adam_stp", {}, True),
    ("dp_adam_noiseless_v", "dp_adam_noiseless_v", {}, False),
    ("dp_adam_stp_noiseless_v", "dp_adam_stp_noiseless_v", {}, True),
)
QUAD_METHODS = (
    ("adam", "adam", {}, False),
    ("dp_adam", "dp_adam", {}, False),
    ("dp_adam_noiseless_v", "dp_adam_noiseless_v", {}, False),
    ("dp_adam_stp", "dp_adam_stp", {}, True),
    ("dp_adam_stp_noiseless_v", "dp_adam_stp_noiseless_v", {}, True),
)


@dataclass(frozen=True)
class Config:
    """Everything the experiment's results depend on (hashed into the cache key)."""

    # (a) 1-D AdaGrad table
    ada_n: int
    ada_zero_fractions: tuple[float, ...]
    ada_lr_grid: tuple[float, ...]
    ada_eps_scale_grid: tuple[float, ...]
    ada_tune_trials: int
    # (b) negative fraction
    neg_dims: tuple[int, ...]
    neg_batch_size: int
    neg_steps: int
    neg_trials: int
    # (c) variants
    var_n: int
    var_d: int
    var_density: float
    var_steps: int
    var_batch_size: int
    var_lr_grid: tuple[float, ...]
    var_eps_scale_grid: tuple[float, ...]
    var_tune_trials: int
    # (d) quadratic
    quad_steps: int
    quad_batch_size: int
    quad_lr_grid: tuple[float, ...]
    quad_eps_scale_grid: tuple[float, ...]
    quad_tune_trials: int
    # shared
    ada_clip: float = 1.0
    ada_noise_multiplier: float = 1.0
    ada_sampling: str = "fixed"
    neg_noise_multiplier: float = 1.0
    neg_beta2: float = 0.99
    neg_clip: float = 1.0
    neg_record_every: int = 10
    var_target_epsilon: float = 2.0
    var_delta: float = 1e-5
    var_clip: float = 1.0
    var_bands: int = 8
    var_beta2: float = 0.999
    quad_a: float = 10.0
    quad_b: float = 0.1
    quad_noise: float = 1.0
    quad_n: int = 1000
    quad_clip: float = 20.0
    quad_noise_multiplier: float = 1.0
    quad_init: tuple[float, float] = (1.0, 1.0)
    quad_record_every: int = 5
    data_seed: int = 0
    seed: int = 0

    def __post_init__(self):
        for name in ("ada_n", "neg_batch_size", "neg_steps", "neg_trials", "var_n", "var_d",
                     "var_steps", "var_batch_size", "var_tune_trials", "ada_tune_trials",
                     "quad_steps", "quad_batch_size", "quad_tune_trials"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {name}={v!r}")
        if not all(0.0 <= z < 1.0 for z in self.ada_zero_fractions) or not self.ada_zero_fractions:
            raise ValueError(f"ada_zero_fractions must be in [0, 1), got {self.ada_zero_fractions!r}")
        for name in ("ada_lr_grid", "ada_eps_scale_grid", "var_lr_grid", "var_eps_scale_grid",
                     "quad_lr_grid", "quad_eps_scale_grid"):
            g = getattr(self, name)
            if not g or any(x <= 0 for x in g):
                raise ValueError(f"{name} must be non-empty and positive, got {g!r}")
        if not self.neg_dims or any(int(d) < 1 for d in self.neg_dims):
            raise ValueError(f"neg_dims must be positive integers, got {self.neg_dims!r}")


def _pow2(lo: int, hi: int, step: int = 1) -> tuple[float, ...]:
    return tuple(float(2.0 ** k) for k in range(lo, hi + 1, step))


PRESETS: dict[str, Config] = {
    # Smoke test only (seconds): the claims are not expected to hold at this size.
    "tiny": Config(ada_n=100, ada_zero_fractions=(0.5,), ada_lr_grid=(0.1, 1.0),
                   ada_eps_scale_grid=(1.0,), ada_tune_trials=2,
                   neg_dims=(10, 1000), neg_batch_size=10, neg_steps=20, neg_trials=2,
                   var_n=200, var_d=100, var_density=0.05, var_steps=10, var_batch_size=20,
                   var_lr_grid=(0.1, 1.0), var_eps_scale_grid=(1.0,), var_tune_trials=2,
                   quad_steps=20, quad_batch_size=5, quad_lr_grid=(0.1,), quad_eps_scale_grid=(1.0,),
                   quad_tune_trials=2, neg_record_every=5, quad_record_every=5),
    # A laptop: about a minute on 2 cores.
    "quick": Config(ada_n=1000, ada_zero_fractions=(0.0, 0.5, 0.9), ada_lr_grid=_pow2(-4, 2),
                    ada_eps_scale_grid=(0.1, 1.0), ada_tune_trials=16,
                    neg_dims=(10, 100, 1000, 3000, 10000, 30000), neg_batch_size=50, neg_steps=300,
                    neg_trials=2,
                    var_n=2000, var_d=2000, var_density=0.01, var_steps=200, var_batch_size=50,
                    var_lr_grid=_pow2(-8, 4, 2), var_eps_scale_grid=(1e-3, 1e-1), var_tune_trials=3,
                    quad_steps=300, quad_batch_size=10, quad_lr_grid=_pow2(-7, -1),
                    quad_eps_scale_grid=(1e-2, 1.0), quad_tune_trials=4),
    # The paper's sizes where known (30 trials for the 1-D table).
    "full": Config(ada_n=1000, ada_zero_fractions=(0.0, 0.5, 0.8, 0.9, 0.95),
                   ada_lr_grid=_pow2(-6, 3), ada_eps_scale_grid=(0.01, 0.1, 1.0), ada_tune_trials=30,
                   neg_dims=(10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000), neg_batch_size=100,
                   neg_steps=1000, neg_trials=4,
                   var_n=10000, var_d=5000, var_density=0.01, var_steps=1000, var_batch_size=100,
                   var_lr_grid=_pow2(-10, 4), var_eps_scale_grid=(1e-4, 1e-3, 1e-2, 1e-1),
                   var_tune_trials=6, neg_beta2=0.999,
                   quad_steps=1000, quad_batch_size=10, quad_lr_grid=_pow2(-9, 0),
                   quad_eps_scale_grid=(1e-3, 1e-2, 0.1, 1.0), quad_tune_trials=10),
}


# ------------------------------------------------------------------------------------------------
# grids


def _grid(lr_grid, eps_grid, tune_eps) -> dict:
    """The tuning grid of one setting: ``lr`` (and ``eps_scale`` for scale-then-privatize)."""
    return {"lr": lr_grid, "eps_scale": eps_grid} if tune_eps else {"lr": lr_grid}


def var_sigma(config: Config) -> float:
    """σ of part (c): Gaussian noise, Poisson sampling, calibrated to ``var_target_epsilon``."""
    return float(dpsim.accounting.noise_multiplier(
        config.var_target_epsilon, config.var_delta, config.var_batch_size / config.var_n,
        config.var_steps))


# ------------------------------------------------------------------------------------------------
# run


def _neg_probe(sigma, clip, batch_size, beta2):
    phi = (sigma * clip / batch_size) ** 2

    def probe(state, params, ctx):
        adam = lookup(state, "preconditioner")
        v = np.asarray(adam.v)
        t = int(np.max(np.asarray(adam.count))) if np.ndim(adam.count) else int(adam.count)
        if t == 0:
            return np.full(v.shape[0], np.nan)
        return np.mean(v - (1.0 - beta2 ** t) * phi < 0.0, axis=1)

    return probe


def _xy_probe(j):
    def probe(state, params, ctx):
        return np.asarray(params)[:, j]

    return probe


def run(config: Config, cache) -> dict:
    """All four parts; ``{label: Result}``."""
    sim = cache.simulate_options  # progress, backend
    cells: list[tuple[str, object, dict]] = []  # (label, compute, meta) in a fixed order
    grids: dict[str, tuple[dict, int]] = {}     # label -> (tuning grid, trials per point)

    # (a) 1-D AdaGrad table
    for zf in config.ada_zero_fractions:
        for mlabel, opt_name, fixed, tune_eps in ADA_METHODS:
            grid = _grid(config.ada_lr_grid, config.ada_eps_scale_grid, tune_eps)
            reps = config.ada_tune_trials

            def compute(seed, zf=zf, opt_name=opt_name, fixed=fixed, grid=grid, reps=reps):
                prob = dpsim.problems.sparse_logistic_1d(config.ada_n, zero_fraction=zf,
                                                         w_star=1.0, seed=config.data_seed)
                hp = tuning.fold(grid, reps)
                if opt_name != "adagrad":
                    hp.update(clip=config.ada_clip, noise_multiplier=config.ada_noise_multiplier)
                opt = dpsim.optimizers.get(opt_name, **hp, **fixed)
                return dpsim.simulate(prob, opt, steps=config.ada_n, batch_size=1,
                                      trials=len(hp["lr"]), seed=seed, sampling=config.ada_sampling,
                                      record_every=config.ada_n, metrics=("loss",),
                                      probes={"test_loss": lambda s, w, c, p=prob: p.test_loss(w)},
                                      **sim)
            label = f"ada-z{zf:g}-{mlabel}"
            grids[label] = (grid, reps)
            cells.append((label, compute, {"part": "ada", "zero_fraction": float(zf),
                                           "method": mlabel}))

    # (b) negative fraction vs d
    for d in config.neg_dims:
        def compute(seed, d=int(d)):
            prob = dpsim.problems.linear_box(config.neg_batch_size * 2, d, scales="ones", bias=1.0,
                                             seed=config.data_seed)
            opt = dpsim.optimizers.get("dp_adam_corrected", lr=1e-6, beta2=config.neg_beta2,
                                       clip=config.neg_clip,
                                       noise_multiplier=config.neg_noise_multiplier)
            return dpsim.simulate(prob, opt, steps=config.neg_steps,
                                  batch_size=config.neg_batch_size, trials=config.neg_trials,
                                  seed=seed, sampling="fixed", record_every=config.neg_record_every,
                                  metrics=("loss",),
                                  probes={"neg_fraction": _neg_probe(
                                      config.neg_noise_multiplier, config.neg_clip,
                                      config.neg_batch_size, config.neg_beta2)},
                                  **sim)
        cells.append((f"neg-d{int(d)}", compute, {"part": "neg", "d": int(d)}))

    # (c) variants
    sigma = var_sigma(config)
    var_settings = [("none", "adam", "adam", {}, False)]
    for noise in ("gaussian", f"banded:{config.var_bands}"):
        for mlabel, opt_name, fixed, tune_eps in VARIANTS:
            var_settings.append((noise, mlabel, opt_name, {**fixed, "noise": noise}, tune_eps))
    for noise, mlabel, opt_name, fixed, tune_eps in var_settings:
        grid = _grid(config.var_lr_grid, config.var_eps_scale_grid, tune_eps)
        reps = config.var_tune_trials

        def compute(seed, opt_name=opt_name, fixed=fixed, grid=grid, reps=reps):
            prob = dpsim.problems.logistic_regression(config.var_n, config.var_d,
                                                      density=config.var_density,
                                                      seed=config.data_seed)
            hp = tuning.fold(grid, reps)
            if opt_name != "adam":
                hp.update(clip=config.var_clip, noise_multiplier=sigma)
            if opt_name != "dp_sgd":
                hp.update(beta2=config.var_beta2)
            opt = dpsim.optimizers.get(opt_name, **hp, **fixed)
            return dpsim.simulate(prob, opt, steps=config.var_steps,
                                  batch_size=config.var_batch_size, trials=len(hp["lr"]),
                                  seed=seed, sampling="poisson", record_every=config.var_steps,
                                  metrics=("loss",), **sim)
        tag = noise.replace(":", "")
        label = f"var-{tag}-{mlabel}"
        grids[label] = (grid, reps)
        cells.append((label, compute, {"part": "var", "noise": tag, "method": mlabel}))

    # (d) quadratic 2-D
    for mlabel, opt_name, fixed, tune_eps in QUAD_METHODS:
        grid = _grid(config.quad_lr_grid, config.quad_eps_scale_grid, tune_eps)
        reps = config.quad_tune_trials

        def compute(seed, opt_name=opt_name, fixed=fixed, grid=grid, reps=reps):
            prob = dpsim.problems.quadratic_2d(config.quad_a, config.quad_b, noise=config.quad_noise,
                                               n=config.quad_n, seed=config.data_seed)
            hp = tuning.fold(grid, reps)
            if opt_name != "adam":
                hp.update(clip=config.quad_clip, noise_multiplier=config.quad_noise_multiplier)
            opt = dpsim.optimizers.get(opt_name, **hp, **fixed)
            return dpsim.simulate(prob, opt, steps=config.quad_steps,
                                  batch_size=config.quad_batch_size, trials=len(hp["lr"]),
                                  seed=seed, sampling="poisson", record_every=config.quad_record_every,
                                  metrics=("loss",), init=np.asarray(config.quad_init, dtype=float),
                                  probes={"w1": _xy_probe(0), "w2": _xy_probe(1)},
                                  **sim)
        label = f"quad-{mlabel}"
        grids[label] = (grid, reps)
        cells.append((label, compute, {"part": "quad", "method": mlabel}))

    results = cache.run([Cell(label, i, fn, meta) for i, (label, fn, meta) in enumerate(cells)],
                        desc="design_space")

    tuning.record(cache, {label: tuning.select(results[label], grid, reps)
                          for label, (grid, reps) in grids.items()},
                  note="the reported trials are the chosen grid point's (the same trials)")
    cache.note("var_noise_multiplier", sigma)
    cache.note("reconstructed", "[DESIGN]'s formulas and most settings were lost in extraction; "
                                "all settings here are reconstructions (ALGORITHMS.md §4.3, §5.4)")
    return results


EXPERIMENT = Experiment(
    name="design_space",
    title="The DP-Adam design space of [DESIGN] (reconstructed settings): 1-D AdaGrad table, "
          "negative second moments vs d, all DP-Adam variants with i.i.d. and banded noise, 2-D quadratic",
    presets=PRESETS,
    run=run,
    figures=("fig_design_adagrad_table", "fig_design_negative_fraction", "fig_design_variants",
             "fig_design_quadratic2d"),
    module=__name__,
)
