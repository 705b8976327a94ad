"""Timing set-up shared by the benchmarks: the clocks and workload W.

Workload W (``bench_dp_sgd.py``, ``bench_overhead.py``, ``bench_variants.py``,
``bench_correlated.py``): DP-SGD (lr 0.5, C = 1, σ = 1) on
``logistic_regression(n=25_000, d=10_000, density=0.01)``, b = 64, R = 64.
"""

from __future__ import annotations

import time

#: workload W's problem (``logistic_regression`` arguments) and its batch size and trials
W = {"n": 25_000, "d": 10_000, "density": 0.01}
W_BATCH, W_TRIALS = 64, 64


def best_of(fn, repeats: int, clock=time.perf_counter) -> float:
    """The least time of ``repeats`` calls of ``fn`` on ``clock``."""
    best = float("inf")
    for _ in range(repeats):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


def both_clocks(fn) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one call of ``fn``: on a machine shared with other
    jobs the wall clock also counts the time spent waiting for a core, the CPU clock only the work."""
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


def workload_w(n: int = W["n"], d: int = W["d"], density: float = W["density"], scale: float = 1.0):
    """``(problem, build seconds)``: W's sparse logistic regression (``scale`` shrinks n and d)."""
    from dpsim import problems  # noqa: PLC0415

    n, d = int(round(n * scale)), int(round(d * scale))
    t0 = time.perf_counter()
    prob = problems.logistic_regression(n, d, density=density, seed=0)
    return prob, time.perf_counter() - t0


def w_label(n: int = W["n"], d: int = W["d"], density: float = W["density"]) -> str:
    return f"logistic_regression(n={n}, d={d}, density={density})"


def w_dp_sgd():
    """W's optimizer: DP-SGD with lr 0.5, C = 1, σ = 1."""
    from dpsim import optimizers  # noqa: PLC0415

    return optimizers.get("dp_sgd", lr=0.5, clip=1.0, noise_multiplier=1.0)
