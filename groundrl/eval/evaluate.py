"""Run an agent for N episodes and report success with a 95% confidence interval."""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from groundrl.envs import make_env
from groundrl.eval.replay import episode_markdown, load_episodes
from groundrl.runs import read_jsonl


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

    ``policy`` is any agent: ``act(observations, valid_actions, *, infos=, envs=, greedy=, generator=)
    -> (choices, probabilities)``, e.g. :class:`groundrl.agents.LLMPolicy`, a trained agent, a
    baseline. Episode ``k`` is reset with seed ``seed + k`` and its actions are sampled (unless
    ``greedy``) with a generator of its own seeded ``seed + k``, so results depend neither on
    ``num_envs`` nor on interruptions (except the random agent's, which has no greedy action).

    With a ``run_dir``, written there: ``episodes.jsonl`` (one line per finished episode: number,
    success, return, length), ``trajectories.jsonl`` (every step: observation, valid actions,
    their probabilities, the chosen action, the reward, the episode's reset seed), ``env.json``
    (what ``groundrl replay`` needs to play an episode again), ``results.json``, and TensorBoard
    scalars and the first episodes as text.
    ``resume=True`` keeps the episodes already in ``episodes.jsonl`` and plays the others.

    >>> from groundrl.agents import RandomAgent
    >>> evaluate(RandomAgent(), "groundrl/FollowInstruction-v0", episodes=20, progress=False).episodes
    20
    """
    if episodes < 1:
        raise ValueError("episodes must be at least 1")
    run_dir = Path(run_dir) if run_dir is not None else None
    done: list[dict] = []
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        if resume:
            done = [o for o in read_jsonl(run_dir / "episodes.jsonl") if o["episode"] < episodes]
            finished = {o["episode"] for o in done}
            steps = [s for s in read_jsonl(run_dir / "trajectories.jsonl") if s["episode"] in finished]
            (run_dir / "trajectories.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
            (run_dir / "episodes.jsonl").write_text("".join(json.dumps(o) + "\n" for o in done))
        else:
            for name in ("episodes.jsonl", "trajectories.jsonl"):
                (run_dir / name).unlink(missing_ok=True)
        (run_dir / "env.json").write_text(json.dumps({"env_id": env_id, "env_kwargs": env_kwargs or {}}) + "\n")
    to_play = sorted(set(range(episodes)) - {o["episode"] for o in done})

    with contextlib.ExitStack() as stack:
        envs = [make_env(env_id, **(env_kwargs or {})) for _ in range(min(num_envs, max(1, len(to_play))))]
        for env in envs:
            stack.callback(env.close)
        trajectories = stack.enter_context(open(run_dir / "trajectories.jsonl", "a")) if run_dir else None
        episode_log = stack.enter_context(open(run_dir / "episodes.jsonl", "a")) if run_dir else None
        bar = stack.enter_context(tqdm(total=episodes, initial=len(done), desc=f"eval {env_id}", unit="episode",
                                       disable=not progress, dynamic_ncols=True))
        outcomes = list(done)
        slots: list[dict | None] = [None] * len(envs)  # per env: the episode under way
        queue = iter(to_play)
        shared_generator = torch.Generator().manual_seed(seed)  # for agents that sample even when greedy (random)

        def start(slot: int) -> None:
            episode = next(queue, None)
            if episode is None:
                slots[slot] = None
                return
            obs, info = envs[slot].reset(seed=seed + episode)
            slots[slot] = {"episode": episode, "obs": obs, "info": info, "return": 0.0, "length": 0,
                           "generator": torch.Generator().manual_seed(seed + episode), "steps": []}

        for slot in range(len(envs)):
            start(slot)
        while any(slots):
            active = [i for i, s in enumerate(slots) if s is not None]
            observations = [slots[i]["obs"] for i in active]
            infos = [slots[i]["info"] for i in active]
            valid_actions = [[str(a) for a in info["valid_actions"]] for info in infos]
            # a sampled choice is redrawn below from the episode's own generator
            choices, probs = policy.act(observations, valid_actions, infos=infos, envs=[envs[i] for i in active],
                                        greedy=greedy, generator=shared_generator)
            for i, choice, p, obs, actions in zip(active, choices, probs, observations, valid_actions):
                state = slots[i]
                if not greedy:
                    choice = int(torch.multinomial(p.float(), 1, generator=state["generator"]))
                next_obs, reward, terminated, truncated, info = envs[i].step(choice)
                state["return"] += float(reward)
                state["length"] += 1
                if trajectories:
                    state["steps"].append({"episode": state["episode"], "step": state["length"] - 1, "observation": obs,
                                           "valid_actions": actions, "probs": [round(float(x), 6) for x in p],
                                           "action": choice, "reward": float(reward),
                                           "seed": seed + state["episode"]})
                state["obs"], state["info"] = next_obs, info
                if terminated or truncated:
                    outcome = {"episode": state["episode"], "success": bool(info.get("success", terminated and reward > 0)),
                               "return": state["return"], "length": state["length"]}
                    outcomes.append(outcome)
                    if run_dir:  # an episode is on disk whole or not at all
                        trajectories.write("".join(json.dumps(s) + "\n" for s in state["steps"]))
                        trajectories.flush()
                        episode_log.write(json.dumps(outcome) + "\n")
                        episode_log.flush()
                    bar.update(1)
                    bar.set_postfix(success=f"{sum(o['success'] for o in outcomes) / len(outcomes):.2f}")
                    start(i)

    result = EvalResult.of_episodes(env_id, sorted(outcomes, key=lambda o: o["episode"]))
    if run_dir:
        (run_dir / "results.json").write_text(json.dumps(result.to_dict(), indent=2) + "\n")
        from torch.utils.tensorboard import SummaryWriter  # start-up time: tensorboard, only for a run folder

        with SummaryWriter(str(run_dir / "tensorboard")) as writer:
            for key in ("success_rate", "mean_return", "mean_length"):
                writer.add_scalar(f"eval/{key}", getattr(result, key), 0)
            for episode in load_episodes(run_dir)[:TEXT_EPISODES]:
                writer.add_text(f"eval/episode_{episode.number}", episode_markdown(episode), 0)
    return result
