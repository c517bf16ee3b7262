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
from groundrl.train.exploration import NoveltyCounts
from groundrl.train.group_advantages import GroupEpisode, group_advantages
from groundrl.train.losses import pad_logits

DECISION_FIELDS = ("inputs", "valid", "actions", "log_probs", "behaviour_log_probs")


class GroupRollout:
    """What one update's collection has gathered: every decision, each episode's steps as they are
    played, and the group episodes that have ended (every member's)."""

    def __init__(self, group_size: int, quota: int, num_envs: int):
        self.group_size, self.quota = group_size, quota  # quota: the decisions a group plays per update, at least
        self.groups = [range(start, start + group_size) for start in range(0, num_envs, group_size)]  # local slots
        self.decisions: dict[str, list] = {name: [] for name in DECISION_FIELDS}
        # per slot: (index in decisions, reward, discount, state) of each step of its episode under way
        self.under_way: dict[int, list[tuple[int, float, float, str]]] = {i: [] for i in range(num_envs)}
        self.ended: list[list[tuple[int, list]]] = [[] for _ in self.groups]  # per group: (slot, its steps)
        self.played = [0] * len(self.groups)
        self.completed: list[list[list]] = []  # per finished group episode, per member: its steps
        self.in_episode: dict[int, Counter] = {i: Counter() for i in range(num_envs)}  # each episode's own visits
        self.reached, self.bonuses = [], []  # the observations reached, and their novelty bonuses

    def novelty_bonus(self, slot: int, reached, novelty: NoveltyCounts, beta: float) -> float:
        """The novelty bonus of reaching ``reached`` from ``slot``'s episode (the run's visits before
        this update and the episode's own)."""
        self.reached.append(reached)
        self.bonuses.append(novelty.bonus_within(self.in_episode[slot], reached, beta))
        return self.bonuses[-1]

    def add(self, slot: int, decision: tuple, reward: float, discount: float, state: str) -> None:
        """One decision of ``slot``'s episode: its ``DECISION_FIELDS`` and what its advantage needs."""
        index = len(self.decisions["inputs"])
        for name, value in zip(DECISION_FIELDS, decision):
            self.decisions[name].append(value)
        self.under_way[slot].append((index, reward, discount, state))

    def end(self, slot: int, length: int) -> bool:
        """``slot``'s episode ended after ``length`` decisions; whether its group starts another (all
        its members have ended theirs, and it has played less than its quota)."""
        self.in_episode[slot] = Counter()
        g = slot // self.group_size
        self.ended[g].append((slot, self.under_way[slot]))
        self.under_way[slot] = []
        self.played[g] += length
        if len(self.ended[g]) < self.group_size:
            return False
        self.completed.append([steps for _, steps in sorted(self.ended[g])])
        self.ended[g] = []
        return self.played[g] < self.quota


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
        rollout = GroupRollout(self.config.rollout.group_size, self.config.rollout.group_size *
                               self.config.rollout.num_steps, len(self.context.env_indices))
        for members in rollout.groups:  # every group starts its next episode (after a resume's restart: goes on)
            if not any(collector.slots[i].active for i in members):
                for i in members:
                    collector.start(i)
        episodes, behaviour_kl, kl_reference = EpisodeStats(), [], float("nan")
        while collector.active:
            kl_reference = self.decide(collector, rollout, behaviour_kl, kl_reference, episodes)
        buffer, logged = self.advantages(rollout.decisions, rollout.completed)
        if self.counts_novelty:  # every process's visits, in any order: the counts are sums
            every_bonus = []
            for their_reached, their_bonuses in distributed.gather_objects((rollout.reached, rollout.bonuses),
                                                                           everywhere=True):
                self.novelty.add(their_reached)
                every_bonus += their_bonuses
            logged.update(self.novelty_logged(every_bonus))
        logged.update(self.exploration_logged(behaviour_kl))
        return Experience(buffer, kl_reference, logged), episodes

    def decide(self, collector: Collector, rollout: GroupRollout, behaviour_kl: list, kl_reference: float,
               episodes: EpisodeStats) -> float:
        """One decision in every active environment, recorded in ``rollout``; a group whose members
        have all ended their episode starts its next one while under its quota. The KL to the untrained
        policy (measured on the update's first states)."""
        active, envs = collector.active, self.context.env_indices
        inputs, valid = collector.inputs(self.agent.observe), collector.valid_actions()
        states = [self.state_key(collector.slots[i].obs, collector.slots[i].info) for i in active]
        with torch.no_grad():
            logits = pad_logits([x.float().cpu() for x in self.agent(inputs, valid, values=False).logits])
        uniform = torch.tensor([self.uniform(collector.slots[i].seed, envs[i], collector.slots[i].length)
                                for i in active])
        behaviour, actions, log_prob, behaviour_log_prob = self.draw(logits, uniform, behaviour_kl)
        if math.isnan(kl_reference):
            kl_reference = self.kl_to_reference(inputs, valid, logits)
        result = collector.step(actions.tolist(),
                                lambda k, behaviour=behaviour, valid=valid: behaviour[k][: len(valid[k])])
        reached = reached_observations(collector, result, active) if self.counts_novelty else None
        for k, i in enumerate(active):
            reward = float(result.rewards[k])
            if reached is not None:
                reward += rollout.novelty_bonus(i, reached[k], self.novelty, self.schedules.novelty)
            rollout.add(i, (inputs[k], valid[k], actions[k], log_prob[k], behaviour_log_prob[k]),
                        reward * self.config.rollout.reward_scale, self.ppo.gamma ** float(result.macro_steps[k]),
                        states[k])
        for end in result.ended:
            self.episode_ended(end, episodes)
            if rollout.end(end.slot, end.length):
                for i in rollout.groups[end.slot // rollout.group_size]:
                    collector.start(i)
        return kl_reference

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
