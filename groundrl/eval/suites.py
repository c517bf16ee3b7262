"""Named evaluation suites: the generalization tests of both papers and per-environment ones.

A suite is a list of tests; a test is an environment, its options (rewritten words, renamed
actions, another language) and a default number of episodes (GLAM tested on 1000, TWOSOME on 100).

>>> [test.name for test in get_suite("twosome-unseen").tests][:3]
['Cheese', 'Hamburger', 'ApplePie']
>>> get_suite("groundrl/TomatoSalad-v0").tests[0].episodes
100
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from groundrl.envs import list_envs, make_env
from groundrl.envs.babyai_text import GENERALIZATION_TESTS, GOTO_LOCAL_TESTS
from groundrl.envs.scienceworld import TASKS as _SCIENCEWORLD_TASKS
from groundrl.envs.textworld_express import GAMES as _TWX_GAMES
from groundrl.errors import InvalidArgumentError
from groundrl.eval.evaluate import EvalResult, evaluate
from groundrl.files import read_json

GLAM_EPISODES = 1000
TWOSOME_EPISODES = 100
SCIENCEWORLD_EPISODES = 20


@dataclass(frozen=True)
class Test:
    name: str
    env_id: str
    env_kwargs: dict = field(default_factory=dict)
    episodes: int = TWOSOME_EPISODES
    description: str = ""


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    tests: tuple[Test, ...]


def _env_test(env_id: str, episodes: int = TWOSOME_EPISODES, name: str | None = None) -> Test:
    return Test(name or env_id.removeprefix("groundrl/").removeprefix("BabyAI-").removesuffix("-v0"), env_id, {},
                episodes)


_UNSEEN = ("Cheese", "Hamburger", "ApplePie", "Pizza", "WashingPlate", "Laundry")
_BABYAI = ("GoToLocal", "PickupLocal", "PutNextLocal", "OpenLocal", "PickUpThenGoToLocal", "MixedTrainLocal",
           "MixedTestLocal", "PickUpSeqPickUpLocal", "GoToLocalFrench")

SUITES: dict[str, Suite] = {suite.name: suite for suite in [
    Suite("glam", "GLAM's generalization tests (train on MixedTrainLocal): new seeds, new objects, new nouns, "
          "invented words, new composition, synonym actions, French",
          tuple(Test(name, t.env_id, t.make_env_kwargs(), GLAM_EPISODES, t.description)
                for name, t in GENERALIZATION_TESTS.items())),
    Suite("glam-gotolocal", "GLAM's generalization tests that apply to an agent trained on GoToLocal: new seeds, "
          "new nouns, invented words, synonym actions, French",
          tuple(Test(name, t.env_id, t.make_env_kwargs(), GLAM_EPISODES, t.description)
                for name, t in GOTO_LOCAL_TESTS.items())),
    Suite("twosome", "TWOSOME's four tasks: Food Preparation, Entertainment, Tomato Salad, Tomato-Lettuce Salad",
          tuple(_env_test(f"groundrl/{task}-v0") for task in
                ("FoodPreparation", "Entertainment", "TomatoSalad", "TomatoLettuceSalad"))),
    Suite("twosome-unseen", "TWOSOME's generalization (train on Food Preparation): six unseen tasks and "
          "the Entertainment crossover",
          tuple(_env_test(f"groundrl/FoodPreparation-{task}-v0", name=task) for task in _UNSEEN)
          + (_env_test("groundrl/Entertainment-v0"),)),
    Suite("overview", "one task of each family: GoToLocal, MixedTrainLocal, Food Preparation, Entertainment, "
          "Tomato Salad (the baselines table)",
          (_env_test("groundrl/BabyAI-GoToLocal-v0", GLAM_EPISODES),
           _env_test("groundrl/BabyAI-MixedTrainLocal-v0", GLAM_EPISODES), _env_test("groundrl/FoodPreparation-v0"),
           _env_test("groundrl/Entertainment-v0"), _env_test("groundrl/TomatoSalad-v0"))),
    Suite("babyai", "every BabyAI-Text level", tuple(_env_test(f"groundrl/BabyAI-{level}-v0", GLAM_EPISODES)
                                                    for level in _BABYAI)),
    Suite("virtualhome", "every VirtualHome task", tuple(
        _env_test(f"groundrl/{task}-v0") for task in
        ("FoodPreparation", "Entertainment", *(f"FoodPreparation-{u}" for u in _UNSEEN)))),
    Suite("overcooked", "both Overcooked salads", (_env_test("groundrl/TomatoSalad-v0"),
                                                   _env_test("groundrl/TomatoLettuceSalad-v0"))),
    Suite("textworld", "TextWorldExpress's eight games (their test games) and TextWorld's tw-simple (its test games)",
          tuple(Test(game, f"groundrl/TWX-{game}-v0", {"split": "test"}, TWOSOME_EPISODES) for game in _TWX_GAMES)
          + (Test("TextWorld-Simple", "groundrl/TextWorld-Simple-v0", {"test": True}, TWOSOME_EPISODES),)),
    Suite("scienceworld", f"ScienceWorld's 30 tasks, {SCIENCEWORLD_EPISODES} test variations each (a ScienceWorld "
          "episode takes seconds: the simulator is slow)",
          tuple(Test(task, f"groundrl/ScienceWorld-{task}-v0", {"split": "test"}, SCIENCEWORLD_EPISODES)
                for task in _SCIENCEWORLD_TASKS)),
]}
"""The named suites; any registered environment id is a one-test suite as well."""


def get_suite(name: str) -> Suite:
    """A named suite, or the one-test suite of an environment id."""
    if name in SUITES:
        return SUITES[name]
    if name in list_envs():
        return Suite(name, name, (_env_test(name),))
    raise InvalidArgumentError(f"unknown suite '{name}'; choose from {', '.join(SUITES)} or an environment id "
                               "(`groundrl envs`)")


@dataclass
class TestResult:
    """A test's outcome in a suite run; ``result`` is None when the agent cannot play the test."""

    test: Test
    result: EvalResult | None
    skipped: str = ""

    def row(self) -> dict:
        row = {"test": self.test.name, "env_id": self.test.env_id}
        if self.result is None:
            return {**row, "episodes": 0, "successes": 0, "success_rate": None, "ci_low": None, "ci_high": None,
                    "mean_return": None, "mean_length": None, "skipped": self.skipped}
        fields = self.result.to_dict()
        fields.pop("env_id")
        return {**row, **fields, "skipped": ""}


def run_suite(agent, suite: Suite, run_dir: str | Path, *, episodes: int | None = None, num_envs: int = 8,
              seed: int = 1_000_000, greedy: bool = False, env_kwargs: dict | None = None,
              env_kwargs_for: dict | None = None, resume: bool = False, progress: bool = True) -> list[TestResult]:
    """Evaluate ``agent`` on every test of ``suite``; each test writes ``run_dir/<test>/`` (episodes,
    trajectories, TensorBoard), and the suite ``run_dir/results.csv`` and ``results.json``.

    ``env_kwargs`` go to every test's environment (a trained agent's prompt settings),
    ``env_kwargs_for[env_id]`` to that environment only (its training options). A test the agent
    cannot play (``agent.cannot_play(env)`` says why) is reported as skipped. ``resume`` keeps the
    episodes already played.
    """
    run_dir = Path(run_dir)
    results = []
    for test in suite.tests:
        kwargs = env_kwargs_of(test, env_kwargs, env_kwargs_for)
        reason = _cannot_play(agent, test.env_id, kwargs)
        if reason:
            results.append(TestResult(test, None, reason))
            continue
        result = evaluate(agent, test.env_id, episodes=episodes or test.episodes, num_envs=num_envs, seed=seed,
                          greedy=greedy, run_dir=run_dir / test.name, env_kwargs=kwargs, progress=progress,
                          resume=resume)
        results.append(TestResult(test, result))
        write_results(run_dir, results)
    write_results(run_dir, results)
    return results


def env_kwargs_of(test: Test, env_kwargs: dict | None = None, env_kwargs_for: dict | None = None) -> dict:
    """The options :func:`run_suite` makes ``test``'s environment with: ``env_kwargs``, then
    ``env_kwargs_for[test.env_id]``, then the test's own."""
    return {**(env_kwargs or {}), **(env_kwargs_for or {}).get(test.env_id, {}), **test.env_kwargs}


def _cannot_play(agent, env_id: str, env_kwargs: dict) -> str:
    check = getattr(agent, "cannot_play", None)
    if check is None:
        return ""
    env = make_env(env_id, **env_kwargs)
    try:
        return check(env) or ""
    finally:
        env.close()


FIELDS = ("test", "env_id", "episodes", "successes", "success_rate", "ci_low", "ci_high", "mean_return", "mean_length",
          "skipped")


def write_results(run_dir: Path, results: Sequence[TestResult]) -> None:
    """``results.csv`` and ``results.json``: one row per test."""
    rows = [r.row() for r in results]
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    (run_dir / "results.json").write_text(json.dumps(rows, indent=2) + "\n")


def read_results(run_dir: Path) -> list[dict]:
    """The rows of a suite run's ``results.json``."""
    return read_json(Path(run_dir) / "results.json", "restore it, or evaluate again")
