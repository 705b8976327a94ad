"""This machine's limits, measured in the calling benchmark's own run (imported by the scripts).

    python benchmarks/machine_limits.py [--size 640000] [--json OUT]   # prints the line alone

* ``gemm_gflops``: float64 matrix product ``A @ B`` (``n × n``, n = 512 by default) with the BLAS
  thread count the process has (set ``OMP_NUM_THREADS=1`` for the single-core figure), counted as
  ``2n³`` flops per product, best of a few repeats.
* ``normals_per_s``: ``numpy.random.Generator(PCG64).standard_normal(out=...)`` into a
  preallocated float64 array of ``size`` elements (default 640 000 = the R·d of workload W at
  R = 64), one thread: the single-core Gaussian-sampling ceiling.
* ``normals_per_s_f32``: the same in float32.
* ``inlined_normals_per_s``: the same numbers drawn by :func:`dpsim._bitgen.fill_normals` (NumPy's
  PCG64 and ziggurat inlined in Numba, one thread): the rate dpsim's own draws reach, above the
  ceiling of NumPy's fill (the issue's definition of the single-core ceiling, kept as the
  reference); a benchmark also reports its fraction of this faster one.
* ``blocked_normals_per_s``: the blocked noise layout of :mod:`dpsim.backend` (threads = the
  CPUs this process may use), the rate a run with ``backend="numpy:blocked"`` can draw at; it
  exceeds the single-core ceiling only when other cores are free.

* ``gemm_gflops_cpu``, ``normals_per_s_cpu``: the first two timed on the process CPU clock
  (``time.process_time``) instead of the wall clock: on a machine shared with other jobs the wall
  clock also counts the time spent waiting for a core, the CPU clock only the work (cache and
  memory-bandwidth sharing still slow it).  Compare CPU-clock figures with CPU-clock figures.

Numbers measured while other processes run are lower; what to quote is a ratio of two figures
taken in the same run.
"""

from __future__ import annotations

import time

import numpy as np


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def _best(fn, repeats, clock="wall"):
    now = CLOCKS[clock]
    best = float("inf")
    for _ in range(repeats):
        t0 = now()
        fn()
        best = min(best, now() - t0)
    return best


def gemm_gflops(n: int = 512, repeats: int = 5, clock: str = "wall") -> float:
    """``clock="cpu"``: the process CPU time (the cost on one core while others share the
    machine; meaningful with one BLAS thread)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    a @ b
    return 2.0 * n ** 3 / _best(lambda: a @ b, repeats, clock) / 1e9


def normals_per_s(size: int = 640_000, repeats: int = 5, dtype="float64", clock: str = "wall") -> float:
    g = np.random.Generator(np.random.PCG64(0))
    out = np.empty(size, dtype=dtype)
    g.standard_normal(out=out, dtype=dtype)
    return size / _best(lambda: g.standard_normal(out=out, dtype=dtype), repeats, clock)


def inlined_normals_per_s(size: int = 640_000, repeats: int = 5, clock: str = "wall") -> float:
    from dpsim import _bitgen  # noqa: PLC0415

    g = np.random.Generator(np.random.PCG64(0))
    out = np.empty(size)
    _bitgen.fill_normals(g, out)
    return size / _best(lambda: _bitgen.fill_normals(g, out), repeats, clock)


def blocked_normals_per_s(shape=(64, 10_000), repeats: int = 5, draws: int = 10) -> tuple[float, int]:
    """Sustained rate of back-to-back draws of one shape (the pool never idles: each draw waits
    for the one made ahead and starts the next)."""
    from dpsim.backend import Backend  # noqa: PLC0415

    be = Backend("numpy:blocked", seed=0)
    try:
        be.normal(shape)

        def run():
            for _ in range(draws):
                be.normal(shape)

        return draws * shape[0] * shape[1] / _best(run, repeats), be.threads
    finally:
        be.close()


def measure(size: int = 640_000) -> dict:
    """All the limits, as a dict (the benchmarks put it in their JSON)."""
    blocked, threads = blocked_normals_per_s((64, max(1, size // 64)))
    return {"gemm_gflops": gemm_gflops(), "normals_per_s": normals_per_s(size),
            "normals_per_s_f32": normals_per_s(size, dtype="float32"),
            "inlined_normals_per_s": inlined_normals_per_s(size),
            "blocked_normals_per_s": blocked, "blocked_threads": threads,
            "gemm_gflops_cpu": gemm_gflops(clock="cpu"),
            "normals_per_s_cpu": normals_per_s(size, clock="cpu")}


def line(m: dict) -> str:
    return (f"machine limits (this run): GEMM {m['gemm_gflops']:.1f} GFLOP/s; normals "
            f"{m['normals_per_s'] / 1e6:.1f} M/s float64, {m['normals_per_s_f32'] / 1e6:.1f} M/s float32 "
            f"(one thread), {m['inlined_normals_per_s'] / 1e6:.1f} M/s float64 inlined "
            f"(dpsim._bitgen, one thread), {m['blocked_normals_per_s'] / 1e6:.1f} M/s blocked layout "
            f"({m['blocked_threads']} threads); on the CPU clock: GEMM {m['gemm_gflops_cpu']:.1f} "
            f"GFLOP/s, normals {m['normals_per_s_cpu'] / 1e6:.1f} M/s")


def main(argv=None) -> dict:
    import argparse  # noqa: PLC0415
    import os  # noqa: PLC0415
    import sys  # noqa: PLC0415

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=640_000, help="normals per draw (R·d)")
    ap.add_argument("--json", default=None, help="also write the record here (benchmarks/_record.py)")
    args = ap.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _record  # noqa: PLC0415

    rec = _record.Recorder("machine_limits", args, argv)
    m = measure(args.size)
    print(line(m))
    rec.finish(m, args.json)
    return m


if __name__ == "__main__":
    main()
