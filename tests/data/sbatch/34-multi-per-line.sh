#!/bin/bash
# expect: nodes=2 tasks=16 cpus=1 gpus=16 mem=0 time=0 array=0
#SBATCH -A research -N 2 -n 16   --gpus-per-node=8 # eight ranks a node
echo "$SLURM_JOB_ID $SLURM_PROCID"
