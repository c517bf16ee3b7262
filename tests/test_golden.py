"""Behaviour preserved through the restructure of train/ and agents/: a short seeded run of every
preset on a tiny model gives the metrics recorded from the code before it
(``tests/record_golden_metrics.py``, commit d786871), and sampled evaluation the same episodes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from groundrl.agents import LLMPolicy, RandomAgent
from groundrl.eval import evaluate
from groundrl.llm import load_llm
from groundrl.train import Trainer, load_config

GOLDEN = json.loads((Path(__file__).parent / "data" / "golden_metrics.json").read_text())
# the settings of record_golden_metrics.py, in today's keys
SMALL = ["model=tiny-llama", "device=cpu", "progress=false", "checkpoint_every=2", "seed=3",
         "rollout.num_envs=2", "rollout.num_steps=4", "rollout.total_decisions=24", "ppo.minibatch_size=4",
         "ppo.value_minibatch_size=4", "ppo.micro_batch_size=2", "ppo.update_epochs=2"]
RUNS = {
    "twosome": SMALL + ["env=groundrl/FollowInstruction-v0", "ppo.policy_lr=3e-3", "ppo.value_lr=3e-3"],
    "glam": SMALL + ["env=groundrl/FollowInstruction-Long-v0", "env_kwargs.max_episode_steps=3", "prompt=glam",
                     "ppo.policy_lr=1e-4", "ppo.value_lr=1e-4", "rollout.num_steps=6", "rollout.total_decisions=36"],
    "symbolic-ppo": SMALL + ["env=groundrl/FollowInstruction-Long-v0", "ppo.policy_lr=3e-3", "ppo.value_lr=3e-3"],
    "drrn": SMALL + ["env=groundrl/FollowInstruction-Long-v0", "drrn.batch_size=4", "drrn.learning_starts=8",
                     "drrn.replay_ratio=2"],
    "npae": SMALL + ["env=groundrl/FollowInstruction-Long-v0", "ppo.policy_lr=1e-3", "ppo.value_lr=1e-3"],
}
TIMING = ("wall_seconds", "decisions_per_second", "rollout_seconds", "update_seconds", "memory_gib")
# the joint optimizer's one rate became its actor's and critic's groups (ppo.policy_lr, ppo.value_lr)
RENAMED = {"lr_joint": "lr_policy"}


def same(recorded, now) -> bool:
    if isinstance(recorded, float) and math.isnan(recorded):
        return isinstance(now, float) and math.isnan(now)
    # CPUs round matrix products differently (AMD, Intel AMX): figures agree to float32 noise
    return now == pytest.approx(recorded, rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("preset", sorted(RUNS))
def test_every_preset_trains_as_before(preset, tmp_path):
    history = Trainer(load_config(preset, overrides=RUNS[preset]), tmp_path).train()
    assert len(history) == len(GOLDEN[preset])
    for recorded, now in zip(GOLDEN[preset], history):
        for key, value in recorded.items():
            key = RENAMED.get(key, key)
            assert key in now, (recorded["update"], key)
            assert same(value, now[key]), (recorded["update"], key, value, now[key])
        assert set(now) - set(TIMING) - {RENAMED.get(k, k) for k in recorded} <= {"lr_value"}


def test_sampled_evaluation_plays_the_same_episodes_as_before(tmp_path):
    for name, agent, env_id in [("zero-shot", LLMPolicy(load_llm("tiny-llama")), "groundrl/FollowInstruction-Long-v0"),
                                ("random", RandomAgent(), "groundrl/BabyAI-GoToLocal-v0")]:
        evaluate(agent, env_id, episodes=12, num_envs=3, seed=500, run_dir=tmp_path / name, progress=False)
        episodes = [json.loads(line) for line in (tmp_path / name / "episodes.jsonl").read_text().splitlines()]
        key = lambda e: e["episode"]  # noqa: E731
        assert sorted(episodes, key=key) == sorted(GOLDEN["evaluation"][name], key=key), name
