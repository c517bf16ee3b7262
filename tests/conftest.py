import signal

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


@pytest.fixture
def ctrl_c_raises():
    """SIGINT handled as an interactive Python handles it, whatever the test run inherited (a
    background job of a shell script starts with SIGINT ignored); put back afterwards."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
