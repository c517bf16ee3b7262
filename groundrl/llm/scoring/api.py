"""The scorer's API: what a request may ask (:class:`Normalization`, ``Truncation``), what it
gives back (:class:`ActionScores`), and :func:`score` / :func:`score_details`, which check the
request, compute each distinct one once on the model's path (causal or seq2seq) and normalize.

Separate from the paths so that what every caller sees, and the checks of what it passes, read
in one place without the tensor work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Literal

import torch

from groundrl.errors import InvalidArgumentError
from groundrl.llm.scoring.causal import score_causal
from groundrl.llm.scoring.seq2seq import score_seq2seq

if TYPE_CHECKING:  # for annotations only: loading (the LLM and its .score methods) imports the scorer
    from groundrl.llm.loading import LLM
    from groundrl.llm.trunk import Trunk


class Normalization(str, Enum):
    """How an action's log-likelihood becomes its score (a member, or its text: ``"word"``)."""

    sum = "sum"  # the log-likelihood as is (GLAM)
    token = "token"  # divided by the action's number of tokens (TWOSOME)
    word = "word"  # divided by its number of words (TWOSOME's default and best)


NORMALIZATIONS = tuple(member.value for member in Normalization)
Truncation = Literal["error", "left"]


@dataclass
class ActionScores:
    """Everything one scoring call computes, per prompt.

    Attributes:
        scores: the normalized scores, one 1-D tensor per prompt (one entry per candidate); the
            policy is ``scores[i].softmax(-1)``.
        log_likelihoods: ``S(a | p)`` before normalization.
        num_tokens: the number of (in-context) tokens of each candidate.
        num_words: the number of whitespace-separated words of each candidate.
        prompt_hidden: ``(num_prompts, hidden_size)``, the last layer's hidden state at the last
            context token (causal) or at decoder position 0 (seq2seq), for a value head; ``None``
            unless asked for.
    """

    scores: list[torch.Tensor]
    log_likelihoods: list[torch.Tensor]
    num_tokens: list[torch.Tensor]
    num_words: list[torch.Tensor]
    prompt_hidden: torch.Tensor | None = None


def score(
    llm: LLM,
    prompts: Sequence[str],
    candidates: Sequence[Sequence[str]],
    normalization: Normalization | str = "sum",
    separator: str = " ",
    **options,
) -> list[torch.Tensor]:
    """Score each candidate action of each prompt: one 1-D float32 tensor per prompt, one entry
    per candidate, on the model's device. ``options`` are those of :func:`score_details`
    (``truncation``, ``grad``, ``max_length``, ``max_batch_tokens``).

    >>> from groundrl.llm import load_llm
    >>> llm = load_llm("tiny-llama")
    >>> [s.shape for s in llm.score(["You see a door."], [["open the door", "turn left", "go"]])]
    [torch.Size([3])]
    """
    return score_details(llm, prompts, candidates, normalization=normalization, separator=separator, **options).scores


def score_details(
    llm: LLM,
    prompts: Sequence[str],
    candidates: Sequence[Sequence[str]],
    normalization: Normalization | str = "sum",
    separator: str = " ",
    truncation: Truncation = "error",
    grad: bool = False,
    return_hidden: bool = False,
    max_length: int | None = None,
    max_batch_tokens: int = 16384,
    trunk: Trunk | None = None,
) -> ActionScores:
    """Score each candidate action of each prompt, with everything the agents need from one pass.

    Args:
        llm: a loaded model (:func:`groundrl.llm.load_llm`).
        prompts: one text per environment.
        candidates: for each prompt, its valid action strings (at least one).
        normalization: ``"sum"``, ``"token"`` or ``"word"`` (see :mod:`groundrl.llm.scoring`).
        separator: put between prompt and candidate (causal models only).
        truncation: when a prompt plus a candidate is longer than ``max_length`` tokens,
            ``"error"`` raises ``ValueError``; ``"left"`` drops the prompt's earliest tokens
            (keeping a leading special token such as BOS).
        grad: keep the autograd graph (for PPO); the numbers are the same as without.
        return_hidden: also return the prompts' last hidden states, for a value head, from the
            same forward pass.
        max_length: the context limit; default: the model's ``max_position_embeddings`` (causal)
            or the tokenizer's ``model_max_length`` (seq2seq), when set.
        max_batch_tokens: prompts are processed in groups of at most about this many (padded)
            tokens, to bound memory.
        trunk: the model's frozen lower layers (causal models): each prompt's row goes through
            them once, kept, and only the layers above run here (see :mod:`groundrl.llm.trunk`).

    Raises:
        ValueError: an empty prompt or candidate list (the message names its index), a prompt
            too long with ``truncation="error"``, an unknown option value.
    """
    check_request(prompts, candidates, normalization, truncation)
    # Parallel environments often sit in the same state: compute each distinct request once.
    unique: dict[tuple[str, tuple[str, ...]], int] = {}
    index_of_prompt = [unique.setdefault((p, tuple(c)), len(unique)) for p, c in zip(prompts, candidates)]
    unique_prompts = [p for p, _ in unique]
    unique_candidates = [list(c) for _, c in unique]

    with torch.set_grad_enabled(grad):
        if llm.kind == "seq2seq":
            loglik, num_tokens, hidden = score_seq2seq(
                llm, unique_prompts, unique_candidates, truncation, return_hidden, max_length, max_batch_tokens
            )
        else:
            loglik, num_tokens, hidden = score_causal(
                llm, unique_prompts, unique_candidates, separator, truncation, return_hidden, max_length,
                max_batch_tokens, trunk,
            )

    scores, num_words = _normalized(loglik, num_tokens, unique_candidates, normalization)
    pick = lambda values: [values[k] for k in index_of_prompt]  # noqa: E731
    return ActionScores(
        scores=pick(scores),
        log_likelihoods=pick(loglik),
        num_tokens=pick(num_tokens),
        num_words=pick(num_words),
        prompt_hidden=hidden[index_of_prompt] if hidden is not None else None,
    )


def _normalized(loglik, num_tokens, candidates, normalization: Normalization):
    """The scores under ``normalization``, and each candidate's number of words."""
    device = loglik[0].device
    num_words = [torch.tensor([len(a.split()) for a in cands], dtype=torch.long, device=device) for cands in candidates]
    if normalization == "sum":
        return loglik, num_words
    divisors = num_tokens if normalization == "token" else num_words
    return [s / n for s, n in zip(loglik, divisors)], num_words


def check_request(prompts, candidates, normalization, truncation) -> None:
    """Raise :class:`~groundrl.errors.InvalidArgumentError` (a ``ValueError``) naming what is wrong
    with a request, before any tokenizing."""
    if isinstance(prompts, str):
        raise InvalidArgumentError("prompts must be a list of strings, not one string")
    if len(prompts) != len(candidates):
        raise InvalidArgumentError(f"{len(prompts)} prompts but {len(candidates)} candidate lists; "
                                   "give one list per prompt")
    if normalization not in NORMALIZATIONS:
        raise InvalidArgumentError(f"unknown normalization '{normalization}'; use one of {', '.join(NORMALIZATIONS)}")
    if truncation not in ("error", "left"):
        raise InvalidArgumentError(f"unknown truncation '{truncation}'; use 'error' or 'left'")
    if len(prompts) == 0:
        raise InvalidArgumentError("no prompts to score")
    for i, (prompt, cands) in enumerate(zip(prompts, candidates)):
        if not isinstance(prompt, str) or not prompt:
            raise InvalidArgumentError(f"prompt {i} is empty (or not a string)")
        if isinstance(cands, str) or len(cands) == 0:
            raise InvalidArgumentError(f"prompt {i} has no candidate actions (give a non-empty list of strings)")
        for j, action in enumerate(cands):
            if not isinstance(action, str) or not action.strip():
                raise InvalidArgumentError(f"candidate {j} of prompt {i} is empty (or not a string)")
