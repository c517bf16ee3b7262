"""The collector: plays a set of environments one decision at a time, for training and evaluation.

It owns what every loop over environments needs and must get right once: each episode's reset
seed, its return and length, the success rule, resetting an environment in the step its episode
ends (the last observation is kept for bootstrapping), the step records of ``trajectories.jsonl``,
and the actions taken since each reset, from which an environment is restored without pickle
(a new environment, reset with the episode's seed, replays them: groundrl's environments are
deterministic given both).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np


def episode_success(info: dict, terminated: bool, reward: float) -> bool:
    """An environment that says (``info["success"]``) is believed; otherwise an episode succeeded
    when it terminated on a positive reward."""
    return bool(info.get("success", terminated and reward > 0))


@dataclass
class EpisodeStats:
    """What finished episodes reported, since the last time it was read."""

    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    successes: list[bool] = field(default_factory=list)

    def add(self, end: Ended) -> None:
        self.returns.append(end.episode_return)
        self.lengths.append(end.length)
        self.successes.append(end.success)

    def summary(self) -> dict[str, float]:
        if not self.returns:
            return {"episodes": 0}
        return {"episodes": len(self.returns), "success_rate": float(np.mean(self.successes)),
                "episode_return": float(np.mean(self.returns)), "episode_length": float(np.mean(self.lengths))}


@dataclass
class Slot:
    """One environment and the episode under way in it."""

    env: gym.Env
    seed: int | None = None  # the episode's reset seed
    obs: Any = None
    info: dict = field(default_factory=dict)
    actions: list[int] = field(default_factory=list)  # taken since the reset
    episode_return: float = 0.0
    length: int = 0
    steps: list[dict] | None = None  # the episode's step records, when it is being recorded
    number: int | None = None  # the recorded episode's number
    mission: str | None = None  # the episode's own (info["mission"] at its reset, where there is one)
    achieved: dict[str, int] = field(default_factory=dict)  # mission -> the decision that first accomplished it

    def note(self, info: dict) -> None:
        """Count a decision just taken (``length`` its index): the missions it accomplished, the first time."""
        for mission in info.get("achieved_missions", ()):
            self.achieved.setdefault(mission, self.length)

    @property
    def active(self) -> bool:
        return self.obs is not None


@dataclass
class Ended:
    """An episode that ended in a step: where, how, and its last observation."""

    slot: int
    seed: int | None
    episode_return: float
    length: int
    success: bool
    terminated: bool
    final_obs: Any
    final_info: dict
    steps: list[dict] | None  # its step records, if it was recorded
    number: int | None
    actions: list[int] = field(default_factory=list)  # taken since its reset: with its seed, what replays it
    mission: str | None = None  # its own (info["mission"] at its reset)
    achieved: dict[str, int] = field(default_factory=dict)  # missions it accomplished, each's first decision


@dataclass
class StepResult:
    rewards: np.ndarray  # of the slots that stepped, in slot order
    terminated: np.ndarray
    truncated: np.ndarray
    macro_steps: np.ndarray  # primitive steps of each decision (1 unless the env says info["macro_steps"])
    ended: list[Ended]


class Collector:
    """Plays ``envs``: :meth:`observations` and :meth:`valid_actions` of the active slots, then
    :meth:`step` with one choice per active slot.

    Args:
        envs: the environments, one per slot.
        next_seed: the reset seed of a slot's next episode, given the slot and the seed of its
            previous episode (None at the start); returning None leaves the slot idle (evaluation
            runs out of episodes).
        record: ``"all"`` records every episode; ``"on_request"`` only those started after
            :meth:`record_next`.
        number_of: the number a recorded episode gets from its seed (default: a running count).
        wait: an ended episode leaves its slot idle until :meth:`start` (the members of a group
            start each episode together); else the slot's next episode starts at once.
    """

    def __init__(self, envs: Sequence[gym.Env], next_seed: Callable[[int, int | None], int | None],
                 record: str = "on_request", number_of: Callable[[int | None], int] | None = None,
                 wait: bool = False):
        self.slots = [Slot(env) for env in envs]
        self.next_seed = next_seed
        self.wait = wait
        self.record_all = record == "all"
        self.number_of = number_of
        self.recorded = 0  # episodes recorded so far (the running count)
        self.pending_record: int | None = None  # a slot whose next episode start is recorded
        self.fields: dict = {}  # added to every step record (the update number, say)
        self.recorded_episodes: list[list[dict]] = []  # recorded episodes that ended, until taken
        self.decisions = 0  # stepped so far, over every slot
        for i in range(len(self.slots)):
            self._reset(i, None)

    # -- reading the state ------------------------------------------------------------------

    @property
    def active(self) -> list[int]:
        return [i for i, slot in enumerate(self.slots) if slot.active]

    def observations(self) -> list:
        return [self.slots[i].obs for i in self.active]

    def infos(self) -> list[dict]:
        return [self.slots[i].info for i in self.active]

    def inputs(self, observe: Callable[[Any, dict], Any]) -> list:
        """What an agent reads of each active slot: ``observe(observation, info)``."""
        return [observe(self.slots[i].obs, self.slots[i].info) for i in self.active]

    def valid_actions(self) -> list[list[str]]:
        return [[str(a) for a in self.slots[i].info["valid_actions"]] for i in self.active]

    def record_next(self, slot: int = 0) -> None:
        """Record the next episode that starts in ``slot`` (or the one under way, if it has not
        taken a step yet)."""
        self.pending_record = slot

    # -- stepping ---------------------------------------------------------------------------

    def step(self, choices: Sequence[int], probabilities: Callable[[int], Sequence[float]] | None = None) -> StepResult:
        """One decision in every active slot (``choices[k]`` for the k-th); an ended episode is
        reset at once with its slot's next seed. ``probabilities(k)`` gives the k-th slot's
        action probabilities, asked only for recorded steps."""
        active = self.active
        if len(choices) != len(active):
            raise ValueError(f"{len(choices)} choices for {len(active)} active environments")
        rewards, terminated, truncated, macro = (np.zeros(len(active)), np.zeros(len(active), bool),
                                                 np.zeros(len(active), bool), np.ones(len(active)))
        ended = []
        for k, (i, choice) in enumerate(zip(active, choices)):
            slot = self.slots[i]
            self._start_recording(i)
            obs, reward, terminated[k], truncated[k], info = slot.env.step(int(choice))
            rewards[k], macro[k] = float(reward), float(info.get("macro_steps", 1))
            if slot.steps is not None:
                valid = [str(a) for a in slot.info["valid_actions"]]
                slot.steps.append({"episode": slot.number, "step": slot.length, **self.fields,
                                   "observation": str(slot.obs), "valid_actions": valid,
                                   "probs": [round(float(p), 6) for p in probabilities(k)] if probabilities else None,
                                   "action": int(choice), "reward": float(reward), "seed": slot.seed})
            self.decisions += 1
            slot.note(info)
            slot.actions.append(int(choice))
            slot.episode_return += float(reward)
            slot.length += 1
            slot.obs, slot.info = obs, info
            if terminated[k] or truncated[k]:
                ended.append(Ended(i, slot.seed, slot.episode_return, slot.length,
                                   episode_success(info, bool(terminated[k]), float(reward)), bool(terminated[k]),
                                   obs, info, slot.steps, slot.number, list(slot.actions), slot.mission,
                                   dict(slot.achieved)))
                if slot.steps is not None:
                    self.recorded_episodes.append(slot.steps)
                if self.wait:
                    self.slots[i] = Slot(slot.env, seed=slot.seed)
                else:
                    self._reset(i, slot.seed)
        return StepResult(rewards, terminated, truncated, macro, ended)

    def take_recorded(self) -> list[list[dict]]:
        """The step records of the recorded episodes that ended since the last call."""
        taken, self.recorded_episodes = self.recorded_episodes, []
        return taken

    def start(self, i: int) -> None:
        """Start the next episode of the idle slot ``i`` (with ``wait``)."""
        if self.slots[i].active:
            raise ValueError(f"slot {i} has an episode under way")
        self._reset(i, self.slots[i].seed)

    def _reset(self, i: int, previous_seed: int | None) -> None:
        slot = self.slots[i]
        seed = self.next_seed(i, previous_seed)
        if seed is None:  # idle: it keeps the seed of its last episode
            self.slots[i] = Slot(slot.env, seed=slot.seed)
            return
        slot.obs, slot.info = slot.env.reset(seed=seed)
        slot.seed, slot.actions, slot.episode_return, slot.length = seed, [], 0.0, 0
        slot.steps, slot.number, slot.mission, slot.achieved = None, None, slot.info.get("mission"), {}

    def _start_recording(self, i: int) -> None:
        slot = self.slots[i]
        if slot.steps is not None or slot.length > 0:
            return
        if self.record_all or self.pending_record == i:
            slot.number = self.number_of(slot.seed) if self.number_of else self.recorded
            self.recorded += 1
            slot.steps = []
            if self.pending_record == i:
                self.pending_record = None

    # -- restoring without pickle -------------------------------------------------------------

    def state_dict(self) -> dict:
        """Plain data: per slot, the episode's seed, the actions since its reset, its return and
        length, its current observation (to check a restore against) and its step records."""
        return {"recorded": self.recorded, "pending_record": self.pending_record,
                "slots": [{"seed": s.seed, "actions": list(s.actions), "return": s.episode_return, "length": s.length,
                           "obs": str(s.obs), "steps": s.steps, "number": s.number, "active": s.active}
                          for s in self.slots]}

    def load_state_dict(self, state: dict) -> bool:
        """Replay each slot's episode from its seed (an idle slot stays idle); False (and every
        slot reset to a fresh episode by the caller) when a replay does not reach the saved
        observation."""
        if len(state["slots"]) != len(self.slots):
            return False
        for i, (slot, saved) in enumerate(zip(self.slots, state["slots"])):
            if not saved.get("active", True):
                self.slots[i] = Slot(slot.env, seed=saved["seed"])
                continue
            obs, info = slot.env.reset(seed=saved["seed"])
            slot.mission, slot.achieved, slot.length = info.get("mission"), {}, 0
            try:
                for action in saved["actions"]:
                    obs, _, _, _, info = slot.env.step(action)
                    slot.note(info)  # what it accomplished is replayed too
                    slot.length += 1
            except Exception as error:  # noqa: BLE001 - any failure means the episode cannot be restored
                warnings.warn(f"an environment could not replay its episode ({type(error).__name__}: {error})",
                              stacklevel=2)
                return False
            if str(obs) != saved["obs"]:
                return False
            slot.obs, slot.info, slot.seed, slot.actions = obs, info, saved["seed"], list(saved["actions"])
            slot.episode_return, slot.length = saved["return"], saved["length"]
            slot.steps, slot.number = saved["steps"], saved["number"]
        self.recorded, self.pending_record = state["recorded"], state["pending_record"]
        return True

    def restart(self, seeds: Sequence[int]) -> None:
        """Start a new episode in every slot, from ``seeds`` (one per slot)."""
        for i, seed in enumerate(seeds):
            self.slots[i] = Slot(self.slots[i].env)
            self.slots[i].obs, self.slots[i].info = self.slots[i].env.reset(seed=seed)
            self.slots[i].seed, self.slots[i].mission = seed, self.slots[i].info.get("mission")

    def close(self) -> None:
        for slot in self.slots:
            slot.env.close()
