#!/bin/bash
# expect: nodes=1 tasks=1 cpus=1 gpus=0 mem=0 time=0 array=0
# expect-command: exec >>"logs/${SLURM_JOB_NAME}-${SLURM_JOB_ID}.out"
#SBATCH --account=research
#SBATCH --output=logs/%x-%j.out
#SBATCH --error=logs/%x-%j.err
echo "$SLURM_JOB_ID $SLURM_PROCID"
