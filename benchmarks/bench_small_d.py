"""Rerunnable benchmark: the small-d Monte Carlo regime, general engine vs fused kernel.

    python benchmarks/bench_small_d.py [--quick] [--json OUT] [--problems ...] [--optimizers ...]

Problems (n = 1000, b = 32, Poisson sampling, float64): ``least_squares(d=20)``,
``logistic_regression(d=100)``, ``quadratic_2d``.  Optimizers ``dp_sgd``, ``dp_adam``,
``dp2_rmsprop`` (s1 = 10), ``pagan`` (radius 1: a public radius, so the run is private).
Trials R ∈ {1, 256, 4096}.  Each configuration runs through the general chain engine
(``fast=False``) and the fused kernel (``fast=True``, where :mod:`dpsim.fast.block` covers it); the
runs of one R are interleaved (every optimizer and path once per repeat, best of ``--repeats``),
with ``metrics=()`` and one record at the end (no full-data passes), after an untimed warm-up.

Two clocks, both of the step loop alone (batches, noise, updates): ``wall`` is
``Result.wall_time`` and ``cpu`` the process CPU time (``time.process_time``) read at the same two
moments (the engine's clock is wrapped during the timings, :class:`_LoopClock`).  On a
machine shared with other jobs the wall clock also counts the time the process waits for a core;
the CPU time is the cost on one core (one thread throughout: ``OMP_NUM_THREADS`` and
``NUMBA_NUM_THREADS`` default to 1), so the targets are read on it, and both are printed.

Roofline (the issue's definition): one step needs ``R·b·d`` multiply-adds and ``R·d`` standard
normals.  Their time at this machine's rates, *measured in the same run* by
``benchmarks/machine_limits.py`` (one-thread GEMM GFLOP/s, a multiply-add is 2 flops, and NumPy's
``standard_normal`` normals/s, both on the CPU clock; measured before and after the timings, the
faster of the two kept) is the roofline time of a step; ``%roof`` is that time over the measured
CPU time of a step.

``--rng-ab`` adds a third path, the fused kernel drawing through Numba's compiled ``Generator``
methods (``DPSIM_FUSED_RNG=numba``) instead of the inlined PCG64 of :mod:`dpsim._bitgen` (the
default), interleaved with the others, and prints the speed-up of the inlined path (same streams,
same results: the A/B of the bit generator alone).

Printed summary: trial-steps/s of the fused path (``dpsim.simulate``'s default where it applies)
for R = 1, 256, 4096; the per-trial speed-up of R = 256 over R = 1 (same path, same run; and, for
reference, fused R = 256 over the chain engine at R = 1); ``dp_adam``, ``dp2_rmsprop`` and
``pagan`` relative to ``dp_sgd`` (trial-steps/s ratio, same R, same run).  Quote ratios of one
run; absolute rates move with the machine's load (state it).

``--in-context`` adds runs of the fused least-squares kernel at R = 4096 that each drop one piece
(σ = 0: no normals; fixed-size batches: no binomial; sampling with replacement: neither binomial
nor Floyd, ``b`` bounded integers instead; non-private ``sgd``: no clipping, no noise), timed
interleaved: what each piece costs inside the kernel.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _record  # noqa: E402
import machine_limits  # noqa: E402

import dpsim  # noqa: E402
import dpsim.engine  # noqa: E402
from dpsim import optimizers, problems  # noqa: E402
from dpsim.fast import block as fused_block, rows as fused_rows  # noqa: E402

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


def roofline_step(R, b, d, gflops, normals):
    """Seconds for one step's ``R·b·d`` multiply-adds at ``gflops`` and ``R·d`` normals."""
    return R * b * d / (gflops * 1e9 / 2) + R * d / normals


class _LoopClock:
    """Stands in for the ``time`` module inside :mod:`dpsim.engine` during the timings: the engine
    reads ``time.perf_counter()`` right before and right after its step loop (``Result.wall_time``);
    this clock also notes the process CPU time at those two moments, so the CPU time of the step
    loop alone is known (no set-up, privacy record or result in it).  Nothing else changes."""

    def __init__(self):
        self.marks = []

    def perf_counter(self):
        self.marks.append((time.perf_counter(), time.process_time()))
        return self.marks[-1][0]


_CLOCK = _LoopClock()
dpsim.engine.time = _CLOCK


def _simulate(prob, opt, *, fast, **kw):
    """``dpsim.simulate`` with ``fast`` True/False, or ``"numba_rng"``: the fused kernel drawing
    through Numba's compiled ``Generator`` methods (``DPSIM_FUSED_RNG=numba``, the path before the
    inlined bit generator of :mod:`dpsim._bitgen`; same streams, so the same results)."""
    if fast == "numba_rng":
        os.environ[fused_block.RNG_ENV] = "numba"
        try:
            return dpsim.simulate(prob, opt, fast=True, **kw)
        finally:
            del os.environ[fused_block.RNG_ENV]
    return dpsim.simulate(prob, opt, fast=fast, **kw)


def _timed(prob, opt, *, R, b, T, fast, seed):
    """``(loop wall seconds, loop CPU seconds)`` of one run of ``T`` steps."""
    _CLOCK.marks.clear()
    _simulate(prob, opt, steps=T, batch_size=b, trials=R, seed=seed, fast=fast,
              record_every=T, metrics=())
    (w0, c0), (w1, c1) = _CLOCK.marks[0], _CLOCK.marks[-1]
    return w1 - w0, c1 - c0


def breakdown(R=4096, n=1000, d=20, b=32, repeats=5, steps=4):
    """CPU ns per trial-step of the pieces of a fused ``dp_sgd`` step on least squares (n, d, b,
    Poisson), each timed alone in a compiled loop over ``steps × R`` trial-steps: the batch size
    (one binomial), its ``k ≈ b`` uniforms, the ``d`` noise normals — through the inlined bit
    generator (:mod:`dpsim._bitgen`) and through Numba's ``Generator`` methods —, Floyd's subset
    from given uniforms, and the dense-GLM clipped sum (:func:`dpsim.fast.rows._glm_clipped_trial`)
    on given batches.  The kernel's own step also has the update (a few ns per coordinate) and
    loop overheads; the pieces overlap in the kernel, so their sum is an estimate.  Last, for
    comparison with the clipped sum, PAGAN's ℓ2-ball projected sum
    (:func:`dpsim.fast.rows._ball_dense_trial`, α = 1) on the same batches."""
    import numba

    from dpsim import _bitgen as BG
    from dpsim import _sampling_kernels as SK
    from dpsim.problems.glm import _LINKS

    @numba.njit
    def draws(srng, nrng, K, R, n, q, d, what):
        acc = 0.0
        bp = BG.binomial_setup(n, q)
        tab = BG.binomial_table(bp)
        for _ in range(K):
            for r in range(R):
                if what == 0:
                    acc += BG.draw_binomial(srng, bp, tab)
                elif what == 1:
                    for i in range(32):
                        acc += BG.draw_double(srng)
                else:
                    for j in range(d):
                        acc += BG.draw_normal(nrng)
        return acc

    @numba.njit
    def floyd(U, K, n, k):
        bits = np.zeros((n + 63) // 64, dtype=np.uint64)
        ib = np.empty(k, dtype=np.int64)
        s = 0
        for _ in range(K):
            for r in range(U.shape[0]):
                SK.floyd_row(n, k, U[r], bits, ib)
                s += ib[0]
        return s

    @numba.njit
    def glm(IB, X, rn2, W, y, link, K):
        R, d = W.shape
        k = IB.shape[1]
        out = np.empty((R, d))
        mm, cf, yb, sb = np.empty(k), np.empty(k), np.empty(k), np.empty(k)
        for _ in range(K):
            for r in range(R):
                fused_rows._glm_clipped_trial(link, X, rn2, IB[r], k, W, y, 0.0, 1.0, out, mm, cf, yb,
                                         sb, r)
        return out[0, 0]

    @numba.njit
    def ball(IB, X, xmax, W, y, link, K):
        R, d = W.shape
        k = IB.shape[1] - 8  # the kernel pads a batch with up to 7 lanes
        out = np.empty((R, d))
        XT = np.empty((d, k + 8))
        sc = np.zeros((5, k + 8))
        s = 0
        for _ in range(K):
            for r in range(R):
                s += fused_rows._ball_dense_trial(link, X, xmax, IB[r], k, W, y, 1.0, 0.0, out, XT, sc, r)
        return s

    prob = problems.least_squares(n, d, seed=0)
    X = np.ascontiguousarray(prob.X)
    rn2 = fused_rows._row_sq_norms(X)
    rng = np.random.default_rng(0)
    W = rng.standard_normal((R, d)) * 0.1
    U = rng.random((R, b))
    IB = np.empty((R, b), dtype=np.int64)
    SK.floyd_fill(n, np.full(R, b, dtype=np.int64), U.reshape(-1), IB)
    gens = [np.random.Generator(np.random.PCG64(s)) for s in (1, 2)]
    states = [BG.state_of(g) for g in gens]
    res = {}
    q = b / n
    for what, name in ((0, "binomial"), (1, f"{b} uniforms"), (2, f"{d} normals")):
        for label, (sr, nr) in (("inlined", states), ("numba_generator", gens)):
            draws(sr, nr, 1, 2, n, q, d, what)
            t = min(_best_once(draws, sr, nr, steps, R, n, q, d, what) for _ in range(repeats))
            res[f"{name} ({label})"] = t / (steps * R) * 1e9
    floyd(U, 1, n, b)
    res[f"Floyd subset of {b} (given uniforms)"] = min(
        _best_once(floyd, U, steps, n, b) for _ in range(repeats)) / (steps * R) * 1e9
    glm(IB, X, rn2, W, prob.y, _LINKS.index(prob.link), 1)
    res[f"GLM clipped sum (b={b}, d={d})"] = min(
        _best_once(glm, IB, X, rn2, W, prob.y, _LINKS.index(prob.link), steps)
        for _ in range(repeats)) / (steps * R) * 1e9
    xmax = fused_rows._row_abs_max(X)
    IBp = np.zeros((R, b + 8), dtype=np.int64)
    IBp[:, :b] = IB
    ball(IBp, X, xmax, W, prob.y, _LINKS.index(prob.link), 1)
    res[f"PAGAN l2-ball projected sum (b={b}, d={d}, alpha=1)"] = min(
        _best_once(ball, IBp, X, xmax, W, prob.y, _LINKS.index(prob.link), steps)
        for _ in range(repeats)) / (steps * R) * 1e9
    return res


def in_context(R=4096, n=1000, d=20, b=32, steps=60, repeats=4):
    """CPU ns per trial-step of fused least-squares runs (n, d, b, R) that differ in one piece each,
    interleaved, best of ``repeats``: ``dp_sgd`` under Poisson sampling (the target), the same with
    σ = 0 (no normals drawn), with fixed-size batches (Floyd from ``b`` uniforms, no binomial, a
    constant batch size), with sampling with replacement (``b`` bounded integers: no binomial, no
    Floyd), and non-private ``sgd`` (no clipping, no noise).  The differences are what each piece
    costs *inside* the kernel, where the pieces overlap and branch on the varying batch size (the
    isolated timings of :func:`breakdown` understate them)."""
    prob = problems.least_squares(n, d, seed=0)
    cfgs = {"dp_sgd, poisson": ("dp_sgd", {"noise_multiplier": 1.0}, "poisson"),
            "dp_sgd, poisson, sigma=0": ("dp_sgd", {"noise_multiplier": 0.0}, "poisson"),
            "dp_sgd, fixed": ("dp_sgd", {"noise_multiplier": 1.0}, "fixed"),
            "dp_sgd, replacement": ("dp_sgd", {"noise_multiplier": 1.0}, "replacement"),
            "sgd, poisson": ("sgd", {}, "poisson")}
    runs = {}
    for key, (name, hp, sampling) in cfgs.items():
        kw = {"clip": 1.0, **hp} if name == "dp_sgd" else {}
        runs[key] = (optimizers.get(name, lr=0.05, **kw), sampling)
        dpsim.simulate(prob, runs[key][0], steps=2, batch_size=b, trials=R, seed=0, metrics=(),
                       sampling=sampling, fast=True)
    best = dict.fromkeys(runs, np.inf)
    for rep in range(repeats):
        for key, (opt, sampling) in runs.items():
            _CLOCK.marks.clear()
            dpsim.simulate(prob, opt, steps=steps, batch_size=b, trials=R, seed=rep, metrics=(),
                           record_every=steps, sampling=sampling, fast=True)
            (_, c0), (_, c1) = _CLOCK.marks[0], _CLOCK.marks[-1]
            best[key] = min(best[key], (c1 - c0) / (steps * R) * 1e9)
    return best


def _best_once(fn, *args):
    c0 = time.process_time()
    fn(*args)
    return time.process_time() - c0


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="shorter runs and two repeats")
    ap.add_argument("--problems", nargs="*", default=list(PROBLEMS))
    ap.add_argument("--optimizers", nargs="*", default=list(OPTIMIZERS))
    ap.add_argument("--trials", nargs="*", type=int, default=[1, 256, 4096])
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0.5, help="target CPU seconds per timed run")
    ap.add_argument("--no-engine", action="store_true", help="time the fused path only")
    ap.add_argument("--rng-ab", action="store_true",
                    help="also time the fused kernel drawing through Numba's Generator methods "
                         "(DPSIM_FUSED_RNG=numba), interleaved with the default inlined bit generator")
    ap.add_argument("--json", default=None)
    ap.add_argument("--breakdown", action="store_true",
                    help="also time the pieces of a fused dp_sgd step (least squares, R = 4096)")
    ap.add_argument("--in-context", action="store_true",
                    help="also time fused least-squares runs that each drop one piece (normals, "
                         "binomial, Floyd, clipping; R = 4096), interleaved: each piece's cost "
                         "inside the kernel")
    args = ap.parse_args(argv)
    rec = _record.Recorder("bench_small_d", args, argv)
    repeats = min(2, args.repeats) if args.quick else args.repeats
    budget = args.budget / 4 if args.quick else args.budget
    b = args.batch_size

    lim0 = machine_limits.measure()
    print(f"machine: {platform.processor() or platform.machine()}, load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at start")
    print(machine_limits.line(lim0), flush=True)
    rows = []
    hdr = (f"{'problem':14s} {'optimizer':12s} {'R':>5s} {'engine ts/s':>12s} {'fused ts/s':>12s} "
           f"{'fused ts/s':>12s} {'fused/eng':>9s} {'%roof':>6s}")
    print(hdr)
    print(f"{'':14s} {'':12s} {'':5s} {'(cpu)':>12s} {'(cpu)':>12s} {'(wall)':>12s} {'(cpu)':>9s} "
          f"{'(cpu)':>6s}")
    for pname in args.problems:
        prob = PROBLEMS[pname]()
        prob.optimum  # noqa: B018 - computed once, outside the timings
        opts = {o: OPTIMIZERS[o]() for o in args.optimizers}
        for R in args.trials:
            runs = []  # (optimizer, fast, steps)
            for oname, opt in opts.items():
                can_fuse = not isinstance(fused_block.plan(prob, opt, trials=R), str)
                paths = ([] if args.no_engine and can_fuse else [False]) + ([True] if can_fuse else [])
                if can_fuse and args.rng_ab:
                    paths.append("numba_rng")
                for fast in paths:
                    # warm-up (compilation, caches), then steps so that a run takes ~budget s
                    _simulate(prob, opt, steps=2, batch_size=b, trials=R, seed=0, fast=fast,
                              metrics=())
                    w3, c3 = _timed(prob, opt, R=R, b=b, T=3, fast=fast, seed=0)
                    per = max(c3, 1e-7) / 3
                    runs.append((oname, fast, int(min(400_000, max(3, budget / per)))))
            best = {(o, f): (np.inf, np.inf) for o, f, _ in runs}
            for rep in range(repeats):
                for oname, fast, T in runs:  # interleaved
                    w, c = _timed(prob, opts[oname], R=R, b=b, T=T, fast=fast, seed=rep)
                    bw, bc = best[(oname, fast)]
                    best[(oname, fast)] = (min(bw, w / T), min(bc, c / T))
            for oname in opts:
                row = {"problem": pname, "optimizer": oname, "R": R, "d": prob.d}
                for fast, key in ((False, "engine"), (True, "fused"), ("numba_rng", "fused_numba_rng")):
                    if (oname, fast) in best:
                        w, c = best[(oname, fast)]
                        row.update({f"{key}_step_wall_s": w, f"{key}_step_cpu_s": c,
                                    f"{key}_trial_steps_per_s_wall": R / w,
                                    f"{key}_trial_steps_per_s_cpu": R / c})
                rows.append(row)
    lim1 = machine_limits.measure()
    # the roofline on the CPU clock (the step times are compared on it too)
    lim = {"gemm_gflops": max(lim0["gemm_gflops_cpu"], lim1["gemm_gflops_cpu"]),
           "normals_per_s": max(lim0["normals_per_s_cpu"], lim1["normals_per_s_cpu"])}
    for row in rows:
        roof = roofline_step(row["R"], b, row["d"], lim["gemm_gflops"], lim["normals_per_s"])
        row["roofline_step_s"] = roof
        for key in ("engine", "fused"):
            if f"{key}_step_cpu_s" in row:
                row[f"{key}_roofline_frac_cpu"] = roof / row[f"{key}_step_cpu_s"]

        def f(k, fmt="12,.0f"):
            return format(row[k], fmt) if k in row else " " * (len(format(1.0, fmt)) - 1) + "-"

        ratio = (format(row["engine_step_cpu_s"] / row["fused_step_cpu_s"], "9.1f")
                 if "engine_step_cpu_s" in row and "fused_step_cpu_s" in row else "        -")
        key = "fused" if "fused_step_cpu_s" in row else "engine"
        print(f"{row['problem']:14s} {row['optimizer']:12s} {row['R']:5d} "
              f"{f('engine_trial_steps_per_s_cpu'):>12s} {f('fused_trial_steps_per_s_cpu'):>12s} "
              f"{f('fused_trial_steps_per_s_wall'):>12s} {ratio} "
              f"{100 * row[f'{key}_roofline_frac_cpu']:5.1f}%")
    print(machine_limits.line(lim1) + "  [after]")
    print(f"roofline rates used (CPU clock, faster of before/after): GEMM {lim['gemm_gflops']:.1f} GFLOP/s, "
          f"{lim['normals_per_s'] / 1e6:.1f} M normals/s; load average {os.getloadavg()[0]:.1f} at end")

    # summaries: per-trial speed-up of R = 256 over R = 1; optimizers relative to dp_sgd
    speedups, relative = [], []
    sel = {(r["problem"], r["optimizer"], r["R"]): r for r in rows}
    for pname in args.problems:
        for oname in args.optimizers:
            one, many = sel.get((pname, oname, 1)), sel.get((pname, oname, 256))
            if one is None or many is None:
                continue
            for a, bkey in (("fused", "fused"), ("engine", "engine"), ("engine", "fused")):
                ka, kb = f"{a}_step_cpu_s", f"{bkey}_step_cpu_s"
                if ka in one and kb in many:
                    s = one[ka] / (many[kb] / 256)
                    speedups.append({"problem": pname, "optimizer": oname, "R1_path": a,
                                     "R256_path": bkey, "per_trial_speedup_256_over_1": s})
                    print(f"per-trial speed-up R=256 over R=1 (cpu): {pname} {oname} "
                          f"{a} R=1 -> {bkey} R=256: {s:.1f}x")
        for R in args.trials:
            base = sel.get((pname, "dp_sgd", R))
            if base is None:
                continue
            bk = "fused" if "fused_step_cpu_s" in base else "engine"
            for oname in args.optimizers:
                row = sel.get((pname, oname, R))
                if oname == "dp_sgd" or row is None:
                    continue
                k = "fused" if "fused_step_cpu_s" in row else "engine"
                rel = base[f"{bk}_step_cpu_s"] / row[f"{k}_step_cpu_s"]
                relative.append({"problem": pname, "optimizer": oname, "R": R, "path": k,
                                 "speed_relative_to_dp_sgd": rel})
                print(f"{pname} R={R}: {oname} ({k}) runs at {rel:.2f}x dp_sgd's speed ({bk}) (cpu)")
    rng_ab = []
    for row in rows:
        if "fused_numba_rng_step_cpu_s" in row and "fused_step_cpu_s" in row:
            x = row["fused_numba_rng_step_cpu_s"] / row["fused_step_cpu_s"]
            rng_ab.append({"problem": row["problem"], "optimizer": row["optimizer"], "R": row["R"],
                           "inline_over_numba_rng": x})
            print(f"inlined bit generator vs Numba Generator methods (cpu, same run): "
                  f"{row['problem']} {row['optimizer']} R={row['R']}: {x:.2f}x "
                  f"({row['fused_numba_rng_trial_steps_per_s_cpu']:,.0f} -> "
                  f"{row['fused_trial_steps_per_s_cpu']:,.0f} trial-steps/s)")
    target = sel.get(("least_squares", "dp_sgd", 4096))
    if target is not None and "fused_trial_steps_per_s_cpu" in target:
        print(f"target (least_squares d=20, dp_sgd, R=4096): "
              f"{target['fused_trial_steps_per_s_cpu']:,.0f} trial-steps/s cpu "
              f"({target['fused_trial_steps_per_s_wall']:,.0f} wall), "
              f"{100 * target['fused_roofline_frac_cpu']:.0f}% of the roofline")
    pieces = {}
    if args.breakdown:
        pieces = breakdown(R=4096, b=b)
        print("breakdown of a fused dp_sgd step, least_squares d=20, R=4096 (cpu ns per trial-step, "
              "each piece alone):")
        for k, v in pieces.items():
            print(f"  {k:42s} {v:7.1f} ns")
    ctxt = {}
    if args.in_context:
        ctxt = in_context(R=4096, b=b)
        base = ctxt["dp_sgd, poisson"]
        print("in context (fused least squares d=20, R=4096, cpu ns per trial-step, best of 4 "
              "interleaved runs; difference to dp_sgd under Poisson sampling):")
        for k, v in ctxt.items():
            print(f"  {k:28s} {v:7.1f} ns  ({v - base:+7.1f})")
    out = {"in_context_ns_per_trial_step": ctxt, "breakdown_ns_per_trial_step": pieces,
           "machine_limits_before": lim0, "machine_limits_after": lim1, "roofline_rates": lim,
           "batch_size": b, "repeats": repeats, "budget_s": budget, "rows": rows, "speedups": speedups,
           "relative_to_dp_sgd": relative, "rng_ab": rng_ab}
    rec.finish(out, args.json)
    return out


if __name__ == "__main__":
    main()
