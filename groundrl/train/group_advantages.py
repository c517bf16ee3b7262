"""The advantages of the critic-free group methods, each named as in the papers.

A *group* is ``G`` episodes ``tau_1 .. tau_G`` played by the same policy from the same start (the
same environment, reset with the same seed). Nothing is learned about values: each decision's
advantage compares what followed it with what followed the group's other decisions.

**GRPO** (Shao et al. 2024, DeepSeekMath; the episode as its "output") gives every decision of
``tau_i`` the episode-level advantage

    A^E(tau_i) = (R(tau_i) - mean_j R(tau_j)) / F_norm,   R(tau_i) = sum_t r_t^(i),

with ``F_norm = std_j R(tau_j) + eps`` (Bessel's standard deviation, as ``torch.std``), or 1 without
``std_scaling`` (Dr. GRPO, Liu et al. 2025). ``R`` is what the environment paid, undiscounted; an
episode cut by the time limit counts what it got (no critic bootstraps it). A group whose returns
are all equal teaches nothing: its advantages are 0.

**GiGPO** (Feng et al. 2025, arXiv 2505.10978) adds a step-level advantage. Decisions taken in the
same environment state, across the group's episodes or repeated within one, form a *step group*
(their state is an *anchor state* ``s~``)::

    G^S(s~) = {(a_t^(i), R_t^(i)) : s_t^(i) = s~},   R_t^(i) = sum_{k >= t} gamma^(k - t) r_k^(i),

and each decision in it gets ``A^S(a_t^(i)) = (R_t^(i) - mean_{G^S(s~)} R) / F_norm`` over its step
group (0 in a step group of one). The return from ``t`` is discounted per decision, or per primitive
step where a decision took ``k`` of them (``gamma ** k``, as PPO's semi-MDP discount). Then

    A(a_t^(i)) = A^E(tau_i) + omega * A^S(a_t^(i)).

Both feed PPO's clipped surrogate (:func:`groundrl.train.losses.clipped_policy_loss`) with a KL
penalty to the untrained policy, and no value loss.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

from groundrl.train.losses import normalize


@dataclass
class GroupEpisode:
    """One episode of a group, as its advantages need it: per decision, the reward, the discount
    to the next decision (``gamma ** primitive steps``) and the key of the state it was taken in."""

    rewards: Sequence[float]
    discounts: Sequence[float]
    states: Sequence[Hashable]

    @property
    def total_return(self) -> float:
        return float(sum(self.rewards))


def relative(values: Sequence[float], std_scaling: bool = True, eps: float = 1e-6) -> list[float]:
    """``(x - mean) / (std + eps)`` of each value against all of them (``x - mean`` without
    ``std_scaling``); 0 for one value alone.

    >>> [round(a, 4) for a in relative([1.0, 0.0, 0.0, 1.0])]   # mean 0.5, std 0.5774
    [0.866, -0.866, -0.866, 0.866]
    >>> relative([2.0, 2.0, 2.0])
    [0.0, 0.0, 0.0]
    """
    x = torch.tensor(values, dtype=torch.float64)
    return (normalize(x, eps) if std_scaling and len(x) > 1 else x - x.mean()).tolist()


def discounted_returns(rewards: Sequence[float], discounts: Sequence[float]) -> list[float]:
    """``R_t = r_t + discount_t * R_t+1`` of every decision of an episode (``R_T+1 = 0``).

    >>> discounted_returns([0.0, 0.0, 1.0], [0.5, 0.5, 0.5])
    [0.25, 0.5, 1.0]
    """
    returns, following = [0.0] * len(rewards), 0.0
    for t in reversed(range(len(rewards))):
        following = rewards[t] + discounts[t] * following
        returns[t] = following
    return returns


def episode_advantages(group: Sequence[GroupEpisode], std_scaling: bool = True, eps: float = 1e-6) -> list[float]:
    """``A^E(tau_i)`` of each episode of a group."""
    return relative([episode.total_return for episode in group], std_scaling, eps)


def step_advantages(group: Sequence[GroupEpisode], std_scaling: bool = True, eps: float = 1e-6
                    ) -> tuple[list[list[float]], list[int]]:
    """``A^S`` of every decision of every episode of a group (per episode, per decision), and the
    size of the step group of every decision (same layout, flat)."""
    returns = [discounted_returns(e.rewards, e.discounts) for e in group]
    members: dict[Hashable, list[tuple[int, int]]] = {}  # anchor state -> its decisions (episode, step)
    for i, episode in enumerate(group):
        for t, state in enumerate(episode.states):
            members.setdefault(state, []).append((i, t))
    advantages = [[0.0] * len(e.rewards) for e in group]
    sizes = [[1] * len(e.rewards) for e in group]
    for decisions in members.values():
        for (i, t), advantage in zip(decisions, relative([returns[i][t] for i, t in decisions], std_scaling, eps)):
            advantages[i][t], sizes[i][t] = advantage, len(decisions)
    return advantages, [size for per_episode in sizes for size in per_episode]


def group_advantages(group: Sequence[GroupEpisode], omega: float | None = None, std_scaling: bool = True,
                     eps: float = 1e-6) -> tuple[list[list[float]], list[int]]:
    """The advantage of every decision of a group (per episode, per decision): GRPO's ``A^E``
    alone (``omega`` None), or GiGPO's ``A^E + omega * A^S``; and the step-group size of every
    decision (flat; all 1 for GRPO, which has none).

    >>> group = [GroupEpisode([0.0, 1.0], [0.9, 0.9], ["s", "t"]), GroupEpisode([0.0, 0.0], [0.9, 0.9], ["s", "u"])]
    >>> advantages, sizes = group_advantages(group, omega=1.0, std_scaling=False)
    >>> advantages, sizes   # A^E = +-0.5; in s, the returns 0.9 and 0: A^S = +-0.45
    ([[0.95, 0.5], [-0.95, -0.5]], [2, 1, 2, 1])
    """
    episode_level = episode_advantages(group, std_scaling, eps)
    if omega is None:
        return [[a] * len(e.rewards) for a, e in zip(episode_level, group)], [1] * sum(len(e.rewards) for e in group)
    step_level, sizes = step_advantages(group, std_scaling, eps)
    return [[a + omega * s for s in steps] for a, steps in zip(episode_level, step_level)], sizes
