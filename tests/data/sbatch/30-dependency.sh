#!/bin/bash
# expect-error: --dependency: not supported yet
#SBATCH --account=research
#SBATCH --dependency=afterok:123:124,afterany:125
echo "$SLURM_JOB_ID $SLURM_PROCID"
