"""Exploring starts: each episode begins in a state drawn from those a few steps into the task.

A policy learns only the states its own path reaches. A trained Food Preparation agent fetches the
pancake before it opens the microwave, so it never meets "the microwave is open and my hands are
empty", which is where its Laundry counterpart loops (it opens the open washing machine again).
Starting episodes a few steps in (Sutton & Barto's exploring starts) puts such states in front of
the learner without changing the task: the start is one the environment's own valid actions
reach, the agent does not see the way there (a prompt with a history starts after it), and
evaluation starts where the task starts.

The start is drawn uniformly among the *distinct* states (observation and valid actions) that up to
``max_steps`` actions reach, not by random steps: in Food Preparation three of the five first
actions walk to another room, and 4 random steps would give the open microwave with empty hands to
1.5% of the episodes; the distinct states within 4 steps are 15, one of them that one.

>>> import groundrl
>>> env = ExploringStarts(groundrl.make_env("groundrl/FoodPreparation-v0", prompt=None), max_steps=4)
>>> len(env.reachable(seed=0))   # the start itself, and 14 states up to 4 actions away
15
>>> first, info = env.reset(seed=3)
>>> again, _ = env.reset(seed=3)
>>> first == again, info["start_steps"]   # the reset seed decides: an episode replays from its seed
(True, 3)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from groundrl.errors import InvalidArgumentError

# mixed into the reset seed, so that the draw of the start is not the environment's own stream
_STREAM = 0x5EED5


class ExploringStarts(gym.Wrapper):
    """Reset, then go to a state drawn uniformly among the distinct ones (observation and valid actions)
    that up to ``max_steps`` actions reach without ending the episode, the start among them, along
    the shortest way found (breadth first, the valid actions in order). The draw comes from the
    reset seed, so an episode replays from its seed, as the collector and the self-imitation memory
    restore it. The way's steps count toward the environment's step limit. ``info["start_steps"]``
    says how many were taken.

    Finding the states replays the environment from its reset, some (distinct states) x (valid
    actions) times a reset: cheap for the household tasks (15 states within 4 steps, ~10 ms), costly
    for an environment whose reset builds a world (BabyAI).
    """

    def __init__(self, env: gym.Env, max_steps: int):
        super().__init__(env)
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise InvalidArgumentError(f"exploring starts reach at least 1 step in, not {max_steps!r}")
        self.max_steps = max_steps
        self._unseeded = np.random.default_rng()

    def _replay(self, seed: int | None, options: dict | None, way: tuple[int, ...]) -> tuple:
        """Reset, then take ``way``: the last ``(observation, reward, terminated, truncated, info)``."""
        observation, info = self.env.reset(seed=seed, options=options)
        result = (observation, 0.0, False, False, info)
        for action in way:
            result = self.env.step(action)
        return result

    def reachable(self, seed: int | None = None, options: dict | None = None) -> list[tuple[int, ...]]:
        """The way (valid-action indices) to each distinct state within ``max_steps``, the start first."""
        observation, info = self.env.reset(seed=seed, options=options)
        seen = {(str(observation), tuple(info["valid_actions"]))}
        ways, frontier = [()], [((), len(info["valid_actions"]))]
        for _ in range(self.max_steps):
            deeper = []
            for way, choices in frontier:
                for action in range(choices):
                    observation, _, terminated, truncated, info = self._replay(seed, options, (*way, action))
                    key = (str(observation), tuple(info["valid_actions"]))
                    if terminated or truncated or key in seen:
                        continue
                    seen.add(key)
                    ways.append((*way, action))
                    deeper.append(((*way, action), len(info["valid_actions"])))
            frontier = deeper
        return ways

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        rng = self._unseeded if seed is None else np.random.default_rng([seed, _STREAM])
        ways = self.reachable(seed, options)
        way = ways[int(rng.integers(len(ways)))]
        observation, _, _, _, info = self._replay(seed, options, way)
        # what the hidden steps accomplished is not the episode's (hindsight reads the steps it sees)
        info = {key: value for key, value in info.items() if key != "achieved_missions"}
        return observation, {**info, "start_steps": len(way)}
