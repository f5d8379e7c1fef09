#!/bin/bash
# expect: nodes=1 tasks=1 cpus=1 gpus=0 mem=0 time=0 array=0 name=quoted-name
# expect-warning: --comment: ignored
#SBATCH --account=research
#SBATCH --job-name="quoted-name" --comment 'two words'
echo "$SLURM_JOB_ID $SLURM_PROCID"
