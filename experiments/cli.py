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
    backend or worker count, a results or figure folder that cannot be written, or a scheduler
    that cannot be reached raises ``KeyError``/``ValueError`` naming it before any work.  A
    write that fails during the run (a full disk) ends in one line too: every cell finished
    before it is kept, and a rerun resumes from there."""
    if not args.all and not args.names:
        raise ValueError("reproduce needs experiment names or --all")
    from dpsim.extras import require

    require("matplotlib", "dpsim reproduce (its figures)")  # before any cell is computed
    kw = {"scale": args.scale, "out_dir": args.out, "force": args.force}
    results = getattr(args, "results", None)
    if results is not None:
        kw["results_dir"] = results
        check_writable_folder(results, "--results")
    if args.out is not None:
        check_writable_folder(args.out, "--out")
    scheduler = getattr(args, "scheduler", None)
    if scheduler is not None:
        # a refusal is named at once; a host that is silent or unreachable is named by the
        # Dask connection itself, within experiments.pipeline.SCHEDULER_CONNECT_TIMEOUT
        check_scheduler(scheduler, timeout=1.0, only_refused=True)
        kw["workers"], kw["scheduler"] = None, scheduler
    elif getattr(args, "workers", None) is not None:
        kw["workers"] = _positive_int(args.workers)
    else:
        kw["workers"] = None  # every core
    if kw.get("workers") != 1:  # a Dask cluster (local or existing)
        require("distributed", "dpsim reproduce with several workers (use --workers 1 without it)")
    if getattr(args, "backend", "numpy") != "numpy":
        kw["backend"] = args.backend
    try:
        reproduce(names() if args.all else args.names, **kw)
    except OSError as exc:  # e.g. a disk that fills up during the run: nothing finished is lost
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if scheduler is not None and ("connect" in text.lower() or isinstance(exc, TimeoutError)):
            if text.startswith("cannot connect"):  # experiments.pipeline's own line
                raise ValueError(f"--scheduler {scheduler!r}: {text}") from None
            raise ValueError(f"--scheduler {scheduler!r}: cannot connect ({text}); is the Dask "
                             f"scheduler running there?") from None
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        raise ValueError(f"reproduce stopped: {exc.strerror or exc}{where}; the cells finished "
                         f"before are kept in the results folder and a rerun resumes from them") from None
    return 0


def check_writable_folder(path, option: str) -> None:
    """``path`` is a folder that exists or can be made, and a file can be created in it (checked
    by creating and removing one: ``os.access`` answers yes to root everywhere, e.g. ``/proc``);
    else one ``ValueError`` naming the option and the folder."""
    import os
    import tempfile
    from pathlib import Path

    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{option} must be a folder, got the file {str(folder)!r}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".dpsim-write-test-"):
            pass
    except OSError as exc:
        raise ValueError(f"{option} {os.fspath(path)!r}: cannot write there "
                         f"({exc.strerror or exc})") from None


def check_scheduler_address(address: str) -> tuple | None:
    """``(host, port)`` of a Dask scheduler address ``tcp://host:port`` (or ``host:port``,
    ``tls://``), ``None`` for another protocol (left to Dask); one ``ValueError`` naming a
    malformed address.  Nothing is contacted (:func:`check_scheduler` connects)."""
    from urllib.parse import urlsplit

    text = str(address).strip()
    try:
        parts = urlsplit(text if "://" in text else f"tcp://{text}")
    except ValueError:  # e.g. an unclosed IPv6 bracket: urllib's message does not name it
        parts = None
    if parts is not None and parts.scheme not in ("tcp", "tls"):
        return
    try:
        host, port = parts.hostname, parts.port
    except (AttributeError, ValueError):
        host, port = None, None
    if not host or not port:
        raise ValueError(f"--scheduler {address!r} is not an address like tcp://host:8786")
    return host, port


def check_scheduler(address: str, timeout: float = 3.0, only_refused: bool = False) -> None:
    """:func:`check_scheduler_address`, then a TCP connection to it: one ``ValueError`` naming the
    address when it refuses, is unreachable or does not answer within ``timeout`` seconds
    (instead of Dask's traceback after its own 30 s timeout).  ``only_refused``: only an explicit
    refusal (nothing listens on that port) is an error here; other failures are left to the
    Dask connection, which gives up within :data:`experiments.pipeline.SCHEDULER_CONNECT_TIMEOUT`
    seconds with one line naming the address as well."""
    import socket

    where = check_scheduler_address(address)
    if where is None:
        return
    host, port = where
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        if only_refused and not isinstance(exc, ConnectionRefusedError):
            return
        reason = exc.strerror or (f"no answer within {timeout:g} s" if isinstance(exc, TimeoutError)
                                  else type(exc).__name__)
        raise ValueError(f"--scheduler {address!r}: cannot connect to {host}:{port} ({reason}); "
                         f"is the Dask scheduler running there?") from None


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
    if not root.exists():
        raise ValueError(f"--results {str(root)!r} does not exist: nothing to prune")
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
