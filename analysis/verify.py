"""``dpsim verify``: every bound of the papers against simulation or an independent oracle.

A check is a function ``fn(scale: str, rng_seed: int) -> CheckResult | list[CheckResult]``
registered with :func:`dpsim.analysis.checks.base.check` in one module per paper
(:data:`MODULES`).  :func:`run` imports those modules, runs every check, prints a table (check,
source, bound, simulated estimate ± CI, verdict), writes ``verify.md`` and ``verify.json``, and
returns a non-zero exit code when a check fails.  :func:`register` adds the ``verify`` command to
``dpsim``'s command line (entry point group ``dpsim.commands``).

Verdicts (kinds, computed from the numbers, see :mod:`dpsim.analysis.checks.base`): ``"pass"``
(the bound holds and the row fails against the bound made twice as strong), ``"sanity"`` (holds,
but the instance cannot catch a factor 2), ``"reported"`` (a documented paper disagreement, shown
by the numbers) and ``"fail"``.  Each row prints its ``margin`` (the factor the bound could be off
undetected) and its verdict against the half-strength bound (``½-bound``).
"""

from __future__ import annotations

import importlib
import json
import math
import time
from pathlib import Path

from dpsim.analysis.checks import base as _base
from dpsim.analysis.checks.base import CheckResult, check

__all__ = ["CheckResult", "check", "run", "registered", "register", "MODULES", "SCALES"]

SCALES = ("quick", "full")
#: The check modules, one per paper; importing one registers its checks.
MODULES = tuple(f"dpsim.analysis.checks.{key}" for key in ("l2p", "adambc", "dp2", "pagan", "design"))


def registered() -> dict:
    """``{name: (family, fn)}`` of every check of :data:`MODULES`, in their order."""
    for m in MODULES:
        importlib.import_module(m)
    return _base.registered()


def _fmt(x) -> str:
    if x is None:
        return ""
    if isinstance(x, (tuple, list)):
        return "[" + ", ".join(_fmt(v) for v in x) + "]"
    try:
        x = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.4g}"


def run(scale: str = "quick", out_dir=None, *, seed: int = 0, only=None, echo=print) -> int:
    """Run every registered check; write ``verify.md``/``verify.json`` to ``out_dir``.

    Returns 0 when no check failed, 1 otherwise.
    """
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {', '.join(SCALES)}")
    checks = registered()
    if only:
        unknown = [o for o in only if o not in checks]
        if unknown:
            raise KeyError(f"unknown check {unknown[0]!r}; known: {', '.join(sorted(checks))}")
        checks = {k: v for k, v in checks.items() if k in only}
    rows: list[CheckResult] = []
    try:
        from tqdm.auto import tqdm

        items = tqdm(checks.items(), desc="verify", unit="check", delay=1.0, leave=False)
    except ImportError:  # pragma: no cover
        items = checks.items()
    for name, (family, fn) in items:
        t0 = time.perf_counter()
        try:
            out = fn(scale, seed)
        except Exception as exc:  # a crashing check is a failed check, reported, not hidden
            out = CheckResult(check=name, source="", family=family, bound=float("nan"),
                              estimate=float("nan"), verdict="fail",
                              detail=f"raised {type(exc).__name__}: {exc}")
        dt = time.perf_counter() - t0
        for r in out if isinstance(out, list) else [out]:
            r.seconds = dt
            rows.append(r)

    header = "| check | family | source | bound | estimate | CI | relation | margin | ½-bound | kind |"
    lines = ["# dpsim verify", "", f"Scale `{scale}`, seed {seed}; {len(rows)} rows.", "",
             "margin: the factor by which the bound could be off without the row failing; "
             "½-bound: the row's verdict against the bound made twice as strong.", "", header,
             "|" + "---|" * 10]
    for r in rows:
        lines.append(f"| {r.check} | {r.family} | {r.source} | {_fmt(r.bound)} | {_fmt(r.estimate)} | "
                     f"{_fmt(r.ci)} | {r.relation} | {_fmt(r.margin)} | {r.strengthened() or ''} | "
                     f"**{r.verdict}** |")
    notes = [r for r in rows if r.detail]
    if notes:
        lines += ["", "## Notes", ""]
        lines += [f"- **{r.check}**: {r.detail}" for r in notes]
    text = "\n".join(lines) + "\n"
    echo(text)
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "verify.md").write_text(text)
        (out / "verify.json").write_text(json.dumps([r.to_dict() for r in rows], indent=2, default=str))
    n_fail = sum(r.verdict == "fail" for r in rows)
    counts = {k: sum(r.verdict == k for r in rows)
              for k in ("pass", "sanity", "reported", "vacuous", "not covered")}
    echo(f"{len(rows)} rows: {counts['pass']} pass, {counts['sanity']} sanity, "
         f"{counts['reported']} reported, {counts['vacuous']} vacuous, "
         f"{counts['not covered']} not covered, {n_fail} fail")
    return 1 if n_fail else 0


def register(subparsers) -> None:
    """Add ``verify`` to ``dpsim``'s subcommands (entry point group ``dpsim.commands``)."""
    v = subparsers.add_parser("verify", help="check every bound of the papers against simulation")
    v.add_argument("--scale", default="quick", help="quick (default) or full")
    v.add_argument("--out", default=None, help="write verify.md and verify.json here")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--only", nargs="*", default=None, help="run only these checks")
    v.set_defaults(handler=_handle)


def _handle(args) -> int:
    return run(args.scale, args.out, seed=args.seed, only=args.only)
