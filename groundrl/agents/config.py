"""How an agent is built: one dataclass for every kind, settable from config files and the command line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from groundrl.errors import InvalidArgumentError

KINDS = ("llm", "symbolic", "drrn")


@dataclass
class AgentConfig:
    """The agent of a training run.

    ``kind``:

    - ``"llm"``: a language model. ``policy="score"`` (GLAM, TWOSOME) scores every valid action
      string; ``policy="head"`` puts an MLP over the environment's action vocabulary on the
      prompt's hidden state instead. ``weights="random"`` re-initializes the model (with
      ``policy="head"`` and ``pretrained_embeddings=True``: GLAM's NPAE ablation).
    - ``"symbolic"``: PPO from scratch on the environment's symbolic observation
      (``info["features"]``, or BabyAI's 7x7 view and mission), an MLP or a small CNN, masked to
      the valid actions.
    - ``"drrn"``: a GRU Q-network over the prompt and each action's text, trained by Q-learning
      from a replay memory (see :class:`groundrl.train.config.DRRNConfig`).
    """

    kind: str = "llm"
    # llm
    normalization: str = "word"  # sum | token | word
    separator: str = " "
    policy: str = "score"  # score | head
    weights: str = "pretrained"  # pretrained | random
    pretrained_embeddings: bool = False  # keep the input embeddings when weights=random (GLAM's NPAE)
    actor: str = "lora"  # lora | full
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    lora_targets: List[str] = field(default_factory=lambda: ["q_proj", "v_proj"])
    critic: str = "frozen"  # shared (GLAM) | frozen (TWOSOME)
    critic_hidden: Optional[List[int]] = None  # default: GLAM's [1024, 1024] (shared), TWOSOME's [1024, 512] (frozen)
    head_hidden: List[int] = field(default_factory=lambda: [1024])  # the action head of policy=head
    gradient_checkpointing: bool = False
    # symbolic
    network: str = "auto"  # auto | mlp | cnn (auto: cnn for a grid view, mlp for a feature vector)
    hidden: List[int] = field(default_factory=lambda: [64, 64])
    # drrn (GLAM's settings), and the word vocabulary of drrn and of the symbolic mission encoder
    embedding_dim: int = 128
    hidden_dim: int = 128
    word_buckets: int = 8192

    def __post_init__(self):
        choices = {"kind": KINDS, "policy": ("score", "head"), "weights": ("pretrained", "random"),
                   "actor": ("lora", "full"), "critic": ("shared", "frozen"), "normalization": ("sum", "token", "word"),
                   "network": ("auto", "mlp", "cnn")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise InvalidArgumentError(f"agent.{name} must be one of {', '.join(allowed)}, not {getattr(self, name)!r}")
        if self.policy == "head" and self.actor == "lora":
            raise InvalidArgumentError("agent.policy=head trains the model fully: set agent.actor=full")
        if self.weights == "random" and self.actor == "lora":
            raise InvalidArgumentError("a randomly initialized model trains fully: set agent.actor=full")
        for name in ("embedding_dim", "hidden_dim", "word_buckets"):
            if getattr(self, name) < 1:
                raise InvalidArgumentError(f"agent.{name} must be at least 1, not {getattr(self, name)}")
