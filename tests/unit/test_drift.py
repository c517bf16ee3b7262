import math

import pytest
import torch

from groundrl.agents import LLMAgent, LLMPolicy
from groundrl.agents.config import LLMAgentConfig
from groundrl.cli import main
from groundrl.errors import InvalidArgumentError
from groundrl.eval.drift import PASSAGES, held_out_decisions, language_drift, measure_drift, policy_kl
from groundrl.llm import load_llm


def perturb_adapters(agent: LLMAgent, std: float = 2.0) -> None:
    with torch.no_grad():
        generator = torch.Generator().manual_seed(0)
        for name, parameter in agent.model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * std)


@pytest.mark.parametrize("model, targets", [("tiny-llama", ["q_proj", "v_proj"]), ("tiny-t5", ["q", "v"])])
def test_an_untrained_agent_has_not_drifted_and_a_moved_one_has(model, targets):
    agent = LLMAgent(load_llm(model), LLMAgentConfig(lora_targets=targets))  # LoRA's B starts at 0
    untrained = LLMPolicy(load_llm(model))
    decisions = held_out_decisions(["groundrl/FollowInstruction-v0", "groundrl/BabyAI-GoToLocal-v0"], per_env=4)
    same = language_drift(agent.llm, untrained.llm, PASSAGES[:3])
    assert same["token_kl"] == pytest.approx(0, abs=1e-6) and same["top1_agreement"] == 1
    assert same["perplexity_trained"] == pytest.approx(same["perplexity_untrained"])
    assert policy_kl(agent, untrained, decisions) == pytest.approx(0, abs=1e-6)

    perturb_adapters(agent)
    moved = language_drift(agent.llm, untrained.llm, PASSAGES[:3])
    assert moved["token_kl"] > 0.01 and moved["top1_agreement"] < 1 and moved["tokens"] == same["tokens"]
    assert moved["perplexity_untrained"] == pytest.approx(same["perplexity_untrained"])
    assert policy_kl(agent, untrained, decisions) > 0.001


def test_the_token_kl_is_the_mean_kl_of_the_next_token_distributions(tiny_llama):
    agent = LLMAgent(load_llm("tiny-llama"), LLMAgentConfig())
    perturb_adapters(agent)
    text = PASSAGES[0]
    ids = tiny_llama.tokenizer(text, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        p = agent.llm.model(input_ids=ids).logits[0, :-1].log_softmax(-1)
        q = tiny_llama.model(input_ids=ids).logits[0, :-1].log_softmax(-1)
    expected = torch.nn.functional.kl_div(q, p, log_target=True, reduction="sum") / p.shape[0]
    found = language_drift(agent.llm, tiny_llama, [text])
    assert found["token_kl"] == pytest.approx(float(expected), rel=1e-4)
    nll = -float(q.gather(1, ids[0, 1:, None]).mean())
    assert found["perplexity_untrained"] == pytest.approx(math.exp(nll), rel=1e-4)


def test_held_out_decisions_are_valid_states_of_each_game_and_reproducible():
    envs = ["groundrl/FollowInstruction-v0", "groundrl/TomatoSalad-v0"]
    decisions = held_out_decisions(envs, per_env=5, seed=7)
    assert len(decisions) == 10 and decisions == held_out_decisions(envs, per_env=5, seed=7)
    assert all(obs.startswith("Instruction:") for obs, _ in decisions[:5])
    assert all(actions and all(isinstance(a, str) for a in actions) for _, actions in decisions)
    assert decisions != held_out_decisions(envs, per_env=5, seed=8)


def test_measure_drift_of_a_training_run_and_its_refusals(capsys, tmp_path, tiny_settings):
    train = ["train", *tiny_settings("rollout.total_decisions=8")]
    with pytest.raises(SystemExit):
        main([*train, f"runs_dir={tmp_path / 'llm'}"])
    (run,) = (tmp_path / "llm").iterdir()
    drift = measure_drift(run, episodes=3, decisions_per_env=4, progress=False)
    assert drift.held_out_envs == ("groundrl/BabyAI-GoToLocal-v0",)  # the game it trained on is not held out
    assert drift.decisions == 4 and drift.action_kl >= 0 and drift.token_kl >= 0
    assert set(drift.follow_instruction) == {"untrained", "trained"}
    assert drift.follow_instruction["trained"]["episodes"] == 3
    assert measure_drift(run, episodes=0, decisions_per_env=0, progress=False).follow_instruction is None

    with pytest.raises(SystemExit):
        main(["train", "--preset", "symbolic-ppo", "env=groundrl/FoodPreparation-v0", "device=cpu",
              "rollout.num_envs=2", "rollout.num_steps=8", "rollout.total_decisions=16", "progress=false",
              "ppo.minibatch_size=16", "ppo.value_minibatch_size=16", "ppo.micro_batch_size=16",
              f"runs_dir={tmp_path / 'symbolic'}"])
    (symbolic,) = (tmp_path / "symbolic").iterdir()
    with pytest.raises(InvalidArgumentError, match="drift is measured for language-model agents"):
        measure_drift(symbolic, episodes=0)
