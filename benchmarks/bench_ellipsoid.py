"""Rerunnable benchmark: ellipsoid projections per second, Numba kernel vs a SciPy root-finder loop.

    python benchmarks/bench_ellipsoid.py [--dims 100 10000] [--rows 4096] [--scipy-rows 256]
                                         [--ratio 1e4] [--repeats 3] [--json OUT]

Each row ``g`` (a 64 × 64 = 4096-row batch by default, standard normal entries) is projected onto
``E_A = {x : Σ_j a_j x_j² ≤ 1}`` with ``a`` log-uniform over an axis ratio ``a_max/a_min =
--ratio`` (every row lies outside, so every row needs a root-find).  Compared:

* kernel — :func:`dpsim.privacy`'s ``project_ellipsoid`` (``dpsim.privacy._ellipsoid``): safeguarded
  Newton on ``1/||A^{1/2}π_λ(g)||`` in a Numba kernel, all rows in one call (best of
  ``--repeats``, after a warm-up call that compiles / loads the cache);
* SciPy — ``scipy.optimize.brentq`` on ``φ(λ) = Σ_j a_j g_j²/(1 + λa_j)² − 1`` per row, ``φ``
  evaluated with NumPy vector operations, on the first ``--scipy-rows`` rows (the rate is per
  row, so a subset suffices), same tolerance as the tests' oracle.

Prints projections per second for both, their ratio, and the largest coordinate-wise relative
difference between the two results.

``--glm`` adds the privatizer's GLM path on the foundation workload's rows
(``logistic_regression(25_000, 10_000, density=0.01)``, b = 64): ``glm_projected_sum`` (the sum
of projected per-example gradients straight from the CSR rows) against the materializing path
(``per_example_grads`` (R, b, d) + the dense kernel + the sum over the batch), for ``reg`` 0 and
the default 1e-4 and for a constant (``scaling="identity"``) and a varying ``A`` (``--ratio``);
trials per second of each, on ``--glm-trials`` trials for the kernel and 2 for the reference.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numba  # noqa: E402
from scipy.optimize import brentq  # noqa: E402

from dpsim.privacy._ellipsoid import project_ellipsoid  # noqa: E402


def scipy_project(G, a):
    out = np.empty_like(G)
    ag = a[None, :] * G * G
    for i in range(G.shape[0]):
        g, w = G[i], ag[i]
        if w.sum() <= 1.0:
            out[i] = g
            continue

        def phi(lam, w=w):
            return float(np.sum(w / (1.0 + lam * a) ** 2)) - 1.0

        hi = 2.0 * math.sqrt(float(np.sum(g * g / a))) + 1.0
        lam = brentq(phi, 0.0, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=2000)
        out[i] = g / (1.0 + lam * a)
    return out


def _best_of(fn, repeats):
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dims", type=int, nargs="+", default=[100, 10_000])
    ap.add_argument("--rows", type=int, default=64 * 64)
    ap.add_argument("--scipy-rows", type=int, default=256)
    ap.add_argument("--ratio", type=float, default=1e4, help="a_max / a_min")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="write the numbers here")
    ap.add_argument("--glm", action="store_true", help="also time the GLM path (module docstring)")
    ap.add_argument("--glm-trials", type=int, default=64)
    args = ap.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    out = {"machine": platform.processor() or platform.machine(), "python": platform.python_version(),
           "numba": numba.__version__, "numba_threads": numba.get_num_threads(),
           "rows": args.rows, "ratio": args.ratio, "results": []}
    print(f"rows={args.rows}  a_max/a_min={args.ratio:g}  numba threads={numba.get_num_threads()}")
    print(f"{'d':>7} {'kernel proj/s':>15} {'scipy proj/s':>14} {'ratio':>9} {'max rel diff':>13}")
    for d in args.dims:
        half = math.log10(args.ratio) / 2
        a = 10.0 ** rng.uniform(-half, half, d)
        G = rng.standard_normal((args.rows, d))
        project_ellipsoid(G[:2], a)  # warm-up
        t_k = _best_of(lambda: project_ellipsoid(G, a), args.repeats)
        k = min(args.scipy_rows, args.rows)
        t_s = _best_of(lambda: scipy_project(G[:k], a), 1)
        rate_k, rate_s = args.rows / t_k, k / t_s
        P = project_ellipsoid(G[:k], a)
        S = scipy_project(G[:k], a)
        diff = float(np.max(np.abs(P - S) / np.maximum(np.abs(S), 1e-300)))
        print(f"{d:>7} {rate_k:>15.4g} {rate_s:>14.4g} {rate_k / rate_s:>9.1f} {diff:>13.2e}")
        out["results"].append({"d": d, "kernel_per_s": rate_k, "scipy_per_s": rate_s,
                               "ratio": rate_k / rate_s, "scipy_rows": k, "max_rel_diff": diff})
    if args.glm:
        out["glm"] = _glm_rows(args, rng)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return out


def _glm_rows(args, rng):
    from dpsim import problems  # noqa: PLC0415
    from dpsim.privacy._ellipsoid import _project_flat, glm_projected_sum  # noqa: PLC0415

    rows = []
    d, b = 10_000, 64
    half = math.log10(args.ratio) / 2
    print(f"GLM path: logistic_regression(25000, {d}, density=0.01), b={b}")
    print(f"{'reg':>7} {'A':>9} {'kernel trials/s':>16} {'materialize trials/s':>21} {'ratio':>8} "
          f"{'max rel diff':>13}")
    for reg in (0.0, 1e-4):
        prob = problems.logistic_regression(25_000, d, density=0.01, reg=reg, seed=0)
        for kind in ("constant", "varying"):
            a = (np.full((1, d), 1e-2) if kind == "constant"
                 else (10.0 ** rng.uniform(-half, half, d) * 1e-2)[None, :])
            R = args.glm_trials
            W = 0.3 * rng.standard_normal((R, d))
            idx = rng.integers(0, prob.n, (R, b))
            arow = np.zeros(R, dtype=np.int64)

            def kernel(R=R, W=W, idx=idx, arow=arow, a=a, prob=prob, reg=reg):
                return glm_projected_sum(prob.features, prob.y, "logistic", reg, W, idx, None, a, arow)

            def materialize(W=W, idx=idx, a=a, prob=prob):
                g = prob.per_example_grads(W[:2], idx[:2])
                out, _ = _project_flat(np.ascontiguousarray(g.reshape(-1, d)), a,
                                       np.zeros(2 * b, dtype=np.int64))
                return out.reshape(2, b, d).sum(axis=1)

            kernel()
            materialize()
            t_k = _best_of(kernel, args.repeats)
            t_m = _best_of(materialize, args.repeats)
            got, ref = kernel()[0][:2], materialize()
            diff = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
            rk, rm = R / t_k, 2 / t_m
            print(f"{reg:>7g} {kind:>9} {rk:>16.4g} {rm:>21.4g} {rk / rm:>8.1f} {diff:>13.2e}")
            rows.append({"reg": reg, "A": kind, "kernel_trials_per_s": rk,
                         "materialize_trials_per_s": rm, "max_rel_diff": diff})
    return rows


if __name__ == "__main__":
    main()
