"""Training: rollouts, PPO, the trainer, its configuration and checkpoints."""

from groundrl.train.config import PRESETS, PPOConfig, TrainConfig, load_config
from groundrl.train.trainer import Trainer, resume

__all__ = ["PPOConfig", "PRESETS", "TrainConfig", "Trainer", "load_config", "resume"]
