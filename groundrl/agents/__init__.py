"""Agents: the LLM policy (and, later, critics and baselines)."""

from groundrl.agents.llm_policy import LLMPolicy

__all__ = ["LLMPolicy"]
