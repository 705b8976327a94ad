"""Rerunnable benchmark: the small-d Monte Carlo regime, general engine vs fused kernel.

    python benchmarks/bench_small_d.py [--quick] [--json OUT] [--problems ...] [--optimizers ...]

Problems (n = 1000, b = 32, Poisson sampling): ``least_squares(d=20)``,
``logistic_regression(d=100)``, ``quadratic_2d``.  Optimizers ``dp_sgd``, ``dp_adam``,
``dp2_rmsprop`` (s1 = 10), ``pagan`` (radius 1: a public radius, so the run is private).
Trials R ∈ {1, 256, 4096}.  Each configuration runs through the general chain engine
(``fast=False``) and the fused kernel (``fast=True``, where :mod:`dpsim.fused` covers it),
interleaved, best of ``--repeats``; the time is the step loop (``Result.wall_time``: batches,
noise, updates), with ``metrics=()`` (no full-data loss/gradient passes: at R = 4096 the two
records of a short run would otherwise dominate), after an untimed warm-up run.

Roofline (the issue's definition): one step needs ``R·b·d`` multiply-adds (the per-example
margins; the clipped sum needs a second pass of the same size) and ``R·d`` standard normals.
Their time at this machine's rates, *measured in the same run* — a one-thread GEMM (GFLOP/s,
a multiply-add is 2 flops) and NumPy's ``standard_normal`` (normals/s) — is the roofline time of
a step; ``% roofline`` is that time over the measured step time.  One thread throughout
(``OMP_NUM_THREADS``/``NUMBA_NUM_THREADS`` default to 1).  On a shared machine quote the ratios
of one run (fused/engine, R = 256 vs R = 1), not absolute rates.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import dpsim  # noqa: E402
from dpsim import fused, optimizers, problems  # noqa: E402

PROBLEMS = {
    "least_squares": lambda: problems.least_squares(1000, 20, seed=0),
    "logistic": lambda: problems.logistic_regression(1000, 100, seed=0),
    "quadratic_2d": lambda: problems.quadratic_2d(1.0, 10.0, n=1000, seed=0),
}
OPTIMIZERS = {
    "dp_sgd": lambda: optimizers.get("dp_sgd", lr=0.05, clip=1.0, noise_multiplier=1.0),
    "dp_adam": lambda: optimizers.get("dp_adam", lr=0.01, clip=1.0, noise_multiplier=1.0),
    "dp2_rmsprop": lambda: optimizers.get("dp2_rmsprop", s1=10, lr=0.05, clip=1.0,
                                          noise_multiplier=1.0),
    "pagan": lambda: optimizers.get("pagan", lr=0.05, noise_multiplier=1.0, radius=1.0),
}


def machine_limits(seconds=0.5):
    """One-thread GEMM GFLOP/s (512×512 float64) and standard normals per second."""
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((512, 512)), rng.standard_normal((512, 512))
    best, t_end = np.inf, time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t0 = time.perf_counter()
        A @ B
        best = min(best, time.perf_counter() - t0)
    gflops = 2 * 512 ** 3 / best / 1e9
    g = np.random.Generator(np.random.PCG64(1))
    best, t_end = np.inf, time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t0 = time.perf_counter()
        g.standard_normal(1 << 18)
        best = min(best, time.perf_counter() - t0)
    return gflops, (1 << 18) / best


def roofline_step(R, b, d, gflops, normals):
    return R * b * d / (gflops * 1e9 / 2) + R * d / normals


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer steps and one repeat")
    ap.add_argument("--problems", nargs="*", default=list(PROBLEMS))
    ap.add_argument("--optimizers", nargs="*", default=list(OPTIMIZERS))
    ap.add_argument("--trials", nargs="*", type=int, default=[1, 256, 4096])
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0.4, help="target seconds per timed run")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    budget = args.budget / 4 if args.quick else args.budget
    b = args.batch_size

    gflops, normals = machine_limits(0.2 if args.quick else 0.5)
    print(f"machine: {platform.processor() or platform.machine()}, one thread: "
          f"GEMM {gflops:.1f} GFLOP/s, {normals / 1e6:.1f} M normals/s")
    rows = []
    hdr = (f"{'problem':14s} {'optimizer':12s} {'R':>5s} {'engine ts/s':>12s} {'fused ts/s':>12s} "
           f"{'fused/eng':>9s} {'%roof eng':>9s} {'%roof fus':>9s}")
    print(hdr)
    for pname in args.problems:
        prob = PROBLEMS[pname]()
        prob.optimum  # noqa: B018 - computed once, outside the timings
        for oname in args.optimizers:
            opt = OPTIMIZERS[oname]()
            can_fuse = not isinstance(fused.plan(prob, opt, trials=1), str)
            for R in args.trials:
                paths = [False, True] if can_fuse else [False]
                # steps per run from a short probe of each path, so each run takes ~budget s
                steps = {}
                for fast in paths:
                    dpsim.simulate(prob, opt, steps=2, batch_size=b, trials=R, seed=0, fast=fast)
                    r = dpsim.simulate(prob, opt, steps=3, batch_size=b, trials=R, seed=0,
                                       fast=fast, record_every=3, metrics=())
                    per = max(r.wall_time / 3, 1e-7)
                    steps[fast] = int(min(20_000, max(3, budget / per)))
                best = {f: np.inf for f in paths}
                for rep in range(repeats):
                    for fast in paths:  # interleaved
                        T = steps[fast]
                        r = dpsim.simulate(prob, opt, steps=T, batch_size=b, trials=R, seed=rep,
                                           fast=fast, record_every=T, metrics=())
                        best[fast] = min(best[fast], r.wall_time / T)
                d = prob.d
                roof = roofline_step(R, b, d, gflops, normals)
                row = {"problem": pname, "optimizer": oname, "R": R, "d": d,
                       "engine_step_s": best[False], "engine_trial_steps_per_s": R / best[False],
                       "engine_roofline_frac": roof / best[False], "roofline_step_s": roof}
                if True in best:
                    row.update(fused_step_s=best[True], fused_trial_steps_per_s=R / best[True],
                               fused_roofline_frac=roof / best[True],
                               fused_over_engine=best[False] / best[True])
                rows.append(row)
                f = row.get("fused_trial_steps_per_s")
                print(f"{pname:14s} {oname:12s} {R:5d} {row['engine_trial_steps_per_s']:12,.0f} "
                      f"{(f'{f:12,.0f}' if f else '           -')} "
                      f"{(format(row['fused_over_engine'], '9.1f') if f else '        -')} "
                      f"{100 * row['engine_roofline_frac']:8.1f}% "
                      f"{(format(100 * row['fused_roofline_frac'], '8.1f') + '%') if f else '        -'}",
                      flush=True)
    # per-trial speed-up of R = 256 over R = 1 (same path, same run)
    speedups = []
    for pname in args.problems:
        for oname in args.optimizers:
            sel = {r["R"]: r for r in rows if r["problem"] == pname and r["optimizer"] == oname}
            if 1 in sel and 256 in sel:
                for path in ("engine", "fused"):
                    k = f"{path}_step_s"
                    if k in sel[1] and k in sel[256]:
                        s = sel[1][k] / (sel[256][k] / 256)
                        speedups.append({"problem": pname, "optimizer": oname, "path": path,
                                         "per_trial_speedup_256_over_1": s})
                        print(f"per-trial speed-up R=256 over R=1: {pname} {oname} {path}: {s:.1f}x")
    out = {"gemm_gflops": gflops, "normals_per_s": normals, "batch_size": b, "rows": rows,
           "speedups": speedups, "machine": platform.platform(), "versions": dpsim.__version__
           if hasattr(dpsim, "__version__") else None}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return out


if __name__ == "__main__":
    main()
