#!/bin/bash
# expect: nodes=2 tasks=4 cpus=1 gpus=0 mem=20480 time=0 array=0 memtask=5120
#SBATCH --account=research
#SBATCH -N 2
#SBATCH -n 4
#SBATCH --mem=10G
echo "$SLURM_JOB_ID $SLURM_PROCID"
