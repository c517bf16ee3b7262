"""Language models: loading (:func:`load_llm`), the action scorer, LoRA."""

from groundrl.llm.loading import DEFAULT_MODEL, LLM, cache_dir, list_models, load_llm
from groundrl.llm.lora import add_lora
from groundrl.llm.scoring import ActionScores, score, score_details, score_naive
from groundrl.llm.tiny import TINY_MODELS

__all__ = [
    "DEFAULT_MODEL",
    "LLM",
    "TINY_MODELS",
    "ActionScores",
    "add_lora",
    "cache_dir",
    "list_models",
    "load_llm",
    "score",
    "score_details",
    "score_naive",
]
