"""The ``dpsim reproduce``, ``dpsim cache`` and ``dpsim gallery`` commands, registered from
outside the core.

``pyproject.toml`` declares them in the entry point group ``dpsim.commands``
(``reproduce = "dpsim.experiments.cli:register"``, ``cache = "dpsim.experiments.cli:register_cache"``,
``gallery = "dpsim.experiments.cli:register_gallery"``);
``dpsim``'s command line calls each with its subparsers and dispatches to the handler, turning a
``ValueError``/``KeyError`` into exit status 2 and one line naming the bad value.

    dpsim reproduce [NAME ... | --all] [--scale tiny|quick|full] [--out DIR] [--results DIR]
                    [--workers N | --scheduler ADDRESS] [--backend numpy|cupy] [--force]
    dpsim cache prune [--results DIR] [--dry-run]
    dpsim gallery publish --results DIR --figures DIR --out DIR [--source CHECKOUT] [--scale S]
                          [--allow-partial] [--max-width PX] [--max-bytes B]
    dpsim gallery status --results DIR [--scale S] [--figures DIR] [--json]
"""

from __future__ import annotations

import sys

from . import DEFAULT_RESULTS_DIR, SCALES, get, names, reproduce

__all__ = ["register", "register_cache", "register_gallery"]


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"--workers must be a positive integer, got {text!r}")
    return n


def register(subparsers) -> None:
    """Add the ``reproduce`` subcommand to ``subparsers`` (an argparse subparsers action)."""
    rp = subparsers.add_parser(
        "reproduce", help="run experiments (cells in parallel on Dask), then render figures and REPORT.md")
    rp.add_argument("names", nargs="*", help="experiment names (see `dpsim list`)")
    rp.add_argument("--all", action="store_true", help="every experiment")
    rp.add_argument("--scale", default="quick", help=f"{' | '.join(SCALES)} (default quick)")
    rp.add_argument("--out", default=None, help="figure directory (default paper_figures/out)")
    rp.add_argument("--results", default=None,
                    help=f"results cache directory (default {DEFAULT_RESULTS_DIR})")
    where = rp.add_mutually_exclusive_group()
    where.add_argument("--workers", default=None, metavar="N",
                       help="run cells on a local Dask cluster of N worker processes "
                            "(127.0.0.1 only; default: every core; 1: in this process, no cluster)")
    where.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="run cells on an existing Dask cluster (e.g. tcp://host:8786; "
                            "its workers need the same dpsim installed)")
    rp.add_argument("--backend", default="numpy", help="numpy (default) | cupy (cells run on the GPU)")
    rp.add_argument("--force", action="store_true", help="recompute every cell (ignore cached results)")
    rp.set_defaults(handler=_handle)


def _handle(args) -> int:
    """Reproduce the named experiments (every one with ``--all``); an unknown name, scale,
    backend or worker count raises ``KeyError``/``ValueError`` naming it before any work."""
    if not args.all and not args.names:
        raise ValueError("reproduce needs experiment names or --all")
    kw = {"scale": args.scale, "out_dir": args.out, "force": args.force}
    if getattr(args, "results", None) is not None:
        kw["results_dir"] = args.results
    if getattr(args, "scheduler", None) is not None:
        kw["workers"], kw["scheduler"] = None, args.scheduler
    elif getattr(args, "workers", None) is not None:
        kw["workers"] = _positive_int(args.workers)
    else:
        kw["workers"] = None  # every core
    if getattr(args, "backend", "numpy") != "numpy":
        kw["backend"] = args.backend
    reproduce(names() if args.all else args.names, **kw)
    return 0


def register_cache(subparsers) -> None:
    """Add the ``cache`` subcommand (``dpsim cache prune``) to ``subparsers``."""
    cp = subparsers.add_parser("cache", help="manage the results cache of `dpsim reproduce`")
    sub = cp.add_subparsers(dest="cache_command", metavar="prune")
    pr = sub.add_parser("prune", help="delete cached results that no current cache key names "
                                      "(older configs or numerics versions)")
    pr.add_argument("--results", default=str(DEFAULT_RESULTS_DIR),
                    help=f"results cache directory (default {DEFAULT_RESULTS_DIR})")
    pr.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    cp.set_defaults(handler=_handle_cache)


def _handle_cache(args) -> int:
    from pathlib import Path

    from .pipeline import prune

    if getattr(args, "cache_command", None) != "prune":
        raise ValueError(f"cache needs a subcommand: prune (got {getattr(args, 'cache_command', None)!r})")
    root = Path(args.results)
    if root.exists() and not root.is_dir():
        raise ValueError(f"--results must be a folder, got the file {str(root)!r}")
    gone = prune(root, {name: get(name) for name in names()}, dry_run=args.dry_run)
    verb = "would delete" if args.dry_run else "deleted"
    for p in gone:
        print(f"{verb} {p}")
    print(f"{len(gone)} stale item(s) {verb} under {root}", file=sys.stdout)
    return 0


def register_gallery(subparsers) -> None:
    """Add ``dpsim gallery publish|status`` (:mod:`experiments.gallery`) to ``subparsers``."""
    from .gallery import register as register_gallery_commands

    register_gallery_commands(subparsers)
