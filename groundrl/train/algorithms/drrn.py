"""Q-learning for the DRRN baseline (GLAM's), from a replay memory.

One update:

1. collect: ``num_envs x num_steps`` decisions, actions sampled from ``softmax(Q / temperature)``
   (Boltzmann exploration), each transition ``(s, a, r, s', A(s'), terminated)`` into the memory;
2. ``decisions * replay_ratio / batch_size`` minibatches of ``batch_size`` transitions drawn
   uniformly from the memory:
   ``y = r + gamma * max_a' Q(s', a')`` (``y = r`` when ``s`` ended the episode; a time limit is
   not an end, so it bootstraps), Huber loss between ``Q(s, a)`` and ``y``, gradient norm clipped.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from groundrl.agents.protocols import QAgent
from groundrl.train import distributed
from groundrl.train.algorithms.base import AlgorithmContext
from groundrl.train.collector import Collector, EpisodeStats


class ReplayMemory:
    """The most recent ``capacity`` transitions, sampled uniformly; plain data (tuples of strings,
    numbers and lists), so that a checkpoint holds it without pickle."""

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

    def state_dict(self) -> dict:
        return {"transitions": [list(t) for t in self.transitions], "position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.transitions = [tuple(t) for t in state["transitions"]]
        self.position = state["position"]


class DRRN:
    """Trains a :class:`~groundrl.agents.protocols.QAgent` (``agent.kind=drrn``; settings in ``drrn``)."""

    def __init__(self, agent: QAgent, context: AlgorithmContext):
        self.agent, self.context = agent, context
        self.config, self.drrn = context.config, context.config.drrn
        self.model = distributed.data_parallel(agent, context.world, find_unused_parameters=False)
        self.optimizers = {"q": torch.optim.Adam(agent.parameters(), lr=self.drrn.lr)}
        self.memory = ReplayMemory(max(1, self.drrn.replay_size // context.world.size))  # this rank's share

    def collect(self, collector: Collector) -> tuple[None, EpisodeStats]:
        agent, episodes = self.agent, EpisodeStats()
        inputs = collector.inputs(agent.observe)
        valid = collector.valid_actions()
        for _ in range(self.config.rollout.num_steps):
            choices, probs = agent.act(inputs, valid, generator=self.context.generator)
            result = collector.step(choices, lambda k, probs=probs: probs[k])
            next_inputs = collector.inputs(agent.observe)
            next_valid = collector.valid_actions()
            ended = {end.slot: end for end in result.ended}
            for i in range(len(inputs)):
                next_input, next_actions = next_inputs[i], next_valid[i]
                if i in ended:  # the environment reset in this step: s' is the episode's last state
                    end = ended[i]
                    next_input = agent.observe(end.final_obs, end.final_info)
                    next_actions = [str(a) for a in end.final_info["valid_actions"]]
                    episodes.add(end)
                self.memory.push((inputs[i], valid[i][choices[i]],
                                  float(result.rewards[i]) * self.config.rollout.reward_scale,
                                  next_input, next_actions, bool(result.terminated[i])))
            inputs, valid = next_inputs, next_valid
        return None, episodes

    def update(self, experience: None) -> dict[str, float]:
        decisions, world = self.config.rollout.decisions_per_update, self.context.world
        losses, q_means = [], []
        # each rank learns from its own memory; learning_starts and batch_size are totals over the ranks
        if len(self.memory) * world.size >= self.drrn.learning_starts:
            for _ in range(max(1, round(decisions * self.drrn.replay_ratio / self.drrn.batch_size))):
                loss, q_mean = self.td_step(self.memory.sample(self.drrn.batch_size // world.size,
                                                               self.context.generator))
                losses.append(loss)
                q_means.append(q_mean)
        return {
            **distributed.mean_over_ranks({
                "q_loss": sum(losses) / len(losses) if losses else float("nan"),
                "q_mean": sum(q_means) / len(q_means) if q_means else float("nan")}),
            "replay_size": len(self.memory) * world.size,
        }

    def td_step(self, transitions: list[tuple]) -> tuple[float, float]:
        observations, actions, rewards, next_observations, next_actions, terminated = zip(*transitions)
        with torch.no_grad():
            next_q = torch.stack([q.max() for q in self.agent.q_values(list(next_observations), list(next_actions))])
        not_done = 1.0 - torch.tensor(terminated, dtype=torch.float32, device=next_q.device)
        targets = torch.tensor(rewards, dtype=torch.float32, device=next_q.device) + self.drrn.gamma * not_done * next_q
        q = torch.cat(self.model(list(observations), [[a] for a in actions]))
        loss = F.smooth_l1_loss(q, targets)
        optimizer = self.optimizers["q"]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.agent.parameters(), self.drrn.max_grad_norm)
        optimizer.step()
        return loss.item(), q.mean().item()

    def state_dict(self) -> dict:
        return {"optimizers": {name: opt.state_dict() for name, opt in self.optimizers.items()},
                "memory": self.memory.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        for name, optimizer in self.optimizers.items():
            optimizer.load_state_dict(state["optimizers"][name])
        self.memory.load_state_dict(state["memory"])
