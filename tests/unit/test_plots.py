"""Learning-curve plots, from synthetic run folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import PolyCollection

from groundrl.cli import main
from groundrl.errors import GroundrlError
from groundrl.eval.plots import learning_curves, plot_runs
from groundrl.train.config import load_config, to_yaml

LOGGED = ("success_rate", "episode_return", "entropy", "approx_kl", "value_loss")


def fake_run(folder: Path, seed: int, policy_lr: float, updates: int = 10, seconds_per_update: float = 1.0) -> Path:
    """A run folder as `groundrl train` writes it: config.yaml and a metrics.jsonl line per update."""
    folder.mkdir(parents=True)
    config = load_config("twosome", overrides=[f"seed={seed}", f"ppo.policy_lr={policy_lr}"])
    (folder / "config.yaml").write_text(to_yaml(config))
    rng = np.random.default_rng(seed)
    lines = []
    for update in range(1, updates + 1):
        progress = update / updates
        lines.append({"update": update, "decisions": 128 * update, "wall_seconds": seconds_per_update * update,
                      "success_rate": min(1.0, progress + 0.05 * rng.standard_normal()), "episode_return": progress,
                      "entropy": 1.5 - progress, "approx_kl": 0.01 * progress, "value_loss": 0.1 / update})
    if seed == 2:  # an update without finished episodes logs no success rate
        del lines[3]["success_rate"]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


@pytest.fixture
def runs(tmp_path):
    """One experiment with three seeds (their wall times differ), another with one."""
    seeds = [fake_run(tmp_path / f"a{seed}", seed, 1e-4, seconds_per_update=1.0 + 0.1 * seed) for seed in (1, 2, 3)]
    return seeds + [fake_run(tmp_path / "b", 1, 3e-4)]


def test_one_line_per_experiment_and_a_band_for_its_seeds(runs):
    figure = learning_curves(runs)
    axes = np.array(figure.axes).reshape(len(LOGGED), 2)
    for row, metric in zip(axes, LOGGED):
        for ax in row:
            assert len(ax.get_lines()) == 2, metric
            assert sum(isinstance(c, PolyCollection) for c in ax.collections) == 1, metric  # only a has seeds
    (legend,) = figure.legends  # one legend, under the axes
    labels = [text.get_text() for text in legend.get_texts()]
    assert labels == ["ppo.policy_lr=0.0001 (3 seeds)", "ppo.policy_lr=0.0003"]

    # against decisions the seeds share their x: the line is their mean (seed 2's gap left out of it)
    returns = [json.loads(line)["episode_return"] for line in (runs[0] / "metrics.jsonl").read_text().splitlines()]
    line = axes[1][0].get_lines()[0]
    np.testing.assert_allclose(line.get_xdata(), 128 * np.arange(1, 11))
    np.testing.assert_allclose(line.get_ydata(), returns)  # the three seeds log the same returns
    # against wall time they do not: interpolated over the range all three cover
    wall = axes[2][1].get_lines()[0].get_xdata()
    assert wall[0] == pytest.approx(1.3) and wall[-1] == pytest.approx(11.0)


def test_smoothing_and_the_metrics_asked_for(runs):
    raw = learning_curves(runs[3:], metrics=["value_loss"]).axes[0].get_lines()[0].get_ydata()
    smoothed = learning_curves(runs[3:], smoothing=0.9, metrics=["value_loss"]).axes[0].get_lines()[0].get_ydata()
    assert raw[0] == smoothed[0] and smoothed[-1] > raw[-1] * 2  # the average lags the falling loss
    assert len(learning_curves(runs, metrics=["entropy", "q_loss"]).axes) == 2  # q_loss: not logged, no row
    with pytest.raises(GroundrlError, match="none of the runs logged q_loss"):
        learning_curves(runs, metrics=["q_loss"])


def test_plot_writes_a_png_and_the_cli_says_where(runs, tmp_path, capsys, monkeypatch):
    path = plot_runs(runs, tmp_path / "figures" / "curves.png", smoothing=0.5)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(SystemExit) as exit_info:
        main(["plot", str(runs[3])])  # one run: the figure goes into its folder
    assert exit_info.value.code in (0, None)
    assert (runs[3] / "learning_curves.png").is_file() and "learning_curves.png" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        main(["plot", *map(str, runs), "--smooth", "0.6"])
    assert (tmp_path / "learning_curves.png").is_file()


def test_a_folder_that_is_not_a_run_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["plot", str(tmp_path)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == (f"error: {tmp_path} is not a training run folder (no metrics.jsonl): "
                                               "give the folders `groundrl train` wrote")
