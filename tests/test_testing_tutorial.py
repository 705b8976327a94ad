"""docs/property-testing.md runs: its property passes, and with the bound halved hypothesis reports
a shrunk counterexample (both asserted here)."""

import re
from pathlib import Path

import pytest

from dpsim.testing import BoundViolation

DOC = Path(__file__).resolve().parents[1] / "docs" / "property-testing.md"


def _blocks():
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_tutorial_property_passes_and_halved_bound_fails_with_a_shrunk_counterexample(capsys):
    first, second = _blocks()
    ns = {}
    exec(compile(first, str(DOC), "exec"), ns)  # the true bound: check_lemma1() returned
    with pytest.raises(BoundViolation) as exc:
        ns["check_lemma1"](factor=0.5)
    notes = "\n".join(getattr(exc.value, "__notes__", []))
    m = re.search(r"(Falsifying example|Failing test case): lemma1\(.*?C=([^,\s]+),.*?sigma=([^,\s]+),"
                  r".*?beta=([^,\s]+),.*?s=(\d+),.*?b=(\d+)", notes, flags=re.S)
    assert m, notes
    assert float(m.group(2)) == 0.05 and float(m.group(4)) == 0.0 and m.group(5) == "1"  # shrunk
    assert "trials=200" in str(exc.value)
    msg = str(exc.value)
    assert "bound violated: claim E[v_1] <=" in msg and "seed=" in msg
    exec(compile(second, str(DOC), "exec"), ns)  # the doc's own printing code runs too
    out = capsys.readouterr().out
    assert "lemma1(" in out and "beta=0.0" in out and "bound violated" in out
