"""The pytest plugin of dpsim.testing, run in a subprocess: --dpsim-trials scales Monte Carlo sizes,
dpsim_seed is fixed per test and shown on failure, --dpsim-ci loads the derandomized profile."""

import subprocess
import sys
import textwrap


def test_plugin_options_fixtures_and_profile(tmp_path):
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""
        from hypothesis import settings
        from dpsim.testing import scaled_trials

        def test_scaled(dpsim_trials, dpsim_seed):
            assert dpsim_trials(1000) == 500 == scaled_trials(1000)
            assert isinstance(dpsim_seed, int) and dpsim_seed >= 0

        def test_profile():
            assert settings().derandomize and settings().deadline is None

        def test_fails(dpsim_seed):
            assert False
    """))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "dpsim.testing.plugin", "-p",
                          "no:cacheprovider", "--dpsim-trials=0.5", "--dpsim-ci", str(tmp_path)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert "1 failed, 2 passed" in out.stdout, out.stdout + out.stderr
    assert "dpsim_seed=" in out.stdout
