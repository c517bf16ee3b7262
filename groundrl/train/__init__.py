"""Training: the collector, the algorithms (PPO; Q-learning for DRRN), the trainer, its
configuration and checkpoints."""

from groundrl.train.config import PRESETS, DRRNConfig, PPOConfig, RolloutConfig, TrainConfig, load_config
from groundrl.train.trainer import Trainer, make_trainer, resume

__all__ = ["DRRNConfig", "PPOConfig", "PRESETS", "RolloutConfig", "TrainConfig", "Trainer", "load_config",
           "make_trainer", "resume"]
