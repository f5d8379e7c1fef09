#!/bin/bash
# expect: nodes=1 tasks=1 cpus=1 gpus=0 mem=0 time=0 array=0 tier=guaranteed
#SBATCH --account=research
#SBATCH --qos=normal
echo "$SLURM_JOB_ID $SLURM_PROCID"
