"""Each baseline's success on one task of each family: a row of the baselines table.

One row per command, on the `overview` suite (GoToLocal, MixedTrainLocal, Food Preparation,
Entertainment, Tomato Salad).

Rows: ``random``, ``bot`` (BabyAI only), ``zero-shot-sum`` / ``zero-shot-word`` (the default model's
action scores without training), ``symbolic-ppo`` (PPO from scratch on the symbolic observation,
trained ``--budget`` decisions on each task, then evaluated there), ``drrn`` (likewise, on the text).
Evaluation seeds start at 1,000,000; training seeds are below 10,000.

    python benchmarks/baselines.py random --episodes 100
    python benchmarks/baselines.py zero-shot-word --episodes 20
    python benchmarks/baselines.py symbolic-ppo --budget 51200 --episodes 100
    groundrl bench baselines bot
"""

from __future__ import annotations

import argparse
import sys
import time

GROUP = "baselines"
ROWS = ("random", "bot", "zero-shot-sum", "zero-shot-word", "symbolic-ppo", "drrn")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("agent", choices=ROWS)
    parser.add_argument("--episodes", type=int, default=None, help="per task (default: the suite's, 1000 / 100)")
    parser.add_argument("--budget", type=int, default=51_200, help="training decisions per task (trained rows)")
    parser.add_argument("--suite", default="overview")
    parser.add_argument("--model", default=None, help="zero-shot rows: the model (default: the embedded one)")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--runs-dir", default="runs/baselines")
    args = parser.parse_args(argv)

    import transformers
    from rich.console import Console
    from rich.table import Table

    from groundrl.eval.agents import evaluation_agent
    from groundrl.eval.suites import Suite, get_suite, run_suite
    from groundrl.runs import new_run_dir
    from groundrl.train.config import load_config
    from groundrl.train.trainer import make_trainer

    transformers.utils.logging.disable_progress_bar()
    suite = get_suite(args.suite)
    run_dir = new_run_dir(args.runs_dir, f"baseline-{args.agent}", args.suite)
    started = time.perf_counter()
    results, notes = [], []
    if args.agent in ("symbolic-ppo", "drrn"):
        for test in suite.tests:
            config = load_config(args.agent, overrides=[f"env={test.env_id}", f"rollout.total_decisions={args.budget}",
                                                         "progress=false", "checkpoint_every=1000000"])
            trainer = make_trainer(config, run_dir / "train" / test.name)
            t0 = time.perf_counter()
            trainer.train()
            notes.append(f"{test.name}: trained {trainer.state.decisions} decisions in "
                         f"{time.perf_counter() - t0:.0f} s")
            results += run_suite(trainer.agent, Suite(test.name, "", (test,)), run_dir, episodes=args.episodes,
                                 num_envs=args.num_envs, progress=False)
    else:
        spec = "zero-shot" if args.agent.startswith("zero-shot") else args.agent
        normalization = args.agent.removeprefix("zero-shot-") if spec == "zero-shot" else None
        agent, about, _ = evaluation_agent(spec, model=args.model, normalization=normalization, dtype="float32")
        results = run_suite(agent, suite, run_dir, episodes=args.episodes, num_envs=args.num_envs, progress=False)
    minutes = (time.perf_counter() - started) / 60

    table = Table(title=f"{args.suite}: success rate [95% CI] (episodes), {args.agent}")
    table.add_column("agent")
    for r in results:
        table.add_column(r.test.name, justify="right")
    table.add_column("minutes", justify="right")
    cells = []
    for r in results:
        x = r.result
        cells.append("n/a" if x is None else f"{x.success_rate:.2f} [{x.ci_low:.2f}, {x.ci_high:.2f}] ({x.episodes})")
    table.add_row(args.agent, *cells, f"{minutes:.1f}")
    Console(width=200).print(table)
    for note in notes:
        print(note)
    print(f"run folder: {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
