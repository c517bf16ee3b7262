"""Run folders: where every job writes its config, logs, results and trajectories."""

from __future__ import annotations

import datetime as _dt
import json
import re
from pathlib import Path
from typing import Any

import yaml


def new_run_dir(root: str | Path, job: str, env_id: str) -> Path:
    """Create ``root/<date>-<time>-<job>-<env>`` (with a numeric suffix if it exists) and return it."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    env_name = re.sub(r"[^A-Za-z0-9_.-]+", "_", env_id.split("/")[-1])
    base = Path(root) / f"{stamp}-{job}-{env_name}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    path.mkdir(parents=True)
    return path


def save_config(run_dir: Path, config: dict[str, Any]) -> None:
    """Write the resolved settings of a run as ``config.yaml``."""
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def read_jsonl(path: str | Path) -> list[dict]:
    """The complete lines of a JSON-lines file of a run (``metrics.jsonl``, ``episodes.jsonl``,
    ``trajectories.jsonl``): a line cut by an interruption, and anything after it, is dropped; a
    missing file is empty."""
    path = Path(path)
    if not path.is_file():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return records
