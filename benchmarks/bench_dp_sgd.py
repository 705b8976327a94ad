"""Rerunnable benchmark: DP-SGD on sparse logistic regression (the foundation issue's problem).

    python benchmarks/bench_dp_sgd.py [--steps 200] [--trials 64] [--backend numpy] [--json OUT]

Problem: ``logistic_regression(n=25_000, d=10_000, density=0.01)``, batch b = 64 (Poisson),
DP-SGD with C = 1, σ = 1.  Reports, all measured in this one run (ratios are what to quote):

(a) per-trial speed-up of one run with R = 64 over R = 1 runs (same steps);
(b) steps × trials per second of the R = 64 run as a fraction of this machine's Gaussian-sampling
    ceiling — the rate at which the same generator draws the R·d normals one step needs;
(c) speed-up over the naive per-trial, per-example NumPy loop of ``tests/naive.py``.

Recording is set to the first and last step only (``record_every=steps``) for (a)–(c), since a
full-data loss evaluation is not part of an optimizer step; the cost with the default recording
(about 100 records) is reported separately.  The first run of each configuration is a warm-up
(Numba compilation) and is not timed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import dpsim  # noqa: E402
from dpsim import optimizers, problems  # noqa: E402


def _best_of(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=25_000)
    ap.add_argument("--d", type=int, default=10_000)
    ap.add_argument("--density", type=float, default=0.01)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--single-runs", type=int, default=8, help="R=1 runs timed for (a)")
    ap.add_argument("--naive-steps", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", default="numpy")
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--json", default=None, help="write the numbers here")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    prob = problems.logistic_regression(args.n, args.d, density=args.density, seed=0)
    build = time.perf_counter() - t0
    opt = optimizers.get("dp_sgd", lr=0.5, clip=1.0, noise_multiplier=1.0)
    R, T, b = args.trials, args.steps, args.batch_size

    def run(trials, steps, seed=0, record_every=None):
        return dpsim.simulate(prob, opt, steps=steps, batch_size=b, trials=trials, seed=seed,
                              backend=args.backend, dtype=args.dtype,
                              record_every=steps if record_every is None else record_every)

    run(R, 2)  # warm-up: Numba compilation, caches
    run(1, 2)

    t_many = _best_of(lambda: run(R, T), args.repeats)
    t_single = _best_of(lambda: [run(1, T, seed=s) for s in range(args.single_runs)], args.repeats)
    t_single /= args.single_runs
    per_trial_step_many = t_many / (R * T)
    per_trial_step_single = t_single / T
    speedup_a = per_trial_step_single / per_trial_step_many

    # Gaussian-sampling ceiling with the same generator, dtype and shape as the engine's noise
    be = dpsim.backend.Backend(args.backend, seed=0, dtype=args.dtype)
    be.normal((R, args.d))

    def draw():
        for _ in range(T):
            be.normal((R, args.d))
        if args.backend == "cupy":
            be.xp.cuda.Device().synchronize()

    t_ceiling = _best_of(draw, args.repeats)
    rate = R * T / t_many
    ceiling = R * T / t_ceiling
    frac_b = rate / ceiling

    # default recording (about 100 records)
    t_rec = _best_of(lambda: run(R, T, record_every=max(1, T // 100)), 1)

    # naive per-trial, per-example loop (tests/naive.py)
    from naive import naive_dp_sgd

    t0 = time.perf_counter()
    naive_dp_sgd(prob, lr=0.5, clip_norm=1.0, sigma=1.0, steps=args.naive_steps, batch_size=b,
                 trials=1, seed=0)
    t_naive = (time.perf_counter() - t0) / args.naive_steps
    speedup_c = t_naive / per_trial_step_many

    out = {
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "cpus": os.cpu_count(),
        "numpy": np.__version__,
        "backend": args.backend,
        "dtype": args.dtype,
        "problem": f"logistic_regression(n={args.n}, d={args.d}, density={args.density})",
        "problem_build_s": build,
        "R": R, "steps": T, "batch_size": b,
        "run_R_s": t_many,
        "run_R1_s": t_single,
        "a_per_trial_speedup_R_over_1": speedup_a,
        "b_steps_trials_per_s": rate,
        "b_gaussian_ceiling_steps_trials_per_s": ceiling,
        "b_fraction_of_ceiling": frac_b,
        "c_naive_s_per_trial_step": t_naive,
        "c_speedup_over_naive": speedup_c,
        "run_R_default_recording_s": t_rec,
    }
    print(f"problem {out['problem']} built in {build:.2f} s; b={b}, steps={T}, backend={args.backend}/{args.dtype}")
    print(f"(a) R={R}: {t_many:.3f} s; R=1: {t_single:.3f} s per run -> per-trial speed-up {speedup_a:.1f}x")
    print(f"(b) {rate:,.0f} steps*trials/s vs Gaussian ceiling {ceiling:,.0f} -> {100 * frac_b:.0f}% of ceiling")
    print(f"(c) naive loop {t_naive * 1e3:.1f} ms per trial-step vs engine {per_trial_step_many * 1e6:.1f} us "
          f"-> {speedup_c:,.0f}x")
    print(f"    with default recording (~100 records): R={R} run takes {t_rec:.3f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return out


if __name__ == "__main__":
    main()
