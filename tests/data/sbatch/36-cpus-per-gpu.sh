#!/bin/bash
# expect: nodes=1 tasks=4 cpus=8 gpus=4 mem=0 time=0 array=0
#SBATCH --account=research
#SBATCH --ntasks=4
#SBATCH --gpus=4
#SBATCH --cpus-per-gpu=8
echo "$SLURM_JOB_ID $SLURM_PROCID"
