"""A frozen lower trunk: when only the top ``K`` layers of a decoder train, the layers below them
compute the same hidden states for a text every time, so they run once per text and are kept.

A decoder-only model (Llama, Mistral, Qwen2, SmolLM, ...) is an embedding, a stack of layers, a
final norm and the LM head. :class:`Trunk` splits the stack at ``num_frozen``: :meth:`Trunk.lower`
runs the embedding and the frozen layers (no gradient) over a text and keeps the result, in a
least-recently-used cache bounded in bytes; :meth:`Trunk.upper` runs the layers above and the
norm (the model's, or those of a critic of its own: :class:`OwnLayers`). The scorer packs a prompt and
its candidates into one row (:mod:`groundrl.llm.scoring`), and a row's states are those of its
own tokens alone (a batch of one): they do not depend on what else was in a batch, so the kept
states equal the ones a full forward computes, up to float rounding (tested).
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Iterable, Sequence
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


@dataclass
class Above:
    """Layers and a norm that run over a trunk's states in place of the model's own trained layers:
    a frozen copy's (the critic of a fully trained model), or a critic's own trainable ones
    (:class:`OwnLayers`)."""

    layers: Sequence[nn.Module]
    norm: nn.Module


class OwnLayers(nn.Module):
    """A trainable copy of the ``count`` layers just above a trunk, and of the final norm: what a
    critic of its own reads the trunk's kept states with (``agent.llm.critic=own``). Copied from
    ``model`` as it is, so build it before adapters are added to those layers."""

    def __init__(self, model: nn.Module, num_frozen: int, count: int):
        super().__init__()
        stack = decoder_stack(model)
        self.layers = nn.ModuleList(copy.deepcopy(stack.layers[i]) for i in range(num_frozen, num_frozen + count))
        self.norm = copy.deepcopy(stack.norm)
        self.requires_grad_(True)


def run_layers(rotary: nn.Module, layers: Iterable[nn.Module], hidden: torch.Tensor, mask: torch.Tensor,
               positions: torch.Tensor) -> torch.Tensor:
    """``hidden`` ``(rows, length, d)`` through ``layers``, with the attention ``mask``
    ``(rows, 1, length, length)`` (boolean for SDPA, additive for eager) and position ids."""
    position_embeddings = rotary(hidden, position_ids=positions)
    for layer in layers:
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
            hidden = run_layers(self.stack.rotary, self.stack.layers[:self.num_frozen], hidden, mask[None],
                                positions[None])[0]
        self.cache[key] = hidden
        return hidden

    def upper(self, hidden: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor,
              above: Above | OwnLayers | None = None) -> torch.Tensor:
        """The normalized hidden states of rows whose lower states are ``hidden``, after the
        model's layers above the trunk, or after those of ``above`` (a frozen copy of the initial
        model's for the critic of a fully trained one; a critic's own)."""
        layers, norm = (self.stack.layers[self.num_frozen:], self.stack.norm) if above is None else \
            (above.layers, above.norm)
        return norm(run_layers(self.stack.rotary, layers, hidden, mask, positions))


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
