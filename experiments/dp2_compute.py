"""DP² with 4× the computation: 4× larger batches at the same steps ([DP2] App. C.4, Fig. 9 right).

Source: Li, Zaheer, Liu, Reddi, McMahan, Smith, *Differentially Private Adaptive Optimization with
Delayed Preconditioners* (ICLR 2023) — [DP2] — App. C.4 ("Effects of increasing computational
budgets") and Fig. 9 (right, StackOverflow): with a 4× larger batch at the same number of
iterations (4× the computation, 4× the epochs) and the noise multiplier raised until the privacy
cost ε is about the same, the privacy/utility trade-off of every method improves, and the
absolute improvement of DP² over the vanilla DP baselines (DP-SGD, DP-RMSProp) stays about the
same.

Why it can help: a private step adds ``σ C · N(0, I) / b`` to the mean clipped gradient; at a
fixed ε, raising the sampling rate ``q = b/n`` by ``k`` needs a larger σ, but by less than ``k``
whenever privacy amplification by subsampling is not in its linear regime (``ε ∝ q√T/σ``), so
the noise per step ``σ_k/(k b)`` shrinks (and so does the sampling noise of the gradient).

Claim checked (``paper_figures/fig_dp2_compute.py``): at every target ε of the sweep, (A) each of
DP-SGD, DP-RMSProp and DP²-RMSProp reaches a lower final loss at 4× than at 1×, and (B) DP²'s gain
over the better of the two baselines at 4× is within a stated factor of its gain at 1×.

Design
------
* Problem, δ, metric: the sparse, heavy-tailed (Zipf 2) logistic regression of ``dp2_logistic``
  (built by :func:`experiments.dp2_noisy_adagrad.make_problem` from the problem fields of
  ``dp2_logistic``'s preset of the same scale, column scaling ``col_scale`` included: at full the
  column-scaled problem on which non-private RMSProp beats SGD), its δ rule
  (:func:`experiments.dp2_logistic.delta_for`), Poisson sampling; the final *excess training
  loss* ``F(w_T) − F*``, the metric of ``dp2_logistic``'s figures (the paper reports test accuracy).
* Computation factors ``k ∈ factors`` (1 and 4): batch ``k·b`` at the same ``T`` steps; at each
  target ``ε ∈ epsilons`` the noise multiplier is calibrated by the accountant,
  ``σ(ε, k) = dpsim.accounting.noise_multiplier(ε, δ, k·b/n, T)`` (PLD, Poisson: the smallest σ
  meeting ε; each run's own ε is then read back from its declared releases).
* Fixed hyperparameters: those ``dp2_logistic``'s tuning chose at every σ of its sweep at the same
  scale — raw-gradient clip ``C`` (DP-SGD, DP-RMSProp and DP²'s SGD phases), DP²'s adaptive-phase
  clip ``C₂``, ``ε_a``, ``β`` (quick: C = 0.25, C₂ = 200; full: C = 1, C₂ = 0.1; ε_a = 1e-3,
  β = 0.9 at both).
* Tuned at every ``(k, ε)`` (:mod:`experiments.tuning`: lowest mean final training loss over
  ``tune_trials`` ≥ 3 trials per grid point, each grid folded into the trials of one tuning cell):
  DP-SGD's η over ``lr_sgd_grid``; DP-RMSProp's η over ``lr_rmsprop_grid``; DP²'s adaptive-phase
  η₂ over ``dp2_lr2_grid``, one cell per delay ``s ∈ s_grid`` (the phase schedule is shared by a
  run's trials), the ``s`` with the lowest chosen score kept (the smaller on a tie).  DP²'s
  SGD-phase η is DP-SGD's tuned η at the same ``(k, ε)`` (its SGD phases are DP-SGD steps with the
  same clip; ``dp2_logistic``'s own tuning chose DP-SGD's η there too), so DP² is tuned in a
  second round after DP-SGD.
* Evaluation: each chosen setting run with ``trials`` fresh trials (cell seeds are distinct, so no
  evaluation reuses tuning noise).
* Grid edges: ``notes["edges"]`` maps each evaluation label to the axes of its setting on a grid
  edge (``s`` included when the chosen delay is the smallest or largest of ``s_grid``).
* Cells and seeds: every label is enumerated up front (:func:`cell_labels`); cell ``i`` runs with
  ``SeedSequence(config.seed, spawn_key=(i,))``.

``run(config, cache)`` returns the evaluation results, labelled ``x<k>-e<ε>-<method>``
(metadata: :func:`cell_meta`).
"""

from __future__ import annotations

from dataclasses import dataclass

import dpsim

from . import tuning
from .dp2_logistic import PRESETS as _DP2_PRESETS
from .dp2_logistic import delta_for, problem_fields
from .dp2_noisy_adagrad import make_problem
from .pipeline import (Cell, Experiment, require_nonnegative_finite, require_positive_grids,
                       require_positive_ints)

__all__ = ["Config", "PRESETS", "EXPERIMENT", "run", "cell_labels", "cell_meta", "tag",
           "sigmas", "make_problem", "METHODS"]

METHODS = ("dp_sgd", "dp_rmsprop", "dp2_rmsprop")


@dataclass(frozen=True)
class Config:
    """Everything the experiment's results depend on (hashed into the cache key)."""

    n: int                                  # training examples
    d: int                                  # features
    density: float                          # fraction of nonzero features per row
    zipf: float                             # Zipf exponent of the column popularity
    signal: float                           # scale of the planted model
    reg: float                              # L2 regularization
    col_scale: float                        # column j scaled by (j+1)^-col_scale (0: off)
    steps: int                              # T, the same at every computation factor
    batch_size: int                         # b at factor 1 (Poisson rate k·b/n at factor k)
    factors: tuple[int, ...]                # computation factors k (batch k·b)
    epsilons: tuple[float, ...]             # target ε (at δ = delta_for(n))
    lr_sgd_grid: tuple[float, ...]          # DP-SGD η (also DP²'s SGD-phase η, once tuned)
    lr_rmsprop_grid: tuple[float, ...]      # DP-RMSProp η
    dp2_lr2_grid: tuple[float, ...]         # DP² adaptive-phase η₂
    s_grid: tuple[int, ...]                 # DP² delays (one tuning cell each)
    tune_trials: int                        # trials per grid point
    trials: int                             # trials per evaluation cell
    record_every: int                       # records of the evaluation cells
    clip: float = 0.25                      # raw-gradient clip C (dp2_logistic quick's tuned value)
    clip2: float = 200.0                    # DP² adaptive-phase clip C₂ (idem)
    eps_a: float = 1e-3                     # adaptivity ε_a of DP-RMSProp and DP² (idem)
    beta: float = 0.9                       # RMSProp β
    sampling: str = "poisson"
    data_seed: int = 0
    seed: int = 0

    def __post_init__(self):
        require_positive_ints(self,
            ("n", "d", "steps", "batch_size", "tune_trials", "trials", "record_every"))
        if not (0.0 < self.density < 1.0):
            raise ValueError(f"density must be in (0, 1) (sparse features), got density={self.density}")
        f = self.factors
        if (len(f) < 2 or len(set(f)) != len(f) or 1 not in f
                or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in f)):
            raise ValueError(f"factors must be distinct positive integers including 1 (the "
                             f"baseline computation) and at least one more, got factors={f!r}")
        if max(f) * self.batch_size > self.n:
            raise ValueError(f"the largest batch {max(f)}·{self.batch_size} exceeds n={self.n} "
                             f"(sampling rate above 1), got factors={f!r}")
        if not self.epsilons or any(not (0.0 < e < float("inf")) for e in self.epsilons) or len(
                set(self.epsilons)) != len(self.epsilons):
            raise ValueError(f"epsilons must be distinct positive finite numbers, "
                             f"got epsilons={self.epsilons!r}")
        if not self.s_grid or any(isinstance(s, bool) or not isinstance(s, int) or not 1 <= s < self.steps
                                  for s in self.s_grid):
            raise ValueError(f"s_grid must be integers in [1, steps={self.steps}), got s_grid={self.s_grid!r}")
        require_positive_grids(self, ("lr_sgd_grid", "lr_rmsprop_grid", "dp2_lr2_grid"))
        require_nonnegative_finite(self, ("col_scale",))
        for name in ("clip", "clip2", "eps_a"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {name}={getattr(self, name)!r}")


def _g(*xs):
    return tuple(float(x) for x in xs)


def _problem_of(scale: str) -> dict:
    """The problem fields of ``dp2_logistic``'s preset of ``scale`` (column scaling included),
    with its RMSProp β and sampler."""
    c = _DP2_PRESETS[scale]
    return dict(problem_fields(scale), beta=c.beta, sampling=c.sampling)


PRESETS: dict[str, Config] = {
    # Smoke test only (seconds): the claim is not expected to be tested at this size.
    # Calibrating σ costs about a second per (k, ε) even here (PLD accountant): two cheap ε.
    "tiny": Config(**_problem_of("tiny"), steps=30, batch_size=16, factors=(1, 4),
                   epsilons=_g(0.3, 1), lr_sgd_grid=_g(3, 10), lr_rmsprop_grid=_g(0.03, 0.3),
                   dp2_lr2_grid=_g(0.01, 0.1), s_grid=(5,), tune_trials=1, trials=3,
                   record_every=10),
    # dp2_logistic's quick problem and run length (n = 2500, d = 1000, 2% nonzero, Zipf 2; b = 64,
    # T = 1560: 40 epochs at 1×, 160 at 4×) at three target ε spanning its ε sweep (1.9–12.9),
    # δ = 1e-4.  Grids: 4 learning rates each (a first run with 3 had winners on the edges:
    # DP-SGD η = 30 at 4×, ε = 12; DP-RMSProp η = 0.03 and DP² η₂ = 0.01 at ε = 2); the delays
    # around dp2_logistic's tuned s = 78.  3 tuning trials per grid point, 8 evaluation trials.
    # Cost (one BLAS thread, loaded 2-core machine): about 0.03 ms per trial-step at b = 64 and
    # 0.06 ms at b = 256, 504 trials × 1560 steps in all ≈ 35–48 CPU-s, plus ≈ 12 CPU-s to
    # calibrate the six σ (PLD accountant, ≈ 1–5 s each) and the figure.
    "quick": Config(**_problem_of("quick"), steps=1560, batch_size=64, factors=(1, 4),
                    epsilons=_g(2, 5, 12), lr_sgd_grid=_g(3, 10, 30, 100),
                    lr_rmsprop_grid=_g(0.01, 0.03, 0.1, 0.3),
                    dp2_lr2_grid=_g(0.003, 0.01, 0.03, 0.1), s_grid=(20, 78, 156), tune_trials=3,
                    trials=8, record_every=78),
    # IMDB's sizes and dp2_logistic's full problem (n = 25,000, d = 10⁴, 1.3% nonzero, Zipf 2,
    # column scales (j+1)^-1, where non-private RMSProp beats SGD; b = 64, δ = 1e-5) and the
    # paper's 100 epochs at 1× (T = 39,000; 400 epochs at 4×, b = 256).  C = 1, C₂ = 0.1 and
    # ε_a = 1e-3 are what dp2_logistic's full tuning chose at every σ of its sweep (0.6–2, the
    # range of this σ at 1×); the learning-rate grids are centred on its choices (DP-SGD η
    # 0.01–0.1, DP-RMSProp η 1e-3, DP² η₂ 1e-4–3e-4) and widened a factor 10 up for the 4×
    # batch's smaller noise; the delays are its s_grid up to 20 epochs.  Per (k, ε), 75 tuning
    # trials (5 + 5 + 3 × 5 grid points × 3) and 15 evaluation trials: 270 trials per factor at
    # ≈ 0.11 ms (b = 64) and ≈ 0.25 ms (b = 256) per trial-step (one BLAS thread): ≈ 1.1
    # CPU-hours, plus ≈ 25 CPU-s for the six σ.  Measured (2026-11-25, beside dp2_noisy_adagrad):
    # 55 CPU-min, 42 min wall; the previous full run (unscaled problem, C = 0.25, C₂ = 200): 1.30
    # CPU-hours.
    "full": Config(**_problem_of("full"), steps=39000, batch_size=64, factors=(1, 4),
                   epsilons=_g(2, 5, 12), lr_sgd_grid=_g(0.01, 0.03, 0.1, 0.3, 1),
                   lr_rmsprop_grid=_g(1e-4, 3e-4, 1e-3, 3e-3, 0.01),
                   dp2_lr2_grid=_g(3e-5, 1e-4, 3e-4, 1e-3, 3e-3), s_grid=(39, 195, 780),
                   clip=1.0, clip2=0.1, tune_trials=3, trials=5, record_every=390),
}


# ------------------------------------------------------------------------------------------------
# Labels


def tag(factor: int, epsilon: float) -> str:
    """The label prefix of computation factor ``k`` at target ε: ``x<k>-e<ε>``."""
    return f"x{int(factor)}-e{float(epsilon):g}"


def cell_meta(method: str, factor: int, epsilon: float, sigma: float, batch_size: int) -> dict:
    """Metadata of an evaluation cell: ``method`` (optimizer name), computation ``factor`` ``k``,
    target ``epsilon``, the calibrated noise multiplier ``sigma`` and the expected ``batch_size``
    (``k·b``)."""
    return {"method": method, "factor": int(factor), "epsilon": float(epsilon),
            "sigma": float(sigma), "batch_size": int(batch_size)}


def _tune_keys(config: Config) -> list[str]:
    keys = []
    for k in config.factors:
        for e in config.epsilons:
            t = tag(k, e)
            keys += [f"{t}-dp_sgd", f"{t}-dp_rmsprop"]
            keys += [f"{t}-dp2_rmsprop-s{s}" for s in config.s_grid]
    return keys


def _eval_keys(config: Config) -> list[str]:
    return [f"{tag(k, e)}-{m}" for k in config.factors for e in config.epsilons for m in METHODS]


def cell_labels(config: Config) -> list[str]:
    """Every cell label in index order (cell ``i`` is seeded with ``spawn_key=(i,)``)."""
    return [f"tune-{k}" for k in _tune_keys(config)] + _eval_keys(config)


def sigmas(config: Config) -> dict[str, float]:
    """``{tag(k, ε): σ}``: the smallest noise multiplier meeting each target ε at δ =
    :func:`experiments.dp2_logistic.delta_for` ``(n)`` with Poisson rate ``k·b/n`` over ``T``
    steps (:func:`dpsim.accounting.noise_multiplier`, PLD accountant)."""
    delta = delta_for(config.n)
    return {tag(k, e): float(dpsim.accounting.noise_multiplier(
                e, delta, k * config.batch_size / config.n, config.steps, sampling=config.sampling))
            for k in config.factors for e in config.epsilons}


# ------------------------------------------------------------------------------------------------
# The experiment


def _edge_axes(grid: dict, point: dict) -> dict:
    return {a: point[a] for a, v in grid.items() if len(v) > 1 and point[a] in (min(v), max(v))}


def run(config: Config, cache) -> dict:
    """Calibrate σ per (k, ε), tune the three methods at each, evaluate the chosen settings."""
    problem = make_problem(config)
    labels = cell_labels(config)
    index = {lab: i for i, lab in enumerate(labels)}
    T, b, reps = config.steps, config.batch_size, config.tune_trials
    sig = sigmas(config)
    rms = {"eps": config.eps_a, "beta": config.beta}
    options = dict(cache.simulate_options)  # read here: a cell's compute must not capture the cache

    def tune_cell(key, opt_name, grid, fixed, batch):
        hp = tuning.fold(grid, reps, scalars=True)
        R = len(tuning.points(grid)) * reps

        def compute(seed):
            opt = dpsim.optimizers.get(opt_name, **fixed, **hp)
            return dpsim.simulate(problem, opt, steps=T, batch_size=batch, trials=R, seed=seed,
                                  sampling=config.sampling, record_every=T, metrics=("loss",),
                                  **options)

        return Cell(f"tune-{key}", index[f"tune-{key}"], compute)

    chosen: dict[str, dict] = {}
    selections: dict[str, tuning.Selection] = {}
    grids: dict[str, dict] = {}

    def tune(items, desc):
        res = cache.run([tune_cell(*it) for it in items], desc=desc)
        for key, opt_name, grid, fixed, _ in items:
            selections[key] = tuning.select(res[f"tune-{key}"], grid, reps)
            grids[key] = grid
            chosen[key] = {"optimizer": opt_name, **fixed, **selections[key].point}

    plan = [(k, e, tag(k, e)) for k in config.factors for e in config.epsilons]
    # Round 1: DP-SGD and DP-RMSProp at every (k, ε)
    items = []
    for k, e, t in plan:
        items.append((f"{t}-dp_sgd", "dp_sgd", {"lr": config.lr_sgd_grid},
                      {"clip": config.clip, "noise_multiplier": sig[t]}, k * b))
        items.append((f"{t}-dp_rmsprop", "dp_rmsprop", {"lr": config.lr_rmsprop_grid},
                      {"clip": config.clip, "noise_multiplier": sig[t], **rms}, k * b))
    tune(items, "dp2_compute: tune DP-SGD and DP-RMSProp")
    # Round 2: DP² per delay, its SGD-phase η = DP-SGD's tuned η at the same (k, ε)
    items = [(f"{t}-dp2_rmsprop-s{s}", "dp2_rmsprop", {"lr2": config.dp2_lr2_grid},
              {"s1": s, "lr": chosen[f"{t}-dp_sgd"]["lr"], "clip": config.clip,
               "clip2": config.clip2, "noise_multiplier": sig[t], **rms}, k * b)
             for k, e, t in plan for s in config.s_grid]
    tune(items, "dp2_compute: tune DP²")

    settings, edges, chosen_s = {}, {}, {}
    for k, e, t in plan:
        for m in ("dp_sgd", "dp_rmsprop"):
            settings[f"{t}-{m}"] = chosen[f"{t}-{m}"]
            edges[f"{t}-{m}"] = _edge_axes(grids[f"{t}-{m}"], chosen[f"{t}-{m}"])
        scores = {s: selections[f"{t}-dp2_rmsprop-s{s}"].score for s in config.s_grid}
        s_best = min(scores, key=lambda s: (scores[s], s))
        key = f"{t}-dp2_rmsprop-s{s_best}"
        settings[f"{t}-dp2_rmsprop"] = chosen[key]
        edges[f"{t}-dp2_rmsprop"] = _edge_axes(grids[key], chosen[key])
        if len(config.s_grid) > 1 and s_best in (min(config.s_grid), max(config.s_grid)):
            edges[f"{t}-dp2_rmsprop"]["s"] = int(s_best)
        chosen_s[t] = int(s_best)

    tuning.record(cache, selections, note=(
        "DP²: its SGD-phase η is DP-SGD's tuned η at the same (k, ε); then the delay s with the "
        "lowest chosen score (the smaller on a tie)"))
    cache.note("delta", delta_for(config.n))
    cache.note("sigma", sig)
    cache.note("chosen", settings)
    cache.note("chosen_s", chosen_s)
    cache.note("edges", edges)

    def eval_cell(label, hp, meta):
        hp = dict(hp)
        opt_name = hp.pop("optimizer")

        def compute(seed):
            opt = dpsim.optimizers.get(opt_name, **hp)
            return dpsim.simulate(problem, opt, steps=T, batch_size=meta["batch_size"],
                                  trials=config.trials, seed=seed, sampling=config.sampling,
                                  record_every=config.record_every, metrics=("loss",),
                                  **options)

        return Cell(label, index[label], compute, meta)

    cells = [eval_cell(f"{t}-{m}", settings[f"{t}-{m}"], cell_meta(m, k, e, sig[t], k * b))
             for k, e, t in plan for m in METHODS]
    return cache.run(cells, desc="dp2_compute: evaluate")


EXPERIMENT = Experiment(
    name="dp2_compute",
    title="DP² vs DP-SGD and DP-RMSProp with 4× the computation (4× batch, same steps, σ "
          "recalibrated to the same ε) on sparse logistic regression ([DP2] Fig. 9 right)",
    presets=PRESETS,
    run=run,
    figures=("fig_dp2_compute",),
    module=__name__,
)
