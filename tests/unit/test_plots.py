"""Learning-curve plots, from synthetic run folders."""

from __future__ import annotations

import errno
import json
import re
import tracemalloc
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure

from groundrl.cli import main
from groundrl.errors import GroundrlError
from groundrl.eval.plots import TrainingRun, curve_tables, draw_learning_curves, group_runs, learning_curves, plot_runs
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


def test_a_finished_run_draws_its_curves_and_a_failure_to_draw_is_a_warning(runs, tmp_path):
    assert draw_learning_curves(runs[0]) == runs[0] / "learning_curves.png"
    assert (runs[0] / "learning_curves.png").is_file()
    with pytest.warns(UserWarning, match=r"learning_curves.png was not drawn \(GroundrlError: .* \(no metrics.jsonl\)"):
        assert draw_learning_curves(tmp_path) is None


def test_a_large_metrics_file_plots_in_little_memory(tmp_path):
    # 24 MB of updates with many keys not plotted: the plot keeps a number per update and key it
    # draws, not the records (reading them all took over 100 MB here, 5-10 times the file)
    folder = tmp_path / "long"
    folder.mkdir()
    others = {f"other_{k}": 0.123456789 * k for k in range(16)}
    with open(folder / "metrics.jsonl", "w") as file:
        for update in range(1, 40_001):
            file.write(json.dumps({"update": update, "decisions": 128 * update, "wall_seconds": 0.5 * update,
                                   "success_rate": update / 40_000, **others, "note": "x" * 100}) + "\n")
    assert (folder / "metrics.jsonl").stat().st_size > 20 * 2**20
    plt.close(learning_curves([folder], metrics=["success_rate"]))  # matplotlib's first figure fills caches
    tracemalloc.start()
    try:
        path = plot_runs([folder], tmp_path / "long.png", metrics=["success_rate"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert path.is_file() and peak < 16 * 2**20


def test_an_existing_folder_as_out_is_refused_and_a_name_is_kept_as_it_is(runs, tmp_path, capsys):
    figures = tmp_path / "figures"
    figures.mkdir()
    with pytest.raises(SystemExit) as exit_info:
        main(["plot", str(runs[3]), "--out", str(figures)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (f"error: {figures} is a folder: give the image file to write, e.g. "
                                       f"{figures / 'learning_curves.png'}\n")
    assert list(tmp_path.glob("figures*")) == [figures] and not any(figures.iterdir())  # no figures.png
    # a name without a suffix is the file written (PNG), not NAME.png, and the report says so
    with pytest.raises(SystemExit):
        main(["plot", str(runs[3]), "--out", str(tmp_path / "curves")])
    assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'curves'}"
    assert (tmp_path / "curves").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not (tmp_path / "curves.png").exists()
    assert plot_runs(runs[3:], tmp_path / "curves.svg").read_text().startswith("<?xml")


@pytest.mark.parametrize("case", ["under a file", "dangling link", "read-only file", "read-only folder",
                                  "unknown suffix"])
def test_an_out_that_cannot_be_written_is_one_line_and_leaves_nothing(runs, tmp_path, capsys, case, unwritable):
    place = tmp_path / "place"
    place.mkdir()
    out, message = (place / "curves.v2", "no image format .v2") if case == "unknown suffix" else \
        unwritable(place, case, "x.png")
    before = sorted(place.rglob("*"))
    with pytest.raises(SystemExit) as exit_info:
        main(["plot", str(runs[3]), "--out", str(out)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert sorted(place.rglob("*")) == before


def test_a_write_that_fails_midway_leaves_the_old_file_whole(runs, tmp_path, monkeypatch):
    out = tmp_path / "curves.png"
    out.write_bytes(b"the old figure")

    def full_disk(figure, path, **options):
        Path(path).write_bytes(b"\x89PNG half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", full_disk)
    with pytest.raises(GroundrlError, match=f"^cannot write {out}: No space left on device$"):
        plot_runs(runs[3:], out)
    assert out.read_bytes() == b"the old figure" and [p.name for p in tmp_path.iterdir() if p.is_file()] == [out.name]


def test_values_that_are_not_numbers_are_not_drawn_and_damaged_lines_are_warned_of(tmp_path):
    folder = tmp_path / "odd"
    folder.mkdir()
    lines = [json.dumps({"decisions": 1, "wall_seconds": 1, "success_rate": 0.5}),
             json.dumps({"decisions": 2, "wall_seconds": 2, "success_rate": "high"}),
             json.dumps({"decisions": 3, "wall_seconds": 3, "success_rate": [1, 2]}),
             json.dumps({"decisions": 4, "wall_seconds": 4, "success_rate": {"a": 1}}),
             json.dumps({"decisions": 5, "wall_seconds": 5, "success_rate": True}),
             json.dumps({"decisions": 6, "wall_seconds": 6, "success_rate": 10**400}),
             json.dumps({"decisions": "7", "wall_seconds": 7, "success_rate": 0.7}),
             '{"decisions": 8, "success_rate": ' + "[" * 100_000 + "]" * 100_000 + "}",
             "[" * 100_000,
             "[1, 2]",
             json.dumps({"decisions": 9, "wall_seconds": 9, "success_rate": 0.9})]
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.warns(UserWarning, match=r"skipped 3 damaged line\(s\) \(line 8, 9, 10\)"):
        line = learning_curves([folder], metrics=["success_rate"]).axes[0].get_lines()[0]
    assert line.get_xdata().tolist() == [1, 9] and line.get_ydata().tolist() == [0.5, 0.9]
    (folder / "metrics.jsonl").write_text(json.dumps({"decisions": 1, "success_rate": "all"}) + "\n")
    with pytest.raises(GroundrlError, match="none of the runs logged success_rate"):
        learning_curves([folder], metrics=["success_rate"])


@pytest.mark.parametrize("config, what", [
    (b"- a list\n- not settings\n", "is corrupt (not a mapping of settings)"),
    (b"\x00\xff\xfe garbage \x89PNG", "is not text (UTF-8)"),
    (b"[" * 100_000, "nests deeper than 64 levels")], ids=["a list", "binary", "nested deep"])
def test_a_corrupt_config_is_one_line(runs, capsys, config, what):
    (runs[3] / "config.yaml").write_bytes(config)
    with pytest.raises(SystemExit) as exit_info:
        main(["plot", str(runs[3]), "--out", str(runs[3] / "x.png")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {runs[3] / 'config.yaml'} {what}") and err.count("\n") == 1
    assert not (runs[3] / "x.png").exists()


def test_the_curves_as_tables_by_stretches_of_decisions(runs):
    """Each stretch of 256 decisions holds two updates of 128: a metric is their mean, a seed's, then
    the experiment's mean over its seeds beside each seed's value (seed 2 logged no success at update 4)."""
    (title, columns, rows), = curve_tables(runs, 256, metrics=["entropy"])
    assert title == "policy entropy (entropy) by 256 decisions"
    assert columns == ["decisions", "ppo.policy_lr=0.0001 (3 seeds)", "ppo.policy_lr=0.0003"]
    assert [row[0] for row in rows] == ["0-256", "256-512", "512-768", "768-1,024", "1,024-1,280"]
    # entropy is 1.5 - update / 10, the same for every seed: updates 3 and 4 give 1.15
    assert rows[1][1:] == ["1.15: 1.15 / 1.15 / 1.15", "1.15"]
    success = [json.loads(line).get("success_rate") for line in (runs[1] / "metrics.jsonl").read_text().splitlines()]
    (_, _, rows), = curve_tables(runs[1:2], 256, metrics=["success_rate"])
    assert rows[1] == ["256-512", f"{success[2]:.2f}"]  # update 4 logged none: update 3 alone
    with pytest.raises(GroundrlError, match="1 decision or more"):
        curve_tables(runs, 0)


def test_a_success_rate_is_weighted_by_the_episodes_each_update_finished(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    lines = [{"decisions": 128, "wall_seconds": 1, "episodes": 0},  # no episode ended: no rate
             {"decisions": 256, "wall_seconds": 2, "episodes": 1, "success_rate": 1.0},
             {"decisions": 384, "wall_seconds": 3, "episodes": 3, "success_rate": 0.0},
             {"decisions": 512, "wall_seconds": 4, "episodes": 2, "success_rate": 0.5}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (_, _, rows), = curve_tables([run], 512, metrics=["success_rate"])
    assert rows == [["0-512", "0.33 (6 ep.)"]]  # (1 + 0 + 1) successes of 6 episodes, not the mean 0.5


def test_a_run_made_before_a_setting_existed_stands_at_its_default(runs, tmp_path):
    """An older config.yaml lacks the settings added since: they read as their defaults, so it and a
    newer run are one experiment, and a curve is named by what a run chose."""
    old = fake_run(tmp_path / "old", 4, 1e-4)
    text = (old / "config.yaml").read_text()
    assert "critic_time: false" in text
    (old / "config.yaml").write_text(re.sub(r"\n *critic_time: false", "", text))
    groups = group_runs([TrainingRun.read(path) for path in [*runs[:3], old]])
    assert list(groups) == ["FoodPreparation-v0 (4 seeds)"]  # one experiment: named by its task
    timed = fake_run(tmp_path / "timed", 1, 1e-4)
    (timed / "config.yaml").write_text(text.replace("critic_time: false", "critic_time: true"))
    groups = group_runs([TrainingRun.read(path) for path in [old, timed]])
    assert list(groups) == ["agent.llm.critic_time=False", "agent.llm.critic_time=True"]


def test_the_cli_prints_the_tables_before_it_draws(runs, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["plot", *map(str, runs), "--table", "512", "--metric", "entropy", "--out", str(tmp_path / "c.png")])
    assert exit_info.value.code in (0, None)
    out = capsys.readouterr().out
    assert "policy entropy (entropy) by 512 decisions" in out and "1.25: 1.25 / 1.25 / 1.25" in out
    assert (tmp_path / "c.png").is_file()
    with pytest.raises(SystemExit) as exit_info:
        main(["plot", str(runs[0]), "--table", "0"])
    assert exit_info.value.code == 2
