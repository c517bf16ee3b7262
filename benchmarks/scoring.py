"""How fast the action scorer is on the default model: seconds a call, FLOP bound, memory.

Workload W (issue 3): 16 BabyAI-Text style prompts of 125-180 tokens (GLAM's template: action
list, goal, the last observations and actions, ending with "Action k: "), 6 candidates each.
Workload S (TWOSOME style): 4 prompts of about 80 tokens, 5 to 17 candidates each.

    python benchmarks/scoring.py              # naive fp32, ours fp32 and bf16 on W, ours on S
    python benchmarks/scoring.py --quick      # skip the (slow) naive rows
    groundrl bench scoring

Each row runs in a fresh process. Reported per row: seconds per call (median of --repeats after
one warm-up), candidates per second, the fraction of the FLOP bound reached, peak memory (the peak
RSS while scoring, above the process's RSS before the model was loaded: weights, activations,
caches), that peak relative to the same measure for one plain forward pass over a batch of the
same padded size (weights plus one batch's activations), and the largest score difference to the
naive fp32 reference. The FLOP bound counts 2 x non-embedding parameters per token
(unique tokens: the prefix shared by all prompts once, each prompt once, each candidate token
once) plus the LM head at candidate positions, at the measured matmul peak of this machine.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time

import torch

from benchkit.args import at_least_one

GROUP = "speed"
ACTIONS = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]
COLORS = ["red", "green", "blue", "purple", "yellow", "grey"]
OBJECTS = ["ball", "key", "box"]


def _sentence(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.3:
        return f"You see a wall {rng.randint(1, 6)} steps {rng.choice(['forward', 'left', 'right'])}"
    side = rng.choice(["left", "right"])
    return (
        f"You see a {rng.choice(COLORS)} {rng.choice(OBJECTS)} {rng.randint(1, 3)} steps {side} "
        f"and {rng.randint(1, 4)} steps forward"
    )


def babyai_prompt(rng: random.Random, tokenizer, low: int = 125, high: int = 180) -> str:
    """A GLAM prompt with a random goal and history, drawn until it is within [low, high] tokens."""
    goal = f"go to the {rng.choice(COLORS)} {rng.choice(OBJECTS)}"
    for _ in range(10_000):
        observations = [", ".join(_sentence(rng) for _ in range(rng.randint(2, 4))) + ", " for _ in range(3)]
        actions = [rng.choice(ACTIONS) for _ in range(2)]
        prompt = f"Possible action of the agent: {', '.join(ACTIONS)} \n Goal of the agent: {goal}"
        for k in range(3):
            prompt += f" \n Observation {k}: {observations[k]}"
            prompt += f" \n Action {k}: " + (actions[k] if k < 2 else "")
        if low <= len(tokenizer(prompt)["input_ids"]) <= high:
            return prompt
    raise RuntimeError(f"this tokenizer makes no GLAM prompt of {low}-{high} tokens")


def twosome_workload(rng: random.Random):
    objects = ["pancake", "microwave", "fridge", "table", "sofa", "TV", "chips", "milk", "salmon", "kitchen",
               "bathroom", "bedroom", "living room", "cutting board", "tomato", "lettuce", "plate"]
    prompts, candidates = [], []
    for n in (5, 9, 13, 17):
        room = rng.choice(["kitchen", "living room", "bedroom"])
        prompt = (
            f"There are four rooms: the kitchen, bathroom, bedroom, and living room. You are in the {room}. "
            f"In the {room}, you notice a {rng.choice(objects)}, a {rng.choice(objects)} and a "
            f"{rng.choice(objects)}. You have nothing in hand. You need to heat up the pancake with the "
            "microwave and then bring it to the living room table. Your next step is to"
        )
        prompts.append(prompt)
        verbs = ["walk to the", "grab the", "open the", "close the", "put the pancake in the", "switch on the"]
        candidates.append([f"{rng.choice(verbs)} {obj}" for obj in rng.sample(objects, n)])
    return prompts, candidates


def flop_bound(llm, prompts, candidates, separator, peak_gflops) -> float:
    """Seconds at the peak matmul rate for the unique tokens of one call."""
    from groundrl.llm.scoring.causal import common_prefix_length, tokenize_causal

    requests = tokenize_causal(llm.tokenizer, prompts, candidates, separator, "error", None)
    shared = common_prefix_length([r.context for r in requests])
    tokens = shared + sum(len(r.context) - shared for r in requests)
    candidate_tokens = sum(len(s) for r in requests for s in r.suffixes)
    embedding = llm.model.get_input_embeddings().weight
    body = sum(p.numel() for p in llm.model.parameters()) - embedding.numel()
    flops = 2 * body * (tokens + candidate_tokens) + 2 * embedding.numel() * candidate_tokens
    return flops / (peak_gflops * 1e9)


def time_calls(fn, repeats: int):
    result = fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def _status_gib(field: str) -> float:
    """A memory figure of this process from /proc/self/status (Linux), in GiB."""
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 2**20
    return float("nan")


def reset_peak_rss() -> None:
    """Start a new peak-RSS (VmHWM) measurement (Linux: clear_refs 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as file:
            file.write("5")
    except OSError:
        pass


ROWS = {
    # name: (implementation, dtype, workload)
    "naive-fp32": ("naive", "float32", "W"),
    "ours-fp32": ("groundrl", "float32", "W"),
    "naive-bf16": ("naive", "bfloat16", "W"),
    "ours-bf16": ("groundrl", "bfloat16", "W"),
    "ours-fp32-S": ("groundrl", "float32", "S"),
    "ours-bf16-S": ("groundrl", "bfloat16", "S"),
}


def measure_row(name: str, args) -> dict:
    """Run one row in this process (called in a fresh subprocess, so that peak memory and timings
    belong to that row alone)."""
    from groundrl.llm import load_llm, score, score_naive

    implementation, dtype, workload = ROWS[name]
    rss_before = _status_gib("VmRSS")
    llm = load_llm(args.model, dtype=dtype, device=args.device)
    rng = random.Random(0)
    if workload == "W":
        prompts = [babyai_prompt(rng, llm.tokenizer) for _ in range(16)]
        candidates, separator = [list(ACTIONS) for _ in prompts], ""  # GLAM: the prompt ends "Action k: "
    else:
        prompts, candidates = twosome_workload(rng)
        separator = " "
    fn = score_naive if implementation == "naive" else score
    with torch.no_grad():
        fn(llm, prompts, candidates, separator=separator)
        reset_peak_rss()
        seconds, result = time_calls(lambda: fn(llm, prompts, candidates, separator=separator), args.repeats)
        scoring_peak = _status_gib("VmHWM")
        # The reference for memory: one plain forward pass over a batch of the same padded size
        # (the model's weights plus the activations of one batch).
        reset_peak_rss()
        longest = max(len(llm.tokenizer(p + separator + a)["input_ids"])
                      for p, c in zip(prompts, candidates) for a in c)
        batch = torch.randint(0, len(llm.tokenizer),
                              (len(prompts), longest + sum(len(c) for c in candidates) // len(prompts)))
        llm.model(input_ids=batch.to(llm.device), logits_to_keep=1)
        forward_peak = _status_gib("VmHWM")
    peak = args.peak_bf16 if dtype == "bfloat16" else args.peak_fp32
    return {
        "name": name,
        "seconds": seconds,
        "candidates_per_s": sum(len(c) for c in candidates) / seconds,
        "of_bound": flop_bound(llm, prompts, candidates, separator, peak) / seconds,
        "memory": scoring_peak - rss_before,
        "forward_memory": forward_peak - rss_before,
        "weights_gib": sum(p.numel() * p.element_size() for p in llm.model.parameters()) / 2**30,
        "scores": [r.float().tolist() for r in result],
        "prompt_tokens": [len(llm.tokenizer(p)["input_ids"]) for p in prompts],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model name or path (default: the embedded SmolLM2-135M)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="skip the naive reference rows")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--peak-fp32", type=float, default=180.0, help="measured matmul peak, GFLOP/s")
    parser.add_argument("--peak-bf16", type=float, default=390.0)
    parser.add_argument("--row", choices=sorted(ROWS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    at_least_one(parser, args, "repeats")  # a median of them

    if args.row:
        from groundrl.errors import GroundrlError

        try:
            print("ROW " + json.dumps(measure_row(args.row, args)))
        except GroundrlError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        return 0

    from rich.console import Console
    from rich.table import Table

    names = [n for n in ROWS if not (args.quick and n.startswith("naive"))]
    results = {}
    for name in names:
        command = [sys.executable, __file__, "--row", name, "--repeats", str(args.repeats), "--device", args.device,
                   "--peak-fp32", str(args.peak_fp32), "--peak-bf16", str(args.peak_bf16)]
        if args.model:
            command += ["--model", args.model]
        output = subprocess.run(command, capture_output=True, text=True)
        if output.returncode != 0:
            errors = [line for line in output.stderr.splitlines() if line.startswith("error: ")]
            print(errors[-1] if errors else output.stderr, file=sys.stderr)
            return output.returncode
        line = next(text for text in output.stdout.splitlines() if text.startswith("ROW "))
        results[name] = json.loads(line[4:])
        print(f"  {name}: {results[name]['seconds']:.3f} s", file=sys.stderr)

    reference = results["ours-fp32"]["scores"] if "naive-fp32" not in results else results["naive-fp32"]["scores"]
    tokens = results["ours-fp32"]["prompt_tokens"]
    table = Table(title=f"Action scoring, {torch.get_num_threads()} threads, median of {args.repeats} calls "
                        f"after a warm-up; W = 16 prompts of {min(tokens)}-{max(tokens)} tokens x 6 actions, "
                        "S = 4 prompts of ~80 tokens x 5-17 actions")
    for column in ("row", "s / call", "candidates / s", "of FLOP bound", "peak memory GiB", "vs one forward",
                   "max |score - naive fp32|"):
        table.add_column(column, justify="left" if column == "row" else "right")
    for name, r in results.items():
        drift = ""
        if name.endswith(("fp32", "bf16")):
            drift = f"{max(abs(a - b) for x, y in zip(r['scores'], reference) for a, b in zip(x, y)):.2e}"
        table.add_row(name, f"{r['seconds']:.3f}", f"{r['candidates_per_s']:.1f}", f"{r['of_bound']:.0%}",
                      f"{r['memory']:.2f}", f"{r['memory'] / r['forward_memory']:.2f}x", drift)
    Console(width=200).print(table)
    if "naive-fp32" in results:
        print("speed-up over naive, fp32 W: "
              f"{results['naive-fp32']['seconds'] / results['ours-fp32']['seconds']:.1f}x; "
              f"bf16 W: {results['naive-bf16']['seconds'] / results['ours-bf16']['seconds']:.1f}x")
    print(f"bf16 over fp32, W: {results['ours-fp32']['seconds'] / results['ours-bf16']['seconds']:.2f}x; "
          f"S: {results['ours-fp32-S']['seconds'] / results['ours-bf16-S']['seconds']:.2f}x")
    print(f"model weights: {results['ours-fp32']['weights_gib']:.2f} GiB fp32, "
          f"{results['ours-bf16']['weights_gib']:.2f} GiB bf16")
    return 0


if __name__ == "__main__":
    sys.exit(main())
