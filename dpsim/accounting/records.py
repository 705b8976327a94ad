"""Runs: the privacy events a run declared -> a JSON-able record (:func:`privacy_record`) -> ε
(:func:`epsilon_of_record`); correlated noise amplified or not as the package docstring says."""

from __future__ import annotations

import math

import numpy as np

from ..sampling import CYCLIC, cyclic_rate
from .composition import epsilon_from_releases
from .options import UnsupportedAccountingError, _check_delta, _sampling, adjacency


RECORD_FORMAT = "dpsim-privacy-2"


def _state_at(state, path):
    for key in path:
        state = state[key]
    return state


def _per_trial(sigma, i):
    return sigma if isinstance(sigma, float) else sigma[i]


def _describe(event, steps: int) -> dict:
    from ..privacy import events as ev

    out = {"type": type(event).__name__, "piece": "/".join(map(str, event.path))}
    if isinstance(event, (ev.GaussianRelease, ev.CorrelatedRelease)):
        s = event.noise_multiplier
        out.update(noise_multiplier=s if isinstance(s, float) else list(s),
                   sensitivity=event.sensitivity, steps=int(ev.schedule_mask(event, steps).sum()))
        if isinstance(event, ev.CorrelatedRelease):
            out["strategy"] = event.strategy
    elif isinstance(event, ev.NonPrivate):
        out["reason"] = event.reason
    return out


def privacy_record(events, final_state, *, steps: int, sample_rate: float, sampling: str,
                   trials: int) -> dict:
    """Resolve the privacy ``events`` of a finished run into a JSON-able record.

    ``final_state``: the optimizer's state after the last step (state-dependent events, e.g. a
    :class:`~dpsim.privacy.events.TcdpBudget`, read their piece's state at ``event.path``).  Keys:
    ``private``; ``events`` (each event described; a correlated release also says how it is
    ``accounting``); for Gaussian releases ``sampling``, ``adjacency``, ``participation``,
    ``sample_rate`` (the nominal ``b/n``), ``steps``, ``step_types`` (per trial ``[[σ of each
    release on the step], count]`` over the whole run, amplified correlated releases included)
    and, with cyclic sampling, ``group_rate`` and ``group_step_types`` (per trial, the step types
    of each non-dominated group); with correlated noise ``correlated_accounting``
    (``"amplified"``, ``"unamplified"`` or ``"mixed"``), ``unamplified`` (per trial, the
    whole-run noise multipliers of the unamplified ones) and ``note``; for a ctCDP budget its
    fields (``kind="ctcdp"``, ``rho_spent``, ``steps_taken``, ``rho_tot``, ``a``, ``omega_a``,
    ...).  The module docstring says when correlated noise is amplified.
    """
    from ..privacy import events as ev
    from ..privacy.mf import noise_stream

    events = tuple(events)
    if not events:
        raise ValueError("no privacy event declared: nothing to account (an optimizer must declare "
                         "its releases or NonPrivate)")
    rec = {"format": RECORD_FORMAT, "events": [_describe(e, steps) for e in events]}
    reasons = [e.reason for e in events if isinstance(e, ev.NonPrivate)]
    if reasons:
        rec.update(private=False, note="; ".join(dict.fromkeys(reasons)))
        return rec
    budgets = [e for e in events if isinstance(e, ev.TcdpBudget)]
    if budgets:
        if len(budgets) != len(events):
            raise UnsupportedAccountingError("a ctCDP budget composed with other releases is not supported")
        if len(budgets) > 1:
            raise UnsupportedAccountingError("more than one ctCDP budget in one optimizer is not supported")
        b = budgets[0]
        rec.update(b.budget)
        rec.update(b.spend(_state_at(final_state, b.path)))
        rec.update(private=True, sampling=sampling, sample_rate=float(sample_rate), steps=int(steps))
        if rec.get("planned_steps") is None:
            rec["planned_steps"] = int(steps)
        return rec
    kind, k = _sampling(sampling)
    groups = k if kind == CYCLIC else (1 if kind == "poisson" else None)  # None: no amplification
    releases = [e for e in events if isinstance(e, ev.GaussianRelease)]
    correlated = [e for e in events if isinstance(e, ev.CorrelatedRelease)]
    unamplified = [[] for _ in range(trials)]
    how = []
    for idx, e in enumerate(events):
        if not isinstance(e, ev.CorrelatedRelease):
            continue
        mask = ev.schedule_mask(e, steps) if steps else np.zeros(0, bool)
        if not np.any(mask):
            rec["events"][idx]["accounting"] = "no release"
            continue
        st = noise_stream(e.strategy, steps)
        label = _correlated_verdict(st, groups, kind, k, bool(np.all(mask)))
        rec["events"][idx]["accounting"] = label
        rec["events"][idx]["bandwidth"] = st.bandwidth
        if label.startswith("amplified"):
            releases.append(e)  # one subsampled Gaussian at σ per step of the example's group
            how.append("amplified")
            continue
        how.append("unamplified")
        for i in range(trials):
            unamplified[i].append(st.equivalent_noise_multiplier(_per_trial(e.noise_multiplier, i),
                                                                 participation="any"))
    masks = [ev.schedule_mask(e, steps) for e in releases]
    folded = bool("unamplified" in how and any(np.any(m) for m in masks))
    if folded:
        # An unamplified correlated release shares its batches with subsampled ones.  Its output
        # may reveal the participation pattern (its ε can be large), and amplification of the
        # others needs that pattern hidden, so composing their amplified ε would not be sound.
        # For every fixed batch sequence each release is a plain Gaussian mechanism, and a mixture
        # over batch sequences keeps the worst-case bound (joint convexity), so the whole run is
        # accounted without amplification: a release with σ on m steps is one Gaussian with
        # multiplier σ/√m (m compositions of sensitivity-C queries at noise σC).
        for j, e in enumerate(releases):
            m = int(np.count_nonzero(masks[j]))
            if not m:
                continue
            label = ("unamplified (shares its batches with an unamplified correlated release, "
                     "so no release of the run is amplified)")
            for idx, e2 in enumerate(events):
                if e2 is e:
                    rec["events"][idx]["accounting"] = label
            for i in range(trials):
                unamplified[i].append(_per_trial(e.noise_multiplier, i) / math.sqrt(m))
        how = ["unamplified" for _ in how]
        releases, masks = [], []
    step_mat = np.stack(masks, axis=1) if masks and steps else np.zeros((steps, 0), bool)
    if all(isinstance(e.noise_multiplier, float) for e in releases):
        sig = [tuple(e.noise_multiplier for e in releases)] * trials  # shared by every trial
    else:
        sig = [tuple(_per_trial(e.noise_multiplier, i) for e in releases) for i in range(trials)]
    patterns = _step_patterns(step_mat)  # the schedule is the same for every trial
    rec.update(private=True, sampling=sampling, adjacency=adjacency(sampling),
               participation=_participation(kind, k, sample_rate, steps),
               sample_rate=sample_rate, steps=steps,
               step_types=_per_sigmas(sig, lambda s_i: _types_of(patterns, s_i)))
    if kind == CYCLIC:
        per_group = _group_patterns(step_mat, k)
        rec["group_rate"] = cyclic_rate(sample_rate, k)
        rec["group_step_types"] = _per_sigmas(sig, lambda s_i: [_types_of(pg, s_i) for pg in per_group])
    if correlated:
        rec["unamplified"] = unamplified
        verdicts = set(how)
        rec["correlated_accounting"] = (verdicts.pop() if len(verdicts) == 1 else
                                        "mixed" if verdicts else "no release")
        if "unamplified" in how:
            rec["note"] = ("correlated noise (DP-MF) accounted UNAMPLIFIED: one Gaussian mechanism "
                           "per release sequence with noise multiplier sigma*sens(M)/worst_sens(M), "
                           "without amplification by sampling (see events[].accounting)")
            if folded:
                rec["note"] += ("; the i.i.d. releases sharing its batches are accounted without "
                                "amplification too (an unamplified release may reveal who took part)")
        elif how:
            rec["note"] = ("correlated noise (DP-MF) accounted AMPLIFIED: banded strategy under "
                           f"{'cyclic Poisson' if kind == CYCLIC else 'Poisson'} sampling reduces to "
                           "DP-SGD on each example's group (Choquette-Choo et al. 2023)")
    return rec


def _correlated_verdict(stream, groups, kind: str, k, every_step: bool) -> str:
    """How a correlated release is accounted (module docstring): ``"amplified (...)"`` or
    ``"unamplified (reason)"``."""
    w = stream.bandwidth
    if groups is None:
        return f"unamplified ({kind} sampling: no amplification for correlated noise)"
    scheme = f"cyclic_poisson:{k}" if kind == CYCLIC else "poisson"
    if not every_step:
        return ("unamplified (the release is restricted to some steps, so its noise stream does "
                "not follow the step index)")
    if stream.amplifiable(groups):
        return f"amplified (bandwidth {w} <= {groups} groups of {scheme})"
    return (f"unamplified (bandwidth {w} > {groups} group{'s' if groups > 1 else ''} of {scheme}; "
            f"amplification needs sampling='cyclic_poisson:<k>' with k >= {w})")


def _participation(kind: str, k, q: float, steps: int) -> dict:
    """What the accountant assumes about how often, and how far apart, an example takes part."""
    if kind == CYCLIC:
        return {"scheme": "cyclic Poisson", "groups": k, "rate": cyclic_rate(q, k),
                "max_participations": -(-int(steps) // k), "min_separation": k,
                "rule": "example i in group i mod k; step t samples group (t-1) mod k"}
    if kind == "poisson":
        return {"scheme": "Poisson", "groups": 1, "rate": float(q),
                "max_participations": int(steps), "min_separation": 1}
    return {"scheme": kind, "rate": float(q)}


def _group_patterns(step_mat: np.ndarray, k: int) -> list:
    """For each group of cyclic sampling (step index ``i`` in group ``i mod k``), its release
    patterns and counts, keeping only groups not dominated by another (same patterns, each count
    at most the other's: ε is monotone in every count)."""
    out = []
    for g in range(min(k, step_mat.shape[0])):
        sub = step_mat[g::k]
        if sub.shape[1]:
            out.append(_row_counts(sub))
        else:
            out.append({})
    distinct = []
    for a in out:
        if a not in distinct:
            distinct.append(a)
    keep = [a for a in distinct
            if not any(b != a and all(b.get(p, 0) >= c for p, c in a.items()) for b in distinct)]
    return keep or [{}]


def _types_of(patterns: dict, sig) -> list:
    groups: dict[tuple, int] = {}
    for pat, c in patterns.items():
        key = tuple(s for s, a in zip(sig, pat) if a)
        if key:
            groups[key] = groups.get(key, 0) + int(c)
    return [[list(key), c] for key, c in groups.items()]


def _per_sigmas(sig: list, make) -> list:
    """``[make(s_i) for s_i in sig]``, computed once per distinct tuple of σ's (trials with the
    same σ's share the value: it is read, never modified)."""
    done: dict = {}
    out = []
    for s_i in sig:
        v = done.get(s_i)
        if v is None:
            v = done[s_i] = make(s_i)
        out.append(v)
    return out


def _step_patterns(step_mat: np.ndarray) -> dict:
    """``{release pattern: number of steps}`` of a ``(steps, releases)`` schedule (``{}`` when
    empty); :func:`_types_of` turns it, with one trial's σ's, into that trial's whole-run step
    types ``[[σ's of the releases on the step], count]``."""
    if not step_mat.shape[0] or not step_mat.shape[1]:
        return {}
    return _row_counts(step_mat)


def _row_counts(mat: np.ndarray) -> dict:
    """``{row as a tuple of bools: count}`` of a boolean matrix.  A uniform schedule (every row
    the same: every release on every step, the common case) is counted in one vectorized
    comparison instead of ``np.unique``'s sort of the rows (O(T log T))."""
    first = mat[0]
    if bool(np.all(mat == first)):
        return {tuple(bool(a) for a in first): int(mat.shape[0])}
    r = mat.shape[1]
    if r <= 20:
        # each row as an integer, its first column the most significant bit: ascending codes are
        # np.unique(mat, axis=0)'s lexicographic order of the rows (the same dict, bit for bit),
        # counted in O(T) by bincount instead of a sort of the rows
        codes = mat.astype(np.int64) @ (np.int64(1) << np.arange(r - 1, -1, -1, dtype=np.int64))
        counts = np.bincount(codes, minlength=1 << r)
        return {tuple(bool((int(c) >> (r - 1 - j)) & 1) for j in range(r)): int(counts[c])
                for c in np.flatnonzero(counts)}
    pats, counts = np.unique(mat, axis=0, return_counts=True)
    return {tuple(bool(a) for a in p): int(c) for p, c in zip(pats, counts)}


def _tcdp_epsilon(record: dict, delta: float):
    """Each trial is ``(ρ_spent, ω_a)``-tCDP ([L2P] Thm B.1 with Lemma A.2); Theorem A.1 gives ε at
    the requested δ (any δ ∈ (0, 1)); ``ρ_spent = 0`` gives 0."""
    from ..privacy import tcdp

    rho = np.asarray(record["rho_spent"], dtype=float)
    om = np.broadcast_to(np.asarray(record["omega_a"], dtype=float), rho.shape)
    return np.asarray(tcdp.tcdp_to_dp(rho, om, float(delta)), dtype=float).reshape(rho.shape)


def epsilon_of_record(record: dict, delta: float, *, accountant: str = "pld"):
    """ε at ``delta`` of a run's privacy record (:func:`privacy_record`).

    ``inf`` for a non-private run.  Returns a float when every trial spent the same, else an
    ``(R,)`` array (per-trial noise multipliers or budgets).  A ctCDP record converts each trial's
    spend with [L2P] Thm A.1 (``accountant`` does not apply).
    """
    d = _check_delta(delta)
    if not record.get("private"):
        return math.inf
    if record.get("kind") == "ctcdp":
        out = _tcdp_epsilon(record, d)
    else:
        types = record["step_types"]
        unamp = record.get("unamplified")
        sampling, q = record["sampling"], record["sample_rate"]
        cyclic = "group_step_types" in record  # cyclic Poisson: each example sees its group's steps
        groups = record["group_step_types"] if cyclic else types
        if cyclic:
            q, sampling = record["group_rate"], "poisson"
        out = np.empty(len(types))
        frozen: dict = {}  # id of a trial's (shared) entry -> its hashable form
        memo: dict = {}    # trials with the same step types and unamplified σ's have the same ε
        for i, g in enumerate(groups):
            per_group = frozen.get(id(g))
            if per_group is None:
                per_group = frozen[id(g)] = tuple(
                    tuple((tuple(s), c) for s, c in st) for st in (g if cyclic else (g,)))
            un = tuple(unamp[i]) if unamp else ()
            key = (per_group, un)
            if key not in memo:
                memo[key] = max(
                    0.0 if not st and not un else
                    epsilon_from_releases(list(st), q, d, accountant=accountant,
                                          sampling=sampling, unamplified=un)
                    for st in per_group)
            out[i] = memo[key]
    if out.size and np.all(out == out.flat[0]):
        return float(out.flat[0])
    return out
