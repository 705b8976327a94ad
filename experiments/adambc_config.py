"""The configuration of the ``adambc`` experiment (:mod:`experiments.adambc`): :class:`Config`
(the main problem, the sweeps and the tuning grids), and the optional problems it runs beside it,
:class:`RegimeConfig` (the in-regime sparse problem), :class:`RealConfig` (breast_cancer) and
:class:`MovieLensConfig` (MovieLens-small).  Every field is hashed into the experiment's cache key
(:func:`experiments.pipeline.cache_key`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .pipeline import require_positive_ints

__all__ = ["Config", "RegimeConfig", "RealConfig", "MovieLensConfig", "MAX_DP2_DELAYS",
           "beta2_of"]

MAX_DP2_DELAYS = 3
"""At most this many DP² delays ``s`` (one tuning cell each: ``s`` is shared by a run's trials)."""


@dataclass(frozen=True)
class RegimeConfig:
    """The in-regime problem ([ADAMBC] §3–4 "typical DP parameters": ``Φ ≫ v̂^c`` on most
    coordinates), :func:`regime_problem`: sparse least squares with ``d`` coordinates, ``nnz``
    signed entries per row drawn from a Zipf(``zipf``) column popularity, rows of unit norm, labels
    ``x·w_true + noise·N(0, 1)`` with ``E(x·w_true)² = 1``; ``n_test`` held-out rows drawn the
    same way.  A coordinate's clean second moment is about its popularity share of the clipped
    gradients' squared norm over ``B``, while ``Φ = (σC/B)²``: ``Φ/v̂^c`` grows like ``σ²d/B``
    (≈ 0.2 on the ``main`` problem, ≈ 150 here)."""

    n: int                                  # training rows
    n_test: int                             # held-out rows
    d: int                                  # coordinates (≥ 1000 where claims count)
    nnz: int                                # draws of a column per row (signed ±1, rows unit norm)
    zipf: float                             # column popularity ∝ (j+1)^(−zipf)
    noise: float                            # label noise sd
    batch_size: int
    steps: int
    lr_grid_adam: tuple[float, ...]         # DP-Adam η
    lr_grid_bc: tuple[float, ...]           # DP-AdamBC η
    gamma_ratios: tuple[float, ...]         # DP-AdamBC γ'/Φ
    lr_grid_np_sgd: tuple[float, ...]       # non-private SGD η
    lr_grid_np_adam: tuple[float, ...]      # non-private Adam η
    tune_trials: int
    trials: int                             # evaluation and frozen trials
    freeze_steps: int                       # frozen (lr = 0) moment runs, recorded at the end
    probe_coords: int                       # coordinates probed (uniform sample, sorted)
    epsilons: tuple[float, ...] | None = None  # the targets run (a subset of Config.epsilons; None: all)
    data_seed: int = 0

    def __post_init__(self):
        require_positive_ints(self, ("n", "n_test", "d", "nnz", "batch_size", "steps",
                                     "tune_trials", "trials", "freeze_steps", "probe_coords"))
        if self.trials < 2:
            raise ValueError(f"regime trials must be >= 2 (confidence intervals), got {self.trials}")
        for name in ("lr_grid_adam", "lr_grid_bc", "gamma_ratios", "lr_grid_np_sgd",
                     "lr_grid_np_adam"):
            v = getattr(self, name)
            if not v or any((not math.isfinite(x)) or x <= 0 for x in v):
                raise ValueError(f"regime {name} must be a non-empty tuple of positive numbers, "
                                 f"got {name}={v!r}")
        if not (math.isfinite(self.zipf) and self.zipf >= 0):
            raise ValueError(f"regime zipf must be a finite number >= 0, got zipf={self.zipf!r}")
        if not (math.isfinite(self.noise) and self.noise >= 0):
            raise ValueError(f"regime noise must be a finite number >= 0, got noise={self.noise!r}")
        if self.probe_coords > self.d or self.batch_size > self.n:
            raise ValueError(f"regime probe_coords <= d and batch_size <= n needed, got "
                             f"probe_coords={self.probe_coords}, d={self.d}, "
                             f"batch_size={self.batch_size}, n={self.n}")


@dataclass(frozen=True)
class RealConfig:
    """The real-data rows ([ADAMBC] §5 on a real table, issue 31 item 5): breast_cancer from
    :func:`dpsim.datasets.breast_cancer` (``test`` held out with ``split_seed``, columns z-scored
    on the training rows, rows of unit norm: the loader's defaults), and for the premise only
    the same rows in their original units (centred; rows divided by the largest training row
    norm), where the column scales spread over ~10⁴.  Logistic loss with ``reg``."""

    batch_size: int
    steps: int
    lr_grid_adam: tuple[float, ...]
    lr_grid_bc: tuple[float, ...]
    gamma_ratios: tuple[float, ...]
    lr_grid_dpsgd: tuple[float, ...]
    lr_grid_np_sgd: tuple[float, ...]
    lr_grid_np_adam: tuple[float, ...]
    tune_trials: int
    trials: int
    dataset: str = "breast_cancer"
    test: float = 0.2
    split_seed: int = 0
    reg: float = 1e-3

    def __post_init__(self):
        require_positive_ints(self, ("batch_size", "steps", "tune_trials", "trials"))
        if self.trials < 2:
            raise ValueError(f"real trials must be >= 2 (confidence intervals), got {self.trials}")
        for name in ("lr_grid_adam", "lr_grid_bc", "gamma_ratios", "lr_grid_dpsgd",
                     "lr_grid_np_sgd", "lr_grid_np_adam"):
            v = getattr(self, name)
            if not v or any((not math.isfinite(x)) or x <= 0 for x in v):
                raise ValueError(f"real {name} must be a non-empty tuple of positive numbers, "
                                 f"got {name}={v!r}")
        if self.dataset != "breast_cancer":
            raise ValueError(f"real dataset must be 'breast_cancer', got {self.dataset!r}")
        if not (0.0 < self.test < 1.0):
            raise ValueError(f"real test must be a fraction in (0, 1), got test={self.test!r}")


@dataclass(frozen=True)
class MovieLensConfig:
    """The MovieLens-small rows ([ADAMBC] §5 on real data, a regression; issue 31 item 5):
    :func:`dpsim.datasets.movielens` with ``subsample`` ratings (``None``: all 100 004) drawn and
    split (``test`` held out) with ``split_seed``; one-hot user and movie columns of the training
    ratings, training rows of unit norm, ratings centred by the training mean; squared loss with
    the ridge ``reg`` (the loader's default 1e-3).  ``d`` (users + movies seen in training) follows
    from the data.  The frozen runs probe ``probe_coords`` coordinates (at most ``d``) for the
    ``Φ/v̂^c`` premise; ``epsilons``: the targets run (a subset of ``Config.epsilons``; ``None``:
    all)."""

    batch_size: int
    steps: int
    lr_grid_adam: tuple[float, ...]         # DP-Adam η
    lr_grid_bc: tuple[float, ...]           # DP-AdamBC η
    gamma_ratios: tuple[float, ...]         # DP-AdamBC γ'/Φ
    lr_grid_dpsgd: tuple[float, ...]        # DP-SGD η
    lr_grid_np_sgd: tuple[float, ...]       # non-private SGD η
    lr_grid_np_adam: tuple[float, ...]      # non-private Adam η
    tune_trials: int
    trials: int                             # evaluation and frozen trials
    freeze_steps: int                       # frozen (lr = 0) moment runs, recorded at the end
    probe_coords: int                       # coordinates probed (uniform sample, sorted)
    subsample: int | None = None            # ratings used (None: all)
    test: float = 0.2
    split_seed: int = 0
    reg: float = 1e-3
    epsilons: tuple[float, ...] | None = None

    def __post_init__(self):
        require_positive_ints(self, ("batch_size", "steps", "tune_trials", "trials",
                                     "freeze_steps", "probe_coords"))
        if self.trials < 2:
            raise ValueError(f"movielens trials must be >= 2 (confidence intervals), got "
                             f"{self.trials}")
        for name in ("lr_grid_adam", "lr_grid_bc", "gamma_ratios", "lr_grid_dpsgd",
                     "lr_grid_np_sgd", "lr_grid_np_adam"):
            v = getattr(self, name)
            if not v or any((not math.isfinite(x)) or x <= 0 for x in v):
                raise ValueError(f"movielens {name} must be a non-empty tuple of positive numbers, "
                                 f"got {name}={v!r}")
        if self.subsample is not None and (isinstance(self.subsample, bool)
                                           or not isinstance(self.subsample, int)
                                           or self.subsample < 2):
            raise ValueError(f"movielens subsample must be None or an integer >= 2, got "
                             f"subsample={self.subsample!r}")
        if not (0.0 < self.test < 1.0):
            raise ValueError(f"movielens test must be a fraction in (0, 1), got test={self.test!r}")
        if not (math.isfinite(self.reg) and self.reg >= 0):
            raise ValueError(f"movielens reg must be a finite number >= 0, got reg={self.reg!r}")


@dataclass(frozen=True)
class Config:
    """Everything the experiment's results depend on (hashed into the cache key)."""

    n: int                                  # training examples
    d: int                                  # dimension (every coordinate is probed)
    condition: float                        # λ_max/λ_min of the diagonal feature covariance
    batch_size: int                         # expected batch size B (Poisson rate B/n)
    steps: int                              # T of the training runs
    epsilons: tuple[float, ...]             # target ε of each setting
    sweep_epsilon: float                    # the ε of the Φ', γ and β sweeps (one of epsilons)
    lr_grid_adam: tuple[float, ...]         # DP-Adam learning rates tried (also its sweeps)
    lr_grid_bc: tuple[float, ...]           # DP-AdamBC learning rates tried (also the Φ' sweep)
    lr_grid_dpsgd: tuple[float, ...]        # DP-SGD learning rates tried
    lr_grid_np_sgd: tuple[float, ...]       # non-private SGD learning rates tried
    lr_grid_np_adam: tuple[float, ...]      # non-private Adam learning rates tried
    gamma_ratios: tuple[float, ...]         # DP-AdamBC floors tried, γ' = ratio · Φ
    phi_ratios: tuple[float, ...]           # Φ'/Φ of the wrong-Φ' sweep (must contain 1)
    adam_gamma_ratios: tuple[float, ...]    # DP-Adam γ / √Φ of the γ sweep
    betas1: tuple[float, ...]               # β1 of the β sweep (β2 = 1 − (1 − β1)²)
    tune_trials: int                        # trials per grid point in the tuning cells
    trials: int                             # trials of the evaluation and frozen cells
    sweep_trials: int                       # trials per setting in the sweep cells
    freeze_steps: int                       # steps of the frozen (lr = 0) moment runs
    freeze_record_every: int                # record interval of the frozen runs
    dp2_delays: tuple[int, ...] = (50, 200)  # DP²'s phase length s = s1 = s2 (one cell each)
    dp2_lr_grid: tuple[float, ...] = (0.3, 1.0)                       # DP² SGD-phase η
    dp2_lr2_grid: tuple[float, ...] = (0.001, 0.003, 0.01, 0.03, 0.1)   # DP² RMSProp-phase η
    dp2_clip2_grid: tuple[float, ...] = (1.0, 10.0, 100.0)            # DP² RMSProp-phase clip
    # Fig. 2 right: Φ'/Φ_s added to clean (clipped, noiseless) Adam's v̂ (must contain 0)
    clean_phi_ratios: tuple[float, ...] = (0.0, 0.1, 1.0, 10.0, 100.0, 1000.0)
    clean_lr_grid: tuple[float, ...] = (0.001, 0.003162, 0.01, 0.03162, 0.1, 0.3162, 1.0)  # its η
    clean_sgdm_lr_grid: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3, 1.0)  # clean SGDM's η
    alphas: tuple[float, ...] = (0.01, 0.05, 0.10)   # tail levels of Props. 3–4 (Tables 3–5)
    label_noise: float = 0.1                # std of the label noise of least_squares
    clip: float = 1.0                       # C
    beta1: float = 0.9
    beta2: float = 0.999
    adam_eps: float = 1e-8                  # DP-Adam's γ (the paper's default)
    delta: float = 1e-5
    sampling: str = "poisson"
    record_every: int | None = None         # evaluation cells (None: ~100 records)
    data_seed: int = 0
    seed: int = 0
    regime: RegimeConfig | None = None      # the in-regime problem (None: not run)
    real: RealConfig | None = None          # the real-data rows (None: not run)
    movielens: MovieLensConfig | None = None  # the MovieLens-small rows (None: not run)

    def __post_init__(self):
        require_positive_ints(self,
            ("n", "d", "batch_size", "steps", "tune_trials", "trials", "sweep_trials",
             "freeze_steps", "freeze_record_every"))
        if self.trials < 2 or self.sweep_trials < 2:
            raise ValueError(f"trials and sweep_trials must be >= 2 (confidence intervals), got "
                             f"trials={self.trials}, sweep_trials={self.sweep_trials}")
        for name in ("epsilons", "lr_grid_adam", "lr_grid_bc", "lr_grid_dpsgd", "lr_grid_np_sgd",
                     "lr_grid_np_adam", "gamma_ratios", "adam_gamma_ratios", "dp2_lr_grid",
                     "dp2_lr2_grid", "dp2_clip2_grid", "clean_lr_grid", "clean_sgdm_lr_grid"):
            v = getattr(self, name)
            if not v or any((not math.isfinite(x)) or x <= 0 for x in v):
                raise ValueError(f"{name} must be a non-empty tuple of positive numbers, got {name}={v!r}")
        if not self.phi_ratios or any((not math.isfinite(x)) or x < 0 for x in self.phi_ratios) \
                or 1.0 not in self.phi_ratios:
            raise ValueError(f"phi_ratios must be non-negative numbers including 1 (DP-AdamBC "
                             f"itself), got phi_ratios={self.phi_ratios!r}")
        if not self.clean_phi_ratios or any((not math.isfinite(x)) or x < 0
                                            for x in self.clean_phi_ratios) \
                or 0.0 not in self.clean_phi_ratios:
            raise ValueError(f"clean_phi_ratios must be non-negative numbers including 0 (clean "
                             f"Adam itself), got clean_phi_ratios={self.clean_phi_ratios!r}")
        if not (1 <= len(self.dp2_delays) <= MAX_DP2_DELAYS) or any(
                isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in self.dp2_delays):
            raise ValueError(f"dp2_delays must be 1 to {MAX_DP2_DELAYS} positive integers, got "
                             f"dp2_delays={self.dp2_delays!r}")
        if not self.betas1 or any(not (0.0 < b < 1.0) for b in self.betas1):
            raise ValueError(f"betas1 must lie in (0, 1), got betas1={self.betas1!r}")
        if len(set(self.epsilons)) != len(self.epsilons):
            raise ValueError(f"epsilons must be distinct, got epsilons={self.epsilons!r}")
        if self.sweep_epsilon not in self.epsilons:
            raise ValueError(f"sweep_epsilon must be one of epsilons={self.epsilons!r}, got "
                             f"sweep_epsilon={self.sweep_epsilon!r}")
        if not (math.isfinite(self.condition) and self.condition >= 1.0):
            raise ValueError(f"condition must be a finite number >= 1, got condition={self.condition!r}")
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
        for name, kind in (("regime", RegimeConfig), ("real", RealConfig),
                           ("movielens", MovieLensConfig)):
            v = getattr(self, name)
            if v is not None and not isinstance(v, kind):
                raise ValueError(f"{name} must be a {kind.__name__} or None, got {name}={v!r}")
        if self.regime is not None and self.regime.epsilons is not None and (
                not self.regime.epsilons or set(self.regime.epsilons) - set(self.epsilons)):
            raise ValueError(f"regime epsilons must be a non-empty subset of epsilons="
                             f"{self.epsilons!r}, got {self.regime.epsilons!r}")
        if self.movielens is not None and self.movielens.epsilons is not None and (
                not self.movielens.epsilons or set(self.movielens.epsilons) - set(self.epsilons)):
            raise ValueError(f"movielens epsilons must be a non-empty subset of epsilons="
                             f"{self.epsilons!r}, got {self.movielens.epsilons!r}")

    def regime_epsilons(self) -> tuple[float, ...]:
        """The ε targets of the in-regime problem (``()`` when it is not run)."""
        if self.regime is None:
            return ()
        want = self.regime.epsilons
        return tuple(e for e in self.epsilons if want is None or e in want)

    def movielens_epsilons(self) -> tuple[float, ...]:
        """The ε targets of the MovieLens-small rows (``()`` when they are not run)."""
        if self.movielens is None:
            return ()
        want = self.movielens.epsilons
        return tuple(e for e in self.epsilons if want is None or e in want)

    @property
    def sample_rate(self) -> float:
        return self.batch_size / self.n


def _grid(lo: int, hi: int, per_decade: int = 2) -> tuple[float, ...]:
    """``10^k`` for k from ``lo`` to ``hi`` in steps of ``1/per_decade`` (1, 3.16, 10, ...)."""
    return tuple(float(f"{10.0 ** (k / per_decade):.4g}") for k in range(lo * per_decade, hi * per_decade + 1))


def beta2_of(beta1: float) -> float:
    """The β2 paired with ``beta1`` in [ADAMBC] Fig. 5 (lower right): ``1 − β2 = (1 − β1)²``."""
    return float(1.0 - (1.0 - beta1) ** 2)
