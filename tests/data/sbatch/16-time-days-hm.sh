#!/bin/bash
# expect: nodes=1 tasks=1 cpus=1 gpus=0 mem=0 time=1470 array=0
#SBATCH --account=research
#SBATCH -t 1-0:30
echo "$SLURM_JOB_ID $SLURM_PROCID"
