"""An earlier commit's code beside this tree's, for before/after speed tables in one run."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


@contextlib.contextmanager
def checked_out(revision: str) -> Iterator[Path]:
    """``revision``'s files in a temporary detached git worktree, removed after: a process run with
    ``PYTHONPATH`` (and its working folder) there imports that commit's groundrl."""
    with tempfile.TemporaryDirectory(prefix="groundrl-before-") as folder:
        tree = Path(folder) / "tree"
        done = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), revision],
                              capture_output=True, text=True)
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or ["git worktree add failed"]
            raise SystemExit(f"--before {revision}: {lines[-1]}")
        try:
            yield tree
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)


def importing_from(code: Path, **variables: str) -> dict[str, str]:
    """This process's environment, with ``variables`` set and ``code`` first on ``PYTHONPATH``: a
    process started with it imports the groundrl under ``code``."""
    path = [str(code), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, **variables, "PYTHONPATH": os.pathsep.join(path)}
