import json

import pytest
import torch

from groundrl.agents import LLMPolicy
from groundrl.eval import evaluate, wilson_interval


def test_wilson_interval():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(0, 20)
    assert low == 0.0 and 0.1 < high < 0.2
    low, high = wilson_interval(20, 20)
    assert 0.8 < low < 0.9 and high == 1.0
    low, high = wilson_interval(50, 100)
    assert low == pytest.approx(1 - high) and high == pytest.approx(0.5968, abs=1e-3)


def test_policy_probabilities_are_the_softmax_of_the_scores(tiny_llama):
    policy = LLMPolicy(tiny_llama, normalization="token")
    obs, actions = ["You see a door."], [["open the door", "turn left", "go forward"]]
    probs = policy.act(obs, actions)[1][0]
    expected = tiny_llama.score(obs, actions, normalization="token")[0].softmax(-1)
    torch.testing.assert_close(probs, expected)
    greedy, _ = policy.act(obs, actions, greedy=True)
    assert greedy == [int(expected.argmax())]


class _Oracle:
    """Reads the instruction and obeys it: evaluation must then report success 1."""

    def act(self, observations, valid_actions, infos=None, envs=None, greedy=False, generator=None):
        choices = [acts.index(o.splitlines()[0][len("Instruction: ") : -1])
                   for o, acts in zip(observations, valid_actions)]
        probs = [torch.nn.functional.one_hot(torch.tensor(c), len(a)).float() for c, a in zip(choices, valid_actions)]
        return choices, probs


def test_evaluate_counts_success_and_writes_the_run_folder(tmp_path):
    result = evaluate(_Oracle(), "groundrl/FollowInstruction-Long-v0", episodes=6, num_envs=4, run_dir=tmp_path,
                      progress=False)
    assert (result.episodes, result.successes, result.mean_return, result.mean_length) == (6, 6, 5.0, 5.0)
    assert json.loads((tmp_path / "results.json").read_text())["success_rate"] == 1.0
    steps = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert len(steps) == 30 and sorted({s["episode"] for s in steps}) == list(range(6))
    assert all(s["probs"][s["action"]] == 1.0 for s in steps)
    assert any((tmp_path / "tensorboard").iterdir())


def test_evaluate_does_not_depend_on_the_number_of_parallel_envs(tiny_llama):
    policy = LLMPolicy(tiny_llama)
    one = evaluate(policy, "groundrl/FollowInstruction-v0", episodes=6, num_envs=1, greedy=True, progress=False)
    many = evaluate(policy, "groundrl/FollowInstruction-v0", episodes=6, num_envs=6, greedy=True, progress=False)
    assert one == many
