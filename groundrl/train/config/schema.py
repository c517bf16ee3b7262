"""The schema of a training run's settings: :class:`TrainConfig`, the whole tree (its sections in
:mod:`groundrl.train.config.sections`, the agent's in :mod:`groundrl.agents.config`). Every field is
documented by the string under it (the "every setting" page and ``groundrl config KEY`` show them);
the settings that depend on one another are checked here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from groundrl.agents.config import AgentConfig, AgentKind, Critic
from groundrl.agents.validators import at_least_one, coerce_choices, non_negative
from groundrl.envs import PROMPTS
from groundrl.errors import InvalidArgumentError
from groundrl.llm.precision import check_precision
from groundrl.train.config.sections import (
    AlgorithmKind,
    DistributedConfig,
    DRRNConfig,
    ExplorationConfig,
    GroupConfig,
    LoggingConfig,
    PPOConfig,
    RolloutConfig,
    SelfImitationConfig,
)


@dataclass
class TrainConfig:
    """Everything a run needs; ``config.yaml`` in the run folder is this, resolved."""

    env: str = "groundrl/FoodPreparation-v0"
    """The environment's id (``groundrl envs`` lists them; docs/catalog.md)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """The environment's own options (e.g. ``env_kwargs.max_episode_steps=3``)."""
    prompt: str | None = "actions"
    """The prompt the agent reads: ``auto`` (the environment's own), ``glam`` (GLAM's template), ``actions``
    (the environment's own with the valid actions listed first: it raises a small model's prior) or null
    (the raw observation); see :func:`groundrl.make_env`."""
    prompt_window: int = 3
    """Observations shown by GLAM's prompt template."""
    model: str | None = None
    """A model's name (``tiny-llama``, ...), folder, .gguf file or hub id; null: the embedded default model."""
    dtype: str = "float32"
    """The model's weights: ``float32``, ``bfloat16``, ``float16`` or ``auto``."""
    device: str = "auto"
    """``cpu``, ``cuda``, ``cuda:N`` or ``auto``."""
    precision: str = "fp32"
    """The model's passes: ``fp32``, ``bf16-mixed`` (bf16 matmuls; float32 weights, optimizer and losses;
    fast only with native bf16: CUDA, AVX-512 BF16 or AMX CPUs) or ``auto`` (bf16-mixed exactly there)."""
    seed: int = 1
    """Training episodes are seeded from it (:func:`groundrl.runs.training_seed`); 0 to 2**32 - 1."""
    algorithm: AlgorithmKind = AlgorithmKind.ppo
    """How an agent with a policy (``agent.kind`` llm or symbolic) learns: ``ppo`` (with a critic and
    GAE), ``grpo`` or ``gigpo`` (critic-free group methods)."""
    agent: AgentConfig = field(default_factory=AgentConfig)
    """The agent: its kind and that kind's settings."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """What every algorithm plays per update, and for how long."""
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """PPO's settings (``agent.kind`` llm or symbolic; the group methods use the policy's)."""
    explore: ExplorationConfig = field(default_factory=ExplorationConfig)
    """How the rollouts explore (PPO and the group methods)."""
    group: GroupConfig = field(default_factory=GroupConfig)
    """The group methods' advantages (``algorithm`` grpo or gigpo)."""
    sil: SelfImitationConfig = field(default_factory=SelfImitationConfig)
    """Self-imitation of the run's best episodes (PPO, GRPO, GiGPO)."""
    drrn: DRRNConfig = field(default_factory=DRRNConfig)
    """Q-learning of the DRRN baseline (``agent.kind=drrn``)."""
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    """Training over several processes (``groundrl train --nproc N``)."""
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    """Where each update's metrics go."""
    init: str | None = None
    """An export folder (``groundrl export``) whose weights the run starts from; ``groundrl train --init DIR``
    sets it (and ``model=DIR`` for an export that holds a whole model)."""
    runs_dir: str = "runs"
    """Where ``groundrl train`` creates the run folder."""
    checkpoint_every: int = 10
    """Updates between checkpoints (one is also written at the end and at Ctrl-C)."""
    keep_checkpoints: int = 3
    """The most recent checkpoints kept; 0 keeps all."""
    trajectories_every: int = 10
    """From every this-many-th update on, the next episode of the first environment goes into
    trajectories.jsonl and TensorBoard's text tab (``groundrl replay RUN`` shows them); 0: none."""
    progress: bool = True
    """Show a progress bar."""

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
        non_negative("", self, "keep_checkpoints", "trajectories_every")
        if self.agent.kind == AgentKind.drrn and self.explore.active:
            raise InvalidArgumentError("explore.* settings are PPO's: a DRRN agent explores by its Boltzmann "
                                       "temperature, agent.drrn.temperature (set explore.novelty=0)")
        if self.agent.kind == AgentKind.drrn and self.sil.enabled:
            raise InvalidArgumentError("sil.enabled imitates with a policy's loss, and agent.kind=drrn has none (it "
                                       "learns Q-values): use agent.kind=llm or symbolic, or sil.enabled=false")
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
        llm = self.agent.llm
        if self.agent.kind == AgentKind.llm and (llm.critic == Critic.own or llm.critic_time):
            setting = "agent.llm.critic=own" if llm.critic == Critic.own else "agent.llm.critic_time=true"
            raise InvalidArgumentError(f"algorithm={method} has no critic, so {setting} would train nothing: use "
                                       f"algorithm=ppo, or leave {setting.split('=')[0]} at its default")

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
    def training_env_options(self) -> dict[str, Any]:
        """``make_env``'s options for the episodes training plays and replays: :attr:`env_options`, and
        ``explore.start_steps``'s exploring starts and ``explore.invented_words``."""
        explore = self.explore
        return {**self.env_options, **({"exploring_starts": explore.start_steps} if explore.start_steps else {}),
                **({"invented_words": list(explore.invented_words), "invented_share": explore.invented_share}
                   if explore.invented_words else {})}

    @property
    def collector_env_options(self) -> dict[str, Any]:
        """``make_env``'s options for the environments training plays: :attr:`training_env_options`, and
        with ``sil.hindsight`` each step's accomplished missions reported (``hindsight=True``)."""
        return {**self.training_env_options, **({"hindsight": True} if self.sil.hindsight else {})}

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

        >>> from groundrl.train.config import load_config
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

        >>> from groundrl.train.config import load_config
        >>> load_config("default", overrides=["rollout.total_decisions=512"]).budget_share(update=1, decisions=128)
        0.25
        """
        if self.group_method:
            return min(1.0, decisions / self.rollout.total_decisions)
        return update / self.num_updates
