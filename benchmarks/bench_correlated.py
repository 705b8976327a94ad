"""Rerunnable benchmark: correlated noise (DP-MF) through the fused release vs the chain, at W.

    OMP_NUM_THREADS=1 python benchmarks/bench_correlated.py [--noise banded:4] [--steps 30]
        [--pairs 3] [--trials 64] [--optimizers dp_sgd dp_adam ...] [--n N --d D] [--json OUT]

Workload W: ``logistic_regression(n=25_000, d=10_000, density=0.01)``, b = 64, Poisson sampling,
R = 64, ``noise=<--noise>``.  For each optimizer (default: the described rules that take the
fused release with correlated noise — DP-SGD, DP-Adam, scale-then-privatize DP-Adam, IME DP-Adam
and the scale-then-privatize noiseless-v oracle) it runs the chain (``dpsim.engine.FUSED_RELEASE
= False``, the reference) and the fused release in ``--pairs`` interleaved pairs of ``--steps``
steps each, after an untimed warm-up of both, and prints the median [min, max] over the pairs of
the chain's CPU time per step over the fused one's (the speed-up), with the last pair's times.
Both runs draw the same noise and give the same numbers (``tests/fast/test_w_fast.py``); the timed runs
record nothing (``metrics=()``).  CPU clock (``time.process_time``): on a shared machine the wall
clock also counts waiting for a core.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _record  # noqa: E402
import dpsim  # noqa: E402
from _timing import W, W_BATCH, W_TRIALS, w_label, workload_w  # noqa: E402
from dpsim import engine, optimizers  # noqa: E402

DEFAULT = ["dp_sgd", "dp_adam", "dp_adam_stp", "dp_adam_ime", "dp_adam_stp_noiseless_v"]


def _step_cpu(prob, opt, *, fused, steps, trials, seed):
    """CPU seconds per step of one run (``fused``: the fused release, else the chain)."""
    old = engine.FUSED_RELEASE
    engine.FUSED_RELEASE = fused
    try:
        c = time.process_time()
        dpsim.simulate(prob, opt, steps=steps, batch_size=W_BATCH, trials=trials, seed=seed, metrics=(),
                       record_every=steps)
        return (time.process_time() - c) / steps
    finally:
        engine.FUSED_RELEASE = old


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=W["n"])
    ap.add_argument("--d", type=int, default=W["d"])
    ap.add_argument("--density", type=float, default=W["density"])
    ap.add_argument("--noise", default="banded:4")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--trials", type=int, default=W_TRIALS)
    ap.add_argument("--optimizers", nargs="*", default=DEFAULT)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rec = _record.Recorder("bench_correlated", args, argv)
    warnings.simplefilter("ignore", RuntimeWarning)  # the oracles' ε = 0 divisions are the chain's
    prob, _ = workload_w(args.n, args.d, args.density)
    print(f"{w_label(args.n, args.d, args.density)}, b={W_BATCH}, R={args.trials}, "
          f"noise={args.noise}, {args.steps} steps a run, {args.pairs} interleaved pairs; "
          f"{platform.processor() or platform.machine()}")
    rows = []
    for name in args.optimizers:
        opt = optimizers.get(name, noise=args.noise)
        for fused in (False, True):  # warm-up: compilation, caches
            _step_cpu(prob, opt, fused=fused, steps=2, trials=args.trials, seed=0)
        ratios = []
        for rep in range(args.pairs):
            chain = _step_cpu(prob, opt, fused=False, steps=args.steps, trials=args.trials, seed=rep)
            fused = _step_cpu(prob, opt, fused=True, steps=args.steps, trials=args.trials, seed=rep)
            ratios.append(chain / fused)
        row = {"optimizer": name, "noise": args.noise, "speedup_median": statistics.median(ratios),
               "speedup_min": min(ratios), "speedup_max": max(ratios),
               "last_chain_ms_per_step": chain * 1e3, "last_fused_ms_per_step": fused * 1e3}
        rows.append(row)
        print(f"{name:26s} fused vs chain {row['speedup_median']:.2f}x [{row['speedup_min']:.2f}, "
              f"{row['speedup_max']:.2f}]; last pair {row['last_chain_ms_per_step']:.1f} -> "
              f"{row['last_fused_ms_per_step']:.1f} ms/step", flush=True)
    out = {"rows": rows}
    rec.finish(out, args.json)
    return out


if __name__ == "__main__":
    main()
