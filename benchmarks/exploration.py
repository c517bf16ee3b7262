"""How fast each exploration option makes the default model learn two household tasks.

Which exploration makes the default model learn from its weak prior? Food Preparation and
Entertainment, one row per option, on the same seeds. Each option is added alone to groundrl's
defaults with their novelty bonus taken out (row "none"); the defaults are "none" with the novelty
bonus. Per run: decisions to the first successful training episode, to an exact success
probability of 0.5 and of 0.95 (of the *learned* policy, sampled: `benchkit.household.success_probability`,
not of the behaviour that explored), the final 100-episode evaluation, and the wall time.

Each run is ``benchmarks/train_food_preparation.py`` with the exact success computed after every
update in Food Preparation (so the decisions are those of the update's end: a resolution of 128)
and every second update in Entertainment (its 187 world states cost ~35 s of scoring each time: a
resolution of 256 decisions there). A run stops once its exact success reaches 0.95. Every
(environment, option, seed) run writes its rows to ``--out/ENV-OPTION-seedN.json`` (in git: the table
is made from these records) and its run folder under ``--runs-dir`` (not in git); running the
benchmark again skips the finished ones and continues an unfinished one from its last checkpoint.
Before they start, each run's hours on this CPU are printed (:class:`benchkit.exact_runs.ExactRun`), and
``--hours H`` refuses, in one line with the command that runs it alone, a run past H hours from now.

    python benchmarks/exploration.py                                    # every option, both tasks, seeds 1-3
    python benchmarks/exploration.py --options none,defaults --envs FoodPreparation --seeds 1
    python benchmarks/exploration.py --table-only                      # --markdown: as the docs show it
    groundrl bench exploration
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from benchkit.args import add_deadline, deadline, listed
from benchkit.exact_runs import BUDGET, EVERY, OPTIONS, ExactRun, milestones
from benchkit.pace import alone, run_pieces
from benchkit.tables import show_table

GROUP = "learning"
RESULTS = "results/exploration"
HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--options", default=",".join(OPTIONS), help=f"comma-separated, of: {', '.join(OPTIONS)}")
    parser.add_argument("--envs", default=",".join(BUDGET), help=f"comma-separated, of: {', '.join(BUDGET)}")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--out", default=str(HERE / RESULTS), help="where each run's record goes")
    parser.add_argument("--runs-dir", default="runs/exploration", help="where the run folders go")
    parser.add_argument("--table-only", action="store_true", help="print the table of the runs done, run nothing")
    add_deadline(parser, "a seed's run and its evaluation")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown (for the docs)")
    parser.add_argument("overrides", nargs="*",
                        help="KEY=VALUE settings added to every run (e.g. agent.llm.train_layers=4)")
    args = parser.parse_args(argv)
    options, envs = listed(parser, "--options", args.options, OPTIONS), listed(parser, "--envs", args.envs, BUDGET)
    deadline(parser, args.hours)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    if not args.table_only:
        runs = [ExactRun(f"{env}, {option}, seed {seed}", path,
                         ["--env", f"groundrl/{env}-v0", "--decisions", str(BUDGET[env]), "--every", str(EVERY[env]),
                          "--stop-at", "0.95", "--runs-dir", args.runs_dir, *OPTIONS[option], f"seed={seed}",
                          *args.overrides],
                         BUDGET[env], alone("exploration.py", "--options", option, "--envs", env, "--seeds", str(seed),
                                            "--out", str(out), "--runs-dir", args.runs_dir, *args.overrides))
                for env in envs for seed in args.seeds for option in options
                if not (path := out / f"{env}-{option}-seed{seed}.json").exists()]
        run_pieces(runs, args.hours, ExactRun.estimate)

    print_table(out, envs, options, args.seeds, markdown=args.markdown)
    return 0


def print_table(out: Path, envs: list[str], options: list[str], seeds: list[int], markdown: bool = False) -> None:
    """One table per environment, one row per option with a run; a cell lists the seeds in order, '?' for a
    seed not run yet and '-' for a milestone not reached."""
    def per_seed(done, key, style="{}"):
        return " / ".join("?" if m is None else "-" if m[key] is None else style.format(m[key]) for m in done)

    columns = ("option", "first success", "exact 0.5", "exact 0.95", "exact at the end", "evaluation (100 ep.)",
               "wall s (mean)", "seeds at 0.95")
    for env in envs:
        rows = []
        for option in options:
            runs = [json.loads(p.read_text()) if p.exists() else None
                    for p in (out / f"{env}-{option}-seed{seed}.json" for seed in seeds)]
            done = [None if run is None else milestones(run) for run in runs]
            finished = [m for m in done if m is not None]
            if not finished:
                continue
            rows.append((option, per_seed(done, "first"), per_seed(done, "0.5"), per_seed(done, "0.95"),
                         per_seed(done, "final", "{:.3f}"), per_seed(done, "evaluation", "{:.2f}"),
                         f"{statistics.mean(m['wall'] for m in finished):.0f}",
                         f"{sum(m['0.95'] is not None for m in finished)} of {len(finished)}"))
        title = (f"{env} (budget {BUDGET[env]} decisions): decisions to the first success and to exact P(success) "
                 f"0.5 / 0.95, per seed {' / '.join(map(str, seeds))} ('-' not reached, '?' not run)")
        show_table(title, columns, rows, markdown)


if __name__ == "__main__":
    sys.exit(main())
