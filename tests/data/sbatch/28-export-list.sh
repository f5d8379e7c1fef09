#!/bin/bash
# expect: nodes=1 tasks=1 cpus=1 gpus=0 mem=0 time=0 array=0 env=OMP_NUM_THREADS=8 env=HOME=/home/alice
#SBATCH --account=research
#SBATCH --export=ALL,OMP_NUM_THREADS=8
echo "$SLURM_JOB_ID $SLURM_PROCID"
