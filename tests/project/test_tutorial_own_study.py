"""docs/your-own-study.md runs as written: the Python block (data -> calibrated comparison at
ε = 1 -> tidy table -> plot, in at most 15 lines) and the TOML file through `dpsim compare`."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "your-own-study.md"


def _blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


def test_python_block_runs_in_at_most_15_lines(tmp_path, monkeypatch, capsys):
    (code,) = _blocks("python")
    lines = [ln for ln in code.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert len(lines) <= 15, len(lines)
    monkeypatch.chdir(tmp_path)
    ns = {}
    exec(compile(code, str(DOC), "exec"), ns)
    ds, table = ns["ds"], ns["table"]
    assert list(ds["optimizer"].values) == ["dp_sgd", "dp_adam", "dp_adam_bc"]
    np.testing.assert_allclose(ds["epsilon"].values, 1.0, rtol=1e-3)
    assert set(table.index.get_level_values("optimizer")) == {"dp_sgd", "dp_adam", "dp_adam_bc"}
    assert len(table) == 3 * 20
    # the premise of the comparison: the class prior is beaten on held-out rows
    prior = max(np.mean(ns["prob"]._yt > 0), np.mean(ns["prob"]._yt < 0))
    assert table["test_accuracy"].groupby("optimizer").mean().max() > prior + 0.1
    assert (tmp_path / "study.png").stat().st_size > 0
    out = capsys.readouterr().out
    assert "selected_lr" in out and "test_accuracy" in out


def test_toml_block_runs_through_the_cli(tmp_path):
    (toml,) = _blocks("toml")
    cfg = tmp_path / "study.toml"
    cfg.write_text(toml)
    out = subprocess.run([sys.executable, "-m", "dpsim", "compare", str(cfg)], capture_output=True,
                         text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert (tmp_path / "study.nc").exists() and (tmp_path / "study.png").exists()
    assert "dp_adam_bc" in out.stdout
