"""The default model's learning curve on a household task, its exact success as it trains.

Food Preparation (TWOSOME's VirtualHome task; or another household task, ``--env``): success vs
decisions and wall time, with the decisions/s split into rollout and update.

Besides the success of the training episodes, every ``--every`` updates it computes the *exact*
probability that the current policy (sampled) succeeds within 50 steps, by dynamic programming
over the task's world states (30 in Food Preparation): the truth a sampled evaluation only
estimates. At the end it evaluates the policy on 100 sampled episodes.

    python benchmarks/train_food_preparation.py                        # 20k decisions, twosome structure
    python benchmarks/train_food_preparation.py --decisions 2048 ppo.policy_lr=1e-4
    python benchmarks/train_food_preparation.py --stop-at 0.95          # stop once the policy is that good
    python benchmarks/train_food_preparation.py --env groundrl/Entertainment-v0 --decisions 5000
    python benchmarks/train_food_preparation.py --json rows.json        # rows kept as they come: an interrupted
    python benchmarks/train_food_preparation.py --json rows.json --resume  # run continues from its checkpoint
    groundrl bench train_food_preparation
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

GROUP = "learning"


def git_commit() -> str | None:
    """The commit of the code a record was made with (None outside a git checkout)."""
    import subprocess

    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                           text=True)
    return found.stdout.strip() or None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="groundrl/FoodPreparation-v0", help="a household task (VirtualHome's)")
    parser.add_argument("--decisions", type=int, default=20_000)
    parser.add_argument("--preset", default="twosome", help="the settings to start from; on twosome (the paper's "
                        "learning rates, which do not move a 135M model) the policy and value rates are 3e-4 and 1e-3")
    parser.add_argument("--every", type=int, default=4, help="updates between exact success computations")
    parser.add_argument("--stop-at", type=float, default=None,
                        help="stop once the exact success probability reaches this (then evaluate)")
    parser.add_argument("--runs-dir", default="runs/bench")
    parser.add_argument("--json", default=None, help="also write the rows (as they come) and the final evaluation "
                        "to this file")
    parser.add_argument("--resume", action="store_true", help="continue the run --json's file records, from its "
                        "latest checkpoint (a checkpoint is saved with every row)")
    parser.add_argument("overrides", nargs="*", help="KEY=VALUE settings on top of the twosome preset")
    args = parser.parse_args(argv)

    import torch
    from rich.console import Console
    from rich.table import Table

    from groundrl.envs import make_env
    from groundrl.errors import GroundrlError
    from groundrl.eval import evaluate
    from groundrl.runs import cpu_name, new_run_dir
    from groundrl.train.config import load_config
    from groundrl.train.trainer import Trainer, resume

    from benchkit.household import agent_policy, success_probability

    keys = ("decisions", "wall_seconds", "training_success", "exact_success", "rollout_per_second", "update_per_second",
            "memory_gib")
    rates = ["ppo.policy_lr=3e-4", "ppo.value_lr=1e-3"] if args.preset == "twosome" else []
    settings = [f"env={args.env}", f"rollout.total_decisions={args.decisions}", *rates, "progress=false",
                *args.overrides]
    console = Console()
    if args.resume:
        if not args.json or not Path(args.json).is_file():
            parser.error("--resume continues the run that --json's file records: give --json FILE of an earlier run")
        record = json.loads(Path(args.json).read_text())
        settings, run_dir = record["settings"], Path(record["run_dir"])  # the run's config.yaml has the preset
        trainer = resume(run_dir)
        rows = [tuple(row.get(key) for key in keys) for row in record["rows"]
                if row["decisions"] <= trainer.state.decisions]
        config = trainer.config
        console.print(f"run folder {run_dir}: resumed at {trainer.state.decisions} decisions")
    else:
        try:
            config = load_config(args.preset, overrides=settings)
        except GroundrlError as error:  # an unknown preset or a bad KEY=VALUE: one line, no traceback
            parser.error(str(error))
        run_dir = new_run_dir(args.runs_dir, "train", config.env)
        trainer = Trainer(config, run_dir)
    task = getattr(make_env(config.env).unwrapped, "task", None)
    if task is None:
        parser.error(f"--env {config.env} is not a household task: its exact success cannot be computed")

    try:
        policy = agent_policy(trainer.agent, config.prompt)
    except GroundrlError as error:
        parser.error(str(error))

    def exact() -> float:
        with torch.random.fork_rng():  # measuring does not move training's random stream (nor a resumed one's)
            return success_probability(task, 50, policy)

    def write(evaluation: dict | None = None) -> None:
        if args.json:
            Path(args.json).write_text(json.dumps({"settings": settings, "run_dir": str(run_dir), "commit": commit,
                                                   "cpu": cpu,
                                                   "rows": [dict(zip(keys, row)) for row in rows],
                                                   "evaluation": evaluation}, indent=1))

    commit = record.get("commit") if args.resume else git_commit()
    cpu = cpu_name()  # what its seconds were measured on (a run resumed elsewhere: both)
    if args.resume and record.get("cpu") and not record["cpu"].endswith(cpu):
        cpu = f"{record['cpu']}, then {cpu}"
    if not args.resume:
        rows = [(0, 0.0, float("nan"), exact(), float("nan"), float("nan"), None)]
        console.print(f"run folder {run_dir}; update 0: exact success {rows[0][3]:.4f}")
        write()
    while not trainer.finished:
        started, before = time.perf_counter(), trainer.state.decisions
        metrics = trainer.train(updates=args.every)[-args.every:]
        window = [m for m in metrics if m.get("episodes")]
        successes = sum(m["success_rate"] * m["episodes"] for m in window)
        episodes = sum(m["episodes"] for m in window)
        rollout = sum(m["rollout_seconds"] for m in metrics)
        update = sum(m["update_seconds"] for m in metrics)
        decisions = trainer.state.decisions - before  # a group method's updates play whole episodes: varying
        rows.append((trainer.state.decisions, trainer.state.wall_seconds,
                     successes / episodes if episodes else float("nan"), exact(), decisions / rollout,
                     decisions / update, max(m.get("memory_gib") or 0.0 for m in metrics)))
        console.print(f"decisions {rows[-1][0]:>6}  wall {rows[-1][1]:>7.0f} s  train success {rows[-1][2]:.3f}  exact "
                      f"{rows[-1][3]:.4f}  rollout {rows[-1][4]:.2f}/s  update {rows[-1][5]:.2f}/s  "
                      f"({time.perf_counter() - started:.0f} s)")
        write()  # train() saved a checkpoint at its last update: this row is where a resumed run continues
        if args.stop_at is not None and rows[-1][3] >= args.stop_at:
            trainer.save_checkpoint()
            break
    final = evaluate(trainer.agent, config.env, episodes=100, seed=10**6, progress=False,
                     env_kwargs=config.env_options)

    table = Table(title=f"{config.env}, {trainer.agent.llm.name}, LoRA, word normalization ({run_dir})")
    for column in ("decisions", "wall s", "training success", "exact P(success)", "rollout decisions/s",
                   "update decisions/s"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(str(row[0]), f"{row[1]:.0f}", f"{row[2]:.3f}", f"{row[3]:.4f}", f"{row[4]:.2f}", f"{row[5]:.2f}")
    console.print(table)
    console.print(f"100 sampled evaluation episodes: success {final.success_rate:.2f} "
                  f"[{final.ci_low:.2f}, {final.ci_high:.2f}]")
    write(final.to_dict())
    return 0


if __name__ == "__main__":
    sys.exit(main())
