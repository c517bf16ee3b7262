"""Text environments (gymnasium API) and adapters; all registered under the ``groundrl/`` namespace."""

from __future__ import annotations

import gymnasium as gym

from groundrl.envs.base import TextEnv, TextSpace, resolve_action
from groundrl.errors import UnknownEnvironmentError

_VIRTUALHOME = {
    "FoodPreparation": "TWOSOME's VirtualHome: heat up the pancake in the microwave",
    "Entertainment": "TWOSOME's VirtualHome: enjoy the chips and the milk while watching TV",
    **{
        f"FoodPreparation-{variant}": f"Food Preparation with {words} (unseen task)"
        for variant, words in [("Cheese", "cheese"), ("Hamburger", "a hamburger"), ("ApplePie", "an apple pie"),
                               ("Pizza", "a pizza"), ("WashingPlate", "dishes and a dishwasher"),
                               ("Laundry", "clothes and a washing machine")]
    },
}

# id -> (entry point, kwargs, one-line description)
_ENVS = {
    "groundrl/FollowInstruction-v0": (
        "groundrl.envs.instruction:FollowInstructionEnv", {}, "take the action the observation names (smoke test)"),
    "groundrl/FollowInstruction-Long-v0": (
        "groundrl.envs.instruction:FollowInstructionEnv", {"episode_length": 5}, "five instructions in a row"),
    **{
        f"groundrl/{task}-v0": ("groundrl.envs.virtualhome:VirtualHomeEnv", {"task": task}, description)
        for task, description in _VIRTUALHOME.items()
    },
    "groundrl/TomatoSalad-v0": (
        "groundrl.envs.overcooked:OvercookedEnv", {"task": "TomatoSalad"},
        "TWOSOME's Overcooked: chop a tomato and serve it in a bowl (5 macro-actions)"),
    "groundrl/TomatoLettuceSalad-v0": (
        "groundrl.envs.overcooked:OvercookedEnv", {"task": "TomatoLettuceSalad"},
        "TWOSOME's Overcooked: a tomato and lettuce salad, with an onion to ignore (8 macro-actions)"),
}

for _id, (_entry_point, _kwargs, _) in _ENVS.items():
    if _id not in gym.registry:
        gym.register(_id, entry_point=_entry_point, kwargs=_kwargs, disable_env_checker=True)


def describe_env(env_id: str) -> str:
    """A one-line description of a groundrl environment ('' for others)."""
    return _ENVS.get(env_id, ("", {}, ""))[2]


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


__all__ = ["TextEnv", "TextSpace", "describe_env", "list_envs", "make_env", "resolve_action"]
