"""The losses of policy optimization and the quantities they need (advantages, the policy's
distributions), each named as in the papers (Schulman et al. 2017; GAE: Schulman et al. 2016).

Pure functions of tensors, read top to bottom; the trainer calls them. Policies here are over
*variable* action sets: each decision has its own list of valid actions, so a batch of policy
logits is a list of 1-D tensors (or a padded 2-D tensor with ``-inf`` where no action is).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def generalized_advantage_estimation(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    next_value: torch.Tensor,
    gamma: float,
    gae_lambda: float,
    macro_steps: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns (value targets) of a rollout of T steps in N environments.

    Args:
        rewards: ``(T, N)``, each decision's reward.
        values: ``(T, N)``, the value of the state each decision was taken in.
        dones: ``(T, N)``; ``dones[t]`` is 1 when the episode ended with the decision of step t
            (the value after it is then not bootstrapped).
        next_value: ``(N,)``, the value of the state after the last step.
        gamma: the discount.
        gae_lambda: GAE's lambda.
        macro_steps: ``(T, N)``, the primitive steps each decision took; the discount of a
            decision of k steps is ``gamma ** k`` (semi-MDP, TWOSOME's Overcooked). Lambda is not
            raised to k.

    ``delta_t = r_t + discount_t * V(s_t+1) * (1 - done_t) - V(s_t)``,
    ``A_t = delta_t + discount_t * lambda * (1 - done_t) * A_t+1``, returns ``A_t + V(s_t)``.

    >>> r = torch.tensor([[0.0], [1.0]]); v = torch.tensor([[0.5], [0.5]]); d = torch.tensor([[0.0], [1.0]])
    >>> advantages, returns = generalized_advantage_estimation(r, v, d, torch.tensor([9.0]), 0.9, 0.8)
    >>> [round(a, 4) for a in advantages.flatten().tolist()]   # A_1 = 1 - 0.5; A_0 = 0.9 * 0.5 - 0.5 + 0.9 * 0.8 * 0.5
    [0.31, 0.5]
    """
    num_steps = rewards.shape[0]
    discounts = torch.full_like(rewards, gamma) if macro_steps is None else gamma ** macro_steps.to(rewards.dtype)
    advantages = torch.zeros_like(rewards)
    last_advantage = torch.zeros_like(next_value)
    for t in reversed(range(num_steps)):
        not_done = 1.0 - dones[t]
        following_value = next_value if t == num_steps - 1 else values[t + 1]
        delta = rewards[t] + discounts[t] * following_value * not_done - values[t]
        last_advantage = delta + discounts[t] * gae_lambda * not_done * last_advantage
        advantages[t] = last_advantage
    return advantages, advantages + values


def pad_logits(logits: Sequence[torch.Tensor]) -> torch.Tensor:
    """Stack per-decision logits of different lengths into ``(B, max_actions)``, ``-inf`` where a
    decision has no such action (so a softmax gives it probability 0).

    >>> pad_logits([torch.tensor([1.0, 2.0]), torch.tensor([3.0])])
    tensor([[1., 2.],
            [3., -inf]])
    """
    width = max(len(x) for x in logits)
    padded = logits[0].new_full((len(logits), width), float("-inf"))
    for i, x in enumerate(logits):
        padded[i, : len(x)] = x
    return padded


def log_probs_and_entropy(logits: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``log pi(a | s)`` of the actions taken and the policy's entropy, per row of padded logits
    (the entropy of a decision counts only its valid actions).

    >>> logp, entropy = log_probs_and_entropy(pad_logits([torch.zeros(4), torch.zeros(2)]), torch.tensor([0, 1]))
    >>> [round(x, 4) for x in entropy.tolist()]   # log 4, log 2
    [1.3863, 0.6931]
    """
    log_pi = torch.log_softmax(logits, dim=-1)
    taken = log_pi.gather(-1, actions[:, None]).squeeze(-1)
    # 0 * log 0 is 0 for the padding, not nan
    entropy = -(log_pi.exp() * torch.where(torch.isfinite(log_pi), log_pi, torch.zeros_like(log_pi))).sum(-1)
    return taken, entropy


def clipped_policy_loss(new_log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantages: torch.Tensor,
                        clip_coef: float, importance_weights: torch.Tensor | None = None
                        ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO's clipped surrogate objective, as a loss to minimize, and its diagnostics.

    ``ratio = pi_new / pi_old``; ``loss = mean(w * max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps)))``.
    ``w`` (``importance_weights``, 1 by default) is ``pi_old / mu`` when the actions were drawn from
    a behaviour policy ``mu`` other than ``pi_old`` (exploration): the objective of decoupled PPO
    (Hilton et al. 2021), whose full ratio is ``pi_new / mu``, the probability the action was taken
    with, while the trust region stays around ``pi_old``. Diagnostics: ``approx_kl`` (the low-variance
    estimator ``mean((ratio - 1) - log ratio)``) and ``clip_fraction`` (how often the ratio left
    ``[1 - eps, 1 + eps]``), both of ``pi_new`` against ``pi_old``.

    >>> loss, stats = clipped_policy_loss(torch.log(torch.tensor([1.5])), torch.zeros(1), torch.tensor([2.0]), 0.2)
    >>> round(loss.item(), 4), stats["clip_fraction"].item()   # the ratio 1.5 is clipped to 1.2
    (-2.4, 1.0)
    """
    log_ratio = new_log_prob - old_log_prob
    ratio = log_ratio.exp()
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    surrogate = torch.max(unclipped, clipped)
    loss = (surrogate if importance_weights is None else importance_weights * surrogate).mean()
    with torch.no_grad():
        stats = {
            "approx_kl": ((ratio - 1) - log_ratio).mean(),
            "clip_fraction": ((ratio - 1).abs() > clip_coef).float().mean(),
        }
    return loss, stats


def importance_weights(policy_log_prob: torch.Tensor, behaviour_log_prob: torch.Tensor,
                       max_weight: float) -> torch.Tensor:
    """``min(pi(a|s) / mu(a|s), max_weight)`` of each action taken with the behaviour policy ``mu``:
    1 where the two agree.

    >>> importance_weights(torch.log(torch.tensor([0.5, 0.1, 0.9])), torch.log(torch.tensor([0.5, 0.4, 0.3])), 2.0)
    tensor([1.0000, 0.2500, 2.0000])
    """
    return torch.clamp((policy_log_prob - behaviour_log_prob).exp(), max=max_weight)


def clipped_value_loss(new_values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
                       clip_coef: float | None) -> torch.Tensor:
    """``0.5 * mean(max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2))``; unclipped
    ``0.5 * mean((V - R)^2)`` when ``clip_coef`` is None.

    >>> clipped_value_loss(torch.tensor([2.0]), torch.tensor([0.0]), torch.tensor([1.0]), 0.5).item()
    0.5
    """
    unclipped = (new_values - returns) ** 2
    if clip_coef is None:
        return 0.5 * unclipped.mean()
    clipped = (old_values + torch.clamp(new_values - old_values, -clip_coef, clip_coef) - returns) ** 2
    return 0.5 * torch.max(unclipped, clipped).mean()


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> float:
    """``1 - Var(target - predicted) / Var(target)``: 1 is a perfect critic, 0 no better than a
    constant, nan when the targets do not vary.

    >>> explained_variance(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0]))
    1.0
    """
    variance = target.var(unbiased=False)
    if variance == 0:
        return float("nan")
    return float(1 - (target - predicted).var(unbiased=False) / variance)


def normalize(advantages: torch.Tensor, eps: float = 1e-8, mean_std: tuple[float, float] | None = None,
              std_floor: float = 0.0) -> torch.Tensor:
    """Zero mean and unit standard deviation (per minibatch, when the preset asks for it);
    ``mean_std`` replaces the tensor's own statistics (the whole minibatch's, when its decisions
    are spread over several processes). The division is by ``max(std, std_floor)``: advantages
    spread less than the floor (a rollout that saw no reward: value noise) stay small."""
    if mean_std is not None:
        mean, std = mean_std
        return (advantages - mean) / (max(std, std_floor) + eps)
    if advantages.numel() < 2:
        return advantages - advantages.mean()
    return (advantages - advantages.mean()) / (advantages.std().clamp(min=std_floor) + eps)


def sample_actions(probs: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """One action per row of ``probs`` (padded with zeros), by inverting its cumulative distribution
    at ``uniform`` (one number in [0, 1) per row): the caller owns the random numbers, so an
    environment gets the same draw however the environments are split over processes.

    >>> sample_actions(torch.tensor([[0.5, 0.5, 0.0], [0.1, 0.2, 0.7]]), torch.tensor([0.7, 0.05]))
    tensor([1, 0])
    """
    below = (probs.cumsum(-1) <= uniform.unsqueeze(-1)).sum(-1)
    positions = torch.arange(probs.shape[-1], device=probs.device).expand_as(probs)
    last_possible = torch.where(probs > 0, positions, -1).max(-1).values  # a total a hair under 1 ends there
    return torch.minimum(below, last_possible)


def self_imitation_losses(log_prob: torch.Tensor, returns: torch.Tensor, values: torch.Tensor,
                          max_advantage: float | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Self-imitation's losses (Oh et al. 2018) of kept decisions: the policy's
    ``-log pi(a | s) * max(G - V(s), 0)`` (the advantage a constant, capped at ``max_advantage``)
    and the critic's ``0.5 * max(G - V(s), 0) ** 2`` (it learns only to raise a value the return
    beat); and the share of decisions whose advantage is positive, the only ones that count.

    >>> log_prob = torch.log(torch.tensor([0.5, 0.25])).requires_grad_()
    >>> policy_loss, value_loss, positive = self_imitation_losses(log_prob, torch.tensor([1.0, 0.2]),
    ...                                                           torch.tensor([0.4, 0.5]))
    >>> round(policy_loss.item(), 4), round(value_loss.item(), 4), positive.item()   # (0.6 log 2) / 2; 0.36 / 4
    (0.2079, 0.09, 0.5)
    >>> policy_loss.backward(); log_prob.grad.tolist()   # the decision whose return fell short has no gradient
    [-0.30000001192092896, -0.0]
    """
    advantage = (returns - values).clamp(min=0.0)
    weight = advantage.detach() if max_advantage is None else advantage.detach().clamp(max=max_advantage)
    return -(log_prob * weight).mean(), 0.5 * advantage.pow(2).mean(), (weight > 0).float().mean()

