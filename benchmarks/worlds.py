"""Random, gold-path and zero-shot success on each TextWorld-family game, and its speed.

TextWorld, TextWorldExpress and ScienceWorld in groundrl: per environment id, the success of the
bounds (uniformly random, the package's gold path, and the untrained default model: ``zero-shot``)
on the test games, how many actions are valid per state, and the environment's own speed. The
gold path plays ScienceWorld with every valid action (``max_actions=None``), the others with the cap.

Per id: ``--episodes`` episodes per agent on the test split (ScienceWorld: ``--scienceworld-episodes``,
its episodes take seconds), evaluation seeds from 1,000,000, sampled; the valid actions counted over
the random agent's states (ScienceWorld: before its cap, ``valid_actions_total``, and as offered);
steps/s: the environment alone under the random agent (resets included). Each id's record goes to
``--out/ID.json`` (in git); running again skips the ids done. With ``--episodes-dir``, each id and
agent's finished episodes are kept there as they end (evaluation folders, not for git), so a campaign
stopped in the middle of an id plays only its episodes not yet finished when run again.

    python benchmarks/worlds.py                                   # random and gold, every new id
    python benchmarks/worlds.py --agents random,gold,zero-shot --ids groundrl/TWX-CoinCollector-v0
    python benchmarks/worlds.py --agents zero-shot --zero-shot-episodes 20    # the model's bound, fewer episodes
    python benchmarks/worlds.py --agents zero-shot --episodes-dir /tmp/worlds  # resumable inside an id
    python benchmarks/worlds.py --table-only                      # --markdown: as the docs show it
    groundrl bench worlds
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

GROUP = "baselines"
RESULTS = "results/worlds"
HERE = Path(__file__).resolve().parent
AGENTS = ("random", "gold", "zero-shot")


def new_world_ids() -> list[str]:
    from groundrl.envs import list_envs

    return [i for i in list_envs() if i.startswith(("groundrl/TWX-", "groundrl/TextWorld-", "groundrl/ScienceWorld-"))]


def test_split(env_id: str) -> dict:
    return {"test": True} if "/TextWorld-" in env_id else {"split": "test"}


def measure_env(env_id: str, episodes: int) -> dict:
    """The random agent's play of ``episodes`` test games: valid actions per state, steps/s."""
    import numpy as np

    from groundrl.envs import make_env

    env = make_env(env_id, **test_split(env_id))
    rng = np.random.default_rng(0)
    offered, total, steps = [], [], 0
    started = time.perf_counter()
    for episode in range(episodes):
        _, info = env.reset(seed=10**6 + episode)
        done = False
        while not done:
            offered.append(len(info["valid_actions"]))
            total.append(info.get("valid_actions_total", len(info["valid_actions"])))
            _, _, terminated, truncated, info = env.step(int(rng.integers(len(info["valid_actions"]))))
            steps, done = steps + 1, terminated or truncated
    seconds = time.perf_counter() - started
    env.close()

    def spread(counts):
        return {"mean": statistics.mean(counts), "median": statistics.median(counts),
                "p90": float(np.percentile(counts, 90)), "max": max(counts)}

    return {"valid_actions": spread(offered), "valid_actions_total": spread(total), "steps_per_second": steps / seconds,
            "steps": steps}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", default=None, help="comma-separated env ids (default: every TWX, TextWorld and "
                        "ScienceWorld id)")
    parser.add_argument("--agents", default="random,gold", help=f"comma-separated, of: {', '.join(AGENTS)}")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--scienceworld-episodes", type=int, default=10)
    parser.add_argument("--zero-shot-episodes", type=int, default=None,
                        help="episodes of the zero-shot agent (default: as many as the others); it scores every "
                             "valid action with the model at each step, so 100 episodes per id are hours on a CPU")
    parser.add_argument("--out", type=Path, default=HERE / RESULTS,
                        help="where each id's record goes (in git)")
    parser.add_argument("--episodes-dir", type=Path, default=None,
                        help="keep each id and agent's finished episodes here (not in git): a stopped run resumes "
                             "inside an id; its record's seconds then count the last run only")
    parser.add_argument("--table-only", action="store_true", help="print the table of the ids done, run nothing")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown (for the docs)")
    args = parser.parse_args(argv)

    from groundrl.envs import list_envs

    ids = [i.strip() for i in args.ids.split(",")] if args.ids else new_world_ids()
    for env_id in ids:
        if env_id not in list_envs():
            parser.error(f"--ids: no environment {env_id!r} (`groundrl envs`)")
    for flag, value in (("--episodes", args.episodes), ("--scienceworld-episodes", args.scienceworld_episodes),
                        ("--zero-shot-episodes", args.zero_shot_episodes)):
        if value is not None and value < 1:
            parser.error(f"{flag} must be a positive number of episodes, not {value}")
    if args.episodes_dir is not None and args.episodes_dir.exists() and not args.episodes_dir.is_dir():
        parser.error(f"--episodes-dir: {args.episodes_dir} is a file; give a folder (made if missing)")
    agents = [a.strip() for a in args.agents.split(",")]
    for agent in agents:
        if agent not in AGENTS:
            parser.error(f"--agents: no {agent!r}; choose from {', '.join(AGENTS)}")

    if not args.table_only:
        from groundrl.eval import evaluate
        from groundrl.eval.agents import evaluation_agent

        args.out.mkdir(parents=True, exist_ok=True)
        for env_id in ids:
            path = args.out / f"{env_id.removeprefix('groundrl/')}.json"
            record = json.loads(path.read_text()) if path.is_file() else {"env_id": env_id, "agents": {}}
            episodes = args.scienceworld_episodes if "/ScienceWorld-" in env_id else args.episodes
            if "environment" not in record:
                print(f"{env_id}: the environment alone, {episodes} random episodes", flush=True)
                record["environment"] = measure_env(env_id, episodes)
            for name in agents:
                if name in record["agents"]:
                    continue
                agent, _, _ = evaluation_agent(name)
                played = (args.zero_shot_episodes if name == "zero-shot" and args.zero_shot_episodes is not None
                          else episodes)
                print(f"{env_id}: {name}, {played} episodes", flush=True)
                started = time.perf_counter()
                # the gold path is a bound of the task: in ScienceWorld it sees every valid action, not the capped list
                every = {"max_actions": None} if name == "gold" and "/ScienceWorld-" in env_id else {}
                kept = args.episodes_dir / f"{path.stem}-{name}" if args.episodes_dir else None
                result = evaluate(agent, env_id, episodes=played, seed=10**6, progress=False,
                                  env_kwargs={**test_split(env_id), **every}, run_dir=kept, resume=kept is not None)
                record["agents"][name] = {**result.to_dict(), "seconds": time.perf_counter() - started}
                path.write_text(json.dumps(record, indent=1) + "\n")
            path.write_text(json.dumps(record, indent=1) + "\n")
    print_table(args.out, ids, agents, markdown=args.markdown)
    return 0


def print_table(out: Path, ids: list[str], agents: list[str], markdown: bool = False) -> None:
    from rich.console import Console
    from rich.table import Table

    columns = ("env id", "episodes", *agents, "valid actions", "before the cap", "steps/s")
    rows = []
    for env_id in ids:
        path = out / f"{env_id.removeprefix('groundrl/')}.json"
        if not path.is_file():
            continue
        record = json.loads(path.read_text())
        results = record["agents"]
        environment = record.get("environment", {})

        def counts(key, environment=environment):
            c = environment.get(key)
            return f"{c['mean']:.1f} / {c['median']:.0f} / {c['max']}" if c else "-"

        episodes = next((r["episodes"] for r in results.values()), "-")
        cells = [f"{results[a]['success_rate']:.2f} [{results[a]['ci_low']:.2f}, {results[a]['ci_high']:.2f}]"
                 + (f" ({results[a]['episodes']} ep.)" if results[a]["episodes"] != episodes else "")
                 if a in results else "-" for a in agents]
        rows.append((env_id.removeprefix("groundrl/"), str(episodes), *cells, counts("valid_actions"),
                     counts("valid_actions_total") if "/ScienceWorld-" in env_id else "",
                     f"{environment['steps_per_second']:.3g}" if environment else "-"))
    if markdown:
        print("| " + " | ".join(columns) + " |")
        print("|" + "---|" * len(columns))
        for row in rows:
            print("| " + " | ".join((f"`{row[0]}`", *row[1:])) + " |")
        return
    table = Table(title="The test games: success of each agent [95% CI] over its episodes; valid actions per state "
                        "(mean / median / max; ScienceWorld: offered, and before the cap); the environment's steps/s")
    for column in columns:
        table.add_column(column, justify="left" if column == "env id" else "right")
    for row in rows:
        table.add_row(*row)
    Console(width=220).print(table)


if __name__ == "__main__":
    sys.exit(main())
