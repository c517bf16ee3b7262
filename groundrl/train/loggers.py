"""Where a training run's records go: TensorBoard, JSON lines, Weights & Biases (``logging.backends``).

The trainer hands each update's metrics and the episodes it recorded to :func:`open_loggers`'
:class:`Loggers`, which hands them on to every backend that is on; nothing else in groundrl knows
which those are. Every backend gets the same metrics (the keys of ``metrics.jsonl``) with the
decisions played so far as their step.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import uuid
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from omegaconf import OmegaConf

from groundrl import runs
from groundrl.errors import GroundrlError

if TYPE_CHECKING:  # the settings check W&B's login here before a run starts: config imports this module
    from groundrl.train.config import TrainConfig


class Backend(Protocol):
    """One destination of a run's records (``where``: what it writes, for messages)."""

    where: str

    def log(self, metrics: dict, episodes: list[list[dict]]) -> None:
        """An update's metrics (``decisions``: the step) and the episodes it recorded (steps of
        ``trajectories.jsonl``)."""

    def close(self) -> None: ...


def _numbers(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not math.isnan(v)}


class TensorBoard:
    """Scalars ``train/KEY`` and each recorded episode as a Markdown table in the text tab."""

    where = "tensorboard/"

    def __init__(self, run_dir: Path, resumed_at: int):
        from torch.utils.tensorboard import SummaryWriter  # start-up time: TensorBoard pulls in much

        # events past the checkpoint (a crash after it) are dropped when TensorBoard reads the log
        self.writer = SummaryWriter(str(run_dir / "tensorboard"), purge_step=resumed_at + 1 if resumed_at else None)

    def log(self, metrics: dict, episodes: list[list[dict]]) -> None:
        step = metrics["decisions"]
        for key, value in _numbers(metrics).items():
            if key not in ("update", "decisions"):
                self.writer.add_scalar(f"train/{key}", value, step)
        for steps in episodes:
            self.writer.add_text(f"train/episode_{steps[0]['episode']}", runs.episode_markdown(steps), step)

    def close(self) -> None:
        self.writer.close()


class JsonLines:
    """``metrics.jsonl`` (a line per update) and ``trajectories.jsonl`` (a line per recorded step)."""

    where = "metrics.jsonl"

    def __init__(self, run_dir: Path):
        self.metrics = runs.Records(run_dir / "metrics.jsonl")
        self.trajectories = runs.Records(run_dir / "trajectories.jsonl")

    def log(self, metrics: dict, episodes: list[list[dict]]) -> None:
        self.metrics.write([metrics])
        for steps in episodes:
            self.trajectories.write(steps)

    def close(self) -> None:
        self.metrics.close()
        self.trajectories.close()


_WANDB_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")  # W&B's own ids and ours (16 hex digits)


def wandb_login_problem(mode: str | None) -> str | None:
    """Why W&B cannot start a run here (one line), found without a network call; None when it can,
    runs offline, or this wandb has no way we know to ask (then ``wandb.init`` itself says).

    ``mode``: ``logging.wandb_mode`` (None: wandb's own choice, the WANDB_MODE variable or its settings).
    """
    import wandb

    try:  # wandb's own look-up of credentials, as wandb.init does it (wandb.login would verify them online)
        from wandb.sdk import wandb_setup
        from wandb.sdk.lib import wbauth

        settings = wandb_setup.singleton().settings
        if (mode or settings.mode) in ("offline", "dryrun", "disabled"):
            return None
        host = settings.base_url
        if (os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE")
                or getattr(settings, "api_key", None) or getattr(settings, "identity_token_file", None)
                or wbauth.session_credentials(host=host) or wbauth.read_netrc_auth(host=host)):
            return None
    except wandb.errors.Error as error:  # a malformed key or settings file: wandb.init would fail on it too
        return (f"W&B cannot read its settings or credentials ({type(error).__name__}: {_first_line(error)}): "
                "fix them (`wandb login --relogin`), or set logging.wandb_mode=offline")
    except (ImportError, AttributeError):  # a wandb whose insides differ: its wandb.init says what is wrong
        return None
    return ("W&B online needs a login: run `wandb login`, or set logging.wandb_mode=offline, or drop wandb from "
            "logging.backends")


def _first_line(error: BaseException, keep: int = 200) -> str:
    line = (str(error).strip().splitlines() or [""])[0]
    return line if len(line) <= keep else line[:keep] + "..."


class WeightsAndBiases:
    """A W&B run named after the run folder, with the resolved settings as its config; the metrics
    against ``decisions``; each recorded episode as a table. A resumed run continues the same W&B
    run (its id is kept in ``RUN/wandb_id``); offline runs stay in ``RUN/wandb/``.

    A failure of W&B while the run trains drops it (see :class:`Loggers`): it is the one backend
    that depends on the world outside (a server, a login), and the others keep the metrics."""

    COLUMNS = ["step", "observation", "valid_actions", "probabilities", "action", "reward"]
    where = "W&B"
    droppable = True

    def __init__(self, run_dir: Path, config: TrainConfig):
        import wandb

        problem = wandb_login_problem(config.logging.wandb_mode)
        if problem:
            raise GroundrlError(problem)
        self.wandb = wandb
        id_file = run_dir / "wandb_id"
        new = not id_file.exists()
        run_id = uuid.uuid4().hex[:16] if new else self._saved_id(id_file)
        id_file.write_text(run_id + "\n")
        settings = OmegaConf.to_container(OmegaConf.structured(config), enum_to_str=True)
        try:
            self.run = wandb.init(project=config.logging.wandb_project, entity=config.logging.wandb_entity,
                                  mode=config.logging.wandb_mode, dir=str(run_dir), id=run_id, resume="allow",
                                  name=run_dir.name, config=settings, settings=wandb.Settings(silent=True))
            # a resumed run may log again the decisions after its checkpoint: a step of its own would refuse them
            self.run.define_metric("decisions")
            self.run.define_metric("*", step_metric="decisions")
        except BaseException as error:
            if new:  # a run that never started leaves nothing of W&B's (the CLI then removes the folder)
                id_file.unlink(missing_ok=True)
                shutil.rmtree(run_dir / "wandb", ignore_errors=True)
            if not isinstance(error, Exception):  # Ctrl-C
                raise
            raise GroundrlError(f"W&B could not start its run ({type(error).__name__}: {_first_line(error)}); "
                                "check logging.wandb_project, wandb_entity and your login, or set "
                                "logging.wandb_mode=offline, or drop wandb from logging.backends") from error

    @staticmethod
    def _saved_id(id_file: Path) -> str:
        """The W&B run id a resumed run continues, or one line saying the file is damaged. Refused
        rather than replaced by a new id: the run's W&B history would go on in another W&B run
        unnoticed; deleting the file says that is wanted."""
        try:
            with id_file.open("rb") as file:
                run_id = file.read(200).decode("ascii").strip()
        except (OSError, UnicodeDecodeError):  # a folder, unreadable, or not text
            run_id = ""
        if not _WANDB_ID.fullmatch(run_id):
            raise GroundrlError(f"{id_file} is corrupt (not a W&B run id): restore it, or delete it to go on in a "
                                "new W&B run")
        return run_id

    def log(self, metrics: dict, episodes: list[list[dict]]) -> None:
        self.run.log(_numbers(metrics))
        for steps in episodes:
            table = self.wandb.Table(columns=self.COLUMNS, data=[
                [s["step"], s["observation"], " | ".join(s["valid_actions"]),
                 " | ".join(f"{p:.3f}" for p in s["probs"] or []), s["valid_actions"][s["action"]], s["reward"]]
                for s in steps])
            self.run.log({f"episode_{steps[0]['episode']}": table, "decisions": metrics["decisions"]})

    def close(self) -> None:
        self.run.finish()


class Loggers:
    """Every backend that is on, as one.

    A backend that is ``droppable`` (W&B) and fails is dropped with a warning, and training goes on:
    its records are a copy of what the others keep. The others' errors (a full disk under
    ``metrics.jsonl``, which plots, replays and exports read) stop the run."""

    def __init__(self, backends: list[Backend]):
        self.backends = backends

    def log(self, metrics: dict, episodes: list[list[dict]]) -> None:
        for backend in list(self.backends):
            try:
                backend.log(metrics, episodes)
            except Exception as error:
                if not getattr(backend, "droppable", False):
                    raise
                self._drop(backend, error)

    def _drop(self, backend: Backend, error: Exception) -> None:
        self.backends.remove(backend)
        kept = [b.where for b in self.backends]
        still = (f"the metrics are still in {' and '.join(kept)}" if kept else
                 "no other logging backend is on (logging.backends): later metrics are not logged")
        warnings.warn(f"{backend.where} failed ({type(error).__name__}: {_first_line(error)}): dropped from the "
                      f"logging backends for the rest of the run; {still}", stacklevel=3)
        try:
            backend.close()
        except Exception:  # noqa: BLE001 - it has failed already; what it says now adds nothing
            pass

    def close(self) -> None:
        for backend in self.backends:
            try:
                backend.close()
            except Exception as error:
                if not getattr(backend, "droppable", False):
                    raise
                others = " and ".join(b.where for b in self.backends if b is not backend)
                warnings.warn(f"{backend.where} failed to finish its run ({type(error).__name__}: "
                              f"{_first_line(error)}); it may lack the last records"
                              + (f", which {others} keep" if others else ""), stacklevel=2)


def open_loggers(config: TrainConfig, run_dir: str | Path, resumed_at: int = 0) -> Loggers:
    """The backends of ``config.logging.backends`` for the run folder ``run_dir``, a run resumed
    after ``resumed_at`` decisions (0: a new run)."""
    run_dir = Path(run_dir)
    opened: dict[str, Backend] = {}
    # W&B first: it is the one that can fail to start (a login, a server), and a new run that fails
    # before the others wrote anything leaves a folder the command line removes
    names = sorted(config.logging.backends, key=lambda name: name != "wandb")
    try:
        for name in names:
            opened[name] = (TensorBoard(run_dir, resumed_at) if name == "tensorboard" else
                            JsonLines(run_dir) if name == "jsonl" else WeightsAndBiases(run_dir, config))
    except BaseException:
        Loggers(list(opened.values())).close()
        raise
    return Loggers([opened[name] for name in config.logging.backends])
