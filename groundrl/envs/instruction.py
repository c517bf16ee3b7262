"""FollowInstruction: the smallest grounding task, for smoke tests, demos and learning tests.

Each step, the observation names one action among 4 to 8 valid ones ("Instruction: open the blue
door."); taking it earns +1. A wrong action ends the episode unsuccessfully; an episode succeeds
when all of its ``episode_length`` instructions were followed. A random policy succeeds with
probability about ``(1/6) ** episode_length``; a model that reads the observation, nearly always.

>>> import gymnasium as gym, groundrl
>>> env = gym.make("groundrl/FollowInstruction-v0")
>>> obs, info = env.reset(seed=0)
>>> obs.splitlines()[0]
'Instruction: go to the purple ball.'
>>> obs, reward, terminated, truncated, info = env.step("go to the purple ball")
>>> reward, terminated, info["success"]
(1.0, True, True)
"""

from __future__ import annotations

import itertools

import numpy as np

from groundrl.envs.base import StepInfo, TextEnv, resolve_action
from groundrl.errors import InvalidArgumentError

VERBS = ("go to", "pick up", "open", "close", "drop", "toggle", "push")
COLORS = ("red", "green", "blue", "purple", "yellow", "grey")
OBJECTS = ("ball", "key", "box", "door")
ACTIONS = tuple(f"{v} the {c} {o}" for v, c, o in itertools.product(VERBS, COLORS, OBJECTS))


class FollowInstructionEnv(TextEnv):
    """``info``: ``valid_actions``, ``action_ids`` (their positions in :data:`ACTIONS`), and
    ``features``, the symbolic observation: a one-hot vector of the instructed action's id."""

    action_vocabulary = ACTIONS

    def __init__(self, num_actions: tuple[int, int] = (4, 8), episode_length: int = 1, render_mode: str | None = None):
        low, high = num_actions
        if not 2 <= low <= high <= len(ACTIONS):
            raise InvalidArgumentError(f"num_actions must be (low, high) with 2 <= low <= high <= {len(ACTIONS)}")
        if episode_length < 1:
            raise InvalidArgumentError("episode_length must be at least 1")
        self.num_actions = (low, high)
        self.episode_length = episode_length
        self._set_render_mode(render_mode)
        self._valid_actions: list[str] = []
        self._valid_ids: list[int] = []
        self._target = -1
        self._step_count = 0

    def _new_instruction(self) -> None:
        count = int(self.np_random.integers(self.num_actions[0], self.num_actions[1] + 1))
        chosen = self.np_random.choice(len(ACTIONS), size=count, replace=False)
        self._valid_ids = [int(i) for i in chosen]
        self._valid_actions = [ACTIONS[i] for i in chosen]
        self._target = int(self.np_random.integers(count))

    def _observation(self) -> str:
        # The valid actions are in info, not in the text: listing them in the prompt makes small
        # models copy the first one listed (SmolLM2-135M drops from 1.0 to 0.05 greedy success).
        return f"Instruction: {self._valid_actions[self._target]}.\nYou decide to"

    def _info(self, **extra) -> StepInfo:
        features = np.zeros(len(ACTIONS), dtype=np.int8)
        features[self._valid_ids[self._target]] = 1
        return {"valid_actions": list(self._valid_actions), "action_ids": list(self._valid_ids), "features": features,
                **extra}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, StepInfo]:
        super().reset(seed=seed)
        self._step_count = 0
        self._new_instruction()
        return self._observation(), self._info()

    def _step(self, action) -> tuple[str, float, bool, bool, StepInfo]:
        index = resolve_action(action, self._valid_actions)
        self._step_count += 1
        correct = index == self._target
        done = not correct or self._step_count == self.episode_length
        if correct and not done:
            self._new_instruction()
        info = self._info(success=correct and done) if done else self._info()
        return self._observation(), float(correct), done, False, info

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        marks = [("->" if i == self._target else "  ") + f" {a}" for i, a in enumerate(self._valid_actions)]
        return f"step {self._step_count}/{self.episode_length}\n" + "\n".join(marks)
