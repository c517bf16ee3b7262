"""Training learns: every trainable design climbs from chance on a tiny random model in FollowInstruction
(4 to 8 candidates, chance about 0.17). The designs, their settings and bars are those of
``benchmarks/learning_climbs.py``, which runs them on three seeds and keeps the references; the suite
runs one seed of each (the whole suite) and the default design's short climb (the quick run too)."""

from __future__ import annotations

import pytest

DESIGNS = ["lora-frozen", "lora-shared", "full-shared", "full-frozen", "grpo", "gigpo", "npae", "drrn"]


@pytest.fixture(scope="module")
def climbs(load_benchmark):
    return load_benchmark("learning_climbs")


def test_the_default_design_rises_well_above_chance_within_2048_decisions(climbs):
    """The quick run's learning check, on TWOSOME's design (the defaults'): from chance to >= 0.6 within
    2,048 decisions, checked every 320 (measured on AMD: 0.13, 0.41, 0.52, 0.70 at 960)."""
    record = climbs.climb("lora-frozen", quick=True)
    curve = [rate for _, rate in record["curve"]]
    assert curve[0] < 0.35 and curve[-1] >= 0.6, record["curve"]


# a minute or two each on two cores: with the slow tests (the whole suite runs them)
@pytest.mark.slow
@pytest.mark.parametrize("design", DESIGNS)
def test_every_design_climbs_from_chance_to_its_bar(climbs, design):
    record = climbs.climb(design)
    curve = [rate for _, rate in record["curve"]]
    assert curve[0] < 0.35 and curve[-1] >= record["bar"], record["curve"]


def test_the_sample_is_every_design_of_the_benchmark(climbs):
    assert DESIGNS == list(climbs.CLIMBS)
