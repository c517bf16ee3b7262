"""Exploration beyond sampling the learned policy: what a rollout acts with, and what it is paid for
seeing something new (the ``explore`` settings, :class:`~groundrl.train.config.ExplorationConfig`).

A small model's prior can be worse than uniform (SmolLM2-135M succeeds in Food Preparation with
probability 0.0012 per episode, uniform play with 0.017): then the first success is a lottery. Two
levers, each a setting, each annealed over the start of training:

- a *behaviour policy* ``mu`` that differs from the learned ``pi`` while collecting: a softmax
  temperature on the policy's logits, then a mixture with the uniform distribution over the valid
  actions (epsilon). PPO corrects for it (:func:`groundrl.train.losses.clipped_policy_loss`'s
  importance weights ``pi_old / mu``);
- a *novelty bonus* ``beta / sqrt(n)`` for reaching an observation seen ``n`` times (this one
  included) in the whole run, counted over hashed text: directed exploration toward states not yet
  seen, which a flatter policy alone is not. The group methods count an update's visits once it
  is over (:meth:`NoveltyCounts.bonus_within`), so that the episodes of a group stay independent.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence

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

    def bonus_now(self, key: int, beta: float) -> float:
        """The bonus the last visit of the observation whose key is ``key`` paid, at ``beta``:
        ``beta / sqrt(n)`` with ``n`` its visits so far (at least 1)."""
        return beta / max(1, self.counts[key]) ** 0.5

    def bonus_within(self, episode: Counter, observation, beta: float) -> float:
        """The bonus of reaching ``observation`` in an episode of a group method: ``beta / sqrt(n)``
        with ``n`` its visits in the run before this update plus its visits in this episode
        (``episode``, counted here, this one included). The run's counts stay as they are until
        :meth:`add` takes the update's visits, so an episode's bonuses do not depend on what the
        other episodes of its group reached first.

        >>> counts, episode = NoveltyCounts(), Counter()
        >>> counts.add(["kitchen"])
        >>> [round(counts.bonus_within(episode, o, beta=0.5), 4) for o in ("kitchen", "bedroom", "bedroom")]
        [0.3536, 0.5, 0.3536]
        >>> counts.bonus_within(Counter(), "bedroom", beta=0.5)   # another episode: its own visits only
        0.5
        """
        key = observation_key(observation)
        episode[key] += 1
        return beta / (self.counts[key] + episode[key]) ** 0.5

    def add(self, observations: Sequence) -> None:
        """Count the visits of ``observations`` (an update's, once it is over)."""
        self.counts.update(observation_key(observation) for observation in observations)

    def state_dict(self) -> dict:
        return {"keys": list(self.counts), "counts": list(self.counts.values())}

    def load_state_dict(self, state: dict) -> None:
        self.counts = Counter(dict(zip(state["keys"], state["counts"])))
