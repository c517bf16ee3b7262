"""Faults and hostile input: no code runs from a checkpoint, a run's records are exact after a crash
or a resume, one writer per run folder, torn lines, and every bad input is one line with exit code
2 and no folder left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from groundrl import runs
from groundrl.cli import main
from groundrl.train import Trainer, load_config, resume
from groundrl.train import checkpoint as checkpoints

ROOT = Path(__file__).resolve().parents[2]
# episodes of several steps, every one recorded for replay
FAULTS = ("env=groundrl/FollowInstruction-Long-v0", "trajectories_every=1")
TIMING = ("wall_seconds", "decisions_per_second", "rollout_seconds", "update_seconds", "memory_gib")


def cli(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as stopped:
        main(list(args))
    out, err = capsys.readouterr()
    return stopped.value.code, out, err


def groundrl(*args, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "groundrl", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def learning(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records]


class Payload:
    """Unpickling this runs a shell command: what a crafted checkpoint file would hold."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_config) -> Path:
    """A finished run of 2 updates with a checkpoint, copied afresh by each test that damages it."""
    run_dir = tmp_path_factory.mktemp("trained") / "run"
    Trainer(tiny_config(*FAULTS, "rollout.total_decisions=16", "checkpoint_every=2"),
            run_dir).train()
    return run_dir


def copy_of(run_dir: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(run_dir, tmp_path / "run"))


# -- no code runs from a checkpoint -----------------------------------------------------------

@pytest.mark.parametrize("file", ["trainable.pt", "state.pt", "meta.json"])
def test_a_crafted_file_in_a_checkpoint_runs_no_code(trained, tmp_path, capsys, file):
    run_dir, marker = copy_of(trained, tmp_path), tmp_path / "pwned"
    (checkpoint,) = checkpoints.list_checkpoints(run_dir)
    torch.save({"weights": Payload(marker)}, checkpoint / file)
    for command in (["train", "--resume", str(run_dir)], ["eval", str(run_dir), "--episodes", "2",
                                                          "--runs-dir", str(tmp_path / "evals")]):
        if file == "state.pt" and command[0] == "eval":
            continue  # evaluation reads the weights only
        code, _, err = cli(capsys, *command)
        assert code == 2 and err.count("\n") == 1 and ("corrupt" in err or "is not text (UTF-8)" in err), err
        assert not marker.exists(), command
    assert (checkpoint / file).exists()  # refused, not deleted


def test_checkpoints_of_earlier_formats_are_refused_without_unpickling_anything(trained, tmp_path, capsys):
    """Formats 1 and 2 kept optimizer.pt and envs.pkl as pickles: resuming them is refused before
    either file is opened, so a crafted one runs nothing."""
    run_dir, marker = copy_of(trained, tmp_path), tmp_path / "pwned"
    (checkpoint,) = checkpoints.list_checkpoints(run_dir)
    import pickle

    (checkpoint / "envs.pkl").write_bytes(pickle.dumps(Payload(marker)))
    torch.save(Payload(marker), checkpoint / "optimizer.pt")
    meta = json.loads((checkpoint / "meta.json").read_text())
    (checkpoint / "meta.json").write_text(json.dumps({**meta, "format": 2}))
    code, _, err = cli(capsys, "train", "--resume", str(run_dir))
    assert code == 2 and "format 2" in err and "cannot be resumed safely" in err and err.count("\n") == 1
    assert not marker.exists()


# -- exact records after faults ---------------------------------------------------------------

# self-imitation: its memory of kept episodes (seeds and actions, rebuilt by replay) goes on exactly too
@pytest.mark.parametrize("extra", [(), ("sil.enabled=true", "sil.capacity=4", "sil.steps=2", "sil.batch_size=4")],
                         ids=["ppo", "self-imitation"])
def test_kill_9_then_resume_records_every_update_once_as_an_uninterrupted_run(tmp_path, tiny_settings, extra):
    settings = tiny_settings(*FAULTS, "rollout.total_decisions=96", "checkpoint_every=4",
                             f"runs_dir={tmp_path / 'runs'}", *extra)
    process = groundrl("train", "--preset", "twosome", *settings)
    metrics = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        found = list((tmp_path / "runs").glob("*/metrics.jsonl"))
        if found and len(found[0].read_text().splitlines()) >= 6:  # two updates past the checkpoint of update 4
            metrics = found[0]
            break
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert metrics is not None, "the run ended before it could be killed"
    run_dir = metrics.parent
    written = [json.loads(line)["update"] for line in metrics.read_text().splitlines()]
    last_checkpoint = int(checkpoints.list_checkpoints(run_dir)[-1].name.split("-")[1])
    assert written[-1] > last_checkpoint  # updates after the checkpoint were recorded, then lost with the crash

    resumed = groundrl("train", "--resume", str(run_dir))
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read()
    straight = Trainer(load_config("twosome", overrides=settings), tmp_path / "straight").train()
    records = runs.read_jsonl(run_dir / "metrics.jsonl")
    assert [r["update"] for r in records] == list(range(1, 13))
    for now, then in zip(learning(records), learning(straight)):
        assert now == pytest.approx(then, rel=1e-5, abs=1e-7, nan_ok=True)
    # the sample episodes too: each once, as the uninterrupted run recorded them
    steps = runs.read_jsonl(run_dir / "trajectories.jsonl")
    assert [(s["episode"], s["step"]) for s in steps] == [
        (s["episode"], s["step"]) for s in runs.read_jsonl(tmp_path / "straight" / "trajectories.jsonl")]
    # the machine of each stretch: the killed one from update 1, the resumed one from after its checkpoint
    machine = runs.read_jsonl(run_dir / runs.MACHINE)
    assert [m["update"] for m in machine] == [1, last_checkpoint + 1]
    assert all(m["cpu"] == runs.cpu_name() and m["threads"] >= 1 and m["device"] == "cpu" for m in machine)


def test_resuming_an_earlier_checkpoint_on_purpose_rewrites_what_follows_it(trained, tmp_path, tiny_config):
    run_dir = tmp_path / "run"
    config = tiny_config(*FAULTS, "rollout.total_decisions=48", "checkpoint_every=2", "keep_checkpoints=0")
    straight = Trainer(config, run_dir).train()
    earlier = checkpoints.list_checkpoints(run_dir)[0]  # update 2 of 6
    trainer = resume(earlier)
    assert trainer.state.update == 2
    trainer.train()
    records = runs.read_jsonl(run_dir / "metrics.jsonl")
    assert [r["update"] for r in records] == [1, 2, 3, 4, 5, 6]
    for now, then in zip(learning(records), learning(straight)):
        assert now == pytest.approx(then, rel=1e-5, abs=1e-7, nan_ok=True)
    assert [m["update"] for m in runs.read_jsonl(run_dir / runs.MACHINE)] == [1, 3]  # updates 3-6 ran again


def test_a_second_writer_of_a_run_folder_is_refused(trained, tmp_path, capsys):
    run_dir = copy_of(trained, tmp_path)
    holder = groundrl("train", "--resume", str(run_dir), "rollout.total_decisions=100000")
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / ".lock").exists() or (run_dir / ".lock").read_text().strip() != str(holder.pid):
            assert time.monotonic() < deadline and holder.poll() is None, holder.stderr.read() if holder.poll() else ""
            time.sleep(0.05)
        code, _, err = cli(capsys, "train", "--resume", str(run_dir))
        assert code == 2 and err.count("\n") == 1
        assert f"in use by process {holder.pid}" in err
    finally:
        holder.kill()
        holder.wait()
    runs.unlock(run_dir)


def test_a_torn_line_is_dropped_by_writers_and_skipped_with_a_warning_by_readers(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"update": k}) + "\n" for k in (1, 2, 3)) + '{"update": 4, "decis')
    with pytest.warns(UserWarning, match="skipped 1 damaged line"):
        assert [r["update"] for r in runs.read_jsonl(path)] == [1, 2, 3]
    with runs.Records(path) as records:  # a writer opening the file drops the fragment, then appends
        records.write([{"update": 4}, {"update": 5}])
    assert [r["update"] for r in runs.read_jsonl(path)] == [1, 2, 3, 4, 5]
    # a damaged line in the middle hides nothing after it
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:2] + ['{"upd', "not json"] + lines[2:]) + "\n")
    with pytest.warns(UserWarning, match="skipped 2 damaged line"):
        assert [r["update"] for r in runs.read_jsonl(path)] == [1, 2, 3, 4, 5]


# -- bad input: one line, exit code 2, no folder ----------------------------------------------

def bad_files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "syntax.yaml").write_text("ppo: {policy_lr: [1e-4\n")
    (tmp_path / "list.yaml").write_text("- ppo.policy_lr=1e-4\n")
    return {"syntax": tmp_path / "syntax.yaml", "list": tmp_path / "list.yaml"}


@pytest.mark.parametrize("args, message", [
    (["ppo.policy_lr=-1"], "ppo.policy_lr must be positive, not -1.0"),
    (["--config", "{syntax}"], "is not valid YAML at line 2"),
    (["--config", "{list}"], "must be a mapping of settings"),
    (["--config", "{folder}"], "is a folder"),
    (["env_kwargs.bogus=1"], "env_kwargs: groundrl/FollowInstruction-Long-v0 takes no option 'bogus'"),
    (["checkpoint_every=0"], "checkpoint_every must be at least 1, not 0"),
    (["ppo.minibatch_size=64"], "ppo.minibatch_size=64 is larger than a rollout"),
    (["ppo.phases=both"], "ppo.phases: Invalid value 'both'"),
    (["rollout.num_envs=zero"], "rollout.num_envs"),
    (["device=tpu"], "device"),
    (["env=groundrl/Nope-v0"], "unknown environment"),
    (["model=no/such-model-here"], "no/such-model-here"),
    (["runs_dir={file}"], "runs_dir {file} is a file"),
    (["ppo.policy_lr"], "is not KEY=VALUE"),
    (["agent.llm.train_layers=0"], "agent.llm.train_layers must be all or a whole number of 1 or more, not '0'"),
    (["agent.llm.train_layers=3"], "agent.llm.train_layers=3, but tiny-llama has 2 layers: make it at most 2, or all"),
    (["precision=fp8"], "precision must be one of fp32, bf16-mixed, auto, not 'fp8'"),
    (["precision=bf16-mixed", "dtype=bfloat16"], "precision=bf16-mixed keeps float32 master weights"),
    (["explore.epsilon=1.5"], "explore.epsilon must be between 0 and 1, not 1.5"),
    (["ppo.gae_lambda=1.5"], "ppo.gae_lambda must be between 0 and 1, not 1.5"),
    (["drrn.gamma=-0.5"], "drrn.gamma must be between 0 and 1, not -0.5"),
    (["keep_checkpoints=-1"], "keep_checkpoints must be 0 or more, not -1"),
    (["agent.llm.cache_size=-1"], "agent.llm.cache_size must be 0 or more, not -1"),
    (["distributed.cpu_threads=0"], "distributed.cpu_threads must be at least 1, not 0"),
    (["agent.drrn.temperature=0"], "agent.drrn.temperature must be positive, not 0.0"),
    (["explore.temperature=0"], "explore.temperature must be positive, not 0.0"),
    (["explore.anneal=2"], "explore.anneal is a fraction of the training budget: at most 1, not 2.0"),
    (["explore.novelty=-0.1"], "explore.novelty must be 0 or more, not -0.1"),
    (["ppo.ent_coef_end=-1"], "ppo.ent_coef_end must be 0 or more, not -1.0"),
    (["--preset", "drrn", "explore.novelty=0.1"], "explore.* settings are PPO's"),
    (["sil.capacity=0"], "sil.capacity must be at least 1, not 0"),
    (["sil.weight=-1"], "sil.weight must be positive, not -1.0"),
    (["sil.value_weight=-0.5"], "sil.value_weight must be 0 or more, not -0.5"),
    (["--preset", "drrn", "explore.novelty=0", "sil.enabled=true"], "agent.kind=drrn has none"),
])
def test_bad_train_input_is_one_line_and_leaves_no_folder(capsys, tmp_path, args, message, tiny_settings):
    files = {**bad_files(tmp_path), "folder": tmp_path, "file": tmp_path / "syntax.yaml"}
    args = [a.format(**files) for a in args]
    code, _, err = cli(capsys, "train", *tiny_settings(*FAULTS), "rollout.total_decisions=8",
                       f"runs_dir={tmp_path / 'runs'}", *args)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert message.format(**files) in err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_bad_resume_input_is_one_line(trained, tmp_path, capsys):
    run_dir = copy_of(trained, tmp_path)
    code, _, err = cli(capsys, "train", "--resume", str(run_dir), "model=tiny-t5")
    assert code == 2 and err.count("\n") == 1 and "other weights' shapes: model='tiny-llama' (now 'tiny-t5')" in err
    (checkpoint,) = checkpoints.list_checkpoints(run_dir)
    (checkpoint / "meta.json").write_text("{garbage")
    code, _, err = cli(capsys, "train", "--resume", str(run_dir))
    assert code == 2 and err.count("\n") == 1 and "meta.json is not valid JSON" in err
    code, _, err = cli(capsys, "train", "--resume", str(tmp_path / "nowhere"))
    assert code == 2 and err.count("\n") == 1 and "does not exist" in err


def test_resume_settings_apply_to_the_session_and_config_yaml_keeps_the_runs_own(trained, tmp_path, capsys):
    run_dir = copy_of(trained, tmp_path)
    before = (run_dir / "config.yaml").read_text()
    with pytest.warns(UserWarning, match="changed settings: rollout.total_decisions"):
        code, out, err = cli(capsys, "train", "--resume", str(run_dir), "rollout.total_decisions=24")
    assert code in (None, 0)
    assert (run_dir / "config.yaml").read_text() == before
    assert [r["update"] for r in runs.read_jsonl(run_dir / "metrics.jsonl")] == [1, 2, 3]
    # the records say what the run trained with: from update 3, the session's budget
    [change] = runs.read_jsonl(run_dir / "settings_changes.jsonl")
    assert change["update"] == 3 and change["changed"] == {"rollout.total_decisions": [16, 24]}


def test_ctrl_c_says_how_to_resume_in_words_a_shell_takes(tmp_path, capsys, monkeypatch, ctrl_c_raises, tiny_config):
    run_dir = tmp_path / "a run; rm -rf x"
    trainer = Trainer(tiny_config(*FAULTS, "rollout.total_decisions=16"), run_dir)
    original = trainer.update

    def update():
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C
        return original()

    monkeypatch.setattr(trainer, "update", update)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    assert f"groundrl train --resume '{run_dir}'" in capsys.readouterr().out
