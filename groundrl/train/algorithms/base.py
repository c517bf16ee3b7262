"""What every algorithm is to the trainer: collect, update, and a state to checkpoint; and what it is
given: the run's settings, its place among the processes, its random streams and the run's clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from groundrl.train.collector import Collector, EpisodeStats
from groundrl.train.config import TrainConfig
from groundrl.train.distributed import World


@dataclass
class TrainState:
    """The run's counters, which a resumed run continues from; ``update`` and ``decisions`` are the
    clock every schedule reads (:meth:`progress`)."""

    update: int = 0  # updates done (the one under way counts once its experience is collected)
    decisions: int = 0  # decisions played, over every process
    episodes: int = 0
    wall_seconds: float = 0.0
    history: list = field(default_factory=list)  # the metrics of every update so far

    def progress(self, config: TrainConfig) -> float:
        """The share of the training budget done (:meth:`TrainConfig.budget_share`)."""
        return config.budget_share(self.update, self.decisions)

    def advance(self, decisions: int) -> None:
        """Count an update that played ``decisions`` (over every process)."""
        self.update += 1
        self.decisions += decisions


@dataclass
class AlgorithmContext:
    """What an algorithm is given: the run's settings, this process's place among the processes,
    its environments (by global index), its random streams and the run's clock."""

    config: TrainConfig
    world: World
    env_indices: range  # this process's environments, by global index
    generator: torch.Generator  # this process's own: minibatch order, replay sampling, exploration
    # the actions' random numbers, drawn for every environment on every process (each using its
    # slice), so that an environment's episode does not depend on how many processes share the work
    action_generator: torch.Generator
    # the trainer's counters: collect reads the update under way's progress; by update's time the
    # trainer has counted it (the learning rates step to the next update's)
    state: TrainState = field(default_factory=TrainState)


class Algorithm(Protocol):
    """One update = :meth:`collect` then :meth:`update`."""

    optimizers: dict[str, torch.optim.Optimizer]

    def collect(self, collector: Collector) -> tuple[Any, EpisodeStats]:
        """Play ``rollout.num_steps`` decisions in every environment; the experience to learn from
        and the episodes that ended."""

    def update(self, experience: Any) -> dict[str, float]:
        """Learn from the experience; the update's metrics (averaged over the processes)."""

    def state_dict(self) -> dict:
        """Tensors and plain data that continue the algorithm exactly (optimizers, replay memory)."""

    def load_state_dict(self, state: dict) -> None: ...
