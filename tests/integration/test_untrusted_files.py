"""Files from elsewhere stay data (issue 59): settings, exports, checkpoints and paths that cannot
hang groundrl, redirect where it writes, copy the environment into a run, or poison a run; every
refusal is one line and exit code 2, and leaves nothing behind."""

from __future__ import annotations

import ast
import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
import torch
from markdown_it import MarkdownIt
from safetensors.torch import load_file, save_file

from groundrl import runs
from groundrl.cli import main
from groundrl.errors import GroundrlError
from groundrl.train import checkpoint as checkpoints
from groundrl.train import export as exports
from groundrl.train.config import load_config
from groundrl.train.export import write as export_writing

# 9 lines of nested aliases: 10**9 values once expanded (66 s and 806 MB at 6 lines, before)
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8))
HOSTILE_SETTINGS = {
    "an alias bomb": ALIAS_BOMB,
    "10k levels deep": "a: " + "[" * 10_000 + "]" * 10_000 + "\n",
    "1k mappings deep": "".join(f"{' ' * i}k{i}:\n" for i in range(1000)) + " " * 1000 + "v\n",
    "2 MB of settings": "seed: [" + "1, " * 700_000 + "]\n",
    "an alias of itself": "a: &a [*a]\n",
    "a key given twice": "seed: 1\nseed: 2\n",
    "a Python object": "!!python/object/apply:os.system ['touch PWNED']\n",
    "a number of 5,000 digits": "seed: " + "7" * 5000 + "\n",
}


def cli(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


def refused(capsys, *args) -> str:
    """The one line ``groundrl ARGS`` answers with, exit code 2."""
    code, _, err = cli(capsys, *args)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, (args, code, err)
    return err.removeprefix("error: ").strip()


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*")} if folder.exists() else set()


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_settings) -> Path:
    """A tiny run of two updates (a checkpoint after each)."""
    from groundrl.train.trainer import Trainer

    folder = tmp_path_factory.mktemp("untrusted")
    config = load_config("default", overrides=[*tiny_settings("rollout.total_decisions=16", "checkpoint_every=1",
                                                              "keep_checkpoints=0"), f"runs_dir={folder}"])
    Trainer(config, folder / "20261206-000000-train-FollowInstruction-v0").train()
    return folder / "20261206-000000-train-FollowInstruction-v0"


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory) -> Path:
    return exports.export(trained, tmp_path_factory.mktemp("exports") / "agent")


@pytest.fixture(scope="module")
def merged(trained, tmp_path_factory) -> Path:
    return exports.export(trained, tmp_path_factory.mktemp("merged") / "agent", merge=True)


@pytest.fixture
def run_copy(trained, tmp_path) -> Path:
    return Path(shutil.copytree(trained, tmp_path / "runs" / trained.name))


@pytest.fixture
def export_copy(exported, tmp_path) -> Path:
    return Path(shutil.copytree(exported, tmp_path / "agent"))


class Payload:
    """A pickle that would create ``marker`` when unpickled."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


# -- 1. a settings file cannot hang groundrl --------------------------------------------------------

@pytest.mark.parametrize("name", HOSTILE_SETTINGS)
def test_hostile_settings_are_refused_in_a_moment_by_every_reader(name, run_copy, export_copy, tmp_path, capsys,
                                                                  monkeypatch, tiny_settings):
    monkeypatch.chdir(tmp_path)  # where the Python object would touch PWNED
    text, runs_dir = HOSTILE_SETTINGS[name], tmp_path / "new-runs"
    (tmp_path / "hostile.yaml").write_text(text)
    readers = {"--config": ("train", "--config", tmp_path / "hostile.yaml", *tiny_settings(), f"runs_dir={runs_dir}")}
    (export_copy / "groundrl.yaml").write_text(text)
    readers["train --init"] = ("train", "--init", export_copy, f"runs_dir={runs_dir}")
    readers["eval EXPORT"] = ("eval", export_copy, "--episodes", "1", "--runs-dir", runs_dir)
    (run_copy / "config.yaml").write_text(text)
    readers["export RUN"] = ("export", run_copy, "--out", tmp_path / "out")
    readers["train --resume"] = ("train", "--resume", run_copy)
    readers["eval RUN"] = ("eval", run_copy, "--episodes", "1", "--runs-dir", runs_dir)
    run_files = files_under(run_copy)
    for reader, args in readers.items():
        measure_memory = name == "an alias bomb"  # (tracing slows the YAML parser down tenfold)
        if measure_memory:
            tracemalloc.start()
        started = time.perf_counter()
        message = refused(capsys, *args)
        seconds = time.perf_counter() - started
        if measure_memory:
            assert tracemalloc.get_traced_memory()[1] < 200e6, reader
            tracemalloc.stop()
        assert seconds < 5, (reader, seconds)
        assert re.search(r"nests deeper|values once its YAML aliases|contains itself|gives the key 'seed' twice|"
                         r"could not determine a constructor|is too large|number too long", message), (reader, message)
    assert not runs_dir.exists() and not (tmp_path / "out").exists() and not (tmp_path / "PWNED").exists()
    assert files_under(run_copy) == run_files


def test_a_duplicate_key_names_both_lines(tmp_path, capsys):
    (tmp_path / "twice.yaml").write_text("ppo:\n  policy_lr: 1e-4\nseed: 3\nppo:\n  value_lr: 1e-3\n")
    message = refused(capsys, "train", "--config", tmp_path / "twice.yaml")
    assert message == f"{tmp_path / 'twice.yaml'} gives the key 'ppo' twice (lines 1 and 4): YAML keys are unique, " \
                      "keep one: fix it, or give another file"


def test_yaml_anchors_and_merges_of_a_users_own_file_still_work(tmp_path):
    (tmp_path / "mine.yaml").write_text("base: &lr {policy_lr: 1.0e-4, value_lr: 2.0e-4}\n"
                                        "ppo:\n  <<: *lr\n  value_lr: 3.0e-4\n")
    with pytest.raises(Exception, match="base"):  # not a setting: the anchors were read, the key is unknown
        load_config("default", files=[tmp_path / "mine.yaml"])
    (tmp_path / "mine.yaml").write_text("ppo: &ppo {policy_lr: 1.0e-4}\nrollout:\n  num_steps: 16\n")
    assert load_config("default", files=[tmp_path / "mine.yaml"]).ppo.policy_lr == 1e-4


# -- 2. paths given as options are not settings ------------------------------------------------------

def test_paths_given_as_options_are_taken_as_they_are(exported, tmp_path, capsys, tiny_settings):
    odd = tmp_path / "exports #1 ${oc.env:HOME}: {a}"
    shutil.copytree(exported, odd)
    code, out, err = cli(capsys, "train", "--init", odd, *tiny_settings("rollout.total_decisions=8"),
                         f"runs_dir={tmp_path / 'runs'}")
    assert code is None or code == 0, err
    (run_dir,) = (tmp_path / "runs").iterdir()
    settings = (run_dir / "config.yaml").read_text()
    assert load_config("default", files=[run_dir / "config.yaml"]).init == str(odd.resolve()), settings
    message = refused(capsys, "train", "--model", tmp_path / "models" / "m #1", *tiny_settings()[1:],
                      f"runs_dir={tmp_path / 'runs'}")
    assert f"'{tmp_path / 'models' / 'm #1'}' not found" in message
    assert len(list((tmp_path / "runs").iterdir())) == 1


def test_a_key_value_that_yaml_would_cut_at_a_comment_is_refused(capsys, tmp_path):
    message = refused(capsys, "train", "model=models/m #1", f"runs_dir={tmp_path}")
    assert message.startswith("setting 'model=models/m #1': YAML reads ' #' as the start of a comment") and \
        """quote the value: model='"models/m #1"'""" in message
    assert load_config("default", overrides=['model="models/m #1"']).model == "models/m #1"


def test_settings_never_interpolate(monkeypatch, tmp_path):
    monkeypatch.setenv("GROUNDRL_SECRET", "hunter2")
    (tmp_path / "mine.yaml").write_text("agent:\n  llm:\n    separator: '${oc.env:GROUNDRL_SECRET}'\n")
    config = load_config("default", files=[tmp_path / "mine.yaml"], overrides=["model=${oc.env:GROUNDRL_SECRET}"],
                         values={"env": "a\\${b}"})
    assert (config.agent.llm.separator, config.model, config.env) == ("${oc.env:GROUNDRL_SECRET}",
                                                                     "${oc.env:GROUNDRL_SECRET}", "a\\${b}")


def test_a_runs_dir_that_is_a_link_to_nothing_is_one_line(tmp_path, capsys, monkeypatch, tiny_settings):
    (tmp_path / "runs").symlink_to(tmp_path / "nothing")  # making a run folder under it looped forever, before
    for args in (("train", *tiny_settings(), f"runs_dir={tmp_path / 'runs' / 'sub'}"),
                 ("eval", "random", "--env", "groundrl/FollowInstruction-v0", "--runs-dir", tmp_path / "runs")):
        assert "is a link to nothing" in refused(capsys, *args)
    monkeypatch.setattr(runs, "check_runs_dir", lambda *args, **kwargs: None)  # past the check, the loop ends too
    with pytest.raises(GroundrlError, match="a part of that path is not a folder"):
        runs.new_run_dir(tmp_path / "runs", "train", "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]


def test_an_empty_runs_dir_is_refused(capsys):
    assert refused(capsys, "train", "runs_dir=''") == "runs_dir must name a folder (e.g. runs; . for the current " \
                                                     "one), not ''"


# -- 3. an export carries the settings of its agent, nothing else ------------------------------------

def test_an_export_cannot_say_where_runs_go_nor_copy_the_environment(export_copy, tmp_path, capsys, monkeypatch,
                                                                     tiny_settings):
    monkeypatch.setenv("GROUNDRL_SECRET", "hunter2")
    monkeypatch.chdir(tmp_path)
    settings = (export_copy / "groundrl.yaml").read_text()
    elsewhere = tmp_path / "elsewhere"
    settings = settings.replace("  separator: ' '", "  separator: ${oc.env:GROUNDRL_SECRET}")
    assert "GROUNDRL_SECRET" in settings
    (export_copy / "groundrl.yaml").write_text(
        settings + f"runs_dir: {elsewhere}\ninit: /somewhere/else\nlogging:\n  backends: [wandb]\n")
    code, _, err = cli(capsys, "train", "--init", export_copy, "rollout.total_decisions=8", "progress=false")
    assert code is None or code == 0, err
    assert not elsewhere.exists()
    (run_dir,) = (tmp_path / "runs").iterdir()  # the default runs folder
    written = "".join(p.read_text(errors="replace") for p in run_dir.rglob("*") if p.is_file())
    assert "hunter2" not in written and "${oc.env:GROUNDRL_SECRET}" in (run_dir / "config.yaml").read_text()
    config = load_config("default", files=[run_dir / "config.yaml"])
    assert config.init == str(export_copy.resolve()) and config.logging.backends == ["tensorboard", "jsonl"]


def test_an_export_holds_no_runs_dir_logging_or_absolute_run_path(exported, trained):
    settings = (exported / "groundrl.yaml").read_text()
    assert not re.search(r"^(runs_dir|logging|init):", settings, re.MULTILINE)
    meta = json.loads((exported / "groundrl.json").read_text())
    assert meta["run"] == trained.name and str(trained.parent) not in (exported / "groundrl.json").read_text()


# -- 4. weights are numbers ---------------------------------------------------------------------------

def test_nan_weights_in_an_export_or_a_checkpoint_are_refused(export_copy, run_copy, tmp_path, capsys):
    critic = load_file(str(export_copy / "critic.safetensors"))
    save_file({k: torch.full_like(v, float("nan")) for k, v in critic.items()}, str(export_copy / "critic.safetensors"))
    runs_dir = tmp_path / "new-runs"
    for args in (("eval", export_copy, "--episodes", "1", "--runs-dir", runs_dir),
                 ("train", "--init", export_copy, "rollout.total_decisions=8", f"runs_dir={runs_dir}")):
        assert "critic.safetensors holds weights that are NaN or infinite (0.weight" in refused(capsys, *args)
    (checkpoint, *_) = reversed(checkpoints.list_checkpoints(run_copy))
    weights = torch.load(checkpoint / "trainable.pt", weights_only=True)
    name = next(iter(weights))
    weights[name][0] = float("inf")
    torch.save(weights, checkpoint / "trainable.pt")
    for args in (("eval", run_copy, "--episodes", "1", "--runs-dir", runs_dir), ("train", "--resume", run_copy),
                 ("export", run_copy, "--out", tmp_path / "out")):
        message = refused(capsys, *args)
        assert f"holds weights that are NaN or infinite ({name}" in message and str(checkpoint) in message, message
    assert not files_under(runs_dir) and not (tmp_path / "out").exists()


def test_a_run_whose_weights_turn_nan_stops_before_checkpointing_them(tmp_path, capsys, monkeypatch, tiny_settings):
    from groundrl.train.algorithms import PPO

    update = PPO.update

    def diverging(self, experience):
        learning = update(self, experience)
        if self.context.state.update == 2:  # the second update (the trainer counts it before PPO learns from it)
            with torch.no_grad():
                next(p for p in self.agent.parameters() if p.requires_grad).fill_(float("nan"))
            learning = {**learning, "policy_loss": float("nan")}
        return learning

    monkeypatch.setattr(PPO, "update", diverging)
    message = refused(capsys, "train", *tiny_settings("rollout.total_decisions=24", "checkpoint_every=1"),
                      f"runs_dir={tmp_path}")
    (run_dir,) = tmp_path.iterdir()
    assert message.startswith("update 2 made trained weights NaN or infinite (") and "policy_loss nan" in message
    assert "the last good checkpoint is update-000001: resume from it" in message
    assert [p.name for p in checkpoints.list_checkpoints(run_dir)] == ["update-000001"]


# -- 5. the model card ---------------------------------------------------------------------------------

def test_the_model_card_escapes_what_it_did_not_write(trained, tmp_path):
    config = load_config("default", files=[trained / "config.yaml"],
                         values={"env_kwargs": {"note": "`</code><script>alert(1)</script> | x"}})
    source = 'C:\\models\\m "quoted"); import os; os.system("x") #'
    about = {"format": 1, "kind": "adapter", "base_model": "m<b>_*bold*_</b>", "base_source": source,
             "run": "run`<img src=x onerror=alert(1)>", "checkpoint": "update-000002", "update": 2, "decisions": 16}
    rows = [[{"test": "t | <img src=x onerror=alert(2)> ` [link](http://x)", "episodes": 5, "success_rate": 0.5,
              "ci_low": 0.1, "ci_high": 0.9, "mean_return": 0.5, "mean_length": 3.0, "greedy": False}]]
    card = exports.model_card(about, config, trained, rows)
    rendered = MarkdownIt("commonmark").enable("table").render(card)
    assert not re.search(r"<(script|img|b)\b", rendered) and "<a " not in rendered, rendered
    table = re.findall(r"<tbody>(.*?)</tbody>", rendered, re.DOTALL)[-1]  # the evaluation's
    assert table.count("<td>") == 6 and "onerror=alert(2)" in table  # one row of six cells, the name as text
    code = re.search(r"```python\n(.*?)```", card, re.DOTALL).group(1)
    calls = [node for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Call)
             and getattr(node.func, "attr", "") == "from_pretrained" and node.args
             and isinstance(node.args[0], ast.Constant) and node.args[0].value != "path/to/this/folder"]
    assert [call.args[0].value for call in calls] == [source]


# -- 6. evaluations in the model card --------------------------------------------------------------------

def evaluate(capsys, agent, runs_dir: Path) -> Path:
    before = files_under(runs_dir)
    code, _, err = cli(capsys, "eval", agent, "--env", "groundrl/FollowInstruction-v0", "--episodes", "2", "--num-envs",
                       "1", "--runs-dir", runs_dir)
    assert code is None or code == 0, err
    (folder,) = {p for p in runs_dir.iterdir()} - before
    return folder


def test_evaluations_that_are_not_this_agents_are_refused(run_copy, tmp_path, capsys):
    runs_dir = run_copy.parent
    random = evaluate(capsys, "random", runs_dir)
    first = checkpoints.list_checkpoints(run_copy)[0]
    earlier = evaluate(capsys, first, runs_dir)
    this = evaluate(capsys, run_copy, runs_dir)
    out = tmp_path / "out"
    for folder, says in ((tmp_path / "nowhere", "is not a folder"), (run_copy, "is not a finished evaluation"),
                         (random, "evaluated 'random', not the checkpoint exported"),
                         (earlier, f"evaluated '{first}', not the checkpoint exported")):
        assert f"--evaluation {folder} {says}" in refused(capsys, "export", run_copy, "--out", out,
                                                           "--evaluation", folder)
    (this / "results.json").write_text(json.dumps([{"test": 1, "episodes": "two", "success_rate": 0.5}]))
    assert "results.json is damaged" in refused(capsys, "export", run_copy, "--out", out, "--evaluation", this)
    assert not out.exists()
    with pytest.warns(UserWarning, match=f"the model card leaves out {this.name}: evaluation .* is damaged"):
        exports.export(run_copy, out)  # found beside the run: skipped, with a warning
    assert "Not evaluated when exported" in (out / "README.md").read_text()


def test_an_evaluation_of_this_checkpoint_goes_into_the_card(run_copy, tmp_path, capsys):
    this = evaluate(capsys, run_copy, run_copy.parent)
    card = (exports.export(run_copy, tmp_path / "out", evaluations=[this]) / "README.md").read_text()
    assert "| FollowInstruction | 2 (sampled) |" in card, card[card.index("## Evaluation"):]


# -- 7. exports: --out, damaged files ---------------------------------------------------------------------

def test_bad_export_destinations_are_one_line_and_leave_nothing(run_copy, tmp_path, capsys, monkeypatch):
    (tmp_path / "a-file").write_text("mine")
    (tmp_path / "dangling").symlink_to(tmp_path / "nothing-here")
    cases = {tmp_path / "dangling": "is a symbolic link",
             tmp_path / "a-file" / "out": f"cannot be created: {tmp_path / 'a-file'} is a file",
             run_copy / "checkpoints" / "export": "is inside the run's checkpoints folder"}
    for out, says in cases.items():
        assert says in refused(capsys, "export", run_copy, "--out", out)
    before = files_under(tmp_path)

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(export_writing, "save_file", disk_full)
    message = refused(capsys, "export", run_copy, "--out", tmp_path / "out")
    assert message == f"cannot write the export to {tmp_path / 'out'}: No space left on device (nothing was written)"
    assert files_under(tmp_path) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_export_destination_is_one_line(run_copy, tmp_path, capsys):
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked").chmod(0o555)
    assert "is not writable" in refused(capsys, "export", run_copy, "--out", tmp_path / "locked" / "out")
    assert not list((tmp_path / "locked").iterdir())


def test_two_exports_to_one_folder_at_once_keep_the_first(run_copy, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    heads = export_writing._save_heads

    def meanwhile(agent, folder):  # the other export finishes while this one writes
        heads(agent, folder)
        out.mkdir(exist_ok=True)
        (out / "README.md").write_text("the other export")

    monkeypatch.setattr(export_writing, "_save_heads", meanwhile)
    message = refused(capsys, "export", run_copy, "--out", out)
    assert message == f"cannot write the export to {out}: another export wrote it meanwhile (nothing was written)"
    assert [p.name for p in out.iterdir()] == ["README.md"] and not list(tmp_path.glob(".exporting-*"))


def test_an_export_keeps_the_users_umask_and_cleans_up_after_a_killed_one(run_copy, tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    abandoned = tmp_path / f".exporting-out-{int(dead.stdout)}-x1y2"
    abandoned.mkdir()
    (abandoned / "model.safetensors").write_bytes(b"half")
    alive = tmp_path / f".exporting-out-{os.getpid()}-z3"  # an export under way in this very process
    alive.mkdir()
    umask = os.umask(0o027)
    try:
        out = exports.export(run_copy, tmp_path / "out")
    finally:
        os.umask(umask)
    assert not abandoned.exists() and alive.exists()
    assert oct(out.stat().st_mode & 0o777) == oct(0o750)
    assert {oct(p.stat().st_mode & 0o777) for p in out.iterdir()} == {oct(0o640)}


@pytest.mark.parametrize("meta", ['{"format": "1", "kind": "adapter"}', '{"format": null, "kind": "adapter"}',
                                  '{"format": 1, "kind": "adapter", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
                                  '{"format": 99, "kind": "adapter"}', '{"format": 1, "kind": "pickle"}'])
def test_a_damaged_groundrl_json_is_one_line(export_copy, tmp_path, capsys, meta):
    (export_copy / "groundrl.json").write_text(meta)
    message = refused(capsys, "eval", export_copy, "--episodes", "1", "--runs-dir", tmp_path / "runs")
    assert "groundrl.json" in message or "export format 99" in message
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("change, says", [
    ({"agent:\n  kind: llm": "agent:\n  kind: drrn"}, "says agent.kind 'drrn': an export holds an LLM agent"),
    ({"agent:\n  kind: llm": "agent: [1]\nx:\n  kind: llm"}, "bad configuration: "),
    ({"model: tiny-llama": "model: tiny-t5"}, "agent.llm.lora_targets ['q_proj', 'v_proj'] are not modules of tiny-t5"),
    ({"model: tiny-llama": "model: /no/such/model"}, "'/no/such/model' not found"),
])
def test_settings_of_an_export_that_do_not_fit_its_weights_are_one_line(export_copy, tmp_path, capsys, change, says):
    settings = (export_copy / "groundrl.yaml").read_text()
    ((old, new),) = change.items()
    assert old in settings
    (export_copy / "groundrl.yaml").write_text(settings.replace(old, new))
    for args in (("eval", export_copy, "--episodes", "1", "--runs-dir", tmp_path / "runs"),
                 ("train", "--init", export_copy, f"runs_dir={tmp_path / 'runs'}")):
        assert says in refused(capsys, *args)
    assert not files_under(tmp_path / "runs")


@pytest.mark.parametrize("damage", ["pickle", "truncated"])
def test_a_merged_export_with_damaged_weights_is_one_line(merged, tmp_path, capsys, damage):
    folder = Path(shutil.copytree(merged, tmp_path / "agent"))
    weights = folder / "model.safetensors"
    if damage == "pickle":
        torch.save({"w": Payload(tmp_path / "pwned")}, weights)
    else:
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    message = refused(capsys, "eval", folder, "--episodes", "1", "--runs-dir", tmp_path / "runs")
    assert message.startswith(f"could not load model '{folder.resolve()}'"), message
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "runs").exists()


# -- 8. every file an export or a checkpoint holds, replaced -------------------------------------------------

def garbage(file: Path, kind: str, marker: Path) -> None:
    if kind == "garbage":
        file.write_bytes(b"\x00\xff garbage {[: \x89PNG" * 100)
    elif kind == "pickle":
        torch.save({"weights": Payload(marker)}, file)
    elif kind == "empty":
        file.write_bytes(b"")
    else:  # huge: a sparse file of 4 GiB, nothing of which should be read
        file.write_bytes(b"")
        with open(file, "r+b") as handle:
            handle.truncate(4 << 30)


# files groundrl does not read to play or train from an export (from an adapter export, the tokenizer
# and the base are the base model's); damaging them changes nothing
UNREAD = {"adapter": {"README.md", "adapter_config.json", "tokenizer.json", "tokenizer_config.json"},
          "model": {"README.md", "generation_config.json"}}


@pytest.mark.parametrize("kind", ["garbage", "pickle", "empty", "huge"])
@pytest.mark.parametrize("export_kind", ["adapter", "model"])
def test_every_file_of_an_export_replaced_is_one_line_or_unread(exported, merged, tmp_path, capsys, kind, export_kind,
                                                                  monkeypatch):
    monkeypatch.chdir(tmp_path)
    exported = exported if export_kind == "adapter" else merged
    for name in sorted(p.name for p in exported.iterdir()):
        folder = Path(shutil.copytree(exported, tmp_path / name / "agent"))
        marker, runs_dir = tmp_path / name / "pwned", tmp_path / name / "runs"
        garbage(folder / name, kind, marker)
        code, _, err = cli(capsys, "eval", folder, "--episodes", "1", "--num-envs", "1", "--runs-dir", runs_dir)
        assert not marker.exists(), name
        if name in UNREAD[export_kind] and code in (None, 0):
            continue
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, (name, kind, err)
        assert not runs_dir.exists(), name


@pytest.mark.parametrize("kind", ["garbage", "pickle", "empty", "huge"])
def test_every_file_of_a_checkpoint_replaced_is_one_line(trained, tmp_path, capsys, kind):
    names = [p.relative_to(trained) for p in trained.rglob("*") if p.is_file()
             and (p.parent.parent.name == "checkpoints" or p.name == "config.yaml")]
    for name in names:
        run_dir = Path(shutil.copytree(trained, tmp_path / str(name).replace("/", "-") / trained.name))
        marker, runs_dir = run_dir.parent / "pwned", run_dir.parent / "evals"
        garbage(run_dir / name, kind, marker)
        latest = checkpoints.list_checkpoints(run_dir)[-1]
        reads = name.name == "config.yaml" or Path(run_dir / name).parent == latest
        before = files_under(run_dir)
        for args in (("eval", run_dir, "--episodes", "1", "--runs-dir", runs_dir), ("train", "--resume", run_dir),
                     ("export", run_dir, "--out", run_dir.parent / "out")):
            if not reads or args[0] != "train" and name.name == "state.pt":
                continue  # an earlier checkpoint is not read; evaluation and export read the weights only
            code, _, err = cli(capsys, *args)
            assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, (name, kind, args, err)
            assert not marker.exists(), (name, args)
        assert files_under(run_dir) == before and not runs_dir.exists() and not (run_dir.parent / "out").exists()


# -- 9. start-up -----------------------------------------------------------------------------------------------

def test_ctrl_c_during_start_up_is_one_line(tmp_path):
    # a background job of a shell script ignores Ctrl-C, and its children inherit that: not this one
    process = subprocess.Popen([sys.executable, "-m", "groundrl", "train", f"runs_dir={tmp_path}"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # the guard is up once the command line's imports begin (torch, then transformers, for seconds);
    # ``import groundrl`` before it (gymnasium) is not guarded: a fixed wait could land there on a
    # loaded machine in a fresh clone (the package's bytecode still to compile), and fail as -2
    maps, deadline = Path(f"/proc/{process.pid}/maps"), time.monotonic() + 60
    while "libtorch" not in maps.read_text() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130 and err == "interrupted\n", err
    assert not list(tmp_path.iterdir())
