"""Rerunnable benchmark: streamed DP-MF correlated noise (dpsim.privacy.mf).

    python benchmarks/bench_mf.py [--trials 64] [--d 10000] [--steps 200] [--backend numpy] [--json OUT]

(a) Per-step cost of the unit-scale noise ``u_t = sens(M)·(M⁻¹Z)_t`` for draws of shape (R, d):
    plain Gaussian draws (``noise="gaussian"``, exactly DP-SGD's ``backend.normal``), the
    ``banded:4`` IIR filter (3 axpys on top of the draw), and exact ``sqrt_toeplitz`` streaming (a
    Z-history buffer; step t costs O(t·R·d), so the mean per-step cost grows linearly with T and
    the buffer T·R·d·8 bytes is capped at 2 GiB — T ≤ 419 at (64, 10 000)).  Ratios to the plain
    draw are what to quote.  Each configuration runs once untimed first (warm-up).
(b) Prefix-sum RMSE (``prefix_rmse``: sens(M)·||A M⁻¹||_F/√T, unit noise; identity = √((T+1)/2))
    for T ∈ {100, 1000, 10000} and identity, sqrt_toeplitz, banded:{2,4,8,16}, with the time to
    optimize each banded strategy (cold cache), all from Toeplitz coefficients in O(T·k).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from dpsim.privacy import mf  # noqa: E402
from dpsim.backend import Backend  # noqa: E402


def _sync(backend):
    if backend.name == "cupy":
        backend.xp.cuda.Stream.null.synchronize()


def time_stream(name, steps, shape, backend_name, dtype, repeats):
    """Best-of-``repeats`` mean seconds per step over a full stream of ``steps`` steps."""
    s = mf.noise_stream(name, steps)
    best = float("inf")
    for rep in range(repeats + 1):  # first run is the warm-up
        be = Backend(backend_name, rep, dtype)
        st = s.init(shape, be)
        _sync(be)
        t0 = time.perf_counter()
        for _ in range(steps):
            u, st = s.next(st, be)
        _sync(be)
        dt = (time.perf_counter() - t0) / steps
        del st, u
        if rep > 0:
            best = min(best, dt)
    return best


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--d", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=200, help="steps timed for gaussian and banded:4")
    ap.add_argument("--sqrt-steps", type=int, nargs="+", default=[100, 400],
                    help="stream lengths T timed for sqrt_toeplitz (mean per-step cost grows with T)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", default="numpy")
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--rmse-steps", type=int, nargs="+", default=[100, 1000, 10_000])
    ap.add_argument("--json", default=None, help="write the numbers here")
    args = ap.parse_args(argv)
    shape = (args.trials, args.d)
    out = {"machine": platform.processor() or platform.machine(), "python": platform.python_version(),
           "numpy": np.__version__, "backend": args.backend, "dtype": args.dtype, "shape": list(shape)}

    print(f"(a) per-step noise cost, shape (R, d) = {shape}, backend={args.backend}, {args.dtype}")
    timing = {}
    base = time_stream("gaussian", args.steps, shape, args.backend, args.dtype, args.repeats)
    timing["gaussian"] = {"steps": args.steps, "ms_per_step": 1e3 * base, "ratio": 1.0}
    for name, steps in [("banded:4", args.steps)] + [("sqrt_toeplitz", T) for T in args.sqrt_steps]:
        try:
            dt = time_stream(name, steps, shape, args.backend, args.dtype, args.repeats)
        except ValueError as exc:  # memory cap
            print(f"  {name:>14} T={steps:<6} skipped: {exc}")
            continue
        timing[f"{name}@T={steps}"] = {"steps": steps, "ms_per_step": 1e3 * dt, "ratio": dt / base}
    for key, v in timing.items():
        print(f"  {key:>22}  T={v['steps']:<6} {v['ms_per_step']:9.3f} ms/step   {v['ratio']:6.2f}× gaussian")
    out["timing"] = timing

    print("\n(b) prefix-sum RMSE (unit noise; identity = sqrt((T+1)/2)); [seconds to optimize banded]")
    names = ["identity", "sqrt_toeplitz", "banded:2", "banded:4", "banded:8", "banded:16"]
    table = {}
    print(f"  {'T':>6} " + " ".join(f"{n:>18}" for n in names))
    for T in args.rmse_steps:
        row = {}
        cells = []
        for n in names:
            mf._banded_cached.cache_clear()
            t0 = time.perf_counter()
            c = mf.toeplitz_coefficients(n, T)
            opt_s = time.perf_counter() - t0
            inv = mf.sqrt_toeplitz_inverse_coefficients(T) if n == "sqrt_toeplitz" else None
            rmse = mf.toeplitz_prefix_rmse(c, T, inverse=inv)
            row[n] = {"rmse": rmse, "opt_seconds": opt_s if n.startswith("banded") else None,
                      "worst_sens_over_sens": mf.toeplitz_worst_case_sensitivity(c, T) / mf.toeplitz_sensitivity(c, T)}
            cells.append(f"{rmse:9.3f}" + (f" [{opt_s:5.2f}s]" if n.startswith("banded") else " " * 9))
        table[str(T)] = row
        print(f"  {T:>6} " + " ".join(f"{c:>18}" for c in cells))
    out["rmse"] = table
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return out


if __name__ == "__main__":
    main()
