"""Checkpoints of a training run: everything needed to continue it exactly.

``RUN/checkpoints/update-000010/`` holds

- ``trainable.pt``: the weights that train (LoRA adapters or the whole LLM, and the critic);
- ``optimizer.pt``: optimizers, learning-rate schedulers, random generators, counters;
- ``envs.pkl``: the environments mid-episode and their current observations (when pickle can
  store them; otherwise a resumed run starts new episodes, with a warning at save time);
- ``meta.json``: the format, the counters, and what the weights fit (model, actor, critic, ...).

A run of several processes (``torchrun``) writes one checkpoint, from rank 0: the weights and
optimizers are the same on every rank; what each rank alone knows (its environments, random
streams, episode counters, a DRRN replay memory) is gathered into it, a part per rank. Every rank
reads the checkpoint to resume; resumed with another number of processes, the episodes under way
start over (with a warning).

A checkpoint is written to a temporary folder and renamed into place, so a crash never leaves a
half-written one under a real name; only the ``keep`` most recent are kept. Loading refuses a
corrupt checkpoint or one made for another model or agent, and deletes nothing.
"""

from __future__ import annotations

import json
import pickle
import shutil
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from groundrl.errors import GroundrlError
from groundrl.train import distributed

if TYPE_CHECKING:
    from groundrl.train.trainer import Trainer

FORMAT = 2  # 2: a part per rank; format 1 (one process, groundrl before distributed training) still loads
FILES = ("trainable.pt", "optimizer.pt", "envs.pkl", "meta.json")


class CheckpointError(GroundrlError):
    """A checkpoint that cannot be used (corrupt, incomplete, or for another model or agent)."""


def fingerprint(trainer: Trainer) -> dict:
    """What the saved weights and optimizer states fit: a checkpoint only loads into the same."""
    config = trainer.config
    return {"model": config.model if config.agent.kind == "llm" else None, "agent": asdict(config.agent),
            "env": config.env, "num_envs": config.ppo.num_envs, "phases": config.ppo.phases}


def save(trainer: Trainer, keep: int = 3) -> Path:
    """Write a checkpoint of ``trainer`` (every rank calls this; rank 0 writes)."""
    final = trainer.run_dir / "checkpoints" / f"update-{trainer.state.update:06d}"
    parts = distributed.gather_objects(_rank_part(trainer))
    if trainer.world.is_main:
        _write(trainer, final, parts, keep)
    distributed.barrier()  # no rank goes on before the checkpoint exists
    return final


def _rank_part(trainer: Trainer) -> dict:
    """What this rank alone knows: its environments mid-episode (pickled, or None when pickle cannot
    store them), random streams, episode counters and the trainer's own extra state."""
    try:
        envs = pickle.dumps({"envs": list(trainer.envs.envs), "obs": trainer.next_obs, "info": trainer.next_info})
    except Exception as error:  # an environment of the user's that pickle cannot store
        warnings.warn(f"the environments cannot be saved ({type(error).__name__}: {error}); a run resumed from "
                      "this checkpoint restarts the episodes under way", stacklevel=3)
        envs = None
    seeds = [getattr(env, "episode_seed", None) for env in trainer.envs.envs]
    return {"last_episode_seed": max((s for s in seeds if s is not None), default=None),
            "generator": trainer.generator.get_state(), "torch_rng": torch.get_rng_state(),
            "numpy_rng": np.random.get_state(), "episode_returns": list(trainer.episode_returns),
            "episode_lengths": list(trainer.episode_lengths), "trainer": trainer.checkpoint_state(), "envs": envs}


def _write(trainer: Trainer, final: Path, parts: list[dict], keep: int) -> None:
    temporary = final.parent / f".writing-{final.name}"
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    trainable = {name: p.detach().cpu() for name, p in trainer.agent.named_parameters() if p.requires_grad}
    torch.save(trainable, temporary / "trainable.pt")
    torch.save({
        "optimizers": {name: opt.state_dict() for name, opt in trainer.optimizers.items()},
        "schedulers": {name: s.state_dict() for name, s in trainer.schedulers.items()},
        "action_generator": trainer.action_generator.get_state(),
        "state": asdict(trainer.state),
        "ranks": [{key: value for key, value in part.items() if key not in ("envs", "last_episode_seed")}
                  for part in parts],
    }, temporary / "optimizer.pt")
    (temporary / "envs.pkl").write_bytes(pickle.dumps({"ranks": [part["envs"] for part in parts]}))
    last_seeds = [part["last_episode_seed"] for part in parts if part["last_episode_seed"] is not None]
    meta = {"format": FORMAT, "update": trainer.state.update, "decisions": trainer.state.decisions,
            "world_size": len(parts), "fingerprint": fingerprint(trainer),
            # the reset seeds of every training episode so far lie in this range (evaluation avoids it)
            "training_seeds": [trainer.config.seed * 1000, max(last_seeds)] if last_seeds else None}
    (temporary / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    if final.exists():
        shutil.rmtree(final)
    temporary.rename(final)
    for old in list_checkpoints(trainer.run_dir)[:-keep] if keep > 0 else []:
        shutil.rmtree(old)


def list_checkpoints(run_dir: Path) -> list[Path]:
    """The run's checkpoints, oldest first."""
    folder = Path(run_dir) / "checkpoints"
    return sorted(p for p in folder.glob("update-*") if p.is_dir()) if folder.is_dir() else []


def find(path: str | Path) -> Path:
    """The checkpoint a path names: a checkpoint folder, or a run folder (its latest checkpoint)."""
    path = Path(path)
    if (path / "meta.json").exists() or path.name.startswith("update-"):
        return path
    found = list_checkpoints(path)
    if not path.is_dir():
        raise CheckpointError(f"{path} is neither a run folder nor a checkpoint")
    if not found:
        raise CheckpointError(f"{path} has no checkpoints (a run writes them every checkpoint_every updates)")
    return found[-1]


def load(trainer: Trainer, path: str | Path) -> Path:
    """Restore ``trainer`` from a checkpoint (or a run folder's latest)."""
    checkpoint = find(path)
    others = [p.name for p in list_checkpoints(checkpoint.parent.parent) if p != checkpoint]
    hint = f"; earlier checkpoints: {', '.join(others[-3:])}" if others else ""

    def refuse(reason: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {checkpoint} {reason}; nothing was deleted{hint}")

    missing = [name for name in FILES if not (checkpoint / name).is_file()]
    if missing:
        raise refuse(f"is incomplete (missing {', '.join(missing)})")
    world = trainer.world
    try:
        meta = json.loads((checkpoint / "meta.json").read_text())
        if meta.get("format") not in (1, FORMAT):
            raise refuse(f"has format {meta.get('format')}, this groundrl reads 1 and {FORMAT}: upgrade groundrl")
        trainable = torch.load(checkpoint / "trainable.pt", map_location="cpu", weights_only=True)
        extra = torch.load(checkpoint / "optimizer.pt", map_location="cpu", weights_only=False)
        with open(checkpoint / "envs.pkl", "rb") as f:
            envs = pickle.load(f)
        if meta["format"] == 1:
            extra, envs = _from_format_1(extra, envs)
        same_world = len(extra["ranks"]) == world.size
        own = extra["ranks"][world.rank] if same_world else None
        own_envs = envs["ranks"][world.rank] if same_world else None
        own_envs = pickle.loads(own_envs) if own_envs is not None else None
    except CheckpointError:
        raise
    except Exception as error:  # any failure to read means the files are damaged
        raise refuse(f"is corrupt ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})") from None
    expected = fingerprint(trainer)
    if meta.get("fingerprint") != expected:
        different = sorted(k for k in expected if meta.get("fingerprint", {}).get(k) != expected[k])
        raise refuse(f"was made for another {', '.join(different)} than this run's")

    if not _restore_weights(trainer.agent, trainable):
        raise refuse("holds other weights than this agent trains")
    for name, opt in trainer.optimizers.items():
        opt.load_state_dict(extra["optimizers"][name])
    for name, scheduler in trainer.schedulers.items():
        scheduler.load_state_dict(extra["schedulers"][name])
    trainer.action_generator.set_state(extra["action_generator"])
    for key, value in extra["state"].items():
        setattr(trainer.state, key, value)
    if own is not None:
        trainer.generator.set_state(own["generator"])
        torch.set_rng_state(own["torch_rng"])
        np.random.set_state(own["numpy_rng"])
        trainer.episode_returns = list(own["episode_returns"])
        trainer.episode_lengths = list(own["episode_lengths"])
        trainer.load_checkpoint_state(own.get("trainer", {}))
    elif world.is_main:
        warnings.warn(f"checkpoint {checkpoint.name} was written by {len(extra['ranks'])} processes and is resumed by "
                      f"{world.size}: the episodes under way start over, and each process's own random streams "
                      "(and replay memory) start afresh", stacklevel=2)
    if own_envs is not None:
        trainer.envs.close()
        trainer.envs = SyncVectorEnv([lambda env=env: env for env in own_envs["envs"]],
                                     autoreset_mode=AutoresetMode.SAME_STEP)
        trainer.next_obs, trainer.next_info = own_envs["obs"], own_envs["info"]
    else:  # saved without its environments: new episodes, on seeds the run has not used
        total = trainer.config.ppo.num_envs
        seeds = [trainer.config.seed * 1000 + trainer.state.update * total + i + 10**6 for i in trainer.env_indices]
        trainer.next_obs, trainer.next_info = trainer.envs.reset(seed=seeds)
        trainer.episode_returns = [0.0] * trainer.num_envs
        trainer.episode_lengths = [0] * trainer.num_envs
    return checkpoint


def _from_format_1(extra: dict, envs: dict) -> tuple[dict, dict]:
    """A one-process checkpoint of groundrl before format 2, in format 2's layout."""
    own = {key: extra[key] for key in ("generator", "torch_rng", "numpy_rng", "episode_returns", "episode_lengths")}
    own["trainer"] = extra.get("trainer", {})
    envs_part = pickle.dumps(envs) if envs.get("envs") is not None else None
    return {**extra, "action_generator": extra["generator"], "ranks": [own]}, {"ranks": [envs_part]}


def load_agent(path: str | Path, device: str = "auto", dtype: str | None = None):
    """The trained agent of a run folder (its latest checkpoint) or of a checkpoint, with the
    run's configuration: ``(agent, config, checkpoint)``."""
    from groundrl.agents.factory import build_agent
    from groundrl.train.config import load_run_config

    checkpoint = find(path)
    run_dir = checkpoint.parent.parent
    config = load_run_config(run_dir)
    missing = [name for name in ("trainable.pt", "meta.json") if not (checkpoint / name).is_file()]
    if missing:
        raise CheckpointError(f"checkpoint {checkpoint} is incomplete (missing {', '.join(missing)}); nothing was deleted")
    agent = build_agent(config, device=device, dtype=dtype)
    try:
        trainable = torch.load(checkpoint / "trainable.pt", map_location=agent.device, weights_only=True)
    except Exception as error:
        raise CheckpointError(f"checkpoint {checkpoint} is corrupt ({type(error).__name__}); nothing was deleted") from None
    if not _restore_weights(agent, trainable):
        raise CheckpointError(f"checkpoint {checkpoint} holds other weights than its run's agent trains")
    agent.eval()
    return agent, config, checkpoint


def _restore_weights(agent, trainable: dict) -> bool:
    """Copy the saved trainable weights into ``agent``; False (and nothing copied) when they are not
    exactly the weights this agent trains."""
    parameters = dict(agent.named_parameters())
    if set(trainable) != {name for name, p in parameters.items() if p.requires_grad}:
        return False
    with torch.no_grad():
        for name, tensor in trainable.items():
            parameters[name].copy_(tensor)
    return True
