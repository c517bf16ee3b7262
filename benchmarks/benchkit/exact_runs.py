"""Runs of ``benchmarks/train_food_preparation.py``, which computes the exact success probability of
the policy as it trains: one run that resumes, the milestones of its record, and the budgets and
exploration options of the household comparisons (``exploration.py`` and ``group_methods.py`` share
their PPO runs, so they share these)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from benchkit.pace import Estimate, Timing, this_machine

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


@dataclass
class ExactRun:
    """One run of ``train_food_preparation.py`` as a campaign piece (:func:`benchkit.pace.run_pieces`):
    its record ``path`` (``path.part`` while it runs), its arguments, its budget of decisions and the
    command that runs it alone."""

    name: str
    path: Path
    arguments: list[str]
    budget: int
    alone: str

    def run(self) -> None:
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            run_resumable(self.path, self.arguments, self.name)

    def estimate(self) -> Estimate:
        """The hours the run still needs on this CPU: its decisions left (the budget, less what an
        unfinished record's run folder holds) at the seconds a decision of its arm's records (the
        other seeds' runs, finished or not: on this CPU, else the slowest other, else unrecorded).
        A run stops early once it reaches 0.95, so this is the most it takes; its final 100
        episodes (a minute or two) are not counted."""
        if self.path.exists():
            return Estimate(0.0, "nothing", "-")
        arm = self.path.name.split("-seed")[0]
        timing, done = Timing(), 0
        for record_path in sorted(self.path.parent.glob(f"{arm}-seed*.json*")):
            record = _read_record(record_path)
            if not record or not record.get("rows"):
                continue
            last = record["rows"][-1]
            timing.add((record["cpu"],) if record.get("cpu") else None, last["wall_seconds"], last["decisions"])
            if record_path.name == self.path.name + ".part" and Path(record.get("run_dir", "")).is_dir():
                done = last["decisions"]  # --resume continues from its run folder, where that is still here
        left = max(self.budget - done, 0)
        found = timing.pace((this_machine()[0],))
        if found is None:
            return Estimate(None, f"up to {left:,} decisions", f"no record of {arm} yet")
        return Estimate(left * found[0] / 3600, f"up to {left:,} decisions", found[1])


def _read_record(path: Path) -> dict | None:
    """A run's record, or None where it is being written (a ``.part`` is rewritten after each update)."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
