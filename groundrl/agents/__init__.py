"""Agents: the zero-shot LLM policy, the trainable LLM agent (actor and critic), and baselines; their
contracts as Protocols (:mod:`groundrl.agents.protocols`)."""

from groundrl.agents.baselines import BabyAIBotAgent, GoldPathAgent, RandomAgent
from groundrl.agents.config import AgentConfig
from groundrl.agents.drrn import DRRNAgent
from groundrl.agents.factory import build_agent
from groundrl.agents.llm_agent import LLMAgent, LLMPolicy
from groundrl.agents.protocols import ActorCritic, AgentOutput, Policy, QAgent, choose
from groundrl.agents.symbolic import SymbolicAgent

__all__ = ["ActorCritic", "AgentConfig", "AgentOutput", "BabyAIBotAgent", "DRRNAgent", "GoldPathAgent", "LLMAgent",
           "LLMPolicy", "Policy", "QAgent", "RandomAgent", "SymbolicAgent", "build_agent", "choose"]
