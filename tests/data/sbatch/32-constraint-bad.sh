#!/bin/bash
# expect-error: --constraint: '[' at byte 4
#SBATCH --account=research
#SBATCH --constraint=a100[2]
echo "$SLURM_JOB_ID $SLURM_PROCID"
