"""Build the agent a training configuration names (every kind), sized for its environment."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from groundrl.train.config import TrainConfig


def build_agent(config: TrainConfig, device: str | None = None, dtype: str | None = None):
    """The untrained agent of ``config``: an :class:`LLMAgent` (scoring or action head, pretrained
    or random weights), a :class:`SymbolicAgent` or a :class:`DRRNAgent`."""
    from groundrl.agents.drrn import DRRNAgent
    from groundrl.agents.llm_agent import LLMAgent
    from groundrl.agents.symbolic import SymbolicAgent
    from groundrl.envs import make_env
    from groundrl.envs.base import action_vocabulary
    from groundrl.llm.loading import load_llm, reinitialize, resolve_device

    agent_config = config.agent
    device = device or config.device
    if agent_config.kind == "drrn":
        return DRRNAgent(agent_config, device=resolve_device(device), temperature=config.drrn.temperature)
    env = make_env(config.env, prompt=config.prompt, window=config.prompt_window, **config.env_kwargs)
    try:
        _, info = env.reset(seed=config.seed)
        needs_vocabulary = agent_config.kind == "symbolic" or agent_config.policy == "head"
        num_actions = len(action_vocabulary(env)) if needs_vocabulary else None
    finally:
        env.close()
    if agent_config.kind == "symbolic":
        return SymbolicAgent(agent_config, info, num_actions, device=resolve_device(device))
    llm = load_llm(config.model, dtype=dtype or config.dtype, device=device)
    if agent_config.weights == "random":
        llm = reinitialize(llm, keep_embeddings=agent_config.pretrained_embeddings, seed=config.seed)
    return LLMAgent(llm, agent_config, num_actions=num_actions)


BASELINES = {
    "random": "uniform over the valid actions",
    "bot": "BabyAI's planner bot (BabyAI-Text only)",
    "zero-shot": "the LLM's action scores without training (SayCan-style); --model, --normalization",
}


def evaluation_agent(spec: str | None, *, model: str | None = None, normalization: str | None = None,
                     dtype: str | None = None, device: str = "auto"):
    """The agent ``groundrl eval`` plays: a baseline by name (``random``, ``bot``, ``zero-shot``,
    the default) or a trained agent (a run folder or a checkpoint).

    Returns ``(agent, about, trained_config)``: ``about`` says what it is (saved with the results),
    ``trained_config`` is the run's :class:`TrainConfig` or None.
    """
    from groundrl.agents.baselines import BabyAIBotAgent, RandomAgent
    from groundrl.agents.llm_policy import LLMPolicy
    from groundrl.errors import InvalidArgumentError
    from groundrl.llm import load_llm
    from groundrl.llm.loading import resolve_device, resolve_dtype

    spec = spec or "zero-shot"
    llm_options = model is not None or normalization is not None
    if spec in ("random", "bot"):
        if llm_options:
            raise InvalidArgumentError(f"the {spec} agent uses no model: drop --model/--normalization")
        return (RandomAgent() if spec == "random" else BabyAIBotAgent()), {"agent": spec}, None
    if spec == "zero-shot":
        dtype = dtype or "float32"
        resolve_dtype(dtype, resolve_device(device))
        normalization = normalization or "word"
        llm = load_llm(model, dtype=dtype, device=device)
        about = {"agent": "zero-shot", "model": llm.name, "model_source": llm.source, "normalization": normalization,
                 "dtype": str(llm.dtype).removeprefix("torch."), "device": str(llm.device)}
        return LLMPolicy(llm, normalization=normalization), about, None
    from groundrl.train.checkpoint import find, load_agent

    trained_run(spec)
    if llm_options:
        raise InvalidArgumentError("a trained agent keeps its own model and normalization: drop --model/--normalization")
    checkpoint = find(spec)
    agent, config, checkpoint = load_agent(checkpoint, device=device, dtype=dtype)
    about = {"agent": str(checkpoint), "kind": config.agent.kind, "model": config.model if config.agent.kind == "llm" else None,
             "normalization": config.agent.normalization if config.agent.kind == "llm" else None,
             "device": str(agent.device)}
    return agent, about, config


def trained_run(spec: str):
    """The training run folder an agent name points to (a run folder or one of its checkpoints), or
    a one-line error when it names neither a baseline nor a run."""
    from pathlib import Path

    from groundrl.errors import InvalidArgumentError
    from groundrl.train.checkpoint import find

    if not Path(spec).exists():
        raise InvalidArgumentError(f"no agent '{spec}': name a baseline ({', '.join(BASELINES)}) or a training run "
                                   "folder or checkpoint")
    return find(spec).parent.parent
