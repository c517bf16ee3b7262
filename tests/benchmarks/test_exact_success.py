"""benchmarks/exact_success.py computes a trained agent's exact success in household tasks."""

from types import SimpleNamespace

import pytest
import torch

from groundrl.train.trainer import Trainer


class Uniform:
    def act(self, prompts, valid_actions, **_):
        assert all(p.startswith("Possible actions: ") for p in prompts)  # the run's prompt: the actions listed
        return None, [torch.full((len(v),), 1 / len(v), dtype=torch.float64) for v in valid_actions]


def test_a_uniform_policy_succeeds_exactly_as_uniform_play(load_benchmark):
    exact = load_benchmark("exact_success")
    from groundrl.envs import make_env

    from benchkit.household import random_success_probability

    envs = ["groundrl/FoodPreparation-Laundry-v0", "groundrl/Entertainment-v0"]
    found = exact.exact_success(Uniform(), SimpleNamespace(prompt="actions"), envs)
    for env_id in envs:
        assert found[env_id] == pytest.approx(random_success_probability(make_env(env_id).unwrapped.task, 50))


def test_a_run_folder_gives_a_row_per_run_and_a_column_per_task(load_benchmark, tmp_path, tiny_config, capsys):
    exact = load_benchmark("exact_success")
    Trainer(tiny_config("env=groundrl/FoodPreparation-v0", "rollout.total_decisions=8"), tmp_path).train()
    envs = ["groundrl/FoodPreparation-v0", "groundrl/FoodPreparation-Laundry-v0"]
    assert exact.main([str(tmp_path), "--envs", *envs, "--policy-at", "The microwave is opened"]) == 0
    lines = capsys.readouterr().out.splitlines()
    states = [line for line in lines if line.startswith(f"| {tmp_path} | FoodPreparation-Laundry-v0 |")]
    assert states and all("The washing machine is opened." in line for line in states)  # Laundry's words
    assert lines[0] == "| run | FoodPreparation | Laundry |"
    cells = lines[2].split(" | ")[1:]
    assert lines[2].startswith(f"| {tmp_path} |") and all(0 <= float(c.strip(" |")) < 1 for c in cells)
    assert exact.main([str(tmp_path), "--envs", "groundrl/BabyAI-GoToLocal-v0"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: groundrl/BabyAI-GoToLocal-v0 is not a household task: its exact success cannot be computed")


def test_the_policy_at_a_state_is_found_in_every_task_through_the_words_it_substitutes(load_benchmark):
    exact = load_benchmark("exact_success")
    envs = ["groundrl/FoodPreparation-v0", "groundrl/FoodPreparation-Laundry-v0"]
    found = exact.policy_at(Uniform(), SimpleNamespace(prompt="actions"), envs,
                            "Currently, you are not grabbing anything in hand. The microwave is close to you. "
                            "The microwave is opened.")
    assert [env for env, _, _ in found] == envs  # one state each: Laundry's reads "washing machine"
    text, probs = found[1][1:]
    assert "The washing machine is close to you. The washing machine is opened." in text
    assert probs == pytest.approx(dict.fromkeys(
        ["walk to the living room", "walk to the bathroom", "walk to the bedroom", "walk to the clothes",
         "open the washing machine", "close the washing machine"], 1 / 6))
