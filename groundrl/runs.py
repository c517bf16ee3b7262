"""Run folders: where every job writes its settings, records, results and trajectories.

This module owns the folder's names and files, the seed scheme of episodes, and the records:

- ``config.yaml`` (the resolved settings) and ``env.json`` (what ``groundrl replay`` needs to play
  an episode again);
- seeds: training episode ``k`` of environment ``i`` starts from ``seed * 1000 + i + k *
  num_envs``; evaluation episode ``k`` from ``1_000_000 + k`` by default; a check that evaluation
  seeds stay clear of those a run trained on;
- JSON-lines records (``metrics.jsonl``, ``episodes.jsonl``, ``trajectories.jsonl``), appended a
  whole line at a time; a reader skips (and reports) a line cut by a crash; a resumed run cuts
  them back to its checkpoint, so that no record is ever there twice;
- a lock: one process at a time writes into a run folder;
- the files a command writes where its user says (``--out``): checked before the work that fills
  them (one line when they cannot be written), and written whole or not at all.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import math
import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from groundrl.errors import GroundrlError
from groundrl.files import read_json, read_yaml

TRAINING_SEED_STRIDE = 1000  # training seeds of run seed s start at s * 1000
EVALUATION_SEED = 1_000_000  # evaluation episode k starts from EVALUATION_SEED + k (by default)
RESTART_OFFSET = 10**6  # episodes restarted on resume take seeds this far above the run's


def cpu_name() -> str:
    """The processor a record was measured on (its seconds compare only with the same one's)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "unknown CPU"


MACHINE = "machine.jsonl"
"""The machine each stretch of a run's work ran on (a run resumed elsewhere has several): its
seconds compare only with those of the same processor, kernels and threads."""


def note_machine(run_dir: str | Path, **fields: Any) -> None:
    """Append to ``run_dir/machine.jsonl`` the machine this process runs on (the processor, the
    kernels torch picked for it, its threads, the date) with ``fields``: what the stretch covers."""
    import torch

    record = {"cpu": cpu_name(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
              "threads": torch.get_num_threads(), "at": _dt.datetime.now().isoformat(timespec="seconds"), **fields}
    with (Path(run_dir) / MACHINE).open("a") as file:
        file.write(json.dumps(record) + "\n")


def new_run_dir(root: str | Path, job: str, env_id: str) -> Path:
    """Create ``root/<date>-<time>-<job>-<env>`` (with a numeric suffix if it exists) and return it."""
    root = Path(root)
    check_runs_dir(root)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    env_name = re.sub(r"[^A-Za-z0-9_.-]+", "_", env_id.split("/")[-1])
    base = root / f"{stamp}-{job}-{env_name}"
    path, n = base, 1
    while True:
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            if not path.exists():  # a parent in the way (a link to nothing): no other name would do
                raise GroundrlError(f"cannot create a run folder in {root}: a part of that path is not a "
                                    "folder") from None
            n += 1  # another process took this name a moment ago
            path = base.with_name(f"{base.name}-{n}")
        except OSError as error:
            raise GroundrlError(f"cannot create a run folder in {root}: {error.strerror}") from None


def check_runs_dir(runs_dir: Path, option: str = "--runs-dir") -> None:
    """One line when run folders cannot be created in ``runs_dir`` (said before anything loads)."""
    runs_dir = Path(runs_dir)
    existing = nearest_existing(runs_dir)
    if existing.is_symlink() and not existing.exists():
        raise GroundrlError(f"{option} {runs_dir}: {existing} is a link to nothing ({os.readlink(existing)}); "
                            "give a folder (it is created if missing)")
    if not existing.is_dir():
        where = "is a file" if existing == runs_dir else f"cannot be created: {existing} is a file"
        raise GroundrlError(f"{option} {runs_dir} {where}; give a folder (it is created if missing)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise GroundrlError(f"{option} {runs_dir}: {existing} is not writable; give a folder of yours")


def nearest_existing(path: Path) -> Path:
    """The nearest of ``path`` and its parents that exists (a link counts, even to nothing): where
    creating ``path`` would begin, which must be a folder that can be written."""
    return next(p for p in (path, *path.absolute().parents) if p.exists() or p.is_symlink())


def finite_number(value) -> float:
    """A value read from a record as a number to draw or show: ``nan`` when it is none (text, a
    list, true, an integer too large for a float, infinity)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    try:
        value = float(value)
    except OverflowError:
        return math.nan
    return value if math.isfinite(value) else math.nan


def remove_if_unused(run_dir: Path) -> None:
    """Remove a run folder that a failed command created and wrote nothing but its settings (and
    the machine it was to run on) into."""
    if run_dir.is_dir() and all(p.name in ("config.yaml", "env.json", MACHINE, ".lock") for p in run_dir.iterdir()):
        for p in run_dir.iterdir():
            p.unlink()
        run_dir.rmdir()


def save_config(run_dir: Path, config: dict[str, Any] | str) -> None:
    """Write the resolved settings of a run as ``config.yaml`` (a dict, or YAML text)."""
    text = config if isinstance(config, str) else yaml.safe_dump(config, sort_keys=False)
    (Path(run_dir) / "config.yaml").write_text(text)


def read_settings(file: Path) -> dict:
    """The settings a run's ``config.yaml`` holds, or one line saying that the file is corrupt."""
    settings = read_yaml(file, "restore it")
    if not isinstance(settings, dict):
        raise GroundrlError(f"{file} is corrupt (not a mapping of settings); restore it")
    return settings


def save_env_spec(run_dir: Path, env_id: str, env_kwargs: dict) -> None:
    """``env.json``: the environment of the run's episodes (``groundrl replay`` rebuilds it)."""
    (Path(run_dir) / "env.json").write_text(json.dumps({"env_id": env_id, "env_kwargs": env_kwargs}) + "\n")


# -- seeds ------------------------------------------------------------------------------------

def training_seed(seed: int, env_index: int, num_envs: int = 1, previous: int | None = None) -> int:
    """The reset seed of the next training episode of environment ``env_index`` of ``num_envs``
    (global index; a group method's: the group's index and number, its members share seeds): the
    first (``previous`` None) is ``seed * 1000 + env_index``, each later one ``previous + num_envs``.

    >>> [training_seed(2, 1, 4), training_seed(2, 1, 4, previous=2001), training_seed(2, 1, 4, previous=2005)]
    [2001, 2005, 2009]
    """
    return seed * TRAINING_SEED_STRIDE + env_index if previous is None else previous + num_envs


def restart_seed(seed: int, update: int, num_envs: int, env_index: int) -> int:
    """The seed of an episode restarted on resume (its environment could not be restored): above
    every seed of the run's own scheme."""
    return seed * TRAINING_SEED_STRIDE + update * num_envs + env_index + RESTART_OFFSET


def training_seed_range(meta_file: Path, seed: int, num_envs: int) -> range:
    """The reset seeds a run's training episodes used, from a checkpoint's ``meta.json`` (older
    checkpoints: the first episode of each environment)."""
    older = range(training_seed(seed, 0), training_seed(seed, num_envs))
    if not meta_file.is_file():
        return older
    fix = f"restore it, or evaluate another of the run's checkpoints (in {meta_file.parent.parent})"
    meta = read_json(meta_file, fix)
    if not isinstance(meta, dict):
        raise GroundrlError(f"{meta_file} is corrupt (not a JSON object): {fix}")
    seeds = meta.get("training_seeds")
    if seeds is None:  # written before checkpoints recorded them, or before any episode began
        return older
    if not (isinstance(seeds, list) and len(seeds) == 2 and all(is_whole_number(s) for s in seeds)
            and seeds[0] <= seeds[1]):
        raise GroundrlError(f"{meta_file} is corrupt (its training_seeds is not [first, last]): {fix}")
    return range(seeds[0], seeds[1] + 1)


def is_whole_number(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # YAML and JSON true are not numbers


def check_evaluation_seeds(first: int, episodes: int, trained: range) -> None:
    """Evaluation episodes must not replay training episodes.

    >>> check_evaluation_seeds(1_000_000, 100, range(1000, 5000))
    >>> check_evaluation_seeds(4990, 100, range(1000, 5000))
    Traceback (most recent call last):
    ...
    groundrl.errors.GroundrlError: evaluation seeds 4990..5089 overlap the training seeds 1000..4999: choose another --seed
    """  # noqa: E501 (doctest output)
    if first < trained.stop and trained.start < first + episodes:
        raise GroundrlError(f"evaluation seeds {first}..{first + episodes - 1} overlap the training seeds "
                            f"{trained.start}..{trained.stop - 1}: choose another --seed")


# -- records ----------------------------------------------------------------------------------

class Records:
    """An append-only JSON-lines file: each record is written as one whole line and flushed, so
    a crash loses at most the line being written; a line cut that way is removed when the file is
    opened again."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        _drop_torn_tail(self.path)
        self.file = open(self.path, "a")

    def write(self, records: Iterable[dict]) -> None:
        self.file.write("".join(json.dumps(record) + "\n" for record in records))
        self.file.flush()

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> Records:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _drop_torn_tail(path: Path) -> None:
    if not path.is_file() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if not data.endswith(b"\n"):
        with open(path, "rb+") as f:
            f.truncate(data.rfind(b"\n") + 1)


def episode_markdown(steps: list[dict], max_prompt_chars: int = 400) -> str:
    """A recorded episode's steps (of ``trajectories.jsonl``) as a Markdown table, for TensorBoard's
    text tab: per step the end of the prompt, the actions with their probabilities (the chosen one in
    bold) and the reward."""
    rows = ["| step | observation | actions (probability) | reward |", "|---|---|---|---|"]
    for step in steps:
        prompt = step["observation"][-max_prompt_chars:].replace("|", "\\|").replace("\n", "<br>")
        probs = step["probs"] or [float("nan")] * len(step["valid_actions"])
        actions = ", ".join((f"**{a} ({p:.2f})**" if i == step["action"] else f"{a} ({p:.2f})")
                            for i, (a, p) in enumerate(zip(step["valid_actions"], probs)))
        rows.append(f"| {step['step']} | {prompt} | {actions.replace('|', '/')} | {step['reward']:g} |")
    return "\n".join(rows)


def iter_jsonl(path: str | Path) -> Iterator[dict]:
    """The records of a JSON-lines file of a run (``metrics.jsonl``, ``episodes.jsonl``,
    ``trajectories.jsonl``), one line at a time: a file of any size reads in the memory of its
    longest line. A line that is not a whole record (cut by a crash, or not an object) is skipped;
    the skipped lines are warned of once the file has been read to its end. A missing file is empty.

    Raises:
        GroundrlError: the file cannot be read (permissions).
    """
    path = Path(path)
    if not path.is_file():
        return
    bad, first_bad = 0, []  # a count, not a list: a file of garbage has as many bad lines as it has lines
    try:
        file = open(path, errors="replace")
    except OSError as error:
        raise GroundrlError(f"cannot read {path}: {error.strerror}") from None
    with file:
        for number, line in enumerate(file, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):  # RecursionError: nested deeper than Python's stack
                record = None
            if isinstance(record, dict):
                yield record
            else:
                bad += 1
                if bad <= 5:
                    first_bad.append(number)
    if bad:
        warnings.warn(f"{path}: skipped {bad} damaged line(s) (line {', '.join(map(str, first_bad))}"
                      f"{', ...' if bad > 5 else ''})", stacklevel=2)


def read_jsonl(path: str | Path) -> list[dict]:
    """Every record of a JSON-lines file of a run, in a list (see :func:`iter_jsonl`)."""
    return list(iter_jsonl(path))


def cut_back(path: str | Path, keep: Callable[[dict], bool]) -> int:
    """Rewrite a JSON-lines file with only the whole records ``keep`` accepts (atomically);
    returns how many were dropped."""
    path = Path(path)
    if not path.is_file():
        return 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a torn line is dropped here, which is the point
        records = read_jsonl(path)
    kept = [r for r in records if keep(r)]
    temporary = path.with_name(f".{path.name}.cut")
    temporary.write_text("".join(json.dumps(r) + "\n" for r in kept))
    temporary.replace(path)
    return len(records) - len(kept)


SETTINGS_CHANGES = "settings_changes.jsonl"  # the settings a training run was resumed with, where not its own


def cut_back_training_records(run_dir: Path, update: int) -> None:
    """Keep the records of a training run's first ``update`` updates: those a crash after its last
    checkpoint left, or a resume from an earlier checkpoint would write again, go."""
    cut_back(Path(run_dir) / "metrics.jsonl", lambda record: record.get("update", float("inf")) <= update)
    cut_back(Path(run_dir) / SETTINGS_CHANGES, lambda record: record.get("update", float("inf")) <= update)
    cut_back(Path(run_dir) / MACHINE, lambda record: record.get("update", float("inf")) <= update)
    last_update: dict = {}  # an episode is written after the update it ended in
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a torn line is dropped below anyway
        for step in read_jsonl(Path(run_dir) / "trajectories.jsonl"):
            last_update[step.get("episode")] = max(last_update.get(step.get("episode"), 0), step.get("update", 0))
    cut_back(Path(run_dir) / "trajectories.jsonl", lambda step: last_update[step.get("episode")] <= update)


# -- files a command writes where its user says (--out) ---------------------------------------

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
    existing = nearest_existing(path.parent)
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


# -- one writer at a time ---------------------------------------------------------------------

class RunLock:
    """An exclusive lock on a run folder for as long as a process writes into it (released by the
    operating system when the process ends, however it ends).

    Raises:
        GroundrlError: another process holds it (named by its pid).
    """

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / ".lock"
        self.file = open(self.path, "a+")
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.file.seek(0)
            holder = self.file.read().strip() or "another process"
            self.file.close()
            raise GroundrlError(f"{run_dir} is in use by process {holder}: wait for it to end (or stop it) "
                                "before resuming this run") from None
        self.file.seek(0)
        self.file.truncate()
        self.file.write(str(os.getpid()))
        self.file.flush()

    def release(self) -> None:
        if not self.file.closed:
            self.file.truncate(0)  # no process holds it any more
            fcntl.flock(self.file, fcntl.LOCK_UN)
            self.file.close()


_held: dict[Path, RunLock] = {}


def lock(run_dir: str | Path) -> None:
    """Hold the lock of ``run_dir`` (once per process: a process that holds it already goes on)."""
    key = Path(run_dir).resolve()
    if key not in _held:
        _held[key] = RunLock(run_dir)


def unlock(run_dir: str | Path) -> None:
    held = _held.pop(Path(run_dir).resolve(), None)
    if held is not None:
        held.release()
