"""The checks every settings dataclass runs in ``__post_init__`` (the agents' and the training
run's): each says which setting is wrong and what it must be, in one line.

``section`` names the dataclass's place in the settings (``"ppo"``, ``"agent.llm"``; ``""`` at
the top), so that a message names the key a user writes: ``ppo.minibatch_size must be at least 1``.
"""

from __future__ import annotations

from dataclasses import fields
from enum import Enum
from typing import get_type_hints

from groundrl.errors import InvalidArgumentError


def _key(section: str, name: str) -> str:
    return f"{section}.{name}" if section else name


def coerce_choices(section: str, config) -> None:
    """Turn the text of each choice field (an Enum) into its member, or say which values it takes
    (OmegaConf checks them in config files; this checks them when the dataclass is made in code)."""
    for f in fields(config):
        kind = get_type_hints(type(config)).get(f.name)
        value = getattr(config, f.name)
        if isinstance(kind, type) and issubclass(kind, Enum) and not isinstance(value, kind):
            try:
                setattr(config, f.name, kind(value))
            except ValueError:
                allowed = ", ".join(member.value for member in kind)
                raise InvalidArgumentError(f"{_key(section, f.name)} must be one of {allowed}, not {value!r}") \
                    from None


def at_least_one(section: str, config, *names: str) -> None:
    """Each of ``names`` is 1 or more (counts, sizes)."""
    for name in names:
        if getattr(config, name) < 1:
            raise InvalidArgumentError(f"{_key(section, name)} must be at least 1, not {getattr(config, name)}")


def positive(section: str, config, *names: str, optional: bool = False) -> None:
    """Each of ``names`` is above 0 (rates, coefficients); ``optional``: or None."""
    for name in names:
        value = getattr(config, name)
        if not (optional and value is None) and not value > 0:
            raise InvalidArgumentError(f"{_key(section, name)} must be positive, not {value}")


def fraction(section: str, config, *names: str, optional: bool = False) -> None:
    """Each of ``names`` is between 0 and 1 (discounts, probabilities); ``optional``: or None."""
    for name in names:
        value = getattr(config, name)
        if not (optional and value is None) and not 0 <= value <= 1:
            raise InvalidArgumentError(f"{_key(section, name)} must be between 0 and 1, not {value}")


def non_negative(section: str, config, *names: str, optional: bool = False) -> None:
    """Each of ``names`` is 0 or more; ``optional``: or None."""
    for name in names:
        value = getattr(config, name)
        if not (optional and value is None) and not value >= 0:
            raise InvalidArgumentError(f"{_key(section, name)} must be 0 or more, not {value}")


__all__ = ["at_least_one", "coerce_choices", "non_negative", "positive"]
