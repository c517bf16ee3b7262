"""Reproduce TWOSOME (Tan et al. 2024) with the embedded SmolLM2-135M: the four tasks, the unseen
tasks, the normalization ablation, symbolic PPO at the same budget, and how far training moved the
model, each beside the paper's figure (LLaMA-7B, one GPU).

Every run is what a user types: ``groundrl train --config examples/twosome/TASK.yaml seed=S``, then
``groundrl eval RUN --episodes 100`` (sampled, evaluation seeds from 1,000,000), in folders of its
own under ``--out`` (``TASK/VARIANT/seedS/{train,eval,unseen}``). Running the benchmark again
skips what is done and continues what is not (``groundrl train --resume``, ``groundrl eval
--resume``), so a campaign of many hours can be stopped and continued; two benchmark processes
with different ``--tasks`` (or ``--stages``) share the work of two cores.

Stages: ``train`` and ``eval`` (the four tasks, word normalization), ``unseen`` (the Food
Preparation agents on ``--suite twosome-unseen``, beside random and the zero-shot model with the
agents' prompt, ``--prompt actions``),
``ablation`` (sum and token normalization on Food Preparation and Tomato Salad, ``--normalizations``
picks; it also records how many of the task's action candidates have as many tokens as words, where
token and word normalization are the same policy), ``symbolic``
(``--preset symbolic-ppo`` at each task's budget), ``drift`` (:mod:`groundrl.eval.drift` of the
Food Preparation agents).

The tables are made from the records the runs leave (``config.yaml``, ``metrics.jsonl``,
``results.json``, ``drift.json``), which the benchmark copies to ``--keep``
(``benchmarks/results/twosome``, in git) whenever it runs: the run folders (weights, checkpoints,
not in git) may be gone, the tables stay.

"Reached 0.95" is the first update after which the last 100 training episodes succeeded at least
95% of the time: the decisions and training wall time by then.

    python benchmarks/reproduce_twosome.py                                  # everything, seeds 1-3
    python benchmarks/reproduce_twosome.py --tasks tomato_salad --stages train,eval --seeds 1
    python benchmarks/reproduce_twosome.py --table-only
    groundrl bench reproduce_twosome --table-only
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))  # its neighbours; `groundrl bench` runs the file, not the folder
from exploration import listed  # noqa: E402


@dataclass(frozen=True)
class Task:
    env_id: str
    config: Path
    paper_budget: int  # decisions, TWOSOME's scripts
    paper_success: float  # TWOSOME, word normalization
    paper_sum: float | None = None  # TWOSOME without normalization
    paper_ppo: str = ""  # PPO from scratch in the paper


EXAMPLES = ROOT / "examples" / "twosome"
TASKS = {
    "food_preparation": Task("groundrl/FoodPreparation-v0", EXAMPLES / "food_preparation.yaml", 50_000, 1.00,
                             paper_ppo="learns (with action masking)"),
    "entertainment": Task("groundrl/Entertainment-v0", EXAMPLES / "entertainment.yaml", 200_000, 1.00,
                          paper_sum=0.67, paper_ppo="0.33"),
    "tomato_salad": Task("groundrl/TomatoSalad-v0", EXAMPLES / "tomato_salad.yaml", 500_000, 1.00,
                         paper_sum=0.67, paper_ppo="sub-optimal policies"),
    "tomato_lettuce_salad": Task("groundrl/TomatoLettuceSalad-v0", EXAMPLES / "tomato_lettuce_salad.yaml",
                                 500_000, 1.00, paper_ppo="sub-optimal policies"),
}
STAGES = ("train", "eval", "unseen", "ablation", "symbolic", "drift")
ABLATION_TASKS = ("food_preparation", "tomato_salad")
# TWOSOME (word normalization) and SayCan on the unseen tasks (the Food Preparation agent, zero-shot)
PAPER_UNSEEN = {"Cheese": 1.00, "Hamburger": 1.00, "ApplePie": 1.00, "Pizza": 1.00, "WashingPlate": 1.00,
                "Laundry": 1.00, "Entertainment": 0.97}
EPISODES = 100
WINDOW, TARGET = 100, 0.95


def groundrl(*args: str) -> bool:
    """``groundrl ARGS`` in a process of its own, as a user runs it; whether it succeeded."""
    command = [sys.executable, "-m", "groundrl", *args]
    print("$ groundrl " + " ".join(args), flush=True)
    return subprocess.run(command, cwd=ROOT).returncode == 0


def run_folders(parent: Path, job: str) -> list[Path]:
    """The run folders a job made in ``parent``, oldest first."""
    return sorted(parent.glob(f"*-{job}-*")) if parent.is_dir() else []


def run_folder(parent: Path, job: str) -> Path | None:
    """The latest run folder a job made in ``parent`` (None: none yet)."""
    found = run_folders(parent, job)
    return found[-1] if found else None


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


def finished(run: Path) -> bool:
    """Whether a training run played its whole budget (as its latest checkpoint's counters say)."""
    from groundrl.train.checkpoint import list_checkpoints, read_meta
    from groundrl.train.config import load_run_config

    checkpoints = list_checkpoints(run)
    if not checkpoints or not (run / "config.yaml").is_file() or not (checkpoints[-1] / "meta.json").is_file():
        return False
    meta = read_meta(checkpoints[-1])
    return load_run_config(run).budget_played(meta["update"], meta.get("decisions", 0))


def evaluate(agent: Path | str, folder: Path, *options: str) -> dict | list | None:
    """``groundrl eval AGENT OPTIONS`` into ``folder`` (or continue the evaluation there); its results.

    An evaluation already in ``folder`` stands for one of as many episodes a test or fewer: asked for
    1,000 where 100 were played, the 1,000 are played beside them (``_suite_rows`` then reads those)."""
    asked = int(options[options.index("--episodes") + 1]) if "--episodes" in options else None
    from groundrl.eval.suites import read_results

    runs = run_folders(folder, "eval")
    for done in reversed(runs):
        if _complete(done) and (asked is None or _fewest_episodes(read_results(done)) >= asked):
            return json.loads((done / "results.json").read_text())
    from groundrl.runs import read_settings

    unfinished = [done for done in runs if not _complete(done) and (done / "config.yaml").is_file()
                  and read_settings(done / "config.yaml").get("episodes") == asked]
    if unfinished:
        done, ok = unfinished[-1], groundrl("eval", "--resume", str(unfinished[-1]))
    else:
        ok = groundrl("eval", str(agent), *options, "--runs-dir", str(folder))
        done = next((new for new in reversed(run_folders(folder, "eval")) if new not in runs), None)
    if not ok or done is None or not (done / "results.json").is_file():
        return None
    return json.loads((done / "results.json").read_text())


def _fewest_episodes(rows: list[dict]) -> int:
    """The fewest episodes any test of an evaluation played (0: none has results yet)."""
    return min((row.get("episodes") or 0 for row in rows), default=0)


def _complete(eval_dir: Path) -> bool:
    """An evaluation run whose every test has its results (a suite writes them test by test)."""
    from groundrl.eval.suites import get_suite, read_results
    from groundrl.runs import read_settings

    if not (eval_dir / "results.json").is_file():
        return False
    suite = read_settings(eval_dir / "config.yaml").get("suite")
    return suite is None or len(read_results(eval_dir)) == len(get_suite(suite).tests)


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, of: {', '.join(TASKS)}")
    parser.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, of: {', '.join(STAGES)}")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--normalizations", default="sum,token",
                        help="comma-separated, of: sum, token (the ablation stage's; word is the train stage's)")
    parser.add_argument("--out", type=Path, default=ROOT / "runs/twosome", help="where the run folders go")
    parser.add_argument("--keep", type=Path, default=ROOT / "benchmarks/results/twosome",
                        help="where the runs' records are kept (in git) and the tables are made from")
    parser.add_argument("--table-only", action="store_true", help="print the tables of what is done, run nothing")
    args = parser.parse_args(argv)
    tasks, stages = listed(parser, "--tasks", args.tasks, TASKS), listed(parser, "--stages", args.stages, STAGES)
    normalizations = listed(parser, "--normalizations", args.normalizations, ("sum", "token"))
    out = args.out.resolve()

    if not args.table_only:
        for name in tasks:
            task = TASKS[name]
            for seed in args.seeds:
                folder = out / name / "word" / f"seed{seed}"
                run = train(folder, ["--config", str(task.config), f"seed={seed}"]) if "train" in stages \
                    else run_folder(folder / "train", "train")
                if run is None or not finished(run):
                    continue
                if "eval" in stages:
                    evaluate(run, folder / "eval", "--episodes", str(EPISODES))
                if name == "food_preparation" and "unseen" in stages:
                    evaluate(run, folder / "unseen", "--suite", "twosome-unseen")
                if name == "food_preparation" and "drift" in stages and not (folder / "drift.json").is_file():
                    drift(run, folder / "drift.json")
            if "ablation" in stages and name in ABLATION_TASKS:
                if not (out / name / TOKENS_PER_WORD).is_file():
                    tokens_per_word(task, out / name / TOKENS_PER_WORD)
                same = token_is_word(json.loads((out / name / TOKENS_PER_WORD).read_text()))
                for normalization in normalizations:
                    if normalization == "token" and same:
                        print(f"{name}: the model reads every action seen in random play as one token a word, "
                              "so token normalization is word normalization (skipped)")
                        continue
                    for seed in args.seeds:
                        folder = out / name / normalization / f"seed{seed}"
                        run = train(folder, ["--config", str(task.config), f"seed={seed}",
                                             f"agent.llm.normalization={normalization}"])
                        if run is not None:
                            evaluate(run, folder / "eval", "--episodes", str(EPISODES))
            if "symbolic" in stages:
                budget = _budget(task)
                for seed in args.seeds:
                    folder = out / name / "symbolic-ppo" / f"seed{seed}"
                    run = train(folder, ["--preset", "symbolic-ppo", f"env={task.env_id}",
                                         f"rollout.total_decisions={budget}", f"seed={seed}"])
                    if run is not None:
                        evaluate(run, folder / "eval", "--episodes", str(EPISODES))
        if "unseen" in stages and "food_preparation" in tasks:
            for baseline in ("random", "zero-shot"):
                folder = out / "unseen-baselines" / baseline
                if run_folder(folder, "eval") is None or not (run_folder(folder, "eval") / "results.json").is_file():
                    groundrl("eval", baseline, "--suite", "twosome-unseen", "--prompt", "actions", "--runs-dir",
                             str(folder))

    keep_records(out, args.keep.resolve())
    print_tables(args.keep.resolve(), tasks, args.seeds)
    return 0


TOKENS_PER_WORD = "tokens_per_word.json"
RECORDS = ("config.yaml", "metrics.jsonl", "results.json", "drift.json", TOKENS_PER_WORD)
"""What the tables read of a run folder: a few kB to a few hundred kB a run."""


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


def drift(run: Path, path: Path) -> None:
    from groundrl.eval.drift import measure_drift

    print(f"drift of {run}", flush=True)
    path.write_text(json.dumps(measure_drift(run, episodes=200).to_dict(), indent=2) + "\n")


def tokens_per_word(task: Task, path: Path, episodes: int = 50, model: str | None = None) -> None:
    """Record how many of the action candidates of ``episodes`` uniformly random episodes the
    model (None: the default) reads as one token a word: on those, token normalization is word
    normalization."""
    import random

    import groundrl
    from groundrl.llm.loading import load_llm
    from groundrl.llm.scoring import score_details

    env, states, rng = groundrl.make_env(task.env_id), {}, random.Random(0)
    for episode in range(episodes):
        obs, info = env.reset(seed=episode)
        done = False
        while not done:
            states[obs] = list(info["valid_actions"])
            obs, _, terminated, truncated, info = env.step(rng.randrange(len(info["valid_actions"])))
            done = terminated or truncated
    llm, prompts, differ, differing = load_llm(model), list(states), set(), 0
    for start in range(0, len(prompts), 16):
        chunk = prompts[start:start + 16]
        details = score_details(llm, chunk, [states[p] for p in chunk], normalization="token")
        for prompt, tokens, words in zip(chunk, details.num_tokens, details.num_words):
            for action, t, w in zip(states[prompt], tokens.tolist(), words.tolist()):
                if t != w:
                    differ.add(action)
                    differing += 1
    record = {"states": len(prompts), "candidates": sum(len(a) for a in states.values()),
              "candidates_tokens_differ_from_words": differing, "actions_tokens_differ_from_words": sorted(differ)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")


def token_is_word(counts: dict | None) -> bool:
    """Whether a :func:`tokens_per_word` record says every candidate has one token a word, so that
    token normalization gives word normalization's scores (None: not counted)."""
    return counts is not None and not counts["candidates_tokens_differ_from_words"]


def _budget(task: Task) -> int:
    from groundrl.train.config import load_config

    return load_config("default", [task.config]).rollout.total_decisions


# ---- the tables -------------------------------------------------------------------------------

def _eval_result(folder: Path) -> dict | None:
    """The one row of a single-environment evaluation in ``folder`` (None: not done)."""
    rows = _suite_rows(folder)
    return next(iter(rows.values())) if len(rows) == 1 else None


def _seeds_cell(values: list[str]) -> str:
    return " / ".join(values) if any(v != "-" for v in values) else "-"


def print_tables(out: Path, tasks: list[str], seeds: list[int]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=220)
    per_seed = f"per seed {', '.join(map(str, seeds))}"

    table = Table(title=f"TWOSOME's tasks, word normalization: {EPISODES} sampled evaluation episodes ({per_seed})")
    for column in ("task", "budget (paper's)", "success", "reached 0.95 at (decisions)", "training wall to it (s)",
                   "paper (LLaMA-7B)"):
        table.add_column(column, justify="left" if column == "task" else "right")
    for name in tasks:
        task = TASKS[name]
        success, at, wall = [], [], []
        for seed in seeds:
            folder = out / name / "word" / f"seed{seed}"
            result, run = _eval_result(folder / "eval"), run_folder(folder / "train", "train")
            success.append(f"{result['success_rate']:.2f}" if result else "-")
            when = reached(run) if run is not None and (run / "metrics.jsonl").is_file() else None
            at.append(f"{when[0]:,}" if when else "-")
            wall.append(f"{when[1]:,.0f}" if when else "-")
        table.add_row(name, f"{_budget(task):,} ({task.paper_budget:,})", _seeds_cell(success), _seeds_cell(at),
                      _seeds_cell(wall), f"{task.paper_success:.2f}")
    console.print(table)

    if "food_preparation" in tasks:
        table = Table(title=f"Unseen tasks: the Food Preparation agents zero-shot ({per_seed}), beside random and the "
                            "untrained model (word normalization, the same prompt), sampled")
        for column in ("test", "random", "zero-shot", "trained on Food Preparation", "paper: TWOSOME", "paper: SayCan"):
            table.add_column(column, justify="left" if column == "test" else "right")
        baselines = {b: _suite_rows(out / "unseen-baselines" / b) for b in ("random", "zero-shot")}
        trained = [_suite_rows(out / "food_preparation" / "word" / f"seed{s}" / "unseen") for s in seeds]
        for test, paper in PAPER_UNSEEN.items():
            cells = [_rate(baselines[b].get(test)) for b in ("random", "zero-shot")]
            table.add_row(test, *cells, _seeds_cell([_rate(rows.get(test)) for rows in trained]), f"{paper:.2f}",
                          "0.04" if test == "Entertainment" else "0.35-0.85")
        console.print(table)

    ablated = [name for name in tasks if name in ABLATION_TASKS]
    if ablated:
        table = Table(title="Normalization of the action scores: evaluation success and decisions to 0.95 "
                            f"({per_seed})")
        for column in ("task", "normalization", "success", "decisions an episode", "reached 0.95 at", "paper",
                       "tokens != words"):
            table.add_column(column, justify="left" if column in ("task", "normalization") else "right")
        for name in ablated:
            counted = out / name / TOKENS_PER_WORD
            counts = json.loads(counted.read_text()) if counted.is_file() else None
            differ = (f"{counts['candidates_tokens_differ_from_words']} of {counts['candidates']} candidates"
                      if counts else "")
            for normalization in ("sum", "token", "word"):
                success, length, at = [], [], []
                for seed in seeds:
                    folder = out / name / normalization / f"seed{seed}"
                    result, run = _eval_result(folder / "eval"), run_folder(folder / "train", "train")
                    success.append(f"{result['success_rate']:.2f}" if result else "-")
                    length.append(f"{result['mean_length']:.1f}" if result else "-")
                    when = reached(run) if run is not None and (run / "metrics.jsonl").is_file() else None
                    at.append(f"{when[0]:,}" if when else "-")
                paper = {"sum": TASKS[name].paper_sum, "word": TASKS[name].paper_success}.get(normalization)
                if normalization == "token" and token_is_word(counts) and all(value == "-" for value in success):
                    success = length = at = ["= word"]  # the same scores: the word rows are its runs
                table.add_row(name, normalization, _seeds_cell(success), _seeds_cell(length), _seeds_cell(at),
                              f"{paper:.2f}" if paper is not None else "", differ if normalization == "token" else "")
        console.print(table)

    table = Table(title=f"Symbolic PPO (from scratch, action masking) at each task's budget ({per_seed})")
    for column in ("task", "budget", "success", "paper: PPO"):
        table.add_column(column, justify="left" if column == "task" else "right")
    for name in tasks:
        success = []
        for seed in seeds:
            result = _eval_result(out / name / "symbolic-ppo" / f"seed{seed}" / "eval")
            success.append(f"{result['success_rate']:.2f}" if result else "-")
        table.add_row(name, f"{_budget(TASKS[name]):,}", _seeds_cell(success), TASKS[name].paper_ppo)
    console.print(table)

    if "food_preparation" in tasks:
        from drift import print_table

        found = {f"food_preparation seed {s}": json.loads(p.read_text()) for s in seeds
                 if (p := out / "food_preparation" / "word" / f"seed{s}" / "drift.json").is_file()}
        if found:
            print_table(found, console)


def _suite_rows(folder: Path) -> dict[str, dict]:
    """The rows of the evaluation in ``folder`` by test (empty: not done): of several runs (100
    episodes, then 1,000), the one with the most tests done, then the most episodes."""
    from groundrl.eval.suites import read_results

    runs = [done for done in run_folders(folder, "eval") if (done / "results.json").is_file()]
    if not runs:
        return {}
    rows = max((read_results(done) for done in reversed(runs)),  # ties: the latest
               key=lambda rows: (len(rows), _fewest_episodes(rows)))
    return {row["test"]: row for row in rows}


def _rate(row: dict | None) -> str:
    return f"{row['success_rate']:.2f}" if row and row.get("success_rate") is not None else "-"


if __name__ == "__main__":
    sys.exit(main())
