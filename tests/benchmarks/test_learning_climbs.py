"""benchmarks/learning_climbs.py: its table reads the kept records, its arguments are checked."""

import json

import pytest


@pytest.fixture(scope="module")
def climbs(load_benchmark):
    return load_benchmark("learning_climbs")


def record(design, seed, curve, bar=0.9):
    reached = next((d for d, rate in curve if rate >= bar), None)
    return {"design": design, "seed": seed, "bar": bar, "budget": 6400, "greedy": False, "curve": curve,
            "reached": reached, "seconds": 60.0, "cpu": "test"}


def test_the_table_says_where_each_seed_reached_its_bar(climbs, tmp_path, capsys):
    for seed, curve in ((1, [[0, 0.15], [640, 0.91]]), (2, [[0, 0.2], [640, 0.5], [6400, 0.8]])):
        (tmp_path / f"full-shared-seed{seed}.json").write_text(json.dumps(record("full-shared", seed, curve)))
    assert climbs.main(["--table-only", "--out", str(tmp_path), "--seeds", "1", "2"]) == 0
    table = capsys.readouterr().out
    assert "| full-shared | 0.9 | 6,400 | 640 (0.91) | not in budget (0.80) | 60 |" in table
    assert "lora-frozen" not in table  # no record, no row


def test_a_kept_record_is_not_run_again(climbs, tmp_path, monkeypatch, capsys):
    (tmp_path / "npae-seed1.json").write_text(json.dumps(record("npae", 1, [[0, 0.2], [4096, 0.6]], bar=0.5)))
    monkeypatch.setattr(climbs, "climb", lambda *args, **kwargs: pytest.fail("ran a kept climb"))
    assert climbs.main(["--designs", "npae", "--seeds", "1", "--out", str(tmp_path)]) == 0
    assert "| npae | 0.5 |" in capsys.readouterr().out


def test_every_climb_is_valid_settings(climbs):
    from groundrl.train.config import load_config

    for name, spec in climbs.CLIMBS.items():
        config = load_config(spec.preset, overrides=[*spec.overrides, f"rollout.total_decisions={spec.budget}"])
        assert config.device == "cpu", name
        assert spec.every % (config.rollout.num_envs * config.rollout.num_steps) == 0, name  # whole updates


@pytest.mark.parametrize("arguments, message", [(["--designs", "ppo-from-mars"], "--designs: no 'ppo-from-mars'"),
                                                (["--seeds", "-1"], "--seeds must be 0 or more"),
                                                (["--out", __file__], "is a file: give a folder")])
def test_bad_arguments_are_one_line(climbs, capsys, arguments, message):
    with pytest.raises(SystemExit) as exit_info:
        climbs.main(arguments)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
