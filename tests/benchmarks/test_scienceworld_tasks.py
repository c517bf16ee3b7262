"""benchmarks/scienceworld_tasks.py: the table of its kept record, and the campaign's pytest run read
back from pytest's report."""

import json
import subprocess
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def tasks(load_benchmark):
    return load_benchmark("scienceworld_tasks")


def test_the_table_counts_passed_checks_and_seconds(tasks, tmp_path, capsys):
    record = {"cpu": "test", "pytest_exit": 1, "tasks": {
        "boil": {check: {"passed": True, "seconds": 5.0} for check in tasks.CHECKS.values()},
        "melt": {"contract": {"passed": False, "seconds": 2.5}, "pickle": {"passed": True, "seconds": 1.0}}}}
    (tmp_path / "record.json").write_text(json.dumps(record))
    assert tasks.main(["--table-only", "--out", str(tmp_path / "record.json")]) == 1  # a check failed
    table = capsys.readouterr().out
    assert "| boil | pass | pass | pass | pass | 20.0 |" in table
    assert "| melt | **FAIL** | pass | - | - | 3.5 |" in table
    assert "| **2 tasks** | 5 of 6 pass |" in table


def test_the_campaign_reads_every_task_and_check_from_pytests_report(tasks, monkeypatch):
    """pytest is not run here: its report is, as the campaign's run of it would write it."""
    def fake_run(command, **kwargs):
        assert "--every-scienceworld-task" in command
        report = Path(next(a for a in command if a.startswith("--junitxml=")).split("=", 1)[1])
        cases = "".join(f'<testcase classname="tests.unit.test_envs" name="{test}[groundrl/ScienceWorld-{task}-v0]" '
                        f'time="1.5">{failure}</testcase>'
                        for test in tasks.CHECKS for task, failure in (("boil", ""), ("melt", "<failure/>")))
        report.write_text(f'<testsuites><testsuite name="pytest">{cases}</testsuite></testsuites>')
        return subprocess.CompletedProcess(command, 1, "", "")

    monkeypatch.setattr(tasks.subprocess, "run", fake_run)
    record = tasks.run_campaign()
    assert record["pytest_exit"] == 1 and list(record["tasks"]) == ["boil", "melt"]
    assert all(check == {"passed": True, "seconds": 1.5} for check in record["tasks"]["boil"].values())
    assert not any(check["passed"] for check in record["tasks"]["melt"].values())
    assert set(record["tasks"]["melt"]) == set(tasks.CHECKS.values())


def test_without_a_record_the_table_is_one_line(tasks, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        tasks.main(["--table-only", "--out", str(tmp_path / "none.json")])
    assert exit_info.value.code == 2 and "run without --table-only" in capsys.readouterr().err


def test_a_folder_for_the_record_is_one_line(tasks, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        tasks.main(["--out", str(tmp_path)])
    assert exit_info.value.code == 2 and "is a folder" in capsys.readouterr().err
