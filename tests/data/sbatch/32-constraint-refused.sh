#!/bin/bash
# expect-error: --constraint: not supported
#SBATCH --account=research
#SBATCH --constraint=a100
echo "$SLURM_JOB_ID $SLURM_PROCID"
