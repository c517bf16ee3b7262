"""The import graph of the groundrl package, read from the source with ``ast`` (nothing is imported).

Every ``import`` of a groundrl module counts, at module level or inside a function, absolute or
relative; ``from groundrl.pkg import name`` counts as importing the submodule ``groundrl.pkg.name``
when there is one, else the package ``groundrl.pkg`` (its ``__init__.py``). Imports under
``if TYPE_CHECKING:`` do not count: they never run.

Checked:

- no cycles among groundrl modules;
- no import runs up the layers (see ``MAY_IMPORT``);
- a function-local import of a groundrl module says why it is local, in a comment on its line or
  on the line above (``# start-up time: matplotlib``, ``# optional dependency``). Dodging a cycle
  is not a reason: break the cycle instead.
"""

from __future__ import annotations

import ast
import functools
import io
import tokenize
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

SOURCE = Path(__file__).resolve().parents[2]
PACKAGE = SOURCE / "groundrl"

# The layers, lowest first; a module may import from its own layer and from those listed here.
# "top" is groundrl/__init__.py (it re-exports from anywhere) and groundrl/__main__.py; nothing
# imports either (``import groundrl`` / ``from groundrl import name`` where name is not a submodule).
# envs and llm are peers: neither imports the other (today's code has no import either way).
# runs (the run folder) sits beside them, for train, eval and cli only; files (the bounded readers of
# settings and records) sits just above errors, for everyone.
MAY_IMPORT = {
    "errors": set(),
    "files": {"errors"},
    "envs": {"errors", "files"},
    "llm": {"errors", "files"},
    "runs": {"errors", "files"},
    "agents": {"errors", "files", "envs", "llm"},
    "train": {"errors", "files", "envs", "llm", "agents", "runs"},
    "eval": {"errors", "files", "envs", "llm", "agents", "runs", "train"},
    "cli": {"errors", "files", "envs", "llm", "agents", "runs", "train", "eval"},
    "top": {"errors", "files", "envs", "llm", "agents", "runs", "train", "eval", "cli"},
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


class Edge(NamedTuple):
    importer: str
    imported: str
    line: int
    local: bool  # inside a function

    @property
    def where(self) -> str:
        return f"{MODULES[self.importer].relative_to(SOURCE)}:{self.line}"


def import_edges(module: str, source: str | None = None) -> Iterator[Edge]:
    """The imports of groundrl modules that ``module`` runs (its file, or ``source``), in source order."""
    is_package = module in MODULES and MODULES[module].name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]

    def imported(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        base = node.module or ""
        if node.level:  # relative: ``from . import x`` in package p is ``from p import x``
            base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        return list(dict.fromkeys(names))  # ``from groundrl.llm.loading import LLM, load_llm``: one edge

    def walk(node: ast.AST, local: bool) -> Iterator[Edge]:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for name in imported(node):
                if name == "groundrl" or name.startswith("groundrl."):
                    yield Edge(module, name, node.lineno, local)
        local = local or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        type_checking = isinstance(node, ast.If) and "TYPE_CHECKING" in {
            getattr(node.test, "id", None), getattr(node.test, "attr", None)}
        for child in node.orelse if type_checking else ast.iter_child_nodes(node):
            yield from walk(child, local)

    yield from walk(ast.parse(MODULES[module].read_text() if source is None else source), False)


EDGES = [edge for module in MODULES for edge in import_edges(module)]


def layer(module: str) -> str:
    """``groundrl.llm.scoring`` -> ``llm``; ``groundrl`` and ``groundrl.__main__`` -> ``top``."""
    parts = module.split(".")
    return "top" if len(parts) == 1 or parts[1] == "__main__" else parts[1]


def find_cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The cycle closed by each back edge of a depth-first search. Every cycle holds a back edge, so
    none are reported only when there are none; breaking these may reveal others on the next run."""
    cycles, done, stack = [], set(), []

    def visit(node: str) -> None:
        stack.append(node)
        for successor in graph.get(node, []):
            if successor in stack:
                cycles.append(stack[stack.index(successor):] + [successor])
            elif successor not in done:
                visit(successor)
        stack.pop()
        done.add(node)

    for node in sorted(graph):
        if node not in done:
            visit(node)
    return cycles


def test_the_edges_are_read_as_python_runs_them():
    source = """
from typing import TYPE_CHECKING
from . import base
from ..errors import GroundrlError
import groundrl.llm.scoring, numpy
if TYPE_CHECKING:
    from groundrl.llm import LLM
else:
    import groundrl.runs
def f():
    from groundrl.llm import loading, load_llm, lora
class C:
    from groundrl import envs
"""
    assert list(import_edges("groundrl.envs.example", source)) == [
        Edge("groundrl.envs.example", "groundrl.envs.base", 3, False),
        Edge("groundrl.envs.example", "groundrl.errors", 4, False),
        Edge("groundrl.envs.example", "groundrl.llm.scoring", 5, False),
        Edge("groundrl.envs.example", "groundrl.runs", 9, False),
        Edge("groundrl.envs.example", "groundrl.llm.loading", 11, True),
        Edge("groundrl.envs.example", "groundrl.llm", 11, True),
        Edge("groundrl.envs.example", "groundrl.llm.lora", 11, True),
        Edge("groundrl.envs.example", "groundrl.envs", 13, False),
    ]


def test_no_import_cycles():
    graph, first = {}, {}
    for edge in EDGES:
        graph.setdefault(edge.importer, [])
        if edge.imported not in graph[edge.importer]:
            graph[edge.importer].append(edge.imported)
            first[edge.importer, edge.imported] = edge
    report = []
    for cycle in find_cycles(graph):
        report.append(" -> ".join(cycle))
        for importer, imported in zip(cycle, cycle[1:]):
            edge = first[importer, imported]
            report.append(f"    {edge.where}: imports {imported}" + " (in a function)" * edge.local)
    if report:
        pytest.fail("import cycles among groundrl modules:\n" + "\n".join(report), pytrace=False)


def test_no_import_runs_up_the_layers():
    report = [f"{module}: unknown layer {layer(module)!r}, add it to MAY_IMPORT in {Path(__file__).name}"
              for module in MODULES if layer(module) not in MAY_IMPORT]
    for edge in EDGES:
        low, high = layer(edge.importer), layer(edge.imported)
        if high == "top":
            report.append(f"{edge.where}: {edge.importer} imports {edge.imported}; nothing in the package imports "
                          "groundrl itself (or __main__): import the submodule that defines the name")
        elif low in MAY_IMPORT and high not in MAY_IMPORT[low] | {low}:
            report.append(f"{edge.where}: {low} imports {high} ({edge.importer} imports {edge.imported})")
    if report:
        pytest.fail("imports up the layers (errors < envs, llm < agents < train < eval < cli; runs for "
                    "train, eval, cli):\n" + "\n".join(report), pytrace=False)


@functools.cache
def _comments(path: Path) -> dict[int, str]:
    """Line -> the line, for the lines that hold a comment."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return {token.start[0]: token.line.strip() for token in tokens if token.type == tokenize.COMMENT}


def test_function_local_imports_say_why():
    report = []
    for edge in EDGES:
        if edge.local:
            comments = _comments(MODULES[edge.importer])
            said_why = edge.line in comments or comments.get(edge.line - 1, "").startswith("#")
            if not said_why:
                report.append(f"{edge.where}: {edge.imported}")
    if report:
        pytest.fail("function-local imports of groundrl modules without a comment saying why (on the line or the "
                    "line above; a cycle is no reason, break it):\n" + "\n".join(report), pytrace=False)
