"""Rerunnable benchmark: workload W, DP-SGD on sparse logistic regression, against the noise ceiling.

    OMP_NUM_THREADS=1 python benchmarks/bench_dp_sgd.py [--steps 200] [--trials 64] [--json OUT]

Problem W: ``logistic_regression(n=25_000, d=10_000, density=0.01)``, batch b = 64 (Poisson),
DP-SGD with C = 1, σ = 1.  Reports, all measured in this one run, the timed runs interleaved
(best of ``--repeats`` rounds; ratios are what to quote):

(a) per-trial speed-up of one run with R = 64 over R = 1 runs (same steps);
(b) steps × trials per second of the R = 64 run as a fraction of the *single-core Gaussian
    ceiling*: the rate at which one thread of ``Generator(PCG64).standard_normal(out=...)`` draws
    the R·d float64 normals a step needs (:mod:`machine_limits`), measured between the runs; also
    as a fraction of the faster rate of the same numbers drawn by ``dpsim._bitgen`` (which the
    engine uses for large float64 draws);
(b1) the same for the chain engine (``dpsim.engine.FUSED_RELEASE = False``: every step through
    ``transform.update``, the noise drawn as an ``(R, d)`` array), the A/B of the fused release
    (:mod:`dpsim.fast.release`, bit for bit the same run);
(b2) the same for ``backend="numpy:blocked"``, whose noise is drawn by a pool of threads, the
    next step's noise ahead while this step's clipped sums run (:mod:`dpsim.backend`; the step
    itself is the fused release reading that noise array): on a machine with a free second core
    it can pass the single-core ceiling;
(c) speed-up over the naive per-trial, per-example NumPy loop of ``tests/support/naive.py``.

The timed runs record nothing (``metrics=()``): a full-data loss and gradient is not part of an
optimizer step (at R = 64 one record costs about as much as 30 steps).  The cost with the default
recording (about 100 records) is reported separately.  The first run of each configuration is a
warm-up (Numba compilation) and is not timed.  A machine-limits line (GEMM GFLOP/s, normals/s) is
measured in the same run.  On a shared machine the wall clock also counts the time spent waiting
for a core: every (b) figure is also given on the process CPU clock (``time.process_time``, the
ceiling too), which counts only this process's work.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _record  # noqa: E402
import dpsim  # noqa: E402
import machine_limits  # noqa: E402
from _timing import W, W_BATCH, W_TRIALS, best_of, both_clocks, w_dp_sgd, w_label, workload_w  # noqa: E402
from dpsim import engine  # noqa: E402


def _device_normals(args, R, draws=20):
    """On CuPy the ceiling is the GPU generator's rate (draws of (R, d), synchronized)."""
    be = dpsim.backend.Backend(args.backend, seed=0, dtype=args.dtype)
    be.normal((R, args.d))
    sync = be.xp.__dict__.get("cuda") or __import__("cupy").cuda

    def draw():
        for _ in range(draws):
            be.normal((R, args.d))
        sync.Device().synchronize()

    return draws * R * args.d / best_of(draw, 3)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=W["n"])
    ap.add_argument("--d", type=int, default=W["d"])
    ap.add_argument("--density", type=float, default=W["density"])
    ap.add_argument("--batch-size", type=int, default=W_BATCH)
    ap.add_argument("--trials", type=int, default=W_TRIALS)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--single-runs", type=int, default=8, help="R=1 runs timed for (a)")
    ap.add_argument("--naive-steps", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", default="numpy")
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--json", default=None, help="also write the record here (benchmarks/_record.py)")
    args = ap.parse_args(argv)
    rec = _record.Recorder("bench_dp_sgd", args, argv)

    prob, build = workload_w(args.n, args.d, args.density)
    opt = w_dp_sgd()
    R, T, b = args.trials, args.steps, args.batch_size
    blocked = args.backend + ":blocked" if args.backend in ("numpy", "array_api_strict") else None

    def run(trials, steps, seed=0, record_every=None, backend=args.backend, metrics=(), fused=True):
        engine.FUSED_RELEASE = fused
        try:
            return dpsim.simulate(prob, opt, steps=steps, batch_size=b, trials=trials, seed=seed,
                                  backend=backend, dtype=args.dtype, metrics=metrics,
                                  record_every=steps if record_every is None else record_every)
        finally:
            engine.FUSED_RELEASE = True

    run(R, 2)  # warm-up: Numba compilation, caches
    run(R, 2, fused=False)
    run(1, 2)
    if blocked:
        run(R, 2, backend=blocked)

    size = R * args.d
    t_many = t_blocked = t_single = t_chain = c_many = c_chain = float("inf")
    rate_normals = rate_normals_cpu = 0.0
    for _ in range(args.repeats):  # interleaved: every figure sees the same machine load
        rate_normals = max(rate_normals, _device_normals(args, R) if args.backend == "cupy" else
                           machine_limits.normals_per_s(size, repeats=3, dtype=args.dtype))
        if args.backend != "cupy":
            rate_normals_cpu = max(rate_normals_cpu, machine_limits.normals_per_s(
                size, repeats=3, dtype=args.dtype, clock="cpu"))
        w, c = both_clocks(lambda: run(R, T))
        t_many, c_many = min(t_many, w), min(c_many, c)
        w, c = both_clocks(lambda: run(R, T, fused=False))
        t_chain, c_chain = min(t_chain, w), min(c_chain, c)
        if blocked:
            t_blocked = min(t_blocked, best_of(lambda: run(R, T, backend=blocked), 1))
        t_single = min(t_single, best_of(lambda: [run(1, T, seed=s) for s in range(args.single_runs)], 1)
                       / args.single_runs)
    limits = machine_limits.measure(size)
    per_trial_step_many = t_many / (R * T)
    per_trial_step_single = t_single / T
    speedup_a = per_trial_step_single / per_trial_step_many

    rate = R * T / t_many
    ceiling = rate_normals / args.d  # trial-steps/s if a step cost only its R·d normals, one thread
    ceiling_inl = limits["inlined_normals_per_s"] / args.d  # the same with dpsim._bitgen's draws
    frac_b = rate / ceiling
    rate_blocked = R * T / t_blocked if blocked else None
    frac_chain = R * T / t_chain / ceiling
    ceiling_cpu = rate_normals_cpu / args.d if rate_normals_cpu else None
    frac_cpu = R * T / c_many / ceiling_cpu if ceiling_cpu else None
    frac_chain_cpu = R * T / c_chain / ceiling_cpu if ceiling_cpu else None

    # default recording (about 100 records)
    t_rec = best_of(lambda: run(R, T, record_every=max(1, T // 100),
                                 metrics=("loss", "grad_norm_sq", "dist_to_opt")), 1)

    # naive per-trial, per-example loop (tests/support/naive.py)
    from support.naive import naive_dp_sgd

    t0 = time.perf_counter()
    naive_dp_sgd(prob, lr=0.5, clip_norm=1.0, sigma=1.0, steps=args.naive_steps, batch_size=b,
                 trials=1, seed=0)
    t_naive = (time.perf_counter() - t0) / args.naive_steps
    speedup_c = t_naive / per_trial_step_many

    out = {
        "backend": args.backend,
        "dtype": args.dtype,
        "problem": w_label(args.n, args.d, args.density),
        "problem_build_s": build,
        "R": R, "steps": T, "batch_size": b,
        "run_R_s": t_many,
        "run_R1_s": t_single,
        "a_per_trial_speedup_R_over_1": speedup_a,
        "b_steps_trials_per_s": rate,
        "b_gaussian_ceiling_steps_trials_per_s": ceiling,
        "b_fraction_of_ceiling": frac_b,
        "b_fraction_of_inlined_ceiling": rate / ceiling_inl,
        "b_cpu_clock_fraction_of_ceiling": frac_cpu,
        "b1_chain_run_R_s": t_chain,
        "b1_chain_fraction_of_ceiling": frac_chain,
        "b1_chain_cpu_clock_fraction_of_ceiling": frac_chain_cpu,
        "b1_fused_over_chain": t_chain / t_many,
        "b1_fused_over_chain_cpu_clock": c_chain / c_many,
        "b2_blocked_backend": blocked,
        "b2_run_R_s": t_blocked if blocked else None,
        "b2_fraction_of_single_core_ceiling": rate_blocked / ceiling if blocked else None,
        "c_naive_s_per_trial_step": t_naive,
        "c_speedup_over_naive": speedup_c,
        "run_R_default_recording_s": t_rec,
        "machine_limits": limits,
    }
    print(f"problem {out['problem']} built in {build:.2f} s; b={b}, steps={T}, backend={args.backend}/{args.dtype}")
    print(machine_limits.line(limits))
    print(f"(a) R={R}: {t_many:.3f} s; R=1: {t_single:.3f} s per run -> per-trial speed-up {speedup_a:.1f}x")
    print(f"(b) {rate:,.0f} steps*trials/s vs single-core Gaussian ceiling {ceiling:,.0f} "
          f"-> {100 * frac_b:.0f}% of ceiling")
    if args.dtype == "float64" and args.backend == "numpy":
        print(f"    vs the ceiling of dpsim's inlined draws ({ceiling_inl:,.0f}): {100 * rate / ceiling_inl:.0f}%")
    if ceiling_cpu:
        print(f"    CPU clock: {R * T / c_many:,.0f} steps*trials/s vs ceiling {ceiling_cpu:,.0f} "
              f"-> {100 * frac_cpu:.0f}% of ceiling")
    print(f"(b1) chain engine (FUSED_RELEASE=False): {t_chain:.3f} s -> {100 * frac_chain:.0f}% of ceiling"
          + (f" (CPU clock {100 * frac_chain_cpu:.0f}%)" if ceiling_cpu else "")
          + f"; fused release x{t_chain / t_many:.2f} faster (CPU clock x{c_chain / c_many:.2f})")
    if blocked:
        print(f"(b2) backend={blocked}: {t_blocked:.3f} s, {rate_blocked:,.0f} steps*trials/s "
              f"-> {100 * rate_blocked / ceiling:.0f}% of the single-core ceiling "
              f"({limits['blocked_threads']} noise threads)")
    print(f"(c) naive loop {t_naive * 1e3:.1f} ms per trial-step vs engine {per_trial_step_many * 1e6:.1f} us "
          f"-> {speedup_c:,.0f}x")
    print(f"    with default recording (~100 records): R={R} run takes {t_rec:.3f} s")
    rec.finish(out, args.json)
    return out


if __name__ == "__main__":
    main()
