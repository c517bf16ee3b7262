"""LoRA adapters through ``peft``."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
from peft import LoraConfig, get_peft_model

from groundrl.errors import InvalidArgumentError
from groundrl.llm.loading import LLM


def add_lora(
    llm: LLM,
    r: int = 8,
    alpha: int = 16,
    dropout: float = 0.0,
    target_modules: Sequence[str] = ("q_proj", "v_proj"),
    layers: Sequence[int] | None = None,
) -> LLM:
    """Wrap the model with trainable LoRA adapters (TWOSOME's defaults: r=8, alpha=16, dropout 0,
    on q_proj and v_proj), in the transformer layers ``layers`` (default: all); the base weights
    are frozen. Returns the same :class:`LLM`, modified.

    ``llm.model.disable_adapter()`` is then a context manager that runs the frozen base model,
    which the frozen-base critic and the reference policy use at no extra memory cost.

    >>> from groundrl.llm import load_llm
    >>> llm = add_lora(load_llm("tiny-llama"))
    >>> llm.model.print_trainable_parameters()  # doctest: +ELLIPSIS
    trainable params: ...
    """
    config = LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=list(target_modules),
        task_type="SEQ_2_SEQ_LM" if llm.kind == "seq2seq" else "CAUSAL_LM",
        layers_to_transform=list(layers) if layers is not None else None,
        layers_pattern="layers" if layers is not None else None,
    )
    with warnings.catch_warnings():
        # peft reads transformers' deprecated ``is_gradient_checkpointing``: its FutureWarning is
        # about peft's code, not the user's, and says nothing they can act on.
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        try:
            llm.model = get_peft_model(llm.model, config)
        except ValueError as error:  # peft's NoMatchingPeftModuleError: no module of the model has those names
            linear = sorted({name.rsplit(".", 1)[-1] for name, module in llm.model.named_modules()
                             if isinstance(module, torch.nn.Linear)})
            raise InvalidArgumentError(f"agent.llm.lora_targets {list(target_modules)} are not modules of {llm.name} "
                                       f"({str(error).splitlines()[0][:120]}); its linear layers are named "
                                       f"{', '.join(linear[:12])}") from None
    return llm
