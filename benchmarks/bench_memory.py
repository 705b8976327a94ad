"""Rerunnable benchmark: peak memory of a run at workload W, in units of one ``(R, d)`` float64 array.

    python benchmarks/bench_memory.py [--trials 1000] [--steps 20] [--optimizers dp_sgd dp_adam]
                                      [--backend numpy] [--json OUT]

Workload W: ``logistic_regression(n=25_000, d=10_000, density=0.01)``, b = 64, Poisson sampling.
Each optimizer runs in its own subprocess (so one run's allocations cannot hide another's).  In
the child, the *base* is everything before the timed run: interpreter, dpsim, the problem (its
CSR matrix and, when records need it, its optimum) and a warm-up run with R = 1 (Numba
compilation).  Then the peak is reset and the run with ``R`` trials is made.  Two measures of
"above the base", both in units of ``R·d·8`` bytes (the size of the parameters):

* ``traced``: the peak of :mod:`tracemalloc` during the run (every NumPy allocation is traced);
* ``rss``: the peak resident set size (``VmHWM`` of ``/proc/self/status``, reset through
  ``/proc/self/clear_refs`` before the run) minus the resident size before it.

The run records the metrics at the first and last step (``record_every=steps``), as the
throughput benchmarks do; ``--no-records`` drops them (``metrics=()``) to see the step alone.
``--chain`` runs every step through ``transform.update`` (``dpsim.engine.FUSED_RELEASE = False``)
instead of the fused release (:mod:`dpsim.fast.release`), for an A/B.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _record  # noqa: E402
from _timing import W, W_BATCH  # noqa: E402

CHILD = r"""
import json, os, sys, tracemalloc
import dpsim
from dpsim import engine, optimizers, problems
cfg = json.loads(sys.argv[1])
engine.FUSED_RELEASE = not cfg.get("chain", False)

def status(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return None

prob = problems.logistic_regression(cfg["n"], cfg["d"], density=cfg["density"], seed=0)
opt = optimizers.get(cfg["optimizer"])
metrics = () if cfg["no_records"] else ("loss", "grad_norm_sq", "dist_to_opt")
kw = dict(batch_size=cfg["batch_size"], seed=0, backend=cfg["backend"], metrics=metrics)
dpsim.simulate(prob, opt, steps=2, trials=1, record_every=2, **kw)  # warm-up; the optimum
base_rss = status("VmRSS")
try:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset VmHWM to the current RSS
    hwm_reset = True
except OSError:
    hwm_reset = False
tracemalloc.start()
tracemalloc.reset_peak()
t0 = tracemalloc.get_traced_memory()[0]
dpsim.simulate(prob, opt, steps=cfg["steps"], trials=cfg["trials"], record_every=cfg["steps"], **kw)
peak = tracemalloc.get_traced_memory()[1] - t0
tracemalloc.stop()
hwm = status("VmHWM")
print(json.dumps({"base_rss": base_rss, "traced_peak": peak,
                  "rss_peak_above_base": (hwm - base_rss) if hwm_reset else None}))
"""


def measure(cfg: dict) -> dict:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg)], capture_output=True, text=True,
                         env=env, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"child for {cfg['optimizer']} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=W["n"])
    ap.add_argument("--d", type=int, default=W["d"])
    ap.add_argument("--density", type=float, default=W["density"])
    ap.add_argument("--batch-size", type=int, default=W_BATCH)
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--optimizers", nargs="+", default=["dp_sgd", "dp_adam"])
    ap.add_argument("--backend", default="numpy")
    ap.add_argument("--no-records", action="store_true")
    ap.add_argument("--chain", action="store_true", help="the chain engine (FUSED_RELEASE=False)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rec = _record.Recorder("bench_memory", args, argv)

    unit = args.trials * args.d * 8
    rows = {}
    print(f"logistic_regression(n={args.n}, d={args.d}, density={args.density}), b={args.batch_size}, "
          f"R={args.trials}, {args.steps} steps, backend={args.backend}; unit R*d*8 = {unit / 2**20:.1f} MiB"
          f"{'; no records' if args.no_records else '; records at the first and last step'}"
          f"{'; chain engine' if args.chain else '; fused release'}")
    print(f"{'optimizer':<14}{'base RSS MiB':>14}{'traced peak':>14}{'RSS peak':>12}   (above base, in R*d*8)")
    for name in args.optimizers:
        cfg = dict(n=args.n, d=args.d, density=args.density, batch_size=args.batch_size,
                   trials=args.trials, steps=args.steps, optimizer=name, backend=args.backend,
                   no_records=args.no_records, chain=args.chain)
        m = measure(cfg)
        traced = m["traced_peak"] / unit
        rss = None if m["rss_peak_above_base"] is None else m["rss_peak_above_base"] / unit
        rows[name] = {"base_rss_bytes": m["base_rss"], "traced_peak_units": traced, "rss_peak_units": rss}
        rss_s = "n/a" if rss is None else f"{rss:.2f}"
        print(f"{name:<14}{m['base_rss'] / 2**20:>14.0f}{traced:>14.2f}{rss_s:>12}")
    rec.finish({"unit_bytes": unit, "rows": rows}, args.json)
    return rows


if __name__ == "__main__":
    main()
