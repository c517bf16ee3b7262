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

import math
from contextlib import nullcontext

import numpy as np
import torch

from groundrl.agents.protocols import ActorCritic
from groundrl.llm.cache import memoized
from groundrl.train import distributed
from groundrl.train.algorithms.base import AlgorithmContext
from groundrl.train.buffer import RolloutBuffer, accumulate_gradients
from groundrl.train.collector import Collector, EpisodeStats
from groundrl.train.config import Phases
from groundrl.train.exploration import NoveltyCounts, behaviour_probabilities, linear_schedule
from groundrl.train.ppo import (
    clipped_policy_loss,
    clipped_value_loss,
    explained_variance,
    importance_weights,
    log_probs_and_entropy,
    normalize,
    pad_logits,
    sample_actions,
)


class PPO:
    """Proximal policy optimization of an :class:`~groundrl.agents.protocols.ActorCritic`."""

    def __init__(self, agent: ActorCritic, context: AlgorithmContext):
        self.agent, self.context = agent, context
        self.config, self.ppo = context.config, context.config.ppo
        self.explore = self.config.explore
        self.novelty = NoveltyCounts()
        self.updates = 0  # done
        self.ent_coef = self.ppo.ent_coef  # the update's (ppo.ent_coef_end anneals it)
        separate = self.ppo.phases == Phases.separate
        # separate phases leave the critic alone in the policy phase, and the actor in the value phase
        self.model = distributed.data_parallel(agent, context.world, find_unused_parameters=separate)
        actor = {"params": agent.actor_parameters(), "lr": self.ppo.policy_lr, "name": "policy"}
        critic = {"params": agent.critic_parameters(), "lr": self.ppo.value_lr, "name": "value"}
        self.optimizers = self.adam({"policy": [actor], "value": [critic]} if separate else {"joint": [actor, critic]})

    def adam(self, groups: dict[str, list[dict]]) -> dict[str, torch.optim.Optimizer]:
        """An Adam optimizer per entry of parameter groups, each with its learning-rate schedule
        (``ppo.lr_decay``: linearly to 0 over the training budget) in ``self.schedulers``."""
        optimizers = {name: torch.optim.Adam(g, eps=self.ppo.adam_eps) for name, g in groups.items()}
        decay = (lambda _: max(0.0, 1.0 - self.progress)) if self.ppo.lr_decay else (lambda _: 1.0)
        self.schedulers = {name: torch.optim.lr_scheduler.LambdaLR(opt, decay) for name, opt in optimizers.items()}
        return optimizers

    @property
    def progress(self) -> float:
        """The share of the training budget done: the schedules' clock."""
        return self.updates / self.config.num_updates

    def schedule(self, start: float, end: float | None) -> float:
        """An ``explore``-annealed setting's value for the update under way."""
        return linear_schedule(start, end, self.explore.anneal, self.progress)

    @property
    def counts_novelty(self) -> bool:
        return self.explore.novelty > 0 or bool(self.explore.novelty_end)

    # -- collect ----------------------------------------------------------------------------

    def collect(self, collector: Collector) -> tuple[tuple[RolloutBuffer, float], EpisodeStats]:
        # the weights stay fixed while collecting: an input seen earlier in the rollout is not computed again
        with memoized(self.agent) if self.ppo.deduplicate else nullcontext():
            return self._collect(collector)

    def _collect(self, collector: Collector) -> tuple[tuple[RolloutBuffer, float], EpisodeStats]:
        rollout, agent, context, explore = self.config.rollout, self.agent, self.context, self.explore
        buffer, episodes, kl_reference = RolloutBuffer(), EpisodeStats(), float("nan")
        temperature = self.schedule(explore.temperature, explore.temperature_end)
        epsilon = self.schedule(explore.epsilon, explore.epsilon_end)
        reached, behaviour_kl = [], []  # per step: the observations reached; KL(mu || pi) per decision
        for step in range(rollout.num_steps):
            inputs = collector.inputs(agent.observe)
            valid = collector.valid_actions()
            with torch.no_grad():
                out = agent(inputs, valid)
            logits = pad_logits([x.float().cpu() for x in out.logits])
            uniform = torch.rand(rollout.num_envs, generator=context.action_generator)
            behaviour, actions, log_prob, behaviour_log_prob = self.draw(
                logits, uniform[context.env_indices.start:context.env_indices.stop], temperature, epsilon, behaviour_kl)
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
                episodes.add(end)
                if not end.terminated:  # cut by the time limit: its future is not worth 0
                    last = self.state_values([agent.observe(end.final_obs, end.final_info)],
                                             [[str(a) for a in end.final_info["valid_actions"]]])
                    reward[end.slot] += self.ppo.gamma ** float(steps[end.slot]) * float(last.cpu()[0])
            buffer.add(inputs, valid, actions, log_prob, out.values.float().cpu(), reward,
                       torch.as_tensor(result.terminated | result.truncated, dtype=torch.float32), steps,
                       behaviour_log_probs=behaviour_log_prob)
        explored = {}
        if explore.active:
            explored = {"epsilon": epsilon, "temperature": temperature,
                        "behaviour_kl": float(torch.cat(behaviour_kl).mean())}
        if self.counts_novelty:
            explored.update(self.add_novelty_bonus(buffer, reached))
        inputs = collector.inputs(agent.observe)
        next_value = self.state_values(inputs, collector.valid_actions()).float().cpu()
        buffer.compute_advantages(next_value, self.ppo.gamma, self.ppo.gae_lambda)
        return (buffer, kl_reference, explored), episodes

    def draw(self, logits: torch.Tensor, uniform: torch.Tensor, temperature: float, epsilon: float,
             behaviour_kl: list) -> tuple[torch.Tensor, ...]:
        """The actions drawn with ``uniform`` (one number per decision) from the behaviour policy
        the ``explore`` settings make of the policy's ``logits``: that policy, the actions, and the
        log-probabilities of the actions under the policy and under the behaviour; with exploration,
        each decision's ``KL(mu || pi)`` is appended to ``behaviour_kl``."""
        behaviour = behaviour_probabilities(logits, temperature, epsilon)
        actions = sample_actions(behaviour, uniform)
        log_prob, _ = log_probs_and_entropy(logits, actions)
        # the policy itself acted: its own log-probabilities, so that the weights are exactly 1
        behaviour_log_prob = log_prob if temperature == 1 and epsilon == 0 else \
            behaviour.gather(-1, actions[:, None]).squeeze(-1).log()
        if self.explore.active:
            behaviour_kl.append(_kl(behaviour, torch.log_softmax(logits, -1)))
        return behaviour, actions, log_prob, behaviour_log_prob

    def add_novelty_bonus(self, buffer: RolloutBuffer, reached: list[list]) -> dict[str, float]:
        """Add each decision's novelty bonus to its reward. The observations are counted over every
        process's environments, step by step in the environments' order: the counts, and so the
        bonuses, do not depend on how the environments are shared out."""
        beta = self.schedule(self.explore.novelty, self.explore.novelty_end)
        per_rank = distributed.gather_objects(reached, everywhere=True)  # [rank][step][its environments]
        every_bonus = []
        for step in range(len(reached)):
            everyone = [self.novelty.visit(part[step], beta) for part in per_rank]
            every_bonus += [b for part in everyone for b in part]
            mine = torch.tensor(everyone[self.context.world.rank], dtype=torch.float32)
            buffer.rewards[step] = buffer.rewards[step] + mine * self.config.rollout.reward_scale
        return self.novelty_logged(beta, every_bonus)

    def novelty_logged(self, beta: float, every_bonus: list[float]) -> dict[str, float]:
        """What an update logs of the novelty bonus (every process's bonuses)."""
        return {"novelty_beta": beta, "novelty_bonus": float(np.mean(every_bonus)) if every_bonus else 0.0,
                "novelty_states": float(len(self.novelty))}

    def state_values(self, inputs, valid_actions) -> torch.Tensor:
        with torch.no_grad():
            return self.agent(inputs, valid_actions, policy=False).values

    # -- update -----------------------------------------------------------------------------

    def update(self, experience: tuple[RolloutBuffer, float, dict]) -> dict[str, float]:
        buffer, kl_reference, explored = experience
        stats: dict[str, list[float]] = {}
        self.ent_coef = self.schedule(self.ppo.ent_coef, self.ppo.ent_coef_end)
        per_rank = self.context.world.size
        for _ in range(self.ppo.update_epochs):
            if self.ppo.phases == Phases.joint:
                for indices in buffer.minibatches(self.ppo.minibatch_size // per_rank, self.context.generator):
                    self.joint_step(buffer, indices, stats)
                continue
            for indices in buffer.minibatches(self.ppo.value_minibatch_size // per_rank, self.context.generator):
                self.value_step(buffer, indices, stats)
            stopped = False
            for indices in buffer.minibatches(self.ppo.minibatch_size // per_rank, self.context.generator):
                approx_kl = distributed.mean_over_ranks({"kl": self.policy_step(buffer, indices, stats)})["kl"]
                if self.ppo.target_kl is not None and approx_kl > self.ppo.target_kl:  # every rank stops together
                    stopped = True
                    break
            _add(stats, 1, early_stops=float(stopped))
        self.updates += 1
        for scheduler in self.schedulers.values():  # to the learning rate of the next update
            scheduler.step()
        # the logged statistics are the whole rollout's, over every rank's environments
        values, returns, advantages = (distributed.concat_over_ranks(x, dim=1)
                                       for x in (buffer.stacked("values"), buffer.returns, buffer.advantages))
        return {
            **self.update_statistics(buffer, stats, {"kl_reference": kl_reference, **explored}),
            "explained_variance": explained_variance(values.flatten(), returns.flatten()),
            "value_mean": float(values.mean()),
            "advantage_std": float(advantages.std()) if advantages.numel() > 1 else 0.0,
            **self.learning_rates(),
        }

    def update_statistics(self, buffer: RolloutBuffer, stats: dict, logged: dict) -> dict[str, float]:
        """The update's losses (a mean over decisions: micro-batches that gather equal decisions
        differ in size), exploration statistics and ``logged``, averaged over the processes."""
        losses = {name: float(np.average([v for v, _ in pairs], weights=[w for _, w in pairs]))
                  for name, pairs in stats.items()}
        if self.explore.active:
            logged["importance_weight"] = float(self.importance_weights(buffer, slice(None)).mean())
        if self.ppo.ent_coef_end is not None:
            logged["ent_coef"] = self.ent_coef
        return distributed.mean_over_ranks({**losses, **logged})

    def learning_rates(self) -> dict[str, float]:
        return {f"lr_{group['name']}": group["lr"] for opt in self.optimizers.values() for group in opt.param_groups}

    def micro_batches(self, buffer: RolloutBuffer, indices: torch.Tensor) -> list[torch.Tensor]:
        return buffer.micro_batches(indices, self.ppo.micro_batch_size, group=self.ppo.deduplicate)

    def policy_terms(self, buffer: RolloutBuffer, micro: torch.Tensor, advantages: torch.Tensor, values: bool):
        """The policy loss of the decisions ``micro`` (and the agent's values when asked)."""
        inputs, valid = [buffer.inputs[i] for i in micro], [buffer.valid_actions[i] for i in micro]
        out = self.model(inputs, valid, values=values)
        logits = pad_logits([x.float() for x in out.logits])
        new_log_prob, entropy = log_probs_and_entropy(logits, buffer.flat("actions")[micro].to(logits.device))
        pg_loss, pg_stats = clipped_policy_loss(new_log_prob, buffer.flat("log_probs")[micro].to(logits.device),
                                                advantages.to(logits.device), self.ppo.clip_coef,
                                                self.importance_weights(buffer, micro).to(logits.device))
        loss = pg_loss - self.ent_coef * entropy.mean()
        if self.ppo.kl_coef > 0:
            loss = loss + self.ppo.kl_coef * self.kl_to_reference(inputs, valid, logits, grad=True)
        return loss, pg_loss, entropy, pg_stats, out.values

    def importance_weights(self, buffer: RolloutBuffer, micro) -> torch.Tensor:
        """``pi_old / mu`` of the decisions ``micro`` (1 where the policy itself acted)."""
        return importance_weights(buffer.flat("log_probs")[micro], buffer.flat("behaviour_log_probs")[micro],
                                  self.explore.max_importance_weight)

    def value_loss(self, buffer: RolloutBuffer, micro: torch.Tensor, new_values: torch.Tensor) -> torch.Tensor:
        return clipped_value_loss(new_values.float().cpu(), buffer.flat("values")[micro], buffer.flat("returns")[micro],
                                  self.ppo.value_clip_coef)

    def minibatch_advantages(self, buffer: RolloutBuffer, indices: torch.Tensor) -> torch.Tensor:
        """The advantages of every decision of the buffer, those of ``indices`` normalized over them."""
        advantages = buffer.flat("advantages").clone()
        if not self.ppo.normalize_advantages:
            return advantages
        mine = advantages[indices]
        if not self.context.world.distributed:
            advantages[indices] = normalize(mine, std_floor=self.ppo.advantage_std_floor)
            return advantages
        # the whole minibatch's mean and standard deviation, from every rank's sums
        count, total, squares = distributed.sum_over_ranks(torch.stack(
            [torch.tensor(float(mine.numel())), mine.sum(), mine.pow(2).sum()]).double()).tolist()
        mean = total / count
        std = math.sqrt(max(squares - count * mean**2, 0.0) / max(count - 1, 1))
        advantages[indices] = normalize(mine, mean_std=(mean, std), std_floor=self.ppo.advantage_std_floor)
        return advantages

    def policy_step(self, buffer: RolloutBuffer, indices: torch.Tensor, stats: dict,
                    share: float | None = None) -> float:
        """One policy-phase optimizer step; its approx-KL. ``share``: the number of decisions the
        minibatch's mean loss is over, per process (default: ``indices``' own)."""
        optimizer = self.optimizers["policy"]
        optimizer.zero_grad(set_to_none=True)
        advantages, kls = self.minibatch_advantages(buffer, indices), []

        def loss_of(micro):
            loss, pg_loss, entropy, pg_stats, _ = self.policy_terms(buffer, micro, advantages[micro], values=False)
            _add(stats, len(micro), policy_loss=pg_loss.item(), entropy=entropy.mean().item(),
                 approx_kl=pg_stats["approx_kl"].item(), clip_fraction=pg_stats["clip_fraction"].item())
            kls.append(pg_stats["approx_kl"].item() * len(micro))
            return loss

        accumulate_gradients(self.micro_batches(buffer, indices), loss_of, distributed.no_sync(self.model), share)
        torch.nn.utils.clip_grad_norm_(self.agent.actor_parameters(), self.ppo.max_grad_norm)
        optimizer.step()
        return sum(kls) / len(indices)

    def value_step(self, buffer: RolloutBuffer, indices: torch.Tensor, stats: dict) -> None:
        optimizer = self.optimizers["value"]
        optimizer.zero_grad(set_to_none=True)

        def loss_of(micro):
            inputs, valid = [buffer.inputs[i] for i in micro], [buffer.valid_actions[i] for i in micro]
            v_loss = self.value_loss(buffer, micro, self.model(inputs, valid, policy=False).values)
            _add(stats, len(micro), value_loss=v_loss.item())
            return self.ppo.vf_coef * v_loss

        accumulate_gradients(self.micro_batches(buffer, indices), loss_of, distributed.no_sync(self.model))
        torch.nn.utils.clip_grad_norm_(self.agent.critic_parameters(), self.ppo.max_grad_norm)
        optimizer.step()
        for p in self.agent.actor_parameters():  # a shared trunk got value gradients the policy phase must not see
            p.grad = None

    def joint_step(self, buffer: RolloutBuffer, indices: torch.Tensor, stats: dict) -> None:
        optimizer = self.optimizers["joint"]
        optimizer.zero_grad(set_to_none=True)
        advantages = self.minibatch_advantages(buffer, indices)

        def loss_of(micro):
            loss, pg_loss, entropy, pg_stats, new_values = self.policy_terms(buffer, micro, advantages[micro],
                                                                             values=True)
            v_loss = self.value_loss(buffer, micro, new_values)
            _add(stats, len(micro), policy_loss=pg_loss.item(), value_loss=v_loss.item(), entropy=entropy.mean().item(),
                 approx_kl=pg_stats["approx_kl"].item(), clip_fraction=pg_stats["clip_fraction"].item())
            return loss + self.ppo.vf_coef * v_loss

        accumulate_gradients(self.micro_batches(buffer, indices), loss_of, distributed.no_sync(self.model))
        torch.nn.utils.clip_grad_norm_(self.agent.actor_parameters() + self.agent.critic_parameters(),
                                       self.ppo.max_grad_norm)
        optimizer.step()

    def kl_to_reference(self, inputs, valid, logits: torch.Tensor, grad: bool = False) -> torch.Tensor | float:
        """``KL(pi || pi_ref)`` averaged over decisions, ``pi_ref`` the untrained policy (LoRA
        adapters off); nan without a reference at no cost (full fine-tuning)."""
        reference = getattr(self.agent, "reference_logits", lambda inputs, valid: None)(inputs, valid)
        if reference is None:
            return torch.zeros((), device=logits.device) if grad else float("nan")
        ref_logits = pad_logits([x.float() for x in reference]).to(logits.device)
        log_pi, log_ref = torch.log_softmax(logits, -1), torch.log_softmax(ref_logits, -1)
        # padding is -inf in both: zero it before subtracting (inf - inf is nan, and so is its gradient)
        finite = torch.isfinite(log_pi)
        zero = torch.zeros_like(log_pi)
        kl = (log_pi.exp() * (torch.where(finite, log_pi, zero) - torch.where(finite, log_ref, zero))).sum(-1).mean()
        return kl if grad else float(kl)

    # -- state ------------------------------------------------------------------------------

    def state_dict(self) -> dict:
        return {"optimizers": {name: opt.state_dict() for name, opt in self.optimizers.items()},
                "schedulers": {name: s.state_dict() for name, s in self.schedulers.items()},
                "updates": self.updates, "novelty": self.novelty.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        for name, optimizer in self.optimizers.items():
            optimizer.load_state_dict(state["optimizers"][name])
        for name, scheduler in self.schedulers.items():
            scheduler.load_state_dict(state["schedulers"][name])
        # checkpoints of groundrl before exploration: the learning-rate schedule kept the clock
        self.updates = state.get("updates", next(iter(self.schedulers.values())).last_epoch)
        self.novelty.load_state_dict(state.get("novelty", {"keys": [], "counts": []}))


def _kl(p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """``KL(p || q)`` per row of padded distributions (0 where ``p`` is 0)."""
    log_p = p.log()
    terms = torch.where(p > 0, p * (log_p - torch.where(torch.isfinite(log_q), log_q, torch.zeros_like(log_q))),
                        torch.zeros_like(p))
    return terms.sum(-1)


def _add(stats: dict, weight: int, **values: float) -> None:
    """Record each statistic of ``weight`` decisions (their mean), for a mean over decisions."""
    for key, value in values.items():
        stats.setdefault(key, []).append((value, weight))


def reached_observations(collector: Collector, result, slots) -> list:
    """The observation (its text, for the novelty counts) each of ``slots`` reached in the step that
    gave ``result``: the next one, or the final one of an episode that ended there."""
    now = dict(zip(collector.active, zip(collector.observations(), collector.infos())))
    now.update({end.slot: (end.final_obs, end.final_info) for end in result.ended})
    return [info.get("observation", obs) for obs, info in (now[slot] for slot in slots)]
