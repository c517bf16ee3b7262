"""The LLM policy: a softmax over the scores of the valid actions (GLAM, TWOSOME)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from groundrl.llm.loading import LLM
from groundrl.llm.scoring import Normalization, score


def choose(probs: Sequence[torch.Tensor], greedy: bool = False, generator: torch.Generator | None = None) -> list[int]:
    """An action index per probability vector: sampled, or the most probable with ``greedy``."""
    if greedy:
        return [int(p.argmax()) for p in probs]
    return [int(torch.multinomial(p, 1, generator=generator)) for p in probs]


def strip_separator(prompts: Sequence[str], separator: str) -> list[str]:
    """Drop a prompt's trailing space when the separator is one: GLAM's prompts end with
    ``"Action k: "``, and that space separates the prompt from the action, once.

    >>> strip_separator(["Action 0: ", "Your next step is to"], " ")
    ['Action 0:', 'Your next step is to']
    """
    if separator != " ":
        return list(prompts)
    return [p[:-1] if p.endswith(" ") else p for p in prompts]


@dataclass
class LLMPolicy:
    """``pi(a | s) = softmax over the valid actions of score(a | prompt(s))``.

    Args:
        llm: the language model.
        normalization: ``"sum"``, ``"token"`` or ``"word"`` (TWOSOME's default and best).
        separator: between the prompt and an action (one space, as in TWOSOME).
        prompt: turns an observation into the prompt; the observation as is by default.

    >>> from groundrl.llm import load_llm
    >>> policy = LLMPolicy(load_llm("tiny-llama"))
    >>> probs = policy.probabilities(["You see a key."], [["pick up the key", "turn left"]])
    >>> round(float(probs[0].sum()), 4)
    1.0
    """

    llm: LLM
    normalization: Normalization = "word"
    separator: str = " "
    prompt: Callable[[str], str] = field(default=lambda observation: observation)

    def probabilities(self, observations: Sequence[str], valid_actions: Sequence[Sequence[str]]) -> list[torch.Tensor]:
        """One probability vector per observation, over its valid actions."""
        prompts = strip_separator([self.prompt(observation) for observation in observations], self.separator)
        with torch.no_grad():
            scores = score(self.llm, prompts, valid_actions, normalization=self.normalization, separator=self.separator)
        return [s.float().softmax(-1).cpu() for s in scores]

    def act(
        self,
        observations: Sequence[str],
        valid_actions: Sequence[Sequence[str]],
        greedy: bool = False,
        generator: torch.Generator | None = None,
        infos=None,
        envs=None,
    ) -> tuple[list[int], list[torch.Tensor]]:
        """Choose an action index per observation (sampled, or the most probable with ``greedy``);
        returns the indices and the probability vectors they were drawn from. ``infos`` and ``envs``
        are unused: the policy reads the observations only."""
        probs = self.probabilities(observations, valid_actions)
        return choose(probs, greedy, generator), probs
