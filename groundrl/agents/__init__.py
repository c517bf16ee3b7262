"""Agents: the LLM policy, and baselines that need no training (critics and learned baselines later)."""

from groundrl.agents.baselines import BabyAIBotAgent, RandomAgent
from groundrl.agents.llm_policy import LLMPolicy

__all__ = ["BabyAIBotAgent", "LLMPolicy", "RandomAgent"]
