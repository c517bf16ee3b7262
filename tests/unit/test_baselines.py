"""The baselines of both papers: each acts correctly, and the symbolic one learns a tiny task (the
climbs of DRRN and NPAE: tests/learning/test_climbs.py)."""

from __future__ import annotations

import pytest
import torch

import groundrl
from groundrl.agents import BabyAIBotAgent, RandomAgent
from groundrl.agents.config import AgentConfig, DRRNAgentConfig, LLMAgentConfig, SymbolicAgentConfig
from groundrl.agents.drrn import DRRNAgent
from groundrl.agents.factory import build_agent
from groundrl.agents.llm_agent import LLMPolicy
from groundrl.agents.symbolic import SymbolicAgent
from groundrl.agents.words import word_ids
from groundrl.envs.base import action_ids, action_vocabulary
from groundrl.errors import InvalidArgumentError
from groundrl.eval import evaluate
from groundrl.eval.agents import evaluation_agent
from groundrl.train.config import load_config
from groundrl.train.trainer import make_trainer, resume

FOLLOW = "groundrl/FollowInstruction-v0"
COMMON = ["device=cpu", "progress=false", f"env={FOLLOW}", "checkpoint_every=1000"]


def learning_curve(trainer, chunks: int = 4, episodes: int = 200, greedy: bool = False) -> list[float]:
    """Sampled (or greedy) success on held-out seeds before training and after each chunk."""
    def score():
        return evaluate(trainer.agent, FOLLOW, episodes=episodes, seed=10**6, greedy=greedy,
                        progress=False).success_rate

    curve = [score()]
    while trainer.state.update < trainer.num_updates:
        trainer.train(updates=max(1, trainer.num_updates // chunks))
        curve.append(score())
    return curve


# -- environments: the action vocabulary the non-text agents need ------------------------------------


@pytest.mark.parametrize("env_id", ["groundrl/FollowInstruction-v0", "groundrl/FoodPreparation-v0",
                                    "groundrl/Entertainment-v0", "groundrl/TomatoSalad-v0",
                                    "groundrl/TomatoLettuceSalad-v0", "groundrl/BabyAI-GoToLocal-v0"])
def test_valid_actions_map_into_the_action_vocabulary(env_id):
    env = groundrl.make_env(env_id)
    vocabulary = action_vocabulary(env)
    obs, info = env.reset(seed=3)
    for _ in range(20):
        ids = action_ids(info)
        assert len(ids) == len(info["valid_actions"]) and all(0 <= i < len(vocabulary) for i in ids)
        if env_id.startswith("groundrl/FollowInstruction") or "Food" in env_id or "Enter" in env_id:
            assert [vocabulary[i] for i in ids] == info["valid_actions"]
        obs, reward, terminated, truncated, info = env.step(len(info["valid_actions"]) - 1)
        if terminated or truncated:
            obs, info = env.reset()


def test_renamed_actions_keep_their_ids():
    plain = groundrl.make_env("groundrl/BabyAI-GoToLocal-v0")
    synonyms = groundrl.make_env("groundrl/BabyAI-GoToLocal-v0", actions="synonyms")
    assert len(action_vocabulary(plain)) == len(action_vocabulary(synonyms))
    assert action_ids(plain.reset(seed=0)[1]) == action_ids(synonyms.reset(seed=0)[1])


def test_word_ids_are_stable_and_in_range():
    ids = word_ids("Vous voyez une clé rouge, à 2 pas", 100)
    assert all(1 <= i < 100 for i in ids) and len(ids) == 9
    assert word_ids("dax xolo", 8192) == word_ids("DAX  xolo", 8192)


# -- random and bot ------------------------------------------------------------------------------


def test_random_agent_is_uniform_over_the_valid_actions():
    agent, generator = RandomAgent(), torch.Generator().manual_seed(0)
    counts = torch.zeros(3)
    for _ in range(3000):
        (choice,), (probs,) = agent.act(["o"], [["a", "b", "c"]], generator=generator)
        counts[choice] += 1
    torch.testing.assert_close(probs, torch.full((3,), 1 / 3))
    assert (counts / 3000 - 1 / 3).abs().max() < 0.04
    rate = evaluate(agent, FOLLOW, episodes=300, progress=False).success_rate
    assert 0.1 < rate < 0.28  # 4 to 8 candidates: about 0.18


def test_bot_refuses_other_environments():
    env = groundrl.make_env("groundrl/FoodPreparation-v0")
    assert "BabyAI-Text only" in BabyAIBotAgent().cannot_play(env)
    assert BabyAIBotAgent().cannot_play(groundrl.make_env("groundrl/BabyAI-GoToLocal-v0")) == ""


# -- zero-shot -----------------------------------------------------------------------------------


@pytest.mark.parametrize("normalization", ["sum", "token", "word"])
def test_zero_shot_agent_scores_with_the_normalization_asked(normalization):
    agent, about, trained = evaluation_agent("zero-shot", model="tiny-llama", normalization=normalization, device="cpu")
    assert isinstance(agent, LLMPolicy) and agent.normalization == normalization and trained is None
    assert about["normalization"] == normalization and about["agent"] == "zero-shot"
    obs, actions = ["You see a door."], [["open the door", "turn left"]]
    expected = agent.llm.score(obs, actions, normalization=normalization)[0].softmax(-1)
    torch.testing.assert_close(agent.act(obs, actions)[1][0], expected)


def test_evaluation_agent_refuses_bad_names_and_options():
    with pytest.raises(InvalidArgumentError, match="no agent 'nope'"):
        evaluation_agent("nope")
    with pytest.raises(InvalidArgumentError, match="uses no model"):
        evaluation_agent("random", model="tiny-llama")


# -- symbolic PPO ----------------------------------------------------------------------------------


def test_symbolic_ppo_learns_from_the_features_alone(tmp_path):
    """An MLP on FollowInstruction's one-hot instruction: chance (about 0.18) to >= 0.85 in 8,192 decisions."""
    config = load_config("symbolic-ppo", overrides=COMMON + ["rollout.total_decisions=8192", "ppo.policy_lr=3e-3",
                                                             "ppo.value_lr=3e-3"])
    trainer = make_trainer(config, tmp_path)
    assert isinstance(trainer.agent, SymbolicAgent) and trainer.agent.network == "mlp"
    curve = learning_curve(trainer)
    assert curve[0] < 0.3 and curve[-1] >= 0.85, curve


def test_symbolic_policy_is_masked_to_the_valid_actions():
    env = groundrl.make_env("groundrl/FoodPreparation-v0")
    obs, info = env.reset(seed=0)
    agent = SymbolicAgent(SymbolicAgentConfig(), info, len(action_vocabulary(env)))
    with torch.no_grad():  # make the invalid actions the most attractive: masking must still exclude them
        agent.actor.head[-1].bias.copy_(torch.arange(10.0) * 0)
        for i in set(range(10)) - set(info["action_ids"]):
            agent.actor.head[-1].bias[i] = 100.0
    choices, probs = agent.act([obs], [info["valid_actions"]], infos=[info])
    assert probs[0].shape == (len(info["valid_actions"]),) and float(probs[0].sum()) == pytest.approx(1.0)
    assert 0 <= choices[0] < len(info["valid_actions"])
    with pytest.raises(InvalidArgumentError, match="infos"):
        agent.act([obs], [info["valid_actions"]])


def test_symbolic_cnn_reads_the_grid_and_mission(tmp_path):
    config = load_config("symbolic-ppo", overrides=["device=cpu", "progress=false", "env=groundrl/BabyAI-GoToLocal-v0",
                                                    "rollout.num_envs=2", "rollout.num_steps=8",
                                                    "rollout.total_decisions=48",
                                                    "ppo.minibatch_size=8", "ppo.value_minibatch_size=8",
                                                    "ppo.micro_batch_size=8", "checkpoint_every=1"])
    straight = make_trainer(config, tmp_path / "a").train()
    agent = make_trainer(config, tmp_path / "b").agent
    assert agent.network == "cnn"
    env = groundrl.make_env("groundrl/BabyAI-GoToLocal-v0")
    obs, info = env.reset(seed=1)
    observed = agent.observe(obs, info)
    assert observed.image.shape == (7, 7, 3) and observed.mission == word_ids(info["mission"], 8192)
    out = agent([observed, agent.observe(obs, {**info, "mission": "go to the red ball"})], None)
    assert not torch.allclose(out.values[0], out.values[1])  # the mission matters
    assert (agent.cannot_play(env) == ""
            and "grid view" in agent.cannot_play(groundrl.make_env("groundrl/FoodPreparation-v0")))
    # resumed from a checkpoint half-way, the run is the same
    make_trainer(config, tmp_path / "c").train(updates=1)
    both = resume(tmp_path / "c").train()
    assert [m["policy_loss"] for m in straight] == pytest.approx([m["policy_loss"] for m in both], rel=1e-5)


def test_symbolic_agent_refuses_environments_of_another_shape():
    env = groundrl.make_env("groundrl/FoodPreparation-v0")
    _, info = env.reset(seed=0)
    agent = SymbolicAgent(SymbolicAgentConfig(), info, len(action_vocabulary(env)))
    assert agent.cannot_play(groundrl.make_env("groundrl/FoodPreparation-Pizza-v0")) == ""  # same shape: unseen task
    assert "features" in agent.cannot_play(groundrl.make_env("groundrl/Entertainment-v0"))
    with pytest.raises(InvalidArgumentError, match="network=cnn"):
        SymbolicAgent(SymbolicAgentConfig(network="cnn"), info, 10)


# -- DRRN ------------------------------------------------------------------------------------------


def test_drrn_encodes_a_text_as_the_grus_state_after_its_last_word():
    """Unpacked for speed, with texts of different lengths in one batch: the state a packed sequence ends with."""
    agent = DRRNAgent(DRRNAgentConfig(embedding_dim=8, hidden_dim=8))
    texts = ["a", "a b c d e f", "b c", ""]
    encoded = agent._encode(texts, agent.observation_encoder)
    for text, row in zip(texts, encoded):
        ids = torch.tensor([word_ids(text, agent.config.word_buckets) or [0]])
        torch.testing.assert_close(row, agent.observation_encoder(agent.embedding(ids))[1][-1, 0])


def test_the_drrn_step_benchmark_times_both_encodings(load_benchmark, capsys):
    assert load_benchmark("drrn_step").main(["--decisions", "16", "--batch", "4", "--steps", "1"]) == 0
    table = capsys.readouterr().out
    assert "packed (before)" in table and "1.00x" in table and "(now)" in table
    with pytest.raises(SystemExit) as error:
        load_benchmark("drrn_step").main(["--steps", "0"])
    assert error.value.code == 2 and "at least 1" in capsys.readouterr().err


def test_drrn_boltzmann_exploration_and_resume(tmp_path):
    agent = DRRNAgent(DRRNAgentConfig(embedding_dim=8, hidden_dim=8, temperature=0.5))
    q = agent.q_values(["a b c"], [["x", "y z"]])[0]
    _, probs = agent.act(["a b c"], [["x", "y z"]])
    torch.testing.assert_close(probs[0], (q / 0.5).softmax(-1))
    assert agent.act(["a b c"], [["x", "y z"]], greedy=True)[0] == [int(q.argmax())]

    config = load_config("drrn", overrides=COMMON + ["rollout.num_envs=2", "rollout.num_steps=8",
                                                     "rollout.total_decisions=64",
                                                     "drrn.batch_size=8", "drrn.learning_starts=8",
                                                     "agent.drrn.embedding_dim=16", "agent.drrn.hidden_dim=16",
                                                     "checkpoint_every=2"])
    straight = make_trainer(config, tmp_path / "straight").train()
    make_trainer(config, tmp_path / "split").train(updates=2)
    resumed = resume(tmp_path / "split")
    assert len(resumed.algorithm.memory) == 32  # the replay memory came back with the checkpoint
    both = resumed.train()
    assert [m["q_loss"] for m in straight] == pytest.approx([m["q_loss"] for m in both], rel=1e-5)


# -- NPAE -------------------------------------------------------------------------------------------


def test_npae_is_the_architecture_with_random_weights_and_an_action_head(tiny_llama):
    def build(*overrides):
        config = load_config("npae", overrides=COMMON + ["model=tiny-llama", *overrides])
        return build_agent(config.agent, groundrl.make_env(config.env), model=config.model, device="cpu",
                           seed=config.seed)

    agent = build()
    assert agent.action_head is not None and agent.action_head[-1].out_features == len(action_vocabulary(
        groundrl.make_env(FOLLOW)))
    pretrained = dict(tiny_llama.model.named_parameters())
    fresh = dict(agent.llm.model.named_parameters())
    embedding = next(name for name in fresh if "embed_tokens" in name)
    torch.testing.assert_close(fresh[embedding], pretrained[embedding])  # GLAM kept the embeddings
    changed = [name for name in fresh if name != embedding and fresh[name].dim() > 1
               and not torch.equal(fresh[name], pretrained[name])]
    assert len(changed) >= 4
    no_embeddings = build("agent.llm.pretrained_embeddings=false")
    assert not torch.equal(dict(no_embeddings.llm.model.named_parameters())[embedding], pretrained[embedding])


def test_agent_config_refuses_incoherent_choices():
    with pytest.raises(InvalidArgumentError, match="agent.kind"):
        AgentConfig(kind="nope")
    with pytest.raises(InvalidArgumentError, match="actor=full"):
        LLMAgentConfig(policy="head")
    with pytest.raises(InvalidArgumentError, match="actor=full"):
        LLMAgentConfig(weights="random")
