"""benchmarks/reproduce_glam.py: its arms are valid settings, and its tables come from kept records."""

import json

import pytest

from groundrl.train.config import load_config


@pytest.fixture(scope="module")
def reproduce(load_benchmark):
    return load_benchmark("reproduce_glam")


def test_the_example_and_every_arm_are_valid_settings(reproduce):
    example = load_config("default", [reproduce.EXAMPLE])
    assert example.env == reproduce.GOTO_LOCAL and example.ppo.gamma == 0.99
    assert example.rollout.total_decisions == reproduce.budget() <= 20_000  # the budget
    glam = load_config("default", [reproduce.EXAMPLE], reproduce.STRUCTURES["full-shared-critic"])
    assert (glam.agent.llm.actor, glam.agent.llm.critic, glam.ppo.phases) == ("full", "shared", "joint")
    assert glam.rollout == example.rollout  # the structures differ in structure only
    for preset in reproduce.BASELINES:
        config = load_config(preset, [], [f"env={reproduce.GOTO_LOCAL}", f"rollout.total_decisions={reproduce.budget()}"])
        assert config.env == reproduce.GOTO_LOCAL


def test_the_tables_read_the_kept_records(reproduce, tmp_path, capsys):
    kept = tmp_path / "kept"
    run = kept / "llm" / "seed1" / "train" / "20260101-000000-train-BabyAI-GoToLocal-v0"
    run.mkdir(parents=True)
    metrics = [{"update": u, "decisions": 128 * u, "wall_seconds": 60.0 * u, "episodes": 50, "success_rate": rate}
               for u, rate in ((1, 0.3), (2, 0.5), (3, 0.7), (4, 0.8))]
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    evaluation = kept / "llm" / "seed1" / "eval" / "20260101-010000-eval-BabyAI-GoToLocal-v0"
    evaluation.mkdir(parents=True)
    (evaluation / "config.yaml").write_text("env: groundrl/BabyAI-GoToLocal-v0\n")
    (evaluation / "results.json").write_text(json.dumps([
        {"test": "BabyAI-GoToLocal", "env_id": "groundrl/BabyAI-GoToLocal-v0", "episodes": 1000, "successes": 712,
         "success_rate": 0.712, "ci_low": 0.68, "ci_high": 0.74, "mean_return": 0.5, "mean_length": 12.0,
         "skipped": ""}]))
    assert reproduce.main(["--table-only", "--seeds", "1", "--out", str(tmp_path / "gone"), "--keep", str(kept)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "goto_local.yaml" in line)
    # 512 decisions trained; 0.71 evaluated; 0.6 reached at update 3 (the last 100 episodes: 35 + 25 of 100)
    assert "512" in row and "0.71" in row and row.split("│")[4].strip() == "384"
    assert "new-nouns" in out and "MixedTrainLocal" in out
