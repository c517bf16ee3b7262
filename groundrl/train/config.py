"""A training run's settings: one dataclass tree by section, presets for GLAM and TWOSOME, overrides
from YAML files and ``key=value`` pairs (OmegaConf), validated before anything loads.

>>> config = load_config("twosome", overrides=["ppo.policy_lr=1e-4", "agent.llm.critic=shared"])
>>> config.ppo.policy_lr, config.agent.llm.critic.value, config.rollout.num_envs
(0.0001, 'shared', 4)

Keys of groundrl 0.1 (``ppo.num_envs``, ``agent.actor``, ``ppo.lr``, ...) are still accepted, with
a one-line deprecation warning naming the new key (:data:`RENAMED`).
"""

from __future__ import annotations

import importlib.util
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from groundrl.agents.config import AgentConfig, AgentKind
from groundrl.agents.validators import at_least_one, coerce_choices, non_negative, positive
from groundrl.envs import PROMPTS, make_env
from groundrl.errors import InvalidArgumentError
from groundrl.files import read_yaml
from groundrl.llm.loading import resolve_device, resolve_dtype
from groundrl.llm.precision import check_precision
from groundrl.train.loggers import wandb_login_problem


class Phases(str, Enum):
    separate = "separate"  # TWOSOME: a value phase, then a policy phase, each with its own optimizer
    joint = "joint"  # GLAM: one loss pg + vf_coef * vf - ent_coef * entropy, one optimizer


class AlgorithmKind(str, Enum):
    ppo = "ppo"  # PPO with a learned critic (GAE); DRRN agents learn by Q-learning whatever this says
    grpo = "grpo"  # critic-free: each episode's return against its group's (Shao et al. 2024)
    gigpo = "gigpo"  # GRPO + a step-level advantage within states the group's episodes share (Feng et al. 2025)


class Backend(str, Enum):
    auto = "auto"  # nccl on GPUs, gloo on CPUs
    gloo = "gloo"
    nccl = "nccl"


@dataclass
class RolloutConfig:
    """What every algorithm plays per update, and for how long."""

    num_envs: int = 4  # environments played in parallel (the total over the processes)
    num_steps: int = 32  # decisions per environment per update: an update plays num_envs * num_steps
    total_decisions: int = 50_000  # the training budget
    reward_scale: float = 1.0  # rewards are multiplied by it before learning (GLAM: 20); logs show them unscaled
    # Group methods (algorithm=grpo, gigpo): environments come in groups of group_size that start each
    # episode together from the same reset seed, and an update plays whole episodes of every group
    # until each group has played group_size x num_steps decisions (so an update plays at least
    # num_envs x num_steps); the run stops once it has played total_decisions. 1 for PPO.
    group_size: int = 1

    def __post_init__(self):
        at_least_one("rollout", self, "num_envs", "num_steps", "total_decisions", "group_size")
        if self.num_envs % self.group_size:
            raise InvalidArgumentError(f"rollout.group_size={self.group_size} does not divide rollout.num_envs="
                                       f"{self.num_envs}: the environments come in whole groups")

    @property
    def decisions_per_update(self) -> int:
        return self.num_envs * self.num_steps


@dataclass
class PPOConfig:
    """PPO's hyperparameters, named as in the papers (and CleanRL)."""

    gamma: float = 0.95  # per decision, or per primitive step when the env reports info["macro_steps"]
    gae_lambda: float = 0.95
    update_epochs: int = 1
    phases: Phases = Phases.separate
    # The actor (adapters or LLM, action head) learns at policy_lr, the critic at value_lr, in both
    # phase designs (joint: one optimizer with those two parameter groups). The defaults move LoRA
    # adapters of a small model (SmolLM2-135M) in a few thousand decisions; TWOSOME's 1e-6 and 5e-5
    # (for LLaMA-7B, the twosome preset) do not move it at all.
    policy_lr: float = 3e-4
    value_lr: float = 1e-3
    adam_eps: float = 1e-5
    # linearly to 0 over rollout.total_decisions (the papers'); off by default: over a short budget
    # the late updates hardly move, where the first successes have just been found
    lr_decay: bool = False
    minibatch_size: int = 32  # decisions per policy (or joint) optimizer step (the total over the processes)
    value_minibatch_size: int = 32  # decisions per value-phase optimizer step (separate phases)
    micro_batch_size: int = 4  # decisions (distinct ones, with deduplicate) per forward/backward; gradients accumulate
    # Compute each distinct (prompt, valid actions) once: across a rollout (the policy is fixed
    # then) and in each micro-batch, which gathers a minibatch's equal decisions. Same gradients.
    deduplicate: bool = True
    clip_coef: float = 0.2
    value_clip_coef: float | None = 0.2  # None: the value loss is not clipped
    ent_coef: float = 0.01
    ent_coef_end: float | None = None  # the entropy coefficient anneals to it over explore.anneal; None: constant
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float | None = 0.02  # stop the epoch's policy updates when approx-KL exceeds it (separate)
    normalize_advantages: bool = True  # per minibatch
    # Normalized advantages are divided by max(std, this). A rollout that saw no reward has advantages
    # of value noise only (std ~1e-3 on BabyAI, against ~0.1 where an episode succeeded); normalized to
    # unit size they make a full step in a random direction, which sharpens the policy all the same
    # (docs/results.md, "Updates without a reward"). 0: plain normalization.
    advantage_std_floor: float = 0.0
    kl_coef: float = 0.0  # penalty on KL(pi || pi_ref) to the untrained policy (LoRA only); logged always

    def __post_init__(self):
        coerce_choices("ppo", self)
        at_least_one("ppo", self, "update_epochs", "minibatch_size", "value_minibatch_size", "micro_batch_size")
        positive("ppo", self, "policy_lr", "value_lr", "adam_eps", "clip_coef", "max_grad_norm")
        positive("ppo", self, "value_clip_coef", "target_kl", optional=True)
        non_negative("ppo", self, "ent_coef", "vf_coef", "kl_coef", "advantage_std_floor")
        non_negative("ppo", self, "ent_coef_end", optional=True)
        if self.minibatch_size % self.micro_batch_size or self.value_minibatch_size % self.micro_batch_size:
            raise InvalidArgumentError("ppo.micro_batch_size must divide ppo.minibatch_size and "
                                       "ppo.value_minibatch_size")
        if not 0 <= self.gamma <= 1 or not 0 <= self.gae_lambda <= 1:
            raise InvalidArgumentError("ppo.gamma and ppo.gae_lambda must be between 0 and 1")


@dataclass
class ExplorationConfig:
    """How PPO's rollouts explore beyond sampling the learned policy (:mod:`groundrl.train.exploration`).

    Each ``X_end`` anneals ``X`` linearly to it over the first ``anneal`` of the training budget
    (None: ``X`` stays); ``ppo.ent_coef_end`` anneals the entropy coefficient the same way. The
    learned policy is what is evaluated and saved; acting with another one is corrected for in
    PPO's loss (importance weights, truncated at ``max_importance_weight``).
    """

    # behaviour = (1 - epsilon) * softmax(logits / temperature) + epsilon * uniform over the valid actions
    epsilon: float = 0.0
    epsilon_end: float | None = None
    temperature: float = 1.0
    temperature_end: float | None = None
    # + novelty / sqrt(n) to the reward of a decision that reaches an observation seen n times in the
    # run (this one included; its text, hashed), in the environment's reward units (rollout.reward_scale
    # scales both). Logged apart (novelty_bonus): the episode returns reported stay the environment's.
    novelty: float = 0.1
    novelty_end: float | None = 0.0
    anneal: float = 0.5  # the fraction of rollout.total_decisions over which every schedule reaches its end
    # pi_old / mu is truncated at it (V-trace's rho-bar): a behaviour much flatter than the policy
    # (temperature < 1) cannot blow a decision's weight up
    max_importance_weight: float = 2.0

    def __post_init__(self):
        for name in ("epsilon", "epsilon_end"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 1:
                raise InvalidArgumentError(f"explore.{name} must be between 0 and 1, not {value}")
        positive("explore", self, "temperature", "anneal", "max_importance_weight")
        positive("explore", self, "temperature_end", optional=True)
        non_negative("explore", self, "novelty")
        non_negative("explore", self, "novelty_end", optional=True)
        if self.anneal > 1:
            raise InvalidArgumentError("explore.anneal is a fraction of the training budget: "
                                       f"at most 1, not {self.anneal}")

    @property
    def active(self) -> bool:
        """Whether anything explores: a behaviour other than the policy, or a novelty bonus."""
        return (self.epsilon, self.epsilon_end or 0, self.temperature, self.temperature_end or 1, self.novelty,
                self.novelty_end or 0) != (0, 0, 1, 1, 0, 0)


@dataclass
class GroupConfig:
    """The advantages of the group methods (:mod:`groundrl.train.group_advantages`); their update is PPO's
    clipped policy loss with the ``ppo`` section's learning rate, epochs, minibatches, ``clip_coef``,
    ``ent_coef``, ``kl_coef`` and ``target_kl`` (``ppo.gamma`` discounts GiGPO's step returns), and
    no critic."""

    # divide by the group's standard deviation (GRPO, GiGPO); false: only centre on the group's mean
    # (Dr. GRPO; a group of near-equal returns then gets small advantages, not unit ones)
    std_scaling: bool = True
    omega: float = 1.0  # GiGPO: advantage = episode-level + omega x step-level
    eps: float = 1e-6  # added to the standard deviation
    # what makes two decisions' states the same for GiGPO's step groups: the value of this key of
    # the environment's info; None: the observation text (info["observation"] where the environment
    # gives its prompt as the observation)
    state_key: str | None = None

    def __post_init__(self):
        non_negative("group", self, "omega")
        positive("group", self, "eps")


@dataclass
class DRRNConfig:
    """Q-learning of a DRRN agent (GLAM's settings: lr 1e-4, gamma 0.9, batch 64, gradient norm 5).

    Each update plays the rollout into the replay memory, then takes minibatch steps until
    ``replay_ratio`` transitions were drawn per new decision (GLAM took one step per update, and its
    DRRN barely learned; 8 learns FollowInstruction in 4k decisions).
    """

    lr: float = 1e-4
    gamma: float = 0.9
    batch_size: int = 64  # the total over the processes
    replay_size: int = 100_000
    replay_ratio: float = 8.0
    max_grad_norm: float = 5.0
    learning_starts: int = 64  # decisions in memory before the first gradient step

    def __post_init__(self):
        at_least_one("drrn", self, "batch_size", "replay_size", "learning_starts")
        positive("drrn", self, "lr", "replay_ratio", "max_grad_norm")
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
    backend: Backend = Backend.auto
    cpu_threads: int | None = None  # per CPU rank; default: the machine's cores split evenly among its ranks

    def __post_init__(self):
        coerce_choices("distributed", self)
        positive("distributed", self, "timeout")
        if self.cpu_threads is not None and self.cpu_threads < 1:
            raise InvalidArgumentError(f"distributed.cpu_threads must be at least 1, not {self.cpu_threads}")


LOG_BACKENDS = ("tensorboard", "jsonl", "wandb")


@dataclass
class LoggingConfig:
    """Where each update's metrics go (step: the decisions played so far), besides the checkpoints;
    :mod:`groundrl.train.loggers` opens them."""

    # tensorboard: RUN/tensorboard/ (scalars, recorded episodes as text); jsonl: RUN/metrics.jsonl and
    # RUN/trajectories.jsonl, which `groundrl plot`, `replay`, `export` and the benchmarks read; wandb:
    # Weights & Biases (pip install 'groundrl[wandb]'), the same metrics, the settings, episodes as tables
    backends: list[str] = field(default_factory=lambda: ["tensorboard", "jsonl"])
    wandb_project: str = "groundrl"
    wandb_entity: str | None = None  # a W&B team or user; None: the logged-in user's default
    # online, offline (kept in RUN/wandb/; `wandb sync` uploads it later) or None: wandb's own choice
    # (the WANDB_MODE variable, else online)
    wandb_mode: str | None = None

    def __post_init__(self):
        unknown = [b for b in self.backends if b not in LOG_BACKENDS]
        if unknown or len(set(self.backends)) != len(self.backends):
            raise InvalidArgumentError(f"logging.backends must be a list of distinct {', '.join(LOG_BACKENDS)}, not "
                                       f"{list(self.backends)!r}")
        if self.wandb_mode not in (None, "online", "offline"):
            raise InvalidArgumentError(f"logging.wandb_mode must be online, offline or null, not {self.wandb_mode!r}")
        refused = set("/\\#?%:") & set(self.wandb_project)  # W&B refuses these in a project name
        if "wandb" in self.backends and (refused or not self.wandb_project.strip() or len(self.wandb_project) > 128):
            shown = self.wandb_project if len(self.wandb_project) <= 128 else self.wandb_project[:60] + "..."
            raise InvalidArgumentError(f"logging.wandb_project must be 1 to 128 characters, none of / \\ # ? % :, "
                                       f"not {shown!r}")


@dataclass
class TrainConfig:
    """Everything a run needs; ``config.yaml`` in the run folder is this, resolved."""

    env: str = "groundrl/FoodPreparation-v0"
    env_kwargs: dict[str, Any] = field(default_factory=dict)  # the environment's own options
    # auto (the environment's own) | glam | actions (the environment's own, the valid actions listed
    # first: it raises a small model's prior) | None (the raw observation), see groundrl.make_env
    prompt: str | None = "actions"
    prompt_window: int = 3  # observations shown by GLAM's prompt template
    model: str | None = None  # name, folder, .gguf file or hub id; None: the embedded default model
    dtype: str = "float32"  # of the model's weights: float32, bfloat16, float16 or auto
    device: str = "auto"  # cpu, cuda, cuda:N or auto
    # The model's passes: fp32, or bf16-mixed (bf16 matmuls, float32 weights, optimizer and losses;
    # fast only with native bf16: CUDA, AVX-512 BF16 or AMX CPUs), or auto (bf16-mixed exactly there).
    precision: str = "fp32"
    seed: int = 1  # training episodes are seeded from it (see groundrl.runs); 0 to 2**32 - 1
    # how an agent with a policy (agent.kind llm or symbolic) learns: ppo, grpo or gigpo
    algorithm: AlgorithmKind = AlgorithmKind.ppo
    agent: AgentConfig = field(default_factory=AgentConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)  # agent.kind llm or symbolic
    explore: ExplorationConfig = field(default_factory=ExplorationConfig)  # PPO's
    group: GroupConfig = field(default_factory=GroupConfig)  # algorithm grpo or gigpo
    drrn: DRRNConfig = field(default_factory=DRRNConfig)  # agent.kind drrn
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    # an export folder (`groundrl export`) whose weights the run starts from; `groundrl train --init DIR`
    # sets it, and model=DIR for an export that holds a whole model
    init: str | None = None
    runs_dir: str = "runs"  # where `groundrl train` creates the run folder
    checkpoint_every: int = 10  # updates
    keep_checkpoints: int = 3  # the most recent ones; 0 keeps all
    # from every trajectories_every-th update on, the next episode of the first environment goes
    # into trajectories.jsonl and TensorBoard's text tab (0: none); `groundrl replay RUN` shows them
    trajectories_every: int = 10
    progress: bool = True  # a progress bar

    def __post_init__(self):
        coerce_choices("", self)
        check_precision(self.precision, self.dtype)
        # numpy's global generator (np.random.seed) takes seeds below 2**32; the episodes' reset seeds
        # derived from it (seed * 1000 + environment + episode x environments, + 10**6 on a restart)
        # then stay below 2**43, far inside what every generator takes (2**63) and exact as JSON floats
        if not 0 <= self.seed < 2**32:
            shown = self.seed if self.seed.bit_length() <= 256 else f"a number of {self.seed.bit_length()} bits"
            raise InvalidArgumentError(f"seed must be a whole number from 0 to 2**32 - 1, not {shown}")
        if self.prompt not in PROMPTS:
            raise InvalidArgumentError(f"prompt must be auto, glam, actions or null, not {self.prompt!r}")
        at_least_one("", self, "prompt_window", "checkpoint_every")
        if not self.runs_dir.strip():  # '' would write run folders into whatever folder groundrl runs in
            raise InvalidArgumentError("runs_dir must name a folder (e.g. runs; . for the current one), not "
                                       f"{self.runs_dir!r}")
        if self.keep_checkpoints < 0 or self.trajectories_every < 0:
            raise InvalidArgumentError("keep_checkpoints and trajectories_every must be 0 or more")
        if self.agent.kind == AgentKind.drrn and self.explore.active:
            raise InvalidArgumentError("explore.* settings are PPO's: a DRRN agent explores by its Boltzmann "
                                       "temperature, agent.drrn.temperature (set explore.novelty=0)")
        self._check_group_method()
        rollout = self.rollout.decisions_per_update
        for name, size in self.batch_sizes.items():
            if self.agent.kind != AgentKind.drrn and size > rollout:  # (DRRN's batches come from its replay memory)
                raise InvalidArgumentError(f"{name}={size} is larger than a rollout of rollout.num_envs x "
                                           f"rollout.num_steps = {rollout} decisions: make it at most {rollout}")

    def _check_group_method(self) -> None:
        method = self.algorithm.value
        if self.algorithm == AlgorithmKind.ppo:
            if self.rollout.group_size > 1:
                raise InvalidArgumentError(f"rollout.group_size={self.rollout.group_size} is for the group methods: "
                                           "set algorithm=grpo or gigpo (or rollout.group_size=1)")
            return
        if self.agent.kind == AgentKind.drrn:
            raise InvalidArgumentError(f"algorithm={method} trains a policy, and agent.kind=drrn has none (it learns "
                                       f"Q-values): use agent.kind=llm or symbolic, or algorithm=ppo")
        if self.rollout.group_size < 2:
            raise InvalidArgumentError(f"algorithm={method} compares the episodes of a group: set rollout.group_size "
                                       f"to 2 or more (e.g. 4; --preset {method} does)")

    @property
    def batch_sizes(self) -> dict[str, int]:
        """The batch sizes this run's update uses, by setting (totals over the processes): DRRN's
        batch, or the policy's minibatch and, with a critic (PPO), the value phase's."""
        if self.agent.kind == AgentKind.drrn:
            return {"drrn.batch_size": self.drrn.batch_size}
        return {"ppo.minibatch_size": self.ppo.minibatch_size,
                **({} if self.group_method else {"ppo.value_minibatch_size": self.ppo.value_minibatch_size})}

    @property
    def prompt_options(self) -> dict[str, Any]:
        """``make_env``'s options for the prompt this run's agent reads, in any environment."""
        return {"prompt": self.prompt, "window": self.prompt_window}

    @property
    def env_options(self) -> dict[str, Any]:
        """``make_env``'s options for this run's environment: the prompt's, then ``env_kwargs``."""
        return {**self.prompt_options, **self.env_kwargs}

    @property
    def group_method(self) -> bool:
        """Whether the update is a critic-free group method (GRPO, GiGPO)."""
        return self.algorithm in (AlgorithmKind.grpo, AlgorithmKind.gigpo)

    @property
    def num_updates(self) -> int:
        """PPO's updates; a group method's update plays at least this many decisions, so it stops at
        ``total_decisions`` within at most this many."""
        return max(1, self.rollout.total_decisions // self.rollout.decisions_per_update)

    def budget_played(self, update: int, decisions: int) -> bool:
        """Whether a run at ``update`` that has played ``decisions`` is done: PPO's updates, or a group
        method's decisions (its updates play whole episodes, so how many decisions one holds varies).

        >>> config = load_config("gigpo", overrides=["rollout.total_decisions=512"])
        >>> config.budget_played(update=2, decisions=520), load_config("default").budget_played(2, 520)
        (True, False)
        """
        if self.group_method:
            return decisions >= self.rollout.total_decisions
        return update >= self.num_updates

    def budget_share(self, update: int, decisions: int) -> float:
        """The share of the training budget a run at ``update`` that has played ``decisions`` has done:
        the clock of every schedule (learning rates, exploration, ``ent_coef``), in PPO's updates or a
        group method's decisions (:meth:`budget_played`).

        >>> load_config("default", overrides=["rollout.total_decisions=512"]).budget_share(update=1, decisions=128)
        0.25
        """
        if self.group_method:
            return min(1.0, decisions / self.rollout.total_decisions)
        return update / self.num_updates


_GLAM_PPO = {"gamma": 0.99, "gae_lambda": 0.99, "update_epochs": 4, "phases": "joint", "policy_lr": 1e-6,
             "value_lr": 1e-6, "lr_decay": False, "minibatch_size": 64, "micro_batch_size": 16, "target_kl": None,
             "normalize_advantages": False}
_GLAM_ROLLOUT = {"num_envs": 32, "num_steps": 40, "total_decisions": 1_500_000, "reward_scale": 20.0}

# what the papers did not have: the environment's own prompt, no exploration but sampling the policy
_AS_PUBLISHED = {"prompt": "auto", "explore": {"novelty": 0.0, "novelty_end": None}}

PRESETS: dict[str, dict] = {
    # groundrl's: TWOSOME's design (LoRA actor, critic on the frozen model, word normalization, 4 envs
    # x 32 steps, a value and a policy phase, approx-KL stop at 0.02) with what makes the embedded
    # 135M model learn from its weak prior: learning rates that move it (constant), the valid actions
    # listed in the prompt, a novelty bonus (benchmarks/exploration.py)
    "default": {},
    # TWOSOME, VirtualHome settings (LLaMA-7B), as published: value phase 4 x 32 at 5e-5, policy phase
    # minibatches of 4 with 8-step accumulation at 1e-6 (decayed linearly), the tasks' own prompts.
    "twosome": {**_AS_PUBLISHED, "ppo": {"policy_lr": 1e-6, "value_lr": 5e-5, "lr_decay": True}},
    # TWOSOME, Overcooked settings: lower learning rates, gamma 0.99 per primitive step (SMDP).
    "twosome-overcooked": {**_AS_PUBLISHED,
                           "ppo": {"policy_lr": 5e-7, "value_lr": 1e-5, "gamma": 0.99, "lr_decay": True},
                           "rollout": {"total_decisions": 500_000}},
    # GLAM (Flan-T5 780M): whole model fine-tuned with a value head on the shared trunk, one joint
    # loss; 32 envs x 40 steps, 4 epochs of minibatches of 64, reward x20, no advantage normalization.
    "glam": {
        **_AS_PUBLISHED,
        "env": "groundrl/BabyAI-MixedTrainLocal-v0",
        "agent": {"llm": {"actor": "full", "critic": "shared", "normalization": "sum"}},
        "rollout": _GLAM_ROLLOUT, "ppo": _GLAM_PPO,
    },
    # The critic-free group methods on groundrl's defaults (LoRA actor, word normalization, the
    # learning rates, the valid actions in the prompt): groups of 4 environments from one seed; the
    # advantages need no normalizing again, and the KL to the untrained policy (free with LoRA: the
    # adapters off) keeps the policy near it, as GRPO's and GiGPO's KL terms do (verl-agent: 0.01).
    "grpo": {"algorithm": "grpo", "rollout": {"group_size": 4}, "explore": {"novelty": 0.0, "novelty_end": None},
             "ppo": {"normalize_advantages": False, "kl_coef": 0.01}},
    "gigpo": {"algorithm": "gigpo", "rollout": {"group_size": 4}, "explore": {"novelty": 0.0, "novelty_end": None},
              "ppo": {"normalize_advantages": False, "kl_coef": 0.01}},
    # The baselines. PPO from scratch on the symbolic observation (CleanRL's defaults for a small
    # network: 2.5e-4, 4 epochs; one optimizer, advantages normalized, masked to the valid actions).
    "symbolic-ppo": {
        **_AS_PUBLISHED,
        "agent": {"kind": "symbolic"},
        "rollout": {"num_envs": 16, "num_steps": 32, "total_decisions": 200_000},
        "ppo": {"gamma": 0.99, "phases": "joint", "policy_lr": 2.5e-4, "value_lr": 2.5e-4, "lr_decay": True,
                "update_epochs": 4, "minibatch_size": 128, "value_minibatch_size": 128, "micro_batch_size": 128,
                "target_kl": None, "normalize_advantages": True},
    },
    # GLAM's DRRN: Q-learning from replay, Boltzmann exploration, GLAM's reward x20.
    "drrn": {
        **_AS_PUBLISHED,
        "env": "groundrl/BabyAI-MixedTrainLocal-v0",
        "agent": {"kind": "drrn"},
        "rollout": {"num_envs": 16, "num_steps": 32, "total_decisions": 200_000, "reward_scale": 20.0},
    },
    # GLAM's NPAE: the model's architecture with random weights (pretrained input embeddings kept),
    # an action head instead of scoring, trained as GLAM trains its LLM.
    "npae": {
        **_AS_PUBLISHED,
        "env": "groundrl/BabyAI-MixedTrainLocal-v0",
        "agent": {"llm": {"actor": "full", "critic": "shared", "policy": "head", "weights": "random",
                          "pretrained_embeddings": True}},
        "rollout": _GLAM_ROLLOUT, "ppo": _GLAM_PPO,
    },
}
"""Named starting points; a config file and ``key=value`` overrides go on top."""

RENAMED = {
    **{f"ppo.{key}": f"rollout.{key}" for key in ("num_envs", "num_steps", "total_decisions", "reward_scale")},
    **{f"agent.{key}": f"agent.llm.{key}" for key in (
        "normalization", "separator", "policy", "weights", "pretrained_embeddings", "actor", "lora_r", "lora_alpha",
        "lora_dropout", "lora_targets", "critic", "critic_hidden", "head_hidden", "gradient_checkpointing")},
    "agent.network": "agent.symbolic.network", "agent.hidden": "agent.symbolic.hidden",
    "agent.embedding_dim": "agent.drrn.embedding_dim", "agent.hidden_dim": "agent.drrn.hidden_dim",
    # the hashed-word vocabulary was shared by the symbolic and DRRN agents
    "agent.word_buckets": ("agent.symbolic.word_buckets", "agent.drrn.word_buckets"),
    "drrn.temperature": "agent.drrn.temperature",
}
"""Keys of groundrl 0.1 -> the keys that replace them. And ``ppo.lr``, the joint optimizer's rate
then, sets both ``ppo.policy_lr`` and ``ppo.value_lr`` where the phases are joint (it was unused
in separate phases, and is dropped there)."""


class DeprecatedSettingWarning(UserWarning):
    """A setting given under a key of an earlier groundrl (it still works)."""


def load_config(preset: str = "default", files: Sequence[str | Path] = (), overrides: Sequence[str] = (),
                values: Mapping[str, Any] | None = None, exported: Mapping[str, Any] | None = None) -> TrainConfig:
    """The preset, then ``exported`` (an export's settings, for ``train --init``), then each YAML
    file, then each ``key=value`` override (dotted keys: ``ppo.policy_lr=1e-4``, values read as
    YAML), then ``values`` (dotted key -> the value itself: a path stays the text it is), merged and
    checked against :class:`TrainConfig`.

    Settings are data: ``${...}`` in a value is text, not an interpolation, wherever it comes from
    (a file from elsewhere must not copy environment variables into a run).

    Raises:
        InvalidArgumentError: an unknown preset, key or value of the wrong type, a missing or
            malformed file.
    """
    if preset not in PRESETS:
        raise InvalidArgumentError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    return _merge([_read_mapping(PRESETS[preset], f"preset {preset}"),
                   *([_read_mapping(exported, "the export's settings")] if exported is not None else []),
                   *map(_read_file, files), _read_overrides(overrides), _read_values(values)])


def load_run_config(run_dir: str | Path, overrides: Sequence[str] = (),
                    values: Mapping[str, Any] | None = None) -> TrainConfig:
    """A run's own ``config.yaml``, with ``key=value`` overrides and ``values`` on top."""
    return load_config_file(Path(run_dir) / "config.yaml", overrides, values)


def load_config_file(path: str | Path, overrides: Sequence[str] = (),
                     values: Mapping[str, Any] | None = None) -> TrainConfig:
    """The settings of one YAML file that holds them all (a run's ``config.yaml``), with
    ``key=value`` overrides and ``values`` on top."""
    return _merge([_read_file(path), _read_overrides(overrides), _read_values(values)])


def config_of(settings: Mapping[str, Any], source: str) -> TrainConfig:
    """The settings of a mapping that holds them all (read elsewhere: an export's), checked."""
    return _merge([_read_mapping(settings, source)])


def _read_file(path: str | Path) -> dict:
    settings = read_yaml(path, "fix it, or give another file")
    return _read_mapping(settings if settings is not None else {}, f"config file {path}")


def _read_overrides(overrides: Sequence[str]) -> dict:
    return _read_mapping(key_values(overrides, "ppo.policy_lr=1e-4"), "the command line")


def _read_values(values: Mapping[str, Any] | None) -> dict:
    nested: dict = {}
    for key, value in (values or {}).items():
        *parents, last = key.split(".")
        node = nested
        for parent in parents:
            node = node.setdefault(parent, {})
        node[last] = value
    return _read_mapping(nested, "the command line")


def key_values(items: Sequence[str], example: str) -> dict:
    """``KEY=VALUE`` items as a nested dict: dotted keys nest, values read as YAML
    (``params.numLocations=3`` -> ``{"params": {"numLocations": 3}}``).

    Raises:
        InvalidArgumentError: an item that is not KEY=VALUE (``example`` shows one), does not parse,
            or whose value YAML would cut at a `` #`` (a comment): the rest would be lost silently.
    """
    for item in items:
        if "=" not in item:
            raise InvalidArgumentError(f"setting {item!r} is not KEY=VALUE (e.g. {example})")
        key, value = item.split("=", 1)
        if re.search(r"(^|\s)#", value) and "#" not in str(_yaml_value(value)):
            raise InvalidArgumentError(f"setting {item[:200]!r}: YAML reads ' #' as the start of a comment and would "
                                       f"drop the rest; quote the value: {key}='\"{value[:200]}\"'")
    try:
        return OmegaConf.to_container(OmegaConf.from_dotlist(list(items)))
    except OmegaConfBaseException as error:
        raise InvalidArgumentError(f"bad setting: {str(error).splitlines()[0]}") from None
    except ValueError as error:  # a number of more digits than Python reads (4300)
        raise InvalidArgumentError(f"bad setting: {str(error).split(';')[0]}") from None


def _yaml_value(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text  # OmegaConf says what is wrong with it


def _read_mapping(settings: Any, source: str) -> dict:
    """``settings`` as a nested dict in today's keys (renamed keys moved, with a warning), every
    ``${`` in its text escaped: OmegaConf would resolve it as an interpolation."""
    if not isinstance(settings, Mapping):
        raise InvalidArgumentError(f"{source} must be a mapping of settings (key: value), not a "
                                   f"{type(settings).__name__}")
    settings = _as_text(settings)
    for old, new in RENAMED.items():
        section, key = old.split(".")
        if not isinstance(settings.get(section), dict) or key not in settings[section]:
            continue
        value = settings[section].pop(key)
        targets = (new,) if isinstance(new, str) else new
        warnings.warn(f"{old} is deprecated: use {' and '.join(targets)} (in {source})", DeprecatedSettingWarning,
                      stacklevel=4)
        for target in targets:
            node = settings
            *parents, last = target.split(".")
            for parent in parents:
                node = node.setdefault(parent, {})
            node.setdefault(last, value)  # a new key given alongside wins
    return settings


def _as_text(value: Any) -> Any:
    """A copy of ``value`` in which OmegaConf reads ``${...}`` as the text it is (``\\${``; the
    backslashes before it doubled, as its grammar wants)."""
    if isinstance(value, str):
        return re.sub(r"(\\*)\$\{", lambda match: match.group(1) * 2 + "\\${", value)
    if isinstance(value, Mapping):
        return {key: _as_text(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_text(item) for item in value]
    return value


def _merge(sources: Sequence[dict]) -> TrainConfig:
    try:
        config: DictConfig = OmegaConf.structured(TrainConfig)
        for settings in sources:
            config = OmegaConf.merge(config, _joint_lr(settings, config.ppo.phases))
        return OmegaConf.to_object(config)
    except OmegaConfBaseException as error:
        key, first_line = getattr(error, "full_key", None), str(error).splitlines()[0]
        where = f"{key}: " if key and key not in first_line else ""
        raise InvalidArgumentError(f"bad configuration: {where}{first_line}") from None


def _joint_lr(settings: dict, phases_so_far: Phases) -> dict:
    """``ppo.lr`` of groundrl 0.1 in today's keys."""
    ppo = settings.get("ppo")
    if not isinstance(ppo, dict) or "lr" not in ppo:
        return settings
    lr = ppo.pop("lr")
    if str(ppo.get("phases", phases_so_far.value)) == Phases.joint.value:
        ppo["policy_lr"] = ppo["value_lr"] = lr
        warnings.warn("ppo.lr is deprecated: use ppo.policy_lr and ppo.value_lr (the joint optimizer's actor and "
                      "critic groups)", DeprecatedSettingWarning, stacklevel=4)
    return settings


def check_runnable(config: TrainConfig) -> None:
    """What the settings name exists: the environment (with its options) and the device and
    dtype, and W&B's login where it logs online (checked before a run folder is made or a model loads).

    Raises:
        GroundrlError: one line saying which and how to fix it.
    """
    try:
        make_env(config.env, **config.env_options).close()
    except TypeError as error:  # an option of the wrong kind
        raise InvalidArgumentError(
            f"env_kwargs: {config.env} takes {str(error).split(' was raised from')[0]}") from None
    except InvalidArgumentError as error:  # an option it does not take, or a bad value
        raise InvalidArgumentError(f"env_kwargs: {error}") from None
    resolve_dtype(config.dtype, resolve_device(config.device))
    if "wandb" in config.logging.backends:
        if importlib.util.find_spec("wandb") is None:
            raise InvalidArgumentError("logging.backends has wandb, which is not installed: pip install "
                                       "'groundrl[wandb]' (or drop wandb from logging.backends)")
        problem = wandb_login_problem(config.logging.wandb_mode)  # no login: said before a run folder exists
        if problem:
            raise InvalidArgumentError(problem)


def check_split(config: TrainConfig, processes: int) -> None:
    """The totals of ``config`` that are shared out over the processes must be multiples of their
    number (environments, minibatch sizes).

    Raises:
        InvalidArgumentError: one of them is not.
    """
    for name, value in {"rollout.num_envs": config.rollout.num_envs, **config.batch_sizes}.items():
        if value % processes:
            raise InvalidArgumentError(f"{name}={value} does not split over {processes} processes: make it a "
                                       f"multiple of {processes} (it is the total over the processes)")
    groups = config.rollout.num_envs // config.rollout.group_size
    if config.group_method and groups % processes:
        raise InvalidArgumentError(f"the {groups} groups of rollout.group_size={config.rollout.group_size} do not "
                                   f"split over {processes} processes (a group plays in one): make "
                                   f"rollout.num_envs / rollout.group_size a multiple of {processes}")


def to_yaml(config: TrainConfig) -> str:
    return OmegaConf.to_yaml(OmegaConf.structured(config))


__all__ = ["DRRNConfig", "DistributedConfig", "ExplorationConfig", "PPOConfig", "PRESETS", "Phases", "RENAMED",
           "RolloutConfig", "TrainConfig", "DeprecatedSettingWarning", "check_runnable", "check_split", "key_values",
           "load_config", "load_run_config", "to_yaml"]
