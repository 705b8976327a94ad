"""The ``dpsim`` command line (also ``python -m dpsim``).

    dpsim list
    dpsim run --problem P [--problem-arg k=v ...] --optimizer O [--set k=v ...]
              --steps N --batch-size B --trials R --seed S [--backend cupy] --out FILE.npz|FILE.nc
              [--accountant pld|rdp] [--target-epsilon E]
    dpsim account (--noise-multiplier S | --epsilon E) --sample-rate Q --steps T --delta D
    dpsim audit OPTIMIZER [--set k=v ...] [--trials R] [--n N] [--others zero|aligned]

Further commands come from the installed applications through entry points (``dpsim verify`` from
``dpsim.analysis``, ``dpsim reproduce`` from ``dpsim.experiments``): every entry point of the group
``dpsim.commands`` is a ``register(subparsers)`` that adds one subparser with
``set_defaults(handler=fn)``, ``fn(args) -> exit code``.  ``dpsim list`` adds the names of the
group ``dpsim.listings`` (zero-argument callables returning names).  The core never imports the
applications; an entry point that fails to load is reported on one line and skipped.

Bad input exits with status 2 and one line naming the bad value (no traceback).  ``dpsim run``
prints its summary before it writes ``--out``; if the write fails (a full disk), the result is
saved to a fallback file (the temporary folder, else the working or home folder), the summary and
the one-line error say where, and the exit status is 2.  Every printed ε names its neighbouring
relation and what it does not cover (``dpsim.accounting.EPSILON_SCOPE``).
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points

COMMANDS_GROUP = "dpsim.commands"
LISTINGS_GROUP = "dpsim.listings"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        sys.stderr.write(f"dpsim: error: {message}\n")
        raise SystemExit(2)


def _parse_value(text: str):
    """``1e-3`` → float, ``7`` → int, ``inf`` → inf, ``0.1,0.2`` → per-trial list, else string."""
    if "," in text:
        return [_parse_scalar(t) for t in text.split(",")]
    return _parse_scalar(text, allow_str=True)


def _parse_scalar(text: str, allow_str: bool = False):
    t = text.strip()
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        pass
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    if allow_str:
        return t
    raise ValueError(f"expected a number, got {text!r}")


def _kv(items, what):
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"{what} expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = _parse_value(v)
    return out


def _build_parser() -> argparse.ArgumentParser:
    from . import __version__

    p = _Parser(prog="dpsim", description="Simulate differentially private (adaptive) optimizers.")
    p.add_argument("--version", action="version", version=f"dpsim {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sub.add_parser("list", help="list problems and optimizers")

    r = sub.add_parser("run", help="simulate one optimizer on one problem")
    r.add_argument("--problem", required=True, help="problem factory name (see `dpsim list`)")
    r.add_argument("--problem-arg", action="append", metavar="K=V",
                   help="problem factory argument, e.g. n=2000 (repeatable)")
    r.add_argument("--optimizer", required=True)
    r.add_argument("--set", action="append", metavar="K=V",
                   help="optimizer hyperparameter, e.g. lr=0.1 or lr=0.1,0.2 (one per trial)")
    r.add_argument("--steps", type=int, required=True)
    r.add_argument("--batch-size", type=int, required=True)
    r.add_argument("--trials", type=int, default=1)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--sampling", default="poisson",
                   help="poisson (default), fixed (rdp only) or cyclic_poisson:<k> (k fixed groups, "
                        "amplifies banded DP-MF with at most k bands)")
    r.add_argument("--backend", default="numpy")
    r.add_argument("--record-every", type=int, default=None)
    r.add_argument("--delta", type=float, default=1e-5, help="δ for the reported ε")
    r.add_argument("--accountant", default="pld", help="pld (default) or rdp (needed with --sampling fixed)")
    r.add_argument("--target-epsilon", type=float, default=None,
                   help="calibrate the noise multiplier so that the run costs this ε at --delta")
    r.add_argument("--out", default=None,
                   help="save the result here; the suffix picks the format: .npz (NumPy) or .nc "
                        "(netCDF, opens with xarray.open_dataset)")
    r.add_argument("--no-progress", action="store_true")

    a = sub.add_parser("account", help="(ε, δ) of the Poisson-subsampled Gaussian mechanism, or "
                                       "the noise multiplier for a target ε (--epsilon)")
    g = a.add_mutually_exclusive_group(required=True)
    g.add_argument("--noise-multiplier", type=float)
    g.add_argument("--epsilon", type=float, help="calibrate: the noise multiplier for this ε")
    a.add_argument("--sample-rate", type=float, required=True)
    a.add_argument("--steps", type=int, required=True)
    a.add_argument("--delta", type=float, required=True)
    a.add_argument("--accountant", default="pld", help="pld (default) or rdp")
    a.add_argument("--sampling", default="poisson",
                   help="poisson (default), fixed (rdp only) or cyclic_poisson:<k> (each example: "
                        "ceil(steps/k) steps at rate k*sample_rate)")
    a.add_argument("--releases-per-step", type=int, default=1)

    u = sub.add_parser("audit", help="empirical lower bound on ε (canary threshold test) vs the "
                                     "claimed ε")
    u.add_argument("optimizer")
    u.add_argument("--set", action="append", metavar="K=V", help="optimizer hyperparameter")
    u.add_argument("--trials", type=int, default=100_000, help="trials per dataset")
    u.add_argument("--n", type=int, default=None,
                   help="rows of the built-in canary table (default 4 private rows, plus the "
                        "smallest public split the optimizer's public_fraction allows)")
    u.add_argument("--d", type=int, default=1)
    u.add_argument("--others", default="zero", help="zero (default) or aligned")
    u.add_argument("--batch-size", type=int, default=1)
    u.add_argument("--steps", type=int, default=1)
    u.add_argument("--sampling", default="poisson")
    u.add_argument("--accountant", default="pld")
    u.add_argument("--delta", type=float, default=1e-5)
    u.add_argument("--seed", type=int, default=0)

    for ep in entry_points(group=COMMANDS_GROUP):
        try:
            ep.load()(sub)
        except Exception as exc:  # an application that cannot load must not break the core CLI
            _warn(f"command {ep.name!r} unavailable ({type(exc).__name__}: {exc})")
    return p


def _cmd_list() -> int:
    from . import optimizers, problems

    print("problems:")
    for name in problems.names():
        print(f"  {name}")
    print("optimizers:")
    for name in optimizers.names():
        print(f"  {name}")
    for ep in entry_points(group=LISTINGS_GROUP):
        try:
            listed = list(ep.load()())
        except Exception as exc:
            _warn(f"listing {ep.name!r} unavailable ({type(exc).__name__}: {exc})")
            continue
        print(f"{ep.name}:")
        for name in listed:
            print(f"  {name}")
    return 0


def _validate_run(args):
    """Everything that can be checked before simulating (so a bad option never costs a run)."""
    import os

    from . import accounting

    accounting._check_delta(args.delta)
    accounting._check_options(args.accountant, args.sampling)
    for name in ("steps", "batch_size", "trials", "seed"):
        v = getattr(args, name)
        lo = 0 if name in ("steps", "seed") else 1
        if v < lo:
            raise ValueError(f"--{name.replace('_', '-')} must be >= {lo}, got {v}")
    if args.target_epsilon is not None and not (0 < args.target_epsilon < float("inf")):
        raise ValueError(f"--target-epsilon must be a positive finite number, got {args.target_epsilon}")
    if args.out is not None:
        from .results import SAVE_FORMATS

        if not args.out.strip():
            raise ValueError(f"--out {args.out!r} is empty: give a file name ending in "
                             f"{' or '.join(SAVE_FORMATS)}, or leave --out out")
        out = os.path.abspath(args.out)
        parent = os.path.dirname(out)
        if os.path.isdir(out):
            raise ValueError(f"--out {args.out!r} is a directory")
        suffix = os.path.splitext(out)[1]
        if suffix.lower() not in SAVE_FORMATS:
            raise ValueError(f"--out {args.out!r}: suffix {suffix!r} is not one of "
                             f"{', '.join(SAVE_FORMATS)} (the suffix picks the file format)")
        if not os.path.isdir(parent):
            raise ValueError(f"--out {args.out!r}: directory {parent!r} does not exist")
        if not os.access(parent, os.W_OK):
            raise ValueError(f"--out {args.out!r}: directory {parent!r} is not writable")
        _probe_writable(parent, args.out)


def _probe_writable(parent: str, out: str) -> None:
    """Create and remove a small file in ``parent``: ``os.access`` says yes to root everywhere
    (e.g. ``/proc``), where the final write would fail after the run."""
    import tempfile

    try:
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".dpsim-write-test-"):
            pass
    except OSError as exc:
        raise ValueError(f"--out {out!r}: cannot create a file in directory {parent!r} "
                         f"({exc.strerror or exc})") from None


def _cmd_run(args) -> int:
    import numpy as np

    from . import accounting, optimizers, problems, simulate
    from .memory import check_memory

    _validate_run(args)
    prob = problems.get(args.problem, **_kv(args.problem_arg, "--problem-arg"))
    opt = optimizers.get(args.optimizer, **_kv(args.set, "--set"))
    accounting.check_release_noise(opt.events)  # a σ the accountants overflow on: before the run
    target = {} if args.target_epsilon is None else dict(target_epsilon=args.target_epsilon,
                                                           target_delta=args.delta)
    try:
        # refuse a run that cannot fit before simulating (one line, exit 2; nothing is written)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # as simulate
            check_memory(prob, opt, trials=args.trials, batch_size=args.batch_size,
                         steps=args.steps, sampling=args.sampling, record_every=args.record_every)
        res = simulate(prob, opt, steps=args.steps, batch_size=args.batch_size, trials=args.trials,
                       seed=args.seed, sampling=args.sampling, backend=args.backend,
                       record_every=args.record_every, progress=not args.no_progress,
                       accountant=args.accountant, **target)
    except ZeroDivisionError as exc:  # a compiled step that raises on x/0 (instead of inf/NaN)
        raise ValueError(_division_by_zero(opt, exc)) from None
    # The summary comes first: whatever fails afterwards (the ε, the --out file), it is printed.
    eps_error = _print_run_summary(res, opt, prob, args)
    save_error = None
    if args.out is not None:
        save_error = _save_or_fallback(res, args.out)
        if save_error is None:
            print(f"  saved to {args.out}")
    sys.stdout.flush()
    errors = [e for e in (save_error, eps_error) if e]
    if errors:
        raise ValueError("; ".join(errors))
    return 0


def _division_by_zero(opt, exc) -> str:
    """One line for a step that divided by zero, naming ``eps=0`` with ``noise_multiplier=0``
    when the optimizer was given them (the denominator ``√v̂ + eps`` of an adaptive step is 0 on a
    coordinate whose gradients have all been 0)."""
    import numpy as np

    hp = opt.hyperparameters
    try:
        eps = np.asarray(hp.get("eps", np.nan), dtype=float)
        sigma = hp.get("noise_multiplier")
        sigma = np.asarray(0.0 if sigma is None else sigma, dtype=float)
        both = bool(np.any((eps == 0.0) & (sigma == 0.0)))
    except (TypeError, ValueError):
        both = False
    if both:
        return (f"eps=0 with noise_multiplier=0: {opt.name}'s update divided by zero on a "
                f"coordinate whose gradients have all been 0 (sqrt(v) + eps = 0); use eps > 0")
    return f"{opt.name}'s update divided by zero ({exc}); check its hyperparameters {dict(hp)}"


def _print_run_summary(res, opt, prob, args) -> str | None:
    """Print the run's summary (final loss, divergence, ε with its relation and scope); returns
    the reason ε could not be computed, if so (the rest is printed anyway)."""
    import numpy as np

    from . import accounting

    final = res.loss[-1]
    bad = res.diverged  # non-finite trials and finite blow-ups (dpsim.results.DIVERGENCE_FACTOR)
    ok = ~bad & np.isfinite(final)
    print(f"{opt.name} on {prob.name}: {args.steps} steps, {args.trials} trial(s), "
          f"{res.wall_time:.2f} s")
    if "calibration" in res.config:
        print(f"  noise multiplier {res.config['calibration']['noise_multiplier']:.6g} "
              f"(calibrated for epsilon={args.target_epsilon:g})")
    if ok.all():
        print(f"  final loss      {np.mean(final):.6g} ± {np.std(final):.2g} (mean ± sd over trials)")
    elif ok.any():
        print(f"  final loss      {np.mean(final[ok]):.6g} ± {np.std(final[ok]):.2g} over the "
              f"{int(ok.sum())} trial(s) not diverged; {int(bad.sum())} diverged")
    else:
        print(f"  final loss      all {args.trials} trial(s) diverged")
    if res.excess_loss is not None and ok.any():
        ex = res.excess_loss[-1][ok]
        print(f"  excess loss     {np.mean(ex):.6g} ± {np.std(ex):.2g}")
    if bad.any():
        print(f"  diverged        {_diverged_text(res, bad)}")
    try:
        rep = res.privacy_report(args.delta, accountant=args.accountant)
    except (ValueError, ArithmeticError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"  epsilon         not computable at delta={args.delta:g}: {reason}")
        return reason
    eps = rep["epsilon"]
    eps_txt = "inf (not private)" if np.all(np.isinf(eps)) else (
        f"{eps:.4g}" if np.ndim(eps) == 0 else f"{np.min(eps):.4g} .. {np.max(eps):.4g} (per trial)")
    print(f"  epsilon         {eps_txt} at delta={args.delta:g} (accountant {rep['accountant']}, "
          f"adjacency {rep['adjacency']}, sampling {rep['sampling']})")
    print(f"  epsilon scope   {accounting.EPSILON_SCOPE}")
    if rep.get("accountant_note"):
        print(f"  accountant note {rep['accountant_note']}")
    part = rep.get("participation") or {}
    if part.get("scheme") == "cyclic Poisson":
        print(f"  participation   {part['groups']} fixed groups, rate {part['rate']:.4g} per step, "
              f"at most {part['max_participations']} steps per example, {part['min_separation']} apart")
    if rep.get("correlated"):  # DP-MF: say whether amplification by sampling was used
        labels = [e["accounting"] for e in res.privacy.get("events", []) if "accounting" in e]
        print(f"  DP-MF noise     accounted {rep['correlated'].upper()}: {'; '.join(labels)}")
    return None


def _save_or_fallback(res, path) -> str | None:
    """Save ``res`` to ``path``; if that fails, save it to a fallback file (the temporary
    folder, else the working or the home folder) and return the one-line error that says where
    it went.  ``None`` when ``path`` was written."""
    import os
    import tempfile
    import time

    try:
        _save(res, path)
        return None
    except (ValueError, OSError) as exc:
        reason = str(exc)
    suffix = os.path.splitext(path)[1].lower()
    name = f"dpsim-run-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}{suffix}"
    tried = []
    for folder in (tempfile.gettempdir(), os.getcwd(), os.path.expanduser("~")):
        fallback = os.path.join(folder, name)
        if fallback in tried:
            continue
        tried.append(fallback)
        try:
            _save(res, fallback)
        except (ValueError, OSError):
            continue
        print(f"  saved to {fallback} (--out {path!r} could not be written)")
        return f"{reason}; the finished result was saved to {fallback} instead"
    return f"{reason}; the fallback files {', '.join(tried)} could not be written either"


def _diverged_text(res, bad) -> str:
    """``k of R trial(s): trial i reason; ... (rule: ...)`` on one line (at most three reasons)."""
    import numpy as np

    from .results import divergence_rule

    idx = [int(i) for i in np.flatnonzero(bad)]
    why = res.diverged_reason
    shown = "; ".join(f"trial {i} {why[i]}" for i in idx[:3]) + ("; ..." if len(idx) > 3 else "")
    return f"{len(idx)} of {len(bad)} trial(s): {shown} (rule: {divergence_rule()})"


def _save(res, path):
    import os

    from .results import SAVE_FORMATS

    fmt = SAVE_FORMATS[os.path.splitext(path)[1].lower()]  # checked by _validate_run
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        res.save(tmp, format=fmt)
        os.replace(tmp, path)
    except BaseException as exc:  # no partial file is left behind, whatever stopped the write
        if os.path.exists(tmp):
            os.remove(tmp)
        if isinstance(exc, OSError):
            raise ValueError(f"cannot write --out {path!r}: {exc.strerror or exc}") from None
        raise


def _cmd_account(args) -> int:
    from . import accounting

    if args.epsilon is not None:
        with accounting.collect_notes() as notes:
            sigma = accounting.noise_multiplier(args.epsilon, args.delta, args.sample_rate,
                                                args.steps, accountant=args.accountant,
                                                sampling=args.sampling,
                                                releases_per_step=args.releases_per_step)
        print(f"noise_multiplier = {sigma:.6g} (epsilon={args.epsilon:g}, delta={args.delta:g}, "
              f"accountant={args.accountant}, sampling={args.sampling}, "
              f"adjacency={accounting.adjacency(args.sampling)}, "
              f"sample_rate={args.sample_rate:g}, steps={args.steps}, "
              f"releases_per_step={args.releases_per_step})")
        for note in notes:
            print(f"note: {note}")
        print(f"scope: {accounting.EPSILON_SCOPE}")
        return 0
    with accounting.collect_notes() as notes:
        eps = accounting.epsilon(args.noise_multiplier, args.sample_rate, args.steps, args.delta,
                                 accountant=args.accountant,
                                 releases_per_step=args.releases_per_step, sampling=args.sampling)
    print(f"epsilon = {eps:.6g} (delta={args.delta:g}, accountant={args.accountant}, "
          f"sampling={args.sampling}, adjacency={accounting.adjacency(args.sampling)}, "
          f"noise_multiplier={args.noise_multiplier:g}, sample_rate={args.sample_rate:g}, "
          f"steps={args.steps})")
    for note in notes:
        print(f"note: {note}")
    print(f"scope: {accounting.EPSILON_SCOPE}")
    return 0


def _cmd_audit(args) -> int:
    from .audit import audit

    rep = audit(args.optimizer, trials=args.trials, n=args.n, d=args.d, others=args.others,
                batch_size=args.batch_size, steps=args.steps, sampling=args.sampling,
                accountant=args.accountant, delta=args.delta, seed=args.seed,
                **_kv(args.set, "--set"))
    print(rep)
    from .accounting import EPSILON_SCOPE

    print(f"claimed epsilon: adjacency {rep.config['privacy'].get('adjacency', 'n/a')}; "
          f"{EPSILON_SCOPE}")
    return 0 if rep.consistent else 1


def _warn(message: str) -> None:
    sys.stderr.write(f"dpsim: warning: {message}\n".replace("\n", " ").rstrip() + "\n")


def main(argv=None) -> int:
    args = _build_parser().parse_args(argv)
    try:
        if args.command == "list":
            return _cmd_list()
        if args.command == "run":
            return _cmd_run(args)
        if args.command == "account":
            return _cmd_account(args)
        if args.command == "audit":
            return _cmd_audit(args)
        return int(args.handler(args))
    except (ValueError, KeyError, TypeError, NotImplementedError, ImportError) as exc:
        # ImportError: an optional extra is missing (dpsim.extras names the install command)
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        sys.stderr.write(f"dpsim: error: {msg}\n".replace("\n", " ").rstrip() + "\n")
        return 2
    except MemoryError as exc:
        sys.stderr.write(f"dpsim: error: out of memory ({exc}); use fewer trials or a smaller "
                         "problem\n".replace("\n", " ").rstrip() + "\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("dpsim: interrupted (nothing saved by the interrupted command)\n")
        return 2
    return 1  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
