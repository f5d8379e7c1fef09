#!/bin/bash
# expect: nodes=1 tasks=1 cpus=1 gpus=0 mem=0 time=60 array=0 signal=10 grace=120
# expect-warning: --signal: B: sends it to the script's whole process group
#SBATCH --account=research
#SBATCH --signal=B:USR1@120
#SBATCH --time=60
echo "$SLURM_JOB_ID $SLURM_PROCID"
