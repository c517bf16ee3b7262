"""The plan of ``groundrl eval`` without the command line: every setting checked (options and a
resumed evaluation's config.yaml) before anything loads, the suite and environments it resolves
to, and carrying it out into a run folder that resumes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from groundrl.errors import GroundrlError
from groundrl.eval.plan import _REQUIRED, EvalConfig, plan_evaluation, resume_evaluation, run_evaluation

FOLLOW = "groundrl/FollowInstruction-v0"


def test_the_saved_settings_are_every_field_after_the_job_and_a_resume_requires_them():
    config = EvalConfig("random", env=FOLLOW, env_options={"episode_length": 2})
    names = [f.name for f in dataclasses.fields(EvalConfig)]
    assert list(config.to_dict()) == ["job", *names] and config.to_dict()["job"] == "eval"
    assert set(_REQUIRED) == set(names) - {"env_options"}  # a new setting must say whether a resume needs it


@pytest.mark.parametrize("change, message", [
    ({"suite": "glam", "test": "french"}, "give one of --suite and --test"),
    ({"suite": "glam", "env": FOLLOW}, "--suite names its environments: drop --env"),
    ({"agent": None}, "--agent must be text, not None"),
    ({"model": 3}, "--model must be text or None, not 3"),
    ({"greedy": "yes"}, "--greedy must be true or false, not 'yes'"),
    ({"env_options": ["a"]}, "--env-options must be a mapping of options, not ['a']"),
    ({"test": "nope"}, "--test must be one of new-seeds, "),
    ({"normalization": "max"}, "--normalization must be one of "),
    ({"prompt": "nope"}, "--prompt must be one of auto, glam, actions, none, not 'nope'"),
    ({"precision": "fp8"}, "--precision must be one of fp32, bf16-mixed, auto, not 'fp8'"),
    ({"episodes": 0}, "--episodes must be a whole number of 1 or more, not 0"),
    ({"episodes": True}, "--episodes must be a whole number of 1 or more, not True"),
    ({"num_envs": 0}, "--num-envs must be a whole number of 1 or more, not 0"),
    ({"seed": -1}, "--seed must be a whole number of 0 or more and below 2**63, not -1"),
    ({"seed": 2**63}, f"--seed must be a whole number of 0 or more and below 2**63, not {2**63}"),
])
def test_each_bad_option_is_one_line_naming_it(change, message):
    config = dataclasses.replace(EvalConfig("random", env=FOLLOW), **change)
    with pytest.raises(GroundrlError) as error:
        config.check()
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("change, message", [
    ({"suite": "glam", "test": "french"}, "{file} gives both suite and test; restore it"),
    ({"agent": None}, "{file}: agent has the wrong type (None); restore it"),
    ({"env_options": "a=1"}, "{file}: env_options has the wrong type ('a=1'); restore it"),
    ({"test": "nope"}, "{file} has an unknown test 'nope'; choose from new-seeds"),
    ({"precision": "fp8"}, "{file} has an unknown precision 'fp8'; choose from fp32, bf16-mixed, auto"),
    ({"seed": "5"}, "seed in {file} must be a whole number of 0 or more and below 2**63, not '5'"),
])
def test_each_bad_value_of_a_resumed_evaluation_names_its_file(tmp_path, change, message):
    file = tmp_path / "config.yaml"
    file.write_text(json.dumps({**EvalConfig("random", env=FOLLOW).to_dict(), **change}))  # JSON is YAML
    with pytest.raises(GroundrlError) as error:
        resume_evaluation(tmp_path)
    assert str(error.value).startswith(message.format(file=file))


def test_what_is_not_an_interrupted_evaluation_is_refused(tmp_path):
    def refusal(run_dir: Path) -> str:
        with pytest.raises(GroundrlError) as error:
            EvalConfig.read(run_dir)
        return str(error.value)

    assert refusal(tmp_path / "nope") == (f"--resume {tmp_path / 'nope'} is not a folder; give the run folder of an "
                                          "interrupted evaluation")
    assert refusal(tmp_path) == f"{tmp_path} is not an evaluation run folder (no config.yaml)"
    (tmp_path / "config.yaml").write_text("job: bench\n")
    assert refusal(tmp_path) == (f"{tmp_path} is not an evaluation run folder (its config.yaml says job: bench, not "
                                 "job: eval)")
    (tmp_path / "metrics.jsonl").write_text("")
    assert refusal(tmp_path).startswith(f"{tmp_path} is a training run: continue it with `groundrl train --resume")
    (tmp_path / "config.yaml").write_text("job: eval\nagent: random\nsuite: null\n")
    assert refusal(tmp_path) == (f"{tmp_path / 'config.yaml'} lacks device, env, test, model, normalization, dtype, "
                                 "episodes, num_envs, greedy, seed: restore it, or start a new evaluation")


def test_an_evaluation_saved_before_precision_prompt_and_env_options_reads_with_their_defaults(tmp_path):
    settings = EvalConfig("random", env=FOLLOW).to_dict()
    for key in ("precision", "prompt", "env_options"):
        settings.pop(key)
    (tmp_path / "config.yaml").write_text(json.dumps(settings))
    assert EvalConfig.read(tmp_path) == EvalConfig("random", env=FOLLOW)


def test_the_plan_plays_an_env_a_test_on_another_env_or_a_suite():
    plan = plan_evaluation(EvalConfig("random", env=FOLLOW))
    assert [(t.name, t.env_id) for t in plan.suite.tests] == [("FollowInstruction", FOLLOW)]
    assert plan.folder_name == FOLLOW and plan.run_dir is None and plan.trained is None
    plan = plan_evaluation(EvalConfig("random", test="invented-words", env="groundrl/BabyAI-GoToLocal-v0"))
    (test,) = plan.suite.tests
    assert (plan.suite.name, test.env_id, test.episodes) == ("invented-words", "groundrl/BabyAI-GoToLocal-v0", 1000)
    assert "rewrite" in test.env_kwargs and plan.folder_name == "invented-words"
    plan = plan_evaluation(EvalConfig("random", suite="overcooked"))
    assert len(plan.suite.tests) == 2 and plan.folder_name == "overcooked"


@pytest.mark.parametrize("change, message", [
    ({}, "say what to play: --suite NAME, --env ID or --test NAME (see `groundrl envs`)"),
    ({"env": "groundrl/Nope-v0"}, "unknown environment 'groundrl/Nope-v0'"),
    ({"suite": "nope"}, "unknown suite 'nope'"),
    ({"env": FOLLOW, "env_options": {"bogus": 1}}, f"--env-option: {FOLLOW} takes no option 'bogus'"),
    ({"agent": "no/such/run", "env": FOLLOW}, "no agent 'no/such/run'"),
])
def test_what_the_settings_name_is_checked_in_one_line(change, message):
    with pytest.raises(GroundrlError) as error:
        plan_evaluation(EvalConfig(**{"agent": "random", **change}))
    assert str(error.value).startswith(message)


def test_a_runs_dir_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "runs").write_text("")
    with pytest.raises(GroundrlError, match="is a file; give a folder"):
        plan_evaluation(EvalConfig("random", env=FOLLOW), tmp_path / "runs")


def test_a_baselines_prompt_and_env_options_reach_every_environment():
    plan = plan_evaluation(EvalConfig("random", env=FOLLOW, prompt="none", env_options={"episode_length": 2}))
    assert plan.env_kwargs == {"prompt": None} and plan.env_kwargs_for == {FOLLOW: {"episode_length": 2}}
    assert plan_evaluation(EvalConfig("random", env=FOLLOW, prompt="actions")).env_kwargs == {"prompt": "actions"}


def training_run(folder: Path, training_seeds: list[int]) -> Path:
    """A training run folder as far as the plan reads it: its config.yaml and a checkpoint's meta.json."""
    from groundrl.train.config import load_config, to_yaml

    config = load_config("twosome", overrides=["model=tiny-llama", f"env={FOLLOW}", "env_kwargs.episode_length=3"])
    checkpoint = folder / "checkpoints" / "update-000001"
    checkpoint.mkdir(parents=True)
    (folder / "config.yaml").write_text(to_yaml(config))
    (checkpoint / "meta.json").write_text(json.dumps({"training_seeds": training_seeds}))
    return folder


def test_a_trained_agent_plays_its_env_with_its_options_on_seeds_it_did_not_train_on(tmp_path):
    run_dir = training_run(tmp_path / "train", [1000, 1100])
    plan = plan_evaluation(EvalConfig(str(run_dir), env_options={"num_actions": [2, 3]}))
    assert [t.env_id for t in plan.suite.tests] == [FOLLOW] and plan.trained.env == FOLLOW
    assert plan.env_kwargs_for == {FOLLOW: {"episode_length": 3, "num_actions": [2, 3]}}
    assert plan.env_kwargs == plan.trained.prompt_options
    with pytest.raises(GroundrlError, match="keeps the prompt it trained with"):
        plan_evaluation(EvalConfig(str(run_dir), prompt="auto"))
    with pytest.raises(GroundrlError) as error:
        plan_evaluation(EvalConfig(str(run_dir), seed=1050, episodes=2))
    assert str(error.value) == ("evaluation seeds 1050..1149 overlap the training seeds 1000..1100: choose another "
                                "--seed")


def test_run_evaluation_writes_a_run_folder_that_resumes_to_the_same_results(tmp_path):
    said = []
    config = EvalConfig("random", env=FOLLOW, episodes=3, num_envs=2)
    evaluation = run_evaluation(plan_evaluation(config, tmp_path / "runs"), say=said.append, progress=False)
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert evaluation.run_dir == run_dir and run_dir.name.endswith("-eval-FollowInstruction-v0") and said == []
    assert EvalConfig.read(run_dir) == config and evaluation.about == {"agent": "random"}
    (result,) = evaluation.results
    assert result.result.episodes == 3
    rows = json.loads((run_dir / "results.json").read_text())
    episodes = run_dir / "FollowInstruction" / "episodes.jsonl"
    episodes.write_text(episodes.read_text().splitlines()[0] + "\n")  # interrupted after one episode
    resumed = run_evaluation(resume_evaluation(run_dir), progress=False)
    assert resumed.run_dir == run_dir and [p.name for p in (tmp_path / "runs").iterdir()] == [run_dir.name]
    assert json.loads((run_dir / "results.json").read_text()) == rows
