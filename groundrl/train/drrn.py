"""Q-learning for the DRRN baseline (GLAM's): the PPO trainer's environments, logging and
checkpoints, with a replay memory and a temporal-difference update instead of PPO.

One update:

1. play ``num_envs x num_steps`` decisions, actions sampled from ``softmax(Q / temperature)``
   (Boltzmann exploration), each transition ``(s, a, r, s', A(s'), terminated)`` into the memory;
2. ``decisions * replay_ratio / batch_size`` minibatches of ``batch_size`` transitions drawn
   uniformly from the memory:
   ``y = r + gamma * max_a' Q(s', a')`` (``y = r`` when ``s`` ended the episode; a time limit is
   not an end, so it bootstraps), Huber loss between ``Q(s, a)`` and ``y``, gradient norm clipped.
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F

from groundrl.train import distributed
from groundrl.train.rollout import EpisodeStats, finished_episodes, valid_actions_of
from groundrl.train.trainer import Trainer


class ReplayMemory:
    """The most recent ``capacity`` transitions, sampled uniformly."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.transitions: list[tuple] = []
        self.position = 0

    def __len__(self) -> int:
        return len(self.transitions)

    def push(self, transition: tuple) -> None:
        if len(self.transitions) < self.capacity:
            self.transitions.append(transition)
        else:
            self.transitions[self.position] = transition
        self.position = (self.position + 1) % self.capacity

    def sample(self, batch_size: int, generator: torch.Generator) -> list[tuple]:
        indices = torch.randint(len(self.transitions), (batch_size,), generator=generator)
        return [self.transitions[i] for i in indices.tolist()]


class DRRNTrainer(Trainer):
    """Trains a :class:`groundrl.agents.drrn.DRRNAgent` (``agent.kind=drrn``; settings in ``drrn``)."""

    def __init__(self, config, run_dir, agent=None):
        super().__init__(config, run_dir, agent)
        self.memory = ReplayMemory(max(1, config.drrn.replay_size // self.world.size))  # this rank's share

    def _make_optimizers(self) -> tuple[dict, dict]:
        return {"q": torch.optim.Adam(self.agent.parameters(), lr=self.config.drrn.lr)}, {}

    def _unused_parameters(self) -> bool:
        return False  # every weight computes every Q-value

    def update(self) -> dict:
        ppo, drrn = self.config.ppo, self.config.drrn
        started = time.perf_counter()
        episodes = self.collect_transitions()
        rollout_seconds = time.perf_counter() - started

        started = time.perf_counter()
        decisions = ppo.num_envs * ppo.num_steps
        losses, q_means = [], []
        # each rank learns from its own memory; learning_starts and batch_size are totals over the ranks
        if len(self.memory) * self.world.size >= drrn.learning_starts:
            for _ in range(max(1, round(decisions * drrn.replay_ratio / drrn.batch_size))):
                loss, q_mean = self.td_step(self.memory.sample(drrn.batch_size // self.world.size, self.generator))
                losses.append(loss)
                q_means.append(q_mean)
        update_seconds = time.perf_counter() - started

        return self._record(episodes, rollout_seconds, update_seconds, {
            **distributed.mean_over_ranks({
                "q_loss": sum(losses) / len(losses) if losses else float("nan"),
                "q_mean": sum(q_means) / len(q_means) if q_means else float("nan")}),
            "replay_size": len(self.memory) * self.world.size,
        })

    def collect_transitions(self) -> EpisodeStats:
        ppo, episodes = self.config.ppo, EpisodeStats()
        for _ in range(ppo.num_steps):
            observations = self._observe(self.next_obs, self.next_info)
            valid = valid_actions_of(self.next_info, self.num_envs)
            choices, _ = self.agent.act(observations, valid, generator=self.generator)
            self.next_obs, rewards, terminated, truncated, self.next_info = self.envs.step(np.array(choices))
            next_observations = self._observe(self.next_obs, self.next_info)
            next_valid = valid_actions_of(self.next_info, self.num_envs)
            finals = dict(finished_episodes(self.next_info, terminated, truncated))
            for i in range(self.num_envs):
                self.episode_returns[i] += float(rewards[i])
                self.episode_lengths[i] += 1
                next_observation, next_actions = next_observations[i], next_valid[i]
                if i in finals:  # the environment reset in this step: s' is the episode's last state
                    next_observation = self.agent.observe(self.next_info["final_obs"][i], finals[i])
                    next_actions = [str(a) for a in finals[i]["valid_actions"]]
                    episodes.returns.append(self.episode_returns[i])
                    episodes.lengths.append(self.episode_lengths[i])
                    episodes.successes.append(bool(finals[i].get("success", terminated[i] and rewards[i] > 0)))
                    self.episode_returns[i], self.episode_lengths[i] = 0.0, 0
                self.memory.push((observations[i], valid[i][choices[i]], float(rewards[i]) * ppo.reward_scale,
                                  next_observation, next_actions, bool(terminated[i])))
        return episodes

    def td_step(self, transitions: list[tuple]) -> tuple[float, float]:
        observations, actions, rewards, next_observations, next_actions, terminated = zip(*transitions)
        with torch.no_grad():
            next_q = torch.stack([q.max() for q in self.agent.q_values(list(next_observations), list(next_actions))])
        not_done = 1.0 - torch.tensor(terminated, dtype=torch.float32, device=next_q.device)
        targets = torch.tensor(rewards, dtype=torch.float32, device=next_q.device) + self.config.drrn.gamma * not_done * next_q
        q = torch.cat(self.model(list(observations), [[a] for a in actions]))
        loss = F.smooth_l1_loss(q, targets)
        optimizer = self.optimizers["q"]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.agent.parameters(), self.config.drrn.max_grad_norm)
        optimizer.step()
        return loss.item(), q.mean().item()

    def checkpoint_state(self) -> dict:
        return {"memory": self.memory}

    def load_checkpoint_state(self, state: dict) -> None:
        self.memory = state["memory"]
