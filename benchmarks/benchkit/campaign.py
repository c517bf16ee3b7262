"""Running a campaign as a user would: each training and evaluation is a ``groundrl`` command in a
process of its own, into a folder of its own; running the campaign again skips what is done and
continues what is not (``--resume``), and the records the tables read are copied where git keeps them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchkit.records import (
    complete,
    evaluated_update,
    finished,
    latest_update,
    played_enough,
    run_folder,
    run_folders,
)

ROOT = Path(__file__).resolve().parents[2]  # the checkout: the commands run there
TOKENS_PER_WORD = "tokens_per_word.json"
FUNNEL = "funnel.json"  # an Overcooked evaluation's funnel (benchmarks/overcooked_funnel.py)
RECORDS = ("config.yaml", "metrics.jsonl", "settings_changes.jsonl", "machine.jsonl", "results.json", "drift.json",
           TOKENS_PER_WORD, FUNNEL)
"""What the tables read of a run folder: a few kB to a few hundred kB a run."""


def groundrl(*args: str) -> bool:
    """``groundrl ARGS`` in a process of its own, as a user runs it; whether it succeeded."""
    command = [sys.executable, "-m", "groundrl", *args]
    print("$ groundrl " + " ".join(args), flush=True)
    return subprocess.run(command, cwd=ROOT).returncode == 0


def train(folder: Path, arguments: list[str]) -> Path | None:
    """Train into ``folder/train`` (or continue the run there); the run folder once it is done."""
    run = run_folder(folder / "train", "train")
    if run is not None and finished(run):
        return run
    if run is not None and (run / "checkpoints").is_dir() and any((run / "checkpoints").iterdir()):
        ok = groundrl("train", "--resume", str(run))
    else:
        if run is not None:  # stopped before its first checkpoint: nothing to continue
            import shutil

            shutil.rmtree(run)
        ok = groundrl("train", *arguments, f"runs_dir={folder / 'train'}")
    run = run_folder(folder / "train", "train")
    return run if ok and run is not None and finished(run) else None


def evaluate(agent: Path | str, folder: Path, *options: str) -> dict | list | None:
    """``groundrl eval AGENT OPTIONS`` into ``folder`` (or continue the evaluation there); its results.

    An evaluation already in ``folder`` stands for one of as many episodes a test or fewer: asked for
    1,000 where 100 were played, the 1,000 are played beside them (``suite_rows`` then reads those).
    It stands only for the checkpoint it played: a training run evaluated when stopped early
    (``--partial``), then trained on, is evaluated again beside it."""
    asked = int(options[options.index("--episodes") + 1]) if "--episodes" in options else None

    before, played = run_folders(folder, "eval"), latest_update(agent)
    runs = [done for done in before if (done / "config.yaml").is_file() and evaluated_update(done) == played]
    for done in reversed(runs):
        if played_enough(done, asked):
            return json.loads((done / "results.json").read_text())
    from groundrl.runs import read_settings

    unfinished = [done for done in runs if not complete(done)
                  and read_settings(done / "config.yaml").get("episodes") == asked]
    if unfinished:
        done, ok = unfinished[-1], groundrl("eval", "--resume", str(unfinished[-1]))
    else:
        ok = groundrl("eval", str(agent), *options, "--runs-dir", str(folder))
        done = next((new for new in reversed(run_folders(folder, "eval")) if new not in before), None)
    if not ok or done is None or not (done / "results.json").is_file():
        return None
    return json.loads((done / "results.json").read_text())


def keep_records(out: Path, keep: Path) -> None:
    """Copy the records of the run folders under ``out`` to the same places under ``keep`` (newer
    ones over older); checkpoints, weights, TensorBoard files and trajectories stay behind."""
    import shutil

    if not out.is_dir() or out == keep:
        return
    for path in out.rglob("*"):
        if path.name in RECORDS and path.is_file() and "checkpoints" not in path.relative_to(out).parts:
            target = keep / path.relative_to(out)
            if not target.is_file() or target.stat().st_mtime < path.stat().st_mtime:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
