"""A training run's settings: one dataclass tree by section, presets for GLAM and TWOSOME, overrides
from YAML files and ``key=value`` pairs (OmegaConf), validated before anything loads.

>>> config = load_config("twosome", overrides=["ppo.policy_lr=1e-4", "agent.llm.critic=shared"])
>>> config.ppo.policy_lr, config.agent.llm.critic.value, config.rollout.num_envs
(0.0001, 'shared', 4)

Keys of groundrl 0.1 (``ppo.num_envs``, ``agent.actor``, ``ppo.lr``, ...) are still accepted, with
a one-line deprecation warning naming the new key (:data:`RENAMED`).
"""

from groundrl.train.config.checks import check_runnable, check_split
from groundrl.train.config.loading import (
    DeprecatedSettingWarning,
    config_of,
    key_values,
    load_config,
    load_config_file,
    load_run_config,
    to_yaml,
)
from groundrl.train.config.presets import PRESETS, RENAMED
from groundrl.train.config.schema import TrainConfig
from groundrl.train.config.sections import (
    LOG_BACKENDS,
    AlgorithmKind,
    Backend,
    DistributedConfig,
    DRRNConfig,
    ExplorationConfig,
    GroupConfig,
    LoggingConfig,
    Phases,
    PPOConfig,
    RolloutConfig,
    SelfImitationConfig,
)

__all__ = ["LOG_BACKENDS", "PRESETS", "RENAMED", "AlgorithmKind", "Backend", "DRRNConfig", "DeprecatedSettingWarning",
           "DistributedConfig", "ExplorationConfig", "GroupConfig", "LoggingConfig", "PPOConfig", "Phases",
           "RolloutConfig", "SelfImitationConfig", "TrainConfig", "check_runnable", "check_split", "config_of",
           "key_values", "load_config", "load_config_file", "load_run_config", "to_yaml"]
