"""Reading what runs leave: run folders, evaluation results, training curves and the CPU a record
was measured on. The tables are made from these records alone, so that they outlive the run folders
(weights and checkpoints, not in git) they were copied from."""

from __future__ import annotations

from pathlib import Path

WINDOW, TARGET = 100, 0.95  # "reached": the first update whose last 100 training episodes succeed 95% of the time


def run_folders(parent: Path, job: str) -> list[Path]:
    """The run folders a job made in ``parent``, oldest first."""
    return sorted(parent.glob(f"*-{job}-*")) if parent.is_dir() else []


def run_folder(parent: Path, job: str) -> Path | None:
    """The latest run folder a job made in ``parent`` (None: none yet)."""
    found = run_folders(parent, job)
    return found[-1] if found else None


def finished(run: Path) -> bool:
    """Whether a training run played its whole budget (as its latest checkpoint's counters say)."""
    from groundrl.train.checkpoint import list_checkpoints, read_meta
    from groundrl.train.config import load_run_config

    checkpoints = list_checkpoints(run)
    if not checkpoints or not (run / "config.yaml").is_file() or not (checkpoints[-1] / "meta.json").is_file():
        return False
    meta = read_meta(checkpoints[-1])
    return load_run_config(run).budget_played(meta["update"], meta.get("decisions", 0))


def fewest_episodes(rows: list[dict]) -> int:
    """The fewest episodes any test of an evaluation played (0: none has results yet)."""
    return min((row.get("episodes") or 0 for row in rows), default=0)


def complete(eval_dir: Path) -> bool:
    """An evaluation run whose every test has its results (a suite writes them test by test)."""
    from groundrl.eval.suites import get_suite, read_results
    from groundrl.runs import read_settings

    if not (eval_dir / "results.json").is_file():
        return False
    suite = read_settings(eval_dir / "config.yaml").get("suite")
    return suite is None or len(read_results(eval_dir)) == len(get_suite(suite).tests)


def played_enough(eval_dir: Path, asked: int | None) -> bool:
    """An evaluation run that is complete with ``asked`` episodes a test or more (None: any number)."""
    from groundrl.eval.suites import read_results

    return complete(eval_dir) and (asked is None or fewest_episodes(read_results(eval_dir)) >= asked)


def suite_rows(folder: Path) -> dict[str, dict]:
    """The rows of the evaluation in ``folder`` by test (empty: not done): of several runs, those of
    the latest checkpoint evaluated (a run stopped early, evaluated, then trained on to its budget),
    and of those (100 episodes, then 1,000) the one with the most tests done, then the most episodes."""
    from groundrl.eval.suites import read_results

    runs = [done for done in run_folders(folder, "eval") if (done / "results.json").is_file()]
    if not runs:
        return {}
    _, rows = max(((evaluated_update(done), read_results(done)) for done in reversed(runs)),  # ties: the latest
                  key=lambda found: (found[0], len(found[1]), fewest_episodes(found[1])))
    return {row["test"]: row for row in rows}


def evaluated_update(eval_dir: Path) -> int:
    """The update of the training checkpoint an evaluation played (its ``about.agent``,
    ``.../checkpoints/update-NNNNNN``); -1 where it names none (an export, an older record)."""
    from groundrl.runs import read_settings

    if not (eval_dir / "config.yaml").is_file():
        return -1
    about = read_settings(eval_dir / "config.yaml").get("about") or {}
    return _update_of(Path(str(about.get("agent") or "")))


def latest_update(agent: Path | str) -> int:
    """The update of a training run's latest checkpoint (-1: ``agent`` is no run folder with one)."""
    from groundrl.train.checkpoint import list_checkpoints

    agent = Path(agent)
    found = list_checkpoints(agent) if (agent / "checkpoints").is_dir() else []
    return _update_of(found[-1]) if found else -1


def _update_of(checkpoint: Path) -> int:
    digits = checkpoint.name.removeprefix("update-")
    return int(digits) if checkpoint.name.startswith("update-") and digits.isdigit() else -1


def eval_result(folder: Path) -> dict | None:
    """The one row of a single-environment evaluation in ``folder`` (None: not done)."""
    rows = suite_rows(folder)
    return next(iter(rows.values())) if len(rows) == 1 else None


def windowed_success(run: Path, window: int = WINDOW) -> list[tuple[int, float, int, float]]:
    """Per update of ``run``: (decisions, training seconds, episodes counted, success rate) of its
    last ``window`` training episodes or more (whole updates; fewer while the run has not played
    ``window`` yet). Updates that ended no episode add nothing to the window."""
    from groundrl.runs import read_jsonl

    recent: list[tuple[int, int]] = []  # (episodes, successes) per update, newest last
    rows = []
    for row in read_jsonl(run / "metrics.jsonl"):
        episodes = int(row.get("episodes") or 0)
        recent.append((episodes, round((row.get("success_rate") or 0.0) * episodes)))
        total, successes = 0, 0
        for count, won in reversed(recent):
            total, successes = total + count, successes + won
            if total >= window:
                break
        rows.append((row["decisions"], row["wall_seconds"], total, successes / total if total else float("nan")))
    return rows


def reached(run: Path, target: float = TARGET, window: int = WINDOW) -> tuple[int, float] | None:
    """(decisions, training seconds) at the end of the first update after which the last
    ``window`` training episodes (at least) succeeded at ``target`` or more; None: never."""
    return next(((decisions, seconds) for decisions, seconds, total, rate in windowed_success(run, window)
                 if total >= window and rate >= target), None)


def cpu_name() -> str:
    """The processor a record's seconds were measured on and the kernels torch picked for it (they
    compare only on the same one)."""
    import torch

    from groundrl.runs import cpu_name as processor

    return f"{processor()} ({torch.backends.cpu.get_cpu_capability()})"
