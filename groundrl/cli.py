"""The ``groundrl`` command line.

    groundrl models                      what models are available, and where they are cached
    groundrl envs                        the registered environments
    groundrl eval --env ID [--model M]   play N episodes with an LLM policy, write a run folder
    groundrl eval --test NAME            ... on one of GLAM's generalization tests (e.g. invented-words)
    groundrl train [KEY=VALUE ...]       ground the model with PPO (--preset twosome|glam, --config F, --resume RUN)
    groundrl eval RUN [--env ID]         evaluate a trained agent (a run folder or a checkpoint)
    groundrl bench NAME [ARGS]           run benchmarks/NAME.py (from a source checkout)

Errors caused by the input (a missing model, an unknown environment, a bad value) print one line
and exit with code 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import logging
import runpy
import warnings
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from groundrl.envs.babyai_text import GENERALIZATION_TESTS
from groundrl.errors import GroundrlError
from groundrl.llm.scoring import NORMALIZATIONS

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Ground a pretrained language model in text environments with online RL.",
)
console = Console(soft_wrap=True)


Normalization = Enum("Normalization", {name: name for name in NORMALIZATIONS}, type=str)
GeneralizationTestName = Enum("GeneralizationTestName", {name: name for name in GENERALIZATION_TESTS}, type=str)


@app.callback()
def _options(debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False) -> None:
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, format="%(message)s")
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
    from groundrl.llm import cache_dir, list_models

    table = Table(title=f"Models (cache: {cache_dir()})")
    for column in ("name", "status", "where"):
        table.add_column(column)
    for row in list_models():
        table.add_row(row["name"], row["status"], row["where"])
    console.print(table)


@app.command()
def envs() -> None:
    """List the registered environments."""
    from groundrl.envs import describe_env, list_envs

    width = max(map(len, list_envs()))
    for env_id in list_envs():
        console.print(f"{env_id:<{width}}  {describe_env(env_id)}".rstrip(), highlight=False)


@app.command(context_settings={"help_option_names": ["-h", "--help"]})
def train(
    overrides: Annotated[Optional[list[str]], typer.Argument(
        help="KEY=VALUE settings on top of the preset and files, e.g. ppo.policy_lr=1e-4 agent.critic=shared.")] = None,
    preset: Annotated[str, typer.Option(help="Starting point: twosome, twosome-overcooked or glam.")] = "twosome",
    config: Annotated[Optional[list[Path]], typer.Option(help="YAML file(s) of settings (repeatable).")] = None,
    env: Annotated[Optional[str], typer.Option(help="Environment id (same as env=ID).")] = None,
    model: Annotated[Optional[str], typer.Option(help="Model (same as model=M); default: the embedded model.")] = None,
    resume: Annotated[Optional[Path], typer.Option(help="Continue a run from its latest checkpoint (a run "
                                                        "folder) or from a checkpoint folder.")] = None,
) -> None:
    """Ground an LLM in an environment with online PPO; writes a run folder (config, metrics,
    TensorBoard, checkpoints). Ctrl-C saves a checkpoint; --resume continues."""
    from groundrl.envs import make_env
    from groundrl.train.config import load_config
    from groundrl.train.trainer import Trainer, resume as resume_run
    from groundrl.runs import new_run_dir

    settings = list(overrides or []) + ([f"env={env}"] if env else []) + ([f"model={model}"] if model else [])
    if resume is not None:
        trainer = resume_run(resume, settings)
        console.print(f"resuming {trainer.run_dir} at update {trainer.state.update} ({trainer.state.decisions} decisions)")
    else:
        train_config = load_config(preset, files=config or [], overrides=settings)
        make_env(train_config.env, prompt=train_config.prompt, window=train_config.prompt_window,
                 **train_config.env_kwargs).close()  # bad input fails before the model loads
        run_dir = new_run_dir(train_config.runs_dir, "train", train_config.env)
        console.print(f"run folder: {run_dir}\nloading model {train_config.model or 'default'} ...")
        trainer = Trainer(train_config, run_dir)
        console.print(f"{trainer.agent.llm}; {trainer.num_updates} updates of "
                      f"{train_config.ppo.num_envs * train_config.ppo.num_steps} decisions")
    try:
        history = trainer.train()
    except KeyboardInterrupt:
        sys.exit(130)
    last = history[-1] if history else {}
    summary = ", ".join(f"{key} {last[key]:.3f}" for key in ("success_rate", "episode_return") if key in last)
    console.print(f"done: {trainer.state.decisions} decisions in {trainer.state.wall_seconds:.0f} s; last update: "
                  f"{summary or 'no finished episode'}")
    console.print(f"run folder: {trainer.run_dir}  (config.yaml, metrics.jsonl, tensorboard/, checkpoints/)")


@app.command("eval")
def eval_command(
    agent: Annotated[Optional[Path], typer.Argument(
        help="A training run folder or checkpoint to evaluate; without it, the zero-shot --model.")] = None,
    env: Annotated[Optional[str], typer.Option(help="Environment id, e.g. groundrl/FollowInstruction-v0.")] = None,
    test: Annotated[Optional[GeneralizationTestName], typer.Option(
        help="One of GLAM's generalization tests (its environment, unless --env names another, with its "
             "rewritten words or actions).")] = None,
    model: Annotated[Optional[str], typer.Option(help="Model name, folder, .gguf file or hub id.")] = None,
    episodes: Annotated[int, typer.Option(min=1, help="Number of episodes.")] = 100,
    num_envs: Annotated[int, typer.Option(min=1, help="Environments played in parallel.")] = 8,
    normalization: Annotated[Optional[Normalization], typer.Option(
        help="Action score normalization (zero-shot; default word).")] = None,
    greedy: Annotated[bool, typer.Option(help="Take the most probable action instead of sampling.")] = False,
    seed: Annotated[int, typer.Option(help="Episode k is reset with seed + k.")] = 1_000_000,
    dtype: Annotated[Optional[str], typer.Option(help="float32, bfloat16, float16 or auto (default: float32, "
                                                     "or the trained agent's).")] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or auto.")] = "auto",
    runs_dir: Annotated[Path, typer.Option(help="Where run folders are created.")] = Path("runs"),
) -> None:
    """Evaluate a trained agent or a zero-shot LLM policy: success rate with a 95% confidence interval."""
    from groundrl.agents import LLMPolicy
    from groundrl.envs import make_env
    from groundrl.eval import evaluate
    from groundrl.llm import load_llm
    from groundrl.runs import new_run_dir, save_config

    from groundrl.llm.loading import resolve_device, resolve_dtype

    env_kwargs = {}
    if test is not None:
        env_kwargs = GENERALIZATION_TESTS[test.value].make_env_kwargs()
        env = env or GENERALIZATION_TESTS[test.value].env_id
    trained = None
    if agent is not None:
        from groundrl.train.checkpoint import find
        from groundrl.train.config import load_run_config

        checkpoint = find(agent)
        trained = load_run_config(checkpoint.parent.parent)
        env = env or trained.env
        env_kwargs = {"prompt": trained.prompt, "window": trained.prompt_window, **trained.env_kwargs, **env_kwargs}
        if model is not None or normalization is not None:
            raise GroundrlError("a trained agent keeps its own model and normalization: drop --model/--normalization")
    if env is None:
        raise GroundrlError("say which environment to play: --env ID or --test NAME (see `groundrl envs`)")
    make_env(env, **env_kwargs).close()  # bad input fails before the model loads
    dtype = dtype or (trained.dtype if trained is not None else "float32")
    resolve_dtype(dtype, resolve_device(device))
    if trained is not None:
        from groundrl.train.checkpoint import load_agent

        console.print(f"loading agent {checkpoint} ...")
        policy, _, _ = load_agent(checkpoint, device=device, dtype=dtype)
        llm, normalization = policy.llm, Normalization[trained.agent.normalization]
    else:
        normalization = normalization or Normalization["word"]
        console.print(f"loading model {model or 'default'} ...")
        llm = load_llm(model, dtype=dtype, device=device)
        policy = LLMPolicy(llm, normalization=normalization.value)
    console.print(f"{llm}")
    run_dir = new_run_dir(runs_dir, "eval", env)
    settings = {
        "job": "eval",
        "env": env,
        "agent": str(checkpoint) if trained is not None else None,
        "test": test.value if test else None,
        "env_kwargs": env_kwargs,
        "model": llm.name,
        "model_source": llm.source,
        "episodes": episodes,
        "num_envs": num_envs,
        "normalization": normalization.value,
        "greedy": greedy,
        "seed": seed,
        "dtype": str(llm.dtype).removeprefix("torch."),
        "device": str(llm.device),
    }
    save_config(run_dir, settings)
    result = evaluate(policy, env, episodes=episodes, num_envs=num_envs, seed=seed, greedy=greedy, run_dir=run_dir,
                      env_kwargs=env_kwargs)

    table = Table(title=f"{env}{f' ({test.value})' if test else ''}: {llm.name}, {normalization.value} normalization, {'greedy' if greedy else 'sampled'}")
    for column in ("episodes", "success rate", "95% CI", "mean return", "mean length"):
        table.add_column(column, justify="right")
    table.add_row(
        str(result.episodes),
        f"{result.success_rate:.3f}",
        f"[{result.ci_low:.3f}, {result.ci_high:.3f}]",
        f"{result.mean_return:.3f}",
        f"{result.mean_length:.2f}",
    )
    console.print(table)
    console.print(f"run folder: {run_dir}  (results.json, trajectories.jsonl, tensorboard/)")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def bench(ctx: typer.Context, name: Annotated[str, typer.Argument(help="Benchmark name, e.g. scoring.")]) -> None:
    """Run a benchmark script from benchmarks/ (in a source checkout) and print its table."""
    folder = Path(__file__).resolve().parent.parent / "benchmarks"
    script = folder / f"{name}.py"
    if not script.is_file():
        available = sorted(p.stem for p in folder.glob("*.py")) if folder.is_dir() else []
        hint = f"available: {', '.join(available)}" if available else "benchmarks live in a source checkout of groundrl"
        raise GroundrlError(f"no benchmark '{name}'; {hint}")
    sys.argv = [str(script), *ctx.args]
    runpy.run_path(str(script), run_name="__main__")


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``groundrl`` console script."""
    args = sys.argv[1:] if argv is None else argv
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
