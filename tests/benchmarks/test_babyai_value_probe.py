"""benchmarks/babyai_value_probe.py: how much of a BabyAI-Text return a critic could explain, and does."""

import numpy as np
import pytest

import groundrl

GOTO_LOCAL = "groundrl/BabyAI-GoToLocal-v0"


def test_the_goal_is_in_the_cell_ahead_when_the_bot_reaches_it(load_benchmark):
    probe = load_benchmark("babyai_value_probe")
    env = groundrl.make_env(GOTO_LOCAL)
    env.reset(seed=5)
    rng = np.random.default_rng(0)
    terminated = truncated = False
    while not (terminated or truncated):
        _, reward, terminated, truncated, _ = env.step(probe.behaviour(env.unwrapped, 1.0, rng))
    assert reward > 0
    assert probe.goal_cell(env.unwrapped.minigrid) == 1 * probe.VIEW + probe.VIEW // 2  # one ahead, straight on
    env.close()


def test_with_the_deterministic_bot_every_continuation_is_the_return_that_followed(load_benchmark):
    probe = load_benchmark("babyai_value_probe")
    env = groundrl.make_env(GOTO_LOCAL)
    states = probe.collect(env, episodes=2, bot_share=1.0, gamma=0.99, rollouts=3)
    env.close()
    g = np.array([s["return"] for s in states])
    continuations = np.stack([s["continuations"] for s in states])
    assert (g > 0).all()
    np.testing.assert_allclose(continuations, np.repeat(g[:, None], 3, axis=1), rtol=1e-9)
    assert {s["episode"] for s in states} == {0, 1}


def test_uniform_play_gives_varied_continuations_and_a_return_of_its_own(load_benchmark):
    probe = load_benchmark("babyai_value_probe")
    env = groundrl.make_env(GOTO_LOCAL)
    states = probe.collect(env, episodes=1, bot_share=0.0, gamma=0.99, rollouts=8, seed=7)
    env.close()
    assert len({round(float(s["continuations"].std()), 9) for s in states}) > 1
    assert all(0 <= s["return"] < 1 and 0 <= s["cell"] <= probe.VIEW * probe.VIEW for s in states)


def test_ridge_recovers_a_linear_value_and_explained_variance_reads_like_the_trainers(load_benchmark):
    probe = load_benchmark("babyai_value_probe")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 5))
    y = x @ np.array([1.0, -2.0, 0.0, 0.5, 0.0]) + 3.0
    prediction = probe.ridge(x[:300], y[:300], x[300:])
    assert probe.explained_variance(y[300:], prediction) > 0.999
    assert probe.explained_variance(y, np.full_like(y, y.mean())) == pytest.approx(0.0)
    assert probe.r_squared(y, y + 1.0) < probe.explained_variance(y, y + 1.0) == pytest.approx(1.0)


def test_the_value_head_fits_a_learnable_target(load_benchmark):
    import torch

    probe = load_benchmark("babyai_value_probe")
    rng = np.random.default_rng(1)
    x = rng.normal(size=(600, 8)).astype(np.float32)
    y = np.tanh(x[:, 0]) + 0.5 * x[:, 1] * (x[:, 1] > 0)
    head = torch.nn.Sequential(torch.nn.Linear(8, 32, bias=False), torch.nn.ReLU(), torch.nn.Linear(32, 1, bias=False))
    prediction, epochs = probe.fit_head(head, x[:450], y[:450], x[450:], lr=3e-3, batch=32)
    assert probe.explained_variance(y[450:], prediction) > 0.9 and epochs >= 1


def test_the_script_prints_its_table_with_a_tiny_model(load_benchmark, capsys):
    probe = load_benchmark("babyai_value_probe")
    assert probe.main(["--episodes", "3", "--rollouts", "2", "--bot-share", "0.5", "--own-layers", "1",
                       "model=tiny-llama", "agent.llm.train_layers=1"]) == 0
    out = capsys.readouterr().out
    assert ("Var(V)/Var(G)" in out and "ridge on the goal's view cell and the step" in out
            and "critic's features (64" in out and "a critic of its own: 1 layer(s)" in out
            and "the critic's features and the time (critic_time)" in out)


def test_a_critic_of_its_own_learns_what_the_prompt_says_and_is_put_back_after(load_benchmark):
    import torch

    from groundrl.agents.config import LLMAgentConfig
    from groundrl.agents.llm_agent import LLMAgent
    from groundrl.llm import load_llm

    probe = load_benchmark("babyai_value_probe")
    torch.manual_seed(0)
    agent = LLMAgent(load_llm("tiny-llama"), LLMAgentConfig(critic="own", train_layers="1", critic_layers=1))
    initial = {n: p.detach().clone() for n, p in agent.named_parameters()}
    words = ["ball", "key", "box", "door"]
    prompts = [f"You see a {words[i % 4]} {i % 5} steps ahead." for i in range(120)]
    y = np.array([1.0 if "ball" in p else 0.0 for p in prompts])
    train = np.arange(120) < 80
    prediction, epochs = probe.fit_own_critic(agent, prompts, y[train], train, lr=3e-3, batch=16, max_epochs=15)
    assert prediction.shape == (40,) and epochs >= 1
    assert probe.explained_variance(y[~train], prediction) > 0.5  # it learned to read the word
    assert all(torch.equal(p, initial[n]) for n, p in agent.named_parameters())


def test_the_pooled_last_token_reading_is_what_the_critic_reads(load_benchmark):
    from groundrl.agents.factory import build_agent
    from groundrl.train.config import load_config_file

    probe = load_benchmark("babyai_value_probe")
    config = load_config_file(probe.EXAMPLE, ["model=tiny-llama", "agent.llm.train_layers=1"])
    env = groundrl.make_env(config.env, prompt=config.prompt, window=config.prompt_window)
    states = probe.collect(env, episodes=1, bot_share=0.0, gamma=0.99, rollouts=1, every=16)
    agent = build_agent(config.agent, env, model=config.model, device="cpu", precision="fp32")
    pooled = probe.pooled_features(agent, states)
    np.testing.assert_allclose(pooled["last token, last layer"], probe.critic_features(agent, states), atol=1e-4)
    assert pooled["mean of the tokens, last layer"].shape == pooled["last token, layer 1"].shape == (len(states), 64)
    env.close()


def test_carrying_an_object_the_behaviour_plays_uniformly_rather_than_ask_the_bot(load_benchmark):
    from minigrid.core.world_object import Ball

    probe = load_benchmark("babyai_value_probe")
    env = groundrl.make_env(GOTO_LOCAL)
    env.reset(seed=3)
    env.unwrapped.minigrid.carrying = Ball("red")  # where the bot's search for a drop position can hang
    rng = np.random.default_rng(0)
    assert len({probe.behaviour(env.unwrapped, 1.0, rng) for _ in range(40)}) > 3
    env.close()


def test_kept_features_are_read_back_only_for_the_same_states_and_model(load_benchmark, tmp_path, monkeypatch):
    from groundrl.agents.factory import build_agent
    from groundrl.train.config import load_config_file

    probe = load_benchmark("babyai_value_probe")
    config = load_config_file(probe.EXAMPLE, ["model=tiny-llama", "agent.llm.train_layers=1"])
    env = groundrl.make_env(config.env, prompt=config.prompt, window=config.prompt_window)
    states = probe.collect(env, episodes=1, bot_share=0.0, gamma=0.99, rollouts=1, every=16)
    agent = build_agent(config.agent, env, model=config.model, device="cpu", precision="fp32")
    path = str(tmp_path / "features.npz")
    computed = probe.kept_features(agent, states, path, "tiny-llama")
    calls = []
    monkeypatch.setattr(probe, "critic_features", lambda agent, states: calls.append(1) or computed + 1)
    np.testing.assert_array_equal(probe.kept_features(agent, states, path, "tiny-llama"), computed)  # read back
    assert not calls
    np.testing.assert_array_equal(probe.kept_features(agent, states[:1], path, "tiny-llama"), computed + 1)
    np.testing.assert_array_equal(probe.kept_features(agent, states[:1], path, "another"), computed + 1)
    assert len(calls) == 2
    probe.kept_features(agent, states, path, None)  # the default model: config.model is None
    assert len(calls) == 3
    env.close()


def test_a_features_file_that_is_not_the_probes_is_refused_in_one_line_and_kept(load_benchmark, tmp_path, capsys):
    from types import SimpleNamespace

    from groundrl.errors import InvalidArgumentError

    probe = load_benchmark("babyai_value_probe")
    with pytest.raises(SystemExit):
        probe.main(["--features", str(tmp_path / "features.txt")])
    assert "--features names a .npz file" in capsys.readouterr().err
    other = tmp_path / "notes.npz"
    other.write_text("my notes")
    with pytest.raises(InvalidArgumentError, match="is not a file of features this probe kept"):
        probe.kept_features(SimpleNamespace(prompts=list), [], str(other), None)  # no states: no model needed
    assert other.read_text() == "my notes"
