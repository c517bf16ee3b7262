"""benchmarks/reproduce_glam.py: its arms are valid settings, and its tables come from kept records."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from groundrl.train.config import load_config, to_yaml

from benchkit import pace


@pytest.fixture(scope="module")
def reproduce(load_benchmark):
    return load_benchmark("reproduce_glam")


def test_the_example_and_every_arm_are_valid_settings(reproduce):
    example = load_config("default", [reproduce.EXAMPLE])
    assert example.env == reproduce.GOTO_LOCAL and example.ppo.gamma == 0.99
    assert example.rollout.total_decisions == reproduce.budget() <= 20_000  # the budget
    assert reproduce.STRUCTURES["lora-frozen-critic"] is None  # the example without its floor: that variant's run
    # the llm run at STRUCTURE_DECISIONS is what a run of that budget ends with: nothing anneals
    assert example.ppo.lr_decay is False and example.ppo.ent_coef_end is None
    assert example.explore.active is False
    assert example.keep_checkpoints == 0  # the checkpoint at STRUCTURE_DECISIONS stays
    glam = load_config("default", [reproduce.EXAMPLE], reproduce.STRUCTURES["full-shared-critic"])
    assert (glam.agent.llm.actor, glam.agent.llm.critic, glam.ppo.phases) == ("full", "shared", "joint")
    assert glam.rollout == example.rollout  # the structures differ in structure only
    no_floor = load_config("default", [reproduce.EXAMPLE], reproduce.VARIANTS["no-floor"])
    assert glam.ppo.advantage_std_floor == no_floor.ppo.advantage_std_floor == 0  # compared as they were run
    for preset in set(reproduce.BASELINES) - {"npae"}:
        config = load_config(preset, [], [f"env={reproduce.GOTO_LOCAL}",
                                          f"rollout.total_decisions={reproduce.budget()}"])
        assert config.env == reproduce.GOTO_LOCAL
    # NPAE trains as the example does: GLAM's NPAE structure, the example's rollout, budget and trunk
    npae, as_published = load_config("default", [reproduce.EXAMPLE], reproduce.NPAE), load_config("npae")
    assert npae.agent.llm == replace(as_published.agent.llm, train_layers=example.agent.llm.train_layers)
    assert (npae.rollout, npae.prompt_window, npae.explore) == (example.rollout, example.prompt_window, example.explore)
    assert (npae.ppo.phases, npae.ppo.update_epochs, npae.ppo.gamma) == ("joint", example.ppo.update_epochs, 0.99)


def test_a_variant_is_the_example_with_one_change(reproduce):
    """Stage variants: GiGPO as its preset sets it, everything else the example's (its agent, budget,
    prompt, learning rates, epochs), so that a difference in learning is the critic's replacement."""
    example = load_config("default", [reproduce.EXAMPLE])
    gigpo = load_config("default", [reproduce.EXAMPLE], reproduce.VARIANTS["gigpo"])
    preset = load_config("gigpo")
    assert (gigpo.algorithm, gigpo.rollout.group_size, gigpo.ppo.kl_coef, gigpo.ppo.normalize_advantages) == \
        (preset.algorithm, preset.rollout.group_size, preset.ppo.kl_coef, preset.ppo.normalize_advantages)
    assert gigpo.agent == example.agent and gigpo.prompt_window == example.prompt_window
    assert gigpo.explore == example.explore and gigpo.rollout == replace(example.rollout, group_size=4)
    assert replace(gigpo.ppo, kl_coef=0.0, normalize_advantages=True) == example.ppo
    glam = load_config("default", [reproduce.EXAMPLE], reproduce.VARIANTS["glam-structure"])
    assert glam == load_config("default", [reproduce.EXAMPLE], reproduce.STRUCTURES["full-shared-critic"])
    assert glam.rollout == example.rollout  # the structure stage's arm, to the example's whole budget
    assert example.ppo.advantage_std_floor == 0.05
    no_floor = load_config("default", [reproduce.EXAMPLE], reproduce.VARIANTS["no-floor"])
    assert no_floor == replace(example, ppo=replace(example.ppo, advantage_std_floor=0.0))
    assert set(reproduce.VARIANTS) <= set(reproduce.ARMS)  # drawn in the figure, tabled beside the example
    # the mechanisms, each alone: the critic; self-imitation; self-imitation with hindsight
    own, sil, hindsight = (load_config("default", [reproduce.EXAMPLE], reproduce.VARIANTS[name])
                           for name in ("own-critic", "sil", "hindsight"))
    assert own == replace(example, agent=replace(example.agent, llm=replace(example.agent.llm, critic="own",
                                                                             critic_layers=2)))
    assert replace(sil, sil=example.sil) == example and sil.sil.enabled and sil.sil.hindsight == 0
    assert hindsight == replace(sil, sil=replace(sil.sil, hindsight=2))
    timed = load_config("default", [reproduce.EXAMPLE], reproduce.VARIANTS["critic-time"])
    assert timed == replace(example, agent=replace(example.agent, llm=replace(example.agent.llm, critic_time=True)))


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
    assert "(1,000 ep.)" not in row  # the table's count: said once, in its title
    assert "new-nouns" in out and "MixedTrainLocal" in out
    # the MixedTrainLocal table reads random's and the bot's --suite glam runs beside the agent's
    bound = kept / "generalization-bounds" / "random-glam" / "20260101-020000-eval-glam"
    bound.mkdir(parents=True)
    (bound / "results.json").write_text(json.dumps([{"test": "new-objects", "episodes": 1000, "success_rate": 0.123}]))
    mixed = kept / "mixed" / "seed1" / "generalization" / "20260101-030000-eval-glam"
    mixed.mkdir(parents=True)
    (mixed / "results.json").write_text(json.dumps([{"test": "new-objects", "episodes": 1000, "success_rate": 0.456}]))
    assert reproduce.main(["--table-only", "--seeds", "1", "--out", str(tmp_path / "gone"), "--keep", str(kept)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "new-objects" in line)
    assert [cell.strip() for cell in row.split("│")[1:5]] == ["new-objects", "0.12", "-", "0.46"]
    # an evaluation of another number of episodes than the table's says its own
    assert reproduce.main(["--table-only", "--seeds", "1", "--episodes", "100", "--out", str(tmp_path / "gone"),
                           "--keep", str(kept)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "goto_local.yaml" in line)
    assert "0.71 (1,000 ep.)" in row


def test_the_generalization_and_mixed_tables_read_the_runs_before_the_floor(reproduce, tmp_path, capsys):
    """Records made before the example took its floor stay in the tables, said to be that: the
    no-floor agent's generalization in a column of its own, MixedTrainLocal from before-floor/."""
    kept = tmp_path / "kept"
    suite = kept / "no-floor" / "seed1" / "generalization" / "20260101-000000-eval-glam-gotolocal"
    suite.mkdir(parents=True)
    (suite / "results.json").write_text(json.dumps([{"test": "new-nouns", "episodes": 50, "success_rate": 0.64}]))
    run = kept / "before-floor" / "mixed" / "seed1" / "train" / "20260101-000000-train-BabyAI-MixedTrainLocal-v0"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text(json.dumps({"update": 1, "decisions": 128, "wall_seconds": 60.0,
                                                   "episodes": 2, "success_rate": 0.0}) + "\n")
    evaluation = kept / "before-floor" / "mixed" / "seed1" / "eval" / "20260101-010000-eval-BabyAI-MixedTrainLocal-v0"
    evaluation.mkdir(parents=True)
    (evaluation / "results.json").write_text(json.dumps([{"test": "BabyAI-MixedTrainLocal", "episodes": 50,
                                                          "success_rate": 0.02}]))
    assert reproduce.main(["--table-only", "--seeds", "1", "--out", str(tmp_path / "gone"), "--keep", str(kept)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "new-nouns" in line)
    assert [cell.strip() for cell in row.split("│")[4:6]] == ["-", "0.64 (50 ep.)"]  # the example's, then no-floor's
    assert "settings before its advantage floor, 128 of" in " ".join(out.split())
    row = next(line for line in out.splitlines() if "its evaluation (MixedTrainLocal)" in line)
    assert "0.02 (50 ep.)" in row
    assert "npae before the floor" not in out  # a row only where its runs are kept
    npae = kept / "before-floor" / "npae" / "seed1" / "train" / "20260101-000000-train-BabyAI-GoToLocal-v0"
    npae.mkdir(parents=True)
    (npae / "metrics.jsonl").write_text(json.dumps({"update": 1, "decisions": 256, "wall_seconds": 60.0,
                                                    "episodes": 2, "success_rate": 0.5}) + "\n")
    assert reproduce.main(["--table-only", "--seeds", "1", "--out", str(tmp_path / "gone"), "--keep", str(kept)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "npae before the floor" in line)
    assert row.split("│")[2].strip() == "256"


def test_the_structure_table_reads_the_no_floor_run_up_to_the_structure_budget(reproduce, tmp_path, capsys,
                                                                               monkeypatch):
    monkeypatch.setattr(reproduce, "STRUCTURE_DECISIONS", 256)
    kept = tmp_path / "kept"
    run = kept / "no-floor" / "seed1" / "train" / "20260101-000000-train-BabyAI-GoToLocal-v0"
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


def test_the_figure_draws_the_windowed_training_success_of_every_arm(reproduce, tmp_path):
    """--plot: the success of the last 100 training episodes per arm from the kept records alone, a
    seed still running ends early; windowed_success is what "reached 0.6" reads."""
    kept = tmp_path / "kept"
    for arm, seed, updates in (("llm", 1, 4), ("llm", 2, 2), ("symbolic-ppo", 1, 4)):
        run = kept / arm / f"seed{seed}" / "train" / "20260101-000000-train-BabyAI-GoToLocal-v0"
        run.mkdir(parents=True)
        metrics = [{"update": u, "decisions": 128 * u, "wall_seconds": 60.0 * u, "episodes": 40,
                    "success_rate": 0.25 * u}
                   for u in range(1, updates + 1)]
        (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    run = kept / "llm" / "seed1" / "train" / "20260101-000000-train-BabyAI-GoToLocal-v0"
    # the window: update 3 counts updates 3, 2 and 1 (120 episodes: 30 + 20 + 10 successes)
    assert [round(rate, 3) for *_, rate in reproduce.windowed_success(run)] == [0.25, 0.375, 0.5, 0.75]
    assert [total for _, _, total, _ in reproduce.windowed_success(run)] == [40, 80, 120, 120]
    figure = reproduce.plot_curves(kept, [1, 2, 3], tmp_path / "curves.png")
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def kept_arm(kept, arm: str, seed: int, config, metrics: list[dict]) -> Path:
    """An arm's kept records: its training run (settings, metrics) and a finished evaluation."""
    run = kept / arm / f"seed{seed}" / "train" / "20260101-000000-train-BabyAI-GoToLocal-v0"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(to_yaml(config))
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    evaluation = kept / arm / f"seed{seed}" / "eval" / "20260101-010000-eval-BabyAI-GoToLocal-v0"
    evaluation.mkdir(parents=True)
    (evaluation / "config.yaml").write_text("env: groundrl/BabyAI-GoToLocal-v0\n")
    (evaluation / "results.json").write_text(json.dumps([{"test": "GoToLocal", "env_id": "groundrl/BabyAI-GoToLocal-v0",
                                                          "episodes": 10, "successes": 3, "success_rate": 0.3}]))
    return run


def test_an_arm_whose_records_are_kept_is_not_run_again(reproduce, tmp_path, monkeypatch):
    """A session on another machine has no run folders: the kept records (train to its budget, and
    the evaluation) are what says an arm is done."""
    kept = tmp_path / "kept"
    metrics = [{"update": u, "decisions": 512 * u, "wall_seconds": 9.0 * u} for u in (1, 2)]
    config = load_config("drrn", [], [f"env={reproduce.GOTO_LOCAL}", "rollout.total_decisions=1024"])
    run = kept_arm(kept, "drrn", 2, config, metrics[:1])
    assert not reproduce.kept_done(kept, "drrn", 2)  # half its budget
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    assert reproduce.kept_done(kept, "drrn", 2) and not reproduce.kept_done(kept, "drrn", 1)
    # its evaluation played 10 episodes: done for a table of 10, not for one of 1,000
    assert reproduce.kept_done(kept, "drrn", 2, episodes=10) and not reproduce.kept_done(kept, "drrn", 2, episodes=1000)
    for episodes, again in (("10", []), ("1000", [tmp_path / "out" / "drrn" / "seed2"])):
        trained = []
        monkeypatch.setattr(pace, "train", lambda folder, arguments, trained=trained: trained.append(folder) and None)
        monkeypatch.setattr(reproduce, "BASELINES", ("drrn",))
        assert reproduce.main(["--stages", "baselines", "--seeds", "1", "2", "--episodes", episodes,
                               "--out", str(tmp_path / "out"), "--keep", str(kept)]) == 0
        assert trained == [tmp_path / "out" / "drrn" / "seed1", *again]


def test_a_group_method_arm_is_done_once_it_has_played_its_decisions(reproduce, tmp_path):
    """GiGPO's updates play whole episodes (at least 128 decisions each): its run ends at its budget
    of decisions, before the number of updates PPO would take."""
    kept = tmp_path / "kept"
    metrics = [{"update": u, "decisions": 256 * u, "wall_seconds": 9.0 * u} for u in (1, 2, 3, 4)]
    config = load_config("default", [reproduce.EXAMPLE], [*reproduce.VARIANTS["gigpo"], "rollout.total_decisions=1024"])
    run = kept_arm(kept, "gigpo", 1, config, metrics[:3])
    assert not reproduce.kept_done(kept, "gigpo", 1)  # 768 of 1,024 decisions
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    assert reproduce.kept_done(kept, "gigpo", 1)  # 1,024 decisions in 4 of PPO's 8 updates


def test_variants_runs_the_named_variants_only(reproduce, tmp_path, monkeypatch):
    """Two benchmark processes can share the variants (one each) without touching each other's run."""
    trained = []
    monkeypatch.setattr(pace, "train", lambda folder, arguments: trained.append((folder, arguments)) and None)
    assert reproduce.main(["--stages", "variants", "--variants", "glam-structure", "--seeds", "1", "--out",
                           str(tmp_path / "out"), "--keep", str(tmp_path / "kept")]) == 0
    assert [folder for folder, _ in trained] == [tmp_path / "out" / "glam-structure" / "seed1"]
    assert "agent.llm.critic=shared" in trained[0][1] and "seed=1" in trained[0][1]


def test_bad_selections_are_one_line_errors(reproduce, capsys):
    for selection in (["--variants", "nope"], ["--variants", ",,"], ["--stages", ""]):
        with pytest.raises(SystemExit) as exit_:
            reproduce.main(["--table-only", *selection])
        assert exit_.value.code == 2
        assert capsys.readouterr().err.strip().splitlines()[-1].split(": error: ")[1].startswith("--")
