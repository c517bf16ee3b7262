"""The training loop: collect, update, record, checkpoint; the same for every algorithm.

Every update's metrics go to the run's loggers (``metrics.jsonl``, TensorBoard and, when asked,
Weights & Biases: :mod:`groundrl.train.loggers`);
a checkpoint is written every ``checkpoint_every`` updates, at the end, and at Ctrl-C (``groundrl
train`` then draws ``learning_curves.png``, :mod:`groundrl.eval.plots`). Ctrl-C lets the update under
way finish first, so that a checkpoint is always a state between two updates (a second Ctrl-C stops
at once, and the last checkpoint stays). A resumed run first cuts its records back to
its checkpoint, so that each update is recorded exactly once whatever happened after it.

Launched by ``torchrun``, each process plays its slice of the environments and
DistributedDataParallel averages the gradients (:mod:`groundrl.train.distributed`); rank 0 writes.
"""

from __future__ import annotations

import json
import math
import shlex
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from groundrl import runs
from groundrl.agents.config import AgentKind
from groundrl.agents.factory import build_agent
from groundrl.agents.llm_agent import require_time
from groundrl.envs import make_env
from groundrl.errors import GroundrlError
from groundrl.train import checkpoint as checkpoints
from groundrl.train import distributed
from groundrl.train import export as exports
from groundrl.train.algorithms import DRRN, PPO, AlgorithmContext, GroupPolicyOptimization
from groundrl.train.algorithms.base import TrainState
from groundrl.train.collector import Collector, EpisodeStats
from groundrl.train.config import TrainConfig, check_split, load_run_config, to_yaml
from groundrl.train.loggers import open_loggers


class TrainingDivergedError(GroundrlError):
    """An update made the trained weights NaN or infinite (the settings let training diverge)."""


class Trainer:
    """Build everything a run needs from a :class:`TrainConfig`, then :meth:`train`. ``agent`` and
    ``algorithm`` (a class taking ``(agent, AlgorithmContext)``) replace those the config names.

    >>> from groundrl.train.config import load_config
    >>> config = load_config("twosome", overrides=["env=groundrl/FollowInstruction-v0", "model=tiny-llama",
    ...     "rollout.num_envs=2", "rollout.num_steps=4", "rollout.total_decisions=8", "ppo.minibatch_size=4",
    ...     "ppo.value_minibatch_size=4", "progress=false", "device=cpu"])
    >>> import tempfile; run_dir = tempfile.mkdtemp()
    >>> metrics = Trainer(config, run_dir).train()
    >>> len(metrics), metrics[-1]["decisions"]
    (1, 8)
    """

    def __init__(self, config: TrainConfig, run_dir: str | Path, agent=None, algorithm=None):
        self.config, self.run_dir = config, Path(run_dir)
        spread = config.distributed
        self.world = distributed.setup(spread.timeout, spread.backend.value, config.device, spread.cpu_threads)
        check_split(config, self.world.size)
        torch.manual_seed(config.seed)  # the same on every rank: the replicas start identical
        np.random.seed(config.seed)
        if agent is None:
            self.agent = self._build_agent()
            if config.init:  # a resumed run then overwrites them with its checkpoint's
                exports.load_weights(self.agent, config.init)
        else:
            self.agent = agent
        rank_seed = int(np.random.SeedSequence([config.seed, self.world.rank]).generate_state(1)[0])
        torch.manual_seed(rank_seed)  # from here on each rank its own stream (dropout, for one)
        np.random.seed(rank_seed)
        self.env_indices = self.world.shard(config.rollout.num_envs)  # this rank's environments, by global index
        # a group method's environments come in groups that share every reset seed (and start each
        # episode together, when the algorithm says: wait)
        group_size = config.rollout.group_size

        def next_seed(slot: int, previous: int | None) -> int:
            return runs.training_seed(config.seed, self.env_indices[slot] // group_size,
                                      config.rollout.num_envs // group_size, previous)

        self.collector = Collector([make_env(config.env, **config.collector_env_options) for _ in self.env_indices],
                                   next_seed, wait=config.group_method)
        self.context = context = AlgorithmContext(config, self.world, self.env_indices,
                                                  torch.Generator().manual_seed(rank_seed),
                                                  torch.Generator().manual_seed(config.seed), TrainState())
        algorithm = algorithm or (DRRN if config.agent.kind == AgentKind.drrn else
                                  GroupPolicyOptimization if config.group_method else PPO)
        self.algorithm = algorithm(self.agent, context)

    def _build_agent(self):
        """The untrained agent of the config, each setting it cannot train with refused before the
        model loads."""
        config = self.config
        if config.init:
            exports.check_init(config)
        env = make_env(config.env, **config.env_options)
        if config.agent.kind == AgentKind.llm and config.agent.llm.critic_time:
            require_time(env.reset(seed=config.seed)[1])  # training reads values, and they read the time
        return build_agent(config.agent, env, model=config.model, dtype=config.dtype,
                           device=self.world.device(config.device), seed=config.seed, precision=config.precision)

    @property
    def state(self) -> TrainState:
        """The run's counters and clock (the algorithm's schedules read it)."""
        return self.context.state

    @property
    def num_updates(self) -> int:
        """PPO's number of updates; at most that many for a group method (see :attr:`finished`)."""
        return self.config.num_updates

    @property
    def total_decisions(self) -> int:
        """The decisions the run plays: PPO's whole updates, or a group method's budget."""
        rollout = self.config.rollout
        return rollout.total_decisions if self.config.group_method else self.num_updates * rollout.decisions_per_update

    @property
    def finished(self) -> bool:
        """Whether the run has played its budget (:meth:`TrainConfig.budget_played`)."""
        return self.config.budget_played(self.state.update, self.state.decisions)

    # -- the loop ---------------------------------------------------------------------------

    def train(self, updates: int | None = None) -> list[dict]:
        """Run the remaining updates (at most ``updates`` of them in this call); returns every
        update's metrics so far (earlier ones too when resumed)."""
        main = self.world.is_main  # the one that writes
        loggers = None
        if main:
            self._open_run_folder()
            try:
                loggers = open_loggers(self.config, self.run_dir, self.state.decisions if self.state.update else 0)
            except BaseException:
                runs.unlock(self.run_dir)
                raise
        bar = tqdm(total=self.total_decisions, initial=self.state.decisions,
                   unit="decision", desc="train", disable=not (self.config.progress and main), dynamic_ncols=True)
        stop = None if updates is None else self.state.update + updates
        between_updates = True  # the state is one a checkpoint may hold
        try:
            with _update_finishes_first(enabled=not self.world.distributed) as interrupted:
                while not self.finished and self.state.update != stop:
                    between_updates = False
                    metrics, recorded = self.update()
                    between_updates = True
                    if main:
                        loggers.log(metrics, recorded)
                    self._check_weights_finite(metrics)
                    bar.update(metrics["decisions"] - bar.n)
                    bar.set_postfix({k: f"{metrics[k]:.3g}" for k in ("success_rate", "episode_return", "approx_kl")
                                     if k in metrics and not math.isnan(metrics[k])})
                    if self.state.update % self.config.checkpoint_every == 0 or self.finished or \
                            self.state.update == stop:
                        self.save_checkpoint()
                    if interrupted():
                        raise KeyboardInterrupt
        except KeyboardInterrupt:
            bar.close()
            hint = f"`groundrl train --resume {shlex.quote(str(self.run_dir))}`"
            if self.world.distributed:  # the ranks stopped at different points: no consistent state to save
                if main:
                    print(f"interrupted: continue from the last checkpoint with {hint} (under torchrun)")
            elif between_updates:
                print(f"interrupted: checkpoint {self.save_checkpoint()}; continue with {hint}")
            else:  # stopped inside an update: its weights, optimizer and environments are half-way
                saved = checkpoints.list_checkpoints(self.run_dir)
                print(f"stopped inside update {self.state.update + 1}: " + (
                    f"continue from the last checkpoint ({saved[-1].name}) with {hint}" if saved else
                    "no checkpoint was written yet; start the run again"))
            raise
        except Exception as error:
            if self.world.distributed and distributed.is_communication_failure(error):
                raise distributed.communication_error(error, self.world, self.config.distributed.timeout,
                                                      checkpoints.resume_hint(self.run_dir)) from None
            raise
        finally:
            bar.close()
            if loggers is not None:
                loggers.close()
            runs.unlock(self.run_dir)
        return self.state.history

    def _check_weights_finite(self, metrics: dict) -> None:
        """Stop the run when the update made a trained weight NaN or infinite (a loss that turned
        NaN does: its gradients are NaN), before it is checkpointed: the last checkpoint stays the
        last good one."""
        bad = checkpoints.non_finite({name: p.detach() for name, p in self.agent.named_parameters() if p.requires_grad})
        if not bad:
            return
        losses = [f"{key} {metrics[key]}" for key in sorted(metrics)
                  if key.endswith("loss") and isinstance(metrics[key], float) and not math.isfinite(metrics[key])]
        saved = checkpoints.list_checkpoints(self.run_dir)
        resume = (f"the last good checkpoint is {saved[-1].name}: resume from it (`groundrl train --resume "
                  f"{shlex.quote(str(self.run_dir))}`) with smaller learning rates or ppo.max_grad_norm" if saved else
                  "no checkpoint was written yet: start again with smaller learning rates or ppo.max_grad_norm")
        raise TrainingDivergedError(f"update {self.state.update} made trained weights NaN or infinite ({bad}"
                                    f"{'; ' + ', '.join(losses) if losses else ''}); it was not saved, and {resume}")

    def _open_run_folder(self) -> None:
        """Lock the folder, write its settings (once: a resumed run keeps its own), cut its
        records back to this state (a crash after the last checkpoint left later ones), and note
        the machine the updates from here run on (``machine.jsonl``: ``update``, the first). A run
        resumed with other settings (``--resume RUN KEY=VALUE``, for that session) notes them in
        ``settings_changes.jsonl``: the update from which they hold, and each one's value in
        ``config.yaml`` and now, so that the records say what the run trained with."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        runs.lock(self.run_dir)
        runs.cut_back_training_records(self.run_dir, self.state.update)
        runs.note_machine(self.run_dir, update=self.state.update + 1, device=str(self.agent.device),
                          processes=self.world.size)
        if not (self.run_dir / "config.yaml").exists() or not self.state.update:
            runs.save_config(self.run_dir, to_yaml(self.config))
            runs.save_env_spec(self.run_dir, self.config.env, self.config.env_options)
            return
        own, now = checkpoints.settings(load_run_config(self.run_dir)), checkpoints.settings(self.config)
        changed = {key: [own.get(key), value] for key, value in now.items() if own.get(key) != value}
        if changed:
            with (self.run_dir / runs.SETTINGS_CHANGES).open("a") as file:
                file.write(json.dumps({"update": self.state.update + 1, "decisions": self.state.decisions,
                                       "changed": changed}) + "\n")

    def update(self) -> tuple[dict, list[list[dict]]]:
        """One collection and one update; the update's metrics, and the episodes recorded."""
        every = self.config.trajectories_every
        if self.world.is_main and every and self.state.update % every == 0:
            self.collector.record_next(0)
        self.collector.fields = {"update": self.state.update + 1}
        started, played = time.perf_counter(), self.collector.decisions
        experience, episodes = self.algorithm.collect(self.collector)
        rollout_seconds = time.perf_counter() - started
        played = self.collector.decisions - played
        decisions = int(distributed.sum_over_ranks(torch.tensor(float(played), dtype=torch.float64)))
        self.state.advance(decisions)  # the clock counts the update once played: its learning rates step to the next's
        started = time.perf_counter()
        learning = self.algorithm.update(experience)
        update_seconds = time.perf_counter() - started
        return (self._record(decisions, episodes, rollout_seconds, update_seconds, learning),
                self.collector.take_recorded())

    def _record(self, decisions: int, episodes: EpisodeStats, rollout_seconds: float, update_seconds: float,
                learning: dict) -> dict:
        """Count the update's episodes, every rank's; its metrics: counters, episodes, ``learning``
        (the algorithm's own), speed and memory (``decisions``: the update's, every rank's)."""
        episodes = EpisodeStats(*(sum(parts, []) for parts in zip(*distributed.gather_objects(
            (episodes.returns, episodes.lengths, episodes.successes), everywhere=True))))
        self.state.episodes += len(episodes.returns)
        self.state.wall_seconds += rollout_seconds + update_seconds
        metrics = {"update": self.state.update, "decisions": self.state.decisions,
                   "wall_seconds": round(self.state.wall_seconds, 3), **episodes.summary(), **learning,
                   "decisions_per_second": decisions / (rollout_seconds + update_seconds),
                   "rollout_seconds": rollout_seconds, "update_seconds": update_seconds,
                   "memory_gib": distributed.max_over_ranks(distributed.peak_memory_gib(self.agent.device))}
        self.state.history.append(metrics)
        return metrics

    # -- state ------------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """Everything that continues this run exactly, as tensors and plain data: the trained
        weights, the counters, the algorithm's state, and this rank's own part (``rank``)."""
        return {
            "weights": {name: p.detach().cpu() for name, p in self.agent.named_parameters() if p.requires_grad},
            "state": asdict(self.state), "algorithm": self.algorithm.state_dict(),
            "action_generator": self.context.action_generator.get_state(),
            "rank": {"generator": self.context.generator.get_state(), **checkpoints.global_rng_state(),
                     "collector": self.collector.state_dict()},
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict` (``rank`` None: this rank's part was written by another
        number of processes, and its episodes and random streams start afresh)."""
        checkpoints.restore_weights(self.agent, state["weights"])
        self.algorithm.load_state_dict(state["algorithm"])
        self.context.action_generator.set_state(state["action_generator"])
        self.context.state = TrainState(**state["state"])
        own = state["rank"]
        if own is not None:
            self.context.generator.set_state(own["generator"])
            checkpoints.set_global_rng_state(own)
        if own is None or not self.collector.load_state_dict(own["collector"]):
            if own is not None and self.world.is_main:
                warnings.warn("an environment did not replay its episode to the saved state: the episodes under "
                              "way start over", stacklevel=2)
            total, group_size = self.config.rollout.num_envs, self.config.rollout.group_size
            # a group method's groups restart together, each from one seed
            self.collector.restart([runs.restart_seed(self.config.seed, self.state.update, total // group_size,
                                                      i // group_size) for i in self.env_indices])

    def save_checkpoint(self) -> Path:
        return checkpoints.save(self, keep=self.config.keep_checkpoints)


@contextmanager
def _update_finishes_first(enabled: bool) -> Iterator[Callable[[], bool]]:
    """While it is open, Ctrl-C (SIGINT) and SIGTERM (``kill``, a scheduler ending or preempting the
    job) are noted, not raised: the loop finishes the update under way, checkpoints and stops (it asks
    the returned function). A second one raises at once. A signal the process ignores (SIGINT in a
    shell script's background job) stays ignored."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    received = []

    def note(signum, frame):
        if received:
            raise KeyboardInterrupt
        received.append(signum)
        interrupted = signum == signal.SIGINT
        what, again = ("interrupted", "Ctrl-C again") if interrupted else ("terminated", "a second SIGTERM")
        print(f"\n{what}: finishing this update to save it ({again} stops now; the last checkpoint stays)",
              file=sys.stderr, flush=True)

    previous = {signum: signal.signal(signum, note) for signum in (signal.SIGINT, signal.SIGTERM)
                if signal.getsignal(signum) is not signal.SIG_IGN}
    try:
        yield lambda: bool(received)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def resume(path: str | Path, overrides: list[str] | tuple[str, ...] = (), *,
           config: TrainConfig | None = None) -> Trainer:
    """A trainer restored from a run folder (its latest checkpoint) or a checkpoint folder, with the
    run's own configuration (``overrides`` on top, e.g. ``rollout.total_decisions=100000``; those that
    change the weights' shapes are refused, others apply with a warning). Nothing loads before the
    checkpoint and the settings are checked (``config``: already checked, by
    :func:`~groundrl.train.checkpoint.check_resumable`)."""
    checkpoint, config = (checkpoints.find(path), config) if config else checkpoints.check_resumable(path, overrides)
    trainer = Trainer(config, checkpoint.parent.parent)
    state = checkpoints.load(checkpoint, trainer.world)
    try:
        trainer.load_state_dict(state)
    except checkpoints.CheckpointError as error:  # weights that do not fit, or are not numbers
        raise checkpoints.CheckpointError(f"checkpoint {checkpoint}: {error}") from None
    return trainer


make_trainer = Trainer  # the trainer of any agent kind (the algorithm follows agent.kind)
