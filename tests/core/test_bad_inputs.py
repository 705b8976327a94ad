"""A table of bad inputs (issue 9, Build 6): each is one clear error naming the bad value; every
CLI case exits 2 with one line on stderr and no traceback."""

import math

import numpy as np
import pytest

import dpsim
from dpsim import accounting, optimizers, problems
from dpsim.cli import main

LSQ = problems.least_squares(50, 3, seed=0)
SIM = dict(steps=2, batch_size=5)

API = [
    # accounting
    (lambda: accounting.epsilon(-1, 0.1, 10, 1e-5), "noise_multiplier=-1"),
    (lambda: accounting.epsilon(float("nan"), 0.1, 10, 1e-5), "noise_multiplier=nan"),
    (lambda: accounting.epsilon(1, 0.1, 10, 0), "delta=0"),
    (lambda: accounting.epsilon(1, 0.1, 10, 1.5), "delta=1.5"),
    (lambda: accounting.epsilon(1, 0, 10, 1e-5), "sample_rate=0"),
    (lambda: accounting.epsilon(1, 1.5, 10, 1e-5), "sample_rate=1.5"),
    (lambda: accounting.epsilon(1, 0.1, -5, 1e-5), "steps=-5"),
    (lambda: accounting.epsilon(1, 0.1, 2.5, 1e-5), "steps=2.5"),
    (lambda: accounting.epsilon(1, 0.1, 10, 1e-5, accountant="foo"), "accountant='foo'"),
    (lambda: accounting.epsilon(1, 0.1, 10, 1e-5, releases_per_step=0), "releases_per_step=0"),
    (lambda: accounting.epsilon(1, 0.1, 10, 1e-5, sampling="replacement"), "sampling='replacement'"),
    (lambda: accounting.epsilon(1, 0.1, 10, 1e-5, sampling="fixed"), "sampling='fixed'"),
    (lambda: accounting.epsilon(1e-3, 0.01, 100, 1e-5), "noise_multiplier=0.001"),
    (lambda: accounting.epsilon(1.0, 0.01, 10 ** 9, 1e-5), "accountant='rdp'"),
    (lambda: accounting.noise_multiplier(0, 1e-5, 0.1, 10), "epsilon=0"),
    (lambda: accounting.noise_multiplier(math.inf, 1e-5, 0.1, 10), "epsilon=inf"),
    (lambda: accounting.noise_multiplier(1.0, 2.0, 0.1, 10), "delta=2"),
    # calibration
    (lambda: dpsim.calibrate("dp_sgd", epsilon=-1, delta=1e-5, steps=10, batch_size=5, n=50), "epsilon=-1"),
    (lambda: dpsim.calibrate("dp_sgd", epsilon=1, delta=0, steps=10, batch_size=5, n=50), "delta=0"),
    (lambda: dpsim.calibrate("dp_sgd", epsilon=1, delta=1e-5, steps=0, batch_size=5, n=50), "steps=0"),
    (lambda: dpsim.calibrate("dp_sgd", epsilon=1, delta=1e-5, steps=10, batch_size=0, n=50), "batch_size=0"),
    (lambda: dpsim.calibrate("dp_sgd", epsilon=1, delta=1e-5, steps=10, batch_size=5, n=0), "n=0"),
    (lambda: dpsim.calibrate("nope", epsilon=1, delta=1e-5, steps=10, batch_size=5, n=50), "nope"),
    (lambda: dpsim.calibrate(None, epsilon=1, delta=1e-5, steps=10, batch_size=5, n=50), "optimizer=None"),
    (lambda: dpsim.calibrate("adam", epsilon=1, delta=1e-5, steps=10, batch_size=5, n=50), "not private"),
    (lambda: dpsim.calibrate("dp_sgd", epsilon=1, delta=1e-5, steps=10, batch_size=5, n=50,
                             accountant="x"), "accountant='x'"),
    # simulate
    (lambda: dpsim.simulate(None, "dp_sgd", **SIM), "problem=None"),
    (lambda: dpsim.simulate(LSQ, None, **SIM), "optimizer=None"),
    (lambda: dpsim.simulate(LSQ, "nope", **SIM), "nope"),
    (lambda: dpsim.simulate(LSQ, "dp_sgd", steps=-1, batch_size=5), "steps=-1"),
    (lambda: dpsim.simulate(LSQ, "dp_sgd", steps=2, batch_size=0), "batch_size=0"),
    (lambda: dpsim.simulate(LSQ, "dp_sgd", steps=2, batch_size=500), "batch_size=500"),
    (lambda: dpsim.simulate(LSQ, "dp_sgd", trials=0, **SIM), "trials=0"),
    (lambda: dpsim.simulate(LSQ, "dp_sgd", sampling="nope", **SIM), "nope"),
    (lambda: dpsim.simulate(LSQ, "dp_sgd", record_every=0, **SIM), "record_every=0"),
    (lambda: dpsim.simulate(LSQ, "dp_sgd", metrics=("foo",), **SIM), "foo"),
    (lambda: dpsim.simulate(LSQ, "dp_sgd", init=np.zeros(7), **SIM), "init"),
    (lambda: dpsim.simulate(LSQ, "dp_sgd", accountant="x", **SIM), "accountant='x'"),
    (lambda: dpsim.simulate(LSQ, "dp_sgd", target_epsilon=1.0, **SIM), "target_delta"),
    (lambda: dpsim.simulate(LSQ, "dp_sgd", target_epsilon=-1.0, target_delta=1e-5, **SIM), "epsilon=-1"),
    (lambda: dpsim.simulate(LSQ, "dp_sgd", target_epsilon=1.0, target_delta=3.0, **SIM), "delta=3"),
    (lambda: dpsim.simulate(LSQ, optimizers.get("dp_sgd", noise_multiplier=[1.0, 2.0]), trials=3, **SIM),
     "trials=3"),
    # optimizers
    (lambda: optimizers.get("dp_sgd", lr="abc"), "lr"),
    (lambda: optimizers.get("dp_sgd", noise_multiplier=-1), "noise_multiplier"),
    (lambda: optimizers.get("dp_sgd", clip=0), "clip"),
    (lambda: optimizers.get("dp_sgd", foo=1), "foo"),
    (lambda: optimizers.get("dp_adam", noise="pink"), "pink"),
    (lambda: optimizers.get("pagan", radius=-1.0), "radius"),
    # problems
    (lambda: problems.least_squares(0, 3), "n=0"),
    (lambda: problems.logistic_regression(50, 3, seed=-1), "seed=-1"),
    (lambda: problems.get("nope"), "nope"),
    # results
    (lambda: dpsim.load("/nonexistent/result.npz"), "/nonexistent/result.npz"),
    # audit
    (lambda: dpsim.audit("dp_sgd", trials=2), "trials=2"),
    (lambda: dpsim.audit("dp_sgd", trials=100, n=1), "n=1"),
    (lambda: dpsim.audit("dp_sgd", trials=100, others="x"), "others='x'"),
    (lambda: dpsim.audit("dp_sgd", trials=100, table=np.zeros((4, 1))), "canary row"),
    (lambda: dpsim.audit("dp_sgd", trials=100, canary_index=9), "canary_index=9"),
    (lambda: dpsim.audit(optimizers.get("dp_sgd"), trials=100, lr=0.1), "hyperparameters"),
]


@pytest.mark.parametrize("i", range(len(API)))
def test_api_bad_input_is_one_clear_error(i):
    fn, needle = API[i]
    with pytest.raises((ValueError, KeyError, TypeError)) as exc:
        fn()
    msg = exc.value.args[0] if isinstance(exc.value, KeyError) else str(exc.value)
    assert needle in msg, (needle, msg)
    assert "\n" not in msg


RUN = ["run", "--problem", "least_squares", "--problem-arg", "n=50", "--problem-arg", "d=2",
       "--optimizer", "dp_sgd", "--steps", "3", "--batch-size", "5", "--no-progress"]
ACC = ["account", "--sample-rate", "0.1", "--steps", "10", "--delta", "1e-5"]

CLI = [
    (RUN + ["--delta", "2"], "delta=2"),
    (RUN + ["--sampling", "replacement"], "replacement"),
    (RUN + ["--sampling", "fixed"], "accountant='pld'"),
    (RUN + ["--accountant", "foo"], "foo"),
    (RUN + ["--out", "/nonexistent-dir/x.npz"], "does not exist"),
    (RUN + ["--out", "/tmp"], "is a directory"),
    (RUN + ["--target-epsilon", "-1"], "--target-epsilon"),
    (RUN + ["--trials", "0"], "--trials"),
    (RUN + ["--steps", "-1"], "--steps"),
    (RUN + ["--set", "lr=abc"], "lr"),
    (RUN + ["--set", "nonsense"], "key=value"),
    (RUN + ["--set", "foo=1"], "foo"),
    (RUN[:8] + ["nope"] + RUN[9:], "nope"),
    (RUN[:2] + ["nope"] + RUN[3:], "nope"),
    (RUN + ["--problem-arg", "n=0"], "n=0"),
    (RUN + ["--batch-size", "500"], "batch_size=500"),
    (RUN + ["--backend", "nope"], "nope"),
    (RUN + ["--record-every", "0"], "record_every=0"),
    (RUN + ["--steps", "abc"], "abc"),
    (RUN + ["--sampling", "cyclic_poisson:0"], "k >= 1"),
    (RUN + ["--sampling", "cyclic_poisson:20"], "batch_size*k = 100 <= n = 50"),
    (RUN + ["--sampling", "cyclic"], "cyclic"),
    (RUN + ["--trials", "1000000000000"], "R=1000000000000"),
    (ACC + ["--noise-multiplier", "-1"], "noise_multiplier=-1"),
    (ACC + ["--noise-multiplier", "0.001", "--sample-rate", "0.01", "--steps", "100"], "accountant='rdp'"),
    (ACC + ["--epsilon", "0"], "epsilon=0"),
    (ACC + ["--epsilon", "1", "--noise-multiplier", "1"], "not allowed"),
    (ACC, "required"),
    (ACC + ["--noise-multiplier", "1", "--accountant", "x"], "accountant='x'"),
    (ACC + ["--noise-multiplier", "1", "--sampling", "fixed"], "sampling='fixed'"),
    (ACC + ["--noise-multiplier", "1", "--releases-per-step", "0"], "releases_per_step=0"),
    (ACC + ["--noise-multiplier", "1", "--sampling", "cyclic_poisson:x"], "cyclic_poisson:x"),
    (["audit", "nope", "--trials", "100"], "nope"),
    (["audit", "dp_sgd", "--trials", "2"], "trials=2"),
    (["audit", "dp_sgd", "--trials", "100", "--others", "x"], "others='x'"),
    (["audit", "dp_sgd", "--trials", "100", "--set", "noise_multiplier=-1"], "noise_multiplier"),
    (["nope"], "invalid choice"),
]


@pytest.mark.parametrize("i", range(len(CLI)))
def test_cli_bad_input_exits_2_with_one_line(i, capsys, tmp_path):
    argv, needle = CLI[i]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse errors
        code = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, (argv, code, err)
    assert len(err) == 1 and err[0].startswith("dpsim: error:"), err
    assert needle in err[0], (needle, err[0])


def test_at_least_sixty_cases_and_the_result_is_saved_before_epsilon(tmp_path, capsys):
    assert len(API) + len(CLI) >= 60
    out = tmp_path / "r.npz"
    # a run whose ε cannot be computed by PLD (σ tiny): the result is saved first, exit 2
    code = main(RUN + ["--set", "noise_multiplier=0.001", "--steps", "100", "--out", str(out)])
    assert code == 2
    assert "accountant='rdp'" in capsys.readouterr().err
    res = dpsim.load(out)
    assert res.params.shape == (1, 2) and res.privacy["accountant"] == "pld"
    assert res.epsilon(1e-5, accountant="rdp") > 0


def test_too_large_run_is_refused_before_simulating(tmp_path, capsys):
    """A huge R: one line naming R, d and the estimate, exit 2, nothing written, no simulation."""
    out = tmp_path / "big.npz"
    code = main(RUN + ["--trials", str(10**12), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("dpsim: error:"), err
    assert "R=1000000000000" in err[0] and "d=2" in err[0] and "memory" in err[0], err[0]
    assert list(tmp_path.iterdir()) == []


def test_diverged_trials_are_flagged_per_trial(capsys):
    opt = optimizers.get("sgd", lr=[0.01, 1e3])  # the second trial blows up on a quadratic
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = dpsim.simulate(problems.least_squares(50, 3, seed=0), opt, steps=200, batch_size=5,
                             trials=2)
    assert res.diverged.tolist() == [False, True]


@pytest.mark.parametrize("name", ["dp_sgd", "dp_adam"])
@pytest.mark.parametrize("n,d,R,b,metrics", [(2000, 40, 150, 32, ("loss", "grad_norm_sq")),
                                             (300, 800, 60, 16, ())])
def test_memory_estimate_is_within_a_factor_two_of_the_measured_peak(name, n, d, R, b, metrics):
    """dpsim.memory's up-front estimate against tracemalloc's peak of the real run (the problem's
    optimum is computed first: it is not part of a run's own allocations).  The two sizes are
    dominated by the record pass and by the per-trial state and step temporaries."""
    import tracemalloc

    from dpsim.memory import estimate_peak_bytes

    prob = problems.logistic_regression(n, d, seed=0)
    prob.optimum  # noqa: B018 - computed before measuring
    opt = optimizers.get(name)
    est = estimate_peak_bytes(prob, opt, trials=R, batch_size=b, steps=8, metrics=metrics)
    assert (est["R"], est["d"], est["b"]) == (R, d, b)
    tracemalloc.start()
    try:
        dpsim.simulate(prob, opt, steps=8, batch_size=b, trials=R, seed=0, metrics=metrics)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak / 2 <= est["bytes"] <= 2 * peak, (est["bytes"], peak)
    # and the estimate grows with R like the state and temporaries do
    big = estimate_peak_bytes(prob, opt, trials=10 * R, batch_size=b, steps=8, metrics=metrics)
    assert big["bytes"] > 5 * est["bytes"] - 5 * est["fixed"]
