"""The packed row of the causal path: one prompt's tokens, then all of its candidates one after
the other, each candidate seeing the prompt and itself only (see the package docstring, "How it
is fast").

Separate from the causal path because the prompt hidden states over a trunk read rows laid out
the same way, and because the layout and its attention mask are the part to check by eye: the
tokens (:class:`CausalRequest`), where each goes (:func:`pack_causal`), what it sees
(:func:`packed_mask`) and what names a row in the trunk's cache (:func:`row_key`, :func:`context_key`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from groundrl.llm.scoring.batching import base_config

CONTEXT, PAD = -2, -1  # segments of a packed row that are not a candidate's index


@dataclass
class CausalRequest:
    """One prompt, tokenized: its shared context and, per candidate, the tokens that follow it."""

    context: list[int]  # tokens common to all candidates' tokenizations, before the action
    suffixes: list[list[int]]  # per candidate: leftover context tokens, then the action tokens
    num_unscored: list[int]  # per candidate: how many leading suffix tokens are context, not action


def pack_causal(requests: list[CausalRequest], shared: int, pad_id: int):
    """The batch's rows (after the ``shared`` prefix): each prompt's own context, then its candidates
    one after the other; each candidate sees the context and itself, and its positions restart after
    the context. Returns the token ids, positions, segments (``CONTEXT``, a candidate's index, or
    ``PAD``), where a kept logit predicts an action token, the targets ``(row, position predicting
    it, token, candidate)``, and the number of candidates."""
    rows = [r.context[shared:] + [t for suffix in r.suffixes for t in suffix] for r in requests]
    length = max(len(row) for row in rows)
    input_ids = torch.full((len(requests), length), pad_id, dtype=torch.long)
    positions = torch.zeros((len(requests), length), dtype=torch.long)
    segment = torch.full((len(requests), length), PAD, dtype=torch.long)
    keep = torch.zeros((len(requests), length), dtype=torch.bool)
    targets: list[tuple[int, int, int, int]] = []
    flat = 0  # candidate index over the batch
    for row, request in enumerate(requests):
        own = len(request.context) - shared
        input_ids[row, : len(rows[row])] = torch.tensor(rows[row])
        positions[row, :own] = torch.arange(shared, shared + own)
        segment[row, :own] = CONTEXT
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


def packed_mask(segment: torch.Tensor, shared: int, dtype: torch.dtype | None) -> torch.Tensor:
    """The attention mask of the packed rows, ``(prompts, 1, length, shared + length)``: boolean
    (True = attend, what SDPA takes fastest) or, given a ``dtype``, additive (what eager attention adds).

    Context tokens see the shared prefix and the earlier context (causal); a candidate's tokens
    see the prefix, the whole context and the earlier tokens of the same candidate; a pad sees only
    itself, so that no row of the softmax is empty.
    """
    length = segment.shape[1]
    real = segment != PAD
    causal = torch.ones((length, length), dtype=torch.bool).tril()
    key_is_context = (segment == CONTEXT)[:, None, :]
    same_candidate = (segment[:, :, None] == segment[:, None, :]) & (segment >= 0)[:, :, None]
    sees = causal & ((key_is_context & real[:, :, None]) | same_candidate)
    sees |= torch.eye(length, dtype=torch.bool)
    sees_prefix = real[:, :, None].expand(-1, -1, shared)
    allowed = torch.cat([sees_prefix, sees], dim=2)[:, None]
    if dtype is None:
        return allowed
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)


def mask_dtype(model) -> torch.dtype | None:
    """The ``dtype`` to give :func:`packed_mask` for ``model``: the model's own under eager
    attention (an additive mask), else ``None`` (a boolean mask, for SDPA)."""
    return model.dtype if base_config(model)._attn_implementation == "eager" else None


def row_key(request: CausalRequest) -> tuple:
    """What names a request's whole packed row (context, then candidates) in the trunk's cache."""
    return (tuple(request.context), tuple(map(tuple, request.suffixes)), tuple(request.num_unscored))


def context_key(ids) -> tuple:
    """What names a prompt's context alone in the trunk's cache: the scorer stores it, the critic
    reads it (tagged, so that it never equals a :func:`row_key`)."""
    return ("context", tuple(ids))
