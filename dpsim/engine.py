"""The vectorized simulation engine: :func:`simulate` and :class:`Result`.

One call runs ``R`` independent trials of one optimizer on one problem as a single array program:
parameters are ``(R, d)``, hyperparameters scalars or ``(R,)``; Python overhead is paid once per
step, not once per trial.

Randomness: ``SeedSequence(seed)`` is split into a sampler stream (host NumPy; identical batches
on every backend) and a noise stream (the backend's generator).  Hence a private rule with zero
noise sees exactly the batches of its non-private base for the same seed.
"""

from __future__ import annotations

import json
import math
import platform
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import __version__
from .backend import Backend, to_numpy
from .sampling import Sampler, check_sampling
from .transforms import Batch, StepContext

__all__ = ["simulate", "Result", "load"]

_METRICS = ("loss", "excess_loss", "grad_norm_sq", "dist_to_opt")


def _versions() -> dict:
    import numba
    import scipy

    out = {"dpsim": __version__, "python": platform.python_version(), "numpy": np.__version__,
           "scipy": scipy.__version__, "numba": numba.__version__}
    try:
        from importlib.metadata import version

        out["dp_accounting"] = version("dp-accounting")
    except Exception:  # pragma: no cover - metadata missing in odd installs
        pass
    return out


def _record_steps(steps: int, record_every: int | None) -> np.ndarray:
    if record_every is None:
        record_every = max(1, steps // 100)
    if isinstance(record_every, bool) or not isinstance(record_every, (int, np.integer)) or record_every < 1:
        raise ValueError(f"record_every must be a positive integer, got record_every={record_every!r}")
    rec = np.arange(0, steps + 1, record_every, dtype=np.int64)
    if rec[-1] != steps:
        rec = np.append(rec, steps)
    return rec


def simulate(problem, optimizer, *, steps: int, batch_size: int, trials: int = 1, seed=0,
             sampling: str = "poisson", backend: str = "numpy", record_every: int | None = None,
             progress: bool = False, dtype: str = "float64", init=None,
             probes: dict[str, Callable] | None = None,
             metrics=("loss", "grad_norm_sq", "dist_to_opt")) -> "Result":
    """Run ``trials`` independent trials of ``optimizer`` on ``problem`` for ``steps`` steps.

    Parameters
    ----------
    problem : a :mod:`dpsim.problems` problem.
    optimizer : an :class:`dpsim.optimizers.Optimizer` (or its name, built with defaults).
    steps, batch_size, trials : T, nominal batch size b, number of trials R.
    seed : int or ``SeedSequence``; the run is a deterministic function of (config, seed).
    sampling : ``"poisson"`` (rate b/n; default), ``"fixed"`` or ``"replacement"``.
    backend : ``"numpy"`` or ``"cupy"`` (``"array_api_strict"`` for testing).
    record_every : record metrics every this many steps (default: about 100 records), always
        including step 0 and step T.
    progress : show a progress bar (tqdm; appears only for runs longer than about a second).
    dtype : ``"float64"`` (default) or ``"float32"``.
    init : optional ``(d,)`` or ``(R, d)`` initial parameters (default zeros).
    probes : extra records ``name -> f(state, params, ctx) -> (R,)``, added to the optimizer's own.
    metrics : which full-data metrics to record, a subset of ``("loss", "grad_norm_sq",
        "dist_to_opt")`` (``excess_loss`` comes with ``loss``).  Each record of ``loss`` or
        ``grad_norm_sq`` is a pass over all n examples for all R trials; drop what a sweep does
        not need.  Metrics not recorded are ``None`` in the result (``loss`` is NaN-filled).

    Every record holds the full objective ``F(w)``, the excess ``F(w) − F*`` (when the problem
    knows ``F*``), ``||∇F(w)||²`` and ``||w − w*||`` per trial.
    """
    from . import optimizers as _opt

    if isinstance(optimizer, str):
        optimizer = _opt.get(optimizer)
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"steps must be a non-negative integer, got steps={steps!r}")
    if isinstance(trials, bool) or not isinstance(trials, (int, np.integer)) or trials < 1:
        raise ValueError(f"trials must be a positive integer, got trials={trials!r}")
    public_fraction = optimizer.hyperparameters.get("public_fraction") or 0.0
    if not (0.0 <= float(public_fraction) < 1.0):
        raise ValueError(f"public_fraction must be in [0, 1), got public_fraction={public_fraction}")
    n_public = int(round(float(public_fraction) * problem.n)) if public_fraction else 0
    if public_fraction and n_public < 1:
        raise ValueError(f"public_fraction={public_fraction} leaves no public example (n={problem.n})")
    check_sampling(sampling, problem.n - n_public, batch_size)
    n_hp = optimizer.trial_count()
    if n_hp is not None and n_hp != trials:
        raise ValueError(
            f"per-trial hyperparameters have {n_hp} values but trials={trials}"
        )
    steps, trials, batch_size = int(steps), int(trials), int(batch_size)
    rec_steps = _record_steps(steps, record_every)
    metrics = tuple(metrics)
    for m in metrics:
        if m not in ("loss", "grad_norm_sq", "dist_to_opt"):
            raise ValueError(f"unknown metric {m!r}; expected a subset of loss, grad_norm_sq, dist_to_opt")
    want_loss, want_grad = "loss" in metrics, "grad_norm_sq" in metrics

    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    # children of the seed without mutating a SeedSequence the caller passed (same as a fresh
    # ss.spawn(3)): sampler stream, noise stream, public split
    sampler_ss, noise_ss, public_ss = (
        np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (i,), pool_size=ss.pool_size)
        for i in range(3))
    be = Backend(backend, noise_ss, dtype)
    xp = be.xp
    prob = problem.on(be)
    public_idx = private_idx = None
    n_private = prob.n
    if n_public:
        # The public split is carved out of the training data (a seeded random subset) and is
        # never sampled for private batches; accounting uses the private part only.
        perm = np.random.Generator(np.random.PCG64(public_ss)).permutation(prob.n)
        public_idx = be.asindex(np.sort(perm[:n_public]))
        private_idx = np.sort(perm[n_public:])
        n_private = private_idx.size
    sampler = Sampler(sampling, n_private, batch_size, trials, sampler_ss)
    ctx = StepContext(be, trials, batch_size, steps, n=n_private, sampling=sampling)

    d = prob.d
    if init is None:
        params = xp.zeros((trials, d), dtype=be.float_dtype)
    else:
        w0 = np.asarray(init, dtype=float)
        if w0.shape == (d,):
            w0 = np.broadcast_to(w0, (trials, d))
        if w0.shape != (trials, d):
            raise ValueError(f"init must have shape ({d},) or ({trials}, {d}), got {w0.shape}")
        params = be.asarray(np.array(w0))
    if prob.has_domain:
        params = prob.project(params)

    tx = optimizer.transform
    state = tx.init(params)
    all_probes = dict(optimizer.probes)
    all_probes.update(probes or {})

    opt = prob.optimum
    w_star = be.asarray(opt[0])[None, :] if opt is not None else None
    f_star = float(opt[1]) if opt is not None else None

    K = rec_steps.size
    rec = {k: np.full((K, trials), np.nan) for k in _METRICS}
    prec = {k: np.full((K, trials), np.nan) for k in all_probes}

    def record(k):
        if want_loss and want_grad:
            loss, g = prob.loss_and_grad(params)
        else:
            loss = prob.loss(params) if want_loss else None
            g = prob.grad(params) if want_grad else None
        if loss is not None:
            loss = to_numpy(loss)
            rec["loss"][k] = loss
            if f_star is not None:
                rec["excess_loss"][k] = loss - f_star
        if g is not None:
            rec["grad_norm_sq"][k] = to_numpy(xp.sum(g * g, axis=1))
        if w_star is not None and "dist_to_opt" in metrics:
            rec["dist_to_opt"][k] = to_numpy(xp.linalg.vector_norm(params - w_star, axis=1))
        for name, fn in all_probes.items():
            prec[name][k] = to_numpy(fn(state, params, ctx))

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, desc=f"{optimizer.name} on {prob.name}", unit="step", delay=1.0,
                   leave=False)
    t0 = time.perf_counter()
    next_rec = 0
    record(next_rec)
    next_rec += 1
    batch_sizes_sum = np.zeros(trials)
    for t in range(1, steps + 1):
        ctx.t = t
        bi = sampler.draw()
        batch_sizes_sum += bi.sizes
        idx = be.asindex(bi.idx if private_idx is None else private_idx[bi.idx])
        mask = None if bi.mask is None else xp.asarray(bi.mask)
        batch = Batch(prob, params, idx, mask, batch_size, public_idx)
        updates, state = tx.update(batch, state, params, ctx)
        params = params + updates
        if prob.has_domain:
            params = prob.project(params)
        if next_rec < K and t == rec_steps[next_rec]:
            record(next_rec)
            next_rec += 1
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    wall = time.perf_counter() - t0

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
        "record_every": int(rec_steps[1] - rec_steps[0]) if K > 1 else None,
        "versions": _versions(),
    }
    if optimizer.private and optimizer.ledger is not None:
        privacy = dict(optimizer.ledger(state, steps=steps, sample_rate=batch_size / n_private,
                                        sampling=sampling, trials=trials))
        privacy.setdefault("private", True)
    else:
        privacy = _privacy_declaration(optimizer, sampling, batch_size / n_private, steps, trials)
    if n_public:
        privacy["public_examples"] = n_public
        privacy["note"] = ("ε covers the private part only; the public split "
                           f"({n_public} examples) is used without privacy")
    return Result(
        steps=rec_steps,
        loss=rec["loss"],
        excess_loss=rec["excess_loss"] if f_star is not None and want_loss else None,
        grad_norm_sq=rec["grad_norm_sq"] if want_grad else None,
        dist_to_opt=rec["dist_to_opt"] if w_star is not None and "dist_to_opt" in metrics else None,
        records=prec,
        params=np.array(to_numpy(params), dtype=float),
        config=config,
        privacy=privacy,
        wall_time=wall,
        mean_batch_size=batch_sizes_sum / max(steps, 1),
    )


def _seed_config(seed):
    """JSON form of the seed: an int, or the SeedSequence's entropy and spawn key (rebuildable
    with ``SeedSequence(entropy, spawn_key=tuple(spawn_key))``)."""
    if isinstance(seed, np.random.SeedSequence):
        ent = seed.entropy
        return {"entropy": int(ent) if not isinstance(ent, (list, tuple, np.ndarray)) else [int(e) for e in ent],
                "spawn_key": [int(k) for k in seed.spawn_key]}
    return int(seed)


def _privacy_declaration(optimizer, sampling, sample_rate, steps, trials) -> dict:
    """Per-trial step types ``[[σ of each release on that step], count]`` from the declaration,
    plus, per trial, the noise multipliers of correlated-noise (DP-MF) releases, each one
    whole-run Gaussian mechanism accounted without amplification."""
    if not optimizer.private:
        return {"private": False, "note": optimizer.note}
    releases = [r for r in optimizer.releases if r.mf is None]
    mf_releases = [r for r in optimizer.releases if r.mf is not None]
    masks = []
    for r in releases:
        m = np.ones(steps, dtype=bool) if r.when is None else np.asarray(r.when(steps), dtype=bool)
        if m.shape != (steps,):
            raise ValueError(f"release schedule has shape {m.shape}, expected ({steps},)")
        masks.append(m)
    pats, counts = [], []
    if masks and steps:  # the release pattern of each step is shared by all trials
        pats, counts = np.unique(np.stack(masks, axis=1), axis=0, return_counts=True)
    unamplified = [[] for _ in range(trials)]
    if mf_releases and steps:
        from .mf import noise_stream

        for r in mf_releases:
            if r.when is not None and not np.any(r.when(steps)):
                continue
            st = noise_stream(r.mf, steps)
            for i in range(trials):
                s = r.noise_multiplier if isinstance(r.noise_multiplier, float) else r.noise_multiplier[i]
                unamplified[i].append(st.equivalent_noise_multiplier(s, participation="any"))
    per_trial = []
    for i in range(trials):
        sig = [r.noise_multiplier if isinstance(r.noise_multiplier, float) else r.noise_multiplier[i]
               for r in releases]
        groups: dict[tuple, int] = {}
        for pat, c in zip(pats, counts):
            key = tuple(s for s, a in zip(sig, pat) if a)
            if key:
                groups[key] = groups.get(key, 0) + int(c)
        per_trial.append([[list(k), c] for k, c in groups.items()])
    out = {"private": True, "sampling": sampling, "sample_rate": sample_rate, "steps": steps,
           "step_types": per_trial}
    if mf_releases:
        out["unamplified"] = unamplified
        out["note"] = ("correlated noise (DP-MF) is accounted as one Gaussian mechanism per release "
                       "sequence with noise multiplier sigma*sens(M)/worst_sens(M), without "
                       "amplification by sampling")
    return out


@dataclass
class Result:
    """Recorded trajectories of one :func:`simulate` call (NumPy arrays).

    ``steps`` (K,) record step indices; ``loss``, ``excess_loss``, ``grad_norm_sq``, ``dist_to_opt``
    (K, R); ``records`` probe name → (K, R); ``params`` (R, d) final parameters; ``config`` plain
    dict; ``privacy`` the declared releases per trial (what :meth:`epsilon` accounts).
    """

    steps: np.ndarray
    loss: np.ndarray
    excess_loss: np.ndarray | None
    grad_norm_sq: np.ndarray
    dist_to_opt: np.ndarray | None
    records: dict
    params: np.ndarray
    config: dict
    privacy: dict
    wall_time: float = float("nan")
    mean_batch_size: Any = None
    _eps_cache: dict = field(default_factory=dict, repr=False)

    @property
    def trials(self) -> int:
        return self.loss.shape[1]

    def epsilon(self, delta: float, *, accountant: str = "pld"):
        """(ε, δ) privacy spent by the run, from the optimizer's declared releases and the sampler.

        Returns a float when every trial spent the same, else an ``(R,)`` array (per-trial noise
        multipliers).  Non-private optimizers and non-private oracles return ``inf``.
        """
        from . import accounting

        if not (0.0 < float(delta) < 1.0):
            raise ValueError(f"delta must be in (0, 1), got delta={delta}")
        p = self.privacy
        if not p.get("private"):
            return math.inf
        kind = p.get("kind", "releases")
        if kind != "releases":
            return _epsilon_of_ledger(p, float(delta))
        out = np.empty(len(p["step_types"]))
        unamp = p.get("unamplified") or [[] for _ in p["step_types"]]
        for i, st in enumerate(p["step_types"]):
            key = (json.dumps(st), json.dumps(unamp[i]), float(delta), accountant)
            if key not in self._eps_cache:
                if not st and not unamp[i]:
                    self._eps_cache[key] = 0.0
                else:
                    self._eps_cache[key] = accounting.epsilon_from_releases(
                        [(tuple(s), c) for s, c in st], p["sample_rate"], float(delta),
                        accountant=accountant, sampling=p["sampling"], unamplified=tuple(unamp[i]))
            out[i] = self._eps_cache[key]
        if np.all(out == out[0]):
            return float(out[0])
        return out

    def to_xarray(self):
        """Labelled ``xarray.Dataset`` with dims ``step`` × ``trial`` (and ``dim`` for params);
        per-trial hyperparameters become ``trial`` coordinates; config in ``attrs``."""
        import xarray as xr

        data = {k: (("step", "trial"), getattr(self, k)) for k in _METRICS if getattr(self, k) is not None}
        for k, v in self.records.items():
            data[f"probe_{k}"] = (("step", "trial"), v)
        data["params"] = (("trial", "dim"), self.params)
        coords = {"step": self.steps, "trial": np.arange(self.trials)}
        for k, v in self.config.get("hyperparameters", {}).items():
            if isinstance(v, list) and len(v) == self.trials:
                coords[k] = ("trial", np.asarray(v, dtype=float))
        attrs = {"config": json.dumps(self.config), "privacy": json.dumps(self.privacy)}
        return xr.Dataset(data, coords=coords, attrs=attrs)

    def save(self, path) -> None:
        """Write the result to ``path`` (NumPy ``.npz`` with the config as JSON); see :func:`load`."""
        arrays = {"steps": self.steps, "loss": self.loss, "params": self.params}
        if self.grad_norm_sq is not None:
            arrays["grad_norm_sq"] = self.grad_norm_sq
        if self.excess_loss is not None:
            arrays["excess_loss"] = self.excess_loss
        if self.dist_to_opt is not None:
            arrays["dist_to_opt"] = self.dist_to_opt
        for k, v in self.records.items():
            arrays[f"probe__{k}"] = v
        if self.mean_batch_size is not None:
            arrays["mean_batch_size"] = np.asarray(self.mean_batch_size)
        meta = {"config": self.config, "privacy": self.privacy, "wall_time": self.wall_time,
                "format": "dpsim-result-1"}
        with open(path, "wb") as fh:
            np.savez_compressed(fh, __meta__=np.array(json.dumps(meta)), **arrays)


# Privacy records other than per-step Gaussian releases: kind -> f(privacy_dict, delta) -> ε
LEDGER_KINDS: dict[str, Callable] = {}


def _epsilon_of_ledger(p: dict, delta: float):
    from . import optimizers  # noqa: F401  (importing the optimizers registers their ledger kinds)

    kind = p["kind"]
    if kind not in LEDGER_KINDS:
        raise ValueError(f"no accountant registered for privacy record kind {kind!r}")
    return LEDGER_KINDS[kind](p, delta)


def load(path) -> Result:
    """Read a :class:`Result` written by :meth:`Result.save`."""
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["__meta__"]))
        if meta.get("format") != "dpsim-result-1":
            raise ValueError(f"{path} is not a dpsim result file")
        get = lambda k: np.array(z[k]) if k in z.files else None  # noqa: E731
        records = {k[len("probe__"):]: np.array(z[k]) for k in z.files if k.startswith("probe__")}
        return Result(steps=get("steps"), loss=get("loss"), excess_loss=get("excess_loss"),
                      grad_norm_sq=get("grad_norm_sq"), dist_to_opt=get("dist_to_opt"),
                      records=records, params=get("params"), config=meta["config"],
                      privacy=meta["privacy"], wall_time=meta.get("wall_time", float("nan")),
                      mean_batch_size=get("mean_batch_size"))
