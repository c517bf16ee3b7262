"""How fast the default model learns Coin Collector, beside random, zero-shot and DRRN.

Coin Collector in a house of three rooms (doors included), 15 actions to find the coin and take it;
PPO on groundrl's defaults, beside the bounds (random, the untrained model) and DRRN, the usual
learned baseline of these games.

Every run is what a user types, in folders of its own under ``--out``:

    groundrl train --env groundrl/TWX-CoinCollector-v0 env_kwargs.params.numLocations=3 \\
        env_kwargs.max_steps=15 rollout.total_decisions=2048 seed=S
    groundrl eval RUN --episodes 100 --env-option split=test
    groundrl eval random --env groundrl/TWX-CoinCollector-v0 --prompt actions --episodes 100 \\
        --env-option params.numLocations=3 --env-option max_steps=15 --env-option split=test

Training plays the package's train games, evaluation its test games (disjoint; evaluation seeds
from 1,000,000, sampled). Running again skips what is done and continues what is not (``groundrl
train --resume``), so the campaign can be stopped and continued. The tables are made from the
runs' records, copied to ``--keep`` (``benchmarks/results/coin_collector``, in git).

    python benchmarks/coin_collector.py --seeds 1 2 3            # everything
    python benchmarks/coin_collector.py --stages baselines       # random and zero-shot only
    python benchmarks/coin_collector.py --table-only --plot docs/coin_collector.png
    groundrl bench coin_collector --table-only
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchkit.args import listed
from benchkit.campaign import ROOT, evaluate, groundrl, keep_records, train
from benchkit.records import eval_result, reached, run_folder

GROUP = "learning"
RESULTS = "results/coin_collector"
ENV = "groundrl/TWX-CoinCollector-v0"
GAME = {"params.numLocations": "3", "max_steps": "15"}
PPO_DECISIONS = 2048
DRRN_DECISIONS = 20_000
EPISODES = 100
STAGES = ("baselines", "ppo", "drrn")


def train_settings(seed: int) -> list[str]:
    return ["--env", ENV, *(f"env_kwargs.{k}={v}" for k, v in GAME.items()), f"seed={seed}", "checkpoint_every=2",
            "progress=false"]


def test_games() -> list[str]:
    return ["--episodes", str(EPISODES), "--env-option", "split=test"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, of: {', '.join(STAGES)}")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--out", type=Path, default=ROOT / "runs/coin_collector", help="where the run folders go")
    parser.add_argument("--keep", type=Path, default=ROOT / "benchmarks" / RESULTS,
                        help="where the runs' records are kept (in git) and the tables are made from")
    parser.add_argument("--table-only", action="store_true", help="print the table of what is done, run nothing")
    parser.add_argument("--plot", type=Path, default=None, help="also draw the PPO runs' learning curves to this PNG")
    args = parser.parse_args(argv)
    stages = listed(parser, "--stages", args.stages, STAGES)
    out, keep = args.out.resolve(), args.keep.resolve()

    if not args.table_only:
        if "baselines" in stages:
            for baseline in ("random", "zero-shot"):
                folder = out / baseline
                done = run_folder(folder, "eval")
                if done is None or not (done / "results.json").is_file():
                    groundrl("eval", baseline, "--env", ENV, "--prompt", "actions", *test_games(),
                             *(f"--env-option={k}={v}" for k, v in GAME.items()), "--runs-dir", str(folder))
                keep_records(out, keep)
        for method, extra in (("ppo", [f"rollout.total_decisions={PPO_DECISIONS}"]),
                              ("drrn", ["--preset", "drrn", f"rollout.total_decisions={DRRN_DECISIONS}"])):
            if method not in stages:
                continue
            for seed in args.seeds:
                folder = out / method / f"seed{seed}"
                run = train(folder, [*extra, *train_settings(seed)])
                if run is not None:
                    evaluate(run, folder / "eval", *test_games())
                keep_records(out, keep)
    keep_records(out, keep)
    print_table(keep, args.seeds)
    if args.plot is not None:
        runs = [run for seed in args.seeds if (run := run_folder(keep / "ppo" / f"seed{seed}" / "train", "train"))]
        if runs:
            groundrl("plot", *map(str, runs), "--out", str(args.plot), "--metric", "success_rate",
                     "--metric", "episode_length")
    return 0


def print_table(keep: Path, seeds: list[int]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Coin Collector (3 rooms, 15 actions): {EPISODES} sampled episodes of the package's test "
                        "games, success [95% CI] and mean length; trained agents per seed")
    for column in ("agent", "seed", "training decisions", "training wall (s)", "reached 0.95 at", "success",
                   "mean length"):
        table.add_column(column, justify="left" if column == "agent" else "right")
    for baseline in ("random", "zero-shot"):
        result = eval_result(keep / baseline)
        table.add_row(baseline, "", "", "", "", _rate(result), f"{result['mean_length']:.1f}" if result else "-")
    for method in ("ppo", "drrn"):
        for seed in seeds:
            folder = keep / method / f"seed{seed}"
            run = run_folder(folder / "train", "train")
            if run is None or not (run / "metrics.jsonl").is_file():
                continue
            from groundrl.runs import read_jsonl

            rows = read_jsonl(run / "metrics.jsonl")
            when = reached(run)
            result = eval_result(folder / "eval")
            table.add_row(method, str(seed), f"{rows[-1]['decisions']:,}" if rows else "-",
                          f"{rows[-1]['wall_seconds']:,.0f}" if rows else "-", f"{when[0]:,}" if when else "-",
                          _rate(result), f"{result['mean_length']:.1f}" if result else "-")
    Console(width=200).print(table)


def _rate(row: dict | None) -> str:
    return f"{row['success_rate']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}]" if row else "-"


if __name__ == "__main__":
    sys.exit(main())
