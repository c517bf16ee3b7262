"""benchmarks/self_imitation.py: what each row trains, and where its runs without self-imitation are read."""

import pytest

from groundrl.train.config import load_config


@pytest.fixture(scope="module")
def campaign(load_benchmark):
    return load_benchmark("self_imitation")


def test_each_row_is_its_example_with_self_imitation_on_or_off_as_named(campaign):
    for row, (task, settings) in campaign.ROWS.items():
        config = load_config("default", [campaign.EXAMPLES / f"{task}.yaml"], overrides=settings)
        assert config.sil.enabled == (not row.endswith("/no-sil")), row
    # the two Tomato-Lettuce Salad rows differ in self-imitation alone
    sil, no_sil = (load_config("default", [campaign.EXAMPLES / "tomato_lettuce_salad.yaml"],
                               overrides=campaign.ROWS[row][1]) for row in ("tomato_lettuce_salad/sil",
                                                                            "tomato_lettuce_salad/no-sil"))
    no_sil.sil = sil.sil
    assert no_sil == sil


def test_a_row_is_compared_with_its_no_sil_twin_or_else_with_the_examples_own_runs(campaign, tmp_path):
    assert campaign.without(tmp_path, "tomato_lettuce_salad/sil") == tmp_path / "tomato_lettuce_salad" / "no-sil"
    assert campaign.without(tmp_path, "food_preparation/sil") == campaign.WITHOUT / "food_preparation" / "word"


def test_the_tables_print_with_nothing_done(campaign, tmp_path, capsys):
    assert campaign.main(["--table-only", "--markdown", "--keep", str(tmp_path), "--out", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "tomato_lettuce_salad/no-sil" in out and "unseen tasks" in out


def test_a_piece_without_the_time_is_refused_and_partial_runs_are_evaluated_at_their_last_checkpoint(
        campaign, tmp_path, monkeypatch, capsys):
    from benchkit import pace

    out, keep = tmp_path / "out", tmp_path / "keep"
    trained, evaluated = [], []
    monkeypatch.setattr(pace, "train", lambda folder, arguments: trained.append(folder) and None)
    monkeypatch.setattr(pace, "evaluate", lambda agent, folder, *options: evaluated.append((agent, folder, options)))
    arguments = ["--rows", "entertainment/sil", "--seeds", "3", "--out", str(out), "--keep", str(keep)]
    assert campaign.main([*arguments, "--hours", "2.5"]) == 0
    refused = [line for line in capsys.readouterr().out.splitlines() if line.startswith("refused:")]
    assert refused == [
        f"refused: entertainment/sil seed 3 needs an unknown time (no record of entertainment/sil yet), 2.5 h are left "
        f"of --hours 2.5; run it where it has the time: python benchmarks/self_imitation.py --rows entertainment/sil "
        f"--stages train,eval,unseen --seeds 3 --out {out} --keep {keep}"]
    assert trained == [] and evaluated == []

    # a training stopped before its budget is evaluated only with --partial (its last checkpoint)
    run = out / "entertainment/sil/seed3/train/20260101-000000-train-Entertainment-v0"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("rollout:\n  total_decisions: 6144\n")
    assert campaign.main([*arguments, "--stages", "eval"]) == 0
    assert evaluated == []
    assert campaign.main([*arguments, "--stages", "eval", "--partial"]) == 0
    assert evaluated == [(run, out / "entertainment/sil/seed3/eval", ("--episodes", "100"))]
    assert campaign.main([*arguments, "--partial"]) == 0  # training first, which did not finish
    assert trained == [out / "entertainment/sil/seed3"] and len(evaluated) == 2
