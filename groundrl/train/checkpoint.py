"""Checkpoints of a training run: everything needed to continue it exactly.

``RUN/checkpoints/update-000010/`` holds

- ``trainable.pt``: the weights that train (LoRA adapters or the whole LLM, and the critic);
- ``optimizer.pt``: optimizers, learning-rate schedulers, random generators, counters;
- ``envs.pkl``: the environments mid-episode and their current observations (when pickle can
  store them; otherwise a resumed run starts new episodes, with a warning at save time);
- ``meta.json``: the format, the counters, and what the weights fit (model, actor, critic, ...).

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

if TYPE_CHECKING:
    from groundrl.train.trainer import Trainer

FORMAT = 1
FILES = ("trainable.pt", "optimizer.pt", "envs.pkl", "meta.json")


class CheckpointError(GroundrlError):
    """A checkpoint that cannot be used (corrupt, incomplete, or for another model or agent)."""


def fingerprint(trainer: Trainer) -> dict:
    """What the saved weights and optimizer states fit: a checkpoint only loads into the same."""
    config = trainer.config
    return {"model": config.model if config.agent.kind == "llm" else None, "agent": asdict(config.agent),
            "env": config.env, "num_envs": config.ppo.num_envs, "phases": config.ppo.phases}


def save(trainer: Trainer, keep: int = 3) -> Path:
    folder = trainer.run_dir / "checkpoints"
    final = folder / f"update-{trainer.state.update:06d}"
    temporary = folder / f".writing-{final.name}"
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    trainable = {name: p.detach().cpu() for name, p in trainer.agent.named_parameters() if p.requires_grad}
    torch.save(trainable, temporary / "trainable.pt")
    torch.save({
        "optimizers": {name: opt.state_dict() for name, opt in trainer.optimizers.items()},
        "schedulers": {name: s.state_dict() for name, s in trainer.schedulers.items()},
        "generator": trainer.generator.get_state(),
        "torch_rng": torch.get_rng_state(),
        "numpy_rng": np.random.get_state(),
        "state": asdict(trainer.state),
        "episode_returns": list(trainer.episode_returns),
        "episode_lengths": list(trainer.episode_lengths),
        "trainer": trainer.checkpoint_state(),
    }, temporary / "optimizer.pt")
    try:
        envs = pickle.dumps({"envs": list(trainer.envs.envs), "obs": trainer.next_obs, "info": trainer.next_info})
    except Exception as error:  # an environment of the user's that pickle cannot store
        warnings.warn(f"the environments cannot be saved ({type(error).__name__}: {error}); a run resumed from "
                      "this checkpoint restarts the episodes under way", stacklevel=2)
        envs = pickle.dumps({"envs": None})
    (temporary / "envs.pkl").write_bytes(envs)
    meta = {"format": FORMAT, "update": trainer.state.update, "decisions": trainer.state.decisions,
            "fingerprint": fingerprint(trainer)}
    (temporary / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    if final.exists():
        shutil.rmtree(final)
    temporary.rename(final)
    for old in list_checkpoints(trainer.run_dir)[:-keep] if keep > 0 else []:
        shutil.rmtree(old)
    return final


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
    try:
        meta = json.loads((checkpoint / "meta.json").read_text())
        trainable = torch.load(checkpoint / "trainable.pt", map_location="cpu", weights_only=True)
        extra = torch.load(checkpoint / "optimizer.pt", map_location="cpu", weights_only=False)
        with open(checkpoint / "envs.pkl", "rb") as f:
            envs = pickle.load(f)
    except Exception as error:  # any failure to read means the files are damaged
        raise refuse(f"is corrupt ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})") from None
    if meta.get("format") != FORMAT:
        raise refuse(f"has format {meta.get('format')}, this groundrl reads {FORMAT}")
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
    trainer.generator.set_state(extra["generator"])
    torch.set_rng_state(extra["torch_rng"])
    np.random.set_state(extra["numpy_rng"])
    for key, value in extra["state"].items():
        setattr(trainer.state, key, value)
    trainer.episode_returns = list(extra["episode_returns"])
    trainer.episode_lengths = list(extra["episode_lengths"])
    trainer.load_checkpoint_state(extra.get("trainer", {}))
    if envs["envs"] is not None:
        trainer.envs.close()
        trainer.envs = SyncVectorEnv([lambda env=env: env for env in envs["envs"]], autoreset_mode=AutoresetMode.SAME_STEP)
        trainer.next_obs, trainer.next_info = envs["obs"], envs["info"]
    else:  # saved without its environments: new episodes, on seeds the run has not used
        seeds = [trainer.config.seed * 1000 + trainer.state.update * trainer.config.ppo.num_envs + i
                 for i in range(trainer.config.ppo.num_envs)]
        trainer.next_obs, trainer.next_info = trainer.envs.reset(seed=[s + 10**6 for s in seeds])
        trainer.episode_returns = [0.0] * trainer.config.ppo.num_envs
        trainer.episode_lengths = [0] * trainer.config.ppo.num_envs
    return checkpoint


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
