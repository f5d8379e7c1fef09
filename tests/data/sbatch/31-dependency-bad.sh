#!/bin/bash
# expect-error: --dependency: unknown type
#SBATCH --account=research
#SBATCH -d afterfoo:12
echo "$SLURM_JOB_ID $SLURM_PROCID"
