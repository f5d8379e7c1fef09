#!/bin/bash
# expect: nodes=1 tasks=1 cpus=1 gpus=0 mem=0 time=0 array=6 list=1-7:2,8,9
#SBATCH --account=research
#SBATCH --array=1,3,5,7-9
echo "$SLURM_JOB_ID $SLURM_PROCID"
