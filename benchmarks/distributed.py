"""Training throughput with 1 and with N processes (groundrl train --nproc N, i.e. torchrun).

The same run for every row: TWOSOME's trainer (LoRA actor, critic on the frozen base) in
FollowInstruction, 8 environments x 8 steps = 64 decisions per update, split over the processes.
Decisions/s is the mean over the updates after the first (which warms up); wall includes starting
the processes and loading the model. On CPUs the processes split the cores (2 cores: 1 thread each
for 2 processes, 2 threads for 1).

    python benchmarks/distributed.py                                  # tiny model and the default model
    python benchmarks/distributed.py --models tiny-llama --updates 6 --nproc 1 2
    groundrl bench distributed --models default
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GROUP = "speed"
SETTINGS = ["env=groundrl/FollowInstruction-v0", "rollout.num_envs=8", "rollout.num_steps=8", "ppo.minibatch_size=16",
            "ppo.value_minibatch_size=16", "ppo.micro_batch_size=4", "ppo.policy_lr=1e-4", "progress=false",
            "checkpoint_every=1000000"]


def run(model: str, nproc: int, updates: int, runs_dir: Path) -> dict:
    overrides = [*SETTINGS, f"rollout.total_decisions={64 * updates}", f"runs_dir={runs_dir}"]
    if model != "default":
        overrides.append(f"model={model}")
    command = [sys.executable, "-m", "groundrl", "train", "--nproc", str(nproc), *overrides]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-2000:]}")
    [run_dir] = [p for p in runs_dir.iterdir() if p.is_dir()]
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steady = metrics[1:] or metrics
    mean = lambda key: sum(m[key] for m in steady) / len(steady)  # noqa: E731
    return {"decisions_per_second": mean("decisions_per_second"), "rollout_seconds": mean("rollout_seconds"),
            "update_seconds": mean("update_seconds"), "memory_gib": max(m["memory_gib"] for m in metrics),
            "wall": wall, "updates": len(metrics)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tiny-llama", "default"],
                        help="model names ('default': the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--nproc", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--updates", type=int, default=4, help="updates of 64 decisions per row")
    args = parser.parse_args(argv)
    if args.updates < 1 or min(args.nproc) < 1:
        parser.error("--updates and --nproc must be 1 or more")

    from rich.console import Console
    from rich.table import Table

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    table = Table(title=f"Training throughput, 1 vs N processes ({cores} CPU cores; 64 decisions per update)")
    for column in ("model", "processes", "decisions/s", "speed-up", "rollout s/update", "update s/update",
                   "peak GiB/process", "wall s"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for model in args.models:
        baseline = None
        for nproc in args.nproc:
            with tempfile.TemporaryDirectory() as runs_dir:
                row = run(model, nproc, args.updates, Path(runs_dir))
            baseline = baseline or row["decisions_per_second"]
            table.add_row(model, str(nproc), f"{row['decisions_per_second']:.2f}",
                          f"{row['decisions_per_second'] / baseline:.2f}x", f"{row['rollout_seconds']:.2f}",
                          f"{row['update_seconds']:.2f}", f"{row['memory_gib']:.2f}", f"{row['wall']:.0f}")
            print(f"{model} x{nproc}: {row}", file=sys.stderr, flush=True)
    Console(width=140).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
