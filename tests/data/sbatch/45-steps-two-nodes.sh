#!/bin/bash
# expect: nodes=2 tasks=2 gpus=16
#SBATCH --account=research
#SBATCH -N 2 --ntasks-per-node=1 --gpus-per-node=8
srun hostname
srun -n1 false || echo "step failed: $?"
