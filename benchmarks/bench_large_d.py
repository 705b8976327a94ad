"""Rerunnable benchmark: the fused release against the chain at the DP² full-scale size.

    OMP_NUM_THREADS=1 python benchmarks/bench_large_d.py [--trials 64 256] [--steps 20] [--json OUT]

Problem: the ``dp2_logistic`` full preset's data (``logistic_regression(n=25_000, d=10_000,
density=0.013, zipf=2)`` with the preset's signal, reg and data seed), b = 64, Poisson sampling.
For each optimizer of the full reproduction's private cells (``dp_sgd``, ``dp_rmsprop``,
``dp_adagrad``, ``dp2_rmsprop``, ``dp2_adagrad``, ``dp2_extra_query``, ``dp2_noise_first``; the
DP² delay s = 5 so that both phases run) with per-trial hyperparameters like a tuning cell (two
values of ``lr``/``lr2``/``clip2``/``eps`` alternating over the trials), it times the same run
through ``transform.update`` (``dpsim.engine.FUSED_RELEASE = False``, the chain) and through the
fused release, interleaved, best of ``--repeats``, and reports µs per private trial-step on the
process CPU clock (the machine is shared: the CPU clock counts only this process's work) and on
the wall clock, next to the *noise floor*: the time one core takes to draw the d normals of one
trial-step (``Generator.standard_normal(out=...)``, measured in the same run).  The runs record
nothing (``metrics=()``).  It also checks, on the first repeat, that both give the same
parameters (``assert_array_equal``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dpsim  # noqa: E402
import machine_limits  # noqa: E402
from dpsim import engine, optimizers, problems  # noqa: E402

OPTIMIZERS = ("dp_sgd", "dp_rmsprop", "dp_adagrad", "dp2_rmsprop", "dp2_adagrad", "dp2_extra_query",
              "dp2_noise_first")


def _alt(a, b, R):
    return [a if i % 2 == 0 else b for i in range(R)]


def hyperparameters(name, R):
    """Per-trial values in the ranges the full preset tunes over."""
    if name == "dp_sgd":
        return {"lr": _alt(3.0, 10.0, R), "clip": 0.5}
    if name == "dp_rmsprop":
        return {"lr": _alt(0.01, 0.03, R), "clip": 0.5, "eps": _alt(1e-3, 1e-7, R)}
    if name == "dp_adagrad":
        return {"lr": _alt(0.1, 0.3, R), "clip": 0.5, "eps": _alt(1e-3, 1e-7, R)}
    hp = {"s1": 5, "clip": 0.5, "lr": _alt(3.0, 10.0, R), "lr2": _alt(0.03, 0.1, R),
          "eps": _alt(1e-3, 1e-7, R)}
    if name != "dp2_noise_first":
        hp["clip2"] = _alt(10.0, 50.0, R)
    return hp


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--optimizers", nargs="+", default=list(OPTIMIZERS))
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from dpsim.experiments.dp2_logistic import PRESETS  # the full preset's data

    cfg = PRESETS["full"]
    t0 = time.perf_counter()
    prob = problems.logistic_regression(cfg.n, cfg.d, density=cfg.density, zipf=cfg.zipf,
                                        signal=cfg.signal, reg=cfg.reg, seed=cfg.data_seed)
    print(f"problem: dp2_logistic full data (n={cfg.n}, d={cfg.d}, density={cfg.density}, zipf={cfg.zipf}) "
          f"built in {time.perf_counter() - t0:.1f} s; b={cfg.batch_size}, steps={args.steps}, {args.dtype}")
    T, b = args.steps, cfg.batch_size
    rows = []

    def run(opt, R, fused):
        engine.FUSED_RELEASE = fused
        try:
            c0, w0 = time.process_time(), time.perf_counter()
            res = dpsim.simulate(prob, opt, steps=T, batch_size=b, trials=R, seed=0, metrics=(),
                                 record_every=T, dtype=args.dtype)
            return time.process_time() - c0, time.perf_counter() - w0, res
        finally:
            engine.FUSED_RELEASE = True

    for R in args.trials:
        floor_cpu = cfg.d / machine_limits.normals_per_s(R * cfg.d, repeats=3, clock="cpu", dtype=args.dtype)
        floor_wall = cfg.d / machine_limits.normals_per_s(R * cfg.d, repeats=3, dtype=args.dtype)
        for name in args.optimizers:
            opt = optimizers.get(name, **hyperparameters(name, R))
            run(opt, R, True)  # warm-up (compilation)
            best = {False: [np.inf, np.inf], True: [np.inf, np.inf]}
            for rep in range(args.repeats):
                got = {}
                for fused in (False, True):
                    c, w, res = run(opt, R, fused)
                    best[fused] = [min(best[fused][0], c), min(best[fused][1], w)]
                    got[fused] = res.params
                if rep == 0:
                    np.testing.assert_array_equal(got[False], got[True])
            n = R * T
            row = {"optimizer": name, "R": R,
                   "chain_us_cpu": 1e6 * best[False][0] / n, "fused_us_cpu": 1e6 * best[True][0] / n,
                   "chain_us_wall": 1e6 * best[False][1] / n, "fused_us_wall": 1e6 * best[True][1] / n,
                   "noise_floor_us_cpu": 1e6 * floor_cpu, "noise_floor_us_wall": 1e6 * floor_wall}
            row["speedup_cpu"] = row["chain_us_cpu"] / row["fused_us_cpu"]
            rows.append(row)
            print(f"R={R:4d} {name:16s} chain {row['chain_us_cpu']:6.0f} us  fused {row['fused_us_cpu']:6.0f} us "
                  f"per trial-step (CPU clock; x{row['speedup_cpu']:.2f}; noise floor "
                  f"{row['noise_floor_us_cpu']:.0f} us, fused at {100 * row['noise_floor_us_cpu'] / row['fused_us_cpu']:.0f}%)"
                  f"   wall: {row['chain_us_wall']:.0f} / {row['fused_us_wall']:.0f} us", flush=True)
    out = {"problem": "dp2_logistic full data", "steps": T, "batch_size": b, "dtype": args.dtype, "rows": rows,
           "machine_limits": machine_limits.measure(64 * cfg.d)}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return out


if __name__ == "__main__":
    main()
