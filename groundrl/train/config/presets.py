"""The named starting points of a run's settings (GLAM's, TWOSOME's, the baselines') and the keys
earlier groundrl versions used, with the keys that replace them."""

from __future__ import annotations

_GLAM_PPO = {"gamma": 0.99, "gae_lambda": 0.99, "update_epochs": 4, "phases": "joint", "policy_lr": 1e-6,
             "value_lr": 1e-6, "lr_decay": False, "minibatch_size": 64, "micro_batch_size": 16, "target_kl": None,
             "normalize_advantages": False}
_GLAM_ROLLOUT = {"num_envs": 32, "num_steps": 40, "total_decisions": 1_500_000, "reward_scale": 20.0}

# what the papers did not have: the environment's own prompt, no exploration but sampling the policy
_AS_PUBLISHED = {"prompt": "auto", "explore": {"novelty": 0.0, "novelty_end": None}}

PRESETS: dict[str, dict] = {
    # groundrl's: TWOSOME's design (LoRA actor, critic on the frozen model, word normalization, 4 envs
    # x 32 steps, a value and a policy phase, approx-KL stop at 0.02) with what makes the embedded
    # 135M model learn from its weak prior: learning rates that move it (constant), the valid actions
    # listed in the prompt, a novelty bonus (benchmarks/exploration.py)
    "default": {},
    # TWOSOME, VirtualHome settings (LLaMA-7B), as published: value phase 4 x 32 at 5e-5, policy phase
    # minibatches of 4 with 8-step accumulation at 1e-6 (decayed linearly), the tasks' own prompts.
    "twosome": {**_AS_PUBLISHED, "ppo": {"policy_lr": 1e-6, "value_lr": 5e-5, "lr_decay": True}},
    # TWOSOME, Overcooked settings: lower learning rates, gamma 0.99 per primitive step (SMDP).
    "twosome-overcooked": {**_AS_PUBLISHED,
                           "ppo": {"policy_lr": 5e-7, "value_lr": 1e-5, "gamma": 0.99, "lr_decay": True},
                           "rollout": {"total_decisions": 500_000}},
    # GLAM (Flan-T5 780M): whole model fine-tuned with a value head on the shared trunk, one joint
    # loss; 32 envs x 40 steps, 4 epochs of minibatches of 64, reward x20, no advantage normalization.
    "glam": {
        **_AS_PUBLISHED,
        "env": "groundrl/BabyAI-MixedTrainLocal-v0",
        "agent": {"llm": {"actor": "full", "critic": "shared", "normalization": "sum"}},
        "rollout": _GLAM_ROLLOUT, "ppo": _GLAM_PPO,
    },
    # The critic-free group methods on groundrl's defaults (LoRA actor, word normalization, the
    # learning rates, the valid actions in the prompt): groups of 4 environments from one seed; the
    # advantages need no normalizing again, and the KL to the untrained policy (free with LoRA: the
    # adapters off) keeps the policy near it, as GRPO's and GiGPO's KL terms do (verl-agent: 0.01).
    "grpo": {"algorithm": "grpo", "rollout": {"group_size": 4}, "explore": {"novelty": 0.0, "novelty_end": None},
             "ppo": {"normalize_advantages": False, "kl_coef": 0.01}},
    "gigpo": {"algorithm": "gigpo", "rollout": {"group_size": 4}, "explore": {"novelty": 0.0, "novelty_end": None},
              "ppo": {"normalize_advantages": False, "kl_coef": 0.01}},
    # The baselines. PPO from scratch on the symbolic observation (CleanRL's defaults for a small
    # network: 2.5e-4, 4 epochs; one optimizer, advantages normalized, masked to the valid actions).
    "symbolic-ppo": {
        **_AS_PUBLISHED,
        "agent": {"kind": "symbolic"},
        "rollout": {"num_envs": 16, "num_steps": 32, "total_decisions": 200_000},
        "ppo": {"gamma": 0.99, "phases": "joint", "policy_lr": 2.5e-4, "value_lr": 2.5e-4, "lr_decay": True,
                "update_epochs": 4, "minibatch_size": 128, "value_minibatch_size": 128, "micro_batch_size": 128,
                "target_kl": None, "normalize_advantages": True},
    },
    # GLAM's DRRN: Q-learning from replay, Boltzmann exploration, GLAM's reward x20.
    "drrn": {
        **_AS_PUBLISHED,
        "env": "groundrl/BabyAI-MixedTrainLocal-v0",
        "agent": {"kind": "drrn"},
        "rollout": {"num_envs": 16, "num_steps": 32, "total_decisions": 200_000, "reward_scale": 20.0},
    },
    # GLAM's NPAE: the model's architecture with random weights (pretrained input embeddings kept),
    # an action head instead of scoring, trained as GLAM trains its LLM.
    "npae": {
        **_AS_PUBLISHED,
        "env": "groundrl/BabyAI-MixedTrainLocal-v0",
        "agent": {"llm": {"actor": "full", "critic": "shared", "policy": "head", "weights": "random",
                          "pretrained_embeddings": True}},
        "rollout": _GLAM_ROLLOUT, "ppo": _GLAM_PPO,
    },
}
"""Named starting points; a config file and ``key=value`` overrides go on top."""

RENAMED = {
    **{f"ppo.{key}": f"rollout.{key}" for key in ("num_envs", "num_steps", "total_decisions", "reward_scale")},
    **{f"agent.{key}": f"agent.llm.{key}" for key in (
        "normalization", "separator", "policy", "weights", "pretrained_embeddings", "actor", "lora_r", "lora_alpha",
        "lora_dropout", "lora_targets", "critic", "critic_hidden", "head_hidden", "gradient_checkpointing")},
    "agent.network": "agent.symbolic.network", "agent.hidden": "agent.symbolic.hidden",
    "agent.embedding_dim": "agent.drrn.embedding_dim", "agent.hidden_dim": "agent.drrn.hidden_dim",
    # the hashed-word vocabulary was shared by the symbolic and DRRN agents
    "agent.word_buckets": ("agent.symbolic.word_buckets", "agent.drrn.word_buckets"),
    "drrn.temperature": "agent.drrn.temperature",
}
"""Keys of groundrl 0.1 -> the keys that replace them. And ``ppo.lr``, the joint optimizer's rate
then, sets both ``ppo.policy_lr`` and ``ppo.value_lr`` where the phases are joint (it was unused
in separate phases, and is dropped there)."""
