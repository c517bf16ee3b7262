"""Where a GLAM GoToLocal update and an evaluation spend their time, by phase.

Builds the trainer of ``--config`` (default: the GoToLocal example, ``examples/glam/goto_local.yaml``),
plays ``--warmup`` updates (caches fill), then times ``--updates`` updates and ``--episodes`` evaluation
episodes of the same agent (``groundrl eval``'s code, ``--num-envs`` at a time) with every phase's
functions wrapped in a timer. A phase's time is exclusive: the trunk's layers inside the scorer count
as the trunk, not as the scorer, and what no phase claims is "Python between them" (the collector,
padding, losses, bookkeeping). Phases:

- environment and text: the environments' ``reset`` and ``step`` and the agent's prompt text;
- tokenization: the tokenizer's calls;
- frozen trunk: the lower layers of ``agent.llm.train_layers`` (each text once, then kept);
- trained layers: the layers above it, with the LM head (the policy's scores);
- whole model: a forward of the model not split by a trunk (``train_layers=all``, the shared prefix);
- critic: the critic's upper layers (the adapters off, a frozen copy, or its own: ``critic=own``) and its head;
- reference policy: the untrained policy's scores (the adapters off), for the KL penalty;
- backward, optimizer: ``Tensor.backward`` and the optimizers' steps.

    python benchmarks/profile_glam.py                            # the example: 1 update + 100 episodes
    python benchmarks/profile_glam.py --updates 2 --episodes 16 --markdown   # docs/training.md's table
    python benchmarks/profile_glam.py --episodes 0 --updates 2   # training only
    python benchmarks/profile_glam.py --model tiny-llama --updates 1 --episodes 8 rollout.num_steps=4
    groundrl bench profile_glam --markdown
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

GROUP = "speed"
ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "glam" / "goto_local.yaml"
OTHER = "Python between them"
PHASES = ("environment and text", "tokenization", "frozen trunk", "trained layers", "whole model", "critic",
          "reference policy", "backward", "optimizer", OTHER)


class PhaseClock:
    """Exclusive time per phase: a wrapped call charges the time since the last event to the phase
    running until then, so nested phases are not counted twice."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.stack = [OTHER]
        self.mark = time.perf_counter()

    def _switch(self, phase: str | None) -> None:
        now = time.perf_counter()
        self.seconds[self.stack[-1]] += now - self.mark
        self.mark = now
        if phase is None:
            self.stack.pop()
        else:
            self.stack.append(phase)
            self.calls[phase] += 1

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self._switch(name)
        try:
            yield
        finally:
            self._switch(None)

    def timed(self, function: Callable, phase: str | Callable[..., str]) -> Callable:
        """``function`` charging its time to ``phase`` (or to ``phase(*args, **kwargs)``)."""

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            with self.phase(phase(*args, **kwargs) if callable(phase) else phase):
                return function(*args, **kwargs)

        return wrapper

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()
        self.stack = [OTHER]
        self.mark = time.perf_counter()

    def totals(self) -> dict[str, float]:
        self._switch(OTHER)
        self._switch(None)
        return {name: self.seconds.get(name, 0.0) for name in PHASES}


@contextlib.contextmanager
def instrumented(clock: PhaseClock, agent, env) -> Iterator[None]:
    """Every phase's functions wrapped in ``clock`` while inside; restored after."""
    import torch
    import torch.optim.optimizer as optimizer_hooks

    from groundrl.agents.llm_agent import LLMAgent, LLMPolicy
    from groundrl.llm.trunk import Trunk

    patches: list[tuple[object, str, object]] = []  # (owner, name, its own attribute before, or None)

    def patch(owner, name: str, phase) -> None:
        if owner is None or not hasattr(owner, name):
            return
        patches.append((owner, name, vars(owner).get(name)))
        setattr(owner, name, clock.timed(getattr(owner, name), phase))

    # the environments: every class of the wrapper chain steps once per decision; the outermost is enough
    patch(type(env), "step", "environment and text")
    patch(type(env), "reset", "environment and text")
    for cls in (LLMPolicy, LLMAgent):
        for name in ("observe", "prompts"):
            if name in cls.__dict__:
                patch(cls, name, "environment and text")
    llm = agent.llm
    patch(type(llm.tokenizer), "__call__", "tokenization")
    patch(Trunk, "lower", "frozen trunk")
    # the critic and the reference policy (the adapters off) run the same upper layers: theirs, inside them
    def upper_phase(*_, **__) -> str:
        return clock.stack[-1] if clock.stack[-1] in ("critic", "reference policy", "whole model") \
            else "trained layers"

    patch(Trunk, "upper", upper_phase)
    causal = llm.model.get_base_model() if hasattr(llm.model, "get_base_model") else llm.model
    patch(type(causal), "forward", "whole model")
    lm_head = getattr(causal, "lm_head", None)
    if lm_head is not None:
        patch(lm_head, "forward", upper_phase)
    for name in ("critic_features", "frozen_values", "own_values"):
        patch(LLMAgent, name, "critic")
    patch(LLMAgent, "reference_logits", "reference policy")
    if getattr(agent, "value_head", None) is not None:
        patch(agent.value_head, "forward", "critic")
    patch(torch.Tensor, "backward", "backward")
    before = optimizer_hooks.register_optimizer_step_pre_hook(lambda *_: clock._switch("optimizer"))
    after = optimizer_hooks.register_optimizer_step_post_hook(lambda *_: clock._switch(None))
    try:
        yield
    finally:
        before.remove()
        after.remove()
        for owner, name, own in reversed(patches):
            if own is not None:
                setattr(owner, name, own)
            else:
                delattr(owner, name)  # inherited (or a class's method, on an instance): that shows again


def profile(config_path: Path, overrides: list[str], warmup: int, updates: int, episodes: int,
            num_envs: int) -> dict:
    """The phase seconds of ``updates`` training updates (after ``warmup``) and of ``episodes``
    evaluation episodes, with the decisions each played."""
    from groundrl.eval.evaluate import evaluate
    from groundrl.runs import new_run_dir
    from groundrl.train.config import load_config
    from groundrl.train.trainer import Trainer

    config = load_config(files=[config_path], overrides=["progress=false", "trajectories_every=0",
                                                      "checkpoint_every=100000", *overrides])
    result: dict = {"env": config.env, "threads": _threads()}
    with tempfile.TemporaryDirectory(prefix="groundrl-profile-") as runs_dir:
        trainer = Trainer(config, new_run_dir(runs_dir, "train", config.env))
        if warmup:
            trainer.train(updates=warmup)
        clock = PhaseClock()
        if updates:
            env = trainer.collector.slots[0].env
            with instrumented(clock, trainer.agent, env):
                clock.reset()
                started, played = time.perf_counter(), trainer.state.decisions
                history = trainer.train(updates=updates)[-updates:]  # train() returns every update's rows
                wall = time.perf_counter() - started
                result["train"] = {"phases": clock.totals(), "wall": wall,
                                   "decisions": trainer.state.decisions - played,
                                   "rollout": sum(h["rollout_seconds"] for h in history),
                    "update": sum(h["update_seconds"] for h in history)}
        if episodes:
            from groundrl.envs import make_env

            trainer.agent.eval()
            probe = make_env(config.env, **config.env_options)
            with instrumented(clock, trainer.agent, probe):
                clock.reset()
                started = time.perf_counter()
                outcome = evaluate(trainer.agent, config.env, episodes=episodes, num_envs=num_envs,
                                   env_kwargs=config.env_options, progress=False)
                wall = time.perf_counter() - started
                result["eval"] = {"phases": clock.totals(), "wall": wall, "episodes": episodes,
                                  "decisions": round(outcome.mean_length * episodes)}
    return result


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def print_tables(result: dict, markdown: bool) -> None:
    from benchkit.records import cpu_name

    print(f"CPU: {cpu_name()}, {result['threads']} thread(s); {result['env']}")
    columns = []
    if "train" in result:
        t = result["train"]
        columns.append((f"training ({t['decisions']} decisions: rollout {t['rollout']:.1f} s, update "
                        f"{t['update']:.1f} s)", t))
    if "eval" in result:
        e = result["eval"]
        columns.append((f"evaluation ({e['episodes']} episodes, {e['decisions']} decisions)", e))
    header = ["phase", *[f"{name}: s / share / ms a decision" for name, _ in columns]]
    rows = []
    for phase in PHASES:
        cells = []
        for _, part in columns:
            seconds = part["phases"][phase]
            per_decision = 1000 * seconds / max(part["decisions"], 1)
            cells.append(f"{seconds:.1f} / {seconds / part['wall']:.0%} / {per_decision:.0f}")
        rows.append([phase, *cells])
    rows.append(["total", *[f"{p['wall']:.1f} / 100% / {1000 * p['wall'] / max(p['decisions'], 1):.0f}"
                            for _, p in columns]])
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(str(r[k])) for r in [header, *rows]) for k in range(len(header))]
        for row in [header, *rows]:
            print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=EXAMPLE, help="a training config (default: the GoToLocal "
                        "example)")
    parser.add_argument("--warmup", type=int, default=1, help="updates before the timed ones (caches fill)")
    parser.add_argument("--updates", type=int, default=1, help="training updates timed (0: none)")
    parser.add_argument("--episodes", type=int, default=100, help="evaluation episodes timed (0: none)")
    parser.add_argument("--num-envs", type=int, default=8, help="evaluation environments at a time "
                        "(groundrl eval's --num-envs)")
    parser.add_argument("--model", default=None, help="another model than the config's (e.g. tiny-llama, to check "
                        "the script)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown (for the docs)")
    parser.add_argument("overrides", nargs="*", help="KEY=VALUE settings on top of the config")
    args = parser.parse_args(argv)
    if min(args.warmup, args.updates, args.episodes) < 0 or args.num_envs < 1:
        parser.error("--warmup, --updates and --episodes are 0 or more, --num-envs 1 or more")
    overrides = [*([f"model={args.model}"] if args.model else []), *args.overrides]
    from groundrl.errors import GroundrlError

    try:
        result = profile(args.config, overrides, args.warmup, args.updates, args.episodes, args.num_envs)
    except GroundrlError as error:  # a missing config, a bad setting: one line
        parser.error(str(error).strip().splitlines()[0])
    print_tables(result, args.markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
