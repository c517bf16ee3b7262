"""The causal path of the scorer (decoder-only models): tokenize each prompt with its candidates,
find the action's tokens, and score a batch in two forward passes, the prefix shared by all
prompts once and then one packed row per prompt, or through the layers above a frozen trunk
(see the package docstring: "Which tokens belong to the action", "How it is fast").

Separate from the seq2seq path, which tokenizes and runs the model differently, and from the
API, which only picks a path and normalizes what it returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from groundrl.errors import InvalidArgumentError
from groundrl.llm.scoring.batching import base_config, batches
from groundrl.llm.scoring.packing import (
    PAD,
    CausalRequest,
    context_key,
    mask_dtype,
    pack_causal,
    packed_mask,
    row_key,
)

if TYPE_CHECKING:  # for annotations only: loading (the LLM and its .score methods) imports the scorer
    from groundrl.llm.loading import LLM
    from groundrl.llm.trunk import Trunk


def score_causal(llm: LLM, prompts, candidates, separator, truncation, return_hidden, max_length, max_batch_tokens,
                 trunk: Trunk | None = None):
    """Per prompt, its candidates' log-likelihoods and token counts, and (with ``return_hidden``)
    the prompts' last hidden states stacked: :func:`~groundrl.llm.scoring.score_details`'s work
    for a causal model."""
    if max_length is None:
        max_length = getattr(base_config(llm.model), "max_position_embeddings", None)
    requests = tokenize_causal(llm.tokenizer, prompts, candidates, separator, truncation, max_length)
    loglik: list[torch.Tensor | None] = [None] * len(requests)
    num_tokens: list[torch.Tensor | None] = [None] * len(requests)
    hidden: list[torch.Tensor | None] = [None] * len(requests)
    row_lengths = [len(r.context) + sum(len(s) for s in r.suffixes) for r in requests]
    forward = _forward_causal if trunk is None else lambda llm, batch, hidden: _forward_upper(llm, trunk, batch, hidden)
    for group in batches(row_lengths, max_batch_tokens):
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


def tokenize_causal(tokenizer, prompts, candidates, separator, truncation, max_length) -> list[CausalRequest]:
    """Each prompt with its candidates as a :class:`~groundrl.llm.scoring.packing.CausalRequest`:
    ``prompt + separator + candidate`` tokenized whole, the tokens before the action that all
    candidates share kept once, truncated on the left to ``max_length`` if asked."""
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
            in_action = action_token_flags(ids, offsets, boundary, special_ids)
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
        shared = common_prefix_length(contexts)
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
            CausalRequest(
                context=context,
                suffixes=[c[shared:] + a for c, a in zip(contexts, actions)],
                num_unscored=[len(c) - shared for c in contexts],
            )
        )
    return requests


def action_token_flags(ids, offsets, boundary: int, special_ids: set[int]) -> list[bool]:
    """Which tokens of ``prompt + separator + action`` belong to the action: those that cover at
    least one character after ``boundary`` (= ``len(prompt + separator)``), special tokens aside."""
    return [end > boundary and tok not in special_ids for tok, (_, end) in zip(ids, offsets)]


def common_prefix_length(sequences: list[list[int]]) -> int:
    """How many leading tokens all ``sequences`` have in common."""
    first = sequences[0]
    length = min(len(s) for s in sequences)
    for other in sequences[1:]:
        n = 0
        while n < length and other[n] == first[n]:
            n += 1
        length = n
    return length


def _forward_causal(llm, requests: list[CausalRequest], return_hidden: bool):
    """Score one batch of requests; returns per-request log-likelihood tensors and (optionally)
    the prompts' last hidden states."""
    model, device = llm.model, llm.device
    num_prompts = len(requests)

    # 1. The prefix shared by all prompts, once. Every prompt keeps at least one token of its own,
    # whose logits predict its candidates' first tokens.
    shared = common_prefix_length([r.context for r in requests]) if num_prompts > 1 else 0
    shared = min(shared, min(len(r.context) for r in requests) - 1)
    cache = None
    if shared > 0:
        prefix = torch.tensor([requests[0].context[:shared]], device=device)
        cache = model(input_ids=prefix, use_cache=True, logits_to_keep=1).cache
        cache.batch_repeat_interleave(num_prompts)

    # 2. One row per prompt: the rest of its context, then all its candidates packed one after the other.
    input_ids, positions, segment, keep, targets, flat = pack_causal(requests, shared, llm.tokenizer.pad_token_id)
    length = input_ids.shape[1]

    attention = base_config(model)._attn_implementation
    if attention not in ("sdpa", "eager"):
        raise InvalidArgumentError(
            f"the scorer packs candidates with a custom attention mask, which '{attention}' attention does not "
            "take; use model.set_attn_implementation('sdpa') (or 'eager')"
        )
    mask = packed_mask(segment, shared, mask_dtype(model))
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


def _forward_upper(llm, trunk: Trunk, requests: list[CausalRequest], return_hidden: bool):
    """:func:`_forward_causal` over a frozen lower trunk: each request's whole row (its context,
    then its candidates) through the lower layers alone and kept (:meth:`Trunk.lower`), then the
    batch through the layers above. The same numbers, as rows of their own (no shared prefix)."""
    device, pad_id = llm.device, llm.tokenizer.pad_token_id
    dtype = mask_dtype(llm.model)
    lower, rows = [], []
    for request in requests:
        input_ids, positions, segment, keep, targets, flat = pack_causal([request], 0, pad_id)
        mask = packed_mask(segment, 0, dtype)[0].to(device)
        states = trunk.lower(row_key(request), input_ids[0].to(device), mask, positions[0].to(device))
        # the context's states are those of the prompt alone (causal): the frozen critic reads them
        trunk.cache.setdefault(context_key(request.context), states[: len(request.context)])
        lower.append(states)
        rows.append((segment[0], keep[0], targets, flat, positions[0]))
    length = max(len(h) for h in lower)
    hidden = torch.zeros((len(requests), length, lower[0].shape[-1]), dtype=lower[0].dtype, device=device)
    segment = torch.full((len(requests), length), PAD, dtype=torch.long)
    positions = torch.zeros((len(requests), length), dtype=torch.long)
    for row, (states, (own_segment, _, _, _, own_positions)) in enumerate(zip(lower, rows)):
        hidden[row, : len(states)] = states
        segment[row, : len(states)] = own_segment
        positions[row, : len(states)] = own_positions
    out = trunk.upper(hidden, packed_mask(segment, 0, dtype).to(device), positions.to(device))

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
