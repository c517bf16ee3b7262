"""Build the untrained agent an :class:`AgentConfig` names, sized for its environment."""

from __future__ import annotations

import gymnasium as gym

from groundrl.agents.config import AgentConfig, AgentKind, PolicyKind, Weights
from groundrl.agents.drrn import DRRNAgent
from groundrl.agents.llm_agent import LLMAgent
from groundrl.agents.symbolic import SymbolicAgent
from groundrl.envs.base import action_vocabulary
from groundrl.llm.loading import load_llm, reinitialize, resolve_device


def build_agent(config: AgentConfig, env: gym.Env, *, model: str | None = None, dtype: str = "float32",
                device: str = "auto", seed: int = 0, precision: str = "fp32"):
    """The untrained agent of ``config`` for ``env`` (reset here once, with ``seed``, to size the
    agent's input): an :class:`LLMAgent` (scoring or action head, pretrained or random weights, the
    model ``model``, its passes in ``precision``), a :class:`SymbolicAgent` or a :class:`DRRNAgent`.

    >>> import groundrl
    >>> agent = build_agent(AgentConfig(kind="drrn"), groundrl.make_env("groundrl/FollowInstruction-v0"), device="cpu")
    >>> type(agent).__name__
    'DRRNAgent'
    """
    if config.kind == AgentKind.drrn:
        return DRRNAgent(config.drrn, device=resolve_device(device))
    _, info = env.reset(seed=seed)
    head = config.kind == AgentKind.symbolic or config.llm.policy == PolicyKind.head
    num_actions = len(action_vocabulary(env)) if head else None
    if config.kind == AgentKind.symbolic:
        return SymbolicAgent(config.symbolic, info, num_actions, device=resolve_device(device))
    llm = load_llm(model, dtype=dtype, device=device)
    if config.llm.weights == Weights.random:
        llm = reinitialize(llm, keep_embeddings=config.llm.pretrained_embeddings, seed=seed)
    return LLMAgent(llm, config.llm, num_actions=num_actions, precision=precision)
