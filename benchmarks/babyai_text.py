"""Random and BabyAI-bot success on each BabyAI-Text level, and the simulator's speed.

Per level: the success of each, and the simulator's speed (environment steps per second, text
observation and GLAM prompt included).

GLAM's original code measured, for the random policy over 400 episodes: GoToLocal 0.29 with 6
actions (0.455 with 3), PickupLocal 0.11, PutNextLocal 0.017, MixedTrainLocal about 0.2.

    python benchmarks/babyai_text.py                  # every level, 400 episodes each
    python benchmarks/babyai_text.py --level GoToLocal --actions move --episodes 1000
    groundrl bench babyai_text
"""

from __future__ import annotations

import argparse
import sys
import time

from benchkit.args import at_least_one

GROUP = "baselines"
LEVELS = ("GoToLocal", "PickupLocal", "PutNextLocal", "OpenLocal", "PickUpThenGoToLocal", "MixedTrainLocal",
          "MixedTestLocal", "PickUpSeqPickUpLocal", "GoToLocalFrench")


def play(env_id: str, agent, episodes: int, seed: int, **env_kwargs) -> dict:
    """Play ``episodes`` episodes (episode k reset with seed + k): success count, steps, seconds."""
    import torch

    import groundrl

    env = groundrl.make_env(env_id, **env_kwargs)
    generator = torch.Generator().manual_seed(seed)
    successes = steps = 0
    start = time.perf_counter()
    for episode in range(episodes):
        obs, info = env.reset(seed=seed + episode)
        done = False
        while not done:
            (action,), _ = agent.act([obs], [info["valid_actions"]], envs=[env], generator=generator)
            obs, _, terminated, truncated, info = env.step(action)
            steps += 1
            done = terminated or truncated
        successes += info["success"]
    return {"successes": successes, "steps": steps, "seconds": time.perf_counter() - start}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level", action="append", help=f"level (repeatable); default: all of {', '.join(LEVELS)}")
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--actions", default=None, help="action set: default, move, extended, synonyms")
    args = parser.parse_args(argv)
    at_least_one(parser, args, "episodes")  # the rates are per episode

    from rich.console import Console
    from rich.table import Table

    from groundrl.agents import BabyAIBotAgent, RandomAgent
    from groundrl.errors import GroundrlError
    from groundrl.eval import wilson_interval

    options = {"actions": args.actions} if args.actions else {}
    title = f"BabyAI-Text: random policy and BabyAI bot ({args.episodes} episodes each, seed {args.seed}"
    table = Table(title=title + (f", actions: {args.actions})" if args.actions else ")"))
    for column in ("level", "random success", "95% CI", "bot success", "bot mean length", "steps / s (random)",
                   "steps / s (bot)"):
        table.add_column(column, justify="left" if column == "level" else "right")
    console = Console()
    for level in args.level or LEVELS:
        env_id = f"groundrl/BabyAI-{level}-v0"
        with console.status(f"{level} ..."):
            random = play(env_id, RandomAgent(), args.episodes, args.seed, **options)
            try:
                bot = play(env_id, BabyAIBotAgent(), args.episodes, args.seed, **options)
                bot_columns = (f"{bot['successes'] / args.episodes:.3f}", f"{bot['steps'] / args.episodes:.1f}",
                               f"{bot['steps'] / bot['seconds']:,.0f}")
            except GroundrlError:  # the bot needs an action this action set lacks
                bot_columns = ("n/a",) * 3
        low, high = wilson_interval(random["successes"], args.episodes)
        table.add_row(level, f"{random['successes'] / args.episodes:.3f}", f"[{low:.3f}, {high:.3f}]",
                      *bot_columns[:2], f"{random['steps'] / random['seconds']:,.0f}", bot_columns[2])
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
