"""Whether a speed setting changes what is learned: Food Preparation's exact success.

Food Preparation's exact success probability for several settings on the same seeds (each run is
`benchmarks/train_food_preparation.py`), and the decisions each run took to its first success and
to exact success 0.5 and 0.95.

The runs start from the default preset (the one that learns with the default model: on TWOSOME's
settings the model never succeeds on some seeds, and a comparison of runs that learn nothing says
nothing); ``--preset twosome`` compares on the paper's design. A run stops once its exact success
reaches ``--stop-at`` (0.95): past it the curves are flat, and today's path costs ~1 decision/s.

Every (setting, seed) run writes its rows to ``--out/SETTING-seedN.json`` and is skipped when that
file exists; an unfinished run's rows are in ``SETTING-seedN.json.part``, and running the comparison
again continues it from its last checkpoint.

    python benchmarks/learning_unchanged.py                                  # today vs new defaults, seeds 1-3
    python benchmarks/learning_unchanged.py --preset twosome --every 2 --stop-at 1.1   # the paper's design, 3,072 each
    python benchmarks/learning_unchanged.py --settings today,defaults,train_layers=8 --seeds 1 2 3
    python benchmarks/learning_unchanged.py --table-only                     # the table of what is there
    groundrl bench learning_unchanged
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from benchkit.exact_runs import milestones, run_resumable

GROUP = "learning"

# today: every speed item of issue 19 off; the others: one change on top of the defaults
SETTINGS = {
    "today": ["ppo.deduplicate=false", "agent.llm.cache_size=0", "precision=fp32", "agent.llm.train_layers=all"],
    "defaults": [],
    "train_layers=8": ["agent.llm.train_layers=8"],
    "train_layers=4": ["agent.llm.train_layers=4"],
    "bf16-mixed": ["precision=bf16-mixed"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default="today,defaults", help=f"comma-separated, of: {', '.join(SETTINGS)}")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--decisions", type=int, default=3072)
    parser.add_argument("--every", type=int, default=1, help="updates between exact success computations")
    parser.add_argument("--stop-at", type=float, default=0.95, help="stop a run once its exact success reaches this")
    parser.add_argument("--preset", default="default", help="the settings every run starts from")
    parser.add_argument("--out", default=None,
                        help="where each run's rows go (default: runs/learning_unchanged/PRESET)")
    parser.add_argument("--table-only", action="store_true", help="print the table of the runs done, run nothing")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.settings.split(",") if name.strip()]
    unknown = [name for name in names if name not in SETTINGS]
    if unknown:
        parser.error(f"--settings: no {unknown[0]!r}; choose from {', '.join(SETTINGS)}")
    from groundrl.train.config import PRESETS

    if args.preset not in PRESETS:
        parser.error(f"--preset: no {args.preset!r}; choose from {', '.join(PRESETS)}")
    out = Path(args.out or f"runs/learning_unchanged/{args.preset}")
    out.mkdir(parents=True, exist_ok=True)

    for seed in args.seeds:
        for name in names:
            path = out / f"{name}-seed{seed}.json"
            if path.exists() or args.table_only:
                continue
            run_resumable(path, ["--decisions", str(args.decisions), "--every", str(args.every), "--stop-at",
                                 str(args.stop_at), "--preset", args.preset, "--runs-dir", str(out / "runs"),
                                 f"seed={seed}", *SETTINGS[name]], f"{name}, seed {seed}")

    print_table(out, names, args.seeds)
    return 0


def print_table(out: Path, names: list[str], seeds: list[int]) -> None:
    from rich.console import Console
    from rich.table import Table

    runs = {(name, seed): json.loads((out / f"{name}-seed{seed}.json").read_text())
            for name in names for seed in seeds if (out / f"{name}-seed{seed}.json").exists()}
    if not runs:
        print("no finished runs yet")
        return
    decisions = sorted({row["decisions"] for run in runs.values() for row in run["rows"]})
    table = Table(title=f"Food Preparation: exact P(success) of the sampled policy, per setting and seed ({out}; "
                        "blank: the run had stopped at its --stop-at)")
    table.add_column("decisions", justify="right")
    for name in names:
        for seed in seeds:
            table.add_column(f"{name}\nseed {seed}", justify="right")
        table.add_column(f"{name}\nmean", justify="right", style="bold")
    for d in decisions:
        cells = [str(d)]
        for name in names:
            values = []
            for seed in seeds:
                row = next((r for r in runs.get((name, seed), {"rows": []})["rows"] if r["decisions"] == d), None)
                cells.append("" if row is None else f"{row['exact_success']:.3f}")
                if row is not None:
                    values.append(row["exact_success"])
            cells.append(f"{statistics.mean(values):.3f}" if len(values) == len(seeds) else "")
        table.add_row(*cells)
    finals = ["evaluation (100 ep.)"]
    speed = ["decisions/s overall"]
    for name in names:
        for seed in seeds:
            run = runs.get((name, seed))
            finals.append("" if run is None else f"{run['evaluation']['success_rate']:.2f}")
            if run is None:
                speed.append("")
            else:
                last = run["rows"][-1]
                speed.append(f"{last['decisions'] / last['wall_seconds']:.2f}" if last["wall_seconds"] else "")
        done = [runs[(name, s)] for s in seeds if (name, s) in runs]
        finals.append(f"{statistics.mean(r['evaluation']['success_rate'] for r in done):.2f}" if done else "")
        rates = [r["rows"][-1]["decisions"] / r["rows"][-1]["wall_seconds"] for r in done
                 if r["rows"][-1]["wall_seconds"] and not math.isnan(r["rows"][-1]["wall_seconds"])]
        speed.append(f"{statistics.mean(rates):.2f}" if rates else "")
    for key, label in (("first", "first success at"), ("0.5", "exact 0.5 at"), ("0.95", "exact 0.95 at")):
        cells = [label]
        for name in names:
            reached = []
            for seed in seeds:
                value = milestones(runs[(name, seed)])[key] if (name, seed) in runs else None
                cells.append("-" if value is None else str(value))
                reached.append(value)
            cells.append(f"{statistics.mean(reached):.0f}" if all(v is not None for v in reached) else "")
        table.add_row(*cells)
    table.add_row(*finals)
    table.add_row(*speed)
    Console(width=250).print(table)


if __name__ == "__main__":
    sys.exit(main())
