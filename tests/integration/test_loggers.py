"""`logging.backends`: TensorBoard, JSON lines and Weights & Biases get the same records."""

import importlib.util
import json
import math
import re
import struct
from pathlib import Path

import pytest

from groundrl.cli import main
from groundrl.runs import read_jsonl
from groundrl.train.config import load_config
from groundrl.train.trainer import Trainer, resume

# two updates, each with a checkpoint and its sample episodes
LOGGED = ("rollout.total_decisions=16", "trajectories_every=1", "checkpoint_every=1")


def wandb_records(path: Path) -> list:
    """The records of a W&B offline run's ``.wandb`` file (LevelDB-style blocks of 32 KiB, each record
    a protobuf ``Record``, after a 7-byte header)."""
    from wandb.proto import wandb_internal_pb2

    data, position, pending, records = path.read_bytes(), 7, b"", []
    assert data.startswith(b":W&B")
    while position + 7 <= len(data):
        left = 32768 - position % 32768
        _, length, kind = struct.unpack("<IHB", data[position:position + 7])
        if left < 7 or (length == 0 and kind == 0):  # the block's padding
            position += left
            continue
        pending += data[position + 7:position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # a whole record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def test_wandb_offline_gets_the_metrics_of_metrics_jsonl_the_settings_and_the_episodes(tmp_path, tiny_settings):
    pytest.importorskip("wandb")
    config = load_config("default", overrides=[*tiny_settings(*LOGGED), "logging.backends=[tensorboard,jsonl,wandb]",
                                               "logging.wandb_mode=offline"])
    Trainer(config, tmp_path / "run").train(updates=1)
    resume(tmp_path / "run").train()  # a resumed run goes on in the same W&B run
    run_dir = tmp_path / "run"
    # each session of an offline run is a folder of its own, with the run's id: `wandb sync` joins them
    sessions = sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(sessions) == 2
    records = [record for session in sessions for record in wandb_records(session)]
    history = [{item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in r.history.item}
               for r in records if r.WhichOneof("record_type") == "history"]
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    logged = [h for h in history if "update" in h]
    assert [h["decisions"] for h in logged] == [m["decisions"] for m in metrics] == [8, 16]
    for ours, theirs in zip(metrics, logged):
        numbers = {k for k, v in ours.items() if not (isinstance(v, float) and math.isnan(v))}
        assert numbers == {k for k in theirs if not k.startswith("_")}
        assert all(theirs[k] == pytest.approx(ours[k]) for k in numbers)
    tables = [h for h in history if any(re.match(r"episode_\d+/_type", k) for k in h)]
    assert len(tables) == len({s["episode"] for s in read_jsonl(run_dir / "trajectories.jsonl")}) > 0
    first, second = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert first.run_id == second.run_id == (run_dir / "wandb_id").read_text().strip()
    run = first
    assert run.display_name == "run"
    settings = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in run.config.update}
    assert settings["env"] == "groundrl/FollowInstruction-v0" and settings["ppo"]["minibatch_size"] == 4


def test_only_the_backends_asked_for_write(tmp_path, tiny_settings):
    for backends, present, absent in (("[jsonl]", "metrics.jsonl", "tensorboard"),
                                      ("[tensorboard]", "tensorboard", "metrics.jsonl")):
        config = load_config("default", overrides=[*tiny_settings(*LOGGED), f"logging.backends={backends}"])
        run_dir = tmp_path / backends.strip("[]")
        Trainer(config, run_dir).train()
        assert (run_dir / present).exists() and not (run_dir / absent).exists() and not (run_dir / "wandb").exists()


def test_bad_logging_settings_get_one_line(tmp_path, capsys, monkeypatch, tiny_settings):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    for setting, message in (("logging.backends=[tensorboard,wandb]", "pip install 'groundrl[wandb]'"),
                             ("logging.backends=[tb]", "logging.backends must be a list of distinct"),
                             ("logging.wandb_mode=sometimes", "logging.wandb_mode must be online, offline")):
        with pytest.raises(SystemExit) as exit_info:
            main(["train", *tiny_settings(*LOGGED), setting, f"runs_dir={tmp_path}"])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not list(tmp_path.iterdir())
