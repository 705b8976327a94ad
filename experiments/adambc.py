"""DP-Adam vs DP-AdamBC on dense logistic regression ([ADAMBC]: Tang, Shpilevskiy, Lécuyer,
*DP-AdamBC: Your DP-Adam Is Actually DP-SGD (Unless You Apply Bias Correction)*, AAAI 2024).

Claims checked (figures ``paper_figures/fig_adambc_*.py``):

* ``fig_adambc_moments`` (Fig. 1, Table 2): under DP the private second moment ``v̂^p`` is
  dominated by the noise variance ``Φ = (σC/B)²`` (``E v̂^p = v̂^c + Φ`` with ``Φ ≫ v̂^c``), while
  ``m̂^p`` is centred on the clean ``m̂^c``.
* ``fig_adambc_vs_sgdm`` (Fig. 2, Eq. 3): DP-Adam behaves like DP-SGDM with learning rate
  ``η_SGDM = η_Adam (1−β1)/((1−β1^t)√Φ)``.
* ``fig_adambc_gamma`` (Fig. 5, upper right): the floor ``γ'`` of DP-AdamBC matters.
* ``fig_adambc_bounds`` (Props. 3–4, Tables 3–5): the tail bounds on ``|v̂^corr − v̂^c|`` hold
  against the measured deviation, Prop. 3 being much closer to it than Prop. 4.
* ``fig_adambc_vs_adam`` (Figs. 6, 8; the headline): DP-AdamBC reaches a lower training loss
  than DP-Adam at the same ε.

Design
------
* Problem: :func:`dpsim.problems.logistic_regression`, dense unit-norm features (``d`` small
  enough that every coordinate of the moments can be recorded), data fixed by ``data_seed``.
* Privacy: for each target ``ε`` (at ``δ``) the noise multiplier ``σ`` is calibrated with
  :func:`dpsim.accounting.noise_multiplier` for Poisson sampling at rate ``B/n`` over ``steps``
  steps; DP-Adam, DP-AdamBC and DP-SGDM release the same Gaussian gradient, so they spend the same
  ε.  (``σ`` is computed lazily, only when a cell has to be computed, and recorded in the notes.)
* Tuning (the paper tunes η and γ' per optimizer and ε; we use its rule with the training loss,
  there is no test split): DP-Adam over ``lr_grid_adam`` and DP-AdamBC over
  ``lr_grid_bc × γ'`` (``γ' = ratio·Φ``, ``ratio ∈ gamma_ratios``) in one *tuning* cell each
  (grids folded into the trial axis, ``tune_trials`` trials per setting).  Rule: the lowest mean
  final training loss (:mod:`experiments.tuning`).  The chosen settings are then run in fresh
  *evaluation* cells; the selections are saved in the manifest's notes, and every cell's ε and
  slot (and the γ' sweep's ratios) in its ``meta``.
* Evaluation cells share randomness on purpose (common random numbers → paired comparisons):
  DP-AdamBC and DP-SGDM run with the seed of the DP-Adam evaluation cell, so trial ``r`` of each
  sees the same Poisson batches and the same Gaussian noise draws.
* Eq. 3 (Fig. 2): DP-SGDM (``b_t = β b_{t−1} + g̃_t``, ``w ← w − η b_t``, ``β = β1``) runs with the
  constant ``η_SGDM(t → ∞) = η_Adam (1−β1)/√Φ`` from
  :func:`analysis.concentration.sgdm_equivalent_lr` (``dp_sgdm`` has no per-step learning-rate
  schedule; the exact Eq. 3 schedule differs from the constant only by the factor ``1/(1−β1^t)``,
  i.e. in the first ~``3/(1−β1)`` steps).
* γ' sweep (Fig. 5 upper right): one cell with ``gamma_trials`` fresh trials per γ', each at the
  learning rate that was best for that γ' in the tuning cell (per-trial ``lr`` and ``gamma_prime``).
  The paper's wrong-``Φ'`` sweep (Fig. 5 upper left, Fig. 2 right) needs a ``Φ'`` override that
  ``dp_adam_bc`` does not have: not run.
* Moments (Fig. 1, Table 2) and Props. 3–4 (Tables 3–5): *frozen* runs.  From the final
  parameters of each DP-Adam evaluation trial (``init``), DP-Adam runs ``freeze_steps`` more steps
  with ``lr = 0`` twice with the same seed: once private (``σ``) and once clean (``σ = 0``, clipped
  but noiseless; its ``v`` equals that of the ``dp_adam_noiseless_v`` oracle, and the batches are
  identical because batch sampling and noise use separate streams).  Probes record every
  coordinate ``j`` of Adam's raw ``m`` and ``v`` (``m{j}``, ``v{j}``; the figures apply the bias
  correction ``1/(1−β^t)``), every ``freeze_record_every`` steps.  With the parameters frozen this
  is exactly the setting of Props. 3–4 ("a fixed sequence of parameters and mini-batches"), and
  ``v̂^p − v̂^c − Φ = v̂^corr − v̂^c`` (no floor) is the deviation they bound.  It also stands in for
  the paper's "near end of training" snapshot: the moments are those at the trained point.
* Cells and seeds: for target ``k`` (``ε = epsilons[k]``) cell ``8k + s`` with slot ``s``:
  0 ``tune-adam``, 1 ``tune-adambc``, 2 ``adam``, 3 ``adambc``, 4 ``sgdm-eq3``, 5 ``gamma``,
  6 ``frozen-private``, 7 ``frozen-clean``.  Cell ``i`` runs with
  ``SeedSequence(config.seed, spawn_key=(i,))``, except that slots 3 and 4 use the seed of slot 2
  and slot 7 that of slot 6 (the pairing above).

``run(config, cache)`` returns ``{label: Result}`` with labels ``"eps<ε>-<slot name>"`` (e.g.
``"eps1-adam"``, ``"eps8-frozen-clean"``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpsim.transforms import lookup
import dpsim
from dpsim.analysis.concentration import dp_bias, sgdm_equivalent_lr

from . import tuning
from .pipeline import Cell, Experiment, cell_seed

__all__ = ["Config", "PRESETS", "EXPERIMENT", "run", "SLOTS", "label", "moment_probes"]

SLOTS = ("tune-adam", "tune-adambc", "adam", "adambc", "sgdm-eq3", "gamma", "frozen-private",
         "frozen-clean")
_PAIRED = {"adambc": "adam", "sgdm-eq3": "adam", "frozen-clean": "frozen-private"}


@dataclass(frozen=True)
class Config:
    """Everything the experiment's results depend on (hashed into the cache key)."""

    n: int                                  # training examples
    d: int                                  # dimension (every coordinate is probed)
    batch_size: int                         # expected batch size B (Poisson rate B/n)
    steps: int                              # T of the training runs
    epsilons: tuple[float, ...]             # target ε of each setting (first: the main one)
    lr_grid_adam: tuple[float, ...]         # DP-Adam learning rates tried
    lr_grid_bc: tuple[float, ...]           # DP-AdamBC learning rates tried
    gamma_ratios: tuple[float, ...]         # DP-AdamBC floors tried, γ' = ratio · Φ
    tune_trials: int                        # trials per setting in the tuning cells
    trials: int                             # trials of the evaluation and frozen cells
    gamma_trials: int                       # trials per γ' in the γ' sweep cell
    freeze_steps: int                       # steps of the frozen (lr = 0) moment runs
    freeze_record_every: int                # record interval of the frozen runs
    alphas: tuple[float, ...] = (0.01, 0.05, 0.10)   # tail levels of Props. 3–4 (Tables 3–5)
    clip: float = 1.0                       # C (features have unit norm)
    beta1: float = 0.9
    beta2: float = 0.999
    adam_eps: float = 1e-8                  # DP-Adam's γ (the paper's default)
    delta: float = 1e-5
    sampling: str = "poisson"
    record_every: int | None = None         # evaluation cells (None: ~100 records)
    data_seed: int = 0
    seed: int = 0

    def __post_init__(self):
        for name in ("n", "d", "batch_size", "steps", "tune_trials", "trials", "gamma_trials",
                     "freeze_steps", "freeze_record_every"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {name}={v!r}")
        if self.trials < 2 or self.gamma_trials < 2:
            raise ValueError(f"trials and gamma_trials must be >= 2 (confidence intervals), got "
                             f"trials={self.trials}, gamma_trials={self.gamma_trials}")
        for name in ("epsilons", "lr_grid_adam", "lr_grid_bc", "gamma_ratios"):
            v = getattr(self, name)
            if not v or any((not math.isfinite(x)) or x <= 0 for x in v):
                raise ValueError(f"{name} must be a non-empty tuple of positive numbers, got {name}={v!r}")
        if len(set(self.epsilons)) != len(self.epsilons):
            raise ValueError(f"epsilons must be distinct, got epsilons={self.epsilons!r}")
        if not self.alphas or any(not (0.0 < a < 1.0) for a in self.alphas):
            raise ValueError(f"alphas must lie in (0, 1), got alphas={self.alphas!r}")
        if not (0.0 < self.delta < 1.0):
            raise ValueError(f"delta must be in (0, 1), got delta={self.delta}")
        for name in ("beta1", "beta2"):
            v = getattr(self, name)
            if not (0.0 < v < 1.0):
                raise ValueError(f"{name} must be in (0, 1), got {name}={v}")
        if self.freeze_steps % self.freeze_record_every:
            raise ValueError(f"freeze_steps must be a multiple of freeze_record_every, got "
                             f"freeze_steps={self.freeze_steps}, freeze_record_every={self.freeze_record_every}")
        if self.batch_size > self.n:
            raise ValueError(f"batch_size must be <= n, got batch_size={self.batch_size}, n={self.n}")

    @property
    def sample_rate(self) -> float:
        return self.batch_size / self.n


def _grid(lo: int, hi: int, per_decade: int = 2) -> tuple[float, ...]:
    """``10^k`` for k from ``lo`` to ``hi`` in steps of ``1/per_decade`` (1, 3.16, 10, ...)."""
    return tuple(float(f"{10.0 ** (k / per_decade):.4g}") for k in range(lo * per_decade, hi * per_decade + 1))


PRESETS: dict[str, Config] = {
    # Smoke test only (seconds): no claim is expected to hold at this size.
    "tiny": Config(n=300, d=5, batch_size=20, steps=30, epsilons=(2.0,),
                   lr_grid_adam=(0.01, 0.1), lr_grid_bc=(0.01, 0.1), gamma_ratios=(0.01, 1.0),
                   tune_trials=2, trials=4, gamma_trials=2, freeze_steps=20,
                   freeze_record_every=5, record_every=5),
    # A laptop: about a minute on 2 cores (half of it calibrating σ and training the evaluation
    # cells).  ε = 1 (Φ ≈ 15× the clean v̂) and ε = 8 (Φ ≈ 2×).
    "quick": Config(n=5000, d=50, batch_size=64, steps=1000, epsilons=(1.0, 8.0),
                    lr_grid_adam=_grid(-3, -1), lr_grid_bc=_grid(-4, -1),
                    gamma_ratios=(1e-3, 1e-2, 1e-1, 1.0), tune_trials=3, trials=32,
                    gamma_trials=16, freeze_steps=1000, freeze_record_every=10, record_every=50),
    # The paper's batch size B = 256, ε ∈ {1, 3, 7} and t up to 10⁴ (Tables 3–5).
    "full": Config(n=20000, d=100, batch_size=256, steps=5000, epsilons=(1.0, 3.0, 7.0),
                   lr_grid_adam=_grid(-4, 0), lr_grid_bc=_grid(-5, -1),
                   gamma_ratios=(1e-4, 1e-3, 1e-2, 1e-1, 1.0), tune_trials=6, trials=100,
                   gamma_trials=32, freeze_steps=10000, freeze_record_every=50, record_every=50),
}


def label(epsilon: float, slot: str) -> str:
    """Cell label ``"eps<ε>-<slot>"`` (e.g. ``"eps1-adam"``)."""
    if slot not in SLOTS:
        raise ValueError(f"unknown slot {slot!r}; known: {', '.join(SLOTS)}")
    return f"eps{epsilon:g}-{slot}"


def moment_probes(d: int) -> dict:
    """Probes ``m{j}``, ``v{j}``: coordinate ``j`` of Adam's raw moments (state ``(privatizer,
    AdamState(m, v, count), ...)``), one ``(R,)`` record per coordinate."""
    probes = {}
    for j in range(d):
        probes[f"m{j}"] = lambda state, params, ctx, j=j: lookup(state, "preconditioner").m[:, j]
        probes[f"v{j}"] = lambda state, params, ctx, j=j: lookup(state, "preconditioner").v[:, j]
    return probes


def run(config: Config, cache) -> dict:
    """Tune, evaluate, sweep γ', and record frozen moments per ε; ``{label: Result}``."""
    cfg = config
    prob_kw = dict(n=cfg.n, d=cfg.d, density=1.0, seed=cfg.data_seed)
    built: dict = {}

    def problem():
        if "p" not in built:
            built["p"] = dpsim.problems.logistic_regression(**prob_kw)
        return built["p"]

    sigmas: dict = {}

    def sigma(eps):
        if eps not in sigmas:
            sigmas[eps] = float(dpsim.accounting.noise_multiplier(eps, cfg.delta, cfg.sample_rate,
                                                                  cfg.steps))
        return sigmas[eps]

    def phi(eps):
        return float(dp_bias(sigma(eps), cfg.clip, cfg.batch_size))

    sim = cache.simulate_options  # progress, backend
    train = dict(steps=cfg.steps, batch_size=cfg.batch_size, sampling=cfg.sampling, **sim)
    adam_hp = dict(beta1=cfg.beta1, beta2=cfg.beta2, clip=cfg.clip)
    G = len(cfg.gamma_ratios)

    def index(k, slot):
        return len(SLOTS) * k + SLOTS.index(slot)

    def seed_of(k, slot, own_seed):
        partner = _PAIRED.get(slot)
        return own_seed if partner is None else cell_seed(cfg.seed, index(k, partner))

    def cell(k, slot, compute, **meta):
        eps = cfg.epsilons[k]
        return Cell(label(eps, slot), index(k, slot),
                    lambda seed: compute(seed_of(k, slot, seed)),
                    {"epsilon": float(eps), "slot": slot, **meta})

    # -- tuning ------------------------------------------------------------------------------
    grid_adam = {"lr": cfg.lr_grid_adam}
    grid_bc = {"lr": cfg.lr_grid_bc, "gamma_ratio": cfg.gamma_ratios}

    def tune_adam(k):
        eps = cfg.epsilons[k]
        lrs = tuning.fold(grid_adam, cfg.tune_trials)["lr"]

        def compute(seed):
            opt = dpsim.optimizers.get("dp_adam", lr=lrs, eps=cfg.adam_eps,
                                       noise_multiplier=sigma(eps), **adam_hp)
            return dpsim.simulate(problem(), opt, trials=len(lrs), seed=seed,
                                  record_every=cfg.steps, metrics=("loss",), **train)

        return cell(k, "tune-adam", compute)

    def tune_bc(k):
        eps = cfg.epsilons[k]
        hp = tuning.fold(grid_bc, cfg.tune_trials)

        def compute(seed):
            ph = phi(eps)
            opt = dpsim.optimizers.get(
                "dp_adam_bc", lr=hp["lr"], gamma_prime=[r * ph for r in hp["gamma_ratio"]],
                noise_multiplier=sigma(eps), **adam_hp)
            return dpsim.simulate(problem(), opt, trials=len(hp["lr"]), seed=seed,
                                  record_every=cfg.steps, metrics=("loss",), **train)

        return cell(k, "tune-adambc", compute)

    K = len(cfg.epsilons)
    tuned = cache.run([c for k in range(K) for c in (tune_adam(k), tune_bc(k))],
                      desc="adambc: tune")

    chosen: dict = {}
    selections: dict = {}
    gamma_best_lr: dict = {}
    for k, eps in enumerate(cfg.epsilons):
        sa = tuning.select(tuned[label(eps, "tune-adam")], grid_adam, cfg.tune_trials)
        sb = tuning.select(tuned[label(eps, "tune-adambc")], grid_bc, cfg.tune_trials)
        selections[f"eps{eps:g}-adam"], selections[f"eps{eps:g}-adambc"] = sa, sb
        chosen[k] = {"adam_lr": sa.point["lr"], "adambc_lr": sb.point["lr"],
                     "adambc_gamma_ratio": sb.point["gamma_ratio"]}
        gamma_best_lr[k] = {g: sb.best(gamma_ratio=r)["lr"] for g, r in enumerate(cfg.gamma_ratios)}

    # -- evaluation ----------------------------------------------------------------------------
    rec = dict(record_every=cfg.record_every, metrics=("loss",), **train)

    def eval_adam(k):
        eps = cfg.epsilons[k]

        def compute(seed):
            opt = dpsim.optimizers.get("dp_adam", lr=chosen[k]["adam_lr"], eps=cfg.adam_eps,
                                       noise_multiplier=sigma(eps), **adam_hp)
            return dpsim.simulate(problem(), opt, trials=cfg.trials, seed=seed, **rec)

        return cell(k, "adam", compute)

    def eval_bc(k):
        eps = cfg.epsilons[k]

        def compute(seed):
            opt = dpsim.optimizers.get("dp_adam_bc", lr=chosen[k]["adambc_lr"],
                                       gamma_prime=chosen[k]["adambc_gamma_ratio"] * phi(eps),
                                       noise_multiplier=sigma(eps), **adam_hp)
            return dpsim.simulate(problem(), opt, trials=cfg.trials, seed=seed, **rec)

        return cell(k, "adambc", compute)

    def eval_sgdm(k):
        eps = cfg.epsilons[k]

        def compute(seed):
            lr = float(sgdm_equivalent_lr(chosen[k]["adam_lr"], cfg.beta1, np.inf, phi(eps)))
            opt = dpsim.optimizers.get("dp_sgdm", lr=lr, beta=cfg.beta1, clip=cfg.clip,
                                       noise_multiplier=sigma(eps))
            return dpsim.simulate(problem(), opt, trials=cfg.trials, seed=seed, **rec)

        return cell(k, "sgdm-eq3", compute)

    def gamma_sweep(k):
        eps = cfg.epsilons[k]
        gs = [g for g in range(G) for _ in range(cfg.gamma_trials)]

        def compute(seed):
            ph = phi(eps)
            opt = dpsim.optimizers.get("dp_adam_bc", lr=[gamma_best_lr[k][g] for g in gs],
                                       gamma_prime=[cfg.gamma_ratios[g] * ph for g in gs],
                                       noise_multiplier=sigma(eps), **adam_hp)
            return dpsim.simulate(problem(), opt, trials=len(gs), seed=seed, **rec)

        return cell(k, "gamma", compute, gamma_ratios=list(cfg.gamma_ratios),
                    trials_per_ratio=cfg.gamma_trials)

    evals = cache.run([c for k in range(K) for c in (eval_adam(k), eval_bc(k), eval_sgdm(k),
                                                      gamma_sweep(k))],
                      desc="adambc: evaluate")

    # -- frozen moment runs ----------------------------------------------------------------------
    probes = moment_probes(cfg.d)

    def frozen(k, slot):
        eps = cfg.epsilons[k]

        def compute(seed):
            init = evals[label(eps, "adam")].params
            s = sigma(eps) if slot == "frozen-private" else 0.0
            opt = dpsim.optimizers.get("dp_adam", lr=0.0, eps=cfg.adam_eps, noise_multiplier=s,
                                       **adam_hp)
            return dpsim.simulate(problem(), opt, steps=cfg.freeze_steps,
                                  batch_size=cfg.batch_size, sampling=cfg.sampling,
                                  trials=cfg.trials, seed=seed, init=init,
                                  record_every=cfg.freeze_record_every, metrics=(),
                                  probes=probes, **sim)

        return cell(k, slot, compute)

    frozen_res = cache.run([frozen(k, s) for k in range(K) for s in ("frozen-private", "frozen-clean")],
                           desc="adambc: frozen moments")

    # -- notes ---------------------------------------------------------------------------------
    info = {}
    for k, eps in enumerate(cfg.epsilons):
        s = float(evals[label(eps, "adam")].config["hyperparameters"]["noise_multiplier"])
        ph = float(dp_bias(s, cfg.clip, cfg.batch_size))
        info[f"eps{eps:g}"] = dict(
            noise_multiplier=s, phi=ph, **chosen[k],
            adambc_gamma_prime=chosen[k]["adambc_gamma_ratio"] * ph,
            sgdm_lr_eq3=float(sgdm_equivalent_lr(chosen[k]["adam_lr"], cfg.beta1, np.inf, ph)),
            gamma_sweep_lr={f"{cfg.gamma_ratios[g]:g}": gamma_best_lr[k][g] for g in range(G)},
        )
    tuning.record(cache, selections, note="DP-Adam: lr; DP-AdamBC: lr x gamma', gamma' = "
                                          "gamma_ratio * Phi")
    cache.note("settings", info)
    cache.note("pairing", "adambc and sgdm-eq3 use the seed of adam; frozen-clean that of "
                          "frozen-private (same batches and noise draws per trial)")
    cache.note("eq3", "dp_sgdm with the constant t -> inf learning rate of Eq. 3 "
                      "(no per-step schedule in dp_sgdm)")
    cache.note("skipped", "wrong-Phi' sweep (Fig. 5 upper left, Fig. 2 right): dp_adam_bc has no "
                          "Phi' override")

    out = {}
    for k, eps in enumerate(cfg.epsilons):
        for slot in SLOTS:
            lab = label(eps, slot)
            out[lab] = {**tuned, **evals, **frozen_res}[lab]
    return out


EXPERIMENT = Experiment(
    name="adambc",
    title="DP-Adam vs DP-AdamBC ([ADAMBC]): moments, Eq. 3, γ', Props. 3–4, final loss",
    presets=PRESETS,
    run=run,
    figures=("fig_adambc_moments", "fig_adambc_vs_sgdm", "fig_adambc_gamma",
             "fig_adambc_bounds", "fig_adambc_vs_adam"),
    module=__name__,
)
