"""Which of PPO with a critic, GRPO and GiGPO learns the household tasks faster.

Food Preparation and Entertainment, the embedded model, 3 seeds each; per run, decisions and wall
time to an exact success probability of 0.5 and 0.9 (the learned policy's, sampled:
`benchkit.household.success_probability`), the final 100-episode evaluation and the peak memory.

Every run is ``benchmarks/train_food_preparation.py`` (the exact success after every update in Food
Preparation, every second one in Entertainment; a run stops at 0.95 or at its budget), with:

- ``ppo``: ``--preset default`` (TWOSOME's structure: LoRA actor, critic on the frozen model, with
  groundrl's learning rates, prompt and novelty bonus); ``ppo-plain``: the same without the novelty
  bonus (the group methods have none). Both are ``benchmarks/exploration.py``'s rows ``defaults``
  and ``none``: their runs are shared (``--ppo-out``, run there if missing);
- ``grpo``, ``gigpo``: ``--preset grpo`` / ``gigpo`` (the defaults without the novelty bonus, groups
  of 4 environments from one seed, KL 0.01 to the untrained policy, no critic): beside ``ppo-plain``;
- ``grpo-novelty``, ``gigpo-novelty``: the same with the defaults' novelty bonus (0.1 -> 0), counted
  per update so that a group's members stay independent: beside ``ppo``. Where the untrained
  policy almost never succeeds (Food Preparation: 0.014 an episode), a group of 4 whose returns are
  all 0 teaches nothing, and the bonus is what tells its members apart;
- ``gigpo-sil``: GiGPO with self-imitation (``sil.enabled=true sil.steps=2``: its best episodes learned
  again after each update, against the mean return of the update's episodes; SPEAR's recipe): beside ``gigpo``;
  ``gigpo-novelty-sil``: the same with the novelty bonus, beside ``gigpo-novelty``: in Entertainment,
  GiGPO without the bonus finds no success to imitate (seed 1: none in 5,120 decisions, with or without it).

Each run's record (its rows) goes to ``--out`` (``benchmarks/results/group_methods``, in git: the table
is made from the records), its run folder to ``--runs-dir`` (not in git). Runs resume from their last
checkpoint; finished ones are skipped. Before they start, each run's hours on this CPU are printed
(from the same method's records: :class:`benchkit.exact_runs.ExactRun`), and ``--hours H`` refuses, in
one line with the command that runs it alone, a run that would end more than H hours from now.

    python benchmarks/group_methods.py                              # both tasks, every method, seeds 1-3
    python benchmarks/group_methods.py --methods grpo --envs FoodPreparation --seeds 1
    python benchmarks/group_methods.py --methods gigpo-sil --envs Entertainment --seeds 2 3 --hours 2.5
    python benchmarks/group_methods.py --table-only                 # --markdown: as the docs show it
    python benchmarks/group_methods.py --table-only --plot docs/group_methods.png
    groundrl bench group_methods
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from benchkit.args import add_deadline, deadline, listed
from benchkit.exact_runs import BUDGET, EVERY, OPTIONS, ExactRun
from benchkit.pace import alone, run_pieces
from benchkit.tables import show_table

GROUP = "learning"
RESULTS = "results/group_methods"
HERE = Path(__file__).resolve().parent


NOVELTY = ["explore.novelty=0.1", "explore.novelty_end=0.0"]  # the defaults' bonus (PPO's row "ppo")
SIL = ["sil.enabled=true", "sil.steps=2"]  # self-imitation (issue 61), as benchmarks/self_imitation.py's rows
METHODS = {"ppo": OPTIONS["defaults"], "ppo-plain": OPTIONS["none"],
           "grpo": ["--preset", "grpo"], "gigpo": ["--preset", "gigpo"],
           "grpo-novelty": ["--preset", "grpo", *NOVELTY], "gigpo-novelty": ["--preset", "gigpo", *NOVELTY],
           "gigpo-sil": ["--preset", "gigpo", *SIL], "gigpo-novelty-sil": ["--preset", "gigpo", *NOVELTY, *SIL]}
SHARED = {"ppo": "defaults", "ppo-plain": "none"}  # exploration.py's names of the PPO runs
TARGETS = (0.5, 0.9)


def result_file(method: str, env: str, seed: int, out: Path, ppo_out: Path) -> Path:
    if method in SHARED:
        return ppo_out / f"{env}-{SHARED[method]}-seed{seed}.json"
    return out / f"{env}-{method}-seed{seed}.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated, of: {', '.join(METHODS)}")
    parser.add_argument("--envs", default=",".join(BUDGET), help=f"comma-separated, of: {', '.join(BUDGET)}")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--out", type=Path, default=HERE / RESULTS,
                        help="where the group runs' records go (in git)")
    parser.add_argument("--ppo-out", type=Path, default=HERE / "results/exploration",
                        help="where the PPO runs' records are (benchmarks/exploration.py's --out)")
    parser.add_argument("--runs-dir", type=Path, default=Path("runs/group_methods"), help="where the run folders go")
    parser.add_argument("--table-only", action="store_true", help="print the table of the runs done, run nothing")
    add_deadline(parser, "a seed's run and its evaluation")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown (for the docs)")
    parser.add_argument("--plot", type=Path, default=None, help="also draw the runs done to this PNG: exact success "
                        "against decisions and against training seconds, a band over the seeds of a method")
    args = parser.parse_args(argv)
    methods, envs = listed(parser, "--methods", args.methods, METHODS), listed(parser, "--envs", args.envs, BUDGET)
    deadline(parser, args.hours)

    if not args.table_only:
        places = ["--out", str(args.out), "--ppo-out", str(args.ppo_out), "--runs-dir", str(args.runs_dir)]
        runs = [ExactRun(f"{env}, {method}, seed {seed}", path,
                         ["--env", f"groundrl/{env}-v0", "--decisions", str(BUDGET[env]), "--every", str(EVERY[env]),
                          "--stop-at", "0.95", "--runs-dir", str(args.runs_dir), *METHODS[method], f"seed={seed}"],
                         BUDGET[env], alone("group_methods.py", "--methods", method, "--envs", env, "--seeds",
                                            str(seed), *places))
                for env in envs for seed in args.seeds for method in methods
                if not (path := result_file(method, env, seed, args.out, args.ppo_out)).exists()]
        run_pieces(runs, args.hours, ExactRun.estimate)
    print_table(args, envs, methods)
    if args.plot is not None:
        records = {(env, method): [json.loads(f.read_text()) for seed in args.seeds
                                   if (f := result_file(method, env, seed, args.out, args.ppo_out)).exists()]
                   for env in envs for method in methods}
        print(f"figure: {plot(records, args.plot)}")
    return 0


def summary(run: dict) -> dict:
    """Decisions and training seconds to each target of exact success (None: not reached), the
    final evaluation, and the run's peak memory (its record's; older records: its metrics.jsonl)."""
    rows = run["rows"]
    reached = {target: next(((r["decisions"], r["wall_seconds"]) for r in rows if r["exact_success"] >= target),
                            None) for target in TARGETS}
    from groundrl.runs import read_jsonl

    memory = max((row.get("memory_gib") or 0.0 for row in rows), default=0.0) or None
    if memory is None and Path(run["run_dir"], "metrics.jsonl").is_file():
        memory = max((row.get("memory_gib") or 0.0 for row in read_jsonl(Path(run["run_dir"]) / "metrics.jsonl")),
                     default=None)
    return {"reached": reached, "final": rows[-1]["exact_success"], "decisions": rows[-1]["decisions"],
            "evaluation": (run.get("evaluation") or {}).get("success_rate"), "memory": memory, "cpu": run.get("cpu")}


def plot(records: dict[tuple[str, str], list[dict]], out: Path) -> Path:
    """A row per environment, exact success against decisions and against training seconds; per
    method its seeds' mean and a band from the lowest to the highest seed. A run stops once it
    reaches 0.95, so its curve is held at its last value to the end of the axis (a finished run's
    success does not fall by stopping)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    envs = list(dict.fromkeys(env for env, _ in records))
    figure, axes = plt.subplots(len(envs), 2, figsize=(11, 3.4 * len(envs)), squeeze=False, constrained_layout=True)
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    methods = list(dict.fromkeys(method for _, method in records))
    # one colour per method in every panel
    colors = {method: palette[k % len(palette)] for k, method in enumerate(methods)}
    for row, env in enumerate(envs):
        runs = {method: found for (e, method), found in records.items() if e == env and found}
        for column, (key, label) in enumerate((("decisions", "decisions"), ("wall_seconds", "training seconds"))):
            ax = axes[row][column]
            end = max((r[key] for found in runs.values() for run in found for r in run["rows"]), default=1.0)
            grid = np.linspace(0.0, max(end, BUDGET[env] if key == "decisions" else 0.0), 300)
            for method, found in runs.items():
                held = np.stack([np.interp(grid, [r[key] for r in run["rows"]],
                                           [r["exact_success"] for r in run["rows"]]) for run in found])
                color = colors[method]
                seeds = f"{len(found)} seed{'s' * (len(found) > 1)}"
                ax.plot(grid, held.mean(0), color=color, linewidth=1.6, label=f"{method} ({seeds})")
                if len(found) > 1:
                    ax.fill_between(grid, held.min(0), held.max(0), color=color, alpha=0.2, linewidth=0)
            ax.axhline(0.9, color="grey", linewidth=0.8, linestyle=":")
            ax.set(xlabel=label, ylabel=f"{env}: exact P(success)", ylim=(-0.02, 1.02))
            ax.grid(alpha=0.3)
        axes[row][0].legend(fontsize="small", loc="lower right")
    figure.suptitle("The embedded SmolLM2-135M: the sampled policy's exact success probability; bands: lowest to "
                    "highest seed; a run that reached 0.95 stopped and is held", fontsize="medium")
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)
    plt.close(figure)
    return out


def print_table(args, envs: list[str], methods: list[str]) -> None:
    """One table per environment, a row per method with a run; a cell lists the seeds in order,
    '?' for a seed not run yet and '-' for a target not reached (``--markdown``: for the docs)."""
    def cells(done, value):
        return " / ".join("?" if s is None else (value(s) or "-") for s in done)

    columns = ("method", "to 0.5", "to 0.9", "seconds to 0.9", "exact at the end", "evaluation (100 ep.)",
               "peak GiB", "seeds at 0.9")
    for env in envs:
        rows, cpus = [], {}
        for method in methods:
            files = [result_file(method, env, seed, args.out, args.ppo_out) for seed in args.seeds]
            done = [summary(json.loads(f.read_text())) if f.exists() else None for f in files]
            finished = [s for s in done if s is not None]
            if not finished:
                continue
            for seed, s in zip(args.seeds, done):
                if s is not None and s["cpu"]:
                    cpus.setdefault(s["cpu"], []).append(f"{method} seed {seed}")
            memory = [s["memory"] for s in finished if s["memory"]]
            rows.append((
                method,
                cells(done, lambda s: f"{s['reached'][0.5][0]:,}" if s["reached"][0.5] else None),
                cells(done, lambda s: f"{s['reached'][0.9][0]:,}" if s["reached"][0.9] else None),
                cells(done, lambda s: f"{s['reached'][0.9][1]:,.0f}" if s["reached"][0.9] else None),
                cells(done, lambda s: f"{s['final']:.3f}"),
                cells(done, lambda s: None if s["evaluation"] is None else f"{s['evaluation']:.2f}"),
                f"{statistics.mean(memory):.2f}" if memory else "-",
                f"{sum(s['reached'][0.9] is not None for s in finished)} of {len(finished)}"))
        title = (f"{env}: decisions (and training seconds) to exact P(success) 0.5 / 0.9, budget "
                 f"{BUDGET[env]:,}; per seed {' / '.join(map(str, args.seeds))} ('-' not reached, '?' not run)")
        show_table(title, columns, rows, args.markdown)
        # seconds compare only on one machine: say which runs were measured where (records that
        # predate the field say nothing)
        for cpu, runs in cpus.items():
            print(f"seconds of {', '.join(runs)}: {cpu}")


if __name__ == "__main__":
    sys.exit(main())
