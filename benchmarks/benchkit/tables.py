"""The tables the scripts print: cells of several seeds, success rates, a table of right-aligned
cells (or the same as Markdown, for the docs), and the drift of trained models."""

from __future__ import annotations

from pathlib import Path


def seeds_cell(values: list[str]) -> str:
    """One cell for a value per seed, in order ('-': no seed has one)."""
    return " / ".join(values) if any(v != "-" for v in values) else "-"


def success_cell(row: dict | None) -> str:
    """An evaluation row's success rate ('-': none)."""
    return f"{row['success_rate']:.2f}" if row and row.get("success_rate") is not None else "-"


def policy_cell(probs: dict[str, float]) -> str:
    """``"walk to the pancake 0.90, open the microwave 0.05"``: a state's actions, the likeliest first."""
    return ", ".join(f"{a} {p:.2f}" for a, p in sorted(probs.items(), key=lambda ap: -ap[1]))


def show_table(title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]], markdown: bool = False) -> None:
    """Print a table of right-aligned cells, or the same as Markdown (for the docs)."""
    from rich.console import Console
    from rich.table import Table

    if markdown:
        print(f"\n{title}\n")
        print("| " + " | ".join(columns) + " |")
        print("|" + "---|" * len(columns))
        for row in rows:
            print("| " + " | ".join(row) + " |")
        return
    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*row)
    Console(width=200).print(table)


def drift_table(found: dict[str, dict], console) -> None:
    """How far training moved each run's model from the untrained one (:mod:`groundrl.eval.drift`'s
    measurements, by run)."""
    from rich.table import Table

    table = Table(title="Drift from the untrained model (KL(trained || untrained), nats)")
    for column in ("run", "token KL", "top-1 same", "perplexity", "policy KL (held-out games)",
                   "FollowInstruction untrained -> trained"):
        table.add_column(column, justify="left" if column == "run" else "right")
    for run, d in found.items():
        follow = d["follow_instruction"]
        success = (f"{follow['untrained']['success_rate']:.2f} -> {follow['trained']['success_rate']:.2f} "
                   f"({follow['trained']['episodes']})") if follow else "-"
        policy = f"{d['action_kl']:.4f} ({d['decisions']})" if d["action_kl"] is not None else "-"
        table.add_row(Path(run).name, f"{d['token_kl']:.5f}", f"{d['top1_agreement']:.3f}",
                      f"{d['perplexity_untrained']:.2f} -> {d['perplexity_trained']:.2f}", policy, success)
    console.print(table)
