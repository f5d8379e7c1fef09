#!/bin/bash
# expect: nodes=1 tasks=1 cpus=1 gpus=0 mem=0 time=0 array=100 throttle=10
#SBATCH --account=research
#SBATCH -a 0-99%10
echo "$SLURM_JOB_ID $SLURM_PROCID"
