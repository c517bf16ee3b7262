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

Where it is
-----------
- :mod:`~groundrl.llm.scoring.api`: :func:`score`, :func:`score_details`, :class:`Normalization`,
  :class:`ActionScores`, and the checks of a request;
- :mod:`~groundrl.llm.scoring.causal`: the causal path (tokenizing, the two forward passes, the
  layers above a frozen trunk), laying out rows with :mod:`~groundrl.llm.scoring.packing`;
- :mod:`~groundrl.llm.scoring.seq2seq`: the seq2seq path;
- :mod:`~groundrl.llm.scoring.hidden`: :func:`prompt_hidden_states`, the prompts alone, for a critic;
- :mod:`~groundrl.llm.scoring.naive`: :func:`score_naive`, the reference the tests compare to;
- :mod:`~groundrl.llm.scoring.batching`: grouping and padding, which every path shares.
"""

from groundrl.llm.scoring.api import NORMALIZATIONS, ActionScores, Normalization, Truncation, score, score_details
from groundrl.llm.scoring.hidden import prompt_hidden_states
from groundrl.llm.scoring.naive import score_naive

__all__ = [
    "NORMALIZATIONS",
    "ActionScores",
    "Normalization",
    "Truncation",
    "prompt_hidden_states",
    "score",
    "score_details",
    "score_naive",
]
