"""Render docs/performance.md from the benchmarks' JSON records (issue 35).

    python tools/perf_page.py [--results DIR] [--out FILE] [--check]

Reads every run folder under ``benchmarks/results/`` (``<UTC date>-<commit>[-dirty]/<bench>.json``,
written by ``make bench`` through ``benchmarks/_record.py``) and writes one dated section per
measured state, newest first, with one table per benchmark and the run's machine, software and
load.  The output depends on the JSON alone (sorted, fixed number formats), so
``tests/project/test_perf_page.py`` checks that the committed page equals a fresh render.

``--results`` defaults to ``$BENCH_RESULTS`` or ``benchmarks/results``; ``--out`` to
``docs/performance.md``, or ``$BENCH_RESULTS/performance.md`` when ``BENCH_RESULTS`` redirects a
trial run.  ``--check`` writes nothing and exits 1 when the page differs from a fresh render.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "performance.md"

#: the benchmarks of ``make bench``, in its order: (title, what it measures)
BENCHES = {
    "machine_limits": (
        "Machine limits",
        "one-thread float64 GEMM GFLOP/s and Gaussian-sampling rates (NumPy's `standard_normal`, "
        "dpsim's inlined PCG64 + ziggurat, the blocked layout), on the wall and CPU clocks: the "
        "ceilings the other benchmarks are read against."),
    "bench_small_d": (
        "Small d",
        "trial-steps per second of the fused small-d kernel against the chain engine (least squares "
        "d = 20, logistic d = 100, a 2-d quadratic; R = 1, 256, 4096), the step loop alone on the "
        "CPU clock, with the fraction of the in-run roofline and each optimizer's speed relative "
        "to `dp_sgd`."),
    "bench_dp_sgd": (
        "Workload W",
        "DP-SGD on sparse logistic regression (n = 25 000, d = 10 000, density 1 %, b = 64, "
        "R = 64) against the single-core Gaussian-sampling ceiling measured in the same run: "
        "batching speed-up over R = 1, the fused release against the chain, the blocked noise "
        "backend, the naive per-example loop."),
    "bench_variants": (
        "Every optimizer relative to DP-SGD at W",
        "steps × trials per second of every registered optimizer at workload W and its ratio to "
        "`dp_sgd` in the same process."),
    "bench_memory": (
        "Peak memory at W",
        "the peak memory of one run above its base (traced and resident), in units of one (R, d) "
        "float64 array."),
    "bench_correlated": (
        "Correlated noise at W",
        "DP-MF noise (`banded:4`): the chain's CPU time per step over the fused release's, in "
        "interleaved pairs."),
    "bench_overhead": (
        "Overhead of `simulate`",
        "the per-call cost outside the kernels on a tiny problem, the import time of `dpsim`, and "
        "the default record schedule's share of a workload-W run."),
}
NONE = "–"


# ----------------------------------------------------------------------------------- formats
def num(x, sig: int = 3) -> str:
    """A number to ``sig`` significant figures, thousands grouped by spaces; ``–`` for None."""
    if x is None:
        return NONE
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}".replace(",", " ")
    x = float(x)
    if x != 0 and abs(x) >= 10 ** (sig - 1):
        return f"{x:,.0f}".replace(",", " ")
    if x != 0 and abs(x) < 1e-3:
        return f"{x:.{sig - 1}e}"
    s = f"{x:#.{sig}g}"
    return s.rstrip(".") if "e" not in s else s


def pct(x) -> str:
    return NONE if x is None else f"{100 * x:.0f} %"


def times(x, digits: int = 2) -> str:
    return NONE if x is None else f"{x:.{digits}f}×"


def spread(med, lo, hi, digits: int = 2) -> str:
    if med is None:
        return NONE
    return f"{med:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    def cell(c):
        return str(c).replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return out


def _get(d, *keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


# ------------------------------------------------------------------------- benchmark tables
def t_machine_limits(res: dict, doc: dict) -> list[str]:
    def rate(k):
        return NONE if res.get(k) is None else f"{num(res[k] / 1e6)} M/s"

    rows = [
        ["GEMM, float64, one BLAS thread (wall clock)", f"{num(res.get('gemm_gflops'))} GFLOP/s"],
        ["GEMM, CPU clock", f"{num(res.get('gemm_gflops_cpu'))} GFLOP/s"],
        ["normals, NumPy `standard_normal`, float64, one thread", rate("normals_per_s")],
        ["normals, NumPy, float32", rate("normals_per_s_f32")],
        ["normals, NumPy, float64, CPU clock", rate("normals_per_s_cpu")],
        ["normals, dpsim's inlined PCG64 + ziggurat (`dpsim._bitgen`), one thread",
         rate("inlined_normals_per_s")],
        [f"normals, blocked layout ({res.get('blocked_threads', NONE)} threads)",
         rate("blocked_normals_per_s")],
    ]
    return table(["limit", "this run"], rows)


def t_small_d(res: dict, doc: dict) -> list[str]:
    rel = {(r["problem"], r["optimizer"], r["R"]): r["speed_relative_to_dp_sgd"]
           for r in res.get("relative_to_dp_sgd", [])}
    rows = []
    for r in res.get("rows", []):
        key = (r["problem"], r["optimizer"], r["R"])
        eng, fus = r.get("engine_step_cpu_s"), r.get("fused_step_cpu_s")
        roof = r.get("fused_roofline_frac_cpu", r.get("engine_roofline_frac_cpu"))
        rows.append([r["problem"], f"`{r['optimizer']}`", num(r["R"]),
                     num(r.get("engine_trial_steps_per_s_cpu")), num(r.get("fused_trial_steps_per_s_cpu")),
                     num(r.get("fused_trial_steps_per_s_wall")),
                     times(eng / fus, 1) if eng and fus else NONE, pct(roof),
                     times(1.0) if r["optimizer"] == "dp_sgd" else times(rel.get(key))])
    lines = table(["problem", "optimizer", "R", "chain engine trial-steps/s (CPU)",
                   "fused trial-steps/s (CPU)", "fused trial-steps/s (wall)", "fused / chain (CPU)",
                   "% of roofline (CPU)", "speed vs `dp_sgd` (CPU)"], rows)
    roof = res.get("roofline_rates") or {}
    if roof:
        lines += ["", f"Roofline rates of this run (CPU clock, the faster of before and after): GEMM "
                      f"{num(roof.get('gemm_gflops'))} GFLOP/s, "
                      f"{num((roof.get('normals_per_s') or 0) / 1e6)} M NumPy normals/s."]
    return lines


def t_dp_sgd(res: dict, doc: dict) -> list[str]:
    g = res.get
    ceil = g("b_gaussian_ceiling_steps_trials_per_s")
    rows = [
        [f"(a) per-trial speed-up of one R = {g('R')} run over R = 1 runs",
         times(g("a_per_trial_speedup_R_over_1"), 1)],
        ["(b) steps × trials per second, fused release", num(g("b_steps_trials_per_s"))],
        ["single-core Gaussian ceiling (NumPy's `standard_normal`, R·d normals a step)", num(ceil)],
        ["(b) fraction of that ceiling (CPU clock)",
         f"{pct(g('b_fraction_of_ceiling'))} ({pct(g('b_cpu_clock_fraction_of_ceiling'))})"],
        ["(b) fraction of the ceiling of dpsim's inlined draws", pct(g("b_fraction_of_inlined_ceiling"))],
        ["(b1) chain engine (`FUSED_RELEASE = False`): fraction of the ceiling (CPU clock)",
         f"{pct(g('b1_chain_fraction_of_ceiling'))} ({pct(g('b1_chain_cpu_clock_fraction_of_ceiling'))})"],
        ["(b1) fused release over the chain, wall (CPU clock)",
         f"{times(g('b1_fused_over_chain'))} ({times(g('b1_fused_over_chain_cpu_clock'))})"],
        ["(c) speed-up over the naive per-trial, per-example loop", times(g("c_speedup_over_naive"), 0)],
        [f"R = {g('R')} run, seconds (fused release, no records)", num(g("run_R_s"))],
        [f"R = {g('R')} run with the default records (about 100), seconds",
         num(g("run_R_default_recording_s"))],
    ]
    if g("b2_blocked_backend"):
        rows.insert(7, [f"(b2) `{g('b2_blocked_backend')}`: fraction of the single-core ceiling",
                        pct(g("b2_fraction_of_single_core_ceiling"))])
    cap = (f"{g('problem')}, b = {g('batch_size')}, R = {g('R')}, {g('steps')} steps, "
           f"{g('backend')}/{g('dtype')}.")
    return [cap, ""] + table(["quantity", "this run"], rows)


def t_variants(res: dict, doc: dict) -> list[str]:
    rates, ratio = res.get("rates", {}), res.get("ratio_to_dp_sgd", {})
    steps, paired = res.get("steps", {}), res.get("paired") or {}
    same = res.get("ratio_to_dp_sgd_same_batch", {})
    names = sorted(rates, key=lambda k: (-(ratio.get(k) or 0), k))
    head = ["optimizer", "steps", "steps × trials/s", "vs `dp_sgd` (one run)"]
    if paired:
        head += ["paired vs `dp_sgd`, wall: median [min, max]", "paired, CPU clock"]
    rows = []
    for k in names:
        cell = times(ratio.get(k), 3) + (f" ({times(same[k], 3)} vs `dp_sgd` at its batch size)"
                                         if k in same else "")
        row = [f"`{k}`", num(steps.get(k)), num(rates[k]), cell]
        if paired:
            p = paired.get(k)
            row += [spread(*(p["wall"][s] for s in ("median", "min", "max"))) if p else NONE,
                    spread(*(p["cpu"][s] for s in ("median", "min", "max"))) if p else NONE]
        rows.append(row)
    for k, err in sorted((res.get("errors") or {}).items()):
        rows.append([f"`{k}`", NONE, "failed: " + err, NONE] + ([NONE, NONE] if paired else []))
    return table(head, rows)


def t_memory(res: dict, doc: dict) -> list[str]:
    unit = res.get("unit_bytes")
    rows = [[f"`{k}`", num(r["base_rss_bytes"] / 2**20), num(r["traced_peak_units"]),
             num(r["rss_peak_units"])] for k, r in res.get("rows", {}).items()]
    p = doc.get("params", {})
    cap = (f"R = {p.get('trials', NONE)}, {p.get('steps', NONE)} steps; unit R·d·8 B = "
           f"{num(unit / 2**20) if unit else NONE} MiB; "
           f"{'no records' if p.get('no_records') else 'records at the first and last step'}; "
           f"{'chain engine' if p.get('chain') else 'fused release'}.")
    return [cap, ""] + table(["optimizer", "base RSS (MiB)", "traced peak above base (units)",
                              "RSS peak above base (units)"], rows)


def t_correlated(res: dict, doc: dict) -> list[str]:
    rows = [[f"`{r['optimizer']}`", r.get("noise", NONE),
             spread(r["speedup_median"], r["speedup_min"], r["speedup_max"]),
             num(r.get("last_chain_ms_per_step")), num(r.get("last_fused_ms_per_step"))]
            for r in res.get("rows", [])]
    return table(["optimizer", "noise", "chain / fused, CPU: median [min, max]",
                  "last pair: chain ms/step", "fused ms/step"], rows)


def t_overhead(res: dict, doc: dict) -> list[str]:
    rows = []
    for k, r in (res.get("per_call") or {}).items():
        if k.startswith("_") or not isinstance(r, dict):
            continue
        rows.append([f"(1) `simulate`, {k.replace('|', ', ')}",
                     f"{num(r['simulate_ms'])} ms ({num(r['outside_accounting_ms'])} ms outside accounting)"])
    imp = res.get("import") or {}
    if imp:
        rows.append(["(2) `import dpsim` (`import numba` alone)",
                     f"{num(imp.get('import_dpsim_s'))} s ({num(imp.get('import_numba_s'))} s)"])
        rows.append(["(2) heavy modules `import dpsim` loads",
                     ", ".join(f"`{m}`" for m in imp.get("heavy_modules_loaded") or []) or "none"])
    w = res.get("w") or {}
    for T, r in (w.get("runs") or {}).items():
        rows.append([f"(3) W, T = {T}: the default records' share of the run ({r['records']} records)",
                     f"{pct(r['share'])} ({num(r['default_records_s'])} s with records, "
                     f"{num(r['loop_s'])} s without)"])
    return table(["quantity", "this run"], rows)


RENDER = {"machine_limits": t_machine_limits, "bench_small_d": t_small_d, "bench_dp_sgd": t_dp_sgd,
          "bench_variants": t_variants, "bench_memory": t_memory, "bench_correlated": t_correlated,
          "bench_overhead": t_overhead}


def _flat(d, prefix=""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from _flat(v, f"{prefix}{k}.")
        elif not isinstance(v, list):
            yield f"{prefix}{k}", v


def t_generic(res: dict, doc: dict) -> list[str]:
    """A benchmark without its own table: its scalar results."""
    return table(["quantity", "this run"], [[f"`{k}`", num(v) if isinstance(v, (int, float)) else str(v)]
                                            for k, v in _flat(res)])


# ------------------------------------------------------------------------------------- runs
def load_runs(results: Path) -> list[tuple[str, list[dict]]]:
    """``[(run folder name, [records])]``, newest first (by the run's earliest start, then name);
    records in ``make bench``'s order."""
    runs = []
    if results.is_dir():
        for folder in sorted(p for p in results.iterdir() if p.is_dir()):
            docs = [json.loads(f.read_text()) for f in sorted(folder.glob("*.json"))]
            docs = [d for d in docs if isinstance(d, dict) and "results" in d]
            if docs:
                order = list(BENCHES)
                docs.sort(key=lambda d: (order.index(d["bench"]) if d.get("bench") in order else len(order),
                                         str(d.get("bench"))))
                runs.append((folder.name, docs))
    runs.sort(key=lambda r: (min(str(d.get("started_utc") or "") for d in r[1]), r[0]), reverse=True)
    return runs


def _distinct(docs, fn) -> str:
    """``fn``'s value for the run; where benchmarks differ, each value with the benchmarks it
    holds for (the most common first)."""
    groups: dict[str, list[str]] = {}
    for d in docs:
        groups.setdefault(fn(d), []).append(str(d.get("bench")))
    if len(groups) == 1:
        return next(iter(groups))
    order = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return "; ".join(f"{v} ({', '.join(b)})" for v, b in order)


def _machine(d) -> str:
    m = d.get("machine") or {}
    mem = f", {num(m['memory_gib'])} GiB memory" if m.get("memory_gib") is not None else ""
    usable = (f" ({m['usable_cpus']} usable)" if m.get("usable_cpus") not in (None, m.get("cpus")) else "")
    return f"{m.get('cpu_model', '?')}, {m.get('cpus', '?')} CPUs{usable}{mem}; {m.get('platform', '?')}"


def _software(d) -> str:
    s = d.get("software") or {}
    return ", ".join(f"{k} {s.get(k) or '?'}" for k in ("python", "numpy", "numba", "dpsim"))


def _threads(d) -> str:
    t = d.get("threads_env") or {}
    return ", ".join(f"`{k}={v}`" for k, v in t.items() if v is not None) or "none set"


def _load(x) -> str:
    return NONE if not x else f"{x[0]:.2f}"


def _date(name: str, docs: list[dict]) -> str:
    """The run's UTC date: its earliest start (the folder name's date if none is recorded)."""
    return min(str(d.get("started_utc") or "") for d in docs)[:10] or name[:10]


def run_section(name: str, docs: list[dict]) -> list[str]:
    first = docs[0]
    git = first.get("git") or {}
    date = _date(name, docs)
    dirty = any((d.get("git") or {}).get("dirty") for d in docs)
    state = (f"commit `{git['short']}`" if git.get("short") else "no git commit") + (
        " with uncommitted changes" if dirty else "")
    lines = [f"## {date} · {state}", "",
             f"Run folder `benchmarks/results/{name}/`"
             + (f"; commit {git['commit']}" if git.get("commit") else "") + ".", "",
             f"- **Machine**: {_distinct(docs, _machine)}",
             f"- **Software**: {_distinct(docs, _software)}",
             f"- **BLAS/Numba threads**: {_distinct(docs, _threads)}", ""]
    if dirty:
        lines += ["The tree had uncommitted changes: these numbers belong to no commit exactly.", ""]
    rows = [[BENCHES.get(d.get("bench"), (str(d.get("bench")),))[0],
             "`" + " ".join(["python", f"benchmarks/{d.get('bench')}.py", *d.get("argv", [])]) + "`",
             str(d.get("started_utc") or NONE), f"{num(d.get('duration_s'))} s",
             f"{_load((d.get('load') or {}).get('start'))} → {_load((d.get('load') or {}).get('end'))}"]
            for d in docs]
    lines += table(["benchmark", "command", "started (UTC)", "took", "load average (1 min), start → end"],
                   rows) + [""]
    for d in docs:
        title = BENCHES.get(d.get("bench"), (str(d.get("bench")),))[0]
        lines += [f"### {title} ({date})", ""]
        lines += RENDER.get(d.get("bench"), t_generic)(d["results"], d) + [""]
    return lines


def render(results: Path = RESULTS) -> str:
    runs = load_runs(Path(results))
    lines = [
        "<!-- Generated by tools/perf_page.py from benchmarks/results/*/*.json: do not edit. "
        "Run `make bench` to measure and re-render. -->",
        "",
        "# Performance",
        "",
        "This page is generated from the JSON records that `make bench` writes, one folder per "
        "measured state: `benchmarks/results/<UTC date>-<commit>[-dirty]/<benchmark>.json` "
        "(the layout: `benchmarks/results/README.md`).  Each section below is one such run, newest "
        "first, with the machine it ran on and the load average at the start and end of every "
        "benchmark.",
        "",
        "**Rerun**: `make bench` (one BLAS thread) measures every benchmark below, "
        "records it and re-renders this page (`python tools/perf_page.py`); commit the new run "
        "folder with the page.  Run it on a quiet machine: the benchmarks keep one core busy, so "
        "a load average near 1 is their own; a load well above that means other work shared the "
        "machine and the absolute rates are low.",
        "",
        "**Ratios are measured within one run**: every benchmark times what it compares "
        "interleaved, in the same process, next to the machine's own limits measured in the same "
        "run.  Quote those ratios; absolute rates move with the machine and its load, and two runs "
        "on different machines or days compare only through their ratios.",
        "",
        "The hand-kept log of earlier states (waves 1–2, with the reasons for the fast paths) is "
        "[performance-history.md](performance-history.md).",
        "",
    ]
    lines += table(["benchmark", "script", "measures"],
                   [[title, f"`benchmarks/{b}.py`", what] for b, (title, what) in BENCHES.items()])
    lines += [""]
    if not runs:
        lines += ["## Measured states", "", "No measured state yet: run `make bench`.", ""]
    else:
        lines += ["## Measured states", ""]
        lines += [f"- {_date(name, docs)} · `{name}`" for name, docs in runs]
        lines += [""]
        for name, docs in runs:
            lines += run_section(name, docs)
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    env = os.environ.get("BENCH_RESULTS")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, default=Path(env) if env else RESULTS)
    ap.add_argument("--out", type=Path, default=Path(env) / "performance.md" if env else PAGE)
    ap.add_argument("--check", action="store_true", help="exit 1 if --out differs from a fresh render")
    args = ap.parse_args(argv)
    text = render(args.results)
    if args.check:
        same = args.out.exists() and args.out.read_text() == text
        print(f"{args.out}: {'up to date' if same else 'differs from a fresh render'}")
        return 0 if same else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out} ({len(load_runs(args.results))} measured states)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
