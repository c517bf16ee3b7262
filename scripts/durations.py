"""Where the test suite spends its time: the slowest tests and the time per file, read from the JUnit
XML file pytest writes (``--junitxml``), one or two runs side by side.

    .venv/bin/python -m pytest --junitxml=/tmp/after.xml
    python scripts/durations.py /tmp/after.xml                    # one run
    python scripts/durations.py /tmp/before.xml /tmp/after.xml    # before and after, matched by test

A test's time is pytest's (set-up, call and tear-down, so a session fixture counts in the first test
that uses it); a file's is the sum of its tests'. Tests are matched across runs by file and name, a
file by its name alone (a file moved to another folder stays one row).
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def read(path: Path) -> dict[str, float]:
    """``{"file.py::test_name[params]": seconds}`` of every test case in a JUnit XML file."""
    times = {}
    for case in ET.parse(path).iter("testcase"):
        module = case.get("classname", "").split(".")  # tests.unit.test_x -> test_x.py
        test_file = next((part for part in reversed(module) if part.startswith("test_")), None)
        file_name = f"{test_file}.py" if test_file else "/".join(module) + ".py (doctests)"
        times[f"{file_name}::{case.get('name')}"] = float(case.get("time", 0.0))
    return times


def per_file(times: dict[str, float]) -> dict[str, float]:
    files: dict[str, float] = defaultdict(float)
    for test, seconds in times.items():
        name = test.split("::")[0]
        files["doctests (groundrl/)" if name.endswith("(doctests)") else name] += seconds
    return files


def table(runs: list[dict[str, float]], names: list[str], rows: list[str], title: str) -> str:
    def cell(run, row):
        return f"{run[row]:8.1f}" if row in run else "       -"

    lines = [f"| {title} | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    lines += [f"| {row} | " + " | ".join(cell(run, row) for run in runs) + " |" for row in rows]
    lines.append("| **total (s)** | " + " | ".join(f"{sum(run.values()):8.1f}" for run in runs) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("xml", nargs="+", type=Path, help="JUnit XML files written by pytest --junitxml")
    parser.add_argument("--top", type=int, default=25, help="how many of the slowest tests to list (default 25)")
    args = parser.parse_args(argv)
    for path in args.xml:
        if not path.is_file():
            print(f"error: {path} does not exist: write it with pytest --junitxml={path}", file=sys.stderr)
            return 2
    names = [path.stem for path in args.xml]
    try:
        tests = [read(path) for path in args.xml]
    except ET.ParseError as error:
        print(f"error: not a JUnit XML file ({error}): write one with pytest --junitxml=FILE", file=sys.stderr)
        return 2
    slowest = sorted(tests[0], key=tests[0].get, reverse=True)[:args.top]
    print(table(tests, names, slowest, f"{args.top} slowest tests of {names[0]}"))
    print()
    files = [per_file(run) for run in tests]
    print(table(files, names, sorted(set().union(*files), key=lambda f: -max(r.get(f, 0.0) for r in files)),
                "file"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
