"""Writing an export (:func:`export`): a run's checkpoint as a new folder, written whole or not at all."""

from __future__ import annotations

import errno
import glob
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml
from safetensors.torch import save_file

from groundrl.agents.config import Actor, AgentKind
from groundrl.runs import nearest_existing
from groundrl.train.checkpoint import find, load_agent, read_meta
from groundrl.train.config import TrainConfig, load_config_file, to_yaml
from groundrl.train.export.card import evaluations_beside, model_card, read_evaluation
from groundrl.train.export.layout import ACTION_HEAD, CRITIC, FORMAT, META, NOT_CARRIED, SETTINGS, ExportError


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
    _check_exportable(out, run_dir, checkpoint)
    if evaluations is None:
        results = evaluations_beside(run_dir, checkpoint)
    else:
        results = [read_evaluation(Path(folder), run_dir, checkpoint, option="--evaluation") for folder in evaluations]
    # fp32: the export writes the weights as trained, none cast for bf16 passes (none run here)
    agent, config, checkpoint = load_agent(checkpoint, device="cpu", precision="fp32")
    lora = config.agent.llm.actor == Actor.lora
    about = _about(agent, config, meta, run_dir, checkpoint, kind="adapter" if lora and not merge else "model")
    _publish(out, lambda staging: _write_folder(staging, agent, config, about, run_dir, results, lora=lora))
    return out


def _check_exportable(out: Path, run_dir: Path, checkpoint: Path) -> None:
    """``out`` is not inside the run's checkpoints, and the run trained an LLM agent."""
    if out.absolute().is_relative_to((run_dir / "checkpoints").absolute()):
        raise ExportError(f"--out {out} is inside the run's checkpoints folder, where it would pass for a checkpoint: "
                          "choose a folder outside it (nothing was written)")
    kind = load_config_file(run_dir / "config.yaml").agent.kind.value
    if kind != AgentKind.llm.value:
        raise ExportError(f"{run_dir} trained a {kind} agent: only LLM agents export to a Hugging Face folder (its "
                          f"weights are in {checkpoint / 'trainable.pt'})")


def _about(agent, config: TrainConfig, meta: dict, run_dir: Path, checkpoint: Path, kind: str) -> dict:
    """What the export is and where it came from (its ``groundrl.json``)."""
    # the run's name, not its path: an export is shared, and where the run lay is nobody else's business
    return {"format": FORMAT, "kind": kind, "base_model": agent.llm.name, "base_source": agent.llm.source,
            "run": run_dir.name, "checkpoint": checkpoint.name, "update": meta.get("update"),
            "decisions": meta.get("decisions"), "training_seeds": meta.get("training_seeds"),
            "model_class": agent.llm.kind, "env": config.env, "algorithm": config.algorithm.value}


def _publish(out: Path, write: Callable[[Path], None]) -> None:
    """Have ``write`` fill a hidden folder beside ``out``, then rename it into place: on any failure
    the hidden folder is removed and ``out`` is left as it was."""
    staging = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        _remove_abandoned(out)
        staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f"{_staging_prefix(out)}{os.getpid()}-"))
        write(staging)
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


def _write_folder(folder: Path, agent, config: TrainConfig, about: dict, run_dir: Path, results: list[list[dict]],
                  *, lora: bool) -> None:
    """Write what an export holds into ``folder``: weights, tokenizer, heads, settings, ``groundrl.json``, card."""
    if about["kind"] == "adapter":
        _save_adapter(agent, folder)
    else:
        model = agent.model.merge_and_unload() if lora else agent.model
        model.save_pretrained(folder)
    agent.llm.tokenizer.save_pretrained(folder)
    _save_heads(agent, folder)
    (folder / SETTINGS).write_text(config_for_export(config))
    (folder / META).write_text(json.dumps(about, indent=2) + "\n")
    (folder / "README.md").write_text(model_card(about, config, run_dir, results))


def _save_adapter(agent, folder: Path) -> None:
    """Save the LoRA adapter in PEFT's format, naming its base model (a model built from a config has no path)."""
    agent.model.save_pretrained(folder)
    adapter_config = json.loads((folder / "adapter_config.json").read_text())
    if not adapter_config.get("base_model_name_or_path"):
        adapter_config["base_model_name_or_path"] = agent.llm.name
        (folder / "adapter_config.json").write_text(json.dumps(adapter_config, indent=2) + "\n")


def _check_out(out: Path) -> None:
    """``out`` can become a new folder: one line, before anything loads, when it cannot."""
    if out.is_symlink():
        raise ExportError(f"--out {out} is a symbolic link: give the path of a new folder (nothing was written)")
    if out.exists() and not out.is_dir() or out.is_dir() and any(out.iterdir()):
        raise ExportError(f"--out {out} already exists and is not empty: choose a new folder (nothing was written)")
    existing = nearest_existing(out.parent)
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
        pass
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

    own = contiguous(agent.critic_layers, "critic_layers") if agent.critic_layers is not None else {}
    save_file({**contiguous(agent.value_head, "value_head"), **own}, str(folder / CRITIC))
    if agent.action_head is not None:
        save_file(contiguous(agent.action_head, "action_head"), str(folder / ACTION_HEAD))
