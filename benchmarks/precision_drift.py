"""How far the action scores in bf16-mixed and in bf16 weights move from fp32's.

bf16-mixed (bf16 matmuls under autocast, float32 weights) and pure bf16 (the weights themselves in
bfloat16), on prompts the environments really show (a random policy's), with the default model.
Scores in nats (word-normalized, as the twosome preset scores), and the KL divergence of the policy
from fp32's.

    python benchmarks/precision_drift.py
    python benchmarks/precision_drift.py --envs groundrl/FoodPreparation-v0 --prompts 16
    groundrl bench precision_drift
"""

from __future__ import annotations

import argparse
import sys

from benchkit.args import at_least_one

GROUP = "fidelity"
ENVS = ["groundrl/FoodPreparation-v0", "groundrl/TomatoSalad-v0", "groundrl/BabyAI-GoToLocal-v0"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=ENVS)
    parser.add_argument("--prompts", type=int, default=8, help="prompts per environment")
    parser.add_argument("--model", default=None, help="default: the embedded default model")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    at_least_one(parser, args, "prompts")

    import torch
    from rich.console import Console
    from rich.table import Table

    from groundrl.agents import LLMPolicy, RandomAgent
    from groundrl.envs import make_env
    from groundrl.llm import load_llm

    requests = {}
    generator = torch.Generator().manual_seed(args.seed)
    for env_id in args.envs:
        env, seen = make_env(env_id), []
        obs, info = env.reset(seed=args.seed)
        while len(seen) < args.prompts:
            seen.append((str(obs), list(info["valid_actions"])))
            (choice,), _ = RandomAgent().act([obs], [info["valid_actions"]], generator=generator)
            obs, _, terminated, truncated, info = env.step(choice)
            if terminated or truncated:
                obs, info = env.reset(seed=args.seed + len(seen))
        requests[env_id] = seen

    fp32 = LLMPolicy(load_llm(args.model, dtype="float32", device="cpu"))
    mixed = LLMPolicy(fp32.llm, precision="bf16-mixed")
    pure = LLMPolicy(load_llm(args.model, dtype="bfloat16", device="cpu"))

    table = Table(title=f"Action scores against fp32 ({fp32.llm.name}, word normalization; nats)")
    for column in ("environment", "precision", "max |score - fp32|", "mean |score - fp32|", "max KL(fp32 || this)"):
        table.add_column(column, justify="left" if column in ("environment", "precision") else "right")
    for env_id, seen in requests.items():
        prompts, actions = [p for p, _ in seen], [a for _, a in seen]
        with torch.no_grad():
            exact = fp32.forward(prompts, actions).logits
            for name, policy in (("bf16-mixed", mixed), ("bf16 weights", pure)):
                other = [x.float() for x in policy.forward(prompts, actions).logits]
                differences = torch.cat([(a - b).abs() for a, b in zip(exact, other)])
                kl = max(float((a.log_softmax(-1).exp() * (a.log_softmax(-1) - b.log_softmax(-1))).sum())
                         for a, b in zip(exact, other))
                table.add_row(env_id, name, f"{float(differences.max()):.4f}", f"{float(differences.mean()):.4f}",
                              f"{kl:.2e}")
    Console(width=140).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
