"""benchmarks/reproduce_twosome.py: what it counts as done, and when a run reached 0.95."""

import json
from pathlib import Path

import pytest

from groundrl.train.config import load_config

from benchkit.records import finished


@pytest.fixture(scope="module")
def reproduce(load_benchmark):
    return load_benchmark("reproduce_twosome")


def fake_run(folder: Path, metrics: list[dict], checkpoint: int, total: int = 512, decisions: int | None = None,
             algorithm: str = "ppo") -> Path:
    run = folder / "20260101-000000-train-TomatoSalad-v0"
    (run / "checkpoints" / f"update-{checkpoint:06d}").mkdir(parents=True)
    meta = {"format": 3, "update": checkpoint, "decisions": 128 * checkpoint if decisions is None else decisions}
    (run / "checkpoints" / f"update-{checkpoint:06d}" / "meta.json").write_text(json.dumps(meta))
    group = "  group_size: 4\n" if algorithm != "ppo" else ""
    (run / "config.yaml").write_text(f"algorithm: {algorithm}\nrollout:\n  num_envs: 4\n  num_steps: 32\n"
                                     f"  total_decisions: {total}\n{group}")
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    return run


def test_reached_is_the_first_update_whose_last_100_episodes_succeed_95_percent(reproduce, tmp_path):
    rates = [(60, 0.5), (30, 1.0), (20, 1.0), (40, 1.0), (50, 0.96), (50, 1.0)]
    metrics = [{"update": i + 1, "decisions": 128 * (i + 1), "wall_seconds": 10.0 * (i + 1), "episodes": n,
                "success_rate": rate} for i, (n, rate) in enumerate(rates)]
    run = fake_run(tmp_path, metrics, 4)
    # update 3: 110 episodes, 80 successes; 4: 90 of the last 90 is too few, 150 with update 2 -> 120/150;
    # update 5: 50 + 40 + 20 = 110 episodes, 48 + 40 + 20 = 108 successes (0.98)
    assert reproduce.reached(run) == (640, 50.0)
    assert reproduce.reached(run, target=0.99) is None  # update 6: 50 + 48 of the last 100
    assert reproduce.reached(run, window=50) == (384, 30.0)  # update 3: 20 + 30 of 20 + 30
    assert reproduce.reached(run, window=500) is None


def test_a_run_is_finished_when_its_last_checkpoint_has_played_the_budget(reproduce, tmp_path):
    assert not finished(fake_run(tmp_path / "a", [], 3))  # 512 decisions = 4 updates of 128
    assert finished(fake_run(tmp_path / "b", [], 4))
    # a group method's updates play whole episodes: it is done once it has played its decisions
    assert finished(fake_run(tmp_path / "c", [], 2, decisions=530, algorithm="gigpo"))
    assert not finished(fake_run(tmp_path / "d", [], 3, decisions=500, algorithm="gigpo"))
    assert reproduce.run_folder(tmp_path / "b", "train").name.endswith("-train-TomatoSalad-v0")
    assert reproduce.run_folder(tmp_path / "nothing", "train") is None


def test_the_example_configs_load_and_the_tables_print_with_nothing_done(reproduce, tmp_path, capsys):
    for name, task in reproduce.TASKS.items():
        config = load_config("default", [task.config])
        assert config.env == task.env_id and task.config.stem == name
        assert config.rollout.total_decisions < task.paper_budget
    assert reproduce.main(["--table-only", "--out", str(tmp_path), "--keep", str(tmp_path / "kept")]) == 0
    out = capsys.readouterr().out
    assert "tomato_lettuce_salad" in out and "Unseen tasks" in out and "Symbolic PPO" in out


def test_the_tables_are_made_from_the_kept_records_once_the_run_folders_are_gone(reproduce, tmp_path, capsys):
    rates = [(100, 0.5), (100, 1.0)]
    metrics = [{"update": i + 1, "decisions": 128 * (i + 1), "wall_seconds": 10.0 * (i + 1), "episodes": n,
                "success_rate": rate} for i, (n, rate) in enumerate(rates)]
    run = fake_run(tmp_path / "out" / "tomato_salad" / "word" / "seed1" / "train", metrics, 4)
    (run / "checkpoints" / "update-000004" / "adapter.bin").write_bytes(b"weights")
    (run / "events.out.tfevents.1").write_bytes(b"tensorboard")
    kept = tmp_path / "kept"
    reproduce.keep_records(tmp_path / "out", kept)
    copied = sorted(p.relative_to(kept).as_posix() for p in kept.rglob("*") if p.is_file())
    assert copied == [f"tomato_salad/word/seed1/train/{run.name}/{name}" for name in ("config.yaml", "metrics.jsonl")]

    import shutil

    shutil.rmtree(tmp_path / "out")
    assert reproduce.main(["--table-only", "--tasks", "tomato_salad", "--seeds", "1", "--out", str(tmp_path / "out"),
                           "--keep", str(kept)]) == 0
    assert "256" in capsys.readouterr().out  # reached 0.95 at update 2, read from the kept metrics


def test_token_normalization_is_skipped_where_every_action_has_one_token_a_word(reproduce, tmp_path, capsys):
    record = tmp_path / "out" / "tomato_salad" / reproduce.TOKENS_PER_WORD
    reproduce.tokens_per_word(reproduce.TASKS["tomato_salad"], record, episodes=3, model="tiny-llama")
    counts = json.loads(record.read_text())
    assert counts["states"] > 0 and counts["candidates"] >= 5 * counts["states"]  # 5 actions a state
    differ = counts["actions_tokens_differ_from_words"]
    assert counts["candidates_tokens_differ_from_words"] >= len(differ)

    record.write_text(json.dumps(dict(counts, candidates_tokens_differ_from_words=0)))
    assert reproduce.main(["--tasks", "tomato_salad", "--stages", "ablation", "--normalizations", "token",
                           "--seeds", "1", "--out", str(tmp_path / "out"), "--keep", str(tmp_path / "kept")]) == 0
    out = capsys.readouterr().out
    assert "token normalization is word normalization (skipped)" in out and "= word" in out
    assert not (tmp_path / "out" / "tomato_salad" / "token").exists()  # nothing trained


def test_tomato_lettuce_salads_example_is_the_self_imitation_row_and_its_records_are_read_there(reproduce, tmp_path,
                                                                                             capsys):
    metrics = [{"update": i + 1, "decisions": 128 * (i + 1), "wall_seconds": 10.0 * (i + 1), "episodes": 100,
                "success_rate": rate} for i, rate in enumerate([0.2, 0.97])]
    kept = tmp_path / "results" / "twosome"
    fake_run(tmp_path / "results" / "self_imitation" / "tomato_lettuce_salad" / "sil" / "seed1" / "train", metrics, 2)
    # the train stage leaves the example's runs to benchmarks/self_imitation.py: nothing is started here
    assert reproduce.main(["--tasks", "tomato_lettuce_salad", "--stages", "train,eval", "--seeds", "1",
                           "--out", str(tmp_path / "out"), "--keep", str(kept)]) == 0
    out = capsys.readouterr().out
    assert "benchmarks/self_imitation.py --rows tomato_lettuce_salad/sil" in out and "$ groundrl" not in out
    assert not (tmp_path / "out" / "tomato_lettuce_salad").exists()
    assert "256" in out  # reached 0.95 at update 2, read from the self-imitation row's records beside --keep
