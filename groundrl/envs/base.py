"""The environment contract shared by every groundrl environment, ours and adapters.

- ``reset(seed=...) -> (obs, info)`` and ``step(action) -> (obs, reward, terminated, truncated, info)``;
- ``obs`` is the text observation;
- ``info["valid_actions"]`` lists the action strings valid now;
- ``step`` takes one of those strings or its index in the list; anything else raises
  ``ValueError`` and leaves the environment as it was.

Agents that do not read text (symbolic PPO, action-head agents) also need a fixed action
vocabulary: an environment whose valid actions vary names all of them in ``action_vocabulary``
and gives ``info["action_ids"]``, the position of each valid action in it (see
:func:`action_ids`); where every action is always valid, the ids are the positions.
"""

from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np

from groundrl.errors import InvalidArgumentError


class TextSpace(gym.spaces.Text):
    """A text space that holds any string up to ``max_length`` characters (gymnasium's ``Text``
    only admits a fixed character set, too narrow for prompts in other languages)."""

    def __init__(self, max_length: int = 100_000):
        super().__init__(max_length=max_length, min_length=0)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length


def resolve_action(action: Any, valid_actions: Sequence[str]) -> int:
    """The index of ``action`` (a valid action string, or an index into ``valid_actions``).

    >>> resolve_action("turn left", ["turn left", "go forward"])
    0
    >>> resolve_action(1, ["turn left", "go forward"])
    1
    """
    if isinstance(action, (int, np.integer)) and not isinstance(action, bool):
        if 0 <= action < len(valid_actions):
            return int(action)
        raise ValueError(f"action index {action} is out of range: {len(valid_actions)} actions are valid now")
    if isinstance(action, str):
        try:
            return list(valid_actions).index(action)
        except ValueError:
            shown = ", ".join(repr(a) for a in valid_actions[:10]) + (", ..." if len(valid_actions) > 10 else "")
            raise ValueError(f"action {action!r} is not valid now; valid actions: {shown}") from None
    raise ValueError(f"an action is a string from info['valid_actions'] or its index, not {type(action).__name__}")


def action_ids(info: dict) -> list[int]:
    """The positions of ``info["valid_actions"]`` in the environment's ``action_vocabulary``.

    >>> action_ids({"valid_actions": ["a", "b"], "action_ids": [3, 7]}), action_ids({"valid_actions": ["a", "b"]})
    ([3, 7], [0, 1])
    """
    return [int(i) for i in info["action_ids"]] if "action_ids" in info else list(range(len(info["valid_actions"])))


def action_vocabulary(env: gym.Env) -> tuple[str, ...]:
    """Every action ``env`` can offer, in the order ``info["action_ids"]`` indexes."""
    vocabulary = getattr(env.unwrapped, "action_vocabulary", None)
    if not vocabulary:
        name = env.spec.id if env.spec else type(env.unwrapped).__name__
        raise InvalidArgumentError(f"{name} declares no action_vocabulary, which agents with an action head or "
                                   "a symbolic observation need; LLM-scoring agents play it")
    return tuple(vocabulary)


def join_words(words: Sequence[str]) -> str:
    """``"a"``, ``"a and b"``, ``"a, b and c"``.

    >>> join_words(["a tomato", "a lettuce", "an onion"])
    'a tomato, a lettuce and an onion'
    """
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


class TextEnv(gym.Env):
    """Base class of groundrl's text environments: spaces, and the checks of the contract."""

    metadata = {"render_modes": ["ansi"]}
    observation_space = TextSpace()
    action_space = TextSpace(max_length=1000)

    def _set_render_mode(self, render_mode: str | None) -> None:
        """Keep ``render_mode`` if this environment draws that way, or say which ones it has."""
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            modes = ", ".join(repr(m) for m in self.metadata["render_modes"])
            raise InvalidArgumentError(f"render_mode {render_mode!r} is not supported; use {modes} or None")
        self.render_mode = render_mode
