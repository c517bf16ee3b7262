"""benchmarks/sil_speed.py: both settings imitate the same kept episodes, and scoring each drawn
state once scores fewer states than scoring every draw."""

from __future__ import annotations

import json

import pytest


def test_the_sil_speed_benchmark_scores_fewer_states_each_once(load_benchmark, capsys, tmp_path):
    out = tmp_path / "speed.json"
    assert load_benchmark("sil_speed").main(["--model", "tiny-llama", "--rounds", "1", "--json", str(out),
                                             "agent.llm.train_layers=1", "sil.steps=2"]) == 0
    table = capsys.readouterr().out
    assert "kept episodes: 16" in table and "2 steps of 32 draws" in table
    rows = {row["setting"]: row for row in json.loads(out.read_text())}
    assert rows["every draw"]["speed_up"] == 1.0
    assert rows["every draw"]["states_per_step"] > 1.1 * rows["each state once"]["states_per_step"] > 0


def test_the_sil_speed_benchmark_compares_the_rows_settings_against_others(load_benchmark, capsys, tmp_path):
    out = tmp_path / "speed.json"
    assert load_benchmark("sil_speed").main(["--model", "tiny-llama", "--rounds", "1", "--json", str(out),
                                             "--against", "ppo.micro_batch_size=8", "--",
                                             "agent.llm.train_layers=1", "sil.steps=1"]) == 0
    rows = [row["setting"] for row in json.loads(out.read_text())]
    assert rows == ["row's settings", "ppo.micro_batch_size=8"]
    assert "ppo.micro_batch_size=8" in capsys.readouterr().out


def test_the_sil_speed_benchmark_refuses_no_rounds(load_benchmark, capsys):
    with pytest.raises(SystemExit) as error:
        load_benchmark("sil_speed").main(["--rounds", "0"])
    assert error.value.code == 2 and "--rounds must be 1 or more" in capsys.readouterr().err


@pytest.mark.parametrize("arguments, says", [
    (["--memory", "MISSING"], "--memory: no file"),
    (["--memory", "BAD"], "is not a self-imitation memory"),
    (["--memory", "EMPTY"], "keeps no episode"),
    (["--model", "tiny-llama", "nope=1"], "nope"),
])
def test_the_sil_speed_benchmark_refuses_bad_input_in_one_line(load_benchmark, capsys, tmp_path, arguments, says):
    (tmp_path / "BAD").write_text('{"episodes": [{"seed": 1}]}')
    (tmp_path / "EMPTY").write_text('{"episodes": [], "baseline": 0.0}')
    arguments = [str(tmp_path / a) if a in ("MISSING", "BAD", "EMPTY") else a for a in arguments]
    with pytest.raises(SystemExit) as error:
        load_benchmark("sil_speed").main(arguments)
    err = capsys.readouterr().err
    assert error.value.code == 2 and says in err and "Traceback" not in err
