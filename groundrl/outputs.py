"""Files a command writes where its user says (``--out``): checked before the work that fills them,
and written whole or not at all.

    target = check_output(out, "PNG", "learning_curves.png")   # one line now, rather than a traceback after the work
    write_whole(target, lambda temporary: figure.savefig(temporary, format="png"))
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from groundrl.errors import GroundrlError


def check_output(path: str | Path, what: str, name: str) -> Path:
    """The file to write for ``path``: ``path`` itself, or the file a link there points to (the
    link stays); ``what`` it holds and a ``name`` for it go into the messages. Raises
    :class:`GroundrlError` (one line) when it cannot be written: a folder, a link to nothing, a
    read-only file, a place under a file or in a folder that is not writable."""
    path = Path(path)
    if path.is_symlink():
        try:
            target = path.resolve(strict=True)
        except (OSError, RuntimeError):  # RuntimeError: a loop of links (Python 3.11)
            raise GroundrlError(f"{path} is a link that leads to no file ({os.readlink(path)}): give the {what} "
                                "file to write") from None
        path = target
    if path.is_dir():
        raise GroundrlError(f"{path} is a folder: give the {what} file to write, e.g. {path / name}")
    if path.exists():
        if not path.is_file():  # a device (/dev/null) or a pipe: renaming onto it would replace it
            raise GroundrlError(f"{path} is not a regular file: give the {what} file to write")
        if not os.access(path, os.W_OK):
            raise GroundrlError(f"{path} is read-only: give another {what} file, or make it writable")
        return path
    # the folders missing are created: the nearest that exists must be a folder that can take them
    existing = next(p for p in (path.parent, *path.parent.absolute().parents) if p.exists() or p.is_symlink())
    if not existing.is_dir():
        raise GroundrlError(f"cannot write {path}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise GroundrlError(f"cannot write {path}: {existing} is not writable")
    return path


def write_whole(path: Path, write: Callable[[Path], object]) -> Path:
    """Write ``path`` through ``write(temporary)``, a file beside it renamed to ``path`` once whole:
    a failure (a full disk, an interrupt) leaves ``path`` as it was and no part of a file behind.
    Returns ``path``; an ``OSError`` is one line (:class:`GroundrlError`)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(temporary)
        os.replace(temporary, path)
    except OSError as error:
        raise GroundrlError(f"cannot write {path}: {error.strerror or error}") from None
    finally:
        with contextlib.suppress(OSError):  # renamed, or never created
            temporary.unlink()
    return path
