#!/bin/bash
# expect: nodes=1 tasks=1 cpus=1 gpus=2 mem=0 time=0 array=0 tenant=vision
#SBATCH --partition=gpu
#SBATCH --gpus-per-node=2
echo "$SLURM_JOB_ID $SLURM_PROCID"
