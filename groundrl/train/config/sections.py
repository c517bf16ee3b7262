"""The sections of a training run's settings besides the agent's (``rollout``, ``ppo``, ``explore``,
``group``, ``drrn``, ``distributed``, ``logging``): one dataclass each, every field documented by the
string under it (the "every setting" page and ``groundrl config KEY`` show them), each section
checking its own values when built."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from groundrl.agents.validators import at_least_one, coerce_choices, fraction, non_negative, positive
from groundrl.errors import InvalidArgumentError


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

    num_envs: int = 4
    """Environments played in parallel (the total over the processes)."""
    num_steps: int = 32
    """Decisions per environment per update: an update plays ``num_envs x num_steps``."""
    total_decisions: int = 50_000
    """The training budget, in decisions (over every environment and process)."""
    reward_scale: float = 1.0
    """Rewards are multiplied by it before learning (GLAM: 20); the logged returns stay unscaled."""
    group_size: int = 1
    """The group methods' (``algorithm=grpo``, ``gigpo``) group: environments come in groups of this many
    that start each episode together from one reset seed; an update plays whole episodes of every group until
    each has played ``group_size x num_steps`` decisions, and the run stops once it has played
    ``total_decisions``. 1 for PPO."""

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
    """PPO's hyperparameters, named as in the papers (and CleanRL); the group methods use its policy
    settings too (learning rate, epochs, minibatches, clipping, entropy, KL)."""

    gamma: float = 0.95
    """The discount, per decision, or per primitive step where the environment reports
    ``info["macro_steps"]`` (a macro-action of k steps is discounted by ``gamma ** k``)."""
    gae_lambda: float = 0.95
    """GAE's lambda: 1 is the Monte-Carlo return, 0 the one-step TD error."""
    update_epochs: int = 1
    """Passes over the rollout per update."""
    phases: Phases = Phases.separate
    """``separate`` (TWOSOME): a value phase, then a policy phase, each with its own optimizer; ``joint``
    (GLAM): one loss ``pg_loss + vf_coef * v_loss - ent_coef * entropy``, one optimizer."""
    policy_lr: float = 3e-4
    """The actor's learning rate (the LoRA adapters or the whole model, the action head), in both phase
    designs. The default moves the adapters of a small model (SmolLM2-135M) within a few thousand decisions;
    TWOSOME's 1e-6 (for LLaMA-7B, the twosome preset) does not move it at all."""
    value_lr: float = 1e-3
    """The critic's learning rate (TWOSOME: 5e-5)."""
    adam_eps: float = 1e-5
    """Adam's epsilon."""
    lr_decay: bool = False
    """Decay both learning rates linearly to 0 over ``rollout.total_decisions`` (the papers'). Off by
    default: over a short budget the late updates hardly move, just when the first successes are found."""
    minibatch_size: int = 32
    """Decisions per policy (or joint) optimizer step (the total over the processes)."""
    value_minibatch_size: int = 32
    """Decisions per value-phase optimizer step (``phases=separate``; the total over the processes)."""
    micro_batch_size: int = 4
    """Decisions (distinct ones, with ``deduplicate``) per forward and backward pass; the gradients of a
    minibatch's micro-batches accumulate. It must divide both minibatch sizes."""
    deduplicate: bool = True
    """Compute each distinct (prompt, valid actions) once: across a rollout (the policy is fixed then) and in
    each micro-batch, which gathers a minibatch's (or a self-imitation step's) equal decisions. The gradients are
    the same."""
    clip_coef: float = 0.2
    """The policy ratio's clip range (``1 ± clip_coef``)."""
    value_clip_coef: float | None = 0.2
    """The value's clip range around its old estimate (CleanRL's clipped value loss); null: not clipped."""
    ent_coef: float = 0.01
    """The entropy bonus's coefficient."""
    ent_coef_end: float | None = None
    """The entropy coefficient anneals linearly to it over ``explore.anneal`` of the budget; null: constant."""
    vf_coef: float = 0.5
    """The value loss's weight (in the joint loss, and on the value phase's loss)."""
    max_grad_norm: float = 0.5
    """Gradient norms are clipped to it at every optimizer step."""
    target_kl: float | None = 0.02
    """Stop an epoch's policy steps once the approx-KL to the rollout's policy exceeds it (every process
    together); null: never (the joint phases never stop)."""
    normalize_advantages: bool = True
    """Normalize the advantages per minibatch (mean 0, standard deviation 1)."""
    advantage_std_floor: float = 0.0
    """Normalized advantages are divided by ``max(std, this)``. A rollout that saw no reward has advantages
    of value noise only (std ~1e-3 on BabyAI, against ~0.1 where an episode succeeded); normalized to unit
    size they make a full step in a random direction, which sharpens the policy all the same
    (docs/results.md, "Updates without a reward"). 0: plain normalization."""
    kl_coef: float = 0.0
    """A penalty on ``KL(pi || pi_ref)``, the untrained policy's (LoRA only: the adapters off); the KL is
    logged (``kl_reference``) whatever this is."""

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
        fraction("ppo", self, "gamma", "gae_lambda")


@dataclass
class ExplorationConfig:
    """How the rollouts explore beyond sampling the learned policy (:mod:`groundrl.train.exploration`).

    Each ``X_end`` anneals ``X`` linearly to it over the first ``anneal`` of the training budget
    (null: ``X`` stays); ``ppo.ent_coef_end`` anneals the entropy coefficient the same way. The
    learned policy is what is evaluated and saved; acting with another one is corrected for in
    the policy loss (importance weights, truncated at ``max_importance_weight``).
    """

    epsilon: float = 0.0
    """The behaviour policy acts uniformly over the valid actions with this probability:
    ``(1 - epsilon) * softmax(logits / temperature) + epsilon * uniform``."""
    epsilon_end: float | None = None
    """Where ``epsilon`` anneals to; null: it stays."""
    temperature: float = 1.0
    """The behaviour policy's temperature over the policy's logits (above 1: flatter)."""
    temperature_end: float | None = None
    """Where ``temperature`` anneals to; null: it stays."""
    novelty: float = 0.1
    """A bonus of ``novelty / sqrt(n)`` on the reward of a decision that reaches an observation seen n times
    in the run (this one included; its text, hashed), in the environment's reward units
    (``rollout.reward_scale`` scales both). Logged apart (``novelty_bonus``): the reported returns stay
    the environment's."""
    novelty_end: float | None = 0.0
    """Where ``novelty`` anneals to; null: it stays."""
    anneal: float = 0.5
    """The share of ``rollout.total_decisions`` over which every schedule reaches its end."""
    start_steps: int = 0
    """Exploring starts: each training episode begins in a state drawn, from its reset seed, uniformly among the
    distinct states that up to ``start_steps`` valid actions reach (the agent neither sees nor learns from the
    way there), so the policy also meets states its own path skips (Food Preparation's open microwave with
    empty hands, where the Laundry agent loops). The way counts toward the episode's step limit; evaluation
    starts plainly. 0: off."""
    invented_words: list[str] = field(default_factory=list)
    """Words of the task (e.g. ``[pancake, microwave]``) replaced, in a share ``invented_share`` of the training
    episodes, by invented words drawn from the reset seed, the same in the prompt and the valid actions
    all episode long, so the policy reads what the sentences say of a thing, not only which thing it is
    (for tasks with other things: Laundry after Food Preparation). Evaluation reads the words as they are."""
    invented_share: float = 0.5
    """The share of training episodes whose ``invented_words`` are replaced."""
    max_importance_weight: float = 2.0
    """``pi_old / mu`` is truncated at it (V-trace's rho-bar): a behaviour much flatter than the policy
    cannot blow a decision's weight up."""

    def __post_init__(self):
        fraction("explore", self, "epsilon")
        fraction("explore", self, "epsilon_end", optional=True)
        positive("explore", self, "temperature", "anneal", "max_importance_weight")
        positive("explore", self, "temperature_end", optional=True)
        non_negative("explore", self, "novelty", "start_steps")
        if not 0 < self.invented_share <= 1:
            raise InvalidArgumentError(f"explore.invented_share is a share of the episodes in (0, 1], "
                                       f"not {self.invented_share}")
        if any(not str(w).strip() for w in self.invented_words):
            raise InvalidArgumentError("explore.invented_words lists words of the task, not empty ones")
        if not isinstance(self.start_steps, int) or isinstance(self.start_steps, bool):
            raise InvalidArgumentError(f"explore.start_steps is a number of steps, not {self.start_steps!r}")
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
    """The advantages of the group methods (:mod:`groundrl.train.group_advantages`); their update is
    the clipped policy loss with the ``ppo`` section's learning rate, epochs, minibatches,
    ``clip_coef``, ``ent_coef``, ``kl_coef`` and ``target_kl`` (``ppo.gamma`` discounts GiGPO's step
    returns), and no critic."""

    std_scaling: bool = True
    """Divide by the group's standard deviation (GRPO, GiGPO); false: only centre on the group's mean
    (Dr. GRPO: a group of near-equal returns then gets small advantages, not unit ones)."""
    omega: float = 1.0
    """GiGPO's weight of the step-level advantage: ``episode-level + omega x step-level``."""
    eps: float = 1e-6
    """Added to the group's standard deviation."""
    state_key: str | None = None
    """What makes two decisions' states the same for GiGPO's step groups: the value of this key of the
    environment's info; null: the observation text (``info["observation"]`` where the environment gives
    its prompt as the observation)."""

    def __post_init__(self):
        non_negative("group", self, "omega")
        positive("group", self, "eps")


@dataclass
class SelfImitationConfig:
    """Self-imitation (:mod:`groundrl.train.self_imitation`; Oh et al. 2018): the run's best finished
    episodes, kept, are learned again after every update of a policy (PPO, GRPO, GiGPO): a few steps
    of ``-log pi(a | s) * max(G - V(s), 0)`` on their decisions under the current policy, so that a
    rare success that exploration found is not a fiftieth of an on-policy one."""

    enabled: bool = False
    """Learn from the kept episodes after every update."""
    capacity: int = 64
    """The episodes kept: the best by return (between equal returns, the most recent)."""
    steps: int = 4
    """Self-imitation optimizer steps after each update."""
    batch_size: int = 32
    """Kept decisions per step (the total over the processes)."""
    priority: float = 0.6
    """How much a decision's priority (its clipped advantage max(G - V, 0), assessed when its episode is
    kept and whenever it is drawn) weighs in drawing it: probability ~ priority ** this (Oh et al.'s
    0.6); 0 draws uniformly."""
    weight: float = 1.0
    """The policy's self-imitation loss's weight."""
    value_weight: float = 0.01
    """The critic's self-imitation loss's weight (PPO; Oh et al.'s 0.01); the critic-free methods have
    none and measure the advantage against the mean return of the update's episodes."""
    max_advantage: float | None = None
    """The advantage a kept decision weighs at most (in the rewards' units, x ``rollout.reward_scale``);
    null: uncapped."""
    hindsight: int = 0
    """Hindsight relabelling (SAC-GLAM's): each finished episode that accomplished missions other
    than its own (an environment that reports them, ``info["achieved_missions"]``: BabyAI-Text)
    offers the memory up to this many successes made of it, the missions accomplished last first,
    each the episode up to there with that mission, checked by the environment's own verifier; 0: off."""

    def __post_init__(self):
        at_least_one("sil", self, "capacity", "steps", "batch_size")
        non_negative("sil", self, "hindsight")
        if self.hindsight and not self.enabled:
            raise InvalidArgumentError(f"sil.hindsight={self.hindsight} gives the self-imitation memory its "
                                       "episodes: set sil.enabled=true too (or sil.hindsight=0)")
        positive("sil", self, "weight")
        non_negative("sil", self, "value_weight", "priority")
        positive("sil", self, "max_advantage", optional=True)


@dataclass
class DRRNConfig:
    """Q-learning of a DRRN agent (GLAM's settings: lr 1e-4, gamma 0.9, batch 64, gradient norm 5).

    Each update plays the rollout into the replay memory, then takes minibatch steps until
    ``replay_ratio`` transitions were drawn per new decision (GLAM took one step per update, and its
    DRRN barely learned; 8 learns FollowInstruction in 4k decisions).
    """

    lr: float = 1e-4
    """Adam's learning rate."""
    gamma: float = 0.9
    """The discount of the TD target ``r + gamma * max_a' Q(s', a')``."""
    batch_size: int = 64
    """Transitions per gradient step (the total over the processes)."""
    replay_size: int = 100_000
    """The replay memory's capacity in transitions (shared out over the processes)."""
    replay_ratio: float = 8.0
    """Transitions drawn per new decision: each update takes ``decisions x replay_ratio / batch_size`` steps."""
    max_grad_norm: float = 5.0
    """Gradient norms are clipped to it."""
    learning_starts: int = 64
    """Decisions in memory before the first gradient step."""

    def __post_init__(self):
        at_least_one("drrn", self, "batch_size", "replay_size", "learning_starts")
        positive("drrn", self, "lr", "replay_ratio", "max_grad_norm")
        fraction("drrn", self, "gamma")


@dataclass
class DistributedConfig:
    """Training over several processes (``torchrun``, see :mod:`groundrl.train.distributed`); a
    single process ignores it."""

    timeout: float = 300.0
    """Seconds a process waits for the others (to join, or in a collective) before it stops with an error.
    A process that dies is noticed at once; this bounds a hung one, so it must exceed the longest legitimate
    wait: one rollout finishing later than another, rank 0 writing a checkpoint."""
    backend: Backend = Backend.auto
    """The collectives' backend: ``auto`` (nccl on GPUs, gloo on CPUs), ``gloo`` or ``nccl``."""
    cpu_threads: int | None = None
    """Threads per CPU process; null: the machine's cores split evenly among its processes."""

    def __post_init__(self):
        coerce_choices("distributed", self)
        positive("distributed", self, "timeout")
        if self.cpu_threads is not None:
            at_least_one("distributed", self, "cpu_threads")


LOG_BACKENDS = ("tensorboard", "jsonl", "wandb")


@dataclass
class LoggingConfig:
    """Where each update's metrics go (step: the decisions played so far), besides the checkpoints;
    :mod:`groundrl.train.loggers` opens them."""

    backends: list[str] = field(default_factory=lambda: ["tensorboard", "jsonl"])
    """Any of ``tensorboard`` (RUN/tensorboard/: scalars, recorded episodes as text), ``jsonl``
    (RUN/metrics.jsonl and RUN/trajectories.jsonl, which ``groundrl plot``, ``replay``, ``export`` and the
    benchmarks read) and ``wandb`` (Weights & Biases, ``pip install 'groundrl[wandb]'``: the same metrics,
    the settings, episodes as tables)."""
    wandb_project: str = "groundrl"
    """The W&B project."""
    wandb_entity: str | None = None
    """A W&B team or user; null: the logged-in user's default."""
    wandb_mode: str | None = None
    """``online``, ``offline`` (kept in RUN/wandb/; ``wandb sync`` uploads it later) or null: wandb's own
    choice (the WANDB_MODE variable, else online)."""

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
