"""benchmarks/profile_glam.py, eval_speed.py and train_speed.py --before: the phase clock charges
nested phases once, the phases add up to the wall time, and an earlier commit's code plays a row of its
own beside this tree's (the same episodes)."""

from __future__ import annotations

import json
import time

import pytest


def test_the_phase_clock_charges_a_nested_phase_to_itself_alone(load_benchmark):
    profile = load_benchmark("profile_glam")
    clock = profile.PhaseClock()

    def inner():
        time.sleep(0.05)

    def outer():
        time.sleep(0.05)
        timed_inner()

    timed_inner = clock.timed(inner, "trunk-ish")
    timed_outer = clock.timed(outer, "scorer-ish")
    clock.reset()
    timed_outer()
    seconds, calls = dict(clock.seconds), dict(clock.calls)
    assert calls == {"scorer-ish": 1, "trunk-ish": 1}
    assert 0.05 <= seconds["trunk-ish"] < 0.09 and 0.05 <= seconds["scorer-ish"] < 0.09


def test_the_profile_accounts_for_the_whole_update_and_evaluation(load_benchmark, capsys):
    profile = load_benchmark("profile_glam")
    result = profile.profile(profile.EXAMPLE, ["model=tiny-llama", "agent.llm.train_layers=1", "rollout.num_steps=4",
                                               "ppo.minibatch_size=16", "ppo.value_minibatch_size=16"],
                             warmup=1, updates=1, episodes=2, num_envs=2)
    for part in ("train", "eval"):
        phases = result[part]["phases"]
        assert sum(phases.values()) == pytest.approx(result[part]["wall"], rel=0.02)
        assert phases["frozen trunk"] > 0 and phases["trained layers"] > 0 and phases["tokenization"] > 0
    assert result["train"]["decisions"] == 16 and result["train"]["phases"]["backward"] > 0
    assert result["eval"]["phases"]["backward"] == 0 and result["eval"]["episodes"] == 2
    profile.print_tables(result, markdown=True)
    table = capsys.readouterr().out
    assert "| frozen trunk |" in table and "| total |" in table
    # the wrapped functions are restored: a second profile wraps them once, not twice
    from groundrl.llm.trunk import Trunk
    assert not hasattr(Trunk.lower, "__wrapped__")


def test_a_critic_of_its_own_is_charged_to_the_critic_not_to_the_trained_layers(load_benchmark, monkeypatch):
    """Its layers run where the actor's do (``Trunk.upper``): made slow here, that time is the critic's."""
    from groundrl.llm.trunk import OwnLayers, Trunk

    upper, slept = Trunk.upper, []

    def slow_own_layers(self, hidden, mask, positions, above=None):
        if isinstance(above, OwnLayers):
            time.sleep(0.05)
            slept.append(0.05)
        return upper(self, hidden, mask, positions, above)

    monkeypatch.setattr(Trunk, "upper", slow_own_layers)
    profile = load_benchmark("profile_glam")
    result = profile.profile(profile.EXAMPLE, ["model=tiny-llama", "agent.llm.train_layers=1", "rollout.num_steps=4",
                                               "agent.llm.critic=own", "agent.llm.critic_layers=1",
                                               "ppo.minibatch_size=16", "ppo.value_minibatch_size=16"],
                             warmup=0, updates=1, episodes=0, num_envs=2)
    assert slept and result["train"]["phases"]["critic"] >= sum(slept)


def test_the_eval_speed_benchmark_plays_the_same_episodes_with_an_earlier_commit(load_benchmark, capsys, tmp_path):
    out = tmp_path / "rows.json"
    assert load_benchmark("eval_speed").main(["--before", "HEAD", "--model", "tiny-llama", "--episodes", "3",
                                              "--num-envs", "2,3", "--json", str(out),
                                              "agent.llm.train_layers=1"]) == 0
    rows = json.loads(out.read_text())
    assert [r["row"] for r in rows] == ["before (HEAD), --num-envs 2", "this tree, --num-envs 2",
                                        "this tree, --num-envs 3"]
    assert all("error" not in r and r["episodes"] == 3 for r in rows)
    assert rows[0]["outcomes"] == rows[1]["outcomes"] == rows[2]["outcomes"]  # nothing depends on the batch
    assert "3/3" in capsys.readouterr().out


def test_the_train_speed_benchmark_runs_a_row_with_an_earlier_commit_first(load_benchmark, tmp_path):
    out = tmp_path / "speed.json"
    assert load_benchmark("train_speed").main([
        "--workloads", "gotolocal-example", "--settings", "new-defaults", "--before", "HEAD", "--model", "tiny-llama",
        "--warmup", "0", "--updates", "1", "--json", str(out), "agent.llm.train_layers=1", "rollout.num_steps=2",
        "ppo.minibatch_size=16"]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["setting"], r["status"]) for r in rows] == [("new defaults @ HEAD", "ok"), ("new defaults", "ok")]
    assert rows[1]["vs_before"] > 0 and rows[0]["vs_before"] is None


def test_a_before_that_names_no_commit_fails_in_one_line(load_benchmark):
    with pytest.raises(SystemExit) as error:
        load_benchmark("eval_speed").main(["--before", "no-such-commit", "--model", "tiny-llama", "--episodes", "1"])
    assert "--before no-such-commit:" in str(error.value)


@pytest.mark.parametrize("script, arguments, says", [
    ("eval_speed", ["--config", "MISSING"], "does not exist"),
    ("eval_speed", ["--agent", "MISSING"], "does not exist"),
    ("eval_speed", ["--model", "tiny-llama", "nope=1"], "Key 'nope'"),
    ("eval_speed", ["--num-envs", "8,x"], "--num-envs"),
    ("profile_glam", ["--config", "MISSING"], "does not exist"),
    ("profile_glam", ["--model", "tiny-llama", "nope=1"], "Key 'nope'"),
])
def test_the_speed_scripts_refuse_bad_input_in_one_line(load_benchmark, capsys, tmp_path, script, arguments, says):
    arguments = [str(tmp_path / "missing") if a == "MISSING" else a for a in arguments]
    with pytest.raises(SystemExit) as error:
        load_benchmark(script).main(arguments)
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # argparse's usage, then the one line
    assert error.value.code == 2 and "error:" in last and says in last and "Traceback" not in err
