"""benchmarks/reproduce_glam.py: its arms are valid settings, and its tables come from kept records."""

import json

import pytest

from groundrl.train.config import load_config, to_yaml


@pytest.fixture(scope="module")
def reproduce(load_benchmark):
    return load_benchmark("reproduce_glam")


def test_the_example_and_every_arm_are_valid_settings(reproduce):
    example = load_config("default", [reproduce.EXAMPLE])
    assert example.env == reproduce.GOTO_LOCAL and example.ppo.gamma == 0.99
    assert example.rollout.total_decisions == reproduce.budget() <= 20_000  # the budget
    assert reproduce.STRUCTURES["lora-frozen-critic"] is None  # the example itself: the llm stage's run
    # the llm run at STRUCTURE_DECISIONS is what a run of that budget ends with: nothing anneals
    assert example.ppo.lr_decay is False and example.ppo.ent_coef_end is None
    assert example.explore.active is False
    assert example.keep_checkpoints == 0  # the checkpoint at STRUCTURE_DECISIONS stays
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


def test_the_structure_table_reads_the_llm_run_up_to_the_structure_budget(reproduce, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(reproduce, "STRUCTURE_DECISIONS", 256)
    kept = tmp_path / "kept"
    run = kept / "llm" / "seed1" / "train" / "20260101-000000-train-BabyAI-GoToLocal-v0"
    run.mkdir(parents=True)
    metrics = [{"update": u, "decisions": 128 * u, "wall_seconds": 60.0 * u, "episodes": 100, "success_rate": rate}
               for u, rate in ((1, 0.3), (2, 0.5), (3, 0.7))]
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    assert reproduce.main(["--table-only", "--seeds", "1", "--out", str(tmp_path / "gone"), "--keep", str(kept)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "lora-frozen-critic" in line)
    assert [cell.strip() for cell in row.split("│")[2:5]] == ["-", "-", "120"]  # 0.6 only at 384, after the budget
    monkeypatch.setattr(reproduce, "STRUCTURE_DECISIONS", 384)
    assert reproduce.main(["--table-only", "--seeds", "1", "--out", str(tmp_path / "gone"), "--keep", str(kept)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "lora-frozen-critic" in line)
    assert [cell.strip() for cell in row.split("│")[2:5]] == ["-", "384", "180"]


def test_the_checkpoint_at_a_number_of_decisions(reproduce, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(to_yaml(load_config("default", [reproduce.EXAMPLE])))  # 128 decisions an update
    (run / "checkpoints" / "update-000002").mkdir(parents=True)
    assert reproduce.checkpoint_at(run, 256) is None  # not complete: no meta.json
    (run / "checkpoints" / "update-000002" / "meta.json").write_text("{}")
    assert reproduce.checkpoint_at(run, 256) == run / "checkpoints" / "update-000002"
    assert reproduce.checkpoint_at(run, 300) is None and reproduce.checkpoint_at(run, 384) is None
