"""Tiny randomly initialized language models, for tests and for smoke-testing a pipeline.

``load_llm("tiny-llama")`` and ``load_llm("tiny-t5")`` build a two-layer model with hidden size
64 from a config, with a real tokenizer trained on the fly (byte-level BPE like SmolLM2 and
GPT-2 for the causal model; a SentencePiece-style unigram with ``▁`` word markers and a closing
``</s>`` like T5 for the seq2seq model). Both are deterministic: the same weights and the same
vocabulary on every call, with no file and no network.
"""

from __future__ import annotations

import functools

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    T5Config,
    T5ForConditionalGeneration,
)

TINY_MODELS = ("tiny-llama", "tiny-t5")

# Words of the environments the tokenizers will meet, so that their merges look like a real
# vocabulary's (several tokens per rare word, one per common word).
_CORPUS = """
You are an agent in a grid world. Your goal is to go to the red ball and pick up the blue key.
Possible actions: turn left, turn right, go forward, pick up, drop, toggle.
You see a wall 2 steps forward. You see a wall 1 step left. You carry a yellow box.
You see a green door 3 steps right and 1 step forward. Put the purple ball next to the grey box.
Goal of the agent: open the door. Observation 0: a key 2 steps left. Action 0: go forward.
There are four rooms: the kitchen, the bathroom, the bedroom and the living room.
You are in the kitchen. In the kitchen, you notice a salmon, a microwave, a fridge and a table.
You need to put the pancake in the microwave and switch it on. Walk to the living room.
Grab the chips, grab the milk, walk to the sofa, sit on the sofa, switch on the TV.
There is a fixed cutting board in the room. You notice a tomato, a lettuce, an onion and a plate.
Pick up the tomato. Put the tomato on the cutting board. Chop the tomato. Serve the dish.
Your next action is to go to the delivery counter and deliver the salad to the customer.
The quick brown fox jumps over the lazy dog, and the agent learns from its rewards.
Instruction: open the blue door. Available actions: open the blue door, close the red box.
"""


def _train(tokenizer: Tokenizer, trainer) -> Tokenizer:
    lines = [line for line in _CORPUS.strip().splitlines() for _ in range(3)]
    tokenizer.train_from_iterator(lines, trainer=trainer)
    return tokenizer


@functools.cache
def _byte_level_bpe_json() -> str:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<|endoftext|>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    return _train(tokenizer, trainer).to_str()


@functools.cache
def _unigram_json() -> str:
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(
        vocab_size=400,
        special_tokens=["<pad>", "</s>", "<unk>"],
        unk_token="<unk>",
        show_progress=False,
    )
    tokenizer = _train(tokenizer, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    return tokenizer.to_str()


def tiny_tokenizer(kind: str) -> PreTrainedTokenizerFast:
    """A real fast tokenizer: byte-level BPE for ``"causal"``, T5-style unigram for ``"seq2seq"``."""
    if kind == "causal":
        return PreTrainedTokenizerFast(
            tokenizer_object=Tokenizer.from_str(_byte_level_bpe_json()),
            eos_token="<|endoftext|>",
            pad_token="<pad>",
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(_unigram_json()),
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
    )


def build_tiny(name: str, seed: int = 0):
    """Return ``(model, tokenizer, kind)`` for one of :data:`TINY_MODELS`."""
    kind = "seq2seq" if name == "tiny-t5" else "causal"
    tokenizer = tiny_tokenizer(kind)
    vocab_size = len(tokenizer)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if kind == "causal":
            config = LlamaConfig(
                vocab_size=vocab_size,
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                max_position_embeddings=2048,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
                bos_token_id=None,
                tie_word_embeddings=True,
                # A larger init than the default 0.02 gives the random model scores that differ
                # clearly between candidates, so tests notice a position off by one.
                initializer_range=0.2,
            )
            model = LlamaForCausalLM(config)
        else:
            config = T5Config(
                vocab_size=vocab_size,
                d_model=64,
                d_kv=16,
                d_ff=128,
                num_layers=2,
                num_decoder_layers=2,
                num_heads=4,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
                decoder_start_token_id=tokenizer.pad_token_id,
                feed_forward_proj="gated-gelu",
                tie_word_embeddings=False,
                initializer_factor=0.3,
            )
            model = T5ForConditionalGeneration(config)
    return model, tokenizer, kind
