"""Learning curves of training runs, as PNG.

Each metric of ``metrics.jsonl`` is drawn against decisions and against wall time (the run's own
training seconds). Runs whose configurations differ only in their seed are one curve: the mean over
the seeds, with a shaded band from the lowest to the highest seed; runs that differ otherwise are
separate curves, labelled by the settings that set them apart.

    from groundrl.eval.plots import plot_runs
    plot_runs(["runs/a-seed1", "runs/a-seed2", "runs/b"], "curves.png", smoothing=0.6)

or ``groundrl plot runs/a-seed1 runs/a-seed2 runs/b --smooth 0.6 --out curves.png``. A training run
draws its own ``learning_curves.png`` when it ends.
"""

from __future__ import annotations

import functools
import math
import warnings
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from groundrl.errors import GroundrlError
from groundrl.runs import check_output, finite_number, iter_jsonl, read_settings, write_whole
from groundrl.train.config import TrainConfig, to_yaml

METRICS = {
    "success_rate": "success rate",
    "episode_return": "episode return",
    "entropy": "policy entropy",
    "approx_kl": "approx. KL of an update",
    "value_loss": "value loss",
    "q_loss": "Q loss (DRRN)",
}
"""The metrics plotted by default (those a run logged), with their axis labels."""

X_AXES = {"decisions": "decisions", "wall_seconds": "training wall time (s)"}

_IDENTITY = ("agent.kind", "env", "model", "agent.actor", "agent.critic", "agent.policy", "agent.normalization")

# settings that do not make two runs different experiments
_NOT_EXPERIMENT = ("seed", "runs_dir", "progress", "checkpoint_every", "keep_checkpoints", "device", "distributed.")


@dataclass
class TrainingRun:
    """A run folder's resolved settings (flattened, ``ppo.policy_lr``) and the per-update values of
    the metrics read (and of the x axes), as numbers: ``nan`` where an update did not log one, or
    logged something else than a finite number."""

    path: Path
    settings: dict
    columns: dict[str, np.ndarray]

    @classmethod
    def read(cls, path: str | Path, metrics: Sequence[str] = tuple(METRICS)) -> TrainingRun:
        """Read the x axes and ``metrics`` of ``path``'s ``metrics.jsonl``, a line at a time: a
        number per update and key is all that is kept, so a file of any size reads in little memory.
        Raises :class:`GroundrlError` (one line) when ``path`` is not a training run folder, or its
        ``config.yaml`` is corrupt; damaged lines are skipped with a warning."""
        path = Path(path)
        if not (path / "metrics.jsonl").is_file():
            raise GroundrlError(f"{path} is not a training run folder (no metrics.jsonl): give the folders "
                                "`groundrl train` wrote")
        settings = {**_default_settings(), **_flatten(read_settings(path / "config.yaml"))} \
            if (path / "config.yaml").is_file() else {}
        columns = {key: array("d") for key in dict.fromkeys([*X_AXES, *metrics])}  # 8 bytes a value
        for record in iter_jsonl(path / "metrics.jsonl"):
            for key, column in columns.items():
                column.append(finite_number(record.get(key)))
        return cls(path, _flatten(settings), {key: np.frombuffer(column) for key, column in columns.items()})

    def series(self, x: str, y: str) -> tuple[np.ndarray, np.ndarray]:
        """``(x, y)`` over the updates that logged ``x`` (``nan`` where the update did not log ``y``)."""
        xs = self.columns[x]
        ys = self.columns.get(y, np.full(xs.shape, np.nan))
        logged = ~np.isnan(xs)
        return xs[logged], ys[logged]

    def logged(self, metric: str) -> bool:
        return metric in self.columns and not np.isnan(self.columns[metric]).all()


def group_runs(runs: Sequence[TrainingRun]) -> dict[str, list[TrainingRun]]:
    """Runs grouped by experiment (the settings but the seed), each group labelled by what sets it
    apart from the others (or by its environment when there is one group)."""
    def experiment(run: TrainingRun) -> tuple:
        return tuple(sorted((k, repr(v)) for k, v in run.settings.items() if not k.startswith(_NOT_EXPERIMENT)))

    groups: dict[tuple, list[TrainingRun]] = {}
    for run in runs:
        groups.setdefault(experiment(run), []).append(run)
    keys = list(groups)
    differing = sorted({k for key in keys for k, _ in key} if len(keys) > 1 else set())
    differing = [k for k in differing if len({dict(key).get(k) for key in keys}) > 1]
    # what a reader recognizes first (the agent, the task) names a curve; three settings at most
    differing.sort(key=lambda k: (k not in _IDENTITY, _IDENTITY.index(k) if k in _IDENTITY else 0))
    more = len(differing) > 3
    differing = differing[:3]
    labelled = {}
    for key in keys:
        members = groups[key]
        if differing:
            settings = members[0].settings
            label = ", ".join(f"{k}={_short(settings.get(k))}" for k in differing) + (", ..." if more else "")
        else:
            label = _short(members[0].settings.get("env", members[0].path.name))
        if len(members) > 1:
            label += f" ({len(members)} seeds)"
        while label in labelled:  # distinct experiments whose differing keys print alike
            label += "'"
        labelled[label] = members
    return labelled


def smooth(values: np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's smoothing: a debiased exponential moving average with ``weight`` in [0, 1)
    (0 keeps the values); ``nan`` (an update without the metric) is skipped, not spread.

    >>> smooth(np.array([0.0, 1.0, 1.0]), 0.5).round(3).tolist()
    [0.0, 0.667, 0.857]
    """
    if weight <= 0:
        return values
    out, average, total_weight = np.full_like(values, np.nan), 0.0, 0.0
    for i, value in enumerate(values):
        if math.isnan(value):
            continue
        average = weight * average + (1 - weight) * value
        total_weight = weight * total_weight + (1 - weight)
        out[i] = average / total_weight
    return out


def learning_curves(runs: Sequence[str | Path], smoothing: float = 0.0, metrics: Sequence[str] | None = None):
    """The figure: a row per metric (those any run logged, of ``metrics`` or :data:`METRICS`), a
    column per x axis (decisions, wall time), a line per experiment and a band per experiment with
    several seeds. Returns a matplotlib ``Figure``."""
    import matplotlib  # start-up time: matplotlib, only when plotting

    matplotlib.use("Agg")  # files only, no screen needed
    import matplotlib.pyplot as plt

    if not 0 <= smoothing < 1:
        raise GroundrlError(f"smoothing must be in [0, 1), not {smoothing}")
    if not runs:
        raise GroundrlError("no run folders given")
    wanted = list(metrics) if metrics else list(METRICS)
    read = [TrainingRun.read(path, wanted) for path in runs]
    logged = [m for m in wanted if any(run.logged(m) for run in read)]
    if not logged:
        raise GroundrlError(f"none of the runs logged {', '.join(wanted)} (see their metrics.jsonl)")
    groups = group_runs(read)
    figure, axes = plt.subplots(len(logged), len(X_AXES), figsize=(5.5 * len(X_AXES), 2.6 * len(logged)),
                                squeeze=False, constrained_layout=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for row, metric in enumerate(logged):
        for column, (x_key, x_label) in enumerate(X_AXES.items()):
            ax = axes[row][column]
            for k, (label, members) in enumerate(groups.items()):
                x, mean, low, high = _aggregate([run.series(x_key, metric) for run in members], smoothing)
                if x.size == 0:
                    continue
                color = colors[k % len(colors)]
                ax.plot(x, mean, color=color, label=label, linewidth=1.6)
                if len(members) > 1:
                    ax.fill_between(x, low, high, color=color, alpha=0.2, linewidth=0)
            ax.set_xlabel(x_label)
            ax.set_ylabel(METRICS.get(metric, metric))
            ax.grid(alpha=0.3)
    # below the axes, not on them: a legend inside the first axes hides the curves it names
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=min(2, len(labels)), fontsize="small")
    seeds = sum(len(m) for m in groups.values())
    figure.suptitle(f"{len(groups)} experiment{'s' * (len(groups) > 1)}, {seeds} run{'s' * (seeds > 1)}"
                    + (f"; smoothing {smoothing:g}" if smoothing else "") + "; bands: lowest to highest seed",
                    fontsize="medium")
    return figure


def curve_tables(runs: Sequence[str | Path], every: int,
                 metrics: Sequence[str] | None = None) -> list[tuple[str, list[str], list[list[str]]]]:
    """The learning curves as text, for a terminal: per metric logged (of ``metrics`` or
    :data:`METRICS`), ``(title, column labels, rows)``, a row per stretch of ``every`` decisions (an
    update counts in the stretch its last decision falls in) and a column per experiment (as
    :func:`learning_curves` groups them). A run's value over a stretch: its success rate over the
    episodes its updates finished there (each update's rate weighted by its episodes, and their count
    beside it: a rate over few episodes is noise), any other metric's mean over its updates. An
    experiment of several seeds shows their mean, then each seed's value in the order given.

    >>> import tempfile, json; from pathlib import Path
    >>> run = Path(tempfile.mkdtemp())
    >>> rows = [{"decisions": 128 * u, "wall_seconds": u, "episodes": u, "success_rate": 0.5 * (u > 2)}
    ...         for u in range(1, 5)]
    >>> _ = (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in rows))
    >>> (title, columns, table), = curve_tables([run], every=256, metrics=["success_rate"])
    >>> table  # updates 1-2 finished 3 episodes, none successful; updates 3-4 finished 7, half of them
    [['0-256', '0.00 (3 ep.)'], ['256-512', '0.50 (7 ep.)']]
    """
    if every < 1:
        raise GroundrlError(f"a stretch of the table is 1 decision or more, not {every}")
    if not runs:
        raise GroundrlError("no run folders given")
    wanted = list(metrics) if metrics else list(METRICS)
    read = [TrainingRun.read(path, [*wanted, "episodes"]) for path in runs]
    groups = group_runs(read)
    tables = []
    for metric in (m for m in wanted if any(run.logged(m) for run in read)):
        binned = {label: [_stretches(run, metric, every) for run in members] for label, members in groups.items()}
        last = max((stretch for runs_ in binned.values() for bins in runs_ for stretch in bins), default=-1)
        rows = []
        for stretch in range(last + 1):
            row = [f"{stretch * every:,}-{(stretch + 1) * every:,}"]
            for seeds in binned.values():
                found = [bins.get(stretch) for bins in seeds]
                values = [value for value, _ in filter(None, found)]
                if not values:
                    row.append("")
                elif len(seeds) == 1:
                    value, episodes = found[0]
                    row.append(f"{value:.2f}" + (f" ({episodes:g} ep.)" if episodes is not None else ""))
                else:
                    each = " / ".join("-" if f is None else f"{f[0]:.2f}" for f in found)
                    row.append(f"{np.mean(values):.2f}: {each}")
            rows.append(row)
        named = f"{METRICS[metric]} ({metric})" if metric in METRICS else metric
        tables.append((f"{named} by {every:,} decisions", ["decisions", *binned], rows))
    if not tables:
        raise GroundrlError(f"none of the runs logged {', '.join(wanted)} (see their metrics.jsonl)")
    return tables


def _stretches(run: TrainingRun, metric: str, every: int) -> dict[int, tuple[float, float | None]]:
    """``{stretch: (value, episodes or None)}`` of one run (see :func:`curve_tables`)."""
    decisions, values = run.series("decisions", metric)
    _, episodes = run.series("decisions", "episodes")
    out: dict[int, tuple[float, float | None]] = {}
    for stretch in np.unique((decisions - 1) // every).astype(int):
        inside = ((decisions - 1) // every == stretch) & ~np.isnan(values)
        if metric == "success_rate" and not np.isnan(episodes).all():  # (runs that log no episode count: a mean)
            counted = inside & (np.nan_to_num(episodes) > 0)
            if counted.any():
                weights = episodes[counted]
                out[int(stretch)] = (float(np.average(values[counted], weights=weights)), float(weights.sum()))
        elif inside.any():
            out[int(stretch)] = (float(values[inside].mean()), None)
    return out


def plot_runs(runs: Sequence[str | Path], out: str | Path, smoothing: float = 0.0,
              metrics: Sequence[str] | None = None) -> Path:
    """Write the :func:`learning_curves` of ``runs`` to the image file ``out``; returns the path
    written.

    ``out`` is the file written, under that very name: PNG, or the format its suffix names
    (``.pdf``, ``.svg``, ...); a name without a suffix is PNG too (no ``.png`` is added). An
    existing folder is refused, as is any ``out`` that cannot be written (a read-only file, a
    link to nothing, a place under a file): one line, before any run is read. The figure goes to a
    temporary file beside ``out``, renamed once whole: a failure leaves no part of a file behind."""
    import matplotlib.pyplot as plt  # start-up time: matplotlib, only when plotting
    from matplotlib.backend_bases import FigureCanvasBase

    target = check_output(out, "image", "learning_curves.png")
    image_format = target.suffix[1:].lower() or "png"
    if image_format not in FigureCanvasBase.get_supported_filetypes():
        raise GroundrlError(f"{out}: no image format .{image_format}; end the name in .png (or .pdf, .svg, ...)")
    figure = learning_curves(runs, smoothing, metrics)
    try:
        write_whole(target, lambda temporary: figure.savefig(temporary, format=image_format, dpi=110))
    finally:
        plt.close(figure)
    return target


def draw_learning_curves(run_dir: str | Path) -> Path | None:
    """``learning_curves.png`` in a finished training run's folder; returns it, or None with a
    warning saying why it was not drawn: a plotting failure never costs the run."""
    try:
        return plot_runs([run_dir], Path(run_dir) / "learning_curves.png")
    except Exception as error:  # noqa: BLE001 - the run and its metrics are safe; say why the figure is not
        warnings.warn(f"learning_curves.png was not drawn ({type(error).__name__}: {error}); "
                      f"try `groundrl plot {run_dir}`", stacklevel=2)
        return None


def _aggregate(series: list[tuple[np.ndarray, np.ndarray]], smoothing: float):
    """One experiment's curve: its seeds' (smoothed) values on a common x grid, their mean, lowest
    and highest. Seeds on the same x (decisions, usually) are compared as they are; otherwise (wall
    time) they are interpolated over the range they share."""
    series = [(x, smooth(y, smoothing)) for x, y in series]
    series = [(x[~np.isnan(y)], y[~np.isnan(y)]) for x, y in series]
    series = [(x, y) for x, y in series if x.size]
    if not series:
        return np.array([]), np.array([]), np.array([]), np.array([])
    if len(series) == 1:
        x, y = series[0]
        return x, y, y, y
    if all(x.shape == series[0][0].shape and np.array_equal(x, series[0][0]) for x, _ in series):
        grid = series[0][0]
        values = np.stack([y for _, y in series])
    else:
        start, stop = max(x[0] for x, _ in series), min(x[-1] for x, _ in series)
        if start > stop:  # the seeds share no range: nothing to average
            return np.array([]), np.array([]), np.array([]), np.array([])
        grid = np.linspace(start, stop, 200) if stop > start else np.array([start])
        values = np.stack([np.interp(grid, x, y) for x, y in series])
    return grid, values.mean(0), values.min(0), values.max(0)


def _short(value) -> str:
    return str(value).removeprefix("groundrl/")


@functools.cache
def _default_settings() -> dict:
    """Every setting at its default, as a ``config.yaml`` writes it: what a run's file made before
    a setting existed stands for (so that such a run and a newer one at that default are one
    experiment, and a curve is labelled by what was chosen, not by what was added since)."""
    return _flatten(yaml.safe_load(to_yaml(TrainConfig())))


def _flatten(settings: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


__all__ = ["METRICS", "TrainingRun", "curve_tables", "group_runs", "learning_curves", "plot_runs", "smooth"]
