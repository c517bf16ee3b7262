"""Run by ``tests/test_distributed.py`` under ``torchrun``: train each case of a JSON file, then save
this rank's trainable weights and the run's metrics next to it.

    torchrun --nproc-per-node 2 tests/distributed_worker.py CASES.json OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(cases_file: str, out_dir: str) -> None:
    import torch

    from groundrl.train import distributed
    from groundrl.train.config import load_config
    from groundrl.train.trainer import make_trainer

    cases = json.loads(Path(cases_file).read_text())
    try:
        for name, (preset, overrides) in cases.items():
            trainer = make_trainer(load_config(preset, overrides=overrides), Path(out_dir) / name)
            history = trainer.train()
            rank = trainer.world.rank
            weights = {n: p.detach().cpu() for n, p in trainer.agent.named_parameters() if p.requires_grad}
            torch.save(weights, Path(out_dir) / f"{name}-rank{rank}.pt")
            (Path(out_dir) / f"{name}-rank{rank}.json").write_text(json.dumps(history))
    finally:
        distributed.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
