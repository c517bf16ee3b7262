"""Whether self-imitation learns what the prior rarely finds: TWOSOME's tasks with ``sil`` on and off.

Each row is a task of ``examples/twosome/`` and a variant of its settings, trained on ``--seeds`` as
a user types it, ``groundrl train --config examples/twosome/TASK.yaml seed=S KEY=VALUE ...``, then
``groundrl eval RUN --episodes 100`` (sampled, evaluation seeds from 1,000,000); the Food
Preparation agents also on ``--suite twosome-unseen`` (Laundry and the five other unseen tasks).
The rows (``ROWS``):

- ``tomato_lettuce_salad/sil``: the example as it is (``examples/twosome/tomato_lettuce_salad.yaml``,
  whose settings were this row's before they became the example's, and say why): the environment's
  shaping paid once an episode, an epsilon mixture (0.2) that finds the dish, no novelty bonus,
  self-imitation concentrated on the few successes (16 episodes kept, drawn by advantage, 4 steps of
  32 an update, the critic left to PPO), 2 PPO epochs and bf16 where the CPU has it natively;
  ``tomato_lettuce_salad/no-sil`` the same without self-imitation (``sil.enabled=false``);
- ``food_preparation/sil``, ``tomato_salad/sil``, ``entertainment/sil``: the examples with
  self-imitation; without it they are ``benchmarks/reproduce_twosome.py``'s runs, whose kept records
  (``benchmarks/results/twosome``) the table shows beside.

Run folders go under ``--out`` (``TASK/VARIANT/seedS/{train,eval,unseen}``; not in git), their
records (config, metrics, results) to ``--keep`` (``benchmarks/results/self_imitation``, in git),
whence the tables are made. Running it again skips what is done and resumes what is not. A run
stopped before its budget (Ctrl-C or SIGTERM save it) is evaluated at its last checkpoint with
``--partial``; trained on later, it is evaluated again beside that, and the table reads the latest
checkpoint's evaluation and says how many decisions each run played. Before it starts it prints each
piece's (a seed's training and evaluations) estimated hours on this CPU (:mod:`benchkit.pace`), and
``--hours H`` refuses, in one line with its command, a piece that would end more than H hours from
now. The table gives, per row and
seed, the evaluation's success, the training's first success and its successes (where exploration
found the dish, and how often), and when the last 100 training episodes first succeeded 95% of the
time; the Overcooked rows also the share of evaluation episodes that carried the dish and the
probability of serving it then (``benchmarks/overcooked_funnel.py``).

    python benchmarks/self_imitation.py --rows tomato_lettuce_salad/sil --seeds 1 2
    python benchmarks/self_imitation.py --rows entertainment/sil --seeds 3 --hours 2.5
    python benchmarks/self_imitation.py --rows tomato_lettuce_salad/sil --seeds 1 2 --stages eval --partial
    python benchmarks/self_imitation.py --table-only --markdown
    groundrl bench self_imitation --table-only
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchkit.args import add_deadline, deadline, listed
from benchkit.campaign import FUNNEL, ROOT, keep_records
from benchkit.pace import Piece, alone, estimate, run_pieces
from benchkit.records import eval_result, reached, run_folder, suite_rows
from benchkit.tables import seeds_cell, show_table, success_cell

GROUP = "learning"
RESULTS = "results/self_imitation"
EPISODES = 100
EXAMPLES = ROOT / "examples" / "twosome"
SIL = ["sil.enabled=true", "sil.steps=2"]
ROWS: dict[str, tuple[str, list[str]]] = {
    "tomato_lettuce_salad/sil": ("tomato_lettuce_salad", []),  # the example takes self-imitation
    "tomato_lettuce_salad/no-sil": ("tomato_lettuce_salad", ["sil.enabled=false"]),
    "food_preparation/sil": ("food_preparation", SIL),
    "tomato_salad/sil": ("tomato_salad", SIL),
    "entertainment/sil": ("entertainment", SIL),
}
OVERCOOKED = ("tomato_salad", "tomato_lettuce_salad")
WITHOUT = ROOT / "benchmarks" / "results" / "twosome"  # reproduce_twosome.py's records: the examples, sil off
STAGES = ("train", "eval", "unseen")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of: {', '.join(ROWS)}")
    parser.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, of: {', '.join(STAGES)}")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--partial", action="store_true",
                        help="evaluate runs stopped before their budget too (at their last checkpoint)")
    parser.add_argument("--out", type=Path, default=ROOT / "runs/self_imitation", help="where the run folders go")
    parser.add_argument("--keep", type=Path, default=ROOT / "benchmarks" / RESULTS,
                        help="where the runs' records are kept (in git) and the tables are made from")
    add_deadline(parser)
    parser.add_argument("--table-only", action="store_true", help="print the tables of what is done, run nothing")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown (for the docs)")
    args = parser.parse_args(argv)
    rows, stages = listed(parser, "--rows", args.rows, ROWS), listed(parser, "--stages", args.stages, STAGES)
    deadline(parser, args.hours)
    out = args.out.resolve()

    if not args.table_only:
        keep = args.keep.resolve()
        run_pieces(pieces(args, rows, stages, out, keep), args.hours, lambda piece: estimate(piece, out, keep),
                   lambda: keep_records(out, keep))
        keep_records(out, keep)
    print_tables(args.keep.resolve(), rows, args.seeds, args.markdown)
    return 0


def pieces(args: argparse.Namespace, rows: list[str], stages: list[str], out: Path, keep: Path) -> list[Piece]:
    """A piece a row and seed: its training (``train`` stage), its evaluation and, for Food
    Preparation, the unseen tasks; an Overcooked evaluation's funnel is kept beside it."""
    every = (["--out", str(out)] if out != (ROOT / "runs/self_imitation").resolve() else []) + \
        (["--keep", str(keep)] if keep != (ROOT / "benchmarks" / RESULTS).resolve() else [])
    found = []
    for row in rows:
        task, settings = ROWS[row]
        evals = ([("eval", ["--episodes", str(EPISODES)])] if "eval" in stages else []) + \
            ([("unseen", ["--suite", "twosome-unseen"])] if task == "food_preparation" and "unseen" in stages else [])
        mine = [stage for stage in STAGES if stage in stages]
        for seed in args.seeds:
            found.append(Piece(
                f"{row} seed {seed}", out / row / f"seed{seed}",
                ["--config", str(EXAMPLES / f"{task}.yaml"), f"seed={seed}", *settings] if "train" in stages else None,
                evals, alone("self_imitation.py", "--rows", row, "--stages", ",".join(mine), "--seeds", str(seed),
                             *(["--partial"] if args.partial else []), *every),
                then=(lambda _, folder: keep_funnel(folder / "eval")) if task in OVERCOOKED and "eval" in stages
                else None, partial=args.partial))
    return found


def training_successes(run: Path | None) -> tuple[str, str]:
    """(decisions at the first training success, successes in training) of a run's records."""
    from groundrl.runs import read_jsonl

    if run is None or not (run / "metrics.jsonl").is_file():
        return "-", "-"
    first, total = None, 0
    for metrics in read_jsonl(run / "metrics.jsonl"):
        won = round((metrics.get("success_rate") or 0.0) * (metrics.get("episodes") or 0))
        if won and first is None:
            first = metrics["decisions"]
        total += won
    return (f"{first:,}" if first is not None else "none"), str(total)


def played(run: Path | None) -> str:
    from groundrl.runs import read_jsonl

    if run is None or not (run / "metrics.jsonl").is_file():
        return "-"
    rows = list(read_jsonl(run / "metrics.jsonl"))
    return f"{rows[-1]['decisions']:,}" if rows else "0"


def keep_funnel(eval_folder: Path) -> None:
    """Write the funnel of the evaluation in ``eval_folder`` (``benchmarks/overcooked_funnel.py``) beside
    its results, as a record: the trajectories it is read from stay behind."""
    from overcooked_funnel import funnel

    run = run_folder(eval_folder, "eval")
    if run is not None and (run / "results.json").is_file() and not (run / FUNNEL).is_file():
        (run / FUNNEL).write_text(json.dumps(funnel(run), indent=1) + "\n")


def funnel_cells(eval_folder: Path) -> tuple[str, str]:
    """(share of evaluation episodes that carried the dish, P(serve) while carrying it) of a kept funnel."""
    run = run_folder(eval_folder, "eval")
    if run is None or not (run / FUNNEL).is_file():
        return "-", "-"
    found = json.loads((run / FUNNEL).read_text())
    serve = f"{found['p_serve_with_dish']:.3f} ({found['states_with_dish']})" if found["states_with_dish"] else "-"
    return f"{found['stages']['dish carried']:.2f}", serve


def without(keep: Path, row: str) -> Path:
    """Where the records of ``row``'s runs without self-imitation are: the row's ``no-sil`` twin, or
    else the example's runs in ``benchmarks/reproduce_twosome.py``'s records."""
    task, twin = ROWS[row][0], row.replace("/sil", "/no-sil")
    return keep / twin if twin in ROWS else WITHOUT / task / "word"


def print_tables(keep: Path, rows: list[str], seeds: list[int], markdown: bool) -> None:
    per_seed = f"seeds {', '.join(map(str, seeds))}"
    columns = ("row", "evaluation success", "decisions played", "first training success at", "training successes",
               "last 100 at 0.95 at", "dish carried (evaluation)", "P(serve) carrying the dish (states)",
               "without sil")
    table = []
    for row in rows:
        task, _ = ROWS[row]
        cells = {name: [] for name in columns[1:]}
        for seed in seeds:
            folder = keep / row / f"seed{seed}"
            run = run_folder(folder / "train", "train")
            cells["evaluation success"].append(success_cell(eval_result(folder / "eval")))
            cells["decisions played"].append(played(run))
            first, total = training_successes(run)
            cells["first training success at"].append(first)
            cells["training successes"].append(total)
            when = reached(run) if run is not None and (run / "metrics.jsonl").is_file() else None
            cells["last 100 at 0.95 at"].append(f"{when[0]:,}" if when else "-")
            carried, serve = funnel_cells(folder / "eval") if task in OVERCOOKED else ("-", "-")
            cells["dish carried (evaluation)"].append(carried)
            cells["P(serve) carrying the dish (states)"].append(serve)
            cells["without sil"].append("-" if row.endswith("no-sil") else success_cell(eval_result(
                without(keep, row) / f"seed{seed}" / "eval")))
        table.append((row, *(seeds_cell(values) for values in cells.values())))
    show_table(f"Self-imitation: {EPISODES} sampled evaluation episodes a seed ({per_seed})", columns, table, markdown)

    unseen = [row for row in rows if ROWS[row][0] == "food_preparation"]
    if unseen:
        trained = {row: [suite_rows(keep / row / f"seed{s}" / "unseen") for s in seeds] for row in unseen}
        before = [suite_rows(WITHOUT / "food_preparation" / "word" / f"seed{s}" / "unseen") for s in seeds]
        tests = sorted({test for found in [*before, *(r for rs in trained.values() for r in rs)] for test in found})
        show_table(f"The Food Preparation agents on the unseen tasks, with and without self-imitation ({per_seed})",
                   ("test", *unseen, "without sil"),
                   [(test, *(seeds_cell([success_cell(found.get(test)) for found in trained[row]]) for row in unseen),
                     seeds_cell([success_cell(found.get(test)) for found in before])) for test in tests], markdown)


if __name__ == "__main__":
    sys.exit(main())
