"""benchmarks/benchkit/index.py: every script says what it measures, its group and its command, and
benchmarks/README.md's index is the one the scripts make."""

import pytest

from benchkit import index


@pytest.fixture(scope="module")
def found():
    return index.benchmarks()


def test_every_benchmark_says_in_one_sentence_what_it_measures_its_group_and_its_command(found):
    assert len(found) > 20
    for b in found:
        assert b.group in index.GROUPS, f"{b.name}.py: GROUP = {b.group!r}, not one of {', '.join(index.GROUPS)}"
        assert b.purpose[:1].isupper() and b.purpose.endswith(".") and len(b.purpose) <= 100, \
            f"{b.name}.py: its docstring's first line is not one sentence of what it measures: {b.purpose!r}"
        assert b.command is not None, f"{b.name}.py: its docstring has no `groundrl bench {b.name} ...` line"
        assert b.results is None or (index.BENCHMARKS / b.results).exists(), f"{b.name}.py: no {b.results}"


def test_the_readme_index_is_the_scripts_own(found):
    readme = index.README.read_text()
    assert index.with_index(readme, found) == readme, \
        "benchmarks/README.md's index is out of date: run python benchmarks/benchkit/index.py --readme"
    for b in found:
        assert f"| [`{b.name}`]({b.name}.py) | {b.purpose} |" in readme


def test_a_new_script_without_a_group_is_listed_apart_and_fails_the_check(tmp_path):
    (tmp_path / "new.py").write_text('"""What it measures.\n\n    groundrl bench new\n"""\n')
    [new] = index.benchmarks(tmp_path)
    assert (new.name, new.purpose, new.group, new.command, new.results) == \
        ("new", "What it measures.", None, "groundrl bench new", None)
    assert f"no GROUP: {index.UNKNOWN}\n  new  What it measures." in index.listing([new])
    with pytest.raises(ValueError, match="no index markers"):
        index.with_index("# Benchmarks\n", [new])
