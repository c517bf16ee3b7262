"""How an agent is built: its kind, and a section of settings per kind (settable from config files
and the command line as ``agent.llm.actor=full``, ``agent.symbolic.hidden=[64,64]``, ...)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from groundrl.agents.validators import at_least_one, coerce_choices, non_negative, positive
from groundrl.errors import InvalidArgumentError
from groundrl.llm.scoring import Normalization


class AgentKind(str, Enum):
    llm = "llm"  # a language model that scores the actions (GLAM, TWOSOME) or has an action head
    symbolic = "symbolic"  # PPO from scratch on the environment's symbolic observation
    drrn = "drrn"  # a GRU Q-network over the prompt and each action's text (GLAM's DRRN baseline)


class PolicyKind(str, Enum):
    score = "score"  # softmax over the scores of the valid action strings
    head = "head"  # an MLP over the environment's action vocabulary on the prompt's hidden state (GLAM's NPAE)


class Weights(str, Enum):
    pretrained = "pretrained"
    random = "random"  # re-initialized (GLAM's NPAE ablation)


class Actor(str, Enum):
    lora = "lora"  # LoRA adapters train, the model stays (TWOSOME)
    full = "full"  # every weight trains (GLAM)


class Critic(str, Enum):
    shared = "shared"  # a value head on the policy's own forward pass; its gradient reaches the LLM (GLAM)
    frozen = "frozen"  # a value head on the frozen base model (TWOSOME)
    own = "own"  # a value head on its own trainable copy of the layers above the frozen trunk (train_layers)


class Network(str, Enum):
    auto = "auto"  # cnn for a grid view, mlp for a feature vector
    mlp = "mlp"
    cnn = "cnn"


@dataclass
class LLMAgentConfig:
    """A language-model agent (``agent.kind=llm``)."""

    normalization: Normalization = Normalization.word
    """How an action's log-likelihood becomes its score: ``sum`` (as is, GLAM), ``token`` (divided by the
    action's number of tokens, TWOSOME) or ``word`` (by its number of words, TWOSOME's default and best)."""
    separator: str = " "
    """The text between the prompt and an action."""
    policy: PolicyKind = PolicyKind.score
    """``score``: the softmax over the scores of the valid action strings; ``head``: an MLP over the
    environment's action vocabulary on the prompt's hidden state (GLAM's NPAE)."""
    weights: Weights = Weights.pretrained
    """``pretrained``, or ``random``: the architecture re-initialized (GLAM's NPAE ablation)."""
    pretrained_embeddings: bool = False
    """Keep the pretrained input embeddings when ``weights=random`` (GLAM's NPAE)."""
    actor: Actor = Actor.lora
    """What trains: ``lora`` adapters, the model staying as it is (TWOSOME), or the ``full`` model (GLAM)."""
    lora_r: int = 8
    """The LoRA adapters' rank."""
    lora_alpha: int = 16
    """LoRA's scaling (the update is scaled by ``lora_alpha / lora_r``)."""
    lora_dropout: float = 0.0
    """Dropout on the LoRA adapters' input."""
    lora_targets: list[str] = field(default_factory=lambda: ["q_proj", "v_proj"])
    """The modules that get adapters (names of linear layers of the model)."""
    critic: Critic = Critic.frozen
    """``frozen``: a value head on the frozen base model (TWOSOME); ``shared``: a value head on the policy's
    own forward pass, whose gradient reaches the model (GLAM); ``own``: a value head on the critic's own
    trainable copy of the ``critic_layers`` layers just above the frozen trunk that ``train_layers``
    leaves (and of the final norm), so that what the critic reads of the state learns with it while
    the policy's weights never see its gradient. The critic-free group methods (GRPO, GiGPO) train
    no critic, and refuse ``own`` and ``critic_time``."""
    critic_layers: int = 2
    """With ``critic=own``: how many layers the critic has of its own (at most ``train_layers``; the
    more, the more it can learn to read, the more each value costs)."""
    critic_time: bool = False
    """The critic also reads the episode's time (the share of its limit used, the steps left; Pardo et
    al., ICML 2018): a state's value depends on when it is reached where episodes are cut at a time
    limit and rewards shrink with the steps (BabyAI), and no prompt says when. Needs an environment
    that reports ``info["elapsed_steps"]`` and ``info["max_episode_steps"]`` (BabyAI-Text, Overcooked)."""
    critic_hidden: list[int] | None = None
    """The value head's hidden widths; null: GLAM's [1024, 1024] (shared), TWOSOME's [1024, 512] (frozen)."""
    head_hidden: list[int] = field(default_factory=lambda: [1024])
    """The hidden widths of the action head of ``policy=head``."""
    gradient_checkpointing: bool = False
    """Trade compute for memory in the backward pass."""
    cache_size: int = 16384
    """Distinct prompts whose frozen-model outputs (the frozen critic's features, the reference policy's
    scores) are kept for the whole run; 0 keeps none (each is computed when needed)."""
    train_layers: str = "all"
    """Train only the top K transformer layers (their adapters, or all their weights with ``actor=full``):
    ``all`` or K. Below them nothing trains, so each text's hidden states there are computed once and kept,
    shared by the actor and the frozen critic (causal models)."""
    trunk_cache_mib: int = 1024
    """Memory (MiB) for the hidden states ``train_layers`` keeps; the least recently used go first."""

    def __post_init__(self):
        coerce_choices("agent.llm", self)
        if self.policy == PolicyKind.head and self.actor == Actor.lora:
            raise InvalidArgumentError("agent.llm.policy=head trains the model fully: set agent.llm.actor=full")
        if self.weights == Weights.random and self.actor == Actor.lora:
            raise InvalidArgumentError("a randomly initialized model trains fully: set agent.llm.actor=full")
        at_least_one("agent.llm", self, "lora_r")
        if self.train_layers != "all" and not (str(self.train_layers).isdigit() and int(self.train_layers) >= 1):
            raise InvalidArgumentError(f"agent.llm.train_layers must be all or a whole number of 1 or more, "
                                       f"not {self.train_layers!r}")
        self.train_layers = str(self.train_layers)
        at_least_one("agent.llm", self, "trunk_cache_mib")
        at_least_one("agent.llm", self, "critic_layers")
        if self.critic == Critic.own and self.train_layers == "all":
            raise InvalidArgumentError("agent.llm.critic=own reads the frozen trunk below the layers that train: set "
                                       "agent.llm.train_layers=K too (e.g. 8)")
        if self.critic == Critic.own and self.critic_layers > int(self.train_layers):
            raise InvalidArgumentError(f"agent.llm.critic_layers={self.critic_layers} copies the layers just above the "
                                       f"frozen trunk, of which there are agent.llm.train_layers={self.train_layers}: "
                                       f"make it at most {self.train_layers}")
        non_negative("agent.llm", self, "cache_size")


@dataclass
class SymbolicAgentConfig:
    """PPO from scratch on the symbolic observation (``agent.kind=symbolic``): ``info["features"]``
    through an MLP, or BabyAI's 7x7 view and mission through a small CNN."""

    network: Network = Network.auto
    """``mlp`` over ``info["features"]``, ``cnn`` over BabyAI's grid view and mission, or ``auto``: cnn for a
    grid view, mlp for a feature vector."""
    hidden: list[int] = field(default_factory=lambda: [64, 64])
    """The MLP's hidden widths."""
    word_buckets: int = 8192
    """Buckets of the hashed words of the mission (cnn)."""

    def __post_init__(self):
        coerce_choices("agent.symbolic", self)
        at_least_one("agent.symbolic", self, "word_buckets")


@dataclass
class DRRNAgentConfig:
    """GLAM's DRRN (``agent.kind=drrn``): embeddings of hashed words, GRUs of the observation and of
    each action, a scalar Q-value per action; actions sampled from ``softmax(Q / temperature)``."""

    embedding_dim: int = 128
    """The word embeddings' size."""
    hidden_dim: int = 128
    """The GRUs' hidden size."""
    word_buckets: int = 8192
    """Buckets of the hashed words."""
    temperature: float = 1.0
    """The Boltzmann exploration's temperature: actions are sampled from ``softmax(Q / temperature)``."""

    def __post_init__(self):
        at_least_one("agent.drrn", self, "embedding_dim", "hidden_dim", "word_buckets")
        positive("agent.drrn", self, "temperature")


@dataclass
class AgentConfig:
    """The agent of a training run: its ``kind`` and that kind's section (the others are ignored)."""

    kind: AgentKind = AgentKind.llm
    """``llm``: a language model that scores the actions (GLAM, TWOSOME) or has an action head;
    ``symbolic``: PPO from scratch on the symbolic observation; ``drrn``: GLAM's DRRN baseline."""
    llm: LLMAgentConfig = field(default_factory=LLMAgentConfig)
    """The language-model agent's settings."""
    symbolic: SymbolicAgentConfig = field(default_factory=SymbolicAgentConfig)
    """The symbolic baseline's settings."""
    drrn: DRRNAgentConfig = field(default_factory=DRRNAgentConfig)
    """The DRRN baseline's settings."""

    def __post_init__(self):
        coerce_choices("agent", self)


