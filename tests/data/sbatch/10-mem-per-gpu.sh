#!/bin/bash
# expect: nodes=2 tasks=8 cpus=1 gpus=8 mem=262144 time=0 array=0
#SBATCH --account=research
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --mem-per-gpu=32G
echo "$SLURM_JOB_ID $SLURM_PROCID"
