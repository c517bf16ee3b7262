"""The gymnasium environment that runs a household task (:class:`HouseholdEnv`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from groundrl.envs.base import StepInfo, TextEnv, resolve_action
from groundrl.envs.household.task import HouseholdTask
from groundrl.envs.household.world import World
from groundrl.errors import InvalidArgumentError


class HouseholdEnv(TextEnv):
    """Runs a :class:`HouseholdTask` under the groundrl environment contract.

    ``obs`` is the task's prompt; ``info`` holds ``valid_actions``, ``action_ids`` (their indices
    in ``task.actions``), ``features`` (the observed booleans, in ``task.features`` order, as an
    int8 array), ``executed`` (whether the last action's preconditions held) and, at the end,
    ``success``. Reward 1 and ``terminated`` when the goal holds; ``truncated`` after
    ``max_steps`` steps. Reset is deterministic (the seed only seeds ``np_random``).
    """

    @property
    def action_vocabulary(self) -> tuple[str, ...]:
        return tuple(self.task.substitute(a) for a in self.task.actions)

    def __init__(self, task: HouseholdTask, max_steps: int = 50, render_mode: str | None = None):
        if max_steps < 1:
            raise InvalidArgumentError(f"max_steps must be at least 1, not {max_steps}")
        self.task = task
        self.max_steps = max_steps
        self._set_render_mode(render_mode)
        self.feature_names = task.features
        self.action_template = tuple(task.substitute(a) for a in task.actions)
        self.world = World(task.scene)
        self._steps = 0
        self._prompt, self._valid_ids, self._features = "", [], {}
        self._executed = True

    def _observe(self) -> None:
        self._features = self.task.features_of(self.world)
        prompt, self._valid_ids = self.task.read(self.world, self._features)
        self._prompt = self.task.substitute(prompt)

    @property
    def valid_actions(self) -> list[str]:
        return [self.action_template[i] for i in self._valid_ids]

    def _info(self, **extra: Any) -> StepInfo:
        return {
            "valid_actions": self.valid_actions,
            "action_ids": list(self._valid_ids),
            "features": np.array([self._features[n] for n in self.feature_names], dtype=np.int8),
            "executed": self._executed,
            **extra,
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, StepInfo]:
        super().reset(seed=seed)
        self.world = World(self.task.scene)
        self._steps = 0
        self._executed = True
        self._observe()
        return self._prompt, self._info()

    def _step(self, action) -> tuple[str, float, bool, bool, StepInfo]:
        index = resolve_action(action, self.valid_actions)
        self._executed = self.world.execute(self.task.parsed_actions[self._valid_ids[index]])
        self._steps += 1
        self._observe()
        terminated = bool(self.task.goal(self._features))
        truncated = not terminated and self._steps >= self.max_steps
        extra = {"success": terminated} if terminated or truncated else {}
        return self._prompt, float(terminated), terminated, truncated, self._info(**extra)

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        header = f"{self.task.name} · step {self._steps}/{self.max_steps}"
        return self.task.substitute(f"{header}\n{self.world.describe()}")
