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

import importlib.metadata
import json
import shutil
import tempfile
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
from groundrl.llm.tiny import TINY_MODELS
from groundrl.runs import read_jsonl
from groundrl.train.checkpoint import find, load_agent, read_meta
from groundrl.train.checkpoint import settings as flat_settings
from groundrl.train.config import TrainConfig, load_config_file, to_yaml

FORMAT = 1
META = "groundrl.json"
SETTINGS = "groundrl.yaml"
CRITIC = "critic.safetensors"
ACTION_HEAD = "action_head.safetensors"
# the settings an initialized run must share with its export, so that the saved weights fit
ADAPTER_SHAPES = ("agent.llm.actor", "agent.llm.lora_r", "agent.llm.lora_targets", "agent.llm.train_layers")
HEAD_SHAPES = ("agent.kind", "agent.llm.policy", "agent.llm.critic", "agent.llm.critic_hidden",
               "agent.llm.head_hidden")


class ExportError(GroundrlError):
    """An export that cannot be written or read."""


def is_export(path: str | Path) -> bool:
    """Whether ``path`` is a folder written by :func:`export`."""
    return (Path(path) / META).is_file()


def read_export(path: str | Path) -> tuple[dict, TrainConfig]:
    """An export's ``groundrl.json`` and settings, checked."""
    path = Path(path)
    try:
        meta = json.loads((path / META).read_text())
    except FileNotFoundError:
        raise ExportError(f"{path} is not a groundrl export (no {META}): make one with `groundrl export RUN --out "
                          f"{path}`") from None
    except ValueError:
        raise ExportError(f"{path / META} is corrupt (not JSON): export the run again") from None
    if not isinstance(meta, dict) or meta.get("kind") not in ("adapter", "model"):
        raise ExportError(f"{path / META} is corrupt (no kind adapter or model): export the run again")
    if meta.get("format", 0) > FORMAT:
        raise ExportError(f"{path} has export format {meta['format']}, this groundrl reads up to {FORMAT}: upgrade "
                          "groundrl")
    if not (path / SETTINGS).is_file():
        raise ExportError(f"{path} is incomplete (missing {SETTINGS}): export the run again")
    return meta, load_config_file(path / SETTINGS)


def export(path: str | Path, out: str | Path, *, merge: bool = False,
           evaluations: Sequence[str | Path] | None = None) -> Path:
    """Export the trained agent of a run folder (its latest checkpoint) or of a checkpoint to the
    new folder ``out``; with ``merge``, the LoRA adapter is merged into the base weights.
    ``evaluations``: the evaluation run folders whose results go into the model card (default:
    every evaluation of this run found beside it, in its runs folder).

    Raises:
        ExportError: ``out`` is a file or a non-empty folder, or the run is not an LLM agent's.
        CheckpointError: the run has no (readable) checkpoint.
    """
    out = Path(out)
    if out.is_file() or (out.is_dir() and any(out.iterdir())):
        raise ExportError(f"--out {out} already exists and is not empty: choose a new folder (nothing was written)")
    checkpoint = find(path)
    meta = read_meta(checkpoint)
    run_dir = checkpoint.parent.parent
    kind = load_config_file(run_dir / "config.yaml").agent.kind.value
    if kind != AgentKind.llm.value:
        raise ExportError(f"{run_dir} trained a {kind} agent: only LLM agents export to a Hugging Face folder (its "
                          f"weights are in {checkpoint / 'trainable.pt'})")
    agent, config, checkpoint = load_agent(checkpoint, device="cpu")
    lora = config.agent.llm.actor == Actor.lora
    exported_kind = "adapter" if lora and not merge else "model"
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".exporting-{out.name}-"))
    try:
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
        saved = config_for_export(config)
        (staging / SETTINGS).write_text(saved)
        about = {"format": FORMAT, "kind": exported_kind, "base_model": agent.llm.name, "base_source": agent.llm.source,
                 "run": str(run_dir.resolve()), "checkpoint": checkpoint.name, "update": meta.get("update"),
                 "decisions": meta.get("decisions"), "training_seeds": meta.get("training_seeds"),
                 "model_class": agent.llm.kind, "env": config.env, "algorithm": config.algorithm.value}
        (staging / META).write_text(json.dumps(about, indent=2) + "\n")
        found = list(evaluations) if evaluations is not None else find_evaluations(run_dir)
        (staging / "README.md").write_text(model_card(about, config, run_dir, [Path(e) for e in found]))
        if out.is_dir():
            out.rmdir()  # empty, checked above
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def config_for_export(config: TrainConfig) -> str:
    """The run's settings as YAML, without where that run kept its folders (a run made from the
    export goes to the default ``runs``)."""
    settings = yaml.safe_load(to_yaml(config))
    settings.pop("runs_dir", None)
    return yaml.safe_dump(settings, sort_keys=False)


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


def init_overrides(path: str | Path) -> list[str]:
    """The settings ``groundrl train --init DIR`` adds: the export itself, and its folder as the
    model when it holds a whole model."""
    meta, _ = read_export(path)
    folder = str(Path(path).resolve())
    return [f"init={folder}"] + ([f"model={folder}"] if meta["kind"] == "model" else [])


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
        set_peft_model_state_dict(agent.model, {k: v.to(agent.device) for k, v in adapter.items()})
    heads = [("value_head", CRITIC)] + ([("action_head", ACTION_HEAD)] if agent.action_head is not None else [])
    for attribute, name in heads:
        module = getattr(agent, attribute)
        saved = {k.removeprefix(f"{attribute}."): v for k, v in read(name).items()}
        own = module.state_dict()
        if set(saved) != set(own) or any(saved[k].shape != own[k].shape for k in saved):
            raise ExportError(f"{path / name} does not fit this agent's {attribute.replace('_', ' ')}")
        module.load_state_dict({k: v.to(own[k].dtype) for k, v in saved.items()})


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

def find_evaluations(run_dir: Path) -> list[Path]:
    """The evaluation run folders beside ``run_dir`` (in its runs folder) that played its agent."""
    found = []
    for folder in sorted(run_dir.parent.glob("*-eval-*")):
        try:
            agent = yaml.safe_load((folder / "config.yaml").read_text()).get("agent")
        except Exception:  # noqa: BLE001 - an unreadable folder is not an evaluation of this run
            continue
        if isinstance(agent, str) and run_dir.name in Path(agent).parts and (folder / "results.json").is_file():
            found.append(folder)
    return found


def _evaluation_rows(folders: Sequence[Path]) -> list[str]:
    rows = []
    for folder in folders:
        try:
            results = json.loads((folder / "results.json").read_text())
            how = yaml.safe_load((folder / "config.yaml").read_text()) or {}
        except Exception:  # noqa: BLE001
            continue
        for r in results if isinstance(results, list) else []:
            if r.get("success_rate") is None:
                continue
            mode = "greedy" if how.get("greedy") else "sampled"
            rows.append(f"| {r.get('test', r.get('env_id'))} | {r['episodes']} ({mode}) | {r['success_rate']:.3f} | "
                        f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}] | {r['mean_return']:.3f} | {r['mean_length']:.2f} |")
    return rows


def _version() -> str:
    try:
        return importlib.metadata.version("groundrl")
    except importlib.metadata.PackageNotFoundError:  # a source tree that was not installed
        return "(not installed)"


def _base_loader(about: dict, auto: str) -> str:
    """The line of Python that loads the export's base model with transformers alone."""
    source = str(about["base_source"])
    if about["base_model"] in TINY_MODELS:
        name = about["base_model"]
        return f'groundrl.llm.tiny.build_tiny("{name}")[0]  # random weights, built from a config'
    gguf = source.split(" (package")[0]
    if gguf.endswith(".gguf"):
        return f'{auto}.from_pretrained("{Path(gguf).parent}", gguf_file="{Path(gguf).name}")'
    return f'{auto}.from_pretrained("{source.removeprefix("hub:")}")'


def model_card(about: dict, config: TrainConfig, run_dir: Path, evaluations: Sequence[Path]) -> str:
    """The export's ``README.md``: what it is, how it trained, how it did, how to load it."""
    llm = config.agent.llm
    metrics = read_jsonl(run_dir / "metrics.jsonl") if (run_dir / "metrics.jsonl").is_file() else []
    # the checkpoint's own update (a run goes on after its last checkpoint)
    last = next((m for m in reversed(metrics) if m.get("update") == about.get("update")), {})
    adapter = about["kind"] == "adapter"
    gguf = "gguf" in str(about["base_source"]).lower()
    base = (f"`{about['base_model']}`, from the GGUF file {about['base_source']}, dequantized to float32 by "
            f"transformers" if gguf else f"`{about['base_model']}`: {about['base_source']}")
    evaluation = _evaluation_rows(evaluations)
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
        f"# {config.env.removeprefix('groundrl/')}: {about['base_model']} grounded with "
        f"{config.algorithm.value.upper()}",
        "",
        f"A language model trained by groundrl {_version()} to act in the text "
        f"environment `{config.env}`: its policy is {policy}.",
        "",
        "## What this folder holds", "",
        f"- **base model**: {base}",
        (f"- **the policy's weights**: a LoRA adapter in PEFT's format (r={llm.lora_r}, alpha={llm.lora_alpha}, on "
         f"{', '.join(llm.lora_targets)})" if adapter else
         "- **the policy's weights**: the whole model" + (" (the LoRA adapter merged into the base)"
                                                          if llm.actor == Actor.lora else " (fully fine-tuned)")),
        f"- **critic**: `{CRITIC}`, the value head ({llm.critic.value} critic: "
        + ("an MLP on the frozen base model's last hidden state of the prompt)" if llm.critic.value == "frozen" else
           "an MLP on the policy's own last hidden state of the prompt)"),
        f"- **settings**: `{SETTINGS}` (the run's, resolved); `{META}` (where it came from)",
        "",
        "## Training", "",
        f"- environment: `{config.env}`" + (f", options `{json.dumps(config.env_kwargs)}`" if config.env_kwargs else "")
        + f", prompt `{config.prompt}`",
        f"- algorithm: {config.algorithm.value}; actor {llm.actor.value}; seed {config.seed}",
        f"- decisions trained: {about['decisions']:,} ({about['update']} "
        f"update{'' if about['update'] == 1 else 's'}; checkpoint `{about['checkpoint']}` of "
        f"run `{Path(about['run']).name}`)" if isinstance(about.get("decisions"), int) else
        f"- checkpoint `{about['checkpoint']}` of run `{Path(about['run']).name}`",
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
