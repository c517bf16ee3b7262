"""The agents ``groundrl eval`` plays: a baseline by name, or a trained run."""

from __future__ import annotations

from pathlib import Path

from groundrl.agents import BabyAIBotAgent, GoldPathAgent, LLMPolicy, RandomAgent
from groundrl.errors import InvalidArgumentError
from groundrl.llm import load_llm
from groundrl.llm.loading import resolve_device, resolve_dtype
from groundrl.llm.precision import cast_frozen_weights, check_precision
from groundrl.runs import read_settings
from groundrl.train.checkpoint import find, load_agent
from groundrl.train.config import TrainConfig, load_run_config
from groundrl.train.export import META, is_export, load_export, read_export

BASELINES = {
    "random": "uniform over the valid actions",
    "bot": "BabyAI's planner bot (BabyAI-Text only)",
    "gold": "the package's solution of each game (TextWorld, TextWorldExpress, ScienceWorld)",
    "zero-shot": "the LLM's action scores without training (SayCan-style); --model, --normalization",
}


def evaluation_agent(spec: str | None, *, model: str | None = None, normalization: str | None = None,
                     dtype: str | None = None, device: str = "auto", precision: str | None = None):
    """The agent ``groundrl eval`` plays: a baseline by name (``random``, ``bot``, ``zero-shot``,
    the default) or a trained agent (a run folder, a checkpoint or an export); its model's passes in
    ``precision`` (default: fp32, or the trained run's).

    Returns ``(agent, about, trained_config)``: ``about`` says what it is (saved with the results),
    ``trained_config`` is the run's :class:`~groundrl.train.config.TrainConfig` or None.
    """
    spec = spec or "zero-shot"
    llm_options = model is not None or normalization is not None
    if precision is not None:
        check_precision(precision, dtype or "float32")
    if spec in ("random", "bot", "gold"):
        if llm_options:
            raise InvalidArgumentError(f"the {spec} agent uses no model: drop --model/--normalization")
        agent = {"random": RandomAgent, "bot": BabyAIBotAgent, "gold": GoldPathAgent}[spec]()
        return agent, {"agent": spec}, None
    if spec == "zero-shot":
        dtype = dtype or "float32"
        resolve_dtype(dtype, resolve_device(device))
        normalization = normalization or "word"
        llm = load_llm(model, dtype=dtype, device=device)
        policy = LLMPolicy(llm, normalization=normalization, precision=precision or "fp32")
        if policy.precision == "bf16-mixed":  # nothing trains here: cast once rather than at every pass
            cast_frozen_weights(llm.model.requires_grad_(False))
        about = {"agent": "zero-shot", "model": llm.name, "model_source": llm.source, "normalization": normalization,
                 "dtype": str(llm.dtype).removeprefix("torch."), "precision": policy.precision,
                 "device": str(llm.device)}
        return policy, about, None
    trained_run(spec)
    if llm_options:
        raise InvalidArgumentError("a trained agent keeps its own model and normalization: "
                                   "drop --model/--normalization")
    if is_export(spec):
        agent, config, meta = load_export(spec, device=device, dtype=dtype, precision=precision)
        about = {"agent": str(spec), "kind": "llm", "export": meta["kind"], "run": meta.get("run"),
                 "model": meta.get("base_model"), "normalization": config.agent.llm.normalization.value,
                 "device": str(agent.device)}
        return agent, about, config
    agent, config, checkpoint = load_agent(find(spec), device=device, dtype=dtype, precision=precision)
    llm = config.agent.kind.value == "llm"
    about = {"agent": str(checkpoint), "kind": config.agent.kind.value, "model": config.model if llm else None,
             "normalization": config.agent.llm.normalization.value if llm else None, "device": str(agent.device)}
    return agent, about, config


def trained_run(spec: str) -> Path:
    """The training run folder an agent name points to (a run folder or one of its checkpoints) or
    the export it names, or a one-line error when it names neither a baseline nor a trained agent."""
    if not Path(spec).exists():
        raise InvalidArgumentError(f"no agent '{spec}': name a baseline ({', '.join(BASELINES)}), a training run "
                                   "folder or checkpoint, or an export")
    return Path(spec) if is_export(spec) else find(spec).parent.parent


def trained_settings(spec: str) -> tuple[TrainConfig, Path]:
    """A trained agent's settings, and the file that says which seeds its training episodes used
    (a checkpoint's ``meta.json``, an export's ``groundrl.json``), checked before anything loads."""
    folder = trained_run(spec)
    if is_export(folder):
        return read_export(folder)[1], folder / META
    if (folder / "config.yaml").is_file():
        read_settings(folder / "config.yaml")  # a corrupt file: one line naming it
    return load_run_config(folder), find(spec) / "meta.json"
