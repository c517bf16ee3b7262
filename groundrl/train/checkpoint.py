"""Checkpoints of a training run: files, format, atomic writes, and what a checkpoint fits.

``RUN/checkpoints/update-000010/`` holds

- ``trainable.pt``: the weights that train (LoRA adapters or the whole LLM, and the critic);
- ``state.pt``: the rest of :meth:`Trainer.state_dict` (optimizers, learning-rate schedules,
  counters, random generators, and a part per process: its episodes under way as seeds and
  actions, a DRRN replay memory);
- ``meta.json``: the format, the counters, the run's settings and what the weights fit.

Loading executes nothing: both ``.pt`` files hold tensors and plain data only and are read with
``torch.load(weights_only=True)``, and episodes under way are restored by replaying their actions
from their reset seeds, not unpickled. A checkpoint is written to a temporary folder and renamed
into place, so a crash never leaves a half-written one under a real name; only the ``keep`` most
recent are kept. Loading refuses a corrupt checkpoint, or one whose weights would not fit the
settings, in one line, and deletes nothing.
"""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from omegaconf import OmegaConf

from groundrl.agents.config import AgentKind
from groundrl.agents.factory import build_agent
from groundrl.envs import make_env
from groundrl.errors import GroundrlError
from groundrl.files import DataFileError, read_json
from groundrl.train import distributed
from groundrl.train.config import TrainConfig, load_run_config
from groundrl.train.distributed import World

if TYPE_CHECKING:
    from groundrl.train.trainer import Trainer

FORMAT = 3  # 3: tensors and plain data only; 1 and 2 (pickles) are refused for resuming, their weights still evaluate
FILES = ("trainable.pt", "state.pt", "meta.json")
# The settings that decide the weights' and optimizers' shapes: a checkpoint only continues under the same
# (a key that came later is, in a checkpoint made before it, its value then: ADDED). Of an LLM agent's, those
# of its heads and of its adapters are also what an export's weights must fit (groundrl.train.export).
LLM_HEAD_SHAPES = ("agent.kind", "agent.llm.policy", "agent.llm.critic", "agent.llm.critic_hidden",
                   "agent.llm.head_hidden")
LLM_ADAPTER_SHAPES = ("agent.llm.actor", "agent.llm.lora_r", "agent.llm.lora_targets", "agent.llm.train_layers")
SHAPES = {
    AgentKind.llm: ("model", "env", "algorithm", "ppo.phases", "agent.llm.weights", "agent.llm.pretrained_embeddings",
                    *LLM_HEAD_SHAPES, *LLM_ADAPTER_SHAPES),
    AgentKind.symbolic: ("env", "agent.kind", "algorithm", "ppo.phases", "agent.symbolic.network",
                         "agent.symbolic.hidden", "agent.symbolic.word_buckets"),
    AgentKind.drrn: ("agent.kind", "agent.drrn.embedding_dim", "agent.drrn.hidden_dim", "agent.drrn.word_buckets"),
}

ADDED = {"agent.llm.train_layers": "all", "algorithm": "ppo"}


class CheckpointError(GroundrlError):
    """A checkpoint that cannot be used (corrupt, incomplete, or for other settings)."""


def settings(config: TrainConfig) -> dict[str, object]:
    """The settings as flat ``section.key`` -> plain value."""
    def flatten(node, prefix=""):
        for key, value in node.items():
            if isinstance(value, dict):
                yield from flatten(value, f"{prefix}{key}.")
            else:
                yield f"{prefix}{key}", value
    return dict(flatten(OmegaConf.to_container(OmegaConf.structured(config), enum_to_str=True)))


def fingerprint(config: TrainConfig) -> dict[str, object]:
    """What the saved weights and optimizer states fit."""
    flat = settings(config)
    return {key: flat[key] for key in SHAPES[config.agent.kind]}


# -- writing ----------------------------------------------------------------------------------

def checkpoint_dir(run_dir: Path, update: int) -> Path:
    """Where the checkpoint after update ``update`` of a run lives (whether or not it exists)."""
    return Path(run_dir) / "checkpoints" / f"update-{update:06d}"


def save(trainer: Trainer, keep: int = 3) -> Path:
    """Write a checkpoint of ``trainer`` (every rank calls this; rank 0 writes)."""
    final = checkpoint_dir(trainer.run_dir, trainer.state.update)
    state = trainer.state_dict()
    ranks = distributed.gather_objects(state.pop("rank"))
    if trainer.world.is_main:
        seeds = [s["seed"] for part in ranks for s in part["collector"]["slots"] if s["seed"] is not None]
        meta = {"format": FORMAT, "update": trainer.state.update, "decisions": trainer.state.decisions,
                "world_size": len(ranks), "fingerprint": fingerprint(trainer.config),
                "settings": settings(trainer.config),
                # every training episode's reset seed so far lies in this range (evaluation avoids it)
                "training_seeds": [trainer.config.seed * 1000, max(seeds)] if seeds else None}
        _write(final, state.pop("weights"), {**state, "ranks": ranks}, meta, keep)
    distributed.barrier()  # no rank goes on before the checkpoint exists
    return final


def _write(final: Path, weights: dict, state: dict, meta: dict, keep: int) -> None:
    temporary = final.parent / f".writing-{final.name}"
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    torch.save(weights, temporary / "trainable.pt")
    torch.save(state, temporary / "state.pt")
    (temporary / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    if final.exists():
        shutil.rmtree(final)
    temporary.rename(final)
    for old in list_checkpoints(final.parent.parent)[:-keep] if keep > 0 else []:
        shutil.rmtree(old)


def global_rng_state() -> dict:
    """torch's and numpy's global random streams, as tensors and numbers."""
    _, keys, position, has_gauss, cached_gaussian = np.random.get_state()
    return {"torch_rng": torch.get_rng_state(),
            "numpy_rng": {"keys": torch.from_numpy(keys.astype(np.int64)), "position": position,
                          "has_gauss": has_gauss, "cached_gaussian": cached_gaussian}}


def set_global_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch_rng"])
    numpy = state["numpy_rng"]
    np.random.set_state(("MT19937", numpy["keys"].numpy().astype(np.uint32), numpy["position"], numpy["has_gauss"],
                         numpy["cached_gaussian"]))


# -- finding and reading ----------------------------------------------------------------------

def list_checkpoints(run_dir: Path) -> list[Path]:
    """The run's checkpoints, oldest first."""
    folder = Path(run_dir) / "checkpoints"
    return sorted(p for p in folder.glob("update-*") if p.is_dir()) if folder.is_dir() else []


def find(path: str | Path) -> Path:
    """The checkpoint a path names: a checkpoint folder, or a run folder (its latest checkpoint)."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path} does not exist: name a training run folder or one of its checkpoints")
    if (path / "meta.json").exists() or path.name.startswith("update-"):
        return path
    if not path.is_dir():
        raise CheckpointError(f"{path} is neither a run folder nor a checkpoint")
    found = list_checkpoints(path)
    if not found:
        raise CheckpointError(f"{path} has no checkpoints (a run writes them every checkpoint_every updates)")
    return found[-1]


def resume_hint(run_dir: Path) -> str:
    saved = list_checkpoints(run_dir)
    if not saved:
        return "; no checkpoint was written yet"
    return f"; resume from {saved[-1].name} with `groundrl train --resume {run_dir}` under torchrun"


def _refusal(checkpoint: Path):
    others = [p.name for p in list_checkpoints(checkpoint.parent.parent) if p != checkpoint]
    hint = f"; earlier checkpoints: {', '.join(others[-3:])}" if others else ""
    return lambda reason: CheckpointError(f"checkpoint {checkpoint} {reason}; nothing was deleted{hint}")


def read_meta(checkpoint: Path) -> dict:
    """A checkpoint's ``meta.json``, checked for what every reader needs."""
    refuse = _refusal(checkpoint)
    if not (checkpoint / "meta.json").is_file():
        raise refuse("is incomplete (missing meta.json)")
    try:
        meta = read_json(checkpoint / "meta.json", "")
    except DataFileError as error:
        raise refuse(f"is corrupt (meta.json {error.problem})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("format"), int):
        raise refuse("is corrupt (meta.json has no format)")
    if meta["format"] > FORMAT:
        raise refuse(f"has format {meta['format']}, this groundrl reads up to {FORMAT}: upgrade groundrl")
    return meta


def check_resumable(path: str | Path, overrides: Sequence[str] = (),
                    values: Mapping[str, object] | None = None) -> tuple[Path, TrainConfig]:
    """The checkpoint ``path`` names and the settings to continue it with, checked before anything
    loads: the format, the files, and that the overrides keep the weights' shapes (others are
    allowed, with a warning naming them)."""
    checkpoint = find(path)
    refuse = _refusal(checkpoint)
    meta = read_meta(checkpoint)
    if meta["format"] < FORMAT:
        raise refuse(f"has format {meta['format']}, which stored pickles that could run code when loaded: it "
                     "cannot be resumed safely (its weights still evaluate: `groundrl eval RUN`)")
    missing = [name for name in FILES if not (checkpoint / name).is_file()]
    if missing:
        raise refuse(f"is incomplete (missing {', '.join(missing)})")
    config = load_run_config(checkpoint.parent.parent, overrides, values)
    saved = meta.get("fingerprint")
    if not isinstance(saved, dict):
        raise refuse("is corrupt (meta.json has no fingerprint)")
    expected = fingerprint(config)
    saved = {**ADDED, **saved}
    different = [key for key in expected if saved.get(key) != expected[key]]
    if different:
        shown = ", ".join(f"{key}={saved.get(key)!r} (now {expected[key]!r})" for key in different)
        raise refuse(f"was made with other weights' shapes: {shown}")
    changed = [key for key, value in settings(config).items() if key in meta.get("settings", {})
               and meta["settings"][key] != value]
    if changed:
        warnings.warn(f"resuming with changed settings: {', '.join(changed)}", stacklevel=2)
    return checkpoint, config


def load(checkpoint: Path, world: World) -> dict:
    """A checkpoint's :meth:`Trainer.state_dict`, with ``rank`` this process's own part (None when
    another number of processes wrote it)."""
    refuse = _refusal(checkpoint)
    meta = read_meta(checkpoint)
    try:
        weights = torch.load(checkpoint / "trainable.pt", map_location="cpu", weights_only=True)
        state = torch.load(checkpoint / "state.pt", map_location="cpu", weights_only=True)
        ranks = state.pop("ranks")
        same_world = len(ranks) == world.size
    except Exception as error:  # noqa: BLE001 - any failure to read means the files are damaged or foreign
        raise refuse(f"is corrupt ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})") \
            from None
    if not same_world and world.is_main:
        warnings.warn(f"checkpoint {checkpoint.name} was written by {meta.get('world_size')} processes and is resumed "
                      f"by {world.size}: the episodes under way start over, and each process's own random streams "
                      "(and replay memory) start afresh", stacklevel=2)
    return {**state, "weights": weights, "rank": ranks[world.rank] if same_world else None}


def restore_weights(agent, weights: dict) -> None:
    """Copy the saved trainable weights into ``agent``.

    Raises:
        CheckpointError: they are not exactly the weights this agent trains, or not all numbers.
    """
    parameters = dict(agent.named_parameters())
    trained = {name for name, p in parameters.items() if p.requires_grad}
    if set(weights) != trained or any(weights[n].shape != parameters[n].shape for n in weights):
        raise CheckpointError("the checkpoint holds other weights than this agent trains; nothing was deleted")
    if bad := non_finite(weights):
        raise CheckpointError(f"the checkpoint holds weights that are NaN or infinite ({bad}); nothing was deleted")
    with torch.no_grad():
        for name, tensor in weights.items():
            parameters[name].copy_(tensor)


def non_finite(tensors: dict) -> str:
    """The names of the tensors of ``tensors`` that hold NaN or infinity, as a phrase ("" if none)."""
    bad = [name for name, tensor in tensors.items()
           if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())]
    return ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")


def load_agent(path: str | Path, device: str = "auto", dtype: str | None = None, precision: str | None = None):
    """The trained agent of a run folder (its latest checkpoint) or of a checkpoint, with the
    run's configuration: ``(agent, config, checkpoint)``. Any format: only the weights are read.
    ``dtype`` and ``precision`` default to the run's."""
    checkpoint = find(path)
    read_meta(checkpoint)
    config = load_run_config(checkpoint.parent.parent)
    if not (checkpoint / "trainable.pt").is_file():
        raise CheckpointError(f"checkpoint {checkpoint} is incomplete (missing trainable.pt); nothing was deleted")
    env = make_env(config.env, **config.env_options)
    agent = build_agent(config.agent, env, model=config.model, dtype=dtype or config.dtype, device=device,
                        seed=config.seed, precision=precision or config.precision)
    try:
        weights = torch.load(checkpoint / "trainable.pt", map_location=agent.device, weights_only=True)
    except Exception as error:  # noqa: BLE001
        raise CheckpointError(f"checkpoint {checkpoint} is corrupt ({type(error).__name__}); nothing was deleted") \
            from None
    try:
        restore_weights(agent, weights)
    except CheckpointError as error:
        raise CheckpointError(f"checkpoint {checkpoint} {str(error).removeprefix('the checkpoint ')}") from None
    agent.eval()
    return agent, config, checkpoint
