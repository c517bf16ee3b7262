"""The untrained model's exact success in the household tasks, per prompt and normalization.

The exact probability that its sampled policy succeeds within an episode
(``benchkit.household.success_probability``: dynamic programming over every world state, no sampling), for
each prompt option and each normalization of the action scores, beside uniform play over the valid
actions. It is the number that decides whether training ever sees a first success: with a prior of
0.001 per episode a budget of a few thousand decisions may hold none.

Only the prompts that depend on the world state alone can be computed this way: the task's own
(``prompt=auto``) and the valid actions listed before it (``prompt=actions``). GLAM's prompt
carries the last steps taken, so a state does not fix it.

    python benchmarks/prior.py                                   # Food Preparation and Entertainment, the default model
    python benchmarks/prior.py --envs groundrl/FoodPreparation-Pizza-v0 --model tiny-llama
    groundrl bench prior
"""

from __future__ import annotations

import argparse
import sys
import time

GROUP = "baselines"
ENVS = ("groundrl/FoodPreparation-v0", "groundrl/Entertainment-v0")
PROMPTS = ("auto", "actions")
NORMALIZATIONS = ("sum", "token", "word")


def priors(llm, task, max_steps: int, prompt: str) -> dict[str, float]:
    """The exact success probability under each normalization, from one scoring pass over the
    task's states (the log-likelihoods and the token and word counts are all it needs)."""
    from groundrl.envs import actions_prompt
    from groundrl.llm.scoring import score_details

    from benchkit.household import success_probability

    passes = {}

    def policy_of(normalization: str):
        def policy(prompts, actions):
            if "details" not in passes:  # the same states in the same order for every normalization
                read = [actions_prompt(p, a) if prompt == "actions" else p for p, a in zip(prompts, actions)]
                passes["details"] = score_details(llm, read, actions)
            details = passes["details"]
            divisors = {"sum": [1] * len(actions), "token": details.num_tokens,
                        "word": details.num_words}[normalization]
            return [(s / n).softmax(-1).tolist() for s, n in zip(details.log_likelihoods, divisors)]
        return policy

    return {n: success_probability(task, max_steps, policy_of(n)) for n in NORMALIZATIONS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=list(ENVS), help="household task ids")
    parser.add_argument("--model", default=None, help="a model name of `groundrl models` or a local path "
                        "(default: the embedded default model)")
    args = parser.parse_args(argv)

    import torch
    from rich.console import Console
    from rich.table import Table

    import groundrl
    from groundrl.envs.household import HouseholdEnv
    from groundrl.errors import GroundrlError
    from groundrl.llm import DEFAULT_MODEL, load_llm

    from benchkit.household import random_success_probability

    tasks = []
    for env_id in args.envs:
        try:
            env = groundrl.make_env(env_id, prompt=None).unwrapped
        except GroundrlError as error:
            parser.error(str(error))
        if not isinstance(env, HouseholdEnv):
            parser.error(f"{env_id} is not a household task: its exact success cannot be computed")
        tasks.append((env_id, env.task, env.max_steps))
    try:
        args.model = args.model or DEFAULT_MODEL
        llm = load_llm(args.model)
    except GroundrlError as error:
        parser.error(str(error))

    table = Table(title=f"Exact P(success within the episode) of {args.model}'s untrained policy, sampled")
    for column in ("environment", "policy", *NORMALIZATIONS, "seconds"):
        table.add_column(column, justify="left" if column in ("environment", "policy") else "right")
    for env_id, task, max_steps in tasks:
        uniform = f"{random_success_probability(task, max_steps):.5f}"
        table.add_row(env_id, "uniform over the valid actions", uniform, uniform, uniform, "")
        for prompt in PROMPTS:
            started = time.perf_counter()
            with torch.inference_mode():
                found = priors(llm, task, max_steps, prompt)
            table.add_row("", f"LLM, prompt={prompt}", *(f"{found[n]:.5f}" for n in NORMALIZATIONS),
                          f"{time.perf_counter() - started:.0f}")
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
