"""The critic-free group methods, GRPO and GiGPO, as trainers of the same agents as PPO.

One update:

1. collect: the environments come in groups of ``rollout.group_size``; a group's members start
   each episode together, reset with one seed (the group's next), and play it independently,
   sampling the policy (or the behaviour policy the ``explore`` settings make of it). A group
   starts its next episode once all its members have ended theirs, while it has played fewer than
   ``group_size x num_steps`` decisions in this update; the update ends when every group has
   stopped, so it holds whole episodes only;
2. advantages per group (:mod:`groundrl.train.group_advantages`): GRPO's episode-level one, or GiGPO's
   episode-level + ``omega`` x step-level one over the states the group's episodes share;
   With ``explore.novelty``, a decision's reward takes PPO's novelty bonus, counted over the run's
   visits before this update and the episode's own (the update's visits join the run's counts once
   it is over), so that no member's bonus depends on what another member of its group reached first;
3. ``update_epochs`` passes of PPO's clipped policy loss (``ppo`` section: minibatches, learning
   rate, ``clip_coef``, ``ent_coef``, ``kl_coef``, ``target_kl``); no value loss, no critic.

Each decision's random number comes from its run seed, episode seed, environment and step alone,
so an episode is the same however the environments are shared over processes, whose updates
then take different numbers of steps.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import torch

from groundrl.agents.protocols import ActorCritic
from groundrl.train import distributed
from groundrl.train.algorithms.base import AlgorithmContext
from groundrl.train.algorithms.policy import (
    Experience,
    PolicyOptimization,
    Statistics,
    policy_group,
    reached_observations,
)
from groundrl.train.buffer import RolloutBuffer
from groundrl.train.collector import Collector, EpisodeStats
from groundrl.train.config import AlgorithmKind
from groundrl.train.group_advantages import GroupEpisode, group_advantages
from groundrl.train.losses import pad_logits


class GroupPolicyOptimization(PolicyOptimization):
    """GRPO (``algorithm=grpo``) or GiGPO (``algorithm=gigpo``) of an
    :class:`~groundrl.agents.protocols.ActorCritic` whose critic goes unused: the policy core
    (:class:`~groundrl.train.algorithms.policy.PolicyOptimization`) with group advantages."""

    def __init__(self, agent: ActorCritic, context: AlgorithmContext):
        # the value head takes no part: DDP must not wait for its gradients
        super().__init__(agent, context, {"policy": [policy_group(agent, context.config.ppo)]},
                         find_unused_parameters=True)
        self.group = self.config.group
        self.omega = self.group.omega if self.config.algorithm == AlgorithmKind.gigpo else None
        # self.novelty: the run's visits before this update (NoveltyCounts.bonus_within)

    # -- collect ----------------------------------------------------------------------------

    def play(self, collector: Collector) -> tuple[Experience, EpisodeStats]:
        """Whole episodes of every group, until each has played its share of the update."""
        config, agent = self.config, self.agent
        size, envs = config.rollout.group_size, self.context.env_indices
        quota = size * config.rollout.num_steps
        groups = [range(start, start + size) for start in range(0, len(envs), size)]  # local slots
        for members in groups:  # every group starts its next episode (after a resume's restart: goes on)
            if not any(collector.slots[i].active for i in members):
                for i in members:
                    collector.start(i)
        decisions = {name: [] for name in ("inputs", "valid", "actions", "log_probs", "behaviour_log_probs")}
        under_way: dict[int, list[tuple[int, float, float, str]]] = {i: [] for i in range(len(envs))}
        ended_in_group: list[list[tuple[int, list]]] = [[] for _ in groups]  # (slot, its decisions) per group
        completed: list[list[list]] = []  # per finished group episode, per member: (index, reward, discount, state)
        played, episodes, behaviour_kl, kl_reference = [0] * len(groups), EpisodeStats(), [], float("nan")
        beta = self.schedules.novelty
        in_episode: dict[int, Counter] = {i: Counter() for i in range(len(envs))}  # each episode's own visits
        reached, bonuses = [], []  # the update's observations reached, and their bonuses
        while collector.active:
            active = collector.active
            inputs, valid = collector.inputs(agent.observe), collector.valid_actions()
            states = [self.state_key(collector.slots[i].obs, collector.slots[i].info) for i in active]
            with torch.no_grad():
                logits = pad_logits([x.float().cpu() for x in agent(inputs, valid, values=False).logits])
            uniform = torch.tensor([self.uniform(collector.slots[i].seed, envs[i], collector.slots[i].length)
                                    for i in active])
            behaviour, actions, log_prob, behaviour_log_prob = self.draw(logits, uniform, behaviour_kl)
            if math.isnan(kl_reference):  # the KL to the untrained policy, on the first step's states
                kl_reference = self.kl_to_reference(inputs, valid, logits)
            result = collector.step(actions.tolist(),
                                    lambda k, behaviour=behaviour, valid=valid: behaviour[k][: len(valid[k])])
            if self.counts_novelty:
                reached_now = reached_observations(collector, result, active)
            for k, i in enumerate(active):
                index = len(decisions["inputs"])
                for name, value in (("inputs", inputs[k]), ("valid", valid[k]), ("actions", actions[k]),
                                    ("log_probs", log_prob[k]), ("behaviour_log_probs", behaviour_log_prob[k])):
                    decisions[name].append(value)
                reward = float(result.rewards[k])
                if self.counts_novelty:
                    reached.append(reached_now[k])
                    bonuses.append(self.novelty.bonus_within(in_episode[i], reached_now[k], beta))
                    reward += bonuses[-1]
                under_way[i].append((index, reward * config.rollout.reward_scale,
                                     self.ppo.gamma ** float(result.macro_steps[k]), states[k]))
            for end in result.ended:
                in_episode[end.slot] = Counter()
                episodes.add(end)
                g = end.slot // size
                ended_in_group[g].append((end.slot, under_way[end.slot]))
                under_way[end.slot] = []
                played[g] += end.length
                if len(ended_in_group[g]) == size:  # the whole group has ended its episode
                    completed.append([steps for _, steps in sorted(ended_in_group[g])])
                    ended_in_group[g] = []
                    if played[g] < quota:
                        for i in groups[g]:
                            collector.start(i)
        buffer, logged = self.advantages(decisions, completed)
        if self.counts_novelty:  # every process's visits, in any order: the counts are sums
            every_bonus = []
            for their_reached, their_bonuses in distributed.gather_objects((reached, bonuses), everywhere=True):
                self.novelty.add(their_reached)
                every_bonus += their_bonuses
            logged.update(self.novelty_logged(every_bonus))
        logged.update(self.exploration_logged(behaviour_kl))
        return Experience(buffer, kl_reference, logged), episodes

    def state_key(self, observation, info: dict) -> str:
        """What makes two decisions' states the same (GiGPO's anchor states)."""
        key = self.group.state_key
        return str(info.get(key) if key else info.get("observation", observation))

    def uniform(self, episode_seed: int, env_index: int, step: int) -> float:
        """The random number that draws an action: a function of the run seed, the episode's seed,
        the environment and the step, and of nothing else."""
        return float(np.random.default_rng([self.config.seed, episode_seed, env_index, step]).random())

    def advantages(self, decisions: dict[str, list], completed: list[list[list]]) -> tuple[RolloutBuffer, dict]:
        """The buffer of the update's decisions with their group advantages, and the groups' statistics."""
        advantages = torch.zeros(len(decisions["inputs"]))
        return_std, equal, sizes = [], [], []
        for group in completed:
            episodes = [GroupEpisode([r for _, r, _, _ in steps], [d for _, _, d, _ in steps],
                                     [s for _, _, _, s in steps]) for steps in group]
            per_decision, step_group_sizes = group_advantages(episodes, self.omega, self.group.std_scaling,
                                                              self.group.eps)
            for steps, values in zip(group, per_decision):
                for (index, *_), value in zip(steps, values):
                    advantages[index] = value
            returns = torch.tensor([e.total_return for e in episodes])
            return_std.append(float(returns.std()))
            equal.append(float(bool((returns == returns[0]).all())))
            sizes += step_group_sizes
        buffer = RolloutBuffer(inputs=decisions["inputs"], valid_actions=decisions["valid"],
                               actions=torch.stack(decisions["actions"]), log_probs=torch.stack(decisions["log_probs"]),
                               behaviour_log_probs=torch.stack(decisions["behaviour_log_probs"]), advantages=advantages)
        logged = {"group_return_std": float(np.mean(return_std)), "equal_return_groups": float(np.mean(equal)),
                  "advantage_std": float(advantages.std()) if len(advantages) > 1 else 0.0}
        if self.omega is not None:
            logged.update({"step_group_size": float(np.mean(sizes)),
                           "shared_state_decisions": float(np.mean([s > 1 for s in sizes]))})
        return buffer, logged

    # -- update -----------------------------------------------------------------------------

    def epoch(self, buffer: RolloutBuffer, stats: Statistics) -> None:
        self.policy_phase(buffer, self.minibatches(len(buffer)), stats)

    def minibatches(self, count: int) -> list[tuple[torch.Tensor, float]]:
        """This process's ``count`` decisions, shuffled, in as many minibatches as every process
        takes (of about ``ppo.minibatch_size`` decisions over all of them; each process holds a
        different number of decisions), each with the minibatch's size per process."""
        world = self.context.world
        counts = distributed.gather_objects(count, everywhere=True)
        per_process = max(1, self.ppo.minibatch_size // world.size)
        num_minibatches = max(1, min(max(math.ceil(n / per_process) for n in counts), min(counts)))
        chunks = torch.randperm(count, generator=self.context.generator).tensor_split(num_minibatches)
        sizes = [len(chunk) for chunk in chunks]
        totals = [sum(column) for column in zip(*distributed.gather_objects(sizes, everywhere=True))]
        return [(chunk, total / world.size) for chunk, total in zip(chunks, totals)]
