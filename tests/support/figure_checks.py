"""Checks of a rendered matplotlib figure that a reader of the gallery would otherwise catch by eye.

    from support.figure_checks import figure_problems, capture_figures
    with capture_figures() as figs:      # every Figure handed to paper_figures.style.save
        module.render(saved, out_dir)
    for name, fig in figs:
        assert not figure_problems(fig), name

Rules (each problem is one line naming the axes and what is wrong):

* **ticks** — every axes that shows data (a line with points, a bar, a filled area, an image or a
  scatter) has at least one visible, non-empty tick label on its x axis and on its y axis (a log
  axis whose range falls inside one decade otherwise shows no label at all);
* **tick overlap** — the visible tick labels of one axis do not overlap each other (upright
  labels only: the boxes of slanted labels overlap although their glyphs do not);
* **title overlap** — no axes title and no figure title overlaps an axis label, a tick label or
  another title;
* **legend values** — no legend text (entries and title) shows a non-finite number (``inf``,
  ``∞``, ``nan``), (after ``=``, ``≈`` or ``:``), and no ``ε = x`` with ``x > 100`` unless the entry itself says the run is
  ``not matched`` to a budget (a private run whose noise was set by σ rather than by ε).
"""

from __future__ import annotations

import contextlib
import itertools
import re

from matplotlib.backends.backend_agg import FigureCanvasAgg

EPS_MAX = 100.0
_NONFINITE = re.compile(r"[=≈:]\s*([-+]?(inf|nan)(?![A-Za-z])|[-+]?∞)", re.IGNORECASE)
_EPS = re.compile(r"ε\s*[=≈]\s*([-+0-9.eE]+)")


def _shows_data(ax) -> bool:
    if not ax.get_visible() or not ax.axison:
        return False
    if any(line.get_visible() and len(line.get_xdata()) > 0 for line in ax.get_lines()):
        return True
    if ax.images or ax.collections:
        return True
    return any(p.get_visible() and type(p).__name__ == "Rectangle" and p.get_height() != 0
               for p in ax.patches)


def _labels(ax, axis_name, renderer) -> list:
    """The tick labels of ``ax`` that are drawn: visible, non-empty and at a tick inside the view
    (matplotlib keeps stale label objects for ticks outside it)."""
    box = ax.get_window_extent(renderer)
    ticks = ax.get_xticklabels() if axis_name == "x" else ax.get_yticklabels()
    out = []
    for t in ticks:
        if not (t.get_visible() and t.get_text().strip()):
            continue
        b = t.get_window_extent(renderer)
        c, lo, hi = ((b.x0 + b.x1) / 2, box.x0, box.x1) if axis_name == "x" else \
            ((b.y0 + b.y1) / 2, box.y0, box.y1)
        if lo - 1.0 <= c <= hi + 1.0:
            out.append(t)
    return out


def _overlap(a, b, pad: float = 0.5) -> bool:
    """Whether two display-space boxes overlap by more than ``pad`` pixels both ways."""
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > pad) and (min(a.y1, b.y1) - max(a.y0, b.y0) > pad)


def legend_texts(fig) -> list[str]:
    """Every text of every legend of ``fig`` (axes and figure legends), titles included."""
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    out = []
    for leg in legends:
        if leg is None:
            continue
        out += [t.get_text() for t in leg.get_texts()]
        if leg.get_title().get_text():
            out.append(leg.get_title().get_text())
    return out


def legend_problems(texts) -> list[str]:
    """The legend rule (module docstring) on a list of legend strings."""
    problems = []
    for text in texts:
        if _NONFINITE.search(text):
            problems.append(f"legend shows a non-finite value: {text!r}")
        for m in _EPS.finditer(text):
            try:
                v = float(m.group(1).rstrip(".,;"))
            except ValueError:
                continue
            if v > EPS_MAX and "not matched" not in text:
                problems.append(f"legend shows ε = {v:g} > {EPS_MAX:g} for a run not marked "
                                f"'not matched': {text!r}")
    return problems


def figure_problems(fig) -> list[str]:
    """Every problem of ``fig`` under the rules of the module docstring (``[]``: none)."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    problems = []
    titles, others = [], []
    if fig._suptitle is not None and fig._suptitle.get_text():
        titles.append(("figure title", fig._suptitle.get_window_extent(renderer)))
    for i, ax in enumerate(fig.axes):
        name = f"axes {i} ({ax.get_title()!r})"
        for t in (ax.title, ax._left_title, ax._right_title):
            if t.get_text() and t.get_visible():
                titles.append((f"title of {name}", t.get_window_extent(renderer)))
        if not _shows_data(ax):
            continue
        for axis_name in ("x", "y"):
            vis = _labels(ax, axis_name, renderer)
            if not vis:
                problems.append(f"{name}: no {axis_name} tick labels")
            boxes = [t.get_window_extent(renderer) for t in vis]
            # the axis-aligned boxes of slanted labels overlap although their glyphs do not
            upright = all(t.get_rotation() % 90 == 0 for t in vis)
            for (a, ta), (b, tb) in itertools.combinations(zip(boxes, vis), 2):
                if upright and _overlap(a, b):
                    problems.append(f"{name}: {axis_name} tick labels {ta.get_text()!r} and "
                                    f"{tb.get_text()!r} overlap")
                    break
            others += [(f"{axis_name} tick label {t.get_text()!r} of {name}", b)
                       for t, b in zip(vis, boxes)]
        for lab, what in ((ax.xaxis.label, "x label"), (ax.yaxis.label, "y label")):
            if lab.get_text() and lab.get_visible():
                others.append((f"{what} of {name}", lab.get_window_extent(renderer)))
    for (n1, b1), (n2, b2) in itertools.combinations(titles, 2):
        if _overlap(b1, b2):
            problems.append(f"{n1} overlaps {n2}")
    for (n1, b1), (n2, b2) in itertools.product(titles, others):
        if _overlap(b1, b2):
            problems.append(f"{n1} overlaps the {n2}")
    return problems + legend_problems(legend_texts(fig))


@contextlib.contextmanager
def capture_figures():
    """Record ``(name, Figure)`` for every figure saved through ``paper_figures.style.save`` inside
    the block (the figure is still saved)."""
    from dpsim.paper_figures import style

    captured: list = []
    real = style.save

    def save(fig, out_dir, name):
        captured.append((name, fig))
        return real(fig, out_dir, name)

    style.save = save
    try:
        yield captured
    finally:
        style.save = real
