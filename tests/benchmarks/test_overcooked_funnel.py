"""benchmarks/overcooked_funnel.py reads how far evaluation episodes got on the way to the dish."""

import pytest
import torch

from groundrl.agents import RandomAgent
from groundrl.eval import evaluate


class OptimalAgent:
    """Plays the original code's optimal trace: the label it took at each prompt, with probability 1."""

    def __init__(self, trace):
        self.label_at = {step["prompt"]: step["label"] for step in trace[:-1]}

    def act(self, observations, valid_actions, **_):
        actions = [valid.index(self.label_at[obs]) for obs, valid in zip(observations, valid_actions)]
        probs = [torch.nn.functional.one_hot(torch.tensor(a), len(valid)).float()
                 for a, valid in zip(actions, valid_actions)]
        return actions, probs


@pytest.mark.parametrize("env_id, trace, stages", [
    ("groundrl/TomatoSalad-v0", 0, ["tomato chopped", "all chopped", "dish in a bowl", "dish carried", "served"]),
    ("groundrl/TomatoLettuceSalad-v0", 1,
     ["lettuce chopped", "tomato chopped", "all chopped", "dish in a bowl", "dish carried", "served"]),
])
def test_the_optimal_play_reaches_every_stage(load_benchmark, tmp_path, env_id, trace, stages,
                                             overcooked_optimal_traces):
    funnel = load_benchmark("overcooked_funnel")
    evaluate(OptimalAgent(overcooked_optimal_traces[trace]), env_id, episodes=2, num_envs=1, seed=0, run_dir=tmp_path,
             progress=False)
    row = funnel.funnel(tmp_path)
    assert row["episodes"] == 2 and list(row["stages"]) == stages
    assert all(share == 1.0 for share in row["stages"].values())
    assert (row["p_serve_with_dish"], row["states_with_dish"], row["p_serve_with_other"]) == (1.0, 2, 0.0)


def test_random_play_narrows_stage_by_stage_and_serves_with_one_eighth(load_benchmark, tmp_path):
    funnel = load_benchmark("overcooked_funnel")
    evaluate(RandomAgent(), "groundrl/TomatoLettuceSalad-v0", episodes=20, num_envs=4, seed=0, run_dir=tmp_path,
             progress=False)
    row = funnel.funnel(tmp_path)
    share = row["stages"]
    assert row["episodes"] == 20 and share["tomato chopped"] > 0
    assert share["served"] <= share["dish carried"] <= share["dish in a bowl"] <= share["all chopped"]
    assert share["all chopped"] <= min(share["tomato chopped"], share["lettuce chopped"])
    assert row["p_serve_with_other"] == pytest.approx(1 / 8)
    table = funnel.table({"random": row})
    assert table.splitlines()[2].startswith("| random | 20 |")


def test_a_folder_without_evaluation_episodes_is_one_clear_line(load_benchmark, tmp_path, capsys):
    funnel = load_benchmark("overcooked_funnel")
    assert funnel.main([str(tmp_path)]) == 2
    (tmp_path / "trajectories.jsonl").write_text("")  # a training run records some episodes, but is no evaluation
    assert funnel.main([str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: {tmp_path}: no evaluation episodes "
        "(episodes.jsonl and trajectories.jsonl, as `groundrl eval` writes them)")
