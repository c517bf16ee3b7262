"""Batching, shared by every path of the scorer: requests grouped within a token budget, token
lists padded into tensors, and the model's config read through a peft wrapper.

Separate because the causal path, the seq2seq path, the prompt hidden states and the reference
all use these, and none of them owns the others.
"""

from __future__ import annotations

import torch


def batches(lengths: list[int], max_batch_tokens: int, max_padding: float = 0.25) -> list[list[int]]:
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


def pad_right(sequences: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids padded on the right into one tensor, and the matching attention mask."""
    width = max(len(s) for s in sequences)
    ids = torch.tensor([s + [pad_id] * (width - len(s)) for s in sequences], dtype=torch.long)
    mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in sequences], dtype=torch.long)
    return ids.to(device), mask.to(device)


def base_config(model):
    """The transformers config, also through a peft wrapper."""
    return model.get_base_model().config if hasattr(model, "get_base_model") else model.config
