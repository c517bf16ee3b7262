"""benchmarks/benchkit/pace.py: a piece's hours from its arm's records, on this machine first, and
the deadline (``--hours``) that refuses, in one line, a piece that cannot finish before it."""

import json
from pathlib import Path

import pytest

from groundrl.train.config import load_config, to_yaml

from benchkit import pace

HERE = dict(zip(("cpu", "cpu_capability", "threads"), pace.this_machine()))
ELSEWHERE = {"cpu": "Some Other CPU", "cpu_capability": "AVX2", "threads": 1}


@pytest.fixture(scope="module")
def reproduce(load_benchmark):
    return load_benchmark("reproduce_glam")


def lines(rows: list[dict]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def train_run(arm: Path, seed: int, config, seconds_a_decision: float, updates: int, machines: list[dict] = (),
              checkpoint: int | None = None) -> Path:
    """A training run of ``arm``: ``updates`` updates of 128 decisions at ``seconds_a_decision``
    (rollouts half of it), the machine of each stretch, a checkpoint after update ``checkpoint``."""
    run = arm / f"seed{seed}" / "train" / "20260101-000000-train-BabyAI-GoToLocal-v0"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(to_yaml(config))
    (run / "metrics.jsonl").write_text(lines([
        {"update": u, "decisions": 128 * u, "wall_seconds": 128 * u * seconds_a_decision,
         "rollout_seconds": 64 * seconds_a_decision, "episode_length": 20.0} for u in range(1, updates + 1)]))
    if machines:
        (run / "machine.jsonl").write_text(lines(machines))
    if checkpoint is not None:
        saved = run / "checkpoints" / f"update-{checkpoint:06d}"
        saved.mkdir(parents=True)
        (saved / "meta.json").write_text(json.dumps({"format": 3, "update": checkpoint, "decisions": 128 * checkpoint}))
    return run


def eval_run(folder: Path, mean_length: float, stretches: list[dict] = ()) -> Path:
    """A finished evaluation of 10 episodes in ``folder``, with the machine and seconds it took."""
    run = folder / "20260101-010000-eval-BabyAI-GoToLocal-v0"
    (run / "GoToLocal").mkdir(parents=True)
    (run / "config.yaml").write_text("suite: null\nepisodes: 10\n")
    (run / "results.json").write_text(json.dumps([{"test": "GoToLocal", "episodes": 10, "mean_length": mean_length}]))
    if stretches:
        (run / "GoToLocal" / "machine.jsonl").write_text(lines(stretches))
    return run


def piece(out: Path, arm: str, seed: int, reproduce, episodes: int = 100) -> pace.Piece:
    return pace.Piece(f"{arm} seed {seed}", out / arm / f"seed{seed}",
                      ["--config", str(reproduce.EXAMPLE), "rollout.total_decisions=1024", f"seed={seed}"],
                      [("eval", ["--episodes", str(episodes)])], f"python benchmarks/x.py --seeds {seed}")


def test_a_piece_is_timed_by_its_arms_records_on_this_machine_first(reproduce, tmp_path):
    out, keep = tmp_path / "out", tmp_path / "keep"
    config = load_config("default", [reproduce.EXAMPLE])
    # seed 1 trained here at 2 s a decision, then resumed elsewhere at 5 s; seed 2's records do not say
    train_run(keep / "llm", 1, config, 2.0, 4, [{**HERE, "update": 1}])
    train_run(keep / "llm", 2, config, 9.0, 4)
    eval_run(keep / "llm" / "seed1" / "eval", 30.0, [{**HERE, "episodes": 10, "decisions": 300, "seconds": 150.0}])
    found = pace.estimate(piece(out, "llm", 3, reproduce), out, keep)
    # 1,024 decisions at 2 s, and 100 episodes of 30 decisions at 0.5 s (its evaluation's pace here)
    assert found.hours == pytest.approx((1024 * 2.0 + 100 * 30 * 0.5) / 3600)
    assert found.source == pace.THIS and found.left == "1,024 decisions, 100 episodes"

    # what is done is not counted again: seed 3 checkpointed after update 6 (768 decisions), here
    train_run(out / "llm", 3, config, 2.0, 7, [{**HERE, "update": 1}], checkpoint=6)
    found = pace.estimate(piece(out, "llm", 3, reproduce), out, keep)
    assert found.hours == pytest.approx((256 * 2.0 + 100 * 30 * 0.5) / 3600)


def test_without_a_record_from_this_machine_the_slowest_elsewhere_then_the_unrecorded_times_it(reproduce, tmp_path):
    out, keep = tmp_path / "out", tmp_path / "keep"
    config = load_config("default", [reproduce.EXAMPLE])
    arm = piece(out, "npae", 1, reproduce)
    assert pace.estimate(arm, out, keep).hours is None  # no record of the arm at all
    train_run(keep / "npae", 1, config, 3.0, 2)
    found = pace.estimate(arm, out, keep)
    # no evaluation timed: the rollouts' pace (1.5 s: half of each update), episodes as long as the
    # training's last ones (20 decisions)
    assert found.source == pace.UNRECORDED
    assert found.hours == pytest.approx((1024 * 3.0 + 100 * 20 * 1.5) / 3600)
    train_run(keep / "npae", 2, config, 4.0, 2, [{**ELSEWHERE, "update": 1}])
    train_run(keep / "npae", 3, config, 6.0, 2, [{**ELSEWHERE, "cpu": "A Third CPU", "update": 1}])
    found = pace.estimate(arm, out, keep)
    assert found.source == pace.ELSEWHERE  # the slowest recorded machine: a deadline's estimate errs long
    assert found.hours == pytest.approx((1024 * 6.0 + 100 * 20 * 3.0) / 3600)


def test_a_piece_that_cannot_finish_before_the_deadline_is_refused_in_one_line(reproduce, tmp_path, monkeypatch,
                                                                                capsys):
    out, keep = tmp_path / "out", tmp_path / "keep"
    config = load_config("default", [reproduce.EXAMPLE])
    # 8,192 decisions at 2 s and 10 episodes of 20 decisions at 1 s (its rollouts' pace): 4.6 h a seed
    train_run(keep / "gigpo", 1, config, 2.0, 64, [{**HERE, "update": 1}])
    trained = []
    monkeypatch.setattr(pace, "train", lambda folder, arguments: trained.append(folder) and None)
    arguments = ["--stages", "variants", "--variants", "gigpo,no-floor", "--seeds", "2", "--episodes", "10",
                 "--out", str(out), "--keep", str(keep)]
    assert reproduce.main([*arguments, "--hours", "4"]) == 0
    printed = capsys.readouterr().out
    assert "estimated on this CPU" in printed and "deadline in 4 h" in printed
    refused = [line for line in printed.splitlines() if line.startswith("refused:")]
    assert refused == [
        f"refused: gigpo seed 2 needs ~4.6 h (this CPU), 4.0 h are left of --hours 4; run it where it has the "
        f"time: python benchmarks/reproduce_glam.py --stages variants --variants gigpo --seeds 2 --episodes 10 "
        f"--out {out} --keep {keep}",
        f"refused: no-floor seed 2 needs an unknown time (no record of no-floor yet), 4.0 h are left of --hours 4; "
        f"run it where it has the time: python benchmarks/reproduce_glam.py --stages variants --variants no-floor "
        f"--seeds 2 --episodes 10 --out {out} --keep {keep}"]
    assert trained == []
    # with the time (or no deadline) it runs, the one without a record too
    assert reproduce.main([*arguments, "--hours", "5"]) == 0
    assert trained == [out / "gigpo" / "seed2"]
    assert reproduce.main(arguments) == 0
    assert trained == [out / "gigpo" / "seed2", out / "gigpo" / "seed2", out / "no-floor" / "seed2"]


@pytest.mark.parametrize("hours", ["0", "-1", "nan"])
def test_hours_must_be_positive(reproduce, load_benchmark, capsys, hours):
    for benchmark in (reproduce, load_benchmark("reproduce_twosome"), load_benchmark("self_imitation"),
                      load_benchmark("group_methods"), load_benchmark("exploration")):
        with pytest.raises(SystemExit) as exit_:
            benchmark.main(["--hours", hours])
        assert exit_.value.code == 2
        assert capsys.readouterr().err.strip().splitlines()[-1].split(": error: ")[1].startswith("--hours must be")


def test_an_exact_run_is_timed_by_its_methods_records_and_refused_past_the_deadline(load_benchmark, tmp_path,
                                                                                      monkeypatch, capsys):
    """benchmarks/group_methods.py: a run's hours are its budget (less what an unfinished record's run
    folder holds) at the seconds a decision of the same method's records, this CPU's first."""
    from benchkit import exact_runs

    benchmark = load_benchmark("group_methods")
    out, ppo_out, runs_dir = tmp_path / "out", tmp_path / "ppo", tmp_path / "runs"
    out.mkdir()

    def record(seed: int, seconds_a_decision: float, decisions: int, cpu: str | None, suffix: str = "",
               run_dir: Path = tmp_path / "gone"):
        rows = [{"decisions": d, "wall_seconds": d * seconds_a_decision, "exact_success": 0.1}
                for d in range(0, decisions + 1, 512)]
        (out / f"FoodPreparation-grpo-seed{seed}.json{suffix}").write_text(json.dumps(
            {"run_dir": str(run_dir), "rows": rows, **({"cpu": cpu} if cpu else {})}))

    record(1, 2.0, 3072, HERE["cpu"])
    record(3, 9.0, 3072, "Some Other CPU")
    record(4, 1.0, 3072, None)
    ran = []
    monkeypatch.setattr(exact_runs, "run_resumable", lambda path, arguments, label: ran.append(label))
    arguments = ["--methods", "grpo,gigpo", "--envs", "FoodPreparation", "--seeds", "2", "--out", str(out),
                 "--ppo-out", str(ppo_out), "--runs-dir", str(runs_dir)]
    assert benchmark.main([*arguments, "--hours", "1"]) == 0
    printed = capsys.readouterr().out
    assert "estimated on this CPU" in printed and "up to 3,072 decisions" in printed
    alone = "python benchmarks/group_methods.py --methods {} --envs FoodPreparation --seeds 2 " \
            f"--out {out} --ppo-out {ppo_out} --runs-dir {runs_dir}"
    assert [line for line in printed.splitlines() if line.startswith("refused:")] == [
        "refused: FoodPreparation, grpo, seed 2 needs ~1.7 h (this CPU), 1.0 h are left of --hours 1; run it where "
        f"it has the time: {alone.format('grpo')}",
        "refused: FoodPreparation, gigpo, seed 2 needs an unknown time (no record of FoodPreparation-gigpo yet), "
        f"1.0 h are left of --hours 1; run it where it has the time: {alone.format('gigpo')}"]
    assert ran == []
    # half of it already trained in a run folder still here: half the hours
    (tmp_path / "here").mkdir()
    record(2, 2.0, 1536, HERE["cpu"], ".part", tmp_path / "here")
    assert benchmark.main([*arguments, "--methods", "grpo", "--hours", "1"]) == 0
    assert "up to 1,536 decisions" in capsys.readouterr().out
    assert ran == ["FoodPreparation, grpo, seed 2"]
    # elsewhere only: the slowest other CPU's pace
    for mine in ("FoodPreparation-grpo-seed1.json", "FoodPreparation-grpo-seed2.json.part"):
        (out / mine).unlink()
    found = exact_runs.ExactRun("x", out / "FoodPreparation-grpo-seed5.json", [], 3072, "").estimate()
    assert (found.hours, found.source) == (pytest.approx(3072 * 9.0 / 3600), "another CPU")
