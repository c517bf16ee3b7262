"""`groundrl export`: a trained agent as a Hugging Face folder, and back (eval, train --init)."""

import json
import re
from pathlib import Path

import pytest
import torch
import yaml
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

from groundrl.agents.llm_agent import AgentInput
from groundrl.cli import main
from groundrl.llm.loading import LLM
from groundrl.llm.scoring import score
from groundrl.llm.tiny import build_tiny
from groundrl.train.checkpoint import load_agent
from groundrl.train.config import load_config
from groundrl.train.export import export, load_export, model_card

DATA = Path(__file__).resolve().parents[1] / "data"
PROMPTS = ["You see a red door 2 steps forward. Your goal: open the door.", "Go to the blue key."]
ACTIONS = [["open the door", "turn left", "go forward"], ["pick up the key", "drop", "turn right"]]
# a larger learning rate than the preset's, so that two updates move the adapters visibly
EXPORTED = ("rollout.total_decisions=16", "ppo.policy_lr=0.01", "ppo.target_kl=null", "explore.novelty=0",
            "checkpoint_every=1")


def run(capsys, *args):
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


@pytest.fixture(scope="session")
def train(tiny_settings):
    """``train(folder, *settings)``: a run of two updates in ``folder/run`` (the tiny settings, then
    EXPORTED, then ``settings``)."""
    from groundrl.train.trainer import Trainer

    def run(folder: Path, *settings: str) -> Path:
        config = load_config("default", overrides=[*tiny_settings(*EXPORTED), *settings, f"runs_dir={folder}"])
        Trainer(config, folder / "run").train()
        return folder / "run"

    return run


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, train):
    return train(tmp_path_factory.mktemp("export"), "model=tiny-llama")


def scores_of(model, tokenizer, kind="causal"):
    with torch.no_grad():
        return score(LLM(model.eval(), tokenizer, kind, "loaded", "here"), PROMPTS, ACTIONS, normalization="word")


def checkpoint_scores(run_dir: Path):
    agent, _, _ = load_agent(run_dir, device="cpu")
    with torch.no_grad():
        return score(agent.llm, PROMPTS, ACTIONS, normalization="word")


def assert_close(scores, others, tolerance=1e-5):
    assert all(torch.allclose(a, b, atol=tolerance, rtol=0) for a, b in zip(scores, others))


def test_an_adapter_export_loads_with_plain_peft_and_scores_like_the_checkpoint(tiny_run, tmp_path):
    folder = export(tiny_run, tmp_path / "agent")
    files = {p.name for p in folder.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "critic.safetensors", "groundrl.yaml",
            "groundrl.json", "README.md", "tokenizer.json"} <= files and "model.safetensors" not in files
    trained = checkpoint_scores(tiny_run)
    untrained = scores_of(build_tiny("tiny-llama")[0], AutoTokenizer.from_pretrained(folder))
    assert not all(torch.allclose(a, b, atol=1e-4) for a, b in zip(trained, untrained))  # the adapters moved
    peft_model = PeftModel.from_pretrained(build_tiny("tiny-llama")[0], folder)  # plain peft, no groundrl
    assert_close(scores_of(peft_model, AutoTokenizer.from_pretrained(folder)), trained, 0.0)
    # the critic head too: groundrl reads the export back into the same agent
    agent, config, meta = load_export(folder, device="cpu")
    reference, _, _ = load_agent(tiny_run, device="cpu")
    with torch.no_grad():
        assert torch.equal(agent.frozen_values(PROMPTS), reference.frozen_values(PROMPTS))
    assert meta["kind"] == "adapter" and meta["decisions"] == 16 and config.env == "groundrl/FollowInstruction-v0"


def test_a_critic_of_its_own_trains_checkpoints_and_exports_with_its_layers(tmp_path, train):
    run_dir = train(tmp_path, "model=tiny-llama", "agent.llm.critic=own", "agent.llm.train_layers=1",
                    "agent.llm.critic_layers=1")
    reference, _, _ = load_agent(run_dir, device="cpu")  # the checkpoint holds the critic's layers, or it refuses
    untrained = build_tiny("tiny-llama")[0]
    assert not torch.equal(reference.critic_layers.layers[0].mlp.up_proj.weight,
                           untrained.model.layers[1].mlp.up_proj.weight)  # they trained
    agent, _, _ = load_export(export(run_dir, tmp_path / "agent"), device="cpu")
    with torch.no_grad():
        assert torch.equal(agent.own_values(PROMPTS), reference.own_values(PROMPTS))


def test_a_time_aware_critic_trains_checkpoints_and_exports(tmp_path, train):
    """``critic_time`` on BabyAI-Text, which says its time: the head, one number wider, goes and comes back."""
    run_dir = train(tmp_path, "env=groundrl/BabyAI-GoToLocal-v0", "agent.llm.critic_time=true")
    reference, _, _ = load_agent(run_dir, device="cpu")
    agent, _, _ = load_export(export(run_dir, tmp_path / "agent"), device="cpu")
    inputs = [AgentInput(prompt, time=(t, 64)) for t, prompt in enumerate(PROMPTS)]
    with torch.no_grad():
        assert torch.equal(agent.frozen_values(inputs), reference.frozen_values(inputs))
    assert agent.config.critic_time
    assert torch.equal(agent.value_head.time[0].weight, reference.value_head.time[0].weight)


def test_a_merged_export_loads_with_plain_transformers(tiny_run, tmp_path):
    folder = export(tiny_run, tmp_path / "merged", merge=True)
    files = {p.name for p in folder.iterdir()}
    assert {"config.json", "model.safetensors", "critic.safetensors"} <= files and "adapter_config.json" not in files
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert_close(scores_of(model, AutoTokenizer.from_pretrained(folder)), checkpoint_scores(tiny_run))


def test_a_seq2seq_agent_exports_too(tmp_path, train):
    run_dir = train(tmp_path, "model=tiny-t5", "agent.llm.lora_targets=[q,v]")
    folder = export(run_dir, tmp_path / "merged", merge=True)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder)
    assert_close(scores_of(model, AutoTokenizer.from_pretrained(folder), "seq2seq"), checkpoint_scores(run_dir))


def test_the_model_card_says_what_it_is_how_it_did_and_how_to_reproduce_it(tiny_run, tmp_path, capsys):
    evals = tiny_run.parent
    code, out, _ = run(capsys, "eval", str(tiny_run), "--episodes", "5", "--runs-dir", str(evals))
    assert code == 0, out
    code, out, _ = run(capsys, "export", str(tiny_run), "--out", str(tmp_path / "card"))
    assert code is None or code == 0, out
    card = (tmp_path / "card" / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: peft")
    assert "`tiny-llama`" in card and "groundrl/FollowInstruction-v0" in card and "decisions trained: 16" in card
    assert "| FollowInstruction | 5 (sampled) |" in card  # the evaluation found beside the run, with its CI
    assert "PeftModel.from_pretrained(base, folder)" in card and "groundrl train --config groundrl.yaml" in card
    # an earlier checkpoint: its own counters and training episodes, not the run's last
    earlier = export(tiny_run / "checkpoints" / "update-000001", tmp_path / "earlier")
    card = (earlier / "README.md").read_text()
    assert "decisions trained: 8 (1 update;" in card and "The training episodes of update 1:" in card
    # the reproducing command trains the same settings (into the default runs folder)
    again = load_config("default", files=[tmp_path / "card" / "groundrl.yaml"])
    assert again.env == "groundrl/FollowInstruction-v0" and again.ppo.policy_lr == 0.01 and again.runs_dir == "runs"


@pytest.mark.parametrize("kind", ["adapter", "merged"])
def test_a_whole_model_card_reads_as_expected(kind, tmp_path):
    """Every section of the card of a fixed fake export, as its reader sees it (tests/data/model_card_*.md)."""
    run_dir = tmp_path / "20260101-000000-train-FollowInstruction-v0"
    run_dir.mkdir()
    metrics = [{"update": 1, "success_rate": 0.25}, {"update": 2, "success_rate": 0.4},
               {"update": 2, "success_rate": 0.5, "episode_return": 0.45, "episode_length": 6.5}]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in metrics))
    # every setting the card shows, given: a change of the presets' defaults does not change this card
    config = load_config("default", overrides=[
        "env=groundrl/FollowInstruction-v0", "prompt=actions", "seed=7", "algorithm=ppo", "agent.llm.policy=score",
        "agent.llm.normalization=word", "agent.llm.actor=lora", "agent.llm.critic=frozen", "agent.llm.lora_r=4",
        "agent.llm.lora_alpha=8", "agent.llm.lora_targets=[q_proj,v_proj]"], values={"env_kwargs": {"max_steps": 5}})
    about = {"format": 1, "kind": "adapter", "base_model": "qwen", "base_source": "hub:Qwen/Qwen2.5-0.5B-Instruct",
             "model_class": "causal", "run": run_dir.name, "checkpoint": "update-000002", "update": 2,
             "decisions": 1600}
    evaluations = [[{"test": "FollowInstruction", "episodes": 100, "success_rate": 0.5, "ci_low": 0.404,
                     "ci_high": 0.596, "mean_return": 0.45, "mean_length": 6.25, "greedy": False}]]
    if kind == "merged":  # a seq2seq model, an earlier checkpoint, not evaluated
        about |= {"kind": "model", "base_model": "tiny-t5", "base_source": "build_tiny('tiny-t5')", "update": 1,
                  "decisions": 800, "model_class": "seq2seq", "checkpoint": "update-000001"}
        evaluations = []
    card = model_card(about, config, run_dir, evaluations)
    card = re.sub(r"trained by groundrl (.+?) to act", "trained by groundrl VERSION to act", card, count=1)
    assert card == (DATA / f"model_card_{kind}.md").read_text()


def test_eval_and_train_init_take_an_export(tiny_run, tmp_path, capsys):
    for merge in (False, True):
        folder = tmp_path / f"export-{merge}"
        export(tiny_run, folder, merge=merge)
        code, out, _ = run(capsys, "eval", str(folder), "--episodes", "3", "--runs-dir", str(tmp_path / "evals"))
        assert code == 0 and "FollowInstruction" in out, out
        # the export's training seeds are refused as evaluation seeds, as the run's are
        code, _, err = run(capsys, "eval", str(folder), "--seed", "1000", "--runs-dir", str(tmp_path / "evals"))
        assert code == 2 and "overlap the training seeds" in err
        runs_dir = tmp_path / f"init-{merge}"
        code, out, _ = run(capsys, "train", "--init", str(folder), "rollout.total_decisions=8", f"runs_dir={runs_dir}")
        assert code is None or code == 0, out
        (new_run,) = runs_dir.iterdir()
        settings = yaml.safe_load((new_run / "config.yaml").read_text())
        assert settings["init"] == str(folder.resolve()) and settings["ppo"]["policy_lr"] == 0.01
        assert (settings["model"] == str(folder.resolve())) if merge else settings["model"] == "tiny-llama"


def test_train_init_starts_from_the_exported_weights(tiny_run, tmp_path):
    from groundrl.train.trainer import Trainer

    folder = export(tiny_run, tmp_path / "agent")
    config = load_config("default", files=[folder / "groundrl.yaml"],
                         overrides=[f"init={folder}", f"runs_dir={tmp_path}"])
    trainer = Trainer(config, tmp_path / "new")
    reference, _, _ = load_agent(tiny_run, device="cpu")
    ours = dict(trainer.agent.named_parameters())
    trained = [name for name, p in reference.named_parameters() if p.requires_grad]
    assert trained and all(torch.equal(ours[name], dict(reference.named_parameters())[name]) for name in trained)


def test_bad_input_gets_one_line(tiny_run, tmp_path, capsys, monkeypatch):
    folder = export(tiny_run, tmp_path / "agent")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("mine")
    untrained = tmp_path / "untrained"
    untrained.mkdir()
    (untrained / "config.yaml").write_text((tiny_run / "config.yaml").read_text())
    cases = [
        (["export", str(untrained), "--out", str(tmp_path / "a")], "has no checkpoints"),
        (["export", str(tiny_run), "--out", str(tmp_path / "full")], "already exists and is not empty"),
        (["train", "--init", str(tmp_path / "full")], "not a groundrl export"),
        (["train", "--init", str(folder), "agent.llm.lora_r=4"], "agent.llm.lora_r=4 (the export's: 8)"),
        (["train", "--init", str(folder), "model=tiny-t5"], "an adapter of model tiny-llama"),
        (["train", "--init", str(folder), "--resume", str(tiny_run)], "give one of them"),
    ]
    for args, message in cases:
        code, out, err = run(capsys, *args)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (args, err)
    assert (tmp_path / "full" / "x").read_text() == "mine" and not (tmp_path / "a").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".exporting")]
    (folder / "groundrl.json").write_text("{")
    code, _, err = run(capsys, "eval", str(folder), "--episodes", "1")
    assert code == 2 and "groundrl.json is not valid JSON at line 1: export the run again" in err


def test_a_baseline_run_does_not_export(tmp_path, capsys, train):
    run_dir = train(tmp_path, "agent.kind=symbolic")
    code, _, err = run(capsys, "export", str(run_dir), "--out", str(tmp_path / "out"))
    assert code == 2 and "only LLM agents export" in err


@pytest.mark.slow
def test_the_default_models_adapter_exports_with_the_same_scores(tmp_path, train):
    from groundrl.llm.loading import converted_gguf_folder, default_gguf_path

    run_dir = train(tmp_path, "model=null", "rollout.total_decisions=8", "rollout.num_steps=4", "rollout.num_envs=2")
    folder = export(run_dir, tmp_path / "agent")
    assert "GGUF file" in (folder / "README.md").read_text()
    base = AutoModelForCausalLM.from_pretrained(converted_gguf_folder(default_gguf_path()))
    peft_model = PeftModel.from_pretrained(base, folder)
    assert_close(scores_of(peft_model, AutoTokenizer.from_pretrained(folder)), checkpoint_scores(run_dir), 1e-4)
    assert json.loads((folder / "groundrl.json").read_text())["base_model"] == "smollm2-135m-instruct"
