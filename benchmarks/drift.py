"""How far training moved each run's model from the untrained one, off its training task.

Per run (:mod:`groundrl.eval.drift`): next-token KL and top-1 agreement on general English text,
perplexity before and after, the KL between the trained and untrained policies on held-out text
games, and sampled success on FollowInstruction (a task no run of TWOSOME's tasks trained on) before
and after. TWOSOME's "keeps its general abilities", in a form measured offline.

    python benchmarks/drift.py runs/twosome/food_preparation/seed1/*-train-*
    python benchmarks/drift.py RUN [RUN ...] --episodes 0 --json drift.json   # no FollowInstruction episodes
    groundrl bench drift RUN
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchkit.tables import drift_table

GROUP = "probes"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="training run folders (or checkpoints) of language-model agents")
    parser.add_argument("--episodes", type=int, default=200, help="FollowInstruction episodes per model (0: none)")
    parser.add_argument("--decisions", type=int, default=64, help="held-out decisions per environment")
    parser.add_argument("--json", default=None, help="also write the measurements to this file")
    args = parser.parse_args(argv)
    if args.episodes < 0 or args.decisions < 0:
        parser.error("--episodes and --decisions must be 0 or more")

    from rich.console import Console

    from groundrl.errors import GroundrlError
    from groundrl.eval.drift import measure_drift

    found = {}
    for run in args.runs:
        try:
            found[run] = measure_drift(run, episodes=args.episodes, decisions_per_env=args.decisions).to_dict()
        except GroundrlError as error:
            parser.error(f"{run}: {error}")
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=2) + "\n")
    drift_table(found, Console(width=200))
    return 0


if __name__ == "__main__":
    sys.exit(main())
