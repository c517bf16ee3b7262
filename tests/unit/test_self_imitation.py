"""Self-imitation (``sil``): its losses against a hand computation, the memory of the best
episodes, their decisions rebuilt exactly by replay, and its place in PPO's and GRPO's updates."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from groundrl.envs import make_env
from groundrl.train.algorithms.policy import Statistics
from groundrl.train.losses import self_imitation_losses
from groundrl.train.self_imitation import (
    PRIORITY_FLOOR,
    EpisodeMemory,
    ImitatedDecision,
    KeptEpisode,
    SelfImitation,
    relabelled,
    replay,
)
from groundrl.train.trainer import Trainer, resume

SIL = ("sil.enabled=true", "sil.capacity=4", "sil.steps=2", "sil.batch_size=4")


# -- the losses ------------------------------------------------------------------------------------

def test_only_decisions_whose_return_beat_the_value_move_the_policy_and_the_critic():
    log_prob = torch.log(torch.tensor([0.5, 0.2, 0.9])).requires_grad_()
    values = torch.tensor([0.0, 2.0, 0.5], requires_grad=True)
    returns = torch.tensor([1.0, 1.0, 3.0])
    policy_loss, value_loss, positive = self_imitation_losses(log_prob, returns, values, max_advantage=2.0)
    (policy_loss + value_loss).backward()
    # advantages 1, 0 (1 - 2 < 0), 2.5 capped at 2 for the policy; the critic's are uncapped
    assert policy_loss.item() == pytest.approx(-(np.log(0.5) * 1 + np.log(0.9) * 2) / 3)
    assert value_loss.item() == pytest.approx(0.5 * (1 + 2.5**2) / 3)
    assert positive.item() == pytest.approx(2 / 3)
    assert log_prob.grad.tolist() == pytest.approx([-1 / 3, 0.0, -2 / 3])
    assert values.grad.tolist() == pytest.approx([-1 / 3, 0.0, -2.5 / 3])  # d/dV 0.5 (G - V)^2 / 3


# -- the memory ------------------------------------------------------------------------------------

def test_the_memory_keeps_the_best_episodes_by_return_the_most_recent_among_equals():
    memory = EpisodeMemory(3)
    memory.offer([KeptEpisode(s, [0], r, 1) for s, r in ((1, 0.0), (2, 1.0), (3, 0.5), (4, 1.0))])
    assert [e.seed for e in memory.episodes] == [2, 4, 3]
    kept = memory.offer([KeptEpisode(5, [1], 1.0, 2), KeptEpisode(6, [1], 0.2, 2)])
    assert [e.seed for e in memory.episodes] == [5, 2, 4] and [e.seed for e in kept] == [5]
    saved = json.loads(json.dumps(memory.state_dict()))  # plain data
    restored = EpisodeMemory(3)
    restored.load_state_dict(saved)
    assert restored.episodes == memory.episodes


def test_decisions_are_drawn_by_their_clipped_advantage_assessed_when_kept_and_when_drawn():
    imitation = SelfImitation(4, make_env=None, observe=None, gamma=1.0, reward_scale=1.0)
    imitation.keep([KeptEpisode(1, [0, 1], 1.0, 1), KeptEpisode(2, [0], 0.5, 1)])
    decisions = [ImitatedDecision(None, ["a", "b"], a, 1.0, 1.0, episode=e, step=t)
                 for e, t, a in ((0, 0, 0), (0, 1, 1), (1, 0, 0))]
    assert imitation.unassessed(decisions) == [0, 1, 2]
    imitation.assessed([decisions[0], decisions[1]], [0.5, 1.5])
    assert imitation.unassessed(decisions) == [2] and imitation.memory.episodes[0].priorities == [0.5, 1.5]
    imitation.assessed([decisions[2]], [0.0])
    weights = imitation.draw_weights(decisions, 0.6)
    expected = np.array([0.5, 1.5, 0.0]) + PRIORITY_FLOOR
    assert weights == pytest.approx(expected ** 0.6 / (expected ** 0.6).sum())
    assert imitation.draw_weights(decisions, 0.0) == pytest.approx([1 / 3] * 3)  # exponent 0: uniform
    imitation.drawn([decisions[1]], [3.0])
    assert imitation.memory.episodes[0].samples == 1 and imitation.memory.episodes[1].samples == 0
    assert imitation.draw_weights(decisions, 1.0)[1] == pytest.approx(3.0 / (3.5 + 3 * PRIORITY_FLOOR))
    saved = json.loads(json.dumps(imitation.state_dict()))  # the priorities are plain data in checkpoints
    restored = SelfImitation(4, make_env=None, observe=None, gamma=1.0, reward_scale=1.0)
    restored.load_state_dict(saved)
    assert restored.draw_weights(decisions, 1.0) == pytest.approx(imitation.draw_weights(decisions, 1.0))
    assert restored.unassessed(decisions) == []


def test_a_kept_episode_is_assessed_by_the_critic_as_it_is_then(tmp_path, tiny_config):
    trainer = Trainer(tiny_config(*SIL, "rollout.total_decisions=16", "explore.novelty=0"), tmp_path)
    algorithm = trainer.algorithm
    obs, info = make_env("groundrl/FollowInstruction-Long-v0").reset(seed=5)
    prompt, valid = trainer.agent.observe(obs, info), [str(a) for a in info["valid_actions"]]
    batch = [ImitatedDecision(prompt, valid, 0, g, g) for g in (5.0, -5.0)]
    with torch.no_grad():
        value = float(trainer.agent([prompt], [valid], policy=False).values[0])
    assert algorithm.clipped_advantages(batch, [5.0, -5.0]) == pytest.approx([5.0 - value, 0.0], abs=1e-5)


def test_the_returns_carry_the_novelty_bonus_a_critic_that_learns_it_expects():
    imitation = SelfImitation(4, make_env=None, observe=None, gamma=0.5, reward_scale=2.0)
    decisions = [ImitatedDecision(None, ["a"], 0, 9.0, 9.0, episode=e, step=t, reward=r, macro_steps=k, reached=key)
                 for e, t, r, k, key in ((0, 0, 0.0, 1, 10), (0, 1, 1.0, 2, 11), (1, 0, 0.5, 1, 10))]
    assert imitation.returns(decisions) == [9.0, 9.0, 9.0]  # the environment's, as replayed
    bonus = {10: 0.25, 11: 0.0}
    # episode 0: G_1 = (1 + 0) x 2 = 2; G_0 = (0 + 0.25) x 2 + 0.5 x 2 = 1.5; episode 1: (0.5 + 0.25) x 2
    assert imitation.returns(decisions, bonus.get) == pytest.approx([1.5, 2.0, 1.5])


@pytest.mark.parametrize("env_id, options", [
    ("groundrl/FoodPreparation-v0", {"prompt": "actions"}),
    ("groundrl/TomatoSalad-v0", {}),
    ("groundrl/BabyAI-GoToLocal-v0", {"prompt": "glam", "window": 3}),
])
def test_a_kept_episode_is_rebuilt_exactly_from_its_seed_and_actions(env_id, options):
    env, rng = make_env(env_id, **options), np.random.default_rng(0)
    obs, info = env.reset(seed=123)
    seen, actions, rewards, steps = [], [], [], []
    for _ in range(12):
        action = int(rng.integers(len(info["valid_actions"])))
        seen.append((obs, list(info["valid_actions"])))
        obs, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        rewards.append(float(reward))
        steps.append(float(info.get("macro_steps", 1)))
        if terminated or truncated:
            break
    decisions = replay(make_env(env_id, **options), KeptEpisode(123, actions, sum(rewards), 1),
                       lambda o, i: o, gamma=0.9, reward_scale=2.0)
    assert [(d.input, d.valid_actions) for d in decisions] == seen
    assert [d.action for d in decisions] == actions
    to_go = 0.0
    for d, r, k in reversed(list(zip(decisions, rewards, steps))):
        to_go = 2.0 * r + 0.9**k * to_go
        assert d.return_to_go == pytest.approx(to_go) and d.episode_return == pytest.approx(2.0 * sum(rewards))
    # an episode that does not replay to its return is not imitated
    assert replay(env, KeptEpisode(123, actions, sum(rewards) + 1, 1), lambda o, i: o, 0.9, 1.0) is None
    assert replay(env, KeptEpisode(123, [10**6], 0.0, 1), lambda o, i: o, 0.9, 1.0) is None


# -- in the update ---------------------------------------------------------------------------------

def test_a_self_imitation_step_is_the_hand_computed_gradient_of_its_losses(tmp_path, tiny_config, monkeypatch):
    trainer = Trainer(tiny_config(*SIL, "sil.value_weight=0.5", "sil.weight=2"), tmp_path)
    algorithm, agent = trainer.algorithm, trainer.agent
    obs, info = make_env("groundrl/FollowInstruction-Long-v0").reset(seed=5)
    valid = [str(a) for a in info["valid_actions"]]
    prompt = agent.observe(obs, info)
    batch = [ImitatedDecision(prompt, valid, a, g, g) for a, g in ((0, 1.0), (1, -1.0), (2, 0.5), (0, 2.0))]
    for optimizer in algorithm.optimizers.values():  # the step itself is Adam's; its gradient is what is tested
        monkeypatch.setattr(optimizer, "step", lambda *args, **kwargs: None)
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda *args, **kwargs: None)
    stats = Statistics()
    algorithm.imitation_step(batch, stats)
    trained = [p for p in agent.actor_parameters() + agent.critic_parameters()]
    got = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in trained]

    for p in trained:
        p.grad = None
    out = agent([d.input for d in batch], [d.valid_actions for d in batch], values=True)
    log_prob = torch.stack([torch.log_softmax(x.float(), -1)[d.action] for x, d in zip(out.logits, batch)])
    returns = torch.tensor([d.return_to_go for d in batch])
    advantage = (returns - out.values.float()).clamp(min=0)
    loss = 2 * -(log_prob * advantage.detach()).mean() + 0.5 * 0.5 * advantage.pow(2).mean()
    loss.backward()
    expected = [p.grad if p.grad is not None else torch.zeros_like(p) for p in trained]
    assert any(g.abs().sum() > 0 for g in expected)
    for g, e in zip(got, expected):
        assert torch.allclose(g, e, atol=1e-6, rtol=1e-4)
    means = stats.means()
    assert means["sil_loss"] == pytest.approx(-(log_prob * advantage.detach()).mean().item(), rel=1e-5)
    assert means["sil_positive"] == pytest.approx(float((advantage > 0).float().mean()))


def test_a_self_imitation_step_computes_each_drawn_state_once_with_the_same_gradient(tmp_path, tiny_config,
                                                                                     monkeypatch):
    """Draws repeat decisions (and kept episodes pass through the same states): with ``ppo.deduplicate``
    a step's equal decisions share a micro-batch, so each distinct state is scored once."""
    from groundrl.agents.llm_agent import LLMPolicy

    env = make_env("groundrl/FollowInstruction-Long-v0")
    states = []
    for seed in (5, 6):
        obs, info = env.reset(seed=seed)
        states.append((obs, info))
    scored = []
    real_scores = LLMPolicy._scores
    monkeypatch.setattr(LLMPolicy, "_scores", lambda self, inputs, valid, hidden: (
        scored.append(len({(x, tuple(v)) for x, v in zip(inputs, valid)})) or real_scores(self, inputs, valid, hidden)))
    gradients, rows = [], []
    for deduplicate in ("true", "false"):
        trainer = Trainer(tiny_config(*SIL, "sil.value_weight=0.5", "ppo.micro_batch_size=1",
                                      f"ppo.deduplicate={deduplicate}"), tmp_path / deduplicate)
        algorithm, agent = trainer.algorithm, trainer.agent
        batch = []
        for k in range(8):  # A B A B ...: the second A and B are the first ones drawn again
            obs, info = states[k % 2]
            valid = [str(a) for a in info["valid_actions"]]
            batch.append(ImitatedDecision(agent.observe(obs, info), valid, k % len(valid), 1.0 + k, 1.0 + k))
        for optimizer in algorithm.optimizers.values():
            monkeypatch.setattr(optimizer, "step", lambda *args, **kwargs: None)
        scored.clear()
        algorithm.imitation_step(batch, Statistics())
        rows.append(sum(scored))
        gradients.append([p.grad.clone() for p in agent.actor_parameters() + agent.critic_parameters()
                          if p.grad is not None])
    assert rows == [2, 8]
    assert len(gradients[0]) == len(gradients[1]) > 0
    for grouped, one_by_one in zip(*gradients):
        assert torch.allclose(grouped, one_by_one, atol=1e-6, rtol=1e-4)


def test_without_a_critic_loss_a_self_imitation_step_leaves_the_critic_as_it_was(tmp_path, tiny_config):
    trainer = Trainer(tiny_config(*SIL, "sil.value_weight=0", "rollout.total_decisions=16", "ppo.lr_decay=false"),
                      tmp_path)
    trainer.train()  # the critic's optimizer has momentum from the updates (and its learning rate is not 0)
    algorithm, agent = trainer.algorithm, trainer.agent
    obs, info = make_env("groundrl/FollowInstruction-Long-v0").reset(seed=5)
    prompt, valid = agent.observe(obs, info), [str(a) for a in info["valid_actions"]]
    critic = [p.detach().clone() for p in agent.critic_parameters()]
    actor = [p.detach().clone() for p in agent.actor_parameters()]
    algorithm.imitation_step([ImitatedDecision(prompt, valid, 0, 5.0, 5.0)], Statistics())
    assert all(torch.equal(p, q) for p, q in zip(agent.critic_parameters(), critic))
    assert any(not torch.equal(p, q) for p, q in zip(agent.actor_parameters(), actor))


@pytest.mark.parametrize("preset, extra", [("twosome", ()), ("grpo", ("rollout.group_size=2",))])
def test_training_keeps_its_best_episodes_and_logs_what_it_imitates(tmp_path, tiny_config, preset, extra):
    trainer = Trainer(tiny_config(*SIL, "rollout.total_decisions=24", *extra, preset=preset), tmp_path)
    history = trainer.train()
    kept = trainer.algorithm.imitation.memory.episodes
    assert len(kept) == 4 and all(m["sil_episodes"] == 4 for m in history)
    assert [e.episode_return for e in kept] == sorted((e.episode_return for e in kept), reverse=True)
    assert all(0 <= m["sil_positive"] <= 1 and "sil_loss" in m for m in history)
    assert ("sil_value_loss" in history[-1]) == (preset == "twosome")  # the critic-free methods have no critic
    assert history[-1]["sil_episode_samples"] > 0


def test_ppo_imitates_against_the_returns_with_the_novelty_bonus_its_critic_learns(tmp_path, tiny_config, monkeypatch):
    trainer = Trainer(tiny_config(*SIL, "rollout.total_decisions=16", "explore.novelty=0.5"), tmp_path)
    algorithm, checked = trainer.algorithm, []
    step = algorithm.imitation_step

    def checking(batch, stats, returns):
        beta = algorithm.schedules.novelty
        every = algorithm.imitation.decisions()  # each episode's decisions in order, as imitate() had them
        by_decision = dict(zip(map(id, every), algorithm.imitation.returns(
            every, lambda key: algorithm.novelty.bonus_now(key, beta))))
        assert beta > 0 and returns == pytest.approx([by_decision[id(d)] for d in batch])
        assert all(r > d.return_to_go for r, d in zip(returns, batch))  # every reached observation pays a bonus
        checked.append(len(batch))
        return step(batch, stats, returns)

    monkeypatch.setattr(algorithm, "imitation_step", checking)
    trainer.train()
    assert checked


def test_a_resumed_run_imitates_as_the_uninterrupted_one(tmp_path, tiny_config):
    config = tiny_config(*SIL, "rollout.total_decisions=48", "checkpoint_every=3")
    straight = Trainer(config, tmp_path / "straight").train()
    Trainer(config, tmp_path / "split").train(updates=3)
    resumed = resume(tmp_path / "split")
    assert len(resumed.algorithm.imitation.memory) == 4
    both = resumed.train()
    for a, b in zip(straight, both):
        for key in ("policy_loss", "value_loss", "sil_loss", "sil_value_loss", "sil_return", "sil_episode_samples"):
            if key in a:
                assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (a["update"], key)


# -- hindsight -------------------------------------------------------------------------------------

GOTO = "groundrl/BabyAI-GoToLocal-v0"


def test_hindsight_makes_successes_of_the_missions_an_episode_accomplished_checked_by_the_environment():
    playing, env, rng = make_env(GOTO, hindsight=True), make_env(GOTO), np.random.default_rng(1)
    relabelled_any = False
    for seed in range(6):
        _, info = playing.reset(seed=seed)
        own, actions, achieved, terminated, truncated = info["mission"], [], {}, False, False
        while not (terminated or truncated):
            actions.append(int(rng.integers(3)))
            _, _, terminated, truncated, info = playing.step(actions[-1])
            for mission in info["achieved_missions"]:
                achieved.setdefault(mission, len(actions) - 1)
        made = relabelled(env, seed, actions, own, achieved, count=3, update=7)
        others = sorted((step, m) for m, step in achieved.items() if m != own)
        # the missions accomplished last first, as many as asked
        assert [e.mission for e in made] == [m for _, m in sorted(others, key=lambda o: (-o[0], o[1]))[:3]]
        for kept in made:
            assert kept.seed == seed and kept.update == 7 and kept.actions == actions[:achieved[kept.mission] + 1]
            decisions = replay(env, kept, lambda o, i: o, gamma=0.9, reward_scale=1.0)
            # the prompts are the environment's for that mission, and the episode is its success
            assert decisions and all(f"Goal of the agent: {kept.mission}" in d.input for d in decisions)
            assert kept.episode_return > 0 and decisions[-1].reward == pytest.approx(kept.episode_return)
            relabelled_any = True
        # a mission the episode did not accomplish where it says is not made a success
        if others and others[-1][0] > 0:
            step, mission = others[-1]  # first accomplished at ``step``: not yet at the step before
            assert relabelled(env, seed, actions, own, {mission: step - 1}, 1, 7) == []
    assert relabelled_any


def test_training_with_hindsight_keeps_relabelled_successes_and_resumes_them(tmp_path, tiny_config):
    config = tiny_config(*SIL, "sil.capacity=8", "sil.hindsight=2", f"env={GOTO}", "rollout.total_decisions=160",
                         "checkpoint_every=10")
    straight = Trainer(config, tmp_path / "straight")
    history = straight.train()
    kept = straight.algorithm.imitation.memory.episodes
    relabelled_kept = [e for e in kept if e.mission is not None]
    assert relabelled_kept and history[-1]["sil_relabelled"] == len(relabelled_kept)
    env = make_env(GOTO)
    for episode in relabelled_kept:
        assert replay(env, episode, lambda o, i: o, 0.9, 1.0)[-1].reward > 0
    # kept in the checkpoint as plain data, and resumed exactly
    Trainer(config, tmp_path / "split").train(updates=10)
    both = resume(tmp_path / "split").train()
    assert [m["sil_relabelled"] for m in both] == [m["sil_relabelled"] for m in history]


def test_hindsight_settings_fail_in_one_line(tiny_config):
    from groundrl.errors import InvalidArgumentError
    from groundrl.train.config.checks import check_runnable

    with pytest.raises(InvalidArgumentError, match="set sil.enabled=true too"):
        tiny_config("sil.hindsight=1")
    with pytest.raises(InvalidArgumentError, match="sil.hindsight must be 0 or more"):
        tiny_config(*SIL, "sil.hindsight=-1")
    with pytest.raises(InvalidArgumentError, match="does not report the missions a step accomplished"):
        check_runnable(tiny_config(*SIL, "sil.hindsight=1"))  # FollowInstruction has no missions to relabel
    check_runnable(tiny_config(*SIL, "sil.hindsight=1", f"env={GOTO}"))
