"""The action scorer: the log-likelihood of every candidate action given its prompt.

This is the hot path of every agent: at each step, every valid action of every environment is
scored. For a prompt ``p`` and a candidate ``a``::

    S(a | p) = sum_i log softmax(logits(p, t_<i))[t_i]     over the tokens t_i of a

and the policy is ``softmax(score(a))`` over the valid actions, where ``score`` is ``S`` itself
(``"sum"``), ``S`` per token of ``a`` (``"token"``) or ``S`` per whitespace word of ``a``
(``"word"``, TWOSOME's default).

Which tokens belong to the action (causal models)
-------------------------------------------------
The text ``prompt + separator + candidate`` is tokenized as a whole, and a token belongs to the
action when it covers at least one character of ``candidate``. A token that straddles the boundary
(the usual ``" go"`` token that merges the separator space with the action's first word, or a
merge of the prompt's last characters with the action) is therefore an action token, and is
scored given everything before it. This is exactly what a full forward pass over the concatenated
text scores (:func:`score_naive`); tokenizing the action alone would give other tokens at the
boundary. TWOSOME's separator is one space (the default); GLAM's prompt ends with ``"Action k: "``
and uses an empty separator. Special tokens the tokenizer appends after the text are not scored.

Seq2seq models (Flan-T5, GLAM) encode the prompt and score the candidate, tokenized alone and
without a closing ``</s>``, with the decoder from its start token; the separator is not used.

How it is fast (causal models)
------------------------------
Every token is computed once, in two forward passes:

1. the longest token prefix common to all prompts of the batch (instructions, action list, goal
   header), once, with batch size 1, kept as a key/value cache;
2. one row per distinct prompt behind that cache: the rest of the prompt, then all of its
   candidates packed one after the other, with an attention mask that lets each candidate see
   the prompt and itself only, and position ids that restart after the prompt for each candidate.

The LM head (hidden x vocabulary, the largest single matmul of a small model) runs only where a
next token is an action token. Identical (prompt, candidates) requests in a batch are computed
once. The gradient path (``grad=True``) runs the same code with autograd on, so PPO sees exactly
the numbers the rollout saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Literal

import torch
import torch.nn.functional as F

from groundrl.errors import InvalidArgumentError

if TYPE_CHECKING:  # for annotations only: loading (the LLM and its .score methods) imports this module
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
        normalization: ``"sum"``, ``"token"`` or ``"word"`` (see the module docstring).
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
    _check_request(prompts, candidates, normalization, truncation)
    # Parallel environments often sit in the same state: compute each distinct request once.
    unique: dict[tuple[str, tuple[str, ...]], int] = {}
    index_of_prompt = [unique.setdefault((p, tuple(c)), len(unique)) for p, c in zip(prompts, candidates)]
    unique_prompts = [p for p, _ in unique]
    unique_candidates = [list(c) for _, c in unique]

    with torch.set_grad_enabled(grad):
        if llm.kind == "seq2seq":
            loglik, num_tokens, hidden = _score_seq2seq(
                llm, unique_prompts, unique_candidates, truncation, return_hidden, max_length, max_batch_tokens
            )
        else:
            loglik, num_tokens, hidden = _score_causal(
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


def _check_request(prompts, candidates, normalization, truncation) -> None:
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


# ----------------------------------------------------------------------------------------------
# Causal language models


@dataclass
class _CausalRequest:
    """One prompt, tokenized: its shared context and, per candidate, the tokens that follow it."""

    context: list[int]  # tokens common to all candidates' tokenizations, before the action
    suffixes: list[list[int]]  # per candidate: leftover context tokens, then the action tokens
    num_unscored: list[int]  # per candidate: how many leading suffix tokens are context, not action


def _tokenize_causal(tokenizer, prompts, candidates, separator, truncation, max_length) -> list[_CausalRequest]:
    texts = [p + separator + a for p, cands in zip(prompts, candidates) for a in cands]
    try:
        encoded = tokenizer(texts, add_special_tokens=True, return_offsets_mapping=True)
    except NotImplementedError:
        raise InvalidArgumentError(
            f"the tokenizer {type(tokenizer).__name__} gives no character offsets, which the scorer needs to "
            "find the action's tokens; load the model with a fast (tokenizers-based) tokenizer"
        ) from None
    special_ids = set(tokenizer.all_special_ids)
    requests, k = [], 0
    for i, (prompt, cands) in enumerate(zip(prompts, candidates)):
        boundary = len(prompt) + len(separator)
        contexts, actions = [], []
        for j in range(len(cands)):
            ids, offsets = encoded["input_ids"][k], encoded["offset_mapping"][k]
            k += 1
            in_action = _action_token_flags(ids, offsets, boundary, special_ids)
            if not any(in_action):
                raise InvalidArgumentError(f"candidate {j} of prompt {i} has no tokens of its own "
                                           "(special tokens only?)")
            first = in_action.index(True)
            last = len(in_action) - 1 - in_action[::-1].index(True)
            if first == 0:
                raise InvalidArgumentError(
                    f"prompt {i} leaves no token before candidate {j}: the tokenizer merges the whole "
                    "prompt into the action; use a longer prompt or a separator"
                )
            contexts.append(ids[:first])
            actions.append(ids[first : last + 1])
        shared = _common_prefix_length(contexts)
        if shared == 0:
            raise InvalidArgumentError(
                f"the candidates of prompt {i} change the prompt's first token; use a separator such as ' '"
            )
        context = contexts[0][:shared]
        longest = max(len(c) + len(a) for c, a in zip(contexts, actions))
        if max_length is not None and longest > max_length:
            if truncation == "error":
                raise InvalidArgumentError(
                    f"prompt {i} with its longest candidate is {longest} tokens, more than the model's "
                    f"{max_length}; shorten it or pass truncation='left'"
                )
            keep_first = 1 if context[0] in special_ids else 0
            drop = longest - max_length
            if drop > shared - 1 - keep_first:
                raise InvalidArgumentError(
                    f"prompt {i}: its candidates alone are too long for the model's {max_length} tokens"
                )
            context = context[:keep_first] + context[keep_first + drop :]
        requests.append(
            _CausalRequest(
                context=context,
                suffixes=[c[shared:] + a for c, a in zip(contexts, actions)],
                num_unscored=[len(c) - shared for c in contexts],
            )
        )
    return requests


def _action_token_flags(ids, offsets, boundary: int, special_ids: set[int]) -> list[bool]:
    """Which tokens of ``prompt + separator + action`` belong to the action: those that cover at
    least one character after ``boundary`` (= ``len(prompt + separator)``), special tokens aside."""
    return [end > boundary and tok not in special_ids for tok, (_, end) in zip(ids, offsets)]


def _common_prefix_length(sequences: list[list[int]]) -> int:
    first = sequences[0]
    length = min(len(s) for s in sequences)
    for other in sequences[1:]:
        n = 0
        while n < length and other[n] == first[n]:
            n += 1
        length = n
    return length


def _batches(lengths: list[int], max_batch_tokens: int, max_padding: float = 0.25) -> list[list[int]]:
    """Group request indices, longest first, so that each group's padded size (count x longest)
    stays within the token budget and wastes at most ``max_padding`` of it on padding."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    groups: list[list[int]] = []
    current: list[int] = []
    real = 0
    for i in order:
        padded = (len(current) + 1) * lengths[current[0]] if current else 0
        if current and (padded > max_batch_tokens or padded - real - lengths[i] > max_padding * padded):
            groups.append(current)
            current, real = [], 0
        current.append(i)
        real += lengths[i]
    if current:
        groups.append(current)
    return groups


def _score_causal(llm, prompts, candidates, separator, truncation, return_hidden, max_length, max_batch_tokens,
                  trunk=None):
    if max_length is None:
        max_length = getattr(_base_config(llm.model), "max_position_embeddings", None)
    requests = _tokenize_causal(llm.tokenizer, prompts, candidates, separator, truncation, max_length)
    loglik: list[torch.Tensor | None] = [None] * len(requests)
    num_tokens: list[torch.Tensor | None] = [None] * len(requests)
    hidden: list[torch.Tensor | None] = [None] * len(requests)
    row_lengths = [len(r.context) + sum(len(s) for s in r.suffixes) for r in requests]
    forward = _forward_causal if trunk is None else lambda llm, batch, hidden: _forward_upper(llm, trunk, batch, hidden)
    for group in _batches(row_lengths, max_batch_tokens):
        group_loglik, group_hidden = forward(llm, [requests[i] for i in group], return_hidden)
        for row, i in enumerate(group):
            loglik[i] = group_loglik[row]
            num_tokens[i] = torch.tensor(
                [len(s) - u for s, u in zip(requests[i].suffixes, requests[i].num_unscored)],
                dtype=torch.long,
                device=llm.device,
            )
            if return_hidden:
                hidden[i] = group_hidden[row]
    return loglik, num_tokens, torch.stack(hidden) if return_hidden else None


def _base_config(model):
    """The transformers config, also through a peft wrapper."""
    return model.get_base_model().config if hasattr(model, "get_base_model") else model.config


def _forward_causal(llm, requests: list[_CausalRequest], return_hidden: bool):
    """Score one batch of requests; returns per-request log-likelihood tensors and (optionally)
    the prompts' last hidden states."""
    model, device = llm.model, llm.device
    num_prompts = len(requests)

    # 1. The prefix shared by all prompts, once. Every prompt keeps at least one token of its own,
    # whose logits predict its candidates' first tokens.
    shared = _common_prefix_length([r.context for r in requests]) if num_prompts > 1 else 0
    shared = min(shared, min(len(r.context) for r in requests) - 1)
    cache = None
    if shared > 0:
        prefix = torch.tensor([requests[0].context[:shared]], device=device)
        cache = model(input_ids=prefix, use_cache=True, logits_to_keep=1).cache
        cache.batch_repeat_interleave(num_prompts)

    # 2. One row per prompt: the rest of its context, then all its candidates packed one after the other.
    input_ids, positions, segment, keep, targets, flat = _pack_causal(requests, shared, llm.tokenizer.pad_token_id)
    length = input_ids.shape[1]

    attention = _base_config(model)._attn_implementation
    if attention not in ("sdpa", "eager"):
        raise InvalidArgumentError(
            f"the scorer packs candidates with a custom attention mask, which '{attention}' attention does not "
            "take; use model.set_attn_implementation('sdpa') (or 'eager')"
        )
    mask = _packed_mask(segment, shared, model.dtype if attention == "eager" else None)
    out = model(
        input_ids=input_ids.to(device),
        attention_mask=mask.to(device),
        position_ids=positions.to(device),
        cache=cache,
        use_cache=False,
        logits_to_keep=keep.to(device),
        output_hidden_states=return_hidden,
    )
    # The kept logits come flattened in row-major order: find each target's row among them.
    kept_index = keep.flatten().cumsum(0) - 1
    row_of = kept_index[torch.tensor([r * length + p for r, p, _, _ in targets])].to(device)
    logprobs = F.log_softmax(out.logits.reshape(-1, out.logits.shape[-1]).float(), dim=-1)
    picked = logprobs[row_of, torch.tensor([t for _, _, t, _ in targets], device=device)]
    owners = torch.tensor([c for _, _, _, c in targets], device=device)
    loglik = torch.zeros(flat, dtype=torch.float32, device=device).index_add(0, owners, picked)

    prompt_hidden = None
    if return_hidden:
        last = torch.tensor([len(r.context) - shared - 1 for r in requests], device=device)
        prompt_hidden = out.hidden_states[-1][torch.arange(num_prompts, device=device), last]
    sizes = [len(r.suffixes) for r in requests]
    return list(loglik.split(sizes)), prompt_hidden


def _forward_upper(llm, trunk: Trunk, requests: list[_CausalRequest], return_hidden: bool):
    """:func:`_forward_causal` over a frozen lower trunk: each request's whole row (its context,
    then its candidates) through the lower layers alone and kept (:meth:`Trunk.lower`), then the
    batch through the layers above. The same numbers, as rows of their own (no shared prefix)."""
    device, pad_id = llm.device, llm.tokenizer.pad_token_id
    attention = _base_config(llm.model)._attn_implementation
    mask_dtype = llm.model.dtype if attention == "eager" else None
    lower, rows = [], []
    for request in requests:
        input_ids, positions, segment, keep, targets, flat = _pack_causal([request], 0, pad_id)
        key = (tuple(request.context), tuple(map(tuple, request.suffixes)), tuple(request.num_unscored))
        mask = _packed_mask(segment, 0, mask_dtype)[0].to(device)
        states = trunk.lower(key, input_ids[0].to(device), mask, positions[0].to(device))
        # the context's states are those of the prompt alone (causal): the frozen critic reads them
        trunk.cache.setdefault(_context_key(request.context), states[: len(request.context)])
        lower.append(states)
        rows.append((segment[0], keep[0], targets, flat, positions[0]))
    length = max(len(h) for h in lower)
    hidden = torch.zeros((len(requests), length, lower[0].shape[-1]), dtype=lower[0].dtype, device=device)
    segment = torch.full((len(requests), length), _PAD, dtype=torch.long)
    positions = torch.zeros((len(requests), length), dtype=torch.long)
    for row, (states, (own_segment, _, _, _, own_positions)) in enumerate(zip(lower, rows)):
        hidden[row, : len(states)] = states
        segment[row, : len(states)] = own_segment
        positions[row, : len(states)] = own_positions
    out = trunk.upper(hidden, _packed_mask(segment, 0, mask_dtype).to(device), positions.to(device))

    # each action token's log-probability, from the hidden state of the position that predicts it
    where, tokens, owners, sizes = [], [], [], []
    offset = 0
    for row, (_, _, targets, flat, _) in enumerate(rows):
        where += [(row, p) for _, p, _, _ in targets]
        tokens += [t for _, _, t, _ in targets]
        owners += [offset + c for _, _, _, c in targets]
        sizes.append(flat)
        offset += flat
    at = torch.tensor(where, device=device)
    logits = trunk.stack.lm_head(out[at[:, 0], at[:, 1]])
    picked = F.log_softmax(logits.float(), dim=-1)[torch.arange(len(tokens), device=device),
                                                   torch.tensor(tokens, device=device)]
    loglik = torch.zeros(offset, dtype=torch.float32, device=device).index_add(
        0, torch.tensor(owners, device=device), picked)
    prompt_hidden = None
    if return_hidden:
        last = torch.tensor([len(r.context) - 1 for r in requests], device=device)
        prompt_hidden = out[torch.arange(len(requests), device=device), last]
    return list(loglik.split(sizes)), prompt_hidden


_CONTEXT, _PAD = -2, -1


def _pack_causal(requests: list[_CausalRequest], shared: int, pad_id: int):
    """The batch's rows (after the ``shared`` prefix): each prompt's own context, then its candidates
    one after the other; each candidate sees the context and itself, and its positions restart after
    the context. Returns the token ids, positions, segments (``_CONTEXT``, a candidate's index, or
    ``_PAD``), where a kept logit predicts an action token, the targets ``(row, position predicting
    it, token, candidate)``, and the number of candidates."""
    rows = [r.context[shared:] + [t for suffix in r.suffixes for t in suffix] for r in requests]
    length = max(len(row) for row in rows)
    input_ids = torch.full((len(requests), length), pad_id, dtype=torch.long)
    positions = torch.zeros((len(requests), length), dtype=torch.long)
    segment = torch.full((len(requests), length), _PAD, dtype=torch.long)
    keep = torch.zeros((len(requests), length), dtype=torch.bool)
    targets: list[tuple[int, int, int, int]] = []
    flat = 0  # candidate index over the batch
    for row, request in enumerate(requests):
        own = len(request.context) - shared
        input_ids[row, : len(rows[row])] = torch.tensor(rows[row])
        positions[row, :own] = torch.arange(shared, shared + own)
        segment[row, :own] = _CONTEXT
        start = own
        for suffix, unscored in zip(request.suffixes, request.num_unscored):
            n = len(suffix)
            positions[row, start : start + n] = torch.arange(shared + own, shared + own + n)
            segment[row, start : start + n] = flat
            for t in range(unscored, n):  # action token t is predicted at the position before it
                before = start + t - 1 if t > 0 else own - 1
                keep[row, before] = True
                targets.append((row, before, suffix[t], flat))
            start += n
            flat += 1
    return input_ids, positions, segment, keep, targets, flat


def _packed_mask(segment: torch.Tensor, shared: int, dtype: torch.dtype | None) -> torch.Tensor:
    """The attention mask of the packed rows, ``(prompts, 1, length, shared + length)``: boolean
    (True = attend, what SDPA takes fastest) or, given a ``dtype``, additive (what eager attention adds).

    Context tokens see the shared prefix and the earlier context (causal); a candidate's tokens
    see the prefix, the whole context and the earlier tokens of the same candidate; a pad sees only
    itself, so that no row of the softmax is empty.
    """
    length = segment.shape[1]
    real = segment != _PAD
    causal = torch.ones((length, length), dtype=torch.bool).tril()
    key_is_context = (segment == _CONTEXT)[:, None, :]
    same_candidate = (segment[:, :, None] == segment[:, None, :]) & (segment >= 0)[:, :, None]
    sees = causal & ((key_is_context & real[:, :, None]) | same_candidate)
    sees |= torch.eye(length, dtype=torch.bool)
    sees_prefix = real[:, :, None].expand(-1, -1, shared)
    allowed = torch.cat([sees_prefix, sees], dim=2)[:, None]
    if dtype is None:
        return allowed
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)


# ----------------------------------------------------------------------------------------------
# Seq2seq language models


def _score_seq2seq(llm, prompts, candidates, truncation, return_hidden, max_length, max_batch_tokens):
    tokenizer, model, device = llm.tokenizer, llm.model, llm.device
    if max_length is None and getattr(tokenizer, "model_max_length", 0) < 1_000_000:
        max_length = tokenizer.model_max_length
    prompt_ids = tokenizer(list(prompts), add_special_tokens=True)["input_ids"]
    for i, ids in enumerate(prompt_ids):
        if max_length is not None and len(ids) > max_length:
            if truncation == "error":
                raise InvalidArgumentError(
                    f"prompt {i} is {len(ids)} tokens, more than the model's {max_length}; "
                    "shorten it or pass truncation='left'"
                )
            prompt_ids[i] = ids[len(ids) - max_length :]
    action_ids = [tokenizer(list(cands), add_special_tokens=False)["input_ids"] for cands in candidates]
    start_id = _base_config(model).decoder_start_token_id
    pad_id = tokenizer.pad_token_id

    loglik, num_tokens, hidden = [None] * len(prompts), [None] * len(prompts), [None] * len(prompts)
    for group in _batches([len(ids) for ids in prompt_ids], max_batch_tokens):
        encoder_ids, encoder_mask = _pad_right([prompt_ids[i] for i in group], pad_id, device)
        encoded = model.get_encoder()(input_ids=encoder_ids, attention_mask=encoder_mask)
        # One decoder row per candidate, reading its prompt's encoding: [start, a_1, ..., a_n].
        rows = [row for row, i in enumerate(group) for _ in action_ids[i]]
        decoder_tokens = [[start_id] + a for i in group for a in action_ids[i]]
        decoder_ids, decoder_mask = _pad_right(decoder_tokens, pad_id, device)
        rows_t = torch.tensor(rows, device=device)
        out = model(
            encoder_outputs=(encoded.last_hidden_state[rows_t],),
            attention_mask=encoder_mask[rows_t],
            decoder_input_ids=decoder_ids,
            decoder_attention_mask=decoder_mask,
            output_hidden_states=return_hidden,
        )
        logprobs = F.log_softmax(out.logits[:, :-1].float(), dim=-1)
        token_logprobs = logprobs.gather(2, decoder_ids[:, 1:, None]).squeeze(2)
        token_logprobs = token_logprobs * decoder_mask[:, 1:]
        per_candidate = token_logprobs.sum(-1)
        start = 0
        for i in group:
            n = len(action_ids[i])
            loglik[i] = per_candidate[start : start + n]
            num_tokens[i] = torch.tensor([len(a) for a in action_ids[i]], dtype=torch.long, device=device)
            if return_hidden:
                hidden[i] = out.decoder_hidden_states[-1][start, 0]
            start += n
    return loglik, num_tokens, torch.stack(hidden) if return_hidden else None


def _pad_right(sequences: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids padded on the right into one tensor, and the matching attention mask."""
    width = max(len(s) for s in sequences)
    ids = torch.tensor([s + [pad_id] * (width - len(s)) for s in sequences], dtype=torch.long)
    mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in sequences], dtype=torch.long)
    return ids.to(device), mask.to(device)


def prompt_hidden_states(llm: LLM, prompts: Sequence[str], batch_size: int = 16,
                         max_length: int | None = None, trunk: Trunk | None = None, upper=None) -> torch.Tensor:
    """The last layer's hidden state of each prompt, ``(num_prompts, hidden_size)``: at its last
    token (causal models; never a pad position) or at decoder position 0 (seq2seq), from a forward
    pass of the prompts alone. A critic on the frozen base model reads these (TWOSOME).

    Prompts longer than ``max_length`` (default: the model's context) keep their last tokens.
    With a ``trunk`` (causal models), each prompt's lower states come from it (kept; a batch of
    one), and the layers above are those of ``upper`` (a :class:`~groundrl.llm.trunk.DecoderStack`;
    default: the trunk's own model's).

    >>> from groundrl.llm import load_llm
    >>> prompt_hidden_states(load_llm("tiny-llama"), ["a short prompt", "a somewhat longer prompt here"]).shape
    torch.Size([2, 64])
    """
    tokenizer, model, device = llm.tokenizer, llm.model, llm.device
    config = _base_config(model)
    if max_length is None:
        max_length = getattr(config, "max_position_embeddings", None) or getattr(tokenizer, "model_max_length", None)
    ids = tokenizer(list(prompts), add_special_tokens=True)["input_ids"]
    if max_length and max_length < 1_000_000:
        ids = [x[len(x) - max_length:] if len(x) > max_length else x for x in ids]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    if trunk is not None:
        return torch.stack([_last_state_over_trunk(llm, trunk, x, upper) for x in ids])
    hidden = []
    for start in range(0, len(ids), batch_size):
        chunk = ids[start : start + batch_size]
        input_ids, mask = _pad_right(chunk, pad_id, device)
        if llm.kind == "seq2seq":
            decoder = torch.full((len(chunk), 1), config.decoder_start_token_id, dtype=torch.long, device=device)
            out = model(input_ids=input_ids, attention_mask=mask, decoder_input_ids=decoder, output_hidden_states=True)
            hidden.append(out.decoder_hidden_states[-1][:, 0])
        else:
            out = model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True, logits_to_keep=1)
            last = mask.sum(-1) - 1
            hidden.append(out.hidden_states[-1][torch.arange(len(chunk), device=device), last])
    return torch.cat(hidden)


def _context_key(ids) -> tuple:
    return ("context", tuple(ids))


def _last_state_over_trunk(llm, trunk: Trunk, ids: list[int], upper) -> torch.Tensor:
    device = llm.device
    segment = torch.full((1, len(ids)), _CONTEXT, dtype=torch.long)
    attention = _base_config(llm.model)._attn_implementation
    mask = _packed_mask(segment, 0, llm.model.dtype if attention == "eager" else None).to(device)
    positions = torch.arange(len(ids), device=device)[None]
    lower = trunk.lower(_context_key(ids), torch.tensor(ids, device=device), mask[0], positions[0])
    return trunk.upper(lower[None], mask, positions, stack=upper)[0, -1]


# ----------------------------------------------------------------------------------------------
# The reference


def score_naive(
    llm: LLM,
    prompts: Sequence[str],
    candidates: Sequence[Sequence[str]],
    normalization: Normalization | str = "sum",
    separator: str = " ",
    pairs_per_batch: int = 16,
) -> list[torch.Tensor]:
    """The slow, obviously correct definition of :func:`score`: every (prompt, candidate) pair runs
    in full, and ``log_softmax`` over the whole sequence picks the action tokens' log-probs. Used
    by the tests and the benchmark as the reference."""
    _check_request(prompts, candidates, normalization, "error")
    tokenizer, model, device = llm.tokenizer, llm.model, llm.device
    pairs = [(i, p, a) for i, (p, cands) in enumerate(zip(prompts, candidates)) for a in cands]
    totals, counts = [], []
    for start in range(0, len(pairs), pairs_per_batch):
        batch = pairs[start : start + pairs_per_batch]
        with torch.no_grad():
            if llm.kind == "seq2seq":
                encoded = tokenizer([p for _, p, _ in batch], padding=True, return_tensors="pt").to(device)
                actions = [tokenizer(a, add_special_tokens=False)["input_ids"] for _, _, a in batch]
                start_id = _base_config(model).decoder_start_token_id
                decoder_ids, _ = _pad_right([[start_id] + a for a in actions], tokenizer.pad_token_id, device)
                logits = model(**encoded, decoder_input_ids=decoder_ids).logits
                for row, action in enumerate(actions):
                    logprobs = F.log_softmax(logits[row].float(), dim=-1)
                    totals.append(sum(logprobs[t, action[t]] for t in range(len(action))))
                    counts.append(len(action))
            else:
                special = set(tokenizer.all_special_ids)
                encoded = tokenizer([p + separator + a for _, p, a in batch], return_offsets_mapping=True)
                ids, mask = _pad_right(encoded["input_ids"], tokenizer.pad_token_id, device)
                logprobs = F.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), dim=-1)
                for row, (_, p, _) in enumerate(batch):
                    boundary = len(p) + len(separator)
                    tokens, offsets = encoded["input_ids"][row], encoded["offset_mapping"][row]
                    flags = _action_token_flags(tokens, offsets, boundary, special)
                    positions = [t for t, is_action in enumerate(flags) if is_action]
                    totals.append(sum(logprobs[row, t - 1, tokens[t]] for t in positions))
                    counts.append(len(positions))
    results, k = [], 0
    for cands in candidates:
        loglik = torch.stack([torch.as_tensor(totals[k + j]) for j in range(len(cands))]).float()
        if normalization == "token":
            loglik = loglik / torch.tensor(counts[k : k + len(cands)], device=loglik.device)
        elif normalization == "word":
            loglik = loglik / torch.tensor([len(a.split()) for a in cands], device=loglik.device)
        results.append(loglik)
        k += len(cands)
    return results
