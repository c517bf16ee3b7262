"""A trained LLM agent as a folder any Hugging Face user can load (``groundrl export``), and back.

An export of a run's checkpoint holds

- the policy: the LoRA adapter in PEFT's format (``adapter_config.json``,
  ``adapter_model.safetensors``: ``PeftModel.from_pretrained(base, DIR)``), or, with ``merge`` (and
  always for a fully fine-tuned actor), the whole model (``config.json``, ``model.safetensors``:
  ``AutoModelForCausalLM.from_pretrained(DIR)``);
- the tokenizer;
- the heads groundrl trains beside the LLM, as safetensors: ``critic.safetensors`` (the value head,
  keys ``value_head.*``) and, for GLAM's action-head ablation, ``action_head.safetensors``;
- ``groundrl.yaml``: the run's resolved settings (``groundrl train --config groundrl.yaml``
  trains it again); ``groundrl.json``: what was exported, from where, after how many decisions;
- ``README.md``: the model card.

``groundrl eval DIR`` plays an export, and ``groundrl train --init DIR`` starts a new run from its
weights (:func:`check_init`, :func:`load_weights`). The frozen-base critic reads the *base* model's
hidden states: an adapter export keeps that base, a merged one makes the merged model the new base.
"""

from __future__ import annotations

import errno
import glob
import html
import importlib.metadata
import json
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import yaml
from peft import get_peft_model_state_dict, set_peft_model_state_dict
from safetensors.torch import load_file, save_file

from groundrl.agents.config import Actor, AgentKind, PolicyKind
from groundrl.agents.factory import build_agent
from groundrl.envs import make_env
from groundrl.errors import GroundrlError
from groundrl.files import read_json, read_yaml
from groundrl.llm.tiny import TINY_MODELS
from groundrl.runs import is_whole_number, iter_jsonl
from groundrl.train.checkpoint import find, load_agent, non_finite, read_meta
from groundrl.train.checkpoint import settings as flat_settings
from groundrl.train.config import TrainConfig, config_of, load_config_file, to_yaml

FORMAT = 1
META = "groundrl.json"
SETTINGS = "groundrl.yaml"
CRITIC = "critic.safetensors"
ACTION_HEAD = "action_head.safetensors"
# the settings an initialized run must share with its export, so that the saved weights fit
ADAPTER_SHAPES = ("agent.llm.actor", "agent.llm.lora_r", "agent.llm.lora_targets", "agent.llm.train_layers")
HEAD_SHAPES = ("agent.kind", "agent.llm.policy", "agent.llm.critic", "agent.llm.critic_hidden",
               "agent.llm.head_hidden")
# what an export's settings never say, being someone else's file: where runs and their records go
# (runs_dir, logging) and which export a run started from (init: the export itself, for a run made
# from it). They are left out when exported and ignored when read.
NOT_CARRIED = ("runs_dir", "logging", "init")


class ExportError(GroundrlError):
    """An export that cannot be written or read."""


def is_export(path: str | Path) -> bool:
    """Whether ``path`` is a folder written by :func:`export`."""
    return (Path(path) / META).is_file()


def read_export(path: str | Path) -> tuple[dict, TrainConfig]:
    """An export's ``groundrl.json`` and settings (those it carries, :data:`NOT_CARRIED`), checked."""
    path = Path(path)
    if not (path / META).is_file():
        raise ExportError(f"{path} is not a groundrl export (no {META}): make one with `groundrl export RUN --out "
                          f"{path}`")
    meta = read_json(path / META, "export the run again")
    if not isinstance(meta, dict) or meta.get("kind") not in ("adapter", "model"):
        raise ExportError(f"{path / META} is corrupt (no kind adapter or model): export the run again")
    if not is_whole_number(meta.get("format")) or meta["format"] < 1:
        raise ExportError(f"{path / META} is corrupt (its format is not a version number): export the run again")
    if meta["format"] > FORMAT:
        raise ExportError(f"{path} has export format {meta['format']}, this groundrl reads up to {FORMAT}: upgrade "
                          "groundrl")
    if not (path / SETTINGS).is_file():
        raise ExportError(f"{path} is incomplete (missing {SETTINGS}): export the run again")
    return meta, config_of(carried_settings(path), f"{path / SETTINGS}")


def carried_settings(path: str | Path) -> dict:
    """The settings an export's ``groundrl.yaml`` gives that shape its agent: those of
    :data:`NOT_CARRIED` are dropped (the user's own, or the defaults, decide them)."""
    file = Path(path) / SETTINGS
    settings = read_yaml(file, "export the run again")
    if not isinstance(settings, dict):
        raise ExportError(f"{file} is corrupt (not a mapping of settings): export the run again")
    settings = {key: value for key, value in settings.items() if key not in NOT_CARRIED}
    if (settings.get("agent") or {}).get("kind", AgentKind.llm.value) != AgentKind.llm.value:
        raise ExportError(f"{file} says agent.kind {settings['agent']['kind']!r}: an export holds an LLM agent, export "
                          "the run again")
    return settings


def export(path: str | Path, out: str | Path, *, merge: bool = False,
           evaluations: Sequence[str | Path] | None = None) -> Path:
    """Export the trained agent of a run folder (its latest checkpoint) or of a checkpoint to the
    new folder ``out``; with ``merge``, the LoRA adapter is merged into the base weights.
    ``evaluations``: the evaluation run folders of this checkpoint whose results go into the model
    card (default: every one found beside the run, in its runs folder; damaged ones are skipped with
    a warning).

    The folder is written under a hidden name beside ``out`` and renamed into place, with the
    permissions the user's umask gives: an interrupted export leaves nothing under ``out`` (and the
    next export to ``out`` removes what it left).

    Raises:
        ExportError: ``out`` cannot be a new folder (a file, a non-empty folder, a link, inside the
            run's checkpoints, not writable, the disk full), an evaluation is not one of this
            checkpoint, or the run is not an LLM agent's.
        CheckpointError: the run has no (readable) checkpoint.
    """
    out = Path(out)
    _check_out(out)
    checkpoint = find(path)
    meta = read_meta(checkpoint)
    run_dir = checkpoint.parent.parent
    if out.absolute().is_relative_to((run_dir / "checkpoints").absolute()):
        raise ExportError(f"--out {out} is inside the run's checkpoints folder, where it would pass for a checkpoint: "
                          "choose a folder outside it (nothing was written)")
    kind = load_config_file(run_dir / "config.yaml").agent.kind.value
    if kind != AgentKind.llm.value:
        raise ExportError(f"{run_dir} trained a {kind} agent: only LLM agents export to a Hugging Face folder (its "
                          f"weights are in {checkpoint / 'trainable.pt'})")
    if evaluations is None:
        results = evaluations_beside(run_dir, checkpoint)
    else:
        results = [read_evaluation(Path(folder), run_dir, checkpoint, option="--evaluation") for folder in evaluations]
    agent, config, checkpoint = load_agent(checkpoint, device="cpu")
    lora = config.agent.llm.actor == Actor.lora
    exported_kind = "adapter" if lora and not merge else "model"
    staging = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        _remove_abandoned(out)
        staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f"{_staging_prefix(out)}{os.getpid()}-"))
        if exported_kind == "adapter":
            agent.model.save_pretrained(staging)
            adapter_config = json.loads((staging / "adapter_config.json").read_text())
            if not adapter_config.get("base_model_name_or_path"):  # a model built from a config has no path
                adapter_config["base_model_name_or_path"] = agent.llm.name
                (staging / "adapter_config.json").write_text(json.dumps(adapter_config, indent=2) + "\n")
        else:
            model = agent.model.merge_and_unload() if lora else agent.model
            model.save_pretrained(staging)
        agent.llm.tokenizer.save_pretrained(staging)
        _save_heads(agent, staging)
        (staging / SETTINGS).write_text(config_for_export(config))
        # the run's name, not its path: an export is shared, and where the run lay is nobody else's business
        about = {"format": FORMAT, "kind": exported_kind, "base_model": agent.llm.name, "base_source": agent.llm.source,
                 "run": run_dir.name, "checkpoint": checkpoint.name, "update": meta.get("update"),
                 "decisions": meta.get("decisions"), "training_seeds": meta.get("training_seeds"),
                 "model_class": agent.llm.kind, "env": config.env, "algorithm": config.algorithm.value}
        (staging / META).write_text(json.dumps(about, indent=2) + "\n")
        (staging / "README.md").write_text(model_card(about, config, run_dir, results))
        _as_umask_allows(staging)
        if out.is_dir():
            out.rmdir()  # empty, checked above (a folder another export filled meanwhile is refused here)
        staging.rename(out)
    except OSError as error:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        reason = error.strerror or type(error).__name__
        if error.errno in (errno.ENOTEMPTY, errno.EEXIST):
            reason = "another export wrote it meanwhile"
        raise ExportError(f"cannot write the export to {out}: {reason} (nothing was written)") from None
    except BaseException:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def _check_out(out: Path) -> None:
    """``out`` can become a new folder: one line, before anything loads, when it cannot."""
    if out.is_symlink():
        raise ExportError(f"--out {out} is a symbolic link: give the path of a new folder (nothing was written)")
    if out.exists() and not out.is_dir() or out.is_dir() and any(out.iterdir()):
        raise ExportError(f"--out {out} already exists and is not empty: choose a new folder (nothing was written)")
    existing = next(p for p in (out.parent, *out.parent.absolute().parents) if p.exists())
    if not existing.is_dir():
        raise ExportError(f"--out {out} cannot be created: {existing} is a file (nothing was written)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ExportError(f"--out {out} cannot be created: {existing} is not writable (nothing was written)")


def _staging_prefix(out: Path) -> str:
    return f".exporting-{out.name}-"


def _remove_abandoned(out: Path) -> None:
    """Remove the hidden folders that exports to ``out`` left when they were killed (their process,
    named in the folder's name, is gone)."""
    prefix = _staging_prefix(out)
    for folder in out.parent.glob(f"{glob.escape(prefix)}*"):
        pid = folder.name.removeprefix(prefix).split("-")[0]
        if folder.is_dir() and pid.isdigit() and not _process_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: a number no process has
        return False
    except PermissionError:  # another user's
        return True
    return True


def _as_umask_allows(folder: Path) -> None:
    """Give ``folder`` and what it holds the permissions of a folder the user made (``tempfile``
    makes it private, and safetensors writes private files)."""
    umask = os.umask(0)
    os.umask(umask)
    for path in [folder, *folder.rglob("*")]:
        path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)


def config_for_export(config: TrainConfig) -> str:
    """The run's settings as YAML, without those an export does not carry (:data:`NOT_CARRIED`)."""
    settings = yaml.safe_load(to_yaml(config))
    return yaml.safe_dump({key: value for key, value in settings.items() if key not in NOT_CARRIED}, sort_keys=False)


def _save_heads(agent, folder: Path) -> None:
    def contiguous(module, prefix):
        return {f"{prefix}.{k}": v.detach().cpu().contiguous() for k, v in module.state_dict().items()}

    save_file(contiguous(agent.value_head, "value_head"), str(folder / CRITIC))
    if agent.action_head is not None:
        save_file(contiguous(agent.action_head, "action_head"), str(folder / ACTION_HEAD))


# -- reading an export back -------------------------------------------------------------------

def check_init(config: TrainConfig) -> None:
    """Before anything loads: the export ``config.init`` names can start this run (its weights fit
    the run's settings), in one line when it cannot."""
    meta, exported = read_export(config.init)
    now, then = flat_settings(config), flat_settings(exported)
    keys = HEAD_SHAPES + (ADAPTER_SHAPES if meta["kind"] == "adapter" else ())
    different = [key for key in keys if now[key] != then[key]]
    if different:
        shown = ", ".join(f"{key}={now[key]!r} (the export's: {then[key]!r})" for key in different)
        fix = "drop those settings" + (", or export the run with --merge to train new adapters" if
                                       meta["kind"] == "adapter" else "")
        raise ExportError(f"init {config.init} does not fit the run's settings: {shown}; {fix}")
    if meta["kind"] == "adapter" and (config.model or None) != (exported.model or None):
        raise ExportError(f"init {config.init} is an adapter of model {exported.model or 'default'}, not of "
                          f"{config.model or 'default'}: drop model=, or export the run with --merge")
    if meta["kind"] == "model" and Path(config.model or "").resolve() != Path(config.init).resolve():
        raise ExportError(f"init {config.init} holds a whole model: set model={config.init} (groundrl train --init "
                          "does)")


def init_settings(path: str | Path) -> dict:
    """The settings ``groundrl train --init DIR`` starts from, under the user's: those the export
    carries, the export itself as ``init``, and its folder as the model when it holds a whole model.

    Raises:
        GroundrlError: ``path`` is not an export, or a damaged one.
    """
    meta, _ = read_export(path)
    folder = str(Path(path).resolve())
    return {**carried_settings(path), "init": folder, **({"model": folder} if meta["kind"] == "model" else {})}


def load_weights(agent, path: str | Path) -> None:
    """Copy an export's adapter (for an adapter export) and heads into ``agent``, built with the
    export's settings (see :func:`check_init`).

    Raises:
        ExportError: a file is missing or does not fit the agent.
    """
    path = Path(path)
    meta, _ = read_export(path)

    def read(name):
        try:
            return load_file(str(path / name))
        except FileNotFoundError:
            raise ExportError(f"{path} is incomplete (missing {name}): export the run again") from None
        except Exception as error:  # noqa: BLE001 - any failure to read means the file is damaged
            raise ExportError(f"{path / name} is corrupt ({type(error).__name__}): export the run again") from None

    if meta["kind"] == "adapter":
        adapter = read("adapter_model.safetensors")
        expected = get_peft_model_state_dict(agent.model)
        if set(adapter) != set(expected) or any(adapter[k].shape != expected[k].shape for k in adapter):
            raise ExportError(f"the adapter in {path} does not fit this model (other layers, rank or base)")
        if bad := non_finite(adapter):
            raise ExportError(f"{path / 'adapter_model.safetensors'} holds weights that are NaN or infinite ({bad}): "
                              "export the run again")
        set_peft_model_state_dict(agent.model, {k: v.to(agent.device) for k, v in adapter.items()})
    heads = [("value_head", CRITIC)] + ([("action_head", ACTION_HEAD)] if agent.action_head is not None else [])
    for attribute, name in heads:
        module = getattr(agent, attribute)
        saved = {k.removeprefix(f"{attribute}."): v for k, v in read(name).items()}
        own = module.state_dict()
        if set(saved) != set(own) or any(saved[k].shape != own[k].shape for k in saved):
            raise ExportError(f"{path / name} does not fit this agent's {attribute.replace('_', ' ')}")
        if bad := non_finite(saved):
            raise ExportError(f"{path / name} holds weights that are NaN or infinite ({bad}): export the run again")
        module.load_state_dict({k: v.to(own[k].dtype) for k, v in saved.items()})
    if meta["kind"] == "model":  # the merged model's own weights, loaded as the agent's base
        if bad := non_finite(dict(agent.model.named_parameters())):
            raise ExportError(f"the model in {path} holds weights that are NaN or infinite ({bad}): export the run "
                              "again")


def load_export(path: str | Path, device: str = "auto", dtype: str | None = None, precision: str | None = None):
    """The agent an export holds, ready to evaluate: ``(agent, config, meta)``."""
    path = Path(path)
    meta, config = read_export(path)
    if meta["kind"] == "model":  # the merged weights are the model; the actor's adapters start as the identity
        config = replace(config, model=str(path.resolve()))
    env = make_env(config.env, prompt=config.prompt, window=config.prompt_window, **config.env_kwargs)
    agent = build_agent(config.agent, env, model=config.model, dtype=dtype or config.dtype, device=device,
                        seed=config.seed, precision=precision or config.precision)
    env.close()
    load_weights(agent, path)
    agent.eval()
    return agent, config, meta


# -- the model card ---------------------------------------------------------------------------

class NotThisAgent(ExportError):
    """An evaluation run folder that played another agent than the checkpoint exported."""


_NUMBERS = ("ci_low", "ci_high", "mean_return", "mean_length")  # of a row of results.json that was played


def evaluations_beside(run_dir: Path, checkpoint: Path) -> list[list[dict]]:
    """The results of every evaluation of ``checkpoint`` in its run's runs folder (see
    :func:`read_evaluation`); a damaged one is skipped with a warning."""
    found = []
    for folder in sorted(run_dir.parent.glob("*-eval-*")):
        if not folder.is_dir():
            continue
        try:
            found.append(read_evaluation(folder, run_dir, checkpoint))
        except NotThisAgent:
            continue
        except GroundrlError as error:
            warnings.warn(f"the model card leaves out {folder.name}: {error}", stacklevel=2)
    return found


def read_evaluation(folder: Path, run_dir: Path, checkpoint: Path, option: str = "evaluation") -> list[dict]:
    """The played tests of an evaluation run folder of ``checkpoint`` (rows of ``results.json``,
    checked: a row the model card shows has its numbers), each with ``greedy``.

    Raises:
        NotThisAgent: the evaluation played another agent (another run, another checkpoint of this
            run, a baseline).
        GroundrlError: ``folder`` is not an evaluation run folder, or its files are damaged.
    """
    fix = f"give an evaluation run folder of `groundrl eval {run_dir}` (or leave {option} out)"
    if not folder.is_dir():
        raise ExportError(f"{option} {folder} is not a folder: {fix}")
    if not (folder / "config.yaml").is_file() or not (folder / "results.json").is_file():
        raise ExportError(f"{option} {folder} is not a finished evaluation (no config.yaml and results.json): {fix}")
    settings = read_yaml(folder / "config.yaml", fix)
    if not isinstance(settings, dict) or settings.get("job") != "eval":
        raise ExportError(f"{option} {folder} is not an evaluation run folder (its config.yaml says no job: eval): "
                          f"{fix}")
    played = (settings.get("about") or {}).get("agent") if isinstance(settings.get("about"), dict) else None
    if not isinstance(played, str) or Path(played).parts[-3:] != (run_dir.name, "checkpoints", checkpoint.name):
        raise NotThisAgent(f"{option} {folder} evaluated {str(played)[:200]!r}, not the checkpoint exported "
                           f"({run_dir.name}/checkpoints/{checkpoint.name}): {fix}")
    rows = read_json(folder / "results.json", fix)
    damaged = ExportError(f"{option} {folder / 'results.json'} is damaged (not the rows `groundrl eval` writes): {fix}")
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise damaged
    played_rows = []
    for row in rows:
        if row.get("success_rate") is None:  # a test the agent could not play
            continue
        name = row.get("test", row.get("env_id"))
        if not isinstance(name, str) or not is_whole_number(row.get("episodes")) or not all(
                isinstance(row.get(key), (int, float)) and not isinstance(row.get(key), bool)
                for key in ("success_rate", *_NUMBERS)):
            raise damaged
        played_rows.append({**row, "test": name, "greedy": bool(settings.get("greedy"))})
    return played_rows


def _version() -> str:
    try:
        return importlib.metadata.version("groundrl")
    except importlib.metadata.PackageNotFoundError:  # a source tree that was not installed
        return "(not installed)"


def _base_loader(about: dict, auto: str) -> str:
    """The line of Python that loads the export's base model with transformers alone (paths quoted
    by Python itself: a quote or backslash in them stays text)."""
    source = str(about["base_source"])
    if about["base_model"] in TINY_MODELS:
        return f"groundrl.llm.tiny.build_tiny({about['base_model']!r})[0]  # random weights, built from a config"
    gguf = source.split(" (package")[0]
    if gguf.endswith(".gguf"):
        return f"{auto}.from_pretrained({str(Path(gguf).parent)!r}, gguf_file={Path(gguf).name!r})"
    return f"{auto}.from_pretrained({source.removeprefix('hub:')!r})"


def _text(value) -> str:
    """``value`` as Markdown text that renders as itself, on one line: no HTML (escaped), no code,
    emphasis, links or table cells of its own (the characters that start them inside a line,
    backslashed)."""
    escaped = html.escape(" ".join(str(value).split()), quote=False)
    return re.sub(r"([\\`*_\[\]|~])", r"\\\1", escaped)


def _code(value) -> str:
    """``value`` as a Markdown code span on one line, which its own backticks cannot end (HTML in a
    code span is text)."""
    text = " ".join(str(value).split())
    fence = "`" * (max(map(len, re.findall(r"`+", text)), default=0) + 1)
    return f"{fence} {text} {fence}" if text.startswith("`") or text.endswith("`") else f"{fence}{text}{fence}"


def model_card(about: dict, config: TrainConfig, run_dir: Path, evaluations: Sequence[list[dict]]) -> str:
    """The export's ``README.md``: what it is, how it trained, how it did, how to load it. Every
    text groundrl did not write (names, paths, options, test names) is escaped."""
    llm = config.agent.llm
    # the checkpoint's own update (a run goes on after its last checkpoint), read a line at a time
    last = {}
    for metrics in iter_jsonl(run_dir / "metrics.jsonl"):
        if metrics.get("update") == about.get("update"):
            last = metrics
    adapter = about["kind"] == "adapter"
    gguf = "gguf" in str(about["base_source"]).lower()
    base = (f"{_code(about['base_model'])}, from the GGUF file {_code(about['base_source'])}, dequantized to float32 "
            f"by transformers" if gguf else f"{_code(about['base_model'])}: {_code(about['base_source'])}")
    evaluation = [f"| {_text(r['test'])} | {r['episodes']} ({'greedy' if r['greedy'] else 'sampled'}) | "
                  f"{r['success_rate']:.3f} | [{r['ci_low']:.3f}, {r['ci_high']:.3f}] | {r['mean_return']:.3f} | "
                  f"{r['mean_length']:.2f} |" for rows in evaluations for r in rows]
    training = [f"| {key} | {last[key]:.3f} |" for key in ("success_rate", "episode_return", "episode_length")
                if isinstance(last.get(key), (int, float))]
    policy = ("the softmax over the valid actions of the LLM's log-likelihood of each action given the prompt "
              f"({llm.normalization.value} normalization)" if llm.policy == PolicyKind.score else
              "an action head on the prompt's last hidden state (GLAM's NPAE ablation)")
    auto = "AutoModelForSeq2SeqLM" if about.get("model_class") == "seq2seq" else "AutoModelForCausalLM"
    loading = "\n".join(["```python", "from transformers import AutoTokenizer, " + auto,
                         *(["from peft import PeftModel"] if adapter else []), "",
                         'folder = "path/to/this/folder"',
                         *([f"base = {_base_loader(about, auto)}", "model = PeftModel.from_pretrained(base, folder)"]
                           if adapter else [f"model = {auto}.from_pretrained(folder)"]),
                         "tokenizer = AutoTokenizer.from_pretrained(folder)", "```"])
    front = {"library_name": "peft" if adapter else "transformers", "tags": ["groundrl", "reinforcement-learning",
             "text-games", config.algorithm.value], "pipeline_tag": "text-generation"}
    lines = [
        "---", yaml.safe_dump(front, sort_keys=False).strip(), "---", "",
        f"# {_text(config.env.removeprefix('groundrl/'))}: {_text(about['base_model'])} grounded with "
        f"{config.algorithm.value.upper()}",
        "",
        f"A language model trained by groundrl {_version()} to act in the text "
        f"environment {_code(config.env)}: its policy is {policy}.",
        "",
        "## What this folder holds", "",
        f"- **base model**: {base}",
        (f"- **the policy's weights**: a LoRA adapter in PEFT's format (r={llm.lora_r}, alpha={llm.lora_alpha}, on "
         f"{_text(', '.join(llm.lora_targets))})" if adapter else
         "- **the policy's weights**: the whole model" + (" (the LoRA adapter merged into the base)"
                                                          if llm.actor == Actor.lora else " (fully fine-tuned)")),
        f"- **critic**: `{CRITIC}`, the value head ({llm.critic.value} critic: "
        + ("an MLP on the frozen base model's last hidden state of the prompt)" if llm.critic.value == "frozen" else
           "an MLP on the policy's own last hidden state of the prompt)"),
        f"- **settings**: `{SETTINGS}` (the run's, resolved); `{META}` (where it came from)",
        "",
        "## Training", "",
        f"- environment: {_code(config.env)}" + (f", options {_code(json.dumps(config.env_kwargs))}"
                                                 if config.env_kwargs else "") + f", prompt {_code(config.prompt)}",
        f"- algorithm: {config.algorithm.value}; actor {llm.actor.value}; seed {config.seed}",
        f"- decisions trained: {about['decisions']:,} ({about['update']} "
        f"update{'' if about['update'] == 1 else 's'}; checkpoint {_code(about['checkpoint'])} of "
        f"run {_code(Path(about['run']).name)})" if isinstance(about.get("decisions"), int) else
        f"- checkpoint {_code(about['checkpoint'])} of run {_code(Path(about['run']).name)}",
        "",
    ]
    if training:
        lines += [f"The training episodes of update {about['update']}:", "", "| metric | value |", "|---|---|",
                  *training, ""]
    lines += ["## Evaluation", ""]
    if evaluation:
        lines += ["Success rate with its 95% confidence interval (Wilson), on evaluation episodes whose seeds no "
                  "training episode used:", "",
                  "| test | episodes | success rate | 95% CI | mean return | mean length |",
                  "|---|---|---|---|---|---|", *evaluation, ""]
    else:
        lines += ["Not evaluated when exported: `groundrl eval THIS_FOLDER --episodes 100`.", ""]
    lines += [
        "## Use it", "",
        "With groundrl:", "",
        "```bash",
        "groundrl eval THIS_FOLDER --episodes 100        # evaluate it",
        "groundrl train --init THIS_FOLDER               # a new run that starts from these weights",
        "```", "",
        "With plain Hugging Face libraries:", "",
        loading, "",
        "## Reproduce it", "",
        "```bash",
        f"groundrl train --config {SETTINGS}",
        "```", "",
    ]
    return "\n".join(lines)
