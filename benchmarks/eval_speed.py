"""Evaluation episodes and decisions per second, this tree's code beside an earlier commit's.

``groundrl eval``'s code (:func:`groundrl.eval.evaluate`), side by side in one run. Each row plays
the same ``--episodes`` episodes (seeds from 1,000,000, as ``groundrl eval``) of the agent of
``--config`` (default: the GoToLocal example; untrained, unless ``--agent RUN`` names a trained run
or checkpoint) in a fresh process of its own, one after another, with ``--threads`` threads:
``before`` runs the code of ``--before`` (a commit, checked out into a temporary worktree), the
others this tree's. "same episodes" counts the episodes whose success and length equal the first
row's (sampled actions: a score that moved by a rounding step may, rarely, pick another).

    python benchmarks/eval_speed.py --before 6dc3843                  # before/after, 100 episodes
    python benchmarks/eval_speed.py --num-envs 8,32 --episodes 200      # this tree only
    python benchmarks/eval_speed.py --model tiny-llama --episodes 4 agent.llm.train_layers=1   # check the script
    groundrl bench eval_speed --before main
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GROUP = "speed"
ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "glam" / "goto_local.yaml"
SEED = 1_000_000  # groundrl eval's first evaluation seed


def play(spec: dict) -> dict:
    """One row, in this process: the agent built (or loaded), the episodes played, timed."""
    import torch

    torch.set_num_threads(spec["threads"])
    from groundrl.eval.evaluate import evaluate

    started = time.perf_counter()
    if spec["agent"]:
        from groundrl.train.checkpoint import load_agent

        agent, config, _ = load_agent(spec["agent"], device="cpu")
    else:
        from groundrl.agents.factory import build_agent
        from groundrl.envs import make_env
        from groundrl.train.config import load_config

        config = load_config(files=[spec["config"]], overrides=spec["overrides"])
        agent = build_agent(config.agent, make_env(config.env, **config.env_options), model=config.model,
                            device="cpu", seed=config.seed, precision=config.precision)
        agent.eval()
    build = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="groundrl-eval-speed-") as folder:
        started = time.perf_counter()
        result = evaluate(agent, config.env, episodes=spec["episodes"], num_envs=spec["num_envs"], seed=SEED,
                          run_dir=Path(folder), env_kwargs=config.env_options, progress=False)
        wall = time.perf_counter() - started
        episodes = sorted((json.loads(line) for line in (Path(folder) / "episodes.jsonl").read_text().splitlines()),
                          key=lambda o: o["episode"])
    return {"wall": wall, "build": build, "episodes": result.episodes, "success": result.success_rate,
            "decisions": sum(o["length"] for o in episodes), "precision": getattr(agent, "precision", None),
            "outcomes": [[bool(o["success"]), o["length"]] for o in episodes]}


def run_row(spec: dict, code: Path) -> dict:
    """One row in a fresh process running the code under ``code``; its figures or ``{"error": ...}``."""
    from benchkit.revisions import importing_from

    threads = str(spec["threads"])
    environment = importing_from(code, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
    output = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--row", json.dumps(spec)],
                            capture_output=True, text=True, env=environment, cwd=code)
    for line in reversed(output.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    lines = [line for line in output.stderr.splitlines() if line.strip()]
    return {"error": f"exit code {output.returncode}" + (f": {lines[-1].strip()}" if lines else "")}


def print_table(rows: list[tuple[str, dict]], episodes: int, threads: int) -> None:
    from benchkit.records import cpu_name

    print(f"CPU: {cpu_name()}; {threads} thread(s) a row; {episodes} episodes a row, seeds from {SEED:,}")
    first = next((r for _, r in rows if "error" not in r), None)
    header = ["row", "precision", "episodes/s", "decisions/s", "speed-up", "success", "same episodes", "seconds"]
    table = [header]
    for name, r in rows:
        if "error" in r:
            table.append([name, "-", "-", "-", "-", "-", "-", r["error"]])
            continue
        same = sum(a == b for a, b in zip(r["outcomes"], first["outcomes"]))
        table.append([name, str(r["precision"]), f"{r['episodes'] / r['wall']:.3f}",
                      f"{r['decisions'] / r['wall']:.2f}", f"{first['wall'] / r['wall']:.2f}x",
                      f"{r['success']:.3f}", f"{same}/{r['episodes']}", f"{r['wall']:.0f}"])
    widths = [max(len(row[k]) for row in table) for k in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=None, help="a commit whose code plays the first row (default: none)")
    parser.add_argument("--config", type=Path, default=EXAMPLE, help="the agent's training config (default: the "
                        "GoToLocal example)")
    parser.add_argument("--agent", default=None, help="a trained run folder or checkpoint instead of the "
                        "config's untrained agent")
    parser.add_argument("--episodes", type=int, default=100, help="episodes a row")
    parser.add_argument("--num-envs", default="8", help="comma-separated: a row of this tree per value "
                        "(the before row plays the first)")
    parser.add_argument("--threads", type=int, default=1, help="threads a row")
    parser.add_argument("--model", default=None, help="another model than the config's (tiny-llama: check the script)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--row", default=None, help=argparse.SUPPRESS)  # internal: run one row, print its JSON
    parser.add_argument("overrides", nargs="*", help="KEY=VALUE settings on top of the config")
    args = parser.parse_args(argv)
    if args.row is not None:
        print(json.dumps(play(json.loads(args.row))))
        return 0
    try:
        counts = [int(n) for n in args.num_envs.split(",") if n.strip()]
    except ValueError:
        parser.error("--num-envs: comma-separated whole numbers, e.g. 8,32")
    if not counts or min(counts) < 1 or args.episodes < 1 or args.threads < 1:
        parser.error("--num-envs, --episodes and --threads are 1 or more")
    overrides = [*([f"model={args.model}"] if args.model else []), *args.overrides]
    from groundrl.errors import GroundrlError

    try:  # checked here, before any row starts: a missing file or a bad setting is one line
        if args.agent:
            from groundrl.train.checkpoint import find

            find(args.agent)
        else:
            from groundrl.train.config import load_config

            load_config(files=[args.config], overrides=overrides)
    except GroundrlError as error:
        parser.error(str(error).strip().splitlines()[0])
    spec = {"config": str(args.config.resolve()), "agent": args.agent and str(Path(args.agent).resolve()),
            "overrides": overrides, "episodes": args.episodes, "threads": args.threads}
    rows: list[tuple[str, dict]] = []
    if args.before:
        from benchkit.revisions import checked_out

        with checked_out(args.before) as tree:
            rows.append((f"before ({args.before}), --num-envs {counts[0]}", run_row({**spec, "num_envs": counts[0]},
                                                                                    tree)))
        print(f"{rows[-1][0]}: done", flush=True)
    for count in counts:
        rows.append((f"this tree, --num-envs {count}", run_row({**spec, "num_envs": count}, ROOT)))
        print(f"{rows[-1][0]}: done", flush=True)
    print_table(rows, args.episodes, args.threads)
    if args.json:
        args.json.write_text(json.dumps([{"row": name, **row} for name, row in rows], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
