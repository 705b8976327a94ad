"""Assertions that pit a bound or a declared law against simulation at a stated false-alarm rate.

Each assertion is a one-sided (or goodness-of-fit) hypothesis test whose null hypothesis is "the
claim holds"; it fails only when the simulated data reject the claim at level ``alpha``.  So when
the claim is true, the assertion fails with probability at most ``alpha`` (the *false-alarm
rate*; exactly ``alpha`` at the boundary for the exact tests), and a property test that calls it
on ``k`` hypothesis examples fails spuriously with probability at most ``k · alpha``.  The
statistics come from :mod:`scipy.stats` (the core may not import :mod:`dpsim.analysis`).

Messages show the bound, the estimate with its confidence interval, the Monte Carlo size and the
seed that reproduces the failure.  Monte Carlo sizes pass through :func:`scaled_trials`, which
the pytest plugin's ``--dpsim-trials`` option scales.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

__all__ = ["assert_bound_holds", "assert_distribution_matches", "assert_privacy_holds",
           "scaled_trials", "set_trials_scale", "BoundViolation"]

_TRIALS_SCALE = [1.0]


class BoundViolation(AssertionError):
    """Raised by the assertions; ``.details`` holds the numbers of the message."""

    def __init__(self, message, details):
        super().__init__(message)
        self.details = details


def set_trials_scale(factor: float) -> None:
    """Scale every Monte Carlo size requested through :func:`scaled_trials` by ``factor`` (the
    pytest plugin sets it from ``--dpsim-trials``).

    Parameters
    ----------
    factor : float
        The scale, > 0.
    """
    f = float(factor)
    if not (f > 0 and math.isfinite(f)):
        raise ValueError(f"the trials scale must be positive and finite, got {factor!r}")
    _TRIALS_SCALE[0] = f


def scaled_trials(trials: int, *, minimum: int = 2) -> int:
    """``trials`` times the configured scale (``--dpsim-trials``), at least ``minimum``.

    Parameters
    ----------
    trials : int
        The size a test asks for.
    minimum : int
        The smallest size returned.

    Returns
    -------
    int
        The scaled size.

    Examples
    --------
    >>> from dpsim.testing import scaled_trials
    >>> scaled_trials(1000)  # the default scale is 1
    1000
    """
    if isinstance(trials, bool) or not isinstance(trials, (int, np.integer)) or trials < 1:
        raise ValueError(f"trials must be a positive integer, got trials={trials!r}")
    return max(int(minimum), int(round(int(trials) * _TRIALS_SCALE[0])))


def _check_alpha(alpha):
    a = float(alpha)
    if not (0 < a < 1):
        raise ValueError(f"alpha must be in (0, 1), got alpha={alpha!r}")
    return a


def _samples(estimate_fn, trials, seed):
    if callable(estimate_fn):
        if trials is None:
            raise ValueError("trials is required when estimate_fn is a function")
        R = scaled_trials(trials)
        x = estimate_fn(R, seed)
    else:
        x = estimate_fn
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"the estimate must be an (R,) or (R, m) array of R >= 2 independent "
                         f"trials, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("the simulated samples contain NaN or infinite values")
    return x


def _fmt(v):
    return np.array2string(np.asarray(v), precision=6, separator=", ") if np.ndim(v) else f"{float(v):.6g}"


def assert_bound_holds(estimate_fn, bound, *, trials: int | None = None, alpha: float = 1e-3,
                       seed: int = 0, side: str = "upper", kind: str = "mean", value_range=None,
                       rtol: float = 1e-12, what: str = "E[X]", demonstrate: bool = False):
    """Assert that ``bound`` holds for the quantity estimated by simulation, failing with
    probability at most ``alpha`` when it does (the false-alarm probability).

    ``estimate_fn(trials, seed) -> (R,) or (R, m)`` returns ``R`` independent samples (one per
    trial; ``m`` quantities side by side), or pass the samples themselves.  ``trials`` is scaled
    by ``--dpsim-trials`` (:func:`scaled_trials`).  ``bound`` is a scalar or ``(m,)``.

    ``side="upper"``: the claim is ``θ_k ≤ bound_k`` for every ``k``; the assertion fails when a
    one-sided lower confidence bound of some ``θ_k`` at level ``1 − alpha/m`` (Bonferroni over
    the ``m`` quantities) exceeds ``bound_k``.  ``side="lower"``: ``θ_k ≥ bound_k``, mirrored.

    ``kind="mean"``: ``θ`` is the expectation of the samples.  Without ``value_range`` the
    confidence bound is Student's t: the false-alarm probability is exactly ``alpha`` for Gaussian
    samples at ``θ = bound`` and ``alpha + O(skewness/√R)`` otherwise (Berry–Esseen).  With
    ``value_range=(a, b)`` (every sample in ``[a, b]``) it is Hoeffding's: ``≤ alpha`` for any
    distribution and any ``R``, at the price of a wider interval.
    ``kind="probability"``: the samples are 0/1 indicators and ``θ`` their probability; the bound
    is the exact one-sided Clopper–Pearson bound, so the false-alarm probability is ``≤ alpha``
    for every ``R`` (a tail bound ``P(X > x) ≤ p`` is ``kind="probability"`` on ``X > x``).

    ``rtol``: floating-point slack, the bound is compared as ``bound + rtol·|bound|`` (a bound
    met with equality, e.g. with σ = 0, must not fail by one rounding error).

    ``demonstrate=True`` reverses the burden of proof: the assertion passes only when the data
    *show* the claim at level ``alpha`` — for ``side="upper"``, when the one-sided *upper*
    confidence bound of every ``θ_k`` (level ``1 − alpha/m``) is at most ``bound_k``.  Then a
    claim that is false (``θ_k > bound_k`` for some ``k``) passes with probability at most
    ``alpha`` (the miss rate), while a true claim fails unless it holds with a margin of about one
    confidence-interval width: the mode for a bound that is known to be loose, where a pass should
    mean "clearly below", not merely "not clearly above".

    Raises :class:`BoundViolation` (an ``AssertionError``) naming the bound, the estimate, its
    two-sided ``1 − 2·alpha/m`` interval, ``R`` and the seed.

    Parameters
    ----------
    estimate_fn : callable or array_like
        ``estimate_fn(trials, seed) -> (R,) or (R, m)`` samples, or the samples themselves.
    bound : float or array_like
        The claimed bound, scalar or ``(m,)``.
    trials : int, optional
        ``R`` (scaled by ``--dpsim-trials``).
    alpha : float
        The false-alarm probability (miss rate with ``demonstrate``).
    seed : int
        Seed passed to ``estimate_fn``.
    side : {'upper', 'lower'}
        Which side the claim bounds.
    kind : {'mean', 'probability'}
        What ``θ`` is.
    value_range : tuple, optional
        ``(a, b)`` containing every sample (Hoeffding's bound).
    rtol : float
        Floating-point slack of the comparison.
    what : str
        The quantity's name in the message.
    demonstrate : bool
        Pass only when the data show the claim.

    Returns
    -------
    numpy.ndarray
        The estimate of ``θ``, ``(m,)``.

    Raises
    ------
    BoundViolation
        When the bound is refuted (or not shown, with ``demonstrate``).

    Examples
    --------
    >>> import numpy as np
    >>> from dpsim.testing import assert_bound_holds
    >>> samples = np.random.default_rng(0).uniform(0.0, 1.0, 2000)
    >>> assert_bound_holds(samples, 0.6, value_range=(0.0, 1.0)).round(1)  # passes: E[X] = 0.5
    array([0.5])
    """
    a = _check_alpha(alpha)
    if side not in ("upper", "lower"):
        raise ValueError(f"side must be 'upper' or 'lower', got side={side!r}")
    if kind not in ("mean", "probability"):
        raise ValueError(f"kind must be 'mean' or 'probability', got kind={kind!r}")
    x = _samples(estimate_fn, trials, seed)
    R, m = x.shape
    bnd = np.broadcast_to(np.asarray(bound, dtype=float), (m,))
    if np.any(np.isnan(bnd)):
        raise ValueError(f"bound must not be NaN, got bound={bound!r}")
    am = a / m
    est = x.mean(axis=0)
    if kind == "probability":
        if not np.all((x == 0) | (x == 1)):
            raise ValueError("kind='probability' needs 0/1 indicator samples")
        k = x.sum(axis=0)
        lo = np.where(k > 0, stats.beta.ppf(am, k, R - k + 1), 0.0)
        hi = np.where(k < R, stats.beta.ppf(1 - am, k + 1, R - k), 1.0)
        method = "Clopper-Pearson"
    elif value_range is not None:
        lo_v, hi_v = map(float, value_range)
        if not (lo_v < hi_v) or np.any(x < lo_v) or np.any(x > hi_v):
            raise ValueError(f"value_range={value_range!r} must contain every sample "
                             f"(min {x.min():.6g}, max {x.max():.6g})")
        half = (hi_v - lo_v) * math.sqrt(math.log(1.0 / am) / (2.0 * R))
        lo, hi = est - half, est + half
        method = "Hoeffding"
    else:
        se = x.std(axis=0, ddof=1) / math.sqrt(R)
        t = float(stats.t.ppf(1.0 - am, R - 1))
        lo, hi = est - t * se, est + t * se
        method = "Student t"
    slack = float(rtol) * np.abs(bnd)
    if demonstrate:
        bad = (hi > bnd + slack) if side == "upper" else (lo < bnd - slack)
    else:
        bad = (lo > bnd + slack) if side == "upper" else (hi < bnd - slack)
    if np.any(bad):
        j = int(np.argmax(bad))
        rel = "<=" if side == "upper" else ">="
        details = {"bound": bnd, "estimate": est, "interval": (lo, hi), "trials": R, "seed": seed,
                   "alpha": a, "index": j, "method": method, "demonstrate": bool(demonstrate)}
        where = f"[{j}]" if m > 1 else ""
        head = (f"bound not demonstrated: claim {what}{where} {rel} {bnd[j]:.6g} must hold with "
                f"its whole interval, but the estimate is " if demonstrate else
                f"bound violated: claim {what}{where} {rel} {bnd[j]:.6g}, but the estimate is ")
        msg = (head +
               f"{est[j]:.6g} with {100 * (1 - 2 * am):.4g}% interval [{lo[j]:.6g}, {hi[j]:.6g}] "
               f"({method}; one-sided " + ("miss" if demonstrate else "false-alarm")
               + f" rate alpha={a:g}"
               + (f", Bonferroni over {m}" if m > 1 else "")
               + f"); trials={R}, seed={seed}"
               + (f"; reproduce with estimate_fn({R}, {seed})" if callable(estimate_fn) else ""))
        raise BoundViolation(msg, details)
    return est


def assert_distribution_matches(samples, law, *, alpha: float = 1e-3, seed=None, what: str = "samples"):
    """Assert that i.i.d. ``samples`` follow the continuous law ``law`` (a frozen
    :mod:`scipy.stats` distribution, e.g. ``scipy.stats.norm(0, σC/b)``), by the one-sample
    Kolmogorov–Smirnov test.

    When the samples do follow ``law`` (independent draws), the assertion fails with probability
    exactly ``alpha`` (the KS p-value is uniform under the null for a continuous law; scipy's
    exact distribution for ``R ≤ 10 000``, the asymptotic one beyond).  ``samples`` may have any
    shape; it is flattened, so every entry must be an independent draw.  ``seed`` is only
    reported in the message.  Returns the p-value.

    Parameters
    ----------
    samples : array_like
        Independent draws (flattened).
    law : scipy.stats frozen distribution
        The continuous law they should follow.
    alpha : float
        The false-alarm probability.
    seed : int, optional
        Reported in the message.
    what : str
        The samples' name in the message.

    Returns
    -------
    float
        The KS p-value.

    Raises
    ------
    BoundViolation
        When the test rejects at level ``alpha``.
    """
    a = _check_alpha(alpha)
    x = np.asarray(samples, dtype=float).ravel()
    if x.size < 2 or not np.all(np.isfinite(x)):
        raise ValueError(f"need at least 2 finite samples, got {x.size}")
    if not hasattr(law, "cdf") or not hasattr(law, "dist") or not isinstance(law.dist, stats.rv_continuous):
        raise ValueError(f"law must be a frozen continuous scipy.stats distribution, got {law!r}")
    res = stats.kstest(x, law.cdf)
    if res.pvalue < a:
        mean, sd = float(x.mean()), float(x.std(ddof=1))
        details = {"statistic": res.statistic, "pvalue": res.pvalue, "alpha": a, "n": x.size, "seed": seed}
        raise BoundViolation(
            f"{what} do not follow {law.dist.name}{law.args}{law.kwds or ''}: KS statistic "
            f"{res.statistic:.4g}, p-value {res.pvalue:.3g} < alpha={a:g} (false-alarm rate alpha); "
            f"n={x.size}, sample mean {mean:.6g} (law {float(law.mean()):.6g}), sample sd {sd:.6g} "
            f"(law {float(law.std()):.6g}); seed={seed}", details)
    return float(res.pvalue)


def assert_privacy_holds(optimizer, *, trials: int = 20_000, alpha: float = 0.05, delta: float = 1e-5,
                         seed: int = 0, **audit_kwargs):
    """Assert that the ε dpsim reports for ``optimizer`` survives an empirical audit
    (:func:`dpsim.audit.audit`: a canary threshold test with Clopper–Pearson bounds).

    The audit's lower bound ``ε_lower`` exceeds the true ε of an (ε, δ)-DP mechanism with
    probability at most ``alpha`` (its confidence is ``1 − alpha``), so when the claimed ε is
    correct the assertion fails with probability at most ``alpha`` (the false-alarm rate).  A
    failure proves, at that confidence, that the declared privacy does not hold (a mis-declared
    noise multiplier or sensitivity).  A pass proves nothing about tightness; a ``trials`` too small
    for the audit to certify anything above the claim is refused (``ValueError`` naming the trials
    needed), rather than passed vacuously.  The audit's default statistic reads what the optimizer
    releases (:data:`dpsim.audit.STATISTICS`: PASAN/PAGAN and noisy AdaGrad included).  ``trials`` (per
    dataset) is scaled by ``--dpsim-trials``; other keywords go to :func:`dpsim.audit.audit`
    (``n``, ``batch_size``, ``steps``, ``sampling``, ``table``, ``others``, ``statistic``, and the
    hyperparameters when ``optimizer`` is a name).  Returns the :class:`~dpsim.audit.AuditReport`.

    Parameters
    ----------
    optimizer : Optimizer or str
        The optimizer (or a registered name).
    trials : int
        Trials per dataset (scaled by ``--dpsim-trials``).
    alpha : float
        The false-alarm probability.
    delta : float
        The δ of the claim.
    seed : int
        The audit's seed.
    **audit_kwargs
        Passed to :func:`dpsim.audit.audit`.

    Returns
    -------
    AuditReport
        The audit's report.

    Raises
    ------
    BoundViolation
        When the audit refutes the claimed ε.
    ValueError
        When ``trials`` cannot certify anything above the claim.
    """
    from ..audit import audit, certifiable_max, trials_to_certify

    a = _check_alpha(alpha)
    R = scaled_trials(trials, minimum=4)
    rep = audit(optimizer, trials=R, delta=delta, seed=seed, confidence=1.0 - a, **audit_kwargs)
    top = certifiable_max(R, delta, 1.0 - a)
    if rep.consistent and top <= rep.epsilon_claimed:
        need = trials_to_certify(rep.epsilon_claimed, delta, 1.0 - a)
        raise ValueError(
            f"trials={R} cannot test the claim: an audit of {R} trials certifies at most "
            f"epsilon={top:.4g}, not above the claimed {rep.epsilon_claimed:.4g}, so it would pass "
            f"whatever the privacy; use trials >= {need}")
    if not rep.consistent:
        raise BoundViolation(
            f"privacy violated: {rep.optimizer} claims epsilon={rep.epsilon_claimed:.6g} at "
            f"delta={rep.delta:g}, but the audit certifies epsilon >= {rep.epsilon_lower:.6g} "
            f"({100 * (1 - a):.4g}% Clopper-Pearson lower bound; false-alarm rate alpha={a:g}; "
            f"threshold {rep.threshold:.6g}, {rep.k_in}/{rep.m} vs {rep.k_out}/{rep.m} above it); "
            f"trials={R}, seed={seed}", rep.to_dict())
    return rep
