#!/bin/bash
# expect: nodes=2 tasks=4 cpus=2 gpus=4 mem=0 time=30 array=0
# expect-warning: --partition: ignored
#SBATCH -J shorty
#SBATCH -A research
#SBATCH -p gpu
#SBATCH -N 2
#SBATCH -n 4
#SBATCH -c 2
#SBATCH -t 30
#SBATCH -G 4
#SBATCH -o short-%j.out
#SBATCH -e short-%j.err
echo "$SLURM_JOB_ID $SLURM_PROCID"
