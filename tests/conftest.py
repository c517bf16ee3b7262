import pytest

from groundrl.llm import load_llm


@pytest.fixture(scope="session")
def tiny_llama():
    return load_llm("tiny-llama")


@pytest.fixture(scope="session")
def tiny_t5():
    return load_llm("tiny-t5")


@pytest.fixture(scope="session")
def default_llm():
    """The real default model (SmolLM2-135M-Instruct), loaded once for all slow tests."""
    return load_llm()
