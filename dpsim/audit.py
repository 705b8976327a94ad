"""Empirical privacy audit: a canary threshold test with a Clopper–Pearson lower bound on ε.

    import dpsim
    rep = dpsim.audit("dp_sgd", noise_multiplier=1.0, trials=100_000)
    rep.epsilon_lower, rep.epsilon_claimed, rep.consistent

**What it does.**  Two neighbouring datasets, ``D₀`` (the canary row zeroed, i.e. removed: with the
nominal-b averaging a zero-gradient example changes nothing, and the sample rate ``b/n`` is the
same) and ``D₁`` (the canary present), are each run for ``trials`` independent trials in one
:func:`dpsim.simulate` call.  A scalar statistic of every trial's output (default: the final
parameters projected on the canary direction, ``−⟨w_T, canary⟩``) is thresholded: on the first
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
``trials`` per dataset the bound cannot certify much more than ``log(trials/2)``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from . import optimizers as _optimizers
from .engine import simulate
from .problems import Problem

__all__ = ["GradientTable", "canary_table", "AuditReport", "audit", "clopper_pearson",
           "threshold_lower_bound"]


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
        G = np.array(table, dtype=np.float64)
        if G.ndim != 2 or G.shape[0] < 1 or G.shape[1] < 1:
            raise ValueError(f"table must be an (n, d) array with n, d >= 1, got shape {G.shape}")
        if not np.all(np.isfinite(G)):
            raise ValueError("table must be finite")
        super().__init__(name=name, n=G.shape[0], d=G.shape[1],
                         config={"name": name, "n": int(G.shape[0]), "d": int(G.shape[1])})
        self.G = G
        self._mean = G.mean(axis=0)

    def loss(self, w):
        xp = self.xp
        return xp.sum(w * xp.asarray(self._mean)[None, :], axis=1)

    def grad(self, w):
        xp = self.xp
        return xp.broadcast_to(xp.asarray(self._mean)[None, :], w.shape) + 0 * w

    def per_example_grads(self, w, idx):
        return self.G[idx]


def canary_table(n: int, d: int = 1, *, others: str = "zero", canary: float = 1e3) -> np.ndarray:
    """The built-in ``(n, d)`` tables: row ``n − 1`` is the canary ``canary · e₁`` (its norm far
    above any clip, so it is clipped to the clip norm), the others are 0 (``"zero"``) or ``e₁``
    (``"aligned"``: unit norm, so with clip 1 they equal the clipped canary)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n must be an integer >= 2 (the canary and one other example), got n={n!r}")
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"d must be a positive integer, got d={d!r}")
    if others not in ("zero", "aligned"):
        raise ValueError(f"others must be 'zero' or 'aligned', got others={others!r}")
    if not (isinstance(canary, (int, float)) and math.isfinite(canary) and canary != 0):
        raise ValueError(f"canary must be a finite non-zero number, got canary={canary!r}")
    G = np.zeros((int(n), int(d)))
    if others == "aligned":
        G[:, 0] = 1.0
    G[-1, 0] = float(canary)
    return G


# ---------------------------------------------------------------------------------------------
# statistics


def clopper_pearson(k: int, m: int, level: float) -> tuple[float, float]:
    """One-sided Clopper–Pearson bounds ``(lower, upper)`` of a binomial proportion ``k/m``, each
    holding with probability ≥ ``level``."""
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


def _count_above(x, t):
    return int(np.count_nonzero(x > t))


def threshold_lower_bound(s0, s1, delta: float, *, confidence: float = 0.95):
    """ε lower bound from statistics of ``D₀`` trials ``s0`` and ``D₁`` trials ``s1`` (1-D arrays
    of equal length): threshold/direction chosen on the first halves, Clopper–Pearson on the second
    halves.  Returns ``(epsilon_lower, details)``."""
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

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self):
        verdict = "consistent" if self.consistent else "VIOLATION: the claimed epsilon does not hold"
        return (f"audit of {self.optimizer}: epsilon >= {self.epsilon_lower:.4g} "
                f"({self.confidence:.0%} Clopper-Pearson, delta={self.delta:g}) vs claimed "
                f"{self.epsilon_claimed:.4g}: {verdict} [{self.direction}, {self.k_in}/{self.m} vs "
                f"{self.k_out}/{self.m}]")


def _default_statistic(direction):
    def stat(res):
        return -(res.params @ direction)
    return stat


def audit(optimizer, *, trials: int = 100_000, n: int = 4, batch_size: int = 1, steps: int = 1,
          delta: float = 1e-5, sampling: str = "poisson", accountant: str = "pld",
          table=None, canary_index: int | None = None, others: str = "zero", d: int = 1,
          statistic: Callable | None = None, probes: dict | None = None,
          confidence: float = 0.95, seed: int = 0, **hyperparameters) -> AuditReport:
    """Audit ``optimizer`` (an :class:`~dpsim.optimizers.Optimizer` or a registered name built
    with ``hyperparameters``) with a canary threshold test (module docstring).

    ``trials`` per dataset (half choose the threshold, half certify); ``n``, ``d``, ``others``:
    the built-in table (:func:`canary_table`), or ``table`` ``(n, d)`` with the canary in row
    ``canary_index`` (default the last); ``batch_size``, ``steps``, ``sampling``: the simulated
    run (the claimed ε is that run's ε at ``delta`` with ``accountant``; per-trial ε: the largest);
    ``statistic(result) -> (trials,)`` a scalar per trial (default ``−⟨w_T, canary⟩``; any
    function of the run's outputs is valid: probes passed in ``probes`` are recorded and readable
    as ``result.records[name][-1]``); ``confidence`` of the Clopper–Pearson bound.
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
    if table is None:
        table = canary_table(n, d, others=others)
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
    stat = statistic or _default_statistic(direction)
    kw = dict(steps=steps, batch_size=batch_size, trials=int(trials), sampling=sampling, seed=seed,
              record_every=max(steps, 1), metrics=(), probes=probes)
    # The same seed for both runs: the mechanism (its public split, if any) is the same random
    # function of the data; the two runs are coupled trial by trial, which leaves each dataset's
    # count binomial (the Clopper–Pearson bounds are marginal, combined by a union bound).
    r1 = simulate(GradientTable(t1, name="canary_in"), optimizer, **kw)
    r0 = simulate(GradientTable(t0, name="canary_out"), optimizer, **kw)
    claimed = r1.epsilon(delta, accountant=accountant)
    claimed = float(np.max(claimed))
    s0, s1 = np.asarray(stat(r0), dtype=float), np.asarray(stat(r1), dtype=float)
    eps, det = threshold_lower_bound(s0, s1, delta, confidence=confidence)
    config = {"trials": int(trials), "n": int(table.shape[0]), "d": int(table.shape[1]),
              "batch_size": batch_size, "steps": steps, "sampling": sampling,
              "accountant": accountant, "seed": seed, "hyperparameters": dict(optimizer.hyperparameters),
              "privacy": r1.privacy}
    return AuditReport(optimizer=optimizer.name or "(unnamed)", epsilon_lower=float(eps),
                       epsilon_claimed=claimed, delta=float(delta), confidence=float(confidence),
                       consistent=bool(eps <= claimed), config=config, **det)


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
