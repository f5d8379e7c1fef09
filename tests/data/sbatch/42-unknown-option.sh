#!/bin/bash
# expect-error: --gpus-per-nod: unknown option
#SBATCH --account=research
#SBATCH --gpus-per-nod=8
echo "$SLURM_JOB_ID $SLURM_PROCID"
