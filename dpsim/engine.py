"""The vectorized simulation engine: :func:`simulate` (the loop; results in :mod:`dpsim.results`).

One call runs ``R`` independent trials of one optimizer on one problem as a single array program:
parameters are ``(R, d)``, hyperparameters scalars or ``(R,)``; Python overhead is paid once per
step, not once per trial.

Randomness: ``SeedSequence(seed)`` is split into a sampler stream (host NumPy; identical batches
on every backend) and a noise stream (the backend's generator).  Hence a private rule with zero
noise sees exactly the batches of its non-private base for the same seed.

Examples
--------
>>> import dpsim
>>> prob = dpsim.problems.logistic_regression(200, 5, seed=0)
>>> res = dpsim.simulate(prob, "dp_sgd", steps=3, batch_size=8, trials=2, seed=0)
>>> res.loss.shape, res.config["engine"]
((4, 2), 'block')
"""

from __future__ import annotations

import functools
import time
from typing import Callable

import numpy as np

from ._jit_notice import announce_compiles
from .backend import Backend, to_numpy
from ._validate import check_allocation, check_init, check_probe_output, check_probes, check_seed
from .checkpoint import (DEFAULT_EVERY, Checkpoint, probe_states, problem_identity,
                         restore_probe_states)
from .results import METRICS, Result
from .sampling import Sampler, check_sampling, public_count

# The layers above the foundation (problems, transforms, accounting, optimizers) are imported
# by the first call of :func:`simulate`, not by ``import dpsim`` (issue 32: ``import dpsim``
# stays well under a second; ``tests/core/test_overhead.py``).

__all__ = ["simulate", "check_metrics"]

#: Run composable chains (and the shapes derived from their pieces' parts) through the fused release
#: (:mod:`dpsim.fast.release`: the clipped sum, the noise and the update in one pass
#: per trial, bit for bit the chain's result).
#: ``False`` runs every step through ``transform.update`` (the reference; tests and A/B timings).
FUSED_RELEASE = True


@functools.lru_cache(maxsize=None)
def _version_items() -> tuple:
    """The versions behind :func:`_versions`, looked up once per process: none of them changes
    while the process runs, and ``importlib.metadata.version`` reads and parses the installed
    metadata files on every call (most of ``simulate``'s own overhead before)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    import numba
    import scipy

    out = {"python": platform.python_version(), "numpy": np.__version__,
           "scipy": scipy.__version__, "numba": numba.__version__}
    for key, dist in (("dpsim", "dpsim"), ("dp_accounting", "dp-accounting")):
        try:
            out[key] = version(dist)
        except PackageNotFoundError:  # pragma: no cover - running from an uninstalled checkout
            out[key] = "unknown"
    return tuple(out.items())


def _versions() -> dict:
    """Versions of dpsim (its installed metadata: the engine sits below the package ``__init__``)
    and of the libraries a result depends on (a fresh dict; computed once per process)."""
    return dict(_version_items())


def _streams(seed):
    """Children of the seed without mutating a SeedSequence the caller passed (same as a fresh
    ``ss.spawn(3)``): sampler stream, noise stream, public split."""
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return tuple(np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (i,),
                                        pool_size=ss.pool_size) for i in range(3))


_n_public = public_count


def _split(public_ss, n, n_public):
    perm = np.random.Generator(np.random.PCG64(public_ss)).permutation(n)
    return np.sort(perm[:n_public]), np.sort(perm[n_public:])


def public_split(n: int, public_fraction: float, seed) -> np.ndarray:
    """The sorted indices of the public split that :func:`simulate` carves out of ``n`` training
    examples for an optimizer with ``public_fraction`` and this ``seed`` (empty when 0)."""
    n_public = _n_public(public_fraction, n)
    if not n_public:
        return np.zeros(0, dtype=np.int64)
    return _split(_streams(seed)[2], n, n_public)[0]


#: The default record schedule (``record_every=None``) takes about this many records ...
DEFAULT_RECORDS = 100
#: ... whenever one record is at most this many multiply-adds (``R·rows·d̄``: every trial's pass
#: over the rows the recorded metrics read, ``d̄`` the mean number of nonzero features per row):
#: such a record costs milliseconds, so the small runs (every test and experiment) keep it.
RECORD_SMALL_WORK = 2**24
#: Above that, the default records together may do the work of the steps, ``T·R·(b·d̄ + d)``
#: (the batch's rows and the d noise draws of each trial), or this many multiply-adds, whichever
#: is larger, and no more (issue 32: a hundred full-data records cost many times a large run's loop).
RECORD_FLOOR_WORK = 2**27


def _record_count(steps: int, every: int) -> int:
    """Number of records of :func:`_record_steps` (``0, every, 2·every, …`` and ``steps``)."""
    return steps // every + 1 + (steps % every != 0)


def default_record_every(steps: int, *, rows: int, d: int, nnz: float | None = None,
                         batch_size: int = 1, trials: int = 1) -> int:
    """The record interval :func:`simulate` takes for ``record_every=None`` (a deterministic
    function of the sizes, never of timings, so a run's schedule is part of its configuration).

    ``rows``: the examples one record reads for each trial (``n`` with the full-data metrics
    ``loss``/``grad_norm_sq``, plus the held-out rows with ``test_loss``/``test_accuracy``; 0
    when it reads none); ``nnz``: mean nonzero features per row (default ``d``, dense).

    * ``max(1, T // 100)`` (about :data:`DEFAULT_RECORDS` records) when one record is at most
      :data:`RECORD_SMALL_WORK` multiply-adds ``R·rows·nnz``;
    * else the records are spaced evenly so that their total work ``K·R·rows·nnz`` stays within
      ``max(T·R·(b·nnz + d), RECORD_FLOOR_WORK)`` — a step reads ``b`` rows and draws ``d``
      normals per trial — with at least the records at step 0 and step T, never more than the
      first rule gives.
    """
    every = max(1, steps // DEFAULT_RECORDS)
    nnz = float(d if nnz is None else nnz)
    one = float(trials) * float(rows) * nnz  # floats: no overflow, no int64 casts
    if steps < 2 or one <= RECORD_SMALL_WORK:
        return every
    budget = max(float(steps) * float(trials) * (batch_size * nnz + d), float(RECORD_FLOOR_WORK))
    k = int(budget // one)  # records within the budget
    if k >= _record_count(steps, every):
        return every
    return max(every, -(-steps // (max(2, k) - 1)))  # ceil(T / (k - 1)): at most k records


def _record_steps(steps: int, record_every: int | None, default_every=None) -> np.ndarray:
    if record_every is None:
        record_every = max(1, steps // DEFAULT_RECORDS) if default_every is None else default_every
    if isinstance(record_every, bool) or not isinstance(record_every, (int, np.integer)) or record_every < 1:
        raise ValueError(f"record_every must be a positive integer, got record_every={record_every!r}")
    rec = np.arange(0, steps + 1, record_every, dtype=np.int64)
    if rec[-1] != steps:
        rec = np.append(rec, steps)
    return rec


def _record_rows_and_nnz(problem, metrics) -> tuple[int, float]:
    """(rows a record reads per trial, mean nonzeros per row) for :func:`default_record_every`."""
    rows = problem.n if ("loss" in metrics or "grad_norm_sq" in metrics) else 0
    if any(m in HELDOUT_METRICS for m in metrics):
        rows += int(getattr(problem, "n_test", 0) or 0)
    X = problem.features
    nnz = problem.d
    if X is not None and getattr(X, "nnz", None) is not None and X.shape[0]:
        nnz = X.nnz / X.shape[0]  # scipy.sparse features
    return rows, nnz


class _ProgressBar:
    """A tqdm bar made at the first :meth:`update`, counting from there: the first step (or
    block of steps), which includes any first-use compilation of the kernels, is left out of
    the rate, so the ETA is that of the compiled loop (``tqdm(initial=...)`` rates the steps
    after ``initial`` only)."""

    def __init__(self, total, desc, initial=0):
        self.total, self.desc, self.n, self.bar = total, desc, int(initial), None

    def update(self, k=1):
        if self.bar is None:
            from tqdm.auto import tqdm

            self.n += int(k)
            self.bar = tqdm(total=self.total, desc=self.desc, unit="step", delay=1.0, leave=False,
                            initial=self.n)
            return
        self.n += int(k)
        self.bar.update(k)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def resolve(problem, optimizer):
    """The :class:`~dpsim.optimizers.Optimizer` of ``optimizer`` (an optimizer, or a registered
    name with its defaults), after checking that ``problem`` is a :class:`~dpsim.problems.Problem`
    (``ValueError`` naming the value otherwise)."""
    from . import optimizers
    from .problems import Problem

    if isinstance(optimizer, str):
        optimizer = optimizers.get(optimizer)
    if not isinstance(optimizer, optimizers.Optimizer):
        raise ValueError(f"optimizer must be an Optimizer or a registered name, got optimizer={optimizer!r}")
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be a dpsim.problems.Problem, got problem={problem!r}")
    return optimizer


def block_plan(prob, optimizer, *, trials, backend, dtype, fast, checkpoint):
    """``(plan, None)`` when the run takes the small-d block kernel (:func:`dpsim.fast.block.plan`),
    else ``(None, reason)``: the one decision :func:`simulate` and :func:`dpsim.explain` read.
    ``fast=True`` with a checkpoint is refused here."""
    if fast is not None and not isinstance(fast, bool):
        raise ValueError(f"fast must be None, True or False, got fast={fast!r}")
    if fast and checkpoint is not None:
        raise ValueError("fast=True runs the whole loop in one compiled kernel, which cannot "
                         f"be checkpointed; drop fast or checkpoint={checkpoint!r}")
    if fast is False:
        return None, "fast=False asks for the general engine"
    if checkpoint is not None:
        return None, "a checkpointed run takes the step loop (the block kernel cannot be checkpointed)"
    from .fast import block

    p = block.plan(prob, optimizer, trials=trials, backend=backend, dtype=dtype)
    return (None, p) if isinstance(p, str) else (p, None)


def release_plan(prob, tx, be, *, public_idx, steps):
    """``(step, None)`` when the general engine takes each step as one fused release
    (:mod:`dpsim.fast.release`: a chain composed from its pieces' elements, or a
    shape derived from its pieces' parts), else ``(None, reason)``, the reason naming the piece that stops it."""
    if not FUSED_RELEASE:
        return None, "dpsim.engine.FUSED_RELEASE is False"
    if steps == 0:
        return None, "steps=0: there is no step to take"
    from .fast import release

    reason = release.why_not(tx, be, public_idx=public_idx)
    if reason is not None:
        return None, reason
    return release.plan(prob, tx, be, public_idx=public_idx), None


def simulate(problem, optimizer, *, steps: int, batch_size: int, trials: int = 1, seed=0,
             sampling: str = "poisson", backend: str = "numpy", record_every: int | None = None,
             progress: bool = False, dtype: str = "float64", init=None,
             probes: dict[str, Callable] | None = None,
             metrics=("loss", "grad_norm_sq", "dist_to_opt"), target_epsilon=None,
             target_delta=None, accountant: str = "pld", fast: bool | None = None,
             checkpoint=None, checkpoint_every: float = DEFAULT_EVERY) -> Result:
    """Run ``trials`` independent trials of ``optimizer`` on ``problem`` for ``steps`` steps.

    Parameters
    ----------
    problem : a :mod:`dpsim.problems` problem.
    optimizer : an :class:`dpsim.optimizers.Optimizer` (or its name, built with defaults).  With
        ``optimizer.public_fraction > 0`` a seeded random public split of that fraction of the
        training data is carved out (never sampled for private batches; ε covers the rest).
    steps, batch_size, trials : T, nominal batch size b, number of trials R.
    seed : int or ``SeedSequence``; the run is a deterministic function of (config, seed).
    sampling : ``"poisson"`` (rate b/n; default), ``"fixed"``, ``"replacement"`` or
        ``"cyclic_poisson:<k>"`` (k fixed groups, step t samples group (t-1) mod k at rate k·b/n;
        amplifies banded DP-MF with at most k bands, :mod:`dpsim.sampling`).
    backend : ``"numpy"`` or ``"cupy"`` (``"array_api_strict"`` for testing); ``"numpy:blocked"``
        draws the noise in fixed blocks on several threads, the next step's ahead (another
        random stream than ``"numpy"``'s, the same for every thread count; :mod:`dpsim.backend`).
    record_every : record metrics every this many steps, always including step 0 and step T.
        Default (``None``): ``max(1, T // 100)``, about 100 records, unless one record is large.
        A record of ``loss``/``grad_norm_sq`` is a pass over all n examples for every trial, about
        ``R·n·d̄`` multiply-adds (``d̄`` the mean nonzero features per example; the held-out rows
        add theirs); a step costs about ``R·(b·d̄ + d)``.  When one record exceeds 2²⁴ (~17 M)
        multiply-adds, the default records are spaced evenly so that together they do no more
        than the steps' work ``T·R·(b·d̄ + d)`` (or 2²⁷, whichever is larger), with at least the
        records at 0 and T: at workload W (n = 25 000, d = 10⁴ at 1 %, b = 64, R = 64) that is
        records at 0 and T only for T ≤ 457, every 250 steps at T = 500, instead of 100 records
        that cost many times the loop.  Small runs keep about 100 (:func:`default_record_every`; the
        rule is a function of the sizes only, so a run's schedule never depends on the machine).
    progress : show a progress bar (tqdm; appears only for runs longer than about a second).
    dtype : ``"float64"`` (default) or ``"float32"``.
    init : optional ``(d,)`` or ``(R, d)`` initial parameters (default zeros).
    probes : extra records ``name -> f(state, params, ctx) -> (R,)``, added to the optimizer's own.
    metrics : which metrics to record, a subset of ``loss``, ``grad_norm_sq``, ``dist_to_opt``,
        ``test_loss``, ``test_accuracy`` (``excess_loss`` comes with ``loss``).  Each record of
        ``loss`` or ``grad_norm_sq`` is a pass over all n examples for all R trials; drop what a
        sweep does not need.  ``test_loss`` (mean loss on the held-out rows, without the l2 term)
        and ``test_accuracy`` (logistic only; a zero margin counts 1/2) need a problem with a
        held-out split (:func:`dpsim.problems.from_data` with ``test=``); they are computed on
        the host in float64.  Metrics not recorded are ``None`` in the result (``loss`` is
        NaN-filled).  Records read the private training data: ε does not cover what they reveal.

    target_epsilon, target_delta : calibrate first: the optimizer's ``noise_multiplier`` is
        replaced by the one that makes this run cost ``target_epsilon`` at ``target_delta``
        (:func:`dpsim.calibrate`, from its declared events, with ``accountant``); the result's
        ``config["calibration"]`` records the target and the σ found.
    accountant : ``"pld"`` or ``"rdp"``, for the calibration and recorded in ``Result.privacy``
        as the default accountant of :meth:`Result.epsilon`.
    fast : ``None`` (default): run the step loop in the compiled small-d kernel of
        :mod:`dpsim.fast.block` when it covers this (problem, optimizer, backend, dtype), else the
        general chain engine; ``True``: the fused kernel or a ``ValueError`` saying why not;
        ``False``: always the general engine (the reference).  Both draw the same batches and
        the same noise and give the same numbers to the last bit; ``config["engine"]`` names the
        path that ran: ``"block"`` (the small-d kernel), ``"release"`` (the fused per-step
        release below) or ``"chain"`` (``transform.update`` step by step).  On the
        release path (``backend="numpy"`` or ``"numpy:blocked"``) each step is one fused pass
        per trial — clipped sum, noise, recursion and update — with the chain's random stream
        and operations, so bit for bit the result of ``transform.update``
        (``dpsim.engine.FUSED_RELEASE = False`` turns it off), without its ``(R, d)``
        temporaries; ``params`` and the state's arrays are then updated in place, so a probe
        that keeps them past its record must copy them.
    checkpoint, checkpoint_every : a file path: every ``checkpoint_every`` seconds (default 600) the step loop
        saves what the rest of the run depends on (step, parameters, state, records, sampler and
        noise-stream states), and a later call with the same arguments resumes from it with the
        uninterrupted run's result, bit for bit (:mod:`dpsim.checkpoint`).  A run that wrote a
        checkpoint leaves its final state there (calling it again returns at once).  Runs the
        general engine (``fast=True`` is refused); NumPy backends only.  Without it, a call
        inside a :func:`dpsim.checkpoint.checkpoints` block is checkpointed in that block's
        directory (as ``dpsim reproduce`` does for every cell).  An explicit path where no file
        can be written is refused before the run (``ValueError``); a write that fails later
        (a full disk) warns and the run goes on without checkpoints.

    Returns
    -------
    Result
        The records per trial, the final parameters and state, the privacy record
        (:meth:`Result.epsilon`) and ``config`` (``config["engine"]`` names the path that ran:
        ``"block"``, ``"release"`` or ``"chain"``; :func:`dpsim.explain` says why).

    Notes
    -----
    Every record holds the full objective ``F(w)``, the excess ``F(w) − F*`` (when the problem
    knows ``F*``), ``||∇F(w)||²`` and ``||w − w*||`` per trial.  NumPy's floating-point warnings
    (overflow, 0/0) are not printed during the run: a trial that blows up stays in its own row,
    and :attr:`Result.diverged` flags it (:attr:`Result.diverged_reason` says why).
    """
    # The first run of a kernel on this machine compiles it (tens of seconds): one line on stderr
    # says so (dpsim._jit_notice; DPSIM_QUIET_COMPILE=1 silences it).  NumPy's floating-point
    # warnings (overflow, 0/0) are not printed: a trial that blows up is contained in its row
    # and flagged by Result.diverged, with the reason in Result.diverged_reason.
    name = optimizer if isinstance(optimizer, str) else getattr(optimizer, "name", "optimizer")
    with announce_compiles(f"{name} on {getattr(problem, 'name', 'problem')}"), \
            np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return _simulate(problem, optimizer, steps=steps, batch_size=batch_size, trials=trials,
                         seed=seed, sampling=sampling, backend=backend, record_every=record_every,
                         progress=progress, dtype=dtype, init=init, probes=probes,
                         metrics=metrics, target_epsilon=target_epsilon,
                         target_delta=target_delta, accountant=accountant, fast=fast,
                         checkpoint=checkpoint, checkpoint_every=checkpoint_every)


def _simulate(problem, optimizer, *, steps, batch_size, trials, seed, sampling, backend,
              record_every, progress, dtype, init, probes, metrics, target_epsilon, target_delta,
              accountant, fast, checkpoint, checkpoint_every) -> Result:
    """:func:`simulate` after its keywords: check, set up, run the steps, assemble the result."""
    from .transforms.base import StepContext

    optimizer, calibration = _checked_optimizer(
        problem, optimizer, steps=steps, trials=trials, seed=seed, dtype=dtype, sampling=sampling,
        batch_size=batch_size, accountant=accountant, target_epsilon=target_epsilon,
        target_delta=target_delta)
    n_public = _n_public(optimizer.public_fraction, problem.n)
    steps, trials, batch_size = int(steps), int(trials), int(batch_size)
    metrics = check_metrics(metrics, problem)
    default_every = None
    if record_every is None:
        rows, nnz = _record_rows_and_nnz(problem, metrics)
        default_every = default_record_every(steps, rows=rows, d=problem.d, nnz=nnz,
                                             batch_size=batch_size, trials=trials)
    rec_steps = _record_steps(steps, record_every, default_every)

    sampler_ss, noise_ss, public_ss = _streams(seed)
    be = Backend(backend, noise_ss, dtype)
    prob = problem.on(be)
    public_idx, private_idx, n_private = _public_private(prob, be, n_public, public_ss)
    sampler = Sampler(sampling, n_private, batch_size, trials, sampler_ss)
    ctx = StepContext(be, trials, batch_size, steps, n=n_private, sampling=sampling)
    ctx.donate_state = True  # the loop keeps only the state that update returns (buffer donation)
    params = _initial_params(prob, be, init, trials)

    tx = optimizer.transform
    state = tx.init(params)
    all_probes = dict(optimizer.probes)
    all_probes.update(check_probes(probes))
    recorder = _Recorder(prob, be, metrics, rec_steps, trials, all_probes, ctx)

    bar = _ProgressBar(steps, f"{optimizer.name} on {prob.name}") if progress else None
    fused_plan, block_reason = block_plan(prob, optimizer, trials=trials, backend=backend,
                                          dtype=dtype, fast=fast, checkpoint=checkpoint)
    if fast and fused_plan is None:
        raise ValueError(f"fast=True, but this run has no fused kernel: {block_reason}")

    def run_identity():  # what the run's numbers depend on (the checkpoint's fingerprint)
        return dict(problem=problem_identity(problem), optimizer=optimizer.name,
                    hyperparameters=dict(optimizer.hyperparameters), steps=steps,
                    batch_size=batch_size, trials=trials, seed=_seed_config(seed),
                    sampling=sampling, backend=backend, dtype=dtype, record_steps=rec_steps,
                    metrics=list(metrics), probes=sorted(all_probes),
                    init=None if init is None else np.asarray(init, dtype=float),
                    version=_versions().get("dpsim"))

    ck = Checkpoint.for_run(checkpoint, checkpoint_every, be, run_identity,
                            compiled=fused_plan is not None, probes=all_probes)
    loop = _Loop(prob, tx, be, sampler, ctx, recorder, params=params, state=state, steps=steps,
                 private_idx=private_idx, public_idx=public_idx, batch_size=batch_size,
                 bar=bar, ck=ck)
    engine_name = loop.run(fused_plan)
    config = {
        "problem": dict(problem.config),
        "optimizer": optimizer.name,
        "hyperparameters": dict(optimizer.hyperparameters),
        "steps": steps,
        "batch_size": batch_size,
        "trials": trials,
        "seed": _seed_config(seed),
        "metrics": list(metrics),
        "sampling": sampling,
        "backend": backend,
        "dtype": dtype,
        "record_every": int(rec_steps[1] - rec_steps[0]) if rec_steps.size > 1 else None,
        "engine": engine_name,
        "versions": _versions(),
    }
    if calibration is not None:
        config["calibration"] = calibration
    privacy = _privacy(optimizer, loop.state, steps=steps, batch_size=batch_size,
                       n_private=n_private, n_public=n_public, sampling=sampling, trials=trials,
                       accountant=accountant)
    return recorder.result(params=loop.params, config=config, privacy=privacy, wall=loop.wall,
                           mean_batch_size=loop.batch_sizes_sum / max(steps, 1))


def _checked_optimizer(problem, optimizer, *, steps, trials, seed, dtype, sampling, batch_size,
                       accountant, target_epsilon, target_delta):
    """``(optimizer, calibration)``: the arguments of :func:`simulate` checked (``ValueError``
    naming the value), and the optimizer calibrated to ``target_epsilon`` at ``target_delta``
    when they are given (``calibration``: the record for ``config["calibration"]``, else ``None``)."""
    from . import accounting  # the upper layers, loaded by the first call (resolve: optimizers)

    optimizer = resolve(problem, optimizer)
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"steps must be a non-negative integer, got steps={steps!r}")
    if isinstance(trials, bool) or not isinstance(trials, (int, np.integer)) or trials < 1:
        raise ValueError(f"trials must be a positive integer, got trials={trials!r}")
    check_seed(seed)
    check_allocation("the (trials, d) parameters", (trials, problem.d), 4 if dtype == "float32" else 8)
    n_public = _n_public(optimizer.public_fraction, problem.n)
    check_sampling(sampling, problem.n - n_public, batch_size)
    if accountant not in accounting.ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {accounting.ACCOUNTANTS}, got accountant={accountant!r}")
    calibration = None
    if target_epsilon is not None or target_delta is not None:
        if target_epsilon is None or target_delta is None:
            raise ValueError("target_epsilon and target_delta must be given together, got "
                             f"target_epsilon={target_epsilon!r}, target_delta={target_delta!r}")
        from .calibrate import calibrate

        optimizer = calibrate(optimizer, epsilon=target_epsilon, delta=target_delta, steps=steps,
                              batch_size=batch_size, n=problem.n, sampling=sampling,
                              accountant=accountant)
        calibration = {"target_epsilon": float(target_epsilon), "target_delta": float(target_delta),
                       "accountant": accountant,
                       "noise_multiplier": optimizer.hyperparameters.get("noise_multiplier")}
    accounting.check_release_noise(optimizer.events)
    n_hp = optimizer.trial_count()
    if n_hp is not None and n_hp != trials:
        raise ValueError(
            f"per-trial hyperparameters have {n_hp} values but trials={trials}"
        )
    return optimizer, calibration


def _public_private(prob, be, n_public, public_ss):
    """``(public_idx, private_idx, n_private)``.  The public split is carved out of the training
    data (a seeded random subset) and is never sampled for private batches; accounting uses the
    private part only.  Without one: ``(None, None, n)``."""
    if not n_public:
        return None, None, prob.n
    pub, private_idx = _split(public_ss, prob.n, n_public)
    return be.asindex(pub), private_idx, private_idx.size


def _initial_params(prob, be, init, trials):
    """The ``(R, d)`` starting parameters: zeros, or ``init`` (``(d,)`` broadcast or ``(R, d)``),
    projected onto the problem's domain when it has one."""
    d = prob.d
    check_init(init, trials, d)
    if init is None:
        params = be.xp.zeros((trials, d), dtype=be.float_dtype)
    else:
        w0 = np.asarray(init, dtype=float)
        if w0.shape == (d,):
            w0 = np.broadcast_to(w0, (trials, d))
        if w0.shape != (trials, d):
            raise ValueError(f"init must have shape ({d},) or ({trials}, {d}), got {w0.shape}")
        params = be.asarray(np.array(w0))
    if prob.has_domain:
        params = prob.project(params)
    return params


def _privacy(optimizer, state, *, steps, batch_size, n_private, n_public, sampling, trials,
             accountant) -> dict:
    """The run's privacy record (:func:`dpsim.accounting.privacy_record`), with the default
    accountant and the note on a public split."""
    from . import accounting

    privacy = accounting.privacy_record(optimizer.events, state, steps=steps,
                                        sample_rate=batch_size / n_private, sampling=sampling,
                                        trials=trials)
    privacy["accountant"] = accountant
    if optimizer.note:
        privacy.setdefault("note", optimizer.note)
    if n_public:
        privacy["public_examples"] = n_public
        privacy["note"] = ("ε covers the private part only; the public split "
                           f"({n_public} examples) is used without privacy")
    return privacy


class _Recorder:
    """The records of one run: ``rec`` (the metrics) and ``prec`` (the probes), ``(K, R)`` each
    (NaN until written), filled by :meth:`record` at the record steps."""

    def __init__(self, prob, be, metrics, rec_steps, trials, probes, ctx):
        self.prob, self.xp, self.metrics, self.trials = prob, be.xp, metrics, trials
        self.probes, self.ctx = probes, ctx
        self.want_loss, self.want_grad = "loss" in metrics, "grad_norm_sq" in metrics
        self.heldout = [m for m in HELDOUT_METRICS if m in metrics]
        # The optimum (a solve on the first call for a GLM, costly at large d) only when recorded.
        opt = prob.optimum if self.want_loss or "dist_to_opt" in metrics else None
        self.w_star = be.asarray(opt[0])[None, :] if opt is not None else None
        self.f_star = float(opt[1]) if opt is not None else None
        self.rec_steps = rec_steps
        K = rec_steps.size
        self.rec = {k: np.full((K, trials), np.nan) for k in (*METRICS, *HELDOUT_METRICS)}
        self.prec = {k: np.full((K, trials), np.nan) for k in probes}

    def record(self, k, params, state):
        """Write record ``k`` of every metric and probe for ``params`` (``(R, d)``) and ``state``."""
        prob, xp, rec = self.prob, self.xp, self.rec
        if self.want_loss and self.want_grad:
            loss, g = prob.loss_and_grad(params)
        else:
            loss = prob.loss(params) if self.want_loss else None
            g = prob.grad(params) if self.want_grad else None
        if loss is not None:
            loss = to_numpy(loss)
            rec["loss"][k] = loss
            if self.f_star is not None:
                rec["excess_loss"][k] = loss - self.f_star
        if g is not None:
            rec["grad_norm_sq"][k] = to_numpy(_row_sq_norms(xp, g))
            del g  # the (R, d) gradient does not outlive its norm
        if self.w_star is not None and "dist_to_opt" in self.metrics:
            rec["dist_to_opt"][k] = to_numpy(xp.sqrt(_row_sq_norms(xp, params, self.w_star)))
        for m in self.heldout:  # on the host problem, in float64 (Problem.heldout_loss)
            rec[m][k] = (prob.heldout_loss if m == "test_loss" else prob.heldout_accuracy)(params)
        for name, fn in self.probes.items():
            self.prec[name][k] = check_probe_output(name, to_numpy(fn(state, params, self.ctx)),
                                                    self.trials)

    def result(self, *, params, config, privacy, wall, mean_batch_size) -> Result:
        """The :class:`~dpsim.results.Result` of the run (metrics not recorded are ``None``)."""
        rec, metrics = self.rec, self.metrics
        return Result(
            steps=self.rec_steps,
            loss=rec["loss"],
            excess_loss=rec["excess_loss"] if self.f_star is not None and self.want_loss else None,
            grad_norm_sq=rec["grad_norm_sq"] if self.want_grad else None,
            dist_to_opt=(rec["dist_to_opt"] if self.w_star is not None and "dist_to_opt" in metrics
                         else None),
            records=self.prec,
            test_loss=rec["test_loss"] if "test_loss" in metrics else None,
            test_accuracy=rec["test_accuracy"] if "test_accuracy" in metrics else None,
            params=np.array(to_numpy(params), dtype=float),
            config=config,
            privacy=privacy,
            wall_time=wall,
            mean_batch_size=mean_batch_size,
        )


class _Loop:
    """The step loop of one run and what it carries from step to step (parameters, state, the
    next record, the batch sizes, the wall time), resumable from a checkpoint."""

    def __init__(self, prob, tx, be, sampler, ctx, recorder, *, params, state, steps,
                 private_idx, public_idx, batch_size, bar, ck):
        self.prob, self.tx, self.be, self.sampler, self.ctx = prob, tx, be, sampler, ctx
        self.recorder, self.params, self.state, self.steps = recorder, params, state, steps
        self.private_idx, self.public_idx, self.batch_size = private_idx, public_idx, batch_size
        self.bar, self.ck = bar, ck
        self.batch_sizes_sum = np.zeros(recorder.trials)
        self.t_start, self.next_rec, self.wall_before, self.wall = 0, 0, 0.0, None

    def run(self, fused_plan) -> str:
        """Run (or resume) the steps: the block kernel when ``fused_plan`` is given, else step by
        step (the fused release when :func:`release_plan` allows it, else ``transform.update``).
        Returns the engine's name (``"block"``, ``"release"`` or ``"chain"``)."""
        ck, recorder = self.ck, self.recorder
        saved = None if ck is None else ck.load()
        if saved is not None and probe_states(recorder.probes) and "probe_states" not in saved:
            saved = None  # written before probes' memories were saved: start afresh rather than forget
        self.t0 = time.perf_counter()
        if saved is None:
            recorder.record(0, self.params, self.state)
            self.next_rec = 1
        else:
            self._resume(saved)
            del saved
        fused_step = None
        if fused_plan is not None:
            from .fast import block

            self.params, self.state = block.run(
                fused_plan, params=self.params, state=self.state, steps=self.steps,
                rec_steps=recorder.rec_steps, record=recorder.record, sampler=self.sampler,
                private_idx=self.private_idx, backend=self.be, ctx=self.ctx,
                batch_sizes_sum=self.batch_sizes_sum, bar=self.bar)
        else:
            fused_step, _ = release_plan(self.prob, self.tx, self.be, public_idx=self.public_idx,
                                         steps=self.steps)
            self._steps(fused_step)
        if ck is not None and ck.written and ck.last_t != self.steps:
            self._checkpoint(self.steps)  # the final state: the same call again returns at once
        if self.bar is not None:
            self.bar.close()
        self.wall = self.wall_before + time.perf_counter() - self.t0
        # the path that ran: the small-d block kernel, the fused per-step release, or the chain
        return "block" if fused_plan is not None else ("release" if fused_step is not None
                                                       else "chain")

    def _resume(self, saved):
        """Go on from a checkpoint: step ``t_start + 1`` next, as if the run had never stopped."""
        self.t_start, self.next_rec = int(saved["t"]), int(saved["next_rec"])
        self.wall_before = float(saved["wall"])
        self.params, self.state = saved["params"], saved["state"]
        for store, key in ((self.recorder.rec, "rec"), (self.recorder.prec, "prec")):
            for name, arr in saved[key].items():
                store[name][...] = arr
        self.batch_sizes_sum[...] = saved["batch_sizes_sum"]
        self.sampler.set_state(saved["sampler"])
        self.be.set_random_state(saved["noise"])
        restore_probe_states(self.recorder.probes, saved.get("probe_states", {}))
        self.ctx.t = self.t_start
        if self.bar is not None:
            self.bar = _ProgressBar(self.steps, self.bar.desc, initial=self.t_start)

    def _checkpoint(self, t):
        rc = self.recorder
        self.ck.save({"t": t, "steps": self.steps, "next_rec": self.next_rec,
                      "params": self.params, "state": self.state, "rec": rc.rec, "prec": rc.prec,
                      "batch_sizes_sum": self.batch_sizes_sum,
                      "sampler": self.sampler.get_state(), "noise": self.be.random_state(),
                      "probe_states": probe_states(rc.probes),
                      "wall": self.wall_before + time.perf_counter() - self.t0})

    def _steps(self, fused_step):
        """Steps ``t_start + 1 … T``, one sampled batch each; the records at the record steps and a
        checkpoint whenever one is due."""
        from .transforms.base import Batch

        be, xp, ctx, sampler, prob, tx = self.be, self.be.xp, self.ctx, self.sampler, self.prob, self.tx
        ck, bar, record = self.ck, self.bar, self.recorder.record
        params, state, batch_sizes_sum = self.params, self.state, self.batch_sizes_sum
        private_idx, public_idx, batch_size = self.private_idx, self.public_idx, self.batch_size
        host_arrays = be.name == "numpy"
        rec_list = self.recorder.rec_steps.tolist()  # Python ints: the per-step comparison stays cheap
        K = len(rec_list)
        has_domain = prob.has_domain
        for t in range(self.t_start + 1, self.steps + 1):
            ctx.t = t
            bi = sampler.draw()
            batch_sizes_sum += bi.sizes
            idx = bi.idx if private_idx is None else private_idx[bi.idx]
            mask = bi.mask
            if not host_arrays:  # the sampler's int64/bool host arrays are used as they are on NumPy
                idx = be.asindex(idx)
                mask = None if mask is None else xp.asarray(mask)
            if fused_step is not None:  # the same step, fused: params and state updated in place
                params, state = fused_step.step(params, idx, mask, state, ctx)
            else:
                batch = Batch(prob, params, idx, mask, batch_size, public_idx)
                updates, state = tx.update(batch, state, params, ctx)
                params = params + updates
                del updates, batch  # no (R, d) array of this step (nor the old params) lives on
            if has_domain:
                params = prob.project(params)
            if self.next_rec < K and t == rec_list[self.next_rec]:
                record(self.next_rec, params, state)
                self.next_rec += 1
            if bar is not None:
                bar.update(1)
            if ck is not None and ck.due():
                self.params, self.state = params, state
                self._checkpoint(t)
        self.params, self.state = params, state


#: The full-data metrics :func:`simulate` can record (``metrics=``).
FULL_METRICS = ("loss", "grad_norm_sq", "dist_to_opt")
#: The held-out metrics, for problems with a held-out split (:func:`dpsim.problems.from_data`).
HELDOUT_METRICS = ("test_loss", "test_accuracy")


def check_metrics(metrics, problem) -> tuple:
    """``metrics`` as a tuple of known names, each available on ``problem``.

    Parameters
    ----------
    metrics : sequence of str
        Names from :data:`FULL_METRICS` and :data:`HELDOUT_METRICS`.
    problem : Problem
        The problem the run records them on (held-out metrics need a held-out split, and
        ``test_accuracy`` a logistic link).

    Returns
    -------
    tuple of str
        ``metrics`` as a tuple; a bad value raises one ``ValueError`` naming it.
    """
    known = FULL_METRICS + HELDOUT_METRICS
    if isinstance(metrics, str) or not hasattr(metrics, "__iter__"):
        raise ValueError(f"metrics must be a sequence of names from {', '.join(known)}, got "
                         f"metrics={metrics!r} (a single name goes in a tuple: ({metrics!r},))")
    metrics = tuple(metrics)
    for m in metrics:
        if m not in known:
            raise ValueError(f"unknown metric {m!r}; expected a subset of {', '.join(known)}")
    if any(m in HELDOUT_METRICS for m in metrics) and not problem.has_heldout:
        raise ValueError(f"metrics {[m for m in metrics if m in HELDOUT_METRICS]} need a held-out "
                         f"split, and problem {problem.name!r} has none: build it with "
                         "dpsim.problems.from_data(X, y, ..., test=0.2)")
    if "test_accuracy" in metrics and problem.link != "logistic":
        raise ValueError(f"metric 'test_accuracy' is for classification (loss='logistic'); problem "
                         f"{problem.name!r} has link {problem.link!r}: record 'test_loss' instead")
    return metrics


#: Row block of the record norms: the temporaries of one block stay below this many bytes.
RECORD_ROW_BYTES = 4 * 2**20


def _row_sq_norms(xp, a, center=None):
    """``Σ_j (a − center)²`` per row, by blocks of rows so that no ``(R, d)`` temporary is formed
    (peak memory of a record, issue 10).  Each row's sum is the one ``xp.sum(x * x, axis=1)``
    computes on the whole array: a reduction along a row never involves other rows, so the
    blocks give the same numbers (``tests/core/test_engine.py``)."""
    R, d = a.shape
    itemsize = getattr(a.dtype, "itemsize", None) or (4 if "float32" in str(a.dtype) else 8)
    rows = max(1, RECORD_ROW_BYTES // max(1, d * itemsize))
    out = []
    for lo in range(0, R, rows):
        x = a[lo:min(R, lo + rows), :]
        if center is not None:
            x = x - center
        out.append(xp.sum(x * x, axis=1))
    return out[0] if len(out) == 1 else xp.concat(out)


def _seed_config(seed):
    """JSON form of the seed: an int, or the SeedSequence's entropy and spawn key (rebuildable
    with ``SeedSequence(entropy, spawn_key=tuple(spawn_key))``)."""
    if isinstance(seed, np.random.SeedSequence):
        ent = seed.entropy
        return {"entropy": int(ent) if not isinstance(ent, (list, tuple, np.ndarray)) else [int(e) for e in ent],
                "spawn_key": [int(k) for k in seed.spawn_key]}
    return int(seed)
