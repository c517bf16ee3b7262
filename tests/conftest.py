"""Fixtures every test folder shares.

The suite is organised by what it protects (docs/testing.md says how to run each part):

- ``unit/``: environments, scoring, agents, the PPO maths, the trainer's contracts, on tiny random models;
- ``integration/``: the CLI, the replay page in a real browser, torchrun, the worlds on Java, the docs, faults;
- ``learning/``: that training learns (tiny models climbing from chance, the real default model) and
  computes what it computed before (the golden metrics);
- ``benchmarks/``: the scripts of ``benchmarks/``: their tables, records and resumption.

Tests marked ``slow`` run only in the whole suite (``bash scripts/quickstart.sh test-all``).
"""

import ast
import importlib.util
import json
import re
import signal
import sys
from pathlib import Path

import pytest

from groundrl.llm import load_llm

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
BENCHMARKS = ROOT / "benchmarks"

def pytest_addoption(parser):
    parser.addoption("--every-scienceworld-task", action="store_true",
                     help="check the environment contract on all 30 ScienceWorld tasks, not a sample of 3 "
                          "(a campaign of ~15 minutes: benchmarks/scienceworld_tasks.py)")


# The settings a test's training starts from: a tiny random model (2 layers, hidden size 64) on
# FollowInstruction, 2 environments x 4 steps an update, minibatches of 4, micro-batches of 2,
# rates high enough to move the weights in a few updates. A test adds what it is about.
TINY_TRAINING = ("model=tiny-llama", "device=cpu", "progress=false", "env=groundrl/FollowInstruction-v0",
                 "rollout.num_envs=2", "rollout.num_steps=4", "ppo.minibatch_size=4", "ppo.value_minibatch_size=4",
                 "ppo.micro_batch_size=2", "ppo.policy_lr=1e-3", "ppo.value_lr=1e-3")


@pytest.fixture(scope="session")
def tiny_settings():
    """``tiny_settings(*overrides)``: :data:`TINY_TRAINING` followed by ``overrides`` (later ones win),
    as a list for ``load_config`` or the command line."""
    return lambda *overrides: [*TINY_TRAINING, *overrides]


@pytest.fixture(scope="session")
def tiny_config(tiny_settings):
    """``tiny_config(*overrides, preset="twosome")``: the training config of ``tiny_settings(*overrides)``."""
    from groundrl.train.config import load_config

    return lambda *overrides, preset="twosome": load_config(preset, overrides=tiny_settings(*overrides))


@pytest.fixture(scope="session")
def load_benchmark():
    """``load_benchmark("worlds")``: benchmarks/worlds.py as a module. The benchmarks are scripts, not
    a package: they import ``benchkit`` from their folder (on the path: pyproject's ``pythonpath``) and
    some declare dataclasses, which look their module up in ``sys.modules``."""

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
    """The real default model (SmolLM2-135M-Instruct), loaded once for all the tests that read it."""
    return load_llm()


@pytest.fixture
def ctrl_c_raises():
    """SIGINT handled as an interactive Python handles it, whatever the test run inherited (a
    background job of a shell script starts with SIGINT ignored); put back afterwards."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session")
def overcooked_optimal_traces() -> list[list[dict]]:
    """The two optimal traces recorded from TWOSOME's Overcooked code (tests/data, Tomato Salad then
    Tomato-Lettuce Salad), as lists of steps: prompt, labels, and the action taken with its outcome."""
    traces, steps = [], []
    for line in (DATA / "overcooked_optimal_traces.txt").read_text().splitlines():
        line = line.strip()
        if line.startswith("PROMPT: "):
            steps.append({"prompt": line[len("PROMPT: "):]})
        elif line.startswith("FINAL PROMPT: "):
            steps.append({"prompt": line[len("FINAL PROMPT: "):], "final": True})
        elif line.startswith("ACTIONS: "):
            steps[-1]["labels"] = ast.literal_eval(line[len("ACTIONS: "):])
            if steps[-1].get("final"):
                traces.append(steps)
                steps = []
        elif line.startswith("-> took"):
            match = re.match(r"-> took (\d+) (.+?) \| macro_steps (\d+) \| r=(-?[\d.]+) \| done (\w+) \| obs (\[.*\])",
                             line)
            steps[-1].update(action=int(match[1]), label=match[2], macro_steps=int(match[3]), reward=float(match[4]),
                             done=match[5] == "True", obs_after=json.loads(match[6]))
    return traces


@pytest.fixture(scope="session")
def unwritable():
    """``unwritable(place, case, name)``: an output path under ``place`` that cannot be written
    (``case``: "under a file", "dangling link", "read-only file" or "read-only folder"; ``name``: the
    file's name, e.g. ``x.png``), and the error
    :func:`groundrl.runs.check_output` gives it. The read-only cases skip under root, who writes
    read-only files."""
    import os

    def make(place, case: str, name: str):
        if case.startswith("read-only") and os.geteuid() == 0:
            pytest.skip("root writes read-only files")
        if case == "under a file":
            (place / "a").write_text("a file")
            return place / "a" / name, f"cannot write {place / 'a' / name}: {place / 'a'} is not a folder"
        if case == "dangling link":
            (place / name).symlink_to(place / "gone" / name)
            return place / name, f"{place / name} is a link that leads to no file"
        if case == "read-only file":
            (place / name).write_text("kept")
            (place / name).chmod(0o444)
            return place / name, f"{place / name} is read-only"
        (place / "locked").mkdir(mode=0o555)
        return place / "locked" / name, f"{place / 'locked'} is not writable"

    return make
