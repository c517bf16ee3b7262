"""`logging.backends`: TensorBoard, JSON lines and Weights & Biases get the same records."""

import importlib.util
import json
import math
import re
import struct
import time
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


def finished_records(path: Path, patience: float = 60.0) -> list:
    """The records of a W&B session that has written its ``exit`` record. ``run.finish()`` returns
    once W&B's service has the data; under a loaded CPU its writer may put the last records on disk
    a moment later (seen: a session's history missing when read at once, whole when read after)."""
    deadline = time.monotonic() + patience
    while True:
        try:
            records = wandb_records(path)
        except Exception:  # noqa: BLE001 - a record half written: read again
            if time.monotonic() > deadline:
                raise
            records = []
        if (records and records[-1].WhichOneof("record_type") == "exit") or time.monotonic() > deadline:
            return records
        time.sleep(0.2)


def test_wandb_offline_gets_the_metrics_of_metrics_jsonl_the_settings_and_the_episodes(tmp_path, tiny_settings):
    pytest.importorskip("wandb")
    config = load_config("default", overrides=[*tiny_settings(*LOGGED), "logging.backends=[tensorboard,jsonl,wandb]",
                                               "logging.wandb_mode=offline"])
    Trainer(config, tmp_path / "run").train(updates=1)
    # W&B names an offline session's folder by the run's id and the second it began: a session begun
    # within the same second as the last (this one takes less) would share its folder
    time.sleep(1.05 - time.time() % 1)
    resume(tmp_path / "run").train()  # a resumed run goes on in the same W&B run
    run_dir = tmp_path / "run"
    # each session of an offline run is a folder of its own, with the run's id: `wandb sync` joins them
    sessions = sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(sessions) == 2
    records = [record for session in sessions for record in finished_records(session)]
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


@pytest.fixture
def no_wandb_login(monkeypatch, tmp_path):
    """No W&B credentials where wandb looks (variables, netrc, its settings files), whatever the
    machine has: wandb reads its settings again now, and again after the test."""
    wandb = pytest.importorskip("wandb")
    for name in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    for name, value in (("HOME", home), ("NETRC", home / ".netrc"), ("WANDB_CONFIG_DIR", home / "wandb")):
        monkeypatch.setenv(name, str(value))
    wandb.teardown()
    yield home
    monkeypatch.undo()
    wandb.teardown()


def test_wandb_online_without_a_login_is_one_line_before_any_folder(tmp_path, capsys, no_wandb_login, tiny_settings,
                                                                      tiny_config, monkeypatch):
    from urllib.parse import urlparse

    import wandb
    from wandb.sdk import wandb_setup

    from groundrl.errors import GroundrlError
    from groundrl.train.config import check_runnable

    runs_dir = tmp_path / "runs"
    for mode in ("logging.wandb_mode=online", "logging.wandb_mode=null"):  # null: wandb's choice, online here
        with pytest.raises(SystemExit) as exit_info:
            main(["train", *tiny_settings(*LOGGED), "logging.backends=[jsonl,wandb]", mode, f"runs_dir={runs_dir}"])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and err == (
            "error: W&B online needs a login: run `wandb login`, or set logging.wandb_mode=offline, or drop wandb "
            "from logging.backends\n")
        assert not runs_dir.exists()
    online = tiny_config("logging.backends=[jsonl,wandb]", "logging.wandb_mode=online")
    check_runnable(tiny_config("logging.backends=[jsonl,wandb]", "logging.wandb_mode=offline"))
    monkeypatch.setenv("WANDB_MODE", "offline")  # wandb's own choice, when logging.wandb_mode is null
    wandb.teardown()  # wandb reads its settings once
    check_runnable(tiny_config("logging.backends=[jsonl,wandb]"))
    with pytest.raises(GroundrlError, match="needs a login"):  # logging.wandb_mode wins
        check_runnable(online)
    host = urlparse(wandb_setup.singleton().settings.base_url).hostname
    (no_wandb_login / ".netrc").write_text(f"machine {host}\n  login user\n  password {'k' * 40}\n")
    (no_wandb_login / ".netrc").chmod(0o600)
    check_runnable(online)  # a login in the netrc, as `wandb login` writes it: no network asked
    (no_wandb_login / ".netrc").write_text(f"machine {host}\n  login user\n  password short\n")
    with pytest.raises(GroundrlError, match=r"^W&B cannot read its settings or credentials \(AuthenticationError: "):
        check_runnable(online)
    (no_wandb_login / ".netrc").unlink()
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    check_runnable(online)


@pytest.mark.parametrize("project", ["a/b", "a\\b", "a#b", "a?b", "100%", "a:b", "", "  ", "p" * 129])
def test_wandb_project_names_wandb_refuses_are_one_line(tiny_config, project):
    from groundrl.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match=r"^logging.wandb_project must be 1 to 128 characters, none of "
                                                   r"/ \\ # \? % :, not '") as error:
        tiny_config("logging.backends=[jsonl,wandb]", f"logging.wandb_project='{project}'")
    assert "\n" not in str(error.value) and len(str(error.value)) < 200
    tiny_config(f"logging.wandb_project='{project}'")  # no W&B: no matter
    tiny_config("logging.backends=[jsonl,wandb]", f"logging.wandb_project='{'p' * 128}'")


@pytest.mark.parametrize("content", [b"\xff\xfe\x00binary", b"", b"\n", b"x" * 10_000_000, b"abc/def", b"two words",
                                     b"a" * 129])
def test_a_corrupt_wandb_id_is_one_line_saying_to_restore_or_delete_it(tmp_path, tiny_config, content):
    pytest.importorskip("wandb")
    from groundrl.errors import GroundrlError
    from groundrl.train.loggers import WeightsAndBiases

    (tmp_path / "wandb_id").write_bytes(content)
    with pytest.raises(GroundrlError) as error:
        WeightsAndBiases(tmp_path, tiny_config("logging.backends=[wandb]", "logging.wandb_mode=offline"))
    assert str(error.value) == (f"{tmp_path / 'wandb_id'} is corrupt (not a W&B run id): restore it, or delete it to "
                                "go on in a new W&B run")
    assert (tmp_path / "wandb_id").read_bytes() == content and not (tmp_path / "wandb").exists()


def test_wandb_failing_to_start_is_one_line_and_leaves_no_run_folder(tmp_path, capsys, monkeypatch, tiny_settings):
    wandb = pytest.importorskip("wandb")

    def init(dir, **kwargs):  # noqa: A002 - wandb's name
        (Path(dir) / "wandb" / "run-x").mkdir(parents=True)  # what wandb writes before it gives up
        raise ConnectionError("could not reach the W&B server\nretrying... (details)")

    monkeypatch.setattr(wandb, "init", init)
    runs_dir = tmp_path / "runs"
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *tiny_settings(*LOGGED), "logging.backends=[tensorboard,jsonl,wandb]",
              "logging.wandb_mode=offline", f"runs_dir={runs_dir}"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.startswith(
        "error: W&B could not start its run (ConnectionError: could not reach the W&B server); ") and \
        err.count("\n") == 1, err
    assert not list(runs_dir.iterdir())


class FailingRun:
    """A W&B run whose ``log`` (or ``finish``) raises, as a W&B whose server went away may."""

    def __init__(self, log_fails: bool, finish_fails: bool):
        self.log_fails, self.finish_fails, self.logged, self.finished = log_fails, finish_fails, 0, False

    def define_metric(self, *args, **kwargs):
        pass

    def log(self, data):
        self.logged += 1
        if self.log_fails:
            raise ConnectionError("the W&B server went away\nand more")

    def finish(self):
        self.finished = True
        if self.finish_fails:
            raise RuntimeError("cannot finish")


@pytest.mark.parametrize("log_fails, finish_fails", [(True, True), (False, True)])
def test_wandb_failing_during_training_is_dropped_and_training_goes_on(tmp_path, monkeypatch, tiny_config, log_fails,
                                                                       finish_fails):
    wandb = pytest.importorskip("wandb")
    run = FailingRun(log_fails, finish_fails)
    monkeypatch.setattr(wandb, "init", lambda **kwargs: run)
    config = tiny_config(*LOGGED, "logging.backends=[jsonl,wandb]", "logging.wandb_mode=offline")
    message = (r"W&B failed \(ConnectionError: the W&B server went away\): dropped from the logging backends for "
               r"the rest of the run; the metrics are still in metrics.jsonl" if log_fails else
               r"W&B failed to finish its run \(RuntimeError: cannot finish\); it may lack the last records, which "
               r"metrics.jsonl keep")
    with pytest.warns(UserWarning, match=message) as warned:
        history = Trainer(config, tmp_path / "run").train()
    assert len(history) == 2 and len(read_jsonl(tmp_path / "run" / "metrics.jsonl")) == 2
    assert run.logged == (1 if log_fails else 4) and run.finished  # dropped at its first failure, then finished
    assert len([w for w in warned if "W&B" in str(w.message)]) == 1


def test_errors_of_the_other_backends_still_stop_the_run(tmp_path, monkeypatch, tiny_config):
    from groundrl.train.loggers import JsonLines

    def log(self, metrics, episodes):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(JsonLines, "log", log)
    with pytest.raises(OSError, match="No space left"):
        Trainer(tiny_config(*LOGGED, "logging.backends=[jsonl]"), tmp_path / "run").train()
