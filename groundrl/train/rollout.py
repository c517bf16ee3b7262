"""Collecting experience: vectorized environments played by the agent, stored for PPO.

Each environment has its own list of valid actions at each step, so the buffer keeps, per
decision, the observation the agent read, the valid actions and the index taken; the policy's log-probability and the
value at the time of the decision; the reward, whether the episode ended, and the primitive steps
the decision took (for the semi-MDP discount of macro-actions).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from groundrl.envs import make_env


class EpisodeSeeds(gym.Wrapper):
    """Every episode starts from a seed of its own, so that any episode can be played again (by
    ``groundrl replay``): a reset without a seed takes the previous seed plus ``stride`` (the number
    of environments, so that no two environments share one), and ``info["episode_seed"]`` says which."""

    def __init__(self, env: gym.Env, stride: int):
        super().__init__(env)
        self.stride = stride
        self.episode_seed: int | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is None and self.episode_seed is not None:
            seed = self.episode_seed + self.stride
        self.episode_seed = seed
        observation, info = self.env.reset(seed=seed, options=options)
        if seed is not None:
            info["episode_seed"] = seed
        return observation, info


def make_vector_env(env_id: str, num_envs: int, prompt: str | None = "auto", window: int = 3,
                    env_kwargs: dict | None = None, seed_stride: int | None = None) -> SyncVectorEnv:
    """``num_envs`` copies of a groundrl environment (each episode seeded, see :class:`EpisodeSeeds`;
    ``seed_stride`` defaults to ``num_envs``), reset in the same step an episode ends (the last
    observation stays in ``info["final_obs"]``)."""
    def make():
        env = make_env(env_id, prompt=prompt, window=window, **(env_kwargs or {}))
        return EpisodeSeeds(env, seed_stride or num_envs)

    return SyncVectorEnv([make for _ in range(num_envs)], autoreset_mode=AutoresetMode.SAME_STEP)


def valid_actions_of(info: dict, num_envs: int) -> list[list[str]]:
    """Per environment, its valid actions as a list of ``str`` (the vector env stacks them into
    numpy arrays)."""
    return [[str(a) for a in info["valid_actions"][i]] for i in range(num_envs)]


def infos_of(info: dict, num_envs: int) -> list[dict]:
    """The vector env's stacked ``info`` split back into one dict per environment (the keys each
    environment reported this step)."""
    keys = [k for k in info if not k.startswith("_") and k not in ("final_obs", "final_info")]
    mask = {k: info.get(f"_{k}", np.ones(num_envs, bool)) for k in keys}
    return [{k: info[k][i] for k in keys if mask[k][i]} for i in range(num_envs)]


@dataclass
class Rollout:
    """``num_steps`` decisions of ``num_envs`` environments; tensors are ``(num_steps, num_envs)``;
    observations are what the agent's ``observe`` made of each step (a prompt for an LLM agent)."""

    observations: list[list] = field(default_factory=list)
    valid_actions: list[list[list[str]]] = field(default_factory=list)
    actions: list[torch.Tensor] = field(default_factory=list)
    log_probs: list[torch.Tensor] = field(default_factory=list)
    values: list[torch.Tensor] = field(default_factory=list)
    rewards: list[torch.Tensor] = field(default_factory=list)
    dones: list[torch.Tensor] = field(default_factory=list)
    macro_steps: list[torch.Tensor] = field(default_factory=list)

    def stacked(self, name: str) -> torch.Tensor:
        return torch.stack(getattr(self, name))

    def flat_observations(self) -> list:
        return [o for step in self.observations for o in step]

    def flat_valid_actions(self) -> list[list[str]]:
        return [a for step in self.valid_actions for a in step]


@dataclass
class EpisodeStats:
    """What finished episodes reported, since the last time it was read."""

    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    successes: list[bool] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        if not self.returns:
            return {"episodes": 0}
        return {"episodes": len(self.returns), "success_rate": float(np.mean(self.successes)),
                "episode_return": float(np.mean(self.returns)), "episode_length": float(np.mean(self.lengths))}


def finished_episodes(info: dict, terminated: np.ndarray, truncated: np.ndarray):
    """Indices of the environments whose episode ended this step, with their final info."""
    final = info.get("final_info", {})
    for i in np.flatnonzero(terminated | truncated):
        yield int(i), {key: value[i] for key, value in final.items()
                       if not key.startswith("_") and final.get(f"_{key}", np.ones(len(terminated), bool))[i]}

