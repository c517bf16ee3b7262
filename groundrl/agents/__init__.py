"""Agents: the zero-shot LLM policy, the trainable LLM agent (actor and critic), and baselines."""

from groundrl.agents.baselines import BabyAIBotAgent, RandomAgent
from groundrl.agents.config import AgentConfig
from groundrl.agents.drrn import DRRNAgent
from groundrl.agents.factory import build_agent
from groundrl.agents.llm_agent import LLMAgent
from groundrl.agents.llm_policy import LLMPolicy
from groundrl.agents.symbolic import SymbolicAgent

__all__ = ["AgentConfig", "BabyAIBotAgent", "DRRNAgent", "LLMAgent", "LLMPolicy", "RandomAgent", "SymbolicAgent",
           "build_agent"]
