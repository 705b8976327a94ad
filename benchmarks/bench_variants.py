"""Rerunnable benchmark: throughput of private variants relative to DP-SGD, in one run.

    python benchmarks/bench_variants.py [--steps 100] [--trials 64] [--optimizers dp2_rmsprop pagan ...]

Problem: the foundation benchmark, ``logistic_regression(n=25_000, d=10_000, density=0.01)``,
b = 64, Poisson sampling (also for PAGAN, whose paper samples with replacement: the sampler does
not change the per-step cost).  Reports steps × trials per second of each optimizer and its
ratio to ``dp_sgd`` measured in the same process; recording only at the first and last step.
"""

from __future__ import annotations

import argparse
import json
import time

import dpsim
from dpsim import optimizers, problems

DEFAULT = ["dp_sgd", "dp2_rmsprop", "dp_adam_bc", "dp_adam", "pagan"]

SETTINGS = {
    "pagan": dict(radius=1e3),
    "pasan": dict(radius=1e3),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=25_000)
    ap.add_argument("--d", type=int, default=10_000)
    ap.add_argument("--density", type=float, default=0.01)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--optimizers", nargs="+", default=DEFAULT)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    prob = problems.logistic_regression(args.n, args.d, density=args.density, seed=0)
    names = list(dict.fromkeys(["dp_sgd"] + args.optimizers))
    rates = {}
    for name in names:
        opt = optimizers.get(name, **SETTINGS.get(name, {}))

        def run(steps):
            return dpsim.simulate(prob, opt, steps=steps, batch_size=args.batch_size,
                                  trials=args.trials, seed=0, record_every=steps)

        run(2)  # warm-up (Numba compilation)
        best = float("inf")
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            run(args.steps)
            best = min(best, time.perf_counter() - t0)
        rates[name] = args.trials * args.steps / best
    base = rates["dp_sgd"]
    print(f"logistic_regression(n={args.n}, d={args.d}, density={args.density}), b={args.batch_size}, "
          f"R={args.trials}, {args.steps} steps")
    print(f"{'optimizer':<16}{'steps*trials/s':>16}{'vs dp_sgd':>12}")
    for name, r in rates.items():
        print(f"{name:<16}{r:>16,.0f}{r / base:>12.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rates": rates, "ratio_to_dp_sgd": {k: v / base for k, v in rates.items()}}, fh,
                      indent=2)
    return rates


if __name__ == "__main__":
    main()
