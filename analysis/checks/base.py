"""What a check is: :class:`CheckResult` (one row of ``dpsim verify``), the :func:`check` registry
and :func:`verdict`.

A check is a function ``fn(scale: str, rng_seed: int) -> CheckResult | list[CheckResult]``
registered with ``@check(name, family)``.  The modules of :mod:`dpsim.analysis.checks` (one per
paper: [DP2], [PAGAN], [DESIGN], [L2P], [ADAMBC]) register their checks when imported;
:func:`dpsim.analysis.verify.run` imports them and runs what :func:`registered` returns.  The
bound modules never import this package.

Verdicts: ``"pass"``, ``"fail"``, or ``"reported"`` — a paper's printed number disagrees with its
own formula; the row says which one the code follows and does not fail the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

__all__ = ["CheckResult", "check", "registered", "verdict", "VERDICTS"]

VERDICTS = ("pass", "fail", "reported")


@dataclass
class CheckResult:
    """One row of the verification table.

    ``bound``: the theorem's value (or the paper's number); ``estimate``: what simulation or the
    oracle gives; ``ci``: half-width (or ``(lo, hi)``) of the estimate's confidence interval;
    ``relation``: how bound and estimate must compare (e.g. ``"estimate <= bound"``).
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

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


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
    """``"pass"`` when ``ok`` holds, else ``"fail"``."""
    return "pass" if ok else "fail"
