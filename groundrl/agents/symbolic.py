"""PPO from scratch on the symbolic observation: the baseline of both papers that reads no text.

The observation is what the environment knows as numbers: ``info["features"]`` (VirtualHome's
observed booleans, Overcooked's positions, FollowInstruction's one-hot instruction) for an MLP, or
BabyAI's egocentric 7x7 view (object, colour and state per cell) with the mission's words for a
small CNN. The actor gives a logit per action of the environment's vocabulary
(:func:`groundrl.envs.base.action_vocabulary`); the policy is their softmax over the valid actions
only (action masking, without which PPO learns nothing in VirtualHome, TWOSOME reports). The critic
is a separate network of the same shape, as in CleanRL's PPO.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from groundrl.agents.config import Network, SymbolicAgentConfig
from groundrl.agents.protocols import AgentOutput, Generators, choose
from groundrl.agents.words import word_ids
from groundrl.envs.base import action_ids, action_vocabulary
from groundrl.errors import InvalidArgumentError

GRID_CHANNELS = (11, 6, 3)  # minigrid's object types, colours, door states
MISSION_WORDS = 16  # a BabyAI mission has at most 14 words


@dataclass
class SymbolicObservation:
    """One step, as numbers: a feature vector, or a grid view with its mission's word ids; and
    the vocabulary ids of the valid actions."""

    action_ids: list[int]
    features: np.ndarray | None = None
    image: np.ndarray | None = None
    mission: list[int] | None = None


def layer_init(layer: nn.Linear, std: float = np.sqrt(2)) -> nn.Linear:
    """Orthogonal weights, zero bias (PPO's usual initialization; a small std for output layers)."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.zeros_(layer.bias)
    return layer


def _mlp(sizes: Sequence[int], out_std: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    for n_in, n_out in zip(sizes[:-2], sizes[1:-1]):
        layers += [layer_init(nn.Linear(n_in, n_out)), nn.Tanh()]
    layers.append(layer_init(nn.Linear(sizes[-2], sizes[-1]), std=out_std))
    return nn.Sequential(*layers)


class GridEncoder(nn.Module):
    """BabyAI's view and mission to a vector: each cell's object, colour and state embedded and
    summed, two 3x3 convolutions; the mission's words through a GRU; the two concatenated."""

    def __init__(self, word_buckets: int, size: int = 7, channels: int = 32, word_dim: int = 32, mission_dim: int = 64):
        super().__init__()
        self.offsets = torch.tensor([0, GRID_CHANNELS[0], GRID_CHANNELS[0] + GRID_CHANNELS[1]])
        self.cells = nn.Embedding(sum(GRID_CHANNELS), channels)
        self.conv = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU(), nn.Flatten())
        self.words = nn.Embedding(word_buckets, word_dim, padding_idx=0)
        self.mission = nn.GRU(word_dim, mission_dim, batch_first=True)
        self.out_dim = channels * size * size + mission_dim

    def forward(self, image: torch.Tensor, mission: torch.Tensor) -> torch.Tensor:
        cells = self.cells(image.long() + self.offsets.to(image.device)).sum(-2)  # (B, W, H, C)
        grid = self.conv(cells.permute(0, 3, 1, 2))
        lengths = (mission != 0).sum(-1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(self.words(mission), lengths, batch_first=True, enforce_sorted=False)
        _, last = self.mission(packed)
        return torch.cat([grid, last[-1]], -1)


class SymbolicNetwork(nn.Module):
    """An encoder (identity for a feature vector, :class:`GridEncoder` for a grid) and an MLP."""

    def __init__(self, kind: str, input_dim: int, hidden: Sequence[int], out_dim: int, out_std: float,
                 word_buckets: int):
        super().__init__()
        self.encoder = GridEncoder(word_buckets) if kind == "cnn" else None
        width = self.encoder.out_dim if self.encoder is not None else input_dim
        self.head = _mlp([width, *hidden, out_dim], out_std)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        x = self.encoder(batch["image"], batch["mission"]) if self.encoder is not None else batch["features"]
        return self.head(x)


class SymbolicAgent(nn.Module):
    """An actor-critic on the symbolic observation, with the interface of :class:`LLMAgent`, so that
    the same PPO trainer trains it.

    Args:
        config: ``network`` (``"auto"``, ``"mlp"``, ``"cnn"``), ``hidden`` (the MLP's widths).
        example_info: an ``info`` of the environment, to size the input.
        num_actions: the size of the environment's action vocabulary.

    >>> import groundrl
    >>> from groundrl.envs.base import action_vocabulary
    >>> env = groundrl.make_env("groundrl/FollowInstruction-v0")
    >>> obs, info = env.reset(seed=0)
    >>> agent = SymbolicAgent(SymbolicAgentConfig(), info, len(action_vocabulary(env)))
    >>> out = agent([agent.observe(obs, info)], [info["valid_actions"]])
    >>> out.logits[0].shape == (len(info["valid_actions"]),), out.values.shape
    (True, torch.Size([1]))
    """

    def __init__(self, config: SymbolicAgentConfig, example_info: dict, num_actions: int,
                 device: str | torch.device = "cpu"):
        super().__init__()
        self.config = config
        has_grid = "image" in example_info and "mission" in example_info
        network = config.network.value if config.network != Network.auto else ("cnn" if has_grid else "mlp")
        if network == "cnn" and not has_grid:
            raise InvalidArgumentError("agent.symbolic.network=cnn reads BabyAI's grid view (info['image'] and "
                                       "info['mission']); this environment has none")
        if network == "mlp" and "features" not in example_info:
            raise InvalidArgumentError("this environment gives no info['features'] for agent.symbolic.network=mlp"
                                       + ("; use agent.symbolic.network=cnn" if has_grid else ""))
        self.network = network
        self.num_actions = num_actions
        input_dim = int(np.asarray(example_info["features"]).size) if network == "mlp" else 0
        self.input_dim = input_dim
        self.actor = SymbolicNetwork(network, input_dim, config.hidden, num_actions, 0.01, config.word_buckets)
        self.critic = SymbolicNetwork(network, input_dim, config.hidden, 1, 1.0, config.word_buckets)
        self.to(device)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def cannot_play(self, env) -> str:
        """Why this agent cannot play ``env`` ('' when it can): its observation or action
        vocabulary has another shape than the one the agent was built for."""
        try:
            vocabulary = action_vocabulary(env)
        except InvalidArgumentError as error:
            return str(error)
        _, info = env.reset(seed=0)
        if self.network == "cnn" and not ("image" in info and "mission" in info):
            return "the agent reads BabyAI's grid view, which this environment has not"
        if self.network == "mlp" and np.asarray(info.get("features", [])).size != self.input_dim:
            return (f"the agent reads {self.input_dim} features, "
                    f"this environment gives {np.asarray(info.get('features', [])).size}")
        if len(vocabulary) != self.num_actions:
            return f"the agent has {self.num_actions} actions, this environment {len(vocabulary)}"
        return ""

    def observe(self, observation: str, info: dict) -> SymbolicObservation:
        if self.network == "cnn":
            mission = word_ids(str(info["mission"]), self.config.word_buckets)[:MISSION_WORDS]
            return SymbolicObservation(action_ids(info), image=np.asarray(info["image"]), mission=mission)
        return SymbolicObservation(action_ids(info), features=np.asarray(info["features"], dtype=np.float32).ravel())

    def _batch(self, observations: Sequence[SymbolicObservation]) -> dict[str, torch.Tensor]:
        if self.network == "cnn":
            missions = np.zeros((len(observations), MISSION_WORDS), dtype=np.int64)
            for row, o in zip(missions, observations):
                row[: len(o.mission)] = o.mission
            return {"image": torch.as_tensor(np.stack([o.image for o in observations]), device=self.device),
                    "mission": torch.as_tensor(missions, device=self.device)}
        return {"features": torch.as_tensor(np.stack([o.features for o in observations]), device=self.device)}

    def forward(self, observations: Sequence[SymbolicObservation], valid_actions=None, *, values: bool = True,
                policy: bool = True) -> AgentOutput:
        batch = self._batch(observations)
        logits = []
        if policy:
            all_logits = self.actor(batch)
            logits = [all_logits[i, o.action_ids] for i, o in enumerate(observations)]
        state_values = self.critic(batch).squeeze(-1) if values else torch.zeros(len(observations), device=self.device)
        return AgentOutput(logits=logits, values=state_values)

    def actor_parameters(self) -> list[nn.Parameter]:
        return list(self.actor.parameters())

    def critic_parameters(self) -> list[nn.Parameter]:
        return list(self.critic.parameters())

    def reference_logits(self, inputs, valid_actions):
        return None  # trained from scratch: no prior policy to stay close to

    def act(self, observations, valid_actions, *, infos=None, envs=None, greedy: bool = False,
            generator: Generators = None):
        if infos is None:
            raise InvalidArgumentError("the symbolic agent reads info: pass infos=")
        with torch.no_grad():
            logits = self.forward([self.observe(o, i) for o, i in zip(observations, infos)], values=False).logits
        probs = [x.float().softmax(-1).cpu() for x in logits]
        return choose(probs, greedy, generator), probs
