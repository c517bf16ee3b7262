"""PPO's quantities against values computed by hand."""

from __future__ import annotations

import math

import pytest
import torch

from groundrl.train.losses import (
    clipped_policy_loss,
    clipped_value_loss,
    explained_variance,
    generalized_advantage_estimation,
    log_probs_and_entropy,
    normalize,
    pad_logits,
)


def test_gae_by_hand_two_envs_with_an_episode_end():
    # env 0: three steps, its episode ends after step 1; env 1: no end, bootstrapped with next_value
    rewards = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
    values = torch.tensor([[0.5, 0.2], [0.4, 0.3], [0.1, 0.6]])
    dones = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    next_value = torch.tensor([0.7, 0.9])
    gamma, lam = 0.9, 0.8
    advantages, returns = generalized_advantage_estimation(rewards, values, dones, next_value, gamma, lam)

    # env 0, backwards: t=2 bootstraps with next_value; t=1 ends the episode; t=0 sees t=1
    d2 = 0.0 + gamma * 0.7 - 0.1
    a2 = d2
    d1 = 2.0 - 0.4
    a1 = d1
    d0 = 1.0 + gamma * 0.4 - 0.5
    a0 = d0 + gamma * lam * a1
    # env 1: no end
    e2 = 1.0 + gamma * 0.9 - 0.6
    e1 = 0.0 + gamma * 0.6 - 0.3 + gamma * lam * e2
    e0 = 0.0 + gamma * 0.3 - 0.2 + gamma * lam * e1
    expected = torch.tensor([[a0, e0], [a1, e1], [a2, e2]])
    torch.testing.assert_close(advantages, expected)
    torch.testing.assert_close(returns, expected + values)


def test_gae_with_semi_mdp_discount():
    # a macro-action of k primitive steps is discounted by gamma ** k; lambda is not raised to k
    rewards = torch.tensor([[0.0], [1.0]])
    values = torch.tensor([[0.2], [0.5]])
    dones = torch.zeros(2, 1)
    steps = torch.tensor([[3.0], [2.0]])
    gamma, lam = 0.99, 0.95
    advantages, _ = generalized_advantage_estimation(rewards, values, dones, torch.tensor([0.4]), gamma, lam, steps)
    a1 = 1.0 + gamma**2 * 0.4 - 0.5
    a0 = 0.0 + gamma**3 * 0.5 - 0.2 + gamma**3 * lam * a1
    torch.testing.assert_close(advantages.flatten(), torch.tensor([a0, a1]))
    ones, _ = generalized_advantage_estimation(rewards, values, dones, torch.tensor([0.4]), gamma, lam,
                                               torch.ones(2, 1))
    plain, _ = generalized_advantage_estimation(rewards, values, dones, torch.tensor([0.4]), gamma, lam)
    torch.testing.assert_close(ones, plain)


def test_policy_loss_clipping_by_hand():
    old = torch.log(torch.tensor([0.5, 0.5, 0.5, 0.5]))
    new = torch.log(torch.tensor([0.75, 0.25, 0.55, 0.75]))  # ratios 1.5, 0.5, 1.1, 1.5
    advantages = torch.tensor([1.0, 1.0, -2.0, -1.0])
    loss, stats = clipped_policy_loss(new, old, advantages, clip_coef=0.2)
    # per sample: max(-A r, -A clip(r)): -1.2 (clipped), -0.5 (unclipped: 0.5 < 0.8 but -0.5 > -0.8), 2.2, 1.5
    expected = (-1.2 + -0.5 + 2.2 + 1.5) / 4
    assert loss.item() == pytest.approx(expected)
    assert stats["clip_fraction"].item() == pytest.approx(0.75)  # 1.5, 0.5 and 1.5 are outside [0.8, 1.2]
    ratios = torch.tensor([1.5, 0.5, 1.1, 1.5])
    assert stats["approx_kl"].item() == pytest.approx(((ratios - 1) - ratios.log()).mean().item())


def test_value_loss_clipping_by_hand():
    new, old, target = torch.tensor([2.0, 0.1]), torch.tensor([1.0, 0.0]), torch.tensor([3.0, 1.0])
    # sample 0: unclipped (2-3)^2 = 1, clipped (1+0.2-3)^2 = 3.24 -> 3.24; sample 1: 0.81 vs 0.81
    assert clipped_value_loss(new, old, target, 0.2).item() == pytest.approx(0.5 * (3.24 + 0.81) / 2)
    assert clipped_value_loss(new, old, target, None).item() == pytest.approx(0.5 * (1.0 + 0.81) / 2)


def test_entropy_and_log_probs_over_variable_action_sets():
    logits = pad_logits([torch.tensor([0.0, 0.0, 0.0]), torch.log(torch.tensor([0.9, 0.1])), torch.tensor([5.0])])
    log_prob, entropy = log_probs_and_entropy(logits, torch.tensor([2, 1, 0]))
    torch.testing.assert_close(log_prob, torch.tensor([math.log(1 / 3), math.log(0.1), 0.0]))
    h2 = -(0.9 * math.log(0.9) + 0.1 * math.log(0.1))
    torch.testing.assert_close(entropy, torch.tensor([math.log(3), h2, 0.0]))
    assert not torch.isnan(entropy).any()


def test_gradients_do_not_leak_into_padding():
    raw = [torch.tensor([0.3, -0.2], requires_grad=True), torch.tensor([1.0, 2.0, 3.0], requires_grad=True)]
    log_prob, entropy = log_probs_and_entropy(pad_logits(raw), torch.tensor([1, 0]))
    (log_prob.sum() + entropy.sum()).backward()
    assert all(torch.isfinite(x.grad).all() for x in raw)


def test_explained_variance_and_normalize():
    assert explained_variance(torch.zeros(4), torch.tensor([1.0, 2.0, 3.0, 4.0])) == pytest.approx(0.0)
    assert math.isnan(explained_variance(torch.zeros(3), torch.ones(3)))
    x = normalize(torch.tensor([1.0, 2.0, 3.0]))
    assert x.mean().item() == pytest.approx(0.0, abs=1e-6) and x.std().item() == pytest.approx(1.0, abs=1e-4)
    assert normalize(torch.tensor([5.0])).item() == 0.0


def test_normalize_floor_keeps_noise_small():
    noise = torch.tensor([1e-3, -2e-3, 3e-3, 0.0])
    floored = normalize(noise, std_floor=0.05)
    assert floored.abs().max().item() < 0.1 and floored.mean().item() == pytest.approx(0.0, abs=1e-7)
    assert normalize(noise).std().item() == pytest.approx(1.0, abs=1e-4)  # without the floor: unit size
    signal = torch.tensor([0.0, 0.0, 0.9, 0.1])
    assert torch.allclose(normalize(signal, std_floor=0.05), normalize(signal))  # spread above the floor: unchanged
    # the distributed path (the whole minibatch's statistics) takes the same floor
    assert torch.allclose(normalize(noise, mean_std=(0.0, 2e-3), std_floor=0.05), noise / 0.05)
