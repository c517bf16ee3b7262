"""A trained LLM agent as a folder any Hugging Face user can load (``groundrl export``), and back.

An export of a run's checkpoint holds

- the policy: the LoRA adapter in PEFT's format (``adapter_config.json``,
  ``adapter_model.safetensors``: ``PeftModel.from_pretrained(base, DIR)``), or, with ``merge`` (and
  always for a fully fine-tuned actor), the whole model (``config.json``, ``model.safetensors``:
  ``AutoModelForCausalLM.from_pretrained(DIR)``);
- the tokenizer;
- the heads groundrl trains beside the LLM, as safetensors: ``critic.safetensors`` (the value head,
  keys ``value_head.*``, and a critic's own layers, ``critic_layers.*``) and, for GLAM's action-head
  ablation, ``action_head.safetensors``;
- ``groundrl.yaml``: the run's resolved settings (``groundrl train --config groundrl.yaml``
  trains it again); ``groundrl.json``: what was exported, from where, after how many decisions;
- ``README.md``: the model card.

``groundrl eval DIR`` plays an export, and ``groundrl train --init DIR`` starts a new run from its
weights (:func:`check_init`, :func:`load_weights`). The frozen-base critic reads the *base* model's
hidden states: an adapter export keeps that base, a merged one makes the merged model the new base.
"""

from groundrl.train.export.card import NotThisAgent, evaluations_beside, model_card, read_evaluation
from groundrl.train.export.layout import (
    ACTION_HEAD,
    CRITIC,
    FORMAT,
    META,
    NOT_CARRIED,
    SETTINGS,
    ExportError,
    is_export,
)
from groundrl.train.export.read import (
    carried_settings,
    check_init,
    init_settings,
    load_export,
    load_weights,
    read_export,
)
from groundrl.train.export.write import config_for_export, export

__all__ = ["ACTION_HEAD", "CRITIC", "ExportError", "FORMAT", "META", "NOT_CARRIED",
           "NotThisAgent", "SETTINGS", "carried_settings", "check_init", "config_for_export", "evaluations_beside",
           "export", "init_settings", "is_export", "load_export", "load_weights", "model_card", "read_evaluation",
           "read_export"]
