#!/bin/bash
# expect: nodes=1 tasks=4 cpus=1 gpus=0 mem=0 time=0 array=0
#SBATCH --account=research
#SBATCH --ntasks=4
echo "$SLURM_JOB_ID $SLURM_PROCID"
