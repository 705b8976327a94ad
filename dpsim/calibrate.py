"""Calibration: the noise multiplier that makes an optimizer's run cost a target (ε, δ).

For example::

    opt = dpsim.calibrate("dp2_extra_query", epsilon=1.0, delta=1e-5, steps=1000,
                          batch_size=64, n=10_000)
    res = dpsim.simulate(problem, opt, steps=1000, batch_size=64)   # res.epsilon(1e-5) ≈ 1.0
    # or in one call: dpsim.simulate(problem, "dp2_extra_query", ..., target_epsilon=1.0)

The ε of a run is a function of the optimizer's *declared* privacy events
(:mod:`dpsim.privacy.events`) and of the sampler — not of a "one release per step" formula: IME
releases two Gaussians per step, ``dp2_extra_query`` two on some steps and one on the others, DP-MF
a correlated sequence (amplified under cyclic Poisson sampling when its bandwidth is at most the
number of groups, else unamplified; :mod:`dpsim.accounting`).  ``sampling`` may be any sampler
:func:`dpsim.simulate` takes, ``"cyclic_poisson:<k>"`` included.  :func:`calibrate` therefore rebuilds the
optimizer through the public registry with each candidate ``noise_multiplier`` σ,
``dpsim.optimizers.get(opt.name, **{**opt.hyperparameters, "noise_multiplier": σ})``, resolves
its events into the privacy record the engine would produce for a run of ``steps`` steps at sample
rate ``batch_size / n_private`` (:func:`dpsim.accounting.privacy_record`), converts it to ε
(:func:`dpsim.accounting.epsilon_of_record`) and solves ``ε(σ) = epsilon`` for the smallest σ
(:func:`dpsim.accounting.solve_noise_multiplier`: geometric bracketing that tests the ends of
[1e-2, 1e7], then Brent/bisection to relative 1e-4 in σ; the returned σ always meets the target).

Every σ the optimizer releases with must scale with its ``noise_multiplier`` hyperparameter (as
in every registered optimizer); ``ε(σ)`` is then decreasing.  Optimizers that declare
:class:`~dpsim.privacy.events.NonPrivate` are refused.  The ctCDP optimizer (a
:class:`~dpsim.privacy.events.TcdpBudget`) plans its own noise from ``epsilon``/``delta``
hyperparameters: calibration sets them.  Per-trial noise multipliers are replaced by the single
calibrated σ.
"""

from __future__ import annotations

import math

from . import accounting
from . import optimizers as _optimizers
from .privacy.events import NonPrivate, TcdpBudget
from .sampling import check_sampling, public_count

__all__ = ["calibrate", "epsilon_for", "sample_rate_for"]


def _check_int(name, value, lo):
    if isinstance(value, bool) or not isinstance(value, int) and not (
            hasattr(value, "__index__") and not isinstance(value, float)):
        raise ValueError(f"{name} must be an integer >= {lo}, got {name}={value!r}")
    value = int(value)
    if value < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {name}={value!r}")
    return value


def sample_rate_for(optimizer, batch_size: int, n: int, sampling: str | None = None) -> float:
    """The sample rate ``b / n_private`` the engine accounts with (a public split, when the optimizer
    has one, is carved out of the ``n`` examples first).  With ``sampling``, the sampler is checked
    against the private examples as :func:`dpsim.simulate` checks it
    (:func:`dpsim.sampling.check_sampling`: e.g. Poisson with ``b = n − 1`` is refused).

    Parameters
    ----------
    optimizer : Optimizer
        The optimizer (its ``public_fraction``).
    batch_size : int
        The nominal batch size ``b``.
    n : int
        The training-set size.
    sampling : str, optional
        A sampler to check against the private examples.

    Returns
    -------
    float
        ``b / n_private``.
    """
    n = _check_int("n", n, 1)
    batch_size = _check_int("batch_size", batch_size, 1)
    n_priv = n - public_count(optimizer.public_fraction, n)  # the engine's own rule
    if batch_size > n_priv:
        raise ValueError(f"batch_size={batch_size} exceeds the {n_priv} private examples (n={n})")
    if sampling is not None:
        check_sampling(sampling, n_priv, batch_size)
    return batch_size / n_priv


def epsilon_for(optimizer, *, delta, steps, batch_size, n, sampling="poisson", accountant="pld"):
    """ε at ``delta`` of a run of ``optimizer`` (its declared events) for ``steps`` steps with
    ``sampling`` at rate ``batch_size / n``, without simulating; a float (the largest over
    per-trial values).  Refuses a ctCDP budget, whose spend depends on the run.

    Parameters
    ----------
    optimizer : Optimizer
        The optimizer (its declared events).
    delta : float
        The δ to report ε at.
    steps : int
        Number of steps.
    batch_size : int
        The nominal batch size.
    n : int
        The training-set size.
    sampling : str
        The sampler.
    accountant : {'pld', 'rdp'}
        The accountant.

    Returns
    -------
    float
        ε (the largest over per-trial values).
    """
    steps = _check_int("steps", steps, 0)
    q = sample_rate_for(optimizer, batch_size, n, sampling)
    events = optimizer.events
    if any(isinstance(e, TcdpBudget) for e in events):
        raise ValueError(f"optimizer {optimizer.name!r} declares a ctCDP budget: its spend depends on "
                         "the run; simulate it and read Result.epsilon")
    trials = optimizer.trial_count() or 1
    rec = accounting.privacy_record(events, None, steps=steps, sample_rate=q, sampling=sampling,
                                    trials=trials)
    eps = accounting.epsilon_of_record(rec, delta, accountant=accountant)
    return float(max(eps)) if hasattr(eps, "__len__") else float(eps)


def calibrate(optimizer, *, epsilon, delta, steps, batch_size, n, sampling="poisson",
              accountant="pld"):
    """The same optimizer with the noise multiplier that makes a ``steps``-step run cost
    ``epsilon`` at ``delta`` (module docstring).

    ``optimizer``: a registered :class:`~dpsim.optimizers.Optimizer` or its name (built with its
    defaults); ``batch_size``, ``n``: the run's nominal batch size and training-set size;
    ``sampling``/``accountant``: as in :func:`dpsim.simulate` and :meth:`Result.epsilon`.  Raises
    ``ValueError`` naming the bad value for an unregistered or non-private optimizer, a bad
    option, or an unattainable target.

    Parameters
    ----------
    optimizer : Optimizer or str
        A registered optimizer, or its name (built with its defaults).
    epsilon : float
        The target ε.
    delta : float
        The target δ.
    steps : int
        Number of steps of the run.
    batch_size : int
        The run's nominal batch size.
    n : int
        The training-set size.
    sampling : str
        The sampler, as in :func:`dpsim.simulate`.
    accountant : {'pld', 'rdp'}
        The accountant.

    Returns
    -------
    Optimizer
        ``optimizer`` with the calibrated ``noise_multiplier``.

    Raises
    ------
    ValueError
        For an unregistered or non-private optimizer, a bad option or an unattainable target.

    Examples
    --------
    >>> import dpsim
    >>> opt = dpsim.calibrate("dp_sgd", epsilon=1.0, delta=1e-5, steps=100, batch_size=32, n=1000)
    >>> opt.name, round(opt.hyperparameters["noise_multiplier"], 2)
    ('dp_sgd', 1.53)
    """
    if isinstance(optimizer, str):
        optimizer = _optimizers.get(optimizer)
    if not isinstance(optimizer, _optimizers.Optimizer):
        raise ValueError(f"optimizer must be an Optimizer or a registered name, got optimizer={optimizer!r}")
    if not (isinstance(epsilon, (int, float)) and not isinstance(epsilon, bool)
            and 0 < float(epsilon) < math.inf):
        raise ValueError(f"epsilon must be a positive finite number, got epsilon={epsilon!r}")
    accounting._check_delta(delta)
    steps = _check_int("steps", steps, 1)
    name = optimizer.name
    reasons = [e.reason for e in optimizer.events if isinstance(e, NonPrivate)]
    if reasons:
        raise ValueError(f"optimizer {name!r} is not private ({reasons[0]}): no noise multiplier "
                         "gives a finite epsilon")
    if not name or name not in _optimizers.names():
        raise ValueError(f"optimizer {name or '(unnamed)'!r} is not registered: calibration rebuilds "
                         "it by name with each candidate noise_multiplier (dpsim.optimizers.get); "
                         "register it, or calibrate its noise with dpsim.accounting.solve_noise_multiplier")
    hp = dict(optimizer.hyperparameters)
    if any(isinstance(e, TcdpBudget) for e in optimizer.events):
        if "epsilon" not in hp or "delta" not in hp:
            raise ValueError(f"optimizer {name!r} declares a ctCDP budget but has no epsilon/delta "
                             "hyperparameters to set")
        return _optimizers.get(name, **{**hp, "epsilon": float(epsilon), "delta": float(delta)})
    accounting._check_options(accountant, sampling)  # (ctCDP converts its own budget)
    if "noise_multiplier" not in hp:
        raise ValueError(f"optimizer {name!r} has no noise_multiplier hyperparameter to calibrate")
    sample_rate_for(optimizer, batch_size, n, sampling)  # validates batch_size, n, sampling up front

    def build(sigma):
        return _optimizers.get(name, **{**hp, "noise_multiplier": float(sigma)})

    def eps_at(sigma):
        return epsilon_for(build(sigma), delta=delta, steps=steps, batch_size=batch_size, n=n,
                           sampling=sampling, accountant=accountant)

    def describe():
        return (f"optimizer={name!r}, delta={delta}, steps={steps}, batch_size={batch_size}, n={n}, "
                f"sampling={sampling!r}, accountant={accountant!r}")

    sigma = accounting.solve_noise_multiplier(eps_at, float(epsilon), describe=describe)
    return build(sigma)
