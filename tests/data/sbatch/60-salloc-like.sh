#!/bin/bash
# expect: nodes=2 tasks=2 gpus=16
# steps-run: both
#SBATCH --account=research
#SBATCH -N 2 --gpus-per-node=8 --time=1:00:00
srun --overlap -N 2 sleep 1
