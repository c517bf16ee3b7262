"""The rollout buffer: what PPO learns from, its advantages, and its minibatches.

Each environment has its own valid actions at each decision, so the buffer keeps, per decision,
what the agent read (a prompt, or numbers), the valid actions and the index taken; the policy's
log-probability and the value at the time (and the log-probability the action was drawn with,
when a behaviour policy explored); the reward, whether the episode ended, and the
primitive steps the decision took (for the semi-MDP discount of macro-actions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

import torch

from groundrl.llm.cache import decision_key
from groundrl.train.losses import generalized_advantage_estimation


@dataclass
class RolloutBuffer:
    """``num_steps`` decisions of ``num_envs`` environments: tensors are ``(num_steps, num_envs)``,
    ``inputs`` and ``valid_actions`` flat in the same (step, environment) order."""

    inputs: list = field(default_factory=list)
    valid_actions: list[list[str]] = field(default_factory=list)
    # a list of (num_envs,) tensors while collecting, one (num_steps, num_envs) tensor after
    actions: list[torch.Tensor] | torch.Tensor = field(default_factory=list)
    log_probs: list[torch.Tensor] | torch.Tensor = field(default_factory=list)  # of the policy, pi_old
    behaviour_log_probs: list[torch.Tensor] | torch.Tensor = field(default_factory=list)  # of what acted, mu
    values: list[torch.Tensor] | torch.Tensor = field(default_factory=list)
    rewards: list[torch.Tensor] | torch.Tensor = field(default_factory=list)
    dones: list[torch.Tensor] | torch.Tensor = field(default_factory=list)
    macro_steps: list[torch.Tensor] | torch.Tensor = field(default_factory=list)
    advantages: torch.Tensor | None = None  # (num_steps, num_envs), after compute_advantages
    returns: torch.Tensor | None = None

    def add(self, inputs: Sequence, valid_actions: Sequence[list[str]], actions: torch.Tensor,
            log_probs: torch.Tensor, values: torch.Tensor, rewards: torch.Tensor, dones: torch.Tensor,
            macro_steps: torch.Tensor, behaviour_log_probs: torch.Tensor | None = None) -> None:
        """One decision of every environment (``behaviour_log_probs``: those of the policy that
        drew the actions, when not the learned one)."""
        self.inputs.extend(inputs)
        self.valid_actions.extend(valid_actions)
        behaviour_log_probs = log_probs if behaviour_log_probs is None else behaviour_log_probs
        for name, value in (("actions", actions), ("log_probs", log_probs),
                            ("behaviour_log_probs", behaviour_log_probs), ("values", values), ("rewards", rewards),
                            ("dones", dones), ("macro_steps", macro_steps)):
            getattr(self, name).append(value)

    def stacked(self, name: str) -> torch.Tensor:
        value = getattr(self, name)
        return value if isinstance(value, torch.Tensor) else torch.stack(value)

    def __len__(self) -> int:
        return len(self.inputs)

    def compute_advantages(self, next_value: torch.Tensor, gamma: float, gae_lambda: float) -> None:
        """Close the rollout (each quantity becomes one ``(num_steps, num_envs)`` tensor) and
        compute GAE, with the semi-MDP discount ``gamma ** k`` where a decision took k primitive steps."""
        for name in ("actions", "log_probs", "behaviour_log_probs", "values", "rewards", "dones", "macro_steps"):
            setattr(self, name, self.stacked(name))
        macro_steps = self.macro_steps
        self.advantages, self.returns = generalized_advantage_estimation(
            self.rewards, self.values, self.dones, next_value, gamma, gae_lambda,
            macro_steps=macro_steps if bool((macro_steps != 1).any()) else None)

    def flat(self, name: str) -> torch.Tensor:
        """A quantity per decision, in the order of ``inputs`` (after :meth:`compute_advantages`)."""
        return getattr(self, name).flatten()

    def minibatches(self, minibatch_size: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
        """The decisions' indices, shuffled, in minibatches of ``minibatch_size``."""
        order = torch.randperm(len(self), generator=generator)
        for start in range(0, len(self), minibatch_size):
            yield order[start : start + minibatch_size]

    def micro_batches(self, indices: torch.Tensor, size: int, group: bool = True) -> list[torch.Tensor]:
        """``indices`` in micro-batches (:func:`micro_batches`, over this buffer's decisions).

        >>> buffer = RolloutBuffer(inputs=["a", "b", "a", "c"], valid_actions=[["x"]] * 4)
        >>> buffer.micro_batches(torch.tensor([0, 1, 2, 3]), 2)
        [tensor([0, 2, 1]), tensor([3])]
        """
        return micro_batches(self.inputs, self.valid_actions, indices, size, group)


def micro_batches(inputs: Sequence, valid_actions: Sequence[Sequence[str]], indices: torch.Tensor, size: int,
                  group: bool = True) -> list[torch.Tensor]:
    """``indices`` (into ``inputs`` and ``valid_actions``) in micro-batches of ``size`` decisions or,
    with ``group``, of ``size`` distinct inputs with all of their decisions: the agent computes each
    distinct (input, valid actions) once, so equal decisions cost one. Inputs that are not text are
    never grouped."""
    if not group:
        return list(indices.split(size))
    groups: dict = {}
    for i in indices.tolist():
        key = decision_key(inputs[i])
        groups.setdefault((key, tuple(valid_actions[i])) if key is not None else i, []).append(i)
    decisions = list(groups.values())
    return [torch.tensor([i for equal in decisions[start:start + size] for i in equal])
            for start in range(0, len(decisions), size)]


def accumulate_gradients(micro_batches: Sequence[torch.Tensor], loss_of: Callable[[torch.Tensor], torch.Tensor],
                         no_sync: Callable[[], AbstractContextManager] | None = None,
                         total: float | None = None) -> None:
    """Backpropagate a minibatch's mean loss in micro-batches: ``loss_of(micro)`` is the mean loss
    of the decisions ``micro``; each is weighted by its share of the minibatch (of ``total``
    decisions; default: the micro-batches'). With ``no_sync`` (DistributedDataParallel's), gradients
    are averaged over the processes once, in the last micro-batch's backward pass: where processes
    hold unequal parts of a minibatch, ``total`` is its size over the number of processes, so that
    the average is the whole minibatch's mean."""
    total = total or sum(len(micro) for micro in micro_batches)
    for k, micro in enumerate(micro_batches):
        last = k == len(micro_batches) - 1
        with nullcontext() if last or no_sync is None else no_sync():
            (loss_of(micro) * len(micro) / total).backward()
