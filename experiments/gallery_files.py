"""The files of a published gallery: figures re-encoded small (:func:`shrink_png`), the report's
sections and links rewritten for the gallery, and the provenance header and README
(:mod:`experiments.gallery` describes them)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Mapping

from . import pipeline
from .gallery_provenance import _hours, _utc

#: Default largest width (pixels) of a gallery PNG, and the size limit of one (bytes).
MAX_WIDTH = 1000
MAX_BYTES = 150_000
_FIGURES = "figures"


def shrink_png(src, dst, *, max_width: int = MAX_WIDTH, max_bytes: int = MAX_BYTES) -> dict:
    """Write ``src`` (a PNG) to ``dst`` small (:mod:`experiments.gallery`); ``{"width", "height", "bytes",
    "source_bytes", "colors"}``.  ``ValueError`` naming the file when it stays over ``max_bytes``."""
    from PIL import Image

    if max_width < 1 or max_bytes < 1:
        raise ValueError(f"max_width and max_bytes must be positive, got {max_width!r}, {max_bytes!r}")
    src, dst = Path(src), Path(dst)
    with Image.open(src) as im:
        im.load()
        if im.mode in ("RGBA", "LA", "P"):
            rgba = im.convert("RGBA")
            base = Image.new("RGB", rgba.size, (255, 255, 255))
            base.paste(rgba, mask=rgba.getchannel("A"))
        else:
            base = im.convert("RGB")
    width = min(max_width, base.width)
    floor = min(width, 400)
    best = None
    while True:
        h = max(1, round(base.height * width / base.width))
        scaled = base if width == base.width else base.resize((width, h), Image.Resampling.LANCZOS)
        for colors in (256, 128, 64):
            q = scaled.quantize(colors=colors, method=Image.Quantize.FASTOCTREE,
                                dither=Image.Dither.NONE)
            buf = io.BytesIO()
            q.save(buf, format="PNG", optimize=True)
            data = buf.getvalue()
            best = (data, width, h, colors)
            if len(data) <= max_bytes:
                break
        if len(best[0]) <= max_bytes or width <= floor:
            break
        width = max(floor, int(width * 0.85))
    data, w, h, colors = best
    if len(data) > max_bytes:
        raise ValueError(f"{src.name} stays at {len(data)} bytes > max_bytes={max_bytes} even at "
                         f"{w} px wide and {colors} colours")
    dst.parent.mkdir(parents=True, exist_ok=True)
    pipeline._atomic_write(dst, lambda p: Path(p).write_bytes(data))
    return {"width": w, "height": h, "bytes": len(data), "source_bytes": src.stat().st_size,
            "colors": colors}


def _report_entries(figures_dir: Path) -> dict:
    try:
        entries = json.loads((figures_dir / "report.json").read_text())
    except (OSError, ValueError):
        return {}
    return entries if isinstance(entries, dict) else {}


def _report_text(figures_dir: Path) -> str:
    try:
        return (figures_dir / "REPORT.md").read_text()
    except OSError:
        return ""


_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def _figure_names(text: str) -> set:
    """The file names of the gallery figures (``figures/...``) that ``text`` links to."""
    return {Path(m.group(3)).name for m in _LINK.finditer(text)
            if m.group(3).startswith(f"{_FIGURES}/")}


def _rewrite_links(text: str, copied: Mapping[str, str]) -> str:
    """Image and file links of REPORT.md pointed at the gallery: a copied PNG goes to its new
    relative path; a link to a file not copied (a PDF, a missing PNG) becomes plain text, and an
    ``Also:`` line left without links is dropped.  Anchors (``#...``) and URLs are kept."""

    def repl(m):
        bang, label, target = m.groups()
        if target.startswith("#") or re.match(r"^[a-z][a-z0-9+.-]*:", target):
            return m.group(0)
        name = Path(target).name
        if name in copied:
            return f"{bang}[{label}]({copied[name]})"
        if bang:
            return f"*(figure `{name}` missing from this reproduction)*"
        return f"`{label}`"

    out = []
    for line in text.splitlines():
        new = _LINK.sub(repl, line)
        if line.startswith("Also: ") and _LINK.search(line) and not _LINK.search(new):
            if out and out[-1] == "":
                out.pop()  # the blank line before it
            continue
        out.append(new)
    return "\n".join(out) + "\n"


_ANCHOR = re.compile(r'^<a id="([^"]+)"></a>$', re.M)
_REPORT_TITLE = "# dpsim reproduction report"


def _split_report(body: str) -> tuple[str, dict[str, str]]:
    """``(preamble, {experiment: section})`` of a report body (``write_report``'s layout): a
    section runs from its ``<a id="name"></a>`` line to the next one or the end, and is returned
    ending in exactly one blank line."""
    found = list(_ANCHOR.finditer(body))
    pre = body[:found[0].start()] if found else body
    secs = {}
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(body)
        secs[m.group(1)] = body[m.start():end].rstrip("\n") + "\n\n"
    return pre, secs


def _summary_row(preamble: str, name: str) -> str | None:
    """The line of ``name`` in the report's verdict table (``None`` when it has none)."""
    for line in preamble.splitlines():
        if line.startswith(f"| [{name}](#{name}) |"):
            return line
    return None


def _readme(info: Mapping) -> str:
    """``out_dir/README.md``: what the folder holds, in a few lines (the index a browser shows)."""
    commits = ", ".join(f"`{c[:12]}`" for c in info["commits"]) or "?"
    return "\n".join([
        "# Reproduction gallery",
        "",
        f"{'**PARTIAL** ' if info['partial'] else ''}reproduction at scale `{info['scale']}`, "
        f"code {commits}; cells computed {_utc(info['first_cell'])} → {_utc(info['last_cell'])}, "
        f"{_hours(info['wall_s'])} wall over {info['sessions']} session(s), "
        f"{_hours(info['cpu_s'])} CPU.",
        "",
        "- [REPORT.md](REPORT.md): provenance (commit, dates, machine, times, cells per "
        "experiment), then every figure with its claim, measurement and verdict",
        f"- [figures/](figures/): the {len(info['figures'])} figures as small PNGs",
        "- [gallery.json](gallery.json): the provenance data",
        "",
        "Written by `dpsim gallery publish` (`experiments/gallery.py`).",
        "",
    ])


def _header(info: Mapping) -> str:
    """The provenance block put before the report (:mod:`experiments.gallery`)."""
    m = info["machine"]
    per = info["experiments"]
    commits_differ = len({tuple(r["commits"]) for r in per if r["commits"]}) > 1
    lines = [f"# dpsim reproduction gallery: scale `{info['scale']}`", ""]
    if info["partial"]:
        lines += ["> **PARTIAL.** This reproduction is incomplete; missing:", ">"]
        lines += [f"> - {g}" for g in info["missing"]]
        lines += [""]
    # checkouts read for cells without a recorded commit: the first publication's, then each
    # update's (an update whose cells record their commits read none)
    sources = [src for src in [info.get("commit_source")]
               + [u.get("source") for u in info.get("updates", [])] if src]
    if not sources:
        how = " (recorded with every cell)"
    elif not info.get("updates"):
        how = (f" (the cells do not record their commit: this is the checkout "
               f"`{sources[0]}` that ran them, read when publishing)")
    else:
        how = (" (where cells do not record their commit, read from the checkout that ran them: "
               + ", ".join(f"`{src}`" for src in dict.fromkeys(sources)) + "; the others recorded"
               " with their cells)")
    commit_text = ", ".join(f"`{c}`" for c in info["commits"]) or "none (no cells)"
    hosts = ", ".join(info["compute_hosts"]) or "?"
    lines += [
        "| | |",
        "|---|---|",
        f"| code | commit {commit_text}{how}"
        + ("; per experiment below" if commits_differ else "") + " |",
        f"| cells computed | {_utc(info['first_cell'])} → {_utc(info['last_cell'])} |",
        f"| wall time | {_hours(info['wall_s'])} computing, over {info['sessions']} session(s) "
        f"(a pause over {info['session_gap_s'] / 60:g} min starts a new one); "
        f"first → last cell {_hours(info['span_s'])}"
        + ("; the runs replaced by the updates below included" if info.get("updates") else "")
        + " |",
        f"| CPU time | {_hours(info['cpu_s'])} (sum over every cell of the CPU time of the "
        "thread that computed it) |",
        f"| machine | {m['cpu']}, {m['logical_cores']} logical cores, {m['ram_gib']} GiB RAM, "
        f"{m['os']} (host `{m['host']}`, where this was published; cells computed on host(s) "
        f"{hosts}) |",
        f"| software | Python {', '.join(info['python']) or '?'}, NumPy "
        f"{', '.join(info['numpy']) or '?'} (from the results' manifests) |",
        f"| figures | {len(info['figures'])} PNGs, {info['figures_bytes'] / 1024:.0f} KiB in all "
        f"(re-encoded from {info['source_figures_bytes'] / 1024:.0f} KiB: at most "
        f"{info['max_width']} px wide, palette, each ≤ {info['max_bytes'] / 1000:.0f} kB); "
        "PDFs and raw results are not included |",
        f"| published | {info['published']} by `dpsim gallery publish`"
        + (" and `dpsim gallery update`" if info.get("updates") else "") + " |",
    ]
    for u in info.get("updates", []):
        gone = "; ".join(f"{n} (`{str(r.get('key'))}`: {r.get('cells')} cells, "
                         f"{_hours(r.get('cpu_s'))} CPU)" for n, r in u["replaced"].items())
        lines.append(
            f"| update {u['published']} | recomputed {', '.join(u['experiments'])}: "
            f"{_hours(u['wall_s'])} wall over {u['sessions']} session(s), {_hours(u['cpu_s'])} "
            f"CPU, cells {_utc(u['first'])} → {_utc(u['last'])}, commit "
            f"{', '.join(f'`{c[:12]}`' for c in u['commits']) or '-'}; replaced {gone or 'nothing'}"
            " (its CPU time is no longer counted; its wall time is, within the total above) |")
    for w in info.get("withdrawals", []):
        lines.append(f"| withdrawn {w['published']} | {', '.join(w['experiments'])}: {w['why']} "
                     "(their sections say what replaces them) |")
    lines += [
        "",
        "| experiment | cells | CPU | wall (sessions) | first → last cell | commit | figures |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in per:
        commit = ", ".join(f"`{c[:12]}`" for c in r["commits"]) or "-"
        lines.append(
            f"| {r['name']}{'' if r['published'] else ' (missing)'}"
            f"{' (withdrawn)' if r.get('withdrawn') else ''} | {r['cells']} | "
            f"{_hours(r['cpu_s'])} | {_hours(r['wall_s'])} ({r['sessions']}) | "
            f"{_utc(r['first'])} → {_utc(r['last'])} | {commit} | {r['figures']} |")
    stale = [r for r in per if r["key"] and r["key"] != r["current_key"]]
    if stale:
        lines += ["", "Computed with another config or numerics version than the publishing "
                  "checkout's (its cache key differs): "
                  + ", ".join(f"{r['name']} (`{r['key']}`, now `{r['current_key']}`)"
                              for r in stale) + "."]
    lines += ["", "---", ""]
    return "\n".join(lines)
