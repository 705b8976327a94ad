"""Write ``tests/slow_tests.txt``: the tests that took at least ``--min`` seconds in a measured run.

``make test-fast`` (the inner loop) runs the suite without them (``-m "not slow"``); ``make test``
runs everything.  ``tests/conftest.py`` marks each listed test ``slow`` at collection.  Measure
with the full suite and regenerate when the list drifts::

    .venv/bin/python -m pytest -q -n auto --dist loadgroup --junitxml=build/junit.xml
    .venv/bin/python tools/slow_tests.py build/junit.xml

A test's time is its setup + call + teardown as pytest-xdist reports it (a session fixture's cost
lands on the first test that uses it, which is then listed: it is the one that pays for it).
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "slow_tests.txt"


def node_id(classname: str, name: str) -> str:
    """The pytest node id of a JUnit ``testcase`` (``tests.<folder>.test_x[.Class]``,
    ``test_y[param]``): the longest prefix of the class name that is a test file."""
    parts = classname.split(".")
    for k in range(len(parts), 0, -1):
        path = Path(*parts[:k]).with_suffix(".py")
        if (ROOT / path).is_file():
            return "::".join([path.as_posix(), *parts[k:], name])
    raise ValueError(f"no test file for JUnit class {classname!r}")


def slow_ids(junit: Path, minimum: float) -> list[str]:
    """Sorted node ids of the test cases of ``junit`` that took ``>= minimum`` seconds."""
    ids = {node_id(tc.get("classname"), tc.get("name"))
           for tc in ET.parse(junit).iter("testcase") if float(tc.get("time", 0)) >= minimum}
    return sorted(ids)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("junit", type=Path, help="pytest --junitxml output of a full run")
    ap.add_argument("--min", type=float, default=2.0, help="seconds (default 2)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.min <= 0:
        raise SystemExit(f"--min must be positive, got {args.min}")
    ids = slow_ids(args.junit, args.min)
    args.out.write_text(f"# tests that took >= {args.min:g} s in a measured full run; written by "
                        "tools/slow_tests.py (do not edit)\n" + "".join(f"{i}\n" for i in ids))
    print(f"{args.out}: {len(ids)} slow tests")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
