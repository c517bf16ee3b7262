"""Agents that need no training: uniformly random, and BabyAI's planner bot.

Both are :class:`~groundrl.agents.protocols.Policy` agents; the bot plans on the environments
themselves (``envs``).
"""

from __future__ import annotations

import weakref
from typing import Sequence

import gymnasium as gym
import torch

from groundrl.agents.protocols import Generators, choose
from groundrl.envs.babyai_text import BabyAITextEnv
from groundrl.errors import InvalidArgumentError


class RandomAgent:
    """Uniform over the valid actions (the floor every learned agent must beat).

    >>> RandomAgent().act(["obs"], [["a", "b"]], generator=torch.Generator().manual_seed(0))[0]
    [1]
    """

    def act(self, observations: Sequence[str], valid_actions: Sequence[Sequence[str]], *,
            infos: Sequence[dict] | None = None, envs: Sequence[gym.Env] | None = None, greedy: bool = False,
            generator: Generators = None) -> tuple[list[int], list[torch.Tensor]]:
        probs = [torch.full((len(actions),), 1 / len(actions)) for actions in valid_actions]
        return choose(probs, False, generator), probs  # uniform even when asked for the greedy action


class BabyAIBotAgent:
    """minigrid's BabyAI planner bot, playing any BabyAI-Text environment from its true state.

    It solves every level of GLAM's suite (the demonstrations of behavioural cloning, and the upper
    bound of the baselines). A new bot plans each episode; it fails clearly if the environment's
    action set lacks an action it needs (e.g. "pick up" with the 3-action set).

    >>> import groundrl
    >>> env = groundrl.make_env("groundrl/BabyAI-GoToLocal-v0")
    >>> obs, info = env.reset(seed=17)
    >>> bot, done = BabyAIBotAgent(), False
    >>> while not done:
    ...     (action,), _ = bot.act([obs], [info["valid_actions"]], envs=[env])
    ...     obs, reward, terminated, truncated, info = env.step(action)
    ...     done = terminated or truncated
    >>> info["success"]
    True
    """

    def cannot_play(self, env: gym.Env) -> str:
        """Why this agent cannot play ``env`` ('' when it can)."""
        return "" if isinstance(env.unwrapped, BabyAITextEnv) else "the BabyAI bot plays BabyAI-Text only"

    def __init__(self):
        # per text environment: (the instruction object of its episode, the bot planning it)
        self._bots: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def act(self, observations: Sequence[str], valid_actions: Sequence[Sequence[str]], *,
            infos: Sequence[dict] | None = None, envs: Sequence[gym.Env] | None = None, greedy: bool = False,
            generator: Generators = None) -> tuple[list[int], list[torch.Tensor]]:
        from minigrid.utils.baby_ai_bot import BabyAIBot  # start-up time: the bot is rarely played

        if envs is None or len(envs) != len(observations):
            raise InvalidArgumentError("the BabyAI bot plans on the environments' state: pass envs=")
        choices, probs = [], []
        for env, actions in zip(envs, valid_actions):
            text_env = env.unwrapped
            if not isinstance(text_env, BabyAITextEnv):
                raise InvalidArgumentError(f"the BabyAI bot plays BabyAI-Text environments only, not {env.spec.id if env.spec else env}")
            level = text_env.minigrid
            instructions, bot = self._bots.get(text_env, (None, None))
            if instructions is not level.instrs:  # a new episode
                bot = BabyAIBot(level)
                self._bots[text_env] = (level.instrs, bot)
            planned = int(bot.replan())
            index = text_env.action_index(planned)
            if index is None:
                raise InvalidArgumentError(f"the BabyAI bot needs minigrid action '{level.actions(planned).name}', "
                                           f"which the action set {text_env.actions} lacks")
            choices.append(index)
            probs.append(torch.nn.functional.one_hot(torch.tensor(index), len(actions)).float())
        return choices, probs
