"""One consistent look for every figure, and the PNG + PDF save helper.

Figures are built on :class:`matplotlib.figure.Figure` directly (no pyplot state, nothing to close)
and rendered with the non-interactive Agg backend.  Use::

    from dpsim.paper_figures import style
    with style.context():                             # the rcParams below, for everything drawn
        fig, axes = style.figure(ncols=2)
        ...
        paths = style.save(fig, out_dir, "fig_name")  # [out_dir/fig_name.png, .pdf]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

if "matplotlib.pyplot" not in sys.modules:  # do not switch an interactive session's backend
    matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

__all__ = ["RC", "context", "figure", "save", "sequential", "BASELINE_COLOR", "band", "fmt_float"]

RC = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 7.5,
    "legend.frameon": False,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "lines.linewidth": 1.5,
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
    "pdf.fonttype": 42,  # editable text in the PDF
}

BASELINE_COLOR = "0.15"  # the non-private baseline: near black


def context():
    """Context manager applying :data:`RC`; draw and save inside it."""
    return matplotlib.rc_context(RC)


def fmt_float(x: float) -> str:
    """Compact number for labels: ``1e-05`` → ``1e-5``, ``0.5`` → ``0.5``."""
    s = f"{x:g}"
    if "e" in s:
        mant, exp = s.split("e")
        s = f"{mant}e{int(exp)}"
    return s


def figure(nrows: int = 1, ncols: int = 1, *, width: float = 3.4, height: float = 2.8, **kw):
    """A :class:`Figure` with an ``nrows × ncols`` grid of axes (each ``width × height`` inches)."""
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def sequential(n: int, cmap: str = "plasma", lo: float = 0.05, hi: float = 0.8) -> list:
    """``n`` colours from light-to-dark ordered colormap ``cmap`` (e.g. increasing noise)."""
    cm = matplotlib.colormaps[cmap]
    if n == 1:
        return [cm(lo)]
    return [cm(lo + (hi - lo) * i / (n - 1)) for i in range(n)]


def band(ax, x, lo, hi, color, alpha: float = 0.2):
    """Shaded band between ``lo`` and ``hi`` (no edge)."""
    ax.fill_between(x, lo, hi, color=color, alpha=alpha, linewidth=0)


def save(fig, out_dir, name: str) -> list[Path]:
    """Save ``fig`` as ``out_dir/name.png`` and ``out_dir/name.pdf`` (reproducible metadata)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    with matplotlib.rc_context(RC):
        for ext, meta in (("png", {"Software": None}),
                          ("pdf", {"Creator": None, "Producer": None, "CreationDate": None})):
            p = out_dir / f"{name}.{ext}"
            fig.savefig(p, format=ext, metadata=meta)
            paths.append(p)
    return paths


def cli_main(module, argv=None) -> int:
    """The command line of every figure script, ``python -m dpsim.paper_figures.<fig> RESULTS_DIR
    [OUT_DIR]``: render the figure from the saved results listed in ``RESULTS_DIR/manifest.json``
    into ``OUT_DIR`` (default ``paper_figures/out``) and print its claim evaluation as JSON."""
    from dpsim.experiments.pipeline import Saved  # the figures' reader of a results folder

    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(module.__doc__)
        return 2
    results = Saved.from_dir(argv[0])
    out_dir = Path(argv[1]) if len(argv) > 1 else Path("paper_figures") / "out"
    for p in module.render(results, out_dir):
        print(p)
    print(json.dumps(module.evaluate(results), indent=1, ensure_ascii=False))
    return 0
