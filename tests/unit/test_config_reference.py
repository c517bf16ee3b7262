"""Every setting documented where it is declared, and shown from there: ``groundrl config [KEY]`` and
the "every setting" page (docs/settings.md) read the schema, so they cannot drift from it."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from groundrl.cli import main
from groundrl.errors import InvalidArgumentError
from groundrl.train.config import PRESETS, TrainConfig, load_config, reference, to_yaml


def leaves(mapping: dict, prefix: str = "") -> set[str]:
    keys = set()
    for key, value in mapping.items():
        if isinstance(value, dict) and key != "env_kwargs":
            keys |= leaves(value, f"{prefix}{key}.")
        else:
            keys.add(prefix + key)
    return keys


def test_every_setting_a_run_writes_is_listed_and_documented():
    written = leaves(yaml.safe_load(to_yaml(load_config())))
    listed = {s.key: s for s in reference.settings() if not s.section}
    assert set(listed) == written
    undocumented = [key for key, s in listed.items() if len(s.doc) < 10]
    assert not undocumented, f"document these fields with a string under them: {undocumented}"
    sections = [s.key for s in reference.settings() if s.section and len(s.doc) < 10]
    assert not sections


def test_a_field_doc_is_the_string_right_under_the_field():
    @dataclasses.dataclass
    class Example:
        documented: int = 1
        """What it is."""
        # a comment is not a doc
        bare: str = "x"
        after_bare: float = 0.5
        """Its own."""

    assert reference.field_docs(Example) == {"documented": "What it is.", "after_bare": "Its own."}


def test_a_setting_shows_its_type_default_doc_and_the_presets_that_change_it():
    text = reference.describe("ppo.policy_lr")
    assert text.startswith("ppo.policy_lr: float = 0.0003\n  The actor's learning rate")
    assert "presets that set it: twosome 1e-06" in text and "default" not in text.split("presets")[1]
    assert reference.find("algorithm").type == "ppo | grpo | gigpo"  # an Enum shows its choices
    assert reference.find("agent.llm.lora_targets").default == ["q_proj", "v_proj"]


def test_a_section_lists_its_settings():
    text = reference.describe("explore")
    assert text.startswith("explore  (section)")
    keys = [line.split(" = ")[0].strip() for line in text.splitlines() if " = " in line]
    assert keys == [f.key for f in reference.settings() if f.key.startswith("explore.")]


def test_an_unknown_key_is_one_line_with_the_nearest_ones():
    with pytest.raises(InvalidArgumentError, match=r"no setting 'ppo.polic_lr'; did you mean ppo.policy_lr"):
        reference.find("ppo.polic_lr")


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_the_listing_shows_each_presets_values(preset):
    config = load_config(preset)
    lines = reference.listing(preset).splitlines()
    assert f"  env = {config.env}  " in "\n".join(lines) + "  "
    assert any(line.startswith(f"  ppo.policy_lr = {config.ppo.policy_lr}  ") for line in lines)


def test_the_page_has_a_row_per_setting_in_its_section():
    page = reference.markdown()
    for setting in reference.settings():
        if not setting.section:
            assert page.count(f"| `{setting.key}` |") == 1, setting.key
    assert "## `agent.llm`" in page and "## Top level" in page
    assert "| `float | None` |" in page  # a | inside code stays (Python-Markdown's tables keep it in the cell)
    assert ":func:" not in page and "``" not in page  # reStructuredText roles become Markdown code


def cli(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    captured = capsys.readouterr()
    return exit_.value.code, captured.out, captured.err


def test_groundrl_config_prints_and_refuses_in_one_line(capsys):
    code, out, _ = cli(capsys, "config", "rollout.num_envs")
    assert code == 0 and out.startswith("rollout.num_envs: int = 4\n")
    code, out, _ = cli(capsys, "config", "--preset", "glam")
    assert code == 0 and "  rollout.num_envs = 32  " in out
    for args, message in ((["config", "nope"], "no setting 'nope'"), (["config", "--preset", "x"], "unknown preset")):
        code, _, err = cli(capsys, *args)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_the_schema_is_the_config_class():
    assert reference.settings()[0].key == dataclasses.fields(TrainConfig)[0].name


def test_every_example_loads_and_its_header_gives_the_command_that_runs_it():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    examples = sorted((root / "examples").rglob("*.yaml"))
    assert len(examples) >= 6
    for path in examples:
        config = load_config("default", [path])  # every key known, every value valid
        assert config.env, path
        command = f"groundrl train --config {path.relative_to(root).as_posix()}"
        assert any(line.startswith("#") and command in line for line in path.read_text().splitlines()), path
