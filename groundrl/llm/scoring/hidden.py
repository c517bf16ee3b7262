"""The prompts' last hidden states alone, from a forward pass of the prompts without their
candidates: what a critic on the frozen base model reads (TWOSOME).

Separate from the scorer's paths because no candidate is scored here: :func:`prompt_hidden_states`
serves both model kinds, and over a trunk it reads the states the causal path kept for a prompt's
context (:func:`~groundrl.llm.scoring.packing.context_key`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from groundrl.llm.scoring.batching import base_config, pad_right
from groundrl.llm.scoring.packing import CONTEXT, context_key, mask_dtype, packed_mask

if TYPE_CHECKING:  # for annotations only: loading (the LLM and its .score methods) imports the scorer
    from groundrl.llm.loading import LLM
    from groundrl.llm.trunk import Trunk


def prompt_hidden_states(llm: LLM, prompts: Sequence[str], batch_size: int = 16,
                         max_length: int | None = None, trunk: Trunk | None = None, above=None) -> torch.Tensor:
    """The last layer's hidden state of each prompt, ``(num_prompts, hidden_size)``: at its last
    token (causal models; never a pad position) or at decoder position 0 (seq2seq), from a forward
    pass of the prompts alone. A critic on the frozen base model reads these (TWOSOME).

    Prompts longer than ``max_length`` (default: the model's context) keep their last tokens.
    With a ``trunk`` (causal models), each prompt's lower states come from it (kept; a batch of
    one), and the layers above are those of ``above`` (a :class:`~groundrl.llm.trunk.Above` or
    :class:`~groundrl.llm.trunk.OwnLayers`; default: the trunk's own model's).

    >>> from groundrl.llm import load_llm
    >>> prompt_hidden_states(load_llm("tiny-llama"), ["a short prompt", "a somewhat longer prompt here"]).shape
    torch.Size([2, 64])
    """
    tokenizer, model, device = llm.tokenizer, llm.model, llm.device
    config = base_config(model)
    if max_length is None:
        max_length = getattr(config, "max_position_embeddings", None) or getattr(tokenizer, "model_max_length", None)
    ids = tokenizer(list(prompts), add_special_tokens=True)["input_ids"]
    if max_length and max_length < 1_000_000:
        ids = [x[len(x) - max_length:] if len(x) > max_length else x for x in ids]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    if trunk is not None:
        return torch.stack([_last_state_over_trunk(llm, trunk, x, above) for x in ids])
    hidden = []
    for start in range(0, len(ids), batch_size):
        chunk = ids[start : start + batch_size]
        input_ids, mask = pad_right(chunk, pad_id, device)
        if llm.kind == "seq2seq":
            decoder = torch.full((len(chunk), 1), config.decoder_start_token_id, dtype=torch.long, device=device)
            out = model(input_ids=input_ids, attention_mask=mask, decoder_input_ids=decoder, output_hidden_states=True)
            hidden.append(out.decoder_hidden_states[-1][:, 0])
        else:
            out = model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True, logits_to_keep=1)
            last = mask.sum(-1) - 1
            hidden.append(out.hidden_states[-1][torch.arange(len(chunk), device=device), last])
    return torch.cat(hidden)


def _last_state_over_trunk(llm, trunk: Trunk, ids: list[int], above) -> torch.Tensor:
    """One prompt's last hidden state: its lower states from the trunk (kept under its
    :func:`context_key`, which the scorer may have filled), then the layers of ``above``."""
    device = llm.device
    segment = torch.full((1, len(ids)), CONTEXT, dtype=torch.long)
    mask = packed_mask(segment, 0, mask_dtype(llm.model)).to(device)
    positions = torch.arange(len(ids), device=device)[None]
    lower = trunk.lower(context_key(ids), torch.tensor(ids, device=device), mask[0], positions[0])
    return trunk.upper(lower[None], mask, positions, above=above)[0, -1]
