"""GRPO and GiGPO: hand-computed advantages, group rollouts from identical starts, exact resume,
and one line for each bad setting (two processes: tests/integration/test_distributed.py; their learning:
tests/learning/test_climbs.py)."""

from __future__ import annotations

import json
import math

import pytest

from groundrl.errors import InvalidArgumentError
from groundrl.train.config import load_config
from groundrl.train.group_advantages import GroupEpisode, discounted_returns, group_advantages
from groundrl.train.trainer import Trainer, resume

SQRT_HALF = math.sqrt(0.5)


def episode(rewards, states, gamma=0.5):
    return GroupEpisode(rewards, [gamma] * len(rewards), states)


def approx(nested):
    return [pytest.approx(row, abs=1e-6) for row in nested]


def test_grpo_gives_each_episode_its_return_against_the_groups():
    # returns 1, 0, 0, 1: mean 0.5, Bessel's std sqrt(1/3); every decision of an episode gets its episode's
    group = [episode([0, 0, 1], "abc"), episode([0, 0], "ab"), episode([0], "a"), episode([1], "a")]
    advantages, sizes = group_advantages(group, std_scaling=True, eps=0.0)
    a = 0.5 / math.sqrt(1 / 3)
    assert advantages == approx([[a, a, a], [-a, -a], [-a], [a]])
    assert sizes == [1] * 7  # GRPO has no step groups
    # Dr. GRPO: centred, not scaled
    assert group_advantages(group, std_scaling=False)[0] == approx([[0.5] * 3, [-0.5] * 2, [-0.5], [0.5]])


def test_a_group_whose_returns_are_all_equal_teaches_nothing():
    group = [episode([0, 1], "ab"), episode([1], "c"), episode([0, 0, 1], "xyz")]  # each returns 1
    for omega in (None, 1.0):
        advantages, _ = group_advantages(group, omega=omega)
        assert all(a == 0 for steps in advantages for a in steps[:1])  # A^E = 0 (and no shared state here)
    # GiGPO's step level still ranks what followed a shared state, where the episodes' returns tie
    tied = [episode([0, 1], ["s", "t"]), episode([0, 0, 1], ["s", "u", "v"])]  # R_s = 0.5 vs 0.25
    advantages, sizes = group_advantages(tied, omega=1.0, std_scaling=False)
    assert advantages == approx([[0.125, 0.0], [-0.125, 0.0, 0.0]]) and sizes == [2, 1, 2, 1, 1]


def test_gigpo_step_groups_gather_a_state_repeated_within_and_across_episodes():
    # episode 1 visits s twice (t=0 and t=2), episode 2 once; gamma 0.5
    one = episode([0, 0, 0, 1], ["s", "x", "s", "y"])  # returns from each step: 0.125, 0.25, 0.5, 1
    two = episode([0, 0], ["s", "z"])  # a truncated episode: it counts what it got, 0
    assert discounted_returns(one.rewards, one.discounts) == [0.125, 0.25, 0.5, 1.0]
    advantages, sizes = group_advantages([one, two], omega=2.0, std_scaling=False)
    # A^E: returns 1 and 0 -> +-0.5; step group of s: returns 0.125, 0.5, 0 (mean 0.625 / 3)
    mean_s = (0.125 + 0.5 + 0.0) / 3
    assert advantages == approx([[0.5 + 2 * (0.125 - mean_s), 0.5, 0.5 + 2 * (0.5 - mean_s), 0.5],
                                 [-0.5 + 2 * (0.0 - mean_s), -0.5]])
    assert sizes == [3, 1, 3, 1, 3, 1]
    # with std scaling, the step group of s is scaled by its own standard deviation
    scaled, _ = group_advantages([one, two], omega=1.0, std_scaling=True, eps=0.0)
    std_s = math.sqrt(sum((r - mean_s) ** 2 for r in (0.125, 0.5, 0.0)) / 2)
    assert scaled[0][2] == pytest.approx(SQRT_HALF + (0.5 - mean_s) / std_s)


def test_macro_steps_discount_the_step_returns_per_primitive_step():
    # a decision of 3 primitive steps discounts what follows it by gamma ** 3
    assert discounted_returns([0.0, 1.0], [0.9**3, 0.9]) == pytest.approx([0.729, 1.0])


def test_a_group_starts_each_episode_together_from_one_seed(tmp_path, tiny_settings):
    """Food Preparation, groups of 2: the members of a group share every reset seed and start
    observation; an update plays whole episodes, at least num_envs x num_steps decisions of them."""
    config = load_config("grpo", overrides=tiny_settings("env=groundrl/FoodPreparation-v0", "env_kwargs.max_steps=6",
                                                         "rollout.num_envs=4", "rollout.group_size=2",
                                                         "rollout.num_steps=3", "rollout.total_decisions=24",
                                                         "ppo.minibatch_size=8"))
    trainer = Trainer(config, tmp_path)
    slots = trainer.collector.slots
    assert slots[0].seed == slots[1].seed != slots[2].seed == slots[3].seed
    assert str(slots[0].obs) == str(slots[1].obs)
    starts = []
    original = trainer.collector.start

    def start(i):
        original(i)
        starts.append((i, trainer.collector.slots[i].seed, str(trainer.collector.slots[i].obs)))

    trainer.collector.start = start
    experience, episodes = trainer.algorithm.collect(trainer.collector)
    buffer = experience.buffer
    assert not trainer.collector.active  # the update ends between episodes
    assert len(buffer) >= 12 and sum(episodes.lengths) == len(buffer)
    by_group = {}
    for i, seed, observation in starts:
        by_group.setdefault(i // 2, []).append((seed, observation))
    for started in by_group.values():
        assert len(started) % 2 == 0
        for first, second in zip(started[::2], started[1::2]):  # both members of each episode of the group
            assert first == second
        assert len({seed for seed, _ in started}) == len(started) // 2  # a new seed each episode


@pytest.mark.parametrize("method, novelty", [("grpo", []), ("gigpo", []),
                                             ("grpo", ["explore.novelty=0.5", "explore.novelty_end=0.1"])])
def test_resume_matches_an_uninterrupted_run(tmp_path, method, novelty, tiny_settings):
    config = load_config(method, overrides=tiny_settings(*novelty, "env=groundrl/FoodPreparation-v0",
                                                         "env_kwargs.max_steps=6", "rollout.num_envs=4",
                                                         "rollout.group_size=2", "rollout.num_steps=2",
                                                         "rollout.total_decisions=60", "ppo.minibatch_size=8",
                                                         "ppo.policy_lr=3e-3", "ppo.update_epochs=2",
                                                         "ppo.lr_decay=true", "explore.temperature=2",
                                                         "explore.temperature_end=1"))
    straight = Trainer(config, tmp_path / "straight").train()
    assert straight[-1]["decisions"] >= 60 > straight[-2]["decisions"]  # the budget, in whole updates
    Trainer(config, tmp_path / "split").train(updates=2)
    both = resume(tmp_path / "split").train()
    assert len(both) == len(straight) >= 3
    for a, b in zip(straight, both):
        for key in ("decisions", "episodes", "success_rate", "episode_return", "policy_loss", "entropy",
                    "approx_kl", "group_return_std", "lr_policy", "temperature", "step_group_size",
                    "novelty_bonus", "novelty_states"):
            if key in a:
                assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (a["update"], key)
    lines = (tmp_path / "split" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["update"] for line in lines] == list(range(1, len(straight) + 1))



@pytest.mark.parametrize("overrides, message", [
    (["rollout.group_size=3"], "does not divide rollout.num_envs=4"),
    (["group.omega=-0.5"], "group.omega must be 0 or more"),
    (["rollout.group_size=1"], "compares the episodes of a group: set rollout.group_size to 2 or more"),
    (["agent.kind=drrn"], "agent.kind=drrn has none"),
    (["algorithm=ppo"], "rollout.group_size=4 is for the group methods"),
    (["algorithm=reinforce"], "algorithm"),
    (["agent.llm.critic=own", "agent.llm.train_layers=2"], "grpo has no critic, so agent.llm.critic=own would"),
    (["agent.llm.critic_time=true"], r"has no critic, so agent.llm.critic_time=true would train nothing"),
])
def test_bad_group_settings_get_one_line(overrides, message):
    with pytest.raises(InvalidArgumentError, match=message) as error:
        load_config("grpo", overrides=overrides)
    assert "\n" not in str(error.value)
    with pytest.raises(InvalidArgumentError, match="critic-only|drrn has none"):
        load_config("drrn", overrides=["algorithm=gigpo"])


def test_the_benchmark_tables_and_draws_its_records(tmp_path, capsys, load_benchmark):
    """benchmarks/group_methods.py makes its table and figure from the records alone (their run
    folders gone): decisions to 0.5 and 0.9, peak memory from the rows."""
    benchmark = load_benchmark("group_methods")

    def record(exact, memory):
        rows = [{"decisions": 128 * i, "wall_seconds": 30.0 * i, "training_success": 0.0, "exact_success": e,
                 "memory_gib": None if i == 0 else memory} for i, e in enumerate(exact)]
        return {"settings": [], "run_dir": str(tmp_path / "gone"), "rows": rows, "evaluation": {"success_rate": 0.97}}

    out = tmp_path / "records"
    out.mkdir()
    for seed, exact in ((1, [0.01, 0.6, 0.95]), (2, [0.01, 0.2, 0.4, 0.92, 0.97])):
        (out / f"FoodPreparation-grpo-seed{seed}.json").write_text(json.dumps(record(exact, 1.5 + seed)))
    figure = tmp_path / "figure.png"
    assert benchmark.main(["--table-only", "--methods", "grpo,gigpo", "--envs", "FoodPreparation", "--seeds", "1", "2",
                           "--out", str(out), "--plot", str(figure)]) == 0
    table = capsys.readouterr().out
    assert "128 / 384" in table and "256 / 384" in table and "2 of 2" in table and "3.00" in table
    assert "gigpo" not in table  # no records: no row
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a seed not run yet is '?', in the Markdown table too
    assert benchmark.main(["--table-only", "--methods", "grpo", "--envs", "FoodPreparation", "--seeds", "1", "3",
                           "--out", str(out), "--markdown"]) == 0
    table = capsys.readouterr().out
    assert "| grpo | 128 / ? | 256 / ? | 60 / ? | 0.950 / ? | 0.97 / ? | 2.50 | 1 of 1 |" in table
    assert "seconds of" not in table  # records without a cpu field say nothing of where they ran
    # a record that says which CPU measured its seconds is named under the table
    (out / "FoodPreparation-grpo-seed2.json").write_text(json.dumps({**record([0.01, 0.95], 2.0), "cpu": "AMD EPYC"}))
    assert benchmark.main(["--table-only", "--methods", "grpo", "--envs", "FoodPreparation", "--seeds", "1", "2",
                           "--out", str(out)]) == 0
    assert "seconds of grpo seed 2: AMD EPYC" in capsys.readouterr().out


def test_a_novelty_bonus_counts_the_run_before_the_update_and_the_episode_itself(tmp_path, tiny_settings):
    """With explore.novelty, each decision's reward takes beta / sqrt(run visits before the update +
    the episode's own visits): after an update the run has counted every decision's observation once."""
    config = load_config("grpo", overrides=tiny_settings("env=groundrl/FoodPreparation-v0", "env_kwargs.max_steps=6",
                                                   "rollout.num_envs=4", "rollout.group_size=2", "rollout.num_steps=2",
                                                   "rollout.total_decisions=40", "ppo.minibatch_size=8",
                                                   "explore.novelty=0.5", "explore.novelty_end=null"))
    trainer = Trainer(config, tmp_path)
    first, = trainer.train(updates=1)
    counts = trainer.algorithm.novelty.counts
    assert sum(counts.values()) == first["decisions"] and first["novelty_states"] == len(counts)
    # the first update's bonuses: no visit before it, so each is 0.5 / sqrt(its visits in its episode so far)
    assert 0.5 / math.sqrt(6) <= first["novelty_bonus"] <= 0.5 and first["novelty_beta"] == 0.5
    assert first["group_return_std"] > 0  # the bonuses make the members' returns differ


def test_a_record_says_which_cpu_measured_its_seconds(tmp_path, load_benchmark):
    """benchmarks/train_food_preparation.py (the runs of group_methods.py) writes the CPU into its
    record; a run resumed on another machine names both, since its seconds then mix them."""
    benchmark = load_benchmark("train_food_preparation")
    record = tmp_path / "record.json"
    tiny = ["model=tiny-llama", "rollout.num_envs=2", "rollout.num_steps=8", "ppo.minibatch_size=8",
            "ppo.value_minibatch_size=8"]
    args = ["--preset", "default", "--every", "1", "--runs-dir", str(tmp_path / "runs"), "--json", str(record)]
    assert benchmark.main([*args, "--decisions", "16", *tiny]) == 0
    from groundrl.runs import cpu_name

    assert json.loads(record.read_text())["cpu"] == cpu_name() != ""
    record.write_text(json.dumps({**json.loads(record.read_text()), "cpu": "Another CPU"}))
    assert benchmark.main([*args, "--resume"]) == 0
    assert json.loads(record.read_text())["cpu"] == f"Another CPU, then {cpu_name()}"
