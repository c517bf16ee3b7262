"""Runs of ``benchmarks/train_food_preparation.py``, which computes the exact success probability of
the policy as it trains: one run that resumes, the milestones of its record, and the budgets and
exploration options of the household comparisons (``exploration.py`` and ``group_methods.py`` share
their PPO runs, so they share these)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "train_food_preparation.py"

BUDGET = {"FoodPreparation": 3072, "Entertainment": 5120}  # decisions: the bars are 3,072 and 5,000
EVERY = {"FoodPreparation": 1, "Entertainment": 2}  # updates between exact success computations
# Each option alone on groundrl's defaults with their own exploration (the novelty bonus) taken out:
# the same prompt (prompt=actions), learning rates and rollout, so a row differs from "none" by its
# option only. The novelty bonus on that base is the defaults themselves.
BASE = ["--preset", "default", "explore.novelty=0"]
OPTIONS = {
    "none": BASE,
    "epsilon": [*BASE, "explore.epsilon=0.3", "explore.epsilon_end=0.0", "explore.anneal=0.5"],
    "temperature": [*BASE, "explore.temperature=2.0", "explore.temperature_end=1.0", "explore.anneal=0.5"],
    "entropy": [*BASE, "ppo.ent_coef=0.05", "ppo.ent_coef_end=0.0", "explore.anneal=0.5"],
    "defaults": ["--preset", "default"],  # = none + novelty 0.1 -> 0: the plain `groundrl train --env ID`
}


def run_resumable(path: Path, arguments: list[str], label: str) -> None:
    """Run ``train_food_preparation.py`` with ``arguments`` into ``path`` (a JSON of its rows), as a
    subprocess: its rows go to ``path.part`` as they come, an existing ``.part`` is continued
    (``--resume``), and ``path`` appears when the run is done (comparisons of many runs skip those
    and continue the others).

    The comparisons keep these records under ``benchmarks/results/`` (in git: a few kB a run, the
    tables are made from them) and the run folders (weights, checkpoints) under ``runs/`` (not in git:
    a record outlives its run folder, which a new machine does not have)."""
    part = Path(str(path) + ".part")
    command = [sys.executable, str(SCRIPT), "--json", str(part), *(["--resume"] if part.exists() else []), *arguments]
    print(f"{label}: {' '.join(command[1:])}", flush=True)
    if subprocess.run(command).returncode == 0:
        part.rename(path)
    else:
        print(f"{label}: failed", flush=True)


def milestones(run: dict) -> dict:
    """Decisions to the first training success and to exact success 0.5 and 0.95 (None: not reached)."""
    rows = run["rows"]
    first = next((r["decisions"] for r in rows if r["training_success"] and r["training_success"] > 0), None)
    half = next((r["decisions"] for r in rows if r["exact_success"] >= 0.5), None)
    solved = next((r["decisions"] for r in rows if r["exact_success"] >= 0.95), None)
    return {"first": first, "0.5": half, "0.95": solved, "final": rows[-1]["exact_success"],
            "evaluation": run["evaluation"]["success_rate"] if run.get("evaluation") else None,
            "wall": rows[-1]["wall_seconds"]}
