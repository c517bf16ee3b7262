"""A training run's settings: one dataclass tree, presets for GLAM and TWOSOME, overrides from YAML
files and ``key=value`` pairs (OmegaConf), validated before anything loads.

>>> config = load_config("twosome", overrides=["ppo.policy_lr=1e-4", "agent.critic=shared"])
>>> config.ppo.policy_lr, config.agent.critic, config.ppo.num_envs
(0.0001, 'shared', 4)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from groundrl.agents.config import AgentConfig
from groundrl.errors import InvalidArgumentError


@dataclass
class PPOConfig:
    """PPO's hyperparameters, named as in the papers (and CleanRL)."""

    num_envs: int = 4
    num_steps: int = 32  # decisions per environment per update: a rollout is num_envs * num_steps
    total_decisions: int = 50_000
    gamma: float = 0.95  # per decision, or per primitive step when the env reports info["macro_steps"]
    gae_lambda: float = 0.95
    reward_scale: float = 1.0
    update_epochs: int = 1
    # "separate" (TWOSOME): a value phase, then a policy phase, each with its own optimizer and lr;
    # "joint" (GLAM): one loss pg + vf_coef * vf - ent_coef * entropy, one optimizer.
    phases: str = "separate"
    policy_lr: float = 1e-6
    value_lr: float = 5e-5
    lr: float = 1e-6  # the joint optimizer's
    adam_eps: float = 1e-5
    lr_decay: bool = True  # linearly to 0 over total_decisions
    minibatch_size: int = 32  # decisions per policy (or joint) optimizer step
    value_minibatch_size: int = 32
    micro_batch_size: int = 4  # decisions per forward/backward; gradients accumulate up to a minibatch
    clip_coef: float = 0.2
    value_clip_coef: Optional[float] = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: Optional[float] = 0.02  # stop the epoch's policy updates when approx-KL exceeds it
    normalize_advantages: bool = True  # per minibatch
    kl_coef: float = 0.0  # penalty on KL(pi || pi_ref) to the untrained policy (LoRA only); logged always

    def __post_init__(self):
        if self.phases not in ("separate", "joint"):
            raise InvalidArgumentError(f"ppo.phases must be 'separate' or 'joint', not {self.phases!r}")
        for name in ("num_envs", "num_steps", "total_decisions", "update_epochs", "minibatch_size",
                     "value_minibatch_size", "micro_batch_size"):
            if getattr(self, name) < 1:
                raise InvalidArgumentError(f"ppo.{name} must be at least 1, not {getattr(self, name)}")
        if self.minibatch_size % self.micro_batch_size or self.value_minibatch_size % self.micro_batch_size:
            raise InvalidArgumentError("ppo.micro_batch_size must divide ppo.minibatch_size and ppo.value_minibatch_size")
        if not 0 <= self.gamma <= 1 or not 0 <= self.gae_lambda <= 1:
            raise InvalidArgumentError("ppo.gamma and ppo.gae_lambda must be between 0 and 1")


@dataclass
class DRRNConfig:
    """Q-learning of a DRRN agent (GLAM's settings: lr 1e-4, gamma 0.9, batch 64, gradient norm 5).

    The rollout shape and the budget are the ``ppo`` section's ``num_envs``, ``num_steps`` and
    ``total_decisions``: each update plays ``num_envs * num_steps`` decisions into the replay memory,
    then takes minibatch steps until ``replay_ratio`` transitions were drawn per new decision (GLAM
    took one step per update, and its DRRN barely learned; 8 learns FollowInstruction in 4k decisions).
    """

    lr: float = 1e-4
    gamma: float = 0.9
    batch_size: int = 64
    replay_size: int = 100_000
    replay_ratio: float = 8.0
    max_grad_norm: float = 5.0
    temperature: float = 1.0  # of the Boltzmann exploration: actions ~ softmax(Q / temperature)
    learning_starts: int = 64  # decisions in memory before the first gradient step

    def __post_init__(self):
        for name in ("batch_size", "replay_size", "learning_starts"):
            if getattr(self, name) < 1:
                raise InvalidArgumentError(f"drrn.{name} must be at least 1, not {getattr(self, name)}")
        if self.replay_ratio <= 0:
            raise InvalidArgumentError(f"drrn.replay_ratio must be positive, not {self.replay_ratio}")
        if self.temperature <= 0:
            raise InvalidArgumentError(f"drrn.temperature must be positive, not {self.temperature}")
        if not 0 <= self.gamma <= 1:
            raise InvalidArgumentError("drrn.gamma must be between 0 and 1")


@dataclass
class DistributedConfig:
    """Training over several processes (``torchrun``, see :mod:`groundrl.train.distributed`); a
    single process ignores it."""

    # Seconds a rank waits for the others (to join, or in a collective) before it stops with an
    # error. A rank that dies is noticed at once; this bounds a hung one, so it must exceed the
    # longest legitimate wait: one rank's rollout finishing later than another's, rank 0 writing a
    # checkpoint.
    timeout: float = 300.0
    backend: str = "auto"  # nccl on GPUs, gloo on CPUs
    cpu_threads: Optional[int] = None  # per CPU rank; default: the machine's cores split evenly among its ranks

    def __post_init__(self):
        if self.timeout <= 0:
            raise InvalidArgumentError(f"distributed.timeout must be positive seconds, not {self.timeout}")
        if self.backend not in ("auto", "gloo", "nccl"):
            raise InvalidArgumentError(f"distributed.backend must be auto, gloo or nccl, not {self.backend!r}")
        if self.cpu_threads is not None and self.cpu_threads < 1:
            raise InvalidArgumentError(f"distributed.cpu_threads must be at least 1, not {self.cpu_threads}")


@dataclass
class TrainConfig:
    """Everything a run needs; ``config.yaml`` in the run folder is this, resolved."""

    env: str = "groundrl/FoodPreparation-v0"
    env_kwargs: Dict[str, Any] = field(default_factory=dict)
    prompt: Optional[str] = "auto"  # see groundrl.make_env
    prompt_window: int = 3
    model: Optional[str] = None  # the embedded default model
    dtype: str = "float32"
    device: str = "auto"
    seed: int = 1
    agent: AgentConfig = field(default_factory=AgentConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    drrn: DRRNConfig = field(default_factory=DRRNConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    runs_dir: str = "runs"
    checkpoint_every: int = 10  # updates
    # from every trajectories_every-th update on, the next episode of the first environment goes
    # into trajectories.jsonl and TensorBoard's text tab (0: none; PPO agents); `groundrl replay RUN`
    # shows them
    trajectories_every: int = 10
    keep_checkpoints: int = 3
    progress: bool = True


_GLAM_PPO = {"num_envs": 32, "num_steps": 40, "total_decisions": 1_500_000, "gamma": 0.99, "gae_lambda": 0.99,
             "reward_scale": 20.0, "update_epochs": 4, "phases": "joint", "lr": 1e-6, "lr_decay": False,
             "minibatch_size": 64, "micro_batch_size": 16, "target_kl": None, "normalize_advantages": False}

PRESETS: dict[str, dict] = {
    # TWOSOME, VirtualHome settings (LLaMA-7B): 4 envs x 32 steps, value phase 4 x 32 at 5e-5, policy
    # phase minibatches of 4 with 8-step accumulation at 1e-6, approx-KL stop at 0.02.
    "twosome": {},
    # TWOSOME, Overcooked settings: lower learning rates, gamma 0.99 per primitive step (SMDP).
    "twosome-overcooked": {"ppo": {"policy_lr": 5e-7, "value_lr": 1e-5, "gamma": 0.99, "total_decisions": 500_000}},
    # GLAM (Flan-T5 780M): whole model fine-tuned with a value head on the shared trunk, one joint
    # loss; 32 envs x 40 steps, 4 epochs of minibatches of 64, reward x20, no advantage normalization.
    "glam": {
        "env": "groundrl/BabyAI-MixedTrainLocal-v0",
        "agent": {"actor": "full", "critic": "shared", "normalization": "sum"},
        "ppo": _GLAM_PPO,
    },
    # The baselines. PPO from scratch on the symbolic observation (CleanRL's defaults for a small
    # network: 2.5e-4, 4 epochs; one optimizer, advantages normalized, masked to the valid actions).
    "symbolic-ppo": {
        "agent": {"kind": "symbolic"},
        "ppo": {"num_envs": 16, "num_steps": 32, "total_decisions": 200_000, "gamma": 0.99, "phases": "joint",
                "lr": 2.5e-4, "update_epochs": 4, "minibatch_size": 128, "value_minibatch_size": 128, "micro_batch_size": 128,
                "target_kl": None, "normalize_advantages": True},
    },
    # GLAM's DRRN: Q-learning from replay, Boltzmann exploration, GLAM's reward x20.
    "drrn": {
        "env": "groundrl/BabyAI-MixedTrainLocal-v0",
        "agent": {"kind": "drrn"},
        "ppo": {"num_envs": 16, "num_steps": 32, "total_decisions": 200_000, "reward_scale": 20.0},
    },
    # GLAM's NPAE: the model's architecture with random weights (pretrained input embeddings kept),
    # an action head instead of scoring, trained as GLAM trains its LLM.
    "npae": {
        "env": "groundrl/BabyAI-MixedTrainLocal-v0",
        "agent": {"actor": "full", "critic": "shared", "policy": "head", "weights": "random",
                  "pretrained_embeddings": True},
        "ppo": _GLAM_PPO,
    },
}
"""Named starting points; a config file and ``key=value`` overrides go on top."""


def load_config(preset: str = "twosome", files: Sequence[str | Path] = (), overrides: Sequence[str] = ()) -> TrainConfig:
    """The preset, then each YAML file, then each ``key=value`` override (dotted keys:
    ``ppo.policy_lr=1e-4``), merged and checked against :class:`TrainConfig`.

    Raises:
        InvalidArgumentError: an unknown preset, key or value of the wrong type, a missing file.
    """
    if preset not in PRESETS:
        raise InvalidArgumentError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    return _merge(PRESETS[preset], files, overrides)


def load_run_config(run_dir: str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """A run's own ``config.yaml``, with ``key=value`` overrides on top."""
    return _merge({}, [Path(run_dir) / "config.yaml"], overrides)


def _merge(preset: dict, files: Sequence[str | Path], overrides: Sequence[str]) -> TrainConfig:
    try:
        config = OmegaConf.merge(OmegaConf.structured(TrainConfig), preset)
        for path in files:
            if not Path(path).is_file():
                raise InvalidArgumentError(f"config file {path} does not exist")
            config = OmegaConf.merge(config, OmegaConf.load(path))
        config = OmegaConf.merge(config, OmegaConf.from_dotlist(list(overrides)))
        return OmegaConf.to_object(config)
    except OmegaConfBaseException as error:
        raise InvalidArgumentError(f"bad configuration: {str(error).splitlines()[0]}") from None


def to_yaml(config: TrainConfig) -> str:
    return OmegaConf.to_yaml(OmegaConf.structured(config))


__all__ = ["DRRNConfig", "DistributedConfig", "PPOConfig", "PRESETS", "TrainConfig", "load_config", "load_run_config", "to_yaml"]
