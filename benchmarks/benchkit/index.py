"""The index of the benchmarks, read from each script's source without running it: what it measures
(the first line of its docstring), its group (``GROUP``), its command (the docstring's ``groundrl
bench NAME ...`` line) and where its records are kept in git (``RESULTS``, under benchmarks/).

    python benchmarks/benchkit/index.py            # the index, as `groundrl bench` prints it
    python benchmarks/benchkit/index.py --readme   # write it into benchmarks/README.md

``groundrl bench`` runs this file as a script, so it imports nothing beyond the standard library.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1]
README = BENCHMARKS / "README.md"
GROUPS = {  # what the benchmarks of a group measure, in the order the index shows them
    "speed": "how fast, and in how much memory: scoring, loading, training steps",
    "fidelity": "whether groundrl computes what it should: the environment contract, scores in lower precision",
    "baselines": "priors and baselines: what agents score without learning, and RL from scratch",
    "learning": "whether and how fast the model learns: decisions to a bar, the papers' experiments",
    "probes": "what a policy or critic has learned, read without long evaluations",
}
UNKNOWN = "not a group of benchmarks/benchkit/index.py"
BEGIN = "<!-- the index: written by `python benchmarks/benchkit/index.py --readme`, checked by the tests -->"
END = "<!-- end of the index -->"


@dataclass(frozen=True)
class Benchmark:
    """One script's entry in the index."""

    name: str
    purpose: str  # the first line of its docstring: what it measures, in one sentence
    group: str | None
    command: str | None  # its docstring's `groundrl bench NAME ...` line
    results: str | None  # where its records are kept, under benchmarks/ (None: it prints its tables)


def read(script: Path) -> Benchmark:
    """A script's entry, from its source (nothing of it runs)."""
    tree = ast.parse(script.read_text(), filename=str(script))
    constants = {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                 and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                 for target in node.targets if isinstance(target, ast.Name)}
    lines = [line.strip() for line in (ast.get_docstring(tree) or "").splitlines()]
    command = next((line.split("  #")[0].strip() for line in lines
                    if (line + " ").startswith(f"groundrl bench {script.stem} ")), None)
    return Benchmark(script.stem, lines[0] if lines else "", constants.get("GROUP"), command,
                     constants.get("RESULTS"))


def benchmarks(folder: Path = BENCHMARKS) -> list[Benchmark]:
    """Every script of ``folder``, by name."""
    return [read(script) for script in sorted(folder.glob("*.py"))]


def by_group(found: list[Benchmark]) -> dict[str, list[Benchmark]]:
    """The benchmarks of each group, the groups in the index's order (a script without one of them last)."""
    groups = {group: [b for b in found if b.group == group] for group in GROUPS}
    for b in found:
        if b.group not in GROUPS:
            groups.setdefault(b.group or "no GROUP", []).append(b)
    return {group: members for group, members in groups.items() if members}


def listing(found: list[Benchmark]) -> str:
    """The index as the terminal shows it: a line a benchmark, under its group."""
    width = max((len(b.name) for b in found), default=0)
    lines = ["Run one with `groundrl bench NAME [ARGS]` (= python benchmarks/NAME.py [ARGS]; `groundrl bench NAME -h`: "
             "its ARGS). More in benchmarks/README.md."]
    for group, members in by_group(found).items():
        lines += ["", f"{group}: {GROUPS.get(group, UNKNOWN)}"]
        lines += [f"  {b.name:<{width}}  {b.purpose}" for b in members]
    return "\n".join(lines) + "\n"


def markdown(found: list[Benchmark]) -> str:
    """The index as benchmarks/README.md shows it: a table a group."""
    lines = []
    for group, members in by_group(found).items():
        about = GROUPS.get(group, UNKNOWN)
        lines += [f"### {group}", "", f"{about[0].upper()}{about[1:]}.", "",
                  "| benchmark | what it measures | command | records (in git) |", "|---|---|---|---|"]
        lines += [f"| [`{b.name}`]({b.name}.py) | {b.purpose} | `{b.command}` | "
                  + (f"[`benchmarks/{b.results}`]({b.results})" if b.results else "-") + " |" for b in members]
        lines.append("")
    return "\n".join(lines)


def with_index(readme: str, found: list[Benchmark]) -> str:
    """``readme`` with the index between its markers written afresh."""
    before, begin, rest = readme.partition(BEGIN)
    _, end, after = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"the README has no index markers: {BEGIN} ... {END}")
    return f"{before}{BEGIN}\n\n{markdown(found)}\n{END}{after}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readme", action="store_true", help=f"write the index into {README}")
    args = parser.parse_args(argv)
    found = benchmarks()
    if args.readme:
        README.write_text(with_index(README.read_text(), found))
        print(f"wrote the index of {len(found)} benchmarks into {README}")
    else:
        print(listing(found), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
