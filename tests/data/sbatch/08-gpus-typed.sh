#!/bin/bash
# expect: nodes=1 tasks=2 cpus=1 gpus=2 mem=0 time=0 array=0 model=A100-80GB
#SBATCH --account=research
#SBATCH --gpus=a100-80gb:2
#SBATCH --ntasks=2
echo "$SLURM_JOB_ID $SLURM_PROCID"
