"""Shared helpers of the ``adambc`` figures ([ADAMBC]): loading, ε, Φ and the frozen moments.

Not a figure itself (no ``render``); the figure scripts ``fig_adambc_*.py`` import it.  Everything
here reads saved results only: the ``{label: path}`` of experiment ``adambc`` and the metadata it
saved with every cell (target ε and slot, see :mod:`experiments.adambc`).
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from dpsim.analysis import stats
from dpsim.analysis.concentration import dp_bias
from dpsim.experiments.pipeline import Saved

DELTA = 1e-5


PROBLEM_NAMES = {
    "main": "diagonal least squares",
    "regime": "in-regime sparse least squares",
    "real": "breast_cancer",
    "realraw": "breast_cancer, original units",
    "movielens": "MovieLens-small ridge",
}
"""Short names of the experiment's problems (``meta["problem"]``; cells without one are
``main``, as results written before the other problems existed)."""


def problem_of(meta: Mapping) -> str:
    """The problem of a cell from its saved metadata (``main`` when absent)."""
    return meta.get("problem", "main")


def load(results: Mapping[str, object], slots=None, problem: str = "main") -> dict:
    """``{ε target: {slot: Result}}`` (sorted by ε) of the cells of ``problem`` from the saved cell
    metadata; each Result is read once per :class:`~dpsim.experiments.pipeline.Saved` (the figures
    of one reproduction share it)."""
    saved = Saved.of(results)
    out: dict = {}
    for lab in saved:
        meta = saved.meta(lab)
        if meta.get("epsilon") is None or problem_of(meta) != problem:  # non-private: nonprivate()
            continue
        if slots is None or meta["slot"] in slots:
            out.setdefault(float(meta["epsilon"]), {})[meta["slot"]] = saved.result(lab)
    return dict(sorted(out.items()))


def nonprivate(results: Mapping[str, object], problem: str = "main") -> dict:
    """``{slot: Result}`` of the ε-independent non-private cells of ``problem`` (``np-sgd``,
    ``np-adam`` and their tuning cells); empty when the reproduction has none."""
    saved = Saved.of(results)
    return {saved.meta(lab)["slot"]: saved.result(lab) for lab in saved
            if saved.meta(lab).get("epsilon") is None and problem_of(saved.meta(lab)) == problem}


def sweep_meta(results: Mapping[str, object], slot: str) -> dict:
    """``{ε target: meta}`` of the cells of ``slot`` (e.g. ``"phi"``, ``"knobs"``) of the main
    problem."""
    saved = Saved.of(results)
    return {float(m["epsilon"]): m for m in map(saved.meta, saved)
            if m["slot"] == slot and m.get("epsilon") is not None and problem_of(m) == "main"}


def blocks(res, k: int) -> list[slice]:
    """The trial slices of a sweep cell whose trials are setting-major, ``k`` per setting."""
    if res.trials % k:
        raise ValueError(f"{res.trials} trials are not a whole number of blocks of {k}")
    return [slice(i * k, (i + 1) * k) for i in range(res.trials // k)]


def finals(res, sel=slice(None)) -> np.ndarray:
    """Final excess training loss per trial (diverged trials as +inf)."""
    x = np.asarray(res.excess_loss[-1], dtype=float)[sel]
    return np.where(np.isfinite(x), x, np.inf)


def lr_text(res, sel=slice(None)) -> str:
    """The learning rate of ``res`` (of its first trial in ``sel`` when per-trial)."""
    lr = np.broadcast_to(np.asarray(hp(res, "lr"), dtype=float), (res.trials,))[sel]
    return f"{float(lr[0]):g}"


HETEROGENEITY_MIN = 3.0
"""The first premise of [ADAMBC]'s headline claim: a per-coordinate preconditioner can only beat a
scalar step size when the coordinates' gradient scales differ.  Measured as the ratio of the 90th
to the 10th percentile over coordinates of the clean RMS gradient ``√v̂^c`` (the frozen clean run
at DP-Adam's trained point), per trial; the premise holds when the lower 95% CI end of its mean
exceeds this value, and fails when the upper end is below it.  (3 is this code's choice: a spread
under 3× is one a single learning rate absorbs within a factor of about √3 per coordinate.)"""

ADAM_GAIN_MIN = 2.0
"""The second premise (§5 "Discussion": DP-AdamBC should help where Adam beats SGD without
privacy): non-private Adam's mean final excess loss at the run length, each method tuned, is at most
``1/ADAM_GAIN_MIN`` of non-private SGD's ("clearly beats").  Decided by the Welch 95% CI of
``mean(SGD) − ADAM_GAIN_MIN · mean(Adam)``: holds when it lies above 0, fails when below 0.
(2 is this code's choice of "clearly".)"""


def heterogeneity(results) -> list[tuple]:
    """``[(ε, per-trial p90/p10 ratio of √v̂^c (R,), sorted per-coordinate RMS (d,))]`` from the
    frozen clean runs at the last recorded step."""
    data = load(results, ("frozen-private", "frozen-clean"))
    out = []
    for eps, d in data.items():
        if "frozen-private" not in d or "frozen-clean" not in d:
            continue
        vc = frozen_moments(d["frozen-private"], d["frozen-clean"])["vc"][-1]  # (R, d)
        rms = np.sqrt(np.maximum(vc, 0.0))
        ratio = np.quantile(rms, 0.9, axis=1) / np.maximum(np.quantile(rms, 0.1, axis=1),
                                                          np.finfo(float).tiny)
        out.append((eps, ratio, np.sort(rms.mean(axis=0))[::-1]))
    return out


def premise(results) -> tuple[bool | None, str]:
    """``(ok, report line)`` of both premises (:data:`HETEROGENEITY_MIN`, :data:`ADAM_GAIN_MIN`):
    ``False`` when either fails, ``True`` when both hold, ``None`` otherwise (undecided or not
    measured)."""
    from dpsim.analysis import stats

    parts, oks = [], []
    het = heterogeneity(results)
    if het:
        rows = [(e, *stats.mean_ci(r)) for e, r, _ in het]
        lo = min(m - h for _, m, h in rows)
        hi = max(m + h for _, m, h in rows)
        ok = True if lo > HETEROGENEITY_MIN else False if hi < HETEROGENEITY_MIN else None
        parts.append("coordinate-scale heterogeneity (p90/p10 of the clean per-coordinate RMS "
                     "gradient √v̂^c at DP-Adam's trained point, mean ± 95% CI over trials; needs > "
                     f"{HETEROGENEITY_MIN:g}): "
                     + "; ".join(f"ε={e:g}: {stats.fmt_ci(m, h)}" for e, m, h in rows)
                     + f" — {_word(ok)}")
    else:
        ok = None
        parts.append("coordinate-scale heterogeneity: not measured (no frozen runs)")
    oks.append(ok)
    npv = nonprivate(results)
    if "np-sgd" in npv and "np-adam" in npv:
        s, a = finals(npv["np-sgd"]), finals(npv["np-adam"])
        _, lo, hi = stats.diff_ci(s, ADAM_GAIN_MIN * a)
        ok = True if lo > 0 else False if hi < 0 else None
        T = npv["np-adam"].config["steps"]
        parts.append(f"non-private Adam vs SGD at T = {T}, each tuned (η = {lr_text(npv['np-adam'])}"
                     f", {lr_text(npv['np-sgd'])}): final excess loss Adam "
                     f"{stats.fmt_ci(*stats.mean_ci(a))}, SGD {stats.fmt_ci(*stats.mean_ci(s))}, "
                     f"SGD/Adam = {np.mean(s) / np.mean(a):.3g} (needs > {ADAM_GAIN_MIN:g}: Welch "
                     f"95% CI of mean(SGD) − {ADAM_GAIN_MIN:g}·mean(Adam) = [{lo:.2e}, {hi:.2e}]) — "
                     f"{_word(ok)}")
    else:
        ok = None
        parts.append("non-private Adam vs SGD: not measured (no non-private runs)")
    oks.append(ok)
    total = False if False in oks else True if all(o is True for o in oks) else None
    word = {True: "premise holds", False: "premise fails: the setting does not test the claim",
            None: "premise not established: at most inconclusive"}[total]
    return total, "**Premise** — " + "; ".join(parts) + f". **{word}**."


def _word(ok):
    return {True: "holds", False: "fails", None: "undecided"}[ok]


def adam_vs_sgd(npv: Mapping, *, metric: str = "excess_loss") -> tuple[bool | None, str]:
    """``(ok, text)`` of the premise "non-private Adam clearly beats non-private SGD" on the
    non-private cells ``npv`` of one problem (:func:`nonprivate`), as in :func:`premise`
    (:data:`ADAM_GAIN_MIN`, Welch CI), on the final training excess loss; the held-out loss is
    quoted beside when recorded.  ``ok`` is ``None`` when the cells are missing or undecided."""
    if "np-sgd" not in npv or "np-adam" not in npv:
        return None, "non-private Adam vs SGD: not measured"
    s, a = finals(npv["np-sgd"]), finals(npv["np-adam"])
    _, lo, hi = stats.diff_ci(s, ADAM_GAIN_MIN * a)
    ok = True if lo > 0 else False if hi < 0 else None
    T = npv["np-adam"].config["steps"]
    held = ""
    if npv["np-adam"].test_loss is not None and npv["np-sgd"].test_loss is not None:
        ta, ts = (np.asarray(npv[k].test_loss, dtype=float)[-1] for k in ("np-adam", "np-sgd"))
        held = (f"; held-out loss Adam {stats.fmt_ci(*stats.mean_ci(ta))}, SGD "
                f"{stats.fmt_ci(*stats.mean_ci(ts))}")
    if npv["np-adam"].test_accuracy is not None and npv["np-sgd"].test_accuracy is not None:
        ta, ts = (np.asarray(npv[k].test_accuracy, dtype=float)[-1] for k in ("np-adam", "np-sgd"))
        held += (f"; held-out accuracy Adam {stats.fmt_ci(*stats.mean_ci(ta))}, SGD "
                 f"{stats.fmt_ci(*stats.mean_ci(ts))}")
    text = (f"non-private Adam vs SGD at T = {T}, each tuned (η = {lr_text(npv['np-adam'])}, "
            f"{lr_text(npv['np-sgd'])}): final excess loss Adam {stats.fmt_ci(*stats.mean_ci(a))}, "
            f"SGD {stats.fmt_ci(*stats.mean_ci(s))}, SGD/Adam = {np.mean(s) / np.mean(a):.3g} "
            f"(needs > {ADAM_GAIN_MIN:g}: Welch 95% CI of mean(SGD) − {ADAM_GAIN_MIN:g}·mean(Adam) "
            f"= [{lo:.2e}, {hi:.2e}]){held} — {_word(ok)}")
    return ok, text


def gamma_sweep(results: Mapping[str, object]) -> dict:
    """``{ε target: meta}`` of the γ' sweep cells (``gamma_ratios``, ``trials_per_ratio``)."""
    return sweep_meta(results, "gamma")


def need(data: dict, slots, name: str) -> dict:
    """``data`` restricted to the ε that have every slot in ``slots``; ``ValueError`` if none."""
    keep = {e: d for e, d in data.items() if all(s in d for s in slots)}
    if not keep:
        raise ValueError(f"{name}: no ε with results {', '.join(slots)} among {sorted(data)}")
    return keep


def hp(res, name):
    return res.config["hyperparameters"][name]


def phi(res) -> float:
    """``Φ = (σC/B)²`` of a private result ([ADAMBC] Eq. 2)."""
    return float(dp_bias(float(hp(res, "noise_multiplier")), float(hp(res, "clip")),
                         res.config["batch_size"]))


def epsilon(res, delta: float = DELTA) -> float:
    """ε at ``delta`` of a private result (the accountant caches repeated questions)."""
    return float(np.max(res.epsilon(delta)))


def eps_text(res, delta: float = DELTA) -> str:
    e = epsilon(res, delta)
    return "∞" if math.isinf(e) else f"{e:.2g}"


def probed_coords(res) -> list[int]:
    """The coordinates ``j`` whose moments a frozen run recorded (records ``m{j}``, ``v{j}``):
    every coordinate on the main problem, a uniform sample on the in-regime one."""
    return sorted(int(k[1:]) for k in res.records if k[:1] == "m" and k[1:].isdigit()
                  and f"v{k[1:]}" in res.records)


def frozen_moments(private, clean) -> dict:
    """Bias-corrected moments of the frozen runs: ``steps`` (K,) without step 0 and arrays
    ``mp, vp, mc, vc`` of shape (K, R, c) over the ``c`` probed coordinates (private, clean),
    ``phi`` and the betas."""
    b1, b2 = float(hp(private, "beta1")), float(hp(private, "beta2"))
    coords = probed_coords(private)
    if not coords:
        raise ValueError("the frozen run recorded no moments (no m{j}/v{j} probes)")
    steps = np.asarray(private.steps)
    if not np.array_equal(steps, np.asarray(clean.steps)):
        raise ValueError("frozen-private and frozen-clean were recorded at different steps")
    keep = steps > 0
    t = steps[keep].astype(float)[:, None, None]

    def stack(res, name):
        return np.stack([np.asarray(res.records[f"{name}{j}"])[keep] for j in coords], axis=-1)

    return {
        "steps": steps[keep], "phi": phi(private), "beta1": b1, "beta2": b2, "coords": coords,
        "mp": stack(private, "m") / (1.0 - b1 ** t), "vp": stack(private, "v") / (1.0 - b2 ** t),
        "mc": stack(clean, "m") / (1.0 - b1 ** t), "vc": stack(clean, "v") / (1.0 - b2 ** t),
    }


PAPER_GAMMA_RATIO = 3e-10 / 2.441e-8
"""γ'/Φ of the paper's Table 2 and Fig. 4 (middle): ``γ' = 3e-10`` at ``Φ ≈ 2.441e-8`` (SNLI), the
floor with which the figures form ``v̂^corr = max(v̂^p − Φ, γ')`` from the frozen moments (the
tuned γ' of DP-AdamBC is reported beside it)."""


def problems_with(results, slots) -> dict:
    """``{problem: {ε: {slot: Result}}}`` over the problems (main first, then the in-regime one)
    that have every slot in ``slots`` at some ε."""
    out = {}
    for prob in ("main", "regime"):
        data = load(results, slots, prob)
        keep = {e: d for e, d in data.items() if all(s in d for s in slots)}
        if keep:
            out[prob] = keep
    return out


REGIME_RATIO = 100.0
"""The paper's regime for its Figs. 1 and 4 (§3 "typical DP parameters"; SNLI's Table 2 has
``v̂^c ≈ 4e-13`` against ``Φ ≈ 2.4e-8`` on the median coordinate): ``Φ/v̂^c ≫ 10²`` on most
coordinates.  Measured on the frozen clean run at DP-Adam's trained point, last step, pooled over
trials × (probed) coordinates: the median of ``Φ/v̂^c`` with a 95% bootstrap CI over trials; the
regime holds when the lower CI end exceeds this value, fails when the upper end is below it."""

EQ3_SHARE = 0.75
"""The premise of Eq. 3 (DP-Adam ≈ DP-SGDM at ``η(1−β1)/√Φ``), which replaces DP-Adam's
denominator ``√(Φ + v̂^c)`` by ``√Φ``: ``Φ`` must dominate the private second moment, here
``Φ/mean v̂^p ≥ 3/4`` (mean over coordinates, per trial; lower 95% CI end over trials), so that
ignoring ``v̂^c`` changes the denominator by at most ``√(4/3) ≈ 1.15``, inside the 0.8–1.25
equivalence margin of the test.  Fails when the upper CI end is below it."""


def regime_stats(private, clean) -> dict:
    """Premise numbers of one (problem, ε) from its frozen runs at the last recorded step:
    ``ratio`` (R, c) = ``Φ/v̂^c`` per trial and probed coordinate (``inf`` where ``v̂^c = 0``),
    its quantiles ``q`` (10, 25, 50, 75, 90 %), ``median`` with a bootstrap CI (``median_lo``,
    ``median_hi``), ``frac100`` (share of trial × coordinate pairs above
    :data:`REGIME_RATIO`), ``share`` / ``share_h`` (mean ± 95% CI over trials of
    ``Φ/mean v̂^p``), and the two premise outcomes ``regime`` (:data:`REGIME_RATIO`) and ``eq3``
    (:data:`EQ3_SHARE`) as ``True`` / ``False`` / ``None`` (undecided)."""
    mom = frozen_moments(private, clean)
    ph = mom["phi"]
    vc, vp = mom["vc"][-1], mom["vp"][-1]
    with np.errstate(divide="ignore"):
        ratio = np.where(vc > 0, ph / np.where(vc > 0, vc, 1.0), np.inf)
    finite = np.where(np.isfinite(ratio), ratio, np.finfo(float).max)
    med, lo, hi = bootstrap_quantile(finite, 0.5, n_boot=200, seed=1)
    share_t = ph / vp.mean(axis=1)
    sm, sh = stats.mean_ci(share_t)
    sh = 0.0 if not np.isfinite(sh) else float(sh)
    regime = True if lo > REGIME_RATIO else False if hi < REGIME_RATIO else None
    eq3 = True if sm - sh >= EQ3_SHARE else False if sm + sh < EQ3_SHARE else None
    return dict(ratio=ratio, q=np.quantile(finite, [0.1, 0.25, 0.5, 0.75, 0.9]), median=med,
                median_lo=lo, median_hi=hi, frac100=float(np.mean(ratio > REGIME_RATIO)),
                share=float(sm), share_h=sh, regime=regime, eq3=eq3, phi=ph,
                t=int(mom["steps"][-1]), coords=len(mom["coords"]))


def ratio_text(st: dict) -> str:
    """One line of the Φ/v̂^c premise numbers of :func:`regime_stats`."""
    q = st["q"]
    return (f"Φ/v̂^c quantiles 10/25/50/75/90 % = {fmt(q[0])} / {fmt(q[1])} / {fmt(q[2])} / "
            f"{fmt(q[3])} / {fmt(q[4])} (median 95% CI [{fmt(st['median_lo'])}, "
            f"{fmt(st['median_hi'])}]), {100 * st['frac100']:.0f}% of coordinates above "
            f"{REGIME_RATIO:g}; Φ/mean v̂^p = {st['share']:.3f} ± {st['share_h']:.3f}")


def word(ok) -> str:
    """``holds`` / ``fails`` / ``undecided`` for ``True`` / ``False`` / ``None``."""
    return {True: "holds", False: "fails", None: "undecided"}[ok]


def problem_label(res) -> str:
    """``"<problem name> (d = …, B = …)"`` of a result."""
    prob = res.config["problem"]
    name = prob.get("dataset") or prob.get("name", "?")
    nice = {"least_squares": "diagonal least squares", "adambc_regime": "in-regime sparse LS"}
    return f"{nice.get(name, name)} (d = {prob['d']}, B = {res.config['batch_size']})"


def bootstrap_quantile(x, q: float, *, level: float = 0.95, n_boot: int = 400, seed: int = 0):
    """``q``-quantile of ``x`` (shape (R, ...), pooled) and a percentile-bootstrap CI that
    resamples the R trials (the independent units; coordinates of a trial share batches)."""
    x = np.asarray(x, dtype=float)
    R = x.shape[0]
    flat = x.reshape(R, -1)
    est = float(np.quantile(flat, q))
    rng = np.random.default_rng(seed)
    boots = np.array([np.quantile(flat[rng.integers(0, R, R)], q) for _ in range(n_boot)])
    lo, hi = np.quantile(boots, [0.5 - level / 2, 0.5 + level / 2])
    return est, float(lo), float(hi)


def fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}" if abs(x) >= 1e-3 and abs(x) < 1e4 else f"{x:.{digits - 1}e}"


def plain_log_ticks(ax) -> None:
    """No labels on the minor ticks of log axes (they collide on short decades)."""
    from matplotlib.ticker import NullFormatter

    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log":
            axis.set_minor_formatter(NullFormatter())


def sweep_blocks(results, slot: str) -> dict:
    """``{ε: (Result, meta, [trial slice per setting])}`` of the sweep cells of ``slot``
    (``"phi"``: per Φ'/Φ; ``"knobs"``: per DP-Adam setting; ``"gamma"``: per γ'/Φ)."""
    metas = sweep_meta(results, slot)
    data = load(results, (slot,))
    out = {}
    for eps, m in metas.items():
        res = data[eps][slot]
        k = int(m.get("trials_per_ratio") or m.get("trials_per_setting"))
        out[eps] = (res, m, blocks(res, k))
    return out


def lr_edges(results, key: str, lrs: Mapping[str, float]) -> dict:
    """``{name: lr}`` of the per-setting tuned learning rates ``lrs`` that sit on an edge of the
    ``lr`` axis of the sweep selection ``notes["sweep_selection"][key]`` (none saved: ``{}``)."""
    sel = Saved.of(results).notes.get("sweep_selection", {}).get(key)
    if not sel:
        return {}
    grid = [float(v) for v in sel["grid"]["lr"]]
    if len(grid) < 2:
        return {}
    return {n: v for n, v in lrs.items() if float(v) in (min(grid), max(grid))}


def selection_edges(results, keys) -> dict:
    """``{"<name>.<axis>": value}`` of the tuned choices that sit on an edge of their grid, read
    from the saved selections (``at_edge``, ``point``).  ``keys`` maps each name to the label of
    its selection (a plain iterable of labels names each by its own label), in the order of the
    result; a label with no saved selection is skipped."""
    saved = Saved.of(results)
    if not isinstance(keys, Mapping):
        keys = {k: k for k in keys}
    out = {}
    for name, key in keys.items():
        try:
            sel = saved.selection(key)
        except KeyError:
            continue
        for axis in sel.get("at_edge", []):
            out[f"{name}.{axis}"] = sel["point"][axis]
    return out


def paired_finals(a, b):
    """``(mean_a, half_a, mean_b, half_b, diff, half_diff)``: the mean and 95% CI half-width of the
    final excess losses of ``a`` and of ``b`` (as recorded, one per trial) and of their per-trial
    difference ``b − a`` (the runs share batches and noise, so the pairs are the units)."""
    fa, fb = a.excess_loss[-1], b.excess_loss[-1]
    ma, ha = stats.mean_ci(fa)
    mb, hb = stats.mean_ci(fb)
    dm, dh = map(float, stats.mean_ci(fb - fa))
    return ma, ha, mb, hb, dm, dh


def comparison_category(results, cats, keys, premises, *, no_cats_note: str) -> tuple[str, str, str]:
    """The verdict of a DP-AdamBC vs DP-Adam comparison judged against its premises.

    ``cats`` are the per-ε categories (:mod:`dpsim.experiments.verdicts`) of the ε values that are
    judged, ``keys`` their result keys (``"<key>-adambc"`` is the winner's tuning, ``"<key>-adam"``
    the loser's; a tuned choice on a grid edge downgrades the verdict by its direction,
    :func:`dpsim.experiments.verdicts.downgrade_for_edge`).  ``premises`` lists
    ``(reason it fails, ok)`` with ``ok`` True / False / None: any False makes the setting one that
    does not test the claim, any None (premise not established) caps a holds/fails at inconclusive.
    Returns ``(category, head, note)``: ``head`` is the "Category: ..." sentence, ``note`` the
    grid-edge remark (``no_cats_note`` when nothing was judged)."""
    from dpsim.experiments import verdicts as verdicts_mod

    from . import style

    if cats:
        measured, note = verdicts_mod.downgrade_for_edge(
            style.combine(cats),
            winner_edges=selection_edges(results, [f"{k}-adambc" for k in keys]),
            loser_edges=selection_edges(results, [f"{k}-adam" for k in keys]))
    else:
        measured, note = verdicts_mod.UNTESTED, no_cats_note
    oks = [ok for _, ok in premises]
    if False in oks:
        category = verdicts_mod.UNTESTED
        why = "; ".join(w for w, ok in premises if ok is False)
        head = f"Category: {category} ({why}; the private comparison reads {measured})"
    elif None in oks and measured in (verdicts_mod.HOLDS, verdicts_mod.FAILS):
        category = verdicts_mod.INCONCLUSIVE
        head = f"Category: {category} (premise not established; the comparison reads {measured})"
    else:
        category = measured
        head = f"Category: {category}"
    return category, head, note


def plot_nonprivate(ax, npv: Mapping, colors: Mapping, names: Mapping, *, title: str,
                    suffix: str = "") -> None:
    """Premise panel: mean excess training loss of the non-private SGD and Adam references (the
    ``np-sgd`` / ``np-adam`` slots of ``npv``, as :func:`nonprivate` loads them), log scale."""
    from . import style

    for slot in ("np-sgd", "np-adam"):
        if slot in npv:
            res = npv[slot]
            style.mean_curve(ax, res.steps, res.excess_loss, colors[slot],
                             label=f"{names[slot]}{suffix}, η = {lr_text(res)}")
    ax.set_yscale("log")
    ax.set_xlabel("step t")
    ax.set_ylabel(r"mean excess training loss $F(w_t)-F^\star$")
    ax.set_title(title, fontsize=8)
    ax.legend(loc="upper right", fontsize=6)
