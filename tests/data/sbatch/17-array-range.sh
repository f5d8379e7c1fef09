#!/bin/bash
# expect: nodes=1 tasks=1 cpus=1 gpus=1 mem=0 time=0 array=10
#SBATCH --account=research
#SBATCH --array=0-9
#SBATCH --gres=gpu:1
echo "$SLURM_JOB_ID $SLURM_PROCID"
