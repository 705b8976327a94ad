"""docs/property-testing.md runs: its property passes, and with the bound halved hypothesis reports
a shrunk counterexample (both asserted here).

The halved run (the costly part: hypothesis finds and shrinks the counterexample) is made once, by
the doc's own second block, exactly as written; the assertions read the exception that block
catches (``caught``) and what it prints."""

import re
from pathlib import Path

from dpsim.testing import BoundViolation

DOC = Path(__file__).resolve().parents[2] / "docs" / "property-testing.md"


def _blocks():
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_tutorial_property_passes_and_halved_bound_fails_with_a_shrunk_counterexample(capsys):
    first, second = _blocks()
    ns = {}
    exec(compile(first, str(DOC), "exec"), ns)  # the true bound: check_lemma1() returned
    assert "caught" not in ns
    exec(compile(second, str(DOC), "exec"), ns)  # check_lemma1(factor=0.5), caught and printed
    exc = ns.get("caught")
    assert isinstance(exc, BoundViolation), exc  # the halved bound raised BoundViolation
    notes = "\n".join(getattr(exc, "__notes__", []))
    m = re.search(r"(Falsifying example|Failing test case): lemma1\(.*?C=([^,\s]+),.*?sigma=([^,\s]+),"
                  r".*?beta=([^,\s]+),.*?s=(\d+),.*?b=(\d+)", notes, flags=re.S)
    assert m, notes
    assert float(m.group(2)) == 0.05 and float(m.group(4)) == 0.0 and m.group(5) == "1"  # shrunk
    assert "trials=200" in str(exc)
    msg = str(exc)
    assert "bound violated: claim E[v_1] <=" in msg and "seed=" in msg
    out = capsys.readouterr().out  # the doc's own printing code ran on that exception
    assert "lemma1(" in out and "beta=0.0" in out and "bound violated" in out
    assert msg in out and notes in out
