"""Up-front memory estimate of a run, so that a too-large request is refused before it starts.

``dpsim run`` calls :func:`check_memory` after building the problem and the optimizer and before
simulating; it raises ``MemoryError``-free, one-line ``ValueError`` naming ``R``, ``d``, ``b``
and the estimate when the run would not fit in the memory available now.

What is estimated
-----------------
The peak of the arrays a run allocates *in addition to* the problem's data (already in memory):

* ``params`` and the arrays the step loop keeps alive at once: the parameters, the updates, the
  new parameters (about three ``(R, d)`` arrays);
* the optimizer's state, including what it allocates lazily at its first step (e.g. the DP-MF
  noise stream's ring buffer ``(k−1)·R·d`` or ``sqrt_toeplitz`` history ``T·R·d``);
* the temporaries of one step: the sampler's index work arrays (``(R, ~b)`` integers, or
  ``(R, n)`` when the batch is more than a quarter of the data), the noise draws, the clipped sum,
  the preconditioner's scratch arrays, and ``(R, b, d)`` per-example gradients where the path
  materializes them (a problem without a fused clipping kernel, the ellipsoid privatizer, …);
* the temporaries of one metrics record (a full-data pass: ``(n, R)`` margins for a GLM, blocked
  above :data:`dpsim.problems.glm.RECORD_BLOCK_BYTES`), and the result's ``(K, R)`` records.

How: rather than a formula per optimizer (which would drift from the code), the state, one step
and one record are *run* (after one untraced warm-up run, which compiles the kernels) at ``R = 1``
and ``R = 2`` trials on the real problem, batch size, step
count and sampler, with :mod:`tracemalloc` measuring the peak of NumPy allocations; every
quantity above is affine in ``R`` (``a + s·R``), so ``peak(R) = peak(1) + (R − 1)·(peak(2) −
peak(1))``.  The record pass of a GLM stops growing once it is blocked, so its per-trial part is
capped there.  Arrays allocated inside Numba kernels are not seen by tracemalloc; they are small
(``(R, d)`` outputs), and a margin of two ``(R, d)`` arrays is added for them.  The estimate
is for the NumPy backend (host memory); the check uses it for every backend as a lower bound of
the host side.

Available memory: ``MemAvailable`` of ``/proc/meminfo`` (else ``os.sysconf`` available pages),
and, inside a container, the cgroup limit minus its current use when that is smaller.

Layer 5 (beside :mod:`dpsim.engine`): imports problems, optimizers, transforms, sampling, backend;
never the engine or the CLI.
"""

from __future__ import annotations

import math
import os
import tracemalloc

import numpy as np

from .backend import Backend
from .sampling import Sampler, check_sampling, public_count
from .transforms.base import Batch, StepContext

__all__ = ["estimate_peak_bytes", "available_bytes", "check_memory", "format_bytes"]

#: Fraction of the available memory a run may be estimated to use before it is refused.
SAFETY = 0.9


def format_bytes(x: float) -> str:
    """Human-readable size in binary units (three significant digits).

    Parameters
    ----------
    x : float
        A number of bytes.

    Returns
    -------
    str
        E.g. ``"3 MiB"``.

    Examples
    --------
    >>> from dpsim.memory import format_bytes
    >>> format_bytes(3 * 2**20)
    '3 MiB'
    """
    for unit, k in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if x >= k:
            return f"{x / k:.3g} {unit}"
    return f"{int(x)} B"


def _measure(fn) -> int:
    """Peak bytes (tracemalloc) allocated while ``fn()`` runs and its result is alive."""
    was = tracemalloc.is_tracing()
    if not was:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        keep = fn()
        _, peak = tracemalloc.get_traced_memory()
        del keep
        return max(0, peak - base)
    finally:
        if not was:
            tracemalloc.stop()


def _one_trial_set(prob, optimizer, R: int, b: int, steps: int, n_private: int, sampling: str,
                   dtype: str, record: bool, seed: int = 0, measure=_measure) -> tuple[int, int]:
    """(peak of init + one step, peak of one record pass) at ``R`` trials."""
    be = Backend("numpy", np.random.SeedSequence(seed), dtype)
    p = prob.on(be)
    sampler = Sampler(sampling, n_private, b, R, np.random.SeedSequence(seed + 1))
    ctx = StepContext(be, R, b, steps, n=n_private, sampling=sampling)
    tx = optimizer.transform
    public_idx = None
    if optimizer.public_fraction:
        n_pub = public_count(optimizer.public_fraction, prob.n)
        public_idx = np.arange(n_pub, dtype=np.int64)

    def step():
        params = be.xp.zeros((R, p.d), dtype=be.float_dtype)
        state = tx.init(params)
        ctx.t = 1
        bi = sampler.draw()
        batch = Batch(p, params, bi.idx, bi.mask, b, public_idx)  # positions < n: valid rows
        updates, state = tx.update(batch, state, params, ctx)
        new = params + updates
        if p.has_domain:
            new = p.project(new)
        return params, state, updates, new

    step_peak = measure(step)
    rec_peak = 0
    if record:
        w = be.xp.zeros((R, p.d), dtype=be.float_dtype)
        rec_peak = measure(lambda: p.loss_and_grad(w))
    return step_peak, rec_peak


def estimate_peak_bytes(problem, optimizer, *, trials: int, batch_size: int, steps: int,
                        sampling: str = "poisson", dtype: str = "float64",
                        metrics=("loss", "grad_norm_sq", "dist_to_opt"),
                        record_every: int | None = None) -> dict:
    """Estimated peak of the memory a run allocates (module docstring), as a dict:
    ``{"bytes", "per_trial", "fixed", "R", "d", "b"}`` (bytes: the estimate at ``trials``).

    Parameters
    ----------
    problem : Problem
        The problem of the run.
    optimizer : Optimizer
        The optimizer of the run.
    trials : int
        Number of trials ``R``.
    batch_size : int
        The nominal batch size ``b``.
    steps : int
        Number of steps ``T``.
    sampling : str
        The sampler.
    dtype : {'float64', 'float32'}
        The run's dtype.
    metrics : tuple of str
        The recorded metrics.
    record_every : int, optional
        The record spacing (default: :func:`dpsim.simulate`'s).

    Returns
    -------
    dict
        ``{"bytes", "per_trial", "fixed", "R", "d", "b"}``.

    Examples
    --------
    >>> import dpsim
    >>> from dpsim.memory import estimate_peak_bytes
    >>> prob = dpsim.problems.logistic_regression(200, 5, seed=0)
    >>> est = estimate_peak_bytes(prob, dpsim.optimizers.dp_sgd(), trials=2, batch_size=8, steps=3)
    >>> sorted(est), est["R"], est["d"], est["b"]
    (['R', 'b', 'bytes', 'd', 'fixed', 'per_trial'], 2, 5, 8)
    """
    from . import optimizers as _optimizers

    if isinstance(optimizer, str):
        optimizer = _optimizers.get(optimizer)
    optimizer = _scalar_version(optimizer)
    R = int(trials)
    n_private = problem.n - public_count(optimizer.public_fraction, problem.n)
    check_sampling(sampling, n_private, batch_size)
    steps = max(int(steps), 1)
    record = bool(set(metrics) & {"loss", "grad_norm_sq"})
    # warm-up, not traced: JIT compilation, lazily built caches and one-time allocations would
    # otherwise be counted at R = 1 only (and tracing slows compilation down)
    _one_trial_set(problem, optimizer, 1, batch_size, steps, n_private, sampling, dtype, record,
                   measure=lambda fn: (fn(), 0)[1])
    s1, r1 = _one_trial_set(problem, optimizer, 1, batch_size, steps, n_private, sampling, dtype, record)
    s2, r2 = _one_trial_set(problem, optimizer, 2, batch_size, steps, n_private, sampling, dtype, record)
    step_slope, step_fixed = max(s2 - s1, 0), max(2 * s1 - s2, 0)
    rec_slope, rec_fixed = max(r2 - r1, 0), max(2 * r1 - r2, 0)
    rec_part = rec_fixed + rec_slope * R
    try:
        from .problems import glm

        if isinstance(problem, glm._GLMProblem):  # the full-data pass is blocked beyond this
            rec_part = min(rec_part, rec_fixed + 8 * glm.RECORD_BLOCK_BYTES + 4 * R * problem.d * 8)
    except (ImportError, AttributeError):  # pragma: no cover - layout change
        pass
    itemsize = 4 if dtype == "float32" else 8
    K = steps // (record_every or max(1, steps // 100)) + 2
    n_metrics = 2 + len(tuple(metrics)) + len(getattr(optimizer, "probes", {}) or {})
    results = K * R * 8 * n_metrics + R * problem.d * 8
    numba_margin = 2 * R * problem.d * itemsize
    per_trial = step_slope + (rec_part - rec_fixed) / R + results / R + numba_margin / R
    total = step_fixed + step_slope * R + rec_part + results + numba_margin
    return {"bytes": int(total), "per_trial": float(per_trial), "fixed": int(step_fixed + rec_fixed),
            "R": R, "d": int(problem.d), "b": int(batch_size)}


def _scalar_version(optimizer):
    """The optimizer with each per-trial hyperparameter replaced by its first value (memory
    does not depend on the values, and the probe runs use R = 1 and 2 trials); rebuilt through the
    registry by name.  An unregistered optimizer with per-trial values cannot be rebuilt:
    ``ValueError``."""
    from . import optimizers as _optimizers

    if optimizer.trial_count() is None:
        return optimizer
    hp = {k: (v[0] if isinstance(v, (list, tuple)) and k not in optimizer.per_coordinate else v)
          for k, v in optimizer.hyperparameters.items()}
    if not optimizer.name or optimizer.name not in _optimizers.names():
        raise ValueError(f"cannot estimate the memory of the unregistered optimizer "
                         f"{optimizer.name or '(unnamed)'!r} with per-trial hyperparameters")
    return _optimizers.get(optimizer.name, **hp)


def _read_int(path: str):
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def available_bytes() -> int | None:
    """Memory available to this process now: ``MemAvailable`` (``/proc/meminfo``) or
    ``os.sysconf`` available pages, and the cgroup (v2 or v1) limit minus current use when smaller;
    ``None`` when none of these can be read.

    Returns
    -------
    int or None
        Bytes available, or ``None``.
    """
    avail = None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            avail = None
    for limit_path, used_path in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                  ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                   "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        limit, used = _read_int(limit_path), _read_int(used_path)
        if limit is not None and used is not None and limit < 2**60:
            room = max(limit - used, 0)
            avail = room if avail is None else min(avail, room)
            break
    return avail


def check_memory(problem, optimizer, *, trials: int, batch_size: int, steps: int,
                 sampling: str = "poisson", dtype: str = "float64",
                 metrics=("loss", "grad_norm_sq", "dist_to_opt"), record_every=None,
                 available: int | None = None) -> dict:
    """Estimate the run's peak (:func:`estimate_peak_bytes`) and raise ``ValueError`` — one line
    naming R, d, b, the estimate and what is available — when it exceeds :data:`SAFETY` × the
    available memory (``available`` overrides :func:`available_bytes`).  Returns the estimate.

    Parameters
    ----------
    problem : Problem
        The problem of the run.
    optimizer : Optimizer
        The optimizer of the run.
    trials : int
        Number of trials ``R``.
    batch_size : int
        The nominal batch size ``b``.
    steps : int
        Number of steps ``T``.
    sampling : str
        The sampler.
    dtype : {'float64', 'float32'}
        The run's dtype.
    metrics : tuple of str
        The recorded metrics.
    record_every : int, optional
        The record spacing.
    available : int, optional
        Bytes available (default: :func:`available_bytes`).

    Returns
    -------
    dict
        The estimate of :func:`estimate_peak_bytes`.

    Raises
    ------
    ValueError
        When the estimate exceeds ``SAFETY`` × the available memory.
    """
    est = estimate_peak_bytes(problem, optimizer, trials=trials, batch_size=batch_size, steps=steps,
                              sampling=sampling, dtype=dtype, metrics=metrics,
                              record_every=record_every)
    avail = available_bytes() if available is None else int(available)
    est["available"] = avail
    if avail is not None and est["bytes"] > SAFETY * avail:
        fit = int((SAFETY * avail - est["fixed"]) // max(est["per_trial"], 1.0))
        hint = (f"use at most about {fit} trials" if fit >= 1 else
                "use a smaller problem or batch (even one trial does not fit)")
        raise ValueError(
            f"this run needs about {format_bytes(est['bytes'])} of memory (R={est['R']} trials, "
            f"d={est['d']}, b={est['b']}, about {format_bytes(est['per_trial'])} per trial) but only "
            f"{format_bytes(avail)} is available: {hint}")
    return est
