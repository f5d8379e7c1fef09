#!/bin/bash
# expect: nodes=2 tasks=2 cpus=1 gpus=16 mem=0 time=20 array=0
# args: -N 2 --time=20
#SBATCH --account=research
#SBATCH --nodes=4
#SBATCH --gpus-per-node=8
#SBATCH --time=10
echo "$SLURM_JOB_ID $SLURM_PROCID"
