#!/bin/bash
# expect-error: --gpus: 6 GPUs over 4 tasks
#SBATCH --account=research
#SBATCH --ntasks=4
#SBATCH --gpus=6
echo "$SLURM_JOB_ID $SLURM_PROCID"
