"""Where a training run's records go: TensorBoard, JSON lines, Weights & Biases (``logging.backends``).

The trainer hands each update's metrics and the episodes it recorded to :func:`open_loggers`'
:class:`Loggers`, which hands them on to every backend that is on; nothing else in groundrl knows
which those are. Every backend gets the same metrics (the keys of ``metrics.jsonl``) with the
decisions played so far as their step.
"""

from __future__ import annotations

import math
import os
import uuid
from pathlib import Path
from typing import Protocol

from omegaconf import OmegaConf

from groundrl import runs
from groundrl.errors import GroundrlError
from groundrl.train.config import TrainConfig


class Backend(Protocol):
    """One destination of a run's records."""

    def log(self, metrics: dict, episodes: list[list[dict]]) -> None:
        """An update's metrics (``decisions``: the step) and the episodes it recorded (steps of
        ``trajectories.jsonl``)."""

    def close(self) -> None: ...


def _numbers(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not math.isnan(v)}


class TensorBoard:
    """Scalars ``train/KEY`` and each recorded episode as a Markdown table in the text tab."""

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
    run (its id is kept in ``RUN/wandb_id``); offline runs stay in ``RUN/wandb/``."""

    COLUMNS = ["step", "observation", "valid_actions", "probabilities", "action", "reward"]

    def __init__(self, run_dir: Path, config: TrainConfig):
        import wandb

        problem = wandb_login_problem(config.logging.wandb_mode)
        if problem:
            raise GroundrlError(problem)
        self.wandb = wandb
        id_file = run_dir / "wandb_id"
        run_id = id_file.read_text().strip() if id_file.is_file() else uuid.uuid4().hex[:16]
        id_file.write_text(run_id + "\n")
        settings = OmegaConf.to_container(OmegaConf.structured(config), enum_to_str=True)
        self.run = wandb.init(project=config.logging.wandb_project, entity=config.logging.wandb_entity,
                              mode=config.logging.wandb_mode, dir=str(run_dir), id=run_id, resume="allow",
                              name=run_dir.name, config=settings, settings=wandb.Settings(silent=True))
        # a resumed run may log again the decisions after its checkpoint: a step of its own would refuse them
        self.run.define_metric("decisions")
        self.run.define_metric("*", step_metric="decisions")

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
    """Every backend that is on, as one."""

    def __init__(self, backends: list[Backend]):
        self.backends = backends

    def log(self, metrics: dict, episodes: list[list[dict]]) -> None:
        for backend in self.backends:
            backend.log(metrics, episodes)

    def close(self) -> None:
        for backend in self.backends:
            backend.close()


def open_loggers(config: TrainConfig, run_dir: str | Path, resumed_at: int = 0) -> Loggers:
    """The backends of ``config.logging.backends`` for the run folder ``run_dir``, a run resumed
    after ``resumed_at`` decisions (0: a new run)."""
    run_dir = Path(run_dir)
    opened: list[Backend] = []
    try:
        for name in config.logging.backends:
            opened.append(TensorBoard(run_dir, resumed_at) if name == "tensorboard" else
                          JsonLines(run_dir) if name == "jsonl" else WeightsAndBiases(run_dir, config))
    except BaseException:
        Loggers(opened).close()
        raise
    return Loggers(opened)
