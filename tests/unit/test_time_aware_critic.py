"""The time-aware critic (``agent.llm.critic_time``): the environments say the episode's time, the
critic reads it, the policy does not."""

from __future__ import annotations

import math

import pytest
import torch

from groundrl.agents.config import LLMAgentConfig
from groundrl.agents.llm_agent import AgentInput, LLMAgent, TimeAwareHead, time_features
from groundrl.envs import make_env
from groundrl.errors import InvalidArgumentError
from groundrl.llm import load_llm
from groundrl.llm.cache import memoized

PROMPTS = ["You see a red ball 2 steps forward.", "You see a wall 1 step left.", "You carry a key."]
ACTIONS = [["go forward", "turn left"], ["turn right", "go forward", "pick up"], ["drop", "toggle"]]


def agent_of(**settings) -> LLMAgent:
    torch.manual_seed(0)
    return LLMAgent(load_llm("tiny-llama", device="cpu"), LLMAgentConfig(**settings))


@pytest.mark.parametrize(("env_id", "action"), [("groundrl/BabyAI-GoToLocal-v0", "turn left"),
                                                ("groundrl/TomatoSalad-v0", 0)])
def test_the_environment_counts_the_steps_to_its_limit_and_truncates_there(env_id, action):
    """BabyAI-Text counts a step a decision; Overcooked the primitive steps of its macro-actions."""
    env = make_env(env_id)
    _, info = env.reset(seed=5)
    assert info["elapsed_steps"] == 0
    limit, elapsed = info["max_episode_steps"], 0
    for _ in range(10_000):  # an action that never finishes the task: the episode ends at the limit
        _, _, terminated, truncated, info = env.step(action)
        elapsed += info.get("macro_steps", 1)
        assert (info["elapsed_steps"], info["max_episode_steps"]) == (elapsed, limit)
        if terminated or truncated:
            break
    assert truncated and not terminated and elapsed >= limit and elapsed - info.get("macro_steps", 1) < limit


@pytest.mark.parametrize("settings", [{"critic": "frozen"}, {"critic": "shared"},
                                      {"critic": "own", "train_layers": "1", "critic_layers": 1}])
def test_the_critic_reads_the_time_and_the_policy_does_not(settings):
    agent = agent_of(critic_time=True, **settings)
    assert isinstance(agent.value_head, TimeAwareHead)
    assert agent.value_head.head[0].in_features == agent.llm.model.config.hidden_size
    early = [AgentInput(p, time=(0, 64)) for p in PROMPTS]
    late = [AgentInput(p, time=(60, 64)) for p in PROMPTS]
    out_early, out_late = agent(early, ACTIONS), agent(late, ACTIONS)
    assert all(torch.equal(a, b) for a, b in zip(out_early.logits, out_late.logits))
    assert not torch.allclose(out_early.values, out_late.values)
    if settings["critic"] == "frozen":  # by hand: the head on the features and the two numbers
        features = torch.cat([agent.critic_features(PROMPTS), time_features(late)], dim=-1)
        torch.testing.assert_close(out_late.values, agent.value_head(features).squeeze(-1))
    # the value loss reaches the time's MLP, and the policy not at all
    ((out_late.values - 1.0) ** 2).mean().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in agent.value_head.time.parameters())
    assert {id(p) for p in agent.value_head.time.parameters()} <= {id(p) for p in agent.critic_parameters()}
    if settings["critic"] != "shared":
        assert all(p.grad is None for p in agent.actor_parameters())


def test_the_policy_computes_a_prompt_once_whatever_its_time():
    agent = agent_of(critic_time=True)
    inputs = [AgentInput(PROMPTS[0], time=(t, 64)) for t in range(5)]
    with torch.no_grad(), memoized(agent):
        agent(inputs, [ACTIONS[0]] * 5, values=False)
        assert len(agent.memo.entries) == 1


def test_features_are_the_share_used_and_the_steps_left():
    rows = time_features([AgentInput("p", time=(0, 64)), AgentInput("p", time=(64, 64)),
                          AgentInput("p", time=(3, 1000))]).tolist()
    assert rows[0] == pytest.approx([0.0, math.log(65) / math.log(1001)])
    assert rows[1] == pytest.approx([1.0, 0.0])
    assert rows[2] == pytest.approx([0.003, math.log(998) / math.log(1001)])


def test_an_environment_that_does_not_say_its_time_is_refused_by_the_critic_alone():
    """The policy plays any environment (evaluation needs no values); a value asks for the time."""
    agent = agent_of(critic_time=True)
    _, info = make_env("groundrl/BabyAI-GoToLocal-v0").reset(seed=1)
    assert agent.observe("prompt", info) == AgentInput("prompt", (), (0, info["max_episode_steps"]))
    untimed = agent.observe("You see a key.", {"valid_actions": ["pick up"]})
    assert untimed == "You see a key."
    agent.act(["You see a key."], [["pick up", "drop"]])
    with pytest.raises(InvalidArgumentError, match=r"info\['elapsed_steps'\].*set agent.llm.critic_time=false"):
        agent([untimed], [["pick up", "drop"]])
    assert agent_of().observe("prompt", info) == "prompt"  # without critic_time, the prompt alone as before


def test_a_run_that_trains_the_time_aware_critic_refuses_an_untimed_environment_before_the_model_loads(
        monkeypatch, tmp_path):
    from groundrl.train.config import load_config
    from groundrl.train.trainer import Trainer

    def no_model(*args, **kwargs):
        raise AssertionError("the model loaded before the environment was checked")

    monkeypatch.setattr("groundrl.agents.factory.load_llm", no_model)
    config = load_config("twosome", overrides=["env=groundrl/FollowInstruction-v0", "model=tiny-llama",
                                               "agent.llm.critic_time=true", "device=cpu", "progress=false"])
    with pytest.raises(InvalidArgumentError, match=r"this environment does not report .*critic_time=false$"):
        Trainer(config, tmp_path)
