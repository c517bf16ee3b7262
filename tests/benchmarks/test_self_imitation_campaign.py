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
