"""The provenance a gallery reports, read from a results cache without writing to it: the cells
of a key folder (their times, CPU, commits and hosts), sessions of computing, the key this
checkout's code would use, the machine and the git commit; and the checks that a reproduction is
complete (:mod:`experiments.gallery` says what they are)."""

from __future__ import annotations

import datetime as _dt
import importlib
import json
import os
import platform
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from . import pipeline

#: Gap (seconds) between two computed cells above which they belong to different sessions.
SESSION_GAP_S = 600.0


def _interval(entry: Mapping) -> tuple[float, float] | None:
    """``(start, stop)`` Unix seconds of a manifest cell entry (``None`` when it has no time)."""
    if "t_start" in entry and "t_stop" in entry:
        return float(entry["t_start"]), float(entry["t_stop"])
    fin = entry.get("finished")
    if not fin:
        return None
    try:
        stop = _dt.datetime.fromisoformat(str(fin)).timestamp()
    except ValueError:
        return None
    return stop - float(entry.get("wall_time_s", 0.0)), stop


def sessions(intervals: Iterable[tuple[float, float]], gap: float = SESSION_GAP_S) -> list[tuple[float, float]]:
    """The sessions of a set of ``(start, stop)`` intervals: sorted by start, a new session begins
    at an interval that starts more than ``gap`` seconds after the latest stop so far; each
    session is ``(first start, latest stop)``.  ``Σ (stop − start)`` over them is the wall time
    spent computing, without the pauses between sessions."""
    if gap < 0:
        raise ValueError(f"gap must be >= 0 seconds, got gap={gap!r}")
    out: list[list[float]] = []
    for a, b in sorted((float(a), float(b)) for a, b in intervals):
        if out and a <= out[-1][1] + gap:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


@dataclass
class _Cells:
    """The cells of one experiment's key folder, as far as the manifest lists them."""

    manifest: dict = field(default_factory=dict)

    @property
    def cells(self) -> dict:
        c = self.manifest.get("cells", {})
        return c if isinstance(c, dict) else {}

    @property
    def cpu(self) -> float:
        return float(sum(float(e.get("cpu_time_s", 0.0)) for e in self.cells.values()))

    @property
    def intervals(self) -> list[tuple[float, float]]:
        return [iv for iv in (_interval(e) for e in self.cells.values()) if iv is not None]

    @property
    def commits(self) -> list[str]:
        """The distinct recorded commits (cell ``commit``, else the manifest's), in first-seen order."""
        seen = [e.get("commit") for e in self.cells.values()]
        seen.append(self.manifest.get("commit"))
        return list(dict.fromkeys(c for c in seen if c))

    @property
    def unrecorded(self) -> int:
        """How many cells record no commit (none of their own and no manifest commit)."""
        if self.manifest.get("commit"):
            return 0
        return sum(1 for e in self.cells.values() if not e.get("commit"))

    @property
    def hosts(self) -> list[str]:
        return sorted({str(e["worker"]).rsplit(":", 1)[0] for e in self.cells.values()
                       if e.get("worker")})

    @property
    def workers(self) -> set:
        return {str(e["worker"]) for e in self.cells.values() if e.get("worker")}


def _read_manifest(path: Path) -> dict | None:
    try:
        m = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return m if isinstance(m, dict) else None


def _in_progress(key_dir: Path, done) -> dict:
    """``{label: [{"call", "t", "steps", "wall_s", "written"}, ...]}``: the checkpoints of cells not
    yet saved (``<key>/partial/<label>/call-<k>.json``, :mod:`dpsim.checkpoint`)."""
    out: dict = {}
    part = key_dir / "partial"
    if not part.is_dir():
        return out
    for cell_dir in sorted(p for p in part.iterdir() if p.is_dir() and p.name not in done):
        calls = []
        for f in sorted(cell_dir.glob("call-*.json")):
            try:
                info = json.loads(f.read_text())
                calls.append({"call": int(f.stem.split("-")[1]), "t": int(info["t"]),
                              "steps": int(info["steps"]), "wall_s": float(info["wall_s"]),
                              "written": float(info["written"])})
            except (OSError, ValueError, KeyError, TypeError, IndexError):
                continue
        if calls:
            out[cell_dir.name] = calls
    return out


def _left(call: Mapping) -> str:
    """``", ≈ <time> left at this rate"``: the wall time a checkpointed simulation still needs at
    its average pace so far (``""`` before its first step or once it is done)."""
    t, steps, wall = call["t"], call["steps"], call["wall_s"]
    if t <= 0 or t >= steps:
        return ""
    return f", ≈ {_hours(wall * (steps - t) / t)} left at this rate"


def _current_key(exp, scale: str, backend: str) -> str:
    return pipeline.cache_key(exp.name, exp.config(scale), pipeline.numerics_version(exp), backend)


def _cell_labels(exp, scale: str) -> list[str] | None:
    """Every cell label of ``exp`` at ``scale`` when its module lists them up front, else ``None``."""
    mod = importlib.import_module(exp.module)
    fn = getattr(mod, "cell_labels", None)
    if not callable(fn):
        return None
    return list(fn(exp.config(scale)))


def _hours(s: float | None) -> str:
    if s is None:
        return "?"
    s = float(s)
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.2f} h"


def _utc(t: float | None) -> str:
    if t is None:
        return "?"
    return _dt.datetime.fromtimestamp(float(t), _dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")



def machine_info() -> dict:
    """This machine: CPU model, logical cores, RAM (GiB), OS, host name."""
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    if ram is None:
        try:
            ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            ram = None
    os_name = platform.platform()
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = f"{line.split('=', 1)[1].strip().strip(chr(34))} ({platform.system()} " \
                          f"{platform.release()})"
                break
    except OSError:
        pass
    return {"cpu": model or platform.processor() or platform.machine(),
            "logical_cores": os.cpu_count(), "ram_gib": None if ram is None else round(ram / 2**30, 1),
            "os": os_name, "host": platform.node()}


def _git(source: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(source), *args], capture_output=True, text=True,
                         timeout=60)
    if out.returncode != 0:
        raise ValueError(f"--source {str(source)!r} is not a git checkout "
                         f"(git {' '.join(args)}: {out.stderr.strip() or out.returncode})")
    return out.stdout.strip()


def source_commit(source) -> str:
    """``<full sha>`` of the checkout ``source``, with ``-dirty`` when tracked files are modified."""
    source = Path(source)
    sha = _git(source, "rev-parse", "HEAD")
    dirty = _git(source, "status", "--porcelain", "--untracked-files=no")
    return sha + ("-dirty" if dirty else "")


def _check(exps, scale: str, entries: Mapping, text: str, figures_dir: Path,
           results_dir: Path) -> tuple[dict, list[str]]:
    """``({name: manifest or None}, gaps)`` of a reproduction (:mod:`experiments.gallery`)."""
    gaps, manifests = [], {}
    for exp in exps:
        e = entries.get(exp.name)
        if e is None or e.get("scale") != scale:
            where = "" if e is None else f" (its section is at scale {e.get('scale')!r})"
            gaps.append(f"{exp.name}: no report section at scale {scale!r} in "
                        f"{figures_dir / 'report.json'}{where}")
            # for the header: the cells cached so far under this checkout's key, if any
            key = _current_key(exp, scale, e.get("backend", "numpy") if e else "numpy")
            manifests[exp.name] = _read_manifest(results_dir / exp.name / scale / key
                                                 / "manifest.json")
            continue
        if f"## {exp.name}:" not in text:
            gaps.append(f"{exp.name}: no section in {figures_dir / 'REPORT.md'}")
        rendered = {f.get("figure") for f in e.get("figures", [])}
        for fig in exp.figures:
            if fig not in rendered:
                gaps.append(f"{exp.name}: figure {fig} is not in the report (rendered by older code?)")
        for f in e.get("figures", []):
            pngs = [x for x in f.get("files", []) if x.endswith(".png")]
            if not pngs:
                gaps.append(f"{exp.name}: figure {f.get('figure')} has no PNG")
            for x in pngs:
                if not (figures_dir / x).is_file():
                    gaps.append(f"{exp.name}: figure file {figures_dir / x} is missing")
        mpath = results_dir / exp.name / scale / str(e.get("key")) / "manifest.json"
        m = _read_manifest(mpath)
        manifests[exp.name] = m
        if m is None:
            gaps.append(f"{exp.name}: results missing ({mpath} not found or unreadable)")
        elif not m.get("complete"):
            gaps.append(f"{exp.name}: the run under {mpath.parent} did not finish")
    return manifests, gaps


def _rows(exps, manifests: Mapping, entries: Mapping, scale: str, source, gap: float):
    """Per experiment, the header row (cells, CPU, wall, sessions, dates, commits, figures) of
    its manifest; with the pooled cell intervals, the total CPU, the compute hosts, the Python and
    NumPy versions and the commit read from ``source`` (``None`` when every cell records its own)."""
    src_commit = None
    per_exp = []
    pooled, all_cpu, hosts = [], 0.0, set()
    versions: dict[str, set] = {"python": set(), "numpy": set()}
    for exp in exps:
        m = manifests.get(exp.name) or {}
        c = _Cells(m)
        commits = c.commits
        # every cell that records no commit is attributed to ``source``, also when others do
        # (a run resumed by an unversioned copy of the code beside cells of a checkout)
        recorded = c.unrecorded == 0
        if c.cells and not recorded:
            if source is None:
                raise ValueError(f"{c.unrecorded} of the {len(c.cells)} cells of {exp.name} do "
                                 "not record the git commit that computed them; pass --source "
                                 "<the checkout that ran the reproduction>")
            src_commit = src_commit or source_commit(source)
            commits = list(dict.fromkeys([*commits, src_commit]))
        ivs = c.intervals
        ss = sessions(ivs, gap)
        pooled += ivs
        all_cpu += c.cpu
        hosts |= set(c.hosts)
        for k in versions:
            v = m.get("versions", {}).get(k)
            if v:
                versions[k].add(v)
        e = entries.get(exp.name) or {}
        per_exp.append({
            "name": exp.name, "key": m.get("key"), "cells": len(c.cells),
            "current_key": _current_key(exp, scale, m.get("backend") or "numpy"),
            "published": exp.name in entries and entries[exp.name].get("scale") == scale,
            "cpu_s": round(c.cpu, 1), "wall_s": round(sum(b - a for a, b in ss), 1),
            "sessions": len(ss),
            "first": min((a for a, _ in ivs), default=None),
            "last": max((b for _, b in ivs), default=None),
            "commits": commits, "commit_recorded": recorded,
            "numerics_version": m.get("numerics_version"), "backend": m.get("backend"),
            "runner": m.get("runner"), "run_wall_s": m.get("run_wall_s"),
            "figures": len(e.get("figures", [])) if e.get("scale") == scale else 0,
        })
    return per_exp, pooled, all_cpu, hosts, versions, src_commit
