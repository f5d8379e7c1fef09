#!/bin/bash
# expect: nodes=1 tasks=1 cpus=1 gpus=8 mem=0 time=0 array=0 model=H100-80GB
#SBATCH --account=research
#SBATCH --nodes=1
#SBATCH --gres=gpu:h100:8
echo "$SLURM_JOB_ID $SLURM_PROCID"
