"""benchmarks/babyai_agreement.py: how close a policy is to the BabyAI bot on fixed states."""

import pytest
import torch

from groundrl.agents import RandomAgent


class BotReader:
    """Puts probability ``share`` on the action the states' labels call the bot's, the rest spread."""

    def __init__(self, labels, share):
        self.labels, self.share = labels, share

    def act(self, observations, valid_actions, **_):
        probs = []
        for obs, valid in zip(observations, valid_actions):
            p = torch.full((len(valid),), (1 - self.share) / (len(valid) - 1))
            p[self.labels[obs]] = self.share
            probs.append(p)
        return [int(p.argmax()) for p in probs], probs


def test_the_states_carry_the_bot_action_and_a_policy_that_follows_it_agrees(load_benchmark):
    probe = load_benchmark("babyai_agreement")
    states = probe.collect_states("groundrl/BabyAI-GoToLocal-v0", episodes=3, bot_share=1.0, prompt="actions", window=3)
    assert states and all(0 <= expert < len(info["valid_actions"]) for _, info, expert in states)
    labels = {obs: expert for obs, _, expert in states}
    follower = probe.agreement(BotReader(labels, 0.9), states)
    assert follower["p_bot_action"] == pytest.approx(0.9) and follower["agreement"] == 1.0
    assert "go forward" in follower["per_action"]


def test_uniform_play_agrees_one_sixth(load_benchmark):
    probe = load_benchmark("babyai_agreement")
    states = probe.collect_states("groundrl/BabyAI-GoToLocal-v0", episodes=2, bot_share=0.5, prompt="actions", window=3)
    uniform = probe.agreement(RandomAgent(), states)
    assert uniform["p_bot_action"] == pytest.approx(1 / 6) and uniform["agreement"] == pytest.approx(1 / 6)
    assert uniform["entropy"] == pytest.approx(torch.log(torch.tensor(6.0)).item(), abs=1e-5)
    assert uniform["marginal"] == pytest.approx({a: 1 / 6 for a in states[0][1]["valid_actions"]})
    assert uniform["state_dependence"] == pytest.approx(0.0, abs=1e-5)


def test_state_dependence_tells_a_sharp_policy_that_ignores_the_state_from_one_that_reads_it(load_benchmark):
    probe = load_benchmark("babyai_agreement")
    states = probe.collect_states("groundrl/BabyAI-GoToLocal-v0", episodes=3, bot_share=1.0, prompt="actions", window=3)
    labels = {obs: expert for obs, _, expert in states}
    always_first = BotReader({obs: 0 for obs in labels}, 0.9)  # as sharp, whatever the state
    ignores = probe.agreement(always_first, states)
    assert ignores["entropy"] < 0.6 and ignores["state_dependence"] == pytest.approx(0.0, abs=1e-5)
    reads = probe.agreement(BotReader(labels, 0.9), states)
    assert reads["entropy"] == pytest.approx(ignores["entropy"]) and reads["state_dependence"] > 0.2


def test_the_same_seed_gives_the_same_states(load_benchmark):
    probe = load_benchmark("babyai_agreement")
    first, second = (probe.collect_states("groundrl/BabyAI-GoToLocal-v0", 2, 0.5, "actions", 3) for _ in range(2))
    assert [(o, e) for o, _, e in first] == [(o, e) for o, _, e in second]


@pytest.mark.parametrize("arguments, message", [
    (["no-such-run"], "no agent 'no-such-run'"),
    (["random", "--env", "groundrl/FoodPreparation-v0"], "is not a BabyAI-Text level"),
    (["random", "--env", "groundrl/Nowhere-v0"], "Nowhere"),
    (["zero-shot", "--model", "tiny-llama", "--precision", "fp16"], "precision"),
])
def test_bad_input_is_one_line(load_benchmark, capsys, arguments, message):
    probe = load_benchmark("babyai_agreement")
    assert probe.main([*arguments, "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err


def test_marginal_play_scores_a_policy_that_ignores_the_state(load_benchmark):
    probe = load_benchmark("babyai_agreement")
    actions = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]
    uniform = probe.marginal_play("groundrl/BabyAI-GoToLocal-v0", {a: 1 / 6 for a in actions}, 100)
    assert 0.15 < uniform < 0.45  # random's 0.29-0.30 over 1,000 episodes
    assert probe.marginal_play("groundrl/BabyAI-GoToLocal-v0", {"drop": 1.0}, 20) == 0.0  # never moves
    forward = probe.marginal_play("groundrl/BabyAI-GoToLocal-v0", {"go forward": 0.6, "turn right": 0.4}, 100)
    assert forward > uniform
