"""Trained agents' exact success in household tasks (no sampling), e.g. on TWOSOME's unseen tasks.

A sampled evaluation of 100 episodes estimates a success of 0.90 within +-0.06; whether a Laundry
agent clears 0.9 is then a coin toss. The household tasks have few states (Laundry 16, Entertainment
187), so the probability that the sampled policy succeeds within an episode is computed exactly
(``benchkit.household.success_probability``: dynamic programming over every world state), from one
scoring pass of the run's final agent over those states, with the prompt it was trained with.

    python benchmarks/exact_success.py runs/food/*-train-*          # TWOSOME's unseen tasks
    python benchmarks/exact_success.py RUN --envs groundrl/FoodPreparation-v0 groundrl/FoodPreparation-Laundry-v0
    python benchmarks/exact_success.py RUN --policy-at "The microwave is opened"   # and the policy there
    groundrl bench exact_success RUN

``--policy-at TEXT`` also prints the policy in every state (of every task, before its words are
substituted: "microwave" finds Laundry's washing machine too) whose text contains TEXT, whether or not
the agent's own episodes go there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

GROUP = "probes"
UNSEEN = ("Cheese", "Hamburger", "ApplePie", "Pizza", "WashingPlate", "Laundry")
ENVS = ("groundrl/FoodPreparation-v0", *(f"groundrl/FoodPreparation-{t}-v0" for t in UNSEEN),
        "groundrl/Entertainment-v0")


def exact_success(agent, config, env_ids: list[str], max_steps: int = 50) -> dict[str, float]:
    """Per environment, the exact success probability of ``agent`` (the run's, with ``config``'s prompt)."""
    from groundrl.envs import make_env
    from groundrl.errors import GroundrlError

    from benchkit.household import agent_policy, success_probability

    policy = agent_policy(agent, config.prompt)
    found = {}
    for env_id in env_ids:
        task = getattr(make_env(env_id).unwrapped, "task", None)
        if task is None:
            raise GroundrlError(f"{env_id} is not a household task: its exact success cannot be computed")
        found[env_id] = success_probability(task, max_steps, policy)
    return found


def policy_at(agent, config, env_ids: list[str], contains: str) -> list[tuple[str, str, dict[str, float]]]:
    """``(env_id, state text, {action: probability})`` for every state whose task text (before the task's
    words are substituted) contains ``contains``."""
    from groundrl.envs import make_env

    from benchkit.household import agent_policy, task_states

    policy, found = agent_policy(agent, config.prompt), []
    for env_id in env_ids:
        task = make_env(env_id).unwrapped.task
        chosen = [(task.substitute(text), [task.substitute(task.actions[i]) for i in ids])
                  for text, ids in task_states(task) if contains in text]
        if chosen:  # the task's chosen states scored in one pass
            probabilities = policy(*zip(*chosen))
            found += [(env_id, text, dict(zip(actions, probs)))
                      for (text, actions), probs in zip(chosen, probabilities)]
    return found


def table(rows: dict[str, dict[str, float]]) -> str:
    """A Markdown table: a row per run, a column per environment."""
    envs = list(dict.fromkeys(env for row in rows.values() for env in row))
    short = [env.removeprefix("groundrl/").removesuffix("-v0").removeprefix("FoodPreparation-") for env in envs]
    lines = ["| run | " + " | ".join(short) + " |", "|---|" + "---|" * len(envs)]
    for run, row in rows.items():
        lines.append(f"| {run} | " + " | ".join(f"{row[env]:.4f}" if env in row else "-" for env in envs) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path,
                        help="training run folders (their latest checkpoint) or checkpoints")
    parser.add_argument("--envs", nargs="+", default=list(ENVS), help="household task ids (default: Food Preparation, "
                        "its six unseen variants, and Entertainment)")
    parser.add_argument("--max-steps", type=int, default=50, help="an episode's steps (TWOSOME's: 50)")
    parser.add_argument("--policy-at", metavar="TEXT", help="also print the policy in each state whose text, before "
                        "the task's words are substituted, contains TEXT")
    args = parser.parse_args(argv)
    from groundrl.errors import GroundrlError
    from groundrl.train.checkpoint import load_agent

    from benchkit.args import at_least_one
    from benchkit.tables import policy_cell

    at_least_one(parser, args, "max_steps")  # within 0 steps nothing succeeds

    rows, states = {}, []
    try:
        for run in args.runs:
            agent, config, _ = load_agent(run, device="cpu")
            agent.eval()
            rows[str(run)] = exact_success(agent, config, args.envs, args.max_steps)
            if args.policy_at:
                states += [(str(run), *found) for found in policy_at(agent, config, args.envs, args.policy_at)]
    except GroundrlError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(table(rows))
    if states:
        print("\n| run | task | state | policy |\n|---|---|---|---|")
        for run, env_id, text, probs in states:
            print(f"| {run} | {env_id.removeprefix('groundrl/')} | {text} | {policy_cell(probs)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
