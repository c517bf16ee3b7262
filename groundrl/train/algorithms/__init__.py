"""The learning algorithms, siblings behind one small interface (:class:`Algorithm`): each collects
experience with the :class:`~groundrl.train.collector.Collector` and updates the agent from it."""

from groundrl.train.algorithms.base import Algorithm, AlgorithmContext
from groundrl.train.algorithms.drrn import DRRN, ReplayMemory
from groundrl.train.algorithms.group import GroupPolicyOptimization
from groundrl.train.algorithms.ppo import PPO

__all__ = ["DRRN", "PPO", "Algorithm", "AlgorithmContext", "GroupPolicyOptimization", "ReplayMemory"]
