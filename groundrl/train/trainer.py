"""Online PPO for an LLM agent in groundrl environments: GLAM and TWOSOME are presets of this loop.

One update:

1. rollout: ``num_envs`` environments x ``num_steps`` decisions, sampled from the policy, with the
   values, log-probabilities, rewards (x ``reward_scale``) and the primitive steps of each decision;
   an episode cut by the time limit is bootstrapped with the value of its last observation;
2. advantages by GAE, with the semi-MDP discount ``gamma ** k`` where the environment reports
   ``info["macro_steps"]``;
3. ``update_epochs`` passes over the shuffled decisions: either a value phase then a policy phase
   (TWOSOME: separate optimizers and learning rates, the policy phase stops at ``target_kl``), or one
   joint loss (GLAM) ``pg_loss + vf_coef * v_loss - ent_coef * entropy``; minibatches are built from
   micro-batches whose gradients accumulate; gradient norms are clipped; learning rates decay
   linearly to 0.

Every update appends a line to ``metrics.jsonl`` and writes TensorBoard scalars in the run folder;
a checkpoint is written every ``checkpoint_every`` updates, at the end, and at Ctrl-C; at the end,
``learning_curves.png`` (:mod:`groundrl.eval.plots`).

Launched by ``torchrun``, each process plays its slice of the environments and
DistributedDataParallel averages the gradients (:mod:`groundrl.train.distributed`).
"""

from __future__ import annotations

import json
import math
import resource
import time
import warnings
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from groundrl.errors import InvalidArgumentError
from groundrl.train import checkpoint as checkpoints
from groundrl.train import distributed
from groundrl.train.config import TrainConfig, load_run_config, to_yaml
from groundrl.train.ppo import (
    clipped_policy_loss,
    clipped_value_loss,
    explained_variance,
    generalized_advantage_estimation,
    log_probs_and_entropy,
    normalize,
    pad_logits,
    sample_actions,
)
from groundrl.train.rollout import EpisodeStats, Rollout, finished_episodes, infos_of, make_vector_env, valid_actions_of


@dataclass
class TrainState:
    """The counters a resumed run continues from."""

    update: int = 0
    decisions: int = 0
    episodes: int = 0
    wall_seconds: float = 0.0
    recorded_episodes: int = 0  # sample episodes written to trajectories.jsonl
    history: list = field(default_factory=list)  # the metrics of every update so far


class Trainer:
    """Build everything a run needs from a :class:`TrainConfig`, then :meth:`train`.

    >>> from groundrl.train.config import load_config
    >>> config = load_config("twosome", overrides=["env=groundrl/FollowInstruction-v0", "model=tiny-llama",
    ...     "ppo.num_envs=2", "ppo.num_steps=4", "ppo.total_decisions=8", "ppo.minibatch_size=4",
    ...     "ppo.value_minibatch_size=4", "progress=false", "device=cpu"])
    >>> import tempfile; run_dir = tempfile.mkdtemp()
    >>> metrics = Trainer(config, run_dir).train()
    >>> len(metrics), metrics[-1]["decisions"]
    (1, 8)
    """

    def __init__(self, config: TrainConfig, run_dir: str | Path, agent=None):
        from groundrl.agents.factory import build_agent

        self.config = config
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        ppo, spread = config.ppo, config.distributed
        self.world = distributed.setup(spread.timeout, spread.backend, config.device, spread.cpu_threads)
        check_split(config, self.world.size)
        torch.manual_seed(config.seed)  # the same on every rank: the replicas start identical
        np.random.seed(config.seed)
        self.agent = agent or build_agent(config, device=self.world.device(config.device))
        self.device = self.agent.device
        rank_seed = int(np.random.SeedSequence([config.seed, self.world.rank]).generate_state(1)[0])
        torch.manual_seed(rank_seed)  # from here on each rank its own stream (dropout, for one)
        np.random.seed(rank_seed)
        # The actions' random numbers are drawn for all environments on every rank, each rank using
        # its slice: an environment's episode does not depend on how many processes share the work.
        self.action_generator = torch.Generator().manual_seed(config.seed)
        self.generator = torch.Generator().manual_seed(rank_seed)  # this rank's: minibatch order, sampling replays
        self.env_indices = self.world.shard(ppo.num_envs)  # this rank's environments, by global index
        self.num_envs = len(self.env_indices)
        self.envs = make_vector_env(config.env, self.num_envs, config.prompt, config.prompt_window, config.env_kwargs,
                                    seed_stride=ppo.num_envs)
        self.model = self._data_parallel(self.agent)  # what gradients flow through: the agent, or DDP around it
        self.num_updates = max(1, ppo.total_decisions // (ppo.num_envs * ppo.num_steps))
        self.optimizers, self.schedulers = self._make_optimizers()
        self.state = TrainState()
        self.next_obs, self.next_info = None, None
        self.episode_returns = [0.0] * self.num_envs  # of this rank's episodes under way
        self.episode_lengths = [0] * self.num_envs
        # sample episodes for trajectories.jsonl: rank 0's first environment, from every
        # trajectories_every-th update on (the next episode it starts)
        self._record_next = False
        self._recording: dict | None = None
        self._recorded: list[dict] = []

    def _unused_parameters(self) -> bool:
        """Whether some trainable weights get no gradient in a step (PPO's separate phases: the
        value phase leaves the actor alone, the policy phase the critic): DDP must look for them."""
        return self.config.ppo.phases == "separate"

    def _data_parallel(self, agent):
        if not self.world.distributed:
            return agent
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(agent, device_ids=[self.device] if self.device.type == "cuda" else None,
                                       broadcast_buffers=False, find_unused_parameters=self._unused_parameters())

    def _accumulating(self, last: bool):
        """Micro-batches accumulate gradients locally; DDP averages them over the ranks once, in the
        backward pass of a minibatch's last micro-batch."""
        return self.model.no_sync() if self.world.distributed and not last else nullcontext()

    def _make_optimizers(self) -> tuple[dict, dict]:
        ppo = self.config.ppo
        if ppo.phases == "joint":
            params = self.agent.actor_parameters() + self.agent.critic_parameters()
            optimizers = {"joint": torch.optim.Adam(params, lr=ppo.lr, eps=ppo.adam_eps)}
        else:
            optimizers = {
                "policy": torch.optim.Adam(self.agent.actor_parameters(), lr=ppo.policy_lr, eps=ppo.adam_eps),
                "value": torch.optim.Adam(self.agent.critic_parameters(), lr=ppo.value_lr, eps=ppo.adam_eps),
            }
        decay = (lambda update: max(0.0, 1.0 - update / self.num_updates)) if ppo.lr_decay else (lambda update: 1.0)
        return optimizers, {name: torch.optim.lr_scheduler.LambdaLR(opt, decay) for name, opt in optimizers.items()}

    # -- the loop ---------------------------------------------------------------------------

    def train(self, updates: int | None = None) -> list[dict]:
        """Run the remaining updates (at most ``updates`` of them in this call); returns every
        update's metrics so far (earlier ones too when resumed)."""
        from torch.utils.tensorboard import SummaryWriter

        main = self.world.is_main  # the one that writes
        if main:
            (self.run_dir / "config.yaml").write_text(to_yaml(self.config))
            env_kwargs = {"prompt": self.config.prompt, "window": self.config.prompt_window, **self.config.env_kwargs}
            (self.run_dir / "env.json").write_text(json.dumps({"env_id": self.config.env, "env_kwargs": env_kwargs}))
        if self.next_obs is None:
            seeds = [self.config.seed * 1000 + i for i in self.env_indices]
            self.next_obs, self.next_info = self.envs.reset(seed=seeds)
        total = self.num_updates * self.config.ppo.num_envs * self.config.ppo.num_steps
        bar = tqdm(total=total, initial=self.state.decisions, unit="decision", desc="train",
                   disable=not (self.config.progress and main), dynamic_ncols=True)
        writer = SummaryWriter(str(self.run_dir / "tensorboard")) if main else None
        stop = self.num_updates if updates is None else min(self.num_updates, self.state.update + updates)
        try:
            while self.state.update < stop:
                metrics = self.update()
                if main:
                    self._log(metrics, writer)
                    self._write_trajectories(writer, metrics["decisions"])
                bar.update(metrics["decisions"] - bar.n)
                bar.set_postfix({k: f"{metrics[k]:.3g}" for k in ("success_rate", "episode_return", "approx_kl")
                                 if k in metrics and not math.isnan(metrics[k])})
                if self.state.update % self.config.checkpoint_every == 0 or self.state.update == stop:
                    self.save_checkpoint()
        except KeyboardInterrupt:
            bar.close()
            if not self.world.distributed:
                path = self.save_checkpoint()
                print(f"interrupted: checkpoint {path}; continue with `groundrl train --resume {self.run_dir}`")
            elif main:  # the ranks stopped at different points: no consistent state to save
                print(f"interrupted: continue from the last checkpoint with `groundrl train --resume {self.run_dir}` "
                      "(under torchrun)")
            raise
        except Exception as error:
            if self.world.distributed and distributed.is_communication_failure(error):
                raise distributed.communication_error(error, self.world, self.config.distributed.timeout,
                                                      self._resume_hint()) from None
            raise
        finally:
            if writer is not None:
                writer.close()
            bar.close()
        if main and self.state.update >= self.num_updates:  # the run is over
            self._plot()
        return self.state.history

    def _plot(self) -> None:
        """``learning_curves.png`` in the run folder (a plotting failure never costs the run)."""
        from groundrl.eval.plots import plot_runs

        try:
            plot_runs([self.run_dir], self.run_dir / "learning_curves.png")
        except Exception as error:  # noqa: BLE001 - the run and its metrics are safe; say why the figure is not
            warnings.warn(f"learning_curves.png was not drawn ({type(error).__name__}: {error}); "
                          f"try `groundrl plot {self.run_dir}`", stacklevel=2)

    def _resume_hint(self) -> str:
        saved = checkpoints.list_checkpoints(self.run_dir)
        if not saved:
            return "; no checkpoint was written yet"
        return f"; resume from {saved[-1].name} with `groundrl train --resume {self.run_dir}` under torchrun"

    def update(self) -> dict:
        """One rollout and one PPO update; returns the update's metrics."""
        ppo = self.config.ppo
        started = time.perf_counter()
        rollout, episodes, kl_reference = self.collect_rollout()
        rollout_seconds = time.perf_counter() - started

        rewards, values, dones = rollout.stacked("rewards"), rollout.stacked("values"), rollout.stacked("dones")
        macro_steps = rollout.stacked("macro_steps")
        next_value = self.agent.state_values(self._observe(self.next_obs, self.next_info),
                                             valid_actions_of(self.next_info, self.num_envs)).float().cpu()
        advantages, returns = generalized_advantage_estimation(
            rewards, values, dones, next_value, ppo.gamma, ppo.gae_lambda,
            macro_steps=macro_steps if bool((macro_steps != 1).any()) else None)

        started = time.perf_counter()
        losses = self.optimize(rollout, advantages.flatten(), returns.flatten())
        update_seconds = time.perf_counter() - started
        for scheduler in self.schedulers.values():
            scheduler.step()

        # the logged statistics are the whole rollout's, over every rank's environments
        values, returns, advantages = (distributed.concat_over_ranks(x, dim=1) for x in (values, returns, advantages))
        return self._record(episodes, rollout_seconds, update_seconds, {
            **distributed.mean_over_ranks({**losses, "kl_reference": kl_reference}),
            "explained_variance": explained_variance(values.flatten(), returns.flatten()),
            "value_mean": float(values.mean()),
            "advantage_std": float(advantages.std()) if advantages.numel() > 1 else 0.0,
            **{f"lr_{name}": opt.param_groups[0]["lr"] for name, opt in self.optimizers.items()},
        })

    def _record(self, episodes: EpisodeStats, rollout_seconds: float, update_seconds: float, learning: dict) -> dict:
        """Count the update's decisions and episodes (every rank's); its metrics: counters, episodes,
        ``learning`` (the algorithm's own), speed and memory."""
        decisions = self.config.ppo.num_envs * self.config.ppo.num_steps
        episodes = EpisodeStats(*(sum(parts, []) for parts in zip(*distributed.gather_objects(
            (episodes.returns, episodes.lengths, episodes.successes), everywhere=True))))
        self.state.update += 1
        self.state.decisions += decisions
        self.state.episodes += len(episodes.returns)
        self.state.wall_seconds += rollout_seconds + update_seconds
        metrics = {
            "update": self.state.update,
            "decisions": self.state.decisions,
            "wall_seconds": round(self.state.wall_seconds, 3),
            **episodes.summary(),
            **learning,
            "decisions_per_second": decisions / (rollout_seconds + update_seconds),
            "rollout_seconds": rollout_seconds,
            "update_seconds": update_seconds,
            "memory_gib": distributed.max_over_ranks(_peak_memory_gib(self.device)),
        }
        self.state.history.append(metrics)
        return metrics

    def collect_rollout(self) -> tuple[Rollout, EpisodeStats, float]:
        ppo, agent = self.config.ppo, self.agent
        rollout, episodes = Rollout(), EpisodeStats()
        kl_reference = float("nan")
        every = self.config.trajectories_every
        if self.world.is_main and every and self.state.update % every == 0:
            self._record_next = True
        for step in range(ppo.num_steps):
            observations = self._observe(self.next_obs, self.next_info)
            valid = valid_actions_of(self.next_info, self.num_envs)
            with torch.no_grad():
                out = agent(observations, valid)
            logits = pad_logits([x.float().cpu() for x in out.logits])
            uniform = torch.rand(ppo.num_envs, generator=self.action_generator)[self.env_indices.start:self.env_indices.stop]
            actions = sample_actions(torch.softmax(logits, -1), uniform)
            log_prob, _ = log_probs_and_entropy(logits, actions)
            if step == 0:  # the KL to the untrained policy, measured on the first step's states
                kl_reference = self._kl_to_reference(observations, valid, logits)
            shown, shown_seed = self.next_obs[0], getattr(self.envs.envs[0], "episode_seed", None)

            self.next_obs, raw_reward, terminated, truncated, self.next_info = self.envs.step(actions.numpy())
            self._record_step(shown, shown_seed, valid[0], logits[0], int(actions[0]), float(raw_reward[0]),
                              bool(terminated[0] or truncated[0]))
            steps = torch.as_tensor(self.next_info.get("macro_steps", np.ones(self.num_envs)), dtype=torch.float32)
            reward = torch.as_tensor(raw_reward, dtype=torch.float32) * ppo.reward_scale
            for i in range(self.num_envs):
                self.episode_returns[i] += float(raw_reward[i])
                self.episode_lengths[i] += 1
            for i, final in finished_episodes(self.next_info, terminated, truncated):
                episodes.returns.append(self.episode_returns[i])
                episodes.lengths.append(self.episode_lengths[i])
                episodes.successes.append(bool(final.get("success", terminated[i] and raw_reward[i] > 0)))
                self.episode_returns[i], self.episode_lengths[i] = 0.0, 0
                if truncated[i] and not terminated[i]:  # cut by the time limit: its future is not worth 0
                    last = agent.state_values([agent.observe(self.next_info["final_obs"][i], final)],
                                              [[str(a) for a in final["valid_actions"]]])
                    reward[i] += ppo.gamma ** float(steps[i]) * float(last.cpu()[0])
            rollout.observations.append(observations)
            rollout.valid_actions.append(valid)
            rollout.actions.append(actions)
            rollout.log_probs.append(log_prob)
            rollout.values.append(out.values.float().cpu())
            rollout.rewards.append(reward)
            rollout.dones.append(torch.as_tensor(terminated | truncated, dtype=torch.float32))
            rollout.macro_steps.append(steps)
        return rollout, episodes, kl_reference

    def _record_step(self, observation, seed: int | None, valid: list[str], logits: torch.Tensor, action: int,
                     reward: float, done: bool) -> None:
        """Follow the first environment's episode when one is to be recorded (rank 0 only)."""
        if self._recording is None:
            starts = self.episode_lengths[0] == 0  # this step is the episode's first
            if not (self._record_next and starts and seed is not None):
                return
            self._recording = {"episode": self.state.recorded_episodes, "seed": seed, "steps": []}
            self.state.recorded_episodes += 1
            self._record_next = False
        steps = self._recording["steps"]
        steps.append({"episode": self._recording["episode"], "step": len(steps), "update": self.state.update + 1,
                      "observation": str(observation), "valid_actions": valid,
                      "probs": [round(float(p), 6) for p in torch.softmax(logits, -1)[: len(valid)]],
                      "action": action, "reward": reward,
                      "seed": self._recording["seed"]})
        if done:
            self._recorded.append(self._recording)
            self._recording = None

    def _write_trajectories(self, writer, decisions: int) -> None:
        """Append the episodes recorded in this update to ``trajectories.jsonl`` (``groundrl
        replay RUN``) and show them in TensorBoard's text tab."""
        from groundrl.eval.replay import Episode, episode_markdown

        if not self._recorded:
            return
        with open(self.run_dir / "trajectories.jsonl", "a") as f:
            for recorded in self._recorded:
                f.write("".join(json.dumps(step) + "\n" for step in recorded["steps"]))
                episode = Episode("train", recorded["episode"], recorded["steps"])
                writer.add_text(f"train/episode_{recorded['episode']}", episode_markdown(episode), decisions)
        self._recorded = []

    # -- the PPO update ---------------------------------------------------------------------

    def optimize(self, rollout: Rollout, advantages: torch.Tensor, returns: torch.Tensor) -> dict:
        ppo = self.config.ppo
        observations, valid = rollout.flat_observations(), rollout.flat_valid_actions()
        actions = rollout.stacked("actions").flatten()
        old_log_probs = rollout.stacked("log_probs").flatten()
        old_values = rollout.stacked("values").flatten()
        batch = dict(observations=observations, valid=valid, actions=actions, old_log_probs=old_log_probs,
                     old_values=old_values, advantages=advantages, returns=returns)
        stats: dict[str, list[float]] = {}
        size = len(observations)
        for _ in range(ppo.update_epochs):
            if ppo.phases == "joint":
                for indices in self._minibatches(size, ppo.minibatch_size):
                    self._joint_step(batch, indices, stats)
                continue
            for indices in self._minibatches(size, ppo.value_minibatch_size):
                self._value_step(batch, indices, stats)
            stopped = False
            for indices in self._minibatches(size, ppo.minibatch_size):
                approx_kl = distributed.mean_over_ranks({"kl": self._policy_step(batch, indices, stats)})["kl"]
                if ppo.target_kl is not None and approx_kl > ppo.target_kl:  # every rank stops together
                    stopped = True
                    break
            stats.setdefault("early_stops", []).append(float(stopped))
        return {name: float(np.mean(values)) for name, values in stats.items()}

    def _minibatches(self, size: int, minibatch_size: int):
        """This rank's share of each minibatch (``minibatch_size`` is the total over the ranks)."""
        minibatch_size //= self.world.size
        order = torch.randperm(size, generator=self.generator)
        for start in range(0, size, minibatch_size):
            yield order[start : start + minibatch_size]

    def _micro_batches(self, indices: torch.Tensor):
        return indices.split(self.config.ppo.micro_batch_size)

    def _policy_terms(self, batch, micro, advantages, values: bool):
        """The policy loss of one micro-batch (and the agent's values when asked)."""
        ppo = self.config.ppo
        out = self.model([batch["observations"][i] for i in micro], [batch["valid"][i] for i in micro],
                         grad=True, values=values)
        logits = pad_logits([x.float() for x in out.logits])
        new_log_prob, entropy = log_probs_and_entropy(logits, batch["actions"][micro].to(logits.device))
        pg_loss, pg_stats = clipped_policy_loss(new_log_prob, batch["old_log_probs"][micro].to(logits.device),
                                                advantages.to(logits.device), ppo.clip_coef)
        loss = pg_loss - ppo.ent_coef * entropy.mean()
        if ppo.kl_coef > 0:
            kl = self._kl_to_reference([batch["observations"][i] for i in micro],
                                       [batch["valid"][i] for i in micro], logits, grad=True)
            loss = loss + ppo.kl_coef * kl
        return loss, pg_loss, entropy, pg_stats, out.values

    def _minibatch_advantages(self, batch, indices):
        advantages = batch["advantages"][indices]
        if not self.config.ppo.normalize_advantages:
            return advantages
        if not self.world.distributed:
            return normalize(advantages)
        # the whole minibatch's mean and standard deviation, from every rank's sums
        count, total, squares = distributed.sum_over_ranks(torch.stack(
            [torch.tensor(float(advantages.numel())), advantages.sum(), advantages.pow(2).sum()]).double()).tolist()
        mean = total / count
        std = math.sqrt(max(squares - count * mean**2, 0.0) / max(count - 1, 1))
        return normalize(advantages, mean_std=(mean, std))

    def _policy_step(self, batch, indices, stats) -> float:
        optimizer = self.optimizers["policy"]
        optimizer.zero_grad(set_to_none=True)
        advantages = self._minibatch_advantages(batch, indices)
        kls = []
        parts = list(zip(advantages.split(self.config.ppo.micro_batch_size), self._micro_batches(indices)))
        for k, (part, micro) in enumerate(parts):
            with self._accumulating(last=k == len(parts) - 1):
                loss, pg_loss, entropy, pg_stats, _ = self._policy_terms(batch, micro, part, values=False)
                (loss * len(micro) / len(indices)).backward()
            _add(stats, policy_loss=pg_loss.item(), entropy=entropy.mean().item(), approx_kl=pg_stats["approx_kl"].item(),
                 clip_fraction=pg_stats["clip_fraction"].item())
            kls.append(pg_stats["approx_kl"].item() * len(micro))
        torch.nn.utils.clip_grad_norm_(self.agent.actor_parameters(), self.config.ppo.max_grad_norm)
        optimizer.step()
        return sum(kls) / len(indices)

    def _value_step(self, batch, indices, stats) -> None:
        ppo = self.config.ppo
        optimizer = self.optimizers["value"]
        optimizer.zero_grad(set_to_none=True)
        micros = list(self._micro_batches(indices))
        for k, micro in enumerate(micros):
            with self._accumulating(last=k == len(micros) - 1):
                new_values = self.model([batch["observations"][i] for i in micro], [batch["valid"][i] for i in micro],
                                        grad=True, policy=False).values
                v_loss = clipped_value_loss(new_values.float().cpu(), batch["old_values"][micro],
                                            batch["returns"][micro], ppo.value_clip_coef)
                (ppo.vf_coef * v_loss * len(micro) / len(indices)).backward()
            _add(stats, value_loss=v_loss.item())
        torch.nn.utils.clip_grad_norm_(self.agent.critic_parameters(), ppo.max_grad_norm)
        optimizer.step()
        # a shared trunk got value gradients the policy optimizer must not see
        for p in self.agent.actor_parameters():
            p.grad = None

    def _joint_step(self, batch, indices, stats) -> None:
        ppo = self.config.ppo
        optimizer = self.optimizers["joint"]
        optimizer.zero_grad(set_to_none=True)
        advantages = self._minibatch_advantages(batch, indices)
        parts = list(zip(advantages.split(ppo.micro_batch_size), self._micro_batches(indices)))
        for k, (part, micro) in enumerate(parts):
            with self._accumulating(last=k == len(parts) - 1):
                loss, pg_loss, entropy, pg_stats, new_values = self._policy_terms(batch, micro, part, values=True)
                v_loss = clipped_value_loss(new_values.float().cpu(), batch["old_values"][micro],
                                            batch["returns"][micro], ppo.value_clip_coef)
                ((loss + ppo.vf_coef * v_loss) * len(micro) / len(indices)).backward()
            _add(stats, policy_loss=pg_loss.item(), value_loss=v_loss.item(), entropy=entropy.mean().item(),
                 approx_kl=pg_stats["approx_kl"].item(), clip_fraction=pg_stats["clip_fraction"].item())
        torch.nn.utils.clip_grad_norm_(self.agent.actor_parameters() + self.agent.critic_parameters(), ppo.max_grad_norm)
        optimizer.step()

    def _kl_to_reference(self, observations, valid, logits: torch.Tensor, grad: bool = False) -> torch.Tensor | float:
        """``KL(pi || pi_ref)`` averaged over decisions, ``pi_ref`` the untrained policy (LoRA
        adapters off); nan without a reference at no cost (full fine-tuning)."""
        reference = self.agent.reference_policy()
        if reference is None:
            return torch.zeros((), device=logits.device) if grad else float("nan")
        with torch.no_grad(), reference:
            ref_logits = pad_logits([x.float() for x in self.agent(observations, valid, values=False).logits])
            ref_logits = ref_logits.to(logits.device)
        log_pi, log_ref = torch.log_softmax(logits, -1), torch.log_softmax(ref_logits, -1)
        # padding is -inf in both: zero it before subtracting (inf - inf is nan, and so is its gradient)
        valid = torch.isfinite(log_pi)
        zero = torch.zeros_like(log_pi)
        kl = (log_pi.exp() * (torch.where(valid, log_pi, zero) - torch.where(valid, log_ref, zero))).sum(-1).mean()
        return kl if grad else float(kl)

    # -- bookkeeping ------------------------------------------------------------------------

    def _observe(self, observations, info) -> list:
        """What the agent reads of each environment's step (a prompt, or numbers from ``info``)."""
        infos = infos_of(info, len(observations))
        return [self.agent.observe(o, i) for o, i in zip(observations, infos)]

    def _log(self, metrics: dict, writer) -> None:
        with open(self.run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(metrics) + "\n")
        for key, value in metrics.items():
            if key not in ("update", "decisions") and isinstance(value, (int, float)) and not math.isnan(value):
                writer.add_scalar(f"train/{key}", value, metrics["decisions"])

    def checkpoint_state(self) -> dict:
        """What else a checkpoint must hold to continue exactly (a replay memory, for instance)."""
        return {}

    def load_checkpoint_state(self, state: dict) -> None:
        pass

    def save_checkpoint(self) -> Path:
        return checkpoints.save(self, keep=self.config.keep_checkpoints)


def check_split(config: TrainConfig, processes: int) -> None:
    """The totals of ``config`` that are shared out over the processes must be multiples of their
    number (environments, minibatch sizes).

    Raises:
        InvalidArgumentError: one of them is not.
    """
    names = ("ppo.num_envs", "drrn.batch_size") if config.agent.kind == "drrn" else (
        "ppo.num_envs", "ppo.minibatch_size", "ppo.value_minibatch_size")
    for name in names:
        section, key = name.split(".")
        value = getattr(getattr(config, section), key)
        if value % processes:
            raise InvalidArgumentError(f"{name}={value} does not split over {processes} processes: make it a "
                                       f"multiple of {processes} (it is the total over the processes)")


def _add(stats: dict, **values: float) -> None:
    for key, value in values.items():
        stats.setdefault(key, []).append(value)


def _peak_memory_gib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def resume(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Trainer:
    """A trainer restored from a run folder (its latest checkpoint) or a checkpoint folder, with
    the run's own configuration (``overrides`` on top, e.g. ``ppo.total_decisions=100000``)."""
    checkpoint = checkpoints.find(path)
    run_dir = checkpoint.parent.parent
    if not (run_dir / "config.yaml").is_file():
        raise checkpoints.CheckpointError(f"{run_dir} has no config.yaml: is it a groundrl run folder?")
    trainer = make_trainer(load_run_config(run_dir, overrides), run_dir)
    checkpoints.load(trainer, checkpoint)
    return trainer


def make_trainer(config: TrainConfig, run_dir: str | Path, agent=None) -> Trainer:
    """The trainer of ``config``'s agent: PPO, or Q-learning for ``agent.kind=drrn``."""
    if config.agent.kind == "drrn":
        from groundrl.train.drrn import DRRNTrainer

        return DRRNTrainer(config, run_dir, agent)
    return Trainer(config, run_dir, agent)
