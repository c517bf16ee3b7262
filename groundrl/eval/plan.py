"""What ``groundrl eval`` does, as a plan checked before anything loads, and carrying it out.

:class:`EvalConfig` holds an evaluation's settings (what its run folder's ``config.yaml`` saves);
:func:`plan_evaluation` checks them and everything they name (the agent, the suite, each
environment as it will be played, the seeds against a trained agent's) and returns an
:class:`EvalPlan`; :func:`resume_evaluation` plans the rest of an interrupted evaluation from its
run folder. :func:`run_evaluation` then loads the agent, creates the run folder and plays the
suite. A mistake costs no wait for a model and leaves no folder behind.

>>> plan = plan_evaluation(EvalConfig("random", env="groundrl/FollowInstruction-v0", episodes=3))
>>> [test.name for test in plan.suite.tests], plan.run_dir
(['FollowInstruction'], None)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from groundrl import runs
from groundrl.envs import PROMPTS, make_env
from groundrl.envs.babyai_text import GENERALIZATION_TESTS
from groundrl.errors import GroundrlError, InvalidArgumentError
from groundrl.eval.agents import BASELINES, evaluation_agent, trained_settings
from groundrl.eval.suites import Suite, TestResult, env_kwargs_of, get_suite, run_suite
from groundrl.llm.precision import PRECISIONS
from groundrl.llm.scoring import NORMALIZATIONS
from groundrl.train.config import TrainConfig

PROMPT_CHOICES = tuple(str(prompt).lower() for prompt in PROMPTS)
"""What ``--prompt`` takes: :data:`~groundrl.envs.PROMPTS` as text (``none`` for None)."""

SEED_LIMIT = 2**63
"""Evaluation seeds stay below it, so that seed + k stays within what torch's generators take (2**64)."""


@dataclass
class EvalConfig:
    """The settings of an evaluation, as ``groundrl eval`` takes them and its run folder's
    ``config.yaml`` saves them; :meth:`check` refuses what cannot be played."""

    agent: str = "zero-shot"
    """A baseline (random, bot, gold, zero-shot) or a trained agent: a training run folder, a
    checkpoint or an export."""
    suite: str | None = None
    """A named suite (:data:`~groundrl.eval.suites.SUITES`) or an environment id."""
    env: str | None = None
    """One environment to play, or the environment of ``test``; default: a trained agent's."""
    test: str | None = None
    """One of GLAM's generalization tests (:data:`~groundrl.envs.babyai_text.GENERALIZATION_TESTS`)."""
    model: str | None = None
    """The zero-shot agent's model: a name, folder, .gguf file or hub id; None: the default model."""
    normalization: str | None = None
    """The zero-shot agent's action score normalization; None: word."""
    prompt: str | None = None
    """What a baseline's environments show (one of :data:`PROMPT_CHOICES`); None: their own. A trained
    agent keeps its run's."""
    episodes: int | None = None
    """Episodes per test; None: each test's own number (1000 for GLAM's tests, 100 for TWOSOME's)."""
    num_envs: int = 8
    """Environments played at a time (the results do not depend on it)."""
    greedy: bool = False
    """Take the most probable action instead of sampling."""
    seed: int = 1_000_000
    """Episode k of a test is reset with seed + k, below :data:`SEED_LIMIT`; training's seeds are
    below the default."""
    dtype: str | None = None
    """The model's weights: float32, bfloat16, float16 or auto; None: float32, or the trained agent's."""
    device: str = "auto"
    """cpu, cuda, cuda:N or auto."""
    precision: str | None = None
    """The model's passes: fp32, bf16-mixed or auto; None: fp32, or the trained run's."""
    env_options: dict = field(default_factory=dict)
    """Options of every environment played (nested); they override a trained agent's env_kwargs, and
    a suite's test keeps its own."""

    def to_dict(self) -> dict[str, Any]:
        """The settings as the run folder's ``config.yaml`` saves them."""
        return {"job": "eval", **dataclasses.asdict(self)}

    @classmethod
    def read(cls, run_dir: str | Path) -> EvalConfig:
        """The settings an interrupted evaluation started with (its ``config.yaml``), checked."""
        run_dir = Path(run_dir)
        file = run_dir / "config.yaml"
        if not run_dir.is_dir():
            raise InvalidArgumentError(f"--resume {run_dir} is not a folder; give the run folder of an interrupted "
                                       "evaluation")
        if not file.is_file():
            raise InvalidArgumentError(f"{run_dir} is not an evaluation run folder (no config.yaml)")
        settings = runs.read_settings(file)
        if settings.get("job") != "eval":
            if (run_dir / "checkpoints").is_dir() or (run_dir / "metrics.jsonl").is_file():
                raise InvalidArgumentError(f"{run_dir} is a training run: continue it with `groundrl train --resume "
                                           f"{run_dir}`, or evaluate it with `groundrl eval {run_dir}`")
            says = "has no" if settings.get("job") is None else f"says job: {settings['job']}, not"
            raise InvalidArgumentError(f"{run_dir} is not an evaluation run folder (its config.yaml {says} job: eval)")
        # settings that evaluations begun before them did without: fp32, the environments' own prompts, no options
        settings = {"precision": None, "prompt": None, **settings}
        settings["env_options"] = settings.get("env_options") or {}
        missing = [key for key in _REQUIRED if key not in settings]
        if missing:
            raise InvalidArgumentError(f"{file} lacks {', '.join(missing)}: restore it, or start a new evaluation")
        config = cls(**{f.name: settings[f.name] for f in dataclasses.fields(cls)})
        config.check(file)
        return config

    def check(self, file: Path | None = None) -> None:
        """One line for a setting ``groundrl eval`` cannot play with: an option given, or (``file``)
        a value in the config.yaml of an evaluation being resumed."""
        def refuse(option_message: str, file_message: str) -> NoReturn:
            raise InvalidArgumentError(option_message if file is None else file_message)

        for first, second, option_message in _EXCLUSIVE:
            if getattr(self, first) is not None and getattr(self, second) is not None:
                refuse(option_message, f"{file} gives both {first} and {second}; restore it")
        for key, kinds, what in _KINDS:
            value = getattr(self, key)
            if not isinstance(value, kinds):
                refuse(f"{_option(key)} must be {what}, not {value!r}",
                       f"{file}: {key} has the wrong type ({value!r}); restore it")
        for key, allowed in _CHOICES:
            value = getattr(self, key)
            if value is not None and value not in allowed:
                refuse(f"{_option(key)} must be one of {', '.join(allowed)}, not {value!r}",
                       f"{file} has an unknown {key} '{value}'; choose from {', '.join(allowed)}")
        for key, low, high in (("episodes", 1, None), ("num_envs", 1, None), ("seed", 0, SEED_LIMIT)):
            value = getattr(self, key)
            if key == "episodes" and value is None:  # each test's own number
                continue
            if not runs.is_whole_number(value) or value < low or (high is not None and value >= high):
                says = f"must be a whole number of {low} or more{' and below 2**63' if high else ''}, not {value!r}"
                refuse(f"{_option(key)} {says}", f"{key} in {file} {says}")


def _option(key: str) -> str:
    return f"--{key.replace('_', '-')}"


_EXCLUSIVE = (("suite", "test", "give one of --suite and --test"),
              ("suite", "env", "--suite names its environments: drop --env"))
_TEXT, _OPTIONAL_TEXT = (str,), (str, type(None))
_KINDS = (  # the settings whose type a config.yaml could get wrong (the numbers: check's last rule)
    ("agent", _TEXT, "text"), ("device", _TEXT, "text"),
    *((key, _OPTIONAL_TEXT, "text or None")
      for key in ("suite", "env", "test", "model", "normalization", "prompt", "dtype", "precision")),
    ("greedy", (bool,), "true or false"), ("env_options", (Mapping,), "a mapping of options"),
)
_CHOICES = (("test", tuple(GENERALIZATION_TESTS)), ("normalization", NORMALIZATIONS), ("prompt", PROMPT_CHOICES),
            ("precision", PRECISIONS))
_REQUIRED = ("agent", "device", "suite", "env", "test", "model", "normalization", "prompt", "dtype", "precision",
             "episodes", "num_envs", "greedy", "seed")  # every setting but env_options, in the order a lack is named


@dataclass
class EvalPlan:
    """An evaluation checked and ready to play: its settings and what they resolve to."""

    config: EvalConfig
    """The settings (a new evaluation saves them in its run folder)."""
    suite: Suite
    """The tests to play."""
    trained: TrainConfig | None
    """A trained agent's run settings; None for a baseline."""
    env_kwargs: dict
    """Options of every test's environment: the prompt (``--prompt``, or a trained agent's)."""
    env_kwargs_for: dict[str, dict]
    """Options by environment id: a trained agent's env_kwargs, under ``config.env_options``."""
    runs_dir: Path = Path("runs")
    """Where a new evaluation's run folder is created."""
    run_dir: Path | None = None
    """The run folder of the evaluation being resumed; None: a new one in ``runs_dir``."""

    @property
    def folder_name(self) -> str:
        """What a new run folder is named after: the suite, the test or the environment."""
        return self.config.suite or self.config.test or self.suite.tests[0].env_id


@dataclass
class Evaluation:
    """What :func:`run_evaluation` played: an agent's results on a suite, and where they are."""

    plan: EvalPlan
    """The plan played."""
    about: dict
    """What the agent is (saved with the settings): ``agent``, and ``model``, ``normalization`` ... for a model."""
    results: list[TestResult]
    """One per test of the suite, in its order (a test the agent cannot play has no result)."""
    run_dir: Path
    """The run folder: results.csv, results.json, and a folder per test."""


def plan_evaluation(config: EvalConfig, runs_dir: str | Path = Path("runs")) -> EvalPlan:
    """A new evaluation's plan: ``config`` checked, and every thing it names, before a model loads
    or a run folder in ``runs_dir`` is created."""
    config.check()
    runs.check_runs_dir(runs_dir)
    return _plan(config, runs_dir=Path(runs_dir))


def resume_evaluation(run_dir: str | Path) -> EvalPlan:
    """The plan of an interrupted evaluation, from its run folder: its own settings; the episodes
    already played are kept."""
    return _plan(EvalConfig.read(run_dir), run_dir=Path(run_dir))


def _plan(config: EvalConfig, *, runs_dir: Path = Path("runs"), run_dir: Path | None = None) -> EvalPlan:
    trained, seeds_file = trained_settings(config.agent) if config.agent not in BASELINES else (None, None)
    suite = _suite(config, trained.env if trained else None)
    if trained is None:
        env_kwargs = {} if config.prompt is None else {"prompt": None if config.prompt == "none" else config.prompt}
        env_kwargs_for = {}
    else:
        if config.prompt is not None:
            raise InvalidArgumentError("a trained agent keeps the prompt it trained with (its run's prompt setting): "
                                       "drop --prompt")
        env_kwargs, env_kwargs_for = trained.prompt_options, {trained.env: dict(trained.env_kwargs)}
        trained_seeds = runs.training_seed_range(seeds_file, trained.seed, trained.rollout.num_envs)
        most = max(config.episodes or 0, *(t.episodes for t in suite.tests))
        runs.check_evaluation_seeds(config.seed, most, trained_seeds)
    options = config.env_options
    env_kwargs_for = {t.env_id: {**env_kwargs_for.get(t.env_id, {}), **options} for t in suite.tests}
    for t in suite.tests:  # each environment as it will be played
        try:
            make_env(t.env_id, **env_kwargs_of(t, env_kwargs, env_kwargs_for)).close()
        except GroundrlError as error:
            raise InvalidArgumentError(f"--env-option: {error}" if options else str(error)) from None
    return EvalPlan(config, suite, trained, env_kwargs, env_kwargs_for, runs_dir=runs_dir, run_dir=run_dir)


def _suite(config: EvalConfig, trained_env: str | None) -> Suite:
    """The suite ``config`` names: a suite, one of GLAM's tests (on ``config.env`` if given), or
    one environment (``config.env``, or the trained agent's)."""
    if config.suite is not None:
        return get_suite(config.suite)
    if config.test is not None:
        glam_test = next(t for t in get_suite("glam").tests if t.name == config.test)
        test = dataclasses.replace(glam_test, env_id=config.env or glam_test.env_id)
        return Suite(test.name, test.description, (test,))
    env_id = config.env or trained_env
    if env_id is None:
        raise InvalidArgumentError("say what to play: --suite NAME, --env ID or --test NAME (see `groundrl envs`)")
    make_env(env_id).close()  # an unknown id fails here, in one line
    return get_suite(env_id)


def run_evaluation(plan: EvalPlan, *, say: Callable[[str], Any] = print, progress: bool = True) -> Evaluation:
    """Load the agent, create the run folder (a new evaluation's, with its ``config.yaml``) and play
    the suite; ``say`` tells what loads."""
    config = plan.config
    if plan.trained is not None:
        say(f"loading agent {config.agent} ...")
    elif config.agent == "zero-shot":
        say(f"loading model {config.model or 'default'} ...")
    policy, about, _ = evaluation_agent(config.agent, model=config.model, normalization=config.normalization,
                                        dtype=config.dtype, device=config.device, precision=config.precision)
    if hasattr(policy, "llm"):
        say(f"{policy.llm}")
    run_dir = plan.run_dir
    if run_dir is None:
        run_dir = runs.new_run_dir(plan.runs_dir, "eval", plan.folder_name)
        runs.save_config(run_dir, {**config.to_dict(), "about": about})
    results = run_suite(policy, plan.suite, run_dir, episodes=config.episodes, num_envs=config.num_envs,
                        seed=config.seed, greedy=config.greedy, env_kwargs=plan.env_kwargs,
                        env_kwargs_for=plan.env_kwargs_for, resume=plan.run_dir is not None, progress=progress)
    return Evaluation(plan, about, results, run_dir)
