#!/bin/bash
# expect: nodes=3 tasks=6 cpus=1 gpus=0 mem=0 time=45 array=0
#SBATCH --account=research
#SBATCH --nodes=3
#SBATCH --ntasks-per-node=2
#SBATCH --time=0:45:00
echo "$SLURM_JOB_ID $SLURM_PROCID"
