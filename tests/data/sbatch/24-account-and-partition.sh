#!/bin/bash
# expect: nodes=1 tasks=1 cpus=1 gpus=0 mem=0 time=0 array=0 tenant=research
# expect-warning: --partition: ignored
#SBATCH --account=research
#SBATCH --partition=gpu
echo "$SLURM_JOB_ID $SLURM_PROCID"
