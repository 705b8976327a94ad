"""Budget-constrained private training under (ρ, a)-ctCDP ([L2P], App. A–B; ALGORITHMS §2.7).

Source ([L2P]): Hong, Wang, Wang, Zhou, *Learning Model-Based Privacy Protection under Budget
Constraints* (AAAI 2021) — Algorithm 1 (private learning loop with a budget), Algorithm 3
(initialization, :func:`dpsim.privacy.tcdp.init_budget`), Theorem B.1 (privacy of the loop), App. B.7
(noise range ``(σ_min, 2σ_g)``), App. C.1 (the quadratic experiment).

The optimizer ``dp_sgd_ctcdp``
------------------------------
Hyperparameters (scalars, or one value per trial where noted):

* ``lr`` (per-trial), ``clip`` C (per-trial);
* ``epsilon``, ``delta``: the (ε, δ)-DP budget, converted to ``ρ_tot = ρ_a`` and ``a`` (per-trial
  allowed when every trial gets the same batch size);
* ``schedule``: ``"uniform" | "linear" | "exponential"`` and ``schedule_param`` p (per-trial),
  see :func:`noise_schedule`;
* ``noise_norm``: also release a noised ``‖Σ clip(g_i, C)‖²`` each step ([L2P] Thm B.1; the
  learned scheduler of the paper reads it; here it is recorded as the probe ``noisy_norm_sq``);
* ``planned_steps``: the ``T`` of Algorithm 3 (default: the ``steps`` given to ``simulate``);
  simulate longer to see trials stop when the budget is spent;
* ``sample_rate``: override the paper's nominal rate ``(√n + 10)/n`` (Algorithm 3 step 4).

At its first step it runs Algorithm 3 with the engine's ``n`` and ``T`` (:func:`plan` gives the
same numbers beforehand).  It **requires** ``sampling="fixed"`` with ``batch_size ==
plan(...)["batch_size"]`` — the mechanism Lemma A.6 amplifies is a uniformly random subset of
fixed size ``⌊qn⌋`` — and raises ``ValueError`` saying which batch size to use otherwise.

Step ``t`` (every trial independently, vectorized)::

    σ_t   = noise_schedule(t)                      (clamped to [σ_min, 2σ_g])
    ρ_t   = 13 q² Δ²/(2σ_t²)   [+ 13 q² Δ²/(2σ_g²) with noise_norm]       (Thm B.1)
    if the trial is active and ρ_spent + ρ_t ≤ ρ_tot:
        g̃ = (1/b) (Σ_{i∈B} clip(g_i, C) + σ_t ξ),  ξ ~ N(0, I_d);   w ← w − η g̃;   ρ_spent += ρ_t
    else:
        the trial stops for good (zero updates from now on; nothing more is released)

**Neighbouring relation and Δ.**  Lemma A.6 / Thm A.3 amplify a ρ-zCDP mechanism run on a
uniformly random fixed-size subset of a fixed-size dataset, with neighbours differing in one
*replaced* entry ([L2P] footnote 4: "only one different entry").  Under replace-one the
clipped sum ``Σ clip(g_i, C)`` changes by ``clip(g') − clip(g)``, so its ℓ2 sensitivity is
**Δ = 2C**, and the noise std ``σ_t`` is absolute (noise multiplier ``σ_t/Δ``); ``ρ_t`` is
``Δ²/(2σ_t²)``-zCDP (Lemma A.5) amplified by ``13q²`` (Lemma A.6).  The optional norm release
``‖S‖² + (σ_g/Δ)·Δ_ns·ξ'`` has replace-one sensitivity ``Δ_ns = max(4(b−1), 1) C²``
(:func:`dpsim.privacy.tcdp.norm_sq_sensitivity`; [L2P] Lemma A.3's ``(2b−1)C²`` is the removal
case) and costs ``13q²Δ²/(2σ_g²)``.  The ε reported is therefore a replace-one guarantee, like
dpsim's other ``sampling="fixed"`` accounting.

**Stopping.**  The schedule is data-independent, so whether a step fits in the budget reveals
nothing; once a step does not fit the trial stops (Thm B.1: the output is ``Σ ρ_t ≤ ρ_tot``-ctCDP).
Each ``σ_t`` carries a rounding guard (× ``1 + 1e-9``) so that ``T`` floating-point additions of
``ρ_tot/T`` never exceed ``ρ_tot``; ``ρ_spent ≤ ρ_tot`` holds exactly in float64.  Budget state
lives on the host in float64 whatever the backend and dtype.

**Privacy record and δ.**  ``Result.privacy`` is ``{"kind": "ctcdp", "rho_spent": [...],
"rho_tot", "a", "omega_a", "steps_taken": [...], ...}``.  ``Result.epsilon(δ)`` converts each
trial's ``(ρ_spent, ω_a)``-tCDP (Lemma A.2) with Theorem A.1 at the **requested** δ, for any
δ ∈ (0, 1) — the guarantee holds for every δ, so nothing is refused.  At the budget's own δ the
answer is ≤ the budget's ε (equal when the whole budget was spent).  Lemma A.7's pair
``(ε, e^{−aε})`` is the point of the same curve where the truncation is tight; since a smaller
ρ_spent gives a larger ``e^{−aε}``, Lemma A.7 alone would certify the budget's δ only at
``ρ = ρ_a``.  A trial that took no step reports ε = 0.

**Baseline "SGD-Adv"** of App. C.1 (DP-GD with a fixed step count and a step-size grid) is
``dp_sgd`` with ``batch_size = n`` and ``sampling="fixed"``; nothing is registered for it.  For
the paper's like-for-like budget (zCDP composition, no amplification) its noise std per step is
``σ = Δ √(T/(2ρ_a))`` (``T Δ²/(2σ²) = ρ_a`` and ρ_a-zCDP ⇒ (ε, δ)-DP by Thm A.1 with ω = ∞), i.e.
``noise_multiplier = 2√(T/(2ρ_a))`` relative to ``C`` under replace-one (Δ = 2C).
The paper's learned LSTM scheduler/projector (L2P) is out of scope.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._validate import hyper
from ..backend import to_numpy
from ..privacy import tcdp
from ..privacy.events import TcdpBudget
from ..transforms.base import GradientTransformation, named_chain
from ._hyper import LR, Choice, Flag, OrNone, PositiveInt, Real
from ._registry import Optimizer, optimizer, register
from .baselines import learning_rate

__all__ = ["dp_sgd_ctcdp", "plan", "noise_schedule", "CtcdpState", "ctcdp_privatizer", "SCHEDULES",
           "ROUNDING_GUARD"]

SCHEDULES = ("uniform", "linear", "exponential")
#: Relative inflation of every σ_t that absorbs float rounding in Σ ρ_t (see module docstring).
ROUNDING_GUARD = 1e-9


def plan(epsilon, delta, steps, n, clip, *, noise_norm=False, sample_rate=None) -> dict:
    """Algorithm 3 of [L2P] for ``dp_sgd_ctcdp``: :func:`dpsim.privacy.tcdp.init_budget` with Δ = 2C.

    Call it before :func:`dpsim.simulate` to get the batch size to pass (``plan(...)["batch_size"]``,
    with ``sampling="fixed"``).  ``steps`` is the planned ``T``; ``n`` the number of training
    examples.  Adds ``clip``, ``adjacency="replace-one"`` and ``norm_sq_sensitivity`` to the dict.

    Parameters
    ----------
    epsilon : float or array
        The budget's ε.
    delta : float or array
        The budget's δ.
    steps : int
        The planned ``T``.
    n : int
        Number of training examples.
    clip : float or array
        The clipping norm C.
    noise_norm : bool
        Also release the noised squared norm each step.
    sample_rate : float, optional
        Override of the nominal rate.

    Returns
    -------
    dict
        Algorithm 3's plan, with ``batch_size``, ``clip``, ``adjacency`` and
        ``norm_sq_sensitivity``.
    """
    c = tcdp._arr("clip", clip)
    if np.any(~(c > 0) | ~np.isfinite(c)):
        raise ValueError(f"clip must be positive and finite, got clip={clip!r}")
    out = tcdp.init_budget(epsilon, delta, steps, n, 2.0 * c, q=sample_rate, noise_norm=noise_norm)
    out["clip"] = tcdp._ret(c)
    out["adjacency"] = "replace-one"
    out["norm_sq_sensitivity"] = tcdp.norm_sq_sensitivity(out["batch_size"], c, adjacency="replace")
    return out


def noise_schedule(schedule, t, steps, *, sigma_g, sigma_min, param=0.5):
    """Noise std ``σ_t`` of step ``t`` (1-based, array allowed) of a ``steps``-step plan.

    With ``τ = (t − 1)/(T − 1)`` (0 when ``T = 1``) and a shape ``φ``:

    * ``"uniform"``:      ``φ(τ) = 1``                       (``σ_t = σ_g``, ``param`` ignored)
    * ``"linear"``:       ``φ(τ) = 1 + p (1 − 2τ)``,  ``|p| < 1``
    * ``"exponential"``:  ``φ(τ) = exp(p (1 − 2τ))``, any real ``p`` (geometric decay of σ by
      ``e^{−2p/(T−1)}`` per step)

    ``p > 0`` puts more noise early and less late (more budget to the late steps), ``p < 0`` the
    reverse, ``p = 0`` is uniform.  The family is normalized to spend the planned budget:
    ``σ_t = σ_g κ φ(τ_t)`` with ``κ² = (1/T) Σ_{s=1}^{T} φ(τ_s)^{−2}``, so that
    ``Σ_{t≤T} Δ²/(2σ_t²) = T Δ²/(2σ_g²)``; then ``σ_t`` is clamped to ``[σ_min, 2σ_g]`` ([L2P]
    App. B.7's range; clamping can only end a run early, never overspend).  Past ``T`` the schedule
    stays at its step-``T`` value.  ``sigma_g``, ``sigma_min``, ``param`` broadcast against ``t``
    (for per-trial values of shape ``(R,)`` pass ``t[:, None]`` to get ``(T, R)``).

    Parameters
    ----------
    schedule : {'uniform', 'linear', 'exponential'}
        The shape φ.
    t : int or array
        The 1-based step.
    steps : int
        The planned ``T``.
    sigma_g : float or array
        The uniform noise std σ_g.
    sigma_min : float or array
        The smallest std allowed.
    param : float or array
        The shape's parameter p.

    Returns
    -------
    float or numpy.ndarray
        ``σ_t``.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; expected one of {', '.join(SCHEDULES)}")
    T = int(steps)
    if T < 1:
        raise ValueError(f"steps must be a positive integer, got steps={steps!r}")
    t = np.asarray(t, dtype=float)
    sg = np.asarray(sigma_g, dtype=float)
    smin = np.asarray(sigma_min, dtype=float)
    p = np.asarray(param, dtype=float)
    if schedule == "uniform":
        sig = sg * np.ones_like(t)
    else:
        if schedule == "linear" and np.any(np.abs(p) >= 1):
            raise ValueError(f"schedule 'linear' needs |schedule_param| < 1, got schedule_param={param!r}")
        s_all = np.arange(1, T + 1, dtype=float)
        tau_all = (s_all - 1.0) / (T - 1.0) if T > 1 else np.zeros(1)
        tau = np.clip((np.minimum(t, T) - 1.0) / (T - 1.0), 0.0, 1.0) if T > 1 else np.zeros_like(t)
        phi = _shape(schedule, tau, p)
        phi_all = _shape(schedule, tau_all.reshape((-1,) + (1,) * p.ndim), p)
        kappa = np.sqrt(np.mean(phi_all ** -2.0, axis=0))
        sig = sg * kappa * phi
    return np.clip(sig, smin, 2.0 * sg)


def _shape(schedule, tau, p):
    if schedule == "linear":
        return 1.0 + p * (1.0 - 2.0 * tau)
    return np.exp(p * (1.0 - 2.0 * tau))


class CtcdpState(NamedTuple):
    """Budget state of :func:`ctcdp_privatizer` (host NumPy arrays, one entry per trial)."""

    rho_spent: Any      # (R,) float64, Σ ρ_t over the steps taken
    steps_taken: Any    # (R,) int64, number of steps taken
    active: Any         # (R,) bool, False once a step did not fit the budget (trial stopped)
    sigma: Any          # (R,) float64, σ_t of the last step taken (NaN before the first)
    noisy_norm_sq: Any  # (R,) float64, last released noisy ‖(1/b) Σ clip(g_i, C)‖² (NaN if none)


class _Plan(NamedTuple):
    T: int
    q: float
    b: int
    m_sched: np.ndarray   # (T,) or (T, R) noise multipliers σ_t/Δ (clamped, guarded)
    m_g: Any              # σ_g/Δ, scalar or (R,)
    rho_norm: Any         # per-step cost of the norm release (0 without noise_norm)
    info: dict


def ctcdp_privatizer(clip, epsilon, delta, *, schedule="uniform", schedule_param=0.5,
                     noise_norm=False, planned_steps=None, sample_rate=None) -> GradientTransformation:
    """The budget-constrained Gaussian privatizer of ``dp_sgd_ctcdp`` (see the module docstring).

    Emits ``g̃ = (1/b)(Σ clip(g_i, C) + σ_t ξ)`` for the trials whose step fits the budget and
    zeros for stopped trials.  Declares a :class:`~dpsim.privacy.events.TcdpBudget`: its spend
    depends on the run and is read from its final :class:`CtcdpState`.

    Parameters
    ----------
    clip : float or sequence of float
        The (finite) clipping norm C.
    epsilon : float or sequence of float
        The budget's ε.
    delta : float or sequence of float
        The budget's δ.
    schedule : {'uniform', 'linear', 'exponential'}
        The noise schedule.
    schedule_param : float or sequence of float
        Its parameter.
    noise_norm : bool
        Also release the noised squared norm.
    planned_steps : int, optional
        The planned ``T`` (default: the run's steps).
    sample_rate : float, optional
        Override of the nominal rate.

    Returns
    -------
    GradientTransformation
        The privatizer (state :class:`CtcdpState`).
    """
    clip = hyper("clip", clip, "(0, inf)")
    eps = hyper("epsilon", epsilon, "(0, inf)")
    dlt = hyper("delta", delta, "(0, 1)")
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; expected one of {', '.join(SCHEDULES)}")
    p = hyper("schedule_param", schedule_param)
    if schedule == "linear" and np.any(np.abs(np.asarray(p)) >= 1):
        raise ValueError(f"schedule 'linear' needs |schedule_param| < 1, got schedule_param={schedule_param!r}")
    if not isinstance(noise_norm, (bool, np.bool_)):
        raise ValueError(f"noise_norm must be True or False, got noise_norm={noise_norm!r}")
    if planned_steps is not None and (isinstance(planned_steps, bool) or not isinstance(
            planned_steps, (int, np.integer)) or planned_steps < 1):
        raise ValueError(f"planned_steps must be a positive integer or None, got planned_steps={planned_steps!r}")
    if sample_rate is not None and not (0 < float(sample_rate) <= 1):
        raise ValueError(f"sample_rate must be in (0, 1] or None, got sample_rate={sample_rate!r}")
    eps_a, dlt_a = np.asarray(eps, dtype=float), np.asarray(dlt, dtype=float)
    cache: dict = {}

    def get_plan(ctx) -> _Plan:
        T = int(planned_steps) if planned_steps is not None else int(ctx.num_steps)
        key = (ctx.n, T, ctx.batch_size, ctx.sampling, ctx.trials)
        hit = cache.get(key)
        if hit is not None:
            return hit
        if ctx.n is None:
            raise ValueError("dp_sgd_ctcdp needs the number of training examples n (StepContext.n)")
        info = plan(eps_a, dlt_a, T, ctx.n, np.asarray(clip, dtype=float), noise_norm=bool(noise_norm),
                    sample_rate=sample_rate)
        bs = np.unique(np.asarray(info["batch_size"]))
        if bs.size != 1:
            raise ValueError(
                f"per-trial epsilon/delta give different planned batch sizes {bs.tolist()}; "
                "run them in separate simulate calls")
        b = int(bs[0])
        what = (f"dp_sgd_ctcdp: [L2P] Algorithm 3 plans batch_size={b} (q={b}/{ctx.n}) for n={ctx.n}, "
                f"steps={T}, epsilon={epsilon!r}, delta={delta!r}")
        if ctx.sampling != "fixed":
            raise ValueError(
                f"{what}; it needs uniformly random fixed-size batches (Lemma A.6), got "
                f"sampling={ctx.sampling!r}: use simulate(..., sampling='fixed', batch_size={b})")
        if ctx.batch_size != b:
            raise ValueError(
                f"{what}, got batch_size={ctx.batch_size}: use simulate(..., sampling='fixed', "
                f"batch_size={b}) (dpsim.optimizers.ctcdp.plan gives it beforehand)")
        D = np.asarray(info["sensitivity"], dtype=float)
        t_all = np.arange(1, T + 1, dtype=float)
        pp = np.asarray(p, dtype=float)
        sg = np.asarray(info["sigma_g"], dtype=float) / D     # noise multipliers (Δ = 1)
        smin = np.asarray(info["sigma_min"], dtype=float) / D
        tt = t_all.reshape((-1,) + (1,) * max(np.ndim(sg), np.ndim(smin), pp.ndim))
        m_sched = noise_schedule(schedule, tt, T, sigma_g=sg, sigma_min=smin, param=pp)
        m_sched = m_sched * (1.0 + ROUNDING_GUARD)
        m_g = sg * (1.0 + ROUNDING_GUARD)
        q = b / ctx.n
        rho_norm = (tcdp.SUBSAMPLE_FACTOR * q ** 2 / (2.0 * m_g ** 2)) if noise_norm else 0.0
        out = _Plan(T=T, q=q, b=b, m_sched=m_sched, m_g=m_g, rho_norm=rho_norm,
                    info=info)
        cache[key] = out
        return out

    rho_tot_all = np.asarray(tcdp.rho_a(eps_a, dlt_a), dtype=float)

    def init(params):
        R = params.shape[0]
        return CtcdpState(rho_spent=np.zeros(R), steps_taken=np.zeros(R, dtype=np.int64),
                          active=np.ones(R, dtype=bool), sigma=np.full(R, np.nan),
                          noisy_norm_sq=np.full(R, np.nan))

    def update(batch, state, params, ctx):
        pl = get_plan(ctx)
        R = ctx.trials
        row = pl.m_sched[min(ctx.t, pl.T) - 1]
        m_t = np.broadcast_to(row.reshape(-1) if np.ndim(row) else row, (R,)).astype(float)
        rho_t = tcdp.SUBSAMPLE_FACTOR * pl.q ** 2 / (2.0 * m_t ** 2) + pl.rho_norm
        new = state.rho_spent + rho_t
        take = state.active & (new <= rho_tot_all)
        C = np.broadcast_to(np.asarray(clip, dtype=float), (R,))
        Dl = 2.0 * C                                  # replace-one sensitivity of the clipped sum
        xp = ctx.xp
        b = float(batch.batch_size)
        if not take.any():
            new_state = state._replace(active=take)
            return xp.zeros_like(params), new_state
        S = batch.clipped_sum(ctx.hp_vec(clip) if not isinstance(clip, float) else clip)
        z = ctx.backend.normal(S.shape)
        std = ctx.backend.asarray((m_t * Dl).reshape((-1, 1)))
        g = (S + std * z) / b
        noisy = state.noisy_norm_sq
        if noise_norm:
            zn = to_numpy(ctx.backend.normal((R,))).astype(float)
            dns = np.maximum(4.0 * (pl.b - 1.0), 1.0) * C * C
            m_g = np.broadcast_to(pl.m_g, (R,))
            rel = to_numpy(xp.sum(S * S, axis=1)).astype(float) + m_g * dns * zn
            noisy = np.where(take, rel / (b * b), noisy)
        mask = ctx.backend.asarray(take.astype(float).reshape((-1, 1)))
        new_state = CtcdpState(
            rho_spent=np.where(take, new, state.rho_spent),
            steps_taken=state.steps_taken + take.astype(np.int64),
            active=take,
            sigma=np.where(take, m_t * Dl, state.sigma),
            noisy_norm_sq=noisy,
        )
        return g * mask, new_state

    budget = {"kind": "ctcdp", "rho_tot": _plain(rho_tot_all), "a": _plain(-np.log(dlt_a) / eps_a),
              "omega_a": _plain(tcdp.omega_a(eps_a, dlt_a)), "epsilon_budget": _plain(eps_a),
              "delta_budget": _plain(dlt_a), "schedule": schedule, "noise_norm": bool(noise_norm),
              "planned_steps": None if planned_steps is None else int(planned_steps),
              "adjacency": "replace-one"}
    return GradientTransformation(init, update, (TcdpBudget(spend=_spend, budget=budget),))


def _spend(state: CtcdpState) -> dict:
    return {"rho_spent": [float(v) for v in state.rho_spent],
            "steps_taken": [int(v) for v in state.steps_taken]}


def _plain(x):
    x = np.asarray(x)
    return float(x) if x.ndim == 0 else [float(v) for v in x]


def _probe(field):
    return lambda state, params, ctx: np.asarray(getattr(state["privatizer"], field), dtype=float)


# Declared ranges of dp_sgd_ctcdp (validated by the registry; see dpsim.optimizers._hyper).
CLIP_FINITE = Real("(0, inf)", typical=(0.05, 10.0), log=True)
EPSILON = Real("(0, inf)", typical=(0.5, 10.0), log=True)
DELTA = Real("(0, 1)", typical=(1e-8, 1e-3), log=True)
SCHEDULE = Choice(SCHEDULES, message="unknown schedule {value}; expected one of {options}")
SCHEDULE_PARAM = Real("(-inf, inf)", typical=(-0.9, 0.9))  # |p| < 1 for "linear" (checked by the privatizer)
# a chosen rate must lie in Algorithm 3's feasible range (it depends on n, T, ε, δ): not generated
SAMPLE_RATE = OrNone(Real("(0, 1]", typical=(0.05, 0.1)), draw_value=False)


_DOC = {
    "clip": "Per-example clipping norm C (finite: the replace-one sensitivity is Δ = 2C).",
    "epsilon": "The (ε, δ)-DP budget's ε, converted to ``ρ_tot = ρ_a`` and ``a = log(1/δ)/ε`` "
               "(Algorithm 3).",
    "delta": "The (ε, δ)-DP budget's δ.",
    "schedule": "Noise schedule of :func:`noise_schedule`.",
    "schedule_param": "Parameter p of the schedule (``|p| < 1`` for ``\"linear\"``).",
    "noise_norm": "Also release a noised ``‖Σ clip(g_i, C)‖²`` each step (Thm B.1), recorded as "
                  "the probe ``noisy_norm_sq``.",
    "planned_steps": "The ``T`` of Algorithm 3 (``None``: the ``steps`` given to ``simulate``).",
    "sample_rate": "Override of the nominal rate ``(√n + 10)/n`` (Algorithm 3 step 4); must lie in "
                   "its feasible range.",
}


@register(doc=_DOC)
def dp_sgd_ctcdp(lr: LR = 0.1, clip: CLIP_FINITE = 1.0, epsilon: EPSILON = 1.0, delta: DELTA = 1e-5,
                 schedule: SCHEDULE = "uniform", schedule_param: SCHEDULE_PARAM = 0.5,
                 noise_norm: Flag() = False, planned_steps: OrNone(PositiveInt(typical=(1, 50))) = None,
                 sample_rate: SAMPLE_RATE = None) -> Optimizer:
    """Budget-constrained DP-SGD under (ρ, a)-ctCDP: each trial stops once its budget is spent.

    Update rule at step ``t`` (every trial independently; ``ξ_t ~ N(0, I_d)``, ``Δ = 2C``, ``q`` the
    sample rate, ``σ_g`` and ``σ_min`` from Algorithm 3)::

        σ_t = noise_schedule(t)                       clamped to [σ_min, 2σ_g]
        ρ_t = 13 q² Δ² / (2σ_t²)                      (+ 13 q² Δ² / (2σ_g²) with noise_norm)
        if active and ρ_spent + ρ_t ≤ ρ_tot:
            g̃_t = (1/b) (Σ_{i∈B_t} clip(g_i, C) + σ_t ξ_t)
            w_t = w_{t-1} - η g̃_t,   ρ_spent += ρ_t
        else:
            the trial stops for good (zero updates, nothing more released)

    Source: [L2P] Alg. 1 and 3, Thm B.1, App. B.7 (ALGORITHMS §2.7; module docstring).  Requires
    ``sampling="fixed"`` with the batch size of :func:`plan`; replace-one adjacency.  Pieces
    ``"privatizer"`` (:class:`CtcdpState`) and ``"lr"``.

    Returns
    -------
    Optimizer
        With probes ``rho_spent``, ``steps_taken``, ``sigma`` (and ``noisy_norm_sq`` with
        ``noise_norm``).

    Examples
    --------
    >>> import dpsim
    >>> opt = dpsim.optimizers.dp_sgd_ctcdp(epsilon=2.0, schedule="linear")
    >>> sorted(opt.probes)
    ['rho_spent', 'sigma', 'steps_taken']
    """
    priv = ctcdp_privatizer(clip, epsilon, delta, schedule=schedule, schedule_param=schedule_param,
                            noise_norm=noise_norm, planned_steps=planned_steps, sample_rate=sample_rate)
    fields = ("rho_spent", "steps_taken", "sigma") + (("noisy_norm_sq",) if noise_norm else ())
    return optimizer(named_chain(("privatizer", priv), learning_rate(lr)),
                     probes={f: _probe(f) for f in fields},
                     note="budget-constrained DP-SGD under (rho, a)-ctCDP ([L2P]); replace-one adjacency")
