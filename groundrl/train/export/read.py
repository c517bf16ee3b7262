"""Reading an export back: its settings (:func:`read_export`), the settings a run made from it
starts with (:func:`init_settings`, :func:`check_init`), and its weights (:func:`load_weights`,
:func:`load_export`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from peft import get_peft_model_state_dict, set_peft_model_state_dict
from safetensors.torch import load_file

from groundrl.agents.config import AgentKind
from groundrl.agents.factory import build_agent
from groundrl.envs import make_env
from groundrl.files import read_json, read_yaml
from groundrl.runs import is_whole_number
from groundrl.train.checkpoint import LLM_ADAPTER_SHAPES, LLM_HEAD_SHAPES, non_finite
from groundrl.train.checkpoint import settings as flat_settings
from groundrl.train.config import TrainConfig, config_of
from groundrl.train.export.layout import ACTION_HEAD, CRITIC, FORMAT, META, NOT_CARRIED, SETTINGS, ExportError


def read_export(path: str | Path) -> tuple[dict, TrainConfig]:
    """An export's ``groundrl.json`` and settings (those it carries, :data:`NOT_CARRIED`), checked."""
    return _read_meta(Path(path)), config_of(carried_settings(path), f"{Path(path) / SETTINGS}")


def _read_meta(path: Path) -> dict:
    """An export's ``groundrl.json``, checked (and that its settings file is there)."""
    if not (path / META).is_file():
        raise ExportError(f"{path} is not a groundrl export (no {META}): make one with `groundrl export RUN --out "
                          f"{path}`")
    meta = read_json(path / META, "export the run again")
    if not isinstance(meta, dict) or meta.get("kind") not in ("adapter", "model"):
        raise ExportError(f"{path / META} is corrupt (no kind adapter or model): export the run again")
    if not is_whole_number(meta.get("format")) or meta["format"] < 1:
        raise ExportError(f"{path / META} is corrupt (its format is not a version number): export the run again")
    if meta["format"] > FORMAT:
        raise ExportError(f"{path} has export format {meta['format']}, this groundrl reads up to {FORMAT}: upgrade "
                          "groundrl")
    if not (path / SETTINGS).is_file():
        raise ExportError(f"{path} is incomplete (missing {SETTINGS}): export the run again")
    return meta


def carried_settings(path: str | Path) -> dict:
    """The settings an export's ``groundrl.yaml`` gives that shape its agent: those of
    :data:`NOT_CARRIED` are dropped (the user's own, or the defaults, decide them)."""
    file = Path(path) / SETTINGS
    settings = read_yaml(file, "export the run again")
    if not isinstance(settings, dict):
        raise ExportError(f"{file} is corrupt (not a mapping of settings): export the run again")
    settings = {key: value for key, value in settings.items() if key not in NOT_CARRIED}
    agent = settings.get("agent")
    kind = agent.get("kind", AgentKind.llm.value) if isinstance(agent, dict) else AgentKind.llm.value
    if kind != AgentKind.llm.value:
        raise ExportError(f"{file} says agent.kind {kind!r}: an export holds an LLM agent, export the run again")
    return settings


def check_init(config: TrainConfig) -> None:
    """Before anything loads: the export ``config.init`` names can start this run (its weights fit
    the run's settings), in one line when it cannot."""
    meta, exported = read_export(config.init)
    now, then = flat_settings(config), flat_settings(exported)
    # the settings an initialized run must share with its export, so that the saved weights fit
    keys = LLM_HEAD_SHAPES + (LLM_ADAPTER_SHAPES if meta["kind"] == "adapter" else ())
    different = [key for key in keys if now[key] != then[key]]
    if different:
        shown = ", ".join(f"{key}={now[key]!r} (the export's: {then[key]!r})" for key in different)
        fix = "drop those settings" + (", or export the run with --merge to train new adapters" if
                                       meta["kind"] == "adapter" else "")
        raise ExportError(f"init {config.init} does not fit the run's settings: {shown}; {fix}")
    if meta["kind"] == "adapter" and (config.model or None) != (exported.model or None):
        raise ExportError(f"init {config.init} is an adapter of model {exported.model or 'default'}, not of "
                          f"{config.model or 'default'}: drop model=, or export the run with --merge")
    if meta["kind"] == "model" and Path(config.model or "").resolve() != Path(config.init).resolve():
        raise ExportError(f"init {config.init} holds a whole model: set model={config.init} (groundrl train --init "
                          "does)")


def init_settings(path: str | Path) -> dict:
    """The settings ``groundrl train --init DIR`` starts from, under the user's: those the export
    carries, the export itself as ``init``, and its folder as the model when it holds a whole model.

    Raises:
        GroundrlError: ``path`` is not an export, or a damaged one.
    """
    meta = _read_meta(Path(path))
    folder = str(Path(path).resolve())
    return {**carried_settings(path), "init": folder, **({"model": folder} if meta["kind"] == "model" else {})}


def load_weights(agent, path: str | Path) -> None:
    """Copy an export's adapter (for an adapter export) and heads into ``agent``, built with the
    export's settings (see :func:`check_init`).

    Raises:
        ExportError: a file is missing or does not fit the agent.
    """
    path = Path(path)
    meta, _ = read_export(path)

    def read(name):
        try:
            return load_file(str(path / name))
        except FileNotFoundError:
            raise ExportError(f"{path} is incomplete (missing {name}): export the run again") from None
        except Exception as error:  # noqa: BLE001 - any failure to read means the file is damaged
            raise ExportError(f"{path / name} is corrupt ({type(error).__name__}): export the run again") from None

    if meta["kind"] == "adapter":
        adapter = read("adapter_model.safetensors")
        expected = get_peft_model_state_dict(agent.model)
        if set(adapter) != set(expected) or any(adapter[k].shape != expected[k].shape for k in adapter):
            raise ExportError(f"the adapter in {path} does not fit this model (other layers, rank or base)")
        if bad := non_finite(adapter):
            raise ExportError(f"{path / 'adapter_model.safetensors'} holds weights that are NaN or infinite ({bad}): "
                              "export the run again")
        set_peft_model_state_dict(agent.model, {k: v.to(agent.device) for k, v in adapter.items()})
    heads = [("value_head", CRITIC)] + ([("critic_layers", CRITIC)] if agent.critic_layers is not None else []) \
        + ([("action_head", ACTION_HEAD)] if agent.action_head is not None else [])
    for attribute, name in heads:
        module = getattr(agent, attribute)
        saved = {k.removeprefix(f"{attribute}."): v for k, v in read(name).items() if k.startswith(f"{attribute}.")}
        own = module.state_dict()
        if set(saved) != set(own) or any(saved[k].shape != own[k].shape for k in saved):
            raise ExportError(f"{path / name} does not fit this agent's {attribute.replace('_', ' ')}")
        if bad := non_finite(saved):
            raise ExportError(f"{path / name} holds weights that are NaN or infinite ({bad}): export the run again")
        module.load_state_dict({k: v.to(own[k].dtype) for k, v in saved.items()})
    if meta["kind"] == "model":  # the merged model's own weights, loaded as the agent's base
        if bad := non_finite(dict(agent.model.named_parameters())):
            raise ExportError(f"the model in {path} holds weights that are NaN or infinite ({bad}): export the run "
                              "again")


def load_export(path: str | Path, device: str = "auto", dtype: str | None = None, precision: str | None = None):
    """The agent an export holds, ready to evaluate: ``(agent, config, meta)``."""
    path = Path(path)
    meta, config = read_export(path)
    if meta["kind"] == "model":  # the merged weights are the model; the actor's adapters start as the identity
        config = replace(config, model=str(path.resolve()))
    env = make_env(config.env, **config.env_options)
    agent = build_agent(config.agent, env, model=config.model, dtype=dtype or config.dtype, device=device,
                        seed=config.seed, precision=precision or config.precision)
    env.close()
    load_weights(agent, path)
    agent.eval()
    return agent, config, meta
