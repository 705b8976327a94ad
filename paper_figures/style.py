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

from dpsim.extras import require

matplotlib = require("matplotlib", "dpsim's paper figures")

if "matplotlib.pyplot" not in sys.modules:  # do not switch an interactive session's backend
    matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import Formatter, Locator  # noqa: E402

import numpy as np  # noqa: E402

from dpsim.analysis import stats  # noqa: E402
from dpsim.experiments import verdicts  # noqa: E402

__all__ = ["RC", "context", "figure", "save", "sequential", "BASELINE_COLOR", "band", "fmt_float",
           "readable_log_axes", "mean_curve", "render_with", "combine", "finding"]

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


class _ReadableLogLocator(Locator):
    """A log-axis locator that keeps the figure's own locator (``inner``) whenever it puts at least
    two ticks inside the view, and otherwise (a view inside about one decade, where a decade-only
    locator shows one tick or none) falls back to ticks at ``{1, 2, 5} × 10^k``, then
    ``{1, …, 9} × 10^k``, then at most four evenly spaced "nice" values."""

    def __init__(self, inner):
        self.inner = inner
        self.fell_back = False  # whether the last call replaced the inner locator's ticks

    def set_axis(self, axis):
        super().set_axis(axis)
        self.inner.set_axis(axis)

    def __call__(self):
        vmin, vmax = self.axis.get_view_interval()
        return self.tick_values(vmin, vmax)

    def tick_values(self, vmin, vmax):
        import math

        import numpy as np
        from matplotlib.ticker import MaxNLocator

        vmin, vmax = sorted((float(vmin), float(vmax)))
        ticks = np.asarray(self.inner.tick_values(vmin, vmax), dtype=float)
        self.fell_back = False
        if not (vmin > 0 and math.isfinite(vmax)) or _inside(ticks, vmin, vmax) >= 2:
            return ticks
        self.fell_back = True
        k0, k1 = math.floor(math.log10(vmin)) - 1, math.ceil(math.log10(vmax)) + 1
        for subs in ((1.0, 2.0, 5.0), tuple(float(s) for s in range(1, 10))):
            cand = np.array([s * 10.0 ** k for k in range(k0, k1 + 1) for s in subs])
            if _inside(cand, vmin, vmax) >= 2:
                return cand
        return MaxNLocator(nbins=3).tick_values(vmin, vmax)


def _inside(ticks, vmin, vmax) -> int:
    return int(sum(vmin * (1 - 1e-9) <= t <= vmax * (1 + 1e-9) for t in ticks))


class _ReadableLogFormatter(Formatter):
    """Labels of a :class:`_ReadableLogLocator` axis: the figure's own formatter (``inner``) on the
    figure's own ticks when it labels at least two of them inside the view; otherwise (the locator
    fell back, or too few labels) every tick as a compact number with just enough significant
    digits to tell neighbouring ticks apart."""

    def __init__(self, inner):
        self.inner = inner

    def set_axis(self, axis):
        super().set_axis(axis)
        self.inner.set_axis(axis)

    def __call__(self, x, pos=None):
        return self.inner(x, pos)

    def format_ticks(self, values):
        labels = self.inner.format_ticks(values)
        vmin, vmax = sorted(self.axis.get_view_interval())
        shown = [lab for v, lab in zip(values, labels)
                 if vmin * (1 - 1e-9) <= v <= vmax * (1 + 1e-9) and str(lab).strip()]
        loc = self.axis.get_major_locator()
        if len(shown) >= 2 and not getattr(loc, "fell_back", False):
            return labels
        for digits in (1, 2, 3, 4, 6):
            out = [fmt_float(float(f"{v:.{digits}g}")) for v in values]
            if len(set(out)) == len(out):
                return out
        return out


def readable_log_axes(fig) -> None:
    """Make every log axis of ``fig`` show at least two labelled major ticks (wrapping its locator
    and formatter, see :class:`_ReadableLogLocator`) and no minor tick labels (they collide on
    short decades).  :func:`save` applies it to every figure; axes with fixed tick positions
    (``set_xticks``) are left alone."""
    from matplotlib.ticker import FixedLocator, NullFormatter

    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() != "log":
                continue
            loc, fmt = axis.get_major_locator(), axis.get_major_formatter()
            if isinstance(loc, (FixedLocator, _ReadableLogLocator)):
                continue
            axis.set_major_locator(_ReadableLogLocator(loc))
            axis.set_major_formatter(_ReadableLogFormatter(fmt))
            axis.set_minor_formatter(NullFormatter())


def save(fig, out_dir, name: str) -> list[Path]:
    """Save ``fig`` as ``out_dir/name.png`` and ``out_dir/name.pdf`` (reproducible metadata), after
    :func:`readable_log_axes`."""
    readable_log_axes(fig)
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


def mean_curve(ax, steps, values, color, *, with_band: bool = True, **plot_kw):
    """Plot the mean over trials of ``values`` (shape ``(K, R)``: K recorded steps, R trials)
    against ``steps`` in ``color``, over its 95% confidence band (:func:`band`;
    :func:`analysis.stats.mean_ci`) unless ``with_band`` is false.  The band's lower edge is
    floored at ``10⁻³ × mean`` (and above 0), so a band reaching 0 on few trials cannot stretch a log
    axis over decades.  ``plot_kw`` go to ``ax.plot`` (label, line style, zorder); returns the mean."""
    mean, half = stats.mean_ci(values, axis=1)
    if with_band:
        floor = np.maximum(mean * 1e-3, np.finfo(float).tiny)
        band(ax, steps, np.maximum(mean - half, floor), mean + half, color)
    ax.plot(steps, mean, color=color, **plot_kw)
    return mean


def render_with(draw, *args) -> list[Path]:
    """``draw(*args)`` (a figure's drawing function, which saves the figure) under
    :func:`context`, returning the paths it saved: the body of most ``render`` functions."""
    with context():
        return draw(*args)


def combine(cats) -> str:
    """One category of :mod:`experiments.verdicts` from the categories of the parts of a claim
    (one per ε, per setting, per problem): "does not hold" when any part does not, "holds" when
    every part holds, otherwise (and when there is no part at all) inconclusive."""
    cats = list(cats)
    if verdicts.FAILS in cats:
        return verdicts.FAILS
    if cats and all(c == verdicts.HOLDS for c in cats):
        return verdicts.HOLDS
    return verdicts.INCONCLUSIVE


def finding(claim: str, lines, category: str, verdict: str) -> dict:
    """The dict a figure's ``evaluate`` returns: ``claim``, ``measured`` (``lines`` joined by
    newlines), ``holds`` (read off the category by :func:`experiments.verdicts.holds_of`),
    ``category`` and the ``verdict`` text."""
    return {"claim": claim, "measured": "\n".join(lines), "holds": verdicts.holds_of(category),
            "category": category, "verdict": verdict}


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
