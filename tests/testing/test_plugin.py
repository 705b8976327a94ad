"""The pytest plugin of dpsim.testing, run in a subprocess: --dpsim-trials scales Monte Carlo sizes,
dpsim_seed is fixed per test and shown on failure, --dpsim-ci loads the derandomized profile; the
plugin is opt-in (no pytest11 entry point), so CI=1 in an unrelated project leaves hypothesis alone."""

import os
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


# --- the plugin is opt-in: installing dpsim changes no other project's test run ------------------

_PROBE = textwrap.dedent("""
    from hypothesis import settings

    def test_probe():
        s = settings.default
        print(f"PROFILE={settings.get_current_profile_name()} "
              f"MAX={s.max_examples} DERANDOMIZE={s.derandomize}")
""")


def _clean_env(**extra):
    """``os.environ`` without pytest's, hypothesis's or any CI variable (the ones hypothesis's
    ``is_in_ci`` reads), plus ``extra``."""
    from hypothesis._settings import _CI_VARS

    env = {k: v for k, v in os.environ.items()
           if k not in _CI_VARS and not k.startswith(("PYTEST_", "HYPOTHESIS_"))}
    env.update(extra)
    return env


def _probe(tmp_path, *args, **env):
    """Run the probe test in a fresh pytest process in ``tmp_path`` (its own rootdir)."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_probe.py").write_text(_PROBE)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                          *args, str(tmp_path)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env=_clean_env(**env))
    assert out.returncode == 0, out.stdout + out.stderr
    line = next(ln for ln in out.stdout.splitlines() if "PROFILE=" in ln)
    return dict(kv.split("=") for kv in line[line.index("PROFILE="):].split())


def test_unrelated_project_keeps_hypothesis_defaults_under_ci(tmp_path):
    # Without -p dpsim.testing.plugin, CI=1 leaves hypothesis to itself: no dpsim-ci profile, the
    # default 100 examples. (hypothesis's own CI detection may derandomize; that is not dpsim's.)
    bare = subprocess.run([sys.executable, "-c", "from hypothesis import settings; "
                           "print(settings.default.derandomize)"],
                          capture_output=True, text=True, env=_clean_env(CI="1"), timeout=120)
    got = _probe(tmp_path, CI="1")
    assert got["PROFILE"] != "dpsim-ci"
    assert got["MAX"] == "100"
    assert got["DERANDOMIZE"] == bare.stdout.strip()
    # and with no CI at all: hypothesis's plain defaults
    assert _probe(tmp_path) == {"PROFILE": "default", "MAX": "100", "DERANDOMIZE": "False"}


def test_enabled_plugin_loads_dpsim_ci_under_ci(tmp_path):
    got = _probe(tmp_path, "-p", "dpsim.testing.plugin", CI="1")
    assert got == {"PROFILE": "dpsim-ci", "MAX": "25", "DERANDOMIZE": "True"}
    # --hypothesis-profile wins over CI
    got = _probe(tmp_path, "-p", "dpsim.testing.plugin", "--hypothesis-profile=dpsim-dev", CI="1")
    assert got["PROFILE"] == "dpsim-dev" and got["MAX"] == "100"
    # enabled without CI: hypothesis's defaults until --dpsim-ci
    assert _probe(tmp_path, "-p", "dpsim.testing.plugin")["PROFILE"] == "default"
    assert _probe(tmp_path, "-p", "dpsim.testing.plugin", "--dpsim-ci")["PROFILE"] == "dpsim-ci"


def test_installed_dpsim_registers_no_pytest11_entry_point():
    from importlib.metadata import entry_points

    assert not [ep for ep in entry_points(group="pytest11") if ep.value.startswith("dpsim")]


def test_suite_enables_the_plugin(request):
    assert request.config.pluginmanager.has_plugin("dpsim.testing.plugin")
