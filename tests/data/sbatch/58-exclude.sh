#!/bin/bash
# expect: nodes=1 tasks=1 gpus=2
#SBATCH --account=research
#SBATCH -N 1 --gpus=2 --exclude=node002
srun hostname
