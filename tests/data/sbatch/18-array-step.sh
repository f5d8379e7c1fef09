#!/bin/bash
# expect: nodes=1 tasks=1 cpus=1 gpus=0 mem=0 time=0 array=7 list=1-19:3
#SBATCH --account=research
#SBATCH --array=1-20:3
echo "$SLURM_JOB_ID $SLURM_PROCID"
