#!/bin/bash
# expect: nodes=1 tasks=4 cpus=8 gpus=0 mem=65536 time=0 array=0
#SBATCH --account=research
#SBATCH --ntasks=4
#SBATCH --cpus-per-task=8
#SBATCH --mem-per-cpu=2G
echo "$SLURM_JOB_ID $SLURM_PROCID"
