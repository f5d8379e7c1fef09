#!/bin/bash
# expect: nodes=1 tasks=4 cpus=1 gpus=4 mem=0 time=0 array=0
#SBATCH --account=research
#SBATCH --nodes=1
#SBATCH --ntasks=4
#SBATCH --gres=gpu:4
echo "$SLURM_JOB_ID $SLURM_PROCID"
