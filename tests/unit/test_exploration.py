"""Exploration (issue 20): the behaviour policy and its importance correction, the novelty bonus,
the schedules; each kept apart from what the environment reports, and exact across a resume."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch

from groundrl.train.algorithms.ppo import PPO
from groundrl.train.exploration import NoveltyCounts, behaviour_probabilities, linear_schedule, observation_key
from groundrl.train.losses import clipped_policy_loss, importance_weights, pad_logits
from groundrl.train.trainer import Trainer, resume


def collected(trainer: Trainer):
    """One rollout of the trainer's PPO, and the metrics of exploring it."""
    experience, episodes = trainer.algorithm.collect(trainer.collector)
    return experience.buffer, experience.logged, episodes


# -- the behaviour policy ------------------------------------------------------------------------

def test_the_importance_weight_is_1_when_behaviour_and_policy_agree(tmp_path, tiny_config):
    buffer, explored, _ = collected(Trainer(tiny_config(), tmp_path))
    assert torch.equal(buffer.behaviour_log_probs, buffer.log_probs)
    weights = importance_weights(buffer.flat("log_probs"), buffer.flat("behaviour_log_probs"), 2.0)
    assert torch.equal(weights, torch.ones_like(weights))
    assert explored == {}  # nothing explored, nothing logged
    # and the corrected loss is PPO's, to the bit
    new, old, advantages = torch.randn(6), torch.randn(6), torch.randn(6)
    assert torch.equal(clipped_policy_loss(new, old, advantages, 0.2)[0],
                       clipped_policy_loss(new, old, advantages, 0.2, torch.ones(6))[0])


def test_the_behaviour_probabilities_are_recorded_for_the_actions_taken(tmp_path, tiny_config):
    trainer = Trainer(tiny_config("explore.epsilon=0.5", "explore.temperature=2.0"), tmp_path)
    buffer, explored, _ = collected(trainer)
    # recompute the behaviour of each decision from the policy's logits
    logits = trainer.agent(buffer.inputs, buffer.valid_actions).logits
    mu = behaviour_probabilities(pad_logits([x.float() for x in logits]), temperature=2.0, epsilon=0.5)
    taken = mu.gather(-1, buffer.flat("actions")[:, None]).squeeze(-1)
    assert torch.allclose(buffer.flat("behaviour_log_probs"), taken.log(), atol=1e-5)
    pi = torch.softmax(pad_logits([x.float() for x in logits]), -1).gather(
        -1, buffer.flat("actions")[:, None]).squeeze(-1)
    assert torch.allclose(buffer.flat("log_probs"), pi.log(), atol=1e-5)
    assert explored["epsilon"] == 0.5 and explored["temperature"] == 2.0 and explored["behaviour_kl"] > 0


def test_the_weights_correct_the_gradient_to_the_policys_own():
    """In expectation over actions drawn from mu, the weighted policy gradient is the on-policy one."""
    logits = torch.tensor([1.0, 0.0, -1.0], requires_grad=True)
    advantages = torch.tensor([1.0, -2.0, 0.5])
    mu = behaviour_probabilities(logits.detach()[None], temperature=1.5, epsilon=0.3)[0]
    pi_old = torch.softmax(logits.detach(), -1)
    log_pi = torch.log_softmax(logits, -1)
    # the surrogate at pi_new = pi_old, each action weighted by how often mu draws it
    weights = importance_weights(pi_old.log(), mu.log(), max_weight=100.0)
    surrogate = sum(mu[a] * clipped_policy_loss(log_pi[a:a + 1], pi_old.log()[a:a + 1], advantages[a:a + 1], 0.2,
                                                weights[a:a + 1])[0] for a in range(3))
    (corrected,) = torch.autograd.grad(surrogate, logits, retain_graph=True)
    on_policy = sum(pi_old[a] * -advantages[a] * log_pi[a] for a in range(3))
    (expected,) = torch.autograd.grad(on_policy, logits)
    assert torch.allclose(corrected, expected, atol=1e-6)


def test_behaviour_is_uniform_at_epsilon_1_and_padding_stays_impossible():
    logits = pad_logits([torch.tensor([3.0, 0.0, -2.0]), torch.tensor([1.0])])
    mu = behaviour_probabilities(logits, temperature=0.5, epsilon=1.0)
    assert mu.tolist() == [[pytest.approx(1 / 3)] * 3, [1.0, 0.0, 0.0]]
    flatter = behaviour_probabilities(logits, temperature=4.0)
    assert flatter[0].max() < torch.softmax(logits, -1)[0].max()


# -- the novelty bonus ---------------------------------------------------------------------------

def test_novelty_counts_each_observation_and_its_bonus_decays_as_one_over_sqrt_n():
    counts = NoveltyCounts()
    assert counts.visit(["a"] * 4, beta=1.0) == [1.0, 1 / math.sqrt(2), 1 / math.sqrt(3), 0.5]
    assert counts.visit(["b", "a"], beta=0.2) == [0.2, 0.2 / math.sqrt(5)]
    assert len(counts) == 2
    again = NoveltyCounts()
    again.load_state_dict(counts.state_dict())
    assert again.visit(["a"], beta=1.0) == [1 / math.sqrt(6)]
    assert observation_key("a") == observation_key("a") != observation_key("b")


def test_the_bonus_is_learned_from_but_not_reported_as_the_environments_return(tmp_path, tiny_config):
    plain = collected(Trainer(tiny_config(), tmp_path / "plain"))
    bonus = collected(Trainer(tiny_config("explore.novelty=0.5"), tmp_path / "bonus"))
    # the same actions (the policy acts in both): the rewards differ by the bonuses exactly
    assert torch.equal(plain[0].actions, bonus[0].actions)
    added = bonus[0].rewards - plain[0].rewards
    assert (added > 0).all() and (added <= 0.5 + 1e-6).all()
    assert bonus[1]["novelty_bonus"] == pytest.approx(float(added.mean()))
    assert bonus[1]["novelty_states"] >= 1 and bonus[1]["novelty_beta"] == 0.5
    assert plain[2].returns == bonus[2].returns  # episode returns: the environment's own


def test_novelty_counts_the_raw_observation_under_a_glam_prompt(tmp_path, tiny_config):
    """The prompt carries a history; the counts are of what the environment showed: uniform play
    (the same actions whatever the prompt) counts the same observations under both prompts."""
    counts = []
    for prompt in ("glam", "null"):
        trainer = Trainer(tiny_config("explore.novelty=1.0", "explore.epsilon=1.0",
                                      "env=groundrl/FollowInstruction-Long-v0", f"prompt={prompt}"),
                          tmp_path / prompt)
        collected(trainer)
        counts.append(trainer.algorithm.novelty.counts)
    assert counts[0] == counts[1] and sum(counts[0].values()) == 8


# -- the schedules ---------------------------------------------------------------------------

def test_schedules_anneal_over_the_fraction_of_the_budget_then_hold(tmp_path, tiny_config):
    assert linear_schedule(1.0, None, 0.5, 0.9) == 1.0
    assert linear_schedule(1.0, 0.0, 0.5, 0.25) == 0.5
    config = tiny_config("rollout.total_decisions=48", "explore.epsilon=0.6", "explore.epsilon_end=0.0",
                          "explore.anneal=0.5", "ppo.ent_coef=0.1", "ppo.ent_coef_end=0.0")
    metrics = Trainer(config, tmp_path).train()
    assert [m["epsilon"] for m in metrics] == pytest.approx([0.6, 0.4, 0.2, 0.0, 0.0, 0.0])
    assert [m["ent_coef"] for m in metrics] == pytest.approx([0.1, 0.1 * 2 / 3, 0.1 / 3, 0.0, 0.0, 0.0])
    assert all(0 < m["importance_weight"] <= 2.0 for m in metrics)


def test_resume_with_every_exploration_item_on_matches_an_uninterrupted_run(tmp_path, tiny_config):
    """The novelty counts and the schedules' clock are in the checkpoint."""
    config = tiny_config("rollout.total_decisions=48", "checkpoint_every=3", "explore.epsilon=0.3",
                          "explore.epsilon_end=0.0", "explore.temperature=1.5", "explore.novelty=0.3",
                          "explore.novelty_end=0.1", "ppo.ent_coef_end=0.0")
    straight = Trainer(config, tmp_path / "straight").train()
    Trainer(config, tmp_path / "split").train(updates=3)
    resumed = resume(tmp_path / "split")
    assert len(resumed.algorithm.novelty) > 0 and resumed.state.update == 3 and resumed.algorithm.progress == 0.5
    both = resumed.train()
    for a, b in zip(straight, both):
        for key in ("episode_return", "policy_loss", "value_loss", "novelty_bonus", "novelty_states", "epsilon",
                    "importance_weight", "behaviour_kl"):
            if key in a:
                assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (a["update"], key)


def test_a_checkpoint_from_before_exploration_resumes(tmp_path, tiny_config):
    """Its algorithm state has no novelty counts (and kept the clock as ``updates``, which the
    trainer's counters now are)."""
    trainer = Trainer(tiny_config("rollout.total_decisions=24"), tmp_path)
    trainer.train(updates=2)
    state = {**trainer.algorithm.state_dict(), "updates": 2}
    del state["novelty"]
    fresh = PPO(trainer.agent, trainer.context)
    fresh.load_state_dict(state)
    assert fresh.progress == 2 / 3 and len(fresh.novelty) == 0


# -- the prior (benchmarks/prior.py) ------------------------------------------------------------

def test_the_prior_benchmark_gives_each_normalization_the_policys_own_exact_success(load_benchmark):
    from groundrl.agents.llm_agent import LLMPolicy
    from groundrl.envs import actions_prompt
    from groundrl.envs.virtualhome import FOOD_PREPARATION
    from groundrl.llm import load_llm

    from benchkit.household import success_probability

    prior = load_benchmark("prior")
    llm = load_llm("tiny-llama")
    found = prior.priors(llm, FOOD_PREPARATION, 8, "actions")  # one scoring pass, three normalizations
    for normalization in ("sum", "token", "word"):
        policy = LLMPolicy(llm, normalization=normalization)
        expected = success_probability(FOOD_PREPARATION, 8, lambda prompts, actions, policy=policy: [
            p.tolist() for p in policy.act([actions_prompt(x, a) for x, a in zip(prompts, actions)], actions)[1]])
        assert expected > 0 and found[normalization] == pytest.approx(expected, rel=1e-4)
    assert found["sum"] != pytest.approx(found["word"], rel=1e-2)  # the normalizations are not mixed up


# -- the exploration benchmark's table (benchmarks/exploration.py) --------------------------------

def test_the_exploration_table_keeps_each_seed_in_its_place(load_benchmark, tmp_path, capsys):
    exploration = load_benchmark("exploration")

    def record(seed, rows, evaluation):
        keys = ("decisions", "training_success", "exact_success", "wall_seconds")
        run = {"rows": [dict(zip(keys, row)) for row in rows], "evaluation": {"success_rate": evaluation}}
        (tmp_path / f"Entertainment-epsilon-seed{seed}.json").write_text(json.dumps(run))

    record(1, [(0, float("nan"), 0.001, 0.0), (256, 0.0, 0.3, 100.0), (512, 0.25, 0.96, 300.0)], 0.97)
    record(3, [(0, float("nan"), 0.001, 0.0), (256, 0.0, 0.002, 500.0)], 0.0)  # seed 2 not run yet
    exploration.main(["--table-only", "--markdown", "--out", str(tmp_path), "--envs", "Entertainment",
                      "--options", "epsilon,temperature"])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert lines[1:] == ["| epsilon | 512 / ? / - | 512 / ? / - | 512 / ? / - | 0.960 / ? / 0.002 | "
                         "0.97 / ? / 0.00 | 400 | 1 of 2 |"]  # no temperature run: no row


# -- exploring starts (explore.start_steps) ------------------------------------------------------

def _food_preparation(reach: int, prompt=None, **options):
    from groundrl.envs import make_env

    return make_env("groundrl/FoodPreparation-v0", prompt=prompt, exploring_starts=reach, **options)


def test_exploring_starts_are_drawn_among_the_distinct_states_within_reach_and_replay_from_the_seed():
    from groundrl.envs import make_env

    env, plain = _food_preparation(4), make_env("groundrl/FoodPreparation-v0", prompt=None)
    ways = env.env.reachable(seed=0)
    states = set()
    for way in ways:  # each way leads where replaying it by hand does, to a state no other way reaches
        observation, info = plain.reset(seed=0)
        for action in way:
            observation, _, terminated, truncated, info = plain.step(action)
            assert not (terminated or truncated)
        states.add((observation, tuple(info["valid_actions"])))
    assert ways[0] == () and len(states) == len(ways) == 15 and max(map(len, ways)) == 4
    starts = {}
    for seed in range(60):
        observation, info = env.reset(seed=seed)
        assert (observation, tuple(info["valid_actions"])) in states
        assert env.reset(seed=seed)[0] == observation  # the seed decides
        starts[observation] = info["start_steps"]
    assert len(starts) >= 10 and set(starts.values()) == {0, 1, 2, 3, 4}
    opened_empty_handed = [o for o in starts if "microwave is close to you. The microwave is opened" in o]
    assert opened_empty_handed, "the state the Laundry agent loops in is among the starts"


def test_no_exploring_start_ends_the_episode_and_its_steps_count_toward_the_limit():
    env = _food_preparation(6)  # the pancake is heated in 6 steps: that state is not a start
    ways = env.env.reachable(seed=0)
    assert max(map(len, ways)) == 5 and len(ways) == 16  # the one new state 6 steps in is the goal
    for way in ways:
        assert not any(env.env._replay(0, None, way)[2:4])
    short = _food_preparation(6, max_steps=3)  # the household's own limit: no start 3 steps in
    assert max(map(len, short.env.reachable(seed=0))) == 2
    observation, info = short.reset(seed=next(s for s in range(50) if short.reset(seed=s)[1]["start_steps"] == 2))
    _, _, terminated, truncated, _ = short.step(0)
    assert truncated and not terminated


def test_exploring_starts_refuse_a_bad_number_of_steps(tiny_config):
    from groundrl.envs.starts import ExploringStarts
    from groundrl.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="at least 1 step"):
        ExploringStarts(_food_preparation(1).env.env, 0)
    for bad in ("-1", "1.5"):
        with pytest.raises(InvalidArgumentError, match="explore.start_steps"):
            tiny_config(f"explore.start_steps={bad}")


def test_training_plays_the_starts_and_words_evaluation_does_not_and_a_resumed_run_matches(tmp_path, tiny_config):
    """The collector, the self-imitation memory (its replays) and a checkpoint's restore all start
    episodes the same way; evaluation plays the task from its start."""
    from groundrl.envs import InventedWords
    from groundrl.envs.starts import ExploringStarts

    config = tiny_config("env=groundrl/FoodPreparation-v0", "rollout.total_decisions=48", "checkpoint_every=3",
                         "env_kwargs.max_steps=8", "explore.start_steps=5", "sil.enabled=true", "sil.capacity=4",
                         "sil.steps=1", "sil.batch_size=4", "explore.invented_words=[pancake,microwave]")
    assert config.collector_env_options["exploring_starts"] == 5 == config.training_env_options["exploring_starts"]
    assert config.training_env_options["invented_words"] == ["pancake", "microwave"]
    assert "exploring_starts" not in config.env_options and "invented_words" not in config.env_options  # evaluation's
    straight_trainer = Trainer(config, tmp_path / "straight")
    assert all(isinstance(slot.env.env.env, ExploringStarts) and isinstance(slot.env.env, InventedWords)
               for slot in straight_trainer.collector.slots)
    straight = straight_trainer.train()
    imitation = straight_trainer.algorithm.imitation
    assert imitation.memory.episodes and isinstance(imitation.env.env.env, ExploringStarts)
    Trainer(config, tmp_path / "split").train(updates=3)
    both = resume(tmp_path / "split").train()
    for a, b in zip(straight, both):
        for key in ("episode_return", "policy_loss", "value_loss", "sil_loss", "sil_memory"):
            if key in a:
                assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (a["update"], key)


# -- invented words (explore.invented_words) -------------------------------------------------------

def test_invented_words_rename_a_share_of_episodes_consistently_and_replay_from_the_seed():
    from groundrl.envs import make_env

    env = make_env("groundrl/FoodPreparation-v0", prompt="actions", invented_words=["pancake", "microwave"],
                   invented_share=0.5)
    renamed = 0
    for seed in range(40):
        prompt, info = env.reset(seed=seed)
        assert env.reset(seed=seed)[0] == prompt  # the seed decides
        if "pancake" in prompt:
            assert "observation" not in info or "pancake" in info["observation"]
            continue
        renamed += 1
        new = {w for a in info["valid_actions"] if a.startswith("walk to the ") for w in [a[12:]]} - {
            "living room", "kitchen", "bathroom", "bedroom"}
        assert len(new) == 2 and all(w.isalpha() and w in prompt for w in new)
        assert "pancake" in info["observation"] and "microwave" not in prompt  # the environment's own is kept
        for _ in range(3):  # the same words all episode long, in the prompt and the actions
            prompt, _, terminated, truncated, info = env.step(0)
            assert "pancake" not in prompt + " ".join(info["valid_actions"])
            if terminated or truncated:
                break
    assert 12 <= renamed <= 28


@pytest.mark.parametrize("setting, message", [
    ("explore.invented_share=0", "explore.invented_share is a share of the episodes in (0, 1]"),
    ("explore.invented_share=1.5", "explore.invented_share is a share of the episodes in (0, 1]"),
    ("explore.invented_words=[pancake,' ']", "explore.invented_words lists words of the task"),
])
def test_bad_invented_words_settings_fail_in_one_line(tiny_config, setting, message):
    from groundrl.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        tiny_config(setting)


def test_a_prompt_with_a_history_starts_after_the_way_to_the_start():
    env = _food_preparation(4, prompt="glam")
    seed = next(s for s in range(50) if env.reset(seed=s)[1]["start_steps"] > 0)
    prompt, info = env.reset(seed=seed)
    assert "Observation 0:" in prompt and "Observation 1:" not in prompt  # the hidden steps are not shown
    assert prompt.rstrip().endswith("Action 0:")
