"""Helpers shared by the ``pagan_absreg`` figures ([PAGAN]): loading the saved results with their
metadata and recorded privacy, ε, legend texts, the statistics of medians (order-statistic
intervals, bootstrap ratios) and the grid-edge status of the tuned values.  Not a figure itself (no
``render``).

The primary output of every run is the *average iterate* ``x̄_t`` ([PAGAN] Algorithms 1–2 return
``x̄_T``), recorded by the experiment as the probe ``avg_excess_loss``; results saved before it
existed fall back to the last iterate (:attr:`Run.output` says which).
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
from scipy import stats as _st

import dpsim
from dpsim.experiments.pipeline import Saved

from dpsim.experiments import verdicts
from dpsim.experiments.pagan_absreg import AVG_PROBE

from . import style

DEFAULT_DELTA = 1e-5
N_BOOT = 4000
BOOT_SEED = 20210101

#: method → (legend name, colour, line style, marker)
METHOD_STYLE = {
    "sgd": ("SGD (non-private)", "0.55", "--", None),
    "adagrad": ("AdaGrad (non-private)", style.BASELINE_COLOR, "--", None),
    "pasan": ("PASAN, A = I", "#1f77b4", "-", "o"),
    "pagan": ("PAGAN, A = I", "#ff7f0e", "-", "s"),
    "pagan_opt": ("PAGAN, optimal A", "#d62728", "-", "D"),
    "pdp_sgd": ("PDP-SGD (public data)", "#2ca02c", "-", "^"),
}
PRIVATE = ("pasan", "pagan", "pagan_opt", "pdp_sgd")
BASELINES = ("pasan", "pagan", "pdp_sgd")


# ------------------------------------------------------------------------------------------------
# Loading


class Run:
    """One evaluation cell: its label, method, target ε, the Result and the recorded privacy."""

    def __init__(self, label, method, target_eps, result, privacy):
        self.label, self.method, self.target_eps = label, method, target_eps
        self.result, self.privacy = result, privacy

    @property
    def output(self) -> str:
        """``"average iterate"`` when the run recorded it, else ``"last iterate"``."""
        return "average iterate" if AVG_PROBE in self.result.records else "last iterate"

    @property
    def excess(self):
        """``(K, R)`` excess loss ``F(x̄_t) − F*`` of the average iterate (the algorithms' output;
        the last iterate for results without it)."""
        if AVG_PROBE in self.result.records:
            return np.asarray(self.result.records[AVG_PROBE], dtype=float)
        return self.last_excess

    @property
    def last_excess(self):
        """``(K, R)`` excess loss ``F(x_t) − F*`` of the last iterate."""
        ex = self.result.excess_loss
        if ex is None:
            raise ValueError(f"result {self.label!r} has no excess loss (problem without F*)")
        return ex

    @property
    def final(self):
        """Final excess loss of the output (average iterate) per trial (diverged trials → inf)."""
        f = np.asarray(self.excess[-1], dtype=float)
        return np.where(np.isfinite(f), f, np.inf)

    @property
    def final_last(self):
        """Final excess loss of the last iterate per trial (diverged trials → inf)."""
        f = np.asarray(self.last_excess[-1], dtype=float)
        return np.where(np.isfinite(f), f, np.inf)

    @property
    def hp(self):
        return self.result.config["hyperparameters"]


def load(results: Mapping[str, object]) -> dict:
    """``{"refs": {method: Run}, "private": {method: {ε: Run}}, "epsilons": [...], "delta": δ,
    "sampling": str, "f_star": float | None, "notes": dict}`` from the saved results, the metadata
    saved with each cell (method, target ε) and the manifest's notes."""
    saved = Saved.of(results)
    notes = saved.notes
    priv_notes = notes.get("privacy", {})
    delta = DEFAULT_DELTA
    for v in priv_notes.values():
        delta = float(v.get("delta", delta))
        break
    refs, private, eps_set, sampling = {}, {}, set(), None
    for label in saved:
        meta = saved.meta(label)
        method = meta["method"]
        if method not in METHOD_STYLE:
            continue
        res = saved.result(label)
        sampling = res.config.get("sampling", sampling)
        if meta["epsilon"] is None:
            refs[method] = Run(label, method, math.inf, res, None)
            continue
        eps = float(meta["epsilon"])
        eps_set.add(eps)
        private.setdefault(method, {})[eps] = Run(label, method, eps, res, priv_notes.get(label))
    if not private and not refs:
        raise ValueError(f"no pagan_absreg results among {sorted(saved)}")
    return {"refs": refs, "private": private, "epsilons": sorted(eps_set), "delta": delta,
            "sampling": sampling, "f_star": notes.get("f_star"), "notes": notes}


def epsilon_of(run: Run, delta: float) -> float:
    """ε spent by a private run: the value recorded in the manifest (PLD, Poisson sampling at the
    run's rate), else ``Result.epsilon``, else — for with-replacement runs, which no accountant
    covers — the Poisson-sampling ε of the same σ and rate."""
    if run.privacy and "epsilon" in run.privacy:
        return float(run.privacy["epsilon"])
    res = run.result
    try:
        return float(np.max(res.epsilon(delta)))
    except dpsim.accounting.UnsupportedAccountingError:
        p = res.privacy
        return float(dpsim.accounting.epsilon(float(np.max(res.config["hyperparameters"]["noise_multiplier"])),
                                              p["sample_rate"], res.config["steps"], delta))


def eps_note(data) -> str:
    """How ε was accounted, for legends and the report."""
    d = style.fmt_float(data["delta"])
    if data["sampling"] == "replacement":
        return (f"ε at δ = {d}: Poisson-sampling ε of the same σ and rate "
                "(batches drawn with replacement, as in the paper; no accountant covers that)")
    return f"ε at δ = {d} (PLD accountant, Poisson sampling)"


def output_of(data) -> str:
    """``"average iterate"`` when every run recorded it, else ``"last iterate"``."""
    runs = list(data["refs"].values()) + [r for by in data["private"].values() for r in by.values()]
    return ("average iterate" if runs and all(r.output == "average iterate" for r in runs)
            else "last iterate")


def edges(data, labels) -> dict:
    """``{"<label>: <axis>": value}`` of the tuned values of ``labels`` that sit on a grid edge
    (the saved selection's ``at_edge``), leaving out the one edge that is not real: with ``A = I``
    (PASAN, PAGAN) a radius B below every example's gradient norm ``||a_i||`` clips every example,
    and both step rules are invariant to a common scale of ĝ, so all such B give the same iterates
    — the smallest radius tried counts as an edge only when it is above the 1% quantile of the
    gradient norms (saved in the notes); likewise PDP-SGD's lr and clip edges when only their
    product matters (:func:`_product_inside`)."""
    sel = data["notes"].get("selection", {})
    q01 = data["notes"].get("grad_norm_quantiles", {}).get("0.01")
    out = {}
    for label in labels:
        s = sel.get(label)
        if s is None:
            continue
        method = label.split("-")[0]
        for axis in s["at_edge"]:
            v = s["point"][axis]
            if (axis == "radius" and method in ("pasan", "pagan") and q01 is not None
                    and v == min(s["grid"][axis]) and v <= q01):
                continue
            if method == "pdp_sgd" and axis in ("lr", "clip") and _product_inside(s, q01):
                continue
            out[f"{label}: {axis}"] = v
    return out


def _product_inside(sel: dict, q01) -> bool:
    """PDP-SGD's update ``α · P(Σ clip(g_i, C) + σCξ)/b`` depends on ``α·C`` alone when ``C``
    clips (nearly) every example (``C ≤`` the 1% quantile of the gradient norms): then an lr or
    clip edge is no edge as long as the chosen product lies strictly inside the range of products
    the grid offers with such clips."""
    if q01 is None or "clip" not in sel["grid"] or sel["point"]["clip"] > q01:
        return False
    prods = [lr * c for lr in sel["grid"]["lr"] for c in sel["grid"]["clip"] if c <= q01]
    p = sel["point"]["lr"] * sel["point"]["clip"]
    return min(prods) < p < max(prods)


def with_edges(category: str, data, labels=(), *, winners=(), losers=()) -> tuple[str, str]:
    """``(category, note)`` after :func:`experiments.verdicts.downgrade_for_edge` for the tuned
    values of the cells ``winners`` (the methods the claim says win) and ``losers`` (those it says
    lose): a *holds* is downgraded only for a loser's edge, a *does not hold* only for a winner's.
    ``labels`` (positional, legacy): cells whose side is unknown, which downgrade either."""
    return verdicts.downgrade_for_edge(category, edges(data, labels),
                                       winner_edges=edges(data, winners),
                                       loser_edges=edges(data, losers))


def hp_text(run: Run) -> str:
    hp = run.hp
    out = f"α={hp['lr']:g}"
    if run.method in ("pasan", "pagan", "pagan_opt"):
        out += f", B={hp['radius']:g}"
    elif run.method == "pdp_sgd":
        out += f", C={hp['clip']:g}, k={hp['k']}"
    return out


# ------------------------------------------------------------------------------------------------
# Statistics


def median_ci(x, axis: int = -1, level: float = 0.95):
    """Median and a distribution-free ``level`` confidence interval for it along ``axis``.

    Order statistics ``x_(k) ≤ median ≤ x_(R+1−k)`` with ``k`` the largest integer such that
    ``P(Bin(R, ½) < k) ≤ (1 − level)/2`` (coverage ≥ level); for very few trials (``k = 0``) the
    sample range, whose coverage ``1 − 2^{1−R}`` is then below ``level``.
    Returns ``(median, lo, hi)``.
    """
    x = np.sort(np.asarray(x, dtype=float), axis=axis)
    r = x.shape[axis]
    med = np.median(x, axis=axis)
    k = int(_st.binom.ppf((1 - level) / 2, r, 0.5))  # P(Bin ≤ k−1) ≤ α/2 for this k
    while k > 0 and _st.binom.cdf(k - 1, r, 0.5) > (1 - level) / 2:
        k -= 1
    lo_i, hi_i = max(k - 1, 0), min(r - k, r - 1)
    return med, np.take(x, lo_i, axis=axis), np.take(x, hi_i, axis=axis)


def _boot_medians(x, rng, n_boot=N_BOOT):
    x = np.asarray(x, dtype=float)
    idx = rng.integers(0, x.size, size=(n_boot, x.size))
    return np.median(x[idx], axis=1)


def boot_ratio(num, den, *, n_boot=N_BOOT, seed=BOOT_SEED, level=0.95):
    """``median(num)/median(den)`` with a percentile-bootstrap ``level`` CI (trials resampled
    independently in each group).  ``num``/``den`` may be lists of groups: then the ratio of the
    *minimum* median over the ``num`` groups (re-picked in every replicate).  Returns
    ``(ratio, lo, hi, replicates)``."""
    rng = np.random.default_rng(seed)
    nums = num if isinstance(num, list) else [num]
    point = min(float(np.median(g)) for g in nums) / float(np.median(den))
    bn = np.min([_boot_medians(g, rng, n_boot) for g in nums], axis=0)
    bd = _boot_medians(den, rng, n_boot)
    with np.errstate(divide="ignore", invalid="ignore"):
        reps = bn / bd
    lo, hi = np.nanquantile(reps, [(1 - level) / 2, (1 + level) / 2])
    return point, float(lo), float(hi), reps


def fmt_ratio(r, lo, hi) -> str:
    return f"{r:.2f}× [{lo:.2f}, {hi:.2f}]"
