"""Bounds of DP² — private adaptive optimization with delayed preconditioners (public API
``analysis.delay``).

Source ([DP2]): Li, Zaheer, Liu, Reddi, McMahan, Smith, *Differentially Private Adaptive
Optimization with Delayed Preconditioners* (ICLR 2023): Lemma 1 (App. A), the staleness metric
``h(s)`` (§4.1 and App. A.2), Theorem 2 and Corollary 1 (convex, §4.1 / App. A.1), the delay–noise
trade-off (§4.1, "Trade-offs between delay and noise"), Theorem 3 (non-convex, §4.2 / App. B).

Notation (ALGORITHMS.md §0, §2.3): clip ``C``, noise multiplier ``σ``, batch size ``b``, delay
``s = s1 = s2`` (the analysis fixes ``s1 = s2``), horizon ``T``, ``s = vT``, stability constant
``ε_a`` (``eps``; not the privacy ε), RMSProp constant ``β``, dimension ``d``, and
``M := C² + σ²C²/(s b²)`` (Lemma 1).  Iterations are 1-based, ``t = 1..T``; in dpsim's DP² a step
``t`` is adaptive iff ``(t − 1) mod 2s ≥ s`` (Algorithm 1 with its 0-based index ``t − 1``).

Contents
--------
* :func:`lemma1_bound` — ``M`` (and a version valid without the proof's independence step).
* :func:`record_h_traces`, :class:`HTraces`, :func:`h_ratios`, :func:`h_of_s`,
  :func:`h_bound_a2`, :func:`fit_h` — ``h(s)`` estimated from simulated traces, the App. A.2 upper
  bound and its linear fit ``h(s) ≲ c1 s + c2``.
* :func:`theorem2_alpha`, :func:`theorem2_lr`, :func:`theorem2_rhs`, :func:`corollary1_rhs`.
* :func:`delay_tradeoff`, :func:`delay_tradeoff_dlogv`, :func:`optimal_delay_fraction`,
  :func:`tradeoff_constants`.
* :func:`theorem3_rhs`.

Where the paper disagrees with itself (or with ALGORITHMS.md) — the code follows the choice named
in each docstring; the list is in :data:`DISCREPANCIES`.  The paper prints no number for any of these
bounds (Fig. 3 plots ``h(s)`` on IMDB without a table), so there are no printed values to reproduce.

The ``dpsim verify`` checks (family ``"[DP2] delay"``, :mod:`dpsim.analysis.checks.dp2`) run
DP² through :func:`dpsim.simulate` on problems that meet the assumptions.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, NamedTuple

import numpy as np

from dpsim.analysis._validate import out as _out
from dpsim.analysis._validate import real

__all__ = [
    "lemma1_bound",
    "HTraces",
    "record_h_traces",
    "h_ratios",
    "h_of_s",
    "h_bound_a2",
    "HFit",
    "fit_h",
    "theorem2_alpha",
    "theorem2_lr",
    "theorem2_switch_steps",
    "theorem2_rhs",
    "corollary1_rhs",
    "delay_tradeoff",
    "delay_tradeoff_dlogv",
    "optimal_delay_fraction",
    "tradeoff_constants",
    "theorem3_rhs",
    "DISCREPANCIES",
]

#: Places where the paper disagrees with itself or with ALGORITHMS.md, and what the code follows.
DISCREPANCIES = {
    "h_definition": (
        "§4.1 prints h(s) ≥ max_t E||g^t||_1 / E||G/s||_1 + dε (dε added to the ratio; so does "
        "ALGORITHMS.md §4.1) while App. A Eq. (29)/(52)/(53) put dε in the denominator, "
        "E||g^t||_1 / (E||G/s||_1 + dε).  The proof (Eq. 32) needs only the latter, which is the "
        "smaller of the two; h_of_s defaults to the appendix form (form='appendix') and offers "
        "form='main'."),
    "h_steps": (
        "The max over all t ∈ [T] is infinite on the first SGD block (no accumulator yet, G = 0), "
        "and on later SGD blocks the printed window holds preconditioned releases.  The proof uses "
        "h(s) only on RMSProp steps (cases 2 and 3 of T2, Eqs. 32, 38); h_of_s maximizes over "
        "the adaptive steps by default."),
    "a2_constant": (
        "App. A.2 Eq. (56) bounds the drift term by (1/s)(sM + … + 2sM) = 3(s+1)M/2 but Eq. (57) "
        "carries sM.  The triangle inequality gives (1/s)Σ_u (t−u)·M ≤ (3s−1)/2·M for the window "
        "u of the accumulator; h_bound_a2(form='tight') uses the exact per-step distance, "
        "form='paper' Eq. (57) as printed.  Both still give h(s) = O(s)."),
    "c1_c2_names": (
        "§4.1 writes the A.2 bound as c1 + c2 s (and the trade-off as (c1 + c2 v)(…)), App. A.2 "
        "as c1 s + c2.  fit_h follows App. A.2 (c1 slope, c2 intercept); delay_tradeoff follows "
        "§4.1; tradeoff_constants converts."),
    "lr_exponent": (
        "Eq. (18) α^t = α^{⌊t/2s⌋+⌊(t+s)/2s⌋+1}/√t: by Hermite's identity the exponent is "
        "⌊t/s⌋+1.  With the proof's 1-based t it drops one step before the SGD→RMSProp switch, "
        "which breaks case 3 of T1 (α^t ≤ ε α^{t−1} at the switch).  theorem2_lr evaluates the "
        "floors at Algorithm 1's 0-based index t−1, so the rate drops exactly at each switch."),
    "alpha": (
        "Theorem 2 and Eq. (51) set α = min{ε, 1/(√M + ε), 1}; Eq. (18) writes 1/√(M + ε).  The "
        "code follows Theorem 2.  Case 4 of T2 (Eq. 46) needs α ≤ 1/(√M + 1), implied only when "
        "ε ≥ 1 or ε ≤ 1/(√M + 1)."),
    "first_term_exponent": (
        "Theorem 2's first term divides by α^{⌊1/2v⌋+⌊(1+v)/2v⌋} while the proof (Eqs. 22–24 with "
        "the rate of Eq. 18) gives α^{⌊T/s⌋+1}·…/√T, one more power of α, and R²/2 instead of R²; "
        "the noise term likewise carries α^{e(t)} instead of α^{e(t)+1}/2.  theorem2_rhs "
        "implements both (form='printed', the default, and form='proof')."),
    "theorem2_printed_fails": (
        "When s does not divide T the printed first term carries α^{⌊T/s⌋} where the proof's rate "
        "at the last step carries α^{⌊(T−1)/s⌋+1}, one power more, and R² where the proof has "
        "R²/2; with T_v = {T} (s < T < 2s) the printed first term is 2α(1 + κ/R²) times the "
        "proof's R² term.  For α = ε well below 1/2 the statement then fails: a noiseless linear "
        "loss on [−1, 1] started at the far corner, v = 1 − 1/T, keeps min_t F(w^t) − F* above "
        "the printed right-hand side (the dp2_theorem2 'printed form' row computes the instance); "
        "the proof form holds there."),
    "T_v_cardinality": (
        "Theorem 2 says |T_v| = ⌊1/2v⌋, Eq. (51) ⌈1/2v⌉; counting the 2s-blocks (the last one may "
        "be partial and ends at T) gives ⌈T/2s⌉.  The code uses the set itself."),
    "tradeoff_exponent": (
        "The trade-off replaces ⌊1/2v⌋ + ⌊(1+v)/2v⌋ by (2+v)/(2v) = 1/v + 1/2; Hermite's identity "
        "gives exactly ⌊1/v⌋ (≤ 1/v + 1/2).  delay_tradeoff(exact=True) uses ⌊1/v⌋; the "
        "minimizer uses the paper's smooth form.  The trade-off also ignores the v-dependence of "
        "Σ_{t∈T_v} E||D^t||_1 (|T_v| ≈ 1/2v), as the paper says ('the first term')."),
    "theorem2_lhs": (
        "Theorem 2 states min_t E[F(w^t)] − F*; its proof (Eq. 15, summed and divided by T) "
        "bounds the average (1/T)Σ_t E[F(w^t)] − F*, which is what the verify row checks (the "
        "min is smaller)."),
    "lemma1_cross_term": (
        "Lemma 1's proof (Eq. 2) drops the cross term 2E[ḡ_j N̄_j]; it vanishes when the clean "
        "gradients do not depend on earlier noise (e.g. linear losses), not in general (w^t "
        "depends on N^{t−1}).  Without it, Cauchy–Schwarz gives E[v_j] ≤ (C + σC/(b√s))² "
        "(lemma1_bound(strict=True)).  The proof also needs a batch of exactly b examples "
        "(Poisson batches divided by the nominal b can exceed norm C) and the RMSProp rule."),
    "theorem3": (
        "Theorem 3 (App. B) uses F(w^1) for F(w^1) − inf F (it assumes F ≥ 0), Eq. (78) uses "
        "E||D^t||_∞ ≤ √M + ε although Lemma 1 bounds E[v_j] per coordinate only, and Eq. (82) "
        "merges the SGD (α ≤ 1/L) and RMSProp (α ≤ ε/L) cases with √M + 1, valid for ε ≤ 1: "
        "Eq. (81) carries √M + ε, and with ε > 1 the printed statement can fail (a noiseless "
        "logistic regression with ε = 64 and α = 1/L keeps the average squared gradient norm "
        "above it; the dp2_theorem3 'printed, eps_a > 1' row computes the instance).  "
        "theorem3_rhs(form='printed') is the statement, form='proof' Eq. (81) summed: √M + ε."),
}


# ================================================================================================
# validation helpers


def _arr(name, x, **kw):
    return real(name, x, nonempty=True, **kw)


# ================================================================================================
# Lemma 1


def lemma1_bound(clip, noise_multiplier, s, batch_size, *, strict=False):
    """Lemma 1 ([DP2], App. A): ``E[v_j] ≤ M := C² + σ²C²/(s b²)`` for every coordinate ``j``.

    Source: Li et al., *Differentially Private Adaptive Optimization with Delayed
    Preconditioners* (ICLR 2023), Lemma 1 and Eqs. (1)–(5).

    Assumptions: DP²-RMSProp (Algorithm 1: ``v ← βv + (1−β)(G/s)²``, ``v = 0`` initially, no
    unbiasing) with ``s1 = s2 = s``; every accumulated release is ``(1/b)(Σ_{i∈B} clip(g_i, C) +
    N(0, σ²C²I))`` over a batch of exactly ``b`` examples, so each clean minibatch mean has
    ``||ḡ||_2 ≤ C`` — Assumption 2 (``||g_i|| ≤ C``) with the clip threshold ``C``, or simply
    clipping at ``C``.  ``C`` here is the SGD-phase clip ``C1``.

    ``strict=False`` (default): the lemma as printed; its proof drops the cross term
    ``2E[ḡ_j N̄_j]``, which is exact when the clean gradients do not depend on earlier noise (e.g.
    linear losses) — see :data:`DISCREPANCIES` ``["lemma1_cross_term"]``.
    ``strict=True``: ``(C + σC/(b√s))²``, from ``E[(ḡ_j + N̄_j)²] ≤ (√E ḡ_j² + √E N̄_j²)²``
    (Cauchy–Schwarz), valid without that step.

    Vectorized over all arguments (NumPy broadcasting); raises ``ValueError`` for ``C ≤ 0``,
    ``σ < 0``, non-integer or ``< 1`` ``s`` or ``b``.
    """
    C = _arr("clip", clip, positive=True)
    sig = _arr("noise_multiplier", noise_multiplier, nonneg=True)
    s = _arr("s", s, integer=True, lo=1)
    b = _arr("batch_size", batch_size, integer=True, lo=1)
    if strict:
        return _out((C + sig * C / (b * np.sqrt(s))) ** 2)
    return _out(C * C + sig * sig * C * C / (s * b * b))


# ================================================================================================
# h(s): traces recorded through dpsim.simulate


class _TraceState(NamedTuple):
    g: Any  # (R, d) clean minibatch mean gradient g^t = (1/b) Σ_{i∈B} ∇f(x_i; w^t) of the last step
    g_l1: Any  # (R,) ||g^t||_1
    diff_l1: Any  # (R,) ||g^t − g^{t−1}||_1 (0 at t = 1)
    bsum: Any  # (R, d) Σ of g^u over the current (or latest) SGD phase


def _trace_piece(s1: int, cycle: int):
    """A measuring piece run alongside a DP² optimizer: it records the clean minibatch mean gradient
    of each step (``h(s)`` needs it) and releases nothing (its output is discarded)."""
    from dpsim.transforms import GradientTransformation

    def init(params):
        z = params * 0.0
        zr = z[:, 0] * 0.0
        return _TraceState(g=z, g_l1=zr, diff_l1=zr * 1.0, bsum=z * 1.0)

    def update(batch, tr, params, ctx):
        xp = ctx.xp
        g = batch.mean()
        p = (ctx.t - 1) % cycle
        if p == 0:
            bsum = g
        elif p < s1:
            bsum = tr.bsum + g
        else:
            bsum = tr.bsum
        diff = xp.sum(xp.abs(g - tr.g), axis=1) if ctx.t > 1 else tr.diff_l1 * 0.0
        return g, _TraceState(g=g, g_l1=xp.sum(xp.abs(g), axis=1), diff_l1=diff, bsum=bsum)

    return GradientTransformation(init, update)


def _lr_schedule_piece(lr_schedule: Callable[[int], float]):
    """``u ← lr_schedule(t) · u`` (a deterministic step-size schedule; releases nothing)."""
    from dpsim.transforms import EmptyState, GradientTransformation

    def update(u, state, params, ctx):
        return u * float(lr_schedule(ctx.t)), state

    return GradientTransformation(lambda params: EmptyState(), update)


def _traced_optimizer(optimizer, lr_schedule: Callable[[int], float] | None = None):
    """A copy of a DP² optimizer with a measuring piece ``"h_trace"`` alongside it (the clean
    minibatch gradient of each step, for ``h(s)``) and, optionally, its update multiplied by
    ``lr_schedule(t)``.  The privacy events are the wrapped optimizer's (the traces are
    measurements, not releases).  The delayed preconditioner is read by its piece name."""
    from dpsim.transforms import lookup, named_chain
    from dpsim.transforms.combinators import alongside

    hp = optimizer.hyperparameters
    s1 = int(hp["s1"])
    s2 = int(hp["s2"]) if hp.get("s2") is not None else s1
    tx = alongside(named_chain(("h_trace", _trace_piece(s1, s1 + s2))), optimizer.transform)
    if lr_schedule is not None:
        tx = named_chain(tx, ("lr_schedule", _lr_schedule_piece(lr_schedule)))

    eps = hp.get("eps", 1e-8)

    def _D_l1(st, w, ctx):
        xp = ctx.xp
        v = lookup(st, "preconditioner").v
        e = ctx.hp(eps if isinstance(eps, float) else np.asarray(eps, dtype=float))
        return xp.sum(xp.sqrt(xp.maximum(v, 0.0)) + e, axis=1)

    probes = {
        "h_g_l1": lambda st, w, ctx: st["h_trace"].g_l1,
        "h_diff_l1": lambda st, w, ctx: st["h_trace"].diff_l1,
        "h_b_l1": lambda st, w, ctx: ctx.xp.sum(ctx.xp.abs(st["h_trace"].bsum), axis=1) / float(s1),
        "h_G_l1": lambda st, w, ctx: ctx.xp.sum(ctx.xp.abs(lookup(st, "preconditioner").G), axis=1) / float(s1),
        "h_D_l1": _D_l1,
    }
    return dataclasses.replace(optimizer, transform=tx, probes=probes)


@dataclasses.dataclass
class HTraces:
    """Per-step traces of a DP² run, what :func:`h_of_s` and :func:`theorem2_rhs` need.

    Arrays are ``(T, R)`` with row ``t − 1`` for step ``t`` (``R`` trials):

    * ``g_l1`` — ``||g^t||_1`` of the clean minibatch mean gradient the step used;
    * ``acc_l1`` — ``||G/s1||_1`` of the latest accumulator that refreshed ``v`` at or before step
      ``t`` (NaN before the first refresh);
    * ``b_l1`` — ``||(1/s1) Σ_u g^u||_1`` over that accumulator's window (clean part of ``G/s1``
      when nothing is clipped);
    * ``diff_l1`` — ``||g^t − g^{t−1}||_1`` (0 at ``t = 1``);
    * ``D_l1`` — ``||D^t||_1``: ``d`` on SGD steps, ``||√v + ε||_1`` on adaptive steps;
    * ``dist`` (T,) — ``(1/s1) Σ_u (t − u)`` over the window (App. A.2's drift weight);
    * ``adaptive`` (T,) bool; ``excess`` (T, R) ``F(w^t) − F*`` at the point step ``t`` starts
      from (``w^1`` = the initial point), or ``None``.
    """

    s1: int
    s2: int
    d: int
    eps: float
    g_l1: np.ndarray
    acc_l1: np.ndarray
    b_l1: np.ndarray
    diff_l1: np.ndarray
    D_l1: np.ndarray
    dist: np.ndarray
    adaptive: np.ndarray
    excess: np.ndarray | None = None
    result: Any = None

    @property
    def steps(self) -> int:
        return self.g_l1.shape[0]

    @property
    def trials(self) -> int:
        return self.g_l1.shape[1]

    @classmethod
    def from_result(cls, res) -> "HTraces":
        """Rebuild the traces from a :class:`dpsim.Result` made by :func:`record_h_traces`
        (probes ``h_*`` recorded at every step)."""
        need = ("h_g_l1", "h_G_l1", "h_b_l1", "h_diff_l1", "h_D_l1")
        missing = [k for k in need if k not in res.records]
        if missing:
            raise ValueError(f"the result has no trace probe {missing[0]!r}; record it with "
                             "dpsim.analysis.delay.record_h_traces")
        T = int(res.config["steps"])
        if res.steps.shape[0] != T + 1 or np.any(res.steps != np.arange(T + 1)):
            raise ValueError("h(s) needs every step recorded (record_every=1), got record steps "
                             f"{res.steps[:4].tolist()}…")
        hp = res.config["hyperparameters"]
        s1 = int(hp["s1"])
        s2 = int(hp["s2"]) if hp.get("s2") is not None else s1
        eps = hp.get("eps", 1e-8)
        e = np.asarray(eps, dtype=float)
        if e.ndim and not np.all(e == e.ravel()[0]):
            raise ValueError("h(s) needs one ε_a for all trials, got per-trial eps")
        eps = float(e.ravel()[0])
        d = int(res.params.shape[1])
        rec = res.records
        cycle = s1 + s2
        t = np.arange(1, T + 1)
        c = (t - 1) // cycle
        adaptive = (t - 1) % cycle >= s1
        src = np.where(adaptive, c, c - 1)  # cycle whose accumulator is in effect at step t
        full = src * cycle + s1  # record index where that accumulator is complete
        ok = src >= 0
        R = res.params.shape[0]
        acc = np.full((T, R), np.nan)
        bl = np.full((T, R), np.nan)
        acc[ok] = rec["h_G_l1"][full[ok]]
        bl[ok] = rec["h_b_l1"][full[ok]]
        dist = np.where(ok, t - src * cycle - (s1 + 1) / 2.0, np.nan)
        D = np.where(adaptive[:, None], rec["h_D_l1"][1:], float(d))
        excess = None if res.excess_loss is None else res.excess_loss[:T]
        return cls(s1=s1, s2=s2, d=d, eps=eps, g_l1=rec["h_g_l1"][1:], acc_l1=acc, b_l1=bl,
                   diff_l1=rec["h_diff_l1"][1:], D_l1=D, dist=dist, adaptive=adaptive,
                   excess=excess, result=res)


def record_h_traces(problem, s, *, steps, batch_size, trials, seed=0, optimizer="dp2_rmsprop",
                    sampling="fixed", lr_schedule=None, metrics=("loss",), init=None,
                    **hyperparameters):
    """Run DP² with :func:`dpsim.simulate` and record what ``h(s)`` needs at **every** step.

    The optimizer (``dp2_rmsprop`` by default; any ``dp2_*`` name) is built with ``s1 = s2 = s``
    and ``hyperparameters``; its state is extended with the clean minibatch gradient of each step
    (the same batch the step uses), and probes record ``||g^t||_1``, ``||G/s||_1``, the clean window
    mean, ``||g^t − g^{t−1}||_1`` and ``||D^t||_1``.  ``record_every=1`` is forced (the engine would
    otherwise record only about 100 steps).  ``sampling="fixed"``: batches of exactly ``b``, as
    Algorithm 1 and Assumption 2 assume.  ``lr_schedule``: optional ``t -> factor`` multiplying the
    update (then ``lr`` and ``lr2`` default to 1), e.g. :func:`theorem2_lr`.  ``init``: the
    initial point, passed to :func:`dpsim.simulate` (default zeros).

    Returns :class:`HTraces` (its ``result`` holds the :class:`dpsim.Result`).
    """
    import dpsim

    s = int(_arr("s", s, integer=True, lo=1))
    if not str(optimizer).startswith("dp2_"):
        raise ValueError(f"h(s) is defined for DP² optimizers (dp2_*), got optimizer={optimizer!r}")
    hp = dict(hyperparameters)
    for k in ("s1", "s2"):
        if k in hp and hp[k] is not None and int(hp[k]) != s:
            raise ValueError(f"record_h_traces uses s1 = s2 = s = {s}, got {k}={hp[k]!r}")
        hp.pop(k, None)
    if lr_schedule is not None:
        hp.setdefault("lr", 1.0)
        hp.setdefault("lr2", 1.0)
    opt = dpsim.optimizers.get(optimizer, s1=s, s2=s, **hp)
    res = dpsim.simulate(problem, _traced_optimizer(opt, lr_schedule), steps=steps,
                         batch_size=batch_size, trials=trials, seed=seed, sampling=sampling,
                         record_every=1, metrics=tuple(metrics), init=init)
    return HTraces.from_result(res)


def _as_traces(result_or_traces) -> HTraces:
    if isinstance(result_or_traces, HTraces):
        return result_or_traces
    if hasattr(result_or_traces, "records") and hasattr(result_or_traces, "config"):
        return HTraces.from_result(result_or_traces)
    raise ValueError(f"expected HTraces or a dpsim Result, got {type(result_or_traces).__name__}")


def _step_mask(tr: HTraces, which: str) -> np.ndarray:
    if which == "adaptive":
        m = tr.adaptive.copy()
    elif which == "all":
        m = np.isfinite(tr.acc_l1[:, 0])
    else:
        raise ValueError(f"which must be 'adaptive' or 'all', got which={which!r}")
    if not m.any():
        raise ValueError(f"no step of this run has a preconditioner yet (T={tr.steps}, s1={tr.s1}); "
                         "h(s) needs T > s1")
    return m


def h_ratios(result_or_traces, *, form="appendix", idx=None) -> np.ndarray:
    """Per-step ratio of §4.1/App. A's ``h(s)`` before the max, shape (T,) (NaN where no
    accumulator exists yet).

    ``form="appendix"`` (Eqs. 29, 52, 53): ``E||g^t||_1 / (E||G^{⌊t/s⌋s}/s||_1 + dε)``;
    ``form="main"`` (§4.1 as printed): ``E||g^t||_1 / E||G^{⌊t/s⌋s}/s||_1 + dε``.
    Expectations are means over trials (``idx`` selects trials, for the bootstrap).
    """
    tr = _as_traces(result_or_traces)
    sl = slice(None) if idx is None else idx
    num = np.mean(tr.g_l1[:, sl], axis=1)
    den = np.mean(tr.acc_l1[:, sl], axis=1)
    de = tr.d * tr.eps
    with np.errstate(divide="ignore", invalid="ignore"):
        if form == "appendix":
            return num / (den + de)
        if form == "main":
            return num / den + de
    raise ValueError(f"form must be 'appendix' or 'main', got form={form!r}")


def h_of_s(result_or_traces, s=None, *, form="appendix", which="adaptive", ci=None, n_boot=400,
           seed=0):
    """``h(s)`` of [DP2] §4.1, estimated from simulated traces.

    Source: Li et al. (ICLR 2023), §4.1 (definition after Theorem 2) and App. A Eq. (29):

        h(s) = max_t  E[||g^t||_1] / (E[||(1/s) G^{⌊t/s⌋ s}||_1] + d ε_a)        (appendix form)

    with ``g^t = (1/b) Σ_{i∈B} ∇f(x_i; w^t)`` the clean minibatch gradient of step ``t`` and
    ``G^{⌊t/s⌋s}`` the latest accumulator that refreshed ``v``.  ``form="main"`` gives §4.1's
    printed ``E||g^t||_1 / E||G/s||_1 + dε`` (see :data:`DISCREPANCIES` ``["h_definition"]``).
    ``which="adaptive"`` (default) takes the max over the RMSProp steps, the only steps where
    the proof uses ``h``; ``"all"`` also includes SGD steps after the first refresh (the first SGD
    block has no accumulator: the literal max is infinite).

    ``result_or_traces``: :class:`HTraces` from :func:`record_h_traces`, or the
    :class:`dpsim.Result` it holds (every step recorded).  ``s``, if given, must equal the run's
    ``s1``.  Expectations are means over the run's trials; the max of noisy means is biased
    upward for few trials.  ``ci=level`` also returns a percentile bootstrap interval over trials:
    ``(h, lo, hi)``.
    """
    tr = _as_traces(result_or_traces)
    if s is not None and int(s) != tr.s1:
        raise ValueError(f"s={s} does not match the run's s1={tr.s1}")
    m = _step_mask(tr, which)
    h = float(np.max(h_ratios(tr, form=form)[m]))
    if ci is None:
        return h
    if not (0.0 < float(ci) < 1.0):
        raise ValueError(f"ci must be a level in (0, 1), got ci={ci!r}")
    rng = np.random.default_rng(seed)
    R = tr.trials
    boots = np.array([np.max(h_ratios(tr, form=form, idx=rng.integers(0, R, R))[m])
                      for _ in range(int(n_boot))])
    a = (1.0 - float(ci)) / 2.0
    lo, hi = np.quantile(boots, [a, 1.0 - a])
    return h, float(lo), float(hi)


def h_bound_a2(result_or_traces, *, form="tight", M_diff=None, which="adaptive"):
    """App. A.2 upper bound on ``h(s)`` (appendix form), evaluated on the same traces.

    Source: Li et al. (ICLR 2023), App. A.2, Eqs. (53)–(57).  Assumption: consecutive minibatch
    gradients differ by at most ``M'`` in ℓ1 (``||g^t − g^{t−1}||_1 ≤ M'``; the paper calls it
    ``M``).  ``M_diff=None`` uses the largest difference seen in the run (then the bound holds
    path by path by the triangle inequality).  With ``b_t = (1/s) Σ_u g^u`` the clean mean over the
    window of the accumulator in effect at step ``t``:

    * ``form="tight"``: ``max_t (E||b_t||_1 + dist_t M') / (E||G/s||_1 + dε)`` with
      ``dist_t = (1/s) Σ_u (t − u) ≤ (3s − 1)/2`` — the triangle-inequality bound of Eqs. (54)–(56);
    * ``form="paper"``: Eq. (57) as printed, ``max_t E||b_t||_1/(E||G/s||_1 + dε) + s M'/(dε)``
      (its drift constant ``s`` is smaller than Eq. (56)'s ``3(s+1)/2``; see
      :data:`DISCREPANCIES` ``["a2_constant"]``).  For tiny ``ε_a`` the second term is vast.

    Both are ``O(s)`` (``≲ c1 s + c2``).  The denominator is the accumulator actually recorded
    (``||a + b||_1`` of Eq. 57 when nothing is clipped).
    """
    tr = _as_traces(result_or_traces)
    m = _step_mask(tr, which)
    if M_diff is None:
        M_diff = float(np.max(tr.diff_l1[1:])) if tr.steps > 1 else 0.0
    M_diff = float(_arr("M_diff", M_diff, nonneg=True))
    num_b = np.mean(tr.b_l1, axis=1)
    den = np.mean(tr.acc_l1, axis=1) + tr.d * tr.eps
    if form == "tight":
        vals = (num_b + tr.dist * M_diff) / den
        return float(np.max(vals[m]))
    if form == "paper":
        de = tr.d * tr.eps
        extra = math.inf if de == 0 and M_diff > 0 else (tr.s1 * M_diff / de if M_diff > 0 else 0.0)
        return float(np.max((num_b / den)[m]) + extra)
    raise ValueError(f"form must be 'tight' or 'paper', got form={form!r}")


class HFit(tuple):
    """``(c1, c2)`` of the least-squares line ``h(s) ≈ c1 s + c2``, with the fit quality as
    attributes: ``r2`` (coefficient of determination; 1 for two points), ``rmse``,
    ``max_residual`` (largest ``h − (c1 s + c2)``: add it to ``c2`` for an upper envelope),
    ``n``."""

    def __new__(cls, c1, c2, r2, rmse, max_residual, n):
        self = super().__new__(cls, (float(c1), float(c2)))
        self.r2, self.rmse, self.max_residual, self.n = float(r2), float(rmse), float(max_residual), int(n)
        return self

    @property
    def c1(self):
        return self[0]

    @property
    def c2(self):
        return self[1]

    def __repr__(self):
        return (f"HFit(c1={self[0]:.6g}, c2={self[1]:.6g}, r2={self.r2:.4g}, rmse={self.rmse:.4g}, "
                f"max_residual={self.max_residual:.4g}, n={self.n})")


def fit_h(s_values, h_values) -> HFit:
    """Least-squares fit of App. A.2's form ``h(s) ≲ c1 s + c2`` ([DP2], App. A.2, after
    Eq. 59; §4.1 names the constants the other way round, ``c1 + c2 s``).

    Returns :class:`HFit` — unpacks as ``(c1, c2)``; ``.r2``, ``.rmse``, ``.max_residual`` report
    the fit.  Needs at least two distinct ``s``.
    """
    s = _arr("s_values", s_values, positive=True).ravel()
    h = _arr("h_values", h_values).ravel()
    if s.shape != h.shape:
        raise ValueError(f"s_values and h_values differ in length: {s.size} vs {h.size}")
    if np.unique(s).size < 2:
        raise ValueError(f"fit_h needs at least two distinct s, got s_values={s_values!r}")
    A = np.stack([s, np.ones_like(s)], axis=1)
    (c1, c2), *_ = np.linalg.lstsq(A, h, rcond=None)
    res = h - (c1 * s + c2)
    ss_tot = float(np.sum((h - h.mean()) ** 2))
    # constant h: nothing to explain (R² = 1); tested on the values, since rounding in the mean
    # leaves ss_tot ~1e-32 rather than 0 and the ratio would be noise
    r2 = 1.0 - float(np.sum(res ** 2)) / ss_tot if np.ptp(h) > 0 else 1.0
    return HFit(c1, c2, r2, float(np.sqrt(np.mean(res ** 2))), float(np.max(res)), s.size)


# ================================================================================================
# Theorem 2 and Corollary 1 (convex)


def theorem2_alpha(eps, M):
    """``α = min{ε, 1/(√M + ε), 1}`` of Theorem 2 ([DP2] §4.1; Eq. 51).  Eq. (18) prints
    ``1/√(M + ε)``; the code follows the theorem.  Vectorized."""
    e = _arr("eps", eps, positive=True)
    M = _arr("M", M, nonneg=True)
    return _out(np.minimum(np.minimum(e, 1.0 / (np.sqrt(M) + e)), 1.0))


def _phase_exponent(t, s, zero_based=True):
    """``⌊t'/2s⌋ + ⌊(t'+s)/2s⌋`` (= ``⌊t'/s⌋``, Hermite) with ``t' = t − 1`` or ``t``."""
    tp = t - 1 if zero_based else t
    return np.floor(tp / (2 * s)) + np.floor((tp + s) / (2 * s))


def theorem2_lr(t, s, alpha, *, zero_based=True):
    """Learning rate of Theorem 2 ([DP2], Eq. 18): ``α^t = α^{⌊t'/2s⌋ + ⌊(t'+s)/2s⌋ + 1} / √t``.

    ``t ≥ 1`` is the 1-based step.  ``zero_based=True`` (default) takes the floors at Algorithm
    1's 0-based index ``t' = t − 1``, so the exponent (``= ⌊(t−1)/s⌋ + 1`` by Hermite's identity)
    grows by one exactly at each phase switch, which the proof requires (see
    :data:`DISCREPANCIES` ``["lr_exponent"]``); ``zero_based=False`` is the rate as printed in
    Theorem 2, ``t' = t`` (exponent ``⌊t/s⌋ + 1``, one step early).  Vectorized.
    """
    t = _arr("t", t, integer=True, lo=1)
    s = _arr("s", s, integer=True, lo=1)
    a = _arr("alpha", alpha, positive=True)
    return _out(a ** (_phase_exponent(t, s, zero_based=bool(zero_based)) + 1.0) / np.sqrt(t))


def theorem2_switch_steps(T, s) -> np.ndarray:
    """``T_v`` of Theorem 2: the last RMSProp step of each ``2s`` block (``t = 2s, 4s, …``, where
    DP² switches back to SGD) and the last iteration ``T``; 1-based, sorted, ``⌈T/2s⌉``
    elements."""
    return _switch_steps(int(_arr("T", T, integer=True, lo=1)), int(_arr("s", s, integer=True, lo=1)))


def _switch_steps(T: int, s: int) -> np.ndarray:
    """:func:`theorem2_switch_steps` for validated integers."""
    pts = list(range(2 * s, T + 1, 2 * s))
    if not pts or pts[-1] != T:
        pts.append(T)
    return np.asarray(pts, dtype=np.int64)


def _default_D_l1(T, s, d, eps, M):
    """Lemma 1 bound on ``E||D^t||_1``: ``d`` on SGD steps, ``d(√M + ε)`` on adaptive steps
    (``E√v_j ≤ √E v_j ≤ √M``, Eq. 6)."""
    t = np.arange(1, T + 1)
    adaptive = (t - 1) % (2 * s) >= s
    return np.where(adaptive, d * (math.sqrt(M) + eps), float(d))


def _printed_exponents(T: int, s: int):
    """Exponents of α in Theorem 2 as printed ([DP2] §4.1), with ``v = s/T``:
    ``e_T = ⌊1/2v⌋ + ⌊(1+v)/2v⌋`` and ``e_t = ⌊t/2vT⌋ + ⌊(t+vT)/2vT⌋`` for ``t = 1..T``.

    Computed exactly by integer floor division (``⌊1/2v⌋ = ⌊T/2s⌋``, ``⌊(1+v)/2v⌋ = ⌊(T+s)/2s⌋``,
    ``⌊t/2vT⌋ = ⌊t/2s⌋``, ``⌊(t+vT)/2vT⌋ = ⌊(t+s)/2s⌋``); flooring the float ratios instead loses
    one power of α whenever the ratio is an integer the division misses (``1.2/0.4 = 2.9999…`` at
    ``T = 5s``).  Returns ``(e_T: int, e_t: int64 array of length T)``."""
    T, s = int(T), int(s)
    t = np.arange(1, T + 1, dtype=np.int64)
    return T // (2 * s) + (T + s) // (2 * s), t // (2 * s) + (t + s) // (2 * s)


def _thm2_one(R, C, sig, b, T, s, d, eps, beta, h, D, kappa, form, terms):
    M = C * C + sig * sig * C * C / (s * b * b)
    alpha = min(eps, 1.0 / (math.sqrt(M) + eps), 1.0)
    kmin = max(alpha * alpha * C * C, C * h / (eps * math.sqrt(1.0 - beta)))
    if kappa is None:
        kappa = kmin
    elif kappa < kmin * (1 - 1e-12):
        raise ValueError(f"Theorem 2 needs kappa >= max(alpha^2 C^2, C h/(eps sqrt(1-beta))) = {kmin:.6g}, "
                         f"got kappa={kappa:.6g}")
    if D is None:
        D = _default_D_l1(T, s, d, eps, M)
    t = np.arange(1, T + 1, dtype=float)
    Tv = _switch_steps(T, s)
    noise_var = (sig * C / b) ** 2  # E||N^t||²_{D^t} = (σC/b)² E||D^t||_1
    if form == "printed":
        # With v = s/T: ⌊1/2v⌋ = ⌊T/2s⌋, ⌊(1+v)/2v⌋ = ⌊(T+s)/2s⌋, ⌊t/2vT⌋ = ⌊t/2s⌋ and
        # ⌊(t+vT)/2vT⌋ = ⌊(t+s)/2s⌋; integer floor division, never floors of float ratios
        # (1.2/0.4 = 2.9999… would lose one power of α whenever T = 5s, 11s, 13s, …).
        e_T, e_t = _printed_exponents(T, s)
        first = (R * R + kappa) / alpha ** e_T * np.sum(D[Tv - 1]) / math.sqrt(T)
        second = float(np.sum(alpha ** e_t.astype(float) / np.sqrt(t) * noise_var * D)) / T
    elif form == "proof":
        lr = alpha ** (_phase_exponent(t, s) + 1.0) / np.sqrt(t)
        first = (float(np.sum(R * R / (2.0 * lr[Tv - 1]) * D[Tv - 1])) + kappa / lr[-1] * D[-1]) / T
        second = float(np.sum(lr / 2.0 * noise_var * D)) / T
    else:
        raise ValueError(f"form must be 'printed' or 'proof', got form={form!r}")
    if terms:
        return first + second, first, second, kappa, alpha, M
    return first + second


def theorem2_rhs(R, clip, noise_multiplier, batch_size, T, s, d, eps, beta, h, *, D_l1=None,
                 kappa=None, form="printed", terms=False):
    """Right-hand side of Theorem 2 ([DP2] §4.1, convex case; App. A.1 Eq. 51), all terms.

    Source: Li et al., *Differentially Private Adaptive Optimization with Delayed Preconditioners*
    (ICLR 2023), Theorem 2.  With ``v = s/T``, ``M = C² + σ²C²/(sb²)``,
    ``α = min{ε, 1/(√M + ε), 1}``, ``κ = max{α²C², C h(s)/(ε√(1−β))}`` (the smallest allowed),
    ``E||N^t||²_{D^t} = (σC/b)² E||D^t||_1``:

        form="printed" (the theorem as stated):
          (R² + κ)/α^{⌊1/2v⌋+⌊(1+v)/2v⌋} · (1/√T) Σ_{t∈T_v} E||D^t||_1
          + (1/T) Σ_{t=1}^T α^{⌊t/2vT⌋+⌊(t+vT)/2vT⌋}/√t · E||N^t||²_{D^t}

        form="proof" (what Eqs. 15, 22–24 give with the rate α^t of :func:`theorem2_lr`):
          (1/T) [ Σ_{t∈T_v} R² E||D^t||_1/(2α^t) + κ E||D^T||_1/α^T + Σ_t (α^t/2) E||N^t||²_{D^t} ]

    ``T_v`` = :func:`theorem2_switch_steps`.  The left-hand side it bounds: ``min_t E[F(w^t)] − F*``
    (statement); the proof bounds the average ``(1/T) Σ_t E[F(w^t)] − F*``.

    Assumptions: ``F`` convex; Assumption 1 (``||w^t − w*|| ≤ R``); Assumption 2 (``||g_i|| ≤ C``);
    DP²-RMSProp with ``s1 = s2 = s`` and no clipping (``clip ≥ C`` in both phases; ``ε ≥ 1``
    guarantees it in the adaptive phase as ``D ≥ 1``); the learning rate of :func:`theorem2_lr`;
    ``h`` ≥ the ``h(s)`` of the run (:func:`h_of_s`).  ``0 < s ≤ T`` (``v ∈ (0, 1]``), ``0 ≤ β < 1``,
    ``ε > 0``.

    ``D_l1``: ``E||D^t||_1`` for ``t = 1..T``, shape ``(..., T)`` (broadcast with the other
    arguments); ``None`` uses Lemma 1's bound (``d`` on SGD steps, ``d(√M + ε)`` on adaptive steps),
    which only increases the right-hand side.  ``kappa``: a larger ``κ`` (``ValueError`` if below
    the minimum).  ``terms=True`` returns ``(rhs, first, second, kappa, alpha, M)``.
    Vectorized over every argument (NumPy broadcasting); ``T`` and ``s`` are integers.
    """
    Ra = _arr("R", R, nonneg=True)
    Ca = _arr("clip", clip, positive=True)
    sa = _arr("noise_multiplier", noise_multiplier, nonneg=True)
    ba = _arr("batch_size", batch_size, integer=True, lo=1)
    Ta = _arr("T", T, integer=True, lo=1)
    ssa = _arr("s", s, integer=True, lo=1)
    da = _arr("d", d, integer=True, lo=1)
    ea = _arr("eps", eps, positive=True)
    be = _arr("beta", beta, nonneg=True)
    ha = _arr("h", h, nonneg=True)
    if np.any(be >= 1):
        raise ValueError(f"beta must be in [0, 1), got beta={beta!r}")
    if np.any(np.broadcast_to(ssa, np.broadcast_shapes(ssa.shape, Ta.shape)) >
              np.broadcast_to(Ta, np.broadcast_shapes(ssa.shape, Ta.shape))):
        raise ValueError(f"Theorem 2 needs s = vT with v in (0, 1], i.e. s <= T, got s={s!r}, T={T!r}")
    ka = None if kappa is None else _arr("kappa", kappa, nonneg=True)
    args = [Ra, Ca, sa, ba, Ta, ssa, da, ea, be, ha] + ([] if ka is None else [ka])
    Dl = None
    if D_l1 is not None:
        Dl = _arr("D_l1", D_l1, positive=True)
        if Dl.ndim == 0:
            raise ValueError("D_l1 must have a trailing axis of length T")
        if np.unique(Ta).size != 1 or Dl.shape[-1] != int(Ta.ravel()[0]):
            raise ValueError(f"D_l1 must have shape (..., T) with one T, got shape {Dl.shape} and T={T!r}")
        shape = np.broadcast_shapes(*(a.shape for a in args), Dl.shape[:-1])
        Dl = np.broadcast_to(Dl, shape + Dl.shape[-1:])
    else:
        shape = np.broadcast_shapes(*(a.shape for a in args))
    bargs = [np.broadcast_to(a, shape) for a in args]
    n_out = 6 if terms else 1
    outs = [np.empty(shape) for _ in range(n_out)]
    for ix in np.ndindex(shape):
        vals = [float(a[ix]) for a in bargs]
        Rv, Cv, sv, bv, Tv_, s_v, dv, ev, bev, hv = vals[:10]
        kv = vals[10] if ka is not None else None
        r = _thm2_one(Rv, Cv, sv, bv, int(Tv_), int(s_v), int(dv), ev, bev, hv,
                      None if Dl is None else np.asarray(Dl[ix], dtype=float), kv, form, terms)
        r = r if terms else (r,)
        for o, val in zip(outs, r):
            o[ix] = val
    res = tuple(_out(o) for o in outs)
    return res if terms else res[0]


def corollary1_rhs(T, s, d, clip, noise_multiplier, batch_size, eps, *, D_l1=None):
    """Corollary 1 ([DP2] §4.1) with its hidden constants set to 1:

        (1/√T) max_{t∈T_s} E||D^t||_1 + (1/T) Σ_{t=1}^T (1/√t) E||N^t||²_{D^t},

    ``E||N^t||²_{D^t} = (σC/b)² E||D^t||_1``, ``T_s`` = :func:`theorem2_switch_steps`.
    Assumptions as :func:`theorem2_rhs` (a rate "ignoring the constants": a shape, not a bound;
    Theorem 2's terms are this times factors depending on ``v``, ``α``, ``R``, ``κ`` only).
    ``D_l1`` as in :func:`theorem2_rhs` (``None``: Lemma 1's bound, needs ``d`` and ``eps``).
    Vectorized.
    """
    Ta = _arr("T", T, integer=True, lo=1)
    sa = _arr("s", s, integer=True, lo=1)
    da = _arr("d", d, integer=True, lo=1)
    Ca = _arr("clip", clip, positive=True)
    sg = _arr("noise_multiplier", noise_multiplier, nonneg=True)
    ba = _arr("batch_size", batch_size, integer=True, lo=1)
    ea = _arr("eps", eps, positive=True)
    args = [Ta, sa, da, Ca, sg, ba, ea]
    Dl = None
    if D_l1 is not None:
        Dl = _arr("D_l1", D_l1, positive=True)
        if Dl.ndim == 0 or np.unique(Ta).size != 1 or Dl.shape[-1] != int(Ta.ravel()[0]):
            raise ValueError(f"D_l1 must have shape (..., T), got shape {Dl.shape} and T={T!r}")
        shape = np.broadcast_shapes(*(a.shape for a in args), Dl.shape[:-1])
        Dl = np.broadcast_to(Dl, shape + Dl.shape[-1:])
    else:
        shape = np.broadcast_shapes(*(a.shape for a in args))
    if np.any(np.broadcast_to(sa, shape) > np.broadcast_to(Ta, shape)):
        raise ValueError(f"Corollary 1 needs s <= T, got s={s!r}, T={T!r}")
    bargs = [np.broadcast_to(a, shape) for a in args]
    out = np.empty(shape)
    for ix in np.ndindex(shape):
        Tv_, s_v, dv, Cv, sv, bv, ev = (float(a[ix]) for a in bargs)
        Tv_, s_v = int(Tv_), int(s_v)
        M = Cv * Cv + sv * sv * Cv * Cv / (s_v * bv * bv)
        D = _default_D_l1(Tv_, s_v, int(dv), ev, M) if Dl is None else np.asarray(Dl[ix], dtype=float)
        t = np.arange(1, Tv_ + 1, dtype=float)
        Ts = theorem2_switch_steps(Tv_, s_v)
        out[ix] = np.max(D[Ts - 1]) / math.sqrt(Tv_) + float(np.sum((sv * Cv / bv) ** 2 * D / np.sqrt(t))) / Tv_
    return _out(out)


# ================================================================================================
# the delay–noise trade-off (§4.1)


def _tradeoff_args(v, c1, c2, c3, c4, eps):
    v = _arr("v", v, positive=True)
    if np.any(v > 1):
        raise ValueError(f"v must be in (0, 1], got v={v!r}")
    c1 = _arr("c1", c1, nonneg=True)
    c2 = _arr("c2", c2, nonneg=True)
    c3 = _arr("c3", c3, nonneg=True)
    c4 = _arr("c4", c4, nonneg=True)
    e = _arr("eps", eps, nonneg=True)
    if np.any(c1 + c2 <= 0):
        raise ValueError(f"c1 + c2 must be positive, got c1={c1!r}, c2={c2!r}")
    return v, c1, c2, c3, c4, e


def delay_tradeoff(v, c1, c2, c3, c4, eps, *, exact=False, log=False):
    """The delay–noise trade-off of [DP2] §4.1 ("Trade-offs between delay and noise"):

        f(v) = (c1 + c2 v) (√(c3 + c4/v) + ε)^{(2+v)/(2v)},   v = s/T ∈ (0, 1],

    the ``v``-dependence of Theorem 2's ``(R² + κ)/α^{⌊1/2v⌋+⌊(1+v)/2v⌋}`` with
    ``α = 1/(√M + ε)``, ``M = c3 + c4/v`` (``c3 = C²``, ``c4 = σ²C²/(Tb²)``) and
    ``R² + κ ∝ c1 + c2 v`` (``h(s) ≈`` linear in ``s``; §4.1's naming — App. A.2 swaps c1, c2).
    ``exact=True`` uses the exponent ``⌊1/2v⌋ + ⌊(1+v)/2v⌋ = ⌊1/v⌋`` (Hermite) instead of the
    paper's ``(2+v)/(2v)``.  ``log=True`` returns ``log f`` (the exponent makes ``f`` overflow for
    small ``v``).  Vectorized; ``ValueError`` outside ``v ∈ (0, 1]``, negative constants, or
    ``c1 + c2 = 0``.
    """
    v, c1, c2, c3, c4, e = _tradeoff_args(v, c1, c2, c3, c4, eps)
    base = np.sqrt(c3 + c4 / v) + e
    expo = np.floor(1.0 / v + 1e-12) if exact else (2.0 + v) / (2.0 * v)
    with np.errstate(divide="ignore", over="ignore"):
        lf = np.log(c1 + c2 * v) + expo * np.log(base)
        f = np.exp(lf)
    return _out(lf if log else f)


def delay_tradeoff_dlogv(v, c1, c2, c3, c4, eps):
    """``d/dv log f(v)`` of :func:`delay_tradeoff` (smooth form), in closed form:

        c2/(c1 + c2 v) − log(√(c3 + c4/v) + ε)/v² − ((2+v)/(2v)) · c4 / (2 v² √(c3 + c4/v) (√(c3 + c4/v) + ε)).

    Checked against sympy in the tests.  Vectorized.
    """
    v, c1, c2, c3, c4, e = _tradeoff_args(v, c1, c2, c3, c4, eps)
    r = np.sqrt(c3 + c4 / v)
    with np.errstate(divide="ignore", invalid="ignore"):
        third = np.where(c4 > 0, (2.0 + v) / (2.0 * v) * c4 / (2.0 * v * v * r * (r + e)), 0.0)
    return _out(c2 / (c1 + c2 * v) - np.log(r + e) / (v * v) - third)


def optimal_delay_fraction(c1, c2, c3, c4, eps, *, v_min=1e-4):
    """Minimizer ``v* ∈ [v_min, 1]`` of :func:`delay_tradeoff` ([DP2] §4.1).

    Minimizes ``log f`` with ``scipy.optimize.minimize_scalar`` (bounded) on the bracket of the
    best point of a log-spaced grid (guards against a local minimum), and compares with the end
    point ``v = 1``.  Returns ``(v*, f(v*))`` (arrays when the constants are arrays).  The paper
    says an optimum exists; it is interior (``d log f/dv = 0``, :func:`delay_tradeoff_dlogv`) or at
    ``v = 1`` (then DP² never switches to RMSProp within ``T``).
    """
    from scipy.optimize import minimize_scalar

    c1a, c2a, c3a, c4a, ea = (np.asarray(x, dtype=float) for x in (c1, c2, c3, c4, eps))
    _tradeoff_args(1.0, c1a, c2a, c3a, c4a, ea)
    if not (0 < v_min < 1):
        raise ValueError(f"v_min must be in (0, 1), got v_min={v_min!r}")
    shape = np.broadcast_shapes(c1a.shape, c2a.shape, c3a.shape, c4a.shape, ea.shape)
    vs, fs = np.empty(shape), np.empty(shape)
    grid = np.geomspace(v_min, 1.0, 200)
    for ix in np.ndindex(shape):
        k = [float(np.broadcast_to(a, shape)[ix]) for a in (c1a, c2a, c3a, c4a, ea)]
        lf = np.asarray(delay_tradeoff(grid, *k, log=True))
        i = int(np.argmin(lf))
        lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
        best_v, best = grid[i], lf[i]
        if hi > lo:
            r = minimize_scalar(lambda x: float(delay_tradeoff(x, *k, log=True)), bounds=(lo, hi),
                                method="bounded", options={"xatol": 1e-10})
            if r.fun <= best:
                best_v, best = float(r.x), float(r.fun)
        vs[ix], fs[ix] = best_v, math.exp(best)
    return _out(vs), _out(fs)


def tradeoff_constants(R, clip, noise_multiplier, batch_size, T, h_fit, eps, beta):
    """Constants ``(c1, c2, c3, c4)`` of :func:`delay_tradeoff` (§4.1 naming) from the model
    quantities, assuming the ``h`` branch of ``κ`` dominates:

    ``R² + κ = R² + C h(s)/(ε√(1−β))`` with ``h(s) = a s + b`` (``h_fit = (a, b)``, App. A.2
    naming, e.g. :func:`fit_h`) and ``s = vT`` gives ``c1 = R² + C b/(ε√(1−β))``,
    ``c2 = C a T/(ε√(1−β))``; ``M = c3 + c4/v`` gives ``c3 = C²``, ``c4 = σ²C²/(T b²)``.
    """
    a, bb = (float(x) for x in tuple(h_fit)[:2])
    C = float(_arr("clip", clip, positive=True))
    e = float(_arr("eps", eps, positive=True))
    beta = float(_arr("beta", beta, nonneg=True))
    if beta >= 1:
        raise ValueError(f"beta must be in [0, 1), got beta={beta!r}")
    T = float(_arr("T", T, integer=True, lo=1))
    sig = float(_arr("noise_multiplier", noise_multiplier, nonneg=True))
    b = float(_arr("batch_size", batch_size, integer=True, lo=1))
    k = C / (e * math.sqrt(1.0 - beta))
    return (float(R) ** 2 + k * bb, k * a * T, C * C, sig * sig * C * C / (T * b * b))


# ================================================================================================
# Theorem 3 (non-convex)


def theorem3_rhs(F1, alpha, T, L, clip, noise_multiplier, batch_size, s, d, tau, eps, form="printed"):
    """Right-hand side of Theorem 3 ([DP2] §4.2; App. B Eq. 84), non-convex case:

        (1/T) Σ_t E||∇F(w^t)||² ≤ 2(√M + 1) F(w^1)/(α T) + 2αL(√M + 1)(τ²/(2ε²b) + dσ²C²/(2b²)),

    ``M = C² + σ²C²/(sb²)``.  Source: Li et al. (ICLR 2023), Theorem 3.  Assumptions:
    Assumptions 1–4 (bounded iterates, ``||g_i|| ≤ C``, each ``f_i`` ``L``-smooth, per-example
    gradient variance ``≤ τ²``), constant learning rate ``α`` with ``Lα/ε ≤ 1`` (``ValueError``
    otherwise); ``F1`` is ``F(w^1) − inf F`` (the paper writes ``F(w^1)`` and assumes ``F ≥ 0``);
    the proof also needs ``α ≤ 1/L`` on SGD steps, implied when ``ε ≤ 1``.  Any ``s ≥ 1``.
    Vectorized.

    ``form="printed"`` (default) is the statement, with the factor ``√M + 1``; ``form="proof"``
    sums Eq. (81), whose factor is ``√M + ε`` (``D ≤ √M + ε``, Eq. 79): the two agree at
    ``ε = 1``, and the printed one is only valid for ``ε ≤ 1`` (:data:`DISCREPANCIES`
    ``["theorem3"]``).
    """
    if form not in ("printed", "proof"):
        raise ValueError(f"form must be 'printed' or 'proof', got {form!r}")
    F1 = _arr("F1", F1, nonneg=True)
    a = _arr("alpha", alpha, positive=True)
    T = _arr("T", T, integer=True, lo=1)
    L = _arr("L", L, positive=True)
    C = _arr("clip", clip, positive=True)
    sig = _arr("noise_multiplier", noise_multiplier, nonneg=True)
    b = _arr("batch_size", batch_size, integer=True, lo=1)
    s = _arr("s", s, integer=True, lo=1)
    d = _arr("d", d, integer=True, lo=1)
    tau = _arr("tau", tau, nonneg=True)
    e = _arr("eps", eps, positive=True)
    if np.any(L * a / e > 1 + 1e-12):
        raise ValueError(f"Theorem 3 needs L*alpha/eps <= 1, got L={L!r}, alpha={alpha!r}, eps={eps!r}")
    M = C * C + sig * sig * C * C / (s * b * b)
    k = np.sqrt(M) + (1.0 if form == "printed" else e)
    return _out(2.0 * k * F1 / (a * T) + 2.0 * a * L * k * (tau * tau / (2.0 * e * e * b)
                                                               + d * sig * sig * C * C / (2.0 * b * b)))
