"""groundrl train's logic without the command line: the plan and its checks, the torchrun command,
the run folder a start creates (and removes when the command fails), what it says."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from groundrl.errors import GroundrlError, InvalidArgumentError
from groundrl.train import checkpoint as checkpoints
from groundrl.train import session
from groundrl.train.config import load_config
from groundrl.train.distributed import World
from groundrl.train.session import TrainPlan, plan_line, plan_training, start_training, summary, torchrun_command

# a symbolic agent: a run of one update in a moment, no model to load
SYMBOLIC = ["env=groundrl/FoodPreparation-v0", "device=cpu", "progress=false", "rollout.num_envs=2",
            "rollout.num_steps=8", "rollout.total_decisions=16", "ppo.minibatch_size=16",
            "ppo.value_minibatch_size=16", "ppo.micro_batch_size=16"]


def symbolic_plan(runs_dir: Path, *overrides: str, **options) -> TrainPlan:
    return plan_training([*SYMBOLIC, f"runs_dir={runs_dir}", *overrides], preset="symbolic-ppo", **options)


@pytest.fixture
def trained_run(tmp_path) -> Path:
    """A finished symbolic run (one update, checkpointed)."""
    with start_training(symbolic_plan(tmp_path / "runs"), say=lambda *args: None) as trainer:
        trainer.train()
    return trainer.run_dir


def test_a_new_plan_reads_preset_overrides_and_options(tmp_path):
    plan = symbolic_plan(tmp_path, "seed=7")
    assert plan.config.seed == 7 and plan.config.agent.kind.value == "symbolic"
    assert not plan.resuming and plan.checkpoint is None and plan.run_dir is None and plan.nproc is None
    # env and model given apart are taken as they are: a '#' would start a YAML comment in model=...
    plan = plan_training(SYMBOLIC, preset="symbolic-ppo", env="groundrl/FollowInstruction-v0", model="dir#1")
    assert plan.config.env == "groundrl/FollowInstruction-v0" and plan.config.model == "dir#1"


def test_a_plan_refuses_resume_with_init(tmp_path):
    with pytest.raises(InvalidArgumentError, match="--resume continues a run with its own weights; --init starts a "
                                                   "new one: give one of them"):
        plan_training(resume=tmp_path, init=tmp_path)


def test_a_plan_refuses_runs_dir_that_is_a_file(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(GroundrlError, match=r"runs_dir .*file is a file; give a folder"):
        symbolic_plan(tmp_path / "file")


def test_a_plan_refuses_what_cannot_run(tmp_path):
    with pytest.raises(InvalidArgumentError, match="env_kwargs"):
        symbolic_plan(tmp_path, "env_kwargs.nope=1")


def test_a_plan_refuses_an_init_that_is_not_an_export(tmp_path):
    with pytest.raises(GroundrlError, match=str(tmp_path)):
        plan_training(init=tmp_path)
    assert not list(tmp_path.iterdir())


def test_nproc_asks_for_torchrun_once_checked_unless_already_launched(tmp_path, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert symbolic_plan(tmp_path, nproc=2).nproc == 2
    assert symbolic_plan(tmp_path, nproc=1).nproc is None
    with pytest.raises(InvalidArgumentError, match="rollout.num_envs=3 does not split over 2 processes"):
        symbolic_plan(tmp_path, "rollout.num_envs=3", "rollout.num_steps=6", nproc=2)
    monkeypatch.setenv("WORLD_SIZE", "2")  # one of the processes torchrun started: it trains, and checks later
    assert symbolic_plan(tmp_path, "rollout.num_envs=3", "rollout.num_steps=6", nproc=2).nproc is None


def test_torchrun_command_drops_nproc_and_keeps_the_rest():
    command = torchrun_command(3, ["train", "--nproc", "3", "--preset", "glam", "--nproc=3", "seed=1"])
    assert command == [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3",
                       "-m", "groundrl", "train", "--preset", "glam", "seed=1"]


def test_a_new_run_gets_a_folder_and_says_its_plan(tmp_path):
    said = []
    with start_training(symbolic_plan(tmp_path / "runs"), say=said.append) as trainer:
        trainer.train()
    [run_dir] = (tmp_path / "runs").iterdir()
    assert trainer.run_dir == run_dir and (run_dir / "config.yaml").is_file()
    assert said[0] == f"run folder: {run_dir}\nloading symbolic agent ..."
    assert said[1].endswith("; 1 updates of 16 decisions") and len(said) == 2


@pytest.mark.parametrize("where", ["start", "block"])
def test_a_new_run_that_fails_before_training_leaves_no_folder(tmp_path, monkeypatch, where):
    def fail(*args, **kwargs):
        raise GroundrlError("it failed")

    if where == "start":
        monkeypatch.setattr(session, "Trainer", fail)
    with pytest.raises(GroundrlError, match="it failed"), start_training(symbolic_plan(tmp_path),
                                                                          say=lambda *args: None):
        fail()
    assert not list(tmp_path.iterdir())


def test_a_resumed_run_is_locked_says_where_it_is_and_keeps_its_folder(trained_run):
    with pytest.warns(UserWarning, match="resuming with changed settings: rollout.total_decisions"):
        plan = plan_training(["rollout.total_decisions=32"], resume=trained_run)
    assert plan.resuming and plan.run_dir == trained_run
    assert plan.checkpoint == checkpoints.list_checkpoints(trained_run)[-1]
    said = []
    with pytest.raises(GroundrlError, match="it failed"), start_training(plan, say=said.append):
        assert (trained_run / ".lock").read_text() == str(os.getpid())  # a second writer would be refused
        raise GroundrlError("it failed")
    assert said == [f"resuming {trained_run} at update 1 (16 decisions)"]
    assert (trained_run / "checkpoints").is_dir()
    with start_training(plan, say=said.append) as trainer:
        trainer.train()
    assert trainer.state.decisions == 32 and trainer.finished


def test_a_plan_refuses_to_resume_a_folder_without_checkpoints(tmp_path):
    with pytest.raises(GroundrlError, match="no checkpoints"):
        plan_training(resume=tmp_path)


def test_plan_line_names_updates_or_a_group_methods_decisions_and_the_processes():
    ppo = load_config("twosome", overrides=["rollout.total_decisions=1280"])
    assert plan_line(ppo, World()) == "10 updates of 128 decisions"
    grpo = load_config("twosome", overrides=["algorithm=grpo", "rollout.group_size=2", "rollout.total_decisions=999"])
    assert plan_line(grpo, World(size=4)) == ("999 decisions in updates of whole episodes of groups of 2 (grpo) "
                                              "over 4 processes")


def test_summary_reports_the_last_update_or_that_no_episode_finished(tmp_path):
    state = SimpleNamespace(history=[{"success_rate": 0.5, "episode_return": 1.25, "entropy": 2.0}], decisions=64,
                            wall_seconds=12.4)
    lines = summary(SimpleNamespace(state=state, run_dir=tmp_path))
    assert lines == ["done: 64 decisions in 12 s; last update: success_rate 0.500, episode_return 1.250",
                     f"run folder: {tmp_path}  (config.yaml, metrics.jsonl, tensorboard/, checkpoints/, "
                     "learning_curves.png)"]
    state.history = [{"entropy": 2.0}]
    assert summary(SimpleNamespace(state=state, run_dir=tmp_path))[0].endswith("last update: no finished episode")
