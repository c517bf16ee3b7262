"""Text environments (gymnasium API) and adapters; all registered under the ``groundrl/`` namespace."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from groundrl.envs.base import (
    ClosedEnvironmentError,
    EpisodeGuard,
    ResetNeededError,
    StepInfo,
    TextEnv,
    TextSpace,
    check_info,
    resolve_action,
)
from groundrl.envs.prompts import ActionsPrompt, GlamPrompt, InventedWords, RewriteWords, actions_prompt, glam_prompt
from groundrl.envs.starts import ExploringStarts
from groundrl.errors import InvalidArgumentError, UnknownEnvironmentError

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

_BABYAI = {
    "GoToLocal": "BabyAI-Text: go to an object (one room, 8 objects)",
    "PickupLocal": "BabyAI-Text: pick up an object",
    "PutNextLocal": "BabyAI-Text: put an object next to another",
    "OpenLocal": "BabyAI-Text: open a locked door (its key is in the room, two rooms)",
    "PickUpThenGoToLocal": "BabyAI-Text: pick up A, then go to B",
    "MixedTrainLocal": ("BabyAI-Text: GLAM's training mix (go to, pick up, put next, open, sequences), "
                        "held-out pairs excluded"),
    "MixedTestLocal": ("BabyAI-Text: the same mix naming only held-out pairs (yellow box, red key, red/grey door, "
                       "green ball)"),
    "PickUpSeqPickUpLocal": "BabyAI-Text: pick up A, then pick up B (GLAM's new-composition test)",
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
    **{
        f"groundrl/BabyAI-{level}-v0": ("groundrl.envs.babyai_text:BabyAITextEnv", {"level": level}, description)
        for level, description in _BABYAI.items()
    },
    "groundrl/BabyAI-GoToLocalFrench-v0": (
        "groundrl.envs.babyai_text:BabyAITextEnv", {"level": "GoToLocal", "language": "french"},
        "BabyAI-Text: GoToLocal in French (GLAM's language test)"),
}

# Adapters of other packages (optional extras: their modules import the package at the first make)
from groundrl.envs.scienceworld import TASKS as _SCIENCEWORLD_TASKS  # noqa: E402
from groundrl.envs.textworld_express import GAMES as _TWX_GAMES  # noqa: E402

_ENVS.update({
    **{f"groundrl/TWX-{game}-v0": ("groundrl.envs.textworld_express:TextWorldExpressEnv", {"game": game},
                                   f"TextWorldExpress: {description}")
       for game, (_, description) in _TWX_GAMES.items()},
    "groundrl/TextWorld-Simple-v0": ("groundrl.envs.textworld_games:TextWorldEnv", {},
                                     "TextWorld's tw-simple games, generated from the seed: a key, a door, an errand"),
    **{f"groundrl/ScienceWorld-{task}-v0": ("groundrl.envs.scienceworld:ScienceWorldEnv", {"task": task},
                                            f"ScienceWorld: the {task} task")
       for task in _SCIENCEWORLD_TASKS},
})

for _id, (_entry_point, _kwargs, _) in _ENVS.items():
    if _id not in gym.registry:
        gym.register(_id, entry_point=_entry_point, kwargs=_kwargs, disable_env_checker=True)


def describe_env(env_id: str) -> str:
    """A one-line description of a groundrl environment ('' for others)."""
    return _ENVS.get(env_id, ("", {}, ""))[2]


def list_envs() -> list[str]:
    """The ids of groundrl's registered environments."""
    return sorted(env_id for env_id in gym.registry if env_id.startswith("groundrl/"))


PROMPTS = ("auto", "glam", "actions", None)
"""What an agent can read of an environment (:func:`make_env`'s ``prompt``)."""


def make_env(env_id: str, *, prompt: str | None = "auto", window: int = 3, rewrite: dict | None = None,
             exploring_starts: int = 0, invented_words: Sequence[str] = (), invented_share: float = 1.0,
             **kwargs: Any) -> gym.Env:
    """``gymnasium.make`` with a one-line error for an unknown id, and the prompt an agent reads.

    Args:
        env_id: a registered id.
        prompt: ``"auto"``: the environment's own prompt (GLAM's template with history for
            BabyAI-Text, the observation as is elsewhere); ``"glam"``: GLAM's template for any
            environment; ``"actions"``: the environment's own prompt preceded by the valid actions
            (:func:`actions_prompt`: it raises a small model's prior; GLAM's template lists them
            already); ``None``: the raw observation.
        window: observations shown by GLAM's template.
        rewrite: words replaced in the prompt (``{"ball": "xolo"}``, see :class:`RewriteWords`).
        exploring_starts: each episode begins in a state drawn among the distinct ones this many
            valid actions reach, the way there not shown (:class:`ExploringStarts`; training's
            ``explore.start_steps``).
        invented_words: words replaced by invented ones in ``invented_share`` of the episodes
            (:class:`InventedWords`; training's ``explore.invented_words``).
        kwargs: the environment's own options, and ``gymnasium.make``'s (``max_episode_steps``).

    The environment comes wrapped in :class:`EpisodeGuard`, outermost: ``step`` outside an
    episode (before ``reset``, after the end, whichever wrapper ended it) raises
    :class:`ResetNeededError`; ``step`` or ``reset`` after ``close()``, :class:`ClosedEnvironmentError`.

    >>> env = make_env("groundrl/FollowInstruction-v0")
    >>> prompt, info = make_env("groundrl/BabyAI-GoToLocal-v0").reset(seed=17)
    >>> prompt.splitlines()[1]
    ' Goal of the agent: go to a purple key '
    """
    if env_id not in gym.registry:
        import difflib

        def name(full: str) -> str:  # what tells ids apart: not the shared "groundrl/" and "-v0"
            return full.removeprefix("groundrl/").rsplit("-v", 1)[0].lower()

        names = {name(known): known for known in list_envs()}
        near = [names[n] for n in difflib.get_close_matches(name(env_id), names, n=3, cutoff=0.75)]
        hint = f"did you mean {' or '.join(near)}? " if near else ""
        raise UnknownEnvironmentError(f"unknown environment '{env_id}'; {hint}`groundrl envs` lists the "
                                      f"{len(list_envs())} available")
    if prompt not in PROMPTS:
        raise InvalidArgumentError(f"prompt must be 'auto', 'glam', 'actions' or None, not {prompt!r}")
    try:
        env = gym.make(env_id, **kwargs)
    except TypeError as error:  # an option the environment does not take: one line naming it
        unexpected = re.search(r"unexpected keyword argument '(\w+)'", str(error))
        if unexpected is None:
            raise
        raise InvalidArgumentError(f"{env_id} takes no option {unexpected.group(1)!r}") from None
    if exploring_starts:
        env = ExploringStarts(env, exploring_starts)
    if invented_words:
        env = InventedWords(env, invented_words, invented_share)
    own_is_glam = env.unwrapped.metadata.get("prompt") == "glam"
    if prompt == "glam" or (prompt in ("auto", "actions") and own_is_glam):  # GLAM's template lists the actions
        env = GlamPrompt(env, window=window)
    elif prompt == "actions":
        env = ActionsPrompt(env)
    if rewrite:
        env = RewriteWords(env, rewrite)
    return EpisodeGuard(env)


__all__ = ["ActionsPrompt", "ClosedEnvironmentError", "EpisodeGuard", "ExploringStarts", "GlamPrompt", "InventedWords",
           "PROMPTS",
           "actions_prompt",
           "ResetNeededError", "RewriteWords", "StepInfo", "TextEnv", "TextSpace", "check_info", "describe_env",
           "glam_prompt", "list_envs", "make_env", "resolve_action"]
