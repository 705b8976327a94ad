"""Empirical privacy audit: a canary threshold test with a Clopper–Pearson lower bound on ε.

    import dpsim
    rep = dpsim.audit("dp_sgd", noise_multiplier=1.0, trials=100_000)
    rep.epsilon_lower, rep.epsilon_claimed, rep.consistent

**What it does.**  Two neighbouring datasets, ``D₀`` (the canary row zeroed, i.e. removed: with the
nominal-b averaging a zero-gradient example changes nothing, and the sample rate ``b/n`` is the
same) and ``D₁`` (the canary present), are each run for ``trials`` independent trials in one
:func:`dpsim.simulate` call.  A scalar statistic of every trial's output is thresholded (default:
built from what the optimizer releases, per privatizer shape, :data:`STATISTICS`: the final
parameters along the canary, ``−⟨w_T, canary⟩``, where the release enters them linearly; the
releases read back from each step and the AdaGrad accumulator for PASAN/PAGAN and noisy AdaGrad,
whose normalized first step keeps only a sign — docs/privacy-claims.md): on the first
half of the trials the threshold and the direction with the largest lower bound are chosen; on the
other half the counts ``k₀/m`` (D₀ above the threshold) and ``k₁/m`` (D₁ above it) give one-sided
Clopper–Pearson bounds ``p₀ ≤ p₀⁺`` and ``p₁ ≥ p₁⁻`` (each at level ``1 − α/2``) and

    ε_lower = log((p₁⁻ − δ) / p₀⁺)

which holds with probability ≥ ``1 − α`` for *any* (ε, δ)-DP mechanism (the definition applied to
the event "statistic above the threshold"; both directions of the neighbouring relation are
tried).  ``consistent`` is ``ε_lower ≤ ε_claimed``; a run that is not consistent proves (at that
confidence) that the declared ε does not hold — a mis-declared noise multiplier, a wrong
sensitivity.  A consistent audit proves nothing about the claim's tightness: it is a lower bound.

**The problem.**  :class:`GradientTable` is a :class:`dpsim.problems.Problem` whose per-example
gradients are the rows of a table, whatever the parameters (the linear loss ``f_i(w) = ⟨G_i, w⟩``).
It is the public way to feed a mechanism chosen gradients: any ``Problem`` subclass that
implements ``loss(w) -> (R,)``, ``per_example_grads(w, idx) -> (R, b, d)`` (and optionally
``grad``) works with :func:`dpsim.simulate`; see the class for a complete example.
:func:`canary_table` builds the built-in worst cases: ``others="zero"`` (every other example has
gradient 0: the canary is alone in its batch — the worst case of a clipped-sum Gaussian release)
or ``"aligned"`` (every other example is the clipped canary: the worst case of releases that are
nonlinear in the sum, e.g. a square).  Pass ``table=`` for your own (row ``canary_index`` is the
canary; it is zeroed in ``D₀``).

Cost: two simulations of ``trials`` trials of ``steps`` steps on an ``(n, d)`` table.  With
``trials`` per dataset the bound cannot certify more than :func:`certifiable_max` (about
``log(trials/2)``).  The claimed ε is stated with its neighbouring relation (add/remove with the
sampling rate fixed in advance, under Poisson sampling) in ``config["privacy"]``; the audit's
neighbours keep ``n`` fixed (the canary row is zeroed), which is that relation.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from . import optimizers as _optimizers
from ._validate import check_allocation, check_seed
from .engine import simulate
from .problems import Problem

__all__ = ["GradientTable", "canary_table", "AuditReport", "audit", "clopper_pearson",
           "threshold_lower_bound", "certifiable_max", "trials_to_certify", "default_statistic",
           "default_rows", "privatizer_shape", "STATISTICS", "RELEASE_PROBE"]


class GradientTable(Problem):
    """A problem whose per-example gradients are fixed vectors: ``f_i(w) = ⟨G_i, w⟩``.

    ``table``: ``(n, d)`` finite array (row i is example i's gradient at every ``w``).  This is a
    complete user-defined :class:`~dpsim.problems.Problem`: set ``name``, ``n``, ``d``, ``config``
    in ``super().__init__``, list the float arrays that must move to a GPU backend in
    ``_float_arrays``, and implement ``loss`` and ``per_example_grads`` (``grad`` defaults to the
    mean of the per-example gradients; the clipped sums the privatizers use are derived from
    ``per_example_grads``).  No optimum is known (``optimum`` is ``None``).
    """

    _float_arrays = ("G",)

    def __init__(self, table, *, name: str = "gradient_table"):
        shape = np.shape(table) if hasattr(table, "shape") else None
        if shape is not None:  # an array of another dtype: its float64 copy could be far larger
            check_allocation("the float64 copy of table", shape)
        G = np.array(table, dtype=np.float64)
        if G.ndim != 2 or G.shape[0] < 1 or G.shape[1] < 1:
            raise ValueError(f"table must be an (n, d) array with n, d >= 1, got shape {G.shape}")
        if not np.all(np.isfinite(G)):
            raise ValueError("table must be finite")
        # the table's hash is part of the config, so a checkpoint (dpsim.checkpoint) or a cache
        # keyed by the config never mistakes one table for another of the same shape
        digest = hashlib.sha256(f"{G.shape}".encode() + np.ascontiguousarray(G).tobytes()).hexdigest()
        super().__init__(name=name, n=G.shape[0], d=G.shape[1],
                         config={"name": name, "n": int(G.shape[0]), "d": int(G.shape[1]),
                                 "data_sha256": digest})
        self.G = G
        self._mean = G.mean(axis=0)

    def loss(self, w):
        """``F(w_r) = ⟨mean_i G_i, w_r⟩`` for each row of ``w``.

        Parameters
        ----------
        w : array
            Parameters, ``(R, d)``.

        Returns
        -------
        array
            ``(R,)``.
        """
        xp = self.xp
        return xp.sum(w * xp.asarray(self._mean)[None, :], axis=1)

    def grad(self, w):
        """The mean row of the table, for every row of ``w``.

        Parameters
        ----------
        w : array
            Parameters, ``(R, d)``.

        Returns
        -------
        array
            ``(R, d)``.
        """
        xp = self.xp
        return xp.broadcast_to(xp.asarray(self._mean)[None, :], w.shape) + 0 * w

    def per_example_grads(self, w, idx):
        """Rows ``idx`` of the table, whatever ``w``.

        Parameters
        ----------
        w : array
            Parameters, ``(R, d)``.
        idx : array
            Example indices, ``(R, b)``.

        Returns
        -------
        array
            ``(R, b, d)``.
        """
        return self.G[idx]


def canary_table(n: int, d: int = 1, *, others: str = "zero", canary: float = 1e3) -> np.ndarray:
    """The built-in ``(n, d)`` tables: row ``n − 1`` is the canary ``canary · e₁`` (its norm far
    above any clip, so it is clipped to the clip norm), the others are 0 (``"zero"``) or ``e₁``
    (``"aligned"``: unit norm, so with clip 1 they equal the clipped canary).

    Parameters
    ----------
    n : int
        Number of rows (the canary is the last).
    d : int
        Dimension.
    others : {'zero', 'aligned'}
        The non-canary rows: 0, or ``e₁``.
    canary : float
        Norm of the canary row.

    Returns
    -------
    numpy.ndarray
        The ``(n, d)`` table.

    Examples
    --------
    >>> from dpsim.audit import canary_table
    >>> canary_table(3, 2)
    array([[   0.,    0.],
           [   0.,    0.],
           [1000.,    0.]])
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n must be an integer >= 2 (the canary and one other example), got n={n!r}")
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"d must be a positive integer, got d={d!r}")
    if others not in ("zero", "aligned"):
        raise ValueError(f"others must be 'zero' or 'aligned', got others={others!r}")
    if not (isinstance(canary, (int, float)) and math.isfinite(canary) and canary != 0):
        raise ValueError(f"canary must be a finite non-zero number, got canary={canary!r}")
    check_allocation(f"the canary table (n={n}, d={d})", (n, d))
    G = np.zeros((int(n), int(d)))
    if others == "aligned":
        G[:, 0] = 1.0
    G[-1, 0] = float(canary)
    return G


# ---------------------------------------------------------------------------------------------
# statistics


def clopper_pearson(k: int, m: int, level: float) -> tuple[float, float]:
    """One-sided Clopper–Pearson bounds ``(lower, upper)`` of a binomial proportion ``k/m``, each
    holding with probability ≥ ``level``.

    Parameters
    ----------
    k : int
        Successes.
    m : int
        Trials.
    level : float
        Confidence of each bound.

    Returns
    -------
    tuple of float
        ``(lower, upper)``.

    Examples
    --------
    >>> from dpsim.audit import clopper_pearson
    >>> lo, hi = clopper_pearson(5, 100, 0.95)
    >>> round(lo, 4), round(hi, 4)
    (0.0199, 0.1023)
    """
    from scipy.stats import beta

    lo = 0.0 if k == 0 else float(beta.ppf(1 - level, k, m - k + 1))
    hi = 1.0 if k == m else float(beta.ppf(level, k + 1, m - k))
    return lo, hi


def _eps_bound(k1, k0, m, delta, level):
    p1_lo, _ = clopper_pearson(k1, m, level)
    _, p0_hi = clopper_pearson(k0, m, level)
    if p1_lo - delta <= 0:
        return -math.inf
    return math.log((p1_lo - delta) / p0_hi)


def _eps_bounds(k1, k0, m, delta, level):
    """Vectorized :func:`_eps_bound` over arrays of counts."""
    from scipy.stats import beta

    k1 = np.asarray(k1, dtype=float)
    k0 = np.asarray(k0, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        p1_lo = np.where(k1 == 0, 0.0, beta.ppf(1 - level, k1, m - k1 + 1))
        p0_hi = np.where(k0 == m, 1.0, beta.ppf(level, k0 + 1, m - k0))
        out = np.log((p1_lo - delta) / p0_hi)
    return np.where(p1_lo - delta > 0, out, -np.inf)


def certifiable_max(trials: int, delta: float, confidence: float = 0.95) -> float:
    """The largest ε an audit with ``trials`` per dataset can certify (every certifying trial of
    ``D₁`` above the threshold, none of ``D₀``): a claim at or above it cannot be refuted by that
    audit, whatever the mechanism does.

    Parameters
    ----------
    trials : int
        Trials per dataset.
    delta : float
        The δ of the audit.
    confidence : float
        Its confidence.

    Returns
    -------
    float
        The largest certifiable ε.
    """
    m = int(trials) - int(trials) // 2
    level = 1 - (1 - confidence) / 2
    return max(_eps_bound(m, 0, m, delta, level), 0.0)


def trials_to_certify(epsilon: float, delta: float, confidence: float = 0.95) -> int:
    """The fewest trials per dataset whose :func:`certifiable_max` exceeds ``epsilon``.

    Parameters
    ----------
    epsilon : float
        The ε to certify.
    delta : float
        The δ of the audit.
    confidence : float
        Its confidence.

    Returns
    -------
    int
        Trials per dataset.
    """
    t = 4
    while certifiable_max(t, delta, confidence) <= epsilon:
        t *= 2
        if t > 10 ** 12:
            return t
    lo, hi = t // 2, t
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if certifiable_max(mid, delta, confidence) > epsilon:
            hi = mid
        else:
            lo = mid
    return hi


def _count_above(x, t):
    return int(np.count_nonzero(x > t))


def threshold_lower_bound(s0, s1, delta: float, *, confidence: float = 0.95):
    """ε lower bound from statistics of ``D₀`` trials ``s0`` and ``D₁`` trials ``s1`` (1-D arrays
    of equal length): threshold/direction chosen on the first halves, Clopper–Pearson on the second
    halves.  Returns ``(epsilon_lower, details)``.

    Parameters
    ----------
    s0 : numpy.ndarray
        Statistics of the ``D₀`` trials.
    s1 : numpy.ndarray
        Statistics of the ``D₁`` trials (same length).
    delta : float
        The δ of the bound.
    confidence : float
        Confidence of the Clopper–Pearson bounds.

    Returns
    -------
    tuple
        ``(epsilon_lower, details)``.
    """
    s0 = np.asarray(s0, dtype=float).ravel()
    s1 = np.asarray(s1, dtype=float).ravel()
    if s0.size != s1.size or s0.size < 4:
        raise ValueError(f"need two statistics arrays of the same length >= 4, got {s0.size} and {s1.size}")
    if not (0 < confidence < 1):
        raise ValueError(f"confidence must be in (0, 1), got confidence={confidence!r}")
    # non-finite statistics (a diverged trial) are mapped to +inf / -inf consistently: still a
    # deterministic function of the output, so the test stays valid
    s0 = np.nan_to_num(s0, nan=np.inf)
    s1 = np.nan_to_num(s1, nan=np.inf)
    level = 1 - (1 - confidence) / 2
    h = s0.size // 2
    a0, b0, a1, b1 = s0[:h], s0[h:], s1[:h], s1[h:]
    pooled = np.concatenate([a0, a1])
    pooled = pooled[np.isfinite(pooled)]
    quant = np.quantile(pooled, np.linspace(0.0, 1.0, 401)) if pooled.size else np.array([0.0])
    # ranks from the top, geometric: thresholds in the far tail (k₀ ≈ 0) matter most
    ranks = np.unique(np.round(np.geomspace(1, h, 200)).astype(int))
    best = (-math.inf, 0.0, 1)
    for sign in (1, -1):  # +1: D₁ above the threshold; -1: D₀ above (the other direction)
        x0, x1 = (a0, a1) if sign == 1 else (a1, a0)
        x0s, x1s = np.sort(x0), np.sort(x1)
        tails = np.concatenate([x0s[-ranks], x1s[-ranks]])
        cands = np.unique(np.concatenate([quant, tails[np.isfinite(tails)]]))
        k1 = x1s.size - np.searchsorted(x1s, cands, side="right")
        k0 = x0s.size - np.searchsorted(x0s, cands, side="right")
        e = _eps_bounds(k1, k0, h, delta, level)
        j = int(np.argmax(e))
        if e[j] > best[0]:
            best = (float(e[j]), float(cands[j]), sign)
    _, t, sign = best
    y0, y1 = (b0, b1) if sign == 1 else (b1, b0)
    m = y0.size
    k1, k0 = _count_above(y1, t), _count_above(y0, t)
    eps = _eps_bound(k1, k0, m, delta, level)
    return max(eps, 0.0), {"threshold": t, "direction": "D1 above" if sign == 1 else "D0 above",
                           "k_in": k1, "k_out": k0, "m": m}


# ---------------------------------------------------------------------------------------------
# the audit


@dataclass
class AuditReport:
    """Result of :func:`audit`: ``epsilon_lower`` (≥ 0; with probability ≥ ``confidence`` below
    the true ε of the audited mechanism at ``delta``), ``epsilon_claimed`` (what dpsim reports
    for the run), ``consistent`` (``epsilon_lower <= epsilon_claimed``), the threshold test's
    counts and the audited configuration."""

    optimizer: str
    epsilon_lower: float
    epsilon_claimed: float
    delta: float
    confidence: float
    consistent: bool
    threshold: float
    direction: str
    k_in: int  # trials of the "positive" dataset above the threshold (second half)
    k_out: int  # trials of the other dataset above the threshold (second half)
    m: int  # trials per dataset in the second half
    config: dict
    statistic: str = ""  # which statistic was thresholded: a key of STATISTICS, or "user (name)"

    def to_dict(self) -> dict:
        """The report as a plain dict.

        Returns
        -------
        dict
            Every field.
        """
        return asdict(self)

    def __str__(self):
        verdict = "consistent" if self.consistent else "VIOLATION: the claimed epsilon does not hold"
        return (f"audit of {self.optimizer}: epsilon >= {self.epsilon_lower:.4g} "
                f"({self.confidence:.0%} Clopper-Pearson, delta={self.delta:g}) vs claimed "
                f"{self.epsilon_claimed:.4g}: {verdict} [{self.direction}, {self.k_in}/{self.m} vs "
                f"{self.k_out}/{self.m}; statistic {self.statistic or 'n/a'}]")


# ---------------------------------------------------------------------------------------------
# the default statistic: read what the optimizer releases, per privatizer shape

#: Name of the probe through which the default statistic of a normalized-step optimizer reads its
#: releases (:func:`default_statistic`).
RELEASE_PROBE = "_audit_release"

#: The default statistic of each privatizer shape (:func:`default_statistic`), for reports/docs.
STATISTICS = {
    "linear": "-<w_T, u>: the final parameters along the canary direction u (the release enters "
              "the parameters linearly on the first step: DP-SGD, momentum, RMSProp/Adam, DP2, IME, "
              "public-data and DP-MF variants)",
    "normalized": "sum over steps of <g_t, u>, each release g_t read back from the step and the "
                  "AdaGrad accumulator: g_t = -sign(dw_t)*sqrt(dv_t) per coordinate (PAGAN), "
                  "-dw_t/|dw_t|*sqrt(dv_t) (PASAN); the step alone keeps only a sign",
    "gradient_and_squares": "sum over steps of the likelihood-ratio weighting of both releases, "
                            "(1-rho)<g_t, u>/C + rho<s_t, u*u/|u*u|>/C2: the squares release s_t = "
                            "dv_t (the accumulator's increment) and the gradient release g_t = "
                            "-dw_t*(sqrt(max(v_t, 0)) + eps)/lr (exact when k = d; else s_t alone) "
                            "(noisy AdaGrad)",
}


def _default_statistic(direction):
    def stat(res):
        return -(res.params @ direction)
    return stat


def privatizer_shape(optimizer, d: int) -> str:
    """Which default statistic applies to ``optimizer`` (a key of :data:`STATISTICS`), from the
    types of its initial state: an ellipsoid privatizer feeding an AdaGrad accumulator
    (``"normalized"``: PASAN, PAGAN), the two releases of noisy AdaGrad
    (``"gradient_and_squares"``), else ``"linear"``.

    Parameters
    ----------
    optimizer : Optimizer
        The audited optimizer.
    d : int
        Dimension.

    Returns
    -------
    str
        A key of :data:`STATISTICS`.
    """
    from .optimizers.noisy_adagrad import NoisyMomentState
    from .privacy.ellipsoid import EllipsoidState
    from .transforms.preconditioners import PreconditionState

    try:
        state = optimizer.transform.init(np.zeros((1, int(d))))
    except Exception:  # noqa: BLE001 - a chain whose init needs more than zeros: the plain statistic
        return "linear"
    if not isinstance(state, dict):
        return "linear"
    priv, pre = state.get("privatizer"), state.get("preconditioner")
    if isinstance(pre, PreconditionState):
        if isinstance(priv, EllipsoidState):
            return "normalized"
        hp = optimizer.hyperparameters
        if isinstance(priv, NoisyMomentState) and all(
                k in hp for k in ("lr", "eps", "clip", "clip2", "precond_share", "k")):
            return "gradient_and_squares"
    return "linear"


def _release_probe(shape: str, u: np.ndarray, hyperparameters: dict):
    """A probe (with ``probe_state``, so a checkpointed run keeps it) that returns, at every
    record, the running sum over steps of the statistic of each step's releases (``STATISTICS``);
    the audit records every step."""
    from .backend import to_numpy
    from .transforms import lookup

    mem: dict = {}
    u = np.asarray(u, dtype=float)
    uu = u * u
    uu = uu / np.linalg.norm(uu)
    hp = hyperparameters

    def col(name, R):  # a hyperparameter as a (R, 1) column (per-trial lists allowed)
        return np.broadcast_to(np.asarray(hp[name], dtype=float).reshape(-1, 1), (R, 1))

    def probe(state, params, ctx):
        w = np.array(to_numpy(params), dtype=float)
        v = np.array(to_numpy(lookup(state, "preconditioner").v), dtype=float)
        R = w.shape[0]
        if "w" not in mem:  # the initial record: nothing released yet
            mem.update(w=w, v=v, total=np.zeros(R))
            return mem["total"].copy()
        dw, dv = w - mem["w"], v - mem["v"]
        with np.errstate(invalid="ignore", divide="ignore"):
            if shape == "normalized":
                mag = np.sqrt(np.maximum(dv, 0.0))
                if v.shape[1] == 1:  # PASAN: one accumulator of |g|^2, the step along -g
                    nrm = np.sqrt(np.sum(dw * dw, axis=1, keepdims=True))
                    g = -dw / np.where(nrm > 0, nrm, 1.0) * mag
                else:  # PAGAN: per coordinate
                    g = -np.sign(dw) * mag
                t = g @ u
            else:  # gradient_and_squares (noisy AdaGrad)
                rho, C, C2 = col("precond_share", R), col("clip", R), col("clip2", R)
                t = (rho / C2)[:, 0] * (dv @ uu)
                if int(np.max(hp["k"])) == w.shape[1]:  # H = sqrt(max(v, 0)) exactly (V V^T = I)
                    lr, eps = col("lr", R), col("eps", R)
                    g = np.where(lr > 0, -dw * (np.sqrt(np.maximum(v, 0.0)) + eps) / lr, 0.0)
                    t = t + ((1.0 - rho) / C)[:, 0] * (g @ u)
        mem["total"] = mem["total"] + np.nan_to_num(t, nan=0.0)
        mem["w"], mem["v"] = w, v
        return mem["total"].copy()

    probe.probe_state = mem
    return probe


def default_statistic(optimizer, direction, d: int):
    """``(statistic, probes, shape)``: the audit's default statistic for ``optimizer``, built from
    what it releases (:data:`STATISTICS`, chosen by :func:`privatizer_shape`).  ``probes`` are
    the probes it needs (recorded at every step); ``statistic(result) -> (trials,)``.

    Parameters
    ----------
    optimizer : Optimizer
        The audited optimizer.
    direction : numpy.ndarray
        The canary's direction.
    d : int
        Dimension.

    Returns
    -------
    tuple
        ``(statistic, probes, shape)``.
    """
    shape = privatizer_shape(optimizer, d)
    if shape == "linear":
        return _default_statistic(direction), {}, shape
    probe = _release_probe(shape, direction, dict(optimizer.hyperparameters))

    def stat(res):
        return np.asarray(res.records[RELEASE_PROBE][-1], dtype=float)

    return stat, {RELEASE_PROBE: probe}, shape


def audit(optimizer, *, trials: int = 100_000, n: int | None = None, batch_size: int = 1, steps: int = 1,
          delta: float = 1e-5, sampling: str = "poisson", accountant: str = "pld",
          table=None, canary_index: int | None = None, others: str = "zero", d: int = 1,
          statistic: Callable | None = None, probes: dict | None = None,
          confidence: float = 0.95, seed: int = 0, **hyperparameters) -> AuditReport:
    """Audit ``optimizer`` (an :class:`~dpsim.optimizers.Optimizer` or a registered name built
    with ``hyperparameters``) with a canary threshold test (module docstring).

    ``trials`` per dataset (half choose the threshold, half certify); ``n``, ``d``, ``others``:
    the built-in table (:func:`canary_table`; ``n`` default 4 private rows, plus the smallest
    public split the optimizer's ``public_fraction`` allows, :func:`default_rows`), or ``table`` ``(n, d)`` with the canary in row
    ``canary_index`` (default the last); ``batch_size``, ``steps``, ``sampling``: the simulated
    run (the claimed ε is that run's ε at ``delta`` with ``accountant``; per-trial ε: the largest);
    ``statistic(result) -> (trials,)`` a scalar per trial (default: built from what the optimizer
    releases, per privatizer shape, :func:`default_statistic` — ``−⟨w_T, canary⟩`` for releases
    that enter the parameters linearly, the releases read back from the step and the AdaGrad
    accumulator for PASAN/PAGAN and noisy AdaGrad, whose first step keeps only a sign; any
    function of the run's outputs is valid: probes passed in ``probes`` are recorded and readable
    as ``result.records[name][-1]``); ``confidence`` of the Clopper–Pearson bound; ``seed`` a
    non-negative integer.

    Parameters
    ----------
    optimizer : Optimizer or str
        The optimizer, or a registered name built with ``hyperparameters``.
    trials : int
        Trials per dataset (half choose the threshold, half certify).
    n : int, optional
        Rows of the built-in table (default: :func:`default_rows`).
    batch_size : int
        The simulated run's batch size.
    steps : int
        Its steps.
    delta : float
        The δ of the claimed and certified ε.
    sampling : str
        The simulated run's sampler.
    accountant : {'pld', 'rdp'}
        The accountant of the claimed ε.
    table : array_like, optional
        A user ``(n, d)`` table (default: :func:`canary_table`).
    canary_index : int, optional
        The canary's row of ``table`` (default: the last).
    others : {'zero', 'aligned'}
        The built-in table's other rows.
    d : int
        The built-in table's dimension.
    statistic : callable, optional
        ``statistic(result) -> (trials,)`` (default: :func:`default_statistic`).
    probes : dict, optional
        Probes recorded for ``statistic``.
    confidence : float
        Confidence of the Clopper–Pearson bound.
    seed : int
        A non-negative seed.
    **hyperparameters
        The optimizer's hyperparameters, when ``optimizer`` is a name.

    Returns
    -------
    AuditReport
        ``epsilon_lower``, ``epsilon_claimed``, ``consistent`` and the details.
    """
    if isinstance(optimizer, str):
        optimizer = _optimizers.get(optimizer, **hyperparameters)
    elif hyperparameters:
        raise ValueError(f"hyperparameters {sorted(hyperparameters)} given with an Optimizer object; "
                         "pass a name to build it, or build it yourself")
    if not hasattr(optimizer, "events"):
        raise ValueError(f"optimizer must be an Optimizer or a registered name, got optimizer={optimizer!r}")
    if isinstance(trials, bool) or not isinstance(trials, (int, np.integer)) or trials < 4:
        raise ValueError(f"trials must be an integer >= 4, got trials={trials!r}")
    check_seed(seed)
    # about 16 (trials, d) float arrays live at once (parameters, state, noise, records, both runs)
    check_allocation("the audit's per-trial arrays", (16 * int(trials), max(int(d), 1)))
    if not (isinstance(confidence, (int, float)) and not isinstance(confidence, bool)
            and 0 < confidence < 1):
        raise ValueError(f"confidence must be in (0, 1), got confidence={confidence!r}")
    if statistic is not None and not callable(statistic):
        raise ValueError(f"statistic must be a function of the result, got statistic={statistic!r}")
    if table is None:
        table = canary_table(default_rows(optimizer) if n is None else n, d, others=others)
    table = np.array(table, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError(f"table must be an (n, d) array, got shape {table.shape}")
    ci = table.shape[0] - 1 if canary_index is None else canary_index
    if isinstance(ci, bool) or not isinstance(ci, (int, np.integer)) or not (0 <= ci < table.shape[0]):
        raise ValueError(f"canary_index must index a row of the table (n={table.shape[0]}), "
                         f"got canary_index={canary_index!r}")
    canary = table[ci].copy()
    if not np.any(canary):
        raise ValueError("the canary row of the table is zero: D0 and D1 would be the same dataset")
    ci = _private_position(optimizer, table.shape[0], ci, seed)
    t1 = _move_row(table, canary_index=table.shape[0] - 1 if canary_index is None else canary_index, to=ci)
    t0 = t1.copy()
    t0[ci] = 0.0
    direction = canary / np.linalg.norm(canary)
    record_every = max(steps, 1) if isinstance(steps, (int, np.integer)) else steps
    if statistic is None:
        stat, extra, shape = default_statistic(optimizer, direction, table.shape[1])
        if extra:  # the releases are read step by step
            probes = {**(probes or {}), **extra}
            record_every = 1
        key, described = shape, STATISTICS[shape]
    else:
        name = getattr(statistic, "__name__", type(statistic).__name__)
        stat, key, described = statistic, f"user ({name})", f"the user's statistic {name}"
    kw = dict(steps=steps, batch_size=batch_size, trials=int(trials), sampling=sampling, seed=seed,
              record_every=record_every, metrics=(), probes=probes)
    # The same seed for both runs: the mechanism (its public split, if any) is the same random
    # function of the data; the two runs are coupled trial by trial, which leaves each dataset's
    # count binomial (the Clopper–Pearson bounds are marginal, combined by a union bound).
    r1 = simulate(GradientTable(t1, name="canary_in"), optimizer, **kw)
    if statistic is None and RELEASE_PROBE in (probes or {}):  # a fresh probe memory per run
        stat, extra, _ = default_statistic(optimizer, direction, table.shape[1])
        kw["probes"] = {**kw["probes"], **extra}
    r0 = simulate(GradientTable(t0, name="canary_out"), optimizer, **kw)
    claimed = r1.epsilon(delta, accountant=accountant)
    claimed = float(np.max(claimed))
    s0, s1 = np.asarray(stat(r0), dtype=float), np.asarray(stat(r1), dtype=float)
    eps, det = threshold_lower_bound(s0, s1, delta, confidence=confidence)
    config = {"trials": int(trials), "n": int(table.shape[0]), "d": int(table.shape[1]),
              "epsilon_certifiable_max": certifiable_max(int(trials), delta, confidence),
              "batch_size": batch_size, "steps": steps, "sampling": sampling,
              "accountant": accountant, "seed": seed, "hyperparameters": dict(optimizer.hyperparameters),
              "privacy": r1.privacy, "statistic": described}
    return AuditReport(optimizer=optimizer.name or "(unnamed)", epsilon_lower=float(eps),
                       epsilon_claimed=claimed, delta=float(delta), confidence=float(confidence),
                       consistent=bool(eps <= claimed), config=config, statistic=key, **det)


def default_rows(optimizer, private: int = 4) -> int:
    """Rows of the built-in table: ``private`` (4), or for an optimizer with a public split the
    smallest ``n`` whose split (:func:`dpsim.sampling.public_count`) holds at least one public
    row and leaves ``private`` private ones (e.g. 5 at ``public_fraction=0.25``, 51 at 0.01).

    Parameters
    ----------
    optimizer : Optimizer
        The audited optimizer.
    private : int
        Private rows wanted.

    Returns
    -------
    int
        Rows of the table.
    """
    frac = optimizer.public_fraction
    if not frac:
        return private
    n = private + 1
    while True:
        pub = int(round(frac * n))
        if pub >= 1 and n - pub >= private:
            return n
        n += 1


def _move_row(table, *, canary_index, to):
    t = table.copy()
    if canary_index != to:
        t[[canary_index, to]] = t[[to, canary_index]]
    return t


def _private_position(optimizer, n, ci, seed):
    """A row index that the engine keeps private for ``seed`` (optimizers with a public split carve
    it out of the training data; the canary must not land in it)."""
    frac = optimizer.public_fraction
    if not frac:
        return ci
    from .engine import public_split

    pub = set(public_split(n, frac, seed).tolist())
    if ci not in pub:
        return ci
    free = [i for i in range(n) if i not in pub]
    if not free:
        raise ValueError(f"the public split of {optimizer.name!r} (public_fraction={frac}) covers "
                         f"every row of the n={n} table for seed={seed}; use a larger n")
    return free[-1]
