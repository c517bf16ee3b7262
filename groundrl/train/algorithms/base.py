"""What every algorithm is to the trainer: collect, update, and a state to checkpoint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch

from groundrl.train.collector import Collector, EpisodeStats
from groundrl.train.config import TrainConfig
from groundrl.train.distributed import World


@dataclass
class AlgorithmContext:
    """What an algorithm is given: the run's settings, this process's place among the processes,
    its environments (by global index) and its random streams."""

    config: TrainConfig
    world: World
    env_indices: range  # this process's environments, by global index
    generator: torch.Generator  # this process's own: minibatch order, replay sampling, exploration
    # the actions' random numbers, drawn for every environment on every process (each using its
    # slice), so that an environment's episode does not depend on how many processes share the work
    action_generator: torch.Generator


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
