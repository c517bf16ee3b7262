"""GLAM's BabyAI-Text findings, reproduced with the embedded model beside GLAM's figures.

Reproduce GLAM (Carta et al. 2023)'s findings at small scale: does the grounded LLM learn GoToLocal
faster than RL from scratch, and does what it learned carry over to new words, new action names and
French? Each row beside GLAM's figure (Flan-T5 780M on 8 A100s).

Every run is what a user types: ``groundrl train --config examples/glam/goto_local.yaml seed=S``,
then ``groundrl eval RUN --episodes 1000`` (sampled, evaluation seeds from 1,000,000), in folders
of its own under ``--out`` (``ARM/seedS/{train,eval,generalization}``). Running the benchmark
again skips what is done and continues what is not (``groundrl train --resume``, ``groundrl eval
--resume``); two benchmark processes with different ``--stages`` share the work of two cores.

Stages:

- ``structure``: on GoToLocal, the first seed, ``STRUCTURE_DECISIONS`` each, both without the
  advantage floor the example took after (``NO_FLOOR``): groundrl's structure (LoRA actor, critic on
  the frozen model, two phases; the ``no-floor`` variant's run of that seed at its checkpoint after
  ``STRUCTURE_DECISIONS``, the same weights a run of that budget ends with, since the example anneals
  nothing) beside GLAM's (the whole model fine-tuned, the value head on its shared trunk, one joint
  loss, sum normalization; the example's rollout, and a learning rate for full fine-tuning of a 135M
  model, ``FULL_LR``); each evaluated on ``--structure-episodes`` episodes (the comparison picks the
  example; 1,000 episodes of a GoToLocal agent are hours on a CPU);
- ``llm``: the example on every seed, at its budget;
- ``baselines``: symbolic PPO and DRRN (``--preset symbolic-ppo|drrn``) on GoToLocal at the
  example's budget, every seed; and NPAE trained as the example is (``NPAE``: its settings, with
  GLAM's NPAE structure in place of the pretrained model's scores: random weights but the input
  embeddings, an action head, the value head on the shared trunk, one joint loss), so that the one
  difference from the LLM agent is what pretraining gave it;
- ``generalization``: the LLM agents on ``--suite glam-gotolocal`` (GLAM's tests that apply to a
  GoToLocal agent) beside random and the BabyAI bot;
- ``mixed``: the example's settings on MixedTrainLocal at ``MIXED_DECISIONS``, the first seed, on
  its test episodes and on ``--suite glam`` (GLAM's own tests, which train on MixedTrainLocal),
  beside random and the bot on the same suite (1,000 episodes a test);
- ``variants``: the example with one change, at its budget, every seed (``VARIANTS``), each a reason
  it learns slowly put to the test: its critic on the frozen model is blind to where the goal is
  (``babyai_value_probe.py``), so ``gigpo`` replaces it by GiGPO's group baselines, which know the
  layout (groups of 4 environments reset from one seed, each episode's return against its group's,
  each step's against the steps of its group that met the same observation); ``glam-structure``,
  GLAM's structure (the ``structure`` stage's other arm), whose value head reads a trunk that trains,
  at the whole budget; ``no-floor``, the example without its advantage floor: PPO's advantages
  scaled to unit size, whatever their spread (about half of the updates see no reward, and scaled up,
  their noise moved the policy as far as a reward did; with the floor, which the example took after
  this comparison, the mean over three seeds went from 0.41 to 0.53); ``own-critic``, a critic that
  learns to read the state through two layers of its own above the trunk (``agent.llm.critic=own``);
  ``critic-time``, the frozen critic with the episode's time beside what it reads (the steps decide
  much of a BabyAI return, and no prompt says them: ``agent.llm.critic_time``);
  ``sil``, self-imitation of the run's best episodes; ``hindsight``, the same with episodes that
  reached another mission's goal kept as that mission's successes (``sil.hindsight``).

Before it starts, it prints each piece (a seed of an arm: its training, then its evaluations) with
the hours it still needs on this CPU (:mod:`benchkit.pace`: the arm's own pace in its records, on
this machine where it ran here); ``--hours H`` refuses, in one line with the command that runs it,
a piece that would end more than H hours from the start.

The tables are made from the records the runs leave, which the benchmark copies to ``--keep``
(``benchmarks/results/glam``, in git) whenever it runs. "Reached 0.6": the first update after
which the last 100 training episodes succeeded at least 60% of the time. ``before-floor/`` there
keeps the records of the NPAE and MixedTrainLocal runs made with the example before it took its
advantage floor (the GoToLocal table shows that NPAE in a row of its own, beside the no-floor variant;
the MixedTrainLocal table reads its run there until one with the floor is kept, and says so). The
generalization table has a column for the agent without the floor, which played the suite before the
example took it.

    python benchmarks/reproduce_glam.py --stages llm --seeds 1          # one seed of the LLM agent
    python benchmarks/reproduce_glam.py --stages baselines --seeds 1 2 3
    python benchmarks/reproduce_glam.py --stages variants --variants gigpo --seeds 1
    python benchmarks/reproduce_glam.py --stages llm --seeds 2 3 --episodes 100 --hours 2.5
    python benchmarks/reproduce_glam.py --table-only --plot docs/glam_curves.png
    groundrl bench reproduce_glam --table-only
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchkit.args import add_deadline, deadline, listed
from benchkit.campaign import ROOT, evaluate, keep_records
from benchkit.pace import Piece, alone, estimate, run_pieces
from benchkit.records import WINDOW, eval_result, reached, run_folder, suite_rows, windowed_success
from benchkit.tables import seeds_cell, success_cell

GROUP = "learning"
RESULTS = "results/glam"
EXAMPLE = ROOT / "examples" / "glam" / "goto_local.yaml"
GOTO_LOCAL = "groundrl/BabyAI-GoToLocal-v0"
MIXED = "groundrl/BabyAI-MixedTrainLocal-v0"
STAGES = ("structure", "llm", "baselines", "generalization", "mixed", "variants")
EPISODES = 1000  # GLAM's evaluation
STRUCTURE_DECISIONS = 2048
MIXED_DECISIONS = 8192
FULL_LR = 1e-5  # GLAM's 1e-6 moved a 780M model over 1.5M decisions; ours has a few thousand
TARGET = 0.6

STRUCTURE_EPISODES = 200
# The example before it took the advantage floor: the structures were compared on it (both arms), and
# the floor was its one change that moved the policy off its action frequencies (variant ``no-floor``)
NO_FLOOR = ["ppo.advantage_std_floor=0"]
STRUCTURES = {
    "lora-frozen-critic": None,  # the example without its floor: the no-floor variant's run
    "full-shared-critic": [*NO_FLOOR, "agent.llm.actor=full", "agent.llm.critic=shared", "agent.llm.normalization=sum",
                           "ppo.phases=joint", f"ppo.policy_lr={FULL_LR}", f"ppo.value_lr={FULL_LR}"],
}
BASELINES = ("symbolic-ppo", "drrn", "npae")
# GLAM's NPAE on the example's settings. As GLAM trains it (`--preset npae`: 32 envs x 40 steps, 4
# epochs, the whole model) it is more than a day a seed on a CPU; here, as the LLM agent, the top
# `train_layers` layers train over a frozen trunk (random, as the rest of the model), and at 1e-4: the
# example's 1e-3 is a LoRA rate, too fast for weights trained from scratch (an update's KL was 0.23
# at 1e-4 already).
NPAE = ["agent.llm.actor=full", "agent.llm.critic=shared", "agent.llm.policy=head", "agent.llm.weights=random",
        "agent.llm.pretrained_embeddings=true", "ppo.phases=joint", "ppo.policy_lr=1e-4"]
# The example with one change each (stage ``variants``): GiGPO as ``--preset gigpo`` sets it (groups of
# 4, no advantage normalizing, so the floor does nothing there; KL 0.01 to the untrained policy); GLAM's
# structure as the structure stage trains it (without the floor, as it was compared), to the whole
# budget; the example without its advantage floor.
# The mechanisms of the issue "GLAM's claims at small scale", each on alone: a critic that reads the
# state through 2 layers of its own (babyai_value_probe.py --own-layers); self-imitation of the run's
# best episodes, as the hindsight pilot ran it (64 kept, 4 steps of 32 an update); and with hindsight,
# episodes that reached another mission's goal kept as that mission's successes (2 an episode at most).
SIL = ["sil.enabled=true", "sil.capacity=64", "sil.steps=4"]
VARIANTS = {
    "gigpo": ["algorithm=gigpo", "rollout.group_size=4", "ppo.normalize_advantages=false", "ppo.kl_coef=0.01"],
    "glam-structure": STRUCTURES["full-shared-critic"],
    "no-floor": NO_FLOOR,
    "own-critic": ["agent.llm.critic=own", "agent.llm.critic_layers=2"],
    "critic-time": ["agent.llm.critic_time=true"],
    "sil": SIL,
    "hindsight": [*SIL, "sil.hindsight=2"],
}
# GLAM (Flan-T5 780M trained on MixedTrainLocal), section 4 and figure 4 of the paper; its small model
# (Flan-T5 80M) on GoToLocal, as its maintainers report
PAPER_GENERALIZATION = {"new-seeds": "0.89", "new-nouns": "0.87", "invented-words": "0.77",
                        "new-composition": "~0.12", "synonym-actions": "~0.12", "french": "0.01"}
PAPER_GOTO_LOCAL = "~0.2 at 10k (Flan-T5 80M)"


BOUNDS = {"glam-gotolocal": "", "glam": "-glam"}  # the suite's bounds: generalization-bounds/<bound><this>


def evaluate_bounds(out: Path, suite: str, episodes: list[str]) -> None:
    """Random and the BabyAI bot on ``suite``: the floor and ceiling of its table (each in minutes)."""
    for bound in ("random", "bot"):
        evaluate(bound, out / "generalization-bounds" / f"{bound}{BOUNDS[suite]}", "--suite", suite, *episodes)


def budget() -> int:
    """The example's training decisions: the budget of the LLM agent and of the baselines."""
    from groundrl.train.config import load_config

    return load_config("default", [EXAMPLE]).rollout.total_decisions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, of: {', '.join(STAGES)}")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"stage variants: which (comma-separated, of: {', '.join(VARIANTS)})")
    parser.add_argument("--episodes", type=int, default=EPISODES,
                        help="evaluation episodes per agent and per generalization test")
    parser.add_argument("--structure-episodes", type=int, default=STRUCTURE_EPISODES,
                        help="evaluation episodes per structure (stage structure)")
    parser.add_argument("--out", type=Path, default=ROOT / "runs/glam", help="where the run folders go")
    parser.add_argument("--keep", type=Path, default=ROOT / "benchmarks" / RESULTS,
                        help="where the runs' records are kept (in git) and the tables are made from")
    add_deadline(parser)
    parser.add_argument("--table-only", action="store_true", help="print the tables of what is done, run nothing")
    parser.add_argument("--plot", type=Path, default=None,
                        help="also draw the GoToLocal learning curves (LLM agent and baselines, seeds as bands)")
    args = parser.parse_args(argv)
    stages = listed(parser, "--stages", args.stages, STAGES)
    variants = listed(parser, "--variants", args.variants, VARIANTS)
    if args.episodes < 1 or args.structure_episodes < 1:
        parser.error(f"--episodes and --structure-episodes must be positive numbers of episodes, not "
                     f"{args.episodes} and {args.structure_episodes}")
    deadline(parser, args.hours)
    out, keep = args.out.resolve(), args.keep.resolve()
    episodes = ["--episodes", str(args.episodes)]

    if not args.table_only:
        started = run_pieces(pieces(args, stages, variants, out, keep), args.hours,
                             lambda piece: estimate(piece, out, keep), lambda: keep_records(out, keep))
        # the suites' floor and ceiling, beside the agents that played them (minutes each)
        if any(piece.name.endswith("(generalization)") for piece in started):
            evaluate_bounds(out, "glam-gotolocal", episodes)
        if any(piece.name.startswith("mixed") for piece in started):
            evaluate_bounds(out, "glam", [])
    keep_records(out, keep)
    print_tables(keep, args.seeds, args.episodes, args.structure_episodes)
    if args.plot is not None:
        print(f"figure: {plot_curves(keep, args.seeds, args.plot)}")
    return 0


def pieces(args: argparse.Namespace, stages: list[str], variants: list[str], out: Path, keep: Path) -> list[Piece]:
    """The campaign's pieces for these stages, seeds and variants, in the order they run; those whose
    records are kept whole in ``keep`` are done (a session on another machine ran them)."""
    first, episodes, found = args.seeds[0], ["--episodes", str(args.episodes)], []
    every = (["--episodes", str(args.episodes)] if args.episodes != EPISODES else []) + \
        (["--out", str(out)] if out != (ROOT / "runs/glam").resolve() else []) + \
        (["--keep", str(keep)] if keep != (ROOT / "benchmarks" / RESULTS).resolve() else [])
    if "structure" in stages:
        for name, overrides in STRUCTURES.items():
            folder = out / "structure" / name / f"seed{first}"
            evals = [("eval", ["--episodes", str(args.structure_episodes)])]
            command = alone("reproduce_glam.py", "--stages", "structure", "--seeds", str(first),
                            "--structure-episodes", str(args.structure_episodes), *every)
            if overrides is None:  # the no-floor variant's run, at its checkpoint of that many decisions
                found.append(Piece(f"structure {name}, seed {first}", folder, None, evals, command,
                                   agent=lambda: no_floor_checkpoint(out, first), pace_of=out / "no-floor"))
            else:
                found.append(Piece(f"structure {name}, seed {first}", folder, [
                    "--config", str(EXAMPLE), f"rollout.total_decisions={STRUCTURE_DECISIONS}", f"seed={first}",
                    *overrides], evals, command))
    if "llm" in stages or "generalization" in stages:
        for seed in args.seeds:
            if "generalization" not in stages and kept_done(keep, "llm", seed, args.episodes):
                continue
            both = [stage for stage in ("llm", "generalization") if stage in stages]
            evals = ([("eval", episodes)] if "llm" in stages else []) + \
                ([("generalization", ["--suite", "glam-gotolocal", *episodes])] if "generalization" in stages else [])
            found.append(Piece(f"llm seed {seed}" + (" (generalization)" if "generalization" in stages else ""),
                               out / "llm" / f"seed{seed}",
                               ["--config", str(EXAMPLE), f"seed={seed}"] if "llm" in stages else None, evals,
                               alone("reproduce_glam.py", "--stages", ",".join(both), "--seeds", str(seed), *every)))
    if "baselines" in stages:
        for preset in BASELINES:
            for seed in args.seeds:
                if kept_done(keep, preset, seed, args.episodes):
                    continue
                settings = ["--config", str(EXAMPLE), *NPAE] if preset == "npae" else [
                    "--preset", preset, f"env={GOTO_LOCAL}", f"rollout.total_decisions={budget()}",
                    "checkpoint_every=4"]
                found.append(Piece(f"{preset} seed {seed}", out / preset / f"seed{seed}", [*settings, f"seed={seed}"],
                                   [("eval", episodes)],
                                   alone("reproduce_glam.py", "--stages", "baselines", "--seeds", str(seed), *every)))
    if "mixed" in stages:
        found.append(Piece(f"mixed seed {first}", out / "mixed" / f"seed{first}", [
            "--config", str(EXAMPLE), f"env={MIXED}", f"rollout.total_decisions={MIXED_DECISIONS}", f"seed={first}"],
            [("eval", episodes), ("generalization", ["--suite", "glam", *episodes])],
            alone("reproduce_glam.py", "--stages", "mixed", "--seeds", str(first), *every), pace_of=out / "llm"))
    if "variants" in stages:
        for name in variants:
            for seed in args.seeds:
                if kept_done(keep, name, seed, args.episodes):
                    continue
                found.append(Piece(f"{name} seed {seed}", out / name / f"seed{seed}",
                                   ["--config", str(EXAMPLE), *VARIANTS[name], f"seed={seed}"], [("eval", episodes)],
                                   alone("reproduce_glam.py", "--stages", "variants", "--variants", name,
                                         "--seeds", str(seed), *every)))
    return found


def no_floor_checkpoint(out: Path, seed: int) -> Path | None:
    """The no-floor variant's checkpoint after ``STRUCTURE_DECISIONS`` (None, said: not there yet)."""
    run = run_folder(out / "no-floor" / f"seed{seed}" / "train", "train")
    agent = checkpoint_at(run, STRUCTURE_DECISIONS) if run is not None else None
    if agent is None:
        print(f"structure lora-frozen-critic: no checkpoint at {STRUCTURE_DECISIONS:,} decisions of the no-floor "
              f"variant's seed {seed} yet (run --stages variants --variants no-floor --seeds {seed})", file=sys.stderr)
    return agent


def kept_done(keep: Path, arm: str, seed: int, episodes: int | None = None) -> bool:
    """Whether ``keep`` holds the arm's whole training run and its evaluation (of ``episodes`` or
    more; None: any): done, even where the run folders under ``--out`` are gone (a session on
    another machine), so it is not run again."""
    from groundrl.runs import read_jsonl
    from groundrl.train.config import load_run_config

    folder = keep / arm / f"seed{seed}"
    run = run_folder(folder / "train", "train")
    result = eval_result(folder / "eval")
    if run is None or not (run / "metrics.jsonl").is_file() or result is None or \
            (episodes is not None and (result.get("episodes") or 0) < episodes):
        return False
    rows = read_jsonl(run / "metrics.jsonl")
    return bool(rows) and load_run_config(run).budget_played(rows[-1]["update"], rows[-1]["decisions"])


def checkpoint_at(run: Path, decisions: int) -> Path | None:
    """The checkpoint of ``run`` after ``decisions`` decisions (None: not saved, or not kept)."""
    from groundrl.train.checkpoint import checkpoint_dir
    from groundrl.train.config import load_run_config

    updates, rest = divmod(decisions, load_run_config(run).rollout.decisions_per_update)
    checkpoint = checkpoint_dir(run, updates)
    return checkpoint if rest == 0 and (checkpoint / "meta.json").is_file() else None


ARMS = {"llm": "LLM (the example)", "symbolic-ppo": "symbolic PPO", "drrn": "DRRN", "npae": "NPAE",
        "gigpo": "LLM, GiGPO (no critic)", "glam-structure": "LLM, GLAM's structure",
        "no-floor": "LLM, no advantage floor", "own-critic": "LLM, a critic of its own",
        "critic-time": "LLM, a critic that reads the time",
        "sil": "LLM, self-imitation", "hindsight": "LLM, self-imitation with hindsight"}
RANDOM_GOTO_LOCAL = 0.30  # GLAM's random agent on GoToLocal (and groundrl's random baseline's training success)


def plot_curves(keep: Path, seeds: list[int], out: Path, min_episodes: int = 20) -> Path:
    """GoToLocal: the success of the last ``WINDOW`` training episodes (what "reached 0.6" reads)
    against decisions; per agent its seeds' mean and a band from the lowest to the highest seed, at
    each point over the seeds that got there (a run still going ends early). A point needs
    ``min_episodes`` episodes in its window: the first updates end too few to say anything."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    figure, ax = plt.subplots(figsize=(8, 4.2), constrained_layout=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    grid = np.linspace(0, budget(), 257)
    for k, (arm, label) in enumerate(ARMS.items()):
        curves = []
        for seed in seeds:
            run = run_folder(keep / arm / f"seed{seed}" / "train", "train")
            points = [(d, rate) for d, _, total, rate in windowed_success(run) if total >= min_episodes] if run else []
            if len(points) > 1:
                x, y = map(np.asarray, zip(*points))
                curves.append(np.where((grid >= x[0]) & (grid <= x[-1]), np.interp(grid, x, y), np.nan))
        if not curves:
            continue
        values = np.stack(curves)
        seen = ~np.isnan(values).all(0)
        mean = np.full_like(grid, np.nan)
        mean[seen] = np.nanmean(values[:, seen], 0)
        color = colors[k % len(colors)]
        ax.plot(grid, mean, color=color, linewidth=1.8, label=f"{label} ({len(curves)} seed{'s' * (len(curves) > 1)})")
        if len(curves) > 1:
            low, high = np.full_like(grid, np.nan), np.full_like(grid, np.nan)
            low[seen], high[seen] = np.nanmin(values[:, seen], 0), np.nanmax(values[:, seen], 0)
            ax.fill_between(grid, low, high, color=color, alpha=0.18, linewidth=0)
    ax.axhline(RANDOM_GOTO_LOCAL, color="grey", linewidth=0.9, linestyle="--", label=f"random ({RANDOM_GOTO_LOCAL})")
    ax.axhline(TARGET, color="grey", linewidth=0.8, linestyle=":", label=f"{TARGET} (\"reached\")")
    ax.set(xlabel="training decisions", ylabel=f"success, last {WINDOW} training episodes", ylim=(-0.02, 1.02),
           title="BabyAI-Text GoToLocal, the embedded SmolLM2-135M; bands: lowest to highest seed")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)
    plt.close(figure)
    return out


def _success(row: dict | None, episodes: int | None) -> str:
    """An evaluation's success rate, with its number of episodes where that is not the table's."""
    text = success_cell(row)
    if row and episodes is not None and row.get("episodes") not in (None, episodes):
        text += f" ({row['episodes']:,} ep.)"
    return text


def _training_cells(folder: Path, run: Path | None = None, until: int | None = None,
                    episodes: int | None = None) -> tuple[str, str, str, str]:
    """(decisions trained, reached TARGET at, evaluation success, training wall seconds) of the
    arm's run in ``folder`` (or of ``run``, evaluated in ``folder``; ``episodes``: the table's
    count), over its first ``until`` decisions (None: all)."""
    from groundrl.runs import read_jsonl

    run = run or run_folder(folder / "train", "train")
    if run is None or not (run / "metrics.jsonl").is_file():
        return "-", "-", "-", "-"
    rows = [row for row in read_jsonl(run / "metrics.jsonl") if until is None or row["decisions"] <= until]
    when = reached(run, target=TARGET)
    if when is not None and until is not None and when[0] > until:
        when = None
    return (f"{rows[-1]['decisions']:,}" if rows else "-", f"{when[0]:,}" if when else "-",
            _success(eval_result(folder / "eval"), episodes), f"{rows[-1]['wall_seconds']:,.0f}" if rows else "-")


def print_tables(keep: Path, seeds: list[int], episodes: int, structure_episodes: int = STRUCTURE_EPISODES) -> None:
    from rich.console import Console
    from rich.table import Table

    from groundrl.eval.suites import get_suite

    console = Console(width=220)
    per_seed = f"per seed {', '.join(map(str, seeds))}"

    table = Table(title=f"GoToLocal: {episodes} sampled evaluation episodes at the budget ({budget():,} decisions), "
                        f"decisions to {TARGET} in training ({per_seed})")
    for column in ("agent", "decisions", "success", f"reached {TARGET} at", "GLAM"):
        table.add_column(column, justify="left" if column == "agent" else "right")
    names = {"llm": "LLM (examples/glam/goto_local.yaml)", "npae": "npae (the example's settings)",
             **{variant: f"LLM, the example with {variant} (stage variants)" for variant in VARIANTS},
             "no-floor": "LLM, the example without its advantage floor (stage variants)"}
    rows = [(names.get(arm, arm), keep / arm, PAPER_GOTO_LOCAL if arm == "llm" else "") for arm in ARMS]
    # NPAE as it was trained before the example took its floor: beside the no-floor variant, like for like
    before = keep / "before-floor" / "npae"
    if any(run_folder(before / f"seed{seed}" / "train", "train") for seed in seeds):
        rows.append(("npae before the floor (the no-floor variant's settings; before-floor/)", before, ""))
    for name, arm_folder, paper in rows:
        cells = [_training_cells(arm_folder / f"seed{seed}", episodes=episodes) for seed in seeds]
        table.add_row(name, *(seeds_cell([c[i] for c in cells]) for i in (0, 2, 1)), paper)
    console.print(table)

    table = Table(title=f"Structure on GoToLocal (the example without its advantage floor), seed {seeds[0]}, "
                        f"{STRUCTURE_DECISIONS:,} decisions each "
                        f"(evaluation: {structure_episodes} sampled episodes)")
    for column in ("structure", "success", f"reached {TARGET} at", "training wall (s)"):
        table.add_column(column, justify="left" if column == "structure" else "right")
    for name, overrides in STRUCTURES.items():
        folder = keep / "structure" / name / f"seed{seeds[0]}"
        example = run_folder(keep / "no-floor" / f"seed{seeds[0]}" / "train", "train") if overrides is None else None
        _, at, success, wall = _training_cells(folder, example, until=STRUCTURE_DECISIONS, episodes=structure_episodes)
        table.add_row(name, success, at, wall)
    console.print(table)

    table = Table(title=f"Generalization of the GoToLocal agents (--suite glam-gotolocal, {episodes} episodes a test, "
                        f"{per_seed}); GLAM's figures are for its MixedTrainLocal agent")
    agents = {"llm": "LLM agent (the example)", "no-floor": "LLM, without its floor"}
    for column in ("test", "random", "bot", *agents.values(), "GLAM"):
        table.add_column(column, justify="left" if column == "test" else "right")
    bounds = {b: suite_rows(keep / "generalization-bounds" / b) for b in ("random", "bot")}
    trained = {arm: [suite_rows(keep / arm / f"seed{s}" / "generalization") for s in seeds] for arm in agents}
    for test in get_suite("glam-gotolocal").tests:
        table.add_row(test.name, _success(bounds["random"].get(test.name), episodes),
                      _success(bounds["bot"].get(test.name), episodes),
                      *(seeds_cell([_success(rows.get(test.name), episodes) for rows in trained[arm]])
                        for arm in agents),
                      PAPER_GENERALIZATION.get(test.name, ""))
    console.print(table)

    mixed = Path("mixed") / f"seed{seeds[0]}"
    folder, before_floor = keep / mixed, ""
    if run_folder(folder / "train", "train") is None and run_folder(keep / "before-floor" / mixed / "train", "train"):
        folder, before_floor = keep / "before-floor" / mixed, " before its advantage floor"
    decisions, at, success, _ = _training_cells(folder, episodes=episodes)
    bounds = {b: suite_rows(keep / "generalization-bounds" / f"{b}{BOUNDS['glam']}") for b in ("random", "bot")}
    trained = suite_rows(folder / "generalization")
    table = Table(title=f"MixedTrainLocal, seed {seeds[0]}: the example's settings{before_floor}, "
                        f"{decisions} of {MIXED_DECISIONS:,} decisions, reached {TARGET} at {at}; --suite glam, "
                        f"{episodes} episodes a test (GLAM: ~0.8 by 250k frames)")
    for column in ("test", "random", "bot", "LLM agent", "GLAM"):
        table.add_column(column, justify="left" if column == "test" else "right")
    table.add_row("its evaluation (MixedTrainLocal)", "", "", success, "")
    for test in get_suite("glam").tests:
        table.add_row(test.name, *(_success(bounds[b].get(test.name), episodes) for b in ("random", "bot")),
                      _success(trained.get(test.name), episodes), PAPER_GENERALIZATION.get(test.name, ""))
    console.print(table)


if __name__ == "__main__":
    sys.exit(main())
