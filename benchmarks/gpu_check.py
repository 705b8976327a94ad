"""Check a GPU machine in minutes: the CuPy tests and one GPU-vs-CPU benchmark, numbers to a file.

    make gpu-check                      # installs the gpu-cuda12/13 extra first if CuPy is missing
    python benchmarks/gpu_check.py [--json gpu-check.json] [--steps 200] [--tests-timeout 180]

Installs nothing itself.  Without CuPy or without a CUDA device it prints one line saying so and
exits with status 2.  Otherwise, in this order (about 2-4 minutes in all, most of it first-use
compilation: Numba's kernels for the host sampler, CuPy's for the device):

1. **the CuPy tests**: ``pytest -k "cupy or gpu"`` over the test files that run on every array backend
   (the ``backend_name`` fixture of ``tests/conftest.py`` adds ``"cupy"`` when CuPy sees a device)
   or name CuPy, in a subprocess with a time limit; passed/failed/skipped and the failing ids;
2. **workload W on the GPU against the CPU**: DP-SGD (C = 1, σ = 1) on
   ``logistic_regression(n=25 000, d=10 000, density=0.01)``, b = 64, R = 64, ``--steps`` steps,
   no records (``metrics=()``), ``backend="cupy"`` against ``backend="numpy"`` (one host core for
   BLAS), best of ``--repeats`` interleaved runs after a warm-up; plus R = 1024 on the GPU alone
   (the throughput a GPU is for).  The two backends draw different random streams (CuPy's own
   generator), so the check compares speed, and the final losses only for being finite and close.

Writes everything to ``--json`` and prints a summary; exits 0 when the tests passed (none failed,
at least one ran) and the benchmark ran, else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _no_gpu_reason() -> str | None:
    """None when CuPy imports and sees a CUDA device, else why not (one line)."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a CUDA library error raised at import
        return (f"CuPy is not importable ({type(exc).__name__}: {exc}); `make gpu-check` installs the "
                "gpu-cuda12/gpu-cuda13 extra when nvidia-smi reports a driver")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"CuPy {cupy.__version__} imports but sees no CUDA device ({type(exc).__name__}: {exc})"
    if count < 1:
        return f"CuPy {cupy.__version__} imports but sees no CUDA device"
    return None


def device_info() -> dict:
    import cupy

    rt = cupy.cuda.runtime
    props = rt.getDeviceProperties(0)
    name = props.get("name", b"")
    info = {"device": name.decode() if isinstance(name, bytes) else str(name),
            "devices": rt.getDeviceCount(),
            "memory_gib": round(props.get("totalGlobalMem", 0) / 2**30, 1),
            "cupy": cupy.__version__,
            "cuda_runtime": rt.runtimeGetVersion(), "cuda_driver": rt.driverGetVersion()}
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        info["nvidia_driver"] = smi.stdout.strip().splitlines()[0] if smi.returncode == 0 else None
    except Exception:
        info["nvidia_driver"] = None
    return info


#: The tests run: those whose id or markers say ``cupy`` or ``gpu`` (``[cupy]`` of the
#: ``backend_name`` fixture, ``test_cupy_*``, ``@pytest.mark.gpu``) ...
SELECT = "cupy or gpu"


def gpu_test_files() -> list[str]:
    """... in the test files that can hold them (collecting only these keeps the check short)."""
    out = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        if "backend_name" in text or "mark.gpu" in text or re.search(r"def test_\w*(cupy|gpu)", text):
            out.append(str(path.relative_to(ROOT)))
    return out


def run_tests(timeout: float, workdir: Path) -> dict:
    files = gpu_test_files()
    junit = workdir / "gpu-check-junit.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-k", SELECT, "-p", "no:cacheprovider",
           "--junitxml", str(junit), *files]
    try:  # one process: the CuPy tests share the device and its compiled kernels
        import xdist  # noqa: F401

        cmd[3:3] = ["-n", "0"]
    except ImportError:
        pass
    env = dict(os.environ, HYPOTHESIS_PROFILE=os.environ.get("HYPOTHESIS_PROFILE", "ci"))
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        rc, tail, timed_out = proc.returncode, (proc.stdout + proc.stderr)[-4000:], False
    except subprocess.TimeoutExpired as exc:  # pytest killed: what it printed so far
        out = "".join(x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                      for x in (exc.stdout, exc.stderr))
        rc, tail, timed_out = None, out[-4000:], True
    res = {"command": " ".join(cmd[1:]), "files": files, "returncode": rc, "timed_out": timed_out,
           "duration_s": time.perf_counter() - t0, "passed": 0, "failed": 0, "errors": 0,
           "skipped": 0, "failures": [], "skip_reasons": {}, "output_tail": tail}
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            cid = f"{case.get('classname')}::{case.get('name')}"
            kinds = {child.tag for child in case}
            if "failure" in kinds:
                res["failed"] += 1
                res["failures"].append(cid)
            elif "error" in kinds:
                res["errors"] += 1
                res["failures"].append(cid)
            elif "skipped" in kinds:
                res["skipped"] += 1
                msg = next(c for c in case if c.tag == "skipped").get("message", "")[:200]
                res["skip_reasons"][msg] = res["skip_reasons"].get(msg, 0) + 1
            else:
                res["passed"] += 1
        junit.unlink()
    res["ok"] = (not timed_out and rc == 0 and res["failed"] == 0 and res["errors"] == 0
                 and res["passed"] > 0)
    return res


def run_bench(steps: int, repeats: int, big_trials: int, gpu: str = "cupy") -> dict:
    import numpy as np

    import dpsim
    from dpsim import optimizers, problems

    t0 = time.perf_counter()
    prob = problems.logistic_regression(25_000, 10_000, density=0.01, seed=0)
    build = time.perf_counter() - t0
    opt = optimizers.get("dp_sgd", lr=0.5, clip=1.0, noise_multiplier=1.0)
    b, R, T = 64, 64, steps

    def run(backend, trials, steps):
        t0 = time.perf_counter()
        res = dpsim.simulate(prob, opt, steps=steps, batch_size=b, trials=trials, seed=0,
                             backend=backend, metrics=(), record_every=steps)
        return time.perf_counter() - t0, res  # Result arrays are host copies: the device is synced

    warm = {}
    backends = {"numpy": "numpy", "cupy": gpu}
    for key, backend in backends.items():  # first use: Numba/CuPy compilation, device copy of X
        warm[key] = run(backend, R, 2)[0]
    best = {"numpy": float("inf"), "cupy": float("inf")}
    for _ in range(repeats):  # interleaved
        for key, backend in backends.items():
            best[key] = min(best[key], run(backend, R, T)[0])
    # the final losses, from one run with a final record on each backend (different streams)
    final = {}
    for key, backend in backends.items():
        res = dpsim.simulate(prob, opt, steps=T, batch_size=b, trials=R, seed=0, backend=backend,
                             metrics=("loss",), record_every=T)
        final[key] = float(np.mean(res.loss[-1]))
    out = {"problem": "logistic_regression(n=25000, d=10000, density=0.01)", "optimizer": "dp_sgd",
           "batch_size": b, "trials": R, "steps": T, "problem_build_s": build,
           "warmup_s": warm, "cpu_s": best["numpy"], "gpu_s": best["cupy"],
           "gpu_speedup": best["numpy"] / best["cupy"],
           "cpu_trial_steps_per_s": R * T / best["numpy"], "gpu_trial_steps_per_s": R * T / best["cupy"],
           "final_mean_loss": final,
           "final_losses_close": bool(np.isfinite(list(final.values())).all()
                                      and abs(final["cupy"] - final["numpy"]) <= 0.05 * abs(final["numpy"]) + 1e-3)}
    if not big_trials:
        out["gpu_big"] = {"trials": 0, "error": "skipped: the time budget was spent"}
        return out
    try:  # the GPU alone at many trials
        run(gpu, big_trials, 2)
        t_big = min(run(gpu, big_trials, T)[0] for _ in range(max(1, repeats - 1)))
        out["gpu_big"] = {"trials": big_trials, "s": t_big, "trial_steps_per_s": big_trials * T / t_big}
    except Exception as exc:  # e.g. out of device memory: reported, not fatal
        out["gpu_big"] = {"trials": big_trials, "error": f"{type(exc).__name__}: {exc}"}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default="gpu-check.json", help="where to write the numbers")
    ap.add_argument("--steps", type=int, default=200, help="steps of the timed W runs")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--big-trials", type=int, default=1024, help="R of the GPU-only run")
    ap.add_argument("--tests-timeout", type=float, default=150.0, help="seconds for the CuPy tests")
    ap.add_argument("--budget", type=float, default=300.0,
                    help="seconds for the whole check: a benchmark left with under 2 minutes "
                         "times one round and skips the many-trials run")
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--self-test", action="store_true",
                    help="check this script without a GPU: 'numpy:blocked' stands in for CuPy")
    args = ap.parse_args(argv)

    why = _no_gpu_reason()
    if why is not None and not args.self_test:
        print(f"gpu-check: no GPU to check: {why}", file=sys.stderr)
        return 2

    t_start = time.perf_counter()
    report = {"when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(),
              "cpu": f"{platform.machine()} {platform.processor() or ''}".strip(),
              "cpus": os.cpu_count(), "python": platform.python_version(),
              "gpu": device_info() if not args.self_test else {
                  "device": "none (--self-test: numpy:blocked stands in for cupy)", "memory_gib": 0,
                  "cupy": None, "cuda_runtime": None, "cuda_driver": None}}
    print(f"gpu-check: {report['gpu']['device']} ({report['gpu']['memory_gib']} GiB), CuPy "
          f"{report['gpu']['cupy']}, CUDA runtime {report['gpu']['cuda_runtime']}, driver "
          f"{report['gpu']['cuda_driver']}", flush=True)
    json_path = Path(args.json)

    def save():
        report["total_s"] = time.perf_counter() - t_start
        json_path.write_text(json.dumps(report, indent=2, default=str))

    if not args.skip_tests:
        print(f"gpu-check: running the CuPy tests (limit {args.tests_timeout:.0f} s) ...", flush=True)
        report["tests"] = run_tests(args.tests_timeout, json_path.resolve().parent)
        if args.self_test:  # without a GPU the selected tests check that CuPy is refused
            t = report["tests"]
            t["ok"] = not t["timed_out"] and t["failed"] == 0 and t["errors"] == 0
        save()
        t = report["tests"]
        print(f"gpu-check: tests: {t['passed']} passed, {t['failed']} failed, {t['errors']} errors, "
              f"{t['skipped']} skipped in {t['duration_s']:.0f} s" + (" (TIMED OUT)" if t["timed_out"] else ""),
              flush=True)
        for fid in t["failures"][:20]:
            print(f"    FAILED {fid}")
        if not t["ok"] and not t["failures"]:
            print(t["output_tail"][-2000:])
    print(f"gpu-check: workload W, dp_sgd, R=64, {args.steps} steps: numpy vs cupy ...", flush=True)
    left = args.budget - (time.perf_counter() - t_start)
    repeats, big = (args.repeats, args.big_trials) if left >= 120 else (1, 0)
    try:
        report["bench"] = run_bench(args.steps, repeats, big,
                                    gpu="numpy:blocked" if args.self_test else "cupy")
        bench_ok = True
    except Exception as exc:
        import traceback

        report["bench"] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        bench_ok = False
    tests_ok = args.skip_tests or report["tests"]["ok"]
    report["ok"] = bool(tests_ok and bench_ok)
    save()
    b = report["bench"]
    if bench_ok:
        print(f"gpu-check: W R=64 T={b['steps']}: CPU {b['cpu_s']:.2f} s, GPU {b['gpu_s']:.2f} s -> "
              f"GPU {b['gpu_speedup']:.1f}x the CPU; {b['gpu_trial_steps_per_s']:,.0f} vs "
              f"{b['cpu_trial_steps_per_s']:,.0f} trial-steps/s; final mean loss GPU "
              f"{b['final_mean_loss']['cupy']:.4f}, CPU {b['final_mean_loss']['numpy']:.4f}")
        big = b["gpu_big"]
        if "error" in big:
            print(f"gpu-check: GPU R={big['trials']}: {big['error']}")
        else:
            print(f"gpu-check: GPU R={big['trials']}: {big['s']:.2f} s, {big['trial_steps_per_s']:,.0f} trial-steps/s")
    else:
        print(f"gpu-check: benchmark failed: {b['error']}")
    print(f"gpu-check: {'OK' if report['ok'] else 'FAILED'} in {report['total_s']:.0f} s; numbers in {json_path}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
