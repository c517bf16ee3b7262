"""The ``groundrl`` command line.

    groundrl models                      what models are available, and where they are cached
    groundrl envs                        the registered environments
    groundrl config [KEY]                every setting of a run, its value in a --preset and what it does; KEY in full
    groundrl train [KEY=VALUE ...]       ground the model (--preset twosome|glam|grpo|gigpo|symbolic-ppo|drrn|npae,
                                         --config F, --resume RUN, --nproc N: N processes through torchrun)
    groundrl eval [AGENT] --suite NAME   evaluate random, bot, gold, zero-shot (default) or a trained RUN on a suite,
                                         a --test or an --env; --resume RUN continues an evaluation
    groundrl plot RUN [RUN ...]          learning curves of training runs as PNG (seeds of one experiment: mean
                                         and band; --smooth W, --metric M, --out FILE)
    groundrl replay PATH [--episode K]   an episode as a self-contained HTML page (and a GIF of its frames)
    groundrl export RUN --out DIR        the trained agent as a Hugging Face folder (PEFT adapter or --merge,
                                         critic head, settings, model card); eval and train --init take it
    groundrl bench [NAME [ARGS]]         run benchmarks/NAME.py (from a source checkout); no NAME: the list

Errors caused by the input (a missing model, an unknown environment, a bad value) print one line
and exit with code 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from groundrl.envs import describe_env, list_envs
from groundrl.envs.babyai_text import GENERALIZATION_TESTS
from groundrl.errors import GroundrlError
from groundrl.eval.plan import (
    PROMPT_CHOICES,
    EvalConfig,
    Evaluation,
    plan_evaluation,
    resume_evaluation,
    run_evaluation,
)
from groundrl.eval.plots import curve_tables, draw_learning_curves, plot_runs
from groundrl.eval.replay import write_replay
from groundrl.llm import cache_dir, list_models
from groundrl.llm.scoring import Normalization
from groundrl.train import checkpoint as checkpoints
from groundrl.train import export as exports
from groundrl.train.config import key_values, reference
from groundrl.train.session import plan_training, start_training, summary, torchrun_command

app = typer.Typer(
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # every command, as `train -h` always was
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Ground a pretrained language model in text environments with online RL.",
)
console = Console(soft_wrap=True)


GeneralizationTestName = Enum("GeneralizationTestName", {name: name for name in GENERALIZATION_TESTS}, type=str)
PromptChoice = Enum("PromptChoice", {choice: choice for choice in PROMPT_CHOICES}, type=str)


@app.callback()
def _options(debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False) -> None:
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, format="%(message)s")
    # a warning is one line that says what happened, not where in groundrl's code it was raised
    warnings.formatwarning = lambda message, category, *args, **kwargs: f"warning: {message}\n"
    if not debug:
        import transformers

        # groundrl says what it does (e.g. the one-time GGUF conversion); transformers' own
        # warnings and per-load progress bars would bury that.
        transformers.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
        # peft calls transformers' deprecated names; the warnings are for library authors, not users
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"(transformers|peft)\b.*")


@app.command()
def models() -> None:
    """List the models that load without a network, and where they are cached."""
    table = Table(title=f"Models (cache: {cache_dir()})")
    for column in ("name", "status", "where"):
        table.add_column(column)
    for row in list_models():
        table.add_row(row["name"], row["status"], row["where"])
    console.print(table)


@app.command()
def envs() -> None:
    """List the registered environments."""
    width = max(map(len, list_envs()))
    for env_id in list_envs():
        console.print(f"{env_id:<{width}}  {describe_env(env_id)}".rstrip(), highlight=False)


@app.command("config")
def config_command(
    key: Annotated[str | None, typer.Argument(help="A setting (ppo.policy_lr) or a section (ppo): its type, "
                                                   "default, documentation and the presets that change it.")] = None,
    preset: Annotated[str, typer.Option(help="The preset whose values the list shows.")] = "default",
) -> None:
    """Every setting of a training run (what `groundrl train KEY=VALUE` and --config files set), or one in full."""
    console.print(reference.describe(key) if key else reference.listing(preset), highlight=False, markup=False,
                  soft_wrap=True)


@app.command()
def train(
    overrides: Annotated[list[str] | None, typer.Argument(
        help="KEY=VALUE settings on top of the preset and files, e.g. ppo.policy_lr=1e-4 "
             "agent.llm.critic=shared; `groundrl config` lists every KEY, `groundrl config KEY` shows one.")] = None,
    preset: Annotated[str, typer.Option(help="Starting point: default (what makes a small model learn), the papers' "
                                             "twosome, twosome-overcooked, glam; the critic-free grpo, gigpo; or a "
                                             "baseline: symbolic-ppo, drrn, npae.")] = "default",
    config: Annotated[list[Path] | None, typer.Option(help="YAML file(s) of settings (repeatable).")] = None,
    env: Annotated[str | None, typer.Option(help="Environment id (same as env=ID).")] = None,
    model: Annotated[str | None, typer.Option(help="Model (same as model=M); default: the embedded model.")] = None,
    resume: Annotated[Path | None, typer.Option(help="Continue a run from its latest checkpoint (a run "
                                                        "folder) or from a checkpoint folder.")] = None,
    init: Annotated[Path | None, typer.Option(help="Start a new run from the weights of an export (`groundrl "
                                                      "export`), with its settings under yours.")] = None,
    nproc: Annotated[int | None, typer.Option(
        min=1, help="Train with N processes on this machine: runs `torchrun --standalone --nproc-per-node N -m "
                    "groundrl train ...` (several machines: call torchrun yourself, see docs/distributed.md).")] = None,
) -> None:
    """Ground an LLM in an environment with online RL (PPO; GRPO, GiGPO); writes a run folder (config,
    metrics, TensorBoard, checkpoints). Ctrl-C saves a checkpoint (in one process); --resume continues.
    Under torchrun, each process plays its share of the environments and gradients are averaged over
    the processes. Every setting: `groundrl config` (docs/settings.md)."""
    plan = plan_training(overrides or [], preset=preset, files=config or [], env=env, model=model, resume=resume,
                         init=init, nproc=nproc)
    if plan.nproc is not None:
        _exec(torchrun_command(plan.nproc, _invocation_args))  # the settings were checked above, in one process
    with start_training(plan, say=console.print) as trainer:
        try:
            trainer.train()
        except KeyboardInterrupt:  # the trainer said where it stopped; click would print "Aborted!", exit 1
            sys.exit(130)
    if trainer.world.is_main:  # rank 0 speaks for the run
        if trainer.finished:
            draw_learning_curves(trainer.run_dir)
        for line in summary(trainer):
            console.print(line)


def _exec(command: list[str]) -> None:
    """Replace this process by ``command`` (torchrun re-running this command line in several
    processes): the command line is the CLI's, so this is too."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)


@app.command("eval")
def eval_command(
    agent: Annotated[str | None, typer.Argument(
        help="random, bot, gold, zero-shot (the default: the untrained --model), or a training run folder or "
             "checkpoint.")] = None,
    suite: Annotated[str | None, typer.Option(
        help="A named suite (glam, twosome, twosome-unseen, overview, babyai, virtualhome, overcooked, textworld, "
             "scienceworld) or an environment id.")] = None,
    env: Annotated[str | None, typer.Option(help="One environment, e.g. groundrl/FollowInstruction-v0.")] = None,
    test: Annotated[GeneralizationTestName | None, typer.Option(
        help="One of GLAM's generalization tests (its environment, unless --env names another).")] = None,
    model: Annotated[str | None, typer.Option(help="Model name, folder, .gguf file or hub id (zero-shot).")] = None,
    episodes: Annotated[int | None, typer.Option(
        help="Episodes per test, 1 or more (default: the suite's, 1000 for GLAM's tests and 100 for "
             "TWOSOME's).")] = None,
    num_envs: Annotated[int, typer.Option(help="Environments played in parallel (1 or more).")] = 8,
    normalization: Annotated[Normalization | None, typer.Option(
        help="Action score normalization (zero-shot; default word).")] = None,
    prompt: Annotated[PromptChoice | None, typer.Option(
        help="What the environments show (random, zero-shot): auto (their own; the default), glam, actions (the "
             "valid actions listed first, as groundrl's training does) or none. A trained agent keeps its "
             "run's.")] = None,
    greedy: Annotated[bool, typer.Option(help="Take the most probable action instead of sampling.")] = False,
    seed: Annotated[int, typer.Option(
        help="Episode k is reset with seed + k, from 0 to 2**63 - 1 (training uses seeds below it).")] = 1_000_000,
    dtype: Annotated[str | None, typer.Option(help="float32, bfloat16, float16 or auto (default: float32, "
                                                     "or the trained agent's).")] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or auto.")] = "auto",
    precision: Annotated[str | None, typer.Option(
        help="fp32, bf16-mixed (bf16 matmuls; fast with native bf16 only) or auto (default: fp32, or the "
             "trained run's).")] = None,
    env_option: Annotated[list[str] | None, typer.Option(
        help="KEY=VALUE: an option of the environments played (repeatable; YAML values, dotted keys nest: "
             "params.numLocations=5). It overrides a trained agent's env_kwargs; a suite's test keeps its "
             "own.")] = None,
    runs_dir: Annotated[Path, typer.Option(help="Where run folders are created.")] = Path("runs"),
    resume: Annotated[Path | None, typer.Option(
        help="Continue an interrupted evaluation in its run folder (its own settings; the episodes already "
             "played are kept).")] = None,
) -> None:
    """Evaluate an agent on a suite, a test or an environment: success rate with a 95% confidence
    interval, mean return and length per test; results.csv/json and trajectories in a run folder."""
    # Everything the user gave is checked before the model loads, and the run folder is created only
    # after that and the loading: a mistake costs no wait and leaves no folder behind.
    if resume is not None:
        plan = resume_evaluation(resume)  # with its own settings: the options above are not read
    else:
        plan = plan_evaluation(EvalConfig(
            agent=agent or "zero-shot", suite=suite, env=env, test=test and test.value, model=model,
            normalization=normalization and normalization.value, prompt=prompt and prompt.value, episodes=episodes,
            num_envs=num_envs, greedy=greedy, seed=seed, dtype=dtype, device=device, precision=precision,
            env_options=key_values(env_option or [], "max_steps=50")), runs_dir)
    _print_results(run_evaluation(plan, say=console.print))


def _print_results(evaluation: Evaluation) -> None:
    """An evaluation's table (a row per test), why a test was not played, and where the files are."""
    about, results = evaluation.about, evaluation.results
    described = about.get("model") and f"{about['agent']}: {about['model']}, {about.get('normalization')} normalization"
    table = Table(title=f"{evaluation.plan.suite.name}: {described or about['agent']}, "
                        f"{'greedy' if evaluation.plan.config.greedy else 'sampled'}")
    for column in ("test", "episodes", "success rate", "95% CI", "mean return", "mean length"):
        table.add_column(column, justify="left" if column == "test" else "right")
    for r in results:
        if r.result is None:
            table.add_row(r.test.name, "-", "n/a", "", "", "")
            continue
        x = r.result
        table.add_row(r.test.name, str(x.episodes), f"{x.success_rate:.3f}", f"[{x.ci_low:.3f}, {x.ci_high:.3f}]",
                      f"{x.mean_return:.3f}", f"{x.mean_length:.2f}")
    console.print(table)
    for r in results:
        if r.result is None:
            console.print(f"{r.test.name}: n/a, {r.skipped}", highlight=False)
    console.print(f"run folder: {evaluation.run_dir}  (results.csv, results.json; per test: episodes.jsonl, "
                  "trajectories.jsonl, machine.jsonl, tensorboard/)")


@app.command()
def plot(
    runs: Annotated[list[Path], typer.Argument(help="Training run folders (runs of one experiment with other "
                                                    "seeds are averaged).")],
    out: Annotated[Path | None, typer.Option(
        help="The image file to write, under this very name: PNG, or the format its suffix names (.pdf, .svg, ...); "
             "not a folder (default: RUN/learning_curves.png for one run, ./learning_curves.png for several).")] = None,
    smooth: Annotated[float, typer.Option(min=0.0, max=0.99, help="Exponential smoothing weight, as "
                                                                  "TensorBoard's (0: none).")] = 0.0,
    metric: Annotated[list[str] | None, typer.Option(
        help="A metric of metrics.jsonl to plot (repeatable; default: success_rate, episode_return, entropy, "
             "approx_kl, value_loss, q_loss, those logged).")] = None,
    table: Annotated[int | None, typer.Option(
        min=1, help="Also print the curves as tables, a row per this many decisions (e.g. 1024): a success rate "
                    "over the episodes finished there (their count beside it), other metrics averaged; seeds' "
                    "mean, then each seed.")] = None,
) -> None:
    """Plot learning curves (vs decisions and vs wall time) of one or several training runs."""
    out = out or (runs[0] / "learning_curves.png" if len(runs) == 1 else Path("learning_curves.png"))
    if table is not None:  # first: a run that cannot be read is refused before anything is written
        for title, columns, rows in curve_tables(runs, table, metrics=metric):
            text = Table(title=title)
            for column in columns:
                text.add_column(column, justify="left" if column == "decisions" else "right")
            for row in rows:
                text.add_row(*row)
            console.print(text)
    console.print(f"wrote {plot_runs(runs, out, smoothing=smooth, metrics=metric)}")


@app.command()
def replay(
    path: Annotated[Path, typer.Argument(help="A trajectories.jsonl, or an evaluation or training run folder.")],
    episode: Annotated[int | None, typer.Option(help="The episode number (default: the first recorded).")] = None,
    out: Annotated[Path | None, typer.Option(
        help="The HTML file to write, under this very name (the GIF goes beside it as .gif); not a folder (default: "
             "replay-episode-K.html beside the trajectories).")] = None,
    gif: Annotated[bool, typer.Option(help="Also write an animated GIF of the frames (environments that "
                                           "draw).")] = True,
) -> None:
    """Step through an episode in a browser: the prompt, every valid action's probability, the
    action taken, the reward, and the frame (BabyAI-Text, Overcooked). The page opens offline."""
    for kind, written in write_replay(path, out, episode=episode, gif=gif).items():
        console.print(f"wrote {written}" + ("  (open it in a browser)" if kind == "html" else ""))


@app.command()
def export(
    path: Annotated[Path, typer.Argument(help="A training run folder (its latest checkpoint) or a checkpoint.")],
    out: Annotated[Path, typer.Option(help="The new folder to write (absent or empty).")],
    merge: Annotated[bool, typer.Option(help="Merge the LoRA adapter into the base weights: a whole model that "
                                             "AutoModelForCausalLM.from_pretrained loads.")] = False,
    evaluation: Annotated[list[Path] | None, typer.Option(
        help="An evaluation run folder of this agent whose results go into the model card (repeatable; default: "
             "every one found in the run's runs folder).")] = None,
) -> None:
    """Export a trained LLM agent as a Hugging Face folder: the LoRA adapter in PEFT's format (or, with
    --merge, the merged model), the tokenizer, the critic head (safetensors), the run's settings and a
    model card. `groundrl eval DIR` and `groundrl train --init DIR` take it."""
    console.print(f"exporting {checkpoints.find(path)} ...")
    folder = exports.export(path, out, merge=merge, evaluations=evaluation)
    files = sorted(p.name for p in folder.iterdir())
    console.print(f"export: {folder}  ({', '.join(files)})", highlight=False)


# everything after NAME goes on to the script, -h and --help too (its own help); before NAME they are bench's
@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                               "allow_interspersed_args": False})
def bench(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="Benchmark name, e.g. scoring (none: list them).")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the benchmarks by group (as no NAME does).")] = False,
) -> None:
    """Run a benchmark script of benchmarks/ (in a source checkout) with its ARGS, as python
    benchmarks/NAME.py ARGS does; without NAME, list them by group with what each measures."""
    import re

    folder = Path(__file__).resolve().parent.parent / "benchmarks"
    if not folder.is_dir():
        raise GroundrlError("the benchmarks live in a source checkout of groundrl (its benchmarks/ folder)")
    if name is None or list_:
        raise typer.Exit(_run_script(folder / "benchkit" / "index.py", []))
    available = sorted(p.stem for p in folder.glob("*.py") if p.is_file() and re.fullmatch(r"[A-Za-z0-9_]+", p.stem))
    # a bare name of a script in the folder, never a path: "../x" would run any Python file
    if name not in available:
        raise GroundrlError(f"no benchmark '{name}'; `groundrl bench` lists them")
    raise typer.Exit(_run_script(folder / f"{name}.py", ctx.args))


def _run_script(script: Path, args: list[str]) -> int:
    """``python SCRIPT ARGS`` in a process of its own, as a user runs it (its folder is importable:
    the scripts share benchmarks/benchkit); its exit code. A Ctrl-C at the terminal reaches the
    script too (one process group) and it stops its own way; a SIGINT sent to groundrl alone is
    handed on to it."""
    import signal
    import subprocess

    process = subprocess.Popen([sys.executable, str(script), *args])
    while True:
        try:
            code = process.wait()
            break
        except KeyboardInterrupt:
            if not _terminal_interrupts_the_group():
                process.send_signal(signal.SIGINT)
    return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell says it


def _terminal_interrupts_the_group() -> bool:
    """Whether a Ctrl-C reaches the scripts groundrl started as well as groundrl: this process is in
    its terminal's foreground process group (or on Windows, where every process of the console gets it)."""
    if not hasattr(os, "getpgrp"):
        return True
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (AttributeError, OSError, ValueError):  # no terminal (or no stdin): the signal came to groundrl alone
        return False


_invocation_args: list[str] = sys.argv[1:]  # what ``groundrl`` was called with (to hand on to torchrun)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``groundrl`` console script."""
    global _invocation_args
    args = sys.argv[1:] if argv is None else argv
    _invocation_args = list(args)
    try:
        app(args=args, prog_name="groundrl")
    except GroundrlError as error:
        if "--debug" in args:
            raise
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
