"""Text environments (gymnasium API) and adapters; all registered under the ``groundrl/`` namespace."""

from __future__ import annotations

import gymnasium as gym

from groundrl.envs.base import TextEnv, TextSpace, resolve_action
from groundrl.errors import UnknownEnvironmentError

_ENVS = {
    "groundrl/FollowInstruction-v0": ("groundrl.envs.instruction:FollowInstructionEnv", {}),
    "groundrl/FollowInstruction-Long-v0": ("groundrl.envs.instruction:FollowInstructionEnv", {"episode_length": 5}),
}

for _id, (_entry_point, _kwargs) in _ENVS.items():
    if _id not in gym.registry:
        gym.register(_id, entry_point=_entry_point, kwargs=_kwargs, disable_env_checker=True)


def list_envs() -> list[str]:
    """The ids of groundrl's registered environments."""
    return sorted(env_id for env_id in gym.registry if env_id.startswith("groundrl/"))


def make_env(env_id: str, **kwargs) -> gym.Env:
    """``gymnasium.make`` with a one-line error for an unknown id.

    >>> env = make_env("groundrl/FollowInstruction-v0")
    """
    if env_id not in gym.registry:
        raise UnknownEnvironmentError(f"unknown environment '{env_id}'; available: {', '.join(list_envs())}")
    return gym.make(env_id, **kwargs)


__all__ = ["TextEnv", "TextSpace", "list_envs", "make_env", "resolve_action"]
