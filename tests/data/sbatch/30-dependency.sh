#!/bin/bash
# expect: nodes=1 tasks=1 cpus=1 gpus=0 mem=0 time=0 array=0 dep=afterok:123:124,afterany:125
#SBATCH --account=research
#SBATCH --dependency=afterok:123:124,afterany:125
echo "$SLURM_JOB_ID $SLURM_PROCID"
