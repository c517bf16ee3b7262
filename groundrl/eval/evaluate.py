"""Run an agent for N episodes and report success with a 95% confidence interval."""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from groundrl.envs import make_env
from groundrl.eval.replay import load_episodes
from groundrl.llm.cache import memoized
from groundrl.runs import MACHINE, Records, cut_back, episode_markdown, note_machine, read_jsonl, save_env_spec
from groundrl.train.collector import Collector, Ended


def wilson_interval(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a success rate (well-behaved at 0 and 1, unlike the normal one).

    >>> [round(x, 3) for x in wilson_interval(8, 10)]
    [0.49, 0.943]
    """
    if trials == 0:
        return 0.0, 1.0
    p = successes / trials
    denominator = 1 + z**2 / trials
    center = (p + z**2 / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z**2 / (4 * trials**2)) / denominator
    return max(0.0, center - half), min(1.0, center + half)


@dataclass
class EvalResult:
    env_id: str
    episodes: int
    successes: int
    success_rate: float
    ci_low: float
    ci_high: float
    mean_return: float
    mean_length: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of_episodes(cls, env_id: str, outcomes: list[dict]) -> EvalResult:
        """The summary of per-episode outcomes (``success``, ``return``, ``length``)."""
        n = len(outcomes)
        successes = sum(bool(o["success"]) for o in outcomes)
        low, high = wilson_interval(successes, n)
        return cls(env_id=env_id, episodes=n, successes=successes, success_rate=successes / n if n else float("nan"),
                   ci_low=low, ci_high=high, mean_return=sum(o["return"] for o in outcomes) / n if n else float("nan"),
                   mean_length=sum(o["length"] for o in outcomes) / n if n else float("nan"))


TEXT_EPISODES = 3  # episodes shown as text in TensorBoard


def evaluate(
    policy,
    env_id: str,
    episodes: int = 100,
    num_envs: int = 8,
    seed: int = 0,
    greedy: bool = False,
    run_dir: Path | None = None,
    env_kwargs: dict | None = None,
    progress: bool = True,
    resume: bool = False,
) -> EvalResult:
    """Play ``episodes`` episodes of ``env_id`` with ``policy``, ``num_envs`` at a time so that a
    model scores them in one batch.

    ``policy`` is any :class:`~groundrl.agents.protocols.Policy`, e.g. :class:`groundrl.agents.LLMPolicy`,
    a trained agent, a baseline. Episode ``k`` is reset with seed ``seed + k`` and its actions are
    sampled (unless ``greedy``) with a generator of its own seeded ``seed + k``, so results depend
    neither on ``num_envs`` nor on interruptions (in fp32; under ``bf16-mixed`` a batch's rounding
    differs with its neighbours, and now and then an action drawn near a boundary with it: 3 of 24
    GoToLocal episodes at 16 environments against 8, ``benchmarks/eval_speed.py``).

    With a ``run_dir``, written there: ``episodes.jsonl`` (one line per finished episode: number,
    success, return, length), ``trajectories.jsonl`` (every step: observation, valid actions,
    their probabilities, the chosen action, the reward, the episode's reset seed), ``env.json``
    (what ``groundrl replay`` needs to play an episode again), ``results.json``, and TensorBoard
    scalars and the first episodes as text.
    ``resume=True`` keeps the episodes already in ``episodes.jsonl`` and plays the others.
    ``machine.jsonl`` says, for each process that played some, the machine, how many episodes
    and decisions, and in how many seconds.

    >>> from groundrl.agents import RandomAgent
    >>> evaluate(RandomAgent(), "groundrl/FollowInstruction-v0", episodes=20, progress=False).episodes
    20
    """
    if episodes < 1:
        raise ValueError("episodes must be at least 1")
    run_dir = Path(run_dir) if run_dir is not None else None
    done = _prepare(run_dir, env_id, env_kwargs, episodes, resume)
    started = time.perf_counter()
    outcomes = _play(policy, env_id, env_kwargs, episodes, num_envs, seed, greedy, run_dir, progress, done)
    result = EvalResult.of_episodes(env_id, sorted(outcomes, key=lambda o: o["episode"]))
    if run_dir:
        played = outcomes[len(done):]  # by this process
        note_machine(run_dir, episodes=len(played), decisions=sum(o["length"] for o in played),
                     seconds=round(time.perf_counter() - started, 3), num_envs=num_envs)
        _write_results(run_dir, result)
    return result


def _play(policy, env_id: str, env_kwargs: dict | None, episodes: int, num_envs: int, seed: int, greedy: bool,
          run_dir: Path | None, progress: bool, done: list[dict]) -> list[dict]:
    """Play the episodes not ``done`` (each on disk as it ends); the outcomes of all, ``done`` first."""
    to_play = iter(sorted(set(range(episodes)) - {o["episode"] for o in done}))
    with contextlib.ExitStack() as stack:
        count = min(num_envs, max(1, episodes - len(done)))
        collector = _collector(env_id, env_kwargs, count, seed, to_play, record="all" if run_dir else "on_request")
        stack.callback(collector.close)
        stack.enter_context(memoized(policy))  # the weights stay fixed: each distinct input is computed once
        trajectories = stack.enter_context(Records(run_dir / "trajectories.jsonl")) if run_dir else None
        episode_log = stack.enter_context(Records(run_dir / "episodes.jsonl")) if run_dir else None
        bar = stack.enter_context(tqdm(total=episodes, initial=len(done), desc=f"eval {env_id}", unit="episode",
                                       disable=not progress, dynamic_ncols=True))
        outcomes = list(done)
        generators: dict[int, torch.Generator] = {}  # each episode samples from a stream of its own
        while collector.active:
            for end in _step(policy, collector, generators, greedy):
                outcome = {"episode": end.seed - seed, "success": end.success, "return": end.episode_return,
                           "length": end.length}
                outcomes.append(outcome)
                if run_dir:  # an episode is on disk whole or not at all
                    trajectories.write(end.steps)
                    episode_log.write([outcome])
                bar.update(1)
                bar.set_postfix(success=f"{sum(o['success'] for o in outcomes) / len(outcomes):.2f}")
    return outcomes


def _collector(env_id: str, env_kwargs: dict | None, count: int, seed: int, to_play: Iterator[int],
               record: str) -> Collector:
    """``count`` environments of ``env_id`` for the episodes ``to_play`` (episode k reset with seed ``seed + k``)."""

    def next_seed(slot: int, previous: int | None) -> int | None:
        episode = next(to_play, None)
        return None if episode is None else seed + episode

    return Collector([make_env(env_id, **(env_kwargs or {})) for _ in range(count)], next_seed, record=record,
                     number_of=lambda s: s - seed)


def _step(policy, collector: Collector, generators: dict[int, torch.Generator], greedy: bool) -> list[Ended]:
    """One decision of ``policy`` in every active environment; the episodes that ended (their streams dropped)."""
    slots = [collector.slots[i] for i in collector.active]
    streams = [generators.setdefault(s.seed, torch.Generator().manual_seed(s.seed)) for s in slots]
    choices, probs = policy.act(collector.observations(), collector.valid_actions(), infos=collector.infos(),
                                envs=[s.env for s in slots], greedy=greedy, generator=streams)
    ended = collector.step(choices, lambda k, probs=probs: probs[k]).ended
    for end in ended:
        generators.pop(end.seed)
    return ended


def _prepare(run_dir: Path | None, env_id: str, env_kwargs: dict | None, episodes: int, resume: bool) -> list[dict]:
    """The evaluation folder's files for a new evaluation, or those kept to resume one; the
    outcomes of the episodes already played."""
    if run_dir is None:
        return []
    run_dir.mkdir(parents=True, exist_ok=True)
    done = []
    if resume:
        done = [o for o in read_jsonl(run_dir / "episodes.jsonl") if o["episode"] < episodes]
        finished = {o["episode"] for o in done}
        cut_back(run_dir / "trajectories.jsonl", lambda step: step["episode"] in finished)
        cut_back(run_dir / "episodes.jsonl", lambda o: o["episode"] in finished)
    else:
        for name in ("episodes.jsonl", "trajectories.jsonl", MACHINE):
            (run_dir / name).unlink(missing_ok=True)
    save_env_spec(run_dir, env_id, env_kwargs or {})
    return done


def _write_results(run_dir: Path, result: EvalResult) -> None:
    (run_dir / "results.json").write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    from torch.utils.tensorboard import SummaryWriter  # start-up time: TensorBoard pulls in much

    with SummaryWriter(str(run_dir / "tensorboard")) as writer:
        for key in ("success_rate", "mean_return", "mean_length"):
            writer.add_scalar(f"eval/{key}", getattr(result, key), 0)
        for episode in load_episodes(run_dir)[:TEXT_EPISODES]:
            writer.add_text(f"eval/episode_{episode.number}", episode_markdown(episode.steps), 0)
