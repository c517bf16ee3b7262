"""The learning algorithms, siblings behind one small interface (:class:`Algorithm`): each collects
experience with the :class:`~groundrl.train.collector.Collector` and updates the agent from it. PPO
and the group methods share one policy-optimization core (:mod:`groundrl.train.algorithms.policy`)."""

from groundrl.train.algorithms.base import Algorithm, AlgorithmContext, TrainState
from groundrl.train.algorithms.drrn import DRRN, ReplayMemory
from groundrl.train.algorithms.group import GroupPolicyOptimization
from groundrl.train.algorithms.policy import Experience, PolicyOptimization
from groundrl.train.algorithms.ppo import PPO

__all__ = ["DRRN", "PPO", "Algorithm", "AlgorithmContext", "Experience", "GroupPolicyOptimization",
           "PolicyOptimization", "ReplayMemory", "TrainState"]
