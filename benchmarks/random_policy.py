"""What a uniformly random policy scores per environment: the floor a learned agent must beat.

Success rate, episode length and simulator speed of a uniformly random policy over the valid
actions, per environment. Household tasks also get the exact success probability (dynamic
programming over their state space), which the sampled rate must agree with.

    python benchmarks/random_policy.py                      # VirtualHome and Overcooked, 1000 episodes each
    python benchmarks/random_policy.py --env groundrl/FoodPreparation-Pizza-v0 --episodes 200
    groundrl bench random_policy
"""

from __future__ import annotations

import argparse
import sys
import time

from benchkit.args import at_least_one

GROUP = "baselines"
DEFAULT_ENVS = ("groundrl/FoodPreparation-v0", "groundrl/Entertainment-v0", "groundrl/TomatoSalad-v0",
                "groundrl/TomatoLettuceSalad-v0")
EARLY = 32  # also report success within this many actions (TWOSOME's rollout length per environment)


def run(env_id: str, episodes: int, seed: int) -> dict:
    import numpy as np

    import groundrl

    env = groundrl.make_env(env_id)
    rng = np.random.default_rng(seed)
    successes, early, lengths, success_lengths, steps = 0, 0, [], [], 0
    start = time.perf_counter()
    for episode in range(episodes):
        _, info = env.reset(seed=seed + episode)
        done, length = False, 0
        while not done:
            _, reward, terminated, truncated, info = env.step(int(rng.integers(len(info["valid_actions"]))))
            length += 1
            done = terminated or truncated
        steps += length
        lengths.append(length)
        if info.get("success"):
            successes += 1
            early += length <= EARLY
            success_lengths.append(length)
    seconds = time.perf_counter() - start
    return {
        "env": env_id, "episodes": episodes, "successes": successes, "early_successes": early,
        "mean_length": float(np.mean(lengths)),
        "mean_success_length": float(np.mean(success_lengths)) if success_lengths else float("nan"),
        "steps_per_second": steps / seconds,
    }


def exact(env_id: str) -> str:
    """The exact success probability where the environment can compute it (household tasks)."""
    import groundrl
    from groundrl.envs.household import HouseholdEnv

    from benchkit.household import random_success_probability

    env = groundrl.make_env(env_id).unwrapped
    if not isinstance(env, HouseholdEnv):
        return "-"
    return f"{random_success_probability(env.task, env.max_steps):.4f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", action="append", help="environment id (repeatable); default: VirtualHome's and "
                        "Overcooked's tasks")
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    at_least_one(parser, args, "episodes")  # the rates are per episode

    from rich.console import Console
    from rich.table import Table

    from groundrl.eval import wilson_interval

    table = Table(title=f"Uniform random policy over the valid actions ({args.episodes} episodes, seed {args.seed})")
    columns = ("environment", "success rate", "95% CI", "exact", f"within {EARLY} actions", "mean length",
               "length if success", "actions / s")
    for column in columns:
        table.add_column(column, justify="left" if column == "environment" else "right")
    for env_id in args.env or DEFAULT_ENVS:
        row = run(env_id, args.episodes, args.seed)
        low, high = wilson_interval(row["successes"], row["episodes"])
        table.add_row(env_id, f"{row['successes'] / row['episodes']:.3f}", f"[{low:.3f}, {high:.3f}]", exact(env_id),
                      f"{row['early_successes'] / row['episodes']:.3f}",
                      f"{row['mean_length']:.1f}", f"{row['mean_success_length']:.1f}",
                      f"{row['steps_per_second']:,.0f}")
    Console(width=max(Console().width, 160)).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
