"""LLM agents: the zero-shot policy (:class:`LLMPolicy`) and, built on it, the trainable agent
with a critic (:class:`LLMAgent`).

- Policy: ``pi(a | s) = softmax over the valid actions of score(a | prompt)`` (GLAM, TWOSOME); the
  LLM trains through LoRA adapters (``peft``; TWOSOME: r=8, alpha=16 on q_proj and v_proj) or fully.
- Critic ``"shared"`` (GLAM): an MLP ``d -> 1024 -> 1024 -> 1`` on the prompt's last hidden state
  of the *same* forward pass that scores the actions; its gradient reaches the LLM.
- Critic ``"frozen"`` (TWOSOME): the base model without adapters encodes the prompt; an MLP
  ``d -> 1024 -> 512 -> 1`` without biases reads the last prompt token's hidden state; only the MLP
  trains. With LoRA the base model is the same weights with the adapters switched off (no extra
  memory); with full fine-tuning it is a frozen copy of the initial model.
- Critic ``"own"``: over the frozen trunk that ``train_layers`` leaves (its states kept, shared with
  the actor), a trainable copy of the next ``critic_layers`` layers and of the final norm, then the
  frozen critic's MLP: the critic learns what to read of the state, and its gradient reaches only
  its own weights (the policy's stay as the policy loss leaves them).
- ``critic_time``: any critic also reads the time left in the episode (Pardo et al., ICML 2018,
  "Time Limits in Reinforcement Learning"): an episode truncated at its time limit is not bootstrapped,
  and BabyAI's reward shrinks with the steps taken, so a state's value depends on when it is reached,
  which no prompt says. Two numbers, the share of the limit used and the steps left (log-scaled),
  go through a small MLP of their own whose output adds to the value head's; the policy reads
  nothing of them.
- ``policy="head"`` (GLAM's NPAE ablation, with a randomly initialized model): no scoring; an MLP
  on the prompt's hidden state gives a logit per action of the environment's vocabulary, and the
  policy is their softmax over the valid ones.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import NamedTuple

import torch
from torch import nn

from groundrl.agents.config import Actor, Critic, LLMAgentConfig, Normalization, PolicyKind
from groundrl.agents.protocols import AgentOutput, Generators, choose
from groundrl.envs.base import action_ids, action_vocabulary
from groundrl.errors import InvalidArgumentError
from groundrl.llm.cache import LRU, Memo, cached, decision_key
from groundrl.llm.loading import LLM
from groundrl.llm.lora import add_lora
from groundrl.llm.precision import autocast, cast_frozen_weights, resolve_precision
from groundrl.llm.scoring import prompt_hidden_states, score_details
from groundrl.llm.trunk import Above, OwnLayers, Trunk, decoder_stack


def mlp(sizes: Sequence[int], bias: bool) -> nn.Sequential:
    """Linear layers with ReLU between them: ``mlp([d, 1024, 1])``."""
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(n_in, n_out, bias=bias))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def strip_separator(prompts: Sequence[str], separator: str) -> list[str]:
    """Drop a prompt's trailing space when the separator is one: GLAM's prompts end with
    ``"Action k: "``, and that space separates the prompt from the action, once.

    >>> strip_separator(["Action 0: ", "Your next step is to"], " ")
    ['Action 0:', 'Your next step is to']
    """
    if separator != " ":
        return list(prompts)
    return [p[:-1] if p.endswith(" ") else p for p in prompts]


class AgentInput(NamedTuple):
    """What an LLM agent reads of a step where it reads more than the prompt: the vocabulary ids of
    the valid actions (an action head) and the episode's time (the time-aware critic)."""

    prompt: str
    action_ids: tuple[int, ...] = ()
    time: tuple[int, ...] = ()  # (info["elapsed_steps"], info["max_episode_steps"]); () where not read or not said


TIME_FEATURES = 2  # what the time-aware critic adds to the value head's input (see time_features)


class TimeAwareHead(nn.Module):
    """A value head that also reads the episode's time: ``head(features) + time(t)`` on the features
    and the :func:`time_features` concatenated. The time has its own small MLP: its two numbers beside
    a model's hundreds of features would hardly move a shared first layer (on GoToLocal's returns the
    probe's head on both explained 0.09, a ridge regression on both, which scales each input, 0.24)."""

    def __init__(self, head: nn.Module, hidden: int = 64):
        super().__init__()
        self.head = head
        self.time = mlp([TIME_FEATURES, hidden, 1], bias=True)

    def forward(self, features_and_time: torch.Tensor) -> torch.Tensor:
        return self.head(features_and_time[..., :-TIME_FEATURES]) + self.time(features_and_time[..., -TIME_FEATURES:])


_NO_TIME = ("agent.llm.critic_time reads the episode's time, info['elapsed_steps'] and info['max_episode_steps'], "
            "which this environment does not report (BabyAI-Text and Overcooked do): set agent.llm.critic_time=false")


def require_time(info: Mapping) -> None:
    """Refuse, in one line, an environment whose ``info`` does not say the episode's time: what a
    run that trains the time-aware critic checks before its model loads.

    >>> require_time({"valid_actions": ["go"], "elapsed_steps": 0, "max_episode_steps": 64})
    >>> require_time({"valid_actions": ["go"]})
    Traceback (most recent call last):
    ...
    groundrl.errors.InvalidArgumentError: agent.llm.critic_time reads the episode's time, ...
    """
    if "elapsed_steps" not in info or "max_episode_steps" not in info:
        raise InvalidArgumentError(_NO_TIME)


def time_features(inputs: Sequence, device: torch.device | str = "cpu") -> torch.Tensor:
    """``(len(inputs), 2)``: the share of the episode's time limit used, and the steps left
    (``log(1 + left) / log(1001)``, 1 at a thousand), of each input's ``time``.

    >>> time_features([AgentInput("p", time=(16, 64))]).round(decimals=4)
    tensor([[0.2500, 0.5633]])
    """
    rows = []
    for x in inputs:
        if not (isinstance(x, AgentInput) and x.time):
            raise InvalidArgumentError(_NO_TIME)
        elapsed, limit = x.time
        rows.append([elapsed / limit, math.log1p(max(limit - elapsed, 0)) / math.log(1001)])
    return torch.tensor(rows, dtype=torch.float32, device=device)


class LLMPolicy(nn.Module):
    """``pi(a | s) = softmax over the valid actions of score(a | prompt(s))``: the model zero-shot.

    Args:
        llm: the language model.
        normalization: ``"sum"``, ``"token"`` or ``"word"`` (TWOSOME's default and best).
        separator: between the prompt and an action (one space, as in TWOSOME).
        prompt: turns an observation into the prompt; the observation as is by default.
        precision: ``fp32``, ``bf16-mixed`` or ``auto`` (see :mod:`groundrl.llm.precision`).

    >>> from groundrl.llm import load_llm
    >>> policy = LLMPolicy(load_llm("tiny-llama"))
    >>> choices, probs = policy.act(["You see a key."], [["pick up the key", "turn left"]])
    >>> round(float(probs[0].sum()), 4)
    1.0
    """

    def __init__(self, llm: LLM, normalization: str = "word", separator: str = " ",
                 prompt: Callable[[str], str] | None = None, precision: str = "fp32"):
        super().__init__()
        self.llm = llm
        self.precision = resolve_precision(precision, llm.device, llm.dtype)
        self.trunk: Trunk | None = None  # frozen lower layers (LLMAgent with agent.llm.train_layers)
        self.normalization = Normalization(normalization)
        self.separator = separator
        self.prompt = prompt
        self.memo = Memo()  # on while the weights stay fixed (groundrl.llm.cache.memoized)

    @property
    def device(self) -> torch.device:
        return self.llm.device

    def observe(self, observation, info: dict):
        """What the policy reads of one step: the prompt."""
        return self.prompt(str(observation)) if self.prompt else str(observation)

    def prompts(self, inputs: Sequence) -> list[str]:
        return strip_separator([x.prompt if isinstance(x, AgentInput) else x for x in inputs], self.separator)

    def forward(self, inputs: Sequence, valid_actions: Sequence[Sequence[str]], *, values: bool = False,
                policy: bool = True) -> AgentOutput:
        """The action scores as logits (no critic: the values are zeros)."""
        logits, _ = self.scores(inputs, valid_actions)
        return AgentOutput(logits=logits, values=torch.zeros(len(inputs), device=self.device))

    def scores(self, inputs: Sequence, valid_actions: Sequence[Sequence[str]],
               hidden: bool = False) -> tuple[list[torch.Tensor], torch.Tensor | None]:
        """The logits of each decision (and, with ``hidden``, its prompt's last hidden state), each
        distinct input computed once; inside :func:`~groundrl.llm.cache.memoized` (no grad),
        inputs seen earlier are not computed again."""
        memo = self.memo.entries if self.memo.active and not torch.is_grad_enabled() else None
        keys, of_keys = _decision_keys(inputs, valid_actions)

        def compute(missing):
            logits, states = self._scores(*of_keys(missing), hidden)
            return list(zip(logits, states if states is not None else [None] * len(missing)))

        if memo is not None and hidden and any(k in memo and memo[k][1] is None for k in keys):
            memo = None  # kept without the hidden state: compute afresh
        results = cached(memo, keys, compute)
        logits = [x for x, _ in results]
        return logits, torch.stack([h for _, h in results]) if hidden else None

    def _scores(self, inputs, valid_actions, hidden: bool):
        with autocast(self.precision, self.device):
            details = score_details(self.llm, self.prompts(inputs), valid_actions,
                                    normalization=self.normalization.value, separator=self.separator,
                                    grad=torch.is_grad_enabled(), return_hidden=hidden, trunk=self.trunk)
        return details.scores, details.prompt_hidden

    def act(self, observations, valid_actions, *, infos=None, envs=None, greedy: bool = False,
            generator: Generators = None) -> tuple[list[int], list[torch.Tensor]]:
        """The :class:`~groundrl.agents.protocols.Policy` contract."""
        infos = infos or [{"valid_actions": actions} for actions in valid_actions]
        with torch.no_grad():
            logits = self.forward([self.observe(o, i) for o, i in zip(observations, infos)], valid_actions,
                                  values=False).logits
        probs = [x.float().softmax(-1).cpu() for x in logits]
        return choose(probs, greedy, generator), probs


class LLMAgent(LLMPolicy):
    """An LLM policy with a critic, ready for PPO (an :class:`~groundrl.agents.protocols.ActorCritic`).

    >>> from groundrl.llm import load_llm
    >>> agent = LLMAgent(load_llm("tiny-llama"), LLMAgentConfig(critic="frozen"))
    >>> out = agent(["You see a red door."], [["open the door", "turn left"]])
    >>> out.logits[0].shape, out.values.shape
    (torch.Size([2]), torch.Size([1]))
    """

    def __init__(self, llm: LLM, config: LLMAgentConfig | None = None, num_actions: int | None = None,
                 precision: str = "fp32"):
        config = config or LLMAgentConfig()
        super().__init__(llm, normalization=config.normalization, separator=config.separator, precision=precision)
        if config.policy == PolicyKind.head and not num_actions:
            raise InvalidArgumentError("an action-head agent needs num_actions, the size of the action vocabulary")
        self.config = config
        # the critic's base must not move with a fully trained actor: keep the initial weights apart
        self.frozen_base = (copy.deepcopy(llm.model).requires_grad_(False).eval()
                            if config.critic == Critic.frozen and config.actor == Actor.full else None)
        num_layers, trained = _trained_layers(llm, config)
        if config.critic == Critic.own and trained is None:
            raise InvalidArgumentError(f"agent.llm.critic=own reads a frozen trunk, and {llm.name}'s {num_layers} "
                                       f"layers all train: make agent.llm.train_layers at most {num_layers - 1}")
        # the critic's own layers, copied before the actor's adapters are added to them
        self.critic_layers = OwnLayers(llm.model, num_layers - len(trained), config.critic_layers).to(llm.device) \
            if config.critic == Critic.own else None
        if config.actor == Actor.lora:
            add_lora(llm, r=config.lora_r, alpha=config.lora_alpha, dropout=config.lora_dropout,
                     target_modules=config.lora_targets, layers=trained)
        elif trained is None:
            llm.model.requires_grad_(True)
        else:  # the top layers and the final norm
            stack = decoder_stack(llm.model)
            llm.model.requires_grad_(False)
            for module in [*(stack.layers[i] for i in trained), stack.norm]:
                module.requires_grad_(True)
        # the frozen layers below, each text through them once (see groundrl.llm.trunk)
        self.trunk = Trunk(llm.model, num_layers - len(trained), config.trunk_cache_mib * 2**20) if trained else None
        frozen_stack = decoder_stack(self.frozen_base) if trained and self.frozen_base is not None else None
        self.critic_above = Above(frozen_stack.layers[self.trunk.num_frozen:], frozen_stack.norm) \
            if frozen_stack is not None else None
        if config.gradient_checkpointing:
            llm.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            if config.actor == Actor.lora:
                llm.model.enable_input_require_grads()
        self.model = llm.model  # registered, so that parameters() and state_dict() include it
        hidden_size = _hidden_size(llm)
        shared = config.critic == Critic.shared
        default_hidden = [1024, 1024] if shared else [1024, 512]
        self.value_head = mlp([hidden_size, *(config.critic_hidden or default_hidden), 1], bias=shared)
        if config.critic_time:
            self.value_head = TimeAwareHead(self.value_head)
        self.value_head.to(llm.device)
        self.action_head = mlp([hidden_size, *config.head_hidden, num_actions], bias=True).to(llm.device) \
            if config.policy == PolicyKind.head else None
        # what the frozen base model computes for a text, kept for the whole run (0: nothing kept)
        self.critic_cache = LRU(config.cache_size) if config.cache_size else None
        self.reference_cache = LRU(config.cache_size) if config.cache_size else None
        if self.precision == "bf16-mixed":  # what never trains, cast once rather than at every pass
            for model in (self.model, self.frozen_base):
                if model is not None:
                    cast_frozen_weights(model)

    def cannot_play(self, env) -> str:
        """Why this agent cannot play ``env`` ('' when it can): a scoring agent plays any text
        environment; an action head needs the vocabulary it was trained on."""
        if self.action_head is None:
            return ""
        try:
            size = len(action_vocabulary(env))
        except InvalidArgumentError as error:
            return str(error)
        trained = self.action_head[-1].out_features
        return "" if size == trained else f"the action head has {trained} actions, this environment {size}"

    def observe(self, observation, info: dict):
        """The prompt (and, with an action head, the ids of the valid actions; with ``critic_time``,
        the episode's time where the environment says it)."""
        ids = tuple(action_ids(info)) if self.config.policy == PolicyKind.head else ()
        time = (int(info["elapsed_steps"]), int(info["max_episode_steps"])) \
            if self.config.critic_time and "elapsed_steps" in info and "max_episode_steps" in info else ()
        return AgentInput(str(observation), ids, time) if ids or time else str(observation)

    def actor_parameters(self) -> list[nn.Parameter]:
        """What the policy trains: the adapters (LoRA) or every LLM weight (full), and the action head."""
        head = list(self.action_head.parameters()) if self.action_head is not None else []
        return [p for p in self.model.parameters() if p.requires_grad] + head

    def critic_parameters(self) -> list[nn.Parameter]:
        """What the value loss trains: the value head, and the critic's own layers (``critic=own``)."""
        own = list(self.critic_layers.parameters()) if self.critic_layers is not None else []
        return own + list(self.value_head.parameters())

    def forward(self, inputs: Sequence, valid_actions: Sequence[Sequence[str]], *, values: bool = True,
                policy: bool = True) -> AgentOutput:
        """Logits over each decision's valid actions and (with ``values``) the state values; with
        ``policy=False`` the logits are left out when the values do not need them (PPO's value
        phase, through the one entry point DistributedDataParallel wraps)."""
        shared = values and self.config.critic == Critic.shared
        logits, hidden = self.scores(inputs, valid_actions, hidden=shared) if policy or shared else ([], None)
        if shared:
            state_values = self.state_values(hidden, inputs)
        elif values:
            state_values = self.own_values(inputs) if self.critic_layers is not None else self.frozen_values(inputs)
        else:
            state_values = torch.zeros(len(inputs), device=self.device)
        return AgentOutput(logits=logits if policy else [], values=state_values)

    def _scores(self, inputs, valid_actions, hidden: bool):
        if self.action_head is None:
            return super()._scores(inputs, valid_actions, hidden)
        with autocast(self.precision, self.device):
            states = prompt_hidden_states(self.llm, self.prompts(inputs), trunk=self.trunk).float()
        all_logits = self.action_head(states)
        return [all_logits[i, list(x.action_ids)] for i, x in enumerate(inputs)], states

    def state_values(self, features: torch.Tensor, inputs: Sequence) -> torch.Tensor:
        """The value head on what the critic read of each input's prompt (and, with ``critic_time``,
        of its time)."""
        features = features.float()
        if self.config.critic_time:
            features = torch.cat([features, time_features(inputs, features.device)], dim=-1)
        return self.value_head(features).squeeze(-1)

    def frozen_values(self, inputs: Sequence) -> torch.Tensor:
        """The frozen-base critic: values with gradient to the MLP only."""
        return self.state_values(self.critic_features(self.prompts(inputs)), inputs)

    def own_values(self, inputs: Sequence) -> torch.Tensor:
        """The critic of its own (``critic=own``): the trunk's kept states through its own layers and
        the value head, with gradient to those alone."""
        with autocast(self.precision, self.device):
            features = prompt_hidden_states(self.llm, self.prompts(inputs), trunk=self.trunk, above=self.critic_layers)
        return self.state_values(features, inputs)

    def critic_features(self, prompts: Sequence[str]) -> torch.Tensor:
        """What the frozen-base critic reads, ``(len(prompts), hidden_size)``: the base model's last
        hidden state at each prompt's last token. The base never changes, so each prompt's features
        are computed once and kept (``agent.llm.cache_size`` prompts at most)."""
        base_off = self.model.disable_adapter() if self.config.actor == Actor.lora and self.frozen_base is None \
            else nullcontext()
        with torch.no_grad(), base_off, autocast(self.precision, self.device):
            base = self._base_llm()
            if self.critic_cache is None:
                return prompt_hidden_states(base, prompts, trunk=self.trunk, above=self.critic_above)
            return torch.stack(cached(self.critic_cache, prompts, lambda missing: [
                prompt_hidden_states(base, [p], trunk=self.trunk, above=self.critic_above)[0] for p in missing]))

    def reference_logits(self, inputs: Sequence, valid_actions: Sequence[Sequence[str]]) -> list[torch.Tensor] | None:
        """The untrained policy's logits (the LoRA adapters off), kept per distinct input like the
        critic's features; None for full fine-tuning (no such policy at no cost)."""
        if self.config.actor != Actor.lora:
            return None
        keys, of_keys = _decision_keys(inputs, valid_actions)

        def compute(missing):
            if self.reference_cache is None:
                return self._scores(*of_keys(missing), False)[0]
            return [self._scores(*of_keys([k]), False)[0][0] for k in missing]

        with torch.no_grad(), self.model.disable_adapter():
            return cached(self.reference_cache, keys, compute)

    def _base_llm(self) -> LLM:
        if self.frozen_base is None:
            return self.llm
        return LLM(model=self.frozen_base, tokenizer=self.llm.tokenizer, kind=self.llm.kind, name=self.llm.name,
                   source=self.llm.source)


def _decision_keys(inputs: Sequence, valid_actions: Sequence[Sequence[str]]):
    """Each decision's cache key for the policy, and a function from keys back to their (inputs,
    valid actions); the time only the critic reads is no part of it."""
    keys = [(decision_key(x._replace(time=()) if isinstance(x, AgentInput) else x), tuple(actions))
            for x, actions in zip(inputs, valid_actions)]
    by_key = dict(zip(keys, zip(inputs, valid_actions)))
    return keys, lambda chosen: ([by_key[k][0] for k in chosen], [by_key[k][1] for k in chosen])


def _trained_layers(llm: LLM, config: LLMAgentConfig) -> tuple[int, list[int] | None]:
    """The model's number of transformer layers, and those that train (None: all of them)."""
    if config.train_layers == "all":
        return 0, None
    if llm.kind != "causal":
        raise InvalidArgumentError("agent.llm.train_layers needs a decoder-only (causal) model: set "
                                   "agent.llm.train_layers=all")
    num_layers = len(decoder_stack(llm.model).layers)
    k = int(config.train_layers)
    if k > num_layers:
        raise InvalidArgumentError(f"agent.llm.train_layers={k}, but {llm.name} has {num_layers} layers: make it "
                                   f"at most {num_layers}, or all")
    return num_layers, (None if k == num_layers else list(range(num_layers - k, num_layers)))


def _hidden_size(llm: LLM) -> int:
    config = llm.model.get_base_model().config if hasattr(llm.model, "get_base_model") else llm.model.config
    return getattr(config, "hidden_size", None) or config.d_model
