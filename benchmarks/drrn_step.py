"""Seconds per TD step of the DRRN baseline on GoToLocal's prompts, padded against packed.

On GoToLocal's prompts (~190 words each): seconds per TD minibatch with the agent's encoding (the GRU
over the padded batch, read at each text's last word) beside a packed sequence
(``pack_padded_sequence``, the encoding before), the same weights and batch. On a CPU the GRU's
backward dominates and is 2-3x slower packed; the two give the same Q-values (the table says by how
much they differ).

The transitions: ``--decisions`` decisions of random play in ``groundrl/BabyAI-GoToLocal-v0`` with
the DRRN preset's prompt; each step takes ``--batch`` of them, as ``groundrl.train.algorithms.DRRN``
does (target from the next state without gradient, Huber loss, backward, Adam).

    python benchmarks/drrn_step.py
    python benchmarks/drrn_step.py --steps 3 --batch 16      # quick
    groundrl bench drrn_step
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

GROUP = "speed"


def packed_encode(agent, texts, gru):
    """The encoding as a packed sequence: the GRU's final state at each text's own length."""
    import torch
    from torch import nn

    from groundrl.agents.words import word_ids

    ids = [word_ids(t, agent.config.word_buckets) or [0] for t in texts]
    padded = torch.zeros(len(ids), max(map(len, ids)), dtype=torch.long)
    for row, x in zip(padded, ids):
        row[: len(x)] = torch.tensor(x)
    packed = nn.utils.rnn.pack_padded_sequence(agent.embedding(padded), torch.tensor([len(x) for x in ids]),
                                               batch_first=True, enforce_sorted=False)
    return gru(packed)[1][-1]


def transitions(decisions: int, seed: int = 0) -> list[tuple]:
    """(prompt, action, reward, next prompt, next actions, terminated) of random play."""
    import random

    from groundrl.agents.drrn import DRRNAgent
    from groundrl.envs import make_env
    from groundrl.train.config import load_config

    config = load_config("drrn", overrides=["env=groundrl/BabyAI-GoToLocal-v0"])
    env = make_env(config.env, **config.env_options)
    agent = DRRNAgent(config.agent.drrn)
    rng, found = random.Random(seed), []
    obs, info = env.reset(seed=seed)
    while len(found) < decisions:
        prompt = agent.observe(obs, info)
        action = rng.choice(info["valid_actions"])
        obs, reward, terminated, truncated, info = env.step(action)
        found.append((prompt, action, float(reward), agent.observe(obs, info), list(info["valid_actions"]), terminated))
        if terminated or truncated:
            obs, info = env.reset(seed=seed + len(found))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=512, help="transitions of random play to sample from")
    parser.add_argument("--batch", type=int, default=64, help="transitions per step (the DRRN preset's batch_size)")
    parser.add_argument("--steps", type=int, default=8, help="measured steps per encoding (after one warm-up)")
    args = parser.parse_args(argv)
    if min(args.decisions, args.batch, args.steps) < 1:
        parser.error("--decisions, --batch and --steps must be at least 1")

    import torch
    import torch.nn.functional as F
    from rich.console import Console
    from rich.table import Table

    from groundrl.agents.drrn import DRRNAgent
    from groundrl.agents.words import word_ids
    from groundrl.train.config import load_config

    torch.manual_seed(0)
    memory = transitions(args.decisions)
    words = statistics.mean(len(word_ids(t[0], 8192)) for t in memory)
    agent = DRRNAgent(load_config("drrn", overrides=["env=groundrl/BabyAI-GoToLocal-v0"]).agent.drrn)
    own = agent._encode

    def step(batch) -> tuple[float, float]:
        observations, actions, rewards, next_observations, next_actions, terminated = zip(*batch)
        start = time.perf_counter()
        with torch.no_grad():
            next_q = torch.stack([q.max() for q in agent.q_values(list(next_observations), list(next_actions))])
        targets = torch.tensor(rewards) + 0.9 * (1.0 - torch.tensor(terminated, dtype=torch.float32)) * next_q
        q = torch.cat(agent.q_values(list(observations), [[a] for a in actions]))
        forward = time.perf_counter() - start
        agent.zero_grad(set_to_none=True)
        F.smooth_l1_loss(q, targets).backward()  # no optimizer step: both encodings time the same weights
        return forward, time.perf_counter() - start - forward

    generator = torch.Generator().manual_seed(0)
    batches = [[memory[i] for i in torch.randint(len(memory), (args.batch,), generator=generator).tolist()]
               for _ in range(args.steps + 1)]
    rows = {}
    for name, encode in (("packed (before)", lambda texts, gru: packed_encode(agent, texts, gru)),
                         ("padded, read at the last word (now)", own)):
        agent._encode = encode
        times = [step(batch) for batch in batches][1:]
        rows[name] = (statistics.mean(f for f, _ in times), statistics.mean(b for _, b in times))
    agent._encode = own
    with torch.no_grad():
        texts = [t[0] for t in batches[0]]
        difference = (packed_encode(agent, texts, agent.observation_encoder)
                      - own(texts, agent.observation_encoder)).abs().max().item()

    table = Table(title=f"DRRN TD step on GoToLocal prompts ({words:.0f} words on average), batch {args.batch}, "
                        f"{args.steps} steps, {torch.get_num_threads()} thread(s); "
                        f"encodings differ by {difference:.1e}")
    for column in ("encoding", "forward s", "backward s", "step s", "speed-up"):
        table.add_column(column, justify="left" if column == "encoding" else "right")
    before = sum(rows["packed (before)"])
    for name, (forward, backward) in rows.items():
        table.add_row(name, f"{forward:.3f}", f"{backward:.3f}", f"{forward + backward:.3f}",
                      f"{before / (forward + backward):.2f}x")
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
