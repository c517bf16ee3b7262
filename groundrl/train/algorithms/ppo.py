"""PPO for an actor-critic agent (an LLM, or the symbolic baseline): GLAM and TWOSOME are presets.

One update:

1. collect: ``num_envs`` environments x ``num_steps`` decisions sampled from the policy (or from the
   behaviour policy the ``explore`` settings make of it), with the values, log-probabilities,
   rewards (+ the novelty bonus, x ``reward_scale``) and primitive steps of each decision; an
   episode cut by the time limit is bootstrapped with the value of its last observation;
2. advantages by GAE, with the semi-MDP discount ``gamma ** k`` where the environment reports
   ``info["macro_steps"]``;
3. ``update_epochs`` passes over the shuffled decisions: either a value phase then a policy phase
   (TWOSOME: two optimizers, the policy phase stops at ``target_kl``), or one joint loss (GLAM)
   ``pg_loss + vf_coef * v_loss - ent_coef * entropy``; minibatches accumulate the gradients of
   micro-batches; gradient norms are clipped; learning rates decay linearly to 0. Actions drawn from
   a behaviour policy weigh ``pi_old / mu`` in the policy loss (decoupled PPO).
"""

from __future__ import annotations

import warnings

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
from groundrl.train.buffer import RolloutBuffer, accumulate_gradients
from groundrl.train.collector import Collector, EpisodeStats
from groundrl.train.config import Phases
from groundrl.train.losses import clipped_value_loss, explained_variance, pad_logits


class PPO(PolicyOptimization):
    """Proximal policy optimization of an :class:`~groundrl.agents.protocols.ActorCritic`: the policy
    core (:class:`~groundrl.train.algorithms.policy.PolicyOptimization`) with a critic and GAE."""

    critic = True
    warned_dead_critic = False

    def __init__(self, agent: ActorCritic, context: AlgorithmContext):
        ppo = context.config.ppo
        self.separate = ppo.phases == Phases.separate
        actor = policy_group(agent, ppo)
        critic = {"params": agent.critic_parameters(), "lr": ppo.value_lr, "name": "value"}
        # separate phases leave the critic alone in the policy phase, and the actor in the value phase
        super().__init__(agent, context,
                         {"policy": [actor], "value": [critic]} if self.separate else {"joint": [actor, critic]},
                         find_unused_parameters=self.separate)

    # -- collect ----------------------------------------------------------------------------

    def play(self, collector: Collector) -> tuple[Experience, EpisodeStats]:
        """``rollout.num_steps`` decisions in every environment, then GAE."""
        rollout, agent, context = self.config.rollout, self.agent, self.context
        buffer, episodes, kl_reference = RolloutBuffer(), EpisodeStats(), float("nan")
        reached, behaviour_kl = [], []  # per step: the observations reached; KL(mu || pi) per decision
        for step in range(rollout.num_steps):
            inputs = collector.inputs(agent.observe)
            valid = collector.valid_actions()
            with torch.no_grad():
                out = agent(inputs, valid)
            logits = pad_logits([x.float().cpu() for x in out.logits])
            uniform = torch.rand(rollout.num_envs, generator=context.action_generator)
            behaviour, actions, log_prob, behaviour_log_prob = self.draw(
                logits, uniform[context.env_indices.start:context.env_indices.stop], behaviour_kl)
            if step == 0:  # the KL to the untrained policy, measured on the first step's states
                kl_reference = self.kl_to_reference(inputs, valid, logits)
            stepped = collector.active
            result = collector.step(actions.tolist(),
                                    lambda k, behaviour=behaviour, valid=valid: behaviour[k][: len(valid[k])])
            reward = torch.as_tensor(result.rewards, dtype=torch.float32) * rollout.reward_scale
            steps = torch.as_tensor(result.macro_steps, dtype=torch.float32)
            if self.counts_novelty:
                reached.append(reached_observations(collector, result, stepped))
            for end in result.ended:
                self.episode_ended(end, episodes)
                if not end.terminated:  # cut by the time limit: its future is not worth 0
                    last = self.state_values([agent.observe(end.final_obs, end.final_info)],
                                             [[str(a) for a in end.final_info["valid_actions"]]])
                    reward[end.slot] += self.ppo.gamma ** float(steps[end.slot]) * float(last.cpu()[0])
            buffer.add(inputs, valid, actions, log_prob, out.values.float().cpu(), reward,
                       torch.as_tensor(result.terminated | result.truncated, dtype=torch.float32), steps,
                       behaviour_log_probs=behaviour_log_prob)
        logged = self.exploration_logged(behaviour_kl)
        if self.counts_novelty:
            logged.update(self.add_novelty_bonus(buffer, reached))
        inputs = collector.inputs(agent.observe)
        next_value = self.state_values(inputs, collector.valid_actions()).float().cpu()
        buffer.compute_advantages(next_value, self.ppo.gamma, self.ppo.gae_lambda)
        return Experience(buffer, kl_reference, logged), episodes

    def add_novelty_bonus(self, buffer: RolloutBuffer, reached: list[list]) -> dict[str, float]:
        """Add each decision's novelty bonus to its reward. The observations are counted over every
        process's environments, step by step in the environments' order: the counts, and so the
        bonuses, do not depend on how the environments are shared out."""
        beta = self.schedules.novelty
        per_rank = distributed.gather_objects(reached, everywhere=True)  # [rank][step][its environments]
        every_bonus = []
        for step in range(len(reached)):
            everyone = [self.novelty.visit(part[step], beta) for part in per_rank]
            every_bonus += [b for part in everyone for b in part]
            mine = torch.tensor(everyone[self.context.world.rank], dtype=torch.float32)
            buffer.rewards[step] = buffer.rewards[step] + mine * self.config.rollout.reward_scale
        return self.novelty_logged(every_bonus)

    def state_values(self, inputs, valid_actions) -> torch.Tensor:
        with torch.no_grad():
            return self.agent(inputs, valid_actions, policy=False).values

    # -- update -----------------------------------------------------------------------------

    def epoch(self, buffer: RolloutBuffer, stats: Statistics) -> None:
        """A value phase then a policy phase (``ppo.phases=separate``), or joint steps."""
        per_rank = self.context.world.size
        if not self.separate:
            for indices in buffer.minibatches(self.ppo.minibatch_size // per_rank, self.context.generator):
                self.joint_step(buffer, indices, stats)
            return
        for indices in buffer.minibatches(self.ppo.value_minibatch_size // per_rank, self.context.generator):
            self.value_step(buffer, indices, stats)
        self.policy_phase(buffer, ((indices, None) for indices in
                                   buffer.minibatches(self.ppo.minibatch_size // per_rank, self.context.generator)),
                          stats)

    def rollout_statistics(self, buffer: RolloutBuffer) -> dict[str, float]:
        """The critic's statistics, over the whole rollout of every process's environments."""
        values, returns, advantages = (distributed.concat_over_ranks(x, dim=1)
                                       for x in (buffer.stacked("values"), buffer.returns, buffer.advantages))
        if values.numel() > 1 and not values.any() and not self.warned_dead_critic and self.context.world.is_main:
            # A ReLU critic without biases (TWOSOME's) that fires on no state outputs exactly 0 and gets
            # no gradient again: PPO goes on without a baseline, silently (seen in a Tomato-Lettuce Salad run).
            self.warned_dead_critic = True
            warnings.warn("the critic gave exactly 0.0 for every state of this rollout: none of its ReLU units fires "
                          "on any state, so it gets no gradient again and PPO has no baseline; lower ppo.value_lr or "
                          "restart from an earlier checkpoint", stacklevel=2)
        return {"explained_variance": explained_variance(values.flatten(), returns.flatten()),
                "value_mean": float(values.mean()),
                "advantage_std": float(advantages.std()) if advantages.numel() > 1 else 0.0}

    def value_loss(self, buffer: RolloutBuffer, micro: torch.Tensor, new_values: torch.Tensor) -> torch.Tensor:
        return clipped_value_loss(new_values.float().cpu(), buffer.flat("values")[micro], buffer.flat("returns")[micro],
                                  self.ppo.value_clip_coef)

    def value_step(self, buffer: RolloutBuffer, indices: torch.Tensor, stats: Statistics) -> None:
        optimizer = self.optimizers["value"]
        optimizer.zero_grad(set_to_none=True)

        def loss_of(micro):
            inputs, valid = [buffer.inputs[i] for i in micro], [buffer.valid_actions[i] for i in micro]
            v_loss = self.value_loss(buffer, micro, self.model(inputs, valid, policy=False).values)
            stats.add(len(micro), value_loss=v_loss.item())
            return self.ppo.vf_coef * v_loss

        accumulate_gradients(self.micro_batches(buffer, indices), loss_of, distributed.no_sync(self.model))
        torch.nn.utils.clip_grad_norm_(self.agent.critic_parameters(), self.ppo.max_grad_norm)
        optimizer.step()
        for p in self.agent.actor_parameters():  # a shared trunk got value gradients the policy phase must not see
            p.grad = None

    def joint_step(self, buffer: RolloutBuffer, indices: torch.Tensor, stats: Statistics) -> None:
        """One step of GLAM's joint loss ``pg_loss - ent_coef * entropy + vf_coef * v_loss``."""
        optimizer = self.optimizers["joint"]
        optimizer.zero_grad(set_to_none=True)
        advantages = self.minibatch_advantages(buffer, indices)

        def loss_of(micro):
            loss, pg_loss, entropy, pg_stats, new_values = self.policy_terms(buffer, micro, advantages[micro],
                                                                             values=True)
            v_loss = self.value_loss(buffer, micro, new_values)
            stats.add(len(micro), policy_loss=pg_loss.item(), value_loss=v_loss.item(), entropy=entropy.mean().item(),
                      approx_kl=pg_stats["approx_kl"].item(), clip_fraction=pg_stats["clip_fraction"].item())
            return loss + self.ppo.vf_coef * v_loss

        accumulate_gradients(self.micro_batches(buffer, indices), loss_of, distributed.no_sync(self.model))
        torch.nn.utils.clip_grad_norm_(self.agent.actor_parameters() + self.agent.critic_parameters(),
                                       self.ppo.max_grad_norm)
        optimizer.step()
