"""Exploration beyond sampling the learned policy: what a rollout acts with, and what it is paid for
seeing something new (the ``explore`` settings, :class:`~groundrl.train.config.ExplorationConfig`).

A small model's prior can be worse than uniform (SmolLM2-135M succeeds in Food Preparation with
probability 0.0012 per episode, uniform play with 0.017): then the first success is a lottery. Two
levers, each a setting, each annealed over the start of training:

- a *behaviour policy* ``mu`` that differs from the learned ``pi`` while collecting: a softmax
  temperature on the policy's logits, then a mixture with the uniform distribution over the valid
  actions (epsilon). PPO corrects for it (:func:`groundrl.train.ppo.clipped_policy_loss`'s
  importance weights ``pi_old / mu``);
- a *novelty bonus* ``beta / sqrt(n)`` for reaching an observation seen ``n`` times (this one
  included) in the whole run, counted over hashed text: directed exploration toward states not yet
  seen, which a flatter policy alone is not.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Sequence

import torch


def linear_schedule(start: float, end: float | None, anneal: float, progress: float) -> float:
    """``start`` moved linearly to ``end`` over the first ``anneal`` of training (``progress`` the
    fraction of the budget done, in [0, 1]), then held; ``end`` None keeps ``start``.

    >>> [linear_schedule(0.4, 0.0, 0.5, p) for p in (0.0, 0.25, 0.5, 1.0)]
    [0.4, 0.2, 0.0, 0.0]
    """
    if end is None:
        return start
    fraction = min(1.0, progress / anneal) if anneal > 0 else 1.0
    return start + (end - start) * fraction


def behaviour_probabilities(logits: torch.Tensor, temperature: float = 1.0, epsilon: float = 0.0) -> torch.Tensor:
    """``mu = (1 - epsilon) * softmax(logits / temperature) + epsilon * uniform`` over each row's valid
    actions (padded logits: ``-inf`` where a row has no action; those stay at probability 0).

    >>> logits = torch.tensor([[0.0, 2.0, float("-inf")]])
    >>> behaviour_probabilities(logits, epsilon=1.0).tolist()   # uniform over the two valid actions
    [[0.5, 0.5, 0.0]]
    >>> torch.allclose(behaviour_probabilities(logits), torch.softmax(logits, -1))
    True
    """
    valid = torch.isfinite(logits)
    policy = torch.softmax(logits / temperature, -1)
    if epsilon == 0:
        return policy
    uniform = valid.float() / valid.sum(-1, keepdim=True)
    return (1 - epsilon) * policy + epsilon * uniform


def observation_key(observation) -> int:
    """A stable 64-bit hash of an observation's text (the same in every process and every run,
    unlike ``hash``, so that counts survive a checkpoint)."""
    return int.from_bytes(hashlib.blake2b(str(observation).encode(), digest_size=8).digest(), "little")


class NoveltyCounts:
    """How often each observation was reached in the run, and the bonus for reaching one.

    Reaching an observation counts it first: the bonus of the n-th visit is ``beta / sqrt(n)``, so the
    first visit pays ``beta`` and a state seen often pays nearly nothing.

    >>> counts = NoveltyCounts()
    >>> counts.visit(["kitchen", "kitchen", "bedroom", "kitchen"], beta=0.5)
    [0.5, 0.35355339059327373, 0.5, 0.2886751345948129]
    >>> len(counts)
    2
    """

    def __init__(self):
        self.counts: Counter[int] = Counter()

    def __len__(self) -> int:
        return len(self.counts)

    def visit(self, observations: Sequence, beta: float) -> list[float]:
        """Count each observation, in order; the bonus of each visit."""
        bonuses = []
        for observation in observations:
            key = observation_key(observation)
            self.counts[key] += 1
            bonuses.append(beta / self.counts[key] ** 0.5)
        return bonuses

    def state_dict(self) -> dict:
        return {"keys": list(self.counts), "counts": list(self.counts.values())}

    def load_state_dict(self, state: dict) -> None:
        self.counts = Counter(dict(zip(state["keys"], state["counts"])))
