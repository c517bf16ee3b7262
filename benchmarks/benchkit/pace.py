"""How long a campaign's pieces take on this machine, read from the records its runs left, and a
deadline that refuses a piece which cannot finish before it.

A piece is what one seed of one arm needs: its training (``groundrl train``) and its evaluations
(``groundrl eval``). Its hours are what is left of it (decisions not yet trained, episodes not yet
played) at the pace the same arm kept: the training's seconds a decision from ``metrics.jsonl``, an
evaluation's seconds a decision from its ``machine.jsonl``, each on this machine where a run of the
arm ran here (the same processor, kernels and threads: ``machine.jsonl`` says where each stretch
ran), else where it ran elsewhere (named), else where the records do not say (older records). An
evaluation never timed is taken at the training's rollout pace (the same forward passes, with fewer
environments a batch: slower than an evaluation's, so the estimate errs long), over as many
decisions as the arm's episodes last.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchkit.campaign import evaluate, train
from benchkit.records import finished, played_enough, run_folder, run_folders, suite_rows

THIS, ELSEWHERE, UNRECORDED = "this CPU", "another CPU", "CPU not recorded"


def this_machine() -> tuple[str, str, int]:
    """(processor, kernels torch picked, threads) of this process: what a pace is measured on."""
    import torch

    from groundrl.runs import cpu_name

    return cpu_name(), torch.backends.cpu.get_cpu_capability(), torch.get_num_threads()


def _machine_of(record: dict | None) -> tuple[str, str, int] | None:
    return (record["cpu"], record["cpu_capability"], record["threads"]) if record and "cpu" in record else None


@dataclass
class Timing:
    """Seconds and decisions measured, per machine (None: a record that does not say where)."""

    spent: dict[tuple | None, list[float]] = field(default_factory=dict)  # machine -> [seconds, decisions]

    def add(self, machine: tuple | None, seconds: float, decisions: float) -> None:
        if decisions > 0:
            total = self.spent.setdefault(machine, [0.0, 0.0])
            total[0], total[1] = total[0] + seconds, total[1] + decisions

    def pace(self, here: tuple) -> tuple[float, str] | None:
        """(seconds a decision, where measured): this machine's, else elsewhere's (the slowest
        one's: an estimate for a deadline had better err long), else the unrecorded ones'."""
        if here in self.spent:
            seconds, decisions = self.spent[here]
            return seconds / decisions, THIS
        recorded = [seconds / decisions for machine, (seconds, decisions) in self.spent.items() if machine]
        if recorded:
            return max(recorded), ELSEWHERE
        if None in self.spent:
            seconds, decisions = self.spent[None]
            return seconds / decisions, UNRECORDED
        return None


def training_timings(runs: list[Path]) -> tuple[Timing, Timing]:
    """(whole updates, rollouts alone) of training ``runs``: seconds and decisions per machine."""
    from groundrl.runs import MACHINE, read_jsonl

    updates, rollouts = Timing(), Timing()
    for run in runs:
        stretches = sorted(read_jsonl(run / MACHINE), key=lambda m: m.get("update", 0)) \
            if (run / MACHINE).is_file() else []
        decisions, seconds = 0, 0.0
        for row in read_jsonl(run / "metrics.jsonl") if (run / "metrics.jsonl").is_file() else []:
            played, decisions = row["decisions"] - decisions, row["decisions"]
            spent, seconds = row["wall_seconds"] - seconds, row["wall_seconds"]
            machine = _machine_of(next((m for m in reversed(stretches) if m.get("update", 0) <= row["update"]), None))
            updates.add(machine, spent, played)
            if "rollout_seconds" in row:
                rollouts.add(machine, row["rollout_seconds"], played)
    return updates, rollouts


def evaluation_timing(folders: list[Path]) -> Timing:
    """Evaluation seconds and decisions per machine, from the ``machine.jsonl`` of every test
    played under ``folders``."""
    from groundrl.runs import MACHINE, read_jsonl

    timing = Timing()
    for folder in folders:
        for path in folder.rglob(MACHINE) if folder.is_dir() else []:
            for stretch in read_jsonl(path):
                if "seconds" in stretch:
                    timing.add(_machine_of(stretch), stretch["seconds"], stretch.get("decisions", 0))
    return timing


def episode_length(evaluations: list[Path], runs: list[Path]) -> float | None:
    """Decisions an episode of the arm lasts: its evaluations' mean (the one each folder's tables
    read), else its training's last updates'."""
    from groundrl.runs import read_jsonl

    lengths = [row["mean_length"] for folder in evaluations for row in suite_rows(folder).values()
               if row.get("mean_length") is not None]
    if not lengths:
        for run in runs:
            rows = read_jsonl(run / "metrics.jsonl") if (run / "metrics.jsonl").is_file() else []
            lengths += [row["episode_length"] for row in rows[-10:] if row.get("episode_length") is not None]
    return sum(lengths) / len(lengths) if lengths else None


@dataclass
class Piece:
    """One seed of one arm: its training, then its evaluations, in ``folder`` (``train/`` and one
    subfolder an evaluation)."""

    name: str
    folder: Path
    train: list[str] | None  # `groundrl train` arguments; None: evaluate the finished run in folder/train
    evals: list[tuple[str, list[str]]]  # (subfolder, `groundrl eval` options)
    alone: str  # the command that runs this piece alone
    agent: Callable[[], Path | None] | None = None  # what the evaluations play, where not the piece's own run
    pace_of: Path | None = None  # the arm (under --out) whose records time this one where it has none
    then: Callable[[Path, Path], None] | None = None  # what else to do with (the agent, folder) once evaluated
    partial: bool = False  # evaluate a training stopped before its budget too (its last checkpoint)

    def run(self) -> Path | None:
        """Train (or continue), then evaluate (or continue); the agent evaluated (None: none ready)."""
        if self.agent is not None:
            agent = self.agent()
        elif self.train is not None:
            agent = train(self.folder, self.train) or (run_folder(self.folder / "train", "train") if self.partial
                                                       else None)
        else:
            agent = run_folder(self.folder / "train", "train")
            agent = agent if agent is not None and (self.partial or finished(agent)) else None
        if agent is not None:
            for sub, options in self.evals:
                evaluate(agent, self.folder / sub, *options)
            if self.then is not None:
                self.then(agent, self.folder)
        return agent


@dataclass
class Estimate:
    hours: float | None  # None: the arm has no record to time it by
    left: str  # what is left: decisions, episodes
    source: str  # where its pace was measured


def estimate(piece: Piece, out: Path, keep: Path) -> Estimate:
    """The hours ``piece`` still needs on this machine, from its arm's records under ``out`` and ``keep``."""
    arm = piece.folder.parent.relative_to(out)
    pace_arm = arm
    runs = _training_runs(arm, out, keep)
    if not runs and piece.pace_of is not None:
        pace_arm = piece.pace_of.relative_to(out)
        runs = _training_runs(pace_arm, out, keep)
    updates, rollouts = training_timings(runs)
    here, seconds, sources, left = this_machine(), 0.0, set(), []

    decisions = _decisions_left(piece)
    if decisions:
        found = updates.pace(here)
        if found is None:
            return Estimate(None, f"{decisions:,} decisions", f"no record of {pace_arm} yet")
        seconds += decisions * found[0]
        sources.add(found[1])
        left.append(f"{decisions:,} decisions")
    for sub, options in piece.evals:
        episodes = _episodes_left(piece.folder / sub, options)
        if not episodes:
            continue
        folders = [root / arm / seed.name / sub for root in (keep, out) for seed in sorted((root / arm).glob("seed*"))]
        length = episode_length(folders, runs)
        found = evaluation_timing(folders).pace(here) or rollouts.pace(here)
        if length is None or found is None:
            return Estimate(None, f"{episodes:,} episodes", f"no record of {arm} yet")
        seconds += episodes * length * found[0]
        sources.add(found[1])
        left.append(f"{episodes:,} episodes")
    return Estimate(seconds / 3600, ", ".join(left) or "nothing",
                    ", ".join(sorted(sources, key=[THIS, ELSEWHERE, UNRECORDED].index)) or "-")


def _training_runs(arm: Path, out: Path, keep: Path) -> list[Path]:
    """The training runs of every seed of ``arm`` (a folder under ``out``), kept or still there
    (a run both kept and there counts once)."""
    runs = {run.relative_to(root): run for root in (keep, out) for seed in sorted((root / arm).glob("seed*"))
            if (run := run_folder(seed / "train", "train")) is not None}
    return list(runs.values())


def _decisions_left(piece: Piece) -> int:
    """Decisions ``piece`` has still to train: its budget less those its latest checkpoint saved."""
    if piece.train is None or piece.agent is not None:
        return 0
    from groundrl.train.checkpoint import list_checkpoints, read_meta
    from groundrl.train.config import load_config

    files = [piece.train[i + 1] for i, word in enumerate(piece.train) if word == "--config"]
    preset = next((piece.train[i + 1] for i, word in enumerate(piece.train) if word == "--preset"), "default")
    overrides = [word for word in piece.train if "=" in word and not word.startswith("-")]
    budget = load_config(preset, files, overrides).rollout.total_decisions
    run = run_folder(piece.folder / "train", "train")
    saved = list_checkpoints(run) if run is not None else []
    done = read_meta(saved[-1]).get("decisions", 0) if saved and (saved[-1] / "meta.json").is_file() else 0
    return max(budget - done, 0)


def _episodes_left(folder: Path, options: list[str]) -> int:
    """Episodes an evaluation into ``folder`` has still to play: none where one of as many is
    done there, else all of them (an unfinished one counts whole: an estimate for a deadline errs long)."""
    from groundrl.eval.suites import TWOSOME_EPISODES, get_suite

    asked = int(options[options.index("--episodes") + 1]) if "--episodes" in options else None
    tests = get_suite(options[options.index("--suite") + 1]).tests if "--suite" in options else None
    if any(played_enough(done, asked) for done in run_folders(folder, "eval")):
        return 0
    return sum(asked or test.episodes for test in tests) if tests else (asked or TWOSOME_EPISODES)


class Deadline:
    """``hours`` from now (None: no deadline): a piece starts only where its estimate ends before it."""

    def __init__(self, hours: float | None):
        self.hours, self.started = hours, time.monotonic()

    def left(self) -> float:
        return self.hours - (time.monotonic() - self.started) / 3600 if self.hours is not None else float("inf")

    def allows(self, piece, found: Estimate) -> bool:
        """Whether ``piece`` can finish in time; where not, one line says so and how to run it."""
        if self.hours is None or found.hours == 0:
            return True
        if found.hours is not None and found.hours <= self.left():
            return True
        need = f"~{found.hours:.1f} h ({found.source})" if found.hours is not None else \
            f"an unknown time ({found.source})"
        print(f"refused: {piece.name} needs {need}, {max(self.left(), 0):.1f} h are left of --hours {self.hours:g}; "
              f"run it where it has the time: {piece.alone}", flush=True)
        return False


def run_pieces(pieces: list, hours: float | None, estimate_of: Callable[[Any], Estimate],
               after: Callable[[], None] = lambda: None) -> list:
    """Print every piece's estimate on this machine (``estimate_of(piece)``: for a :class:`Piece`,
    :func:`estimate` on its arm's records), then run each that can finish before the deadline
    (``hours`` from now; None: all), calling ``after`` when one ends (copy the records); the pieces
    run (those not refused). A piece is anything with a ``name``, the command that runs it
    ``alone`` and a ``run()``."""
    from rich.console import Console
    from rich.table import Table

    cpu, capability, threads = this_machine()
    print(f"The pieces to run, estimated on this CPU: {cpu} ({capability}), {threads} thread(s)"
          + (f"; deadline in {hours:g} h (--hours)" if hours is not None else ""), flush=True)
    table = Table()
    for column in ("piece", "left", "hours", "paced by", "ends after (h)"):
        table.add_column(column, justify="left" if column in ("piece", "left", "paced by") else "right")
    estimates, total = [], 0.0
    for piece in pieces:
        found = estimate_of(piece)
        estimates.append(found)
        if found.hours is not None:
            total += found.hours
        table.add_row(piece.name, found.left, _hours(found.hours), found.source,
                      _hours(total) if found.hours is not None else "?")
    Console(width=200).print(table)
    deadline, started = Deadline(hours), []
    for piece, found in zip(pieces, estimates):
        if deadline.hours is not None and started and found.hours:  # again: the pieces before timed more runs
            found = estimate_of(piece)
        if deadline.allows(piece, found):
            started.append(piece)
            piece.run()
            after()
    return started


def _hours(hours: float | None) -> str:
    return "?" if hours is None else "0" if hours == 0 else "<0.01" if hours < 0.01 else f"{hours:.2f}"


def alone(script: str, *words: str) -> str:
    """The command line that runs ``benchmarks/script`` with ``words``."""
    return shlex.join(["python", f"benchmarks/{script}", *words])
