"""SGD vs DP-SGD at several noise multipliers on dense and sparse logistic regression.

Claim checked (figure ``paper_figures/fig_dpsgd_logistic.py``): the excess training loss of DP-SGD
grows with the noise multiplier σ, and DP-SGD approaches SGD as σ → 0 (Abadi et al., *Deep Learning
with Differential Privacy*, CCS 2016: the privacy/utility trade-off of the Gaussian noise).

Design
------
* Problems: :func:`dpsim.problems.logistic_regression` with dense unit-norm features and with sparse
  bag-of-words features (``density`` ∈ [0.01, 0.05]); the data are fixed by ``data_seed`` and
  shared by every setting, so trials differ only in the algorithm's randomness (batches, noise).
* Settings: ``sgd`` and ``dp_sgd`` (clip ``C``, Poisson sampling at rate ``b/n``) for each σ.
* Learning rate: chosen per (problem, setting) over ``lr_grid`` by the rule of
  :mod:`experiments.tuning` (lowest mean final training loss).  The grid is folded into the trial
  axis of one *tuning* cell (``tune_trials`` trials per learning rate, one ``simulate`` call); the
  chosen rate is then run in a separate *evaluation* cell with ``trials`` fresh trials (one
  ``simulate`` call), so the reported curves are not biased by the selection (winner's curse).
  The selections (chosen rate, every rate's score, choices at the edge of the grid) are saved in
  the manifest's ``notes``, and every evaluation cell's problem, setting and σ in its ``meta``.
* Cells and seeds: for problem ``p`` and setting ``s`` (``S`` settings), ``base = p·S + s``; the
  tuning cell has index ``2·base`` and the evaluation cell ``2·base + 1``; cell ``i`` runs with
  ``SeedSequence(config.seed, spawn_key=(i,))``.

``run(config, cache)`` returns the evaluation results, labelled ``"<problem>-<setting>"`` with
problem ``dense``/``sparse`` and setting ``sgd`` or ``dpsgd-s<σ>`` (e.g. ``"sparse-dpsgd-s0.5"``).
"""

from __future__ import annotations

from dataclasses import dataclass

import dpsim

from . import tuning
from .pipeline import Cell, Experiment, require_positive_ints

__all__ = ["Config", "PRESETS", "EXPERIMENT", "run", "settings", "problem_specs"]


@dataclass(frozen=True)
class Config:
    """Everything the experiment's results depend on (hashed into the cache key)."""

    n: int                                  # training examples (both problems)
    d_dense: int                            # dimension of the dense problem
    d_sparse: int                           # dimension of the sparse problem
    density: float                          # fraction of nonzero features per sparse row
    steps: int                              # T
    batch_size: int                         # expected batch size b (Poisson rate b/n)
    noise_multipliers: tuple[float, ...]    # σ of each DP-SGD setting
    lr_grid: tuple[float, ...]              # learning rates tried per setting
    tune_trials: int                        # trials per learning rate in the tuning cell
    trials: int                             # trials of the evaluation cell (chosen lr)
    clip: float = 1.0                       # C (features have unit norm, so ||∇f_i|| ≲ 1)
    sampling: str = "poisson"
    record_every: int | None = None         # evaluation cells (None: ~100 records)
    data_seed: int = 0                      # seed of the problem data
    seed: int = 0                           # sweep seed; cell seeds derive from it

    def __post_init__(self):
        if not (0.0 < self.density < 1.0):
            raise ValueError(f"density must be in (0, 1) for the sparse problem, got density={self.density}")
        if not self.noise_multipliers or any(s <= 0 for s in self.noise_multipliers):
            raise ValueError(f"noise_multipliers must be positive, got {self.noise_multipliers!r}")
        if not self.lr_grid or any(lr <= 0 for lr in self.lr_grid):
            raise ValueError(f"lr_grid must be positive, got {self.lr_grid!r}")
        require_positive_ints(self,
            ("n", "d_dense", "d_sparse", "steps", "batch_size", "tune_trials", "trials"))

    @classmethod
    def preset(cls, scale: str) -> "Config":
        if scale not in PRESETS:
            raise ValueError(f"unknown scale {scale!r}; known: {', '.join(PRESETS)}")
        return PRESETS[scale]


def _pow2(lo: int, hi: int) -> tuple[float, ...]:
    return tuple(float(2.0 ** k) for k in range(lo, hi + 1))


PRESETS: dict[str, Config] = {
    # Smoke test only (seconds): the claim is not expected to hold at this size.
    "tiny": Config(n=200, d_dense=5, d_sparse=50, density=0.05, steps=20, batch_size=20,
                   noise_multipliers=(1.0, 4.0), lr_grid=(1.0, 4.0), tune_trials=2, trials=4,
                   record_every=5),
    # A laptop, well under a minute.
    "quick": Config(n=2000, d_dense=20, d_sparse=500, density=0.02, steps=500, batch_size=50,
                    noise_multipliers=(0.5, 1.0, 2.0, 4.0), lr_grid=_pow2(-3, 5),
                    tune_trials=4, trials=32, record_every=10),
    # The full run (about 20 minutes on 2 CPU cores; most of it in the evaluation records).
    "full": Config(n=20000, d_dense=50, d_sparse=5000, density=0.01, steps=3000, batch_size=200,
                   noise_multipliers=(0.5, 1.0, 2.0, 4.0), lr_grid=_pow2(-4, 6),
                   tune_trials=8, trials=100, record_every=30),
}


def problem_specs(config: Config) -> list[tuple[str, dict]]:
    """``[(name, logistic_regression kwargs)]`` for the dense and the sparse problem."""
    return [
        ("dense", dict(n=config.n, d=config.d_dense, density=1.0, seed=config.data_seed)),
        ("sparse", dict(n=config.n, d=config.d_sparse, density=config.density, seed=config.data_seed)),
    ]


def settings(config: Config) -> list[tuple[str, str, dict]]:
    """``[(label, optimizer name, fixed hyperparameters)]``: SGD, then DP-SGD per σ."""
    out = [("sgd", "sgd", {})]
    for s in config.noise_multipliers:
        out.append((f"dpsgd-s{s:g}", "dp_sgd", {"clip": config.clip, "noise_multiplier": float(s)}))
    return out


def run(config: Config, cache) -> dict:
    """Tune the learning rate per setting, then evaluate the chosen one; ``{label: Result}``."""
    # Built once, here: every cell's closure shares them (one copy per Dask worker).
    built = {name: dpsim.problems.logistic_regression(**kw) for name, kw in problem_specs(config)}

    def problem(name, kwargs):
        return built[name]

    common = dict(steps=config.steps, batch_size=config.batch_size, sampling=config.sampling,
                  **cache.simulate_options)
    specs = problem_specs(config)
    sets = settings(config)
    S = len(sets)

    def tune_cell(p, pname, pkw, s, slabel, opt_name, hp):
        lrs = tuning.fold({"lr": config.lr_grid}, config.tune_trials)["lr"]

        def compute(seed):
            opt = dpsim.optimizers.get(opt_name, lr=lrs, **hp)
            # Only the final loss matters for the rule: record steps 0 and T only.
            return dpsim.simulate(problem(pname, pkw), opt, trials=len(lrs), seed=seed,
                                  record_every=max(config.steps, 1), **common)

        return Cell(f"{pname}-tune-{slabel}", 2 * (p * S + s), compute)

    def eval_cell(p, pname, pkw, s, slabel, opt_name, hp, lr):
        def compute(seed):
            opt = dpsim.optimizers.get(opt_name, lr=lr, **hp)
            return dpsim.simulate(problem(pname, pkw), opt, trials=config.trials, seed=seed,
                                  record_every=config.record_every, **common)

        meta = {"problem": pname, "setting": slabel, "optimizer": opt_name,
                "noise_multiplier": float(hp.get("noise_multiplier", 0.0))}
        return Cell(f"{pname}-{slabel}", 2 * (p * S + s) + 1, compute, meta)

    grid = [(p, pname, pkw, s, slabel, opt_name, hp)
            for p, (pname, pkw) in enumerate(specs)
            for s, (slabel, opt_name, hp) in enumerate(sets)]
    tuned = cache.run([tune_cell(*g) for g in grid], desc="dpsgd_logistic: tune lr")

    chosen = {f"{g[1]}-{g[4]}": tuning.select(tuned[f"{g[1]}-tune-{g[4]}"], {"lr": config.lr_grid},
                                              config.tune_trials) for g in grid}
    tuning.record(cache, chosen)

    return cache.run([eval_cell(*g, chosen[f"{g[1]}-{g[4]}"].point["lr"]) for g in grid],
                     desc="dpsgd_logistic: evaluate")


EXPERIMENT = Experiment(
    name="dpsgd_logistic",
    title="SGD vs DP-SGD (σ sweep) on dense and sparse logistic regression",
    presets=PRESETS,
    run=run,
    figures=("fig_dpsgd_logistic",),
    module=__name__,
)
