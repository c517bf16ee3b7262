"""Files stay data: the one reader of the settings (YAML) and records (JSON) groundrl reads back.

Such a file may come from elsewhere (an export someone shared, a run folder copied from another
machine) or be damaged on disk. Reading one runs no code (safe YAML tags only, plain JSON), and it
cannot hang or exhaust memory either:

- a file is at most :data:`MAX_BYTES` (settings and records of a run are a few kilobytes);
- its data nests at most :data:`MAX_DEPTH` levels and holds at most :data:`MAX_VALUES` values once
  YAML's aliases are expanded: aliases are shared while the file is read but copied where the
  settings are merged, so 9 lines of nested aliases (an "alias bomb") would become 10**9 values;
- a YAML mapping that gives one key twice is refused (PyYAML would keep the last one silently).

Every refusal is a :class:`DataFileError`: one line naming the file and what is wrong with it,
ending with the caller's advice (``fix``).

>>> import tempfile, pathlib
>>> bomb = pathlib.Path(tempfile.mkdtemp()) / "bomb.yaml"
>>> _ = bomb.write_text("a: &a [x, x, x, x, x, x, x, x, x, x]\\n" + "".join(
...     f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
...     f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\\n"
...     for i in range(8)))
>>> read_yaml(bomb, "fix it")
Traceback (most recent call last):
...
groundrl.files.DataFileError: ... holds more than 100,000 values once its YAML aliases are expanded: fix it
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from groundrl.errors import InvalidArgumentError

MAX_BYTES = 1 << 20  # 1 MiB
MAX_DEPTH = 64  # levels of lists and mappings
MAX_VALUES = 100_000  # a run's config.yaml holds about 150


class DataFileError(InvalidArgumentError):
    """A settings or record file that groundrl will not read (too large, malformed, a bomb):
    ``problem`` says what is wrong (``"is not valid YAML at line 3 (...)"``), the message is
    ``"{path} {problem}: {fix}"``."""

    def __init__(self, path: Path, problem: str, fix: str):
        super().__init__(f"{path} {problem}: {fix}")
        self.path, self.problem = path, problem


def read_yaml(path: str | Path, fix: str) -> Any:
    """The data of a YAML file, read within the bounds above (an empty file is ``None``).

    Raises:
        DataFileError: the file is missing, too large, not UTF-8 text, not YAML, or beyond the
            bounds; the message ends with ``fix``.
    """
    path = Path(path)
    text = _read_text(path, fix)
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expanded(node, path, fix)
        return loader.construct_document(node)
    except _Refused as refused:
        raise DataFileError(path, str(refused), fix) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        reason = getattr(error, "problem", None) or type(error).__name__
        raise DataFileError(path, f"is not valid YAML{at} ({reason})", fix) from None
    except ValueError:  # a number of more than 4,300 digits, which Python will not read
        raise DataFileError(path, "holds a number too long to read", fix) from None
    finally:
        loader.dispose()


def read_json(path: str | Path, fix: str) -> Any:
    """The data of a JSON file, read within the bounds above.

    Raises:
        DataFileError: the file is missing, too large, not UTF-8 text, not JSON, or nests too deep;
            the message ends with ``fix``.
    """
    path = Path(path)
    text = _read_text(path, fix)
    try:
        data = json.loads(text)
    except RecursionError:  # json's parser recurses once per level
        raise DataFileError(path, f"nests deeper than {MAX_DEPTH} levels", fix) from None
    except ValueError as error:  # includes a number of more than 4,300 digits
        where = f" at line {error.lineno}" if isinstance(error, json.JSONDecodeError) else ""
        raise DataFileError(path, f"is not valid JSON{where}", fix) from None
    if _depth(data) > MAX_DEPTH:
        raise DataFileError(path, f"nests deeper than {MAX_DEPTH} levels", fix)
    return data


def _read_text(path: Path, fix: str) -> str:
    try:
        if not path.is_file():
            why = "is a folder" if path.is_dir() else "does not exist"
            raise DataFileError(path, why, fix)
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise DataFileError(path, f"is too large ({size:,} bytes; a settings or record file is at most "
                                      f"{MAX_BYTES:,})", fix)
        with open(path, "rb") as file:
            data = file.read(MAX_BYTES + 1)  # the file may have grown since
    except OSError as error:
        raise DataFileError(path, f"cannot be read ({error.strerror or type(error).__name__})", fix) from None
    if len(data) > MAX_BYTES:
        raise DataFileError(path, f"is too large (a settings or record file is at most {MAX_BYTES:,} bytes)", fix)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise DataFileError(path, "is not text (UTF-8)", fix) from None


class _Refused(Exception):
    """Why a YAML document is refused (the reader adds the file and the advice)."""


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses deep nesting while it composes (its composer recurses once
    per level) and keys given twice in one mapping."""

    def __init__(self, stream):
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent, index):
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise _Refused(f"nests deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            lines: dict = {}  # key -> the line it was given on
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` may be overridden, as YAML allows
                    continue
                key, line = self.construct_object(key_node, deep=True), key_node.start_mark.line + 1
                try:
                    given = key in lines
                except TypeError:  # an unhashable key: PyYAML's own error says so
                    continue
                if given:
                    raise _Refused(f"gives the key {str(key)[:80]!r} twice (lines {lines[key]} and {line}): YAML "
                                   "keys are unique, keep one")
                lines[key] = line
        return super().construct_mapping(node, deep=deep)


def _check_expanded(root: yaml.Node, path: Path, fix: str) -> None:
    """Refuse a document whose aliases, expanded, hold too many values, nest too deep, or contain
    themselves. Each node is counted once (memoized), so the check is linear in the file's size."""
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (values, levels) of the node expanded
    active: set[int] = set()

    def expand(node: yaml.Node, level: int) -> tuple[int, int]:
        key = id(node)
        if key in sizes:
            values, levels = sizes[key]
        else:
            if key in active:
                raise _Refused("contains itself (a YAML alias inside its own anchor)")
            if level > MAX_DEPTH:
                raise _Refused(f"nests deeper than {MAX_DEPTH} levels once its YAML aliases are expanded")
            active.add(key)
            children = ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else
                        node.value if isinstance(node, yaml.SequenceNode) else [])
            values, levels = 1, 0
            for child in children:
                child_values, child_levels = expand(child, level + 1)
                values += child_values
                levels = max(levels, child_levels)
                if values > MAX_VALUES:
                    raise _Refused(f"holds more than {MAX_VALUES:,} values once its YAML aliases are expanded")
            levels += bool(children)
            active.discard(key)
            sizes[key] = values, levels
        if level + levels > MAX_DEPTH:
            raise _Refused(f"nests deeper than {MAX_DEPTH} levels once its YAML aliases are expanded")
        return values, levels

    expand(root, 0)


def _depth(data: Any) -> int:
    """How many levels of lists and dicts ``data`` nests (iteratively: it may be deep)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, level = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


__all__ = ["DataFileError", "MAX_BYTES", "MAX_DEPTH", "MAX_VALUES", "read_json", "read_yaml"]
