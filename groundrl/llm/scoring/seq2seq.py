"""The seq2seq path of the scorer (encoder-decoder models: Flan-T5, GLAM): each prompt encoded
once, then one decoder row per candidate, tokenized alone and without a closing ``</s>``, read
from the decoder's start token; the separator is not used.

Separate from the causal path: nothing of the action-token search, the packing or the trunk
applies here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from groundrl.errors import InvalidArgumentError
from groundrl.llm.scoring.batching import base_config, batches, pad_right

if TYPE_CHECKING:  # for annotations only: loading (the LLM and its .score methods) imports the scorer
    from groundrl.llm.loading import LLM


def score_seq2seq(llm: LLM, prompts, candidates, truncation, return_hidden, max_length, max_batch_tokens):
    """Per prompt, its candidates' log-likelihoods and token counts, and (with ``return_hidden``)
    the decoder's last hidden states at position 0 stacked: :func:`~groundrl.llm.scoring.score_details`'s
    work for a seq2seq model."""
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
    start_id = base_config(model).decoder_start_token_id
    pad_id = tokenizer.pad_token_id

    loglik, num_tokens, hidden = [None] * len(prompts), [None] * len(prompts), [None] * len(prompts)
    for group in batches([len(ids) for ids in prompt_ids], max_batch_tokens):
        encoder_ids, encoder_mask = pad_right([prompt_ids[i] for i in group], pad_id, device)
        encoded = model.get_encoder()(input_ids=encoder_ids, attention_mask=encoder_mask)
        # One decoder row per candidate, reading its prompt's encoding: [start, a_1, ..., a_n].
        rows = [row for row, i in enumerate(group) for _ in action_ids[i]]
        decoder_tokens = [[start_id] + a for i in group for a in action_ids[i]]
        decoder_ids, decoder_mask = pad_right(decoder_tokens, pad_id, device)
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
