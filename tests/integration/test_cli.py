import json
import os
import re
import shutil
from pathlib import Path

import pytest

import groundrl
from groundrl.cli import main
from groundrl.runs import read_jsonl


def run(capsys, *args):
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


@pytest.mark.parametrize(
    "args, message",
    [
        (["eval", "--env", "groundrl/Nope-v0"], "unknown environment"),
        (["eval", "--env", "groundrl/FollowInstruction-v0", "--model", "/does/not/exist"], "not found"),
        (["eval", "--env", "groundrl/FollowInstruction-v0", "--model", "tiny-llama", "--dtype", "float8"], "dtype"),
        (["bench", "no-such-benchmark"], "no benchmark"),
        (["eval", "--model", "tiny-llama"], "--suite NAME, --env ID or --test NAME"),
        (["eval", "random", "--suite", "nope"], "unknown suite"),
        (["eval", "nope", "--suite", "overcooked"], "no agent 'nope'"),
        (["eval", "random", "--suite", "glam", "--test", "french"], "one of --suite and --test"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(capsys, args, message):
    code, out, err = run(capsys, *args)
    assert code == 2
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert "Traceback" not in out + err


def test_corrupt_gguf_from_the_cli(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GROUNDRL_CACHE", str(tmp_path / "cache"))
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 64)
    code, _, err = run(capsys, "eval", "--env", "groundrl/FollowInstruction-v0", "--model", str(bad))
    assert code == 2 and "corrupt" in err and err.count("\n") == 1


def test_hub_id_offline_from_the_cli(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = run(capsys, "eval", "--env", "groundrl/FollowInstruction-v0", "--model", "org/uncached-model")
    assert code == 2 and "hub cannot be reached" in err


def test_debug_shows_the_traceback(capsys):
    from groundrl.errors import UnknownEnvironmentError

    with pytest.raises(UnknownEnvironmentError):
        main(["--debug", "eval", "--env", "groundrl/Nope-v0"])


def test_usage_errors_exit_2(capsys):
    code, _, _ = run(capsys, "eval", "--env", "groundrl/FollowInstruction-v0", "--episodes", "0")
    assert code == 2


def test_eval_writes_a_run_folder(capsys, tmp_path):
    code, out, _ = run(
        capsys, "eval", "--env", "groundrl/FollowInstruction-v0", "--model", "tiny-llama", "--episodes", "5",
        "--num-envs", "2", "--device", "cpu", "--runs-dir", str(tmp_path),
    )
    assert code == 0
    (run_dir,) = list(tmp_path.iterdir())
    assert "run folder" in out and run_dir.name.endswith("-eval-FollowInstruction-v0")
    (row,) = json.loads((run_dir / "results.json").read_text())
    assert row["episodes"] == 5 and row["test"] == "FollowInstruction"
    assert len((run_dir / "FollowInstruction" / "episodes.jsonl").read_text().splitlines()) == 5
    assert "model: tiny-llama" in (run_dir / "config.yaml").read_text()


def test_eval_env_options_change_the_environment_played(capsys, tmp_path):
    code, _, _ = run(capsys, "eval", "random", "--env", "groundrl/FollowInstruction-v0", "--episodes", "3",
                     "--env-option", "episode_length=2", "--runs-dir", str(tmp_path))
    assert code == 0
    (run_dir,) = list(tmp_path.iterdir())
    played = json.loads((run_dir / "FollowInstruction" / "env.json").read_text())
    assert played["env_kwargs"]["episode_length"] == 2 and "episode_length: 2" in (run_dir / "config.yaml").read_text()


def test_models_and_envs_listings(capsys):
    code, out, _ = run(capsys, "models")
    assert code == 0 and "smollm2-135m-instruct" in out and "tiny-t5" in out
    code, out, _ = run(capsys, "envs")
    assert code == 0 and "groundrl/FollowInstruction-v0" in out
    assert re.search(r"groundrl/FoodPreparation-v0 +TWOSOME's VirtualHome: heat up the pancake", out)


def test_eval_a_generalization_test(capsys, tmp_path):
    code, out, _ = run(
        capsys, "eval", "--test", "invented-words", "--env", "groundrl/BabyAI-GoToLocal-v0", "--model", "tiny-llama",
        "--episodes", "2", "--device", "cpu", "--runs-dir", str(tmp_path),
    )
    assert code == 0 and "invented-words" in out
    (run_dir,) = list(tmp_path.iterdir())
    first = json.loads((run_dir / "invented-words" / "trajectories.jsonl").read_text().splitlines()[0])
    words = set(first["observation"].replace(",", " ").split())
    assert "Goal of the agent: go to" in first["observation"]
    assert not {"key", "ball", "box", "red", "green", "blue", "purple", "yellow", "grey"} & words
    assert "test: invented-words" in (run_dir / "config.yaml").read_text()


def test_train_resume_and_eval_a_trained_agent(capsys, tmp_path, tiny_settings):
    code, out, _ = run(capsys, "train", *tiny_settings("rollout.total_decisions=16"), f"runs_dir={tmp_path}")
    assert code is None or code == 0, out
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert "done: 16 decisions" in out and (run_dir / "checkpoints" / "update-000002").is_dir()
    code, out, _ = run(capsys, "train", "--resume", str(run_dir), "rollout.total_decisions=24")
    assert "resuming" in out and "done: 24 decisions" in out
    code, out, _ = run(capsys, "eval", str(run_dir), "--episodes", "3", "--runs-dir", str(tmp_path / "evals"))
    assert code == 0 and "loading agent" in out and "update-000003" in out
    (eval_dir,) = (tmp_path / "evals").iterdir()
    assert "agent:" in (eval_dir / "config.yaml").read_text()
    code, _, err = run(capsys, "eval", str(run_dir), "--seed", "1000", "--runs-dir", str(tmp_path / "evals"))
    assert code == 2 and "overlap the training seeds" in err
    # every training episode had a seed of its own: the checkpoint says which range they used
    first, last = json.loads((run_dir / "checkpoints" / "update-000003" / "meta.json").read_text())["training_seeds"]
    assert first == 1000 and last >= 1000 + 24 - 2  # 24 one-step episodes on 2 environments
    code, _, err = run(capsys, "eval", str(run_dir), "--seed", str(last), "--episodes", "1",
                       "--runs-dir", str(tmp_path / "evals"))
    assert code == 2 and f"overlap the training seeds 1000..{last}" in err


def test_eval_a_suite_with_baselines_and_resume_it(capsys, tmp_path):
    code, out, _ = run(capsys, "eval", "random", "--suite", "twosome-unseen", "--episodes", "3", "--runs-dir",
                       str(tmp_path))
    assert code == 0
    (run_dir,) = list(tmp_path.iterdir())
    rows = json.loads((run_dir / "results.json").read_text())
    assert [r["test"] for r in rows] == ["Cheese", "Hamburger", "ApplePie", "Pizza", "WashingPlate", "Laundry",
                                         "Entertainment"]
    assert all(r["episodes"] == 3 for r in rows)
    # interrupted in the third test: its file lost a line, the later tests never ran
    (run_dir / "ApplePie" / "episodes.jsonl").write_text(
        "\n".join((run_dir / "ApplePie" / "episodes.jsonl").read_text().splitlines()[:1]) + "\n")
    for name in ("Pizza", "WashingPlate", "Laundry", "Entertainment"):
        shutil.rmtree(run_dir / name)
    code, out, _ = run(capsys, "eval", "--resume", str(run_dir))
    assert code == 0 and json.loads((run_dir / "results.json").read_text()) == rows
    # each process that played episodes of a test noted them, the machine and their seconds
    stretches = read_jsonl(run_dir / "ApplePie" / "machine.jsonl")
    assert [m["episodes"] for m in stretches] == [3, 2] and all(m["seconds"] > 0 for m in stretches)
    assert [m["episodes"] for m in read_jsonl(run_dir / "Pizza" / "machine.jsonl")] == [3]
    code, out, _ = run(capsys, "eval", "bot", "--suite", "overview", "--episodes", "2", "--runs-dir", str(tmp_path))
    assert code == 0 and "FoodPreparation: n/a, the BabyAI bot plays BabyAI-Text only" in out


def test_eval_a_trained_symbolic_agent(capsys, tmp_path):
    code, out, _ = run(capsys, "train", "--preset", "symbolic-ppo", "env=groundrl/FoodPreparation-v0", "device=cpu",
                       "rollout.num_envs=2", "rollout.num_steps=8", "rollout.total_decisions=32", "progress=false",
                       "ppo.minibatch_size=16", "ppo.value_minibatch_size=16", "ppo.micro_batch_size=16",
                       f"runs_dir={tmp_path / 'runs'}")
    assert code is None or code == 0, out
    (run_dir,) = list((tmp_path / "runs").iterdir())
    code, out, _ = run(capsys, "eval", str(run_dir), "--suite", "twosome-unseen", "--episodes", "2",
                       "--runs-dir", str(tmp_path / "evals"))
    assert code == 0, out
    (eval_dir,) = list((tmp_path / "evals").iterdir())
    rows = {r["test"]: r for r in json.loads((eval_dir / "results.json").read_text())}
    assert rows["Pizza"]["episodes"] == 2 and "features" in rows["Entertainment"]["skipped"]


def test_train_refuses_bad_settings_in_one_line(capsys, tmp_path):
    for args, message in ((["ppo.gamma=3"], "gamma"), (["--preset", "nope"], "unknown preset"),
                          (["env=groundrl/Nope-v0"], "unknown environment"),
                          (["--resume", str(tmp_path)], "no checkpoints")):
        code, _, err = run(capsys, "train", *args)
        assert code == 2 and message in err and err.count("\n") == 1, err


def test_train_refuses_a_seed_out_of_range_in_one_line_and_leaves_no_folder(capsys, tmp_path, tiny_settings):
    runs_dir = tmp_path / "runs"
    for seed, message in (("9" * 5000, "bad setting: Exceeds the limit (4300 digits) for integer string conversion"),
                          ("-1", "seed must be a whole number from 0 to 2**32 - 1, not -1"),
                          (str(2**32), f"seed must be a whole number from 0 to 2**32 - 1, not {2**32}"),
                          (str(2**300), "seed must be a whole number from 0 to 2**32 - 1, not a number of 301 bits")):
        code, out, err = run(capsys, "train", *tiny_settings("rollout.total_decisions=16"), f"runs_dir={runs_dir}",
                             f"seed={seed}")
        assert code == 2 and err.startswith(f"error: {message}") and err.count("\n") == 1, err
        assert "Traceback" not in out + err and not runs_dir.exists()


def test_eval_refuses_a_seed_of_5000_digits_without_a_traceback(capsys, tmp_path, no_model_loads):
    # typer cannot read it as a number: its usage error, as for any option value it cannot read
    code, out, err = run(capsys, "eval", *FOLLOW, "--seed", "9" * 5000, "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and "Invalid value for '--seed'" in err and "Traceback" not in out + err
    assert not (tmp_path / "runs").exists()


def test_bench_runs_only_the_scripts_of_the_benchmarks_folder(capsys, tmp_path):
    benchmarks = Path(groundrl.__file__).resolve().parent.parent / "benchmarks"
    outside = tmp_path / "outside.py"
    outside.write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    relative = os.path.relpath(outside.with_suffix(""), benchmarks)  # ../../tmp/.../outside
    for name in (relative, str(outside.with_suffix("")), "scoring.py", "scoring/../scoring", ""):
        code, _, err = run(capsys, "bench", name)
        assert code == 2 and err == f"error: no benchmark '{name}'; `groundrl bench` lists them\n"
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("args", [[], ["--list"]])
def test_bench_without_a_name_lists_every_benchmark_by_group(capfd, args):
    code, out, _ = run(capfd, "bench", *args)  # capfd: benchmarks/benchkit/index.py prints it, in its own process
    scripts = sorted(p.stem for p in (Path(groundrl.__file__).resolve().parent.parent / "benchmarks").glob("*.py"))
    assert code == 0 and len(scripts) > 20
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    assert sorted(listed) == scripts
    assert "\nspeed: " in out and "  scoring  " in out.split("\nspeed: ")[1].split("\n\n")[0]


@pytest.fixture
def no_model_loads(monkeypatch):
    """Fail the test if a model starts loading: bad input must be refused before that wait."""
    def load_llm(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr("groundrl.llm.load_llm", load_llm)
    monkeypatch.setattr("groundrl.llm.loading.load_llm", load_llm)


def refused(capsys, runs_dir: Path, *args) -> str:
    """The one-line message of a command that must fail with exit code 2 and leave no run folder."""
    code, out, err = run(capsys, *args, "--runs-dir", str(runs_dir))
    assert code == 2 and "Traceback" not in out + err, out + err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert not runs_dir.is_dir() or not any(runs_dir.iterdir())
    return err.removeprefix("error: ").rstrip("\n")


FOLLOW = ["--env", "groundrl/FollowInstruction-v0", "--model", "tiny-llama", "--episodes", "2"]


@pytest.mark.parametrize("args, message", [
    (["--episodes", "0"], "--episodes must be a whole number of 1 or more, not 0"),
    (["--num-envs", "0"], "--num-envs must be a whole number of 1 or more, not 0"),
    (["--seed", "-1"], "--seed must be a whole number of 0 or more and below 2**63, not -1"),
    (["--seed", str(2**63)], f"--seed must be a whole number of 0 or more and below 2**63, not {2**63}"),
    (["--device", "bogus"], "unknown device 'bogus'"),
    (["--device", "cpu", "--dtype", "bogus"], "unknown dtype 'bogus'"),
    (["--env", "groundrl/Nope-v0"], "unknown environment 'groundrl/Nope-v0'"),
    (["--env-option", "bogus=1"], "--env-option: groundrl/FollowInstruction-v0 takes no option 'bogus'"),
    (["--env-option", "episode_length=0"], "--env-option: episode_length must be"),
    (["--env-option", "episode_length"], "setting 'episode_length' is not KEY=VALUE (e.g. max_steps=50)"),
])
def test_eval_refuses_bad_options_before_loading_and_leaves_no_folder(capsys, tmp_path, no_model_loads, args,
                                                                       message):
    assert message in refused(capsys, tmp_path / "runs", "eval", *FOLLOW, *args)


def test_eval_refuses_a_runs_dir_that_is_a_file(capsys, tmp_path, no_model_loads):
    file = tmp_path / "runs"
    file.write_text("not a folder\n")
    assert refused(capsys, file, "eval", *FOLLOW) == (
        f"--runs-dir {file} is a file; give a folder (it is created if missing)")
    message = refused(capsys, file / "evals", "eval", *FOLLOW)
    assert message.startswith(f"--runs-dir {file / 'evals'} cannot be created: {file} is a file")
    assert [p.name for p in tmp_path.iterdir()] == ["runs"] and file.read_text() == "not a folder\n"


def training_run(folder: Path, meta: str | None = None) -> Path:
    """A training run folder as far as `groundrl eval` reads it before the agent loads: its
    config.yaml and a checkpoint with ``meta`` as its meta.json."""
    from groundrl.train.config import load_config, to_yaml

    config = load_config("twosome", overrides=["model=tiny-llama", "env=groundrl/FollowInstruction-v0"])
    checkpoint = folder / "checkpoints" / "update-000001"
    checkpoint.mkdir(parents=True)
    (folder / "config.yaml").write_text(to_yaml(config))
    if meta is not None:
        (checkpoint / "meta.json").write_text(meta)
    return folder


@pytest.mark.parametrize("meta, what", [
    ("{not json", "is not valid JSON at line 1"),
    ("[1000, 1100]", "is corrupt (not a JSON object)"),
    ('{"training_seeds": [1000]}', "is corrupt (its training_seeds is not [first, last])"),
    ('{"training_seeds": "1000..1100"}', "is corrupt (its training_seeds is not [first, last])"),
    ('{"training_seeds": [1100, 1000]}', "is corrupt (its training_seeds is not [first, last])"),
])
def test_eval_of_a_run_whose_checkpoint_meta_is_corrupt(capsys, tmp_path, no_model_loads, meta, what):
    run_dir = training_run(tmp_path / "train", meta)
    meta_file = run_dir / "checkpoints" / "update-000001" / "meta.json"
    message = refused(capsys, tmp_path / "evals", "eval", str(run_dir), "--episodes", "2")
    assert message.startswith(f"{meta_file} {what}: restore it, or evaluate another")


def test_eval_of_runs_that_cannot_be_evaluated(capsys, tmp_path, no_model_loads):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert refused(capsys, tmp_path / "evals", "eval", str(empty)) == (
        f"{empty} has no checkpoints (a run writes them every checkpoint_every updates)")
    run_dir = training_run(tmp_path / "train", '{"training_seeds": [1000, 1100]}')
    message = refused(capsys, tmp_path / "evals", "eval", str(run_dir), "--seed", "1100", "--episodes", "2")
    assert message == "evaluation seeds 1100..1199 overlap the training seeds 1000..1100: choose another --seed"
    for text, what in (("model: [tiny", "is not valid YAML at line 1"), ("- model", "is corrupt (not a mapping")):
        (run_dir / "config.yaml").write_text(text)
        assert refused(capsys, tmp_path / "evals", "eval", str(run_dir)).startswith(f"{run_dir / 'config.yaml'} {what}")


@pytest.mark.parametrize("config, message", [
    (None, "{run} is not an evaluation run folder (no config.yaml)"),
    ("job: [eval", "{run}/config.yaml is not valid YAML at line 1 (expected ',' or ']', but got '<stream end>'): "
                   "restore it"),
    ("- job: eval\n", "{run}/config.yaml is corrupt (not a mapping of settings); restore it"),
    ("just text\n", "{run}/config.yaml is corrupt (not a mapping of settings); restore it"),
    ("agent: random\n", "{run} is not an evaluation run folder (its config.yaml has no job: eval)"),
    ("job: bench\n", "{run} is not an evaluation run folder (its config.yaml says job: bench, not job: eval)"),
    ("job: eval\nagent: random\n", "{run}/config.yaml lacks device, suite, env, test, model, normalization, dtype, "
                                   "episodes, num_envs, greedy, seed: restore it, or start a new evaluation"),
])
def test_eval_resume_of_what_is_not_an_evaluation(capsys, tmp_path, no_model_loads, config, message):
    run_dir = tmp_path / "eval"
    run_dir.mkdir()
    if config is not None:
        (run_dir / "config.yaml").write_text(config)
    assert refused(capsys, tmp_path / "evals", "eval", "--resume", str(run_dir)) == message.format(run=run_dir)


def test_eval_resume_checks_the_settings_it_reads(capsys, tmp_path, no_model_loads):
    settings = {"job": "eval", "agent": "zero-shot", "suite": None, "env": "groundrl/FollowInstruction-v0",
                "test": None, "model": "tiny-llama", "normalization": None, "episodes": 2, "num_envs": 2,
                "greedy": False, "seed": 5, "dtype": None, "device": "cpu"}
    run_dir = tmp_path / "eval"
    run_dir.mkdir()
    file = run_dir / "config.yaml"
    for change, message in (({"episodes": 0}, f"episodes in {file} must be a whole number of 1 or more, not 0"),
                            ({"seed": "5"}, f"seed in {file} must be a whole number of 0 or more and below 2**63, "
                                            "not '5'"),
                            ({"num_envs": True}, f"num_envs in {file} must be a whole number of 1 or more, not True"),
                            ({"agent": None}, f"{file}: agent has the wrong type (None); restore it"),
                            ({"test": "nope"}, f"{file} has an unknown test 'nope'; choose from "),
                            ({"normalization": "max"}, f"{file} has an unknown normalization 'max'; choose from ")):
        file.write_text(json.dumps({**settings, **change}))  # JSON is YAML
        assert refused(capsys, tmp_path / "evals", "eval", "--resume", str(run_dir)).startswith(message)
    training_run(tmp_path / "train")
    assert refused(capsys, tmp_path / "evals", "eval", "--resume", str(tmp_path / "train")) == (
        f"{tmp_path / 'train'} is a training run: continue it with `groundrl train --resume {tmp_path / 'train'}`, "
        f"or evaluate it with `groundrl eval {tmp_path / 'train'}`")
    assert refused(capsys, tmp_path / "evals", "eval", "--resume", str(tmp_path / "nope")) == (
        f"--resume {tmp_path / 'nope'} is not a folder; give the run folder of an interrupted evaluation")


def test_eval_prompt_option_for_baselines_and_its_refusal_for_trained_agents(capsys, tmp_path, tiny_settings):
    code, out, _ = run(capsys, "eval", "random", "--env", "groundrl/FoodPreparation-v0", "--prompt", "actions",
                       "--episodes", "2", "--runs-dir", str(tmp_path / "evals"))
    assert code == 0, out
    (eval_dir,) = (tmp_path / "evals").iterdir()
    first = json.loads((eval_dir / "FoodPreparation" / "trajectories.jsonl").read_text().splitlines()[0])
    assert first["observation"].startswith("Possible actions: ")
    assert "prompt: actions" in (eval_dir / "config.yaml").read_text()
    code, _, err = run(capsys, "eval", "random", "--env", "groundrl/FoodPreparation-v0", "--prompt", "nope")
    assert code == 2 and "nope" in err
    code, out, _ = run(capsys, "train", *tiny_settings("rollout.total_decisions=16"), f"runs_dir={tmp_path / 'runs'}")
    (run_dir,) = (tmp_path / "runs").iterdir()
    code, _, err = run(capsys, "eval", str(run_dir), "--prompt", "auto", "--runs-dir", str(tmp_path / "evals"))
    assert code == 2 and "keeps the prompt it trained with" in err and err.count("\n") == 1


@pytest.mark.parametrize("command", ["train", "eval", "replay", "plot", "models", "envs", "export"])
def test_every_command_takes_dash_h_for_help(capsys, command):
    code, out, _ = run(capsys, command, "-h")
    assert code == 0 and f"Usage: groundrl {command}" in " ".join(out.split())


def test_bench_hands_dash_h_to_the_script(capfd):
    code, out, _ = run(capfd, "bench", "scoring", "-h")  # capfd: the script's own process prints it
    assert code == 0 and "usage: scoring.py" in out


def test_bench_hands_a_ctrl_c_on_to_the_script_and_its_exit_code_back(tmp_path, monkeypatch):
    """A SIGINT that reached groundrl alone (``kill -INT``, not a terminal's Ctrl-C, which reaches the
    script too) goes on to the script, which stops its own way; its exit code is groundrl's."""
    import signal
    import threading
    import time

    from groundrl import cli

    ready = tmp_path / "ready"
    script = tmp_path / "waits.py"
    script.write_text("import pathlib, signal, sys, time\n"
                      "signal.signal(signal.SIGINT, lambda *_: sys.exit(7))\n"
                      f"pathlib.Path({str(ready)!r}).touch()\n"
                      "time.sleep(60)\n")

    def interrupt_groundrl():
        while not ready.exists():
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)  # this process: groundrl, waiting for its script

    monkeypatch.setattr(cli, "_terminal_interrupts_the_group", lambda: False)
    # Python's own handler, as groundrl has it when a shell starts it: a test run whose parent ignores
    # SIGINT (a background job of a script, nohup) would hand the ignoring on, and nothing would arrive
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt_groundrl, daemon=True).start()
        assert cli._run_script(script, []) == 7
    finally:
        signal.signal(signal.SIGINT, previous)
