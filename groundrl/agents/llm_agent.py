"""The trainable LLM agent: the action scorer as the actor, and a critic (GLAM's or TWOSOME's).

- Actor: ``pi(a | s) = softmax over the valid actions of score(a | prompt)``, the LLM trained
  through LoRA adapters (``peft``; TWOSOME: r=8, alpha=16 on q_proj and v_proj) or fully.
- Critic ``"shared"`` (GLAM): an MLP ``d -> 1024 -> 1024 -> 1`` on the prompt's last hidden state
  of the *same* forward pass that scores the actions; its gradient reaches the LLM.
- Critic ``"frozen"`` (TWOSOME): the base model without adapters encodes the prompt; an MLP
  ``d -> 1024 -> 512 -> 1`` without biases reads the last prompt token's hidden state; only the MLP
  trains. With LoRA the base model is the same weights with the adapters switched off (no extra
  memory); with full fine-tuning it is a frozen copy of the initial model.
- ``policy="head"`` (GLAM's NPAE ablation, with a randomly initialized model): no scoring; an MLP
  on the prompt's hidden state gives a logit per action of the environment's vocabulary, and the
  policy is their softmax over the valid ones.
"""

from __future__ import annotations

import copy
from contextlib import nullcontext
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import torch
from torch import nn

from groundrl.agents.llm_policy import choose, strip_separator
from groundrl.agents.config import AgentConfig
from groundrl.envs.base import action_ids
from groundrl.errors import InvalidArgumentError
from groundrl.llm.loading import LLM
from groundrl.llm.lora import add_lora
from groundrl.llm.scoring import prompt_hidden_states, score_details


def mlp(sizes: Sequence[int], bias: bool) -> nn.Sequential:
    """Linear layers with ReLU between them: ``mlp([d, 1024, 1])``."""
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(n_in, n_out, bias=bias))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class PromptAndIds(NamedTuple):
    """What an action-head agent reads: the prompt, and the vocabulary ids of the valid actions."""

    prompt: str
    action_ids: list[int]


@dataclass
class AgentOutput:
    """Per decision: the policy's logits over its valid actions, and the state's value."""

    logits: list[torch.Tensor]
    values: torch.Tensor


class LLMAgent(nn.Module):
    """An LLM policy with a critic, ready for PPO.

    >>> from groundrl.llm import load_llm
    >>> agent = LLMAgent(load_llm("tiny-llama"), AgentConfig(critic="frozen"))
    >>> out = agent(["You see a red door."], [["open the door", "turn left"]])
    >>> out.logits[0].shape, out.values.shape
    (torch.Size([2]), torch.Size([1]))
    """

    def __init__(self, llm: LLM, config: AgentConfig | None = None, num_actions: int | None = None):
        super().__init__()
        config = config or AgentConfig()
        if config.policy == "head" and not num_actions:
            raise InvalidArgumentError("an action-head agent needs num_actions, the size of the action vocabulary")
        self.config = config
        self.llm = llm
        if config.critic == "frozen" and config.actor == "full":
            # the critic's base must not move with the actor: keep the initial weights apart
            self.frozen_base = copy.deepcopy(llm.model).requires_grad_(False).eval()
        else:
            self.frozen_base = None
        if config.actor == "lora":
            add_lora(llm, r=config.lora_r, alpha=config.lora_alpha, dropout=config.lora_dropout,
                     target_modules=config.lora_targets)
        else:
            llm.model.requires_grad_(True)
        if config.gradient_checkpointing:
            llm.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            if config.actor == "lora":
                llm.model.enable_input_require_grads()
        self.model = llm.model  # registered, so that parameters() and state_dict() include it
        hidden_size = _hidden_size(llm)
        if config.critic == "shared":
            self.value_head = mlp([hidden_size, *(config.critic_hidden or [1024, 1024]), 1], bias=True)
        else:
            self.value_head = mlp([hidden_size, *(config.critic_hidden or [1024, 512]), 1], bias=False)
        self.value_head.to(llm.device)
        self.action_head = mlp([hidden_size, *config.head_hidden, num_actions], bias=True).to(llm.device) \
            if config.policy == "head" else None

    @property
    def device(self) -> torch.device:
        return self.llm.device

    def cannot_play(self, env) -> str:
        """Why this agent cannot play ``env`` ('' when it can): a scoring agent plays any text
        environment; an action head needs the vocabulary it was trained on."""
        if self.action_head is None:
            return ""
        from groundrl.envs.base import action_vocabulary

        try:
            size = len(action_vocabulary(env))
        except InvalidArgumentError as error:
            return str(error)
        trained = self.action_head[-1].out_features
        return "" if size == trained else f"the action head has {trained} actions, this environment {size}"

    def observe(self, observation: str, info: dict):
        """What the agent reads of one step: the prompt (and, with an action head, the ids of the
        valid actions)."""
        if self.config.policy == "head":
            return PromptAndIds(str(observation), action_ids(info))
        return str(observation)

    def actor_parameters(self) -> list[nn.Parameter]:
        """What the policy phase trains: the adapters (LoRA) or every LLM weight (full), and the
        action head."""
        head = list(self.action_head.parameters()) if self.action_head is not None else []
        return [p for p in self.model.parameters() if p.requires_grad] + head

    def critic_parameters(self) -> list[nn.Parameter]:
        return list(self.value_head.parameters())

    def reference_policy(self):
        """A context in which the agent's LLM is the policy before training (adapters off), for a
        KL penalty; ``None`` when there is no such policy at no cost (full fine-tuning)."""
        if self.config.actor == "lora":
            return self.model.disable_adapter()
        return None

    def forward(self, observations: Sequence, valid_actions: Sequence[Sequence[str]], grad: bool = False,
                values: bool = True, policy: bool = True) -> AgentOutput:
        """Logits over each decision's valid actions and (with ``values``) the state values, with
        autograd on when ``grad``. ``observations`` are what :meth:`observe` returns. With
        ``policy=False`` the logits may be left out (``[]``) when the values do not need them:
        PPO's value phase, through the one entry point that DistributedDataParallel wraps."""
        shared = values and self.config.critic == "shared"
        prompts = strip_separator(self._prompts(observations), self.config.separator)
        if not policy and not shared:
            with torch.set_grad_enabled(grad):
                state_values = self.frozen_values(prompts) if values else torch.zeros(len(prompts), device=self.device)
            return AgentOutput(logits=[], values=state_values)
        with torch.set_grad_enabled(grad):
            if self.action_head is not None:
                hidden = prompt_hidden_states(self.llm, prompts).float()
                all_logits = self.action_head(hidden)
                logits = [all_logits[i, ids] for i, (_, ids) in enumerate(observations)]
            else:
                details = score_details(self.llm, prompts, valid_actions, normalization=self.config.normalization,
                                        separator=self.config.separator, grad=grad, return_hidden=shared)
                logits, hidden = details.scores, details.prompt_hidden
            state_values = torch.zeros(len(prompts), device=self.llm.device)
            if shared:
                state_values = self.value_head(hidden.float()).squeeze(-1)
            elif values:
                state_values = self.frozen_values(prompts)
        return AgentOutput(logits=logits, values=state_values)

    def state_values(self, observations: Sequence, valid_actions: Sequence[Sequence[str]]) -> torch.Tensor:
        """``V(s)`` alone, without gradient (the frozen-base critic skips scoring the actions)."""
        with torch.no_grad():
            return self.trainable_values(observations, valid_actions)

    def trainable_values(self, observations: Sequence, valid_actions: Sequence[Sequence[str]]) -> torch.Tensor:
        """``V(s)`` with gradient to what the critic trains (the value phase of PPO)."""
        return self.forward(observations, valid_actions, grad=torch.is_grad_enabled(), policy=False).values

    def _prompts(self, observations: Sequence) -> list[str]:
        return [o.prompt if isinstance(o, PromptAndIds) else o for o in observations]

    def frozen_values(self, prompts: Sequence[str]) -> torch.Tensor:
        """The frozen-base critic: values with gradient to the MLP only."""
        with torch.no_grad(), self._base_model():
            hidden = prompt_hidden_states(self._base_llm(), prompts)
        return self.value_head(hidden.float()).squeeze(-1)

    def _base_model(self):
        if self.frozen_base is not None:
            return nullcontext()
        if self.config.actor == "lora":
            return self.model.disable_adapter()
        return nullcontext()

    def _base_llm(self) -> LLM:
        if self.frozen_base is None:
            return self.llm
        return LLM(model=self.frozen_base, tokenizer=self.llm.tokenizer, kind=self.llm.kind, name=self.llm.name,
                   source=self.llm.source)

    def act(self, observations: Sequence[str], valid_actions: Sequence[Sequence[str]], *, infos=None, envs=None,
            greedy: bool = False, generator: torch.Generator | None = None):
        """The agent protocol of :func:`groundrl.eval.evaluate` (sampled, or greedy)."""
        infos = infos or [{"valid_actions": actions} for actions in valid_actions]
        with torch.no_grad():
            logits = self.forward([self.observe(o, i) for o, i in zip(observations, infos)], valid_actions,
                                  values=False).logits
        probs = [x.float().softmax(-1).cpu() for x in logits]
        return choose(probs, greedy, generator), probs


def _hidden_size(llm: LLM) -> int:
    config = llm.model.get_base_model().config if hasattr(llm.model, "get_base_model") else llm.model.config
    return getattr(config, "hidden_size", None) or getattr(config, "d_model")
