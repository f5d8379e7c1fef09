#!/bin/bash
# expect: nodes=1 tasks=8 cpus=4 gpus=8 mem=0 time=0 array=0
#SBATCH --account=research
#SBATCH --ntasks=8
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=4
echo "$SLURM_JOB_ID $SLURM_PROCID"
