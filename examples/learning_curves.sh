#!/usr/bin/env bash
# The learning curves of docs/learning_curves.png: the two trainable baselines in FollowInstruction,
# three seeds each (about 3 minutes on two CPU cores), plotted with their mean and seed band.
#   bash examples/learning_curves.sh [RUNS_DIR]
set -euo pipefail
runs=${1:-runs/curves}
common=(env=groundrl/FollowInstruction-v0 rollout.num_envs=8 rollout.num_steps=16 rollout.total_decisions=8192
        checkpoint_every=1000 progress=false "runs_dir=$runs")
# symbolic PPO: minibatches of 32, a learning rate for this small task (the preset's is CleanRL's 2.5e-4)
symbolic=(ppo.minibatch_size=32 ppo.value_minibatch_size=32 ppo.micro_batch_size=32 ppo.policy_lr=3e-3 ppo.value_lr=3e-3)
for seed in 1 2 3; do
    groundrl train --preset symbolic-ppo "${common[@]}" "${symbolic[@]}" seed=$seed
    groundrl train --preset drrn "${common[@]}" seed=$seed
done
groundrl plot "$runs"/*-train-* --smooth 0.6 --out docs/learning_curves.png
