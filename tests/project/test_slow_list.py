"""``tests/slow_tests.txt`` (the tests ``make test-fast`` leaves out) names real tests and is what
``tools/slow_tests.py`` writes: sorted, unique, each id's file present."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("slow_tests", ROOT / "tools" / "slow_tests.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_list_is_sorted_unique_and_names_existing_files():
    lines = (ROOT / "tests" / "slow_tests.txt").read_text().splitlines()
    assert lines[0].startswith("# ") and "tools/slow_tests.py" in lines[0]
    ids = lines[1:]
    assert ids and ids == sorted(set(ids))
    for i in ids:
        path, _, name = i.partition("::")
        assert (ROOT / path).is_file() and name, i
        assert f"def {name.split('::')[-1].split('[')[0]}(" in (ROOT / path).read_text(), i


def test_listed_tests_are_marked_slow(request):
    ids = set((ROOT / "tests" / "slow_tests.txt").read_text().splitlines()[1:])
    marked = {it.nodeid for it in request.session.items if it.get_closest_marker("slow")}
    collected = {it.nodeid for it in request.session.items}
    assert ids & collected <= marked


def test_tool_writes_the_ids_of_slow_cases(tmp_path):
    tool = _tool()
    junit = tmp_path / "j.xml"
    junit.write_text(
        '<testsuites><testsuite>'
        '<testcase classname="tests.project.test_slow_list" name="test_a[1-2]" time="3.5"/>'
        '<testcase classname="tests.project.test_slow_list" name="test_b" time="0.1"/>'
        '<testcase classname="tests.project.test_slow_list.TestX" name="test_c" time="2.0"/>'
        '</testsuite></testsuites>')
    out = tmp_path / "slow.txt"
    assert tool.main([str(junit), "--out", str(out)]) == 0
    assert out.read_text().splitlines()[1:] == ["tests/project/test_slow_list.py::TestX::test_c",
                                                "tests/project/test_slow_list.py::test_a[1-2]"]
    with pytest.raises(ValueError, match="no test file"):
        tool.node_id("tests.nope", "test_x")
    with pytest.raises(ValueError, match="no test file"):
        tool.node_id("tests.project.nope", "test_x")
    with pytest.raises(SystemExit, match="positive"):
        tool.main([str(junit), "--min", "0"])
