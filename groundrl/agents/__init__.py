"""Agents: the zero-shot LLM policy, the trainable LLM agent (actor and critic), and baselines."""

from groundrl.agents.baselines import BabyAIBotAgent, RandomAgent
from groundrl.agents.llm_agent import AgentConfig, LLMAgent
from groundrl.agents.llm_policy import LLMPolicy

__all__ = ["AgentConfig", "BabyAIBotAgent", "LLMAgent", "LLMPolicy", "RandomAgent"]
