#!/bin/bash
# expect: nodes=2 tasks=16 gpus=16
#SBATCH --account=research
#SBATCH -N 2 --ntasks-per-node=8 --gpus-per-task=1
srun --mpi=pmix --cpu-bind=cores python3 train.py
