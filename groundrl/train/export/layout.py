"""What an export folder holds: its file names and format, and what its settings may say."""

from __future__ import annotations

from pathlib import Path

from groundrl.errors import GroundrlError

FORMAT = 1
META = "groundrl.json"
SETTINGS = "groundrl.yaml"
CRITIC = "critic.safetensors"
ACTION_HEAD = "action_head.safetensors"
# what an export's settings never say, being someone else's file: where runs and their records go
# (runs_dir, logging) and which export a run started from (init: the export itself, for a run made
# from it). They are left out when exported and ignored when read.
NOT_CARRIED = ("runs_dir", "logging", "init")


class ExportError(GroundrlError):
    """An export that cannot be written or read."""


def is_export(path: str | Path) -> bool:
    """Whether ``path`` is a folder written by :func:`export`."""
    return (Path(path) / META).is_file()
