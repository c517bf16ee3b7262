"""What ``groundrl train`` does, as a plan checked before anything loads, and starting it.

:func:`plan_training` reads the settings (a preset, files, ``KEY=VALUE`` overrides; or a run to
resume; or an export to start from) and checks them and everything they name, and returns a
:class:`TrainPlan`. With ``nproc`` processes asked for, :func:`torchrun_command` is the command that
runs the training under PyTorch's launcher instead. :func:`start_training` then joins the process
group, creates the run folder (or locks the resumed one) and builds the trainer; a command that
fails before training wrote anything leaves no folder behind. :func:`summary` is what a finished
training says.

>>> plan = plan_training(["rollout.total_decisions=16"], preset="symbolic-ppo", env="groundrl/FoodPreparation-v0")
>>> plan.config.rollout.total_decisions, plan.resuming, plan.nproc
(16, False, None)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundrl import runs
from groundrl.errors import InvalidArgumentError
from groundrl.train import checkpoint as checkpoints
from groundrl.train import distributed
from groundrl.train import export as exports
from groundrl.train.config import TrainConfig, check_runnable, check_split, load_config
from groundrl.train.distributed import World
from groundrl.train.trainer import Trainer, resume


@dataclass(frozen=True)
class TrainPlan:
    """A training checked and ready to start: its settings and where it begins."""

    config: TrainConfig
    """The settings, checked (a new run saves them in its run folder)."""
    checkpoint: Path | None = None
    """The checkpoint a resumed run continues from; None: a new run in ``config.runs_dir``."""
    nproc: int | None = None
    """The processes torchrun is to start on this machine (:func:`torchrun_command`); None: this
    process trains, alone or as one of the processes of a launched run."""

    @property
    def resuming(self) -> bool:
        """Whether the plan continues a run (its own folder) rather than starting a new one."""
        return self.checkpoint is not None

    @property
    def run_dir(self) -> Path | None:
        """The folder of the run being resumed; None for a new run (its folder is created at the start)."""
        return self.checkpoint.parent.parent if self.checkpoint is not None else None


def plan_training(overrides: Sequence[str] = (), *, preset: str = "default", files: Sequence[str | Path] = (),
                  env: str | None = None, model: str | None = None, resume: str | Path | None = None,
                  init: str | Path | None = None, nproc: int | None = None) -> TrainPlan:
    """A training's plan: the settings (``preset``, then ``files``, then ``overrides``, then ``env``
    and ``model``; or the run ``resume`` names with ``overrides`` on top; or ``init``'s export under
    them all) checked, and every thing they name, before a model loads or a run folder is created.
    ``nproc`` above 1 asks for that many processes, unless this process is one of a launched run.

    Raises:
        GroundrlError: one line saying which setting or file is wrong.
    """
    overrides = list(overrides)
    # paths and ids given apart are taken as they are, never read as KEY=VALUE (YAML): a '#' or '${' in a
    # path stays part of it
    values = {key: value for key, value in (("env", env), ("model", model)) if value is not None}
    checkpoint = None
    if resume is not None and init is not None:
        raise InvalidArgumentError("--resume continues a run with its own weights; --init starts a new one: give one "
                                   "of them")
    if resume is not None:  # the checkpoint and the settings are checked before anything loads
        checkpoint, config = checkpoints.check_resumable(resume, overrides, values)
    else:
        exported = exports.init_settings(init) if init is not None else None  # not an export: one line
        config = load_config(preset, files=files, overrides=overrides, values=values, exported=exported)
        runs.check_runs_dir(Path(config.runs_dir), option="runs_dir")
        if config.init:
            exports.check_init(config)
    check_runnable(config)
    launch = nproc is not None and nproc > 1 and "WORLD_SIZE" not in os.environ  # WORLD_SIZE: launched already
    if launch:
        check_split(config, nproc)  # here, in one process: the error prints once
    return TrainPlan(config, checkpoint, nproc if launch else None)


def torchrun_command(nproc: int, args: Sequence[str]) -> list[str]:
    """The command that runs ``groundrl ARGS`` (``--nproc`` dropped) in ``nproc`` processes on this
    machine, under PyTorch's launcher.

    >>> torchrun_command(2, ["train", "--nproc", "2", "env=x", "--nproc=2"])[-4:]
    ['-m', 'groundrl', 'train', 'env=x']
    """
    rest, args = [], list(args)
    while args:
        arg = args.pop(0)
        if arg == "--nproc":
            args.pop(0)
        elif not arg.startswith("--nproc="):
            rest.append(arg)
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
            "-m", "groundrl", *rest]


def _quiet(*args: Any, **kwargs: Any) -> None:
    pass


@contextmanager
def start_training(plan: TrainPlan, *, say: Callable[..., Any] = print) -> Iterator[Trainer]:
    """The trainer of ``plan``, in the run's process group and run folder, for the ``with`` block to
    train: a resumed run's folder is locked first (a second writer is refused before it loads
    anything); a new run's is created by rank 0. A new run's folder is removed again when the block
    (or the start) fails before training wrote anything; the process group is left at the end.
    ``say`` (rank 0's only) tells what loads and the plan."""
    config = plan.config
    spread = config.distributed
    world = distributed.setup(spread.timeout, spread.backend.value, config.device, spread.cpu_threads)
    say = say if world.is_main else _quiet  # rank 0 speaks for the run
    created = None  # a new run's folder, this process's to remove if the command fails
    try:
        if plan.resuming:
            if world.is_main:
                runs.lock(plan.run_dir)
            trainer = resume(plan.checkpoint, config=config)
            say(f"resuming {plan.run_dir} at update {trainer.state.update} ({trainer.state.decisions} decisions)")
        else:
            created = runs.new_run_dir(config.runs_dir, "train", config.env) if world.is_main else None
            run_dir = Path(distributed.broadcast_object(str(created)))
            what = (f"model {config.model or 'default'}" if config.agent.kind == "llm" else
                    f"{config.agent.kind.value} agent")
            say(f"run folder: {run_dir}\nloading {what} ...")
            trainer = Trainer(config, run_dir)
            say(f"{getattr(trainer.agent, 'llm', type(trainer.agent).__name__)}; {plan_line(config, world)}")
        yield trainer
    except BaseException:
        if created is not None:
            runs.remove_if_unused(created)  # a command that failed before training leaves no empty folder
        raise
    finally:
        distributed.shutdown()


def plan_line(config: TrainConfig, world: World) -> str:
    """How a new run spends its budget: PPO's updates, or a group method's decisions; and over how
    many processes.

    >>> plan_line(load_config("twosome", overrides=["rollout.total_decisions=1280"]), World(size=2))
    '10 updates of 128 decisions over 2 processes'
    """
    rollout = config.rollout
    plan = (f"{rollout.total_decisions} decisions in updates of whole episodes of groups of {rollout.group_size} "
            f"({config.algorithm.value})" if config.group_method else
            f"{config.num_updates} updates of {rollout.decisions_per_update} decisions")
    return plan + (f" over {world.size} processes" if world.distributed else "")


def summary(trainer: Trainer) -> list[str]:
    """What a training says when it ends: its decisions and time, the last update's success, and
    where its files are."""
    history = trainer.state.history
    last = history[-1] if history else {}
    shown = ", ".join(f"{key} {last[key]:.3f}" for key in ("success_rate", "episode_return") if key in last)
    return [f"done: {trainer.state.decisions} decisions in {trainer.state.wall_seconds:.0f} s; last update: "
            f"{shown or 'no finished episode'}",
            f"run folder: {trainer.run_dir}  (config.yaml, metrics.jsonl, tensorboard/, checkpoints/, "
            "learning_curves.png)"]
