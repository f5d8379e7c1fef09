#!/bin/bash
# expect: nodes=1 tasks=1 cpus=1 gpus=1 mem=0 time=0 array=0 tier=opportunistic
#SBATCH --account=research
#SBATCH --qos=opportunistic
#SBATCH --gpus=1
echo "$SLURM_JOB_ID $SLURM_PROCID"
