#!/bin/bash
# expect: nodes=2 tasks=8 cpus=6 gpus=16 mem=131072 time=1590 array=0 memtask=16384
#SBATCH --job-name=basic
#SBATCH --account=research
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=6
#SBATCH --mem=64G
#SBATCH --time=1-02:30:00
echo "rank $SLURM_PROCID of $SLURM_NTASKS"
