"""The DP-Adam design space of [DESIGN] (Ganesh, McMahan, Thakurta, *On Design Principles for
Private Adaptive Optimizers*, 2025) on synthetic convex tasks.

**Almost every formula and most experimental settings of [DESIGN] were lost in the text
extraction dpsim works from; the settings below are RECONSTRUCTED (ALGORITHMS.md §4.3, §5 item 4)
and so are the claims' quantitative forms.**  Four parts (one figure each):

(a) ``ada-*`` — the 1-D sparse logistic regression AdaGrad table ([DESIGN] §5.1, its Fig. 2
    table): :func:`dpsim.problems.sparse_logistic_1d` (``n`` samples, a fraction ``zero_fraction``
    of inputs zeroed, ``w* = 1``), batch 1, a **single pass** over the data (``sampling =
    "cyclic_poisson:<n>"``: ``n`` groups of one example, step ``t`` takes example ``t − 1``; each
    example takes part exactly once), and, as in the paper, **DP-MF noise optimized for
    single-epoch training**: ``noise = "banded:<n>"``, the lower-triangular Toeplitz strategy with
    all ``n`` bands optimized for prefix-sum RMSE (:mod:`dpsim.privacy.mf`; the paper optimizes
    an unconstrained matrix — the optimized Toeplitz strategy is the closest dpsim has, and its
    prefix-sum RMSE, 3.05 for ``n = 1000``, is below the square-root factorization's 3.10).  Every
    private method then spends one Gaussian mechanism at σ (single participation): the same ε.
    Methods: non-private ``adagrad``; post-processing ``dp_adagrad``; independent moment
    estimation ``ime_adagrad`` (the paper's winning row; :mod:`dpsim.optimizers.ime`) and
    its "for free" comparator ``ime_adagrad_free`` (two releases at σ: larger ε, reported);
    scale-then-privatize ``dp_adam_stp(base="adagrad")`` and the noiseless-preconditioner oracle
    ``dp_adam_stp_noiseless_v(base="adagrad")``.  Metric: population test loss
    ``problem.test_loss(w_T)`` (a probe).
(b) ``neg-d<d>`` — fraction of coordinates with a negative bias-corrected second moment
    ``v̂_t − Φ < 0`` for ``dp_adam_corrected`` as the dimension ``d`` grows ([DESIGN] §4.4.1 and
    Fig. 4 analogue), on :func:`dpsim.problems.linear_box` with ``scales="ones", bias=1``: every
    per-example gradient is the same ±1 vector, clipped to norm ``C``, so ``ḡ_j² = C²/d`` — exactly
    the *optimistic* regime of :func:`analysis.bias.negative_fraction`, whose prediction the figure
    overlays.  The probe reads ``AdamState(m, v, count)`` and returns the fraction of coordinates
    with ``v − (1 − β2^t) Φ < 0`` (same sign as ``v̂ − Φ``).  Not tuned (``lr`` is tiny on purpose).
    ``neg-pess-d<d>`` simulates the *pessimistic* instance beside it (for every ``d`` of
    ``neg_dims`` that is a multiple of ``neg_batch_size`` b): the b per-example clipped gradients
    are orthogonal with ``‖ḡ‖² = C²/b`` spread evenly, ``ḡ_j² = C²/(bd)``.  Built with
    :func:`dpsim.problems.from_data`: ``n = b`` rows with disjoint blocks of ``d/b`` coordinates
    (entries ``R/√(d/b)``, ``‖x_i‖ = R = 10 C``), squared loss with labels ``−1``, so at the
    (tiny-``lr``) iterates ``w ≈ 0`` the per-example gradient ``(x_i·w + 1) x_i`` has norm ≈ R > C
    and is clipped to exactly ``C x_i/R``; ``sampling="fixed"`` with ``batch_size = n = b`` puts
    every row in every batch.  Its privacy is whatever that spends (``q = 1``), reported.
(c) ``var-<noise>-<method>`` — every DP-Adam variant (post-processing, bias correction two ways,
    IME, scale-then-privatize), DP-SGD and the noiseless-preconditioner oracles on sparse
    high-dimensional logistic regression, with three noise settings matched as [DESIGN] §5.2
    matches them:

    * ``gaussian`` — i.i.d. Gaussian, Poisson sampling, σ calibrated to ``var_target_epsilon``;
    * ``bandmf`` — DP-BandMF (``banded:<var_bands>``) under cyclic Poisson sampling with
      ``var_bands`` groups (amplified, :mod:`dpsim.privacy.mf`), σ calibrated to the **same ε**;
    * ``gaussian_rmse`` — i.i.d. Gaussian whose prefix-sum RMSE equals BandMF's,
      ``σ = σ_MF · RMSE(banded)/RMSE(identity)`` (its ε is whatever that σ spends, reported);
      only the private methods (no oracles) to keep the run short.

    The problem has a held-out split (``var_test_n`` rows of the same generator: the first
    ``var_n`` rows of a ``var_n + var_test_n``-row draw train, the rest are held out; rows are
    exchangeable, so this is an i.i.d. test set) and the evaluation cells record the held-out loss
    and accuracy (``metrics=("loss", "test_loss", "test_accuracy")``): [DESIGN] §5.2 reports the
    test loss.  Tuning stays on the final training loss.

    Non-private Adam and SGD on the same problem are the **premise** (does adaptivity help here
    at all?), and the final fraction of negative ``v̂ − Φ`` of corrected DP-Adam (a probe of its
    evaluation cell) says whether the setting is in the paper's high-dimensional regime.
(d) ``quad-<method>`` — the 2-D quadratic of [DESIGN] §4.1, :func:`dpsim.problems.quadratic_2d`,
    trajectories (probes ``w1``, ``w2``) of non-private Adam, post-processing DP-Adam,
    scale-then-privatize and the noiseless-preconditioner oracles.

**Tuning** (parts a, c, d): every method's learning rate **and every stability constant** it has
(AdaGrad/Adam ``eps`` — on the quadratic too, ``quad_eps_grid`` —, DP-AdamBC's floor
``gamma_prime``, scale-then-privatize's ``eps_scale``, both for the STP oracle) and, for private
scale-then-privatize, its **clip norm** (re-tuned as [DESIGN] §5.2 does, "since we are no longer
clipping in the ℓ2-norm": ``var_stp_clip_grid``, ``quad_stp_clip_grid``, with its own ε_s grid
``var_stp_eps_scale_grid`` reaching ε_s = 10, where STP degenerates into post-processing) form a
grid folded into the trial axis of one *tuning* cell
(``tune-<label>``, ``*_tune_trials`` ≥ 3 trials per grid point); the point with the lowest mean
final *training* loss is chosen (:mod:`experiments.tuning`, saved under the tuning cell's label,
grid-edge status included).  The chosen point then runs in a separate *evaluation* cell
(``<label>``, ``*_eval_trials`` trials) whose seed is never used for tuning; the figures report
the evaluation cells only (their ``meta["tuned_by"]`` names the selection).  Scale-then-
privatize's Adam ``eps`` stays at its default in the private STP runs: the released gradient
carries noise of scale ``σC(√v + ε_s)/b``, so ``v̂`` never falls near ``eps²`` and ``eps_scale`` is
the stability constant that matters.  The STP oracle's ``v`` is noiseless, so a coordinate whose
clean gradient stays 0 keeps ``v = 0`` and is divided by ``eps`` alone: its ``eps`` is tied to
``eps_scale`` (one tuned axis, ``ε_a = ε_s``, to keep the grid affordable).  Scale-then-privatize
has its own learning-rate grid in part (c) (``var_stp_lr_grid``): its update scale differs from
Adam's by the clipping of the scaled gradients.  Clip and ``ε_s`` interact (the clipped object
is ``g/(√v + ε_s)``; with every scaled gradient clipped, Adam's normalization cancels ``C``), so
they are tuned jointly.  The oracles keep the fixed clip (``var_clip``, ``quad_clip``); the
non-private premise Adam has its own ``eps`` grid (``var_premise_eps_grid``).  In the 1-D table, STP over AdaGrad with the DP-MF noise
diverges at every grid point (its noise scales with ``√v``, so ``v`` grows geometrically when
``σC/b = 1``); the table says so instead of dropping the row.

**The plan is a table** (:func:`plan`): one :class:`Setting` row per tuned setting (label,
optimizer, tuned grid, fixed hyperparameters, problem, simulate settings, tuning and evaluation
trials, probes, metadata), built from the method tables above (:data:`ADA_METHODS`,
:data:`VARIANTS`, :data:`QUAD_METHODS`) by one small function per part, and one :class:`Untuned`
row per negative-fraction cell of part (b).  Problems are built once per run (``_problems``).
:func:`run` is the driver: it turns the rows into cells, runs the tuning phase, selects, runs the
evaluation phase and the pessimistic cells, and writes the notes.  Cells are enumerated in a fixed
order (index = position: all tuning and untuned cells in the order of the rows, then the
evaluation cells, then the pessimistic negative-fraction cells, added last so that the earlier
cells keep their indices); cell ``i`` runs with ``SeedSequence(config.seed, spawn_key=(i,))``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

import dpsim
from dpsim.privacy import mf
from dpsim.transforms import lookup

from . import tuning
from .pipeline import Cell, Experiment, require_positive_grids, require_positive_ints

__all__ = ["Config", "PRESETS", "EXPERIMENT", "run", "ADA_METHODS", "VARIANTS", "QUAD_METHODS",
           "VAR_NOISES", "VAR_EVAL_METRICS", "var_sigma", "var_noise_settings", "var_problem",
           "var_heldout_summary",
           "pessimistic_dims", "pessimistic_problem"]

# (label, optimizer name, fixed hyperparameters, private, stability constants tuned)
ADA_METHODS = (
    ("adagrad", "adagrad", {}, False, ("eps",)),
    ("dp_adagrad", "dp_adagrad", {}, True, ("eps",)),
    ("ime", "ime_adagrad", {}, True, ("eps",)),
    ("ime_free", "ime_adagrad_free", {}, True, ("eps",)),
    ("stp", "dp_adam_stp", {"base": "adagrad"}, True, ("eps_scale",)),
    ("stp_noiseless_v", "dp_adam_stp_noiseless_v", {"base": "adagrad"}, True, ("eps_scale",)),
)
# (label, optimizer name, stability constants tuned, private (not an oracle))
VARIANTS = (
    ("dp_sgd", "dp_sgd", (), True),
    ("dp_adam", "dp_adam", ("eps",), True),
    ("dp_adam_corrected", "dp_adam_corrected", ("eps",), True),
    ("dp_adam_bc", "dp_adam_bc", ("gamma_prime",), True),
    ("dp_adam_ime", "dp_adam_ime", ("eps",), True),
    ("dp_adam_stp", "dp_adam_stp", ("eps_scale", "clip"), True),
    ("dp_adam_noiseless_v", "dp_adam_noiseless_v", ("eps",), False),
    ("dp_adam_stp_noiseless_v", "dp_adam_stp_noiseless_v", ("eps_scale",), False),  # ε_a = ε_s
)
#: The noise settings of part (c): tag → how it is matched (the figures' legends).
VAR_NOISES = ("gaussian", "bandmf", "gaussian_rmse")
# (label, optimizer name, fixed hyperparameters, stability constants tuned)
QUAD_METHODS = (
    ("adam", "adam", {}, ("eps",)),
    ("dp_adam", "dp_adam", {}, ("eps",)),
    ("dp_adam_noiseless_v", "dp_adam_noiseless_v", {}, ("eps",)),
    ("dp_adam_stp", "dp_adam_stp", {}, ("eps_scale", "clip")),
    ("dp_adam_stp_noiseless_v", "dp_adam_stp_noiseless_v", {}, ("eps_scale",)),
)


@dataclass(frozen=True)
class Config:
    """Everything the experiment's results depend on (hashed into the cache key)."""

    # (a) 1-D AdaGrad table
    ada_n: int
    ada_zero_fractions: tuple[float, ...]
    ada_lr_grid: tuple[float, ...]
    ada_eps_grid: tuple[float, ...]
    ada_eps_scale_grid: tuple[float, ...]
    ada_tune_trials: int
    ada_eval_trials: int
    # (b) negative fraction
    neg_dims: tuple[int, ...]
    neg_batch_size: int
    neg_steps: int
    neg_trials: int
    # (c) variants
    var_n: int
    var_test_n: int                      # held-out rows of part (c) (same generator)
    var_d: int
    var_density: float
    var_steps: int
    var_batch_size: int
    var_lr_grid: tuple[float, ...]
    var_stp_lr_grid: tuple[float, ...]
    var_sgd_lr_grid: tuple[float, ...]
    var_eps_grid: tuple[float, ...]
    var_eps_scale_grid: tuple[float, ...]
    var_tune_trials: int
    var_eval_trials: int
    # (d) quadratic
    quad_steps: int
    quad_batch_size: int
    quad_lr_grid: tuple[float, ...]
    quad_eps_scale_grid: tuple[float, ...]
    quad_tune_trials: int
    quad_eval_trials: int
    # shared
    ada_clip: float = 1.0
    ada_noise_multiplier: float = 1.0
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
    # stability constants and clip norms tuned on top of the required grids (module docstring)
    var_stp_eps_scale_grid: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0)  # private STP
    var_stp_clip_grid: tuple[float, ...] = (0.1, 1.0, 10.0)     # private STP's clip (re-tuned)
    var_premise_eps_grid: tuple[float, ...] = (1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0)  # non-private Adam
    quad_eps_grid: tuple[float, ...] = (1e-8, 1e-3, 1e-2, 0.1, 1.0)  # Adam's ε (not STP's)
    quad_stp_clip_grid: tuple[float, ...] = (2.0, 20.0, 200.0)  # private STP's clip (re-tuned)
    data_seed: int = 0
    seed: int = 0

    def __post_init__(self):
        require_positive_ints(self,
            ("ada_n", "neg_batch_size", "neg_steps", "neg_trials", "var_n", "var_test_n", "var_d",
             "var_steps",
             "var_batch_size", "var_eval_trials", "ada_eval_trials", "quad_steps",
             "quad_batch_size", "quad_eval_trials", "var_bands"))
        for name in ("ada_tune_trials", "var_tune_trials", "quad_tune_trials"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 3:
                raise ValueError(f"{name} must be an integer >= 3 (at least 3 tuning trials per "
                                 f"grid point), got {name}={v!r}")
        if not all(0.0 <= z < 1.0 for z in self.ada_zero_fractions) or not self.ada_zero_fractions:
            raise ValueError(f"ada_zero_fractions must be in [0, 1), got {self.ada_zero_fractions!r}")
        require_positive_grids(self,
            ("ada_lr_grid", "ada_eps_grid", "ada_eps_scale_grid", "var_lr_grid", "var_stp_lr_grid",
             "var_sgd_lr_grid", "var_eps_grid", "var_eps_scale_grid", "quad_lr_grid",
             "quad_eps_scale_grid", "var_stp_eps_scale_grid", "var_stp_clip_grid",
             "var_premise_eps_grid", "quad_eps_grid", "quad_stp_clip_grid"))
        if not self.neg_dims or any(int(d) < 1 for d in self.neg_dims):
            raise ValueError(f"neg_dims must be positive integers, got {self.neg_dims!r}")
        if self.var_bands > self.var_steps:
            raise ValueError(f"var_bands must be at most var_steps={self.var_steps}, "
                             f"got var_bands={self.var_bands}")


def _pow2(lo: int, hi: int, step: int = 1) -> tuple[float, ...]:
    return tuple(float(2.0 ** k) for k in range(lo, hi + 1, step))


PRESETS: dict[str, Config] = {
    # Smoke test only (seconds): the claims are not expected to hold at this size.
    "tiny": Config(ada_n=60, ada_zero_fractions=(0.5,), ada_lr_grid=(0.1, 1.0),
                   ada_eps_grid=(0.1,), ada_eps_scale_grid=(1.0,), ada_tune_trials=3,
                   ada_eval_trials=3,
                   neg_dims=(10, 1000), neg_batch_size=10, neg_steps=20, neg_trials=2,
                   var_n=200, var_test_n=100, var_d=100, var_density=0.05, var_steps=10, var_batch_size=20,
                   var_lr_grid=(0.1, 1.0), var_stp_lr_grid=(0.01, 0.1), var_sgd_lr_grid=(1.0,),
                   var_eps_grid=(1e-2,),
                   var_eps_scale_grid=(1.0,), var_tune_trials=3, var_eval_trials=3, var_bands=2,
                   quad_steps=20, quad_batch_size=5, quad_lr_grid=(0.1,), quad_eps_scale_grid=(1.0,),
                   quad_tune_trials=3, quad_eval_trials=3, neg_record_every=5, quad_record_every=5,
                   var_stp_eps_scale_grid=(1.0,), var_stp_clip_grid=(0.1, 1.0),
                   var_premise_eps_grid=(1e-3,), quad_eps_grid=(1e-8, 0.1),
                   quad_stp_clip_grid=(20.0,)),
    # A laptop: ~75 CPU-seconds of simulation (cells' CPU time, measured on the loaded 2-core
    # machine: ada 11 s, neg 3 s, var 26 s + STP with its clip tuned 21 s, quad 1 s plus a one-time
    # Numba compile of the fused Adam kernel with per-trial ε, ~12 s, when its cache is cold).
    "quick": Config(ada_n=1000, ada_zero_fractions=(0.5, 0.9), ada_lr_grid=_pow2(-5, 4),
                    ada_eps_grid=(1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0),
                    ada_eps_scale_grid=(0.01, 0.1, 1.0),
                    ada_tune_trials=3, ada_eval_trials=30,
                    neg_dims=(10, 100, 1000, 3000, 10000, 30000), neg_batch_size=50, neg_steps=300,
                    neg_trials=2,
                    var_n=2000, var_test_n=1000, var_d=2000, var_density=0.01, var_steps=200, var_batch_size=50,
                    var_lr_grid=_pow2(-8, 2, 2), var_stp_lr_grid=_pow2(-10, 0, 2),
                    var_sgd_lr_grid=_pow2(-4, 6, 2), var_eps_grid=(1e-3, 1e-2, 1e-1, 1.0, 10.0),
                    var_eps_scale_grid=(1e-6, 1e-5, 1e-4, 1e-3, 1e-2),
                    var_tune_trials=3, var_eval_trials=8,
                    quad_steps=300, quad_batch_size=10, quad_lr_grid=_pow2(-8, -1),
                    quad_eps_scale_grid=(1e-3, 1e-2, 1e-1, 1.0), quad_tune_trials=4,
                    quad_eval_trials=16, var_premise_eps_grid=(1e-8, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2),
                    quad_eps_grid=(1e-8, 1e-3, 1e-2, 0.1, 1.0, 10.0)),
    # The paper's sizes where known (30 trials for the 1-D table); ≥ 4 tuning trials per grid point.
    # Estimated ~0.9 CPU-hours (trial-steps counted from the grids × per-trial-step CPU measured at
    # this size on the loaded 2-core machine): ada 2.0e7 × 5 µs ≈ 100 s; neg 5.8e8 coordinate-steps
    # × 0.1 µs ≈ 60 s; var 6.4e6 × ~290 µs (220–480 µs by method and noise, d = 5000, B = 100)
    # ≈ 1900 s; private STP with ε_s × clip tuned 4.4e6 × ~290 µs ≈ 1300 s; quad ≈ 10 s.
    "full": Config(ada_n=1000, ada_zero_fractions=(0.0, 0.5, 0.8, 0.9, 0.95),
                   ada_lr_grid=_pow2(-7, 5), ada_eps_grid=(1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1e3),
                   ada_eps_scale_grid=(1e-3, 0.01, 0.1, 1.0), ada_tune_trials=8, ada_eval_trials=30,
                   neg_dims=(10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000), neg_batch_size=100,
                   neg_steps=1000, neg_trials=4,
                   var_n=10000, var_test_n=5000, var_d=5000, var_density=0.01, var_steps=1000, var_batch_size=100,
                   var_lr_grid=_pow2(-10, 3), var_stp_lr_grid=_pow2(-12, 0),
                   var_sgd_lr_grid=_pow2(-4, 7), var_eps_grid=(1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0),
                   var_eps_scale_grid=(1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1),
                   var_stp_eps_scale_grid=(1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0),
                   var_stp_clip_grid=(0.03, 0.1, 1.0, 10.0),
                   var_premise_eps_grid=(1e-8, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1),
                   quad_eps_grid=(1e-8, 1e-3, 1e-2, 0.1, 1.0, 10.0), var_tune_trials=4,
                   var_eval_trials=20, neg_beta2=0.999, var_bands=16,
                   quad_steps=1000, quad_batch_size=10, quad_lr_grid=_pow2(-9, 0),
                   quad_eps_scale_grid=(1e-3, 1e-2, 0.1, 1.0), quad_tune_trials=10,
                   quad_eval_trials=30),
}


# ------------------------------------------------------------------------------------------------
# grids and noise settings


def _grid(lr_grid, stab: dict) -> dict:
    """The tuning grid of one setting: ``lr`` then its stability constants (grid order)."""
    return {"lr": tuple(lr_grid), **{k: tuple(v) for k, v in stab.items()}}


def var_sigma(config: Config) -> float:
    """σ of part (c)'s ``gaussian`` setting: i.i.d. noise, Poisson sampling, calibrated to
    ``var_target_epsilon`` at ``var_delta``."""
    return float(dpsim.accounting.noise_multiplier(
        config.var_target_epsilon, config.var_delta, config.var_batch_size / config.var_n,
        config.var_steps))


def var_noise_settings(config: Config) -> dict[str, dict]:
    """The three noise settings of part (c): ``{tag: {noise, sampling, sigma, matched}}``.

    * ``gaussian``: σ from :func:`var_sigma` (ε = ``var_target_epsilon``);
    * ``bandmf``: ``banded:k`` (k = ``var_bands``) under ``cyclic_poisson:k``; amplified BandMF is
      dominated by DP-SGD with rate ``q_k = b k / n`` over ``⌈T/k⌉`` steps (:mod:`dpsim.privacy.mf`),
      so σ is calibrated to the same ε with those;
    * ``gaussian_rmse``: i.i.d. noise with ``σ = σ_MF · RMSE(banded:k)/RMSE(identity)`` over ``T``
      steps (:func:`dpsim.privacy.mf.toeplitz_prefix_rmse`), the prefix-sum error of BandMF.
    """
    n, b, T, k = config.var_n, config.var_batch_size, config.var_steps, config.var_bands
    if b * k > n:
        raise ValueError(f"cyclic Poisson with var_bands={k} groups needs var_batch_size·var_bands "
                         f"<= var_n, got {b}·{k} > {n}")
    sig_g = var_sigma(config)
    sig_mf = float(dpsim.accounting.noise_multiplier(
        config.var_target_epsilon, config.var_delta, b * k / n, -(-T // k)))
    rmse_mf = mf.toeplitz_prefix_rmse(mf.toeplitz_coefficients(f"banded:{k}", T), T)
    rmse_id = mf.toeplitz_prefix_rmse([1.0], T)
    return {
        "gaussian": dict(noise="gaussian", sampling="poisson", sigma=sig_g, matched="epsilon",
                         prefix_rmse=sig_g * rmse_id),
        "bandmf": dict(noise=f"banded:{k}", sampling=f"cyclic_poisson:{k}", sigma=sig_mf,
                       matched="epsilon", prefix_rmse=sig_mf * rmse_mf),
        "gaussian_rmse": dict(noise="gaussian", sampling="poisson",
                              sigma=sig_mf * rmse_mf / rmse_id, matched="prefix-sum RMSE",
                              prefix_rmse=sig_mf * rmse_mf),
    }


#: What part (c)'s evaluation cells record: the training loss and the held-out loss and accuracy.
VAR_EVAL_METRICS = ("loss", "test_loss", "test_accuracy")


def var_problem(config: Config):
    """Part (c)'s sparse logistic regression with its held-out split: one draw of
    ``var_n + var_test_n`` rows from :func:`dpsim.problems.logistic_regression` (one planted
    ``w_true``), the first ``var_n`` rows for training and the rest held out
    (:func:`dpsim.problems.from_data`; the generator's rows are exchangeable)."""
    n = config.var_n
    gen = dpsim.problems.logistic_regression(n + config.var_test_n, config.var_d,
                                             density=config.var_density, seed=config.data_seed)
    name = (f"logistic_regression(n={n}+{config.var_test_n} held out, d={config.var_d}, "
            f"density={config.var_density:g}, seed={config.data_seed})")
    return dpsim.problems.from_data(gen.X[:n], gen.y[:n], loss="logistic", reg=gen.reg,
                                    test=(gen.X[n:], gen.y[n:]), name=name)


def var_heldout_summary(prob) -> dict:
    """What the held-out accuracy of part (c) is to be read against: the held-out rows' majority
    rate (the accuracy of predicting the more frequent class; the features are nonnegative with a
    nonzero in every row, so ``w = ±1`` predicts one class everywhere) and the accuracy and loss
    of the exact training optimum ``w*``."""
    d = prob.d
    pos = float(np.asarray(prob.heldout_accuracy(np.ones((1, d))))[0])
    w_star = np.asarray(prob.optimum[0], dtype=float)[None, :]
    return {"n_test": int(prob.n_test), "positive_rate": pos, "majority_rate": max(pos, 1.0 - pos),
            "w_star_accuracy": float(np.asarray(prob.heldout_accuracy(w_star))[0]),
            "w_star_test_loss": float(np.asarray(prob.heldout_loss(w_star))[0])}


def pessimistic_dims(config: Config) -> list[int]:
    """The dimensions of ``neg_dims`` at which the pessimistic instance is simulated: multiples of
    ``neg_batch_size`` (b orthogonal blocks of equal size need ``d ≥ b`` and ``b | d``)."""
    b = config.neg_batch_size
    return [int(d) for d in config.neg_dims if int(d) >= b and int(d) % b == 0]


def pessimistic_problem(d: int, b: int, clip: float, radius: float = 10.0):
    """The pessimistic instance of [DESIGN] §4.4.1 (module docstring, part (b)): ``b`` rows with
    disjoint blocks of ``d/b`` coordinates, each row of norm ``radius·clip``, squared loss with
    labels −1.  At ``w ≈ 0`` every clipped per-example gradient is ``clip · x_i/‖x_i‖``, so the
    clipped mean has ``ḡ_j² = clip²/(b d)`` on every coordinate."""
    import scipy.sparse as sp  # noqa: PLC0415

    d, b = int(d), int(b)
    if d < b or d % b:
        raise ValueError(f"the pessimistic instance needs d a multiple of b, got d={d}, b={b}")
    k = d // b
    rows = np.repeat(np.arange(b), k)
    X = sp.csr_matrix((np.full(d, radius * clip / np.sqrt(k)), (rows, np.arange(d))), shape=(b, d))
    return dpsim.problems.from_data(X, -np.ones(b), loss="squared", reg=0.0,
                                    name=f"pessimistic_blocks(b={b}, d={d})")


# ------------------------------------------------------------------------------------------------
# probes


def _neg_compute(prob, config, sim):
    """The compute of a negative-fraction cell on ``prob`` (optimistic or pessimistic instance):
    corrected DP-Adam at a negligible step, the fraction of negative v̂ − Φ recorded by a probe."""

    def compute(seed):
        opt = dpsim.optimizers.get("dp_adam_corrected", lr=1e-6, beta2=config.neg_beta2,
                                   clip=config.neg_clip, noise_multiplier=config.neg_noise_multiplier)
        return dpsim.simulate(prob, opt, steps=config.neg_steps, batch_size=config.neg_batch_size,
                              trials=config.neg_trials, seed=seed, sampling="fixed",
                              record_every=config.neg_record_every, metrics=("loss",),
                              probes={"neg_fraction": _neg_probe(
                                  config.neg_noise_multiplier, config.neg_clip,
                                  config.neg_batch_size, config.neg_beta2)},
                              **sim)
    return compute


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


def _test_loss_probe(prob):
    def probe(state, params, ctx):
        return prob.test_loss(params)

    return probe


# ------------------------------------------------------------------------------------------------
# the plan: one row per tuned setting (and per untuned negative-fraction cell), as data


@dataclass(frozen=True)
class Setting:
    """One tuned setting of the plan (parts a, c, d): the tuning cell ``tune-<label>`` runs
    ``grid`` folded into the trials (``reps`` per point), the evaluation cell ``label`` runs the
    chosen point with ``eval_trials`` fresh trials.

    A run with tuned values ``hp`` calls ``dpsim.optimizers.get(optimizer, **hp', **fixed)`` where
    ``hp'`` is ``hp`` with ``defaults`` filled in where not tuned (the clip), then ``extra``
    (the noise, ``beta2``) and, with ``tie_eps``, ``eps = eps_scale`` (the STP oracle's ε_a tied
    to ε_s); ``dpsim.simulate`` gets ``problems[problem]``, ``simulate`` (steps, batch size,
    sampling, record step, metrics, ``init``) and ``probes``; the evaluation cell records
    ``eval_metrics`` instead of ``simulate["metrics"]`` when given."""

    label: str
    optimizer: str
    grid: dict
    problem: str
    simulate: dict
    reps: int
    eval_trials: int
    meta: dict
    fixed: dict = dataclasses.field(default_factory=dict)
    defaults: dict = dataclasses.field(default_factory=dict)
    extra: dict = dataclasses.field(default_factory=dict)
    tie_eps: bool = False
    probes: dict = dataclasses.field(default_factory=dict)
    eval_metrics: tuple | None = None


@dataclass(frozen=True)
class Untuned:
    """One untuned cell of the plan (part b): corrected DP-Adam's negative fraction on
    ``problems[problem]`` (:func:`_neg_compute`)."""

    label: str
    problem: str
    meta: dict


def _problems(config: Config) -> dict:
    """Every problem of parts (a)–(d) but the pessimistic instances, by the plan's keys."""
    probs = {f"ada-z{float(zf):g}": dpsim.problems.sparse_logistic_1d(
        config.ada_n, zero_fraction=float(zf), w_star=1.0, seed=config.data_seed)
        for zf in config.ada_zero_fractions}
    for d in config.neg_dims:
        probs[f"neg-d{int(d)}"] = dpsim.problems.linear_box(
            config.neg_batch_size * 2, int(d), scales="ones", bias=1.0, seed=config.data_seed)
    probs["var"] = var_problem(config)
    probs["quad"] = dpsim.problems.quadratic_2d(config.quad_a, config.quad_b,
                                                noise=config.quad_noise, n=config.quad_n,
                                                seed=config.data_seed)
    return probs


def _ada_rows(config: Config, problems: dict) -> list:
    """Part (a): the 1-D AdaGrad table, single pass, DP-MF noise for single-epoch training."""
    noise, sampling = f"banded:{config.ada_n}", f"cyclic_poisson:{config.ada_n}"
    stab = {"eps": config.ada_eps_grid, "eps_scale": config.ada_eps_scale_grid}
    rows = []
    for zf in config.ada_zero_fractions:
        zf = float(zf)
        prob = f"ada-z{zf:g}"
        for mlabel, opt_name, fixed, private, tuned in ADA_METHODS:
            rows.append(Setting(
                f"ada-z{zf:g}-{mlabel}", opt_name, _grid(config.ada_lr_grid,
                                                         {k: stab[k] for k in tuned}), prob,
                dict(steps=config.ada_n, batch_size=1, sampling=sampling,
                     record_every=config.ada_n, metrics=("loss",)),
                config.ada_tune_trials, config.ada_eval_trials,
                {"part": "ada", "zero_fraction": zf, "method": mlabel, "noise": noise,
                 "sampling": sampling},
                fixed=fixed, tie_eps=opt_name == "dp_adam_stp_noiseless_v",
                extra=dict(clip=config.ada_clip, noise_multiplier=config.ada_noise_multiplier,
                           noise=noise) if private else {},
                probes={"test_loss": _test_loss_probe(problems[prob])}))
    return rows


def _var_rows(config: Config, settings: dict) -> list:
    """Part (c): the non-private premise, then every variant under each noise setting (the
    oracles only with the ε-matched ones, to keep the run short)."""
    var_stab = {"eps": config.var_eps_grid, "eps_scale": config.var_eps_scale_grid,
                "gamma_prime": tuple(e * e for e in config.var_eps_grid)}
    stp_stab = {"eps_scale": config.var_stp_eps_scale_grid, "clip": config.var_stp_clip_grid}
    runs = [("none", "adam", "adam", ("eps",)), ("none", "sgd", "sgd", ())]
    runs += [(tag, mlabel, opt_name, tuned) for tag in VAR_NOISES
             for mlabel, opt_name, tuned, private in VARIANTS
             if private or tag != "gaussian_rmse"]
    rows = []
    for tag, mlabel, opt_name, tuned in runs:
        lr_grid = (config.var_sgd_lr_grid if opt_name in ("sgd", "dp_sgd") else
                   config.var_stp_lr_grid if opt_name.startswith("dp_adam_stp") else
                   config.var_lr_grid)
        own = (stp_stab if opt_name == "dp_adam_stp" else
               {"eps": config.var_premise_eps_grid} if tag == "none" else var_stab)
        s = settings.get(tag)
        meta = {"part": "var", "noise": tag, "method": mlabel}
        extra, defaults, probes = {}, {}, {}
        if s is not None:
            meta.update(sigma=s["sigma"], matched=s["matched"], prefix_rmse=s["prefix_rmse"],
                        sampling=s["sampling"], noise_name=s["noise"])
            defaults = {"clip": config.var_clip}  # tuned for STP, fixed otherwise
            extra.update(noise_multiplier=s["sigma"], noise=s["noise"])
        if opt_name not in ("sgd", "dp_sgd"):
            extra.update(beta2=config.var_beta2)
        if mlabel == "dp_adam_corrected":
            probes["neg_fraction"] = _neg_probe(s["sigma"], config.var_clip,
                                                config.var_batch_size, config.var_beta2)
        rows.append(Setting(
            f"var-{tag}-{mlabel}", opt_name, _grid(lr_grid, {k: own[k] for k in tuned}), "var",
            dict(steps=config.var_steps, batch_size=config.var_batch_size,
                 sampling="poisson" if s is None else s["sampling"],
                 record_every=config.var_steps, metrics=("loss",)),
            config.var_tune_trials, config.var_eval_trials, meta, defaults=defaults, extra=extra,
            tie_eps=opt_name == "dp_adam_stp_noiseless_v", probes=probes,
            eval_metrics=VAR_EVAL_METRICS))
    return rows


def _quad_rows(config: Config) -> list:
    """Part (d): trajectories on the 2-D quadratic (the STP oracle's ε_a is not tied here)."""
    stab = {"eps": config.quad_eps_grid, "eps_scale": config.quad_eps_scale_grid,
            "clip": config.quad_stp_clip_grid}
    private = {"noise_multiplier": config.quad_noise_multiplier}
    return [Setting(
        f"quad-{mlabel}", opt_name, _grid(config.quad_lr_grid, {k: stab[k] for k in tuned}),
        "quad", dict(steps=config.quad_steps, batch_size=config.quad_batch_size,
                     sampling="poisson", record_every=config.quad_record_every, metrics=("loss",),
                     init=np.asarray(config.quad_init, dtype=float)),
        config.quad_tune_trials, config.quad_eval_trials, {"part": "quad", "method": mlabel},
        fixed=fixed, defaults={"clip": config.quad_clip} if opt_name != "adam" else {},
        extra=private if opt_name != "adam" else {},
        probes={"w1": _xy_probe(0), "w2": _xy_probe(1)})
        for mlabel, opt_name, fixed, tuned in QUAD_METHODS]


def plan(config: Config, problems: dict, settings: dict) -> list:
    """The plan table: the rows of the tuning phase in cell order (index = position): part (a)'s
    settings, part (b)'s untuned cells, part (c)'s and part (d)'s settings.  The evaluation cells
    follow in the order of the :class:`Setting` rows, then the pessimistic cells
    (:func:`pessimistic_dims`)."""
    neg = [Untuned(f"neg-d{int(d)}", f"neg-d{int(d)}",
                   {"part": "neg", "d": int(d), "regime": "optimistic"}) for d in config.neg_dims]
    return (_ada_rows(config, problems) + neg + _var_rows(config, settings)
            + _quad_rows(config))


def _simulate(row: Setting, prob, sim: dict, hp: dict, trials: int, seed, *, evaluate=False):
    """One run of ``row`` with (per-trial) tuned values ``hp`` (:class:`Setting`)."""
    hp = dict(hp)
    for k, v in row.defaults.items():
        hp.setdefault(k, v)
    hp.update(row.extra)
    if row.tie_eps:
        hp["eps"] = hp["eps_scale"]  # the oracle's ε_a tied to ε_s (module docstring)
    opt = dpsim.optimizers.get(row.optimizer, **hp, **row.fixed)
    kw = dict(row.simulate)
    if evaluate and row.eval_metrics is not None:
        kw["metrics"] = row.eval_metrics
    return dpsim.simulate(prob, opt, trials=trials, seed=seed, probes=dict(row.probes), **kw, **sim)


def _tune_cell(row, index: int, problems: dict, config: Config, sim: dict) -> Cell:
    """The tuning cell of a :class:`Setting` (or the cell of an :class:`Untuned` row)."""
    prob = problems[row.problem]
    if isinstance(row, Untuned):
        return Cell(row.label, index, _neg_compute(prob, config, sim), row.meta)

    def tune(seed):
        hp = tuning.fold(row.grid, row.reps)
        return _simulate(row, prob, sim, hp, len(hp["lr"]), seed)

    meta = {**row.meta, "part": f"tune-{row.meta['part']}", "evaluated_as": row.label}
    return Cell(f"tune-{row.label}", index, tune, meta)


def _eval_cell(row: Setting, sel, index: int, problems: dict, sim: dict) -> Cell:
    """The evaluation cell of a :class:`Setting` at its chosen point, on fresh seeds."""
    point, prob = dict(sel.point), problems[row.problem]

    def evaluate(seed):
        return _simulate(row, prob, sim, point, row.eval_trials, seed, evaluate=True)

    return Cell(row.label, index, evaluate,
                {**row.meta, "tuned_by": f"tune-{row.label}", "point": point,
                 "at_edge": {k: point[k] for k in sel.at_edge}})


def _notes(config: Config, cache, settings: dict, var_prob) -> None:
    """The manifest notes the figures read besides the cells."""
    ada_noise = f"banded:{config.ada_n}"
    cache.note("var_noise_settings", settings)
    cache.note("var_heldout", var_heldout_summary(var_prob))
    cache.note("ada_noise", {"noise": ada_noise, "sampling": f"cyclic_poisson:{config.ada_n}",
                             "prefix_rmse_unit": mf.toeplitz_prefix_rmse(
                                 mf.toeplitz_coefficients(ada_noise, config.ada_n), config.ada_n),
                             "prefix_rmse_unit_iid": mf.toeplitz_prefix_rmse([1.0], config.ada_n)})
    cache.note("reconstructed", "[DESIGN]'s formulas and most settings were lost in extraction; "
                                "all settings here are reconstructions (ALGORITHMS.md §4.3, §5.4)")


# ------------------------------------------------------------------------------------------------
# run


def run(config: Config, cache) -> dict:
    """All four parts; ``{label: Result}`` (tuning, untuned and evaluation cells) from the rows of
    :func:`plan`: tuning phase, selection (:mod:`experiments.tuning`), evaluation phase, then the
    pessimistic negative-fraction cells."""
    sim = cache.simulate_options  # progress, backend
    problems, settings = _problems(config), var_noise_settings(config)
    rows = plan(config, problems, settings)
    tune_cells = [_tune_cell(row, i, problems, config, sim) for i, row in enumerate(rows)]
    results = cache.run(tune_cells, desc="design_space: tune")
    tuned = [row for row in rows if isinstance(row, Setting)]
    selections = {f"tune-{row.label}": tuning.select(results[f"tune-{row.label}"], row.grid,
                                                     row.reps) for row in tuned}
    tuning.record(cache, selections,
                  note="each chosen point is then run on fresh seeds (the evaluation cells, "
                       "labels without 'tune-'), which the figures report")

    # evaluation cells at the chosen points, seeds never used for tuning
    eval_cells = [_eval_cell(row, selections[f"tune-{row.label}"], len(rows) + j, problems, sim)
                  for j, row in enumerate(tuned)]
    results.update(cache.run(eval_cells, desc="design_space: evaluate"))

    # (b') the pessimistic instance of the negative fraction, after every other cell (indices kept)
    first = len(rows) + len(eval_cells)
    pess_cells = [Cell(f"neg-pess-d{int(d)}", first + j,
                       _neg_compute(pessimistic_problem(d, config.neg_batch_size, config.neg_clip),
                                    config, sim),
                       {"part": "neg", "d": int(d), "regime": "pessimistic"})
                  for j, d in enumerate(pessimistic_dims(config))]
    if pess_cells:
        results.update(cache.run(pess_cells, desc="design_space: pessimistic instance"))
    _notes(config, cache, settings, problems["var"])
    return results


EXPERIMENT = Experiment(
    name="design_space",
    title="The DP-Adam design space of [DESIGN] (reconstructed settings): 1-D AdaGrad table with "
          "IME and single-epoch DP-MF noise, negative second moments vs d, all DP-Adam variants "
          "with tuned stability constants and noise matched in ε and in prefix-sum RMSE, 2-D "
          "quadratic",
    presets=PRESETS,
    run=run,
    figures=("fig_design_adagrad_table", "fig_design_negative_fraction", "fig_design_variants",
             "fig_design_quadratic2d"),
    module=__name__,
    # 2: part (c) on a held-out split (its evaluation cells record test loss and accuracy), the
    # pessimistic negative-fraction cells
    numerics=2,
)
