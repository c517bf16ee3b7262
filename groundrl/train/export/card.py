"""The model card of an export (``README.md``), with the results of the evaluations of its
checkpoint; every text groundrl did not write is escaped."""

from __future__ import annotations

import html
import importlib.metadata
import json
import re
import warnings
from collections.abc import Sequence
from pathlib import Path

import yaml

from groundrl.agents.config import Actor, PolicyKind
from groundrl.errors import GroundrlError
from groundrl.files import read_json, read_yaml
from groundrl.llm.tiny import TINY_MODELS
from groundrl.runs import is_whole_number, iter_jsonl
from groundrl.train.config import TrainConfig
from groundrl.train.export.layout import CRITIC, META, SETTINGS, ExportError


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
    about = settings.get("about")
    played = about.get("agent") if isinstance(about, dict) else None
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
    sections = [_front_matter(about, config), _introduction(about, config), _what_it_holds(about, config),
                _training(about, config, run_dir), _evaluation(evaluations), _use_it(about), _reproduce_it()]
    return "\n".join(line for section in sections for line in section)


def _front_matter(about: dict, config: TrainConfig) -> list[str]:
    """The YAML block the Hugging Face Hub reads: library, tags, pipeline."""
    front = {"library_name": "peft" if about["kind"] == "adapter" else "transformers",
             "tags": ["groundrl", "reinforcement-learning", "text-games", config.algorithm.value],
             "pipeline_tag": "text-generation"}
    return ["---", yaml.safe_dump(front, sort_keys=False).strip(), "---", ""]


def _introduction(about: dict, config: TrainConfig) -> list[str]:
    """The title and the sentence that says what the model is and what its policy is."""
    llm = config.agent.llm
    policy = ("the softmax over the valid actions of the LLM's log-likelihood of each action given the prompt "
              f"({llm.normalization.value} normalization)" if llm.policy == PolicyKind.score else
              "an action head on the prompt's last hidden state (GLAM's NPAE ablation)")
    return [f"# {_text(config.env.removeprefix('groundrl/'))}: {_text(about['base_model'])} grounded with "
            f"{config.algorithm.value.upper()}", "",
            f"A language model trained by groundrl {_version()} to act in the text "
            f"environment {_code(config.env)}: its policy is {policy}.", ""]


def _what_it_holds(about: dict, config: TrainConfig) -> list[str]:
    """The section "What this folder holds": base model, the policy's weights, critic, settings."""
    llm = config.agent.llm
    gguf = "gguf" in str(about["base_source"]).lower()
    base = (f"{_code(about['base_model'])}, from the GGUF file {_code(about['base_source'])}, dequantized to float32 "
            f"by transformers" if gguf else f"{_code(about['base_model'])}: {_code(about['base_source'])}")
    weights = (f"a LoRA adapter in PEFT's format (r={llm.lora_r}, alpha={llm.lora_alpha}, on "
               f"{_text(', '.join(llm.lora_targets))})" if about["kind"] == "adapter" else
               "the whole model" + (" (the LoRA adapter merged into the base)" if llm.actor == Actor.lora
                                    else " (fully fine-tuned)"))
    critic = "the frozen base model's" if llm.critic.value == "frozen" else "the policy's own"
    return ["## What this folder holds", "",
            f"- **base model**: {base}",
            f"- **the policy's weights**: {weights}",
            f"- **critic**: `{CRITIC}`, the value head ({llm.critic.value} critic: an MLP on {critic} last hidden "
            "state of the prompt)",
            f"- **settings**: `{SETTINGS}` (the run's, resolved); `{META}` (where it came from)", ""]


def _training(about: dict, config: TrainConfig, run_dir: Path) -> list[str]:
    """The section "Training": environment, algorithm, how long, and the checkpoint's training episodes."""
    options = f", options {_code(json.dumps(config.env_kwargs))}" if config.env_kwargs else ""
    checkpoint = f"checkpoint {_code(about['checkpoint'])} of run {_code(Path(about['run']).name)}"
    trained = (f"decisions trained: {about['decisions']:,} ({about['update']} "
               f"update{'' if about['update'] == 1 else 's'}; {checkpoint})"
               if isinstance(about.get("decisions"), int) else checkpoint)
    lines = ["## Training", "",
             f"- environment: {_code(config.env)}{options}, prompt {_code(config.prompt)}",
             f"- algorithm: {config.algorithm.value}; actor {config.agent.llm.actor.value}; seed {config.seed}",
             f"- {trained}", ""]
    last = _metrics_of_update(run_dir, about.get("update"))
    training = [f"| {key} | {last[key]:.3f} |" for key in ("success_rate", "episode_return", "episode_length")
                if isinstance(last.get(key), (int, float))]
    if training:
        lines += [f"The training episodes of update {about['update']}:", "", "| metric | value |", "|---|---|",
                  *training, ""]
    return lines


def _metrics_of_update(run_dir: Path, update) -> dict:
    """The last line of the run's ``metrics.jsonl`` of ``update`` (a run goes on after its last
    checkpoint), read a line at a time; ``{}`` if none."""
    last = {}
    for metrics in iter_jsonl(run_dir / "metrics.jsonl"):
        if metrics.get("update") == update:
            last = metrics
    return last


def _evaluation(evaluations: Sequence[list[dict]]) -> list[str]:
    """The section "Evaluation": one table row per test evaluated, or how to evaluate."""
    table = [f"| {_text(r['test'])} | {r['episodes']} ({'greedy' if r['greedy'] else 'sampled'}) | "
             f"{r['success_rate']:.3f} | [{r['ci_low']:.3f}, {r['ci_high']:.3f}] | {r['mean_return']:.3f} | "
             f"{r['mean_length']:.2f} |" for played in evaluations for r in played]
    if not table:
        return ["## Evaluation", "", "Not evaluated when exported: `groundrl eval THIS_FOLDER --episodes 100`.", ""]
    return ["## Evaluation", "",
            "Success rate with its 95% confidence interval (Wilson), on evaluation episodes whose seeds no "
            "training episode used:", "",
            "| test | episodes | success rate | 95% CI | mean return | mean length |",
            "|---|---|---|---|---|---|", *table, ""]


def _use_it(about: dict) -> list[str]:
    """The section "Use it": with groundrl, and with plain Hugging Face libraries."""
    return ["## Use it", "",
            "With groundrl:", "",
            "```bash",
            "groundrl eval THIS_FOLDER --episodes 100        # evaluate it",
            "groundrl train --init THIS_FOLDER               # a new run that starts from these weights",
            "```", "",
            "With plain Hugging Face libraries:", "",
            *_loading_snippet(about), ""]


def _loading_snippet(about: dict) -> list[str]:
    """The Python code block that loads the export with transformers (and PEFT for an adapter)."""
    adapter = about["kind"] == "adapter"
    auto = "AutoModelForSeq2SeqLM" if about.get("model_class") == "seq2seq" else "AutoModelForCausalLM"
    return ["```python", "from transformers import AutoTokenizer, " + auto,
            *(["from peft import PeftModel"] if adapter else []), "",
            'folder = "path/to/this/folder"',
            *([f"base = {_base_loader(about, auto)}", "model = PeftModel.from_pretrained(base, folder)"]
              if adapter else [f"model = {auto}.from_pretrained(folder)"]),
            "tokenizer = AutoTokenizer.from_pretrained(folder)", "```"]


def _reproduce_it() -> list[str]:
    """The section "Reproduce it": the command that trains the same settings again."""
    return ["## Reproduce it", "", "```bash", f"groundrl train --config {SETTINGS}", "```", ""]
