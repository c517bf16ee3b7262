"""How much scoring deduplication saves: the share of repeated inputs in random rollouts.

In rollouts of a random policy, the share of decisions whose (prompt, valid actions) was already
computed, per environment, for the rollout (the policy is fixed there: each distinct input once) and
for the minibatches of the update (each distinct input once per micro-batch that gathers them). No
model is loaded.

    python benchmarks/distinct_prompts.py                       # TWOSOME's and GLAM's environments
    python benchmarks/distinct_prompts.py --envs groundrl/TomatoSalad-v0 --num-envs 4 --num-steps 32
    groundrl bench distinct_prompts
"""

from __future__ import annotations

import argparse
import statistics
import sys

from benchkit.args import at_least_one

GROUP = "speed"
ENVS = ["groundrl/FoodPreparation-v0", "groundrl/Entertainment-v0", "groundrl/TomatoSalad-v0",
        "groundrl/TomatoLettuceSalad-v0", "groundrl/BabyAI-GoToLocal-v0", "groundrl/BabyAI-MixedTrainLocal-v0"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=ENVS)
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--num-steps", type=int, default=32)
    parser.add_argument("--minibatch", type=int, default=32)
    parser.add_argument("--rollouts", type=int, default=5, help="rollouts averaged per environment")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    at_least_one(parser, args, "num_envs", "num_steps", "minibatch", "rollouts")

    import torch
    from rich.console import Console
    from rich.table import Table

    from groundrl.agents import RandomAgent
    from groundrl.envs import make_env
    from groundrl.llm.cache import decision_key
    from groundrl.train.collector import Collector

    table = Table(title=f"Distinct (prompt, valid actions) of a random policy: {args.num_envs} envs x "
                        f"{args.num_steps} decisions, minibatches of {args.minibatch}")
    for column in ("environment", "decisions", "distinct in a rollout", "rows saved (rollout)",
                   "distinct per minibatch", "rows saved (update)"):
        table.add_column(column, justify="left" if column == "environment" else "right")
    for env_id in args.envs:
        envs = [make_env(env_id) for _ in range(args.num_envs)]
        collector = Collector(envs, lambda slot, previous: (args.seed * 1000 + slot if previous is None
                                                            else previous + args.num_envs))
        agent, generator = RandomAgent(), torch.Generator().manual_seed(args.seed)
        per_rollout, per_minibatch = [], []
        for _ in range(args.rollouts):
            keys = []
            for _ in range(args.num_steps):
                keys += [(decision_key(str(o)), tuple(a)) for o, a in
                         zip(collector.observations(), collector.valid_actions())]
                choices, _ = agent.act(collector.observations(), collector.valid_actions(), generator=generator)
                collector.step(choices)
            per_rollout.append(len(set(keys)))
            order = torch.randperm(len(keys), generator=generator).tolist()
            per_minibatch += [len({keys[i] for i in order[s:s + args.minibatch]})
                              for s in range(0, len(keys), args.minibatch)]
        collector.close()
        decisions = args.num_envs * args.num_steps
        rollout, minibatch = statistics.mean(per_rollout), statistics.mean(per_minibatch)
        table.add_row(env_id, str(decisions), f"{rollout:.1f}", f"{1 - rollout / decisions:.0%}",
                      f"{minibatch:.1f}", f"{1 - minibatch / args.minibatch:.0%}")
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
