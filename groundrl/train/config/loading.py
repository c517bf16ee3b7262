"""Reading a run's settings: a preset, YAML files and ``key=value`` pairs merged (OmegaConf) over the
schema and checked; renamed keys moved with a warning; ``${...}`` always text."""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from groundrl.errors import InvalidArgumentError
from groundrl.files import read_yaml
from groundrl.train.config.presets import PRESETS, RENAMED
from groundrl.train.config.schema import TrainConfig
from groundrl.train.config.sections import Phases


class DeprecatedSettingWarning(UserWarning):
    """A setting given under a key of an earlier groundrl (it still works)."""


def load_config(preset: str = "default", files: Sequence[str | Path] = (), overrides: Sequence[str] = (),
                values: Mapping[str, Any] | None = None, exported: Mapping[str, Any] | None = None) -> TrainConfig:
    """The preset, then ``exported`` (an export's settings, for ``train --init``), then each YAML
    file, then each ``key=value`` override (dotted keys: ``ppo.policy_lr=1e-4``, values read as
    YAML), then ``values`` (dotted key -> the value itself: a path stays the text it is), merged and
    checked against :class:`TrainConfig`.

    Settings are data: ``${...}`` in a value is text, not an interpolation, wherever it comes from
    (a file from elsewhere must not copy environment variables into a run).

    Raises:
        InvalidArgumentError: an unknown preset, key or value of the wrong type, a missing or
            malformed file.
    """
    if preset not in PRESETS:
        raise InvalidArgumentError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    return _merge([_read_mapping(PRESETS[preset], f"preset {preset}"),
                   *([_read_mapping(exported, "the export's settings")] if exported is not None else []),
                   *map(_read_file, files), _read_overrides(overrides), _read_values(values)])


def load_run_config(run_dir: str | Path, overrides: Sequence[str] = (),
                    values: Mapping[str, Any] | None = None) -> TrainConfig:
    """A run's own ``config.yaml``, with ``key=value`` overrides and ``values`` on top."""
    return load_config_file(Path(run_dir) / "config.yaml", overrides, values)


def load_config_file(path: str | Path, overrides: Sequence[str] = (),
                     values: Mapping[str, Any] | None = None) -> TrainConfig:
    """The settings of one YAML file that holds them all (a run's ``config.yaml``), with
    ``key=value`` overrides and ``values`` on top."""
    return _merge([_read_file(path), _read_overrides(overrides), _read_values(values)])


def config_of(settings: Mapping[str, Any], source: str) -> TrainConfig:
    """The settings of a mapping that holds them all (read elsewhere: an export's), checked."""
    return _merge([_read_mapping(settings, source)])


def _read_file(path: str | Path) -> dict:
    settings = read_yaml(path, "fix it, or give another file")
    return _read_mapping(settings if settings is not None else {}, f"config file {path}")


def _read_overrides(overrides: Sequence[str]) -> dict:
    return _read_mapping(key_values(overrides, "ppo.policy_lr=1e-4"), "the command line")


def _read_values(values: Mapping[str, Any] | None) -> dict:
    nested: dict = {}
    for key, value in (values or {}).items():
        *parents, last = key.split(".")
        node = nested
        for parent in parents:
            node = node.setdefault(parent, {})
        node[last] = value
    return _read_mapping(nested, "the command line")


def key_values(items: Sequence[str], example: str) -> dict:
    """``KEY=VALUE`` items as a nested dict: dotted keys nest, values read as YAML
    (``params.numLocations=3`` -> ``{"params": {"numLocations": 3}}``).

    Raises:
        InvalidArgumentError: an item that is not KEY=VALUE (``example`` shows one), does not parse,
            or whose value YAML would cut at a `` #`` (a comment): the rest would be lost silently.
    """
    for item in items:
        if "=" not in item:
            raise InvalidArgumentError(f"setting {item!r} is not KEY=VALUE (e.g. {example})")
        key, value = item.split("=", 1)
        if re.search(r"(^|\s)#", value) and "#" not in str(_yaml_value(value)):
            raise InvalidArgumentError(f"setting {item[:200]!r}: YAML reads ' #' as the start of a comment and would "
                                       f"drop the rest; quote the value: {key}='\"{value[:200]}\"'")
    try:
        return OmegaConf.to_container(OmegaConf.from_dotlist(list(items)))
    except OmegaConfBaseException as error:
        raise InvalidArgumentError(f"bad setting: {str(error).splitlines()[0]}") from None
    except ValueError as error:  # a number of more digits than Python reads (4300)
        raise InvalidArgumentError(f"bad setting: {str(error).split(';')[0]}") from None


def _yaml_value(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text  # OmegaConf says what is wrong with it


def _read_mapping(settings: Any, source: str) -> dict:
    """``settings`` as a nested dict in today's keys (renamed keys moved, with a warning), every
    ``${`` in its text escaped: OmegaConf would resolve it as an interpolation."""
    if not isinstance(settings, Mapping):
        raise InvalidArgumentError(f"{source} must be a mapping of settings (key: value), not a "
                                   f"{type(settings).__name__}")
    settings = _as_text(settings)
    for old, new in RENAMED.items():
        section, key = old.split(".")
        if not isinstance(settings.get(section), dict) or key not in settings[section]:
            continue
        value = settings[section].pop(key)
        targets = (new,) if isinstance(new, str) else new
        warnings.warn(f"{old} is deprecated: use {' and '.join(targets)} (in {source})", DeprecatedSettingWarning,
                      stacklevel=4)
        for target in targets:
            node = settings
            *parents, last = target.split(".")
            for parent in parents:
                node = node.setdefault(parent, {})
            node.setdefault(last, value)  # a new key given alongside wins
    return settings


def _as_text(value: Any) -> Any:
    """A copy of ``value`` in which OmegaConf reads ``${...}`` as the text it is (``\\${``; the
    backslashes before it doubled, as its grammar wants)."""
    if isinstance(value, str):
        return re.sub(r"(\\*)\$\{", lambda match: match.group(1) * 2 + "\\${", value)
    if isinstance(value, Mapping):
        return {key: _as_text(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_text(item) for item in value]
    return value


def _merge(sources: Sequence[dict]) -> TrainConfig:
    try:
        config: DictConfig = OmegaConf.structured(TrainConfig)
        for settings in sources:
            config = OmegaConf.merge(config, _joint_lr(settings, config.ppo.phases))
        return OmegaConf.to_object(config)
    except OmegaConfBaseException as error:
        key, first_line = getattr(error, "full_key", None), str(error).splitlines()[0]
        where = f"{key}: " if key and key not in first_line else ""
        raise InvalidArgumentError(f"bad configuration: {where}{first_line}") from None


def _joint_lr(settings: dict, phases_so_far: Phases) -> dict:
    """``ppo.lr`` of groundrl 0.1 in today's keys."""
    ppo = settings.get("ppo")
    if not isinstance(ppo, dict) or "lr" not in ppo:
        return settings
    lr = ppo.pop("lr")
    if str(ppo.get("phases", phases_so_far.value)) == Phases.joint.value:
        ppo["policy_lr"] = ppo["value_lr"] = lr
        warnings.warn("ppo.lr is deprecated: use ppo.policy_lr and ppo.value_lr (the joint optimizer's actor and "
                      "critic groups)", DeprecatedSettingWarning, stacklevel=4)
    return settings


def to_yaml(config: TrainConfig) -> str:
    return OmegaConf.to_yaml(OmegaConf.structured(config))
