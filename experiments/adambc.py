"""DP-Adam vs DP-AdamBC on axis-aligned ill-conditioned least squares, on an in-regime sparse
problem and on a real data set ([ADAMBC]: Tang, Shpilevskiy, Lécuyer, *DP-AdamBC: Your DP-Adam Is
Actually DP-SGD (Unless You Apply Bias Correction)*, AAAI 2024).

Claims checked (figures ``paper_figures/fig_adambc_*.py``):

* ``fig_adambc_premise`` (§5 "Discussion"): the setting can exhibit the paper's effect — the
  coordinates' gradient scales differ, and *non-private* Adam clearly beats non-private SGD at the
  run length (the paper expects DP-AdamBC to help exactly where Adam beats SGD without privacy).
* ``fig_adambc_regime`` (§3–5 in the paper's regime): on the in-regime problem (``Φ/v̂^c ≫ 10²``
  on most coordinates, Adam ≫ SGD without privacy; both printed as its premise) DP-AdamBC reaches
  a lower held-out loss than DP-Adam.
* ``fig_adambc_moments`` (Fig. 1, Table 2): under DP the private second moment ``v̂^p`` is
  dominated by the noise variance ``Φ = (σC/B)²`` (``E v̂^p = v̂^c + Φ``), while ``m̂^p`` is
  centred on the clean ``m̂^c``; dominance judged where the paper claims it (its regime).
* ``fig_adambc_updates`` (Fig. 4): the private update ``Δ^p = m̂^p/(√v̂^p + γ)`` is concentrated
  near 0, and the bias correction spreads it out (robust scale; judged in the regime).
* ``fig_adambc_vs_sgdm`` (Fig. 2, Eq. 3): DP-Adam behaves like DP-SGDM with learning rate
  ``η_SGDM = η_Adam (1−β1)/((1−β1^t)√Φ)``, per problem and ε where Φ dominates v̂^p.
* ``fig_adambc_gamma`` (Fig. 5, upper right): the floor ``γ'`` of DP-AdamBC matters.
* ``fig_adambc_phi_prime`` (Fig. 5 upper left): subtracting a wrong ``Φ' ≠ Φ`` is
  worse than subtracting ``Φ``; ``Φ' = 0`` is DP-Adam without its ``γ``.
* ``fig_adambc_clean_phi`` (Fig. 2 right): *clean* Adam (clipped, no noise) with a constant
  ``Φ'`` added to its second moment, ``Δ = m̂^c/√(v̂^c + Φ')``, gets worse as ``Φ'`` grows and
  approaches clean SGD with momentum — the DP bias alone, without any noise, turns Adam into SGDM.
* ``fig_adambc_knobs`` (Fig. 5, lower left and right): tuning DP-Adam's ``γ`` or its β coefficients does
  not replace the bias correction.
* ``fig_adambc_bounds`` (Props. 3–4, Tables 3–5): the tail bounds on ``|v̂^corr − v̂^c|``, as
  stated, hold against the measured deviation; the printed Tables 3–4 recomputed.
* ``fig_adambc_vs_dp2`` (Fig. 3 left): DP-AdamBC does better than DP²-RMSProp on the same
  problem at the same ε.
* ``fig_adambc_vs_adam`` (Figs. 6, 8; the headline): DP-AdamBC reaches a lower training loss
  than DP-Adam at the same ε (DP-SGD and the non-private methods drawn for reference).
* ``fig_adambc_real`` (§5 on real data): DP-AdamBC vs DP-Adam vs DP-SGD on breast_cancer, held-out
  accuracy, with its own premise (Adam ≫ SGD without privacy, on its features and in the columns'
  original units).
* ``fig_adambc_movielens`` (§5 on real data, a regression): DP-AdamBC vs DP-Adam vs DP-SGD on
  MovieLens-small (one-hot user + movie ridge), held-out MSE, with its own premises (the exact
  ridge optimum beats predicting the training mean on held-out ratings; Φ above v̂^c on most
  coordinates; Adam ≫ SGD without privacy).

The plan as data
----------------
Every cell is a row of the cell tables of :mod:`experiments.adambc_cells` (``MAIN``, ``REGIME``,
``REAL``, ``REALRAW``, ``MOVIELENS``; one per problem, :data:`~.adambc_cells.PLANS`): its slot,
stage (tune → tune sweeps → evaluate → frozen moments), optimizer, tuning grid or the selection
it evaluates, fixed hyperparameters, trials, the slot whose seed it shares and the cell it starts
from.  A table's row order is its slots' index order (:data:`SLOTS`, ...).  :func:`run` is the
driver: per stage it turns the rows into cells (:class:`~.adambc_cells.Plan`), runs them through
the cache and, after a tuning stage, applies the tuning rule; the notes (:func:`settings_notes`)
come last.  The configs are in :mod:`experiments.adambc_config`, the problems and the optimizer
pieces in :mod:`experiments.adambc_problems`.

Design
------
* Problem: :func:`dpsim.problems.least_squares` with ``rotate=False``: features
  ``x_ij ~ N(0, λ_j)``, ``λ_j`` geometric from 1 down to ``1/condition``, so the Hessian is
  *diagonal* with condition number ``condition`` and the coordinates' gradient scales differ by
  up to ``√condition``.  This is the textbook case where a per-coordinate preconditioner (Adam)
  beats one step size (SGD); the earlier dense isotropic logistic problem (d = 50) did not meet
  the paper's own precondition (non-private Adam ≈ SGD there).  ``d`` stays small enough that
  every coordinate of the moments can be recorded.  Built once per run
  (:class:`~.adambc_cells.Plan`); the cells share it.
* Privacy: for each target ``ε`` (at ``δ``) the noise multiplier ``σ`` is calibrated with
  :func:`dpsim.accounting.noise_multiplier` for Poisson sampling at rate ``B/n`` over ``steps``
  steps; DP-Adam, DP-AdamBC, DP-SGDM and DP-SGD release the same Gaussian gradient, so they spend
  the same ε.  (``σ`` of every problem and ε is calibrated once per run, before its cells,
  not once per worker.)
* Tuning (the paper tunes η and γ' per optimizer and ε; we use its rule with the training loss,
  there is no test split): DP-Adam over ``lr_grid_adam``, DP-AdamBC over ``lr_grid_bc × γ'``
  (``γ' = ratio·Φ``, ``ratio ∈ gamma_ratios``), DP-SGD over ``lr_grid_dpsgd``, non-private SGD and
  Adam over ``lr_grid_np_sgd`` / ``lr_grid_np_adam``, each in one *tuning* cell (grids folded into
  the trial axis, ``tune_trials`` ≥ 3 trials per grid point).  Rule: the lowest mean final
  training loss (:mod:`experiments.tuning`).  The chosen settings then run in fresh *evaluation*
  cells whose seeds were never used for tuning; the selections (with their grid-edge status) are
  saved in the manifest's notes.
* Evaluation cells share randomness on purpose (common random numbers → paired comparisons):
  DP-AdamBC, DP-SGDM and DP-SGD run with the seed of the DP-Adam evaluation cell, so trial ``r``
  of each sees the same Poisson batches and the same Gaussian noise draws.
* Eq. 3 (Fig. 2): DP-SGDM (``b_t = β b_{t−1} + g̃_t``, ``w ← w − η b_t``, ``β = β1``) runs with the
  constant ``η_SGDM(t → ∞) = η_Adam (1−β1)/√Φ`` from
  :func:`analysis.concentration.sgdm_equivalent_lr`.
* γ' sweep (Fig. 5 upper right): one cell with ``sweep_trials`` fresh trials per γ', each at the
  learning rate that was best for that γ' in the tuning cell.
* Sweeps at ``sweep_epsilon`` only (the paper's Fig. 5 is one setting too):
  - wrong Φ' (Fig. 5 upper left, Fig. 2 right): DP-AdamBC with ``phi_prime = r·Φ`` for
    ``r ∈ phi_ratios`` (``r = 1`` is DP-AdamBC itself, ``r = 0`` subtracts nothing), γ' at the
    tuned DP-AdamBC ratio, η tuned per ``r`` over ``lr_grid_bc`` (tuning cell ``tune-phi``), then
    ``sweep_trials`` fresh trials per ``r`` (cell ``phi``).
  - DP² vs DP-AdamBC (Fig. 3 left, §5 "Comparisons to previous work"): ``dp2_rmsprop``
    (``s1 = s2 = s``, the optimizer's default RMSProp decay 0.9 and ε_a, SGD-phase clip C)
    tuned over ``dp2_lr_grid × dp2_lr2_grid × dp2_clip2_grid`` in one tuning cell per
    ``s ∈ dp2_delays``; the delay with the lowest tuned score is evaluated (cell ``dp2``,
    paired with DP-Adam's seed).  Sweeps and DP² are single-ε: quick-scale CPU (B = 256 costs
    ~3.4× per trial what B = 128 does; see the PRESETS comment).
  - DP-Adam knobs (Fig. 5 lower left, lower right): DP-Adam with its ``γ = r·√Φ`` for
    ``r ∈ adam_gamma_ratios`` (β's default), and with ``β1 ∈ betas1``, ``β2 = 1 − (1 − β1)²`` (the
    paper's pairing, γ default), η tuned per setting over ``lr_grid_adam`` (``tune-knobs``), then
    ``sweep_trials`` fresh trials per setting (``knobs``).
* Clean Φ' sweep (Fig. 2 right; non-private cells ``tune-clean-phi``, ``clean-phi``): the clipped,
  noiseless Adam of :func:`clean_adam_plus` with ``Φ' = r·Φ_s`` added under the square root,
  ``r ∈ clean_phi_ratios`` (``Φ_s``: the DP bias at ``sweep_epsilon``; the figure marks ``Φ`` of every
  ε), η tuned per ``r`` over ``clean_lr_grid`` (``tune_trials`` trials per point), then
  ``sweep_trials`` fresh trials per ``r``.  The ``Φ' → ∞`` limit, clean clipped SGDM (``dp_sgdm``
  with ``σ = 0``, ``β = β1``), is tuned over ``clean_sgdm_lr_grid`` (``tune-clean-sgdm``) and
  evaluated (``clean-sgdm``) the same way.  ``Φ' = 0`` is clipped clean Adam without ``γ``.
* Moments (Figs. 1, 4, Table 2) and Props. 3–4 (Tables 3–5): *frozen* runs.  From the final
  parameters of each DP-Adam evaluation trial (``init``), DP-Adam runs ``freeze_steps`` more steps
  with ``lr = 0`` twice with the same seed: once private (``σ``) and once clean (``σ = 0``, clipped
  but noiseless; the batches are identical because batch sampling and noise use separate
  streams).  Probes record every coordinate ``j`` of Adam's raw ``m`` and ``v`` (``m{j}``,
  ``v{j}``), every ``freeze_record_every`` steps.  With the parameters frozen this is exactly the
  setting of Props. 3–4 ("a fixed sequence of parameters and mini-batches").
* Cells and seeds: for target ``k`` (``ε = epsilons[k]``) cell ``len(SLOTS)·k + s`` with slot
  ``s`` (:data:`SLOTS`; the sweep slots exist only at ``sweep_epsilon``), then the non-private
  cells :data:`NONPRIVATE_SLOTS` at ``len(SLOTS)·K + s``.  Cell ``i`` runs with
  ``SeedSequence(config.seed, spawn_key=(i,))``, except the paired slots above.

* The in-regime problem (:class:`RegimeConfig`, :func:`regime_problem`; issue 31 item 4): the
  diagonal least squares has ``d/B < 1``, so ``Φ/v̂^c ≈ σ²d/B`` is of order 1–20 there and the
  paper's Figs. 1 and 4 and Eq. 3 ("typical DP parameters", ``Φ ≫ v̂^c``) are outside their
  premise.  Sparse least squares with d = 10⁴ signed Zipf-popular columns, B = 64 and a held-out
  split puts ``Φ/v̂^c`` in the hundreds to thousands on most coordinates while non-private Adam
  beats SGD ~3×.  Per ε of ``RegimeConfig.epsilons``: DP-Adam tuned over η, DP-AdamBC over η ×
  γ'/Φ (tuning cells, training loss), then fresh evaluation cells (DP-Adam, DP-AdamBC and DP-SGDM
  at the Eq. 3 rate of the tuned DP-Adam, paired seeds) recording the held-out loss, and frozen
  runs at DP-Adam's trained point (private and clean, same seed) whose moments are probed on a
  uniform sample of ``probe_coords`` coordinates (:func:`regime_coords`) at their last step;
  non-private SGD and Adam tuned and evaluated for the premise.  Its cells are labelled
  ``"regime-eps<ε>-<slot>"`` / ``"regime-nonprivate-<slot>"`` and carry ``meta["problem"] =
  "regime"``.
* The real data set (:class:`RealConfig`, :func:`real_problems`; issue 31 item 5):
  breast_cancer as the loader gives it (z-scored columns, unit rows, 20 % held out), per ε
  DP-Adam, DP-AdamBC (η × γ'/Φ) and DP-SGD tuned on the training loss and evaluated (held-out
  loss and accuracy, paired seeds); non-private SGD and Adam on it and on the same rows in the
  columns' original units (``realraw``, premise only).  The coordinate-scale spread at the exact
  optimum of both is saved in ``notes["settings"]["real"]``.
* MovieLens-small (:class:`MovieLensConfig`, :func:`movielens_problem`; issue 31 item 5): the
  ratings as a sparse one-hot user + movie ridge regression (:func:`dpsim.datasets.movielens`:
  training rows of unit norm, ratings centred by the training mean, 20 % held out; the quick run
  subsamples the ratings).  Per ε, as on breast_cancer: DP-Adam, DP-AdamBC (η × γ'/Φ) and DP-SGD
  tuned on the final training loss, then fresh paired evaluation cells recording the held-out
  loss; frozen runs at DP-Adam's trained point (private and clean, same seed) probe the moments
  of ``probe_coords`` uniformly drawn coordinates (:func:`movielens_coords`); non-private SGD and
  Adam tuned and evaluated.  The held-out MSE of the trivial predictor (``w = 0``: the training
  mean rating) and of the exact ridge optimum ``w*``, with a 95% CI over held-out ratings of their
  difference, are saved in ``notes["settings"]["movielens"]["heldout"]``.  Cells
  ``"movielens-eps<ε>-<slot>"`` / ``"movielens-nonprivate-<slot>"``, ``meta["problem"] =
  "movielens"``, indexed after every other cell.
* σ of those problems is calibrated the same way, for their own sampling rate and run length.
  All cells of the other problems come after the main problem's (``len(SLOTS)·K +
  len(NONPRIVATE_SLOTS) + …``), so adding them changed no main cell's seed.

``run(config, cache)`` returns ``{label: Result}`` with labels ``"eps<ε>-<slot>"`` (e.g.
``"eps1-adam"``) and ``"nonprivate-<slot>"``, and those of the other problems
(:func:`label` with ``problem=``).
"""

from __future__ import annotations

import numpy as np

from dpsim.analysis.concentration import dp_bias, sgdm_equivalent_lr

from . import tuning
from .adambc_cells import (DP2_TUNE_SLOTS, MOVIELENS_NONPRIVATE_SLOTS, MOVIELENS_SLOTS,
                           NONPRIVATE_SLOTS, PROBLEMS, REAL_NONPRIVATE_SLOTS, REAL_SLOTS,
                           REGIME_NONPRIVATE_SLOTS, REGIME_SLOTS, SLOTS, STAGES, SWEEP_SLOTS,
                           SWEEP_TUNE, TUNE, Plan, knob_settings, label, labels)
from .adambc_config import (MAX_DP2_DELAYS, Config, MovieLensConfig, RealConfig, RegimeConfig,
                            _grid, beta2_of)
from .adambc_problems import (_scale_spread, clean_adam_plus, moment_probes, movielens_coords,
                              movielens_heldout, movielens_problem, problem, real_problems,
                              regime_coords, regime_problem)
from .pipeline import Experiment

__all__ = ["Config", "RegimeConfig", "RealConfig", "PRESETS", "EXPERIMENT", "run", "SLOTS",
           "SWEEP_SLOTS", "NONPRIVATE_SLOTS", "REGIME_SLOTS", "REGIME_NONPRIVATE_SLOTS", "REAL_SLOTS",
           "REAL_NONPRIVATE_SLOTS", "PROBLEMS", "label", "labels", "moment_probes", "beta2_of",
           "problem", "regime_problem", "regime_coords", "real_problems", "clean_adam_plus",
           "MovieLensConfig", "MOVIELENS_SLOTS", "MOVIELENS_NONPRIVATE_SLOTS", "movielens_problem",
           "movielens_coords", "movielens_heldout", "knob_settings", "DP2_TUNE_SLOTS",
           "MAX_DP2_DELAYS", "settings_notes"]

# The in-regime problem (issue 31 item 4; see RegimeConfig).  d = 10⁴ sparse coordinates, 10 signed
# entries per row, Zipf(1) popularity, B = 64: Φ/v̂^c ≈ σ²d/B is in the hundreds to thousands on
# most coordinates and non-private Adam beats tuned SGD ~3× at T = 500 (quick run: median Φ/v̂^c at
# DP-Adam's trained point 1.4e3 at ε = 1, 95 % of the coordinates above 10², SGD/Adam = 3.2; probes
# at n = 50 000, T = 1000: medians 780 at ε = 1 and 300 at ε = 8, SGD/Adam 6.3).  The simulator's
# cost is the Gaussian noise of every coordinate, ~0.19 ms per trial-step at d = 10⁴ whatever the
# sparsity, and σ's calibration at a small sampling rate costs seconds per ε, so the quick run is
# one ε, short and small (T = 500, 8 evaluation trials, ~4e4 trial-steps, ~15 CPU-s with the
# calibration); full runs every ε.  B = 64 instead of the paper's 256 raises Φ/v̂^c 4× at the same
# price (the paper's regime comes from d ~ 10⁸).  reg = 0: a ridge would shrink the rare columns,
# where Adam's gain is (a probe with reg = 1e-4: SGD ≈ Adam).
_REGIME_QUICK = RegimeConfig(n=20000, n_test=5000, d=10000, nnz=10, zipf=1.0, noise=0.1,
                             batch_size=64, steps=500, lr_grid_adam=(0.003, 0.01, 0.03),
                             lr_grid_bc=(0.003, 0.01, 0.03), gamma_ratios=(0.1, 1.0),
                             lr_grid_np_sgd=(10.0, 15.0, 20.0, 25.0),
                             lr_grid_np_adam=(0.03, 0.05, 0.1),
                             tune_trials=3, trials=8, freeze_steps=300, probe_coords=256,
                             epsilons=(1.0,))
# Full: T = 2000 (SGD/Adam larger), 48 trials, ~3e6 trial-steps (~10 CPU-minutes).
_REGIME_FULL = RegimeConfig(n=50000, n_test=10000, d=10000, nnz=10, zipf=1.0, noise=0.1,
                            batch_size=64, steps=2000, lr_grid_adam=_grid(-3, -1),
                            lr_grid_bc=_grid(-3, -1), gamma_ratios=(1e-2, 1e-1, 1.0),
                            lr_grid_np_sgd=(5.0, 10.0, 15.0, 20.0, 25.0),
                            lr_grid_np_adam=(0.01, 0.02, 0.03, 0.05, 0.1, 0.2),
                            tune_trials=5, trials=48, freeze_steps=2000, probe_coords=512)
# breast_cancer (455 training rows, d = 30): B = 32, so σ ≈ 6 at ε = 1 and 1.2 at ε = 8 (T = 500).
_REAL_QUICK = RealConfig(batch_size=32, steps=500, lr_grid_adam=(0.01, 0.03, 0.1),
                         lr_grid_bc=(0.003, 0.01, 0.03, 0.1), gamma_ratios=(0.01, 0.1, 1.0),
                         lr_grid_dpsgd=(0.03, 0.1, 0.3, 1.0, 3.0),
                         lr_grid_np_sgd=(0.3, 1.0, 3.0, 10.0, 30.0),
                         lr_grid_np_adam=(0.003, 0.01, 0.03, 0.1, 0.3), tune_trials=3, trials=32)
_REAL_FULL = RealConfig(batch_size=32, steps=1000, lr_grid_adam=_grid(-3, 0),
                        lr_grid_bc=_grid(-3, 0), gamma_ratios=(1e-3, 1e-2, 1e-1, 1.0),
                        lr_grid_dpsgd=_grid(-2, 1), lr_grid_np_sgd=_grid(-1, 2),
                        lr_grid_np_adam=_grid(-3, 0), tune_trials=6, trials=100)
# MovieLens-small (issue 31 item 5): the one-hot user + movie ridge of dpsim.datasets.movielens
# (reg = 1e-3, the loader's default), B = 256.  Quick: 10 000 of the 100 004 ratings (8 000 training
# rows, 2 000 held out, d = 3 790 users + movies), T = 1000 (32 epochs); σ ≈ 3.9 at ε = 1 and 0.91
# at ε = 8.  ~2.1e5 trial-steps at 20–60 µs (d = 3 790): ~11 CPU-s of cells, plus ~3 s for the two
# σ calibrations and ~1.5 s for the data, its exact optimum and the held-out premise (measured on
# the loaded 2-core machine).
_ML_QUICK = MovieLensConfig(batch_size=256, steps=1000, lr_grid_adam=(0.001, 0.003, 0.01),
                            lr_grid_bc=(0.001, 0.003, 0.01), gamma_ratios=(0.1, 1.0, 10.0),
                            lr_grid_dpsgd=(0.1, 0.3, 1.0, 3.0), lr_grid_np_sgd=(1.0, 3.0, 10.0),
                            lr_grid_np_adam=(0.001, 0.003, 0.01), tune_trials=3, trials=8,
                            freeze_steps=300, probe_coords=256, subsample=10000)
# Full: every rating (80 003 training rows, 20 001 held out, d = 9 092), T = 3000 (~10 epochs),
# ε ∈ {1, 3, 7}.  ~4e6 trial-steps (per ε ~1.2e6, non-private 5e5) at ~150–210 µs (private
# Adam-family), ~125 µs (DP-SGD), 50–125 µs (non-private) per trial-step at d = 9 092, B = 256
# (measured on the loaded 2-core machine): an estimated ~11 CPU-minutes, with σ's calibration
# (~30 s) and the exact optimum (~7–13 s per process that builds the problem).
_ML_FULL = MovieLensConfig(batch_size=256, steps=3000, lr_grid_adam=_grid(-4, -1),
                           lr_grid_bc=_grid(-4, -1), gamma_ratios=(1e-2, 1e-1, 1.0, 10.0),
                           lr_grid_dpsgd=_grid(-2, 1), lr_grid_np_sgd=_grid(-1, 2),
                           lr_grid_np_adam=_grid(-4, -1), tune_trials=5, trials=48,
                           freeze_steps=1000, probe_coords=512)

PRESETS: dict[str, Config] = {
    # Smoke test only (seconds): no claim is expected to hold at this size.
    "tiny": Config(n=300, d=5, condition=100.0, batch_size=20, steps=30, epsilons=(2.0,),
                   sweep_epsilon=2.0, lr_grid_adam=(0.01, 0.1), lr_grid_bc=(0.01, 0.1),
                   lr_grid_dpsgd=(0.1, 0.3), lr_grid_np_sgd=(0.1, 0.3), lr_grid_np_adam=(0.01, 0.1),
                   gamma_ratios=(0.01, 1.0), phi_ratios=(0.0, 1.0, 4.0),
                   adam_gamma_ratios=(0.1, 1.0), betas1=(0.8, 0.9), tune_trials=2, trials=4,
                   sweep_trials=2, freeze_steps=20, freeze_record_every=5, record_every=5,
                   dp2_delays=(10,), dp2_lr_grid=(0.3,), dp2_lr2_grid=(0.01, 0.1), dp2_clip2_grid=(10.0,),
                   clean_phi_ratios=(0.0, 1.0, 100.0), clean_lr_grid=(0.01, 0.1),
                   clean_sgdm_lr_grid=(0.1, 0.3),
                   regime=RegimeConfig(n=600, n_test=200, d=1000, nnz=5, zipf=1.0, noise=0.1,
                                       batch_size=20, steps=30, lr_grid_adam=(0.01, 0.03),
                                       lr_grid_bc=(0.01, 0.03), gamma_ratios=(0.1, 1.0),
                                       lr_grid_np_sgd=(1.0, 3.0), lr_grid_np_adam=(0.01, 0.03),
                                       tune_trials=2, trials=3, freeze_steps=20, probe_coords=20),
                   real=RealConfig(batch_size=16, steps=20, lr_grid_adam=(0.01, 0.1),
                                   lr_grid_bc=(0.01, 0.1), gamma_ratios=(0.1,),
                                   lr_grid_dpsgd=(0.3, 1.0), lr_grid_np_sgd=(0.3, 1.0),
                                   lr_grid_np_adam=(0.01, 0.1), tune_trials=2, trials=3),
                   movielens=MovieLensConfig(batch_size=16, steps=20, lr_grid_adam=(0.003, 0.03),
                                             lr_grid_bc=(0.003, 0.03), gamma_ratios=(0.1,),
                                             lr_grid_dpsgd=(0.3, 1.0), lr_grid_np_sgd=(1.0, 3.0),
                                             lr_grid_np_adam=(0.003, 0.03), tune_trials=2,
                                             trials=3, freeze_steps=10, probe_coords=20,
                                             subsample=1500)),
    # A laptop (~70 CPU-seconds of simulation, 1.7e6 trial-steps; the clean Φ' cells of Fig. 2
    # right add 2.2e5 of them, ~10 s, on the chain engine).  n = 20 000, B = 256 (the paper's batch size),
    # condition 1000: non-private Adam beats tuned SGD ~10× at T = 1000.  ε = 1 and ε = 8; sweeps
    # at ε = 8.  B = 128 (n = 10 000, same q) would cost ~3.4× less per trial but weakens the
    # effect tested (v̂^c/Φ ∝ B/σ²): a 2-trial probe gave DP-AdamBC/DP-Adam ≈ 1.3 at ε = 1 and
    # 0.73 at ε = 8, against 0.9 and 0.5 here.
    "quick": Config(n=20000, d=50, condition=1000.0, batch_size=256, steps=1000,
                    epsilons=(1.0, 8.0), sweep_epsilon=8.0,
                    lr_grid_adam=_grid(-3, -1), lr_grid_bc=_grid(-4, -1),
                    lr_grid_dpsgd=(0.1, 0.3, 1.0, 2.0, 3.0), lr_grid_np_sgd=(0.1, 0.3, 1.0, 2.0, 3.0),
                    lr_grid_np_adam=_grid(-3, 0), gamma_ratios=(1e-3, 1e-2, 1e-1, 1.0),
                    phi_ratios=(0.0, 0.1, 0.5, 1.0, 2.0, 10.0), adam_gamma_ratios=(0.01, 0.1, 1.0, 10.0),
                    betas1=(0.8, 0.9, 0.95, 0.98), tune_trials=3, trials=32, sweep_trials=12,
                    freeze_steps=1000, freeze_record_every=10, record_every=50,
                    regime=_REGIME_QUICK, real=_REAL_QUICK, movielens=_ML_QUICK),
    # The paper's batch size B = 256, ε ∈ {1, 3, 7} and t up to 10⁴ (Tables 3–5); 6 tuning trials
    # per grid point, 100 evaluation trials (the paper: 5 runs), 32 per sweep setting.  Estimated
    # ~0.9 CPU-hours: 3.4e7 trial-steps (per-ε tuning/evaluation 1.4e7, frozen 6e6, sweeps 7.7e6,
    # DP² 2.3e6, clean Φ' 2.9e6, non-private 1.4e6) × 85 µs (fused) – 106 µs (chain engine) per
    # trial-step measured at d = 100, B = 256 on the loaded 2-core machine.
    "full": Config(n=50000, d=100, condition=1000.0, batch_size=256, steps=5000,
                   epsilons=(1.0, 3.0, 7.0), sweep_epsilon=3.0,
                   lr_grid_adam=_grid(-4, 0), lr_grid_bc=_grid(-5, -1),
                   lr_grid_dpsgd=(0.03, 0.1, 0.3, 1.0, 2.0, 3.0),
                   lr_grid_np_sgd=(0.03, 0.1, 0.3, 1.0, 2.0, 3.0), lr_grid_np_adam=_grid(-4, 0),
                   gamma_ratios=(1e-4, 1e-3, 1e-2, 1e-1, 1.0),
                   phi_ratios=(0.0, 0.04, 0.1, 0.5, 1.0, 2.0, 4.0, 10.0),
                   adam_gamma_ratios=(1e-3, 0.01, 0.1, 1.0, 10.0), betas1=(0.8, 0.9, 0.95, 0.98, 0.99),
                   tune_trials=6, trials=100, sweep_trials=32, freeze_steps=10000,
                   freeze_record_every=50, record_every=50, clean_lr_grid=_grid(-4, 0),
                   clean_sgdm_lr_grid=(0.003, 0.01, 0.03, 0.1, 0.3, 1.0),
                   regime=_REGIME_FULL, real=_REAL_FULL, movielens=_ML_FULL),
}


def run(config: Config, cache) -> dict:
    """Tune, evaluate, sweep, and record frozen moments per ε; ``{label: Result}``.

    The driver of the cell tables (:mod:`experiments.adambc_cells`): per stage, the stage's
    cells in one ``cache.run`` batch; after each tuning stage, the tuning rule's selections
    (:meth:`~.adambc_cells.Plan.select`); then the notes (:func:`settings_notes`)."""
    plan = Plan(config, cache.simulate_options)
    for stage in STAGES:
        plan.results.update(cache.run(plan.cells(stage), desc=f"adambc: {stage}"))
        if stage in (TUNE, SWEEP_TUNE):
            plan.select(stage)
    _record_notes(cache, plan)
    return {lab: plan.results[lab] for lab in labels(config)}


def _record_notes(cache, plan: Plan) -> None:
    """Save the selections, the sweeps' per-setting choices and the settings in the manifest."""
    sel = plan.selection
    ks = plan.k_sweep
    # the sweeps' per-setting choices are reported in their figures, not as edge downgrades
    tuning.record(cache, plan.saved, note="DP-Adam: lr; DP-AdamBC: lr x gamma', gamma' = "
                                          "gamma_ratio * Phi; DP-SGD, SGD, Adam: lr; DP2: lr x lr2 "
                                          "x clip2 per delay s, then the s with the lowest score")
    cache.note("sweep_selection", {"phi": sel("main", ks, "tune-phi").to_json(),
                                   "knobs": sel("main", ks, "tune-knobs").to_json(),
                                   "clean_phi": sel("main", None, "tune-clean-phi").to_json()})
    cache.note("settings", settings_notes(plan))
    cache.note("pairing", "adambc, sgdm-eq3, dpsgd and dp2 use the seed of adam; frozen-clean that "
                          "of frozen-private (same batches and noise draws per trial)")
    cache.note("eq3", "dp_sgdm with the constant t -> inf learning rate of Eq. 3 "
                      "(no per-step schedule in dp_sgdm)")


def settings_notes(plan: Plan) -> dict:
    """``notes["settings"]``: per ε of the main problem σ, Φ and the chosen settings
    (``eps<ε>``), the sweeps' choices (``sweeps``, ``clean_phi``), the non-private learning rates
    (``nonprivate``), and per other problem its size, σ, Φ and choices (:func:`_problem_notes`)."""
    cfg, results = plan.cfg, plan.results
    sel = plan.selection
    info = {}
    for k, eps in enumerate(cfg.epsilons):
        s = float(results[label(eps, "adam")].config["hyperparameters"]["noise_multiplier"])
        ph = float(dp_bias(s, cfg.clip, cfg.batch_size))
        adam, bc = sel("main", k, "tune-adam").point, sel("main", k, "tune-adambc").point
        chosen = {"adam_lr": adam["lr"], "adambc_lr": bc["lr"],
                  "adambc_gamma_ratio": bc["gamma_ratio"],
                  "dpsgd_lr": sel("main", k, "tune-dpsgd").point["lr"]}
        ratios, lrs = plan.best_per("main", k, plan.spec("main", "gamma").hp)
        info[f"eps{eps:g}"] = dict(
            noise_multiplier=s, phi=ph, **chosen,
            adambc_gamma_prime=chosen["adambc_gamma_ratio"] * ph,
            sgdm_lr_eq3=float(sgdm_equivalent_lr(chosen["adam_lr"], cfg.beta1, np.inf, ph)),
            gamma_sweep_lr={f"{r:g}": lr for r, lr in zip(ratios, lrs)},
        )
    ks = plan.k_sweep
    _, phi_lr = plan.best_per("main", ks, plan.spec("main", "phi").hp)
    _, knob_lr = plan.best_per("main", ks, plan.spec("main", "knobs").hp)
    info["sweeps"] = dict(epsilon=cfg.sweep_epsilon,
                          phi_prime_lr={f"{r:g}": lr for r, lr in zip(cfg.phi_ratios, phi_lr)},
                          knob_lr=[{**s, "lr": lr} for s, lr in zip(plan.knobs, knob_lr)],
                          dp2=plan.best_delay(ks))
    info["nonprivate"] = {f"{m}_lr": sel("main", None, "tune-" + m).point["lr"]
                          for m in ("np-sgd", "np-adam")}
    _, clean_lr = plan.best_per("main", None, plan.spec("main", "clean-phi").hp)
    info["clean_phi"] = dict(phi_ref=plan.phi_ref, phi_ref_epsilon=float(cfg.sweep_epsilon),
                             lr={f"{r:g}": lr for r, lr in zip(cfg.clean_phi_ratios, clean_lr)},
                             sgdm_lr=sel("main", None, "tune-clean-sgdm").point["lr"])
    info.update(_problem_notes(plan))
    return info


def _problem_notes(plan: Plan) -> dict:
    """The settings of the other problems that ran: size, σ, Φ and the chosen settings per ε,
    the non-private learning rates, and their premises' numbers (regime: Eq. 3's rate;
    breast_cancer: class balance, scale spread, accuracy of ``w*``; MovieLens: held-out MSEs)."""
    cfg, info = plan.cfg, {}
    for name in ("regime", "real", "movielens"):
        if name not in plan.setups:
            continue
        st = plan.setups[name]
        xc, pr = st.conf, st.data
        tuned = [m for m in ("adam", "adambc", "dpsgd")
                 if any(s.slot == "tune-" + m for s in st.plan.cells)]
        info[name] = dict(
            n=pr.n, n_test=pr.n_test, d=pr.d, batch_size=xc.batch_size, steps=xc.steps,
            d_over_b=pr.d / xc.batch_size,
            eps={f"{cfg.epsilons[k]:g}": dict(
                noise_multiplier=st.sigma[k], phi=plan.phi(name, k),
                **{f"{m}_{a}": v for m in tuned
                   for a, v in plan.selection(name, k, "tune-" + m).point.items()})
                 for k in st.ks},
            nonprivate={f"{m}_lr": plan.selection(name, None, "tune-" + m).point["lr"]
                        for m in ("np-sgd", "np-adam")})
        if name == "regime":
            info[name]["probed_coords"] = len(st.coords)
            info[name]["sgdm_lr_eq3"] = {
                f"{cfg.epsilons[k]:g}": float(sgdm_equivalent_lr(
                    plan.selection(name, k, "tune-adam").point["lr"], cfg.beta1, np.inf,
                    plan.phi(name, k)))
                for k in st.ks}
    if "real" in plan.setups:
        probs = {pp: plan.setups[pp].data for pp in ("real", "realraw")}
        info["real"]["balance"] = float(max(np.mean(probs["real"].y > 0),
                                            np.mean(probs["real"].y <= 0)))
        info["real"]["nonprivate_raw"] = {
            f"{m}_lr": plan.selection("realraw", None, "tune-" + m).point["lr"]
            for m in ("np-sgd", "np-adam")}
        info["real"]["scale_spread"] = {pp: _scale_spread(p) for pp, p in probs.items()}
        info["real"]["wstar_test_accuracy"] = {
            pp: float(p.heldout_accuracy(p.optimum[0][None, :])[0]) for pp, p in probs.items()}
    if "movielens" in plan.setups:
        ml = plan.cfg.movielens
        info["movielens"].update(subsample=ml.subsample, reg=ml.reg,
                                 probed_coords=len(plan.setups["movielens"].coords),
                                 heldout=movielens_heldout(ml))
    return info


EXPERIMENT = Experiment(
    name="adambc",
    title="DP-Adam vs DP-AdamBC ([ADAMBC]) on ill-conditioned least squares, an in-regime sparse "
          "problem (Φ ≫ v̂^c), breast_cancer and MovieLens-small: premise, moments, Eq. 3, clean Adam + Φ', γ', Φ', "
          "DP-Adam's γ and β, Props. 3–4, final loss",
    presets=PRESETS,
    run=run,
    figures=("fig_adambc_premise", "fig_adambc_regime", "fig_adambc_moments", "fig_adambc_updates",
             "fig_adambc_vs_sgdm", "fig_adambc_clean_phi", "fig_adambc_gamma", "fig_adambc_phi_prime",
             "fig_adambc_knobs", "fig_adambc_bounds", "fig_adambc_vs_adam", "fig_adambc_vs_dp2",
             "fig_adambc_real", "fig_adambc_movielens"),
    module=__name__,
    numerics=3,
)
