"""Publishing a finished reproduction as a small gallery, and the progress of a long one.

    from dpsim.experiments import gallery
    gallery.status("results", scale="full")                 # per experiment: cells, CPU, ETA
    print(gallery.format_status(gallery.status("results", scale="full")))
    gallery.publish("results", "paper_figures/out", "docs/gallery", source=".")

**status** reads a results cache (``results/<experiment>/<scale>/<key>/manifest.json``, see
:mod:`experiments.pipeline`) without writing to it, and says per experiment how many cells are
cached under the key this checkout's code would use (the key of its config at ``scale``, its
numerics versions and the backend), the CPU seconds they took (the sum of the cells'
``cpu_time_s``), whether the run finished (``complete`` in the manifest and ``LATEST`` naming the
key) and, given the figure folder, whether REPORT.md has the experiment's section.  For an
experiment whose module lists its cells up front (a function ``cell_labels(config)``, e.g.
:func:`experiments.dp2_logistic.cell_labels`) it also gives the total and the remaining cells and
an ETA: ``remaining × (mean CPU seconds of a finished cell)`` CPU seconds, divided by the
*effective parallelism* of the latest session (CPU seconds of its cells over its wall span; below
the worker count when the workers share the machine with other work).  Cells cached under other
keys of the same scale (an older config or numerics version) are counted apart: they are not reused.

**publish** copies a finished reproduction (``REPORT.md`` and ``report.json`` in a figure folder,
the cells in a results folder) to a gallery folder::

    <out>/REPORT.md        provenance header + the report, image links to figures/
    <out>/figures/*.png    every figure of the report, re-encoded small
    <out>/gallery.json     the header's data (commits, dates, machine, times, sizes)
    <out>/README.md        a few lines pointing at the three above

The header gives the git commit(s) of the code that computed the cells (recorded per cell as
``commit`` in the manifests; a cache written before cells recorded it takes the commit of the
``source`` checkout that ran it, and the header says so), the date range of the cells, the machine
(CPU model, logical cores, RAM, OS; Python and NumPy from the manifests), the CPU time (the sum
over cells), the wall time and the cells per experiment.

Wall time, from the cells' ``[t_start, t_stop]`` intervals (Unix seconds; for an entry without
them, ``[finished − wall_time_s, finished]``), pooled over every experiment (they run at once): the
intervals sorted by start are cut into *sessions* wherever the next interval starts more than
``gap`` seconds (default 600) after every earlier one stopped; the wall time is
``Σ_sessions (last stop − first start)``, the time something was being computed, which does not
count the hours between the sessions of an accumulated run.  The raw span ``last stop − first
start`` is given beside it.

Figures are re-encoded with Pillow (matplotlib's dependency): flattened on white, shrunk to at most
``max_width`` pixels wide (Lanczos), quantized to an adaptive palette of at most 256 colours and
saved with ``optimize`` (fast octree quantization, no dithering: on the report's line plots
fewer bytes and less time than median cut); when the result is still over ``max_bytes``, fewer
colours (128, 64) and then smaller widths (×0.85 per try, not below 400 px) are tried, and a
figure that cannot be brought under the limit is an error naming it.  PDFs are not copied (their
links are removed).

**update** replaces some experiments of a published gallery with their new reproduction and
keeps the others' sections, figures and rows as published (:func:`update`): for a long
reproduction when one experiment's setting changes after the raw results of the others are gone.

A reproduction is *incomplete* when an experiment has no section (or one at another scale) in the
figure folder's ``report.json``/REPORT.md, a figure its module names was not rendered, a PNG is
missing, or its results (the manifest of the reported key, finished) are not in the results
folder.  ``publish`` refuses it with a ``ValueError`` listing every gap, unless
``allow_partial=True``: the header then says PARTIAL and lists the gaps (a missing image becomes a
note in the text).

The module keeps :func:`status`, :func:`publish`, :func:`update` and the command line;
:mod:`experiments.gallery_provenance` reads the cells, the machine and the commits, and checks a
reproduction; :mod:`experiments.gallery_files` writes the gallery's PNGs, report body, header and
README.  Their names are importable from here too.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Mapping, Sequence

from . import SCALES, get, names as registered_names
from . import pipeline
from .gallery_files import (_ANCHOR, _FIGURES, _LINK, MAX_BYTES, MAX_WIDTH, _REPORT_TITLE,
                            _figure_names, _header, _readme, _report_entries, _report_text,
                            _rewrite_links, _split_report, _summary_row, shrink_png)  # noqa: F401
from .gallery_provenance import (SESSION_GAP_S, _Cells, _cell_labels, _check, _current_key, _git,
                                 _hours, _in_progress, _interval, _left, _read_manifest, _rows,
                                 _utc, machine_info, sessions, source_commit)  # noqa: F401

__all__ = ["status", "format_status", "publish", "update", "machine_info", "sessions", "shrink_png",
           "Incomplete", "register"]


class Incomplete(ValueError):
    """A reproduction that misses a report section, a figure or its results (``gaps``)."""

    def __init__(self, gaps: Sequence[str]):
        self.gaps = list(gaps)
        super().__init__("the reproduction is incomplete (publish it with --allow-partial to "
                         "mark it PARTIAL):\n  - " + "\n  - ".join(self.gaps))



# ------------------------------------------------------------------------------------------------
# status


def status(results_dir, scale: str = "full", *, experiments: Sequence[str] | None = None,
           figures_dir=None, backend: str = "numpy", gap: float = SESSION_GAP_S,
           now: float | None = None) -> dict:
    """How far the reproduction cached under ``results_dir`` is at ``scale`` (module docstring).

    Returns ``{"scale", "results_dir", "experiments": [row, ...], "total": {...}}``; a row has
    ``name``, ``key`` (this checkout's key), ``cells`` (listed in its manifest), ``files_missing``
    (listed cells whose file is gone), ``cpu_s``, ``complete`` (finished run, ``LATEST`` names the
    key), ``report`` (``True``/``False`` with ``figures_dir``, else ``None``), ``total`` and
    ``remaining`` (``None`` without ``cell_labels``), ``eta_cpu_s``, ``eta_wall_s``, ``last_cell``
    (Unix seconds of the latest finished cell), ``in_progress`` (the checkpoints of unsaved
    cells, :func:`_in_progress`) and ``other_keys`` (``{key: cells}`` of the other
    key folders at this scale, not reused by this checkout).  ``total`` sums cells and CPU and
    gives the sessions, the wall time and the effective parallelism of the latest session.
    Reads only; ``ValueError`` naming an unknown scale or experiment or a missing folder."""
    results_dir = Path(results_dir)
    if isinstance(scale, bool) or scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; known: {', '.join(SCALES)}")
    if results_dir.exists() and not results_dir.is_dir():
        raise ValueError(f"results folder {str(results_dir)!r} is not a folder")
    # a folder not made yet (a fresh clone before `make full`): every experiment has 0 cells
    pipeline.check_backend(backend)
    exps = [get(n) for n in (experiments if experiments is not None else registered_names())]
    report = _report_entries(Path(figures_dir)) if figures_dir is not None else None
    report_text = _report_text(Path(figures_dir)) if figures_dir is not None else ""

    rows, pooled, finished_cells = [], [], []
    for exp in exps:
        scale_dir = results_dir / exp.name / scale
        key = _current_key(exp, scale, backend)
        m = _read_manifest(scale_dir / key / "manifest.json") or {}
        cells = _Cells(m)
        missing_files = sum(1 for e in cells.cells.values()
                            if not (scale_dir / key / str(e.get("file", ""))).exists())
        try:
            latest = (scale_dir / "LATEST").read_text().strip()
        except OSError:
            latest = None
        others = {}
        if scale_dir.is_dir():
            for d in sorted(p for p in scale_dir.iterdir() if p.is_dir() and p.name != key):
                om = _read_manifest(d / "manifest.json")
                if om is not None:
                    others[d.name] = len(_Cells(om).cells)
        labels = _cell_labels(exp, scale)
        total = remaining = None
        if labels is not None:
            total = len(labels)
            remaining = sum(1 for lab in labels if lab not in cells.cells)
        n = len(cells.cells)
        mean_cpu = cells.cpu / n if n else None
        ivs = cells.intervals
        pooled += ivs
        finished_cells += [(iv, float(e.get("cpu_time_s", 0.0)))
                           for e in cells.cells.values() for iv in [_interval(e)] if iv]
        rows.append({
            "name": exp.name, "key": key, "cells": n, "files_missing": missing_files,
            "cpu_s": cells.cpu, "mean_cpu_s": mean_cpu,
            "complete": bool(m.get("complete")) and latest == key,
            "report": (None if report is None else
                       (exp.name in report and report[exp.name].get("scale") == scale
                        and f"## {exp.name}:" in report_text)),
            "total": total, "remaining": remaining,
            "eta_cpu_s": (remaining * mean_cpu if remaining is not None and mean_cpu is not None
                          else None),
            "last_cell": max((b for _, b in ivs), default=None),
            "other_keys": others,
            "in_progress": _in_progress(scale_dir / key, cells.cells),
        })

    sess = sessions(pooled, gap)
    par = None
    if sess:
        a, b = sess[-1]
        cpu_last = sum(c for (s, _), c in finished_cells if a <= s <= b)
        par = cpu_last / (b - a) if b > a else None
    for r in rows:
        r["eta_wall_s"] = (r["eta_cpu_s"] / par if r["eta_cpu_s"] is not None and par else None)
    now = time.time() if now is None else float(now)
    last = max((b for _, b in pooled), default=None)
    return {
        "scale": scale,
        "results_dir": str(results_dir),
        "experiments": rows,
        "total": {
            "cells": sum(r["cells"] for r in rows),
            "cpu_s": sum(r["cpu_s"] for r in rows),
            "sessions": len(sess),
            "wall_s": sum(b - a for a, b in sess),
            "span_s": (max(b for _, b in sess) - min(a for a, _ in sess)) if sess else 0.0,
            "parallelism_last_session": par,
            "last_cell": last,
            "since_last_cell_s": (now - last) if last is not None else None,
            "complete": all(r["complete"] for r in rows),
            # the experiments whose cells are listed up front (the others are not in these sums)
            "remaining": sum(r["remaining"] or 0 for r in rows if r["total"] is not None),
            # unknown (None) when an experiment with cells left has no finished cell to time
            "eta_cpu_s": (None if any(r["eta_cpu_s"] is None and r["remaining"]
                                      for r in rows if r["total"] is not None)
                          else sum(r["eta_cpu_s"] or 0.0 for r in rows if r["total"] is not None)),
            "unknown_totals": [r["name"] for r in rows if r["total"] is None],
            "unknown_eta": [r["name"] for r in rows if r["total"] is not None
                            and r["remaining"] and r["eta_cpu_s"] is None],
        },
    }


def format_status(st: Mapping) -> str:
    """``status(...)`` as a plain-text table (what ``dpsim gallery status`` prints)."""
    lines = [f"results {st['results_dir']} at scale {st['scale']} (keys of this checkout's code)", ""]
    head = ("experiment", "key", "cells", "total", "left", "CPU", "mean/cell", "ETA CPU",
            "ETA wall", "finished", "report")
    table = [head]
    for r in st["experiments"]:
        table.append((
            r["name"], r["key"], str(r["cells"]),
            "?" if r["total"] is None else str(r["total"]),
            "?" if r["remaining"] is None else str(r["remaining"]),
            _hours(r["cpu_s"]), _hours(r["mean_cpu_s"]),
            "-" if r["remaining"] == 0 else _hours(r["eta_cpu_s"]),
            "-" if r["remaining"] == 0 else _hours(r["eta_wall_s"]),
            "yes" if r["complete"] else "no",
            {None: "-", True: "yes", False: "no"}[r["report"]],
        ))
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for k, row in enumerate(table):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    t = st["total"]
    lines += ["", f"total: {t['cells']} cells, {_hours(t['cpu_s'])} CPU; wall {_hours(t['wall_s'])} "
                  f"over {t['sessions']} session(s) (raw span {_hours(t['span_s'])}); "
                  f"latest session's effective parallelism "
                  + ("?" if t["parallelism_last_session"] is None
                     else f"{t['parallelism_last_session']:.2f}")
                  + f"; last cell finished {_utc(t['last_cell'])}"
                  + ("" if t["since_last_cell_s"] is None
                     else f" ({_hours(t['since_last_cell_s'])} ago)")]
    known = [r["name"] for r in st["experiments"] if r["total"] is not None]
    if known:
        eta = ("CPU unknown until " + ", ".join(t["unknown_eta"]) + " finish a cell"
               if t["eta_cpu_s"] is None else f"≈ {_hours(t['eta_cpu_s'])} CPU"
               + ("" if not t["parallelism_last_session"] else
                  f", ≈ {_hours(t['eta_cpu_s'] / t['parallelism_last_session'])} wall"))
        lines.append(f"left in {', '.join(known)}: {t['remaining']} cells, {eta}"
                     + (f"; unknown for {', '.join(t['unknown_totals'])} (no cell_labels)"
                        if t["unknown_totals"] else ""))
    for r in st["experiments"]:
        if r["files_missing"]:
            lines.append(f"{r['name']}: {r['files_missing']} listed cell file(s) missing "
                         "(they will be recomputed)")
        for label, calls in r["in_progress"].items():
            lines.append(f"{r['name']}: {label} in progress: "
                         + "; ".join(f"simulation {c['call']} checkpointed at step {c['t']}/"
                                     f"{c['steps']} after {_hours(c['wall_s'])} "
                                     f"({_utc(c['written'])})" + _left(c) for c in calls))
        if r["other_keys"]:
            lines.append(f"{r['name']}: cells under other keys (not reused by this checkout): "
                         + ", ".join(f"{k} ({n})" for k, n in r["other_keys"].items()))
    lines.append("ETA: remaining cells x mean CPU per finished cell; wall = that / the latest "
                 "session's effective parallelism; '?' where the experiment has no cell_labels")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------
# publish and update


def publish(results_dir, figures_dir, out_dir, *, source=None, allow_partial: bool = False,
            scale: str | None = None, experiments: Sequence[str] | None = None,
            max_width: int = MAX_WIDTH, max_bytes: int = MAX_BYTES,
            gap: float = SESSION_GAP_S) -> dict:
    """Publish the reproduction in ``figures_dir`` (REPORT.md, report.json, PNGs) computed into
    ``results_dir`` as a gallery in ``out_dir`` (module docstring); returns the header data (also
    saved as ``out_dir/gallery.json``).

    scale : the scale to publish (default: the one scale of the report's sections; ``ValueError``
        when they mix scales).
    experiments : the experiments it must hold (default every registered one).
    source : the git checkout that computed the cells, for cells that do not record their
        commit; ``ValueError`` when such cells exist and ``source`` is not given.
    allow_partial : publish an incomplete reproduction, marked PARTIAL (else :class:`Incomplete`).

    ``out_dir/figures/`` keeps only this publication's PNGs (older ones are removed);
    REPORT.md, README.md and gallery.json are replaced; other files in ``out_dir`` are left alone.  Nothing is written before every check has passed."""
    results_dir, figures_dir, out_dir = Path(results_dir), Path(figures_dir), Path(out_dir)
    for label, d in (("--results", results_dir), ("--figures", figures_dir)):
        if not d.is_dir():
            raise ValueError(f"{label} {str(d)!r} does not exist or is not a folder")
    if out_dir.resolve() == figures_dir.resolve():
        raise ValueError(f"--out must differ from --figures, got {str(out_dir)!r} for both")
    entries = _report_entries(figures_dir)
    text = _report_text(figures_dir)
    if not entries or not text:
        raise ValueError(f"{figures_dir} holds no reproduction (REPORT.md and report.json "
                         "written by `dpsim reproduce`)")
    if scale is None:
        scales = sorted({str(e.get("scale")) for e in entries.values()})
        if len(scales) != 1:
            raise ValueError(f"the report in {figures_dir} mixes scales {scales}; pass --scale")
        scale = scales[0]
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; known: {', '.join(SCALES)}")
    exps = [get(n) for n in (experiments if experiments is not None else registered_names())]
    manifests, gaps = _check(exps, scale, entries, text, figures_dir, results_dir)
    if gaps and not allow_partial:
        raise Incomplete(gaps)

    # provenance
    per_exp, pooled, all_cpu, hosts, versions, src_commit = _rows(exps, manifests, entries,
                                                                   scale, source, gap)
    ss = sessions(pooled, gap)
    here = machine_info()

    # figures: every PNG the published sections name
    pngs = []
    for exp in exps:
        e = entries.get(exp.name)
        if e is None or e.get("scale") != scale:
            continue
        for f in e.get("figures", []):
            pngs += [x for x in f.get("files", []) if x.endswith(".png")
                     and (figures_dir / x).is_file()]
    pngs = list(dict.fromkeys(pngs))
    fig_dir = out_dir / _FIGURES
    stats = {}
    staging = out_dir / f".{_FIGURES}.{os.getpid()}.tmp"
    if staging.exists():
        shutil.rmtree(staging)
    try:
        for x in pngs:
            stats[x] = shrink_png(figures_dir / x, staging / x, max_width=max_width,
                                  max_bytes=max_bytes)
        if fig_dir.exists():
            shutil.rmtree(fig_dir)
        staging.mkdir(parents=True, exist_ok=True)
        staging.rename(fig_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging)

    info = {
        "scale": scale,
        "partial": bool(gaps),
        "missing": gaps,
        "published": pipeline._now(),
        "commits": sorted({c for r in per_exp for c in r["commits"]}),
        "commit_source": None if src_commit is None else str(Path(source).resolve()),
        "first_cell": min((a for a, _ in pooled), default=None),
        "last_cell": max((b for _, b in pooled), default=None),
        "cpu_s": round(all_cpu, 1),
        "wall_s": round(sum(b - a for a, b in ss), 1),
        "sessions": len(ss),
        "session_gap_s": gap,
        "span_s": round((max(b for _, b in ss) - min(a for a, _ in ss)) if ss else 0.0, 1),
        "machine": here,
        "compute_hosts": sorted(hosts),
        "python": sorted(versions["python"]),
        "numpy": sorted(versions["numpy"]),
        "experiments": per_exp,
        "figures": {x: stats[x] for x in pngs},
        "figures_bytes": sum(s["bytes"] for s in stats.values()),
        "source_figures_bytes": sum(s["source_bytes"] for s in stats.values()),
        "max_width": max_width, "max_bytes": max_bytes,
    }
    body = _rewrite_links(text, {x: f"{_FIGURES}/{x}" for x in pngs})
    out_dir.mkdir(parents=True, exist_ok=True)
    pipeline._atomic_write_text(out_dir / "REPORT.md", _header(info) + "\n" + body)
    pipeline._atomic_write_text(out_dir / "gallery.json",
                                json.dumps(info, indent=1, sort_keys=True) + "\n")
    pipeline._atomic_write_text(out_dir / "README.md", _readme(info))
    return info


def update(results_dir, figures_dir, out_dir, experiments: Sequence[str], *, source=None,
           max_width: int = MAX_WIDTH, max_bytes: int = MAX_BYTES,
           gap: float = SESSION_GAP_S) -> dict:
    """Replace ``experiments`` in the gallery already published in ``out_dir`` with their new
    reproduction (``figures_dir``: REPORT.md, report.json and PNGs written by ``dpsim reproduce``
    at the gallery's scale; ``results_dir``: its cells), keeping every other experiment's section,
    figures and provenance row as published.  For a long reproduction whose raw results of the
    other experiments are gone (a new machine) when one experiment's setting changes.

    Each named experiment must be complete in ``figures_dir``/``results_dir`` (the checks of
    :func:`publish`; no partial update).  Its report section, its line of the verdict table, its
    PNGs (the old ones are removed) and its header row are replaced.  The totals: CPU time and the
    first and last cell are recomputed over the rows (the replaced run's CPU no longer counts);
    the wall time and the sessions are the published ones **plus** this update's (the replaced
    run's wall time cannot be told apart from that of the experiments computed beside it, so it
    stays counted: the header says so).  Each update is appended to ``updates`` in gallery.json
    (date, experiments, the replaced keys, cells and CPU, the new run's wall, CPU, sessions and
    commits) and listed in the header.  Returns the new header data.  Nothing is written before
    every check has passed."""
    results_dir, figures_dir, out_dir = Path(results_dir), Path(figures_dir), Path(out_dir)
    names, known, old, old_text = _update_inputs(results_dir, figures_dir, out_dir, experiments)
    scale = old["scale"]
    entries = _report_entries(figures_dir)
    text = _report_text(figures_dir)
    if not entries or not text:
        raise ValueError(f"{figures_dir} holds no reproduction (REPORT.md and report.json "
                         "written by `dpsim reproduce`)")
    exps = [get(n) for n in names]
    manifests, gaps = _check(exps, scale, entries, text, figures_dir, results_dir)
    if gaps:
        raise Incomplete(gaps)
    new = _rows(exps, manifests, entries, scale, source, gap)
    body, pngs, stale = _merged_report(old_text, text, entries, exps, names, known, figures_dir)
    stats = _swap_figures(figures_dir, out_dir, pngs, stale, max_width, max_bytes)
    info = _updated_info(old, new, names, stale, stats, source, gap)
    pipeline._atomic_write_text(out_dir / "REPORT.md", _header(info) + "\n" + body)
    pipeline._atomic_write_text(out_dir / "gallery.json",
                                json.dumps(info, indent=1, sort_keys=True) + "\n")
    pipeline._atomic_write_text(out_dir / "README.md", _readme(info))
    return info


def _update_inputs(results_dir: Path, figures_dir: Path, out_dir: Path, experiments):
    """The checks of :func:`update`'s arguments: ``(names, registered names, the published
    gallery.json, the published REPORT.md)``."""
    for label, d in (("--results", results_dir), ("--figures", figures_dir), ("--out", out_dir)):
        if not d.is_dir():
            raise ValueError(f"{label} {str(d)!r} does not exist or is not a folder")
    if out_dir.resolve() == figures_dir.resolve():
        raise ValueError(f"--out must differ from --figures, got {str(out_dir)!r} for both")
    return _published(out_dir, experiments, "update")


def _published(out_dir: Path, experiments, verb: str):
    """``(names, registered names, gallery.json, REPORT.md)`` of the gallery published in
    ``out_dir``, for ``verb`` (update / withdraw) of ``experiments``; ``ValueError`` naming what
    is wrong."""
    names = list(dict.fromkeys(experiments))
    if not names:
        raise ValueError(f"{verb} needs at least one experiment, got none")
    known = registered_names()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown experiment(s) {unknown}; known: {', '.join(known)}")
    try:
        old = json.loads((out_dir / "gallery.json").read_text())
        old_text = (out_dir / "REPORT.md").read_text()
    except (OSError, ValueError) as exc:
        raise ValueError(f"{out_dir} holds no published gallery (gallery.json and REPORT.md "
                         f"written by `dpsim gallery publish`): {exc}") from None
    if _REPORT_TITLE not in old_text:
        raise ValueError(f"{out_dir / 'REPORT.md'} has no report body ({_REPORT_TITLE!r})")
    return names, known, old, old_text


def withdraw(out_dir, experiments: Sequence[str], why: str) -> dict:
    """Withdraw ``experiments`` from the gallery published in ``out_dir``: their figures and
    verdicts no longer stand (their setting was found unable to test the claim, say) and their
    full-scale rerun is not finished.

    Each named experiment keeps its anchor and heading; its section becomes a dated notice with
    ``why`` and the commands that show the current setting (``dpsim reproduce <name> --scale
    quick``) and that will replace the notice (``dpsim gallery update``); its line of the verdict
    table reads ``withdrawn: <why>``; its PNGs are deleted (unless another section shows them);
    its provenance row is kept, marked withdrawn, and the withdrawal is appended to
    ``withdrawals`` in gallery.json and listed in the header.  A later :func:`update` of the
    experiment replaces the notice like any section.  Nothing is written before every check has
    passed.  Returns the new header data."""
    out_dir = Path(out_dir)
    if not isinstance(why, str) or not why.strip():
        raise ValueError(f"withdraw needs a reason (--why), got {why!r}")
    why = " ".join(why.split()).rstrip(".")
    if "|" in why:
        raise ValueError(f"the reason goes into a Markdown table: no '|' in it, got {why!r}")
    if not out_dir.is_dir():
        raise ValueError(f"--out {str(out_dir)!r} does not exist or is not a folder")
    names, _, old, old_text = _published(out_dir, experiments, "withdraw")
    body = old_text[old_text.index(_REPORT_TITLE):]
    pre, secs = _split_report(body)
    now = pipeline._now()
    stale = set()
    for n in names:
        row = _summary_row(pre, n)
        if row is None or n not in secs:
            raise ValueError(f"the published gallery has no section for {n} to withdraw")
        pre = pre.replace(row, f"| [{n}](#{n}) | {old['scale']} | withdrawn: {why} |", 1)
        stale |= _figure_names(secs[n])
        anchor, heading = secs[n].splitlines()[:2]
        secs[n] = "\n".join([
            anchor, heading, "",
            f"**Withdrawn** ({now}): {why}. The figures and verdicts published here before no "
            f"longer stand and were removed. `dpsim reproduce {n} --scale quick` shows the current "
            f"setting's figures and verdicts; its full-scale run (`make full`) will replace this "
            f"notice (`dpsim gallery update {n} --results ... --figures ... --out ...`).", "", ""])
    kept = set().union(*(_figure_names(sec) for n, sec in secs.items() if n not in names))
    stale -= kept
    rows = [dict(r, withdrawn=now, figures=0) if r["name"] in names else r
            for r in old["experiments"]]
    figures = {x: st for x, st in old.get("figures", {}).items() if x not in stale}
    info = dict(old)
    info.update({
        "published": now,
        "experiments": rows,
        "figures": figures,
        "figures_bytes": sum(st["bytes"] for st in figures.values()),
        "source_figures_bytes": sum(st["source_bytes"] for st in figures.values()),
        "withdrawals": list(old.get("withdrawals", [])) + [{
            "published": now, "experiments": names, "why": why,
            "keys": {r["name"]: r.get("key") for r in old["experiments"] if r["name"] in names}}],
    })
    text = (pre.rstrip("\n") + "\n\n" + "".join(secs.values())).rstrip("\n") + "\n"
    pipeline._atomic_write_text(out_dir / "REPORT.md", _header(info) + "\n" + text)
    pipeline._atomic_write_text(out_dir / "gallery.json",
                                json.dumps(info, indent=1, sort_keys=True) + "\n")
    pipeline._atomic_write_text(out_dir / "README.md", _readme(info))
    for x in stale:
        (out_dir / _FIGURES / x).unlink(missing_ok=True)
    return info


def _merged_report(old_text: str, text: str, entries: Mapping, exps, names: list, known: list,
                   figures_dir: Path):
    """``(body, pngs, stale)``: the published report body with the sections and verdict-table
    lines of ``names`` replaced by the new report's, the new PNGs to copy, and the file names of
    the figures the replaced sections showed."""
    old_body = old_text[old_text.index(_REPORT_TITLE):]
    pre, secs = _split_report(old_body)
    new_pre, new_secs = _split_report(text[text.index(_REPORT_TITLE):] if _REPORT_TITLE in text
                                      else text)
    pngs = []
    for exp in exps:
        for f in entries[exp.name].get("figures", []):
            pngs += [x for x in f.get("files", []) if x.endswith(".png")]
    pngs = list(dict.fromkeys(pngs))
    copied = {x: f"{_FIGURES}/{x}" for x in pngs}
    stale = set()
    for n in names:
        row = _summary_row(new_pre, n)
        if row is None or n not in new_secs:
            raise ValueError(f"{figures_dir / 'REPORT.md'} has no section or verdict line for {n}")
        old_row = _summary_row(pre, n)
        if old_row is None or n not in secs:
            raise ValueError(f"the published gallery has no section for {n} to replace "
                             "(publish the whole reproduction instead)")
        pre = pre.replace(old_row, row, 1)
        stale |= _figure_names(secs[n])
        secs[n] = _rewrite_links(new_secs[n], copied).rstrip("\n") + "\n\n"
    kept = set().union(*(_figure_names(sec) for n, sec in secs.items() if n not in names))
    clash = kept & set(pngs)
    if clash:
        raise ValueError(f"figure file(s) {sorted(clash)} of {names} are also shown by other "
                         "experiments of the gallery")
    order = [n for n in known if n in secs] + [n for n in secs if n not in known]
    body = (pre.rstrip("\n") + "\n\n" + "".join(secs[n] for n in order)).rstrip("\n") + "\n"
    return body, pngs, stale


def _swap_figures(figures_dir: Path, out_dir: Path, pngs: list, stale: set, max_width: int,
                  max_bytes: int) -> dict:
    """Shrink the new PNGs into a staging folder, then swap them in (the stale ones removed);
    ``{png: shrink_png's stats}``."""
    fig_dir = out_dir / _FIGURES
    staging = out_dir / f".{_FIGURES}-update.{os.getpid()}.tmp"
    if staging.exists():
        shutil.rmtree(staging)
    stats = {}
    try:
        for x in pngs:
            stats[x] = shrink_png(figures_dir / x, staging / x, max_width=max_width,
                                  max_bytes=max_bytes)
        fig_dir.mkdir(parents=True, exist_ok=True)
        for x in stale - set(pngs):
            (fig_dir / x).unlink(missing_ok=True)
        for x in pngs:
            os.replace(staging / x, fig_dir / x)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return stats


def _updated_info(old: Mapping, new: tuple, names: list, stale: set, stats: dict, source,
                  gap: float) -> dict:
    """The header data of the updated gallery: the published ``old`` with the rows of ``names``
    replaced by ``new`` (:func:`_rows` of their new run), the totals recomputed (as
    :func:`update` says) and this update appended to ``updates``."""
    new_rows, pooled, _, hosts, versions, src_commit = new
    ss = sessions(pooled, gap)
    by_name = {r["name"]: r for r in new_rows}
    replaced = {r["name"]: {k: r.get(k) for k in ("key", "cells", "cpu_s", "wall_s", "commits")}
                for r in old["experiments"] if r["name"] in by_name}
    rows = [by_name.get(r["name"], r) for r in old["experiments"]]
    rows += [r for r in new_rows if r["name"] not in {x["name"] for x in old["experiments"]}]
    figures = {x: st for x, st in old.get("figures", {}).items() if x not in stale}
    figures.update(stats)
    firsts = [r["first"] for r in rows if r.get("first") is not None]
    lasts = [r["last"] for r in rows if r.get("last") is not None]
    new_wall = round(sum(b - a for a, b in ss), 1)
    info = dict(old)
    info.update({
        "partial": bool([g for g in old.get("missing", []) if g.split(":")[0] not in names]),
        "missing": [g for g in old.get("missing", []) if g.split(":")[0] not in names],
        "published": pipeline._now(),
        "commits": sorted({c for r in rows for c in r["commits"]}),
        "commit_source": old.get("commit_source"),  # the first publication's (see _header)
        "first_cell": min(firsts, default=None),
        "last_cell": max(lasts, default=None),
        "cpu_s": round(sum(r["cpu_s"] for r in rows), 1),
        "wall_s": round(old["wall_s"] + new_wall, 1),
        "sessions": old["sessions"] + len(ss),
        "span_s": round(max(lasts) - min(firsts), 1) if firsts and lasts else 0.0,
        "machine": machine_info(),
        "compute_hosts": sorted(set(old.get("compute_hosts", [])) | hosts),
        "python": sorted(set(old.get("python", [])) | versions["python"]),
        "numpy": sorted(set(old.get("numpy", [])) | versions["numpy"]),
        "experiments": rows,
        "figures": figures,
        "figures_bytes": sum(st["bytes"] for st in figures.values()),
        "source_figures_bytes": sum(st["source_bytes"] for st in figures.values()),
        "updates": list(old.get("updates", [])) + [{
            "published": pipeline._now(), "experiments": names, "replaced": replaced,
            "wall_s": new_wall, "sessions": len(ss),
            "cpu_s": round(sum(by_name[n]["cpu_s"] for n in names), 1),
            "first": min((a for a, _ in pooled), default=None),
            "last": max((b for _, b in pooled), default=None),
            "commits": sorted({c for n in names for c in by_name[n]["commits"]}),
            "source": None if src_commit is None else str(Path(source).resolve()),
        }],
    })
    return info


# ------------------------------------------------------------------------------------------------
# Command line: `dpsim gallery publish|update|status`


def register(subparsers) -> None:
    """Add ``dpsim gallery publish|update|status`` to ``subparsers`` (an argparse subparsers action)."""
    gp = subparsers.add_parser("gallery", help="publish a finished reproduction as a small "
                                               "gallery, or show how far a long one is")
    sub = gp.add_subparsers(dest="gallery_command", metavar="publish|update|withdraw|status")
    p = sub.add_parser("publish", help="REPORT.md with provenance + small PNGs into --out")
    p.add_argument("--results", required=True, help="results cache of the reproduction")
    p.add_argument("--figures", required=True, help="its figure folder (REPORT.md, report.json)")
    p.add_argument("--out", required=True, help="gallery folder, e.g. docs/gallery")
    p.add_argument("--source", default=None,
                   help="git checkout that computed the cells (for cells without a recorded commit)")
    p.add_argument("--scale", default=None, help="scale to publish (default: the report's)")
    p.add_argument("--allow-partial", action="store_true",
                   help="publish an incomplete reproduction, marked PARTIAL")
    p.add_argument("--max-width", type=int, default=MAX_WIDTH, help=f"pixels (default {MAX_WIDTH})")
    p.add_argument("--max-bytes", type=int, default=MAX_BYTES,
                   help=f"size limit of one PNG (default {MAX_BYTES})")
    u = sub.add_parser("update", help="replace some experiments of a published gallery with "
                                      "their new reproduction, keeping the others as published")
    u.add_argument("experiments", nargs="+", help="the experiments to replace")
    u.add_argument("--results", required=True, help="results cache of their new reproduction")
    u.add_argument("--figures", required=True, help="its figure folder (REPORT.md, report.json)")
    u.add_argument("--out", required=True, help="the published gallery folder, e.g. docs/gallery")
    u.add_argument("--source", default=None,
                   help="git checkout that computed the cells (for cells without a recorded commit)")
    u.add_argument("--max-width", type=int, default=MAX_WIDTH, help=f"pixels (default {MAX_WIDTH})")
    u.add_argument("--max-bytes", type=int, default=MAX_BYTES,
                   help=f"size limit of one PNG (default {MAX_BYTES})")
    w = sub.add_parser("withdraw", help="mark some experiments of a published gallery as "
                       "withdrawn (figures and verdicts removed, the reason shown)")
    w.add_argument("experiments", nargs="+", help="the experiments to withdraw")
    w.add_argument("--out", required=True, help="the published gallery folder, e.g. docs/gallery")
    w.add_argument("--why", required=True, help="the reason, one sentence (shown in the report)")
    s = sub.add_parser("status", help="cells cached, CPU spent and ETA per experiment")
    s.add_argument("--results", required=True, help="results cache")
    s.add_argument("--scale", default="full", help=f"{' | '.join(SCALES)} (default full)")
    s.add_argument("--figures", default=None, help="figure folder: also say whether REPORT.md "
                                                   "has each experiment's section")
    s.add_argument("--json", action="store_true", help="print the status as JSON")
    gp.set_defaults(handler=handle)


def handle(args) -> int:
    """Run ``dpsim gallery publish|update|status``; a bad value raises ``ValueError`` naming it."""
    cmd = getattr(args, "gallery_command", None)
    if cmd == "status":
        st = status(args.results, args.scale, figures_dir=args.figures)
        print(json.dumps(st, indent=1) if args.json else format_status(st))
        return 0
    if cmd == "publish":
        info = publish(args.results, args.figures, args.out, source=args.source,
                       allow_partial=args.allow_partial, scale=args.scale,
                       max_width=args.max_width, max_bytes=args.max_bytes)
        print(f"{'PARTIAL ' if info['partial'] else ''}gallery: {Path(args.out) / 'REPORT.md'}; "
              f"{len(info['figures'])} PNGs, {info['figures_bytes'] / 1024:.0f} KiB; "
              f"wall {_hours(info['wall_s'])} over {info['sessions']} session(s), "
              f"CPU {_hours(info['cpu_s'])}")
        return 0
    if cmd == "update":
        info = update(args.results, args.figures, args.out, args.experiments, source=args.source,
                      max_width=args.max_width, max_bytes=args.max_bytes)
        u = info["updates"][-1]
        print(f"gallery updated: {Path(args.out) / 'REPORT.md'}; replaced "
              f"{', '.join(u['experiments'])} ({_hours(u['wall_s'])} wall, "
              f"{_hours(u['cpu_s'])} CPU); {len(info['figures'])} PNGs, "
              f"{info['figures_bytes'] / 1024:.0f} KiB")
        return 0
    if cmd == "withdraw":
        info = withdraw(args.out, args.experiments, args.why)
        w = info["withdrawals"][-1]
        print(f"gallery updated: {Path(args.out) / 'REPORT.md'}; withdrew "
              f"{', '.join(w['experiments'])}; {len(info['figures'])} PNGs left")
        return 0
    raise ValueError("gallery needs a subcommand: publish, update, withdraw or status "
                     f"(got {cmd!r})")
