"""The dpsim command line: commands work, bad input exits 2 with one line naming the value."""

import subprocess
import sys

import numpy as np
import pytest

import dpsim
from dpsim.cli import main


def _run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_list(capsys):
    code, out, _ = _run(["list"], capsys)
    assert code == 0
    for name in ("sgd", "dp_sgd", "dp_sgdm", "momentum", "logistic_regression", "least_squares"):
        assert name in out


def test_run_and_save(tmp_path, capsys):
    path = tmp_path / "run.npz"
    code, out, err = _run(["run", "--problem", "logistic_regression", "--problem-arg", "n=300",
                           "--problem-arg", "d=10", "--optimizer", "dp_sgd", "--set", "lr=0.5",
                           "--set", "noise_multiplier=1.0", "--steps", "30", "--batch-size", "20",
                           "--trials", "3", "--seed", "1", "--out", str(path), "--no-progress"],
                          capsys)
    assert code == 0, err
    assert "epsilon" in out and "final loss" in out
    res = dpsim.load(path)
    assert res.loss.shape[1] == 3 and res.config["hyperparameters"]["lr"] == 0.5
    # the CLI run equals the Python API run
    prob = dpsim.problems.logistic_regression(n=300, d=10)
    api = dpsim.simulate(prob, dpsim.optimizers.get("dp_sgd", lr=0.5, noise_multiplier=1.0),
                         steps=30, batch_size=20, trials=3, seed=1)
    np.testing.assert_array_equal(api.params, res.params)


def test_run_per_trial_grid(capsys):
    code, out, err = _run(["run", "--problem", "least_squares", "--problem-arg", "n=100",
                           "--problem-arg", "d=4", "--optimizer", "dp_sgd",
                           "--set", "noise_multiplier=0.5,1,2", "--steps", "5", "--batch-size", "10",
                           "--trials", "3", "--no-progress"], capsys)
    assert code == 0, err
    assert "per trial" in out


def test_account(capsys):
    from dpsim import accounting

    code, out, _ = _run(["account", "--noise-multiplier", "1.1", "--sample-rate", "0.01",
                         "--steps", "1000", "--delta", "1e-5"], capsys)
    assert code == 0
    eps = accounting.epsilon(1.1, 0.01, 1000, 1e-5)
    assert f"{eps:.6g}" in out


@pytest.mark.parametrize("argv,needle", [
    (["account", "--noise-multiplier", "-1", "--sample-rate", "0.01", "--steps", "10",
      "--delta", "1e-5"], "-1"),
    (["account", "--noise-multiplier", "1", "--sample-rate", "0.01", "--steps", "10",
      "--delta", "1.5"], "delta=1.5"),
    (["account", "--noise-multiplier", "1", "--sample-rate", "1.5", "--steps", "10",
      "--delta", "1e-5"], "1.5"),
    (["run", "--problem", "nope", "--optimizer", "sgd", "--steps", "1", "--batch-size", "1"], "nope"),
    (["run", "--problem", "least_squares", "--problem-arg", "n=50", "--problem-arg", "d=3",
      "--optimizer", "dp_nope", "--steps", "1", "--batch-size", "1"], "dp_nope"),
    (["run", "--problem", "least_squares", "--problem-arg", "n=50", "--problem-arg", "d=3",
      "--optimizer", "sgd", "--steps", "1", "--batch-size", "51"], "batch_size=51"),
    (["run", "--problem", "least_squares", "--problem-arg", "n=50", "--problem-arg", "d=3",
      "--optimizer", "dp_sgd", "--set", "noise_multiplier=-2", "--steps", "1",
      "--batch-size", "5"], "noise_multiplier=-2"),
    (["run", "--problem", "least_squares", "--problem-arg", "n=50", "--problem-arg", "d=3",
      "--optimizer", "sgd", "--steps", "1", "--batch-size", "5", "--backend", "tpu"], "tpu"),
    (["run", "--problem", "least_squares", "--optimizer", "sgd", "--steps", "x",
      "--batch-size", "5"], "'x'"),
    (["frobnicate"], "frobnicate"),
])
def test_bad_input_exits_2_with_one_line(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_python_dash_m_entry_point():
    out = subprocess.run([sys.executable, "-m", "dpsim", "account", "--noise-multiplier", "0",
                          "--sample-rate", "0.1", "--steps", "3", "--delta", "1e-5"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "inf" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "dpsim", "account", "--noise-multiplier", "1",
                          "--sample-rate", "0.1", "--steps", "3", "--delta", "0"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0


# ---------------------------------------------------------------------------------------------
# Application commands come from entry points (the core never imports the applications)


class _EntryPoint:
    def __init__(self, name, obj=None, error=None):
        self.name, self._obj, self._error = name, obj, error

    def load(self):
        if self._error is not None:
            raise self._error
        return self._obj


def _register_echo(subparsers):
    p = subparsers.add_parser("echo", help="test command")
    p.add_argument("--value", type=int, required=True)

    def handler(args):
        if args.value < 0:
            raise ValueError(f"value must be non-negative, got value={args.value}")
        print(f"echo {args.value}")
        return 3

    p.set_defaults(handler=handler)


def _fake_entry_points(commands=(), listings=()):
    groups = {"dpsim.commands": list(commands), "dpsim.listings": list(listings)}
    return lambda group: groups.get(group, [])


def test_entry_point_command_is_dispatched(monkeypatch, capsys):
    import dpsim.cli as cli

    monkeypatch.setattr(cli, "entry_points", _fake_entry_points([_EntryPoint("echo", _register_echo)]))
    code, out, err = _run(["echo", "--value", "7"], capsys)
    assert (code, out.strip(), err) == (3, "echo 7", "")
    code, out, err = _run(["echo", "--value", "-1"], capsys)
    assert code == 2 and err.count("\n") == 1 and "value=-1" in err


def test_broken_entry_points_do_not_break_list_or_help(monkeypatch, capsys):
    import dpsim.cli as cli

    broken = [_EntryPoint("verify", error=ImportError("no module named scipy.nothing"))]
    listings = [_EntryPoint("experiments", lambda: ["e1", "e2"]),
                _EntryPoint("broken", error=RuntimeError("boom"))]
    monkeypatch.setattr(cli, "entry_points", _fake_entry_points(broken, listings))
    code, out, err = _run(["list"], capsys)
    assert code == 0 and "dp_sgd" in out and "experiments:\n  e1\n  e2" in out
    assert "command 'verify' unavailable" in err and "listing 'broken' unavailable" in err
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "run" in out and "verify" not in out


def test_installed_application_commands_are_registered():
    """The installed entry points (pyproject) provide ``reproduce`` and ``verify``."""
    from importlib.metadata import entry_points

    names = {ep.name for ep in entry_points(group="dpsim.commands")}
    assert {"reproduce", "verify"} <= names
