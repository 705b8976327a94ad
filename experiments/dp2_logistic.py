"""DP² (delayed preconditioners) on synthetic sparse logistic regression standing in for IMDB.

Source: Li, Zaheer, Liu, Reddi, McMahan, Smith, *Differentially Private Adaptive Optimization with
Delayed Preconditioners* (ICLR 2023) — [DP2] — §3.1 (Fig. 2), §4.1 (Fig. 3), §5.1 (Figs. 4–6),
§5.2 (Table 1), §5.3 / App. C.5 (Table 4), App. C.3 (DP²-AdaGrad).

Claims checked (one figure script each, ``paper_figures/fig_dp2_*.py``):

* Premise (``fig_dp2_premise``) — non-private RMSProp beats non-private SGD at the run length;
  when it does not, every comparison below is "setting does not test the claim".
* Fig. 1 (``fig_dp2_stability``) — preconditioner values do not change drastically during
  optimization, and DP²'s delayed preconditioner moves less than DP-RMSProp's noisy one.
* Fig. 2 — non-private RMSProp with delayed preconditioners reaches about the training loss of
  plain RMSProp (``delayed_rmsprop`` vs ``rmsprop``; SGD shown for reference).
* Fig. 3 — ``h(s)`` (§4.1) is small for every delay and increases with ``s`` (App. A.2:
  ``h(s) ≲ c1 s + c2``; fitted with :func:`analysis.delay.fit_h`).
* Fig. 4 — at a fixed privacy budget DP²-RMSProp converges faster / further than DP-SGD and
  vanilla DP-RMSProp (learning curves).
* Fig. 5 — DP² is better than both baselines at every ε of a sweep (final loss vs ε).
* Fig. 6 — too small or too large a delay ``s`` is worse than a moderate one.
* Table 4 — DP² beats ablation variant 1 (``dp2_extra_query``, which spends *more* ε at the
  same σ: its ε is reported) and variant 2 (``dp2_noise_first``).
* App. C.3 — DP²-AdaGrad beats DP-AdaGrad; Fig. 9 (left) — and at every ε of the sweep.
* Table 1 — DP² is comparable to AdaDPS, which uses 1% public data (``public_fraction=0.01``).

Design
------
* Problem: :func:`dpsim.problems.logistic_regression` with sparse bag-of-words features
  (``density < 1``: Zipf column popularity, log counts, unit-norm rows), heavy-tailed (Zipf
  exponent ``zipf = 2`` at quick and full), ``signal`` and ``reg`` chosen so that adaptivity
  matters without privacy (weak regularization, a strong planted model), over 40 (quick) or the
  paper's 100 (full) epochs; the premise figure shows whether it does.  Fixed by ``data_seed`` and shared by every setting.
  The paper reports *test accuracy* on IMDB; dpsim reports the *training* objective (the excess
  loss ``F(w) − F*``, log scale) — the metric the paper tunes on.
  ``col_scale = a > 0`` (full) scales column ``j`` by ``(j+1)^{-a}`` with the labels of the
  unscaled features (:func:`dpsim.problems.logistic_regression`): rare words get small features
  and large weights, coordinate scales spread over orders of magnitude, and per-coordinate step
  sizes pay.  Without it, at IMDB's sizes and 100 epochs, SGD catches up with RMSProp (the first
  full run: RMSProp/SGD 0.81, not significant) and the premise fails.
* Privacy: Poisson sampling at ``b/n``; ``δ = 10^{-k}`` with the smallest ``k`` such that
  ``10^{-k} ≤ 1/n`` (the paper's rule, §5); ε of each run from its declared releases
  (``Result.epsilon``, PLD accountant).  Main comparisons at noise multiplier ``sigma`` (the paper's
  IMDB setting is σ = 1, b = 64); the ε sweep re-runs DP-SGD, DP-RMSProp and DP² at
  ``sweep_sigmas``.
* Hyperparameters, by the paper's rule (best *training* metric: lowest mean final training loss
  over ``tune_trials`` ≥ 3 trials per grid point, :mod:`experiments.tuning`), each grid folded
  into the trial axis of one tuning cell per (method, σ[, s]); the chosen setting is then run with
  ``trials`` fresh trials in an evaluation cell, on seeds never used for tuning (no winner's
  curse).  The non-private cells are scored on each trial's mean training loss over the recorded
  steps of the second half (:func:`tail_losses`), so that the delayed schedule's sawtooth cannot
  win by ending on a good phase.  Grids (the paper's are in App. C.2; ours are subsets, widened
  where a first run's winner sat on an edge; the edges are reported by every figure and a verdict
  whose tuned value sits on one is downgraded to inconclusive):

  ===================  ============================================================================
  ``sgd``              lr ∈ ``lr_sgd_grid``
  ``rmsprop``          lr ∈ ``lr_adaptive_grid``, ε_a = ``eps_grid[0]``
  ``delayed_rmsprop``  lr (SGD steps) ∈ ``lr_sgd_grid`` × lr2 (RMSProp steps) ∈ ``lr_adaptive_grid``,
                       s = ``s_nonprivate``
  ``dp_sgd``           lr ∈ ``lr_sgd_grid`` × clip ∈ ``clip_grid``
  ``dp_rmsprop``       lr ∈ ``lr_adaptive_grid`` × clip ∈ ``clip_grid`` × ε_a ∈ ``eps_grid``
  ``dp_adagrad``       lr ∈ ``lr_adagrad_grid`` × clip ∈ ``clip_grid`` × ε_a ∈ ``eps_grid``
  ``dp2_rmsprop``      lr ∈ ``dp2_lr_grid`` × lr2 ∈ ``dp2_lr2_grid`` × clip2 ∈ ``clip2_grid`` ×
                       ε_a ∈ ``eps_grid``, one cell per s ∈ ``s_grid``; clip (SGD steps) = DP-SGD's
  ``dp2_extra_query``  as ``dp2_rmsprop``, s ∈ ``s_variants``
  ``dp2_noise_first``  lr × lr2 × ε_a as ``dp2_rmsprop``, one clip for both phases = DP-SGD's,
                       s ∈ ``s_variants``
  ``dp2_adagrad``      as ``dp2_rmsprop`` with lr2 ∈ ``lr_adagrad_grid``, clip2 ∈
                       ``dp2_adagrad_clip2_grid``, s ∈ ``s_variants``
  ``adadps``           lr ∈ ``lr_adaptive_grid`` × clip ∈ ``clip2_grid``, ε_a = ``eps_grid[0]``,
                       ``public_fraction`` public split (not private; ε covers the private part)
  ===================  ============================================================================

  ``s`` is shared by all trials of a run (the phase schedule), so each ``s`` is its own cell; the
  DP² setting with the lowest tuned loss over ``s_grid`` is the "DP²" of Figs. 4–5.  The ε sweep
  (DP-SGD, DP-RMSProp, DP², DP-AdaGrad, DP²-AdaGrad: Figs. 5 and 9) re-tunes the learning rates
  (lr; only the adaptive-phase lr2 for DP²) at each σ and keeps clip, ε_a, s and DP²'s SGD-phase
  lr from the main σ.  The selections (:mod:`experiments.tuning`: choice, every grid point's score,
  choices on the edge of a grid) are saved in the manifest's ``notes``, and each evaluation cell's
  method, σ, delay and kind in its ``meta`` (:func:`cell_meta`), which the figures read.
* Fig. 6: one evaluation cell per ``s ∈ s_grid`` at the setting tuned for that ``s``.
* ``h(s)`` (Fig. 3): one cell per ``s ∈ s_grid`` at DP²'s chosen setting with only ``s`` changed
  (``h`` depends on ε_a, the clip and the step sizes, so they are held fixed across ``s``), run
  through :func:`analysis.delay.record_h_traces` (every step recorded, clean minibatch gradients
  traced).
* Fig. 1: ``stab-<method>`` cells run non-private RMSProp, DP-RMSProp and DP² at their tuned
  settings with :func:`stability_probes` recorded once per epoch.
* Cells and seeds: every cell label is enumerated up front from the config (:func:`cell_labels`),
  and cell ``i`` of that list runs with ``SeedSequence(config.seed, spawn_key=(i,))``.

``run(config, cache)`` returns the evaluation results, labelled ``np-<method>`` (non-private),
``sig<σ>-<method>`` (private at σ; ``sig<σ>-dp2_rmsprop`` is DP² at its tuned ``s``) and
``sig<σ>-dp2_rmsprop-s<s>`` (DP² at each delay, tuned per delay), ``sig<σ>-dp2_rmsprop-s<s>-h``
(DP² at each delay with the main setting, ``h(s)`` traces) and ``clip-<method>``
(diagnostic: DP-SGD and DP² with their clipping but **no noise**, σ = 0, tuned the same way, DP²
at the main σ's delay and SGD-phase clip) — it separates the effect of per-example clipping of
preconditioned gradients from that of the noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

import dpsim
from dpsim.analysis import delay as _delay

from . import tuning
from .pipeline import (Cell, Experiment, require_nonnegative_finite, require_positive_grids,
                       require_positive_ints)

__all__ = ["Config", "PRESETS", "EXPERIMENT", "run", "cell_labels", "delta_for",
           "sigma_tag", "cell_meta"]


@dataclass(frozen=True)
class Config:
    """Everything the experiment's results depend on (hashed into the cache key)."""

    n: int                                   # training examples
    d: int                                   # features (vocabulary size)
    density: float                           # fraction of nonzero features per row
    steps: int                               # T
    batch_size: int                          # expected batch size b (Poisson rate b/n)
    sigma: float                             # noise multiplier of the main comparisons
    sweep_sigmas: tuple[float, ...]          # noise multipliers of the ε sweep (Fig. 5)
    s_grid: tuple[int, ...]                  # delays of DP²-RMSProp (Figs. 3, 6; tuning)
    s_variants: tuple[int, ...]              # delays tried for the ablations and DP²-AdaGrad
    s_nonprivate: int                        # delay of non-private delayed RMSProp (Fig. 2)
    lr_sgd_grid: tuple[float, ...]           # SGD-type learning rates
    lr_adaptive_grid: tuple[float, ...]      # RMSProp-type learning rates (also lr2 of DP²)
    lr_adagrad_grid: tuple[float, ...]       # AdaGrad-type learning rates
    dp2_lr_grid: tuple[float, ...]           # DP² learning rate of the SGD steps
    clip_grid: tuple[float, ...]             # clip of raw per-example gradients
    clip2_grid: tuple[float, ...]            # clip of preconditioned per-example gradients
    eps_grid: tuple[float, ...]              # adaptivity ε_a (the first is used where not tuned)
    tune_trials: int                         # trials per grid point in tuning cells
    trials: int                              # trials of each evaluation cell
    record_every: int                        # evaluation cells (h(s) cells record every step)
    np_trials: int | None = None             # trials of the non-private evaluation cells (None: trials)
    dp2_lr2_grid: tuple[float, ...] | None = None  # lr2 of DP² (RMSProp steps); None: lr_adaptive_grid
    dp2_adagrad_clip2_grid: tuple[float, ...] | None = None  # C₂ of DP²-AdaGrad; None: clip2_grid
    tune_records: int = 8                    # records of a non-private tuning cell (tail average)
    stability_trials: int = 4                # trials of the preconditioner-stability cells (Fig. 1)
    zipf: float = 1.0                        # Zipf exponent of the column popularity
    signal: float = 16.0                     # scale of the planted model
    reg: float = 1e-5                        # L2 regularization
    col_scale: float = 0.0                   # column j scaled by (j+1)^-col_scale (0: off)
    public_fraction: float = 0.01            # AdaDPS public split (Table 1: 1%)
    beta: float = 0.9                        # RMSProp β
    sampling: str = "poisson"
    data_seed: int = 0
    seed: int = 0

    def __post_init__(self):
        require_positive_ints(self,
            ("n", "d", "steps", "batch_size", "tune_trials", "trials", "record_every",
             "s_nonprivate", "tune_records", "stability_trials"))
        if not (0.0 < self.density < 1.0):
            raise ValueError(f"density must be in (0, 1) (sparse features), got density={self.density}")
        if self.np_trials is not None and (isinstance(self.np_trials, bool)
                                           or not isinstance(self.np_trials, int) or self.np_trials < 1):
            raise ValueError("np_trials must be a positive integer or None, "
                             f"got np_trials={self.np_trials!r}")
        if self.sigma <= 0 or self.sigma not in self.sweep_sigmas:
            raise ValueError(f"sigma must be positive and one of sweep_sigmas, got sigma={self.sigma}, "
                             f"sweep_sigmas={self.sweep_sigmas!r}")
        for name in ("s_grid", "s_variants"):
            v = getattr(self, name)
            if not v or any(not isinstance(s, int) or s < 1 or s >= self.steps for s in v):
                raise ValueError(f"{name} must be positive integers below steps={self.steps}, "
                                 f"got {name}={v!r}")
        require_nonnegative_finite(self, ("col_scale",))
        if self.tune_records > self.steps:
            raise ValueError(f"tune_records must be at most steps={self.steps}, "
                             f"got tune_records={self.tune_records}")
        require_positive_grids(self,
            ("sweep_sigmas", "lr_sgd_grid", "lr_adaptive_grid", "lr_adagrad_grid", "dp2_lr_grid",
             "clip_grid", "clip2_grid", "eps_grid", "dp2_lr2_grid", "dp2_adagrad_clip2_grid"),
            optional=("dp2_lr2_grid", "dp2_adagrad_clip2_grid"))


def _g(*xs):
    return tuple(float(x) for x in xs)


PRESETS: dict[str, Config] = {
    # Smoke test only (seconds): the claims are not expected to hold at this size.
    "tiny": Config(n=400, d=60, density=0.1, steps=40, batch_size=16, sigma=1.0,
                   sweep_sigmas=_g(1.0, 2.0), s_grid=(4, 10), s_variants=(4,), s_nonprivate=5,
                   lr_sgd_grid=_g(1, 10), lr_adaptive_grid=_g(0.01, 0.1), lr_adagrad_grid=_g(0.1, 1),
                   dp2_lr_grid=_g(3), clip_grid=_g(0.5), clip2_grid=_g(1, 10), eps_grid=_g(1e-3),
                   tune_trials=1, trials=3, record_every=5, zipf=2.0, col_scale=1.0,
                   tune_records=4, stability_trials=2),
    # A laptop (about 2 CPU-minutes).  Heavy-tailed features (Zipf exponent 2), 40 epochs
    # (T = 1560 at b = 64, n = 2500), where non-private RMSProp clearly beats SGD (the premise);
    # DP²'s adaptive-phase clip C₂ from 50 to 1000 (the paper tuned 5 and tried ≥ 10; smaller C₂
    # never won here: C₂ = 10 scored 0.29–0.33 against 0.26 at 200), 3 tuning trials
    # per grid point; delays s ≈ 0.125, 0.5, 2 and 4 epochs (4: the chosen s sat on 2, the top).
    # ε_a is not tuned at this scale (cost).
    "quick": Config(n=2500, d=1000, density=0.02, zipf=2.0, steps=1560, batch_size=64, sigma=1.0,
                    sweep_sigmas=_g(0.7, 1.0, 2.0), s_grid=(5, 20, 78, 156),
                    s_variants=(20,), s_nonprivate=39,
                    lr_sgd_grid=_g(0.3, 1, 3, 10, 30, 100),
                    lr_adaptive_grid=_g(0.01, 0.03, 0.1, 0.3, 1),
                    lr_adagrad_grid=_g(0.03, 0.1, 0.3, 1, 3), dp2_lr_grid=_g(3, 10, 30),
                    dp2_lr2_grid=_g(0.003, 0.01, 0.03),
                    clip_grid=_g(0.1, 0.25, 1.0), clip2_grid=_g(50, 200, 1000),
                    dp2_adagrad_clip2_grid=_g(10, 50, 200), eps_grid=_g(1e-3),
                    tune_trials=3, trials=8, record_every=39, np_trials=16, tune_records=8,
                    stability_trials=4),
    # IMDB's sizes (n = 25,000 reviews, 10⁴-word vocabulary, b = 64, δ = 1e-5) and the paper's
    # 100 epochs (T = 39,000), heavy-tailed features with column scales (j+1)^-1 (col_scale = 1):
    # the first full run, on unscaled features (gallery of 2026-11-25), failed the premise
    # (non-private RMSProp/SGD 0.81, not significant).  With col_scale = 1, probes (2 trials per
    # point) gave non-private excess losses RMSProp 5.4e-4 (η 0.01) vs SGD 4.1e-3 (η 3): ratio
    # 0.13; at σ = 1 DP-SGD 0.026 (η 0.03, C 1), DP-RMSProp 0.026 (η 0.001, C 1), DP² 0.027 (η 0.03,
    # η₂ 3e-4, C₂ 0.5, s 195-780; C₂ ≥ 2 and η₂ ≥ 1e-3 worse).  The grids are centred on those
    # values, one decade or more each way where it was cheap (C₂ from 0.1 to the paper's 10),
    # s ≈ 0.1, 0.5, 2 and 10 epochs; ε_a = 1e-3 only (cost: each ε_a doubles every adaptive
    # tuning cell); 3 tuning trials per grid point, 5 fresh evaluation trials.  Estimated ≈ 1,600
    # trials × 39,000 steps at ≈ 0.13 ms (private) / 0.07 ms (non-private) per trial-step on
    # one thread ≈ 2.2 CPU-hours; run once (docs/gallery, 2026-11-25): 2.69 CPU-hours, 1.82 h
    # wall on 2 workers beside other work.  Premise held (RMSProp/SGD 0.22); every private
    # method ended on one noise floor (≈ 0.026) and DP²'s tuned C₂ = 0.1 and η₂ = 1e-4 sat on
    # the low edges (lower values silence its adaptive phase: DP² → DP-SGD).
    "full": Config(n=25000, d=10000, density=0.013, zipf=2.0, col_scale=1.0, steps=39000,
                   batch_size=64, sigma=1.0, sweep_sigmas=_g(0.6, 1.0, 2.0),
                   s_grid=(39, 195, 780, 3900), s_variants=(390,), s_nonprivate=390,
                   lr_sgd_grid=_g(0.01, 0.03, 0.1, 0.3, 1, 3, 10),
                   lr_adaptive_grid=_g(0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1),
                   lr_adagrad_grid=_g(0.01, 0.03, 0.1, 0.3, 1), dp2_lr_grid=_g(0.01, 0.03, 0.1),
                   dp2_lr2_grid=_g(0.0001, 0.0003, 0.001),
                   clip_grid=_g(0.5, 1, 2), clip2_grid=_g(0.1, 0.5, 2, 10),
                   dp2_adagrad_clip2_grid=_g(0.5, 2, 10),
                   eps_grid=_g(1e-3), tune_trials=3, trials=5, record_every=390,
                   np_trials=10, tune_records=10, stability_trials=5),
}


# ------------------------------------------------------------------------------------------------
# Labels


def sigma_tag(sigma: float) -> str:
    return f"sig{float(sigma):g}"


def cell_meta(method: str, sigma: float | None, *, s: int | None = None, h: bool = False,
              stability: bool = False) -> dict:
    """The metadata saved with an evaluation cell: ``private`` (False for the ``np-`` cells),
    ``sigma`` (``None`` non-private, ``0.0`` for the clipping-only ``clip-`` diagnostic),
    ``method``, the delay ``s`` of the per-delay DP² cells, ``h`` (the h(s) trace cells) and
    ``stability`` (the preconditioner-stability cells of Fig. 1; key absent when False, so older
    manifests read the same)."""
    out = {"private": sigma is not None, "sigma": None if sigma is None else float(sigma),
           "method": method, "s": None if s is None else int(s), "h": bool(h)}
    if stability:
        out["stability"] = True
    return out


def tail_losses(res, start: float = 0.5) -> np.ndarray:
    """Per trial, the mean training loss over the recorded steps ``t ≥ start·T`` (non-finite →
    ``+inf``): the tuning score of the non-private cells.  A run whose loss spikes in every SGD
    phase (the delayed schedule at too large an SGD step size) scores by its path, not by the
    phase it happens to end on."""
    steps = np.asarray(res.steps)
    sel = steps >= start * steps[-1]
    loss = np.asarray(res.loss, dtype=float)[sel]
    out = loss.mean(axis=0)
    return np.where(np.isfinite(out), out, np.inf)


def _preconditioner(state, ctx, eps):
    """``D = √v + ε_a`` of the piece named ``"preconditioner"`` (``(R, d)``, host NumPy)."""
    from dpsim.transforms import lookup

    v = np.asarray(lookup(state, "preconditioner").v, dtype=float)
    return np.sqrt(np.maximum(v, 0.0)) + float(eps)


def stability_probes(eps: float) -> dict:
    """Probes of the preconditioner ``D`` at each record step ([DP2] Fig. 1): ``pc_q10``, ``pc_q50``,
    ``pc_q90`` — the 10/50/90% quantiles of ``log10 D`` over the coordinates — and ``pc_change``,
    the relative ℓ1 change ``‖D_t − D_prev‖₁ / ‖D_prev‖₁`` since the previous record (NaN at the
    first).  The probes share the previous ``D`` through a closure, exposed to checkpoints as their
    ``probe_state`` (a resumed cell restores it): one set per run."""
    memo: dict = {}

    def quantiles(state, ctx):
        t = ctx.t
        if memo.get("t") != t:
            D = _preconditioner(state, ctx, eps)
            prev = memo.get("D")
            change = (np.full(D.shape[0], np.nan) if prev is None else
                      np.abs(D - prev).sum(axis=1) / np.abs(prev).sum(axis=1))
            memo.update(t=t, D=D, q=np.quantile(np.log10(D), (0.1, 0.5, 0.9), axis=1),
                        change=change)
        return memo

    probes = {"pc_q10": lambda st, w, ctx: quantiles(st, ctx)["q"][0],
              "pc_q50": lambda st, w, ctx: quantiles(st, ctx)["q"][1],
              "pc_q90": lambda st, w, ctx: quantiles(st, ctx)["q"][2],
              "pc_change": lambda st, w, ctx: quantiles(st, ctx)["change"]}
    for fn in probes.values():  # the memory a checkpoint saves and restores (dpsim.checkpoint)
        fn.probe_state = memo
    return probes


def stability_cell(label, index, problem, hp, meta, *, steps, batch_size, trials, every, sampling,
                   options):
    """A cell running ``hp`` (tuned setting with ``"optimizer"``) with :func:`stability_probes`
    recorded every ``every`` steps (one epoch)."""
    hp = dict(hp)
    opt_name = hp.pop("optimizer")

    def compute(seed):
        opt = dpsim.optimizers.get(opt_name, **hp)
        return dpsim.simulate(problem, opt, steps=steps, batch_size=batch_size, trials=trials,
                              seed=seed, sampling=sampling, record_every=every, metrics=("loss",),
                              probes=stability_probes(hp.get("eps", 1e-8)), **options)

    return Cell(label, index, compute, meta)


PROBLEM_FIELDS = ("n", "d", "density", "zipf", "signal", "reg", "col_scale", "data_seed")


def problem_fields(scale: str) -> dict:
    """The fields of this experiment's preset of ``scale`` that define its problem
    (``PROBLEM_FIELDS``): the experiments that run on the same problem (``dp2_compute``,
    ``dp2_noisy_adagrad``) take them from here."""
    c = PRESETS[scale]
    return {f: getattr(c, f) for f in PROBLEM_FIELDS}


def delta_for(n: int) -> float:
    """The paper's δ (§5): ``10^{-k}`` with the smallest integer ``k`` such that ``10^{-k} ≤ 1/n``."""
    return 10.0 ** (-math.ceil(math.log10(n) - 1e-12))


NONPRIVATE = ("sgd", "rmsprop", "delayed_rmsprop")
MAIN = ("dp_sgd", "dp_rmsprop", "dp_adagrad", "dp2_extra_query", "dp2_noise_first", "dp2_adagrad",
        "adadps")
SWEEP = ("dp_sgd", "dp_rmsprop", "dp2_rmsprop", "dp_adagrad", "dp2_adagrad")
STABILITY = ("rmsprop", "dp_rmsprop", "dp2_rmsprop")


def _main_keys(config: Config) -> list[str]:
    """Tuning keys of the main σ in dependency order (DP-SGD first: DP² reuses its clip)."""
    sg = sigma_tag(config.sigma)
    keys = [f"{sg}-dp_sgd", f"{sg}-dp_rmsprop", f"{sg}-dp_adagrad"]
    keys += [f"{sg}-dp2_rmsprop-s{s}" for s in config.s_grid]
    for m in ("dp2_extra_query", "dp2_noise_first", "dp2_adagrad"):
        keys += [f"{sg}-{m}-s{s}" for s in config.s_variants]
    keys.append(f"{sg}-adadps")
    return keys


def _sweep_keys(config: Config) -> list[str]:
    return [f"{sigma_tag(sig)}-{m}" for sig in config.sweep_sigmas if sig != config.sigma
            for m in SWEEP]


DIAGNOSTIC = ("dp_sgd", "dp2_rmsprop")


def _eval_keys(config: Config) -> list[str]:
    sg = sigma_tag(config.sigma)
    keys = [f"np-{m}" for m in NONPRIVATE] + [f"clip-{m}" for m in DIAGNOSTIC]
    keys += [f"{sg}-{m}" for m in ("dp_sgd", "dp_rmsprop", "dp2_rmsprop") + MAIN[2:]]
    keys += [f"{sg}-dp2_rmsprop-s{s}" for s in config.s_grid]
    keys += [f"{sg}-dp2_rmsprop-s{s}-h" for s in config.s_grid]
    keys += _sweep_keys(config)
    keys += [f"stab-{m}" for m in STABILITY]
    return keys


def cell_labels(config: Config) -> list[str]:
    """Every cell label in index order (cell ``i`` is seeded with ``spawn_key=(i,)``)."""
    tune = ([f"np-{m}" for m in NONPRIVATE] + _main_keys(config) + _sweep_keys(config)
            + [f"clip-{m}" for m in DIAGNOSTIC])
    return [f"tune-{k}" for k in tune] + _eval_keys(config)


# ------------------------------------------------------------------------------------------------
# The experiment


def run(config: Config, cache) -> dict:
    """Tune every method, then evaluate the chosen settings; ``{label: Result}`` (see module doc)."""
    problem = dpsim.problems.logistic_regression(
        config.n, config.d, density=config.density, zipf=config.zipf, signal=config.signal,
        reg=config.reg, col_scale=config.col_scale, seed=config.data_seed)
    labels = cell_labels(config)
    index = {lab: i for i, lab in enumerate(labels)}
    T, b = config.steps, config.batch_size
    common = dict(steps=T, batch_size=b, sampling=config.sampling, **cache.simulate_options)
    sg0 = sigma_tag(config.sigma)
    reps = config.tune_trials
    eps0 = config.eps_grid[0]

    lr2_grid = config.dp2_lr2_grid or config.lr_adaptive_grid
    tail_every = max(1, T // config.tune_records)

    # -- the tuning plan: key -> (optimizer name, grid of per-trial values, fixed hyperparameters)
    def tune_cell(key, opt_name, grid, fixed, tail):
        hp = tuning.fold(grid, reps, scalars=True)
        R = len(tuning.points(grid)) * reps

        def compute(seed):
            opt = dpsim.optimizers.get(opt_name, **fixed, **hp)
            return dpsim.simulate(problem, opt, trials=R, seed=seed,
                                  record_every=tail_every if tail else T, metrics=("loss",), **common)

        return Cell(f"tune-{key}", index[f"tune-{key}"], compute)

    chosen: dict[str, dict] = {}     # key -> the full setting run by the evaluation cell
    selections: dict[str, tuning.Selection] = {}

    def tune(items, desc, tail=()):
        """``items``: [(key, opt_name, grid, fixed)]; runs the cells (at once), records the
        choices.  ``tail``: the keys whose trials are scored by their mean training loss over the
        recorded steps of the second half of the run (:func:`tail_losses`) instead of the final
        loss alone."""
        res = cache.run([tune_cell(*it, it[0] in tail) for it in items], desc=desc)
        for key, opt_name, grid, fixed in items:
            r = res[f"tune-{key}"]
            sel = selections[key] = tuning.select(tail_losses(r) if key in tail else r, grid, reps)
            chosen[key] = {"optimizer": opt_name, **fixed, **sel.point}

    # Non-private (Fig. 2) and DP-SGD at the main σ (its clip is DP²'s SGD-phase clip), in one
    # batch: nothing of one depends on the other, and DP-SGD's cell alone would leave a worker idle
    sig = float(config.sigma)
    nonprivate = [
        ("np-sgd", "sgd", {"lr": config.lr_sgd_grid}, {}),
        ("np-rmsprop", "rmsprop", {"lr": config.lr_adaptive_grid}, {"eps": eps0, "beta": config.beta}),
        ("np-delayed_rmsprop", "delayed_rmsprop",
         {"lr": config.lr_sgd_grid, "lr2": config.lr_adaptive_grid},
         {"s1": config.s_nonprivate, "eps": eps0, "beta": config.beta}),
    ]
    tune(nonprivate + [(f"{sg0}-dp_sgd", "dp_sgd",
                        {"lr": config.lr_sgd_grid, "clip": config.clip_grid},
                        {"noise_multiplier": sig})],
         "dp2_logistic: tune non-private and DP-SGD", tail={it[0] for it in nonprivate})
    c1 = chosen[f"{sg0}-dp_sgd"]["clip"]
    items = [
        (f"{sg0}-dp_rmsprop", "dp_rmsprop",
         {"lr": config.lr_adaptive_grid, "clip": config.clip_grid, "eps": config.eps_grid},
         {"noise_multiplier": sig, "beta": config.beta}),
        (f"{sg0}-dp_adagrad", "dp_adagrad",
         {"lr": config.lr_adagrad_grid, "clip": config.clip_grid, "eps": config.eps_grid},
         {"noise_multiplier": sig}),
    ]
    dp2_grid = {"lr": config.dp2_lr_grid, "lr2": lr2_grid, "clip2": config.clip2_grid,
                "eps": config.eps_grid}
    for s in config.s_grid:
        items.append((f"{sg0}-dp2_rmsprop-s{s}", "dp2_rmsprop", dp2_grid,
                      {"s1": s, "clip": c1, "noise_multiplier": sig, "beta": config.beta}))
    for s in config.s_variants:
        items.append((f"{sg0}-dp2_extra_query-s{s}", "dp2_extra_query", dp2_grid,
                      {"s1": s, "clip": c1, "noise_multiplier": sig, "beta": config.beta}))
    for s in config.s_variants:
        items.append((f"{sg0}-dp2_noise_first-s{s}", "dp2_noise_first",
                      {"lr": config.dp2_lr_grid, "lr2": lr2_grid, "eps": config.eps_grid},
                      {"s1": s, "clip": c1, "clip2": c1, "noise_multiplier": sig, "beta": config.beta}))
    for s in config.s_variants:
        items.append((f"{sg0}-dp2_adagrad-s{s}", "dp2_adagrad",
                      {**dp2_grid, "lr2": config.lr_adagrad_grid,
                       "clip2": config.dp2_adagrad_clip2_grid or config.clip2_grid},
                      {"s1": s, "clip": c1, "noise_multiplier": sig}))
    items.append((f"{sg0}-adadps", "adadps", {"lr": config.lr_adaptive_grid, "clip": config.clip2_grid},
                  {"eps": eps0, "noise_multiplier": sig, "beta": config.beta,
                   "public_fraction": config.public_fraction}))
    tune(items, f"dp2_logistic: tune at σ={sig:g}")

    def best_over_s(method, s_values):
        losses = {s: selections[f"{sg0}-{method}-s{s}"].score for s in s_values}
        s_best = min(losses, key=lambda s: (losses[s], s))
        return s_best, chosen[f"{sg0}-{method}-s{s_best}"]

    best, s_at_edge = {}, []
    for m, svals in (("dp2_rmsprop", config.s_grid), ("dp2_extra_query", config.s_variants),
                     ("dp2_noise_first", config.s_variants), ("dp2_adagrad", config.s_variants)):
        s_best, hp = best_over_s(m, svals)
        best[m] = hp
        if len(svals) > 1 and s_best in (min(svals), max(svals)):
            s_at_edge.append(f"{sg0}-{m}")
    for m in ("dp_sgd", "dp_rmsprop", "dp_adagrad", "adadps"):
        best[m] = chosen[f"{sg0}-{m}"]

    # ε sweep: re-tune the learning rates at each other σ
    items = []
    for sw in config.sweep_sigmas:
        if sw == config.sigma:
            continue
        tg = sigma_tag(sw)
        for m in SWEEP:
            base = dict(best[m])
            opt_name = base.pop("optimizer")
            if m == "dp2_rmsprop":  # DP² keeps its SGD-phase lr (DP-SGD's is re-tuned)
                grid = {"lr2": lr2_grid}
            elif m == "dp2_adagrad":
                grid = {"lr2": config.lr_adagrad_grid}
            else:
                grid = {"lr": {"dp_sgd": config.lr_sgd_grid,
                               "dp_adagrad": config.lr_adagrad_grid}.get(m, config.lr_adaptive_grid)}
            fixed = {k: v for k, v in base.items() if k not in grid}
            fixed["noise_multiplier"] = float(sw)
            items.append((f"{tg}-{m}", opt_name, grid, fixed))
    if items:
        tune(items, "dp2_logistic: tune the ε sweep")

    # Diagnostic: the same clipping without noise (σ = 0), tuned the same way (DP² keeps s, C1 and
    # its SGD-phase lr; lr2, C₂ and ε_a re-tuned)
    diag_grid = {k: v for k, v in dp2_grid.items() if k != "lr"}
    d2 = {k: v for k, v in best["dp2_rmsprop"].items() if k not in diag_grid}
    tune([("clip-dp_sgd", "dp_sgd", {"lr": config.lr_sgd_grid}, {"clip": c1, "noise_multiplier": 0.0}),
          ("clip-dp2_rmsprop", "dp2_rmsprop", diag_grid,
           {**{k: v for k, v in d2.items() if k != "optimizer"}, "noise_multiplier": 0.0})],
         "dp2_logistic: tune the no-noise diagnostic")

    tuning.record(cache, selections, note="DP² variants: then the delay s with the lowest chosen "
                                          "score (the smaller s on a tie); the non-private cells "
                                          "(np-*) are scored on each trial's mean training loss "
                                          "over the recorded steps of the second half of the run "
                                          "(t ≥ T/2), not the final point alone (a fair measure "
                                          "for the delayed schedule's sawtooth)")
    cache.note("delta", delta_for(config.n))
    cache.note("chosen", chosen)
    cache.note("chosen_s", {m: int(best[m]["s1"]) for m in best if "s1" in best[m]})
    cache.note("s_at_grid_edge", s_at_edge)

    # -- evaluation cells
    def eval_cell(key, hp, meta):
        hp = dict(hp)
        opt_name = hp.pop("optimizer")
        trials = config.np_trials if not meta["private"] and config.np_trials else config.trials

        def compute(seed):
            if meta["h"]:
                s = int(hp.pop("s1"))
                tr = _delay.record_h_traces(problem, s, steps=T, batch_size=b, trials=trials,
                                            seed=seed, optimizer=opt_name, sampling=config.sampling,
                                            metrics=("loss",), **hp)
                return tr.result
            opt = dpsim.optimizers.get(opt_name, **hp)
            return dpsim.simulate(problem, opt, trials=trials, seed=seed,
                                  record_every=config.record_every, metrics=("loss",), **common)

        return Cell(key, index[key], compute, meta)

    cells = [eval_cell(f"np-{m}", chosen[f"np-{m}"], cell_meta(m, None)) for m in NONPRIVATE]
    cells += [eval_cell(f"clip-{m}", chosen[f"clip-{m}"], cell_meta(m, 0.0)) for m in DIAGNOSTIC]
    cells += [eval_cell(f"{sg0}-{m}", best[m], cell_meta(m, sig))
              for m in ("dp_sgd", "dp_rmsprop", "dp2_rmsprop") + MAIN[2:]]
    cells += [eval_cell(f"{sg0}-dp2_rmsprop-s{s}", chosen[f"{sg0}-dp2_rmsprop-s{s}"],
                        cell_meta("dp2_rmsprop", sig, s=s)) for s in config.s_grid]
    cells += [eval_cell(f"{sg0}-dp2_rmsprop-s{s}-h", {**best["dp2_rmsprop"], "s1": s},
                        cell_meta("dp2_rmsprop", sig, s=s, h=True)) for s in config.s_grid]
    cells += [eval_cell(f"{sigma_tag(sw)}-{m}", chosen[f"{sigma_tag(sw)}-{m}"], cell_meta(m, sw))
              for sw in config.sweep_sigmas if sw != config.sigma for m in SWEEP]
    stab = {"rmsprop": chosen["np-rmsprop"], "dp_rmsprop": best["dp_rmsprop"],
            "dp2_rmsprop": best["dp2_rmsprop"]}
    per_epoch = max(1, round(config.n / b))
    for m in STABILITY:
        cells.append(stability_cell(f"stab-{m}", index[f"stab-{m}"], problem, stab[m],
                                    cell_meta(m, sig if m != "rmsprop" else None, stability=True),
                                    steps=T, batch_size=b, trials=config.stability_trials,
                                    every=per_epoch, sampling=config.sampling,
                                    options=cache.simulate_options))
    return cache.run(cells, desc="dp2_logistic: evaluate")


EXPERIMENT = Experiment(
    name="dp2_logistic",
    title="DP² (delayed preconditioners) vs DP-SGD, DP-RMSProp, ablations and AdaDPS on sparse "
          "logistic regression ([DP2])",
    presets=PRESETS,
    run=run,
    figures=("fig_dp2_premise", "fig_dp2_stability", "fig_dp2_delayed_vs_plain", "fig_dp2_h_of_s",
             "fig_dp2_curves", "fig_dp2_eps_sweep", "fig_dp2_effect_of_s", "fig_dp2_ablations",
             "fig_dp2_adagrad", "fig_dp2_adagrad_eps_sweep", "fig_dp2_adadps"),
    module=__name__,
)
