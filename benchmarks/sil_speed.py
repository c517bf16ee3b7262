"""Seconds per self-imitation step on kept successes, each drawn state scored once or every draw.

Self-imitation draws its minibatch from the kept episodes with replacement, and successful episodes
of one task pass through the same states: a step's 32 draws hold far fewer distinct (prompt, valid
actions). With ``ppo.deduplicate`` (the default) equal draws share a micro-batch and the agent
scores each distinct state once; the gradient is the same (tests/unit/test_self_imitation.py).

The kept episodes are a run's memory as plain data (``--memory``; by default Tomato-Lettuce Salad's
16 successes of ``self_imitation.py``'s row ``tomato_lettuce_salad/sil``, seed 1, at 16,000
decisions, with the priorities it drew them by). Two trainers of that row's settings, one per
setting, load the same memory and take turns: one warm-up round (the frozen trunk's and the
critic's caches fill), then ``--rounds`` measured ones, each ``sil.steps`` steps of
``sil.batch_size`` draws (the update's self-imitation, ``imitate``). The table gives the
distinct states scored per step, the seconds per step and the speed-up. ``--against KEY=VALUE ...``
compares the row's settings with those on top instead (another exact speed setting, say).

    python benchmarks/sil_speed.py
    python benchmarks/sil_speed.py --model tiny-llama --rounds 1 agent.llm.train_layers=1   # check the script
    python benchmarks/sil_speed.py --against ppo.micro_batch_size=16
    groundrl bench sil_speed --rounds 5
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from benchkit.campaign import ROOT

GROUP = "speed"
MEMORY = ROOT / "benchmarks" / "results" / "self_imitation" / "kept_episodes" / "tomato_lettuce_salad-seed1-16000.json"
SETTINGS = {"each state once": ["ppo.deduplicate=true"], "every draw": ["ppo.deduplicate=false"]}


def build(row_settings: list[str], setting: list[str], model: str | None, memory: dict, folder: Path):
    """A trainer of the row's settings and ``setting``, its memory loaded, and a counter of the
    distinct states its agent scores."""
    from groundrl.runs import new_run_dir
    from groundrl.train.config import load_config
    from groundrl.train.trainer import Trainer

    overrides = [*row_settings, *setting, "progress=false", "logging.backends=[]", "device=cpu",
                 *([f"model={model}"] if model else [])]
    config = load_config(files=[ROOT / "examples" / "twosome" / "tomato_lettuce_salad.yaml"], overrides=overrides)
    trainer = Trainer(config, new_run_dir(folder, "train", config.env))
    trainer.algorithm.imitation.load_state_dict(memory)
    scored = []
    score = trainer.agent._scores

    def counting(inputs, valid_actions, hidden):  # what the scorer computes: each distinct request once
        scored.append(len({(x, tuple(v)) for x, v in zip(inputs, valid_actions)}))
        return score(inputs, valid_actions, hidden)

    trainer.agent._scores = counting
    return trainer, scored


def read_memory(parser: argparse.ArgumentParser, path: Path) -> dict:
    """The kept episodes of ``path`` (a checkpoint's ``sil`` state as JSON), or a one-line error."""
    from groundrl.train.self_imitation import KeptEpisode

    try:
        memory = json.loads(path.read_text())
        episodes = [KeptEpisode(**episode) for episode in memory["episodes"]]
        float(memory["baseline"])
    except (ValueError, TypeError, KeyError) as error:
        parser.error(f"--memory: {path} is not a self-imitation memory (JSON with 'episodes' and 'baseline', as a "
                     f"checkpoint keeps it): {type(error).__name__}: {error}")
    if not episodes:
        parser.error(f"--memory: {path} keeps no episode: nothing to imitate")
    return memory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory", type=Path, default=MEMORY, help="kept episodes: a run's sil memory as JSON")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds (each sil.steps steps) per setting")
    parser.add_argument("--model", default=None, help="the model (default: the row's, the embedded SmolLM2-135M)")
    parser.add_argument("--json", type=Path, default=None, help="also write the table's figures here")
    parser.add_argument("--against", nargs="+", metavar="KEY=VALUE", default=None,
                        help="compare the row's settings with these on top (instead of each state once / every draw)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="settings on top of the row's")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be 1 or more")
    if not args.memory.is_file():
        parser.error(f"--memory: no file {args.memory}")
    import torch
    from self_imitation import ROWS

    from groundrl.errors import GroundrlError
    from groundrl.train.algorithms.policy import Statistics

    memory = read_memory(parser, args.memory)
    settings = SETTINGS if args.against is None else {"row's settings": [], " ".join(args.against): args.against}
    baseline = "every draw" if args.against is None else "row's settings"
    _, row_settings = ROWS["tomato_lettuce_salad/sil"]
    row_settings = [*row_settings, *args.overrides]
    with tempfile.TemporaryDirectory(prefix="groundrl-sil-speed-") as folder:
        try:
            trainers = {name: build(row_settings, setting, args.model, memory, Path(folder) / str(k))
                        for k, (name, setting) in enumerate(settings.items())}
        except GroundrlError as error:  # a bad setting or model: one line, as groundrl train says it
            parser.error(str(error).strip().splitlines()[0])
        sil = next(iter(trainers.values()))[0].config.sil
        steps = sil.steps
        seconds = {name: 0.0 for name in trainers}
        states = {name: 0 for name in trainers}
        for round_ in range(1 + args.rounds):  # the settings take turns, so that both see the same machine
            for name, (trainer, scored) in trainers.items():
                scored.clear()
                started = time.perf_counter()
                trainer.algorithm.imitate(Statistics())
                if round_:
                    seconds[name] += time.perf_counter() - started
                    states[name] += sum(scored)
    episodes = memory["episodes"]
    print(f"kept episodes: {len(episodes)} ({sum(len(e['actions']) for e in episodes)} decisions), {args.memory.name};"
          f" {steps} steps of {sil.batch_size} draws a round, "
          f"{args.rounds} round(s); CPU {torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} thread(s)")
    base = seconds[baseline] / (args.rounds * steps)
    rows = []
    width = max(18, *(len(name) for name in trainers))
    print(f"{'setting':{width}s} {'states scored a step':>21s} {'seconds a step':>15s} {'speed-up':>9s}")
    for name in trainers:
        per_step = seconds[name] / (args.rounds * steps)
        rows.append({"setting": name, "states_per_step": states[name] / (args.rounds * steps),
                     "seconds_per_step": per_step, "speed_up": base / per_step})
        print(f"{name:{width}s} {rows[-1]['states_per_step']:21.1f} {per_step:15.2f} {base / per_step:8.2f}x")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
