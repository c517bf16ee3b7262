"""The trainer: it resumes exactly, its checkpoints are safe, its config is checked (that it learns:
tests/learning/test_climbs.py)."""

from __future__ import annotations

import json
import math
import os
import signal

import pytest
import torch

from groundrl.agents.llm_agent import LLMAgent
from groundrl.errors import GroundrlError, InvalidArgumentError
from groundrl.eval import evaluate
from groundrl.train import checkpoint as checkpoints
from groundrl.train.config import load_config
from groundrl.train.trainer import Trainer, resume


@pytest.mark.parametrize("fast", [
    [],  # the defaults: each distinct input once, the frozen model's outputs kept
    ["agent.llm.train_layers=1", "precision=bf16-mixed"],  # and a frozen lower trunk, and bf16 matmuls
    ["ppo.deduplicate=false", "agent.llm.cache_size=0"],  # none of it
    # NPAE over a trunk: the frozen lower layers are random, and must be the same ones again
    ["agent.llm.actor=full", "agent.llm.critic=shared", "agent.llm.policy=head", "agent.llm.weights=random",
     "agent.llm.train_layers=1", "ppo.phases=joint"],
], ids=["defaults", "every-item", "none", "npae-trunk"])
def test_resume_matches_an_uninterrupted_run(tmp_path, fast, tiny_config):
    """The caches (kept outputs, the lower trunk's states) start empty in a resumed run and are
    rebuilt to the same numbers."""
    config = tiny_config("rollout.total_decisions=48", "checkpoint_every=3", "ppo.update_epochs=2", *fast)
    straight = Trainer(config, tmp_path / "straight").train()
    assert len(straight) == 6

    first = Trainer(config, tmp_path / "split").train(updates=3)
    assert len(first) == 3
    resumed = resume(tmp_path / "split")
    assert resumed.state.update == 3
    both = resumed.train()
    assert len(both) == 6
    for a, b in zip(straight, both):
        for key in ("success_rate", "episode_return", "policy_loss", "value_loss", "entropy", "approx_kl"):
            if key in a:
                assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (a["update"], key)
    lines = (tmp_path / "split" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["update"] for line in lines] == [1, 2, 3, 4, 5, 6]


def test_checkpoints_keep_the_last_k_and_refuse_corrupt_or_mismatched(tmp_path, tiny_config):
    config = tiny_config("rollout.total_decisions=40", "checkpoint_every=1", "keep_checkpoints=2")
    Trainer(config, tmp_path).train()
    kept = checkpoints.list_checkpoints(tmp_path)
    assert [p.name for p in kept] == ["update-000004", "update-000005"]
    assert not list((tmp_path / "checkpoints").glob(".writing-*"))

    (kept[-1] / "trainable.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(checkpoints.CheckpointError, match="corrupt.*nothing was deleted.*update-000004"):
        resume(tmp_path)
    assert [p.name for p in checkpoints.list_checkpoints(tmp_path)] == ["update-000004", "update-000005"]
    (kept[-1] / "state.pt").unlink()
    with pytest.raises(checkpoints.CheckpointError, match="incomplete"):
        resume(tmp_path)

    with pytest.raises(checkpoints.CheckpointError, match="other weights. shapes: agent.llm.critic=.frozen."):
        resume(kept[0], overrides=["agent.llm.critic=shared"])
    trainer = resume(kept[0])
    assert trainer.state.update == 4
    with pytest.raises(GroundrlError, match="no checkpoints"):
        resume(tmp_path / "tensorboard")


def test_checkpoints_of_earlier_formats_are_refused_for_resuming_but_still_evaluate(tmp_path, tiny_config):
    """Formats 1 and 2 stored pickles (optimizer.pt, envs.pkl) that could run code when loaded: they
    are refused in one line, and their weights (trainable.pt, always tensors only) still evaluate."""
    Trainer(tiny_config("rollout.total_decisions=16", "checkpoint_every=2"), tmp_path).train()
    (checkpoint,) = checkpoints.list_checkpoints(tmp_path)
    meta = json.loads((checkpoint / "meta.json").read_text())
    for old in (1, 2):
        (checkpoint / "meta.json").write_text(json.dumps({**meta, "format": old}))
        with pytest.raises(checkpoints.CheckpointError, match=f"format {old}.*cannot be resumed safely.*groundrl eval"):
            resume(tmp_path)
        agent, _, _ = checkpoints.load_agent(tmp_path, device="cpu")
        assert evaluate(agent, "groundrl/FollowInstruction-v0", episodes=2, progress=False).episodes == 2
    (checkpoint / "meta.json").write_text(json.dumps({**meta, "format": 99}))
    with pytest.raises(checkpoints.CheckpointError, match="format 99.*upgrade groundrl"):
        resume(checkpoint)


def signal_at_update(trainer, monkeypatch, number: int, *signums) -> None:
    """Send ``signums`` to this process at the start of the trainer's update ``number`` (1-based)."""
    original, calls = trainer.update, []

    def update():
        calls.append(1)
        if len(calls) == number:
            for signum in signums:
                os.kill(os.getpid(), signum)
        return original()

    monkeypatch.setattr(trainer, "update", update)


def test_ctrl_c_finishes_the_update_then_checkpoints_it(tmp_path, monkeypatch, capsys, ctrl_c_raises, tiny_config):
    """The checkpoint of an interrupted run is a state between two updates: the one it resumes to
    is what the uninterrupted run had after that update."""
    config = tiny_config("rollout.total_decisions=40", "checkpoint_every=100")
    straight = Trainer(config, tmp_path / "straight").train()
    trainer = Trainer(config, tmp_path / "split")
    signal_at_update(trainer, monkeypatch, 3, signal.SIGINT)  # Ctrl-C at the start of the third update
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    assert "finishing this update" in capsys.readouterr().err
    (latest,) = checkpoints.list_checkpoints(tmp_path / "split")
    assert latest.name == "update-000003"
    both = resume(tmp_path / "split").train()
    for a, b in zip(straight, both):
        assert a["policy_loss"] == pytest.approx(b["policy_loss"], rel=1e-5, abs=1e-7), a["update"]


def test_a_second_ctrl_c_stops_inside_the_update_and_keeps_the_last_checkpoint(tmp_path, monkeypatch, capsys,
                                                                                   ctrl_c_raises, tiny_config):
    trainer = Trainer(tiny_config("rollout.total_decisions=40", "checkpoint_every=1"), tmp_path)
    signal_at_update(trainer, monkeypatch, 3, signal.SIGINT, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    assert "stopped inside update 3: continue from the last checkpoint (update-000002)" in capsys.readouterr().out
    assert checkpoints.list_checkpoints(tmp_path)[-1].name == "update-000002"
    assert resume(tmp_path).state.decisions == 16
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Ctrl-C is Python's again


def test_sigterm_finishes_the_update_then_checkpoints_it_even_where_ctrl_c_is_ignored(tmp_path, monkeypatch, capsys,
                                                                                       tiny_config):
    """`kill PID` (a scheduler preempting the job, a session ending) saves what Ctrl-C saves; a shell
    script's background job, which ignores SIGINT, still gets it."""
    trainer = Trainer(tiny_config("rollout.total_decisions=40", "checkpoint_every=100"), tmp_path)
    signal_at_update(trainer, monkeypatch, 2, signal.SIGTERM)
    previous_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with pytest.raises(KeyboardInterrupt):
            trainer.train()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous_int)
    assert "terminated: finishing this update to save it" in capsys.readouterr().err
    assert [c.name for c in checkpoints.list_checkpoints(tmp_path)] == ["update-000002"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # a later SIGTERM ends the process again


def test_a_process_that_ignores_ctrl_c_keeps_ignoring_it(tmp_path, monkeypatch, tiny_config):
    monkeypatch.setattr(signal, "getsignal", lambda signum: signal.SIG_IGN)  # as when started in the background
    monkeypatch.setattr(signal, "signal", lambda *args: pytest.fail("a handler was installed"))
    Trainer(tiny_config("rollout.total_decisions=16"), tmp_path).train()


def test_run_folder_logs_every_update(tmp_path, tiny_config):
    Trainer(tiny_config("rollout.total_decisions=16", "ppo.kl_coef=0.1"), tmp_path).train()
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 2
    for key in ("success_rate", "episode_return", "episode_length", "policy_loss", "value_loss", "entropy",
                "approx_kl", "clip_fraction", "explained_variance", "lr_policy", "lr_value", "decisions_per_second",
                "rollout_seconds", "update_seconds", "memory_gib", "kl_reference"):
        assert key in metrics[-1], key
    assert metrics[0]["lr_policy"] > metrics[1]["lr_policy"]  # linear decay
    assert not math.isnan(metrics[-1]["kl_reference"])
    assert "agent:" in (tmp_path / "config.yaml").read_text()
    assert any((tmp_path / "tensorboard").iterdir())


def test_macro_actions_and_the_glam_prompt(tmp_path, tiny_config):
    # Overcooked reports macro_steps (SMDP discount); BabyAI-Text trains on GLAM's prompt, reward x20
    Trainer(tiny_config("env=groundrl/TomatoSalad-v0", "rollout.total_decisions=8", "ppo.gamma=0.99"),
            tmp_path / "o").train()
    metrics = Trainer(tiny_config("env=groundrl/BabyAI-GoToLocal-v0", "rollout.total_decisions=8",
                                  "rollout.reward_scale=20", preset="glam"), tmp_path / "b").train()
    assert metrics[-1]["decisions"] == 8


def test_the_advantage_floor_reaches_every_policy_step(tmp_path, monkeypatch, tiny_config):
    from groundrl.train.algorithms import policy as algorithm

    floors = []

    def spy(advantages, *args, std_floor=0.0, **kwargs):
        floors.append(std_floor)
        return normalize(advantages, *args, std_floor=std_floor, **kwargs)

    normalize = algorithm.normalize
    monkeypatch.setattr(algorithm, "normalize", spy)
    Trainer(tiny_config("rollout.total_decisions=8", "ppo.advantage_std_floor=0.05"), tmp_path).train()
    assert floors and set(floors) == {0.05}


def test_bad_configuration_is_refused_before_anything_loads():
    for overrides, message in ((["ppo.gamma=2"], "gamma"), (["ppo.phases=both"], "phases"),
                               (["agent.llm.critic=none"], "critic"), (["ppo.nope=1"], "bad configuration"),
                               (["rollout.num_envs=zero"], "bad configuration"), (["ppo.micro_batch_size=3"], "divide"),
                               (["ppo.advantage_std_floor=-0.1"], "advantage_std_floor")):
        with pytest.raises(InvalidArgumentError, match=message):
            load_config("twosome", overrides=overrides)
    with pytest.raises(InvalidArgumentError, match="unknown preset"):
        load_config("ppo-from-mars")
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        load_config("twosome", files=["/no/such.yaml"])


def test_agent_values_from_both_critics_and_the_frozen_base_stays_frozen():
    from groundrl.agents.config import LLMAgentConfig
    from groundrl.llm import load_llm

    for config in (LLMAgentConfig(actor="lora", critic="frozen"), LLMAgentConfig(actor="full", critic="frozen"),
                   LLMAgentConfig(actor="lora", critic="shared")):
        agent = LLMAgent(load_llm("tiny-llama"), config)
        prompts, actions = ["You see a red door.", "You see a key."], [["open the door", "wait"], ["take it"]]
        out = agent(prompts, actions)
        assert [len(x) for x in out.logits] == [2, 1] and out.values.shape == (2,)
        with torch.no_grad():
            before = agent(prompts, actions).values.clone()
            for p in agent.actor_parameters():  # the actor moves...
                p.add_(torch.randn_like(p) * 0.1)
            after = agent(prompts, actions).values
        if config.critic == "frozen":  # ...and a frozen-base critic does not see it
            torch.testing.assert_close(before, after)


def test_environments_that_do_not_replay_their_episode_restart_it_with_a_warning(tmp_path, tiny_config):
    """Episodes under way are restored by replaying their actions from their seeds; an environment
    that does not come back to the saved observation starts a new episode instead, with a warning."""
    Trainer(tiny_config("rollout.total_decisions=16", "env=groundrl/BabyAI-GoToLocal-v0"), tmp_path).train()
    (checkpoint,) = checkpoints.list_checkpoints(tmp_path)
    state = torch.load(checkpoint / "state.pt", weights_only=True)
    slots = state["ranks"][0]["collector"]["slots"]
    assert all(len(s["actions"]) == 8 for s in slots)  # episodes under way: they replay exactly
    trainer = resume(tmp_path, overrides=["rollout.total_decisions=24"])
    assert [s.actions for s in trainer.collector.slots] == [s["actions"] for s in slots]
    assert [str(s.obs) for s in trainer.collector.slots] == [s["obs"] for s in slots]

    slots[1]["obs"] = "an observation the environment does not reach"
    torch.save(state, checkpoint / "state.pt")
    with pytest.warns(UserWarning, match="did not replay its episode.*start over"):
        trainer = resume(tmp_path, overrides=["rollout.total_decisions=24"])
    assert trainer.state.update == 2 and all(not s.actions for s in trainer.collector.slots)
    assert len(trainer.train()) == 3


def test_memory_options_train(tmp_path, tiny_config):
    """Gradient checkpointing, small micro-batches and bf16 weights run the same loop."""
    for extra in (["agent.llm.gradient_checkpointing=true", "ppo.micro_batch_size=1"], ["dtype=bfloat16"]):
        metrics = Trainer(tiny_config("rollout.total_decisions=8", *extra), tmp_path / extra[0]).train()
        assert math.isfinite(metrics[-1]["policy_loss"]) and math.isfinite(metrics[-1]["value_loss"])


def test_a_dead_critic_is_reported_once_not_left_silent(tmp_path, tiny_config):
    # TWOSOME's critic: ReLUs and no biases. First-layer weights at 0 make every hidden unit silent on
    # every state, as a critic that died in training: it outputs exactly 0 and gets no gradient again.
    trainer = Trainer(tiny_config("rollout.total_decisions=16"), tmp_path)
    first = trainer.agent.value_head[0].weight
    with torch.no_grad():
        first.zero_()
    with pytest.warns(UserWarning, match="the critic gave exactly 0.0 for every state") as caught:
        history = trainer.train()
    assert len(history) > 1 and all(m["value_mean"] == 0.0 for m in history)
    assert sum("the critic gave exactly 0.0" in str(w.message) for w in caught) == 1  # once a run
    assert not first.any()  # no gradient reached it


def test_a_living_critic_raises_no_dead_critic_warning(tmp_path, tiny_config, recwarn):
    Trainer(tiny_config("rollout.total_decisions=16"), tmp_path).train()
    assert not [w for w in recwarn if "the critic gave exactly 0.0" in str(w.message)]
