"""DRRN (He et al. 2016), GLAM's text baseline: ``Q(s, a)`` from a GRU over the prompt and a GRU
over each valid action's text, with Boltzmann exploration (actions sampled from ``softmax(Q)``).

Words are hashed (:func:`groundrl.agents.words.word_ids`) rather than tokenized by a trained
SentencePiece model as in GLAM's code, so no vocabulary file is needed and every word of a test
(new nouns, invented words, French) has an embedding, untrained as GLAM's unknown pieces were.
The Q-learning loop is :class:`groundrl.train.algorithms.DRRN`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from groundrl.agents.config import DRRNAgentConfig
from groundrl.agents.protocols import Generators, choose
from groundrl.agents.words import word_ids


class DRRNAgent(nn.Module):
    """Embedding 128, observation and action GRUs of 128, a hidden layer on their concatenation,
    and a scalar Q-value per action (GLAM's settings).

    >>> agent = DRRNAgent(DRRNAgentConfig())
    >>> [q.shape for q in agent.q_values(["You see a red ball"], [["go forward", "turn left", "pick up"]])]
    [torch.Size([3])]
    """

    def __init__(self, config: DRRNAgentConfig | None = None, device: str | torch.device = "cpu"):
        super().__init__()
        config = config or DRRNAgentConfig()
        self.config = config
        self.temperature = config.temperature
        self.embedding = nn.Embedding(config.word_buckets, config.embedding_dim, padding_idx=0)
        self.observation_encoder = nn.GRU(config.embedding_dim, config.hidden_dim, batch_first=True)
        self.action_encoder = nn.GRU(config.embedding_dim, config.hidden_dim, batch_first=True)
        self.hidden = nn.Linear(2 * config.hidden_dim, config.hidden_dim)
        self.scorer = nn.Linear(config.hidden_dim, 1)
        self.to(device)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def observe(self, observation: str, info: dict) -> str:
        return str(observation)

    def _encode(self, texts: Sequence[str], gru: nn.GRU) -> torch.Tensor:
        """The GRU's last hidden state over each text's words, ``(len(texts), hidden_dim)``."""
        ids = [word_ids(t, self.config.word_buckets) or [0] for t in texts]
        padded = torch.zeros(len(ids), max(map(len, ids)), dtype=torch.long)
        for row, x in zip(padded, ids):
            row[: len(x)] = torch.tensor(x)
        last = torch.tensor([len(x) - 1 for x in ids], device=self.device)
        # the GRU reads left to right, so its output at a text's last word is the state a packed
        # sequence would end with; on a CPU its backward is 2-3x faster unpacked
        outputs, _ = gru(self.embedding(padded.to(self.device)))
        return outputs[torch.arange(len(ids), device=self.device), last]

    def q_values(self, observations: Sequence[str], valid_actions: Sequence[Sequence[str]]) -> list[torch.Tensor]:
        """``Q(s, a)`` for every valid action of every observation (one tensor per observation)."""
        states = self._encode(observations, self.observation_encoder)
        # each distinct action text is encoded once per call (BabyAI's six names recur in every state)
        distinct = sorted({a for actions in valid_actions for a in actions})
        encoded = self._encode(distinct, self.action_encoder)
        index = {a: i for i, a in enumerate(distinct)}
        sizes = [len(actions) for actions in valid_actions]
        action_rows = encoded[torch.tensor([index[a] for actions in valid_actions for a in actions],
                                           device=self.device)]
        state_rows = states.repeat_interleave(torch.tensor(sizes, device=self.device), dim=0)
        q = self.scorer(torch.relu(self.hidden(torch.cat([state_rows, action_rows], -1)))).squeeze(-1)
        return list(q.split(sizes))

    def forward(self, observations: Sequence[str], valid_actions: Sequence[Sequence[str]]) -> list[torch.Tensor]:
        """:meth:`q_values`, the entry point DistributedDataParallel wraps."""
        return self.q_values(observations, valid_actions)

    def act(self, observations, valid_actions, *, infos=None, envs=None, greedy: bool = False,
            generator: Generators = None):
        """Boltzmann exploration: sampled from ``softmax(Q / temperature)``, or the argmax."""
        with torch.no_grad():
            q = self.q_values([str(o) for o in observations], valid_actions)
        probs = [(x.float() / self.temperature).softmax(-1).cpu() for x in q]
        return choose(probs, greedy, generator), probs
