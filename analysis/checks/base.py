"""What a check is: :class:`CheckResult` (one row of ``dpsim verify``), the :func:`check` registry
and :func:`verdict`.

A check is a function ``fn(scale: str, rng_seed: int) -> CheckResult | list[CheckResult]``
registered with ``@check(name, family)``.  The modules of :mod:`dpsim.analysis.checks` (one per
paper: [DP2], [PAGAN], [DESIGN], [L2P], [ADAMBC]) register their checks when imported;
:func:`dpsim.analysis.verify.run` imports them and runs what :func:`registered` returns.  The
bound modules never import this package.

Verdicts (the row's *kind*), always computed from the numbers:

* ``"pass"``: the bound holds **and** the row would fail against the bound made twice as strong
  (an upper bound scaled by 1/2, a lower bound by 2, a predicted value by 1/2 and by 2): the row
  can catch a factor-2 error;
* ``"sanity"``: the bound holds but the instance is too loose to catch a factor 2 (the row says why);
* ``"reported"``: a paper disagrees with itself or with the numbers, and the numbers show the
  disagreement the code documents; if they stop showing it, the row fails;
* ``"vacuous"``: a headline theorem whose admissible parameter space was searched (the search is
  printed in the row) and no instance brings the simulated quantity within a factor 2 of the bound:
  the row says the best ratio found and where; the bound still must hold there, else "fail";
* ``"not covered"``: a result of the five papers that dpsim does not check, with the reason (so no
  result is missing silently); such a row has no numbers;
* ``"fail"``: the bound is violated, a printed number is not reproduced, or a documented
  disagreement no longer reproduces.

Rows are built with :func:`upper`, :func:`lower`, :func:`equal`, :func:`predicate`, :func:`printed`
or :func:`disagreement`; each keeps the comparison as a function ``holds(f)`` of a factor ``f`` on
the theorem's value, so :meth:`CheckResult.strengthened` re-runs the very same comparison against
the scaled bound, and ``margin`` says by what factor the bound could be off without the row noticing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Callable

__all__ = ["CheckResult", "check", "registered", "verdict", "VERDICTS", "upper", "lower", "equal",
           "predicate", "printed", "disagreement", "printed_tolerance", "agrees_as_printed", "vacuous",
           "not_covered"]

VERDICTS = ("pass", "sanity", "reported", "vacuous", "not covered", "fail")


@dataclass
class CheckResult:
    """One row of the verification table.

    ``bound``: the theorem's value (or the paper's number); ``estimate``: what simulation or the
    oracle gives; ``ci``: half-width (or ``(lo, hi)``) of the estimate's confidence interval;
    ``relation``: how bound and estimate must compare (e.g. ``"estimate <= bound"``);
    ``margin``: the factor by which the theorem's value could be off (in the direction the row
    tests) and the row still hold — below 2 the row catches a factor 2; ``holds(f)``: the row's
    comparison with the theorem's value multiplied by ``f``; ``stronger``: the factors at which a
    "pass" row must fail.
    """

    check: str
    source: str
    family: str
    bound: float
    estimate: float
    ci: object = None
    relation: str = ""
    verdict: str = "pass"
    detail: str = ""
    seconds: float = field(default=float("nan"))
    margin: float = float("nan")
    holds: Callable | None = field(default=None, repr=False, compare=False)
    stronger: tuple = ()

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")

    def strengthened(self) -> str | None:
        """The verdict against the bound made twice as strong (``"fail"`` when the row catches
        it, ``"pass"`` when it does not); ``None`` for rows without a scalable bound."""
        if self.holds is None or not self.stronger:
            return None
        return "pass" if any(self.holds(f) for f in self.stronger) else "fail"

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("check", "source", "family", "bound", "estimate", "ci",
                                           "relation", "verdict", "margin", "detail", "seconds")}
        d["half_strength"] = self.strengthened()
        return d


_CHECKS: dict[str, tuple[str, Callable]] = {}


def check(name: str, family: str):
    """Register ``fn(scale, seed) -> CheckResult | list[CheckResult]`` under ``name``."""

    def deco(fn):
        _CHECKS[name] = (family, fn)
        return fn

    return deco


def registered() -> dict[str, tuple[str, Callable]]:
    """``{name: (family, fn)}`` of the checks registered so far (a copy)."""
    return dict(_CHECKS)


def verdict(ok) -> str:
    """``"pass"`` when ``ok`` holds, else ``"fail"`` (for rows without a scalable bound)."""
    return "pass" if ok else "fail"


def _kind(holds, stronger, why_loose=""):
    if not holds(1.0):
        return "fail"
    if stronger and not any(holds(f) for f in stronger):
        return "pass"
    return "sanity"


def _row(check_, source, family, bound, estimate, ci, relation, detail, holds, stronger, margin,
         why_loose=""):
    kind = _kind(holds, stronger)
    if kind == "sanity" and why_loose:
        detail = (detail + " " if detail else "") + f"Sanity only: {why_loose}"
    return CheckResult(check=check_, source=source, family=family, bound=float(bound),
                       estimate=float(estimate), ci=ci, relation=relation, verdict=kind,
                       detail=detail, margin=float(margin), holds=holds, stronger=tuple(stronger))


def _ratio(a, b):
    a, b = float(a), float(b)
    if b == 0:
        return math.inf if a > 0 else (1.0 if a == 0 else 0.0)
    return a / b


def upper(check_, source, family, bound, estimate, *, hi=None, ci=None, relation="estimate <= bound",
          detail="", why_loose=""):
    """Row for an upper bound: holds when ``hi`` (the CI's upper end; default ``estimate``) is
    ``<= bound``; must fail against ``bound/2``.  ``margin = bound/hi``."""
    hi = float(estimate if hi is None else hi)
    b = float(bound)
    return _row(check_, source, family, b, estimate, ci, relation, detail,
                lambda f: hi <= f * b, (0.5,), _ratio(b, hi), why_loose)


def lower(check_, source, family, bound, estimate, *, lo=None, ci=None, relation="bound <= estimate",
          detail="", why_loose=""):
    """Row for a lower bound: holds when ``bound <= lo`` (the CI's lower end; default
    ``estimate``); must fail against ``2·bound``.  ``margin = lo/bound``."""
    lo = float(estimate if lo is None else lo)
    b = float(bound)
    return _row(check_, source, family, b, estimate, ci, relation, detail,
                lambda f: f * b <= lo, (2.0,), _ratio(lo, b), why_loose)


def equal(check_, source, family, bound, estimate, *, lo, hi, ci=None,
          relation="bound in CI(estimate)", detail="", why_loose=""):
    """Row for a predicted value: holds when ``lo <= bound <= hi``; must fail against ``bound/2``
    and ``2·bound``.  ``margin = max(hi/bound, bound/lo)``."""
    b, lo, hi = float(bound), float(lo), float(hi)
    margin = max(_ratio(hi, b), _ratio(b, lo)) if b > 0 else math.inf
    return _row(check_, source, family, b, estimate, ci, relation, detail,
                lambda f: lo <= f * b <= hi, (0.5, 2.0), margin, why_loose)


def predicate(check_, source, family, bound, estimate, *, holds, margin, stronger=(0.5,), ci=None,
              relation="", detail="", why_loose=""):
    """Row whose comparison is ``holds(f)`` (``f`` multiplies the theorem's value); ``stronger``:
    the factors at which it must fail to be a "pass" (empty: a "sanity" row at best)."""
    return _row(check_, source, family, bound, estimate, ci, relation, detail, holds, stronger,
                margin, why_loose)


def printed_tolerance(printed_value: str) -> float:
    """Half a unit in the last printed digit: ``"6.4"`` → 0.05, ``"0.026"`` → 5e-4,
    ``"1.005e-06"`` → 5e-10 (the paper's own printed precision)."""
    dec = Decimal(str(printed_value).strip())
    return 0.5 * 10.0 ** dec.as_tuple().exponent


def agrees_as_printed(printed_value: str, computed) -> bool:
    """Whether ``computed`` rounds to the printed number at its printed precision (with a 1e-9
    relative slack for binary floating point)."""
    p = float(printed_value)
    return abs(float(computed) - p) <= printed_tolerance(printed_value) * (1 + 1e-9) + 1e-12 * abs(p)


def printed(check_, source, family, printed_value, computed, *, expect="agree", relation="",
            detail=""):
    """Row comparing a paper's printed number (a string, as printed: ``"6.4"``, ``"1.005e-06"``)
    with the code's value at the printed precision.  ``expect="agree"``: pass when they agree,
    fail otherwise; ``expect="disagree"`` (a disagreement the code documents): "reported" when they
    disagree, fail when they agree (the documented disagreement no longer reproduces)."""
    if expect not in ("agree", "disagree"):
        raise ValueError(f"expect must be 'agree' or 'disagree', got {expect!r}")
    pv = str(printed_value)
    tol = printed_tolerance(pv)
    agree = agrees_as_printed(pv, computed)
    relation = relation or f"{computed:.6g} rounds to the printed {pv} (±{tol:.1g})"
    c = float(computed)

    def holds(f):
        return agrees_as_printed(pv, f * c)

    if expect == "agree":
        kind = "pass" if agree else "fail"
    else:
        kind = "reported" if not agree else "fail"
        if agree:
            detail = (detail + " " if detail else "") + \
                "The documented disagreement no longer reproduces: the printed value agrees."
    return CheckResult(check=check_, source=source, family=family, bound=float(pv), estimate=c,
                       relation=relation, verdict=kind, detail=detail,
                       margin=1.0 + tol / abs(float(pv)) if float(pv) else math.inf,
                       holds=holds if expect == "agree" else None,
                       stronger=(0.5, 2.0) if expect == "agree" else ())


def disagreement(check_, source, family, bound, estimate, *, observed: bool, ci=None, relation="",
                 detail=""):
    """Row documenting a disagreement the code follows one side of: "reported" when the numbers
    show it (``observed``, computed by the caller from ``bound`` and ``estimate``), "fail" when
    they no longer do."""
    if not observed:
        detail = (detail + " " if detail else "") + "The documented disagreement is not observed."
    return CheckResult(check=check_, source=source, family=family, bound=float(bound),
                       estimate=float(estimate), ci=ci, relation=relation,
                       verdict="reported" if observed else "fail", detail=detail)


def vacuous(row: CheckResult, *, search: str, best_ratio: float) -> CheckResult:
    """Re-label a holding row of a headline theorem as ``"vacuous"``: the admissible parameter
    space was searched as ``search`` describes (what was varied, over which ranges, how many
    instances) and the smallest ratio bound/quantity found was ``best_ratio`` (≥ 2, so no
    instance could catch a factor-2 error).  ``row`` is the row at that best instance, built by
    :func:`upper`/:func:`lower`/...; a row that fails stays ``"fail"``, and a row tight enough
    to be a ``"pass"`` stays ``"pass"`` (the label is computed, never asserted)."""
    if row.verdict != "sanity":
        return row
    row.verdict = "vacuous"
    row.detail = row.detail.replace("Sanity only: ", "Loose: ")
    note = f"Vacuous: searched {search}; the tightest instance found has bound/quantity {best_ratio:.3g}."
    row.detail = (row.detail + " " if row.detail else "") + note
    return row


def not_covered(check_, source, family, *, reason: str) -> CheckResult:
    """A row for a result of the papers that dpsim does not check, and why (``reason``); its
    numbers are NaN and it has no scalable bound."""
    if not reason:
        raise ValueError("not_covered needs a reason")
    return CheckResult(check=check_, source=source, family=family, bound=math.nan,
                       estimate=math.nan, relation="not checked", verdict="not covered",
                       detail=reason)
