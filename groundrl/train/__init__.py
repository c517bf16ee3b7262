"""Training: rollouts, PPO, distributed."""
