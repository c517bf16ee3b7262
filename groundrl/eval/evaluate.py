"""Run a policy for N episodes and report success with a 95% confidence interval."""

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
) -> EvalResult:
    """Play ``episodes`` episodes of ``env_id`` with ``policy`` (an agent: ``act(observations,
    valid_actions, envs=, greedy=, generator=)``, e.g. :class:`groundrl.agents.LLMPolicy`),
    ``num_envs`` at a time so that the model scores them in one batch.

    Episode ``k`` is reset with seed ``seed + k``, so results do not depend on ``num_envs``. With a
    ``run_dir``, the results (``results.json``), every step (``trajectories.jsonl``: observation, valid
    actions, their probabilities, the chosen action, the reward) and TensorBoard scalars are written
    there.
    """
    if episodes < 1:
        raise ValueError("episodes must be at least 1")
    generator = torch.Generator().manual_seed(seed)
    returns, lengths, successes = [], [], []
    with contextlib.ExitStack() as stack:
        envs = [make_env(env_id, **(env_kwargs or {})) for _ in range(min(num_envs, episodes))]
        for env in envs:
            stack.callback(env.close)
        trajectories = stack.enter_context(open(run_dir / "trajectories.jsonl", "w")) if run_dir else None
        bar = stack.enter_context(tqdm(total=episodes, desc=f"eval {env_id}", unit="episode", disable=not progress))

        slots: list[dict | None] = [None] * len(envs)  # per env: episode number, obs, info, return, length
        next_episode = 0

        def start(slot: int) -> None:
            nonlocal next_episode
            if next_episode >= episodes:
                slots[slot] = None
                return
            obs, info = envs[slot].reset(seed=seed + next_episode)
            slots[slot] = {"episode": next_episode, "obs": obs, "info": info, "return": 0.0, "length": 0}
            next_episode += 1

        for slot in range(len(envs)):
            start(slot)
        while any(slots):
            active = [i for i, s in enumerate(slots) if s is not None]
            observations = [slots[i]["obs"] for i in active]
            valid_actions = [slots[i]["info"]["valid_actions"] for i in active]
            choices, probs = policy.act(observations, valid_actions, envs=[envs[i] for i in active], greedy=greedy,
                                        generator=generator)
            for i, choice, p, obs, actions in zip(active, choices, probs, observations, valid_actions):
                state = slots[i]
                next_obs, reward, terminated, truncated, info = envs[i].step(choice)
                state["return"] += float(reward)
                state["length"] += 1
                if trajectories:
                    record = {
                        "episode": state["episode"],
                        "step": state["length"] - 1,
                        "observation": obs,
                        "valid_actions": actions,
                        "probs": [round(float(x), 6) for x in p],
                        "action": choice,
                        "reward": float(reward),
                    }
                    trajectories.write(json.dumps(record) + "\n")
                state["obs"], state["info"] = next_obs, info
                if terminated or truncated:
                    returns.append(state["return"])
                    lengths.append(state["length"])
                    successes.append(bool(info.get("success", terminated and reward > 0)))
                    bar.update(1)
                    bar.set_postfix(success=f"{sum(successes) / len(successes):.2f}")
                    start(i)

    n = len(successes)
    low, high = wilson_interval(sum(successes), n)
    result = EvalResult(
        env_id=env_id,
        episodes=n,
        successes=sum(successes),
        success_rate=sum(successes) / n,
        ci_low=low,
        ci_high=high,
        mean_return=sum(returns) / n,
        mean_length=sum(lengths) / n,
    )
    if run_dir:
        (run_dir / "results.json").write_text(json.dumps(result.to_dict(), indent=2) + "\n")
        from torch.utils.tensorboard import SummaryWriter

        with SummaryWriter(str(run_dir / "tensorboard")) as writer:
            for key in ("success_rate", "mean_return", "mean_length"):
                writer.add_scalar(f"eval/{key}", getattr(result, key), 0)
    return result
