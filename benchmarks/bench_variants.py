"""Rerunnable benchmark: throughput of every optimizer relative to DP-SGD at workload W, in one run.

    OMP_NUM_THREADS=1 python benchmarks/bench_variants.py [--steps 100] [--trials 64]
        [--optimizers dp_sgd dp_adam ...] [--target-s 3] [--json OUT]

Workload W: ``logistic_regression(n=25_000, d=10_000, density=0.01)``, b = 64, Poisson sampling
(also for PAGAN, whose paper samples with replacement: the sampler does not change the per-step
cost), R = 64.  Default: every registered optimizer (``dpsim.optimizers.names()``) plus DP-SGD
with banded correlated noise (``dp_sgd[banded:4]``) and AdaDPS at its default public split of 1 %
(``adadps[public 1%]``; the ``adadps`` row carves out 5 %, as ``pdp_sgd`` does: its public
RMSProp reads every public row each step, so its cost grows with the split).  Each is run for 2 steps twice (a warm-up for Numba
compilation, then a per-step estimate) and then timed; the number of timed steps is ``--steps``,
or fewer for a slow optimizer (enough for about ``--target-s`` seconds, at least 3), so the whole
table stays affordable (``dp_sgd_ctcdp``, whose plan is made for a step count, always runs
``--steps``).  The ctCDP plan at W needs b = 502 fixed-size batches at 100 steps ([L2P]'s
conditions (10)/(13) admit no b = 64 there), eight times W's per-example work: it is also compared
with ``dp_sgd`` run at that batch size and sampler (``dp_sgd[as dp_sgd_ctcdp]``), the comparison
``--paired`` makes for it.  Reports steps × trials per second and the ratio to ``dp_sgd`` measured in the same
process, with the machine-limits line of the same run.  The timed runs record nothing
(``metrics=()``).  Optimizers that need settings get those of ``SETTINGS`` (the public split of
AdaDPS / PDP-SGD, PAGAN's radius, the ctCDP plan's batch size and fixed-size sampling).

``--paired N`` (for a loaded machine): after the table, each optimizer is timed against ``dp_sgd``
in ``N`` interleaved pairs (``dp_sgd``, optimizer, ``dp_sgd``, optimizer, ...), each run the
optimizer's step count from the table; a pair's ratio is the optimizer's steps per second over
``dp_sgd``'s in the same pair, on the wall clock and on the process CPU clock
(``time.process_time``: on a machine shared with other jobs the CPU clock leaves out the time the
process waited for a core).  The median ratio over the pairs is reported with its min and max.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _record  # noqa: E402
import dpsim  # noqa: E402
import machine_limits  # noqa: E402
from _timing import W, W_BATCH, W_TRIALS, both_clocks, workload_w  # noqa: E402
from dpsim import optimizers  # noqa: E402

SETTINGS = {
    "pagan": dict(radius=1e3),
    "pasan": dict(radius=1e3),
    "adadps": dict(public_fraction=0.05),
    "pdp_sgd": dict(k=2, public_fraction=0.05),
    "dp_sgd[banded:4]": dict(noise="banded:4"),
    "adadps[public 1%]": dict(public_fraction=0.01),
}


def _optimizer(label):
    name = label.split("[")[0]
    return optimizers.get(name, **SETTINGS.get(label, {}))


def _sim_kwargs(label, args, n):
    if label == "dp_sgd_ctcdp":
        try:
            from dpsim.optimizers import ctcdp  # noqa: PLC0415
            plan = ctcdp.plan(epsilon=1.0, delta=1e-5, steps=args.steps, n=n, clip=1.0)
            return dict(sampling="fixed", batch_size=plan["batch_size"])
        except Exception:  # noqa: BLE001 - the plan's API is not part of this benchmark
            return dict(sampling="fixed", batch_size=args.batch_size)
    return dict(sampling="poisson", batch_size=args.batch_size)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=W["n"])
    ap.add_argument("--d", type=int, default=W["d"])
    ap.add_argument("--density", type=float, default=W["density"])
    ap.add_argument("--batch-size", type=int, default=W_BATCH)
    ap.add_argument("--trials", type=int, default=W_TRIALS)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--target-s", type=float, default=3.0)
    ap.add_argument("--backend", default="numpy")
    ap.add_argument("--optimizers", nargs="+", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--paired", type=int, default=0, metavar="N",
                    help="then N interleaved (dp_sgd, optimizer) pairs per optimizer, median ratios")
    args = ap.parse_args(argv)
    rec = _record.Recorder("bench_variants", args, argv)

    prob, _ = workload_w(args.n, args.d, args.density)
    labels = args.optimizers or (optimizers.names() + ["dp_sgd[banded:4]", "adadps[public 1%]"])
    labels = list(dict.fromkeys(["dp_sgd"] + list(labels)))
    # a variant whose run needs another batch size or sampler than W's (the ctCDP plan: [L2P]'s
    # conditions (10)/(13) admit no b = 64 here) is also compared with dp_sgd run the same way
    same = {f"dp_sgd[as {lab}]": lab for lab in labels
            if _sim_kwargs(lab, args, prob.n) != _sim_kwargs("dp_sgd", args, prob.n)}
    labels += list(same)
    limits = machine_limits.measure(args.trials * args.d)
    rates, steps_used, errors, runs = {}, {}, {}, {}
    for label in labels:
        try:
            opt = _optimizer(label)
        except Exception as exc:  # noqa: BLE001
            errors[label] = f"{type(exc).__name__}: {exc}"
            continue
        skw = _sim_kwargs(same.get(label, label), args, prob.n)

        def run(steps, opt=opt, skw=skw):
            return dpsim.simulate(prob, opt, steps=steps, trials=args.trials, seed=0, record_every=steps,
                                  metrics=(), backend=args.backend, **skw)

        try:
            fixed = same.get(label, label) == "dp_sgd_ctcdp"  # its plan is for exactly --steps steps
            warm = args.steps if fixed else 2
            run(warm)  # warm-up (Numba compilation)
            t0 = time.perf_counter()
            if not fixed:
                run(warm)  # the per-step estimate
            est = max((time.perf_counter() - t0) / warm, 1e-6)
            steps = args.steps if fixed else int(min(args.steps, max(3, math.ceil(args.target_s / est))))
            t0 = time.perf_counter()
            run(steps)
            best = time.perf_counter() - t0
        except Exception as exc:  # noqa: BLE001 - report and go on with the table
            errors[label] = f"{type(exc).__name__}: {exc}"
            continue
        rates[label] = args.trials * steps / best
        steps_used[label] = steps
        runs[label] = run
    base = rates["dp_sgd"]
    print(f"logistic_regression(n={args.n}, d={args.d}, density={args.density}), b={args.batch_size}, "
          f"R={args.trials}, up to {args.steps} steps, backend={args.backend}")
    print(machine_limits.line(limits))
    print(f"{'optimizer':<26}{'steps':>7}{'steps*trials/s':>16}{'vs dp_sgd':>11}")
    twin = {lab: tw for tw, lab in same.items()}
    for name, r in sorted(rates.items(), key=lambda kv: -kv[1]):
        extra = ""
        if name in twin and twin[name] in rates:
            extra = (f"   {r / rates[twin[name]]:.3f} vs dp_sgd at its batch size and sampler "
                     f"({_sim_kwargs(name, args, prob.n)})")
        print(f"{name:<26}{steps_used[name]:>7}{r:>16,.1f}{r / base:>11.3f}{extra}")
    for name, e in errors.items():
        print(f"{name:<26} failed: {e}")
    paired = _paired(runs, steps_used, args.paired) if args.paired > 0 else {}
    rec.finish({"rates": rates, "ratio_to_dp_sgd": {k: v / base for k, v in rates.items()},
                "ratio_to_dp_sgd_same_batch": {lab: rates[lab] / rates[tw]
                                               for tw, lab in same.items()
                                               if lab in rates and tw in rates},
                "steps": steps_used, "errors": errors, "machine_limits": limits,
                "paired": paired}, args.json)
    return rates


def _timed(run, steps):
    """(wall seconds, process CPU seconds) of one run of ``steps`` steps."""
    return both_clocks(lambda: run(steps))


def _paired(runs, steps_used, n):
    """Per optimizer, ``n`` pairs (``dp_sgd`` run, optimizer run) in turn; the pair's ratio of
    steps per second on the wall and CPU clocks; the median, min and max over the pairs."""
    out = {}
    print(f"paired with dp_sgd, {n} pairs each (median [min, max] of the per-pair ratios)")
    print(f"{'optimizer':<26}{'steps':>7}{'wall ratio':>26}{'cpu ratio':>26}")
    for label, run in runs.items():
        if label == "dp_sgd" or label.startswith("dp_sgd[as "):
            continue
        # against dp_sgd run as this variant runs (batch size, sampler) where W's cannot host it
        base = runs.get(f"dp_sgd[as {label}]", runs["dp_sgd"])
        steps = steps_used[label]
        wall, cpu = [], []
        for _ in range(n):
            bw, bc = _timed(base, steps)
            ow, oc = _timed(run, steps)
            wall.append(bw / ow)
            cpu.append(bc / oc)
        stats = {k: dict(median=statistics.median(v), min=min(v), max=max(v), ratios=v)
                 for k, v in (("wall", wall), ("cpu", cpu))}
        out[label] = dict(steps=steps, **stats)
        cells = "".join(f"{s['median']:>10.3f} [{s['min']:.3f}, {s['max']:.3f}]" for s in stats.values())
        print(f"{label:<26}{steps:>7}{cells}", flush=True)
    return out


if __name__ == "__main__":
    main()
