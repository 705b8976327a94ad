"""DP² vs the noisy AdaGrad of Kairouz et al. (2021a) ([DP2] App. C.6, Fig. 12).

Source: Li, Zaheer, Liu, Reddi, McMahan, Smith, *Differentially Private Adaptive Optimization with
Delayed Preconditioners* (ICLR 2023) — [DP2] — App. C.6, Fig. 12: a private AdaGrad that clips and
noises the gradients and, separately, the preconditioner, projects the noisy preconditioner onto
a top-``k`` gradient subspace estimated from public data, and divides the noisy gradient by it
(:func:`dpsim.optimizers.noisy_adagrad.noisy_adagrad`, reconstructed from the paper's words).  The
paper reports that it did not obtain a satisfactory result: accuracy only marginally beyond random
guessing, and DP² better.

Claim checked (``paper_figures/fig_dp2_noisy_adagrad.py``): *tuned noisy AdaGrad improves only
marginally on the trivial model (the initial iterate ``w = 0``, "random guessing") and ends worse
than DP²* at the same noise multiplier σ (hence the same ε: noisy AdaGrad's two releases per step
split σ so that the pair costs one DP-SGD step, see the optimizer's docstring).

Design
------
* Problem: the balanced bag-of-words task of ``dp2_logistic`` (:func:`experiments.dp2_logistic
  .make_problem`; quick and full: the very problem of ``dp2_logistic``'s preset of that scale,
  held-out split included), the same δ rule (:func:`experiments.dp2_logistic.delta_for`:
  ``10^{-k} ≤ 1/n``), Poisson sampling at ``b/n`` over the private part.  Metric: the paper's,
  the held-out accuracy (the excess training loss ``F(w) − F*`` beside it); "trivial" is the
  model ``w = 0`` (the step-0 record of every run: accuracy 1/2, the model that guesses 50/50 on
  every example, "random guessing").  Premises (``paper_figures.dp2_common``): P1–P2 from
  ``notes["premise"]``, P3 from non-private SGD and RMSProp runs at the same ``T`` (``np-``
  cells), P4 from DP-SGD.
* Methods, all at σ = ``sigma``: DP-SGD (reference), DP²-RMSProp (one tuning cell per delay
  ``s ∈ s_grid``, SGD-phase clip = DP-SGD's tuned clip, as ``dp2_logistic`` does), and noisy
  AdaGrad with a ``public_fraction`` public split (one tuning cell per subspace dimension
  ``k ∈ k_grid``; grid over lr × C × C₂ × ε_a).  Noisy AdaGrad's ε covers the private part only.
* Tuning (:mod:`experiments.tuning`): the paper's rule, the highest mean final training accuracy
  over ``tune_trials`` ≥ 3 trials per grid point; then ``trials`` fresh evaluation trials per chosen setting (cell seeds are
  distinct, so evaluation never reuses tuning noise).  DP² and noisy AdaGrad take the ``s``/``k``
  cell with the lowest chosen score (the smaller on a tie).
* A second noisy-AdaGrad evaluation, ``noisy_adagrad-small_eps``: the best setting of the same
  tuning cells with ε_a fixed at the smallest grid value (the regime where the noisy preconditioner
  actually sets the step; with a large ε_a the update is ``η g̃ / ε_a`` on most coordinates, i.e.
  DP-SGD with step ``η/ε_a``).  Reported beside the tuned one; the verdict uses the tuned one.
* Grid edges: ``notes["edges"]`` maps each evaluation label to the axes of its setting that sit on
  a grid edge (``k``/``s`` included when the chosen cell is the smallest or largest value, except
  the value 1, below which there is nothing to try).

``run(config, cache)`` returns the evaluation results ``dp_sgd``, ``dp2_rmsprop``,
``noisy_adagrad`` and ``noisy_adagrad-small_eps`` (metadata: :func:`cell_meta`), and the
non-private premise runs ``np-sgd`` and ``np-rmsprop``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import dpsim
import dpsim.optimizers.noisy_adagrad  # noqa: F401  (registers "noisy_adagrad" by name)

from . import dp2_data, tuning
from .dp2_logistic import (TEST_METRICS, accuracy_scores, delta_for, make_problem, problem_fields,
                           tail_losses)
from .pipeline import (Cell, Experiment, require_nonnegative_finite, require_positive_grids,
                       require_positive_ints)

__all__ = ["Config", "PRESETS", "EXPERIMENT", "run", "cell_labels", "cell_meta", "make_problem",
           "NONPRIVATE"]


@dataclass(frozen=True)
class Config:
    """Everything the experiment's results depend on (hashed into the cache key)."""

    n: int                                  # training documents (public split included)
    n_test: int                             # held-out documents
    words: int                              # vocabulary (d = words + 1)
    words_per_doc: float                    # distinct words per document (mean)
    steps: int                              # T
    batch_size: int                         # expected batch size b (Poisson rate b/n_private)
    sigma: float                            # noise multiplier of every private method
    lr_sgd_grid: tuple[float, ...]          # DP-SGD learning rates
    clip_grid: tuple[float, ...]            # DP-SGD clip (also DP²'s SGD-phase clip, once tuned)
    s_grid: tuple[int, ...]                 # DP² delays (one tuning cell each)
    dp2_lr_grid: tuple[float, ...]          # DP² SGD-phase learning rate
    dp2_lr2_grid: tuple[float, ...]         # DP² adaptive-phase learning rate
    dp2_clip2_grid: tuple[float, ...]       # DP² adaptive-phase clip (preconditioned gradients)
    k_grid: tuple[int, ...]                 # noisy AdaGrad subspace dimension (one cell each)
    na_lr_grid: tuple[float, ...]           # noisy AdaGrad learning rate
    na_clip_grid: tuple[float, ...]         # noisy AdaGrad gradient clip C
    na_clip2_grid: tuple[float, ...]        # noisy AdaGrad clip C₂ of the squared gradients
    na_eps_grid: tuple[float, ...]          # noisy AdaGrad stability constant ε_a
    tune_trials: int                        # trials per grid point
    trials: int                             # trials per evaluation cell
    record_every: int                       # records of the evaluation cells
    dp2_eps: float = 1e-3                   # DP²'s ε_a (not tuned, as dp2_logistic at quick)
    public_fraction: float = 0.01           # noisy AdaGrad's public split
    zipf: float = 1.3
    df_max: float = 0.95
    informative: float = 0.2
    signal: float = 1.0
    values: str = "logcount"
    reg: float = 1e-5
    np_lr_sgd_grid: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0)        # non-private SGD η (premise P3)
    np_lr_rmsprop_grid: tuple[float, ...] = (0.003, 0.01, 0.03, 0.1)  # non-private RMSProp η
    beta: float = 0.9                       # DP²-RMSProp β
    sampling: str = "poisson"
    data_seed: int = 0
    seed: int = 0

    def __post_init__(self):
        require_positive_ints(self,
            ("n", "n_test", "words", "steps", "batch_size", "tune_trials", "trials", "record_every"))
        if not self.sigma > 0:
            raise ValueError(f"sigma must be positive, got sigma={self.sigma}")
        m = round(self.public_fraction * self.n)
        if not (0.0 < self.public_fraction < 1.0) or m < 1:
            raise ValueError(f"public_fraction must leave at least one public example, got "
                             f"public_fraction={self.public_fraction} with n={self.n}")
        for name, hi in (("s_grid", self.steps - 1), ("k_grid", min(m, self.words + 1))):
            v = getattr(self, name)
            if not v or any(isinstance(x, bool) or not isinstance(x, int) or x < 1 or x > hi
                            for x in v):
                raise ValueError(f"{name} must be integers in [1, {hi}], got {name}={v!r}")
        require_nonnegative_finite(self, ("reg", "zipf", "signal"))
        require_positive_grids(self,
            ("lr_sgd_grid", "clip_grid", "dp2_lr_grid", "dp2_lr2_grid", "dp2_clip2_grid",
             "na_lr_grid", "na_clip_grid", "na_clip2_grid", "na_eps_grid", "np_lr_sgd_grid",
             "np_lr_rmsprop_grid"))


def _g(*xs):
    return tuple(float(x) for x in xs)


PRESETS: dict[str, Config] = {
    # Smoke test only (a few seconds): the claim is not expected to be tested at this size.
    "tiny": Config(**problem_fields("tiny"), steps=30, batch_size=16, sigma=1.0,
                   lr_sgd_grid=_g(0.3, 1), clip_grid=_g(0.5), s_grid=(5,), dp2_lr_grid=_g(0.3),
                   dp2_lr2_grid=_g(0.01, 0.1), dp2_clip2_grid=_g(1), k_grid=(2,),
                   na_lr_grid=_g(0.1, 1), na_clip_grid=_g(0.5), na_clip2_grid=_g(0.03),
                   na_eps_grid=_g(1e-3, 0.1), tune_trials=1, trials=3, record_every=10,
                   public_fraction=0.05, np_lr_sgd_grid=_g(0.3, 1), np_lr_rmsprop_grid=_g(0.01, 0.1)),
    # dp2_logistic's quick problem (10⁴ documents, 10³ words, 20 per document), 3 epochs
    # (T = 468 at b = 64), a 0.25% public split (25 documents: noisy AdaGrad's 25 × 25
    # eigendecomposition per trial and step, ≈ 9× DP-SGD's step, is most of the cost);
    # 3 tuning trials per grid point.  The (lr, ε_a) grid spans both regimes: ε_a = 1e-3 (the
    # preconditioner sets the step) and 0.3 (ε_a dominates: step ≈ η/ε_a on most coordinates).
    # DP-SGD's and DP²'s grids around dp2_logistic's quick choices on this problem (the paper's
    # rule: DP-SGD η 1, C 1; DP² η 1, η₂ 0.3, C₂ 5), DP²'s SGD-phase η fixed at 1 as there.
    "quick": Config(**problem_fields("quick"), steps=468, batch_size=64, sigma=1.0,
                    lr_sgd_grid=_g(0.3, 1, 3), clip_grid=_g(0.3, 1, 3), s_grid=(10, 39),
                    dp2_lr_grid=_g(1), dp2_lr2_grid=_g(0.1, 0.3, 1),
                    dp2_clip2_grid=_g(1, 5, 20), k_grid=(1, 4),
                    na_lr_grid=_g(0.1, 1, 10), na_clip_grid=_g(0.3, 1),
                    na_clip2_grid=_g(3e-3, 3e-2), na_eps_grid=_g(1e-3, 0.3),
                    tune_trials=3, trials=6, record_every=39, public_fraction=0.0025),
    # IMDB's sizes and dp2_logistic's full problem (25 000 + 25 000 documents, 10⁴ words, ~130
    # per document; b = 64, δ = 1e-5), 10 epochs (T = 3900; the paper's 100 would be ≈ 5
    # CPU-hours for noisy AdaGrad alone), three k, three ε_a.  The public split is 0.2% (50
    # documents, ≥ 3× the largest k): with the paper's 1% (250) the 250 × 250 eigendecomposition
    # per trial and step costs ≈ 13 ms, ≈ 12 CPU-hours for the tuning.  DP-SGD and DP² grids
    # around dp2_logistic's full probes (DP-SGD η 0.03–0.3 over 100 epochs, up to 3 here for the
    # 10× shorter run; DP² C₂ 0.5–5); η up to 10 so that η/ε_a reaches DP-SGD's step at
    # ε_a = 3.  Cost (one BLAS thread): noisy AdaGrad ≈ 1.25 ms per trial-step, 3 × 144 tuning
    # trials × 3900 steps ≈ 35 CPU-min; DP² 216 tuning trials ≈ 4 min; the rest ≈ 4 min.
    "full": Config(**problem_fields("full"), steps=3900, batch_size=64, sigma=1.0,
                   lr_sgd_grid=_g(0.1, 0.3, 1, 3), clip_grid=_g(0.5, 1, 2), s_grid=(39, 195, 390),
                   dp2_lr_grid=_g(0.1, 0.3, 1), dp2_lr2_grid=_g(3e-3, 0.03, 0.3),
                   dp2_clip2_grid=_g(0.5, 2, 5),
                   k_grid=(1, 4, 16), na_lr_grid=_g(0.01, 0.1, 1, 10), na_clip_grid=_g(0.25, 1),
                   na_clip2_grid=_g(3e-3, 3e-2), na_eps_grid=_g(1e-3, 0.3, 3),
                   tune_trials=3, trials=5, record_every=390, public_fraction=0.002,
                   np_lr_sgd_grid=_g(0.03, 0.1, 0.3), np_lr_rmsprop_grid=_g(1e-3, 3e-3, 0.01)),
}


# ------------------------------------------------------------------------------------------------
# Labels


def cell_meta(method: str, sigma: float, *, variant: str = "tuned") -> dict:
    """Metadata of an evaluation cell: ``method`` (optimizer name), ``sigma`` and ``variant``
    (``"tuned"``, or ``"small_eps"`` for noisy AdaGrad with ε_a fixed at the grid's smallest)."""
    return {"method": method, "sigma": float(sigma), "variant": variant}


EVAL = ("dp_sgd", "dp2_rmsprop", "noisy_adagrad", "noisy_adagrad-small_eps")


NONPRIVATE = ("np-sgd", "np-rmsprop")


def _tune_keys(config: Config) -> list[str]:
    return (["dp_sgd"] + [f"dp2_rmsprop-s{s}" for s in config.s_grid]
            + [f"noisy_adagrad-k{k}" for k in config.k_grid])


def cell_labels(config: Config) -> list[str]:
    """Every cell label in index order (cell ``i`` is seeded with ``spawn_key=(i,)``)."""
    return ([f"tune-{k}" for k in _tune_keys(config)] + list(EVAL)
            + [f"tune-{k}" for k in NONPRIVATE] + list(NONPRIVATE))


# ------------------------------------------------------------------------------------------------
# The experiment


def _best_of(selections: dict, keys: dict, fixed: dict | None = None):
    """Among the cells ``keys`` (``{value: key}`` of a per-cell axis), the best point (restricted
    to ``fixed`` axes when given): ``(value, point, score, index)``, the smaller value on a tie."""
    out = []
    for val, key in keys.items():
        sel = selections[key]
        if fixed:
            pt = sel.best(**fixed)
            i = sel.points.index(pt)
        else:
            pt, i = sel.point, sel.index
        out.append((sel.scores[i], val, pt, i))
    score, val, pt, i = min(out, key=lambda x: (x[0], x[1]))
    return val, pt, score, i


def _edge_axes(grid: dict, point: dict, skip=()) -> dict:
    return {k: point[k] for k, v in grid.items()
            if k not in skip and len(v) > 1 and point[k] in (min(v), max(v))}


def run(config: Config, cache) -> dict:
    """Tune DP-SGD, DP² and noisy AdaGrad at σ, then evaluate the chosen settings (module doc)."""
    problem = make_problem(config)
    cache.note("premise", dp2_data.premise_numbers(problem))
    labels = cell_labels(config)
    index = {lab: i for i, lab in enumerate(labels)}
    T, b, sig = config.steps, config.batch_size, float(config.sigma)
    common = dict(steps=T, batch_size=b, sampling=config.sampling, **cache.simulate_options)
    reps = config.tune_trials

    def tune_cell(key, opt_name, grid, fixed):
        hp = tuning.fold(grid, reps, scalars=True)
        R = len(tuning.points(grid)) * reps

        every = max(1, T // 8) if key.startswith("np-") else T

        def compute(seed):
            opt = dpsim.optimizers.get(opt_name, **fixed, **hp)
            return dpsim.simulate(problem, opt, trials=R, seed=seed, record_every=every,
                                  metrics=("loss",), probes=dp2_data.train_accuracy_probe(problem),
                                  **common)

        return Cell(f"tune-{key}", index[f"tune-{key}"], compute)

    chosen: dict[str, dict] = {}
    selections: dict[str, tuning.Selection] = {}
    grids: dict[str, dict] = {}

    def tune(items, desc):
        res = cache.run([tune_cell(*it) for it in items], desc=desc)
        for key, opt_name, grid, fixed in items:
            r = res[f"tune-{key}"]
            score = tail_losses(r) if key.startswith("np-") else accuracy_scores(r)
            selections[key] = tuning.select(score, grid, reps)
            grids[key] = grid
            chosen[key] = {"optimizer": opt_name, **fixed, **selections[key].point}

    tune([("dp_sgd", "dp_sgd", {"lr": config.lr_sgd_grid, "clip": config.clip_grid},
           {"noise_multiplier": sig}),
          ("np-sgd", "sgd", {"lr": config.np_lr_sgd_grid}, {}),
          ("np-rmsprop", "rmsprop", {"lr": config.np_lr_rmsprop_grid},
           {"eps": config.dp2_eps, "beta": config.beta})],
         "dp2_noisy_adagrad: tune DP-SGD and the non-private premise")
    c1 = chosen["dp_sgd"]["clip"]
    dp2_grid = {"lr": config.dp2_lr_grid, "lr2": config.dp2_lr2_grid, "clip2": config.dp2_clip2_grid}
    na_grid = {"lr": config.na_lr_grid, "clip": config.na_clip_grid, "clip2": config.na_clip2_grid,
               "eps": config.na_eps_grid}
    items = [(f"dp2_rmsprop-s{s}", "dp2_rmsprop", dp2_grid,
              {"s1": s, "clip": c1, "eps": config.dp2_eps, "noise_multiplier": sig, "beta": config.beta})
             for s in config.s_grid]
    items += [(f"noisy_adagrad-k{k}", "noisy_adagrad", na_grid,
               {"k": k, "noise_multiplier": sig, "public_fraction": config.public_fraction})
              for k in config.k_grid]
    tune(items, f"dp2_noisy_adagrad: tune DP² and noisy AdaGrad at σ={sig:g}")

    s_cells = {s: f"dp2_rmsprop-s{s}" for s in config.s_grid}
    k_cells = {k: f"noisy_adagrad-k{k}" for k in config.k_grid}
    s_best, _, _, _ = _best_of(selections, s_cells)
    k_best, _, _, _ = _best_of(selections, k_cells)
    eps_small = min(config.na_eps_grid)
    k_small, pt_small, score_small, _ = _best_of(selections, k_cells, fixed={"eps": eps_small})
    settings = {
        "dp_sgd": chosen["dp_sgd"],
        "dp2_rmsprop": chosen[s_cells[s_best]],
        "noisy_adagrad": chosen[k_cells[k_best]],
        "noisy_adagrad-small_eps": {**chosen[k_cells[k_small]], **pt_small},
    }
    edges = {
        "dp_sgd": _edge_axes(grids["dp_sgd"], settings["dp_sgd"]),
        "dp2_rmsprop": _edge_axes(dp2_grid, settings["dp2_rmsprop"]),
        "noisy_adagrad": _edge_axes(na_grid, settings["noisy_adagrad"]),
        "noisy_adagrad-small_eps": _edge_axes(na_grid, settings["noisy_adagrad-small_eps"],
                                              skip=("eps",)),
    }
    for label, val, grid in (("dp2_rmsprop", s_best, config.s_grid),
                             ("noisy_adagrad", k_best, config.k_grid),
                             ("noisy_adagrad-small_eps", k_small, config.k_grid)):
        # k = 1 and s = 1 are the smallest values there are: not an edge of the grid's making
        if len(grid) > 1 and val in (min(grid), max(grid)) and val != 1:
            edges[label]["s" if label == "dp2_rmsprop" else "k"] = int(val)

    tuning.record(cache, selections, note=(
        "private cells: the paper's rule, the highest mean final training accuracy (scores saved "
        "as −accuracy); np-*: the mean training loss over the second half; "
        "DP² and noisy AdaGrad: then the delay s / subspace dimension k with the lowest chosen "
        "score (the smaller on a tie); noisy_adagrad-small_eps: the best point with ε_a = "
        f"{eps_small:g} over the same cells (score {score_small:.4g})"))
    cache.note("delta", delta_for(config.n))
    cache.note("chosen", settings)
    cache.note("chosen_s", int(s_best))
    cache.note("chosen_k", {"noisy_adagrad": int(k_best), "noisy_adagrad-small_eps": int(k_small)})
    cache.note("edges", edges)

    def eval_cell(label, hp, meta):
        hp = dict(hp)
        opt_name = hp.pop("optimizer")

        def compute(seed):
            opt = dpsim.optimizers.get(opt_name, **hp)
            return dpsim.simulate(problem, opt, trials=config.trials, seed=seed,
                                  record_every=config.record_every, metrics=TEST_METRICS, **common)

        return Cell(label, index[label], compute, meta)

    cells = [eval_cell(label, settings[label],
                       cell_meta(settings[label]["optimizer"], sig,
                                 variant="small_eps" if label.endswith("small_eps") else "tuned"))
             for label in EVAL]
    cells += [eval_cell(label, chosen[label], {"method": label[3:], "sigma": None,
                                               "variant": "nonprivate"})
              for label in NONPRIVATE]
    return cache.run(cells, desc="dp2_noisy_adagrad: evaluate")


def trivial_losses(res) -> np.ndarray:
    """Excess loss of the trivial model per trial: the step-0 record (``w = 0``)."""
    return np.asarray(res.excess_loss[0], dtype=float)


EXPERIMENT = Experiment(
    name="dp2_noisy_adagrad",
    title="DP² vs noisy AdaGrad with a privatized, publicly projected preconditioner on the "
          "balanced bag-of-words task ([DP2] App. C.6, Fig. 12)",
    presets=PRESETS,
    run=run,
    figures=("fig_dp2_noisy_adagrad",),
    module=__name__,
    numerics=2,
)
