"""A griffe extension for groundrl's API pages: the doctest examples inside docstrings (``>>>``
lines and their output) are shown as Python code blocks, not read as Markdown prose, and Sphinx
roles (``:func:`score```) as code."""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc):`~?([^`]+)`")


def fence_doctests(text: str) -> str:
    """Wrap each run of doctest lines (a ``>>>`` line, its ``...`` lines and its output, up to a
    blank line) in a fenced Python block, at its own indentation."""
    out, inside, indent = [], False, ""
    for line in text.splitlines():
        stripped = line.lstrip()
        if not inside and stripped.startswith(">>>"):
            inside, indent = True, line[: len(line) - len(stripped)]
            out.append(f"{indent}```python")
        elif inside and not stripped:
            out.append(f"{indent}```")
            inside = False
        out.append(line)
    if inside:
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestsAsCode(griffe.Extension):
    """Every docstring, rewritten before it is rendered."""

    def on_object(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(r"`\1`", fence_doctests(obj.docstring.value))
