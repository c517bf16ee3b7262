"""scripts/durations.py: the slowest tests and the time per file, of runs side by side."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "durations.py"


@pytest.fixture(scope="module")
def durations():
    spec = importlib.util.spec_from_file_location("durations", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def junit(path: Path, cases: dict[tuple[str, str], float]) -> Path:
    rows = "".join(f'<testcase classname="{module}" name="{name}" time="{seconds}"/>'
                   for (module, name), seconds in cases.items())
    path.write_text(f'<testsuites><testsuite name="pytest">{rows}</testsuite></testsuites>')
    return path


def test_runs_side_by_side_match_tests_across_folders_and_gather_the_doctests(durations, tmp_path, capsys):
    before = junit(tmp_path / "before.xml", {("tests.test_a", "test_x"): 5.0, ("groundrl.envs.base", "doc"): 0.5})
    after = junit(tmp_path / "after.xml", {("tests.unit.test_a", "test_x"): 2.0, ("tests.unit.test_b", "test_y"): 1.0,
                                           ("groundrl.runs", "doc"): 0.25})
    assert durations.main([str(before), str(after), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "| test_a.py::test_x |      5.0 |      2.0 |" in out
    assert "| test_b.py |        - |      1.0 |" in out
    assert "| doctests (groundrl/) |      0.5 |      0.2 |" in out


def test_a_file_that_is_not_junit_is_one_line(durations, tmp_path, capsys):
    (tmp_path / "bad.xml").write_text("not xml")
    assert durations.main([str(tmp_path / "bad.xml")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
