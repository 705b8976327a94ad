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
* Problem, δ, metric: the balanced bag-of-words task of ``dp2_logistic`` (built by
  :func:`experiments.dp2_logistic.make_problem` from the problem fields of ``dp2_logistic``'s
  preset of the same scale, held-out split included), its δ rule
  (:func:`experiments.dp2_logistic.delta_for`), Poisson sampling; the verdict's metric is the
  paper's, the final *held-out accuracy*, with the final excess training loss ``F(w_T) − F*``
  reported beside it.  Premises (``paper_figures.dp2_common``): P1–P2 from ``notes["premise"]``,
  P3 from non-private SGD and RMSProp runs at the same ``T`` and ``b`` (``np-`` cells, tuned on
  the second-half average of their training loss), P4 per target ε: DP-SGD at 1× significantly
  below the class-prior excess (an ε where it is not does not test the claim).
* Computation factors ``k ∈ factors`` (1 and 4): batch ``k·b`` at the same ``T`` steps; at each
  target ``ε ∈ epsilons`` the noise multiplier is calibrated by the accountant,
  ``σ(ε, k) = dpsim.accounting.noise_multiplier(ε, δ, k·b/n, T)`` (PLD, Poisson: the smallest σ
  meeting ε; each run's own ε is then read back from its declared releases).
* Fixed hyperparameters: the raw-gradient clip ``C`` (DP-SGD, DP-RMSProp and DP²'s SGD phases),
  DP²'s adaptive-phase clip ``C₂``, ``ε_a``, ``β``, set from ``dp2_logistic``'s probes on the
  same problem (see the presets).
* Tuned at every ``(k, ε)`` (:mod:`experiments.tuning`, the paper's rule: the highest mean final
  training accuracy over ``tune_trials`` ≥ 3 trials per grid point, each grid folded into the
  trials of one tuning cell):
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
(metadata: :func:`cell_meta`), and the non-private premise runs ``np-sgd`` and ``np-rmsprop``.
"""

from __future__ import annotations

from dataclasses import dataclass

import dpsim

from . import dp2_data, tuning
from .dp2_logistic import PRESETS as _DP2_PRESETS
from .dp2_logistic import TEST_METRICS, accuracy_scores, delta_for, make_problem, problem_fields, tail_losses
from .pipeline import (Cell, Experiment, require_nonnegative_finite, require_positive_grids,
                       require_positive_ints)

__all__ = ["Config", "PRESETS", "EXPERIMENT", "run", "cell_labels", "cell_meta", "tag",
           "sigmas", "make_problem", "METHODS", "NONPRIVATE"]

METHODS = ("dp_sgd", "dp_rmsprop", "dp2_rmsprop")


@dataclass(frozen=True)
class Config:
    """Everything the experiment's results depend on (hashed into the cache key)."""

    n: int                                  # training documents
    n_test: int                             # held-out documents
    words: int                              # vocabulary (d = words + 1)
    words_per_doc: float                    # distinct words per document (mean)
    zipf: float                             # Zipf exponent of the document frequencies
    df_max: float                           # cap of a document frequency
    informative: float                      # fraction of sentiment words
    signal: float                           # scale of the planted model
    values: str                             # "logcount" or "binary"
    reg: float                              # L2 regularization
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
    clip: float = 1.0                       # raw-gradient clip C
    clip2: float = 5.0                      # DP² adaptive-phase clip C₂
    eps_a: float = 1e-3                     # adaptivity ε_a of DP-RMSProp and DP²
    np_lr_sgd_grid: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0)       # non-private SGD η (premise P3)
    np_lr_rmsprop_grid: tuple[float, ...] = (0.003, 0.01, 0.03, 0.1)  # non-private RMSProp η
    beta: float = 0.9                       # RMSProp β
    sampling: str = "poisson"
    data_seed: int = 0
    seed: int = 0

    def __post_init__(self):
        require_positive_ints(self,
            ("n", "n_test", "words", "steps", "batch_size", "tune_trials", "trials", "record_every"))
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
        require_positive_grids(self, ("lr_sgd_grid", "lr_rmsprop_grid", "dp2_lr2_grid",
                                      "np_lr_sgd_grid", "np_lr_rmsprop_grid"))
        require_nonnegative_finite(self, ("reg", "zipf", "signal"))
        for name in ("clip", "clip2", "eps_a"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {name}={getattr(self, name)!r}")


def _g(*xs):
    return tuple(float(x) for x in xs)


def _problem_of(scale: str) -> dict:
    """The problem fields of ``dp2_logistic``'s preset of ``scale``, with its RMSProp β and
    sampler."""
    c = _DP2_PRESETS[scale]
    return dict(problem_fields(scale), beta=c.beta, sampling=c.sampling)


PRESETS: dict[str, Config] = {
    # Smoke test only (seconds): the claim is not expected to be tested at this size.
    # Calibrating σ costs about a second per (k, ε) even here (PLD accountant): two cheap ε.
    "tiny": Config(**_problem_of("tiny"), steps=30, batch_size=16, factors=(1, 4),
                   epsilons=_g(0.3, 1), lr_sgd_grid=_g(0.3, 1), lr_rmsprop_grid=_g(0.03, 0.3),
                   dp2_lr2_grid=_g(0.01, 0.1), s_grid=(5,), tune_trials=1, trials=3,
                   record_every=10, clip=0.5, clip2=1.0, np_lr_sgd_grid=_g(0.3, 1),
                   np_lr_rmsprop_grid=_g(0.01, 0.1)),
    # dp2_logistic's quick problem and run length (10⁴ documents, 10³ words, b = 64, T = 1560:
    # 10 epochs at 1×, 40 at 4×) at three target ε, δ = 1e-4.  C = 1, C₂ = 5, ε_a = 1e-3: what
    # dp2_logistic's quick tuning (the paper's rule) chose for DP-SGD and DP² on this problem.
    # Grids: 3 learning rates each around its choices (DP-SGD η 1, DP-RMSProp 0.03, DP² η₂ 0.3);
    # one delay, s ≈ 0.25 epoch (dp2_logistic's quick accuracy was flat in s from 10 to 156).  3 tuning trials per grid point, 6 evaluation trials;
    # ≈ 10⁵ trial-steps at b = 64 and 2·10⁵ at b = 256 per ε, plus ≈ 12 CPU-s to calibrate the
    # six σ.
    "quick": Config(**_problem_of("quick"), steps=1560, batch_size=64, factors=(1, 4),
                    epsilons=_g(2, 5, 12), lr_sgd_grid=_g(0.3, 1, 3),
                    lr_rmsprop_grid=_g(0.01, 0.03, 0.1),
                    dp2_lr2_grid=_g(0.1, 0.3, 1), s_grid=(39,), tune_trials=3,
                    trials=6, record_every=78, clip=1.0, clip2=5.0),
    # IMDB's sizes and dp2_logistic's full problem (25 000 + 25 000 documents, 10⁴ words, b = 64,
    # δ = 1e-5) and the paper's 100 epochs at 1× (T = 39,000; 400 epochs at 4×, b = 256).  C = 1,
    # C₂ = 5, ε_a = 1e-3 (the paper's IMDB C₂; dp2_logistic's quick choices); learning rates
    # around dp2_logistic's full probes, widened up for the 4× batch's smaller noise; delays 0.5
    # and 2 epochs.  Per (k, ε), 4 + 4 + 2 × 4 grid points × 3 = 48 tuning trials and
    # 15 evaluation trials: ≈ 190 trials per factor at ≈ 0.13 ms (b = 64) and ≈ 0.3 ms
    # (b = 256) per trial-step ≈ 1.5 CPU-hours, plus ≈ 25 CPU-s for the six σ.
    "full": Config(**_problem_of("full"), steps=39000, batch_size=64, factors=(1, 4),
                   epsilons=_g(2, 5, 12), lr_sgd_grid=_g(0.03, 0.1, 0.3, 1),
                   lr_rmsprop_grid=_g(1e-3, 3e-3, 0.01, 0.03),
                   dp2_lr2_grid=_g(3e-3, 0.01, 0.03, 0.1), s_grid=(195, 780),
                   clip=1.0, clip2=5.0, tune_trials=3, trials=5, record_every=390,
                   np_lr_sgd_grid=_g(0.03, 0.05, 0.07, 0.1), np_lr_rmsprop_grid=_g(1e-3, 3e-3, 0.01)),
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


NONPRIVATE = ("sgd", "rmsprop")


def cell_labels(config: Config) -> list[str]:
    """Every cell label in index order (cell ``i`` is seeded with ``spawn_key=(i,)``)."""
    return ([f"tune-{k}" for k in _tune_keys(config)] + _eval_keys(config)
            + [f"tune-np-{m}" for m in NONPRIVATE] + [f"np-{m}" for m in NONPRIVATE])


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
    cache.note("premise", dp2_data.premise_numbers(problem))
    labels = cell_labels(config)
    index = {lab: i for i, lab in enumerate(labels)}
    T, b, reps = config.steps, config.batch_size, config.tune_trials
    sig = sigmas(config)
    rms = {"eps": config.eps_a, "beta": config.beta}
    options = dict(cache.simulate_options)  # read here: a cell's compute must not capture the cache

    def tune_cell(key, opt_name, grid, fixed, batch):
        hp = tuning.fold(grid, reps, scalars=True)
        R = len(tuning.points(grid)) * reps

        every = max(1, T // 8) if key.startswith("np-") else T

        def compute(seed):
            opt = dpsim.optimizers.get(opt_name, **fixed, **hp)
            return dpsim.simulate(problem, opt, steps=T, batch_size=batch, trials=R, seed=seed,
                                  sampling=config.sampling, record_every=every, metrics=("loss",),
                                  probes=dp2_data.train_accuracy_probe(problem), **options)

        return Cell(f"tune-{key}", index[f"tune-{key}"], compute)

    chosen: dict[str, dict] = {}
    selections: dict[str, tuning.Selection] = {}
    grids: dict[str, dict] = {}

    def tune(items, desc):
        res = cache.run([tune_cell(*it) for it in items], desc=desc)
        for key, opt_name, grid, fixed, _ in items:
            r = res[f"tune-{key}"]
            score = tail_losses(r) if key.startswith("np-") else accuracy_scores(r)
            selections[key] = tuning.select(score, grid, reps)
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
    # the premise P3: non-private SGD and RMSProp at 1× (scored on their second-half average)
    items += [("np-sgd", "sgd", {"lr": config.np_lr_sgd_grid}, {}, b),
              ("np-rmsprop", "rmsprop", {"lr": config.np_lr_rmsprop_grid}, rms, b)]
    tune(items, "dp2_compute: tune DP-SGD, DP-RMSProp and the non-private premise")
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
        "private cells: the paper's rule, the highest mean final training accuracy (scores saved "
        "as −accuracy); np-*: the mean training loss over the second half; DP²: its SGD-phase η "
        "is DP-SGD's tuned η at the same (k, ε); then the delay s with the best chosen score (the "
        "smaller on a tie)"))
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
                                  record_every=config.record_every, metrics=TEST_METRICS,
                                  **options)

        return Cell(label, index[label], compute, meta)

    cells = [eval_cell(f"{t}-{m}", settings[f"{t}-{m}"], cell_meta(m, k, e, sig[t], k * b))
             for k, e, t in plan for m in METHODS]
    cells += [eval_cell(f"np-{m}", chosen[f"np-{m}"], {"method": m, "factor": 1, "epsilon": None,
                                                         "sigma": None, "batch_size": b,
                                                         "private": False})
              for m in NONPRIVATE]
    return cache.run(cells, desc="dp2_compute: evaluate")


EXPERIMENT = Experiment(
    name="dp2_compute",
    title="DP² vs DP-SGD and DP-RMSProp with 4× the computation (4× batch, same steps, σ "
          "recalibrated to the same ε) on the balanced bag-of-words task ([DP2] Fig. 9 right)",
    presets=PRESETS,
    run=run,
    figures=("fig_dp2_compute",),
    module=__name__,
    numerics=2,
)
