"""How far Overcooked evaluation episodes get towards serving the dish, stage by stage.

Of the evaluation episodes of each run folder (``groundrl eval`` writes them), the share that chopped
each needed ingredient, chopped them all, had the dish in a bowl, carried it, and served it; and the
mean probability the policy gave to serving while carrying the dish against while carrying anything
else. It tells an exploration bottleneck (few episodes reach a stage) from a policy that does not
tell the dish apart (serving no likelier with it in hand).

Read from the recorded observation texts (the sentences of TWOSOME's text, ``shared/spec``), so it
works on any evaluation of Tomato Salad or Tomato-Lettuce Salad, trained agent or baseline:

    groundrl eval zero-shot --env groundrl/TomatoLettuceSalad-v0 --prompt actions --episodes 100 --runs-dir runs/funnel
    python benchmarks/overcooked_funnel.py runs/funnel/*-eval-*
    groundrl bench overcooked_funnel runs/funnel/*-eval-*
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

GROUP = "probes"
GOAL = re.compile(r"To serve the dish of a bowl only containing chopped (.+?), you should first")
BOWL = re.compile(r"bowl containing (?:a )?chopped ([a-z ,]+?)(?: is on| in hand|\.)")
CARRIED_BOWL = re.compile(r"carrying a bowl containing (?:a )?chopped ([a-z ,]+?)(?: in hand)?\.")


def foods(words: str) -> frozenset[str]:
    """``"tomato, lettuce and onion"`` -> {tomato, lettuce, onion}."""
    return frozenset(w.strip() for w in re.split(r",| and ", words) if w.strip())


def episode_stages(steps: list[dict]) -> tuple[dict[str, bool], list[float], list[float]]:
    """The stages one episode reached, and the probabilities of serving while carrying the dish
    and while carrying anything else."""
    goal = GOAL.search(steps[0]["observation"])
    if goal is None:
        raise ValueError("not an Overcooked salad episode: its observation states no dish to serve")
    dish = foods(goal.group(1))
    reached = {f"{food} chopped": False for food in sorted(dish)}
    reached.update({"all chopped": False, "dish in a bowl": False, "dish carried": False})
    serve_with_dish, serve_with_other = [], []
    for step in steps:
        text = GOAL.split(step["observation"])[0]
        bowls = [foods(b) for b in BOWL.findall(text)]
        chopped = {f for f in dish if f"a chopped {f}" in text or any(f in b for b in bowls)}
        for food in chopped:
            reached[f"{food} chopped"] = True
        reached["all chopped"] |= chopped == dish
        reached["dish in a bowl"] |= dish in bowls
        carried = CARRIED_BOWL.search(text)
        if "carrying" in text and "probs" in step:
            serve = next(i for i, a in enumerate(step["valid_actions"]) if a.startswith("serve"))
            holds_dish = carried is not None and foods(carried.group(1)) == dish
            reached["dish carried"] |= holds_dish
            (serve_with_dish if holds_dish else serve_with_other).append(step["probs"][serve])
    return reached, serve_with_dish, serve_with_other


def funnel(folder: Path) -> dict:
    """The funnel of every evaluation episode under ``folder`` (a `groundrl eval` run folder)."""
    from groundrl.errors import GroundrlError
    from groundrl.eval.replay import load_episodes, trajectory_files
    from groundrl.runs import read_jsonl

    counts = defaultdict(int)
    with_dish, with_other = [], []
    episodes = 0
    for file in trajectory_files(folder):
        success = {r["episode"]: bool(r["success"]) for r in read_jsonl(file.parent / "episodes.jsonl")}
        if not success:  # a training run's recorded episodes: not an evaluation
            continue
        for episode in load_episodes(file):
            reached, dish, other = episode_stages(episode.steps)
            for stage, hit in reached.items():
                counts[stage] += hit
            counts["served"] += success.get(episode.number, False)
            with_dish += dish
            with_other += other
            episodes += 1
    if not episodes:
        raise GroundrlError(f"{folder}: no evaluation episodes (episodes.jsonl and trajectories.jsonl, "
                            "as `groundrl eval` writes them)")
    mean = lambda xs: statistics.mean(xs) if xs else float("nan")  # noqa: E731
    return {"episodes": episodes, "stages": {k: v / episodes for k, v in counts.items()},
            "p_serve_with_dish": mean(with_dish), "states_with_dish": len(with_dish),
            "p_serve_with_other": mean(with_other)}


def table(rows: dict[str, dict]) -> str:
    """A Markdown table, one row a run folder."""
    stages = list(dict.fromkeys(stage for row in rows.values() for stage in row["stages"]))
    head = ["run", "episodes", *stages, "P(serve) carrying the dish (states)", "P(serve) carrying other"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, row in rows.items():
        cells = [name, str(row["episodes"]), *(f"{row['stages'].get(s, 0):.2f}" for s in stages),
                 f"{row['p_serve_with_dish']:.3f} ({row['states_with_dish']})", f"{row['p_serve_with_other']:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="evaluation run folders (`groundrl eval ... --runs-dir`)")
    args = parser.parse_args(argv)
    from groundrl.errors import GroundrlError

    try:
        rows = {str(run): funnel(run) for run in args.runs}
    except (GroundrlError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
