"""Run by ``tests/integration/test_distributed.py`` under ``torchrun``: train each case of a JSON file, then save
this rank's trainable weights and the run's metrics next to it, and (rank 0) the weights it started
from and the gradients of every optimizer step.

    torchrun --nproc-per-node 2 tests/integration/distributed_worker.py CASES.json OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def record_steps(trainer) -> list:
    """``(optimizer name, {parameter name: gradient})`` of every optimizer step, in order, filled
    in as the trainer steps: the gradients as the optimizer sees them (averaged over the ranks by
    DDP, clipped), of the parameters that have one."""
    names = {p: n for n, p in trainer.agent.named_parameters()}
    steps = []

    def recorder(name):
        def hook(optimizer, args, kwargs):
            steps.append((name, {names[p]: p.grad.detach().clone() for group in optimizer.param_groups
                                 for p in group["params"] if p.grad is not None}))
        return hook

    for name, optimizer in trainer.algorithm.optimizers.items():
        optimizer.register_step_pre_hook(recorder(name))
    return steps


def main(cases_file: str, out_dir: str) -> None:
    import torch

    from groundrl.train import distributed
    from groundrl.train.config import load_config
    from groundrl.train.trainer import make_trainer

    cases = json.loads(Path(cases_file).read_text())
    try:
        for name, (preset, overrides) in cases.items():
            trainer = make_trainer(load_config(preset, overrides=overrides), Path(out_dir) / name)
            rank = trainer.world.rank
            steps = record_steps(trainer) if rank == 0 else None
            if rank == 0:  # after DDP's broadcast: every rank's
                torch.save({n: p.detach().clone() for n, p in trainer.agent.named_parameters() if p.requires_grad},
                           Path(out_dir) / f"{name}-initial.pt")
            history = trainer.train()
            weights = {n: p.detach().cpu() for n, p in trainer.agent.named_parameters() if p.requires_grad}
            torch.save(weights, Path(out_dir) / f"{name}-rank{rank}.pt")
            (Path(out_dir) / f"{name}-rank{rank}.json").write_text(json.dumps(history))
            if steps is not None:
                torch.save(steps, Path(out_dir) / f"{name}-steps.pt")
    finally:
        distributed.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
