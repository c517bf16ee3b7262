"""The benchmarks' counts (episodes, repeats, prompts, ...) must be 1 or more: a script given 0 or a
negative number says so in its usage error (exit 2), not with a table of nothing or a division by zero."""

import pytest

from groundrl.cli import main


@pytest.mark.parametrize("script, args, message", [
    ("random_policy", ["--episodes", "-5"], "--episodes must be 1 or more, not -5"),
    ("random_policy", ["--episodes", "0"], "--episodes must be 1 or more, not 0"),
    ("babyai_text", ["--episodes", "0"], "--episodes must be 1 or more, not 0"),
    ("distinct_prompts", ["--minibatch", "0"], "--minibatch must be 1 or more, not 0"),
    ("distinct_prompts", ["--num-envs", "-1"], "--num-envs must be 1 or more, not -1"),
    ("scoring", ["--repeats", "0"], "--repeats must be 1 or more, not 0"),
    ("precision_drift", ["--prompts", "0"], "--prompts must be 1 or more, not 0"),
    ("distributed", ["--updates", "0"], "--updates and --nproc must be 1 or more"),
])
def test_a_count_below_1_is_a_usage_error(load_benchmark, capsys, script, args, message):
    with pytest.raises(SystemExit) as exit_info:
        load_benchmark(script).main(args)
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2 and f"error: {message}" in err and not out


def test_bench_random_policy_refuses_no_episodes_and_plays_one(capfd):
    # through the command line, which runs the script in a process of its own (hence capfd: its output)
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "random_policy", "--episodes", "0"])
    out, err = capfd.readouterr()
    assert exit_info.value.code == 2 and "--episodes must be 1 or more, not 0" in err and "Traceback" not in out + err
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "random_policy", "--episodes", "1", "--env", "groundrl/FollowInstruction-v0"])
    out, _ = capfd.readouterr()
    assert exit_info.value.code == 0 and "groundrl/FollowInstruction-v0" in out
