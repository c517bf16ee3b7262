"""What a policy does in each state met in evaluation: visits, and each valid action's probability.

For environments with few states (the household tasks: Laundry has 16 within an episode's reach),
it shows where an agent loops: a state visited many times more than there are episodes, with most of
its probability on an action that leaves it as it was. The states are the recorded observations;
the sentences every one of them shares are left out of the table.

    groundrl eval RUN --suite twosome-unseen --runs-dir runs/unseen
    python benchmarks/state_policy.py runs/unseen/*-eval-*/Laundry
    python benchmarks/state_policy.py runs/unseen/*-eval-*/Laundry --contains "is opened" --top 5
    groundrl bench state_policy runs/unseen/*-eval-*/Laundry
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

GROUP = "probes"
SENTENCE = re.compile(r"[^.]+(?:\.|$)")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE.findall(text) if s.strip()]


def states(folders: list[Path]) -> dict[str, dict]:
    """Per observation (first met first): ``visits``, ``episodes`` (that met it), ``ended_there`` (episodes
    whose last decision was taken there and failed), and ``probs``: valid action -> mean probability."""
    from groundrl.errors import GroundrlError
    from groundrl.eval.replay import load_episodes, trajectory_files
    from groundrl.runs import read_jsonl

    found: dict[str, dict] = {}
    for folder in folders:
        for file in trajectory_files(folder):
            success = {r["episode"]: bool(r["success"]) for r in read_jsonl(file.parent / "episodes.jsonl")}
            for episode in load_episodes(file):
                met = set()
                for step in episode.steps:
                    if step.get("probs") is None:
                        raise GroundrlError(f"{file}: steps without probabilities (`groundrl eval` records them)")
                    state = found.setdefault(step["observation"], {
                        "visits": 0, "episodes": 0, "ended_there": 0, "sums": defaultdict(float)})
                    state["visits"] += 1
                    state["episodes"] += step["observation"] not in met
                    met.add(step["observation"])
                    for action, p in zip(step["valid_actions"], step["probs"]):
                        state["sums"][action] += p
                last = episode.steps[-1]["observation"] if episode.steps else None
                if last is not None and not success.get(episode.number, False):
                    found[last]["ended_there"] += 1
    if not found:
        raise GroundrlError(f"{', '.join(map(str, folders))}: no recorded evaluation steps")
    for state in found.values():
        state["probs"] = {a: s / state["visits"] for a, s in state.pop("sums").items()}
    return found


def table(found: dict[str, dict], contains: str | None = None, top: int | None = None) -> str:
    """A Markdown table, the most visited states first: what tells each apart, and its policy."""
    from benchkit.tables import policy_cell

    shared = set.intersection(*(set(sentences(o)) for o in found))
    rows = [(o, s) for o, s in found.items() if contains is None or contains in o]
    rows.sort(key=lambda row: -row[1]["visits"])
    lines = ["| state (its own sentences) | visits | episodes | failed there | policy |", "|---|---|---|---|---|"]
    for observation, state in rows[:top]:
        own = " ".join(s for s in sentences(observation) if s not in shared) or "(the sentences all states share)"
        lines.append(f"| {own} | {state['visits']} | {state['episodes']} | {state['ended_there']} | "
                     f"{policy_cell(state['probs'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path,
                        help="evaluation run folders, or a suite's test folders (`groundrl eval ... --runs-dir`)")
    parser.add_argument("--contains", help="only the states whose observation contains this text")
    parser.add_argument("--top", type=int, help="only the N most visited states")
    args = parser.parse_args(argv)
    from groundrl.errors import GroundrlError

    from benchkit.args import at_least_one

    if args.top is not None:
        at_least_one(parser, args, "top")

    try:
        print(table(states(args.runs), args.contains, args.top))
    except GroundrlError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
