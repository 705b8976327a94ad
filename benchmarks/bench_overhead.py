"""Rerunnable benchmark: the cost of ``simulate`` outside its kernels (issue 32, item 6).

    OMP_NUM_THREADS=1 python benchmarks/bench_overhead.py [--quick] [--json OUT]
        [--w-steps 200 500] [--w-scale 1.0] [--old-default]

Three numbers, each measured in this one run:

(1) **per-call overhead**: ``simulate`` on a tiny problem (least squares, n = 50, d = 3, R = 2,
    b = 8, DP-SGD) with ``steps = 0`` and ``steps = 1``, on the small-d block kernel
    (``fast=None``) and on the chain engine (``fast=False``), with the default metrics and with
    ``metrics=()``: the best of several ``timeit`` rounds per call, and the same for
    :func:`dpsim.accounting.privacy_record` with the run's arguments (the accounting, whose cost
    belongs to :mod:`dpsim.accounting`, is subtracted: "outside accounting").
(2) **import time**: ``python -X importtime -c "import dpsim"`` (the cumulative time of
    ``dpsim``), best of ``--import-runs`` fresh interpreters, next to ``import numba`` alone (the
    floor: the engine needs Numba), and which heavy modules ``import dpsim`` loaded.
(3) **the default record schedule's share of a workload-W run** (``benchmarks/bench_dp_sgd.py``:
    DP-SGD on ``logistic_regression(n=25 000, d=10 000, density=0.01)``, b = 64, R = 64):
    in a run with the default records (``record_every=None``, default metrics), the time spent in
    the records' full-data passes over the run's wall time, measured inside that run (the
    problem's ``loss``/``grad``/``loss_and_grad`` timed; median of ``--repeats`` runs), next to
    the same run recording nothing (``metrics=()``).  ``--old-default`` also times the schedule before issue 32
    (``record_every = T // 100``, ~100 records; slow: about 15x the loop).  The problem's
    optimum (a Newton solve, ~1 s at W, made once per problem) is computed before the timings
    and reported apart.  ``--w-scale s`` shrinks n and d by ``s`` (a quicker, smaller W).

On a shared machine quote the ratios; every figure of one section is measured interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import timeit

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _record  # noqa: E402
import dpsim  # noqa: E402
from _timing import W, W_BATCH, W_TRIALS, w_dp_sgd, w_label, workload_w  # noqa: E402
from dpsim import accounting, engine, optimizers, problems  # noqa: E402

HEAVY_MODULES = ("dp_accounting", "xarray", "tqdm", "scipy.stats", "scipy.signal", "scipy.optimize",
                 "scipy.linalg", "scipy.sparse", "dpsim.optimizers", "dpsim.problems",
                 "dpsim.accounting", "dpsim.transforms")


def per_call(repeats: int, number: int) -> dict:
    prob = problems.least_squares(50, 3, seed=0)
    opt = optimizers.get("dp_sgd", lr=0.1, clip=1.0, noise_multiplier=1.0)
    b, R = 8, 2
    out = {}
    for fast in (None, False):
        for metrics in ("default", "none"):
            for steps in (0, 1):
                kw = dict(steps=steps, batch_size=b, trials=R, seed=0, fast=fast)
                if metrics == "none":
                    kw["metrics"] = ()
                res = dpsim.simulate(prob, opt, **kw)  # warm: compilation, caches, imports

                def call():
                    dpsim.simulate(prob, opt, **kw)

                def acc():
                    accounting.privacy_record(opt.events, None, steps=steps, sample_rate=b / prob.n,
                                              sampling="poisson", trials=R)

                t_call = t_acc = float("inf")
                for _ in range(repeats):  # interleaved rounds
                    t_call = min(t_call, timeit.timeit(call, number=number) / number)
                    t_acc = min(t_acc, timeit.timeit(acc, number=number) / number)
                key = f"{res.config['engine']}|metrics={metrics}|steps={steps}"
                out[key] = {"simulate_ms": 1e3 * t_call, "privacy_record_ms": 1e3 * t_acc,
                            "outside_accounting_ms": 1e3 * (t_call - t_acc)}
    t_versions = min(timeit.repeat(engine._versions, number=number, repeat=repeats)) / number
    out["_versions_ms"] = 1e3 * t_versions
    return out


def _importtime(stmt: str, module: str) -> float:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # time the import as installed (with .pyc files)
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", stmt], env=env,
                         capture_output=True, text=True, check=True).stderr
    for line in err.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S+)$", line)
        if m and m.group(2) == module:
            return int(m.group(1)) / 1e6
    raise RuntimeError(f"no importtime line for {module!r}")


def import_time(runs: int) -> dict:
    t_dpsim = t_numba = float("inf")
    for _ in range(runs):
        t_dpsim = min(t_dpsim, _importtime("import dpsim", "dpsim"))
        t_numba = min(t_numba, _importtime("import numba", "numba"))
    code = ("import sys, json, dpsim; print(json.dumps([m for m in %r if m in sys.modules]))"
            % (HEAVY_MODULES,))
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                       check=True).stdout)
    return {"import_dpsim_s": t_dpsim, "import_numba_s": t_numba, "heavy_modules_loaded": loaded}


class _RecordClock:
    """Times the full-data passes of the records inside a run: the problem's ``loss``, ``grad``
    and ``loss_and_grad`` (instance attributes over the methods; the NumPy float64 run uses the
    host problem itself), so a record's share is measured within the same run (paired)."""

    def __init__(self, prob):
        self.prob, self.s = prob, 0.0
        for name in ("loss", "grad", "loss_and_grad"):
            setattr(prob, name, self._timed(getattr(prob, name)))

    def _timed(self, fn):
        def timed(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.s += time.perf_counter() - t0
        return timed

    def close(self):
        for name in ("loss", "grad", "loss_and_grad"):
            delattr(self.prob, name)


def w_share(steps_list, repeats: int, scale: float, old_default: bool) -> dict:
    prob, build = workload_w(scale=scale)
    t0 = time.perf_counter()
    prob.optimum
    optimum = time.perf_counter() - t0
    opt = w_dp_sgd()
    R, b = W_TRIALS, W_BATCH
    clock = _RecordClock(prob)

    def run(T, **kw):
        clock.s = 0.0
        t0 = time.perf_counter()
        res = dpsim.simulate(prob, opt, steps=T, batch_size=b, trials=R, seed=0, **kw)
        return time.perf_counter() - t0, clock.s, res

    run(2, metrics=())  # warm-up: compilation
    out = {"problem": w_label(prob.n, prob.d, W["density"]), "R": R, "batch_size": b,
           "problem_build_s": build, "optimum_s": optimum, "runs": {}}
    try:
        for T in steps_list:
            shares, walls, loops = [], [], []
            for _ in range(repeats):
                loops.append(run(T, metrics=(), record_every=T)[0])
                wall, rec, res = run(T)
                shares.append(rec / wall)
                walls.append(wall)
            row = {"loop_s": min(loops), "default_records_s": min(walls), "records": int(res.steps.size),
                   "record_every": int(res.config["record_every"] or T),
                   "share": float(np.median(shares)), "shares": shares}
            if old_default:
                wall, rec, res = run(T, record_every=max(1, T // 100))
                row.update(old_default_s=wall, old_records=int(res.steps.size), old_share=rec / wall)
            out["runs"][str(T)] = row
    finally:
        clock.close()
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer rounds; W at T=200 only")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--number", type=int, default=500, help="calls per timeit round")
    ap.add_argument("--import-runs", type=int, default=5)
    ap.add_argument("--w-steps", type=int, nargs="*", default=[200, 500])
    ap.add_argument("--w-scale", type=float, default=1.0)
    ap.add_argument("--w-repeats", type=int, default=3)
    ap.add_argument("--old-default", action="store_true", help="also time the ~100-record schedule")
    ap.add_argument("--skip-w", action="store_true")
    ap.add_argument("--json", default=None, help="also write the record here (benchmarks/_record.py)")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats, args.number, args.import_runs = 3, 200, 3
        args.w_steps, args.w_repeats = [200], 2
    rec = _record.Recorder("bench_overhead", args, argv)

    out = {}
    out["per_call"] = per_call(args.repeats, args.number)
    print("(1) per-call cost of simulate on a tiny problem (best of rounds; ms per call)")
    for key, row in out["per_call"].items():
        if key.startswith("_"):
            continue
        print(f"    {key:32s} simulate {row['simulate_ms']:.3f}  privacy_record {row['privacy_record_ms']:.3f}"
              f"  outside accounting {row['outside_accounting_ms']:.3f}")
    print(f"    engine._versions() {out['per_call']['_versions_ms'] * 1e3:.1f} µs (cached per process)")
    out["import"] = import_time(args.import_runs)
    imp = out["import"]
    print(f"(2) import dpsim {imp['import_dpsim_s']:.3f} s (import numba alone {imp['import_numba_s']:.3f} s); "
          f"heavy modules loaded: {imp['heavy_modules_loaded'] or 'none'}")
    if not args.skip_w:
        out["w"] = w_share(args.w_steps, args.w_repeats, args.w_scale, args.old_default)
        w = out["w"]
        print(f"(3) default records on W: {w['problem']}, R={w['R']}, b={w['batch_size']} "
              f"(optimum solve {w['optimum_s']:.2f} s, once per problem, not in the runs)")
        for T, row in w["runs"].items():
            line = (f"    T={T}: loop {row['loop_s']:.2f} s, with the default records "
                    f"({row['records']} records, every {row['record_every']}) {row['default_records_s']:.2f} s"
                    f" -> records {100 * row['share']:.0f}% of the run")
            if "old_default_s" in row:
                line += (f"; the ~100-record schedule ({row['old_records']} records) "
                         f"{row['old_default_s']:.2f} s -> {100 * row['old_share']:.0f}%")
            print(line)
    rec.finish(out, args.json)
    return out


if __name__ == "__main__":
    main()
