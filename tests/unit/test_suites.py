"""Evaluation suites pick the papers' environments and rewrites; results files round-trip;
an interrupted evaluation resumes to the same numbers."""

from __future__ import annotations

import csv
import json

import pytest

import groundrl
from groundrl.agents import LLMPolicy, RandomAgent
from groundrl.envs.babyai_text import INVENTED_WORDS, NEW_NOUNS
from groundrl.errors import InvalidArgumentError
from groundrl.eval import evaluate
from groundrl.eval.suites import SUITES, get_suite, read_results, run_suite


def test_glam_suite_is_the_papers_tests_with_their_rewrites():
    tests = {t.name: t for t in get_suite("glam").tests}
    assert list(tests) == ["new-seeds", "new-objects", "new-nouns", "invented-words", "new-composition",
                           "synonym-actions", "french"]
    assert all(t.episodes == 1000 for t in tests.values())
    assert tests["new-seeds"].env_id == "groundrl/BabyAI-MixedTrainLocal-v0" and tests["new-seeds"].env_kwargs == {}
    assert tests["new-objects"].env_id == "groundrl/BabyAI-MixedTestLocal-v0"
    assert tests["new-nouns"].env_kwargs == {"rewrite": NEW_NOUNS}
    assert tests["invented-words"].env_kwargs == {"rewrite": INVENTED_WORDS}
    assert tests["new-composition"].env_id == "groundrl/BabyAI-PickUpSeqPickUpLocal-v0"
    assert tests["synonym-actions"].env_kwargs == {"actions": "synonyms"}
    assert tests["french"].env_id == "groundrl/BabyAI-GoToLocalFrench-v0"
    # the rewrites reach what the agent reads
    env = groundrl.make_env(tests["synonym-actions"].env_id, **tests["synonym-actions"].env_kwargs)
    assert "rotate left" in env.reset(seed=0)[1]["valid_actions"]
    env = groundrl.make_env(tests["new-nouns"].env_id, **tests["new-nouns"].env_kwargs)
    prompt = env.reset(seed=0)[0]
    assert not {"key", "ball", "box"} & set(prompt.replace(",", " ").split())


def test_the_gotolocal_suite_rewrites_gotolocal_itself():
    tests = {t.name: t for t in get_suite("glam-gotolocal").tests}
    assert list(tests) == ["new-seeds", "new-nouns", "invented-words", "synonym-actions", "french"]
    assert all(t.episodes == 1000 for t in tests.values())
    assert {t.env_id for name, t in tests.items() if name != "french"} == {"groundrl/BabyAI-GoToLocal-v0"}
    assert tests["french"].env_id == "groundrl/BabyAI-GoToLocalFrench-v0"
    env = groundrl.make_env(tests["invented-words"].env_id, **tests["invented-words"].env_kwargs)
    obs, info = env.reset(seed=3)
    assert "Goal of the agent: go to" in obs and not {"key", "ball", "box"} & set(obs.replace(",", " ").split())
    env = groundrl.make_env(tests["synonym-actions"].env_id, **tests["synonym-actions"].env_kwargs)
    assert env.reset(seed=0)[1]["valid_actions"][:3] == ["rotate left", "rotate right", "move ahead"]


def test_twosome_suites():
    unseen = get_suite("twosome-unseen").tests
    assert [t.env_id for t in unseen] == [f"groundrl/FoodPreparation-{u}-v0" for u in
                                          ("Cheese", "Hamburger", "ApplePie", "Pizza", "WashingPlate", "Laundry")] \
        + ["groundrl/Entertainment-v0"]
    assert all(t.episodes == 100 for t in unseen)
    assert {t.env_id for t in get_suite("twosome").tests} == {
        "groundrl/FoodPreparation-v0", "groundrl/Entertainment-v0", "groundrl/TomatoSalad-v0",
        "groundrl/TomatoLettuceSalad-v0"}
    overview = get_suite("overview").tests
    assert [t.name for t in overview] == ["GoToLocal", "MixedTrainLocal", "FoodPreparation", "Entertainment",
                                          "TomatoSalad"]
    assert [t.episodes for t in overview] == [1000, 1000, 100, 100, 100]


def test_every_suite_names_registered_environments_and_env_ids_are_suites():
    for suite in SUITES.values():
        for test in suite.tests:
            groundrl.make_env(test.env_id, **test.env_kwargs).close()
    (test,) = get_suite("groundrl/BabyAI-OpenLocal-v0").tests
    assert test.env_id == "groundrl/BabyAI-OpenLocal-v0" and test.name == "OpenLocal"
    with pytest.raises(InvalidArgumentError, match="unknown suite 'nope'"):
        get_suite("nope")


def test_results_files_round_trip(tmp_path):
    results = run_suite(RandomAgent(), get_suite("overcooked"), tmp_path, episodes=4, progress=False)
    rows = read_results(tmp_path)
    assert [r["test"] for r in rows] == ["TomatoSalad", "TomatoLettuceSalad"]
    for row, result in zip(rows, results):
        assert row == {"test": result.test.name, "env_id": result.test.env_id, **{
            k: v for k, v in result.result.to_dict().items() if k != "env_id"}, "skipped": ""}
    with open(tmp_path / "results.csv") as f:
        from_csv = list(csv.DictReader(f))
    for row, line in zip(rows, from_csv):
        assert line["test"] == row["test"] and int(line["episodes"]) == row["episodes"]
        assert float(line["success_rate"]) == row["success_rate"] and float(line["ci_high"]) == row["ci_high"]
    for test in ("TomatoSalad", "TomatoLettuceSalad"):
        episodes = [json.loads(x) for x in (tmp_path / test / "episodes.jsonl").read_text().splitlines()]
        steps = [json.loads(x) for x in (tmp_path / test / "trajectories.jsonl").read_text().splitlines()]
        assert sorted(e["episode"] for e in episodes) == [0, 1, 2, 3]
        assert sum(e["length"] for e in episodes) == len(steps)
        assert set(steps[0]) == {"episode", "step", "observation", "valid_actions", "probs", "action", "reward", "seed"}


def test_sampled_results_depend_neither_on_parallelism_nor_on_interruptions(tiny_llama, tmp_path):
    policy = LLMPolicy(tiny_llama)
    env = "groundrl/FollowInstruction-Long-v0"
    whole = evaluate(policy, env, episodes=8, num_envs=3, run_dir=tmp_path / "whole", progress=False)
    assert evaluate(policy, env, episodes=8, num_envs=8, progress=False) == whole
    # an interruption: 3 episodes on disk, a half-written line, the rest lost
    part = tmp_path / "part"
    evaluate(policy, env, episodes=3, num_envs=2, run_dir=part, progress=False)
    with open(part / "trajectories.jsonl", "a") as f:
        f.write('{"episode": 7, "step": 0, "observ')
    resumed = evaluate(policy, env, episodes=8, num_envs=5, run_dir=part, resume=True, progress=False)
    assert resumed == whole

    def steps(folder):
        return sorted(json.loads(x)["episode"] * 100 + json.loads(x)["step"]
                      for x in (folder / "trajectories.jsonl").read_text().splitlines())

    assert steps(part) == steps(tmp_path / "whole")
