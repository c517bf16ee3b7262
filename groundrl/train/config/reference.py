"""Every setting of a run, documented: read from the schema itself (the dataclasses and the string
under each field), so that the "every setting" page (docs/settings.md, written when the docs are
built) and ``groundrl config [KEY]`` say what the code does.

>>> setting = find("ppo.policy_lr")
>>> setting.type, setting.default, setting.doc.split(" (")[0]
('float', 0.0003, "The actor's learning rate")
>>> [p for p, value in preset_values("ppo.policy_lr").items() if value == 1e-6]
['twosome', 'glam', 'npae']
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import inspect
import re
import textwrap
import typing
from enum import Enum
from typing import Any

from groundrl.errors import InvalidArgumentError
from groundrl.train.config.loading import load_config
from groundrl.train.config.presets import PRESETS
from groundrl.train.config.schema import TrainConfig


@dataclasses.dataclass(frozen=True)
class Setting:
    """One setting (a leaf: a number, a text, a list...) or a section (a dataclass of settings)."""

    key: str  # dotted, as on the command line: ppo.policy_lr
    type: str  # as annotated ("float | None"), an Enum's as its choices ("ppo | grpo | gigpo")
    default: Any  # plain data: an Enum's value, a list
    doc: str  # the string under the field
    section: bool = False


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The string under each field of the dataclass ``cls`` (its attribute docstring), by field name."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body
    docs = {}
    for field, after in zip(body, body[1:]):
        if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name) and \
                isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) and \
                isinstance(after.value.value, str):
            docs[field.target.id] = inspect.cleandoc(after.value.value)
    return docs


def settings(cls: type = TrainConfig, prefix: str = "") -> list[Setting]:
    """Every setting under the dataclass ``cls``, sections too, in the order they are declared."""
    found, docs, hints = [], field_docs(cls), typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        key = prefix + field.name
        factory = field.default_factory
        if dataclasses.is_dataclass(factory):  # a section
            found.append(Setting(key, factory.__name__, None, docs.get(field.name, ""), section=True))
            found += settings(factory, key + ".")
            continue
        default = factory() if factory is not dataclasses.MISSING else field.default
        hint = hints[field.name]
        choices = isinstance(hint, type) and issubclass(hint, Enum)
        kind = " | ".join(member.value for member in hint) if choices else str(field.type)
        found.append(Setting(key, kind, _plain(default), docs.get(field.name, "")))
    return found


def find(key: str) -> Setting:
    """The setting (or section) named ``key``.

    Raises:
        InvalidArgumentError: no such setting (the message suggests the nearest keys).
    """
    by_key = {setting.key: setting for setting in settings()}
    if key in by_key:
        return by_key[key]
    near = difflib.get_close_matches(key, list(by_key), n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(near)}? " if near else ""
    raise InvalidArgumentError(f"no setting {key!r}; {hint}`groundrl config` lists them all")


def preset_values(key: str) -> dict[str, Any]:
    """The value of the setting ``key`` in each preset (plain data)."""
    return {preset: _value(_preset(preset), key) for preset in PRESETS}


def describe(key: str) -> str:
    """``groundrl config KEY``: the setting's type, default and documentation, and the presets that
    set it otherwise; for a section, its own documentation and its settings."""
    setting = find(key)
    if setting.section:
        inside = [s for s in settings() if s.key.startswith(key + ".") and not s.section]
        lines = [f"{key}  (section)", _indent(setting.doc), ""]
        lines += [f"  {s.key} = {_shown(s.default)}  {_first_sentence(s.doc)}" for s in inside]
        return "\n".join(lines)
    presets = {name: value for name, value in preset_values(key).items() if value != setting.default}
    lines = [f"{key}: {setting.type} = {_shown(setting.default)}", _indent(setting.doc)]
    if presets:
        lines += ["", "presets that set it: " + ", ".join(f"{name} {_shown(value)}" for name, value in presets.items())]
    return "\n".join(lines)


def listing(preset: str = "default") -> str:
    """``groundrl config``: every setting with its value in ``preset`` and the first sentence of its doc."""
    config = _preset(preset)
    lines = [f"every setting, as preset {preset} sets it (`groundrl config KEY`: one in full)"]
    for setting in settings():
        if setting.section:
            lines += ["", f"[{setting.key}]  {_first_sentence(setting.doc)}"]
            continue
        lines.append(f"  {setting.key} = {_shown(_value(config, setting.key))}  {_first_sentence(setting.doc)}")
    return "\n".join(lines)


def markdown() -> str:
    """The "every setting" page's body: a table per section (key, type, default, what it does, the
    presets that set it otherwise)."""
    every = settings()
    sections = {"": TrainConfig.__doc__.strip(), **{s.key: s.doc for s in every if s.section}}
    out = []
    for section, doc in sections.items():
        rows = []
        for setting in every:
            if setting.section or setting.key.rpartition(".")[0] != section:
                continue
            others = {p: v for p, v in preset_values(setting.key).items() if v != setting.default}
            text = _markdown(setting.doc).replace("\n", " ")
            if others:
                text += " Presets: " + ", ".join(f"{p} `{_shown(v)}`" for p, v in others.items()) + "."
            rows.append(f"| `{setting.key}` | `{setting.type}` | `{_shown(setting.default)}` | {text} |")
        if rows:
            out += [f"## {f'`{section}`' if section else 'Top level'}", "", _markdown(doc), "",
                    "| key | type | default | what it does |", "|---|---|---|---|", *rows, ""]
    return "\n".join(out)


def plain_text(doc: str) -> str:
    """A docstring for the terminal: ````code```` and ``:func:`name``` roles as the bare text."""
    return re.sub(r":\w+:`~?([^`]+)`", r"\1", doc).replace("``", "")


def _markdown(doc: str) -> str:
    """A docstring for a Markdown table cell: roles as code, one line, a ``|`` outside code escaped."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", " ".join(doc.split())).replace("``", "`")
    # a | splits a cell, except inside code, where Python-Markdown's tables leave it (and a \\| would show)
    return "`".join(part if inside % 2 else part.replace("|", "\\|") for inside, part in enumerate(text.split("`")))


@functools.cache
def _preset(name: str) -> TrainConfig:
    if name not in PRESETS:
        raise InvalidArgumentError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
    return load_config(name)


def _value(config: TrainConfig, key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        node = getattr(node, part)
    return _plain(node)


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _shown(value: Any) -> str:
    """A value as YAML writes it on one line (``null``, ``true``, ``[q_proj, v_proj]``)."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return str(value).replace("'", "") if isinstance(value, (list, dict)) else str(value)


def _first_sentence(doc: str) -> str:
    flat = plain_text(" ".join(doc.split()))
    end = re.search(r"(?<!e\.g)(?<!i\.e)\. ", flat)
    return flat if end is None else flat[:end.start() + 1]


def _indent(doc: str) -> str:
    return textwrap.indent(textwrap.fill(plain_text(" ".join(doc.split())), 100), "  ")
