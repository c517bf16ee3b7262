"""A frozen lower trunk: when only the top ``K`` layers of a decoder train, the layers below them
compute the same hidden states for a text every time, so they run once per text and are kept.

A decoder-only model (Llama, Mistral, Qwen2, SmolLM, ...) is an embedding, a stack of layers, a
final norm and the LM head. :class:`Trunk` splits the stack at ``num_frozen``: :meth:`Trunk.lower`
runs the embedding and the frozen layers (no gradient) over a text and keeps the result, in a
least-recently-used cache bounded in bytes; :func:`run_upper` runs the layers above, the norm,
and hands the hidden states to the LM head where the caller asks. The scorer packs a prompt and
its candidates into one row (:mod:`groundrl.llm.scoring`), and a row's states are those of its
own tokens alone (a batch of one): they do not depend on what else was in a batch, so the kept
states equal the ones a full forward computes, up to float rounding (tested).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import torch
from torch import nn

from groundrl.errors import InvalidArgumentError
from groundrl.llm.cache import LRU


@dataclass
class DecoderStack:
    """The parts of a decoder-only model the trunk runs one by one."""

    embed: nn.Module
    layers: nn.ModuleList
    norm: nn.Module
    rotary: nn.Module
    lm_head: nn.Module


def decoder_stack(model: nn.Module) -> DecoderStack:
    """The parts of a transformers causal LM (also through a peft wrapper): ``model.model.embed_tokens``,
    ``.layers``, ``.norm``, ``.rotary_emb`` and ``model.lm_head``.

    Raises:
        InvalidArgumentError: the model is not laid out so (a seq2seq model, another family).
    """
    causal = model.get_base_model() if hasattr(model, "get_base_model") else model
    inner = getattr(causal, "model", None)
    parts = {"embed": getattr(inner, "embed_tokens", None), "layers": getattr(inner, "layers", None),
             "norm": getattr(inner, "norm", None), "rotary": getattr(inner, "rotary_emb", None),
             "lm_head": getattr(causal, "lm_head", None)}
    if any(part is None for part in parts.values()):
        raise InvalidArgumentError(
            f"agent.llm.train_layers needs a decoder-only model laid out as Llama (model.layers, model.norm, "
            f"lm_head); {type(causal).__name__} is not: use agent.llm.train_layers=all")
    return DecoderStack(**parts)


def run_layers(stack: DecoderStack, hidden: torch.Tensor, layers: slice, mask: torch.Tensor,
               positions: torch.Tensor) -> torch.Tensor:
    """``hidden`` ``(rows, length, d)`` through ``stack.layers[layers]``, with the attention
    ``mask`` ``(rows, 1, length, length)`` (boolean for SDPA, additive for eager) and position ids."""
    position_embeddings = stack.rotary(hidden, position_ids=positions)
    for layer in stack.layers[layers]:
        hidden = layer(hidden, attention_mask=mask, position_ids=positions, position_embeddings=position_embeddings)
    return hidden


class Trunk:
    """The ``num_frozen`` lowest layers of a decoder, each text's output kept (``capacity_bytes`` at most).

    Args:
        model: the causal LM (a peft wrapper too: the frozen layers have no adapters).
        num_frozen: how many of the lowest layers never train.
        capacity_bytes: the most memory the kept hidden states take; the least recently used go first.
    """

    def __init__(self, model: nn.Module, num_frozen: int, capacity_bytes: int):
        self.stack = decoder_stack(model)
        self.num_frozen = num_frozen
        self.cache = _BytesLRU(capacity_bytes)

    @property
    def num_layers(self) -> int:
        return len(self.stack.layers)

    def lower(self, key: Hashable, input_ids: torch.Tensor, mask: torch.Tensor,
              positions: torch.Tensor) -> torch.Tensor:
        """The hidden states entering the first trained layer for one row, ``(length, d)``: kept
        under ``key`` (what identifies the row's tokens, mask and positions), else computed."""
        if key in self.cache:
            return self.cache[key]
        with torch.no_grad():
            hidden = self.stack.embed(input_ids[None])
            hidden = run_layers(self.stack, hidden, slice(0, self.num_frozen), mask[None], positions[None])[0]
        self.cache[key] = hidden
        return hidden

    def upper(self, hidden: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor,
              stack: DecoderStack | None = None) -> torch.Tensor:
        """The last layer's normalized hidden states of rows whose lower states are ``hidden``,
        through the upper layers of ``stack`` (default: the trunk's model; a frozen copy of the
        initial model for the critic of a fully trained one)."""
        stack = stack or self.stack
        return stack.norm(run_layers(stack, hidden, slice(self.num_frozen, None), mask, positions))


class _BytesLRU(LRU):
    """An LRU of tensors whose capacity is in bytes."""

    def __init__(self, capacity_bytes: int):
        super().__init__(capacity=capacity_bytes)
        self.size = 0

    def __setitem__(self, key, value: torch.Tensor) -> None:
        if key in self._entries:
            self.size -= _bytes(self._entries[key])
        self._entries[key] = value
        self._entries.move_to_end(key)
        self.size += _bytes(value)
        while self.size > self.capacity and len(self._entries) > 1:
            _, dropped = self._entries.popitem(last=False)
            self.size -= _bytes(dropped)

    def __delitem__(self, key) -> None:
        self.size -= _bytes(self._entries.pop(key))


def _bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()
