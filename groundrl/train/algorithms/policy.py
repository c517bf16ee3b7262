"""The policy-optimization core PPO and the group methods share: the optimizers and their schedules,
acting (with the ``explore`` settings' behaviour policy), the clipped policy loss over minibatches
of micro-batches, the epochs with their KL stop, and the update's statistics.

A sibling supplies :meth:`PolicyOptimization.collect` (its experience: a :class:`RolloutBuffer` with
advantages) and :meth:`PolicyOptimization.epoch` (one pass over it); :meth:`~PolicyOptimization.update`
is the same for both.
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np
import torch

from groundrl.agents.protocols import ActorCritic
from groundrl.envs import make_env
from groundrl.llm.cache import memoized
from groundrl.train import distributed
from groundrl.train.algorithms.base import AlgorithmContext
from groundrl.train.buffer import RolloutBuffer, accumulate_gradients, micro_batches
from groundrl.train.collector import Collector, Ended, EpisodeStats
from groundrl.train.exploration import NoveltyCounts, behaviour_probabilities, linear_schedule
from groundrl.train.losses import (
    clipped_policy_loss,
    importance_weights,
    log_probs_and_entropy,
    normalize,
    pad_logits,
    sample_actions,
    self_imitation_losses,
)
from groundrl.train.self_imitation import ImitatedDecision, KeptEpisode, SelfImitation


@dataclass
class Experience:
    """What :meth:`~PolicyOptimization.collect` hands to :meth:`~PolicyOptimization.update`."""

    buffer: RolloutBuffer  # the decisions, with their advantages
    kl_reference: float  # KL(pi || pi_ref) on the first step's states (nan without a reference)
    logged: dict[str, float] = field(default_factory=dict)  # the collection's statistics, logged with the update


@dataclass
class Schedules:
    """The annealed settings' values for one update, read from the clock when its collection starts."""

    temperature: float
    epsilon: float
    novelty: float  # the novelty bonus's beta
    ent_coef: float


class Statistics:
    """An update's statistics, each a mean over the decisions it was measured on (micro-batches that
    gather equal decisions differ in size)."""

    def __init__(self):
        self.pairs: dict[str, list[tuple[float, int]]] = {}

    def add(self, weight: int, **values: float) -> None:
        """Record each statistic of ``weight`` decisions (their mean)."""
        for key, value in values.items():
            self.pairs.setdefault(key, []).append((value, weight))

    def means(self) -> dict[str, float]:
        return {name: float(np.average([v for v, _ in pairs], weights=[w for _, w in pairs]))
                for name, pairs in self.pairs.items()}


class PolicyOptimization:
    """The base of :class:`~groundrl.train.algorithms.PPO` and
    :class:`~groundrl.train.algorithms.GroupPolicyOptimization`: an
    :class:`~groundrl.agents.protocols.ActorCritic`'s policy trained with PPO's clipped loss."""

    def __init__(self, agent: ActorCritic, context: AlgorithmContext, optimizer_groups: dict[str, list[dict]],
                 find_unused_parameters: bool):
        self.agent, self.context = agent, context
        self.config, self.ppo, self.explore = context.config, context.config.ppo, context.config.explore
        self.novelty = NoveltyCounts()
        self.model = distributed.data_parallel(agent, context.world, find_unused_parameters=find_unused_parameters)
        self.optimizers = {name: torch.optim.Adam(g, eps=self.ppo.adam_eps) for name, g in optimizer_groups.items()}
        # ppo.lr_decay: linearly to 0 over the training budget; each step() sets the next update's rate
        decay = (lambda _: max(0.0, 1.0 - self.progress)) if self.ppo.lr_decay else (lambda _: 1.0)
        self.schedulers = {name: torch.optim.lr_scheduler.LambdaLR(opt, decay)
                           for name, opt in self.optimizers.items()}
        self.schedules = self.scheduled()
        config = self.config
        self.imitation = SelfImitation(config.sil.capacity, lambda: make_env(config.env, **config.training_env_options),
                                       agent.observe, self.ppo.gamma, config.rollout.reward_scale) \
            if config.sil.enabled else None
        self.ended: list[Ended] = []  # this process's episodes that ended in the update's collection

    # -- the clock ----------------------------------------------------------------------------

    @property
    def progress(self) -> float:
        """The share of the training budget done: the run's clock (:class:`TrainState`)."""
        return self.context.state.progress(self.config)

    def schedule(self, start: float, end: float | None) -> float:
        """An ``explore``-annealed setting's value now."""
        return linear_schedule(start, end, self.explore.anneal, self.progress)

    def scheduled(self) -> Schedules:
        explore = self.explore
        return Schedules(temperature=self.schedule(explore.temperature, explore.temperature_end),
                         epsilon=self.schedule(explore.epsilon, explore.epsilon_end),
                         novelty=self.schedule(explore.novelty, explore.novelty_end) if self.counts_novelty else 0.0,
                         ent_coef=self.schedule(self.ppo.ent_coef, self.ppo.ent_coef_end))

    @property
    def counts_novelty(self) -> bool:
        return self.explore.novelty > 0 or bool(self.explore.novelty_end)

    # -- collect ------------------------------------------------------------------------------

    def collect(self, collector: Collector) -> tuple[Experience, EpisodeStats]:
        """Play the update's decisions; the experience with its advantages, and the episodes that ended."""
        self.schedules = self.scheduled()  # the update under way's, before the clock counts it
        # the weights stay fixed while collecting: an input seen earlier in the rollout is not computed again
        with memoized(self.agent) if self.ppo.deduplicate else nullcontext():
            experience, episodes = self.play(collector)
        if self.imitation is not None:
            self.keep_episodes()
        return experience, episodes

    def episode_ended(self, end: Ended, episodes: EpisodeStats) -> None:
        """Count an episode that ended while collecting (and hold it for the self-imitation memory)."""
        episodes.add(end)
        if self.imitation is not None:
            self.ended.append(end)

    def play(self, collector: Collector) -> tuple[Experience, EpisodeStats]:
        raise NotImplementedError

    def draw(self, logits: torch.Tensor, uniform: torch.Tensor, behaviour_kl: list) -> tuple[torch.Tensor, ...]:
        """The actions drawn with ``uniform`` (one number per decision) from the behaviour policy
        the ``explore`` settings make of the policy's ``logits``: that policy, the actions, and the
        log-probabilities of the actions under the policy and under the behaviour; with exploration,
        each decision's ``KL(mu || pi)`` is appended to ``behaviour_kl``."""
        temperature, epsilon = self.schedules.temperature, self.schedules.epsilon
        behaviour = behaviour_probabilities(logits, temperature, epsilon)
        actions = sample_actions(behaviour, uniform)
        log_prob, _ = log_probs_and_entropy(logits, actions)
        # the policy itself acted: its own log-probabilities, so that the weights are exactly 1
        behaviour_log_prob = log_prob if temperature == 1 and epsilon == 0 else \
            behaviour.gather(-1, actions[:, None]).squeeze(-1).log()
        if self.explore.active:
            behaviour_kl.append(_kl(behaviour, torch.log_softmax(logits, -1)))
        return behaviour, actions, log_prob, behaviour_log_prob

    def exploration_logged(self, behaviour_kl: list) -> dict[str, float]:
        """What an update logs of the behaviour policy (nothing when the policy itself acts)."""
        if not self.explore.active:
            return {}
        return {"epsilon": self.schedules.epsilon, "temperature": self.schedules.temperature,
                "behaviour_kl": float(torch.cat(behaviour_kl).mean())}

    def novelty_logged(self, every_bonus: list[float]) -> dict[str, float]:
        """What an update logs of the novelty bonus (every process's bonuses)."""
        return {"novelty_beta": self.schedules.novelty,
                "novelty_bonus": float(np.mean(every_bonus)) if every_bonus else 0.0,
                "novelty_states": float(len(self.novelty))}

    # -- update -------------------------------------------------------------------------------

    def update(self, experience: Experience) -> dict[str, float]:
        """``ppo.update_epochs`` passes over the experience (then self-imitation, with ``sil``); the
        update's metrics. The trainer has counted this update on the clock already, so the learning
        rates step to the next one's."""
        stats = Statistics()
        for _ in range(self.ppo.update_epochs):
            self.epoch(experience.buffer, stats)
        imitated = self.imitate(stats) if self.imitation is not None else {}
        for scheduler in self.schedulers.values():
            scheduler.step()
        return {**self.update_statistics(experience, stats), **imitated, **self.rollout_statistics(experience.buffer),
                **self.learning_rates()}

    def epoch(self, buffer: RolloutBuffer, stats: Statistics) -> None:
        """One pass over the experience."""
        raise NotImplementedError

    def policy_phase(self, buffer: RolloutBuffer, minibatches, stats: Statistics) -> None:
        """Policy steps over ``minibatches`` (``(indices, share)`` pairs: :meth:`policy_step`), stopped
        on every process together once the approx-KL passes ``ppo.target_kl``."""
        stopped = False
        for indices, share in minibatches:
            approx_kl = distributed.mean_over_ranks({"kl": self.policy_step(buffer, indices, stats, share)})["kl"]
            if self.ppo.target_kl is not None and approx_kl > self.ppo.target_kl:
                stopped = True
                break
        stats.add(1, early_stops=float(stopped))

    def policy_step(self, buffer: RolloutBuffer, indices: torch.Tensor, stats: Statistics,
                    share: float | None = None) -> float:
        """One policy optimizer step; its approx-KL. ``share``: the number of decisions the
        minibatch's mean loss is over, per process (default: ``indices``' own)."""
        optimizer = self.optimizers["policy"]
        optimizer.zero_grad(set_to_none=True)
        advantages, kls = self.minibatch_advantages(buffer, indices), []

        def loss_of(micro):
            loss, pg_loss, entropy, pg_stats, _ = self.policy_terms(buffer, micro, advantages[micro], values=False)
            stats.add(len(micro), policy_loss=pg_loss.item(), entropy=entropy.mean().item(),
                      approx_kl=pg_stats["approx_kl"].item(), clip_fraction=pg_stats["clip_fraction"].item())
            kls.append(pg_stats["approx_kl"].item() * len(micro))
            return loss

        accumulate_gradients(self.micro_batches(buffer, indices), loss_of, distributed.no_sync(self.model), share)
        torch.nn.utils.clip_grad_norm_(self.agent.actor_parameters(), self.ppo.max_grad_norm)
        optimizer.step()
        return sum(kls) / len(indices)

    def policy_terms(self, buffer: RolloutBuffer, micro: torch.Tensor, advantages: torch.Tensor, values: bool):
        """The policy loss of the decisions ``micro`` (and the agent's values when asked)."""
        inputs, valid = [buffer.inputs[i] for i in micro], [buffer.valid_actions[i] for i in micro]
        out = self.model(inputs, valid, values=values)
        logits = pad_logits([x.float() for x in out.logits])
        new_log_prob, entropy = log_probs_and_entropy(logits, buffer.flat("actions")[micro].to(logits.device))
        pg_loss, pg_stats = clipped_policy_loss(new_log_prob, buffer.flat("log_probs")[micro].to(logits.device),
                                                advantages.to(logits.device), self.ppo.clip_coef,
                                                self.importance_weights(buffer, micro).to(logits.device))
        loss = pg_loss - self.schedules.ent_coef * entropy.mean()
        if self.ppo.kl_coef > 0:
            loss = loss + self.ppo.kl_coef * self.kl_to_reference(inputs, valid, logits, grad=True)
        return loss, pg_loss, entropy, pg_stats, out.values

    def importance_weights(self, buffer: RolloutBuffer, micro) -> torch.Tensor:
        """``pi_old / mu`` of the decisions ``micro`` (1 where the policy itself acted)."""
        return importance_weights(buffer.flat("log_probs")[micro], buffer.flat("behaviour_log_probs")[micro],
                                  self.explore.max_importance_weight)

    def micro_batches(self, buffer: RolloutBuffer, indices: torch.Tensor) -> list[torch.Tensor]:
        return buffer.micro_batches(indices, self.ppo.micro_batch_size, group=self.ppo.deduplicate)

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

    # -- self-imitation -----------------------------------------------------------------------

    critic = False  # whether the agent's critic learns (PPO): the self-imitation baseline is its value

    def keep_episodes(self) -> None:
        """Offer the episodes that ended in this collection, every process's, to the memory (so that
        it is the same on every process), and with ``sil.hindsight`` the successes made of them."""
        mine = [(end.seed, end.actions, end.episode_return, end.mission, end.achieved) for end in self.ended]
        self.ended = []
        update = self.context.state.update + 1  # the one under way
        ended = [episode for part in distributed.gather_objects(mine, everywhere=True) for episode in part]
        count = self.config.sil.hindsight
        relabelled = [kept for seed, actions, _, mission, achieved in ended if count and achieved
                      for kept in self.imitation.relabel(int(seed), actions, mission, achieved, count, update)]
        self.imitation.keep([KeptEpisode(int(seed), list(actions), float(episode_return), update)
                             for seed, actions, episode_return, _, _ in ended], relabelled)

    def imitate(self, stats: Statistics) -> dict[str, float]:
        """``sil.steps`` steps of self-imitation on decisions of the kept episodes, drawn by priority
        (``sil.priority``); the memory's statistics."""
        sil, world = self.config.sil, self.context.world
        decisions = self.imitation.decisions()
        # a critic that learns the novelty bonus expects it: the returns it is measured against carry it too
        beta = self.schedules.novelty
        bonus = (lambda key: self.novelty.bonus_now(key, beta)) if beta > 0 else None
        returns = self.imitation.returns(decisions, bonus) if self.critic else [d.episode_return for d in decisions]
        new = self.imitation.unassessed(decisions)
        if new:
            self.imitation.assessed([decisions[i] for i in new],
                                    self.clipped_advantages([decisions[i] for i in new], [returns[i] for i in new]))
        if decisions:
            for _ in range(sil.steps):
                weights = torch.from_numpy(self.imitation.draw_weights(decisions, sil.priority))
                drawn = torch.multinomial(weights, max(1, sil.batch_size // world.size), replacement=True,
                                          generator=self.context.generator).tolist()
                advantages = self.imitation_step([decisions[i] for i in drawn], stats, [returns[i] for i in drawn])
                # every process records every process's draws, so that the memories stay the same
                for part in distributed.gather_objects(list(zip(drawn, advantages)), everywhere=True):
                    self.imitation.drawn([decisions[i] for i, _ in part], [a for _, a in part])
        return self.imitation.statistics()

    def clipped_advantages(self, batch: list[ImitatedDecision], returns: list[float]) -> list[float]:
        """``max(G - V(s), 0)`` of kept decisions under the current critic (no gradient), or against
        the baseline without one."""
        if not self.critic:
            return [max(g - self.imitation.baseline, 0.0) for g in returns]
        values = []
        with torch.no_grad():
            for start in range(0, len(batch), self.config.sil.batch_size):
                part = batch[start:start + self.config.sil.batch_size]
                out = self.agent([d.input for d in part], [d.valid_actions for d in part], policy=False)
                values += out.values.float().cpu().tolist()
        return [max(g - v, 0.0) for g, v in zip(returns, values)]

    def imitation_step(self, batch: list[ImitatedDecision], stats: Statistics,
                       returns: list[float] | None = None) -> list[float]:
        """One optimizer step of the self-imitation losses of ``batch`` (the critic's too, where it
        learns), against ``returns`` (default: the decisions' environment returns); each decision's
        clipped advantage, as it was before the step."""
        sil = self.config.sil
        for optimizer in self.optimizers.values():
            optimizer.zero_grad(set_to_none=True)
        if returns is None:
            returns = [d.return_to_go if self.critic else d.episode_return for d in batch]
        returns = torch.tensor(returns)
        advantages = [0.0] * len(batch)
        learns_value = self.critic and sil.value_weight > 0

        def loss_of(micro):
            chosen = [batch[i] for i in micro]
            out = self.model([d.input for d in chosen], [d.valid_actions for d in chosen], values=self.critic)
            logits = pad_logits([x.float() for x in out.logits])
            log_prob, _ = log_probs_and_entropy(logits, torch.tensor([d.action for d in chosen], device=logits.device))
            values = out.values.float() if self.critic else torch.full((len(chosen),), self.imitation.baseline)
            policy_loss, value_loss, positive = self_imitation_losses(
                log_prob, returns[micro].to(logits.device), values.to(logits.device), sil.max_advantage)
            for i, advantage in zip(micro.tolist(), (returns[micro] - values.detach().cpu()).clamp(min=0.0).tolist()):
                advantages[i] = advantage
            stats.add(len(chosen), sil_loss=policy_loss.item(), sil_positive=positive.item(),
                      **({"sil_value_loss": value_loss.item()} if self.critic else {}))
            # without a critic's loss (sil.value_weight=0) the critic has no gradient and Adam leaves
            # it be: a zero loss would still give it zero gradients, and Adam's momentum would move it
            return sil.weight * policy_loss + (sil.value_weight * value_loss if learns_value else 0.0)

        # the same decision drawn again (or the same state in another kept episode) is computed once
        micros = micro_batches([d.input for d in batch], [d.valid_actions for d in batch], torch.arange(len(batch)),
                               self.ppo.micro_batch_size, group=self.ppo.deduplicate)
        accumulate_gradients(micros, loss_of, distributed.no_sync(self.model))
        trained = self.agent.actor_parameters() + (self.agent.critic_parameters() if learns_value else [])
        torch.nn.utils.clip_grad_norm_(trained, self.ppo.max_grad_norm)
        for optimizer in self.optimizers.values():
            optimizer.step()
        return advantages

    # -- statistics ---------------------------------------------------------------------------

    def update_statistics(self, experience: Experience, stats: Statistics) -> dict[str, float]:
        """The update's losses, the collection's statistics and the exploration's, averaged over the processes."""
        logged = {"kl_reference": experience.kl_reference, **experience.logged}
        if self.explore.active:
            logged["importance_weight"] = float(self.importance_weights(experience.buffer, slice(None)).mean())
        if self.ppo.ent_coef_end is not None:
            logged["ent_coef"] = self.schedules.ent_coef
        return distributed.mean_over_ranks({**stats.means(), **logged})

    def rollout_statistics(self, buffer: RolloutBuffer) -> dict[str, float]:
        """Statistics of the whole experience beyond the losses (the critic's, for PPO)."""
        return {}

    def learning_rates(self) -> dict[str, float]:
        return {f"lr_{group['name']}": group["lr"] for opt in self.optimizers.values() for group in opt.param_groups}

    # -- state --------------------------------------------------------------------------------

    def state_dict(self) -> dict:
        state = {"optimizers": {name: opt.state_dict() for name, opt in self.optimizers.items()},
                 "schedulers": {name: s.state_dict() for name, s in self.schedulers.items()},
                 "novelty": self.novelty.state_dict()}
        if self.imitation is not None:
            state["sil"] = self.imitation.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        for name, optimizer in self.optimizers.items():
            optimizer.load_state_dict(state["optimizers"][name])
        for name, scheduler in self.schedulers.items():
            scheduler.load_state_dict(state["schedulers"][name])
        self.novelty.load_state_dict(state.get("novelty", {"keys": [], "counts": []}))
        if self.imitation is not None and "sil" in state:  # (a run that turns self-imitation on starts it empty)
            self.imitation.load_state_dict(state["sil"])


def policy_group(agent: ActorCritic, ppo) -> dict:
    """The optimizer's parameter group of the policy (``ppo.policy_lr``)."""
    return {"params": agent.actor_parameters(), "lr": ppo.policy_lr, "name": "policy"}


def _kl(p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """``KL(p || q)`` per row of padded distributions (0 where ``p`` is 0)."""
    log_p = p.log()
    terms = torch.where(p > 0, p * (log_p - torch.where(torch.isfinite(log_q), log_q, torch.zeros_like(log_q))),
                        torch.zeros_like(p))
    return terms.sum(-1)


def reached_observations(collector: Collector, result, slots) -> list:
    """The observation (its text, for the novelty counts) each of ``slots`` reached in the step that
    gave ``result``: the next one, or the final one of an episode that ended there."""
    now = dict(zip(collector.active, zip(collector.observations(), collector.infos())))
    now.update({end.slot: (end.final_obs, end.final_info) for end in result.ended})
    return [info.get("observation", obs) for obs, info in (now[slot] for slot in slots)]
