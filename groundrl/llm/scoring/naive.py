"""The reference: :func:`score_naive`, the slow, obviously correct definition of
:func:`~groundrl.llm.scoring.score` that the tests and the benchmark compare the fast paths to.

Separate so that it stays plain: none of the fast paths' sharing, packing or caching, only the
checks of a request and the rule of which tokens are the action's, which define what is scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from groundrl.llm.scoring.api import Normalization, check_request
from groundrl.llm.scoring.batching import base_config, pad_right
from groundrl.llm.scoring.causal import action_token_flags

if TYPE_CHECKING:  # for annotations only: loading (the LLM and its .score methods) imports the scorer
    from groundrl.llm.loading import LLM


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
    check_request(prompts, candidates, normalization, "error")
    tokenizer, model, device = llm.tokenizer, llm.model, llm.device
    pairs = [(i, p, a) for i, (p, cands) in enumerate(zip(prompts, candidates)) for a in cands]
    totals, counts = [], []
    for start in range(0, len(pairs), pairs_per_batch):
        batch = pairs[start : start + pairs_per_batch]
        with torch.no_grad():
            if llm.kind == "seq2seq":
                encoded = tokenizer([p for _, p, _ in batch], padding=True, return_tensors="pt").to(device)
                actions = [tokenizer(a, add_special_tokens=False)["input_ids"] for _, _, a in batch]
                start_id = base_config(model).decoder_start_token_id
                decoder_ids, _ = pad_right([[start_id] + a for a in actions], tokenizer.pad_token_id, device)
                logits = model(**encoded, decoder_input_ids=decoder_ids).logits
                for row, action in enumerate(actions):
                    logprobs = F.log_softmax(logits[row].float(), dim=-1)
                    totals.append(sum(logprobs[t, action[t]] for t in range(len(action))))
                    counts.append(len(action))
            else:
                special = set(tokenizer.all_special_ids)
                encoded = tokenizer([p + separator + a for _, p, a in batch], return_offsets_mapping=True)
                ids, mask = pad_right(encoded["input_ids"], tokenizer.pad_token_id, device)
                logprobs = F.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), dim=-1)
                for row, (_, p, _) in enumerate(batch):
                    boundary = len(p) + len(separator)
                    tokens, offsets = encoded["input_ids"][row], encoded["offset_mapping"][row]
                    flags = action_token_flags(tokens, offsets, boundary, special)
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
