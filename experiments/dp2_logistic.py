"""DP² (delayed preconditioners) on a synthetic bag-of-words sentiment task standing in for IMDB,
and on real text (Trump's tweets: Android vs iPhone).

Source: Li, Zaheer, Liu, Reddi, McMahan, Smith, *Differentially Private Adaptive Optimization with
Delayed Preconditioners* (ICLR 2023) — [DP2] — §3.1 (Fig. 2), §4.1 (Fig. 3), §5.1 (Figs. 4–6),
§5.2 (Table 1), §5.3 / App. C.5 (Table 4), App. C.3 (DP²-AdaGrad).

Claims checked (one figure script each, ``paper_figures/fig_dp2_*.py``):

* Premises (``fig_dp2_premise``) — the four checks that gate every DP² verdict ("setting does not
  test the claim" when one fails), computed from the saved results: (P1) the classes are balanced
  (majority rate ≤ 0.6); (P2) the exact optimum w* classifies held-out rows at least 0.1 above the
  majority rate; (P3) non-private RMSProp reaches a significantly lower training loss than
  non-private SGD at the run length (Welch 95% CI); (P4) DP-SGD at the main σ ends significantly
  below the class-prior excess loss (the excess loss of predicting the class frequency for every
  example: a private method above it has learned nothing past the base rate).
* Fig. 1 (``fig_dp2_stability``) — preconditioner values do not change drastically during
  optimization, and DP²'s delayed preconditioner moves less than DP-RMSProp's noisy one.
* Fig. 2 — non-private RMSProp with delayed preconditioners reaches about the training loss of
  plain RMSProp (``delayed_rmsprop`` vs ``rmsprop``; SGD shown for reference).
* Fig. 3 — ``h(s)`` (§4.1) is small for every delay and increases with ``s``.
* Fig. 4 — at a fixed privacy budget DP²-RMSProp beats DP-SGD and vanilla DP-RMSProp.
* Fig. 5 — DP² is better than both baselines at every ε of a sweep.
* Fig. 6 — too small or too large a delay ``s`` is worse than a moderate one.
* Table 4 — DP² beats ablation variant 1 (``dp2_extra_query``, which spends *more* ε at the
  same σ: its ε is reported) and variant 2 (``dp2_noise_first``).
* App. C.3 — DP²-AdaGrad beats DP-AdaGrad; Fig. 9 (left) — and at every ε of the sweep.
* Table 1 — DP² is comparable to AdaDPS, which uses 1% public data (``public_fraction=0.01``).
* Real data (``fig_dp2_real_text``) — the Fig. 4 comparison on ``trump_tweets`` with its own
  premise checks.

Design
------
* Problem (:func:`problem`, :func:`make_problem`): :func:`experiments.dp2_data.bag_of_words` —
  a vocabulary of ``words`` columns with Zipf-like document frequencies (exponent ``zipf``, capped
  at ``df_max``; ``words_per_doc`` distinct words per document), entries ``1 + log k`` for a word
  counted ``k`` times (frequent words repeat), rows **not** normalized, an intercept column (the
  paper's 10⁴ + 1 parameters), a planted sentiment model on a random ``informative`` fraction of
  the words and labels drawn from the features the model sees with the threshold at the median
  margin (balanced classes), ``n`` training and ``n_test`` held-out documents, L2 ``reg``.  The
  previous stand-in (unit-norm rows, labels drawn before a column scaling, no intercept, 87.8 %
  one class) could not tell methods apart (``../shared/reviews/reproduction.md`` §2).
  Metrics: the training excess loss ``F(w) − F*`` and the paper's metric, the **held-out
  accuracy** (and held-out log-loss), recorded by every evaluation cell.
* Privacy: Poisson sampling at ``b/n``; ``δ = 10^{-k}`` with the smallest ``k`` such that
  ``10^{-k} ≤ 1/n`` (the paper's rule, §5); ε of each run from its declared releases
  (PLD accountant; the paper uses RDP).  Main comparisons at noise multiplier ``sigma`` (the
  paper's IMDB setting is σ = 1, b = 64); the ε sweep re-runs DP-SGD, DP-RMSProp, DP², DP-AdaGrad
  and DP²-AdaGrad at ``sweep_sigmas``.
* Tuning (:mod:`experiments.tuning`), each grid folded into the trial axis of one tuning cell per
  (method, σ[, s]) with ``tune_trials`` ≥ 3 trials per point; the chosen setting is then run with
  ``trials`` fresh trials in an evaluation cell (no winner's curse).  Two rules, both saved:

  - **private methods: the paper's rule** — the highest mean final *training accuracy* (the DP²
    code selects on training accuracy; here the accuracy on the whole training set at the last
    step, recorded by :func:`experiments.dp2_data.train_accuracy_probe`; stored as the score
    ``−accuracy``).  The loss rule's choices (lowest mean final training loss) are saved too
    (``notes["selection_loss"]``), and the Fig. 4 methods are also evaluated at them
    (``loss-<σ>-<method>`` cells), so the report gives the headline comparison under both rules;
  - **non-private methods** (the premise P3 and Fig. 2 are statements about training loss):
    each trial's mean training loss over the recorded steps of the second half
    (:func:`tail_losses`), so the delayed schedule's sawtooth cannot win by ending on a good phase.

  Grids (the paper's App. C.2 in ``docs``-style: learning rates {0.03…5} (SGD/AdaGrad) and
  {0.001…3} (RMSProp), clip {0.1…1}, C₂ {0.1…5} plus ≥ 10, ε_a {1e-2, 1e-3, 1e-5, 1e-7},
  s {0.5, 1, 2} epochs; ours are those ranges at full scale, thinned where a full product would
  cost too much, and subsets at quick; the table of differences is in the premise figure's
  report text):

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
  DP² setting with the best tuned score over ``s_grid`` is the "DP²" of Figs. 4–5.  The ε sweep
  re-tunes the learning rates (lr; only the adaptive-phase lr2 for DP²) at each σ and keeps clip,
  ε_a, s and DP²'s SGD-phase lr from the main σ.  The selections (choice, every grid point's score,
  choices on a grid edge) are saved in the manifest's ``notes``, and each evaluation cell's
  method, σ, delay, kind, data set and rule in its ``meta`` (:func:`cell_meta`).
* The premises' static numbers (majority rate, w*'s training and held-out accuracy, the class-prior
  excess loss: :func:`experiments.dp2_data.premise_numbers`) are saved in ``notes["premise"]``
  (``notes["premise_real"]`` for the real data), so the figures compute every premise from saved
  results.
* Diagnostic ``clip-<method>``: DP-SGD and DP² with their clipping but **no noise** (σ = 0), tuned
  the same way; DP² keeps s, C₁, C₂ and ε_a, and **re-tunes its SGD-phase η over DP-SGD's grid**
  and η₂ (DP-SGD's η is re-tuned too: the comparison is fair, review §2).
* Fig. 6: one evaluation cell per ``s ∈ s_grid`` at the setting tuned for that ``s``;
  ``h(s)`` (Fig. 3): one cell per ``s`` at DP²'s chosen setting with only ``s`` changed (every
  step recorded, :func:`analysis.delay.record_h_traces`); Fig. 1: ``stab-<method>`` cells with
  :func:`stability_probes` recorded once per epoch.
* Real data (``real_data``, default ``"trump_tweets"``; :func:`real_problem`): the balanced tweets
  with the same encoding (``1 + log k`` counts, intercept, rows not normalized), ``real_n``
  training tweets (a random subsample at quick), ``real_steps`` steps at b = ``batch_size``;
  non-private SGD and RMSProp, DP-SGD, DP-RMSProp and DP² (one cell per ``s ∈ real_s_grid``) tuned
  by the same rules on the main grids; labels ``tw-…``.
* The plan is two tables.  :func:`tuning_plan`: the tuning cells as data, in stages (a
  :class:`Stage` runs its cells at once), one :class:`Tune` row per cell — key, optimizer, tuned
  grid, fixed hyperparameters, the rule (``tail``), the problem (``Stage.real``) — with its
  dependencies on earlier stages as data: a :class:`From` value (DP²'s SGD-phase clip is
  ``From("sig1-dp_sgd", "clip")``, DP-SGD's chosen clip) or a ``base`` method (the ε sweep and the
  no-noise diagnostic start from the main σ's chosen setting, DP² at its best ``s``).
  :func:`evaluation_plan`: the evaluation cells with the settings they run.  :func:`run` is the
  driver: it resolves each stage's rows, runs them through the cache, selects, saves the notes
  and runs the evaluation cells.
* Cells and seeds: every cell label is enumerated up front from the config (:func:`cell_labels`),
  and cell ``i`` of that list runs with ``SeedSequence(config.seed, spawn_key=(i,))``.

``run(config, cache)`` returns the evaluation results, labelled ``np-<method>`` (non-private),
``sig<σ>-<method>`` (private at σ; ``sig<σ>-dp2_rmsprop`` is DP² at its tuned ``s``),
``sig<σ>-dp2_rmsprop-s<s>`` (DP² at each delay, tuned per delay), ``sig<σ>-dp2_rmsprop-s<s>-h``
(``h(s)`` traces), ``clip-<method>`` (the no-noise diagnostic), ``stab-<method>`` (Fig. 1),
``loss-sig<σ>-<method>`` (the Fig. 4 methods under the loss rule) and ``tw-…`` (real data).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

import dpsim
from dpsim.analysis import delay as _delay

from . import dp2_data, tuning
from .pipeline import (Cell, Experiment, require_nonnegative_finite, require_positive_grids,
                       require_positive_ints)

__all__ = ["Config", "PRESETS", "EXPERIMENT", "run", "cell_labels", "delta_for",
           "sigma_tag", "cell_meta", "problem", "make_problem", "real_problem", "PROBLEM_FIELDS"]


@dataclass(frozen=True)
class Config:
    """Everything the experiment's results depend on (hashed into the cache key)."""

    n: int                                   # training documents
    n_test: int                              # held-out documents
    words: int                               # vocabulary (d = words + 1: the intercept)
    words_per_doc: float                     # distinct words per document (mean)
    steps: int                               # T
    batch_size: int                          # expected batch size b (Poisson rate b/n)
    sigma: float                             # noise multiplier of the main comparisons
    sweep_sigmas: tuple[float, ...]          # noise multipliers of the ε sweep (Fig. 5)
    s_grid: tuple[int, ...]                  # delays of DP²-RMSProp (Figs. 3, 6; tuning)
    s_variants: tuple[int, ...]              # delays tried for the ablations and DP²-AdaGrad
    s_nonprivate: int                        # delay of non-private delayed RMSProp (Fig. 2)
    lr_sgd_grid: tuple[float, ...]           # SGD-type learning rates
    lr_adaptive_grid: tuple[float, ...]      # RMSProp-type learning rates
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
    h_trials: int | None = None              # trials of the h(s) trace cells (None: trials)
    zipf: float = 1.3                        # Zipf exponent of the document frequencies
    df_max: float = 0.95                     # cap of a word's document frequency
    informative: float = 0.2                 # fraction of the words carrying sentiment
    signal: float = 1.0                      # scale of the planted model
    values: str = "logcount"                 # entries: "logcount" (1 + log k) or "binary"
    reg: float = 1e-5                        # L2 regularization
    public_fraction: float = 0.01            # AdaDPS public split (Table 1: 1%)
    beta: float = 0.9                        # RMSProp β
    sampling: str = "poisson"
    real_data: str | None = "trump_tweets"   # real-data rows (None: none)
    real_n: int | None = None                # training tweets kept (None: all)
    real_n_test: int | None = None           # held-out tweets kept (None: all)
    real_steps: int = 1500                   # T on the real data
    real_s_grid: tuple[int, ...] = (100,)    # DP² delays on the real data
    real_max_features: int = 2000            # vocabulary of the real data
    real_reg: float = 1e-4                   # L2 regularization on the real data
    data_seed: int = 0
    seed: int = 0

    def __post_init__(self):
        require_positive_ints(self,
            ("n", "n_test", "words", "steps", "batch_size", "tune_trials", "trials", "record_every",
             "s_nonprivate", "tune_records", "stability_trials", "real_steps",
             "real_max_features"))
        if self.np_trials is not None and (isinstance(self.np_trials, bool)
                                           or not isinstance(self.np_trials, int) or self.np_trials < 1):
            raise ValueError("np_trials must be a positive integer or None, "
                             f"got np_trials={self.np_trials!r}")
        for name in ("real_n", "real_n_test", "h_trials"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"{name} must be a positive integer or None, got {name}={v!r}")
        if not 0 < self.words_per_doc < self.df_max * self.words:
            raise ValueError(f"words_per_doc must be in (0, df_max·words), got "
                             f"words_per_doc={self.words_per_doc!r}")
        if not 0.0 < self.df_max <= 1.0 or not 0.0 < self.informative <= 1.0:
            raise ValueError(f"df_max and informative must be in (0, 1], got df_max={self.df_max!r}, "
                             f"informative={self.informative!r}")
        if self.values not in ("logcount", "binary"):
            raise ValueError(f"values must be 'logcount' or 'binary', got values={self.values!r}")
        if self.real_data not in (None, "trump_tweets"):
            raise ValueError(f"real_data must be None or 'trump_tweets', got real_data={self.real_data!r}")
        if self.sigma <= 0 or self.sigma not in self.sweep_sigmas:
            raise ValueError(f"sigma must be positive and one of sweep_sigmas, got sigma={self.sigma}, "
                             f"sweep_sigmas={self.sweep_sigmas!r}")
        for name, top in (("s_grid", self.steps), ("s_variants", self.steps),
                          ("real_s_grid", self.real_steps)):
            v = getattr(self, name)
            if not v or any(not isinstance(s, int) or s < 1 or s >= top for s in v):
                raise ValueError(f"{name} must be positive integers below {top}, got {name}={v!r}")
        require_nonnegative_finite(self, ("reg", "real_reg", "zipf", "signal"))
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
    "tiny": Config(n=400, n_test=200, words=60, words_per_doc=6, signal=2.0, reg=1e-3, steps=40,
                   batch_size=16, sigma=1.0, sweep_sigmas=_g(1.0, 2.0), s_grid=(4, 10),
                   s_variants=(4,), s_nonprivate=5,
                   lr_sgd_grid=_g(0.1, 1), lr_adaptive_grid=_g(0.01, 0.1), lr_adagrad_grid=_g(0.1, 1),
                   dp2_lr_grid=_g(0.3), clip_grid=_g(0.5), clip2_grid=_g(1, 5), eps_grid=_g(1e-3),
                   tune_trials=1, trials=3, record_every=10, tune_records=4, stability_trials=2,
                   real_n=300, real_n_test=150, real_steps=30, real_s_grid=(5,),
                   real_max_features=200),
    # A laptop (a few CPU-minutes).  10⁴ training and 5·10³ held-out documents over a 10³-word
    # vocabulary, 20 distinct words per document (2%), Zipf 1.3 document frequencies capped at
    # 0.95, log counts, 20% sentiment words at signal 2 (the margin's spread that signal 1 gives
    # at full's 130 words per document), reg 1e-5; 10 epochs (T = 1560 at b = 64).  Probes
    # (3 trials per point, seed 0): majority 0.50, w* held-out accuracy 0.80, class-prior excess
    # 0.39; non-private RMSProp 0.032 vs SGD 0.097 (premise P3: ratio 0.33); DP-SGD 0.22 at σ = 1
    # (P4).  Grids: the paper's ranges, three or four values each, one decade or more beyond the
    # values a first quick run chose on an edge under the paper's rule (DP²: η 1, η₂ 0.3, C₂ 5,
    # ε_a 1e-3, s 39 of (0.3, 1) × (0.01–0.3) × (0.5–5) × {1e-3, 1e-7} × {39, 156, 624}; a probe
    # of η ∈ {1, 3}, η₂ ∈ {0.3, 1, 3}, C₂ ∈ {5, 20}, ε_a ∈ {1e-3, 1e-2}, s ∈ {10, 39} put the
    # best at η 1, η₂ 0.3, C₂ 5, with ε_a and s nearly flat); DP²'s SGD-phase η is fixed at that
    # probe's best (1: the one axis not tuned here, for cost); s ≈ 0.06, 0.25 and 1 epoch; the
    # clip C over the paper's 0.1–1, DP-SGD's η up to 10 (the paper's rule picked 3, the top of
    # 0.1–3, in a second run).  Real data: 4000 of the 6339 balanced training tweets (all 1585 held out),
    # 1000 steps (16 epochs), one delay.
    "quick": Config(n=10000, n_test=5000, words=1000, words_per_doc=20, signal=2.0, reg=1e-5,
                    steps=1560, batch_size=64, sigma=1.0, sweep_sigmas=_g(0.7, 1.0, 2.0),
                    s_grid=(10, 39, 156), s_variants=(39,), s_nonprivate=78,
                    lr_sgd_grid=_g(0.1, 0.3, 1, 3, 10),
                    lr_adaptive_grid=_g(0.01, 0.03, 0.1),
                    lr_adagrad_grid=_g(0.03, 0.1, 0.3, 1), dp2_lr_grid=_g(1),
                    dp2_lr2_grid=_g(0.03, 0.3, 3),
                    clip_grid=_g(0.1, 0.3, 1), clip2_grid=_g(1, 5, 20),
                    dp2_adagrad_clip2_grid=_g(0.5, 2, 5), eps_grid=_g(1e-3, 1e-2, 1e-7),
                    tune_trials=3, trials=6, record_every=78, np_trials=10, tune_records=8,
                    stability_trials=4, h_trials=3, real_n=4000, real_steps=1000,
                    real_s_grid=(31,)),
    # IMDB's sizes (25,000 training and 25,000 held-out documents, a 10⁴-word vocabulary plus the
    # intercept, ~130 distinct words per document, b = 64, δ = 1e-5) and the paper's 100 epochs
    # (T = 39,000).  Probes (seed 0, 1–2 trials per point): majority 0.50, w* held-out accuracy
    # 0.80, class-prior excess 0.58; non-private SGD 0.14 (η 0.07; 0.1 diverges) vs RMSProp 0.030
    # (η 3e-3): ratio 0.21 (P3); with reg 3e-4 or Zipf 1.0 SGD caught up by 100 epochs (P3
    # failed), hence reg 1e-5 (the DP² code's default is 0) and Zipf 1.3.  At σ = 1 (one trial
    # per point): DP-SGD η 0.1, C 1 excess 0.51 (P4, loss rule) and η 0.3, C 0.3 accuracy 0.75
    # (the paper's rule; excess 0.59, at the prior: its margins carry the noise of 10⁴
    # coordinates over rows of norm ≈ 17); DP² at s = 195, ε_a 1e-3: best η 0.3 (of 0.3, 1),
    # η₂ 0.03, C₂ 5, accuracy 0.74.  Grids: the paper's App. C.2 ranges, thinned to about a
    # factor 3–10 per step — η₂ 0.003–3, C₂ 1–20, ε_a 1e-2–1e-7, s 0.1–2 epochs, DP-SGD η
    # 0.03–3, C 0.1–2; DP²'s SGD-phase η fixed at the probe's 0.3 (for cost: a third axis over
    # every DP² cell would triple them; the paper tunes it, 0.1 on IMDB).  3 tuning trials per
    # point, 5 evaluation trials.  Cost estimate: ≈ 0.15 ms per trial-step (130 nonzeros per
    # row, d ≈ 10⁴), ≈ 1,500 trials × 39,000 steps ≈ 2.5–3 CPU-hours plus the tweets (≈ 0.1).
    "full": Config(n=25000, n_test=25000, words=10000, words_per_doc=130, signal=1.0, reg=1e-5,
                   steps=39000, batch_size=64, sigma=1.0, sweep_sigmas=_g(0.6, 1.0, 2.0),
                   s_grid=(39, 195, 390, 780), s_variants=(195,), s_nonprivate=390,
                   lr_sgd_grid=_g(0.03, 0.1, 0.3, 1, 3),
                   lr_adaptive_grid=_g(0.001, 0.01, 0.1, 1),
                   lr_adagrad_grid=_g(0.03, 0.3, 3), dp2_lr_grid=_g(0.3),
                   dp2_lr2_grid=_g(0.003, 0.03, 0.3, 3),
                   clip_grid=_g(0.1, 0.3, 1, 2), clip2_grid=_g(1, 5, 20),
                   dp2_adagrad_clip2_grid=_g(1, 5, 20), eps_grid=_g(1e-3, 1e-2, 1e-7),
                   tune_trials=3, trials=5, record_every=390, np_trials=10, tune_records=10,
                   stability_trials=5, h_trials=5, real_steps=5000, real_s_grid=(50, 100, 200)),
}


# ------------------------------------------------------------------------------------------------
# The problems

PROBLEM_FIELDS = ("n", "n_test", "words", "words_per_doc", "zipf", "df_max", "informative",
                  "signal", "values", "reg", "data_seed")


def problem_fields(scale: str) -> dict:
    """The fields of this experiment's preset of ``scale`` that define its problem
    (``PROBLEM_FIELDS``): the experiments that run on the same problem (``dp2_compute``,
    ``dp2_noisy_adagrad``) take them from here."""
    c = PRESETS[scale]
    return {f: getattr(c, f) for f in PROBLEM_FIELDS}


def delta_for(n: int) -> float:
    """The paper's δ (§5): ``10^{-k}`` with the smallest integer ``k`` such that ``10^{-k} ≤ 1/n``."""
    return 10.0 ** (-math.ceil(math.log10(n) - 1e-12))


def make_problem(config) -> "dpsim.problems.Problem":
    """The bag-of-words problem (:func:`experiments.dp2_data.bag_of_words`, held-out split
    included) from any config with the fields of ``PROBLEM_FIELDS``."""
    return dp2_data.bag_of_words(
        config.n, config.words, n_test=config.n_test, reg=config.reg,
        words_per_doc=config.words_per_doc, zipf=config.zipf, df_max=config.df_max,
        informative=config.informative, signal=config.signal, values=config.values,
        seed=config.data_seed)


def problem(scale: str = "quick") -> "dpsim.problems.Problem":
    """The experiment's problem at ``scale`` with its held-out split, so anyone can check the
    premises: ``dp2_data.premise_numbers(problem("quick"))`` gives the majority rate, the exact
    optimum's held-out accuracy and the class-prior excess loss."""
    if scale not in PRESETS:
        raise ValueError(f"unknown scale {scale!r}; known: {', '.join(PRESETS)}")
    return make_problem(PRESETS[scale])


def real_problem(config) -> "dpsim.problems.Problem | None":
    """The real-data problem of ``config`` (:func:`experiments.dp2_data.real_text`), or ``None``
    when ``config.real_data`` is ``None``."""
    if config.real_data is None:
        return None
    return dp2_data.real_text(config.real_data, n=config.real_n, n_test=config.real_n_test,
                              max_features=config.real_max_features, reg=config.real_reg,
                              values=config.values, seed=config.data_seed)


# ------------------------------------------------------------------------------------------------
# Labels


def sigma_tag(sigma: float) -> str:
    return f"sig{float(sigma):g}"


def cell_meta(method: str, sigma: float | None, *, s: int | None = None, h: bool = False,
              stability: bool = False, dataset: str | None = None,
              rule: str | None = None) -> dict:
    """The metadata saved with an evaluation cell: ``private`` (False for the ``np-`` cells),
    ``sigma`` (``None`` non-private, ``0.0`` for the clipping-only ``clip-`` diagnostic),
    ``method``, the delay ``s`` of the per-delay DP² cells, ``h`` (the h(s) trace cells),
    ``stability`` (the preconditioner-stability cells of Fig. 1), ``dataset`` (the real-data
    cells: its name) and ``rule`` (``"loss"`` for the cells tuned by the loss rule); the last
    three keys are absent when unset."""
    out = {"private": sigma is not None, "sigma": None if sigma is None else float(sigma),
           "method": method, "s": None if s is None else int(s), "h": bool(h)}
    if stability:
        out["stability"] = True
    if dataset:
        out["dataset"] = dataset
    if rule:
        out["rule"] = rule
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


NONPRIVATE = ("sgd", "rmsprop", "delayed_rmsprop")
MAIN = ("dp_sgd", "dp_rmsprop", "dp_adagrad", "dp2_extra_query", "dp2_noise_first", "dp2_adagrad",
        "adadps")
SWEEP = ("dp_sgd", "dp_rmsprop", "dp2_rmsprop", "dp_adagrad", "dp2_adagrad")
STABILITY = ("rmsprop", "dp_rmsprop", "dp2_rmsprop")
HEADLINE = ("dp_sgd", "dp_rmsprop", "dp2_rmsprop")   # Fig. 4's methods (also under the loss rule)
REAL_NONPRIVATE = ("sgd", "rmsprop")
REAL_PRIVATE = ("dp_sgd", "dp_rmsprop", "dp2_rmsprop")
REAL_PREFIX = "tw"                                  # label prefix of the real-data cells


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


def _real_tune_keys(config: Config) -> list[str]:
    if config.real_data is None:
        return []
    sg, p = sigma_tag(config.sigma), REAL_PREFIX
    return ([f"{p}-np-{m}" for m in REAL_NONPRIVATE] + [f"{p}-{sg}-dp_sgd", f"{p}-{sg}-dp_rmsprop"]
            + [f"{p}-{sg}-dp2_rmsprop-s{s}" for s in config.real_s_grid])


def _real_eval_keys(config: Config) -> list[str]:
    if config.real_data is None:
        return []
    sg, p = sigma_tag(config.sigma), REAL_PREFIX
    return [f"{p}-np-{m}" for m in REAL_NONPRIVATE] + [f"{p}-{sg}-{m}" for m in REAL_PRIVATE]


DIAGNOSTIC = ("dp_sgd", "dp2_rmsprop")


def _eval_keys(config: Config) -> list[str]:
    sg = sigma_tag(config.sigma)
    keys = [f"np-{m}" for m in NONPRIVATE] + [f"clip-{m}" for m in DIAGNOSTIC]
    keys += [f"{sg}-{m}" for m in ("dp_sgd", "dp_rmsprop", "dp2_rmsprop") + MAIN[2:]]
    keys += [f"{sg}-dp2_rmsprop-s{s}" for s in config.s_grid]
    keys += [f"{sg}-dp2_rmsprop-s{s}-h" for s in config.s_grid]
    keys += _sweep_keys(config)
    keys += [f"stab-{m}" for m in STABILITY]
    keys += [f"loss-{sg}-{m}" for m in HEADLINE]
    keys += _real_eval_keys(config)
    return keys


def cell_labels(config: Config) -> list[str]:
    """Every cell label in index order (cell ``i`` is seeded with ``spawn_key=(i,)``)."""
    tune = ([f"np-{m}" for m in NONPRIVATE] + _main_keys(config) + _sweep_keys(config)
            + [f"clip-{m}" for m in DIAGNOSTIC] + _real_tune_keys(config))
    return [f"tune-{k}" for k in tune] + _eval_keys(config)


def _final_probe(res, name) -> np.ndarray:
    """The final record of probe ``name`` per trial (non-finite → NaN)."""
    return np.asarray(res.records[name], dtype=float)[-1]


def accuracy_scores(res) -> np.ndarray:
    """The tuning score of a private cell under the paper's rule: ``−`` the final training
    accuracy per trial (lower is better, as :func:`experiments.tuning.select` wants); a trial
    whose loss diverged scores ``+inf``."""
    acc = _final_probe(res, "train_accuracy")
    loss = np.asarray(res.loss, dtype=float)[-1]
    return np.where(np.isfinite(loss) & np.isfinite(acc), -acc, np.inf)


# ------------------------------------------------------------------------------------------------
# The experiment

TEST_METRICS = ("loss", "test_loss", "test_accuracy")

RULE_NOTE = ("private cells (σ ≥ 0, the clip- diagnostic and the real data included): the paper's "
             "rule — the highest mean final training accuracy over the tuning trials (scores "
             "saved as −accuracy); the loss rule's choices (lowest mean final training loss) in "
             "notes['selection_loss'], evaluated for Fig. 4's methods in the loss- cells; "
             "non-private cells (np-*): each trial's mean training loss over the recorded steps "
             "of the second half (t ≥ T/2); DP² variants: then the delay s with the best chosen "
             "score (the smaller s on a tie)")


# ------------------------------------------------------------------------------------------------
# The tuning plan: stages of tuning cells, as data


@dataclass(frozen=True)
class From:
    """A fixed hyperparameter taken from an earlier stage's choice: ``chosen[key][name]`` (e.g.
    DP²'s SGD-phase clip is the clip chosen for DP-SGD: ``From("sig1-dp_sgd", "clip")``)."""

    key: str
    name: str


@dataclass(frozen=True)
class Tune:
    """One tuning cell ``tune-<key>``: ``optimizer`` over ``grid`` (folded into the trials,
    ``tune_trials`` per point) with ``fixed`` hyperparameters (:class:`From` values resolved).
    With ``base`` (a method of the main σ), the optimizer and the fixed hyperparameters start from
    that method's chosen setting (DP² at its best ``s``) without the ``grid`` axes, then ``fixed``
    overrides.  ``tail``: scored by :func:`tail_losses` (non-private), else by the paper's rule
    (:func:`accuracy_scores`) with the loss rule's choice kept beside."""

    key: str
    optimizer: str | None
    grid: dict
    fixed: dict = field(default_factory=dict)
    base: str | None = None
    tail: bool = False


@dataclass(frozen=True)
class Stage:
    """Tuning cells run together (one ``cache.run``); a stage may use the choices of the earlier
    ones.  ``real``: on the real-data problem with ``real_steps`` steps."""

    desc: str
    rows: tuple
    real: bool = False


#: Methods whose main-σ setting is the best of one tuning cell per delay ``s`` (the config field).
S_METHODS = (("dp2_rmsprop", "s_grid"), ("dp2_extra_query", "s_variants"),
             ("dp2_noise_first", "s_variants"), ("dp2_adagrad", "s_variants"))


def tuning_plan(config: Config) -> list[Stage]:
    """The tuning stages in order (their cells are the ``tune-`` labels of :func:`cell_labels`):
    non-private and DP-SGD; the other methods at the main σ (DP² with DP-SGD's clip); the ε sweep
    and the no-noise diagnostic (from the main σ's choices); on the real data, non-private and
    DP-SGD, then DP-RMSProp and DP² (DP²'s C₁ = DP-SGD's)."""
    sg0, sig, eps0, beta = sigma_tag(config.sigma), float(config.sigma), config.eps_grid[0], config.beta
    lr2_grid = config.dp2_lr2_grid or config.lr_adaptive_grid
    sgd, ada, adag = config.lr_sgd_grid, config.lr_adaptive_grid, config.lr_adagrad_grid
    c1 = From(f"{sg0}-dp_sgd", "clip")
    dp2_grid = {"lr": config.dp2_lr_grid, "lr2": lr2_grid, "clip2": config.clip2_grid,
                "eps": config.eps_grid}
    dp2 = {"noise_multiplier": sig, "beta": beta}
    np_rows = (Tune("np-sgd", "sgd", {"lr": sgd}, tail=True),
               Tune("np-rmsprop", "rmsprop", {"lr": ada}, {"eps": eps0, "beta": beta}, tail=True),
               Tune("np-delayed_rmsprop", "delayed_rmsprop", {"lr": sgd, "lr2": ada},
                    {"s1": config.s_nonprivate, "eps": eps0, "beta": beta}, tail=True))
    main = (
        Tune(f"{sg0}-dp_rmsprop", "dp_rmsprop", {"lr": ada, "clip": config.clip_grid,
                                                 "eps": config.eps_grid}, dict(dp2)),
        Tune(f"{sg0}-dp_adagrad", "dp_adagrad", {"lr": adag, "clip": config.clip_grid,
                                                 "eps": config.eps_grid}, {"noise_multiplier": sig}),
        *(Tune(f"{sg0}-dp2_rmsprop-s{s}", "dp2_rmsprop", dp2_grid, {"s1": s, "clip": c1, **dp2})
          for s in config.s_grid),
        *(Tune(f"{sg0}-dp2_extra_query-s{s}", "dp2_extra_query", dp2_grid,
               {"s1": s, "clip": c1, **dp2}) for s in config.s_variants),
        *(Tune(f"{sg0}-dp2_noise_first-s{s}", "dp2_noise_first",
               {"lr": config.dp2_lr_grid, "lr2": lr2_grid, "eps": config.eps_grid},
               {"s1": s, "clip": c1, "clip2": c1, **dp2}) for s in config.s_variants),
        *(Tune(f"{sg0}-dp2_adagrad-s{s}", "dp2_adagrad",
               {**dp2_grid, "lr2": adag, "clip2": config.dp2_adagrad_clip2_grid or config.clip2_grid},
               {"s1": s, "clip": c1, "noise_multiplier": sig}) for s in config.s_variants),
        Tune(f"{sg0}-adadps", "adadps", {"lr": ada, "clip": config.clip2_grid},
             {"eps": eps0, **dp2, "public_fraction": config.public_fraction}))
    # the ε sweep re-tunes the learning rates at each other σ (DP² only its adaptive-phase lr2)
    sweep_grid = {"dp_sgd": {"lr": sgd}, "dp_rmsprop": {"lr": ada}, "dp2_rmsprop": {"lr2": lr2_grid},
                  "dp_adagrad": {"lr": adag}, "dp2_adagrad": {"lr2": adag}}
    sweep = tuple(Tune(f"{sigma_tag(sw)}-{m}", None, sweep_grid[m], {"noise_multiplier": float(sw)},
                       base=m) for sw in config.sweep_sigmas if sw != config.sigma for m in SWEEP)
    # Diagnostic: the same clipping without noise (σ = 0), tuned the same way.  DP² keeps s, C₁,
    # C₂ and ε_a and re-tunes both step sizes — its SGD-phase η over DP-SGD's grid, as DP-SGD's
    # η is re-tuned (the comparison of review §2 kept DP²'s σ = 1 value, 100× below DP-SGD's).
    clip = (Tune("clip-dp_sgd", "dp_sgd", {"lr": sgd}, {"clip": c1, "noise_multiplier": 0.0}),
            Tune("clip-dp2_rmsprop", None, {"lr": sgd, "lr2": lr2_grid}, {"noise_multiplier": 0.0},
                 base="dp2_rmsprop"))
    stages = [
        Stage("dp2_logistic: tune non-private and DP-SGD",
              np_rows + (Tune(f"{sg0}-dp_sgd", "dp_sgd", {"lr": sgd, "clip": config.clip_grid},
                              {"noise_multiplier": sig}),)),
        Stage(f"dp2_logistic: tune at σ={sig:g}", main),
        Stage("dp2_logistic: tune the ε sweep and the no-noise diagnostic", sweep + clip)]
    if config.real_data is not None:
        p = REAL_PREFIX
        stages += [
            Stage(f"dp2_logistic: tune on {config.real_data} (non-private, DP-SGD)",
                  (Tune(f"{p}-np-sgd", "sgd", {"lr": sgd}, tail=True),
                   Tune(f"{p}-np-rmsprop", "rmsprop", {"lr": ada}, {"eps": eps0, "beta": beta},
                        tail=True),
                   Tune(f"{p}-{sg0}-dp_sgd", "dp_sgd", {"lr": sgd, "clip": config.clip_grid},
                        {"noise_multiplier": sig})), real=True),
            Stage(f"dp2_logistic: tune on {config.real_data} (DP-RMSProp, DP²)",
                  (Tune(f"{p}-{sg0}-dp_rmsprop", "dp_rmsprop", {"lr": ada, "clip": config.clip_grid,
                                                                "eps": config.eps_grid}, dict(dp2)),
                   *(Tune(f"{p}-{sg0}-dp2_rmsprop-s{s}", "dp2_rmsprop", dp2_grid,
                          {"s1": s, "clip": From(f"{p}-{sg0}-dp_sgd", "clip"), **dp2})
                     for s in config.real_s_grid)), real=True)]
    return stages


def _best_over_s(prefix: str, method: str, s_values, sels, chosen_) -> tuple[int, dict]:
    """The delay with the best chosen score (the smaller ``s`` on a tie) and its setting."""
    scores = {s: sels[f"{prefix}-{method}-s{s}"].score for s in s_values}
    s_best = min(scores, key=lambda s: (scores[s], s))
    return s_best, chosen_[f"{prefix}-{method}-s{s_best}"]


class _Choices:
    """The choices of the tuning stages so far: ``chosen`` / ``selections`` (the rule of each
    cell) and ``chosen_loss`` / ``selections_loss`` (the loss rule, private cells)."""

    def __init__(self, config: Config):
        self.config, self.sg0 = config, sigma_tag(config.sigma)
        self.chosen: dict[str, dict] = {}
        self.chosen_loss: dict[str, dict] = {}
        self.selections: dict[str, tuning.Selection] = {}
        self.selections_loss: dict[str, tuning.Selection] = {}

    def best(self, m: str) -> dict:
        """The main σ's setting of method ``m`` (the DP² methods at their best delay)."""
        svals = dict(S_METHODS).get(m)
        if svals is None:
            return self.chosen[f"{self.sg0}-{m}"]
        return _best_over_s(self.sg0, m, getattr(self.config, svals), self.selections,
                            self.chosen)[1]

    def resolve(self, row: Tune) -> tuple[str, dict, dict]:
        """``(optimizer, grid, fixed)`` of ``row`` with its dependencies on earlier choices."""
        fixed = {}
        opt_name = row.optimizer
        if row.base is not None:
            base = dict(self.best(row.base))
            opt_name = base.pop("optimizer")
            fixed = {k: v for k, v in base.items() if k not in row.grid}
        for k, v in row.fixed.items():
            fixed[k] = self.chosen[v.key][v.name] if isinstance(v, From) else v
        return opt_name, row.grid, fixed

    def select(self, row: Tune, opt_name: str, fixed: dict, res) -> None:
        """Apply the row's rule to its tuning cell's result ``res``."""
        key, grid, reps = row.key, row.grid, self.config.tune_trials
        if row.tail:
            sel = self.selections[key] = tuning.select(tail_losses(res), grid, reps)
        else:
            sel = self.selections[key] = tuning.select(accuracy_scores(res), grid, reps)
            sl = self.selections_loss[key] = tuning.select(res, grid, reps)
            self.chosen_loss[key] = {"optimizer": opt_name, **fixed, **sl.point}
        self.chosen[key] = {"optimizer": opt_name, **fixed, **sel.point}


def _tune_cell(config: Config, label: str, index: int, opt_name: str, grid: dict, fixed: dict,
               tail: bool, on, steps: int, options: dict) -> Cell:
    """The tuning cell ``label``: the grid folded into the trials, the training accuracy probed;
    a non-private (``tail``) cell records ``tune_records`` times for :func:`tail_losses`."""
    reps, b = config.tune_trials, config.batch_size
    hp = tuning.fold(grid, reps, scalars=True)
    R = len(tuning.points(grid)) * reps
    every = max(1, steps // config.tune_records) if tail else steps

    def compute(seed):
        opt = dpsim.optimizers.get(opt_name, **fixed, **hp)
        return dpsim.simulate(on, opt, steps=steps, batch_size=b, sampling=config.sampling,
                              trials=R, seed=seed, record_every=every, metrics=("loss",),
                              probes=dp2_data.train_accuracy_probe(on), **options)

    return Cell(label, index, compute)


def _main_choices(config: Config, ch: _Choices):
    """The main σ's settings per method (``best``; DP² variants at their best delay, delays on a
    grid edge listed) and the loss rule's settings of Fig. 4's methods (``best_loss``, ``s_loss``)."""
    sg0 = ch.sg0
    best, s_at_edge = {}, []
    for m, s_field in S_METHODS:
        svals = getattr(config, s_field)
        s_best, best[m] = _best_over_s(sg0, m, svals, ch.selections, ch.chosen)
        if len(svals) > 1 and s_best in (min(svals), max(svals)):
            s_at_edge.append(f"{sg0}-{m}")
    for m in ("dp_sgd", "dp_rmsprop", "dp_adagrad", "adadps"):
        best[m] = ch.chosen[f"{sg0}-{m}"]
    best_loss = {m: ch.chosen_loss[f"{sg0}-{m}"] for m in ("dp_sgd", "dp_rmsprop")}
    s_loss, best_loss["dp2_rmsprop"] = _best_over_s(sg0, "dp2_rmsprop", config.s_grid,
                                                    ch.selections_loss, ch.chosen_loss)
    return best, best_loss, s_loss, s_at_edge


def _real_choices(config: Config, ch: _Choices, s_at_edge: list) -> tuple[dict, int]:
    """The real data's settings (DP² at its best delay) and that delay."""
    p, sg0 = REAL_PREFIX, ch.sg0
    s_real, dp2 = _best_over_s(f"{p}-{sg0}", "dp2_rmsprop", config.real_s_grid, ch.selections,
                               ch.chosen)
    real_best = {f"{p}-np-{m}": ch.chosen[f"{p}-np-{m}"] for m in REAL_NONPRIVATE}
    real_best[f"{p}-{sg0}-dp_sgd"] = ch.chosen[f"{p}-{sg0}-dp_sgd"]
    real_best[f"{p}-{sg0}-dp_rmsprop"] = ch.chosen[f"{p}-{sg0}-dp_rmsprop"]
    real_best[f"{p}-{sg0}-dp2_rmsprop"] = dp2
    if len(config.real_s_grid) > 1 and s_real in (min(config.real_s_grid), max(config.real_s_grid)):
        s_at_edge.append(f"{p}-{sg0}-dp2_rmsprop")
    return real_best, s_real


# ------------------------------------------------------------------------------------------------
# The evaluation plan


def evaluation_plan(config: Config, chosen: dict, best: dict, best_loss: dict,
                    real_best: dict) -> list[tuple]:
    """The evaluation cells as ``(label, setting, meta, kind)`` in label order (the evaluation
    labels of :func:`cell_labels`); ``kind``: ``"main"`` (the bag-of-words problem),
    ``"stability"`` (:func:`stability_cell`) or ``"real"`` (the real data)."""
    sg0, sig = sigma_tag(config.sigma), float(config.sigma)
    rows = [(f"np-{m}", chosen[f"np-{m}"], cell_meta(m, None), "main") for m in NONPRIVATE]
    rows += [(f"clip-{m}", chosen[f"clip-{m}"], cell_meta(m, 0.0), "main") for m in DIAGNOSTIC]
    rows += [(f"{sg0}-{m}", best[m], cell_meta(m, sig), "main")
             for m in ("dp_sgd", "dp_rmsprop", "dp2_rmsprop") + MAIN[2:]]
    rows += [(f"{sg0}-dp2_rmsprop-s{s}", chosen[f"{sg0}-dp2_rmsprop-s{s}"],
              cell_meta("dp2_rmsprop", sig, s=s), "main") for s in config.s_grid]
    rows += [(f"{sg0}-dp2_rmsprop-s{s}-h", {**best["dp2_rmsprop"], "s1": s},
              cell_meta("dp2_rmsprop", sig, s=s, h=True), "main") for s in config.s_grid]
    rows += [(f"{sigma_tag(sw)}-{m}", chosen[f"{sigma_tag(sw)}-{m}"], cell_meta(m, sw), "main")
             for sw in config.sweep_sigmas if sw != config.sigma for m in SWEEP]
    stab = {"rmsprop": chosen["np-rmsprop"], "dp_rmsprop": best["dp_rmsprop"],
            "dp2_rmsprop": best["dp2_rmsprop"]}
    rows += [(f"stab-{m}", stab[m], cell_meta(m, sig if m != "rmsprop" else None, stability=True),
              "stability") for m in STABILITY]
    rows += [(f"loss-{sg0}-{m}", best_loss[m], cell_meta(m, sig, rule="loss"), "main")
             for m in HEADLINE]
    rows += [(key, hp, cell_meta(hp["optimizer"], None if "-np-" in key else sig,
                                 dataset=config.real_data), "real") for key, hp in real_best.items()]
    return rows


def _eval_cell(config: Config, key: str, index: int, hp: dict, meta: dict, *, on, steps: int,
               every: int, options: dict) -> Cell:
    """An evaluation cell: ``hp`` (with ``"optimizer"``) on fresh seeds, the held-out metrics
    recorded; the ``h(s)`` cells record DP²'s traces alone (:func:`analysis.delay.record_h_traces`)."""
    hp = dict(hp)
    opt_name = hp.pop("optimizer")
    b = config.batch_size
    trials = config.np_trials if not meta["private"] and config.np_trials else config.trials
    if meta["h"] and config.h_trials:
        trials = config.h_trials

    def compute(seed):
        if meta["h"]:
            s = int(hp.pop("s1"))
            # the traces alone (h needs no loss: the loss of every step on every training
            # row was 90% of such a cell's cost)
            tr = _delay.record_h_traces(on, s, steps=steps, batch_size=b, trials=trials,
                                        seed=seed, optimizer=opt_name, sampling=config.sampling,
                                        metrics=(), **hp)
            return tr.result
        opt = dpsim.optimizers.get(opt_name, **hp)
        return dpsim.simulate(on, opt, steps=steps, batch_size=b, sampling=config.sampling,
                              trials=trials, seed=seed, record_every=every,
                              metrics=TEST_METRICS, **options)

    return Cell(key, index, compute, meta)


def _note_choices(cache, config: Config, ch: _Choices, best: dict, best_loss: dict, s_loss: int,
                  s_real, s_at_edge: list, real) -> None:
    """The selections and choices saved in the manifest's notes (the figures read them)."""
    sg0 = ch.sg0
    tuning.record(cache, ch.selections, note=RULE_NOTE)
    cache.note("selection_loss", {k: v.to_json() for k, v in ch.selections_loss.items()})
    cache.note("delta", delta_for(config.n))
    cache.note("delta_real", delta_for(real.n) if real is not None else None)
    cache.note("chosen", ch.chosen)
    cache.note("chosen_loss", {f"loss-{sg0}-{m}": hp for m, hp in best_loss.items()})
    cache.note("chosen_s", {m: int(best[m]["s1"]) for m in best if "s1" in best[m]})
    cache.note("chosen_s_loss", {"dp2_rmsprop": int(s_loss)})
    if real is not None:
        cache.note("chosen_s_real", {"dp2_rmsprop": int(s_real)})
    cache.note("s_at_grid_edge", s_at_edge)


def run(config: Config, cache) -> dict:
    """Tune every method, then evaluate the chosen settings; ``{label: Result}`` (see module doc).

    The driver of :func:`tuning_plan` and :func:`evaluation_plan`: each tuning stage's rows are
    resolved against the earlier choices, run at once, and selected; then the evaluation cells."""
    prob, real = make_problem(config), real_problem(config)
    index = {lab: i for i, lab in enumerate(cell_labels(config))}
    T, b = config.steps, config.batch_size
    options = dict(cache.simulate_options)  # read here: a cell's compute must not capture the cache
    cache.note("premise", dp2_data.premise_numbers(prob))
    cache.note("problem", {k: v for k, v in prob.config.items() if k != "data_sha256"})
    if real is not None:
        cache.note("premise_real", dp2_data.premise_numbers(real))
        cache.note("problem_real", {k: v for k, v in real.config.items() if k != "data_sha256"})

    ch = _Choices(config)
    for stage in tuning_plan(config):
        on, steps = (real, config.real_steps) if stage.real else (prob, T)
        resolved = [(row, *ch.resolve(row)) for row in stage.rows]
        res = cache.run([_tune_cell(config, f"tune-{row.key}", index[f"tune-{row.key}"], opt_name,
                                    grid, fixed, row.tail, on, steps, options)
                         for row, opt_name, grid, fixed in resolved], desc=stage.desc)
        for row, opt_name, _, fixed in resolved:
            ch.select(row, opt_name, fixed, res[f"tune-{row.key}"])

    best, best_loss, s_loss, s_at_edge = _main_choices(config, ch)
    real_best, s_real = _real_choices(config, ch, s_at_edge) if real is not None else ({}, None)
    _note_choices(cache, config, ch, best, best_loss, s_loss, s_real, s_at_edge, real)

    cells = []
    for key, hp, meta, kind in evaluation_plan(config, ch.chosen, best, best_loss, real_best):
        if kind == "stability":
            cells.append(stability_cell(key, index[key], prob, hp, meta, steps=T, batch_size=b,
                                        trials=config.stability_trials,
                                        every=max(1, round(config.n / b)),
                                        sampling=config.sampling, options=options))
        elif kind == "real":
            cells.append(_eval_cell(config, key, index[key], hp, meta, on=real,
                                    steps=config.real_steps,
                                    every=max(1, config.real_steps // 20), options=options))
        else:
            cells.append(_eval_cell(config, key, index[key], hp, meta, on=prob, steps=T,
                                    every=config.record_every, options=options))
    return cache.run(cells, desc="dp2_logistic: evaluate")


EXPERIMENT = Experiment(
    name="dp2_logistic",
    title="DP² (delayed preconditioners) vs DP-SGD, DP-RMSProp, ablations and AdaDPS on a "
          "balanced bag-of-words sentiment task and on real tweets ([DP2])",
    presets=PRESETS,
    run=run,
    figures=("fig_dp2_premise", "fig_dp2_stability", "fig_dp2_delayed_vs_plain", "fig_dp2_h_of_s",
             "fig_dp2_curves", "fig_dp2_eps_sweep", "fig_dp2_effect_of_s", "fig_dp2_ablations",
             "fig_dp2_adagrad", "fig_dp2_adagrad_eps_sweep", "fig_dp2_adadps",
             "fig_dp2_real_text"),
    module=__name__,
    numerics=2,
)
