"""The arithmetic the model's passes run in: ``fp32``, or ``bf16-mixed`` (bfloat16 matmuls under
``torch.autocast``, with float32 weights, optimizer state, log-softmax, normalization and losses).

bf16 pays only where the hardware multiplies bf16 natively (CUDA GPUs from Ampere on; CPUs with
AVX-512 BF16 or AMX): elsewhere the CPU emulates it (the default model's scoring passes ran about
2x slower than fp32 on an AVX2 CPU, a plain bf16 matmul over 100x slower).
``auto`` picks bf16-mixed exactly there (:func:`native_bf16`).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from functools import lru_cache
from pathlib import Path

import torch
from torch import nn

from groundrl.errors import InvalidArgumentError

PRECISIONS = ("fp32", "bf16-mixed", "auto")


def check_precision(precision: str, dtype: str = "float32") -> None:
    """One line for a precision groundrl does not know, or bf16-mixed over weights that are not float32."""
    if precision not in PRECISIONS:
        raise InvalidArgumentError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if precision == "bf16-mixed" and dtype not in ("float32", "auto"):
        raise InvalidArgumentError("precision=bf16-mixed keeps float32 master weights: "
                                   f"set dtype=float32 (not {dtype}) or precision=fp32")


def resolve_precision(precision: str, device: torch.device | str, dtype: torch.dtype = torch.float32) -> str:
    """``fp32`` or ``bf16-mixed``: ``auto`` is bf16-mixed where the hardware has native bf16 and the
    weights are float32 (weights already in 16 bits run in their own precision)."""
    check_precision(precision)
    if precision != "auto":
        return precision
    return "bf16-mixed" if dtype == torch.float32 and native_bf16(device) else "fp32"


def native_bf16(device: torch.device | str) -> bool:
    """Whether ``device`` multiplies bfloat16 natively: a CUDA GPU that supports it, or a CPU with
    AVX-512 (``torch.backends.cpu.get_cpu_capability()``) whose flags include avx512_bf16 or amx_bf16."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device.type != "cpu":
        return False
    return (torch.backends.cpu.get_cpu_capability().startswith("AVX512")
            and bool(_cpu_flags() & {"avx512_bf16", "amx_bf16"}))


@lru_cache(maxsize=1)
def _cpu_flags() -> frozenset[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    return frozenset(word for line in text.splitlines() if line.startswith("flags")
                     for word in line.split(":")[1].split())


def autocast(precision: str, device: torch.device | str) -> AbstractContextManager:
    """The context a forward pass runs in: bf16 autocast for ``bf16-mixed``, nothing for ``fp32``."""
    if precision == "fp32":
        return nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)


def cast_frozen_weights(model: nn.Module) -> int:
    """For ``bf16-mixed``: the weights that never train, cast to bfloat16 once, here. Autocast casts
    every float32 weight a matmul reads to bfloat16 on every pass (it keeps a cast only for weights
    that train, and only within one pass): for a frozen model that is a copy of its weights per
    forward, which took more time than the matmuls themselves in BabyAI's evaluation (the profile
    in docs/training.md). A cast here gives the matmul the very bfloat16 values autocast would, so
    the scores are bit-equal; only the linear layers' weights change, and only those that do not
    require grad (norms, biases and the embedding lookup keep float32). A linear layer that shares
    its weight with the input embedding (tied LM head) gets a bfloat16 copy of its own.

    Call it once training has decided what trains (LoRA added, layers frozen), on a model whose
    passes all run under :func:`autocast` ``("bf16-mixed")``: outside it, float32 inputs meet
    bfloat16 weights and the matmul fails. Returns how many weights were cast."""
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    cast = 0
    for module in model.modules():
        weight = getattr(module, "weight", None)
        if (not isinstance(module, nn.Linear) or not isinstance(weight, nn.Parameter) or weight.requires_grad
                or weight.dtype != torch.float32):
            continue
        if id(weight) in embeddings:  # tied: the embedding keeps its float32 weight
            module.weight = nn.Parameter(weight.detach().to(torch.bfloat16), requires_grad=False)
        else:
            weight.data = weight.data.to(torch.bfloat16)
        cast += 1
    return cast
