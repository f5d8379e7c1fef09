#!/bin/bash
# expect: nodes=1 tasks=1 cpus=1 gpus=1 mem=0 time=0 array=0
#SBATCH --account=research
#SBATCH --gres=gpu
echo "$SLURM_JOB_ID $SLURM_PROCID"
