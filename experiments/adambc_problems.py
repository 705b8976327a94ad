"""The problems of the ``adambc`` experiment (:mod:`experiments.adambc`) and the pieces its cells
run: the main diagonal least squares (:func:`problem`), the in-regime sparse problem
(:func:`regime_problem`, :func:`regime_coords`), breast_cancer (:func:`real_problems`),
MovieLens-small (:func:`movielens_problem`, :func:`movielens_coords`, :func:`movielens_heldout`),
clean Adam + Φ' (:func:`clean_adam_plus`) and the moment probes (:func:`moment_probes`).

The data-set problems are built once per process and config (:func:`cached_problem`): a cell
captures its problem's frozen config, not the data, and builds the problem where it runs."""

from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp

import dpsim
from dpsim.optimizers import Optimizer
from dpsim.optimizers.baselines import learning_rate
from dpsim.privacy.privatizers import gaussian_privatizer
from dpsim.transforms import lookup, named_chain
from dpsim.transforms.preconditioners import scale_by_adam

from .adambc_config import Config, MovieLensConfig, RealConfig, RegimeConfig

__all__ = ["problem", "regime_problem", "regime_coords", "real_problems", "movielens_problem",
           "movielens_coords", "movielens_heldout", "clean_adam_plus", "moment_probes",
           "cached_problem"]


def problem(config: Config):
    """The experiment's problem: axis-aligned least squares with a diagonal Hessian of condition
    number ``config.condition`` (see the module docstring)."""
    return dpsim.problems.least_squares(config.n, config.d, condition=config.condition,
                                        noise=config.label_noise, rotate=False,
                                        seed=config.data_seed)


def regime_problem(rc: RegimeConfig):
    """The in-regime problem (:class:`RegimeConfig`): :func:`dpsim.problems.from_data` with the
    squared loss, ``reg = 0`` and the ``n_test`` held-out rows.

    Rows: ``nnz`` column draws from the popularity ``p_j ∝ (j+1)^(−zipf)`` (with replacement; a
    column drawn twice adds up, opposite signs cancel), each entry ±1 with a fair sign (so no
    common margin offset), rows scaled to unit l2 norm (an all-cancelled row stays 0).  Labels
    ``y = x·w_true + noise·z``, ``w_true ~ N(0, I)`` rescaled so that the training rows have
    mean ``(x·w_true)² = 1``.  Train and held-out rows are drawn together (exchangeable), the
    first ``n`` train.  Deterministic in ``data_seed``."""
    rng = np.random.default_rng(rc.data_seed)
    N = rc.n + rc.n_test
    pop = np.arange(1, rc.d + 1, dtype=np.float64) ** -rc.zipf
    pop /= pop.sum()
    cols = rng.choice(rc.d, size=(N, rc.nnz), p=pop)
    vals = rng.choice(np.array([-1.0, 1.0]), size=(N, rc.nnz))
    rows = np.repeat(np.arange(N), rc.nnz)
    X = sp.csr_matrix((vals.ravel(), (rows, cols.ravel())), shape=(N, rc.d))
    X.sum_duplicates()
    X.eliminate_zeros()
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.csr_matrix(sp.diags(1.0 / np.where(norms > 0, norms, 1.0)) @ X)
    w = rng.standard_normal(rc.d)
    w /= np.sqrt(np.mean((X[:rc.n] @ w) ** 2))
    y = X @ w + rc.noise * rng.standard_normal(N)
    prob = dpsim.problems.from_data(X[:rc.n], y[:rc.n], loss="squared", reg=0.0,
                                    test=(X[rc.n:], y[rc.n:]), name="adambc_regime")
    prob.w_true = w
    return prob


def regime_coords(rc: RegimeConfig) -> list[int]:
    """The coordinates whose moments the in-regime frozen runs record: ``probe_coords`` of the
    ``d`` drawn uniformly without replacement (stream ``(data_seed, 1)``), sorted — a uniform
    sample, so quantiles over them estimate quantiles over all coordinates."""
    rng = np.random.default_rng([rc.data_seed, 1])
    return sorted(int(j) for j in rng.choice(rc.d, size=rc.probe_coords, replace=False))


def real_problems(rc: RealConfig) -> dict:
    """``{"real": Problem, "realraw": Problem}``: breast_cancer as :func:`dpsim.datasets.load`
    gives it (``test``, ``split_seed``, ``reg``; columns z-scored on the training rows, unit
    rows), and the same split in the original units of the columns (the loader's z-scored
    columns times their training deviation: centred, unscaled), every row divided by the largest
    training row norm (the training norms ≤ 1, the column scales' spread kept)."""
    import dpsim.datasets as ds

    real = ds.load(rc.dataset, test=rc.test, seed=rc.split_seed, reg=rc.reg)
    X, y, info = ds.arrays(rc.dataset, test=rc.test, seed=rc.split_seed, reg=rc.reg, rows="none")
    Xt, yt = info["test"]
    sd = np.asarray(info["column_std"], dtype=np.float64)
    Xr, Xrt = X * sd, Xt * sd
    top = float(np.linalg.norm(Xr, axis=1).max())
    raw = dpsim.problems.from_data(Xr / top, y, loss="logistic", reg=rc.reg, test=(Xrt / top, yt),
                                   name=f"{rc.dataset}_raw_units")
    return {"real": real, "realraw": raw}


def movielens_problem(mc: MovieLensConfig):
    """MovieLens-small (:class:`MovieLensConfig`) as :func:`dpsim.datasets.load` gives it: the
    ``subsample`` ratings split with ``split_seed`` (``test`` held out), one-hot user and movie
    columns of the training ratings divided by the largest training row norm (``√2``), ratings
    minus the training mean, squared loss with the ridge ``reg``; the held-out rows give the
    problem its ``test_loss`` (half the held-out MSE, no ridge term)."""
    import dpsim.datasets as ds

    return ds.load("movielens", subsample=mc.subsample, test=mc.test, seed=mc.split_seed,
                   reg=mc.reg)


def movielens_coords(mc: MovieLensConfig, d: int) -> list[int]:
    """The coordinates whose moments the MovieLens frozen runs record: ``min(probe_coords, d)``
    of the ``d`` drawn uniformly without replacement (stream ``(split_seed, 2)``), sorted — a
    uniform sample over users and movies alike, so its quantiles estimate those over all
    coordinates."""
    rng = np.random.default_rng([mc.split_seed, 2])
    return sorted(int(j) for j in rng.choice(d, size=min(mc.probe_coords, d), replace=False))


def movielens_heldout(mc: MovieLensConfig) -> dict:
    """Premise (a) of the MovieLens rows, from the data: can any linear model beat the trivial
    predictor here?  The trivial predictor is ``w = 0`` (every rating predicted by the training
    mean); ``w*`` is the exact ridge optimum on the training split.  Returns the held-out MSE of
    each (``mse_trivial``, ``mse_wstar``; star², without the ridge term), the mean gain
    ``mse_trivial − mse_wstar`` and the half-width ``gain_h`` of its 95% t-interval over the
    held-out ratings (per-rating differences of squared errors), their training MSEs, the number
    of held-out ratings ``rows`` and the share ``unseen`` of them whose user or movie has no
    training rating (a zero block of the one-hot row)."""
    import dpsim.datasets as ds
    from dpsim.analysis import stats

    X, y, info = ds.arrays("movielens", subsample=mc.subsample, test=mc.test, seed=mc.split_seed,
                           reg=mc.reg)
    Xt, yt = info["test"]
    w = np.asarray(_movielens_cached(mc).optimum[0], dtype=np.float64)
    e0, ew = yt ** 2, (Xt @ w - yt) ** 2
    gain, gain_h = map(float, stats.mean_ci(e0 - ew))
    nnz = np.diff(Xt.indptr)
    return dict(rows=int(yt.size), mse_trivial=float(e0.mean()), mse_wstar=float(ew.mean()),
                gain=gain, gain_h=gain_h, train_mse_trivial=float(np.mean(y ** 2)),
                train_mse_wstar=float(np.mean((X @ w - y) ** 2)),
                unseen=float(np.mean(nnz < 2)))


def clean_adam_plus(lr, phi_add, *, beta1: float = 0.9, beta2: float = 0.999,
                    clip: float = 1.0) -> Optimizer:
    """Clean Adam (per-example gradients clipped to ``C``, **no noise**) with a constant ``Φ'``
    added to its bias-corrected second moment: ``w ← w − η m̂^c / √(v̂^c + Φ')`` ([ADAMBC] §3,
    Fig. 2 right: "Δ_t = m^c_t/√(v^c_t + Φ')", with Adam's bias corrections and no ``γ``).
    ``Φ' = 0`` is clipped clean Adam; for ``Φ' ≫ v̂^c`` the update is ``m̂^c/√Φ'``, clipped clean
    SGD with momentum at rate ``η/√Φ'`` — the DP bias's effect isolated from the DP noise.

    Built from dpsim's own pieces, since the registered ``dp_adam_bc`` only *subtracts*
    (``phi_prime ≥ 0``): :func:`~dpsim.transforms.preconditioners.scale_by_adam` with
    ``phi = −Φ'``, ``floor = 0`` and ``eps = 0`` computes ``max(v̂ − (−Φ'), 0) = v̂ + Φ'``
    exactly (``v̂ ≥ 0`` and ``Φ' ≥ 0``, so the max never binds).  The privatizer runs at
    ``σ = 0``: the run declares ``GaussianRelease(σ = 0)`` and its ε is infinite (it is a
    non-private reference, never matched to a budget).

    ``lr`` ∈ [0, ∞), ``phi_add`` ∈ [0, ∞): scalars or one value per trial; ``beta1``, ``beta2`` ∈
    [0, 1); ``clip`` ∈ (0, ∞)."""
    pa = np.asarray(phi_add, dtype=float)
    if pa.ndim > 1 or pa.size == 0 or not np.all(np.isfinite(pa)) or np.any(pa < 0):
        raise ValueError("phi_add must be finite and >= 0 (a scalar or one value per trial), "
                         f"got phi_add={phi_add!r}")
    pa = float(pa) if pa.ndim == 0 else pa

    def minus_phi(ctx):
        return -ctx.hp(pa)

    tx = named_chain(("privatizer", gaussian_privatizer(clip, 0.0)),
                     ("preconditioner", scale_by_adam(beta1, beta2, 0.0, phi=minus_phi, floor=0.0)),
                     learning_rate(lr))

    def plain(x):
        return [float(v) for v in x] if isinstance(x, (list, tuple, np.ndarray)) else float(x)

    return Optimizer(name="clean_adam_plus", transform=tx,
                     hyperparameters=dict(lr=plain(lr), phi_add=plain(phi_add), beta1=float(beta1),
                                          beta2=float(beta2), clip=float(clip),
                                          noise_multiplier=0.0))


def moment_probes(d: int, coords=None) -> dict:
    """Probes ``m{j}``, ``v{j}``: coordinate ``j`` of Adam's raw moments (state ``(privatizer,
    AdamState(m, v, count), ...)``), one ``(R,)`` record per coordinate ``j`` of ``coords``
    (default: every coordinate ``0 ≤ j < d``)."""
    probes = {}
    for j in (range(d) if coords is None else coords):
        j = int(j)
        probes[f"m{j}"] = lambda state, params, ctx, j=j: lookup(state, "preconditioner").m[:, j]
        probes[f"v{j}"] = lambda state, params, ctx, j=j: lookup(state, "preconditioner").v[:, j]
    return probes


@functools.lru_cache(maxsize=4)
def _regime_cached(rc: RegimeConfig):
    """:func:`regime_problem` built once per process and config (a cell computed in a worker
    process builds it there, once, instead of carrying a copy whose exact optimum each cell
    would recompute)."""
    return regime_problem(rc)


@functools.lru_cache(maxsize=4)
def _real_cached(rl: RealConfig) -> dict:
    """:func:`real_problems` built once per process and config."""
    return real_problems(rl)


@functools.lru_cache(maxsize=4)
def _movielens_cached(mc: MovieLensConfig):
    """:func:`movielens_problem` built once per process and config."""
    return movielens_problem(mc)


def _scale_spread(prob) -> dict:
    """The coordinate-scale premise of a data-set problem, at its exact optimum ``w*``: the
    per-coordinate RMS of the per-example gradients (each clipped at 1, the rows' scale)
    ``s_j``, its p90/p10 ratio over the coordinates and the spread of the columns' RMS."""
    w, _ = prob.optimum
    X = prob.features
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    y = np.asarray(prob.y, dtype=float)
    m = X @ w
    c = -y / (1.0 + np.exp(y * m))                                 # logistic, labels ±1
    g = c[:, None] * X + prob.reg * w[None, :]
    g *= np.minimum(1.0, 1.0 / np.maximum(np.linalg.norm(g, axis=1), 1e-300))[:, None]
    rms = np.sqrt(np.mean(g ** 2, axis=0))
    col = np.sqrt(np.mean(X ** 2, axis=0))
    tiny = np.finfo(float).tiny
    return dict(grad_rms_p90_p10=float(np.quantile(rms, 0.9) / max(np.quantile(rms, 0.1), tiny)),
                column_rms_max_min=float(col.max() / max(col.min(), tiny)))


def cached_problem(name: str, conf):
    """The problem ``name`` (``"regime"``, ``"real"``, ``"realraw"`` or ``"movielens"``) of its
    config ``conf`` (:class:`RegimeConfig`, :class:`RealConfig`, :class:`MovieLensConfig`),
    built (and its exact optimum computed) once per process."""
    if name == "regime":
        return _regime_cached(conf)
    if name == "movielens":
        return _movielens_cached(conf)
    return _real_cached(conf)[name]
