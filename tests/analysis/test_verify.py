"""``dpsim verify``'s command and registry: the ``verify`` subcommand added by
:func:`dpsim.analysis.verify.register`, the list of check modules, and the bound modules' independence
from the checks."""

from __future__ import annotations

import argparse
import json
import pkgutil
import subprocess
import sys

import pytest

from dpsim.analysis import checks, verify


def _parser():
    parser = argparse.ArgumentParser(prog="dpsim")
    sub = parser.add_subparsers(dest="command")
    verify.register(sub)
    return parser


def test_verify_command_runs_the_selected_check(tmp_path):
    args = _parser().parse_args(["verify", "--only", "l2p_ctcdp_to_dp", "--out", str(tmp_path),
                                 "--seed", "3"])
    assert (args.scale, args.seed, args.only) == ("quick", 3, ["l2p_ctcdp_to_dp"])
    assert args.handler(args) == 0
    rows = json.loads((tmp_path / "verify.json").read_text())
    assert rows and {r["check"] for r in rows} == {"l2p_ctcdp_to_dp"}
    assert all(r["verdict"] == "pass" for r in rows)
    assert "l2p_ctcdp_to_dp" in (tmp_path / "verify.md").read_text()


def test_verify_command_rejects_unknown_names():
    args = _parser().parse_args(["verify", "--only", "no_such_check"])
    with pytest.raises(KeyError, match="unknown check 'no_such_check'"):
        args.handler(args)
    args = _parser().parse_args(["verify", "--scale", "huge"])
    with pytest.raises(ValueError, match="unknown scale 'huge'"):
        args.handler(args)


def test_every_check_module_is_listed_and_registers_checks():
    papers = {m.name for m in pkgutil.iter_modules(checks.__path__)} - {"base"}
    assert {m.rsplit(".", 1)[1] for m in verify.MODULES} == papers == {"dp2", "pagan", "design",
                                                                         "l2p", "adambc"}
    families = {fam for fam, _ in verify.registered().values()}
    assert len(families) == len(papers)


def test_bound_modules_do_not_import_the_checks():
    code = ("import sys\n"
            "from dpsim.analysis import bias, concentration, delay, moments, tcdp, stats\n"
            "print(sorted(m for m in sys.modules if m.startswith('dpsim.analysis.checks')"
            " or m == 'dpsim.analysis.verify'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
