import importlib.util
import signal
import sys
from pathlib import Path

import pytest

from groundrl.llm import load_llm

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="session")
def load_benchmark():
    """``load_benchmark("worlds")``: benchmarks/worlds.py as a module. The benchmarks are scripts, not
    a package: some import one another (hence their folder on ``sys.path``) and some declare
    dataclasses, which look their module up in ``sys.modules``."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    return load


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
