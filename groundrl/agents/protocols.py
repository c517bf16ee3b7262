"""The contracts of agents, as code: what evaluation plays, and what each trainer trains.

Every agent is a :class:`Policy`: it reads each environment's observation and ``info`` and gives a
probability vector over that step's valid actions, and a choice. A :class:`ActorCritic` (the LLM
agent, the symbolic baseline) is what PPO trains; a :class:`QAgent` (DRRN) what Q-learning trains.

>>> from groundrl.agents import RandomAgent, DRRNAgent
>>> isinstance(RandomAgent(), Policy), isinstance(DRRNAgent(), QAgent), isinstance(DRRNAgent(), ActorCritic)
(True, True, False)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import torch

Generators = torch.Generator | Sequence[torch.Generator] | None
"""One generator for every environment, one per environment (each episode its own random
stream: evaluation), or None (torch's global one)."""


def choose(probs: Sequence[torch.Tensor], greedy: bool = False, generator: Generators = None) -> list[int]:
    """An action index per probability vector: sampled (with ``generator``, or the k-th of a list
    of them for the k-th vector), or the most probable with ``greedy``.

    >>> choose([torch.tensor([0.1, 0.9]), torch.tensor([1.0, 0.0])], greedy=True)
    [1, 0]
    """
    if greedy:
        return [int(p.argmax()) for p in probs]
    generators = generator if isinstance(generator, Sequence) else [generator] * len(probs)
    return [int(torch.multinomial(p.float(), 1, generator=g)) for p, g in zip(probs, generators)]


@dataclass
class AgentOutput:
    """Per decision: the policy's logits over its valid actions, and the state's value."""

    logits: list[torch.Tensor]
    values: torch.Tensor


@runtime_checkable
class Policy(Protocol):
    """An agent :func:`groundrl.eval.evaluate` can play."""

    def act(self, observations: Sequence[Any], valid_actions: Sequence[Sequence[str]], *,
            infos: Sequence[dict] | None = None, envs: Sequence[gym.Env] | None = None, greedy: bool = False,
            generator: Generators = None) -> tuple[list[int], list[torch.Tensor]]:
        """One chosen index into each environment's valid actions, and the probability vectors
        the choices were drawn from. ``infos`` are the environments' ``info`` dicts (for agents
        that read more than the text), ``envs`` the environments themselves (for agents that plan
        on the true state)."""


@runtime_checkable
class ActorCritic(Policy, Protocol):
    """What PPO trains: a policy and a value function over what :meth:`observe` makes of a step.
    Gradients are on or off as the caller's ``torch`` grad mode says."""

    device: torch.device

    def observe(self, observation: Any, info: dict) -> Any:
        """What the agent reads of one step (a prompt; numbers from ``info``)."""

    def forward(self, inputs: Sequence[Any], valid_actions: Sequence[Sequence[str]], *, values: bool = True,
                policy: bool = True) -> AgentOutput:
        """Logits over each decision's valid actions (``policy``) and state values (``values``);
        what is not asked may be left out (``[]``, zeros)."""

    def actor_parameters(self) -> list[torch.nn.Parameter]: ...

    def critic_parameters(self) -> list[torch.nn.Parameter]: ...

    def reference_logits(self, inputs: Sequence[Any], valid_actions: Sequence[Sequence[str]]
                         ) -> list[torch.Tensor] | None:
        """The untrained policy's logits of each decision (for the KL to it), or None when there
        is no such policy at no cost."""


@runtime_checkable
class QAgent(Policy, Protocol):
    """What Q-learning trains: ``Q(s, a)`` of every valid action."""

    device: torch.device

    def observe(self, observation: Any, info: dict) -> Any: ...

    def q_values(self, inputs: Sequence[Any], valid_actions: Sequence[Sequence[str]]) -> list[torch.Tensor]: ...

    def forward(self, inputs: Sequence[Any], valid_actions: Sequence[Sequence[str]]) -> list[torch.Tensor]:
        """:meth:`q_values`, the entry point DistributedDataParallel wraps."""

    def parameters(self): ...
