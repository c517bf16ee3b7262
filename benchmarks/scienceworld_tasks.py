"""Whether every ScienceWorld task keeps the environment contract (four tests, 30 tasks).

The four contract tests of tests/unit/test_envs.py (the contract itself, pickling mid-episode,
stepping outside an episode, replaying from the seed) on all 30 tasks, with their times.

A campaign, not a regression: about 15 minutes on two cores, two thirds of it in the two
mendelian-genetics tasks. The test suite checks a fixed sample (one task in the quick run, three in the
whole suite); this script runs the same tests on every task, through pytest, and keeps the record in
benchmarks/results/scienceworld_tasks.json (needs a checkout: it runs the tests of tests/).

    python benchmarks/scienceworld_tasks.py               # run the campaign, print and keep the table
    python benchmarks/scienceworld_tasks.py --table-only  # the kept record's table
    groundrl bench scienceworld_tasks
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from benchkit.records import cpu_name

GROUP = "fidelity"
RESULTS = "results/scienceworld_tasks.json"
ROOT = Path(__file__).resolve().parent.parent

RECORD = ROOT / "benchmarks" / RESULTS
TESTS = ROOT / "tests" / "unit" / "test_envs.py"
CHECKS = {  # test name -> column
    "test_every_environment_follows_the_contract": "contract",
    "test_environments_pickle_mid_episode": "pickle",
    "test_step_outside_an_episode_is_refused_and_changes_nothing": "ended",
    "test_replaying_the_actions_from_the_seed_reproduces_the_episode": "replay",
}


def run_campaign() -> dict:
    """Run the contract tests on every ScienceWorld task; return the record: per task, per check,
    passed or not and seconds."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.xml"
        done = subprocess.run([sys.executable, "-m", "pytest", str(TESTS), "-q", "-p", "no:cacheprovider",
                               "--every-scienceworld-task", "-k", "ScienceWorld and (" + " or ".join(CHECKS) + ")",
                               f"--junitxml={report}"], cwd=ROOT, capture_output=True, text=True)
        if not report.is_file():
            raise SystemExit(f"error: pytest wrote no report (exit {done.returncode}): {done.stderr.strip()[-500:]}")
        tasks: dict[str, dict] = defaultdict(dict)
        for case in ET.parse(report).iter("testcase"):
            match = re.fullmatch(r"(test_\w+)\[groundrl/ScienceWorld-(.+)-v0\]", case.get("name", ""))
            if not match or match[1] not in CHECKS:
                continue
            failed = case.find("failure") is not None or case.find("error") is not None
            tasks[match[2]][CHECKS[match[1]]] = {"passed": not failed, "seconds": float(case.get("time", 0.0))}
    return {"cpu": cpu_name(),
            "pytest_exit": done.returncode, "tasks": dict(sorted(tasks.items()))}


def table(record: dict) -> str:
    lines = ["| task | " + " | ".join(CHECKS.values()) + " | seconds |", "|---|" + "---|" * len(CHECKS) + "---:|"]
    total = 0.0
    for task, checks in record["tasks"].items():
        seconds = sum(check["seconds"] for check in checks.values())
        total += seconds
        cells = [("pass" if checks[c]["passed"] else "**FAIL**") if c in checks else "-" for c in CHECKS.values()]
        lines.append(f"| {task} | " + " | ".join(cells) + f" | {seconds:.1f} |")
    passed = sum(check["passed"] for checks in record["tasks"].values() for check in checks.values())
    checked = sum(len(checks) for checks in record["tasks"].values())
    summary = [f"{passed} of {checked} pass"] + [""] * (len(CHECKS) - 1)
    lines.append(f"| **{len(record['tasks'])} tasks** | " + " | ".join(summary) + f" | {total:.0f} |")
    return "\n".join(lines) + f"\n\n(CPU: {record['cpu']})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table-only", action="store_true", help="print the kept record's table, run nothing")
    parser.add_argument("--out", type=Path, default=RECORD, help=f"where the record goes (default: {RECORD})")
    args = parser.parse_args(argv)
    if args.out.is_dir():
        parser.error(f"--out {args.out} is a folder: give the record's file name")
    if args.table_only:
        if not args.out.is_file():
            parser.error(f"no record at {args.out}: run without --table-only")
        record = json.loads(args.out.read_text())
    else:
        record = run_campaign()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(table(record))
    return 0 if all(check["passed"] for checks in record["tasks"].values() for check in checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
