"""TWOSOME's experiments, reproduced with the embedded model beside the paper's figures.

Reproduce TWOSOME (Tan et al. 2024): the four tasks, the unseen tasks, the normalization ablation,
symbolic PPO at the same budget, and how far training moved the model, each beside the paper's
figure (LLaMA-7B, one GPU).

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

Before it starts, it prints each piece (a seed of a task's variant: its training, then its
evaluations) with the hours it still needs on this CPU (:mod:`benchkit.pace`); ``--hours H``
refuses, in one line with the command that runs it, a piece that would end more than H hours from
the start.

The tables are made from the records the runs leave (``config.yaml``, ``metrics.jsonl``,
``results.json``, ``drift.json``), which the benchmark copies to ``--keep``
(``benchmarks/results/twosome``, in git) whenever it runs: the run folders (weights, checkpoints,
not in git) may be gone, the tables stay.

Tomato-Lettuce Salad's example is ``benchmarks/self_imitation.py``'s row ``tomato_lettuce_salad/sil``
(the example took that row's settings): its runs are made by that benchmark, and its records, kept
beside ``--keep`` (``benchmarks/results/self_imitation``), are the table's. The example before it
took self-imitation (8,192 decisions, seed 1: 0.00) is kept in ``tomato_lettuce_salad/before-sil``.

"Reached 0.95" is the first update after which the last 100 training episodes succeeded at least
95% of the time: the decisions and training wall time by then.

    python benchmarks/reproduce_twosome.py                                  # everything, seeds 1-3
    python benchmarks/reproduce_twosome.py --tasks tomato_salad --stages train,eval --seeds 1
    python benchmarks/reproduce_twosome.py --tasks entertainment --seeds 2 3 --hours 2.5
    python benchmarks/reproduce_twosome.py --table-only
    groundrl bench reproduce_twosome --table-only
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from benchkit.args import add_deadline, deadline, listed
from benchkit.campaign import ROOT, TOKENS_PER_WORD, groundrl, keep_records
from benchkit.pace import Piece, alone, estimate, run_pieces
from benchkit.records import eval_result, reached, run_folder, suite_rows
from benchkit.tables import drift_table, seeds_cell, success_cell

GROUP = "learning"
RESULTS = "results/twosome"


@dataclass(frozen=True)
class Task:
    env_id: str
    config: Path
    paper_budget: int  # decisions, TWOSOME's scripts
    paper_success: float  # TWOSOME, word normalization
    paper_sum: float | None = None  # TWOSOME without normalization
    paper_ppo: str = ""  # PPO from scratch in the paper
    row: str | None = None  # the example's runs are benchmarks/self_imitation.py's row of this name


EXAMPLES = ROOT / "examples" / "twosome"
TASKS = {
    "food_preparation": Task("groundrl/FoodPreparation-v0", EXAMPLES / "food_preparation.yaml", 50_000, 1.00,
                             paper_ppo="learns (with action masking)"),
    "entertainment": Task("groundrl/Entertainment-v0", EXAMPLES / "entertainment.yaml", 200_000, 1.00,
                          paper_sum=0.67, paper_ppo="0.33"),
    "tomato_salad": Task("groundrl/TomatoSalad-v0", EXAMPLES / "tomato_salad.yaml", 500_000, 1.00,
                         paper_sum=0.67, paper_ppo="sub-optimal policies"),
    "tomato_lettuce_salad": Task("groundrl/TomatoLettuceSalad-v0", EXAMPLES / "tomato_lettuce_salad.yaml",
                                 500_000, 1.00, paper_ppo="sub-optimal policies", row="tomato_lettuce_salad/sil"),
}
STAGES = ("train", "eval", "unseen", "ablation", "symbolic", "drift")
ABLATION_TASKS = ("food_preparation", "tomato_salad")
# TWOSOME (word normalization) and SayCan on the unseen tasks (the Food Preparation agent, zero-shot)
PAPER_UNSEEN = {"Cheese": 1.00, "Hamburger": 1.00, "ApplePie": 1.00, "Pizza": 1.00, "WashingPlate": 1.00,
                "Laundry": 1.00, "Entertainment": 0.97}
EPISODES = 100


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, of: {', '.join(TASKS)}")
    parser.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, of: {', '.join(STAGES)}")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--normalizations", default="sum,token",
                        help="comma-separated, of: sum, token (the ablation stage's; word is the train stage's)")
    parser.add_argument("--out", type=Path, default=ROOT / "runs/twosome", help="where the run folders go")
    parser.add_argument("--keep", type=Path, default=ROOT / "benchmarks" / RESULTS,
                        help="where the runs' records are kept (in git) and the tables are made from")
    add_deadline(parser)
    parser.add_argument("--table-only", action="store_true", help="print the tables of what is done, run nothing")
    args = parser.parse_args(argv)
    tasks, stages = listed(parser, "--tasks", args.tasks, TASKS), listed(parser, "--stages", args.stages, STAGES)
    normalizations = listed(parser, "--normalizations", args.normalizations, ("sum", "token"))
    deadline(parser, args.hours)
    out = args.out.resolve()

    if not args.table_only:
        keep = args.keep.resolve()
        started = run_pieces(pieces(args, tasks, stages, normalizations, out, keep), args.hours,
                             lambda piece: estimate(piece, out, keep), lambda: keep_records(out, keep))
        # the unseen suite's floor and the untrained model, beside the agents that played it
        if "unseen" in stages and any(piece.name.startswith("food_preparation seed") for piece in started):
            for baseline in ("random", "zero-shot"):
                folder = out / "unseen-baselines" / baseline
                if run_folder(folder, "eval") is None or not (run_folder(folder, "eval") / "results.json").is_file():
                    groundrl("eval", baseline, "--suite", "twosome-unseen", "--prompt", "actions", "--runs-dir",
                             str(folder))

    keep_records(out, args.keep.resolve())
    print_tables(args.keep.resolve(), tasks, args.seeds)
    return 0


def pieces(args: argparse.Namespace, tasks: list[str], stages: list[str], normalizations: list[str], out: Path,
           keep: Path) -> list[Piece]:
    """The campaign's pieces for these tasks, stages and seeds, in the order they run (the ablation
    counts the model's tokens a word of the task's actions first: where each is one, token
    normalization is word normalization, and has no piece)."""
    every = (["--out", str(out)] if out != (ROOT / "runs/twosome").resolve() else []) + \
        (["--keep", str(keep)] if keep != (ROOT / "benchmarks" / RESULTS).resolve() else [])
    episodes = ["--episodes", str(EPISODES)]
    found = []
    for name in tasks:
        task = TASKS[name]
        if task.row and {"train", "eval"} & set(stages):
            print(f"{name}: the example's runs are those of `python benchmarks/self_imitation.py --rows "
                  f"{task.row}` (they are kept there)", flush=True)
        evals = ([("eval", episodes)] if "eval" in stages else []) + \
            ([("unseen", ["--suite", "twosome-unseen"])] if name == "food_preparation" and "unseen" in stages else [])
        then = measure_drift_once if name == "food_preparation" and "drift" in stages else None
        for seed in args.seeds if not task.row else ():
            mine = [stage for stage in ("train", "eval", "unseen", "drift") if stage in stages]
            found.append(Piece(f"{name} seed {seed}", out / name / "word" / f"seed{seed}",
                               ["--config", str(task.config), f"seed={seed}"] if "train" in stages else None, evals,
                               alone("reproduce_twosome.py", "--tasks", name, "--stages", ",".join(mine),
                                     "--seeds", str(seed), *every), then=then))
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
                    found.append(Piece(f"{name} {normalization} seed {seed}", folder,
                                       ["--config", str(task.config), f"seed={seed}",
                                        f"agent.llm.normalization={normalization}"], [("eval", episodes)],
                                       alone("reproduce_twosome.py", "--tasks", name, "--stages", "ablation",
                                             "--normalizations", normalization, "--seeds", str(seed), *every)))
        if "symbolic" in stages:
            for seed in args.seeds:
                found.append(Piece(f"{name} symbolic-ppo seed {seed}", out / name / "symbolic-ppo" / f"seed{seed}",
                                   ["--preset", "symbolic-ppo", f"env={task.env_id}",
                                    f"rollout.total_decisions={_budget(task)}", f"seed={seed}"], [("eval", episodes)],
                                   alone("reproduce_twosome.py", "--tasks", name, "--stages", "symbolic",
                                         "--seeds", str(seed), *every)))
    return found


def measure_drift_once(run: Path, folder: Path) -> None:
    """The drift of a Food Preparation agent, into ``folder/drift.json`` (once)."""
    if not (folder / "drift.json").is_file():
        drift(run, folder / "drift.json")


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


def example_records(name: str, out: Path) -> Path:
    """Where the records of a task's example runs are kept (``seedS/{train,eval}`` below it)."""
    row = TASKS[name].row
    return out.parent / "self_imitation" / row if row else out / name / "word"


def _budget(task: Task) -> int:
    from groundrl.train.config import load_config

    return load_config("default", [task.config]).rollout.total_decisions


# ---- the tables -------------------------------------------------------------------------------

def print_tables(out: Path, tasks: list[str], seeds: list[int]) -> None:
    from rich.console import Console
    from rich.table import Table

    from groundrl.runs import read_settings

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
            folder = example_records(name, out) / f"seed{seed}"
            result, run = eval_result(folder / "eval"), run_folder(folder / "train", "train")
            success.append(f"{result['success_rate']:.2f}" if result else "-")
            when = reached(run) if run is not None and (run / "metrics.jsonl").is_file() else None
            at.append(f"{when[0]:,}" if when else "-")
            wall.append(f"{when[1]:,.0f}" if when else "-")
        table.add_row(name, f"{_budget(task):,} ({task.paper_budget:,})", seeds_cell(success), seeds_cell(at),
                      seeds_cell(wall), f"{task.paper_success:.2f}")
    console.print(table)

    if "food_preparation" in tasks:
        table = Table(title=f"Unseen tasks: the Food Preparation agents zero-shot ({per_seed}), beside random and the "
                            "untrained model (word normalization, the same prompt), sampled")
        for column in ("test", "random", "zero-shot", "trained on Food Preparation", "paper: TWOSOME", "paper: SayCan"):
            table.add_column(column, justify="left" if column == "test" else "right")
        baselines = {b: suite_rows(out / "unseen-baselines" / b) for b in ("random", "zero-shot")}
        trained = [suite_rows(out / "food_preparation" / "word" / f"seed{s}" / "unseen") for s in seeds]
        for test, paper in PAPER_UNSEEN.items():
            cells = [success_cell(baselines[b].get(test)) for b in ("random", "zero-shot")]
            table.add_row(test, *cells, seeds_cell([success_cell(rows.get(test)) for rows in trained]), f"{paper:.2f}",
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
                    result, run = eval_result(folder / "eval"), run_folder(folder / "train", "train")
                    success.append(f"{result['success_rate']:.2f}" if result else "-")
                    length.append(f"{result['mean_length']:.1f}" if result else "-")
                    when = reached(run) if run is not None and (run / "metrics.jsonl").is_file() else None
                    at.append(f"{when[0]:,}" if when else "-")
                paper = {"sum": TASKS[name].paper_sum, "word": TASKS[name].paper_success}.get(normalization)
                if normalization == "token" and token_is_word(counts) and all(value == "-" for value in success):
                    success = length = at = ["= word"]  # the same scores: the word rows are its runs
                table.add_row(name, normalization, seeds_cell(success), seeds_cell(length), seeds_cell(at),
                              f"{paper:.2f}" if paper is not None else "", differ if normalization == "token" else "")
        console.print(table)

    table = Table(title=f"Symbolic PPO (from scratch, action masking) at each task's budget ({per_seed})")
    for column in ("task", "budget", "success", "paper: PPO"):
        table.add_column(column, justify="left" if column == "task" else "right")
    for name in tasks:
        success, budgets = [], set()
        for seed in seeds:
            folder = out / name / "symbolic-ppo" / f"seed{seed}"
            result, run = eval_result(folder / "eval"), run_folder(folder / "train", "train")
            success.append(f"{result['success_rate']:.2f}" if result else "-")
            if run is not None and (run / "config.yaml").is_file():  # the budget the kept runs had
                budgets.add(read_settings(run / "config.yaml")["rollout"]["total_decisions"])
        budget = " / ".join(f"{b:,}" for b in sorted(budgets)) or f"{_budget(TASKS[name]):,}"
        table.add_row(name, budget, seeds_cell(success), TASKS[name].paper_ppo)
    console.print(table)

    if "food_preparation" in tasks:
        found = {f"food_preparation seed {s}": json.loads(p.read_text()) for s in seeds
                 if (p := out / "food_preparation" / "word" / f"seed{s}" / "drift.json").is_file()}
        if found:
            drift_table(found, console)


if __name__ == "__main__":
    sys.exit(main())
