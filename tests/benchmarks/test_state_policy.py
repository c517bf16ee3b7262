"""benchmarks/state_policy.py reads, per state met in evaluation, how often and what the policy did there."""

import torch

from groundrl.agents import RandomAgent
from groundrl.eval import evaluate

LAUNDRY = "groundrl/FoodPreparation-Laundry-v0"


class OpensTheMachine:
    """Laundry's loop: walk to the washing machine, then open it, and open it again."""

    def act(self, observations, valid_actions, **_):
        prefer = ("open the washing machine", "walk to the washing machine")
        actions = [next(valid.index(a) for a in prefer if a in valid) for valid in valid_actions]
        probs = [torch.nn.functional.one_hot(torch.tensor(a), len(v)).float() for a, v in zip(actions, valid_actions)]
        return actions, probs


def test_a_looping_agent_shows_the_state_it_loops_in(load_benchmark, tmp_path):
    policy = load_benchmark("state_policy")
    evaluate(OpensTheMachine(), LAUNDRY, episodes=3, num_envs=1, seed=0, run_dir=tmp_path, progress=False)
    found = policy.states([tmp_path])
    assert sum(s["visits"] for s in found.values()) == 3 * 50 and len(found) == 3
    loop = next(o for o in found if "The washing machine is opened" in o)
    assert found[loop]["visits"] == 3 * 48 and found[loop]["episodes"] == 3 and found[loop]["ended_there"] == 3
    assert found[loop]["probs"]["open the washing machine"] == 1.0
    table = policy.table(found).splitlines()
    assert table[2].startswith("| The washing machine is close to you. The washing machine is opened. | 144 | 3 | 3 |")
    assert "You are in the kitchen" not in table[2]  # said in every state: left out


def test_random_play_gives_every_valid_action_its_share_and_filters(load_benchmark, tmp_path):
    policy = load_benchmark("state_policy")
    evaluate(RandomAgent(), LAUNDRY, episodes=4, num_envs=2, seed=0, run_dir=tmp_path, progress=False)
    found = policy.states([tmp_path])
    for state in found.values():
        assert all(abs(p - 1 / len(state["probs"])) < 1e-6 for p in state["probs"].values())
    rows = policy.table(found, contains="bedroom", top=2).splitlines()[2:]
    assert len(rows) == 2 and all("bedroom" in row for row in rows)


def test_a_folder_without_recorded_steps_is_one_clear_line(load_benchmark, tmp_path, capsys):
    policy = load_benchmark("state_policy")
    assert policy.main([str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {tmp_path} holds no trajectories.jsonl")


def test_a_count_below_one_is_refused_in_one_line(load_benchmark, capsys):
    import pytest

    for name, argv in (("state_policy", ["runs", "--top", "0"]), ("exact_success", ["runs", "--max-steps", "0"])):
        with pytest.raises(SystemExit):
            load_benchmark(name).main(argv)
        assert capsys.readouterr().err.strip().splitlines()[-1].endswith("must be 1 or more, not 0")
