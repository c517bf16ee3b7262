"""The Trainer's decisions per second and peak memory, per workload and speed setting.

One row per (workload, setting): decisions/s of the rollout, of the update and overall, peak memory,
and the speed-up over the same workload with every speed item off ("today").

Workloads: ``food`` (TWOSOME's Food Preparation: LoRA actor, critic on the frozen model, 4 envs x
32 steps), ``gotolocal-glam`` (BabyAI GoToLocal with GLAM's structure: the whole model fine-tuned,
value head on the shared trunk) and ``gotolocal-twosome`` (GoToLocal, LoRA and frozen critic), which
play 4 envs x 16 steps and take 4 epochs of minibatches of 16; ``gotolocal-example``
(``examples/glam/goto_local.yaml`` as it is: 4 envs x 32 steps, the top 8 layers train, bf16 where
native). Settings: ``today``
(no deduplication, no critic cache, fp32, every layer trained), then that with one item on
(``critic cache``, ``deduplicate``, ``bf16-mixed``, ``train_layers=8``, ``train_layers=4``), and
``new defaults`` (the defaults of groundrl as they are), and those with a frozen lower trunk
(``defaults+train_layers=8``, ``defaults+train_layers=4``).

With ``--before REV``, every row runs first with the code of commit ``REV`` (a temporary git
worktree), then with this tree's, and the table says how much faster ("vs before").

Each row runs in a fresh process, one after another, so that its peak memory (the process's
maximum resident set) is its own. A row builds the trainer, plays ``--warmup`` updates (the caches
fill during them), then ``--updates`` measured ones; the figures are over the measured ones only.
bf16-mixed runs only where the hardware multiplies bf16 natively (elsewhere it is emulated, about
2x slower or worse), unless ``--force-bf16``. "vs TWOSOME code" compares with the 0.46
decisions/s of TWOSOME's own training loop on Food Preparation (meaningful for ``food`` only).

    python benchmarks/train_speed.py                                     # every workload and setting (long)
    python benchmarks/train_speed.py --workloads food --settings today,deduplicate --updates 4
    python benchmarks/train_speed.py --model tiny-llama --warmup 1 --updates 1 rollout.num_steps=4   # check the script
    python benchmarks/train_speed.py --json speed.json ppo.micro_batch_size=8
    python benchmarks/train_speed.py --workloads gotolocal-example --settings new-defaults --before 6dc3843
    groundrl bench train_speed --workloads gotolocal-glam
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GROUP = "speed"
TWOSOME_DECISIONS_PER_SECOND = 0.46  # TWOSOME's own training loop on Food Preparation (the spec's figure)

WORKLOADS = {
    # name: (preset, overrides)
    "food": ("twosome", ["env=groundrl/FoodPreparation-v0", "ppo.policy_lr=3e-4", "ppo.value_lr=1e-3"]),
    "gotolocal-glam": ("glam", ["env=groundrl/BabyAI-GoToLocal-v0", "rollout.num_envs=4", "rollout.num_steps=16",
                                "ppo.update_epochs=4", "ppo.minibatch_size=16", "ppo.micro_batch_size=4",
                                "model=null"]),
    "gotolocal-twosome": ("twosome", ["env=groundrl/BabyAI-GoToLocal-v0", "rollout.num_envs=4", "rollout.num_steps=16",
                                      "ppo.update_epochs=4", "ppo.minibatch_size=16", "ppo.value_minibatch_size=16"]),
    # examples/glam/goto_local.yaml as it is (4 envs x 32 steps, the top 8 layers train, bf16 where native)
    "gotolocal-example": ("default", []),
}
FILES = {"gotolocal-example": Path(__file__).resolve().parent.parent / "examples" / "glam" / "goto_local.yaml"}

EVERY_ROW = ["progress=false", "trajectories_every=0", "checkpoint_every=1000", "device=cpu",
             "rollout.total_decisions=100000"]

TODAY = ["ppo.deduplicate=false", "agent.llm.cache_size=0", "precision=fp32", "agent.llm.train_layers=all"]
SETTINGS = {
    "today": TODAY,
    "critic cache": [*TODAY, "agent.llm.cache_size=16384"],
    "deduplicate": [*TODAY, "ppo.deduplicate=true"],
    "bf16-mixed": [*TODAY, "precision=bf16-mixed"],
    "train_layers=8": [*TODAY, "agent.llm.train_layers=8"],
    "train_layers=4": [*TODAY, "agent.llm.train_layers=4"],
    "new defaults": [],
    # candidates for the defaults: the trunk on top of them (train_layers changes what trains)
    "defaults+train_layers=8": ["agent.llm.train_layers=8"],
    "defaults+train_layers=4": ["agent.llm.train_layers=4"],
}


def _key(name: str) -> str:
    """A setting's name as typed: case, spaces, dashes and underscores do not matter ("new-defaults")."""
    return re.sub(r"[\s_-]+", "_", name.strip().lower())


def _pick(option: str, given: str | None, names: list[str], parser: argparse.ArgumentParser) -> list[str]:
    if given is None:
        return names
    by_key = {_key(name): name for name in names}
    picked = []
    for item in filter(None, (part.strip() for part in given.split(","))):
        if _key(item) not in by_key:
            parser.error(f"{option}: no {item!r}; choose from {', '.join(names)}")
        if by_key[_key(item)] not in picked:
            picked.append(by_key[_key(item)])
    if not picked:
        parser.error(f"{option}: name at least one of {', '.join(names)}")
    return picked


def _device(overrides: list[str]) -> str:
    """The device the rows train on: cpu, unless a ``device=...`` override says otherwise."""
    device = "cpu"
    for item in overrides:
        key, _, value = item.partition("=")
        if key.strip() == "device":
            device = value.strip()
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    return device


def native_bf16(device: str) -> tuple[bool, str]:
    """Whether ``device`` multiplies bfloat16 natively (:func:`groundrl.llm.precision.native_bf16`),
    and a few words saying why."""
    from groundrl.llm.precision import native_bf16 as native

    if native(device):
        return True, "CUDA with bf16" if device.startswith("cuda") else "CPU with AVX-512 BF16 or AMX"
    return False, "no native bf16 (" + ("CUDA without bf16 or no CUDA device" if device.startswith("cuda")
                                        else "no avx512_bf16 or amx_bf16 CPU flag") + ")"


def _one_line(error: BaseException) -> str:
    from groundrl.errors import GroundrlError

    lines = str(error).strip().splitlines()
    text = lines[0] if lines else ""
    return text if isinstance(error, GroundrlError) and text else f"{type(error).__name__}: {text}".rstrip(": ")


def _load_config(preset: str, overrides: list[str], files: list[str] = ()) -> tuple[object, list[str], list[str]]:
    """The config; where a minibatch exceeds the rollout (small rollouts given on the command line),
    the minibatch is cut to the rollout (said in the notes). Returns the config, the overrides used
    and the notes."""
    from groundrl.errors import InvalidArgumentError
    from groundrl.train.config import load_config

    overrides, cut = list(overrides), []
    for _ in range(3):
        try:
            config = load_config(preset, files=files, overrides=overrides)
            return config, overrides, [f"{', '.join(cut)} (cut to the rollout)"] if cut else []
        except InvalidArgumentError as error:
            match = re.search(r"(ppo\.\w+)=\d+ is larger than a rollout .* at most (\d+)", str(error))
            if not match:
                raise
            overrides.append(f"{match[1]}={match[2]}")
            cut.append(overrides[-1])
    return load_config(preset, files=files, overrides=overrides), overrides, [f"{', '.join(cut)} (cut to the rollout)"]


def measure_row(spec: dict) -> dict:
    """Run one row in this process (a fresh one per row: the peak memory is the row's own)."""
    import torch

    from groundrl.runs import new_run_dir
    from groundrl.train.trainer import Trainer

    config, overrides, notes = _load_config(spec["preset"], spec["overrides"], spec.get("files", []))
    started = time.perf_counter()
    trainer = Trainer(config, new_run_dir(spec["runs_dir"], "train", config.env))
    build_seconds = time.perf_counter() - started
    warmup, updates = spec["warmup"], spec["updates"]
    history = trainer.train(updates=warmup + updates)
    if len(history) < warmup + updates:
        raise RuntimeError(f"the run stopped after {len(history)} updates (rollout.total_decisions too small?)")
    measured = history[warmup:warmup + updates]
    decisions = measured[-1]["decisions"] - (history[warmup - 1]["decisions"] if warmup else 0)
    rollout = sum(m["rollout_seconds"] for m in measured)
    update = sum(m["update_seconds"] for m in measured)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # bytes on macOS
    llm = getattr(trainer.agent, "llm", None)
    return {
        "decisions": decisions, "rollout_seconds": rollout, "update_seconds": update,
        "rollout_decisions_per_s": decisions / rollout, "update_decisions_per_s": decisions / update,
        "decisions_per_s": decisions / (rollout + update),
        "peak_rss_gib": peak_kib / (2**30 if sys.platform == "darwin" else 2**20),
        "trainer_memory_gib": max(m["memory_gib"] for m in history),
        "build_seconds": build_seconds, "threads": torch.get_num_threads(),
        "model": getattr(llm, "name", None) or str(config.model), "overrides": overrides, "notes": notes,
    }


def run_row(spec: dict, code: Path | None = None) -> dict:
    """One row in its own process, with the groundrl under ``code`` (default: the one installed);
    its results, or ``{"error": one line}``."""
    from benchkit.revisions import importing_from

    environment = importing_from(code) if code is not None else None
    with tempfile.TemporaryDirectory(prefix="groundrl-train-speed-") as runs_dir:
        command = [sys.executable, str(Path(__file__).resolve()), "--row", json.dumps({**spec, "runs_dir": runs_dir})]
        output = subprocess.run(command, capture_output=True, text=True, env=environment, cwd=code)
    for line in reversed(output.stdout.splitlines()):
        if line.startswith("{"):
            try:
                result = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(result, dict) and ("error" in result or "decisions_per_s" in result):
                return result
    stderr = [line for line in output.stderr.splitlines() if line.strip()]
    return {"error": f"exit code {output.returncode}" + (f": {stderr[-1].strip()}" if stderr else "")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=None, help=f"comma-separated, of: {', '.join(WORKLOADS)} (default: all)")
    parser.add_argument("--settings", default=None, help=f"comma-separated, of: {', '.join(SETTINGS)} (default: all)")
    parser.add_argument("--warmup", type=int, default=1, help="updates before the measured ones (caches fill)")
    parser.add_argument("--updates", type=int, default=2, help="measured updates per row")
    parser.add_argument("--model", default=None, help="model for every row (default: the embedded default model; "
                                                      "tiny-llama checks the script in seconds)")
    parser.add_argument("--before", default=None, metavar="REV", help="also run every row with the code of this "
                        "commit (checked out into a temporary worktree), just before this tree's row")
    parser.add_argument("--force-bf16", action="store_true", help="run bf16-mixed even without native bf16")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write every row as JSON")
    parser.add_argument("--row", default=None, help=argparse.SUPPRESS)  # a row's spec, in the child process
    parser.add_argument("overrides", nargs="*", help="KEY=VALUE settings added to every row (last)")
    args = parser.parse_args(argv)

    if args.row is not None:
        try:
            result = measure_row(json.loads(args.row))
        except Exception as error:  # the settings may name keys this groundrl lacks: one line, no crash
            print(json.dumps({"error": _one_line(error)}), flush=True)
            return 1
        print(json.dumps(result), flush=True)
        return 0

    if args.warmup < 0 or args.updates < 1:
        parser.error("--warmup must be 0 or more and --updates at least 1")
    for item in args.overrides:
        if "=" not in item:
            parser.error(f"{item!r} is not KEY=VALUE (e.g. ppo.micro_batch_size=8)")
    workloads = _pick("--workloads", args.workloads, list(WORKLOADS), parser)
    settings = _pick("--settings", args.settings, list(SETTINGS), parser)

    import torch
    from rich.console import Console
    from rich.table import Table

    from groundrl.runs import cpu_name

    console = Console(width=200)
    # as typed (sys.orig_argv: `groundrl bench train_speed ...` too), or the script's equivalent when called with argv
    command = shlex.join(sys.orig_argv if argv is None else [sys.executable, str(Path(__file__).resolve()), *argv])
    extra = ([f"model={args.model}"] if args.model is not None else []) + list(args.overrides)
    device = _device(extra)
    bf16, why = native_bf16(device)
    machine = {"cpu": cpu_name(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
               "threads": torch.get_num_threads(), "device": device, "native_bf16": bf16, "native_bf16_why": why}
    console.print(f"command: {command}", soft_wrap=True)
    console.print(f"CPU: {machine['cpu']}; capability {machine['cpu_capability']}; {machine['threads']} threads; "
                  f"device {device}; native bf16: {'yes' if bf16 else 'no'} ({why})", soft_wrap=True)

    rows = []
    with contextlib.ExitStack() as stack:
        codes = [("", None)]
        if args.before:
            from benchkit.revisions import checked_out

            codes.insert(0, (f" @ {args.before}", stack.enter_context(checked_out(args.before))))
        for workload in workloads:
            preset, workload_overrides = WORKLOADS[workload]
            for setting in settings:
                for suffix, code in codes:
                    row = {"workload": workload, "setting": setting + suffix, "preset": preset, "before": bool(suffix)}
                    if setting == "bf16-mixed" and not bf16 and not args.force_bf16:
                        row.update(status="skipped", message="skipped: no native bf16")
                    else:
                        spec = {"preset": preset, "files": [str(FILES[workload])] if workload in FILES else [],
                                "overrides": [*workload_overrides, *EVERY_ROW, *SETTINGS[setting], *extra],
                                "warmup": args.warmup, "updates": args.updates}
                        started = time.perf_counter()
                        result = run_row(spec, code)
                        row.update(result, wall_seconds=time.perf_counter() - started)
                        if "error" in result:
                            row.update(status="failed", message=f"failed: {result['error']}")
                        else:
                            row.update(status="ok", message="; ".join(result["notes"]))
                    rows.append(row)
                    figures = (f"{row['decisions_per_s']:.2f} decisions/s, peak {row['peak_rss_gib']:.2f} GiB, "
                               f"{row['wall_seconds']:.0f} s" if row["status"] == "ok" else row["message"])
                    print(f"  {workload} / {row['setting']}: {figures}", file=sys.stderr, flush=True)

    today = {r["workload"]: r["decisions_per_s"] for r in rows if r["setting"] == "today" and r["status"] == "ok"}
    suffix = f" @ {args.before}"
    before = {(r["workload"], r["setting"].removesuffix(suffix)): r["decisions_per_s"] for r in rows
              if r["before"] and r["status"] == "ok"}
    for row in rows:
        if row["status"] == "ok":
            row["speed_up"] = row["decisions_per_s"] / today[row["workload"]] if row["workload"] in today else None
            was = before.get((row["workload"], row["setting"])) if not row["before"] else None
            row["vs_before"] = row["decisions_per_s"] / was if was else None
            row["vs_twosome_code"] = row["decisions_per_s"] / TWOSOME_DECISIONS_PER_SECOND

    models = sorted({r["model"] for r in rows if r["status"] == "ok"})
    table = Table(title=f"Training speed ({', '.join(models) or 'no row ran'}; {machine['threads']} threads, "
                        f"{device}): decisions/s over {args.updates} measured updates after {args.warmup} warm-up")
    for column in ("workload", "setting", "rollout decisions/s", "update decisions/s", "overall decisions/s",
                   "speed-up vs today", *(["vs before"] if args.before else []), "peak memory GiB",
                   "vs TWOSOME code", "notes"):
        table.add_column(column, justify="left" if column in ("workload", "setting", "notes") else "right",
                         overflow="fold")
    for row in rows:
        if row["status"] != "ok":
            table.add_row(row["workload"], row["setting"], *["-"] * (7 if args.before else 6), row["message"])
            continue
        speed_up = f"{row['speed_up']:.2f}x" if row["speed_up"] is not None else "-"
        vs_before = [f"{row['vs_before']:.2f}x" if row["vs_before"] else "-"] if args.before else []
        twosome = f"{row['vs_twosome_code']:.1f}x" if row["workload"] == "food" else "-"
        table.add_row(row["workload"], row["setting"], f"{row['rollout_decisions_per_s']:.2f}",
                      f"{row['update_decisions_per_s']:.2f}", f"{row['decisions_per_s']:.2f}", speed_up, *vs_before,
                      f"{row['peak_rss_gib']:.2f}", twosome, row["message"])
    console.print(table)
    console.print(f"vs TWOSOME code: overall decisions/s over the {TWOSOME_DECISIONS_PER_SECOND} decisions/s of "
                  "TWOSOME's training loop on Food Preparation (food rows only).", soft_wrap=True)

    if args.json:
        Path(args.json).write_text(json.dumps({"command": command, "machine": machine, "warmup": args.warmup,
                                               "updates": args.updates, "rows": rows}, indent=2) + "\n")
        console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
