"""The ``dpsim reproduce`` command, registered from outside the core.

``pyproject.toml`` declares it in the entry point group ``dpsim.commands``
(``reproduce = "dpsim.experiments.cli:register"``); ``dpsim``'s command line calls :func:`register`
with its subparsers and dispatches to the handler, turning a ``ValueError``/``KeyError`` into exit
status 2 and one line naming the bad value.

    dpsim reproduce [NAME ... | --all] [--scale tiny|quick|full] [--out DIR] [--force]
"""

from __future__ import annotations

from . import SCALES, names, reproduce

__all__ = ["register"]


def register(subparsers) -> None:
    """Add the ``reproduce`` subcommand to ``subparsers`` (an argparse subparsers action)."""
    rp = subparsers.add_parser("reproduce", help="run experiments, then render figures and REPORT.md")
    rp.add_argument("names", nargs="*", help="experiment names (see `dpsim list`)")
    rp.add_argument("--all", action="store_true", help="every experiment")
    rp.add_argument("--scale", default="quick", help=f"{' | '.join(SCALES)} (default quick)")
    rp.add_argument("--out", default=None, help="figure directory (default paper_figures/out)")
    rp.add_argument("--force", action="store_true", help="ignore cached results")
    rp.set_defaults(handler=_handle)


def _handle(args) -> int:
    """Reproduce the named experiments (every one with ``--all``); an unknown name or scale raises
    ``KeyError``/``ValueError`` naming it before any work."""
    if not args.all and not args.names:
        raise ValueError("reproduce needs experiment names or --all")
    reproduce(names() if args.all else args.names, scale=args.scale, out_dir=args.out,
              force=args.force)
    return 0
